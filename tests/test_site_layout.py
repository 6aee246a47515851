"""The chapters' layout as a reader scrolls it, measured in the built site: a figure comes
early and often, a figure's smallest text can be read on a phone, no figure is taller
than the window and each opens full size, and no table is wider than its column.

Every chapter page (front matter `chapter:`) is opened once, all at once, in the light
scheme with its collapsed blocks closed (as a reader first sees it): measured at 1280 x
900, then the same tab narrowed to a phone's 390 x 844 and measured again. Each figure's
smallest text is read from the figure registry (the SVGs draw glyphs as paths), in a
process of its own that draws every figure while the browser loads the pages.

The browser, the site and the rules for a missing browser are those of tests/test_site.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from test_site import (  # noqa: F401  (browser and site_dir are fixtures used here)
    _EXTERNAL_URL,
    ROOT,
    browser,
    serving,
    site_dir,
)

pytestmark = [pytest.mark.site, pytest.mark.readers]

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
# A figure's top within the first two screens; never more than five screens of page
# without one (1280 x 900).
FIRST_FIGURE_SCREENS = 2
LONGEST_GAP_SCREENS = 5
# The smallest text a figure shows on a phone, in CSS pixels.
SMALLEST_TEXT_PX = 9.0


def chapter_pages(docs: Path = ROOT / "docs") -> dict[str, int]:
    """URL path -> chapter number, for every page whose front matter has `chapter:`."""
    pages = {}
    for md in sorted(docs.rglob("*.md")):
        text = md.read_text(encoding="utf-8")
        front = re.match(r"---\n(.*?)\n---\n", text, re.S)
        number = front and re.search(r"^chapter:\s*(\d+)\s*$", front.group(1), re.M)
        if number:
            page = md.relative_to(docs).with_suffix("").as_posix()
            url = "/" if page == "index" else f"/{page.removesuffix('/index')}/"
            pages[url] = int(number.group(1))
    return dict(sorted(pages.items(), key=lambda item: item[1]))


CHAPTERS = chapter_pages()
# The quick path (chapter 0) is a summary of the chapters, in prose and code: it has no
# figure of its own (each figure is shown once, in the chapter that teaches it), so it
# is held to the figure rhythm of the chapters only where it has figures.
NUMBERED = [path for path, number in CHAPTERS.items() if number >= 1]


# ---------------------------------------------------------------------------------------
# Each figure's smallest text, from the registry


# Run in a process of its own (matplotlib's pyplot is not for threads, and drawing every
# figure takes seconds the browser spends loading): for each figure, the smallest font
# size of the text it draws, in points, and its width in inches.
_SMALLEST_TEXT = r"""
import json, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.text import Text
from literate.figures import FIGURES

def drawn(fig):
    fig.draw_without_rendering()  # lays the ticks out, draws no pixel
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip():
            continue
        ax = t.axes
        if ax is not None and not ax.axison and any(  # an axis that is not drawn
            t in [*a.get_majorticklabels(), *a.get_minorticklabels(), a.label]
            for a in (ax.xaxis, ax.yaxis)):
            continue
        yield t

out = {}
for name, spec in FIGURES.items():
    fig = spec.draw(language="en", theme="light")
    texts = list(drawn(fig))
    smallest = min(t.get_fontsize() for t in texts)
    out[name] = {"pt": smallest, "inches": float(fig.get_size_inches()[0]),
                 "text": [t.get_text()[:30] for t in texts if t.get_fontsize() == smallest][:3]}
    plt.close(fig)
print(json.dumps(out))
"""


def _start_smallest_text() -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _SMALLEST_TEXT],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish_smallest_text(proc: subprocess.Popen) -> dict[str, dict[str, Any]]:
    out, err = proc.communicate(timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"drawing the figures failed ({proc.returncode}):\n{err}")
    return json.loads(out)


def svg_width_pt(site_dir: Path, name: str) -> float:
    """The natural width of a figure's SVG (its `width` attribute, in points)."""
    head = (site_dir / "figures" / f"{name}-light.svg").read_text()[:2000]
    width = re.search(r'<svg[^>]*\swidth="([\d.]+)pt"', head)
    assert width, f"{name}: no width in pt in its SVG"
    return float(width.group(1))


