"""MkDocs hooks: figures drawn at build, claims rendered and listed, no asset from another host.

* Figures: every figure in `literate.figures.FIGURES` is drawn in a light and a dark
  variant (the dark one the light SVG recoloured, where tests prove that the same) into
  `.cache/figures/` (never into docs/) and served as `figures/<name>-<theme>.svg`.
  A figure's cache key hashes everything it depends on (all of `literate/`, the plotting
  and tensor library versions, its name, theme and language), so an unchanged figure is
  reused, and any edit to the code that draws or feeds it redraws it. Its alt text on
  the page is the one registered with it (a page leaves the brackets empty).
* Claims: `!!! claim "id"` admonitions become an anchored `claim` box; a claim without a
  proving block fails the build. The page holding `<!-- claim-ledger -->` gets the table
  of every claim on the site.
* Notebooks: mkdocs-jupyter keys its cache of executed notebooks on the notebook's bytes
  only; ours import `literate/`, so the same code fingerprint as the figures' joins the
  key. An edit anywhere in `literate/` re-runs every notebook; nothing else does. The
  notebooks to run start in a background thread when the build starts, so the other
  pages render while their kernels work (`execute_notebooks_ahead`), each kernel forked
  from one process that imported torch once (`warm_kernels`). A notebook's figure gets
  its cell's `alt` text (`# %% alt="..."`); one without alt text fails the build.
* Outputs: every page runs in a worker process, as pytest runs it, and what each Python
  block prints is shown in an "Output" box under it (`literate/site/outputs.py`); a
  block that raises fails the build.
* Offline: after the build, any page or stylesheet that would load a script, stylesheet,
  image, font or frame from another host fails the build.
* Publishing: the build is dated by the last commit (`SOURCE_DATE_EPOCH`, for the
  sitemap), notebook cells get ids from their text and a cell's consecutive prints are
  one output (two builds give the same bytes), a
  site_url (`SITE_URL`) turns on instant navigation, and the external links of the built
  pages are listed in the build log, never fetched.
"""

from __future__ import annotations

import hashlib
import html
import logging
import os
import re
import sys
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

from literate.site.docblocks import (
    CLAIM,
    ROOT,
    Claim,
    claim_problems,
    iter_claims,
    nav_order,
)
from literate.site.warm_kernels import WarmKernels, third_party_imports

log = logging.getLogger("mkdocs.hooks.literate")

FIGURE_CACHE = ROOT / ".cache" / "figures"
DOWNLOADS = ROOT / ".cache" / "downloads"
LEDGER_MARKER = "<!-- claim-ledger -->"
VERSIONS_MARKER = "<!-- tested-versions -->"
# What the site was built and tested with, read from the installed packages at build time.
TESTED_PACKAGES = ("torch", "transformers", "numpy", "matplotlib", "mkdocs", "mkdocs-material",
                   "pymdown-extensions", "mkdocs-jupyter", "pytest", "sybil", "playwright")


# ---------------------------------------------------------------------------------------
# Figures


def _code_fingerprint() -> str:
    """Hash of every source file under literate/ plus the versions that shape the output."""
    import matplotlib
    import torch

    h = hashlib.sha256()
    for path in sorted((ROOT / "literate").rglob("*.py")):
        h.update(path.relative_to(ROOT).as_posix().encode())
        h.update(path.read_bytes())
    h.update(f"matplotlib={matplotlib.__version__} torch={torch.__version__}".encode())
    return h.hexdigest()


@dataclass
class FigureReport:
    paths: dict[str, Path]  # served uri -> cached file
    drawn: list[str]  # file names drawn (or to be drawn, see `plan_figures`)
    reused: list[str]
    jobs: list[tuple[str, str, Path]]  # (name, theme, path) still to draw


def plan_figures(cache_dir: Path = FIGURE_CACHE, *, language: str = "en") -> FigureReport:
    """Where every figure will be, and which ones are not in the cache yet (nothing drawn)."""
    from literate.figures import FIGURES, THEMES

    fingerprint = _code_fingerprint()
    cache_dir.mkdir(parents=True, exist_ok=True)
    report = FigureReport(paths={}, drawn=[], reused=[], jobs=[])
    for name in FIGURES:
        for theme in THEMES:
            key = hashlib.sha256(f"{fingerprint}|{name}|{theme}|{language}".encode()).hexdigest()[:20]
            path = cache_dir / f"{name}-{theme}-{key}.svg"
            if path.exists():
                report.reused.append(path.name)
            else:
                report.jobs.append((name, theme, path))
                report.drawn.append(path.name)
            report.paths[f"figures/{name}-{theme}.svg"] = path
    return report


