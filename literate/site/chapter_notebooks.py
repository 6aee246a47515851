"""Every chapter as a Jupyter notebook, made from its page at build time.

A chapter page (a page of the nav with `chapter:` in its front matter and Python blocks)
becomes `downloads/notebooks/<NN>-<page>.ipynb` (nbformat 4.5):

* the prose becomes Markdown cells, a new cell at each heading outside a box;
* every Python block that pytest runs (`outputs.python_blocks`: a `skip: next` block is
  shown as a listing, not run) becomes a code cell, its `--8<--` includes expanded by the
  expander the tests use, so a cell is exactly the code pytest runs; the blocks inside
  boxes (proofs, solutions, notes) are cells too, in the page's order;
* a box (`??? proof`, `??? exercise "..."`, `??? success "Solution"`, a tab `=== "..."`)
  becomes a bold title line followed by its body, dedented; a claim (its paragraph under
  `<!-- claim: id -->`) opens with `**Claim `id`:**`, the rest of its paragraph after it;
* a downloaded notebook works anywhere (Jupyter, Colab, a file opened from disk): every
  relative link points at the site when `site_url` is set in the MkDocs config, as an
  absolute URL (`<site_url>attention/positions/#rope`); without one it becomes plain text
  (its link text), since a relative URL resolves only on the site itself. Links within
  the page (`#anchor`) go to the page on the site: the notebook's own heading anchors
  are spelled differently by each Jupyter frontend. Of a figure's light and dark variants
  (`#only-light`, `#only-dark`) the light one is kept, with its alt text
  (`literate.figures.with_alt_text`, as on the page), embedded in the notebook as a cell
  attachment (`attachment:<name>-light.svg`), never a path or URL;

The notebook pages (jupytext percent `.py` files under `docs/notebooks/`) are offered the
same way, as `downloads/notebooks/<name>.ipynb` and `<name>.py`, their links rewritten
like a chapter's: they are written relative to the page's URL, which a downloaded file
does not have. Their first code cell imports from `literate` or, without it, from the
era's standalone file (`python -m literate.tools.export NAME`, served as
`downloads/NAME.py`) put next to the notebook; their first Markdown cell names the file.

The same inputs give the same bytes: no timestamps, cell ids derived from the cells,
keys sorted (nbformat's writer). The build hook calls `add_notebook_downloads` from
`on_files`; the theme (`theme/main.html`) reads `config.extra.notebook_downloads` to put
the download buttons next to the page title.
"""

# Over 450 lines on purpose: one tool (every chapter as a notebook to download: reading
# the page's blocks, linking, writing, and its command line); its functions call one
# another in one pipeline.

from __future__ import annotations

import base64
import hashlib
import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import yaml

from literate.site.docblocks import (
    ROOT,
    SnippetExpander,
    default_expander,
    iter_blocks,
    nav_order,
)
from literate.site.outputs import python_blocks
from literate.site.wheel import wheel_name

__all__ = [
    "NOTEBOOK_DIR",
    "NOTEBOOK_CACHE",
    "Download",
    "Linker",
    "front_matter",
    "chapter_pages",
    "notebook_pages",
    "notebook_name",
    "default_page_urls",
    "chapter_cells",
    "chapter_notebook",
    "jupytext_notebook",
    "jupytext_source",
    "code_cells",
    "dumps",
    "write_notebooks",
    "add_notebook_downloads",
    "markdown_links",
]

NOTEBOOK_DIR = "downloads/notebooks"  # where the site serves them
NOTEBOOK_CACHE = ROOT / ".cache" / "notebook-downloads"  # where the build writes them
KERNELSPEC = {
    "display_name": "Python 3 (ipykernel)",
    "language": "python",
    "name": "python3",
}

