"""A downloaded notebook runs anywhere: with torch and matplotlib and the era's standalone
file next to it, without this project's `literate` package (issue 26).

The notebook is the attention playground's download (`docs/notebooks/attention_playground.py`
as the site serves it, `downloads/notebooks/attention_playground.ipynb`, written here by
`write_notebooks` without a site_url), the smallest notebook page. It runs in a fresh
ipykernel of this venv's Python, started by nbclient, from a temporary directory that holds
only the notebook and `attention.py`, the standalone file of chapters 1-3
(`python -m literate.tools.export attention`, the site's `downloads/attention.py`).

How the package is kept out. The venv has `literate` installed in editable mode: a `.pth`
file installs a `sys.meta_path` finder that maps `literate` to this repository wherever
the kernel runs, so neither a clean cwd nor an empty PYTHONPATH hides it, and `python -I`
or `-S` would hide torch too. The test's copy of the notebook therefore starts with one
extra cell that
* puts, first on `sys.meta_path`, a finder that refuses `literate` and every
  `literate.*` module (ModuleNotFoundError, the error a machine without the package
  gives), so no finder after it (the editable one, the path finder) is asked;
* drops the repository's root from `sys.path` (PYTHONPATH is unset for the kernel too);
* checks that `import literate` now fails and that nothing of `literate` was imported.
The notebook's own cells follow unchanged, and a last extra cell checks that the functions
came from `attention.py` in the temporary directory and that still no `literate` module
is loaded. Every cell must run without error.

A notebook's figures: its first cell's `show` draws each figure once per theme of the
environment variable the site's build gives its kernels (`FIGURE_THEMES`), light alone
without it. Outside the build (the kernel above, which does not get the variable) each
figure is shown once, light; with it, twice, light then dark, each in the site's palette
of its theme (`literate/figures/style.py`): `show` of every notebook page, run in a
Python process of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from literate.figures.style import PALETTES
from literate.site.chapter_notebooks import default_page_urls, write_notebooks
from literate.site.docblocks import ROOT, mkdocs_config, nav_order
from literate.site.notebook_pages import FIGURE_THEMES
from literate.tools.export import assemble

PAGE = "notebooks/attention_playground.py"
ERA = "attention"  # the standalone file its first Markdown cell names

BLOCK_LITERATE = f"""# added by the test, not part of the download: no `literate` in this kernel
import importlib.abc
import sys