def draw_figures(jobs: list[tuple[str, str, Path]], *, language: str = "en") -> None:
    """Draw the planned figures; each file appears whole or not at all."""
    import literate.figures

    literate.figures.draw_files(jobs, language=language)


def ensure_figures(cache_dir: Path = FIGURE_CACHE, *, language: str = "en") -> FigureReport:
    """Draw every figure that is not in the cache yet; return where each one is."""
    report = plan_figures(cache_dir, language=language)
    draw_figures(report.jobs, language=language)
    report.jobs = []
    return report


# ---------------------------------------------------------------------------------------
# Claims


@dataclass(frozen=True)
class PageClaim:
    page: str  # docs-relative path of the page
    title: str  # the page's first heading
    claim: Claim


_site_claims: list[PageClaim] = []


def _collect_claims(files: Files, order: list[str]) -> list[PageClaim]:
    """Every claim of every page, pages in reading order (then any page not in the nav)."""
    found: list[PageClaim] = []
    seen: dict[str, str] = {}
    problems: list[str] = []
    rank = {path: i for i, path in enumerate(order)}
    pages = sorted(files.documentation_pages(), key=lambda f: (rank.get(f.src_uri, len(rank)), f.src_uri))
    for f in pages:
        if not f.abs_src_path or not f.src_uri.endswith(".md"):
            continue
        text = Path(f.abs_src_path).read_text(encoding="utf-8")
        problems += claim_problems(text, where=f.src_uri)
        heading = re.search(r"^# (.+)$", text, re.M)
        title = heading.group(1).strip() if heading else f.src_uri
        for claim in iter_claims(text):
            if claim.id in seen:
                problems.append(f"{f.src_uri}:{claim.line}: claim id {claim.id!r} already used in {seen[claim.id]}")
            seen[claim.id] = f.src_uri
            found.append(PageClaim(f.src_uri, title, claim))
    if problems:
        raise PluginError("claims without a valid proof:\n  " + "\n  ".join(problems))
    return found


def render_claims(markdown: str) -> str:
    """`!!! claim "id"` + indented sentence -> an anchored claim box (md_in_html)."""

    def box(match: re.Match[str]) -> str:
        cid = match.group("id")
        body = "\n".join(line[4:] for line in match.group("body").split("\n")).strip()
        return (
            f'<div class="admonition claim" id="claim-{cid}" markdown>\n'
            f'<p class="admonition-title">Claim <code>{html.escape(cid)}</code></p>\n\n'
            f"{body}\n\n</div>\n\n"
        )

    return CLAIM.sub(box, markdown)


def _relative(from_page: str, to_page: str) -> str:
    import posixpath

    return posixpath.relpath(to_page, posixpath.dirname(from_page) or ".")


def ledger_markdown(claims: list[PageClaim], *, on_page: str) -> str:
    """One section per page, in reading order: each claim, its statement, its pytest id."""
    pages = list(dict.fromkeys(c.page for c in claims))
    lines = [f"**{len(claims)} claims** on {len(pages)} pages.", ""]
    for page in pages:
        items = [c for c in claims if c.page == page]
        link = _relative(on_page, page)
        lines += [f"## [{items[0].title}]({link})", "", "| Claim | Statement | Proved by (pytest id) |",
                  "|---|---|---|"]
        for item in items:
            c = item.claim
            statement = " ".join(c.text.split()).replace("|", "\\|")
            proof = c.proof
            node = f"docs/{item.page}::line:{proof.line},column:1" if proof else "(none)"
            asserts = proof.source.count("assert") if proof else 0
            lines.append(
                f"| [`{c.id}`]({link}#claim-{c.id}) | {statement} "
                f"| `{node}` ({asserts} assert{'s' if asserts != 1 else ''}) |"
            )
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# Downloads and versions


