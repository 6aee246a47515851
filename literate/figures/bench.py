"""Figure of the benchmarks page: the ratio of each row of the committed results.

Plotting only: the numbers come from `literate.tools.bench.results.load_results`, the committed
`literate/data/bench.json` (never a live run), which `tests/test_bench_results.py` checks
against `RESULTS_SCHEMA` and reads back from the figure.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator

from literate.figures.style import style, text
from literate.tools.bench.results import load_results

RATIOS_LABELS = {
    "en": {
        "title": "Time per call, ours / the reference's",
        "x": "ratio (log scale): the median of the rounds (dot), their min-max (bar)",
        "faster": "ours faster (median below 1)",
        "slower": "ours slower (median above 1)",
        "even": "as fast (1.0)",
        "vs": "vs",
    },
    "ru": {
        "title": "Время вызова, наше / эталона",
        "x": "отношение (лог. шкала): медиана раундов (точка), их min-max (отрезок)",
        "faster": "наше быстрее (медиана меньше 1)",
        "slower": "наше медленнее (медиана больше 1)",
        "even": "одинаково (1.0)",
        "vs": "против",
    },
}


def _power_of_two(x: float, _position=None) -> str:
    """A tick at 2**e: "1/8" below 1, "4" above."""
    return f"1/{round(1 / x)}" if x < 1 else f"{x:g}"


def ratios_figure(
    *, language: str = "en", theme: str = "light", results: dict | None = None
) -> Figure:
    """One line per row of `results` (default: `load_results()`), top to bottom in the
    file's order: its median ratio as a dot (gid "ratio", a scatter at y = the row's
    index) and its min-max over the rounds as a bar (gid "spread", one segment per row
    from (min, y) to (max, y)), on a log axis with a dashed line at 1.0."""
    t = text(RATIOS_LABELS, language)
    data = load_results() if results is None else results
    rows = data["rows"]
    ys = list(range(len(rows)))
    ratios = [row["ratio"] for row in rows]
    with style(theme) as p:
        fig, ax = plt.subplots(
            figsize=(11.5, 1.6 + 0.3 * len(rows)), layout="constrained"
        )
        colours = [p.series[0] if r < 1.0 else p.series[1] for r in ratios]
        ax.axvline(1.0, color=p.muted, ls="--", lw=1.2, label=t["even"], zorder=1)
        ax.hlines(
            ys,
            [row["min"] for row in rows],
            [row["max"] for row in rows],
            colors=colours,
            lw=2.2,
            alpha=0.55,
            gid="spread",
            zorder=2,
        )
        ax.scatter(ratios, ys, c=colours, s=30, gid="ratio", zorder=3)
        for key, colour in (("faster", p.series[0]), ("slower", p.series[1])):
            ax.scatter([], [], color=colour, s=30, label=t[key])
        ax.set_yticks(
            ys,
            [f"{row['name']}  {t['vs']}  {row['reference']}" for row in rows],
            fontsize=8.5,
        )
        ax.set_ylim(len(rows) - 0.5, -0.5)  # the first row on top
        low = min(row["min"] for row in rows) / 1.25
        high = max(row["max"] for row in rows) * 1.25
        ax.set_xscale("log")
        low, high = min(low, 0.8), max(high, 1.25)
        ax.set_xlim(low, high)
        first, last = math.floor(math.log2(low)), math.ceil(math.log2(high))
        step = max(1, math.ceil((last - first) / 8))  # at most about 9 ticks
        ticks = [2.0**e for e in range(first, last + 1) if e % step == 0]
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_major_formatter(_power_of_two)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set(xlabel=t["x"], title=t["title"])
        ax.grid(axis="x", alpha=0.6)
        for spine in ("top", "right"):
            ax.spines[spine].set_visible(False)
        fig.legend(loc="outside lower center", ncols=3)
    return fig