class NoLiterate(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "literate" or name.startswith("literate."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, NoLiterate())
sys.path[:] = [p for p in sys.path if not p or Path(p).resolve() != Path({str(ROOT)!r})]
assert not [m for m in sys.modules if m == "literate" or m.startswith("literate.")]
try:
    import literate  # noqa: F401
except ModuleNotFoundError:
    pass
else:
    raise AssertionError("literate is importable in the test's kernel")
"""

CHECK_FALLBACK = """# added by the test: the code came from the standalone file next to the notebook
import os
import sys
from pathlib import Path

assert Path(sys.modules[scaled_dot_product_attention.__module__].__file__).parent == (
    Path(os.getcwd())
), scaled_dot_product_attention.__module__
assert not [m for m in sys.modules if m == "literate" or m.startswith("literate.")]
print("ran without literate")
"""


def test_the_attention_playground_download_runs_without_the_package(
    tmp_path_factory,
):
    import nbformat
    from nbclient import NotebookClient

    nav = nav_order(mkdocs_config()["nav"])
    written = tmp_path_factory.mktemp("written")
    (download,) = [
        d
        for d in write_notebooks(
            [PAGE], page_urls=default_page_urls(nav), out_dir=written
        )
        if d.path.suffix == ".ipynb"
    ]
    nb = nbformat.read(download.path, as_version=4)
    nbformat.validate(nb)
    first_markdown = next(c.source for c in nb.cells if c.cell_type == "markdown")
    assert f"{ERA}.py" in first_markdown  # it says which file to put next to it
    assert "](../" not in "".join(c.source for c in nb.cells)  # no relative links

    here = tmp_path_factory.mktemp("reader")  # only the notebook and the era's file
    (here / f"{ERA}.py").write_text(assemble(ERA), encoding="utf-8")
    nbformat.write(nb, here / download.path.name)
    assert sorted(p.name for p in here.iterdir()) == sorted(
        [f"{ERA}.py", download.path.name]
    )
    nb.cells.insert(
        0, nbformat.v4.new_code_cell("from pathlib import Path\n" + BLOCK_LITERATE)
    )
    nb.cells.append(nbformat.v4.new_code_cell(CHECK_FALLBACK))

    # a reader's kernel: no PYTHONPATH, and not the site build's figure themes
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", *FIGURE_THEMES)
    }
    env |= {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=120,
        allow_errors=False,
        extra_arguments=["--HistoryManager.hist_file=:memory:"],
        resources={"metadata": {"path": str(here)}},
    )
    start = time.perf_counter()
    client.execute(env=env, cwd=str(here))
    seconds = time.perf_counter() - start
    print(f"\n{download.path.name} without literate: {seconds:.1f} s")
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    assert "ran without literate" in "".join(
        o.get("text", "") for o in code[-1].outputs
    )
    figures = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
    # both of its figures were drawn, once each, light
    assert [o.metadata.get("theme") for o in figures] == ["light", "light"]
    drawn = [
        c for c in code if any("image/png" in o.get("data", {}) for o in c.outputs)
    ]
    assert len(drawn) == 2


# Run in a process of its own, for each notebook page: its first code cell (imports, data,
# the figure style), without and with the build's variable, then `show` on a small figure,
# `display` replaced by a recorder. Prints, per page and environment, what was displayed:
# the output's metadata, the palette `draw` was given and the style it drew in.
_SHOW = r"""
import json, os, sys
import matplotlib
matplotlib.use("Agg")
import jupytext
import matplotlib.pyplot as plt

variable, value = sys.argv[1], sys.argv[2]
found = {}
for path in sys.argv[3:]:
    cell = next(c for c in jupytext.read(path).cells if c.cell_type == "code")
    for themes in (None, value):
        if themes is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = themes
        namespace = {}
        with matplotlib.rc_context():
            exec(compile(cell.source, path, "exec"), namespace)
        shown = []
        namespace["display"] = lambda fig, metadata=None: shown.append(
            {"metadata": metadata, **fig.drawn})

        def draw(p):
            fig, ax = plt.subplots()
            ax.plot([0, 1], [1, 0])
            fig.drawn = {
                "palette": {k: getattr(p, k) for k in ("ink", "muted", "border", "series")},
                "text": plt.rcParams["text.color"],
                "ticks": plt.rcParams["xtick.color"],
                "axes": plt.rcParams["axes.edgecolor"],
                "cycle": plt.rcParams["axes.prop_cycle"].by_key()["color"],
                "line": ax.lines[0].get_color(),
            }
            return fig

        namespace["show"](draw)
        found.setdefault(path, {})[str(themes)] = {
            "shown": shown, "open": plt.get_fignums()}
print(json.dumps(found))
"""


def test_show_draws_each_figure_once_light_or_in_both_palettes_for_the_site():
    notebooks = sorted((ROOT / "docs" / "notebooks").glob("*.py"))
    assert len(notebooks) == 3
    ((variable, value),) = FIGURE_THEMES.items()
    assert value.split(",") == ["light", "dark"]
    run = subprocess.run(
        [sys.executable, "-c", _SHOW, variable, value, *map(str, notebooks)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != variable},
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    for path in notebooks:
        for themes, expected in (("None", ["light"]), (value, ["light", "dark"])):
            result = found[str(path)][themes]
            assert result["open"] == [], f"{path.name}: figures left open"
            shown = result["shown"]
            assert [s["metadata"]["theme"] for s in shown] == expected, path.name
            for s, theme in zip(shown, expected):
                site = PALETTES[theme]
                assert s["palette"] == {
                    "ink": site.ink,
                    "muted": site.muted,
                    "border": site.border,
                    "series": list(site.series),
                }, f"{path.name}: the {theme} palette is not the site's"
                assert (s["text"], s["ticks"], s["axes"]) == (
                    site.ink,
                    site.muted,
                    site.border,
                ), f"{path.name}: {theme}"
                assert s["cycle"] == list(site.series) and s["line"] == site.series[0]
                # JupyterLab's dark theme puts a light figure on a light background
                assert s["metadata"].get("needs_background") == (
                    "light" if theme == "light" else None
                )