def write_downloads(out_dir: Path = DOWNLOADS) -> dict[str, Path]:
    """Every era of `literate.tools.export` as one file: served uri -> file. Rewritten only when
    its text changed, so an unchanged build leaves the files (and their times) alone."""
    from literate.tools.export import ERAS, assemble

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in ERAS:
        path = out_dir / f"{name}.py"
        text = assemble(name)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        paths[f"downloads/{name}.py"] = path
    return paths


def versions_markdown() -> str:
    """A table of the Python and package versions installed for this build, and the
    floors `pyproject.toml` declares."""
    import platform
    import tomllib
    from importlib import metadata

    declared: dict[str, str] = {}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    for requirement in requirements:
        name = re.split(r"[<>=!~ \[;]", requirement, maxsplit=1)[0].lower()
        declared[name] = requirement[len(name):].strip() or "any"
    rows = ["| package | built and tested with | `pyproject.toml` accepts |", "|---|---|---|",
            f"| Python | {platform.python_version()} | {project['requires-python']} |"]
    for package in TESTED_PACKAGES:
        try:
            version = metadata.version(package)
        except metadata.PackageNotFoundError:
            version = "not installed"
        rows.append(f"| {package} | {version} | {declared.get(package, '(not a direct dependency)')} |")
    return "\n".join(rows)


# ---------------------------------------------------------------------------------------
# Offline guard

_ASSET_TAG = re.compile(
    r"<(?P<tag>script|img|iframe|source|video|audio|embed|object|link)\b(?P<attrs>[^>]*)>", re.I
)
_ASSET_ATTR = re.compile(r"\b(?:src|href|data|srcset)\s*=\s*[\"']?\s*(?P<url>(?:https?:)?//[^\"'\s>]+)", re.I)
_LINK_REL = re.compile(r"\brel\s*=\s*[\"']?(?P<rel>[^\"'>]+)", re.I)
_CSS_URL = re.compile(r"(?:url\(\s*[\"']?|@import\s+[\"'])(?P<url>(?:https?:)?//[^\"')\s]+)", re.I)
_FETCHING_RELS = {"stylesheet", "icon", "preload", "modulepreload", "prefetch", "manifest", "apple-touch-icon"}


def external_assets(site_dir: Path) -> list[str]:
    """Every asset a built page or stylesheet would fetch from another host."""
    found = []
    for path in sorted(site_dir.rglob("*")):
        if path.suffix == ".html":
            text = path.read_text(encoding="utf-8", errors="replace")
            for tag in _ASSET_TAG.finditer(text):
                attrs = tag.group("attrs")
                if tag.group("tag").lower() == "link":
                    rel = _LINK_REL.search(attrs)
                    if not rel or not set(rel.group("rel").lower().split()) & _FETCHING_RELS:
                        continue
                for url in _ASSET_ATTR.finditer(attrs):
                    found.append(f"{path.relative_to(site_dir)}: <{tag.group('tag')}> {url.group('url')}")
            for url in _CSS_URL.finditer(text):
                found.append(f"{path.relative_to(site_dir)}: css {url.group('url')}")
        elif path.suffix == ".css":
            for url in _CSS_URL.finditer(path.read_text(encoding="utf-8", errors="replace")):
                found.append(f"{path.relative_to(site_dir)}: css {url.group('url')}")
    return found


# ---------------------------------------------------------------------------------------
# Publishing: a dated build, stable notebook cell ids, instant navigation with a
# site_url, external links listed

_epoch_set: str | None = None  # the SOURCE_DATE_EPOCH this hook set, if it set one


def date_build_by_last_commit(environ: Any = None) -> str | None:
    """Date the build by the last commit: set `SOURCE_DATE_EPOCH` (which MkDocs reads for
    the sitemap's dates and its gzip header) to the last commit's time, unless the caller
    set it. Two builds of one commit then give the same sitemap on any day. Returns the
    value in force (None outside a git work tree with the variable unset)."""
    import os

    from literate.site.reproducible import source_date_epoch

    global _epoch_set
    environ = os.environ if environ is None else environ
    current = environ.get("SOURCE_DATE_EPOCH")
    if current is None or current == _epoch_set:  # unset, or ours from an earlier build
        epoch = source_date_epoch(ROOT)
        if epoch is not None:
            environ["SOURCE_DATE_EPOCH"] = _epoch_set = epoch
    return environ.get("SOURCE_DATE_EPOCH")