FRONT_MATTER = re.compile(r"\A---[ \t]*\n(?P<yaml>.*?\n)---[ \t]*\n", re.S)
BOX = re.compile(
    r"^(?P<indent>[ \t]*)(?P<marker>!!!|\?\?\?\+?)[ \t]+(?P<kind>[\w-]+)"
    r'(?:[ \t]+[\w-]+)*(?:[ \t]+"(?P<title>[^"]*)")?[ \t]*$'
)
TAB = re.compile(r'^(?P<indent>[ \t]*)===\+?[ \t]+"(?P<title>[^"]*)"[ \t]*$')
HEADING = re.compile(r"^#{1,6}[ \t]")
COMMENT_LINE = re.compile(r"^[ \t]*<!--.*-->[ \t]*$")
CLAIM_LINE = re.compile(r"^(?P<indent>[ \t]*)<!-- claim: (?P<id>\S+) -->[ \t]*$")
# An inline code span (left alone) or a link or image: [text](target "title").
LINK = re.compile(
    r"(?P<code>`+)(?:(?!\n[ \t>#]*\n)[^`]|(?!(?P=code))`+)*?(?P=code)(?!`)"
    r"|(?P<bang>!?)\[(?P<text>(?:[^\[\]]|\[[^\[\]]*\])*)\]\((?P<target>[^()\s]*)(?P<title>\s+\"[^\"]*\")?\)"
    r"(?P<attrs>\{[ \t]*[:.#][^}\n]*\})?"
)
DARK_ONLY = re.compile(r"^[ \t]*!\[[^\]]*\]\([^)\s]*#only-dark\)(\{[^}\n]*\})?[ \t]*$")
SCHEME = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)
FIGURE_PATH = re.compile(r"^figures/[\w.-]+\.svg$")  # a figure's site path
ATTACHMENT = re.compile(r"\]\(attachment:(?P<name>[^)\s]+)")


def default_figure_svg(name: str) -> bytes:
    """The bytes of a drawn figure, by file name (`attention-masks-light.svg`): from the
    build's figure cache (`literate/site/figure_files.py`), drawn there if missing."""
    from literate.site.figure_files import draw_figures, plan_figures

    report = plan_figures()
    path = report.paths[f"figures/{name}"]
    if not path.exists():
        draw_figures([job for job in report.jobs if job[2] == path])
    return path.read_bytes()


def with_attachments(
    cells: list[dict[str, Any]], figure_svg: Callable[[str], bytes]
) -> list[dict[str, Any]]:
    """Every Markdown cell that shows `attachment:<name>` carries the file, base64
    encoded, as Jupyter stores a pasted image (nbformat's `attachments`)."""
    for cell in cells:
        names = [m.group("name") for m in ATTACHMENT.finditer(cell["source"])]
        if cell["cell_type"] == "markdown" and names:
            cell["attachments"] = {
                name: {
                    "image/svg+xml": base64.b64encode(figure_svg(name)).decode("ascii")
                }
                for name in dict.fromkeys(names)
            }
    return cells


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _strip(line: str, columns: int) -> str:
    """`line` without up to `columns` leading blanks."""
    return line[min(columns, _indent(line)) :]


# ---------------------------------------------------------------------------------------
# Which pages, and where they are on the site


