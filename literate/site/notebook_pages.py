"""The notebook pages (mkdocs-jupyter), made reproducible, accessible and fast to build:

* cells get ids from their position and text (`stable_notebook_cell_ids`), a cell's
  consecutive prints are one output, and a figure carries its cell's alt text
  (`notebook_exporter`, `NOTEBOOK_TEMPLATE`; one without fails the build);
* the kernels draw every figure twice, light and dark (`FIGURE_THEMES`), and the page
  shows the one of the reader's colour scheme (`NOTEBOOK_TEMPLATE`, docs/assets/css);
* the plugin's cache of executed notebooks also keys on the code of `literate/`
  (`cover_notebook_cache_with_code`);
* the notebooks execute in a background thread from the build's start
  (`execute_notebooks_ahead`), each kernel forked from one warm server on Linux
  (`warm_kernels`).

Each patch of the plugin checks the attribute it replaces and fails the build, saying what
the pages would lose, if a new version of the plugin no longer has it.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files

from literate.site.docblocks import ROOT
from literate.site.figure_files import code_fingerprint
from literate.site.warm_kernels import WarmKernels, third_party_imports


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
        raise PluginError(
            f"mkdocs-jupyter no longer has nbconvert2.{name}: {without_it}"
        )
    return nbconvert2, current


def stable_notebook_cell_ids() -> None:
    """Make mkdocs-jupyter's notebook pages give the same bytes at every build."""
    found = _nbconvert2(
        "jupytext", "its pages' cell ids would be random; see stable_notebook_cell_ids"
    )
    if found is not None and not isinstance(found[1], _StableIdJupytext):
        found[0].jupytext = _StableIdJupytext(found[1])


# The page template of mkdocs-jupyter, with alt text on figures: nbconvert's lab template
# (which mkdocs-jupyter extends) leaves an image without one, then writes "No description
# has been provided for this image" into it. The alt text is the cell's `alt` metadata
# (`# %% alt="..."` in a .py notebook), or the output's, the convention of nbconvert's
# classic template.
#
# And with each scheme's figures: an output whose metadata says `"theme": "light"` (or
# "dark"; the notebooks' `show` helper draws each figure once per theme, see
# `FIGURE_THEMES`) is wrapped in a <div class="only-light"> (or "only-dark"), which the
# site's CSS hides on the other colour scheme (docs/assets/css/site.css), as Material
# hides an image whose URL ends in #only-light or #only-dark: these images' URLs are
# their data (data:image/png;base64,...), no place for a marker. The whole output is
# hidden, not only its <img>: the image's box is in the tab order.
NOTEBOOK_TEMPLATE_FILE = "literate/notebook.html.j2"


