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
import io
import struct
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from test_site import (  # noqa: F401  (browser and site_dir are fixtures used here)
    _EXTERNAL_URL,
    CHAPTER_1,
    PAGES,
    PALETTE_TOGGLE,
    ROOT,
    _QuietHandler,
    browser,
    serving,
    site_dir,
)

pytestmark = [pytest.mark.site, pytest.mark.readers]

AXE_JS = ROOT / "tests" / "vendor" / "axe-core" / "axe.min.js"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
# The heaviest page's cold load, in bytes received (1.5 MB, decimal megabytes).
WEIGHT_BUDGET = 1_500_000
SIDE_BY_SIDE = "/eras/side-by-side/"
SCREENSHOTS = {CHAPTER_1: "chapter-1", SIDE_BY_SIDE: "side-by-side"}
FAILING_IMPACTS = ("serious", "critical")
SCHEMES = ("light", "dark")
# The rules that read colour, each run on one element per style (below).
COLOUR_RULES = ("color-contrast", "link-in-text-block")


# ---------------------------------------------------------------------------------------
# A static host: the built site, text compressed


class _StaticHostHandler(_QuietHandler):
    """Serves the site as a static host does: text (HTML, CSS, JS, JSON, SVG) gzip-encoded
    when the browser accepts it, so that what a page weighs is what a reader downloads."""

    COMPRESSED = (
        ".html",
        ".css",
        ".js",
        ".json",
        ".svg",
        ".xml",
        ".txt",
        ".py",
        ".ipynb",
    )

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
    with serving(site_dir, _StaticHostHandler, "static-host") as url:
        yield url


# ---------------------------------------------------------------------------------------
# One cold visit per page