# ---------------------------------------------------------------------------------------
# The visits


# Waits for every image, and for the fonts. (Not for animation frames: a tab in the
# background gets none. Reading a box lays the page out first.)
_SETTLED = """async () => {
    await Promise.all(Array.from(document.images).map(i => i.complete ? null
        : new Promise(done => { i.addEventListener('load', done); i.addEventListener('error', done); })));
    await document.fonts.ready;
}"""

# In the content `article`: every figure (its name, link, and, when displayed, its box
# from the page's top), the article's bottom, and every displayed table against the box
# that holds it.
_MEASURE = """() => {
    const article = document.querySelector('.md-content article');
    const y = window.scrollY;
    const shown = el => el.checkVisibility() && el.getClientRects().length > 0;
    const figures = Array.from(article.querySelectorAll('img.figure')).map(img => {
        const r = img.getBoundingClientRect(), link = img.closest('a');
        const src = img.getAttribute('src');
        return {src, name: (src.match(/figures\\/([\\w-]+?)-(?:light|dark)\\.svg/) || [])[1],
                shown: shown(img), top: r.top + y, bottom: r.bottom + y,
                width: r.width, height: r.height,
                link: link ? {cls: link.className, href: link.getAttribute('href')} : null};
    });
    const tables = Array.from(article.querySelectorAll('table')).filter(shown).map(t => {
        const box = t.closest('.md-typeset__scrollwrap') || t.parentElement;
        const head = t.querySelector('tr');
        return {scrollWidth: t.scrollWidth, clientWidth: box.clientWidth,
                head: head ? head.innerText.replace(/\\s+/g, ' ').slice(0, 60) : ''};
    });
    return {viewport: document.documentElement.clientWidth, figures, tables,
            top: article.getBoundingClientRect().top + y,
            bottom: article.getBoundingClientRect().bottom + y};
}"""


@dataclass
class Layout:
    path: str
    desktop: dict[str, Any] = field(default_factory=dict)
    phone: dict[str, Any] = field(default_factory=dict)
    # figure name -> {"pt": smallest font, "inches": width}, for the whole registry
    smallest_text: dict[str, dict[str, Any]] = field(default_factory=dict)


@pytest.fixture(scope="module")
def layouts(browser, site_dir: Path) -> Iterator[dict[str, Layout]]:
    drawing = _start_smallest_text()
    try:
        with serving(site_dir, name="layout-server") as url:
            context = browser.new_context(color_scheme="light", viewport=DESKTOP)
            try:
                context.route(_EXTERNAL_URL, lambda route: route.abort())
                started = {}
                for path in CHAPTERS:  # all at once, each in its own tab
                    page = context.new_page()
                    started[path] = (page, page.goto(url + path, wait_until="commit"))
                found = {}
                for path, (page, response) in started.items():
                    assert response is not None and response.status == 200, path
                    page.wait_for_load_state("networkidle")
                    page.evaluate(_SETTLED)
                    found[path] = Layout(path, desktop=page.evaluate(_MEASURE))
                for path, (page, _) in started.items():
                    page.set_viewport_size(PHONE)
                for path, (page, _) in started.items():
                    page.evaluate(_SETTLED)
                    found[path].phone = page.evaluate(_MEASURE)
            finally:
                context.close()
        smallest = _finish_smallest_text(drawing)
    finally:
        if drawing.poll() is None:
            drawing.kill()
            drawing.wait()
    for layout in found.values():
        layout.smallest_text = smallest
    yield found


def _shown(figures: list[dict]) -> list[dict]:
    return [f for f in figures if f["shown"]]


# ---------------------------------------------------------------------------------------
# The tests