def publishing_features(config: Any) -> list[str]:
    """With a site_url (`SITE_URL`), turn on Material's instant navigation: it reads the
    site's pages from sitemap.xml, which lists them only when the site has a URL."""
    features = config["theme"]["features"]
    if config.get("site_url") and "navigation.instant" not in features:
        features.append("navigation.instant")
    return features


_LINK_HREF = re.compile(r"<a\b[^>]*?\bhref\s*=\s*(?P<q>[\"'])(?P<url>https?://[^\"']+)(?P=q)", re.I)


def external_links(site_dir: Path, site_url: str | None = None) -> dict[str, list[str]]:
    """Every link (`<a href>`) of a built page to another site, read from the files and
    never fetched: url -> the built pages that have it, in path order. Links into the
    site's own `site_url` are not external."""
    links: dict[str, list[str]] = {}
    for path in sorted(site_dir.rglob("*.html")):
        page = path.relative_to(site_dir).as_posix()
        for match in _LINK_HREF.finditer(path.read_text(encoding="utf-8", errors="replace")):
            url = html.unescape(match.group("url"))
            if site_url and url.startswith(site_url):
                continue
            pages = links.setdefault(url, [])
            if page not in pages:
                pages.append(page)
    return dict(sorted(links.items()))


def log_external_links(site_dir: Path, site_url: str | None = None, *, shown_pages: int = 3) -> dict[str, list[str]]:
    """Log every external link of the built site once, at INFO, with the pages that have
    it; nothing is fetched (checking that they still resolve is left to a reader)."""
    links = external_links(site_dir, site_url)
    if links:
        lines = []
        for url, pages in links.items():
            more = f", +{len(pages) - shown_pages} more" if len(pages) > shown_pages else ""
            lines.append(f"  {url}  ({', '.join(pages[:shown_pages])}{more})")
        log.info("external links (listed, not fetched): %d\n%s", len(links), "\n".join(lines))
    return links


class _StableIdJupytext:
    """jupytext as mkdocs-jupyter reads a notebook with it, except that `read` gives
    every cell an id made from its position and text (`stable_cell_ids`)."""

    def __init__(self, module: Any) -> None:
        self.module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)

    def read(self, *args: Any, **kwargs: Any) -> Any:
        return stable_cell_ids(self.module.read(*args, **kwargs))


def stable_cell_ids(notebook: Any) -> Any:
    """Give every cell of `notebook` an id that hashes its position and source, in place
    of the random one jupytext makes when it reads a .py notebook (nbconvert writes the
    ids into the page, `id="cell-id=..."`, so two builds differed)."""
    for i, cell in enumerate(notebook.cells):
        if "id" in cell:
            cell["id"] = hashlib.sha256(f"{i}|{cell.source}".encode()).hexdigest()[:8]
    return notebook


def _nbconvert2(name: str, without_it: str) -> tuple[Any, Any] | None:
    """mkdocs-jupyter's page-making module and its attribute `name`, which a hook here
    replaces; None without the plugin (no notebooks). An attribute gone (a new version
    of the plugin) fails the build, saying what the pages would lose: `without_it`."""
    try:
        from mkdocs_jupyter import nbconvert2
    except ImportError:  # no notebooks without the plugin
        return None
    current = getattr(nbconvert2, name, None)
    if current is None:
        raise PluginError(f"mkdocs-jupyter no longer has nbconvert2.{name}: {without_it}")
    return nbconvert2, current


def stable_notebook_cell_ids() -> None:
    """Make mkdocs-jupyter's notebook pages give the same bytes at every build."""
    found = _nbconvert2("jupytext", "its pages' cell ids would be random; see stable_notebook_cell_ids")
    if found is not None and not isinstance(found[1], _StableIdJupytext):
        found[0].jupytext = _StableIdJupytext(found[1])


# The page template of mkdocs-jupyter, with alt text on figures: nbconvert's lab template
# (which mkdocs-jupyter extends) leaves an image without one, then writes "No description
# has been provided for this image" into it. The alt text is the cell's `alt` metadata
# (`# %% alt="..."` in a .py notebook), or the output's, the convention of nbconvert's
# classic template.
NOTEBOOK_TEMPLATE_FILE = "literate/notebook.html.j2"
NOTEBOOK_TEMPLATE = """{%- extends "mkdocs_html/notebook.html.j2" -%}
{%- macro with_alt(html, alt) -%}
{{ html | replace('<img src=', '<img alt="' ~ (alt | escape_html) ~ '" src=') }}
{%- endmacro -%}
{% block data_png scoped %}
{{ with_alt(super(), (output | get_metadata('alt', 'image/png')) or (cell | get_metadata('alt'))) }}
{% endblock data_png %}
{% block data_jpg scoped %}
{{ with_alt(super(), (output | get_metadata('alt', 'image/jpeg')) or (cell | get_metadata('alt'))) }}
{% endblock data_jpg %}
"""
_FIGURE_TYPES = ("image/png", "image/jpeg")