@dataclass
class Visit:
    path: str
    status: int = 0
    errors: list[str] = field(default_factory=list)  # uncaught exceptions in the page
    received: dict[str, int] = field(default_factory=dict)  # URL -> body bytes received
    phone: dict[str, Any] = field(default_factory=dict)
    screenshot: Path | None = None
    axe: dict[str, list[dict]] = field(default_factory=dict)  # scheme -> violations
    # scheme -> the rules run, and how many elements the colour rules stand for
    checked: dict[str, dict[str, Any]] = field(default_factory=dict)
    flattened: int = (
        0  # code blocks and formulas made plain text before axe ran (_FLATTEN)
    )

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
    const column = document.querySelector('.md-content__inner').getBoundingClientRect().width;
    const cells = Array.from(document.querySelectorAll('.jupyter-wrapper .jp-InputArea-editor'))
        .map(el => el.getBoundingClientRect().width);
    const figures = Array.from(document.querySelectorAll(
            '.md-content img.figure, .jupyter-wrapper .jp-RenderedImage img'))
        .filter(img => img.getClientRects().length && getComputedStyle(img).display !== 'none')
        .map(img => { const r = img.getBoundingClientRect();
            return {src: img.getAttribute('src'), left: r.left, right: r.right, width: r.width,
                    natural: img.naturalWidth,
                    column}; });
    return {viewport: vw, scrollWidth: document.documentElement.scrollWidth, outside, figures,
            cells, column};
}"""

# Every collapsed block opened (proofs and solutions are checked too), after two frames:
# what a ResizeObserver does about a box that changed size is done by then.
_OPEN_BLOCKS = """() => {
    document.querySelectorAll('details').forEach(d => { d.open = true; });
    return new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
}"""

# At the desktop's width, every block open, before axe-core runs: a code block or a
# formula each of whose tokens' styles, in both schemes, an earlier block of the page
# showed already on the same background is made plain text (its tokens' text, in the
# block's colour). Each style keeps being checked where it first appears, and what is left
# is a page of a few thousand elements instead of tens of thousands: every rule of axe-core
# walks every element, and the page's code and formula tokens are most of them. A style
# is the token's colour, size and weight, whether it sits on a highlighted line, and the
# block's own colour and background. Links in a code block (its line anchors) are kept,
# as is a block holding a code annotation; a formula's markup that screen readers read
# (KaTeX's MathML) is not touched: only its drawn, aria-hidden copy is. Returns how many
# blocks were made plain.
_FLATTEN = """() => {
    const body = document.body;
    const scheme = body.getAttribute('data-md-color-scheme');
    const blocks = Array.from(document.querySelectorAll(
        '.md-typeset pre > code, .highlight-ipynb > pre, .katex-html'));
    const keys = blocks.map(() => []);
    for (const shown of ['default', 'slate']) {
        body.setAttribute('data-md-color-scheme', shown);
        blocks.forEach((block, i) => {
            const where = [getComputedStyle(block.parentElement).backgroundColor,
                           getComputedStyle(block).color];
            const tokens = Array.from(block.querySelectorAll('*'))
                .filter(el => !el.children.length && el.textContent.trim());
            tokens.forEach((el, j) => { const cs = getComputedStyle(el);
                keys[i][j] = (keys[i][j] || '') + [shown, ...where, cs.color, cs.fontSize,
                    cs.fontWeight, !!el.closest('.hll')].join('|') + ' '; });
        });
    }
    body.setAttribute('data-md-color-scheme', scheme);
    const seen = new Set();
    let flattened = 0;
    blocks.forEach((block, i) => {
        if (keys[i].some(k => !seen.has(k))) { keys[i].forEach(k => seen.add(k)); return; }
        if (block.querySelector('.md-annotation')) return;
        block.replaceChildren(...Array.from(block.childNodes).map(node =>
            node.nodeType === 1 && node.tagName !== 'A'
                ? document.createTextNode(node.textContent) : node));
        flattened++;
    });
    return flattened;
}"""

# Still at the phone's width, every block open: the boxes of the content that scroll
# sideways (by more than axe-core's 13-pixel margin) and that a keyboard cannot reach,
# neither the box nor anything in it being focusable (axe's scrollable-region-focusable,
# at the width where most boxes scroll).
_UNREACHABLE = """() => {
    const focusable = "a[href], button, input, select, textarea, summary, " +
        "[tabindex]:not([tabindex='-1'])";
    return Array.from(document.querySelectorAll('.md-content *')).filter(el => {
        if (el.scrollWidth <= el.clientWidth + 13) return false;
        const overflow = getComputedStyle(el).overflowX;
        if (overflow !== 'auto' && overflow !== 'scroll') return false;
        return !el.matches(focusable) && !el.querySelector(focusable);
    }).slice(0, 5).map(el => el.tagName.toLowerCase() + '.' + Array.from(el.classList).join('.'));
}"""

# Once per page, after axe-core is injected: the rules of axe's default run that can
# report a serious or critical violation (a rule's every result has the rule's impact:
# axe sets it so), the others turned off; and the two colour rules made to check one
# element per style.
#
# What axe-core's colour rules read of a text, and so the only way two texts can differ
# for them: its colour, size, weight, shadow and fill, and every background behind it up
# to the first opaque one (colour, image, opacity, filter, blending); for a link in a
# line of text (link-in-text-block), also how the link is set off from its line (its
# decoration, border, background, style) and that line's colour and weight. Of the
# elements a colour rule would check (its own selector and `matches`, in document order),
# it checks the first two of each style whose own text has a letter or a digit (axe
# leaves a text of punctuation or symbols alone undecided) and the first of the style if
# it has none: a long page has thousands of code and formula tokens, and a few dozen
# styles. What this cannot tell apart: a text over something drawn behind it that is not
# its ancestor (a positioned box; the page has none in its text).
_AXE_SETUP = r"""([failing, colourRules]) => {
    const rules = axe._audit.rules;
    window.__axeSkipped = Object.fromEntries(rules
        .filter(r => !failing.includes(r.impact)).map(r => [r.id, {enabled: false}]));
    const behind = el => { const layers = []; let opacity = 1;
        for (let a = el; a; a = a.parentElement) {
            const cs = getComputedStyle(a);
            opacity *= parseFloat(cs.opacity);
            const image = cs.backgroundImage !== 'none';
            layers.push([cs.backgroundColor, image, cs.filter, cs.mixBlendMode].join(' '));
            if (image || /^rgb\(/.test(cs.backgroundColor)) break;
        }
        return layers.join(' > ') + ' @ ' + opacity; };
    const look = (el, props) => { const cs = getComputedStyle(el);
        return props.map(p => cs.getPropertyValue(p)).join(' '); };
    const TEXT = ['color', 'font-size', 'font-weight', 'text-shadow',
                  '-webkit-text-fill-color', '-webkit-text-stroke-width',
                  '-webkit-text-stroke-color'];
    const LINK = [...TEXT, 'text-decoration-line', 'text-decoration-style',
                  'text-decoration-color', 'text-decoration-thickness', 'border-bottom-style',
                  'border-bottom-width', 'border-bottom-color', 'background-color',
                  'font-style', 'outline-style'];
    const line = el => { let a = el.parentElement;
        while (a && getComputedStyle(a).display.startsWith('inline')) a = a.parentElement;
        return a; };
    const style = {
        'color-contrast': el => look(el, TEXT) + ' | ' + behind(el),
        'link-in-text-block': el => [look(el, LINK), line(el) ? look(line(el), TEXT) : '',
                                     behind(el)].join(' | '),
    };
    const ownText = el => Array.from(el.childNodes).filter(c => c.nodeType === 3)
        .map(c => c.data).join('');
    const control = el => ['INPUT', 'SELECT', 'TEXTAREA'].includes(el.nodeName);
    // color-contrast's own `matches` asks of any other element a child text that is not
    // white space; asking it first here is the same test, only quicker
    const candidate = {
        'color-contrast': el => control(el) || /\S/.test(ownText(el)),
        'link-in-text-block': el => true,
    };
    const words = el => /[\p{L}\p{N}]/u.test(control(el) ? el.value : ownText(el) || el.innerText);
    // Reset by each run: rule -> style -> [checked with words, checked without]; rule ->
    // {checked: elements axe checked, skipped: elements of a style checked already}
    window.__axeStyles = {};
    window.__axeCount = {};
    axe.configure({rules: colourRules.map(id => {
        const matches = rules.find(r => r.id === id).matches;
        return {id, matches: function (node, virtualNode, context) {
            if (!candidate[id](node)) return false;
            const styles = window.__axeStyles[id] = window.__axeStyles[id] || {};
            const key = style[id](node);
            const seen = styles[key] = styles[key] || (window.__axeKnown[id].has(key) ? [2, 0] : [0, 0]);
            const worded = words(node);
            // a style checked enough, here or on a page before: axe's `matches` is not
            // asked (it is the slow part), nor the check (a first check of a colour
            // rule maps the whole page: the slowest part)
            const wanted = worded ? seen[0] < 2 : seen[0] + seen[1] === 0;
            const count = what => { const c = window.__axeCount[id] = window.__axeCount[id]
                || {checked: 0, skipped: 0}; c[what]++; };
            if (!wanted) { count('skipped'); return false; }
            if (!matches.call(this, node, virtualNode, context)) return false;
            count('checked');
            seen[worded ? 0 : 1]++;
            return true;
        }};
    })});
    return rules.filter(r => failing.includes(r.impact) && r.enabled).map(r => r.id);
}"""

# Starts axe on the page and leaves its promise in window.__axe (so that several pages run
# at once); _AXE_RESULT waits for it, with how many elements the colour rules stood for.
_AXE_START = """([known, only]) => {
    window.__axeKnown = Object.fromEntries(Object.entries(known).map(([id, keys]) => [id, new Set(keys)]));
    window.__axeStyles = {};
    window.__axeCount = {};
    const options = {resultTypes: ['violations'], rules: window.__axeSkipped};
    if (only) options.runOnly = {type: 'rule', values: only};
    window.__axe = axe.run(document, options).then(result => result.violations.map(v => ({
        id: v.id, impact: v.impact, help: v.help,
        nodes: v.nodes.map(n => ({target: n.target.join(' '), html: n.html.slice(0, 160),
                                  summary: (n.failureSummary || '').slice(0, 300)})),
    })));
}"""
_AXE_RESULT = """() => window.__axe.then(violations => ({violations,
    count: window.__axeCount,
    checkedStyles: Object.fromEntries(Object.entries(window.__axeStyles).map(([id, styles]) =>
        [id, Object.keys(styles).filter(key => !window.__axeKnown[id].has(key)
                                               && styles[key][0] + styles[key][1] > 0)]))}))"""


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", header[16:24])


# Pages visited at once, each loading and running axe in its own renderer process: enough
# that one page's waits (for the network to go quiet, for Python) leave the CPUs to others.
AT_ONCE = 4


# Every resource the page itself fetched (its worker's fetches are not listed here),
# once its fonts are loaded: KaTeX asks for its fonts when a formula is typeset.
_FETCHED = """() => document.fonts.ready.then(() => performance.getEntriesByType('resource')
    .map(e => e.name).filter(name => /^https?:/.test(name)))"""
SEARCH_INDEX = "/search/search_index.json"


def _wait_for_last_requests(page, requests: list[Any], timeout: float = 15.0) -> None:
    """Waits until every request of a cold load has finished: each resource the page
    fetched, and the search index that Material's search worker fetches. A page whose
    scripts run long (KaTeX typesetting a long page on a busy machine) can be quiet on
    the network for half a second, which is all `networkidle` waits for, before these
    requests start: weighed then, such a page came out at a third of its weight."""
    deadline = time.monotonic() + timeout
    while True:
        finished = {r.url.split("#")[0] for r in requests}
        wanted = {u.split("#")[0] for u in page.evaluate(_FETCHED)}
        if wanted <= finished and any(u.endswith(SEARCH_INDEX) for u in finished):
            return
        if time.monotonic() > deadline:
            missing = sorted(wanted - finished) or [SEARCH_INDEX]
            raise AssertionError(
                f"{page.url}: still loading after {timeout} s: {missing[:5]}"
            )
        page.wait_for_timeout(50)


def _visit(
    browser,
    url: str,
    path: str,
    shots: Path | None,
    axe_js: str,
    styles: dict[str, dict[str, set[str]]],
    init_script: str | None = None,
) -> Iterator[None]:
    """One page's cold visit, as steps: each `yield` leaves the page working in its
    renderer (loading, running axe) while the caller attends to other pages; the return
    value is the Visit.

    `styles` holds, for each scheme and colour rule, the styles checked on the pages
    before: they are not checked again, and the styles this page checks are added (unless
    an `init_script` changed the page)."""
    visit = Visit(path)
    requests: list[Any] = []
    context = browser.new_context(color_scheme="light", viewport=PHONE)
    try:
        context.route(_EXTERNAL_URL, lambda route: route.abort())
        context.on("requestfinished", lambda request: requests.append(request))
        if init_script:
            context.add_init_script(init_script)
        page = context.new_page()
        page.on("pageerror", lambda exc: visit.errors.append(str(exc)))
        response = page.goto(url + path, wait_until="commit")
        yield
        visit.status = response.status if response is not None else 0
        page.wait_for_load_state("networkidle")
        _wait_for_last_requests(page, requests)
        # loaded, cold, at the phone's width: weigh, measure, photograph
        visit.received = {r.url: r.sizes()["responseBodySize"] for r in requests}
        visit.phone = page.evaluate(_PHONE)
        if shots is not None and path in SCREENSHOTS:
            visit.screenshot = shots / f"{SCREENSHOTS[path]}-390.png"
            page.screenshot(path=visit.screenshot)
            visit.phone["h1"] = page.locator(".md-content h1").first.bounding_box()
        page.evaluate(_OPEN_BLOCKS)
        visit.phone["unreachable"] = page.evaluate(_UNREACHABLE)
        # at the desktop's width: axe, in the light scheme, then in the dark one
        page.set_viewport_size(DESKTOP)
        page.evaluate(_OPEN_BLOCKS)
        visit.flattened = page.evaluate(_FLATTEN)
        page.add_script_tag(content=axe_js)
        rules = page.evaluate(_AXE_SETUP, [list(FAILING_IMPACTS), list(COLOUR_RULES)])
        for scheme in SCHEMES:
            if scheme == "dark":  # the palette toggle, as a reader switches
                page.locator(PALETTE_TOGGLE).filter(visible=True).first.click()
                page.wait_for_selector(
                    'body[data-md-color-scheme="slate"]', timeout=5000
                )
                page.evaluate(_OPEN_BLOCKS)
            known = styles.setdefault(scheme, {rule: set() for rule in COLOUR_RULES})
            # the dark scheme changes colours and nothing else: the colour rules only
            only = list(COLOUR_RULES) if scheme == "dark" else None
            page.evaluate(
                _AXE_START, [{rule: sorted(keys) for rule, keys in known.items()}, only]
            )
            yield
            result = page.evaluate(_AXE_RESULT)
            visit.axe[scheme] = result.pop("violations")
            if init_script is None:
                for rule, keys in result["checkedStyles"].items():
                    known[rule].update(keys)
            visit.checked[scheme] = {"rules": only or rules, **result}
        return visit
    finally:
        context.close()


def _run_at_once(steps: list[Callable[[], Iterator[None]]], at_once: int) -> list[Any]:
    """Runs `_visit`-like step generators, up to `at_once` started, each resumed in turn
    (it then waits for what it left its page doing); returns their values, in order."""
    results: dict[int, Any] = {}
    waiting = deque(enumerate(steps))
    running: deque[tuple[int, Iterator[None]]] = deque()
    try:
        while waiting or running:
            while waiting and len(running) < at_once:
                i, start = waiting.popleft()
                gen = start()
                next(gen)
                running.append((i, gen))
            i, gen = running.popleft()
            try:
                next(gen)
                running.append((i, gen))
            except StopIteration as done:
                results[i] = done.value
    finally:
        for _, gen in running:
            gen.close()  # closes its browser context
    return [results[i] for i in range(len(steps))]


# A probe of the colour checks: on one page, three elements among thousands of the same
# style are given a style that fails, in each scheme: a paragraph's text, one token of a
# code block (faint on the code's background) and a link in a line of text (no underline,
# a colour close to the line's).
PROBE_PAGE = CHAPTER_1
_PROBE = """document.addEventListener('DOMContentLoaded', () => {
    const pick = (selector, n) => document.querySelectorAll(selector)[n];
    pick('.md-content article > p', 6).classList.add('probe-text');
    // a keyword: names are plain text, and folded code has no spans until its fold
    // opens (literate/site/lighter.py); axe-core does not check punctuation alone
    pick('.md-content .highlight pre > code span.k', 10).classList.add('probe-code');
    Array.from(document.querySelectorAll('.md-content article > p a[href]'))
        .filter(a => !a.closest('sup, .footnote-ref'))[2].classList.add('probe-link');
    const style = document.createElement('style');
    style.textContent = `
        [data-md-color-scheme=default] .md-typeset .probe-text { color: #a0a0a0 }
        [data-md-color-scheme=slate] .md-typeset .probe-text { color: #50545c }
        [data-md-color-scheme=default] .md-typeset .probe-code { color: #d0d0d0 }
        [data-md-color-scheme=slate] .md-typeset .probe-code { color: #3a3d45 }
        .md-typeset a.probe-link { text-decoration: none !important; border: 0 }
        [data-md-color-scheme=default] .md-typeset a.probe-link { color: #333 }
        [data-md-color-scheme=slate] .md-typeset a.probe-link { color: #c8cad0 }`;
    document.head.appendChild(style);
});"""
PROBES = {
    "probe-text": "color-contrast",
    "probe-code": "color-contrast",
    "probe-link": "link-in-text-block",
}


@pytest.fixture(scope="module")
def visits(
    browser, host_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Visit]:
    """Visit every page once, and the probe's page, a few at a time; then look up what a
    visit found (the probe's: `visits("probe")`)."""
    shots = tmp_path_factory.mktemp("screenshots")
    axe_js = AXE_JS.read_text(encoding="utf-8")
    styles: dict[str, dict[str, set[str]]] = {}
    steps = [
        functools.partial(_visit, browser, host_url, path, shots, axe_js, styles)
        for path in PAGES
    ]
    steps.append(
        functools.partial(
            _visit, browser, host_url, PROBE_PAGE, None, axe_js, styles, _PROBE
        )
    )
    found = _run_at_once(steps, AT_ONCE)
    by_path = {visit.path: visit for visit in found[:-1]}
    by_path["probe"] = found[-1]
    return by_path.__getitem__


# ---------------------------------------------------------------------------------------
# The tests


def _describe(violations: list[dict]) -> str:
    lines = []
    for v in violations:
        lines.append(
            f"{v['impact']} {v['id']} ({v['help']}): {len(v['nodes'])} element(s)"
        )
        for n in v["nodes"][:3]:
            lines.append(f"    {n['target']}: {n['html']}\n      {n['summary']}")
    return "\n  ".join(lines)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("path", PAGES)
def test_axe_finds_nothing_serious(visits, path: str, scheme: str) -> None:
    """Every rule of axe's default run that can report a serious or critical violation,
    the colour rules on one element per style, in each scheme; and no error in the page."""
    visit = visits(path)
    assert visit.status == 200, f"{path}: HTTP {visit.status}"
    assert visit.errors == [], f"{path}: {visit.errors}"
    checked = visit.checked[scheme]
    assert set(COLOUR_RULES) <= set(checked["rules"]), checked["rules"]
    contrast = checked["count"]["color-contrast"]
    assert contrast["checked"] + contrast["skipped"] >= 1, checked
    violations = [v for v in visit.axe[scheme] if v["impact"] in FAILING_IMPACTS]
    assert violations == [], (
        f"{path} ({scheme}): axe-core finds\n  {_describe(violations)}"
    )


@pytest.mark.parametrize("scheme", SCHEMES)
def test_colour_checks_find_one_failing_element_among_thousands(
    visits, scheme: str
) -> None:
    """The probe's page, three elements given a failing style (_PROBE): the colour checks
    on one element per style find each of them, in each scheme, so that checking styles
    instead of elements hides nothing."""
    visit = visits("probe")
    assert visit.errors == [], visit.errors
    assert visit.checked[scheme]["count"]["color-contrast"]["skipped"] > 1000, (
        visit.checked[scheme]
    )
    found = {
        (v["id"], probe)
        for v in visit.axe[scheme]
        for n in v["nodes"]
        for probe in PROBES
        if probe in n["html"]
    }
    assert found == {(rule, probe) for probe, rule in PROBES.items()}, (
        f"{PROBE_PAGE} ({scheme}), probed: found {sorted(found)}; axe-core finds\n  "
        + _describe(visit.axe[scheme])
    )


@pytest.mark.parametrize("path", PAGES)
def test_nothing_scrolls_sideways_on_a_phone(visits, path: str) -> None:
    phone = visits(path).phone
    assert phone["viewport"] == PHONE["width"]
    assert phone["scrollWidth"] <= phone["viewport"], (
        f"{path}: {phone['scrollWidth']} pixels wide at a {phone['viewport']}-pixel viewport; "
        f"sticking out: {phone['outside']}"
    )
    for fig in phone["figures"]:
        assert fig["left"] >= 0 and fig["right"] <= phone["viewport"], f"{path}: {fig}"
        assert fig["width"] <= fig["column"] + 0.5, (
            f"{path}: figure wider than its column: {fig}"
        )


@pytest.mark.parametrize("path", PAGES)
def test_a_keyboard_reaches_every_box_that_scrolls_on_a_phone(
    visits, path: str
) -> None:
    """At the phone's width, where most tables, formulas and code cells scroll sideways,
    each box that scrolls is focusable or holds something focusable
    (docs/assets/javascripts/a11y.js puts such boxes in the tab order)."""
    assert visits(path).phone["unreachable"] == [], (
        f"{path}: {visits(path).phone['unreachable']}"
    )


def test_figures_scale_down_to_a_phone(visits) -> None:
    """A figure drawn wider than a phone is shown at the column's width, not cut."""
    figures = [fig for path in PAGES for fig in visits(path).phone["figures"]]
    assert figures, "no figure displayed on any page"
    scaled = [fig for fig in figures if fig["natural"] > fig["column"]]
    assert scaled, (
        "no figure is wider than a phone's column: nothing here tests scaling"
    )
    for fig in scaled:
        assert abs(fig["width"] - fig["column"]) <= 1, (
            f"not scaled to the column: {fig}"
        )
    notebook_figures = [
        fig for fig in scaled if fig["src"].startswith("data:image/png")
    ]
    # the 7 figures of the notebook pages, each displayed once: the page holds each
    # twice, light and dark, and this light-scheme visit displays the light one
    assert len(notebook_figures) == 7, "the notebook pages' figures are checked too"


@pytest.mark.parametrize("path", [p for p in PAGES if "/notebooks/" in p])
def test_a_notebook_cell_gets_the_whole_column_on_a_phone(visits, path: str) -> None:
    """JupyterLab's prompt column ("In [3]:") and the page's floated download buttons
    took a third of a phone's column from every code cell; they take nothing now."""
    phone = visits(path).phone
    assert phone["cells"], f"{path}: no code cell"
    narrow = [width for width in phone["cells"] if width < phone["column"] - 1]
    assert narrow == [], (
        f"{path}: code cells {narrow} px in a {phone['column']} px column"
    )


@pytest.mark.parametrize("path", list(SCREENSHOTS))
def test_phone_screenshot(visits, path: str) -> None:
    """The screenshot is the phone's width, and the page's title lies wholly inside it."""
    visit = visits(path)
    assert visit.screenshot is not None and visit.screenshot.is_file()
    assert _png_size(visit.screenshot) == (PHONE["width"], PHONE["height"]), (
        visit.screenshot
    )
    h1 = visit.phone["h1"]
    assert h1 is not None, f"{path}: no h1"
    assert h1["x"] >= 0 and h1["x"] + h1["width"] <= PHONE["width"], (
        f"{path}: h1 at {h1}"
    )
    assert h1["y"] >= 0 and h1["y"] + h1["height"] <= PHONE["height"], (
        f"{path}: h1 at {h1}"
    )


def test_page_weight(
    visits, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture
) -> None:
    """The bytes a cold load of each page receives (every request, bodies as sent); the
    heaviest is within the budget. Every page's weight is printed."""
    weights = sorted(((visits(p).weight, p) for p in PAGES), reverse=True)
    heaviest, heaviest_path = weights[0]
    top = sorted(visits(heaviest_path).received.items(), key=lambda kv: -kv[1])[:5]
    table = "\n".join(f"{w / 1e6:8.3f} MB  {p}" for w, p in weights) + (
        f"\nheaviest: {heaviest_path}, {heaviest / 1e6:.3f} MB of {WEIGHT_BUDGET / 1e6:.1f} MB;"
        " its largest responses:\n"
        + "\n".join(f"{s / 1e3:10.1f} kB  {u}" for u, s in top)
    )
    request.node.add_report_section(
        "call", "page weight (cold load, compressed as served)", table
    )
    with capsys.disabled():
        print("\npage weight, cold load:\n" + table)
    assert all(w > 0 for w, _ in weights)
    assert heaviest <= WEIGHT_BUDGET, (
        f"{heaviest_path} weighs {heaviest} bytes:\n{table}"
    )