def front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(the YAML front matter of a page, the page without it)."""
    match = FRONT_MATTER.match(text)
    if not match:
        return {}, text
    return yaml.safe_load(match.group("yaml")) or {}, text[match.end() :]


def chapter_pages(pages: list[str], docs_dir: Path = ROOT / "docs") -> list[str]:
    """The chapters among `pages` (docs-relative, in reading order): Markdown pages with
    `chapter:` in their front matter and at least one Python block that pytest runs."""
    found = []
    for page in pages:
        path = docs_dir / page
        if not page.endswith(".md") or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        meta, _ = front_matter(text)
        if meta.get("chapter") is not None and python_blocks(text):
            found.append(page)
    return found


def notebook_pages(pages: list[str]) -> list[str]:
    """The jupytext notebook pages among `pages`."""
    return [p for p in pages if p.startswith("notebooks/") and p.endswith(".py")]


def default_page_urls(pages: list[str]) -> dict[str, str]:
    """docs-relative source -> site path, as MkDocs makes them with `use_directory_urls`
    (`a/b.md` -> `a/b/`, `a/index.md` -> `a/`, a notebook `n/x.py` -> `n/x/`). The hook
    passes the URLs MkDocs actually gave its files instead."""
    urls = {}
    for page in pages:
        stem = page.rsplit(".", 1)[0]
        if stem == "index" or stem.endswith("/index"):
            stem = stem[: -len("index")]
        urls[page] = stem if not stem or stem.endswith("/") else stem + "/"
    return urls


def notebook_name(page: str, chapter: Any = None) -> str:
    """`attention/positions.md` (chapter 2) -> `02-positions`; `notebooks/x.py` -> `x`."""
    stem = posixpath.splitext(posixpath.basename(page))[0]
    return f"{int(chapter):02d}-{stem}" if chapter is not None else stem


# ---------------------------------------------------------------------------------------
# Links


@dataclass(frozen=True)
class Linker:
    """Rewrites the relative links of one page to point at the site."""

    page: str  # docs-relative source of the page
    page_urls: Mapping[str, str]  # docs-relative source -> site path
    site_url: str | None  # absolute base URL, or None: relative to `served_at`
    served_at: str = NOTEBOOK_DIR + "/"  # the directory the notebook is served from
    url_relative: bool = False  # links written relative to the page's URL (notebooks)
    # figures (`figures/*.svg`) as cell attachments; else an image is a link
    embed_figures: bool = True

    def site_path(self, target: str) -> str:
        """The site path (no leading slash) a relative link of the page points at."""
        path, _, fragment = target.partition("#")
        here = self.page_urls[self.page]
        if not path:
            resolved = here
        elif self.url_relative:
            resolved = posixpath.normpath(posixpath.join(here, path))
            if path.endswith("/") and not resolved.endswith("/"):
                resolved += "/"
        else:
            source = posixpath.normpath(
                posixpath.join(posixpath.dirname(self.page), path)
            )
            if source.endswith(".md") or source in self.page_urls:
                if source not in self.page_urls:
                    raise ValueError(
                        f"{self.page}: link {target!r}: no page {source!r} in the nav"
                    )
                resolved = self.page_urls[source]
            else:
                resolved = source  # a file served at its own path (figures, downloads)
        if resolved.startswith("../") or resolved == "..":
            raise ValueError(f"{self.page}: link {target!r} leaves the site")
        resolved = "" if resolved in (".", "./") else resolved
        return resolved + (f"#{fragment}" if fragment else "")

    def url(self, target: str) -> str:
        """Where the link points from the notebook: absolute, or relative to `served_at`."""
        path = self.site_path(target)
        if self.site_url:
            return urljoin(
                self.site_url if self.site_url.endswith("/") else self.site_url + "/",
                path,
            )
        location, _, fragment = path.partition("#")
        relative = posixpath.relpath(location or ".", self.served_at.rstrip("/") or ".")
        if (location.endswith("/") or not location) and not relative.endswith("/"):
            relative += "/"
        return relative + (f"#{fragment}" if fragment else "")

    def rewrite(self, line: str) -> str:
        """One line of Markdown with its relative links and images rewritten: a figure
        (`figures/<name>.svg`, its `#only-light` marker dropped) to `attachment:<name>.svg`,
        another link to its absolute URL with a `site_url`, else to its text alone;
        attribute lists after links are dropped."""

        def one(match: re.Match[str]) -> str:
            if match.group("code"):
                return match.group(0)
            target = match.group("target")
            text = match.group("text")
            if not target or SCHEME.match(target):
                url = target
            else:
                if match.group("bang"):
                    target = target.removesuffix("#only-light")
                    path = self.site_path(target)
                    if self.embed_figures and FIGURE_PATH.match(path):
                        url = "attachment:" + posixpath.basename(path)
                        return f"![{text}]({url}{match.group('title') or ''})"
                if not self.site_url:
                    self.site_path(target)  # a link that leaves the nav still fails
                    return text  # a relative URL resolves only on the site
                url = self.url(target)
            return f"{match.group('bang')}[{text}]({url}{match.group('title') or ''})"

        return LINK.sub(one, line)


def markdown_links(markdown: str) -> list[str]:
    """The targets of the links and images of a Markdown text (code spans left out)."""
    return [m.group("target") for m in LINK.finditer(markdown) if not m.group("code")]


# ---------------------------------------------------------------------------------------
# A chapter page -> cells


def _cell_id(cell_type: str, source: str, seen: dict[str, int]) -> str:
    digest = hashlib.sha256(f"{cell_type}\n{source}".encode()).hexdigest()[:12]
    seen[digest] = seen.get(digest, 0) + 1
    return digest if seen[digest] == 1 else f"{digest}-{seen[digest]}"


def _new_cell(
    cell_type: str, source: str, seen: dict[str, int], **extra: Any
) -> dict[str, Any]:
    cell: dict[str, Any] = {
        "cell_type": cell_type,
        "id": _cell_id(cell_type, source, seen),
        "metadata": {},
        "source": source,
    }
    if cell_type == "code":
        cell |= {"execution_count": None, "outputs": []}
    return cell | extra


@dataclass
class _Box:
    body: int  # the indentation of its body


def code_cells(
    page: str, docs_dir: Path = ROOT / "docs", expander: SnippetExpander | None = None
) -> list[str]:
    """What pytest runs of `page`, block by block: each Python block that is not skipped,
    its includes expanded (the reference the notebook's code cells are checked against)."""
    expander = expander or default_expander()
    text = (docs_dir / page).read_text(encoding="utf-8")
    return [
        expander.expand(b.source) if b.includes_snippet else b.source
        for b in python_blocks(text)
    ]


def _code_title(info: str) -> str | None:
    match = re.search(r'\btitle="([^"]*)"', info)
    return match.group(1) if match else None


def chapter_cells(
    text: str, linker: Linker, expander: SnippetExpander | None = None
) -> list[dict[str, Any]]:
    """The cells of one page (front matter included or not)."""
    expander = expander or default_expander()
    _, body = front_matter(text)
    skipped = len(text) - len(body)
    runnable = {b.start: b for b in python_blocks(text)}
    fences: dict[int, int] = {}  # first line -> last line of every fence (0-based)
    blocks: dict[int, Any] = {}
    for block in iter_blocks(text):
        first = text.count("\n", 0, block.start)
        fences[first] = text.count("\n", 0, block.end)
        if block.start in runnable:
            blocks[first] = block
    lines = text.split("\n")
    cells: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    markdown: list[tuple[str, bool]] = []  # (line, is prose)
    boxes: list[_Box] = []
    pending_blank = 0

    def flush() -> None:
        # Links are rewritten a run of prose lines at a time (a link's text may wrap);
        # listings (a fence that does not run) are left alone.
        nonlocal pending_blank
        pending_blank = 0
        runs: list[tuple[bool, list[str]]] = []
        for line, prose in markdown:
            if runs and runs[-1][0] == prose:
                runs[-1][1].append(line)
            else:
                runs.append((prose, [line]))
        markdown.clear()
        source = "\n".join(
            linker.rewrite("\n".join(run)) if prose else "\n".join(run)
            for prose, run in runs
        ).strip("\n")
        if source.strip():
            cells.append(_new_cell("markdown", source, seen))

    def emit(line: str, *, prose: bool = True) -> None:
        nonlocal pending_blank
        if not line.strip():
            pending_blank += 1
            return
        if pending_blank and markdown:  # in prose one blank line is as good as two
            markdown.extend([("", prose)] * (pending_blank if not prose else 1))
        pending_blank = 0
        markdown.append((_strip(line, boxes[-1].body if boxes else 0), prose))

    i = text.count("\n", 0, skipped) if skipped else 0
    while i < len(lines):
        line = lines[i]
        if line.strip():
            while boxes and _indent(line) < boxes[-1].body:
                boxes.pop()
        if i in blocks:
            block = blocks[i]
            title = _code_title(block.info)
            if title:
                label = (
                    f"From `{title}`:"
                    if "/" in title or title.endswith(".py")
                    else f"{title}:"
                )
                emit("")
                emit(" " * (boxes[-1].body if boxes else 0) + f"*{label}*")
            flush()
            source = (
                expander.expand(block.source)
                if block.includes_snippet
                else block.source
            )
            cells.append(_new_cell("code", source.rstrip("\n"), seen))
            i = fences[i] + 1
            continue
        if i in fences:
            for fenced in lines[i : fences[i] + 1]:
                emit(fenced, prose=False)
            i = fences[i] + 1
            continue
        if not boxes and HEADING.match(line):
            flush()
            emit(line)
        elif claim := CLAIM_LINE.match(line):
            emit(claim.group("indent") + f"**Claim `{claim.group('id')}`:**")
        elif COMMENT_LINE.match(line) or DARK_ONLY.match(line):
            pass
        elif (box := BOX.match(line)) or (tab := TAB.match(line)):
            match = box or tab
            indent = len(match.group("indent").expandtabs(4))
            kind = match.group("kind") if box else "tab"
            title = match.group("title")
            if title is None:
                title = kind.capitalize()
            emit("")
            if title:
                emit(match.group("indent") + f"**{title}**")
            boxes.append(_Box(indent + 4))
            emit("")
        else:
            emit(line)
        i += 1
    flush()
    return cells


def _notebook(
    cells: list[dict[str, Any]], extra_metadata: dict[str, Any]
) -> dict[str, Any]:
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": dict(KERNELSPEC),
            "language_info": {"name": "python"},
        }
        | extra_metadata,
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def chapter_notebook(
    page: str,
    *,
    page_urls: Mapping[str, str],
    site_url: str | None = None,
    site_name: str = "this site",
    docs_dir: Path = ROOT / "docs",
    expander: SnippetExpander | None = None,
    figure_svg: Callable[[str], bytes] | None = None,
) -> dict[str, Any]:
    """The notebook of one chapter page (docs-relative path), as a JSON-ready dict; its
    figures' bytes come from `figure_svg` (file name -> SVG; the figure cache)."""
    from literate.figures import with_alt_text

    text = with_alt_text((docs_dir / page).read_text(encoding="utf-8"), page)
    meta, _ = front_matter(text)
    linker = Linker(page, page_urls, site_url)
    seen: dict[str, int] = {}
    chapter = meta.get("chapter")
    this = (
        f"[chapter {chapter}]({linker.url('')})" if site_url else f"chapter {chapter}"
    )
    wheel = wheel_name()
    install = (
        f"`pip install {site_url.rstrip('/')}/downloads/{wheel}`"
        if site_url
        else f"`pip install {wheel}`, the wheel the site serves with its downloads"
    )
    intro = (
        f"*This notebook is {this} of {site_name}, made from its page: the "
        "prose in Markdown cells and, in the page's order, each Python block the page runs "
        "under pytest as a code cell, with the code it includes from `literate/` written "
        "out. The cells import the rest (reference values, data, the earlier chapters' "
        f"layers) from the `literate` package: {install} (or `pip install .` in a clone "
        "of the repository) installs it with torch and matplotlib; the cells that compare "
        "with Hugging Face also need `pip install transformers`.*"
    )
    cells = [_new_cell("markdown", intro, seen)]
    for cell in chapter_cells(text, linker, expander):
        cells.append(cell | {"id": _cell_id(cell["cell_type"], cell["source"], seen)})
    return _notebook(
        with_attachments(cells, figure_svg or default_figure_svg),
        {"literate": {"chapter": chapter, "page": page}},
    )


