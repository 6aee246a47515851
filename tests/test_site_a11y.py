"""Every page as a reader first meets it, from one cold visit each: what it weighs, that it
fits a phone, and what axe-core finds in it in the light and in the dark scheme.

Each page is opened once, in a browser context of its own (an empty cache: a cold load),
at a phone's viewport (390 x 844) from a server that compresses text as static hosts do.
That one load gives the page's weight (the bytes the browser received, every request
counted), the phone checks (nothing scrolls sideways, figures fit) and, for two pages, a
screenshot; then the same page is widened to 1280 pixels, its collapsed blocks opened,
and axe-core (tests/vendor/axe-core, not part of the site) is run on it in the light
scheme, and after the palette toggle in the dark one. All pages load and run at once, in
their own renderer processes; the tests then read what each visit found.

The browser, the site and the rules for a missing browser are those of tests/test_site.py.
"""

from __future__ import annotations

import functools
import gzip
import http.server
import io
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from test_site import (  # noqa: F401  (browser and site_dir are fixtures used here)
    CHAPTER_1,
    LOCAL_HOST,
    PAGES,
    PALETTE_TOGGLE,
    ROOT,
    _EXTERNAL_URL,
    _QuietHandler,
    _QuietServer,
    browser,
    site_dir,
)

pytestmark = pytest.mark.site

AXE_JS = ROOT / "tests" / "vendor" / "axe-core" / "axe.min.js"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
# The heaviest page's cold load, in bytes received (1.5 MB, decimal megabytes).
WEIGHT_BUDGET = 1_500_000
SIDE_BY_SIDE = "/eras/side-by-side/"
SCREENSHOTS = {CHAPTER_1: "chapter-1", SIDE_BY_SIDE: "side-by-side"}
FAILING_IMPACTS = ("serious", "critical")

# What axe reports and this site cannot change from its CSS, its pages or its theme
# overrides: rule id -> (selector of the elements left out of that rule only, why). Every
# other element, and every other rule, is checked.
AXE_EXCLUDED: dict[str, tuple[str, str]] = {
    "link-name": (
        ".md-annotation__index",
        "Material's code annotation marker, made by its script: an <a tabindex=-1> whose "
        "number is CSS generated content, inside the <aside tabindex=0> a keyboard "
        "reaches; no override of ours can give it text",
    ),
    "scrollable-region-focusable": (
        ".md-typeset__scrollwrap, div.arithmatex, .highlight-ipynb",
        "boxes that scroll sideways when their content is wider than the column: the "
        "wrapper Material's script puts around every table, the display-math block "
        "(Material's CSS makes it scroll) and mkdocs-jupyter's code cell. Making them "
        "focusable takes a tabindex set by a script (Material does it for code blocks "
        "only); CSS cannot",
    ),
}

# The rules that read colour: in the dark scheme only these can find anything new, since
# the palette toggle changes colours and nothing else of the page.
COLOUR_RULES = ["color-contrast", "link-in-text-block"]


# ---------------------------------------------------------------------------------------
# A static host: the built site, text compressed


class _StaticHostHandler(_QuietHandler):
    """Serves the site as a static host does: text (HTML, CSS, JS, JSON, SVG) gzip-encoded
    when the browser accepts it, so that what a page weighs is what a reader downloads."""

    COMPRESSED = (".html", ".css", ".js", ".json", ".svg", ".xml", ".txt", ".py", ".ipynb")

    @staticmethod
    @functools.lru_cache(maxsize=256)
    def _gzipped(path: str, mtime: float) -> bytes:
        return gzip.compress(Path(path).read_bytes(), compresslevel=6, mtime=0)

    def send_head(self):  # noqa: N802  (the base class's name)
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            if not urlsplit(self.path).path.endswith("/"):
                return super().send_head()  # the base class's redirect to the slash
            path = path / "index.html"
        accepted = "gzip" in self.headers.get("Accept-Encoding", "")
        if not (accepted and path.suffix in self.COMPRESSED and path.is_file()):
            return super().send_head()
        body = self._gzipped(str(path), path.stat().st_mtime)
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