NOTEBOOK_TEMPLATE = """{%- extends "mkdocs_html/notebook.html.j2" -%}
{% block output %}
{%- set theme = output | get_metadata('theme') -%}
{%- if theme in ('light', 'dark') -%}
<div class="only-{{ theme }}">
{{ super() }}
</div>
{%- else -%}
{{ super() }}
{%- endif -%}
{% endblock output %}
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
            images = [
                kind for kind in output.get("data", {}) if kind.startswith("image/")
            ]
            if not images:
                continue
            if not set(images) & set(_FIGURE_TYPES):
                raise PluginError(
                    f"notebook cell {index} shows a {images[0]} image; only "
                    f"{' and '.join(_FIGURE_TYPES)} get alt text on the page"
                )
            if not (
                cell.metadata.get("alt")
                or any(
                    output.get("metadata", {}).get(kind, {}).get("alt")
                    for kind in images
                )
            ):
                first = (
                    cell.source.strip().splitlines()[0] if cell.source.strip() else ""
                )
                raise PluginError(
                    f"notebook cell {index} ({first!r}) shows a figure without "
                    'alt text: give the cell one, `# %% alt="what it shows"`'
                )
    return notebook, resources


# The environment variable the notebook pages' kernels start with (`notebook_exporter`).
# A notebook's first cell reads from it the themes to draw each figure in (its `THEMES`;
# "light" without it, so that a notebook run anywhere else shows each figure once); each
# figure's outputs say their theme (`"theme"` in their metadata), and the page shows the
# one of the reader's colour scheme (`NOTEBOOK_TEMPLATE`).
FIGURE_THEMES = {"LITERATE_FIGURE_THEMES": "light,dark"}


def require_dark_twins(notebook: Any, resources: Any) -> tuple[Any, Any]:
    """An nbconvert preprocessor (run after execution): fail on a cell whose figures drawn
    for a colour scheme (an output with `"theme"` in its metadata) do not come in pairs,
    light then dark: a page would show the readers of one scheme no figure there."""
    for index, cell in enumerate(notebook.cells):
        themes = [
            theme
            for output in cell.get("outputs", [])
            if (theme := (output.get("metadata") or {}).get("theme")) is not None
        ]
        if themes != ["light", "dark"] * (len(themes) // 2):
            raise PluginError(
                f"notebook cell {index} shows figures drawn for the colour schemes "
                f"{themes}, not light then dark for each: did its kernel start with "
                f"{FIGURE_THEMES} in its environment? (FIGURE_THEMES)"
            )
    return notebook, resources


_EXECUTE = "nbconvert.preprocessors.ExecutePreprocessor"


def notebook_exporter() -> None:
    """Make mkdocs-jupyter's notebook pages with an exporter that
    * starts the kernel with `FIGURE_THEMES` in its environment (nbconvert's
      ExecutePreprocessor, in its place among the exporter's defaults, its
      `setup_kernel` extended), whether the notebook is executed ahead
      (`execute_notebooks_ahead`) or by the plugin, in a forked kernel or not;
    and that, after execution,
    * merges a cell's consecutive prints to the same stream into one output, whatever
      the kernel's flushes were (a kernel sends what a cell printed when its flush timer
      fires, so one `print` reached one build's page as one output and the next build's
      as two). nbconvert's CoalesceStreamsPreprocessor does it; its default place is
      before execution;
    * fails the build on a figure without alt text (`require_alt_text`), and writes the
      alt text into the page (`NOTEBOOK_TEMPLATE`);
    * fails the build on a light figure without its dark twin (`require_dark_twins`),
      and shows each scheme's figures only on that scheme (`NOTEBOOK_TEMPLATE`)."""
    found = _nbconvert2(
        "HTMLExporter",
        "a print could be split differently at every build, figures would lose their "
        "alt text and their dark variants; see notebook_exporter",
    )
    if found is None or getattr(found[1], "literate", False):
        return
    nbconvert2, current = found
    from jinja2 import DictLoader
    from nbconvert.preprocessors import (
        CoalesceStreamsPreprocessor,
        ExecutePreprocessor,
    )

    class FigureThemesExecutePreprocessor(ExecutePreprocessor):  # type: ignore[misc]
        """nbconvert's, configured as it is (its config section is its base class's
        name), its kernel started with `FIGURE_THEMES` added to the environment."""

        @contextmanager
        def setup_kernel(self, **kwargs: Any) -> Iterator[None]:
            kwargs["env"] = {**kwargs.get("env", os.environ), **FIGURE_THEMES}
            with super().setup_kernel(**kwargs):
                yield

    defaults = list(current.class_traits()["default_preprocessors"].default())
    if _EXECUTE not in defaults:
        raise PluginError(
            f"nbconvert's exporters no longer run {_EXECUTE}: the notebook pages' "
            "kernels would not get FIGURE_THEMES; see notebook_exporter"
        )
    defaults[defaults.index(_EXECUTE)] = FigureThemesExecutePreprocessor

    class LiterateHTMLExporter(current):  # type: ignore[misc, valid-type]
        literate = True

        def __init__(self, *args: Any, preprocessors: Any = (), **kwargs: Any) -> None:
            if kwargs.get("template_file") != "mkdocs_html/notebook.html.j2":
                raise PluginError(
                    f"mkdocs-jupyter's page template is now {kwargs.get('template_file')!r}: "
                    "NOTEBOOK_TEMPLATE extends the one it replaced"
                )
            kwargs["template_file"] = NOTEBOOK_TEMPLATE_FILE
            kwargs["extra_loaders"] = [
                DictLoader({NOTEBOOK_TEMPLATE_FILE: NOTEBOOK_TEMPLATE})
            ]
            kwargs.setdefault("default_preprocessors", list(defaults))
            # preprocessors given here run after the defaults, execution among them
            preprocessors = [
                *preprocessors,
                CoalesceStreamsPreprocessor,
                require_alt_text,
                require_dark_twins,
            ]
            super().__init__(*args, preprocessors=preprocessors, **kwargs)

    nbconvert2.HTMLExporter = LiterateHTMLExporter


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
        return hashlib.sha256(
            f"{original(nb_path, config, exec_nb)}|{code_fingerprint()}".encode()
        ).hexdigest()

    key.__wrapped__ = original  # type: ignore[attr-defined]
    plugin._compute_cache_key = key


# The keyword arguments mkdocs-jupyter's page render passes to `convert.nb2html`, read
# from its plugin config (its `on_pre_page`); `execute_ignore` is not used here.
NB2HTML_OPTIONS = (
    "kernel_name",
    "theme",
    "allow_errors",
    "show_input",
    "no_input",
    "no_prompt",
    "remove_tag_config",
    "highlight_extra_classes",
    "include_requirejs",
    "custom_mathjax_url",
)


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
    if (
        jupyter is None
        or not options
        or not options.get("execute")
        or options.get("execute_ignore")
    ):
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
        if (
            options.get("cache")
            and plugin._get_cache_path(options["cache_dir"], key).exists()
        ):
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
    paths = [
        str(folder),
        *filter(None, os.environ.get("JUPYTER_PATH", "").split(os.pathsep)),
    ]
    os.environ["JUPYTER_PATH"] = os.pathsep.join(dict.fromkeys(paths))
    return warm
