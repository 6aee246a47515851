"""The MkDocs hook (mkdocs.yml `hooks:`): its events, and what they call.

* Figures: every figure is drawn in a light and a dark variant into `.cache/figures/`,
  cached by content (`literate/site/figure_files.py`), in a background thread while the
  pages are read; its alt text on the page is the one registered with it.
* Claims: each claim's paragraph is marked verified and anchored, a claim without a proving block fails
  the build, and the ledger page lists them all (`literate/site/claims.py`).
* Notebooks: executed ahead in kernels forked from one warm server, cached with the code
  of `literate/` in the key, cell ids stable, figures with alt text
  (`literate/site/notebook_pages.py`).
* Outputs: every page runs in a worker process, as pytest runs it, and what each Python
  block prints is shown in an "Output" box under it (`literate/site/outputs.py`); a
  block that raises fails the build.
* Downloads and versions (here): each era of `literate.tools.export` as a file to
  download; the versions the site was built and tested with.
* Offline: after the build, any page or stylesheet that would load an asset from another
  host fails the build; the external links are listed, never fetched
  (`literate/site/offline.py`).
* Publishing (here): the build is dated by the last commit (`SOURCE_DATE_EPOCH`, for the
  sitemap), and a site_url (`SITE_URL`) turns on instant navigation.
"""

from __future__ import annotations

import logging
import os
import re
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

from literate.site.claims import (
    LEDGER_MARKER,
    PageClaim,
    collect_claims,
    ledger_markdown,
    render_claims,
)
from literate.site.docblocks import (
    ROOT,
    nav_order,
)
from literate.site.figure_files import code_fingerprint, draw_figures, plan_figures
from literate.site.lighter import lighten
from literate.site.notebook_pages import (
    cover_notebook_cache_with_code,
    execute_notebooks_ahead,
    notebook_exporter,
    stable_notebook_cell_ids,
)
from literate.site.offline import external_assets, log_external_links
from literate.site.reading import (
    READING_TIME,
    READING_TIMES,
    read_page,
    read_site,
    reading_time,
    reading_times,
)
from literate.site.search_text import clean_search_index, exclude_from_search
from literate.site.sources import (
    figures_open_full_size,
    link_test_pointers,
    pointed_files,
)

log = logging.getLogger("mkdocs.hooks.literate")

DOWNLOADS = ROOT / ".cache" / "downloads"
VERSIONS_MARKER = "<!-- tested-versions -->"
# What the site was built and tested with, read from the installed packages at build time.
TESTED_PACKAGES = (
    "torch",
    "transformers",
    "numpy",
    "matplotlib",
    "mkdocs",
    "mkdocs-material",
    "pymdown-extensions",
    "mkdocs-jupyter",
    "pytest",
    "sybil",
    "playwright",
)


_site_claims: list[PageClaim] = []


# ---------------------------------------------------------------------------------------
# Downloads and versions


def write_downloads(out_dir: Path = DOWNLOADS) -> dict[str, Path]:
    """Every era of `literate.tools.export` as one file, and the package as a wheel
    (`literate.site.wheel`, for the chapters' notebooks): served uri -> file. Rewritten
    only when changed, so an unchanged build leaves the files (and their times) alone."""
    from literate.site.wheel import write_wheel
    from literate.tools.export import ERAS, assemble

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in ERAS:
        path = out_dir / f"{name}.py"
        text = assemble(name)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        paths[f"downloads/{name}.py"] = path
    wheel = write_wheel(out_dir)
    paths[f"downloads/{wheel.name}"] = wheel
    return paths


def versions_markdown() -> str:
    """A table of the Python and package versions installed for this build, and the
    floors `pyproject.toml` declares."""
    import platform
    import tomllib
    from importlib import metadata

    declared: dict[str, str] = {}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"
    ]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    for requirement in requirements:
        name = re.split(r"[<>=!~ \[;]", requirement, maxsplit=1)[0].lower()
        declared[name] = requirement[len(name) :].strip() or "any"
    rows = [
        "| package | built and tested with | `pyproject.toml` accepts |",
        "|---|---|---|",
        f"| Python | {platform.python_version()} | {project['requires-python']} |",
    ]
    for package in TESTED_PACKAGES:
        try:
            version = metadata.version(package)
        except metadata.PackageNotFoundError:
            version = "not installed"
        rows.append(
            f"| {package} | {version} | {declared.get(package, '(not a direct dependency)')} |"
        )
    return "\n".join(rows)


# ---------------------------------------------------------------------------------------
# Publishing: a dated build, instant navigation with a site_url (stable notebook cell ids:
# notebook_pages.py; external links listed: offline.py)

_epoch_set: str | None = None  # the SOURCE_DATE_EPOCH this hook set, if it set one


def date_build_by_last_commit(environ: Any = None) -> str | None:
    """Date the build by the last commit: set `SOURCE_DATE_EPOCH` (which MkDocs reads for
    the sitemap's dates and its gzip header) to the last commit's time, unless the caller
    set it. Two builds of one commit then give the same sitemap on any day. Returns the
    value in force (None outside a git work tree with the variable unset)."""

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

    fingerprint = code_fingerprint()
    pool = ProcessPoolExecutor(
        max_workers=1, mp_context=multiprocessing.get_context("spawn")
    )
    futures = {}
    for page in pages:
        path = ROOT / "docs" / page
        if (
            path.suffix == ".md"
            and path.exists()
            and python_blocks(path.read_text(encoding="utf-8"))
        ):
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
    log.info(
        "figures: %d to draw (in the background), %d reused from cache",
        len(report.drawn),
        len(report.reused),
    )
    if report.jobs:
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="figures")
        _drawing = executor.submit(draw_figures, report.jobs, language=language)
        executor.shutdown(wait=False)
    for uri, path in write_downloads().items():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    for uri, path in pointed_files(Path(config["docs_dir"])).items():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    # Every chapter and notebook page as a notebook to download (the theme's button).
    from literate.site.chapter_notebooks import add_notebook_downloads

    add_notebook_downloads(files, config, order)
    _site_claims = collect_claims(files, order)
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
    markdown = figures_open_full_size(markdown)
    markdown = render_claims(markdown)
    markdown = link_test_pointers(markdown, page.file.src_uri)
    if LEDGER_MARKER in markdown:
        markdown = markdown.replace(
            LEDGER_MARKER, ledger_markdown(_site_claims, on_page=page.file.src_uri)
        )
    if READING_TIME in markdown:  # measured on the page's source, folds closed
        reading = read_page(page.file.src_uri, page.file.content_string)
        markdown = markdown.replace(READING_TIME, reading_time(reading))
    if READING_TIMES in markdown:
        markdown = markdown.replace(
            READING_TIMES, reading_times(read_site(), on_page=page.file.src_uri)
        )
    if VERSIONS_MARKER in markdown:
        markdown = markdown.replace(VERSIONS_MARKER, versions_markdown())
    return markdown


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    """Code, outputs and proofs out of the search index (`search_text`); fewer spans,
    and folded code coloured only once opened (`lighter`)."""
    return lighten(exclude_from_search(html, page.file.src_uri))


def on_post_build(config: Any) -> None:
    clean_search_index(Path(config["site_dir"]) / "search" / "search_index.json")
    log_external_links(Path(config["site_dir"]), config.get("site_url"))
    offending = external_assets(Path(config["site_dir"]))
    if offending:
        raise PluginError(
            "the site would fetch assets from other hosts (it must work offline):\n  "
            + "\n  ".join(offending[:20])
        )