def require_alt_text(notebook: Any, resources: Any) -> tuple[Any, Any]:
    """An nbconvert preprocessor (run after execution): fail on a figure a notebook page
    would show without alt text, naming its cell."""
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            images = [kind for kind in output.get("data", {}) if kind.startswith("image/")]
            if not images:
                continue
            if not set(images) & set(_FIGURE_TYPES):
                raise PluginError(f"notebook cell {index} shows a {images[0]} image; only "
                                  f"{' and '.join(_FIGURE_TYPES)} get alt text on the page")
            if not (cell.metadata.get("alt") or any(
                    output.get("metadata", {}).get(kind, {}).get("alt") for kind in images)):
                first = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
                raise PluginError(f"notebook cell {index} ({first!r}) shows a figure without "
                                  "alt text: give the cell one, `# %% alt=\"what it shows\"`")
    return notebook, resources


def notebook_exporter() -> None:
    """Make mkdocs-jupyter's notebook pages with an exporter that, after execution,
    * merges a cell's consecutive prints to the same stream into one output, whatever
      the kernel's flushes were (a kernel sends what a cell printed when its flush timer
      fires, so one `print` reached one build's page as one output and the next build's
      as two). nbconvert's CoalesceStreamsPreprocessor does it; its default place is
      before execution;
    * fails the build on a figure without alt text (`require_alt_text`), and writes the
      alt text into the page (`NOTEBOOK_TEMPLATE`)."""
    found = _nbconvert2("HTMLExporter", "a print could be split differently at every build, "
                        "and figures would lose their alt text; see notebook_exporter")
    if found is None or getattr(found[1], "literate", False):
        return
    nbconvert2, current = found
    from jinja2 import DictLoader
    from nbconvert.preprocessors import CoalesceStreamsPreprocessor

    class LiterateHTMLExporter(current):  # type: ignore[misc, valid-type]
        literate = True

        def __init__(self, *args: Any, preprocessors: Any = (), **kwargs: Any) -> None:
            if kwargs.get("template_file") != "mkdocs_html/notebook.html.j2":
                raise PluginError(f"mkdocs-jupyter's page template is now {kwargs.get('template_file')!r}: "
                                  "NOTEBOOK_TEMPLATE extends the one it replaced")
            kwargs["template_file"] = NOTEBOOK_TEMPLATE_FILE
            kwargs["extra_loaders"] = [DictLoader({NOTEBOOK_TEMPLATE_FILE: NOTEBOOK_TEMPLATE})]
            # preprocessors given here run after the defaults, execution among them
            preprocessors = [*preprocessors, CoalesceStreamsPreprocessor, require_alt_text]
            super().__init__(*args, preprocessors=preprocessors, **kwargs)

    nbconvert2.HTMLExporter = LiterateHTMLExporter


# ---------------------------------------------------------------------------------------
# Notebook cache


def cover_notebook_cache_with_code() -> None:
    """Make mkdocs-jupyter's cache key include the fingerprint of `literate/`."""
    try:
        from mkdocs_jupyter import plugin
    except ImportError:  # no notebooks without the plugin
        return
    current = getattr(plugin, "_compute_cache_key", None)
    if current is None:
        raise PluginError(
            "mkdocs-jupyter no longer has _compute_cache_key: its cache would ignore edits "
            "to literate/; set `cache: false` for mkdocs-jupyter in mkdocs.yml"
        )
    original = getattr(current, "__wrapped__", current)

    def key(nb_path: str, config: Any, exec_nb: bool) -> str:
        return hashlib.sha256(f"{original(nb_path, config, exec_nb)}|{_code_fingerprint()}".encode()).hexdigest()

    key.__wrapped__ = original  # type: ignore[attr-defined]
    plugin._compute_cache_key = key