@pytest.fixture(scope="module")
def host_url(site_dir: Path) -> Iterator[str]:
    server = _QuietServer((LOCAL_HOST, 0), functools.partial(_StaticHostHandler, directory=str(site_dir)))
    thread = threading.Thread(target=server.serve_forever, name="static-host", daemon=True)
    thread.start()
    try:
        yield f"http://{LOCAL_HOST}:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# ---------------------------------------------------------------------------------------
# One cold visit per page


@dataclass
class Visit:
    path: str
    received: dict[str, int] = field(default_factory=dict)  # URL -> body bytes received
    phone: dict[str, Any] = field(default_factory=dict)
    screenshot: Path | None = None
    axe: dict[str, list[dict]] = field(default_factory=dict)  # scheme -> violations

    @property
    def weight(self) -> int:
        return sum(self.received.values())


# At the phone's width: the page's own width against the viewport's, what sticks out of
# it (outside any box that scrolls or clips), and every displayed figure's box.
_PHONE = """() => {
    const vw = document.documentElement.clientWidth;
    const clips = el => { for (let a = el.parentElement; a; a = a.parentElement) {
        if (getComputedStyle(a).overflowX !== 'visible') return true; } return false; };
    const outside = Array.from(document.body.querySelectorAll('*')).filter(el => {
        const r = el.getBoundingClientRect();
        return r.width > 0 && r.right > vw + 1 && !clips(el);
    }).slice(0, 5).map(el => el.tagName.toLowerCase() + '.' + Array.from(el.classList).join('.'));
    const figures = Array.from(document.querySelectorAll('.md-content img.figure'))
        .filter(img => img.getClientRects().length && getComputedStyle(img).display !== 'none')
        .map(img => { const r = img.getBoundingClientRect();
            return {src: img.getAttribute('src'), left: r.left, right: r.right, width: r.width,
                    natural: img.naturalWidth,
                    column: img.closest('.md-content__inner').getBoundingClientRect().width}; });
    return {viewport: vw, scrollWidth: document.documentElement.scrollWidth, outside, figures};
}"""

# Before axe runs: every collapsed block is opened (proofs and solutions are checked too),
# and a code block or a formula whose every style (the colour, font and highlight of each
# of its tokens) an earlier one already showed on the same background becomes its own text in the block's colour.
# Contrast depends on nothing else, and a long page has thousands of such tokens: axe then
# checks every style once instead of every token.
_PREPARE = """() => {
    document.querySelectorAll('details').forEach(d => { d.open = true; });
    const styleOf = el => { const cs = getComputedStyle(el);
        return [cs.color, cs.fontSize, cs.fontWeight, !!el.closest('.hll')].join('|'); };
    const shown = new Set();
    let flattened = 0;
    const blocks = document.querySelectorAll('.md-typeset pre > code, .highlight-ipynb > pre, .katex-html');
    for (const block of blocks) {
        const where = [getComputedStyle(block.parentElement).backgroundColor,
                       getComputedStyle(block).color];
        const styles = Array.from(block.querySelectorAll('*'))
            .filter(el => !el.children.length && el.textContent.trim())
            .map(el => where.concat(styleOf(el)).join('|'));
        if (styles.some(k => !shown.has(k))) { styles.forEach(k => shown.add(k)); continue; }
        if (block.querySelector('.md-annotation')) continue;
        block.replaceChildren(block.textContent);
        flattened++;
    }
    return flattened;
}"""