# ---------------------------------------------------------------------------------------
# A jupytext notebook page -> a downloadable .py and .ipynb


def jupytext_source(
    page: str,
    *,
    page_urls: Mapping[str, str],
    site_url: str | None = None,
    docs_dir: Path = ROOT / "docs",
) -> str:
    """The jupytext percent source of a notebook page, with the links of its Markdown
    cells pointing at the site (they are written relative to the page's URL)."""
    linker = Linker(page, page_urls, site_url, url_relative=True)
    out: list[str] = []
    comments: list[str] = []  # the comment lines of a Markdown cell, rewritten together
    in_markdown = False
    for line in (docs_dir / page).read_text(encoding="utf-8").split("\n") + ["# %%"]:
        if in_markdown and line.startswith("#") and not line.startswith("# %%"):
            comments.append(line)
            continue
        if comments:
            out += linker.rewrite("\n".join(comments)).split("\n")
            comments = []
        if line.startswith("# %%"):
            in_markdown = "[markdown]" in line or "[md]" in line
        out.append(line)
    return "\n".join(out[:-1])


def jupytext_notebook(
    page: str,
    *,
    page_urls: Mapping[str, str],
    site_url: str | None = None,
    docs_dir: Path = ROOT / "docs",
) -> dict[str, Any]:
    """The notebook of a jupytext page, its links pointing at the site, without outputs."""
    import jupytext

    source = jupytext_source(
        page, page_urls=page_urls, site_url=site_url, docs_dir=docs_dir
    )
    read = jupytext.reads(source, fmt="py:percent")
    seen: dict[str, int] = {}
    cells = []
    for cell in read.cells:
        extra = {"metadata": dict(cell.metadata)} if cell.metadata else {}
        cells.append(_new_cell(cell.cell_type, cell.source, seen, **extra))
    return _notebook(cells, {"literate": {"page": page}})


