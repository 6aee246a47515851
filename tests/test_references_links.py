"""Links: citations in the notebooks link to the references too (the chapters' are checked
by tests/test_references.py); MkDocs' own validation (strict, at warn) fails a build on
a link to a missing page or anchor; the built site has no broken internal link or
anchor, notebooks and generated pages included; external links are listed in the build
log and never fetched."""

from __future__ import annotations

import html
import logging
import posixpath
import re
import socket
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from mkdocs.utils import yaml_load
from test_references import anchors, unlinked_citations

from literate.site import offline
from literate.site.docblocks import ROOT

from test_site import BUILT_SITE, site_is_fresh

NOTEBOOKS = sorted((ROOT / "docs" / "notebooks").glob("*.py"))


def notebook_prose(source: str) -> str:
    """The Markdown cells of a jupytext percent notebook, as Markdown. Links in them are
    to the built site's addresses (`../../appendix/references/#id`, for the notebook's
    page; or absolute, to the published site), written here as the chapters write them."""
    cells = re.split(r"^# %%.*$", source, flags=re.M)
    headers = re.findall(r"^# %%.*$", source, flags=re.M)
    markdown = []
    for header, cell in zip(headers, cells[1:]):
        if "[markdown]" in header:
            markdown.append(
                "\n".join(
                    line[2:] if line.startswith("# ") else line.lstrip("#")
                    for line in cell.strip("\n").split("\n")
                )
            )
    text = "\n\n".join(markdown)
    return re.sub(
        r"\((?:[^()\s]*/)?appendix/references/#", "(../appendix/references.md#", text
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_citation_in_a_notebook_links_to_the_references_page(notebook):
    problems = unlinked_citations(
        notebook_prose(notebook.read_text(encoding="utf-8")), anchors()
    )
    assert not problems, "\n".join(problems)


def test_notebook_prose_is_read_from_the_markdown_cells_only():
    source = (
        "# %% [markdown]\n# As [Wang et al. 2024](../../appendix/references/#wang-2024) show.\n"
        "#\n# Shazeer 2020 too.\n\n# %%\n# Vaswani et al. 2017, in a code comment\nx = 1\n"
    )
    prose = notebook_prose(source)
    assert (
        prose
        == "As [Wang et al. 2024](../appendix/references.md#wang-2024) show.\n\nShazeer 2020 too."
    )
    assert unlinked_citations(prose, {"wang-2024"}) == [
        "~line 3: 'Shazeer 2020' is not a link to the references"
    ]


# ---------------------------------------------------------------------------------------
# MkDocs' validation, as this site configures it


def _tiny_site(tmp_path: Path, pages: dict[str, str]) -> Path:
    with open(ROOT / "mkdocs.yml", "rb") as f:
        ours = yaml_load(f)
    config = {
        "site_name": "links",
        "docs_dir": "docs",
        "strict": True,
        "theme": {"name": "mkdocs"},
        "validation": ours["validation"],
        "markdown_extensions": [
            e
            for e in ours["markdown_extensions"]
            if "pymdownx.snippets" not in (e if isinstance(e, str) else list(e))
        ],
    }
    (tmp_path / "docs").mkdir()
    for name, text in pages.items():
        (tmp_path / "docs" / name).write_text(text, encoding="utf-8")
    (tmp_path / "mkdocs.yml").write_text(
        __import__("yaml").safe_dump(config), encoding="utf-8"
    )
    return tmp_path / "mkdocs.yml"


def _strict_build(config_file: Path, caplog) -> list[str]:
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import Abort

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mkdocs"):
        try:
            build(load_config(str(config_file)))
        except Abort:
            pass
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_mkdocs_validation_fails_a_link_to_a_missing_anchor_or_page(tmp_path, caplog):
    target = (
        "# Target\n\n## A heading\n\nText.\n{ #an-attr-id }\n\n"
        '<div class="admonition claim" id="claim-x.y" markdown>\nBox.\n</div>\n'
    )
    good = (
        "# Source\n\n[h](b.md#a-heading) [a](b.md#an-attr-id) [c](b.md#claim-x.y) "
        "[self](#source)\n"
    )
    config = _tiny_site(tmp_path, {"index.md": good, "b.md": target})
    assert _strict_build(config, caplog) == []
    (tmp_path / "docs" / "index.md").write_text(
        good + "\n[broken](b.md#no-such-anchor) [gone](c.md)\n", encoding="utf-8"
    )
    warnings = _strict_build(config, caplog)
    assert any(
        "'b.md#no-such-anchor'" in w and "does not contain an anchor" in w
        for w in warnings
    ), warnings
    assert any("'c.md'" in w and "not found" in w for w in warnings), warnings


# ---------------------------------------------------------------------------------------
# The built site

_REF = re.compile(
    r"<(?P<tag>a|img|link|script|source)\b[^>]*?\s(?:href|src)\s*=\s*\"(?P<url>[^\"]*)\"",
    re.I,
)
_ID = re.compile(r"\s(?:id|name)\s*=\s*\"(?P<id>[^\"]+)\"")


def broken_internal_links(site_dir: Path) -> list[str]:
    """Every link, image, stylesheet or script of a built page that points into the site
    at a file that is not there, or at an anchor the target page does not have."""
    ids: dict[Path, set[str]] = {}

    def ids_of(path: Path) -> set[str]:
        if path not in ids:
            ids[path] = {
                html.unescape(m)
                for m in _ID.findall(path.read_text(encoding="utf-8", errors="replace"))
            }
        return ids[path]

    problems = []
    for page in sorted(site_dir.rglob("*.html")):
        rel = page.relative_to(site_dir).as_posix()
        for match in _REF.finditer(page.read_text(encoding="utf-8", errors="replace")):
            url = html.unescape(match.group("url"))
            parts = urlsplit(url)
            if (
                parts.scheme
                or parts.netloc
                or url.startswith(("mailto:", "javascript:"))
            ):
                continue
            if not parts.path:  # an anchor on the same page
                target = page
            else:
                if parts.path.startswith("/"):  # the 404 page's links start at the root
                    path = posixpath.normpath(unquote(parts.path).lstrip("/") or ".")
                else:
                    path = posixpath.normpath(
                        posixpath.join(posixpath.dirname(rel), unquote(parts.path))
                    )
                target = site_dir / path
                if target.is_dir() or parts.path.endswith("/"):
                    target = target / "index.html"
            if not target.is_file():
                problems.append(
                    f"{rel}: <{match.group('tag')}> {url}: no file {target.relative_to(site_dir)}"
                )
            elif (
                parts.fragment
                and target.suffix == ".html"
                and unquote(parts.fragment) not in ids_of(target)
            ):
                problems.append(
                    f"{rel}: {url}: no anchor #{parts.fragment} in {target.relative_to(site_dir)}"
                )
    return problems


def test_the_link_checker_finds_a_missing_page_and_a_missing_anchor(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "index.html").write_text(
        '<h2 id="top">T</h2><a href="a/">a</a><a href="a/#x">x</a><a href="#top">t</a>'
        '<a href="https://example.org/">e</a><img src="figures/f.svg">',
        encoding="utf-8",
    )
    (tmp_path / "a" / "index.html").write_text(
        '<p id="x"></p><a href="../#nope">n</a><a href="../b/">b</a>', encoding="utf-8"
    )
    assert broken_internal_links(tmp_path) == [
        "a/index.html: ../#nope: no anchor #nope in index.html",
        "a/index.html: <a> ../b/: no file b/index.html",
        "index.html: <img> figures/f.svg: no file figures/f.svg",
    ]


def test_the_built_site_has_no_broken_internal_link_or_anchor():
    if not site_is_fresh(BUILT_SITE):
        pytest.skip(
            "site/ is missing or older than its sources: `mkdocs build --strict` first"
        )
    problems = broken_internal_links(BUILT_SITE)
    assert not problems, f"{len(problems)} broken:\n" + "\n".join(problems[:40])


# ---------------------------------------------------------------------------------------
# External links: listed, never fetched


def test_external_links_are_listed_once_at_info_and_never_fetched(
    tmp_path, caplog, monkeypatch
):
    def no_network(*args, **kwargs):
        raise AssertionError("an external link was fetched")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    (tmp_path / "p").mkdir()
    (tmp_path / "index.html").write_text(
        '<a href="https://arxiv.org/abs/1706.03762">paper</a>'
        '<a class="x" href="https://example.org/a?b=1&amp;c=2">q</a>'
        '<link rel="canonical" href="https://site.example/">'
        '<a href="p/">local</a><a href="https://site.example/p/">own</a>',
        encoding="utf-8",
    )
    for name in ("p/index.html", "p/b.html", "p/c.html", "p/d.html"):
        (tmp_path / name).write_text(
            "<a href='https://arxiv.org/abs/1706.03762'>again</a>", encoding="utf-8"
        )
    with caplog.at_level(logging.INFO, logger="mkdocs.hooks.literate"):
        links = offline.log_external_links(tmp_path, "https://site.example/")
    assert links == {
        "https://arxiv.org/abs/1706.03762": [
            "index.html",
            "p/b.html",
            "p/c.html",
            "p/d.html",
            "p/index.html",
        ],
        "https://example.org/a?b=1&c=2": ["index.html"],
    }
    records = [r for r in caplog.records if r.name == "mkdocs.hooks.literate"]
    assert [r.levelno for r in records] == [logging.INFO]
    assert records[0].getMessage() == (
        "external links (listed, not fetched): 2\n"
        "  https://arxiv.org/abs/1706.03762  (index.html, p/b.html, p/c.html, +2 more)\n"
        "  https://example.org/a?b=1&c=2  (index.html)"
    )