# Starts axe on the page and leaves its promise in window.__axe (so that several pages run
# at once); _AXE_RESULT waits for it. Violations on elements an exclusion names are dropped.
_AXE_START = """({excluded, rules}) => {
    const options = {resultTypes: ['violations'], elementRef: true};
    if (rules) options.runOnly = {type: 'rule', values: rules};
    window.__axe = axe.run(document, options).then(result => result.violations.map(v => ({
        id: v.id, impact: v.impact, help: v.help,
        nodes: v.nodes
            .filter(n => !(excluded[v.id] && n.element && n.element.matches(excluded[v.id])))
            .map(n => ({target: n.target.join(' '), html: n.html.slice(0, 160),
                        summary: (n.failureSummary || '').slice(0, 300)})),
    })).filter(v => v.nodes.length));
}"""
_AXE_RESULT = "() => window.__axe"


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", header[16:24])


class _ColdLoad:
    """A page loading in a fresh context at the phone's viewport."""

    def __init__(self, browser, url: str, path: str):
        self.visit = Visit(path)
        self.requests: list[Any] = []
        self.errors: list[str] = []
        self.context = browser.new_context(color_scheme="light", viewport=PHONE)
        self.context.route(_EXTERNAL_URL, lambda route: route.abort())
        self.context.on("requestfinished", lambda request: self.requests.append(request))
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.response = self.page.goto(url + path, wait_until="commit")


# Pages visited at once: each loads and runs axe in its own renderer process.
AT_ONCE = 4
# axe-core's contrast check is several times faster on an element inside the viewport; the
# page is checked in a viewport as tall as the page (up to this height).
TALLEST = 30_000


def _visit_all(browser, url: str, paths: list[str], shots: Path) -> Iterator[Visit]:
    axe_js = AXE_JS.read_text(encoding="utf-8")
    excluded = {rule: selector for rule, (selector, _) in AXE_EXCLUDED.items()}
    loads = [_ColdLoad(browser, url, path) for path in paths]
    try:
        for load in loads:  # loaded: weigh, measure at the phone's width, start axe (light)
            assert load.response is not None and load.response.status == 200, load.visit.path
            load.page.wait_for_load_state("networkidle")
            load.visit.received = {r.url: r.sizes()["responseBodySize"] for r in load.requests}
            load.visit.phone = load.page.evaluate(_PHONE)
            if load.visit.path in SCREENSHOTS:
                load.visit.screenshot = shots / f"{SCREENSHOTS[load.visit.path]}-390.png"
                load.page.screenshot(path=load.visit.screenshot)
                load.visit.phone["h1"] = load.page.locator(".md-content h1").first.bounding_box()
            load.page.set_viewport_size(DESKTOP)
            load.page.evaluate(_PREPARE)
            height = load.page.evaluate("document.documentElement.scrollHeight")
            load.page.set_viewport_size({"width": DESKTOP["width"], "height": min(height, TALLEST)})
            load.page.add_script_tag(content=axe_js)
            load.page.evaluate(_AXE_START, {"excluded": excluded, "rules": None})
        for load in loads:  # light done: switch to dark with the palette toggle, start axe
            load.visit.axe["light"] = load.page.evaluate(_AXE_RESULT)
            load.page.locator(PALETTE_TOGGLE).filter(visible=True).first.click()
            load.page.wait_for_selector('body[data-md-color-scheme="slate"]', timeout=5000)
            load.page.evaluate(_AXE_START, {"excluded": excluded, "rules": COLOUR_RULES})
        for load in loads:
            load.visit.axe["dark"] = load.page.evaluate(_AXE_RESULT)
            assert load.errors == [], f"{load.visit.path}: {load.errors}"
            yield load.visit
    finally:
        for load in loads:
            load.context.close()


@pytest.fixture(scope="module")
def visits(browser, host_url: str, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Visit]:
    """Visit every page once, a few at a time, then look up what a visit found."""
    shots = tmp_path_factory.mktemp("screenshots")
    found: dict[str, Visit] = {}
    for start in range(0, len(PAGES), AT_ONCE):
        for visit in _visit_all(browser, host_url, PAGES[start:start + AT_ONCE], shots):
            found[visit.path] = visit
    return found.__getitem__


