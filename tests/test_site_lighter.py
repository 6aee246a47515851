"""The built site's chapters within their budgets of DOM nodes and bytes (issue 26, point 8:
literate/site/lighter.py), and folded code coloured in the browser as the build wrote it.

The site is `site/` when it is newer than its sources, as tests/test_site.py finds it: the
plain check skips without one (`mkdocs build --strict` first); the browser checks
(`readers`) use test_site's fixtures, which build one into a temporary directory.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from literate.site import lighter
from literate.site.copyable import nav_pages

import test_site

pytestmark = pytest.mark.site

# The budgets of the largest chapter, with what the build of 2026-12-06 measured (before
# issue 26's point 8: long-context 1,001 KB and 27,557 elements as served, 31,053 in
# Chromium).
# Issue 29 added chapter 10's MLA equations, YaRN's section and StreamingLLM's cache
# (+46 KB, most of it folded code): measured 406 KB (long-context/long-context).
MAX_HTML_KB = 420
MAX_ELEMENTS = 4_000  # as served (html.parser); measured: 3,610 (appendix/claims)
# In Chromium once KaTeX and Material's scripts ran, folds closed; measured: 10,353
# (moe/mixture-of-experts, 6,879 of them KaTeX's).
MAX_DOM_NODES = 12_000

CHAPTERS = [page.removesuffix(".md") for page in nav_pages() if page != "index.md"]

# The fixtures of the browser checks (test_site's, the same site and browser).
site_dir = test_site.site_dir
base_url = test_site.base_url
browser = test_site.browser
session = test_site.session


def _html(site: Path, chapter: str) -> str:
    return (site / chapter / "index.html").read_text(encoding="utf-8")


def measures(site: Path) -> dict[str, tuple[float, int]]:
    """Each chapter's HTML in KB and its element count, as served."""
    out = {}
    for chapter in CHAPTERS:
        text = _html(site, chapter)
        out[chapter] = (len(text.encode()) / 1024, lighter.count_elements(text))
    return out


def test_every_chapter_is_within_the_budgets() -> None:
    if not test_site.site_is_fresh(test_site.BUILT_SITE):
        pytest.skip(
            "site/ is missing or older than its sources: `mkdocs build --strict` first"
        )
    found = measures(test_site.BUILT_SITE)
    over = {
        chapter: f"{kb:.0f} KB, {elements} elements"
        for chapter, (kb, elements) in found.items()
        if kb > MAX_HTML_KB or elements > MAX_ELEMENTS
    }
    assert over == {}, f"over {MAX_HTML_KB} KB or {MAX_ELEMENTS} elements: {over}"


def _largest(site: Path) -> str:
    found = measures(site)
    return max(found, key=lambda chapter: found[chapter][0])


# The first folded code block whose fold a reader can reach (no closed fold around it).
_FOLDED = """() => Array.from(document.querySelectorAll('.md-content code[data-runs]'))
    .find(c => !c.closest('details').parentElement.closest('details:not([open])'))"""
# A block's children as (class, text) pieces, "" the class of a text node.
_PIECES = """code => Array.from(code.childNodes).map(n =>
    n.nodeType === 1 ? [n.className, n.textContent] : ['', n.textContent])"""


@pytest.mark.readers
def test_every_chapter_is_within_the_dom_budget_in_the_browser(session) -> None:
    """Each chapter, loaded with its formulas typeset, holds at most MAX_DOM_NODES
    elements."""
    found = {}
    for chapter in CHAPTERS:
        tab = session.open(f"/{chapter}/", wait_until="networkidle")
        found[chapter] = tab.page.evaluate(
            "() => document.getElementsByTagName('*').length"
        )
        assert tab.errors == [], tab.errors
        tab.page.close()
    over = {c: n for c, n in found.items() if n > MAX_DOM_NODES}
    assert over == {}, f"over {MAX_DOM_NODES} elements: {over}"


@pytest.mark.readers
def test_a_fold_opened_with_the_keyboard_gets_its_colours(
    session, site_dir: Path
) -> None:
    """In the largest chapter, a closed fold opened with the keyboard gets its code cut
    into the spans the build wrote (lighter.decode_runs, the script's twin), its text
    unchanged; before, the block is one text node."""
    chapter = _largest(site_dir)
    tab = session.open(f"/{chapter}/")
    page = tab.page
    handle = page.evaluate_handle(_FOLDED).as_element()
    assert handle is not None, f"{chapter}: no folded code block"
    runs, text = handle.get_attribute("data-runs"), handle.text_content()
    assert handle.evaluate("c => c.children.length") == 0  # plain text until opened
    summary = handle.evaluate_handle(
        "c => c.closest('details').querySelector('summary')"
    )
    summary.as_element().focus()
    page.keyboard.press("Enter")
    page.wait_for_function("c => !c.hasAttribute('data-runs')", arg=handle)
    pieces = [tuple(p) for p in handle.evaluate(_PIECES)]
    assert pieces == lighter.decode_runs(text, runs)
    assert handle.text_content() == text
    assert tab.errors == [], tab.errors

    # the runs and the text are the served ones
    served = _html(site_dir, chapter)
    block = next(
        m for m in lighter.BLOCK.finditer(served) if f'data-runs="{runs}"' in m[0]
    )
    assert html.unescape(lighter.code_text(block.group("inner"))) == text
    assert re.fullmatch(
        lighter.RUN.pattern + r"(?: " + lighter.RUN.pattern + ")*", runs
    )
