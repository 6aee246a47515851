"""Every chapter is a notebook (literate/site/chapter_notebooks.py), and every notebook runs.

* The conversion, on a small page, cell by cell; on the real chapters: the code cells are
  exactly what pytest runs, the prose is all there with its boxes readable, every link
  points at the site, the bytes are the same at every run.
* A download works anywhere: without a site_url its relative links are plain text, with
  one absolute; its figures are embedded (cell attachments), never paths.
* The notebook pages' downloads: only their links change, and those resolve.
* The built site (when `site/` is fresh, as `make test` leaves it): every chapter page
  links its notebook with a download button, and the file is there.
* Each chapter notebook runs top to bottom with nbclient, in a fresh kernel of this
  venv's Python, with one intra-op thread as the tests use; every cell runs (its asserts
  pass), and what each cell prints is what the page's block printed at the build. The
  kernels are forked from one process that has imported torch and transformers (and
  nothing of `literate`; literate/site/warm_kernels.py), two at a time. The time of each
  notebook is printed (`pytest -s`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import posixpath
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from literate.figures import FIGURES
from literate.site.chapter_notebooks import (
    NOTEBOOK_DIR,
    chapter_notebook,
    chapter_pages,
    code_cells,
    default_page_urls,
    markdown_links,
    notebook_pages,
    write_notebooks,
)
from literate.site.docblocks import (
    ROOT,
    SnippetExpander,
    iter_claims,
    mkdocs_config,
    nav_order,
)
from literate.tools.export import ERAS

NAV = nav_order(mkdocs_config()["nav"])
CHAPTERS = chapter_pages(NAV)
NOTEBOOK_PAGES = notebook_pages(NAV)
URLS = default_page_urls(NAV)
SITE = "https://example.org/blocks/"
BUILT_SITE = ROOT / "site"
KERNEL_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}  # as conftest.py's one thread
JOBS = 2  # kernels at a time


def cells(nb: dict, kind: str) -> list[str]:
    return [c["source"] for c in nb["cells"] if c["cell_type"] == kind]


def load(path: Path) -> dict:
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:  # nbformat's files split the source into lines
        cell["source"] = "".join(cell["source"])
    return nb


@pytest.fixture(scope="module")
def relative(tmp_path_factory) -> dict[str, Path]:
    """Every download, written without a site_url: file name -> path."""
    out = tmp_path_factory.mktemp("relative")
    return {
        d.path.name: d.path for d in write_notebooks(NAV, out_dir=out, site_name="S")
    }


@pytest.fixture(scope="module")
def absolute(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("absolute")
    return {
        d.path.name: d.path
        for d in write_notebooks(NAV, site_url=SITE, out_dir=out, site_name="S")
    }


def name_of(page: str) -> str:
    from literate.site.chapter_notebooks import front_matter, notebook_name

    meta, _ = front_matter((ROOT / "docs" / page).read_text(encoding="utf-8"))
    return notebook_name(page, meta.get("chapter")) + ".ipynb"


# ---------------------------------------------------------------------------------------
# The conversion on a small page

SMALL_PAGE = """---
chapter: 3
---

# 3. A page