# ---------------------------------------------------------------------------------------
# The tests


def _describe(violations: list[dict]) -> str:
    lines = []
    for v in violations:
        lines.append(f"{v['impact']} {v['id']} ({v['help']}): {len(v['nodes'])} element(s)")
        for n in v["nodes"][:3]:
            lines.append(f"    {n['target']}: {n['html']}\n      {n['summary']}")
    return "\n  ".join(lines)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("path", PAGES)
def test_axe_finds_nothing_serious(visits, path: str, scheme: str) -> None:
    violations = [v for v in visits(path).axe[scheme] if v["impact"] in FAILING_IMPACTS]
    assert violations == [], f"{path} ({scheme}): axe-core finds\n  {_describe(violations)}"


@pytest.mark.parametrize("path", PAGES)
def test_nothing_scrolls_sideways_on_a_phone(visits, path: str) -> None:
    phone = visits(path).phone
    assert phone["viewport"] == PHONE["width"]
    assert phone["scrollWidth"] <= phone["viewport"], (
        f"{path}: {phone['scrollWidth']} pixels wide at a {phone['viewport']}-pixel viewport; "
        f"sticking out: {phone['outside']}")
    for fig in phone["figures"]:
        assert fig["left"] >= 0 and fig["right"] <= phone["viewport"], f"{path}: {fig}"
        assert fig["width"] <= fig["column"] + 0.5, f"{path}: figure wider than its column: {fig}"


def test_figures_scale_down_to_a_phone(visits) -> None:
    """A figure drawn wider than a phone is shown at the column's width, not cut."""
    figures = [fig for path in PAGES for fig in visits(path).phone["figures"]]
    assert figures, "no figure displayed on any page"
    scaled = [fig for fig in figures if fig["natural"] > fig["column"]]
    assert scaled, "no figure is wider than a phone's column: nothing here tests scaling"
    for fig in scaled:
        assert abs(fig["width"] - fig["column"]) <= 1, f"not scaled to the column: {fig}"


@pytest.mark.parametrize("path", list(SCREENSHOTS))
def test_phone_screenshot(visits, path: str) -> None:
    """The screenshot is the phone's width, and the page's title lies wholly inside it."""
    visit = visits(path)
    assert visit.screenshot is not None and visit.screenshot.is_file()
    assert _png_size(visit.screenshot) == (PHONE["width"], PHONE["height"]), visit.screenshot
    h1 = visit.phone["h1"]
    assert h1 is not None, f"{path}: no h1"
    assert h1["x"] >= 0 and h1["x"] + h1["width"] <= PHONE["width"], f"{path}: h1 at {h1}"
    assert h1["y"] >= 0 and h1["y"] + h1["height"] <= PHONE["height"], f"{path}: h1 at {h1}"


def test_page_weight(visits, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture) -> None:
    """The bytes a cold load of each page receives (every request, bodies as sent); the
    heaviest is within the budget. Every page's weight is printed."""
    weights = sorted(((visits(p).weight, p) for p in PAGES), reverse=True)
    heaviest, heaviest_path = weights[0]
    top = sorted(visits(heaviest_path).received.items(), key=lambda kv: -kv[1])[:5]
    table = "\n".join(f"{w / 1e6:8.3f} MB  {p}" for w, p in weights) + (
        f"\nheaviest: {heaviest_path}, {heaviest / 1e6:.3f} MB of {WEIGHT_BUDGET / 1e6:.1f} MB;"
        " its largest responses:\n" + "\n".join(f"{s / 1e3:10.1f} kB  {u}" for u, s in top))
    request.node.add_report_section("call", "page weight (cold load, compressed as served)", table)
    with capsys.disabled():
        print("\npage weight, cold load:\n" + table)
    assert all(w > 0 for w, _ in weights)
    assert heaviest <= WEIGHT_BUDGET, f"{heaviest_path} weighs {heaviest} bytes:\n{table}"