# The keyword arguments mkdocs-jupyter's page render passes to `convert.nb2html`, read
# from its plugin config (its `on_pre_page`); `execute_ignore` is not used here.
NB2HTML_OPTIONS = ("kernel_name", "theme", "allow_errors", "show_input", "no_input",
                   "no_prompt", "remove_tag_config", "highlight_extra_classes",
                   "include_requirejs", "custom_mathjax_url")
_ahead: dict[str, tuple[dict[str, Any], Future[str]]] = {}


def execute_notebooks_ahead(config: Any, files: Files) -> list[str]:
    """Start executing, in a background thread, every notebook mkdocs-jupyter will have to
    execute (no cached result), in the order of `files`; its page render then waits for
    that result instead of executing the notebook itself when it reaches the page. The
    kernels run in other processes, so MkDocs renders the other pages meanwhile (without
    this, every notebook ran in turn while nothing else of the build's main thread moved).
    A notebook that fails raises where the plugin's own call would have. On Linux each
    runs in a fresh kernel forked by one server (`warm_kernels`), closed after the last
    one. Returns the notebooks started."""
    try:
        from mkdocs_jupyter import convert, plugin
    except ImportError:  # no notebooks without the plugin
        return []
    jupyter = config["plugins"].get("mkdocs-jupyter")
    options = getattr(jupyter, "config", None)
    if jupyter is None or not options or not options.get("execute") or options.get("execute_ignore"):
        return []
    original = getattr(convert.nb2html, "__wrapped__", convert.nb2html)

    def nb2html(nb_path: str, **kwargs: Any) -> str:
        kwargs_ahead, future = _ahead.pop(str(nb_path), (None, None))
        if future is not None and kwargs_ahead == kwargs:
            return future.result()
        return original(nb_path, **kwargs)

    nb2html.__wrapped__ = original  # type: ignore[attr-defined]
    convert.nb2html = nb2html
    kwargs = {"execute": True} | {name: options[name] for name in NB2HTML_OPTIONS}
    pending = []
    for file in files:
        if not isinstance(file, plugin.NotebookFile):  # its on_files marked them
            continue
        key = plugin._compute_cache_key(file.abs_src_path, options, True)
        if options.get("cache") and plugin._get_cache_path(options["cache_dir"], key).exists():
            continue  # the plugin reads its cache
        pending.append(file.abs_src_path)
    if pending:
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="notebooks")
        # started first, in the same thread
        warm = executor.submit(warm_kernels, pending) if FORK_KERNELS else None
        run = {**kwargs, "kernel_name": WarmKernels.NAME} if warm else kwargs

        def execute(path: str) -> str:
            if warm is not None:
                warm.result()
            return original(path, **run)

        for path in pending:
            _ahead[str(path)] = (kwargs, executor.submit(execute, path))
        if warm is not None:
            executor.submit(lambda: warm.result().close())  # after the last notebook
        executor.shutdown(wait=False)
    return pending


# Forking a process that has imported torch is safe on Linux; elsewhere (macOS) each
# notebook gets a kernel started the usual way, the same results a little later.
FORK_KERNELS = sys.platform == "linux"


def warm_kernels(notebooks: list[str]) -> Any:
    """The server that forks the build's notebook kernels (literate/site/warm_kernels.py:
    one process imports ipykernel, torch and the other preloadable libraries the
    notebooks import, once; each kernel is a fork of it, fresh, with nothing of
    `literate`), and its kernel spec made visible to Jupyter (JUPYTER_PATH). A kernel
    started the usual way spends seconds on those imports, three times a build."""
    folder = ROOT / ".cache" / "kernels"
    folder.mkdir(parents=True, exist_ok=True)
    sources = [Path(path).read_text(encoding="utf-8") for path in notebooks]
    warm = WarmKernels(str(folder), ["torch", *third_party_imports(sources)])
    paths = [str(folder), *filter(None, os.environ.get("JUPYTER_PATH", "").split(os.pathsep))]
    os.environ["JUPYTER_PATH"] = os.pathsep.join(dict.fromkeys(paths))
    return warm


# ---------------------------------------------------------------------------------------
# MkDocs events