Text with [a link](other.md#sec), [home](../index.md), an [anchor](#here), a
[wrapped
link](../downloads/x.py) and `[not](a-link.md)` in code.

![](../figures/attention-masks-light.svg#only-light){ .figure }
![](../figures/attention-masks-dark.svg#only-dark){ .figure }

```python title="literate/x.py"
--8<-- "snip.py:part"
```

<!-- claim: demo.one -->
One is one,
always.

??? proof "Proof"
    Because:

    ```python
    assert 1 == 1
    ```

## Exercises

??? exercise "Exercise 1: two"
    Make two.

    ??? success "Solution"
        ```python
        two = 1 + 1
        ```

        It is [two](https://example.org/two).

=== "Tab A"

    In tab A.

<!-- skip: next -->
```python
raise SystemExit
```

??? note
    Plain.
"""

SMALL_CELLS = [
    (
        "markdown",
        "*This notebook is chapter 3 of S, made from its page: ",
    ),
    (
        "markdown",
        "# 3. A page\n\nText with a link, home, an anchor, a\nwrapped\nlink and "
        "`[not](a-link.md)` in code.\n\n"
        f"![{FIGURES['attention-masks'].alt}](attachment:attention-masks-light.svg)\n\n"
        "*From `literate/x.py`:*",
    ),
    ("code", "x = 1"),
    (
        "markdown",
        "**Claim `demo.one`:**\nOne is one,\nalways.\n\n**Proof**\n\nBecause:",
    ),
    ("code", "assert 1 == 1"),
    ("markdown", "## Exercises\n\n**Exercise 1: two**\n\nMake two.\n\n**Solution**"),
    ("code", "two = 1 + 1"),
    (
        "markdown",
        "It is [two](https://example.org/two).\n\n**Tab A**\n\nIn tab A.\n\n"
        "```python\nraise SystemExit\n```\n\n**Note**\n\nPlain.",
    ),
]


def small_page(tmp_path: Path) -> tuple[Path, SnippetExpander, dict[str, str]]:
    docs = tmp_path / "docs"
    (docs / "part").mkdir(parents=True)
    (docs / "part" / "page.md").write_text(SMALL_PAGE, encoding="utf-8")
    (tmp_path / "snip.py").write_text(
        "# --8<-- [start:part]\nx = 1\n# --8<-- [end:part]\n", encoding="utf-8"
    )
    expander = SnippetExpander({"base_path": [str(tmp_path)], "check_paths": True})
    return (
        docs,
        expander,
        default_page_urls(["index.md", "part/page.md", "part/other.md"]),
    )


SVG = b'<svg xmlns="http://www.w3.org/2000/svg"/>'


def test_a_small_page_becomes_these_cells(tmp_path):
    docs, expander, urls = small_page(tmp_path)
    nb = chapter_notebook(
        "part/page.md",
        page_urls=urls,
        docs_dir=docs,
        expander=expander,
        site_name="S",
        figure_svg={"attention-masks-light.svg": SVG}.__getitem__,
    )
    got = [(c["cell_type"], c["source"]) for c in nb["cells"]]
    assert got[0][0] == "markdown" and got[0][1].startswith(SMALL_CELLS[0][1])
    assert got[1:] == SMALL_CELLS[1:]
    # the figure is in the notebook, as Jupyter keeps a pasted image
    assert nb["cells"][1]["attachments"] == {
        "attention-masks-light.svg": {
            "image/svg+xml": base64.b64encode(SVG).decode("ascii")
        }
    }
    assert [c for c in nb["cells"] if "attachments" in c] == [nb["cells"][1]]
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    assert nb["metadata"]["literate"] == {"chapter": 3, "page": "part/page.md"}
    assert len({c["id"] for c in nb["cells"]}) == len(nb["cells"])


def test_with_a_site_url_the_links_are_absolute(tmp_path):
    docs, expander, urls = small_page(tmp_path)
    nb = chapter_notebook(
        "part/page.md",
        page_urls=urls,
        site_url="https://h.example/sub",
        docs_dir=docs,
        expander=expander,
        figure_svg=lambda name: SVG,
    )
    links = [t for source in cells(nb, "markdown") for t in markdown_links(source)]
    assert links == [
        "https://h.example/sub/part/page/",
        "https://h.example/sub/part/other/#sec",
        "https://h.example/sub/",
        "https://h.example/sub/part/page/#here",
        "https://h.example/sub/downloads/x.py",
        "attachment:attention-masks-light.svg",  # embedded all the same
        "https://example.org/two",
    ]
    from literate.site.wheel import wheel_name

    # the first cell says how to install the package: the wheel the site serves
    assert (
        f"`pip install https://h.example/sub/downloads/{wheel_name()}`"
        in cells(nb, "markdown")[0]
    )


def test_a_link_to_a_page_outside_the_nav_is_an_error(tmp_path):
    docs, expander, urls = small_page(tmp_path)
    del urls["part/other.md"]
    with pytest.raises(
        ValueError, match=r"part/page.md: link 'other.md#sec': no page 'part/other.md'"
    ):
        chapter_notebook(
            "part/page.md",
            page_urls=urls,
            docs_dir=docs,
            expander=expander,
            figure_svg=lambda name: SVG,
        )


# ---------------------------------------------------------------------------------------
# The chapters


def test_the_chapters_are_the_quick_path_and_eleven_numbered_pages_in_order(relative):
    numbers = [
        json.loads(relative[name_of(p)].read_text())["metadata"]["literate"]["chapter"]
        for p in CHAPTERS
    ]
    assert numbers == list(range(0, 12))  # 0: the quick path
    assert sorted(name for name in relative if name.endswith(".ipynb"))[:12] == sorted(
        name_of(p) for p in CHAPTERS
    )
    assert NOTEBOOK_PAGES == [
        "notebooks/attention_playground.py",
        "notebooks/seq2seq_reverse.py",
        "notebooks/moe_balance.py",
    ]


@pytest.mark.parametrize("page", CHAPTERS)
def test_the_code_cells_are_exactly_what_pytest_runs(relative, page):
    nb = load(relative[name_of(page)])
    expected = [source.rstrip("\n") for source in code_cells(page)]
    assert cells(nb, "code") == expected
    assert not any("--8<--" in source for source in cells(nb, "code"))
    assert all(
        c["outputs"] == [] and c["execution_count"] is None
        for c in nb["cells"]
        if c["cell_type"] == "code"
    )


_MARKER = re.compile(r"^[ \t]*(?:!!!|\?\?\?\+?|===)[ \t]", re.M)
_FENCE = re.compile(r"^[ \t]*(```|~~~)", re.M)


def _prose_lines(text: str) -> list[str]:
    """The page's prose lines that the notebook must keep word for word: outside fences,
    not a box marker, comment, figure or heading, holding no link."""
    lines, fenced = [], False
    for line in text.split("---\n", 2)[-1].split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        stripped = line.strip()
        if (
            fenced
            or not stripped
            or _MARKER.match(line)
            or stripped.startswith(("<!--", "!["))
        ):
            continue
        if "](" in line or "[" in line:
            continue
        lines.append(stripped)
    return lines


@pytest.mark.parametrize("page", CHAPTERS)
def test_the_prose_is_all_there_and_every_box_reads_as_text(relative, page):
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    markdown = "\n\n".join(cells(load(relative[name_of(page)]), "markdown"))
    kept = {line.removeprefix("> ").strip() for line in markdown.split("\n")}
    missing = [line for line in _prose_lines(text) if line not in kept]
    assert missing == [], f"{page}: prose lines not in the notebook: {missing[:5]}"
    assert not _MARKER.search(markdown), _MARKER.search(markdown)
    for claim in iter_claims(text):
        assert f"**Claim `{claim.id}`:**" in markdown, claim.id
    for kind, title in re.findall(
        r'^[ \t]*\?\?\?\+? (exercise|success) "([^"]*)"', text, re.M
    ):
        assert markdown.count(f"**{title}**") >= 1, title
    assert markdown.count("**Solution**") == text.count('??? success "Solution"')
    assert markdown.count("**Exercise ") == len(
        re.findall(r"^\?\?\? exercise ", text, re.M)
    )
    assert "#only-dark" not in markdown and "#only-light" not in markdown
    assert "{ .figure }" not in markdown


def _site_path(link: str, served_at: str = NOTEBOOK_DIR + "/") -> str:
    """The site path a relative link of a downloaded notebook resolves to."""
    path, _, fragment = link.partition("#")
    resolved = posixpath.normpath(posixpath.join(served_at, path))
    if path.endswith("/") or path in ("", "."):
        resolved = "" if resolved == "." else resolved + "/"
    return resolved + (f"#{fragment}" if fragment else "")


SITE_FILES = (
    {url for url in URLS.values()}
    | {f"figures/{name}-light.svg" for name in FIGURES}
    | {f"downloads/{era}.py" for era in ERAS}
)


@pytest.mark.parametrize("page", CHAPTERS)
def test_every_link_points_at_the_site_and_every_figure_is_embedded(
    relative, absolute, page
):
    """Without a site_url a download has no relative link (plain text instead: it would
    resolve only on the site); with one, every link of the page is absolute and
    resolves. Figures are attachments in both, each a whole SVG."""
    name = name_of(page)
    near_nb, far_nb = load(relative[name]), load(absolute[name])
    near = [t for s in cells(near_nb, "markdown") for t in markdown_links(s)]
    far = [t for s in cells(far_nb, "markdown") for t in markdown_links(s)]
    assert far, page
    for a in near:
        assert a.startswith(("http://", "https://", "attachment:")), f"{page}: {a}"
        assert not a.startswith(SITE), a
    assert [a for a in near if not a.startswith("attachment:")] == [
        b
        for b in far
        if b.startswith(("http://", "https://")) and not b.startswith(SITE)
    ]
    for b in far:
        if b.startswith("attachment:") or not b.startswith(SITE):
            continue
        path = b.removeprefix(SITE)
        assert path.split("#")[0] in SITE_FILES, f"{page}: {b}"
    shown = {a.removeprefix("attachment:") for a in near if a.startswith("attachment:")}
    assert shown == {
        b.removeprefix("attachment:") for b in far if b.startswith("attachment:")
    }
    assert bool(shown) == ("![" in (ROOT / "docs" / page).read_text())
    for nb in (near_nb, far_nb):
        for cell in nb["cells"]:
            for file, bundle in cell.get("attachments", {}).items():
                assert f"](attachment:{file}" in cell["source"]
                assert f"figures/{file}" in SITE_FILES, file
                data = bundle["image/svg+xml"]  # nbformat's files split it in lines
                svg = base64.b64decode(
                    "".join(data) if isinstance(data, list) else data
                )
                assert svg.lstrip().startswith(b"<?xml") and svg.rstrip().endswith(
                    b"</svg>"
                ), file
    prose = "\n".join(cells(near_nb, "markdown"))
    assert "../figures/" not in prose and "](../" not in prose


def test_the_same_inputs_give_the_same_bytes(relative, tmp_path):
    again = {
        d.path.name: d.path
        for d in write_notebooks(NAV, out_dir=tmp_path, site_name="S")
    }
    assert sorted(again) == sorted(relative)
    for name, path in relative.items():
        assert again[name].read_bytes() == path.read_bytes(), name
    text = relative[name_of(CHAPTERS[0])].read_text(encoding="utf-8")
    assert (
        text
        == json.dumps(json.loads(text), sort_keys=True, indent=1, ensure_ascii=False)
        + "\n"
    )
    assert not re.search(r"20\d\d-\d\d-\d\d", text)  # no dates
    before = {name: path.stat().st_mtime_ns for name, path in again.items()}
    write_notebooks(NAV, out_dir=tmp_path, site_name="S")  # unchanged: not rewritten
    assert {name: path.stat().st_mtime_ns for name, path in again.items()} == before


# ---------------------------------------------------------------------------------------
# The notebook pages' downloads


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_a_notebook_page_download_changes_only_its_links_and_they_resolve(
    relative, absolute, page
):
    """Without a site_url its links are their text; with one, absolute URLs that
    resolve. Nothing else of the source changes."""
    import jupytext

    stem = Path(page).stem
    original = (ROOT / "docs" / page).read_text(encoding="utf-8")
    near = relative[f"{stem}.py"].read_text(encoding="utf-8")
    far = absolute[f"{stem}.py"].read_text(encoding="utf-8")
    strip = re.compile(r"\]\([^)\s]*\)")
    assert strip.sub("]()", original) == strip.sub("]()", far)
    old, new, abs_ = markdown_links(original), markdown_links(near), markdown_links(far)
    assert len(old) == len(abs_) > 0
    assert new == [a for a in old if a.startswith(("http://", "https://"))]
    as_text = re.compile(r"(?<!!)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\((?!https?:)[^)\s]*\)")
    assert near == as_text.sub(r"\1", original)
    for a, c in zip(old, abs_):
        if a.startswith(("http://", "https://")):
            assert a == c
            continue
        # the page's links are relative to its URL
        assert c == SITE + _site_path(a, served_at=URLS[page]), (a, c)
        assert _site_path(a, served_at=URLS[page]).split("#")[0] in SITE_FILES, a
    nb = load(absolute[f"{stem}.ipynb"])
    read = jupytext.reads(original, fmt="py:percent")
    assert cells(nb, "code") == [c.source for c in read.cells if c.cell_type == "code"]
    assert [t for s in cells(nb, "markdown") for t in markdown_links(s)] == abs_


# ---------------------------------------------------------------------------------------
# The built site


def _site_is_fresh() -> bool:
    """`site/` is newer than everything it is built from (tests/test_site.py's rule)."""
    if not (BUILT_SITE / "index.html").is_file():
        return False
    built = min(f.stat().st_mtime for f in BUILT_SITE.rglob("*") if f.is_file())
    sources = [ROOT / "mkdocs.yml"]
    for folder in ("docs", "literate"):
        sources += [
            f
            for f in (ROOT / folder).rglob("*")
            if f.is_file()
            and "__pycache__" not in f.parts
            and not any(p.startswith(".") for p in f.relative_to(ROOT / folder).parts)
        ]
    return built > max(f.stat().st_mtime for f in sources)


_DOWNLOAD_LINK = re.compile(
    r'<a href="(?P<href>[^"]+\.(?:ipynb|py))"[^>]*\bdownload\b[^>]*>'
)


@pytest.fixture(scope="module")
def built_site() -> Path:
    if not _site_is_fresh():
        if os.environ.get("CI"):
            pytest.fail(
                "site/ is missing or older than its sources: run `mkdocs build --strict`"
            )
        pytest.skip(
            "site/ is missing or older than its sources (`mkdocs build --strict` first)"
        )
    return BUILT_SITE


@pytest.mark.parametrize("page", CHAPTERS + NOTEBOOK_PAGES)
def test_the_built_page_offers_its_notebook_and_the_file_is_there(built_site, page):
    url = URLS[page]
    html = (built_site / url / "index.html").read_text(encoding="utf-8")
    hrefs = [m.group("href") for m in _DOWNLOAD_LINK.finditer(html)]
    targets = [posixpath.normpath(posixpath.join(url, h)) for h in hrefs]
    wanted = [f"{NOTEBOOK_DIR}/{name_of(page)}"]
    if page in NOTEBOOK_PAGES:
        wanted.append(f"{NOTEBOOK_DIR}/{Path(page).stem}.py")
    assert targets == wanted, f"{page}: download buttons {hrefs}"
    assert 'aria-label="Download this ' in html
    notebook = load(built_site / wanted[0])
    if page in CHAPTERS:
        assert cells(notebook, "code") == [s.rstrip("\n") for s in code_cells(page)]
    else:
        assert (
            (built_site / wanted[1])
            .read_text(encoding="utf-8")
            .startswith("# ---\n# jupyter:")
        )


# ---------------------------------------------------------------------------------------
# Every chapter notebook runs in a fresh kernel


# One chapter's notebook runs on the wheel the site serves (`literate.site.wheel`), as a
# reader without the repository runs it: the wheel installed into a folder of its own
# (`pip install --no-deps --target`), and a first cell that makes `literate` importable
# from that folder only (the venv's editable install maps `literate` to this repository
# from a `sys.meta_path` finder, which a finder put before it overrules). A last cell
# checks where every loaded `literate` module came from.
ON_THE_WHEEL = "attention/scaled-dot-product.md"
FROM_THE_WHEEL = """# added by the test: `literate` from the served wheel only
import importlib.abc, importlib.machinery, sys
TARGET = {target!r}


class FromTheWheel(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "literate" or name.startswith("literate."):
            found = importlib.machinery.PathFinder.find_spec(name, path or [TARGET])
            if found is None:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return found
        return None


sys.meta_path.insert(0, FromTheWheel())
"""
CHECK_THE_WHEEL = """# added by the test: every `literate` module came from the wheel
import sys
loaded = {n: getattr(m, "__file__", None) for n, m in sys.modules.items()
          if n.split(".")[0] == "literate"}
elsewhere = {n: f for n, f in loaded.items() if not str(f).startswith(TARGET)}
assert "literate.numbers.golden" in loaded and not elsewhere, (loaded, elsewhere)
print("ran on the wheel")
"""


def _on_the_wheel(path: Path, folder: Path) -> Path:
    """A copy of the notebook at `path` that imports `literate` from the served wheel,
    installed under `folder`."""
    import nbformat

    from literate.site.wheel import write_wheel

    wheel, target = write_wheel(folder / "wheel"), folder / "wheel-site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--disable-pip-version-check",
            "-q",
            "install",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(
        0, nbformat.v4.new_code_cell(FROM_THE_WHEEL.format(target=str(target)))
    )
    nb.cells.append(nbformat.v4.new_code_cell(CHECK_THE_WHEEL))
    copy = folder / f"wheel-{path.name}"
    nbformat.write(nb, copy)
    return copy


PROBE = """import os, sys
assert not [m for m in sys.modules if m == "literate" or m.startswith("literate.")]
assert "serve" not in dir() and "stub" not in dir()
print(os.getcwd(), os.environ["OMP_NUM_THREADS"])"""


async def _execute(
    warm, path: Path, cwd: Path, env: dict[str, str]
) -> tuple[float, dict, str | None]:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        km=warm.manager(),
        timeout=900,
        allow_errors=False,
        extra_arguments=["--HistoryManager.hist_file=:memory:"],
        resources={"metadata": {"path": str(cwd)}},
    )
    start = time.perf_counter()
    error = None
    try:
        await client.async_execute(env=env)
    except CellExecutionError as failure:
        error = str(failure)[-3000:]
    return time.perf_counter() - start, nb, error


@pytest.fixture(scope="module")
def executed(relative, tmp_path_factory) -> dict[str, tuple[float, dict, str | None]]:
    """Run the probe, then every chapter notebook (two kernels at a time): page ->
    (seconds, the executed notebook, the error or None)."""
    import nbformat

    from literate.site.warm_kernels import WarmKernels, third_party_imports

    folder = tmp_path_factory.mktemp("kernels")
    paths = {page: relative[name_of(page)] for page in CHAPTERS}
    paths[ON_THE_WHEEL] = _on_the_wheel(paths[ON_THE_WHEEL], folder)
    sources = [c for p in paths.values() for c in cells(load(p), "code")]
    sources += [
        f.read_text(encoding="utf-8") for f in sorted((ROOT / "literate").rglob("*.py"))
    ]
    env = {**os.environ, **KERNEL_ENV}
    started = time.perf_counter()
    warm = WarmKernels(
        str(folder), ["torch", "transformers", *third_party_imports(sources)], env
    )
    server = time.perf_counter() - started
    probe = folder / "probe.ipynb"
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PROBE)]), probe
    )

    async def run_all() -> dict[str, tuple[float, dict, str | None]]:
        limit = asyncio.Semaphore(JOBS)

        async def one(name: str, path: Path):
            async with limit:
                cwd = tmp_path_factory.mktemp("cwd")
                return name, (cwd, *await _execute(warm, path, cwd, env))

        return dict(
            await asyncio.gather(
                one("probe", probe), *(one(p, n) for p, n in paths.items())
            )
        )

    try:
        results = asyncio.run(run_all())
    finally:
        warm.close()
    total = time.perf_counter() - started
    print(
        f"\nchapter notebooks, {JOBS} kernels at a time (server start {server:.1f} s):"
    )
    for page, (_, seconds, _, error) in results.items():
        print(f"  {page:<34} {seconds:6.1f} s{'  FAILED' if error else ''}")
    print(f"  {'all (wall)':<34} {total:6.1f} s", flush=True)
    return results


