"""Two clean builds give the same bytes: the comparer of `literate.site.reproducible`
finds every difference, and each fix holds on its own (the build dated by the last
commit, figures drawn twice alike). The two full builds themselves run in CI
(`.ci/run`), not here: they take minutes."""

from __future__ import annotations

import ast
import gzip
import html
import io
import re
import subprocess
from datetime import datetime, timezone

import matplotlib.pyplot as plt
import pytest

from literate.figures.style import svg_bytes
from literate.site import hooks, notebook_pages
from literate.site.docblocks import ROOT
from literate.site.reproducible import (
    compare_trees,
    first_difference,
    source_date_epoch,
)


def _tree(root, files: dict[str, bytes]):
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def test_identical_trees_have_no_difference(tmp_path):
    files = {
        "index.html": b"<h1>Home</h1>\n",
        "assets/a.svg": b"<svg/>",
        "x/y/z.txt": b"z",
    }
    a, b = _tree(tmp_path / "a", files), _tree(tmp_path / "b", files)
    assert compare_trees(a, b) == (3, [])


def test_the_comparer_finds_every_differing_file_and_says_where(tmp_path):
    a = _tree(
        tmp_path / "a",
        {
            "index.html": b"<h1>Home</h1>\n<p>built in 1.23 s</p>\n",
            "same.css": b"body{}",
            "only-a.txt": b"a",
            "logo.png": b"\x89PNG\x00\x01\x02",
        },
    )
    b = _tree(
        tmp_path / "b",
        {
            "index.html": b"<h1>Home</h1>\n<p>built in 1.31 s</p>\n",
            "same.css": b"body{}",
            "only-b.txt": b"b",
            "logo.png": b"\x89PNG\x00\x01\x03",
        },
    )
    compared, differences = compare_trees(a, b)
    assert compared == 3  # index.html, same.css and logo.png are in both
    assert [(d.path, d.what) for d in differences] == [
        (
            "index.html",
            "line 2, column 15 (sizes 37 vs 37 bytes): "
            "'<h1>Home</h1>\\n<p>built in 1.23 s</p>\\n' vs '<h1>Home</h1>\\n<p>built in 1.31 s</p>\\n'",
        ),
        ("logo.png", "byte 6 of 7 vs 7: 02 vs 03"),
        ("only-a.txt", f"only in {a}"),
        ("only-b.txt", f"only in {b}"),
    ]


def test_a_gzip_file_that_differs_only_in_its_header_is_told_apart():
    one = gzip.compress(b"<urlset/>", mtime=1)
    two = gzip.compress(b"<urlset/>", mtime=2)
    assert (
        first_difference(one, two)
        == "gzip contents equal, header differs (mtime or file name)"
    )
    assert first_difference(one, gzip.compress(b"<urlset>", mtime=1)).startswith(
        "gzip contents differ: line 1, column 8 (sizes 9 vs 8 bytes)"
    )
    assert first_difference(one, one) == "identical"


def test_the_build_is_dated_by_the_last_commit():
    committed = subprocess.run(
        ["git", "log", "-1", "--format=%ct"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert source_date_epoch(ROOT) == committed
    environ: dict[str, str] = {}
    assert hooks.date_build_by_last_commit(environ) == committed
    assert environ == {"SOURCE_DATE_EPOCH": committed}
    # Set by the hook in an earlier build (`mkdocs serve`): taken afresh from git.
    hooks._epoch_set = environ["SOURCE_DATE_EPOCH"] = "12345"
    assert hooks.date_build_by_last_commit(environ) == committed
    # Set by the caller: kept.
    caller = {"SOURCE_DATE_EPOCH": "86400"}
    assert hooks.date_build_by_last_commit(caller) == "86400"
    assert caller == {"SOURCE_DATE_EPOCH": "86400"}


def test_mkdocs_dates_the_sitemap_and_its_gzip_header_by_source_date_epoch(monkeypatch):
    """What the sitemap's <lastmod> and sitemap.xml.gz's mtime are made from (MkDocs 1.6:
    `Page.update_date` is `get_build_date()`; the gzip mtime is `get_build_timestamp`)."""
    from mkdocs import utils

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # 2023-11-14 22:13:20 UTC
    assert utils.get_build_date() == "2023-11-14"
    assert utils.get_build_timestamp() == 1700000000
    assert (
        datetime.fromtimestamp(1700000000, timezone.utc).strftime("%Y-%m-%d")
        == "2023-11-14"
    )


def _figure():
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1, 2], [0, 1, 4], label="squares")
    ax.legend()
    fig.text(0.5, 0.5, "α")
    return fig


def test_a_figure_drawn_twice_gives_the_same_svg_bytes():
    first, second = svg_bytes(_figure()), svg_bytes(_figure())
    assert first == second
    assert b"<dc:date>" not in first and b"Matplotlib v" not in first


def test_without_the_fix_two_drawings_differ():
    """What `svg_bytes` fixes: matplotlib salts its SVG ids at random and dates the file."""

    def plain() -> bytes:
        buffer = io.BytesIO()
        fig = _figure()
        fig.savefig(buffer, format="svg")
        plt.close(fig)
        return buffer.getvalue()

    first, second = plain(), plain()
    assert first != second
    assert b"<dc:date>" in first
    assert "byte" in first_difference(first, second) or "line" in first_difference(
        first, second
    )