@pytest.mark.parametrize("path", NUMBERED)
def test_a_figure_comes_early_and_often(layouts, path: str) -> None:
    """At 1280 x 900, folds closed: a figure's top within the first two screens, and no
    stretch of page longer than five screens without one (from the top to the first
    figure, between two figures' tops, from the last to the article's bottom)."""
    d = layouts[path].desktop
    assert d["viewport"] == DESKTOP["width"]
    screen = DESKTOP["height"]
    figures = _shown(d["figures"])
    assert figures, f"{path}: no figure displayed"
    tops = sorted(f["top"] for f in figures)
    marks = [0.0, *tops, d["bottom"]]
    gaps = [(b - a) / screen for a, b in zip(marks, marks[1:])]
    where = ", ".join(
        f"{f['name']} at {f['top'] / screen:.1f}"
        for f in sorted(figures, key=lambda f: f["top"])
    )
    assert tops[0] < FIRST_FIGURE_SCREENS * screen, (
        f"{path}: the first figure's top is {tops[0] / screen:.2f} screens down "
        f"(figures, in screens: {where})"
    )
    assert max(gaps) <= LONGEST_GAP_SCREENS, (
        f"{path}: {max(gaps):.2f} screens without a figure, of "
        f"{d['bottom'] / screen:.1f} (figures, in screens: {where}; "
        f"bottom {d['bottom'] / screen:.1f})"
    )


@pytest.mark.parametrize("path", list(CHAPTERS))
def test_figure_text_is_readable_on_a_phone(layouts, site_dir: Path, path: str) -> None:
    """At 390 x 844, the smallest text of every displayed figure renders at 9 pixels or
    more: its size in points (from the registry) times the scale the figure is shown at
    (its rendered width over its natural width, the figure's width in points)."""
    layout = layouts[path]
    assert layout.phone["viewport"] <= PHONE["width"]
    rows, small = [], []
    for fig in _shown(layout.phone["figures"]):
        text = layout.smallest_text[fig["name"]]
        natural_pt = text["inches"] * 72
        assert abs(svg_width_pt(site_dir, fig["name"]) - natural_pt) < 1, fig["name"]
        px = text["pt"] * fig["width"] / natural_pt
        row = (
            f"{fig['name']}: {text['pt']:g} pt at {fig['width']:.0f} px -> {px:.1f} px"
        )
        rows.append(row)
        if px < SMALLEST_TEXT_PX:
            small.append(f"{row} {text['text']}")
    assert small == [], (
        f"{path}: figure text under {SMALLEST_TEXT_PX:g} px at 390:\n  "
        + "\n  ".join(small)
        + "\n(every figure: "
        + "; ".join(rows)
        + ")"
    )


@pytest.mark.parametrize("path", list(CHAPTERS))
def test_every_figure_fits_the_window_and_opens_full_size(layouts, path: str) -> None:
    """At 1280 x 900 no displayed figure is taller than the window, and every figure (both
    schemes' variants) is a link to its own SVG, to open it full size."""
    figures = layouts[path].desktop["figures"]
    tall = [
        f"{f['name']}: {f['height']:.0f} px"
        for f in _shown(figures)
        if f["height"] > DESKTOP["height"]
    ]
    assert tall == [], f"{path}: figures taller than the window: {tall}"
    unlinked = [
        f"{f['src']}: {f['link']}"
        for f in figures
        if f["link"] is None
        or "figure-link" not in f["link"]["cls"].split()
        or f["link"]["href"] != f["src"].split("#")[0]
    ]
    assert unlinked == [], f"{path}: figures not linked to their SVG: {unlinked}"


@pytest.mark.parametrize("path", list(CHAPTERS))
def test_no_table_is_wider_than_its_column(layouts, path: str) -> None:
    """At 1280 x 900, folds closed, every displayed table fits the box Material wraps it
    in (it would scroll sideways otherwise)."""
    wide = [
        f"{t['scrollWidth']} px in {t['clientWidth']} px: {t['head']!r}"
        for t in layouts[path].desktop["tables"]
        if t["scrollWidth"] > t["clientWidth"] + 1
    ]
    assert wide == [], f"{path}: tables wider than their column:\n  " + "\n  ".join(
        wide
    )