def on_config(config: Any) -> Any:
    cover_notebook_cache_with_code()
    date_build_by_last_commit()
    publishing_features(config)
    stable_notebook_cell_ids()
    notebook_exporter()
    # The figures are drawn in one thread while the notebooks execute in another, which
    # imports IPython; every matplotlib canvas reads `IPython.version_info` if the module
    # is in sys.modules, and a half-imported one raises. Import it here, before either.
    try:
        import IPython  # noqa: F401
    except ImportError:  # no notebooks without it
        pass
    return config


_drawing: Future[None] | None = None
_outputs: dict[str, Future[list[str]]] = {}


def start_outputs(pages: list[str]) -> dict[str, Future[list[str]]]:
    """Run every page of `pages` (in that order) in one worker process, each result
    cached; the pages are read while the worker runs, and each waits only for its own
    outputs."""
    import multiprocessing

    from literate.site.outputs import cached_run, python_blocks

    fingerprint = _code_fingerprint()
    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    futures = {}
    for page in pages:
        path = ROOT / "docs" / page
        if path.suffix == ".md" and path.exists() and python_blocks(path.read_text(encoding="utf-8")):
            futures[page] = pool.submit(cached_run, page, fingerprint)
    pool.shutdown(wait=False)
    return futures


def on_files(files: Files, config: Any) -> Files:
    """Start the build's long work first and only then do the rest: the pages' blocks in
    a worker process (`start_outputs`), the notebooks to execute (their kernels are other
    processes), and the figures not in the cache, in a background thread. The figures
    are needed only when static files are copied (after `on_env`), the outputs and
    notebooks each when its page is rendered, so all three overlap with reading the
    pages."""
    global _site_claims, _drawing, _outputs
    order = nav_order(config.get("nav"))
    # In the order MkDocs reads the pages (not the reading order): each page's outputs
    # are then ready about when MkDocs reaches it, and it converts the pages meanwhile.
    _outputs = start_outputs([file.src_uri for file in files.documentation_pages()])
    started = execute_notebooks_ahead(config, files)
    if started:
        log.info("notebooks: %d executing in the background", len(started))
    language = config.get("extra", {}).get("figure_language", "en")
    report = plan_figures(language=language)
    for uri, path in report.paths.items():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    log.info("figures: %d to draw (in the background), %d reused from cache", len(report.drawn), len(report.reused))
    if report.jobs:
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="figures")
        _drawing = executor.submit(draw_figures, report.jobs, language=language)
        executor.shutdown(wait=False)
    for uri, path in write_downloads().items():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    # Every chapter and notebook page as a notebook to download (the theme's button).
    from literate.site.chapter_notebooks import add_notebook_downloads

    add_notebook_downloads(files, config, order)
    _site_claims = _collect_claims(files, order)
    return files


def on_env(env: Any, config: Any, files: Files) -> Any:
    """Wait for the figures before MkDocs copies them; a drawing error fails the build."""
    global _drawing
    if _drawing is not None:
        drawing, _drawing = _drawing, None
        drawing.result()
    return env


def figures_with_alt_text(markdown: str, page: str) -> str:
    """The page's generated figures with their alt text (`literate.figures.with_alt_text`);
    a figure with a second description in its brackets fails the build."""
    from literate.figures import with_alt_text

    try:
        return with_alt_text(markdown, page)
    except ValueError as error:
        raise PluginError(str(error)) from None


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    future = _outputs.get(page.file.src_uri)
    if future is not None:
        from literate.site.outputs import with_outputs

        try:
            outputs = future.result()
        except Exception as error:  # a block that raises fails the build
            raise PluginError(f"running {page.file.src_uri} failed: {error}") from None
        markdown = with_outputs(markdown, outputs)
    markdown = figures_with_alt_text(markdown, page.file.src_uri)
    markdown = render_claims(markdown)
    if LEDGER_MARKER in markdown:
        markdown = markdown.replace(LEDGER_MARKER, ledger_markdown(_site_claims, on_page=page.file.src_uri))
    if VERSIONS_MARKER in markdown:
        markdown = markdown.replace(VERSIONS_MARKER, versions_markdown())
    return markdown


def on_post_build(config: Any) -> None:
    log_external_links(Path(config["site_dir"]), config.get("site_url"))
    offending = external_assets(Path(config["site_dir"]))
    if offending:
        raise PluginError(
            "the site would fetch assets from other hosts (it must work offline):\n  "
            + "\n  ".join(offending[:20])
        )
