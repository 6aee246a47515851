"""Browser smoke test of the built site: it renders, typesets its math, loads its figures,
logs no errors, swaps figure variants with the colour scheme, and asks no other host for
anything.

The site under test is `site/` when it is newer than every source it is built from (CI
builds it right before pytest); otherwise it is built into a temporary directory. It is
served on 127.0.0.1 and opened in Debian's Chromium through Playwright (Playwright's own
browser download does not work on our machines). Without a browser these tests skip,
except under CI (`CI=true`), where they fail.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from literate.site.copyable import nav_pages
from literate.tools.export import ERAS

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[1]
BUILT_SITE = ROOT / "site"
# What the site is built from. A path that does not exist is ignored.
SITE_SOURCES = ("docs", "literate", "mkdocs.yml")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

HOME = "/"
CHAPTER_1 = "/attention/scaled-dot-product/"
CLAIMS = "/appendix/claims/"
NOTEBOOK = "/notebooks/attention_playground/"
# Every other page gets the same checks: it loads, its images load, nothing is logged as an
# error, nothing is requested from another host. The pages are the nav's (mkdocs.yml), so a
# new chapter is checked without being listed here; the notebooks (mkdocs-jupyter's pages,
# docs/notebooks/*.py) are not Markdown pages.
OTHER_PAGES = [
    "/" + page.removesuffix(".md") + "/"
    for page in nav_pages()
    if page not in ("index.md", "attention/scaled-dot-product.md", "appendix/claims.md")
] + [
    f"/notebooks/{nb.stem}/"
    for nb in sorted((ROOT / "docs" / "notebooks").glob("*.py"))
    if f"/notebooks/{nb.stem}/" != NOTEBOOK
]
PAGES = [HOME, CHAPTER_1, CLAIMS, NOTEBOOK, *OTHER_PAGES]
# The era files the build writes (literate.tools.export), linked from the home page and chapters.
DOWNLOADS = [f"/downloads/{name}.py" for name in ERAS]

LOCAL_HOST = "127.0.0.1"

# Selectors (Material for MkDocs 9.x markup).
H1 = ".md-content h1"
PALETTE_TOGGLE = 'form[data-md-component="palette"] label'
FIGURE = 'img[src*="/figures/"]'
LIGHT_FIGURE = 'img[src*="/figures/"][src*="-light.svg"]'
DARK_FIGURE = 'img[src*="/figures/"][src*="-dark.svg"]'


# ---------------------------------------------------------------------------------------
# The site


def _source_files(root: Path, sources: Iterable[str]) -> Iterator[Path]:
    """Every file the site is built from. Bytecode caches and hidden files (an editor's
    temporary file, a cache directory) do not count."""
    for name in sources:
        path = root / name
        if path.is_file():
            yield path
        elif path.is_dir():
            for f in path.rglob("*"):
                rel = f.relative_to(path).parts
                if (
                    f.is_file()
                    and "__pycache__" not in rel
                    and f.suffix != ".pyc"
                    and not any(part.startswith(".") for part in rel)
                ):
                    yield f


def site_is_fresh(
    site_dir: Path, root: Path = ROOT, sources: Iterable[str] = SITE_SOURCES
) -> bool:
    """True if `site_dir` holds a build newer than every source file.

    A build empties the directory and rewrites every file, so its oldest file dates the
    build (conservatively: from its start)."""
    if not (site_dir / "index.html").is_file():
        return False
    built = min(f.stat().st_mtime for f in site_dir.rglob("*") if f.is_file())
    newest_source = max(
        (f.stat().st_mtime for f in _source_files(root, sources)), default=0.0
    )
    return built > newest_source


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if site_is_fresh(BUILT_SITE):
        return BUILT_SITE
    out = tmp_path_factory.mktemp("site")
    mkdocs = Path(sys.executable).parent / "mkdocs"
    proc = subprocess.run(
        [str(mkdocs), "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"`mkdocs build --strict` failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}"
        )
    return out


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        # A browser closing a connection mid-transfer is not an error of the site.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextlib.contextmanager
def serving(
    site_dir: Path, handler: type = _QuietHandler, name: str = "site-server"
) -> Iterator[str]:
    """Serves `site_dir` on a free port of LOCAL_HOST in a thread; yields its URL."""
    server = _QuietServer(
        (LOCAL_HOST, 0), functools.partial(handler, directory=str(site_dir))
    )
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    try:
        yield f"http://{LOCAL_HOST}:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="module")
def base_url(site_dir: Path) -> Iterator[str]:
    with serving(site_dir) as url:
        yield url


# ---------------------------------------------------------------------------------------
# The browser


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the site test must run in CI)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _unavailable(f"Playwright is not installed ({exc}); `pip install -e .[test]`")
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(f"no Chromium at {CHROMIUM}; `apt-get install chromium`")
    pw = sync_playwright().start()
    try:
        try:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        except PlaywrightError as exc:
            _unavailable(
                f"Chromium at {CHROMIUM} does not start under Playwright: {exc}"
            )
        yield browser
        browser.close()
    finally:
        pw.stop()


def _is_local(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("data", "blob", "about") or parts.hostname == LOCAL_HOST


# Requests to other hosts are aborted (nothing leaves the machine) as well as recorded.
# A regex, not a Python predicate, so that Playwright filters in the browser and the
# site's own requests never make a round trip through Python.
_EXTERNAL_URL = re.compile(r"^(?!(?:data|blob|about):|https?://127\.0\.0\.1(?::\d+)?/)")

# Every request to another host made by any page of any test in this module.
EXTERNAL_REQUESTS: list[str] = []


@dataclass
class Tab:
    path: str
    page: Any
    errors: list[str]  # console errors, uncaught exceptions, HTTP errors


class Session:
    """A fresh browser context in the light scheme that records requests to other hosts."""

    def __init__(self, browser, base_url: str):
        self.base_url = base_url
        self.external: list[str] = []
        self.context = browser.new_context(
            color_scheme="light", viewport={"width": 1280, "height": 900}
        )
        self.context.on("request", self._on_request)
        self.context.route(_EXTERNAL_URL, lambda route: route.abort())

    def _on_request(self, request) -> None:
        if not _is_local(request.url):
            self.external.append(request.url)
            EXTERNAL_REQUESTS.append(request.url)

    def start(self, path: str) -> tuple[Tab, Any]:
        """Open a tab and send it to `path`, returning as soon as the response has begun
        (so that several pages load at once); `finish` waits for it."""
        page = self.context.new_page()
        tab = Tab(path, page, [])
        page.on(
            "console",
            lambda msg: (
                msg.type == "error" and tab.errors.append(f"console: {msg.text}")
            ),
        )
        page.on("pageerror", lambda exc: tab.errors.append(f"pageerror: {exc}"))
        page.on(
            "response",
            lambda r: (
                r.status >= 400 and tab.errors.append(f"HTTP {r.status}: {r.url}")
            ),
        )
        return tab, page.goto(self.base_url + tab.path, wait_until="commit")

    @staticmethod
    def finish(tab: Tab, response: Any, wait_until: str = "load") -> Tab:
        assert response is not None, tab.path
        assert response.status == 200, f"{tab.path}: HTTP {response.status}"
        tab.page.wait_for_load_state("load")
        if wait_until != "load":
            tab.page.wait_for_load_state(wait_until)
        return tab

    def open(self, path: str, wait_until: str = "load") -> Tab:
        return self.finish(*self.start(path), wait_until=wait_until)


@pytest.fixture
def session(browser, base_url: str) -> Iterator[Session]:
    """A context of its own, for a test that changes what it looks at."""
    s = Session(browser, base_url)
    try:
        yield s
    finally:
        s.context.close()


@pytest.fixture(scope="module")
def visit(browser, base_url: str, site_dir: Path) -> Iterator[Callable[[str], Tab]]:
    """Open a page once for the whole module, in one shared context, for tests that only look.

    The page stays open: every looking test sees the same load, with the console errors
    and requests it made until the network went quiet. The search index is served empty
    (its real config, no documents) to these pages: each page's search worker would
    otherwise index the whole site, a third of this module's time;
    `test_search_finds_the_chapter_that_teaches_it` loads the real one."""
    sess = Session(browser, base_url)
    config = json.loads((site_dir / "search" / "search_index.json").read_text())[
        "config"
    ]
    empty_index = json.dumps({"config": config, "docs": []})
    sess.context.route(
        "**/search/search_index.json",
        lambda route: route.fulfill(
            status=200, content_type="application/json", body=empty_index
        ),
    )
    # every page starts loading at once, then each is waited for until its network is
    # quiet: the same loads, in parallel instead of one after another
    started = {path: sess.start(path) for path in PAGES}
    tabs: dict[str, Tab] = {}

    def open_once(path: str) -> Tab:
        if path not in tabs:
            tab, response = started.pop(path) if path in started else sess.start(path)
            tabs[path] = sess.finish(tab, response, wait_until="networkidle")
        return tabs[path]

    try:
        yield open_once
    finally:
        sess.context.close()


# ---------------------------------------------------------------------------------------
# The tests


@pytest.mark.parametrize(
    ("path", "title"),
    [(HOME, "transformer blocks"), (CHAPTER_1, "scaled dot-product attention")],
)
def test_page_renders_with_its_title(visit, path: str, title: str) -> None:
    h1 = visit(path).page.locator(H1).first
    assert h1.is_visible(), f"{path}: no visible {H1}"
    assert title in h1.inner_text().lower(), f"{path}: h1 is {h1.inner_text()!r}"


# Text of each `.arithmatex` element outside the KaTeX output: what a reader would see
# as raw TeX if typesetting did not happen.
_RAW_MATH = r"""() => Array.from(document.querySelectorAll('.arithmatex')).map(el => {
    const copy = el.cloneNode(true);
    copy.querySelectorAll('.katex').forEach(k => k.remove());
    return copy.textContent.trim();
}).filter(t => /\\\(|\\\[|\$\$/.test(t))"""


MATH_PAGES = [
    CHAPTER_1,
    *[p for p in OTHER_PAGES if "notebooks" not in p and "appendix" not in p],
]


@pytest.mark.parametrize("path", MATH_PAGES)
def test_math_is_typeset(visit, path: str) -> None:
    page = visit(path).page
    assert page.locator(".katex").count() >= 1, f"no KaTeX output (.katex) on {path}"
    raw = page.evaluate(_RAW_MATH)
    assert raw == [], f"math left as raw TeX in .arithmatex: {raw[:5]}"
    errors = page.locator(".katex-error").all_inner_texts()
    assert errors == [], f"KaTeX could not parse: {errors[:5]}"


_BROKEN_IMAGES = """async () => {
    const imgs = Array.from(document.images);
    await Promise.all(imgs.map(i => i.complete ? null
        : new Promise(done => { i.addEventListener('load', done); i.addEventListener('error', done); })));
    return imgs.filter(i => !(i.naturalWidth > 0)).map(i => i.currentSrc || i.src);
}"""


@pytest.mark.parametrize("path", PAGES)
def test_every_image_loads(visit, path: str) -> None:
    page = visit(path).page
    page.wait_for_load_state("load")
    broken = page.evaluate(_BROKEN_IMAGES)
    assert broken == [], f"{path}: images that did not load: {broken}"


_IMG = re.compile(r"<img\b[^>]*>")
_ATTR = r"""\b{}=(?:"([^"]*)"|'([^']*)')"""
_FIGURE_SRC = re.compile(r"figures/([\w-]+?)-(?:light|dark)\.svg")


def _attribute(tag: str, name: str) -> str:
    import html

    found = re.search(_ATTR.format(name), tag)
    return html.unescape(next(filter(None, found.groups()), "")) if found else ""


def _notebook_figure_alts(notebook: Path) -> list[str]:
    """The alt text of each figure cell of a notebook page (docs/notebooks/), in order."""
    import jupytext

    return [
        c.metadata["alt"] for c in jupytext.read(notebook).cells if "alt" in c.metadata
    ]


NOTEBOOKS = sorted((ROOT / "docs" / "notebooks").glob("*.py"))


def test_every_image_of_the_built_site_says_what_it_shows(site_dir: Path) -> None:
    """Every `<img>` has alt text of a sentence or more, never nbconvert's placeholder
    ("No description has been provided for this image"); a figure's is the one
    registered with it, a notebook page's figures have their cells' alt text, in order,
    each figure twice (light, then dark)."""
    from literate.figures import FIGURES

    problems, alts, figures = [], {}, 0
    for path in sorted(site_dir.rglob("*.html")):
        page = path.relative_to(site_dir).as_posix()
        for tag in _IMG.findall(path.read_text(encoding="utf-8")):
            alt = _attribute(tag, "alt")
            alts.setdefault(page, []).append(alt)
            figure = _FIGURE_SRC.search(_attribute(tag, "src"))
            if figure:
                figures += 1
                if alt != FIGURES[figure.group(1)].alt:
                    problems.append(f"{page}: figure {figure.group(1)} has alt={alt!r}")
            elif len(alt.split()) < 5 or "No description has been provided" in alt:
                problems.append(f"{page}: {tag[:80]}... alt={alt!r}")
    assert problems == [], "\n".join(problems)
    # each figure shown once, light and dark; the map of the eras also on the home page
    home = [
        m.group(1)
        for tag in _IMG.findall((site_dir / "index.html").read_text(encoding="utf-8"))
        if (m := _FIGURE_SRC.search(_attribute(tag, "src")))
    ]
    assert sorted(set(home)) == ["eras-blocks-1", "eras-blocks-2", "eras-blocks-3"]
    # and the quick path shows four of the chapters' figures, the block it builds first
    quick = [
        m.group(1)
        for tag in _IMG.findall(
            (site_dir / "quick" / "index.html").read_text(encoding="utf-8")
        )
        if (m := _FIGURE_SRC.search(_attribute(tag, "src")))
    ]
    assert list(dict.fromkeys(quick)) == [
        "block-llama",
        "heads-grouping",
        "modern-swiglu-gate",
        "kv-cache-step-cost",
    ]
    assert figures == 2 * len(FIGURES) + len(home) + len(quick)
    for notebook in NOTEBOOKS:
        cells = _notebook_figure_alts(notebook)
        twice = [alt for alt in cells for _theme in ("light", "dark")]
        assert cells and alts[f"notebooks/{notebook.stem}/index.html"] == twice, (
            notebook.name
        )


_NOTEBOOK_PNG = re.compile(
    r'<div class="only-(light|dark)">\s*<div class="jp-OutputArea-child[^>]*>.*?'
    r'<img\b[^>]*\bsrc="data:image/png;base64,([^"]+)"',
    re.S,
)


def _pixels_of(png: bytes, colour: str) -> int:
    """How many pixels of `png` are drawn in `colour` (#rrggbb, within 3 per channel),
    half opaque or more: on a transparent figure, its text and lines."""
    import io

    import numpy as np
    from PIL import Image

    rgba = np.asarray(Image.open(io.BytesIO(png)).convert("RGBA")).astype(int)
    target = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
    near = (np.abs(rgba[..., :3] - target) <= 3).all(axis=-1)
    return int((near & (rgba[..., 3] >= 128)).sum())


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_page_has_each_figure_light_and_dark(
    site_dir: Path, notebook: Path
) -> None:
    """Each figure of a notebook page is there twice, light then dark (the outputs of the
    notebook's `show`, marked for the page's CSS), each drawn in the site's palette of its
    scheme (literate/figures/style.py): its ink is that palette's, never the other's."""
    import base64

    from literate.figures.style import PALETTES

    page = (site_dir / "notebooks" / notebook.stem / "index.html").read_text(
        encoding="utf-8"
    )
    found = _NOTEBOOK_PNG.findall(page)
    cells = _notebook_figure_alts(notebook)
    assert [theme for theme, _ in found] == ["light", "dark"] * len(cells)
    assert len(re.findall(r'<img\b[^>]*\bsrc="data:image/png', page)) == len(found), (
        "a PNG output that is neither the light nor the dark variant"
    )
    for index, (theme, data) in enumerate(found):
        png = base64.b64decode(data)
        other = "dark" if theme == "light" else "light"
        own = _pixels_of(png, PALETTES[theme].ink)
        wrong = _pixels_of(png, PALETTES[other].ink)
        assert own > 100 and wrong == 0, (
            f"{notebook.stem}, figure {index // 2} ({theme}): {own} pixels of its "
            f"palette's ink, {wrong} of the {other} one's"
        )


def test_chapter_1_shows_what_its_blocks_print(visit) -> None:
    outputs = visit(CHAPTER_1).page.locator(".md-content .output")
    assert outputs.count() >= 5, f"chapter 1 shows {outputs.count()} output box(es)"
    assert "tensor(" in outputs.first.inner_text()


def test_chapter_1_shows_generated_figures(visit) -> None:
    srcs = (
        visit(CHAPTER_1)
        .page.locator(FIGURE)
        .evaluate_all("imgs => imgs.map(i => i.getAttribute('src'))")
    )
    assert len(srcs) >= 2, (
        f"chapter 1 has {len(srcs)} generated figure image(s): {srcs}"
    )


@pytest.mark.parametrize("path", PAGES)
def test_no_console_errors(visit, path: str) -> None:
    errors = visit(path).errors
    assert errors == [], f"{path}:\n  " + "\n  ".join(errors)


def test_notebook_offers_its_source_for_download(visit) -> None:
    tab = visit(NOTEBOOK)
    links = tab.page.locator('a[href$=".py"], a[href$=".ipynb"]')
    assert links.count() >= 1, f"{NOTEBOOK}: no <a> whose href ends with .py or .ipynb"
    url = links.first.evaluate("a => a.href")  # absolute
    assert _is_local(url), url
    response = tab.page.request.get(url)
    assert response.status == 200, f"{url}: HTTP {response.status}"
    assert response.body().strip(), f"{url}: empty"


# Code blocks wider than their column, with every collapsed block opened first.
_SCROLLING_CODE = """() => {
    document.querySelectorAll('details').forEach(d => { d.open = true; });
    return Array.from(document.querySelectorAll('.md-content pre'))
        .filter(pre => pre.scrollWidth > pre.clientWidth + 1)
        .map(pre => (pre.textContent.split('\\n').find(l => l.length > 88) || pre.textContent).slice(0, 80));
}"""


@pytest.mark.parametrize("path", [p for p in PAGES if "notebooks" not in p])
def test_no_code_block_scrolls_at_1280_pixels(visit, path: str) -> None:
    # the shared tab: opening every collapsed block changes nothing the tests before it
    # looked at, and saves loading each page a second time
    page = visit(path).page
    assert page.viewport_size["width"] == 1280
    # Material turns "# (1)!" comments into annotation markers once its script has run;
    # measure after that, or an 88-character line still holds the raw comment.
    page.wait_for_function(
        "() => !Array.from(document.querySelectorAll('pre code'))"
        ".some(c => /# \\(\\d+\\)!/.test(c.textContent))",
        timeout=10_000,
    )
    scrolling = page.evaluate(_SCROLLING_CODE)
    assert scrolling == [], f"{path}: code wider than the column: {scrolling[:5]}"


def test_era_files_are_served_and_linked(visit) -> None:
    home = visit(HOME).page
    hrefs = home.locator('a[href*="downloads/"]').evaluate_all(
        "as => as.map(a => a.href)"
    )
    for path in DOWNLOADS:
        assert any(h.endswith(path) for h in hrefs), (
            f"the home page does not link {path}"
        )
        origin = urlsplit(home.url)
        response = home.request.get(f"{origin.scheme}://{origin.netloc}{path}")
        assert response.status == 200, f"{path}: HTTP {response.status}"
        assert response.text().startswith('"""') and "def " in response.text(), path


def _visible(page, selector: str) -> list[bool]:
    return [img.is_visible() for img in page.locator(selector).all()]


def _display(page, selector: str) -> list[str]:
    return page.locator(selector).evaluate_all(
        "els => els.map(e => getComputedStyle(e).display)"
    )


def test_dark_mode_swaps_figure_variants(session: Session) -> None:
    page = session.open(CHAPTER_1).page
    assert page.locator("body").get_attribute("data-md-color-scheme") == "default"
    assert page.locator(LIGHT_FIGURE).count() >= 1, "no -light.svg figure on chapter 1"
    assert page.locator(DARK_FIGURE).count() >= 1, "no -dark.svg figure on chapter 1"

    # Light scheme: light variants shown, dark ones hidden.
    assert all(_visible(page, LIGHT_FIGURE)), (
        f"light figures hidden, display: {_display(page, LIGHT_FIGURE)}"
    )
    assert not any(_visible(page, DARK_FIGURE)), (
        f"dark figures shown, display: {_display(page, DARK_FIGURE)}"
    )

    # Material shows one palette label at a time: the one that switches to the next scheme.
    toggle = page.locator(PALETTE_TOGGLE).filter(visible=True)
    assert toggle.count() == 1, f"{toggle.count()} visible palette toggles"
    toggle.click()
    page.wait_for_selector('body[data-md-color-scheme="slate"]', timeout=5000)

    assert all(_visible(page, DARK_FIGURE)), (
        f"dark figures hidden, display: {_display(page, DARK_FIGURE)}"
    )
    assert not any(_visible(page, LIGHT_FIGURE)), (
        f"light figures shown, display: {_display(page, LIGHT_FIGURE)}"
    )
    broken = page.evaluate(_BROKEN_IMAGES)
    assert broken == [], f"images that did not load in dark mode: {broken}"


# Each notebook figure <img> displayed: which variant it is, its alt text, and whether it
# loaded.
_NOTEBOOK_FIGURES = """() => Array.from(
        document.querySelectorAll('.jupyter-wrapper .jp-RenderedImage img'))
    .filter(img => img.getClientRects().length)
    .map(img => [img.closest('.only-light') ? 'light'
                 : img.closest('.only-dark') ? 'dark' : 'neither',
                 img.getAttribute('alt'), img.complete && img.naturalWidth > 0])"""


@pytest.mark.readers
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_page_shows_each_figure_once_in_the_scheme_it_is_drawn_for(
    session: Session, notebook: Path
) -> None:
    """A notebook page holds each figure light and dark; the light scheme displays the
    light ones, the dark scheme (after the palette toggle) the dark ones, each figure
    once, in the order of the notebook's figure cells, with its cell's alt text."""
    page = session.open(f"/notebooks/{notebook.stem}/").page
    cells = _notebook_figure_alts(notebook)
    assert page.locator(".jupyter-wrapper .jp-RenderedImage img").count() == 2 * len(
        cells
    )
    assert page.locator("body").get_attribute("data-md-color-scheme") == "default"
    for theme in ("light", "dark"):
        if theme == "dark":
            page.locator(PALETTE_TOGGLE).filter(visible=True).first.click()
            page.wait_for_selector('body[data-md-color-scheme="slate"]', timeout=5000)
        shown = page.evaluate(_NOTEBOOK_FIGURES)
        assert [variant for variant, _, _ in shown] == [theme] * len(cells), (
            f"{notebook.stem} in the {theme} scheme displays {shown}"
        )
        assert [alt for _, alt, _ in shown] == cells, notebook.stem
        assert all(loaded for _, _, loaded in shown), notebook.stem


def test_no_request_to_another_host(visit) -> None:
    """No page asks anything of another host. Runs last: it also checks every request
    made before it in this module, including after the palette toggle."""
    for path in PAGES:
        visit(path)
    external = sorted(set(EXTERNAL_REQUESTS))
    assert external == [], "requests to other hosts:\n  " + "\n  ".join(external)


# A term, and the page that teaches it: typed into the search box, that page is listed first.
SEARCHES = [
    ("RoPE", "/attention/positions/"),
    ("KV cache", "/decoding/kv-cache/"),
    ("SwiGLU", "/modern/modern-block/"),
    ("label smoothing", "/eras/encoder-decoder/"),
]
SEARCH_RESULT = ".md-search-result__item a"


@pytest.mark.readers
def test_search_finds_the_chapter_that_teaches_it(session: Session) -> None:
    """With the real search index (built offline by the build), typing a term into the
    search box lists results, the first from the chapter that teaches it; the page
    makes no console error while its worker indexes the whole site."""
    tab = session.open(CHAPTER_1)
    tab.page.keyboard.press("s")  # Material's shortcut: focus the search box
    box = tab.page.locator("input.md-search__input")
    firsts = {}
    for term, _ in SEARCHES:
        box.fill("")
        box.type(term)  # key by key, as a reader types
        # the list is redrawn for each prefix typed: wait for the links that carry the
        # whole term (h=kv+cache), not a prefix of it (h=kv+c, whose first hit differs)
        wanted = "h=" + term.lower().replace(" ", "+")
        tab.page.wait_for_function(
            "([selector, wanted]) => { const a = document.querySelector(selector);"
            " return a && a.getAttribute('href').toLowerCase().includes(wanted); }",
            arg=[SEARCH_RESULT, wanted],
            timeout=20_000,
        )
        firsts[term] = tab.page.locator(SEARCH_RESULT).first.get_attribute("href")
    wrong = {t: firsts[t] for t, page in SEARCHES if page not in (firsts[t] or "")}
    assert wrong == {}, (
        f"first result is not the chapter that teaches the term: {wrong}"
    )
    assert tab.errors == [], tab.errors


def _focused(page) -> dict:
    return page.evaluate("""() => { const el = document.activeElement;
        return {tag: el.tagName.toLowerCase(), id: el.id, name: el.name || '',
                palette: !!el.closest('form[data-md-component="palette"]')}; }""")


@pytest.mark.readers
def test_keyboard_alone_works_the_page(session: Session) -> None:
    """Without a mouse: Tab reaches the palette toggle and an arrow key switches the
    scheme; the search shortcut opens the search, which takes a typed query; content tabs
    switch with the arrow keys (a collapsed block: the next test). (Elements
    deep in the page are focused directly, as Tab would after many presses.)"""
    page = session.open(CHAPTER_1).page
    keys = page.keyboard
    assert page.locator("body").get_attribute("data-md-color-scheme") == "default"

    # The palette: its radio buttons are in the tab order, a few stops from the top.
    for _ in range(20):
        keys.press("Tab")
        if _focused(page)["palette"]:
            break
    assert _focused(page)["palette"], (
        f"20 Tabs do not reach the palette toggle: {_focused(page)}"
    )
    keys.press("ArrowDown")
    page.wait_for_selector('body[data-md-color-scheme="slate"]', timeout=5000)
    keys.press("ArrowUp")
    page.wait_for_selector('body[data-md-color-scheme="default"]', timeout=5000)

    # The search: "s" opens it with the query box focused; typing fills it; Escape closes.
    keys.press("Escape")
    page.evaluate("() => document.activeElement.blur()")
    keys.press("s")
    assert _focused(page)["name"] == "query", _focused(page)
    page.wait_for_function(
        "() => document.getElementById('__search').checked", timeout=5000
    )
    keys.type("RoPE")
    page.locator(SEARCH_RESULT).first.wait_for(timeout=20_000)
    assert page.locator("input.md-search__input").input_value() == "RoPE"
    keys.press("Escape")
    page.wait_for_function(
        "() => !document.getElementById('__search').checked", timeout=5000
    )

    # Content tabs (pymdownx.tabbed): each tab is a radio button in the tab order; an
    # arrow key selects the next tab and shows its panel.
    tabs = page.locator(".tabbed-set").first
    radios = tabs.locator(":scope > input")
    assert radios.count() >= 2, "chapter 1 has no content tabs"
    assert radios.first.evaluate("r => r.tabIndex") >= 0
    blocks = tabs.locator(".tabbed-content > .tabbed-block")
    assert blocks.nth(0).is_visible() and not blocks.nth(1).is_visible()
    radios.first.focus()
    keys.press("ArrowRight")
    assert radios.nth(1).is_checked(), "ArrowRight did not select the second tab"
    assert blocks.nth(1).is_visible() and not blocks.nth(0).is_visible()


# Opens with Enter or Space a collapsed block held by the caller (an element handle, not a
# `details:not([open])` locator: that one resolves to the next closed block once this one
# opens, and an earlier version of this test, waiting on it, took a block that opened for
# one that did not). Counts the block's toggle events: one per key press, and no other.
_WATCH_TOGGLES = (
    "d => { d.__toggles = 0; d.addEventListener('toggle', () => d.__toggles++); }"
)


@pytest.mark.readers
@pytest.mark.parametrize("key", ["Enter", "Space"])
def test_keyboard_opens_and_closes_a_collapsed_block(
    session: Session, key: str
) -> None:
    """A collapsed block (`???`: a proof, a solution): its summary is in the tab order;
    the key opens it and shows its body, the key again closes it, each press toggling the
    block once."""
    page = session.open(CHAPTER_1).page
    proof = page.locator(".md-content details:not([open])").first.element_handle()
    summary = proof.query_selector(":scope > summary")
    body = proof.query_selector(":scope > :not(summary)")
    assert summary is not None and body is not None
    assert summary.evaluate("s => s.tabIndex") >= 0
    assert not proof.evaluate("d => d.open") and not body.is_visible()
    proof.evaluate(_WATCH_TOGGLES)
    summary.focus()
    page.keyboard.press(key)
    page.wait_for_function("d => d.open && d.__toggles === 1", arg=proof, timeout=5000)
    assert body.is_visible()
    page.keyboard.press(key)
    page.wait_for_function("d => !d.open && d.__toggles === 2", arg=proof, timeout=5000)
    assert not body.is_visible()
    page.wait_for_timeout(100)  # a second toggle undoing the key's would show here
    assert proof.evaluate("d => [d.open, d.__toggles]") == [False, 2]