# ---------------------------------------------------------------------------------------
# Writing them


def dumps(notebook: dict[str, Any]) -> str:
    """The notebook's file: nbformat's JSON (sorted keys, one-space indent), validated."""
    import nbformat

    node = nbformat.from_dict(notebook)
    nbformat.validate(node)
    return nbformat.writes(node) + "\n"  # as Jupyter saves a notebook


@dataclass(frozen=True)
class Download:
    page: str  # docs-relative source of the page offering it
    uri: str  # where the site serves it
    label: str  # what the button says
    path: Path  # the written file


def _planned(
    pages: list[str],
    *,
    page_urls: Mapping[str, str] | None,
    site_url: str | None,
    site_name: str,
    docs_dir: Path,
    figure_svg: Callable[[str], bytes] | None,
) -> list[tuple[str, str, str, Callable[[], str]]]:
    """(page, file name, label, the file's text, made when called) of every download."""
    page_urls = dict(page_urls) if page_urls is not None else default_page_urls(pages)
    wanted: list[tuple[str, str, str, Callable[[], str]]] = []
    for page in chapter_pages(pages, docs_dir):
        meta, _ = front_matter((docs_dir / page).read_text(encoding="utf-8"))
        name = notebook_name(page, meta["chapter"])

        def chapter(page: str = page) -> str:
            return dumps(
                chapter_notebook(
                    page,
                    page_urls=page_urls,
                    site_url=site_url,
                    site_name=site_name,
                    docs_dir=docs_dir,
                    figure_svg=figure_svg,
                )
            )

        label = "Download this chapter as a Jupyter notebook (.ipynb)"
        wanted.append((page, f"{name}.ipynb", label, chapter))
    for page in notebook_pages(pages):
        name = notebook_name(page)
        options = {"page_urls": page_urls, "site_url": site_url, "docs_dir": docs_dir}

        def notebook(page: str = page) -> str:
            return dumps(jupytext_notebook(page, **options))

        def source(page: str = page) -> str:
            return jupytext_source(page, **options)

        wanted.append(
            (page, f"{name}.ipynb", "Download this notebook (.ipynb)", notebook)
        )
        label = "Download this notebook's source (jupytext .py)"
        wanted.append((page, f"{name}.py", label, source))
    names = [w[1] for w in wanted]
    if len(set(names)) != len(names):
        raise ValueError(f"two pages give a notebook the same name: {sorted(names)}")
    return wanted