NOTEBOOKS = sorted((ROOT / "docs" / "notebooks").glob("*.py"))


def test_notebook_cells_get_the_same_ids_at_every_read():
    import jupytext

    notebook = NOTEBOOKS[0]
    assert [c.id for c in jupytext.read(notebook).cells] != [
        c.id for c in jupytext.read(notebook).cells
    ]
    first = notebook_pages.stable_cell_ids(jupytext.read(notebook))
    second = notebook_pages.stable_cell_ids(jupytext.read(notebook))
    ids = [c.id for c in first.cells]
    assert ids == [c.id for c in second.cells] and len(set(ids)) == len(ids)
    assert all(len(i) == 8 and int(i, 16) >= 0 for i in ids)


def test_mkdocs_jupyter_reads_notebooks_with_stable_ids(monkeypatch):
    from mkdocs_jupyter import nbconvert2

    monkeypatch.setattr(
        nbconvert2, "jupytext", nbconvert2.jupytext
    )  # restored after the test
    notebook_pages.stable_notebook_cell_ids()
    notebook_pages.stable_notebook_cell_ids()  # idempotent: wraps jupytext once
    assert isinstance(nbconvert2.jupytext, notebook_pages._StableIdJupytext)
    assert not isinstance(nbconvert2.jupytext.module, notebook_pages._StableIdJupytext)
    read = [
        [c.id for c in nbconvert2.jupytext.read(NOTEBOOKS[0]).cells] for _ in range(2)
    ]
    assert read[0] == read[1]
    assert nbconvert2.jupytext.writes is nbconvert2.jupytext.module.writes


def test_mkdocs_jupyter_pages_show_a_cells_consecutive_prints_as_one_output(
    monkeypatch, tmp_path
):
    """A kernel sends prints when its flush timer fires: one print reached one build's
    page as two outputs. The pages must not depend on where the flushes fell."""
    import nbformat
    from mkdocs_jupyter import nbconvert2

    cell = nbformat.v4.new_code_cell("print('source position', [2, 1, 0])")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="source position"),
        nbformat.v4.new_output("stream", name="stdout", text=" [2, 1, 0]\n"),
        nbformat.v4.new_output("stream", name="stderr", text="a warning\n"),
        nbformat.v4.new_output("stream", name="stdout", text="after it\n"),
    ]
    path = tmp_path / "split.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)

    def outputs() -> list[str]:
        page = nbconvert2.nb2html(str(path), execute=False)
        return [
            html.unescape(text).strip()
            for text in re.findall(
                r'class="jp-RenderedText[^>]*>\s*<pre>(.*?)</pre>', page, re.S
            )
        ]

    monkeypatch.setattr(
        nbconvert2, "HTMLExporter", nbconvert2.HTMLExporter
    )  # restored after
    assert outputs() == [
        "source position",
        "[2, 1, 0]",
        "a warning",
        "after it",
    ]  # as sent
    notebook_pages.notebook_exporter()
    notebook_pages.notebook_exporter()  # idempotent: one subclass
    assert nbconvert2.HTMLExporter.__base__.__name__ == "HTMLExporter"
    assert outputs() == [
        "source position [2, 1, 0]",
        "a warning",
        "after it",
    ]  # stderr between


_TIMED = re.compile(
    r"^\s*(?P<name>\w+)(?:\[[^\]]*\])?\s*=\s*time\.perf_counter\(\)\s*-", re.M
)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_a_notebook_prints_wall_times_only_in_cells_the_site_leaves_out(notebook):
    """A wall time on the page would differ at every build: the cells that print one are
    tagged `measured`, which mkdocs.yml tells mkdocs-jupyter to leave out."""
    import jupytext
    from mkdocs.utils import yaml_load

    with open(ROOT / "mkdocs.yml", "rb") as f:
        plugins = yaml_load(f)["plugins"]
    jupyter = next(
        p["mkdocs-jupyter"]
        for p in plugins
        if isinstance(p, dict) and "mkdocs-jupyter" in p
    )
    assert jupyter["remove_tag_config"] == {"remove_cell_tags": ["measured"]}
    cells = [c for c in jupytext.read(notebook).cells if c.cell_type == "code"]
    timed = {m.group("name") for c in cells for m in _TIMED.finditer(c.source)}
    assert printed_wall_times(cells, timed) == []


def printed_wall_times(cells, timed: set[str]) -> list[str]:
    """The print calls of the untagged cells that print a name in `timed`."""
    found = []
    for cell in cells:
        if "measured" in cell.metadata.get("tags", []):
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} & timed
                if used:
                    found.append(
                        f"{sorted(used)}: {ast.get_source_segment(cell.source, node)[:60]}"
                    )
    return found


def test_the_wall_time_check_finds_a_print_across_lines():
    import nbformat

    cells = [
        nbformat.v4.new_code_cell(
            "t = time.perf_counter() - start\nprint('took',\n      f'{t:.2f} s')"
        ),
        nbformat.v4.new_code_cell("print(t)", metadata={"tags": ["measured"]}),
    ]
    timed = {m.group("name") for c in cells for m in _TIMED.finditer(c.source)}
    assert timed == {"t"}
    assert printed_wall_times(cells, timed) == [
        "['t']: print('took',\n      f'{t:.2f} s')"
    ]


@pytest.fixture(autouse=True)
def _restore_epoch_flag():
    saved = hooks._epoch_set
    yield
    hooks._epoch_set = saved