@pytest.mark.readers
def test_the_probe_kernel_is_fresh(executed):
    cwd, _, nb, error = executed["probe"]
    assert error is None, error
    out = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    assert out == f"{cwd} 1\n"


def _page_outputs(page: str) -> list[str] | None:
    """What each Python block of the page printed at the last build, if it is cached for
    the page's current text and code."""
    from literate.site.figure_files import code_fingerprint as _code_fingerprint
    from literate.site.outputs import cache_path

    path = cache_path(
        (ROOT / "docs" / page).read_text(encoding="utf-8"), _code_fingerprint()
    )
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


@pytest.mark.readers
@pytest.mark.parametrize("page", CHAPTERS)
def test_the_chapter_notebook_runs_top_to_bottom_in_a_fresh_kernel(executed, page):
    _, seconds, nb, error = executed[page]
    assert error is None, f"{page}: {error}"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    printed = [
        "".join(
            o.text
            for o in c.outputs
            if o.output_type == "stream" and o.name == "stdout"
        )
        for c in code
    ]
    if page == ON_THE_WHEEL:  # the test's two cells around the notebook's own
        assert printed[0] == "" and printed[-1] == "ran on the wheel\n"
        printed = printed[1:-1]
    on_the_page = _page_outputs(page)
    if on_the_page is not None:  # the build ran the page (make test builds first)
        differ = [i for i, (a, b) in enumerate(zip(printed, on_the_page)) if a != b]
        assert len(on_the_page) == len(printed) and differ == [], (
            f"{page}: cells {differ[:5]} print otherwise than the page's blocks"
        )