def _write(path: Path, text: str) -> None:
    """Write `path` only when its text changed, whole or not at all."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)


def write_notebooks(
    pages: list[str],
    *,
    page_urls: Mapping[str, str] | None = None,
    site_url: str | None = None,
    site_name: str = "this site",
    out_dir: Path = NOTEBOOK_CACHE,
    docs_dir: Path = ROOT / "docs",
    figure_svg: Callable[[str], bytes] | None = None,
) -> list[Download]:
    """Write the notebook of every chapter and notebook page among `pages` (reading order)
    into `out_dir`; a file is rewritten only when its text changed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    downloads = []
    for page, name, label, make in _planned(
        pages,
        page_urls=page_urls,
        site_url=site_url,
        site_name=site_name,
        docs_dir=docs_dir,
        figure_svg=figure_svg,
    ):
        _write(out_dir / name, make())
        downloads.append(
            Download(page, f"{NOTEBOOK_DIR}/{name}", label, out_dir / name)
        )
    return downloads


def add_notebook_downloads(files: Any, config: Any, pages: list[str]) -> list[Download]:
    """The build's part (`on_files`): register the notebook of each of the nav's pages
    (`pages`, in reading order) as a generated file, and tell the theme which page offers
    which (`config.extra["notebook_downloads"]`: page -> [{url, label}]). A file is
    written when MkDocs copies it, after `on_env`: the figures it embeds are drawn in the
    background meanwhile (literate/site/hooks.py, `on_files` and `on_env`)."""
    from mkdocs.structure.files import File

    class LateFile(File):
        make: Callable[[], str]

        def copy_file(self, dirty: bool = False) -> None:
            if self.abs_src_path is None:  # set by the constructor below; a type guard
                raise ValueError(f"the notebook {self.src_uri} has no path to write")
            _write(Path(self.abs_src_path), self.make())
            super().copy_file(dirty)

    page_urls = {f.src_uri: f.url for f in files.documentation_pages()}
    page_urls = {
        src: ("" if url in ("", "./") else url) for src, url in page_urls.items()
    }
    NOTEBOOK_CACHE.mkdir(parents=True, exist_ok=True)
    downloads = []
    offered: dict[str, list[dict[str, str]]] = {}
    for page, name, label, make in _planned(
        pages,
        page_urls=page_urls,
        site_url=config.get("site_url") or None,
        site_name=config.get("site_name") or "this site",
        docs_dir=ROOT / "docs",
        figure_svg=None,
    ):
        download = Download(
            page, f"{NOTEBOOK_DIR}/{name}", label, NOTEBOOK_CACHE / name
        )
        file = LateFile.generated(config, download.uri, abs_src_path=str(download.path))
        file.make = make
        files.append(file)
        offered.setdefault(page, []).append({"url": download.uri, "label": label})
        downloads.append(download)
    config["extra"]["notebook_downloads"] = offered
    return downloads


def main(argv: list[str] | None = None) -> int:
    """`python -m literate.site.chapter_notebooks OUT_DIR [--site-url URL]`: write the
    notebooks of the nav's pages into OUT_DIR."""
    import argparse

    from literate.site.docblocks import mkdocs_config

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument(
        "--site-url", default=None, help="absolute base URL of the site"
    )
    args = parser.parse_args(argv)
    config = mkdocs_config()
    downloads = write_notebooks(
        nav_order(config.get("nav")),
        site_url=args.site_url,
        site_name=config.get("site_name") or "this site",
        out_dir=args.out_dir,
    )
    for download in downloads:
        print(download.path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
