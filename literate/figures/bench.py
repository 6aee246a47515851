"""Figures of the benchmarks page: the ratio of each row of the committed results, one
chart per group of rows (a large group split in two, two small groups sharing one), each
narrow enough to read on a phone.

Plotting only: the numbers come from `literate.tools.bench.results.load_results`, the committed
`literate/data/bench.json` (never a live run), which `tests/test_bench_results.py` checks
against `RESULTS_SCHEMA` and reads back from the figures.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Callable

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, NullLocator
from matplotlib.transforms import blended_transform_factory

from literate.figures.style import style, text
from literate.tools.bench.results import load_results

RATIOS_LABELS = {
    "en": {
        "x": "time per call, ours / the reference's (log scale)",
        "faster": "median, ours faster",
        "slower": "median, ours slower",
        "spread": "min-max of the rounds",
        "even": "as fast (1.0)",
        "vs": "vs",
        "part": "{title} ({k} of {n})",
        "gpt2": "GPT-2 block",
        "attention": "Attention layers",
        "modern": "modern blocks",
        "norm": "Norms",
        "moe": "mixture of experts",
        "decoding": "Decoding",
        "sampling": "Sampling",
        "long-layers": "Long context: layers and blocks",
        "long-steps": "Long context: one decoding step",
        "model": "Whole models",
        "and": "{a} and {b}",
    },
    "ru": {
        "x": "время вызова, наше / эталона (лог. шкала)",
        "faster": "медиана, наше быстрее",
        "slower": "медиана, наше медленнее",
        "spread": "min-max раундов",
        "even": "одинаково (1.0)",
        "vs": "против",
        "part": "{title} ({k} из {n})",
        "gpt2": "Блок GPT-2",
        "attention": "Слои внимания",
        "modern": "современные блоки",
        "norm": "Нормировки",
        "moe": "смесь экспертов",
        "decoding": "Декодирование",
        "sampling": "Сэмплирование",
        "long-layers": "Длинный контекст: слои и блоки",
        "long-steps": "Длинный контекст: шаг декодирования",
        "model": "Модели целиком",
        "and": "{a} и {b}",
    },
}


@dataclass(frozen=True)
class Chart:
    """One figure: the rows of `groups` (in the file's order) that `select` keeps
    (`select(row, k, n)`, k the row's index within its group of n rows; None keeps every
    row), under the title `title(t)` of the label table `t`."""

    name: str
    groups: tuple[str, ...]
    title: Callable[[dict], str]
    select: Callable[[dict, int, int], bool] | None = None


def _half(part: int) -> Callable[[dict, int, int], bool]:
    """The first (part 0) or the second (part 1) half of a group, the first the larger."""
    return lambda row, k, n: (k < math.ceil(n / 2)) == (part == 0)


def _is_step(row: dict, _k: int, _n: int) -> bool:
    return "step" in row["name"]


CHARTS = (
    Chart("bench-gpt2", ("gpt2",), lambda t: t["gpt2"]),
    Chart(
        "bench-attention-modern",
        ("attention", "modern"),
        lambda t: t["and"].format(a=t["attention"], b=t["modern"]),
    ),
    Chart(
        "bench-norm-moe",
        ("norm", "moe"),
        lambda t: t["and"].format(a=t["norm"], b=t["moe"]),
    ),
    Chart("bench-decoding", ("decoding",), lambda t: t["decoding"]),
    Chart("bench-sampling", ("sampling",), lambda t: t["sampling"]),
    Chart(
        "bench-long-layers",
        ("long",),
        lambda t: t["long-layers"],
        lambda row, k, n: not _is_step(row, k, n),
    ),
    Chart("bench-long-steps", ("long",), lambda t: t["long-steps"], _is_step),
    *(
        Chart(
            f"bench-model-{part + 1}",
            ("model",),
            lambda t, k=part + 1: t["part"].format(title=t["model"], k=k, n=2),
            _half(part),
        )
        for part in range(2)
    ),
)


def chart_rows(chart: Chart, rows: list[dict]) -> list[dict]:
    """The rows of `rows` that `chart` draws, in the file's order."""
    sizes = {group: sum(r["group"] == group for r in rows) for group in chart.groups}
    seen = dict.fromkeys(chart.groups, -1)
    kept = []
    for row in rows:
        if row["group"] not in chart.groups:
            continue
        k = seen[row["group"]] = seen[row["group"]] + 1
        if chart.select is None or chart.select(row, k, sizes[row["group"]]):
            kept.append(row)
    return kept


# The layout, in inches: a figure 5.2 wide, fonts of 10 pt (the title 12), so the
# smallest text renders at 10 * 358 / (72 * 5.2) = 9.6 px on a phone's 358 px column.
WIDTH = 5.2
FONT = 10
TITLE_FONT = 12
MARGIN = 0.22  # left and right of the axes
TOP = 0.45  # above the first row: the title
BOTTOM = 1.1  # below the last row: ticks, axis label and a two-row legend
LINE = FONT * 1.3 / 72  # one line of a row's label
BAR = 0.3  # from the bottom of a row's label to the top of the next row's
BAR_AT = 0.13  # from the bottom of a row's label down to its bar
VALUE_ROOM = 0.55  # kept free right of a label for the row's median


def _power_of_two(x: float, _position=None) -> str:
    """A tick at 2**e: "1/8" below 1, "4" above."""
    return f"1/{round(1 / x)}" if x < 1 else f"{x:g}"


def ticks(low: float, high: float) -> tuple[list[float], Callable]:
    """Tick positions in (low, high) and their formatter: powers of two over a range of
    two octaves or more, else multiples of the smallest of 0.05, 0.1, 0.2, 0.25, 0.5 that
    leaves at most six ticks."""
    if math.log2(high / low) >= 2:
        first, last = math.ceil(math.log2(low)), math.floor(math.log2(high))
        step = max(1, math.ceil((last - first) / 7))  # at most about 8 ticks
        return [2.0**e for e in range(first, last + 1) if e % step == 0], _power_of_two
    for step in (0.05, 0.1, 0.2, 0.25, 0.5):
        found = [
            round(k * step, 2)
            for k in range(
                math.ceil(round(low / step, 9)), math.floor(round(high / step, 9)) + 1
            )
        ]
        if len(found) <= 6:
            break
    return found, lambda x, _position=None: f"{x:g}"


def _wrap(parts: list[str], width: float, measure: Callable[[str], float]) -> str:
    """`parts` (the name, then "vs the reference") on one line if it fits `width`
    inches, else each part on lines of its own, broken between words to fit."""
    if measure(" ".join(parts)) <= width:
        return " ".join(parts)
    lines = []
    for part in parts:
        line = ""
        for word in part.split(" "):
            longer = f"{line} {word}" if line else word
            if line and measure(longer) > width:
                lines.append(line)
                line = word
            else:
                line = longer
        lines.append(line)
    return "\n".join(lines)


def chart_figure(
    chart: Chart,
    *,
    language: str = "en",
    theme: str = "light",
    results: dict | None = None,
) -> Figure:
    """The rows `chart` keeps of `results` (default: `load_results()`), top to bottom in
    the file's order, each as its label ("name vs reference", gid "label", wrapped to
    fit) with its median to the right (gid "value") and below them its median ratio as
    a dot (gid "ratio", one scatter) and its min-max over the rounds as a bar (gid
    "spread", one segment per row from (min, y) to (max, y), y the dot's), on a log
    axis with a dashed line at 1.0."""
    t = text(RATIOS_LABELS, language)
    data = load_results() if results is None else results
    rows = chart_rows(chart, data["rows"])
    if not rows:
        raise ValueError(
            f"{chart.name}: no row of groups {chart.groups} in the results"
        )
    with style(theme) as p:
        fig = plt.figure(figsize=(WIDTH, 1.0))
        renderer = fig.canvas.get_renderer()
        font = FontProperties(family="DejaVu Sans", size=FONT)

        def measure(s: str) -> float:
            width, _, _ = renderer.get_text_width_height_descent(s, font, ismath=False)
            return width / fig.dpi

        room = WIDTH - 2 * MARGIN
        labels = [
            _wrap(
                [row["name"], f"{t['vs']} {row['reference']}"],
                room - VALUE_ROOM,
                measure,
            )
            for row in rows
        ]
        # Each row: its label's lines, then its bar; y in inches from the axes' top.
        label_bottoms, ys, y = [], [], 0.0
        for label in labels:
            y += LINE * (label.count("\n") + 1)
            label_bottoms.append(y)
            ys.append(y + BAR_AT)
            y += BAR
        span = y - BAR + 2 * BAR_AT
        height = TOP + span + BOTTOM
        fig.set_size_inches(WIDTH, height)
        ax = fig.add_axes(
            (MARGIN / WIDTH, BOTTOM / height, room / WIDTH, span / height)
        )
        ax.set_ylim(span, 0)  # the first row on top
        ratios = [row["ratio"] for row in rows]
        colours = [p.series[0] if r < 1.0 else p.series[1] for r in ratios]
        # The line at 1.0 and the grid run through each row's bar, not its label.
        tops = [bottom + 0.02 for bottom in label_bottoms]
        ends = [bar + BAR_AT for bar in ys]
        ax.hlines(
            ys,
            [row["min"] for row in rows],
            [row["max"] for row in rows],
            colors=colours,
            lw=2.4,
            alpha=0.55,
            gid="spread",
            zorder=2,
        )
        ax.scatter(ratios, ys, c=colours, s=34, gid="ratio", zorder=3)
        across = blended_transform_factory(ax.transAxes, ax.transData)
        for label, bottom, ratio, colour in zip(labels, label_bottoms, ratios, colours):
            ax.text(
                0, bottom, label, transform=across, va="bottom", fontsize=FONT,
                linespacing=1.15, color=p.ink, gid="label",
            )  # fmt: skip
            ax.text(
                1, bottom, f"{ratio:.2f}", transform=across, ha="right", va="bottom",
                fontsize=FONT, fontweight="bold", color=colour, gid="value",
            )  # fmt: skip
        low = min(min(row["min"] for row in rows) / 1.25, 0.8)
        high = max(max(row["max"] for row in rows) * 1.25, 1.25)
        ax.set_xscale("log")
        ax.set_xlim(low, high)
        positions, formatter = ticks(low, high)
        for x in positions:
            if x != 1.0:
                ax.vlines([x] * len(ys), tops, ends, color=p.border, lw=0.7, zorder=0)
        ax.vlines(
            [1.0] * len(ys), tops, ends, color=p.muted, ls="--", lw=1.2, gid="one",
            zorder=1,
        )  # fmt: skip
        ax.xaxis.set_major_locator(FixedLocator(positions))
        ax.xaxis.set_major_formatter(formatter)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.tick_params(axis="x", labelsize=FONT)
        ax.set_yticks([])
        ax.set_xlabel(t["x"], fontsize=FONT)
        for spine in ("top", "right", "left"):
            ax.spines[spine].set_visible(False)
        fig.text(
            MARGIN / WIDTH, 1 - 0.12 / height, chart.title(t), va="top",
            fontsize=TITLE_FONT, fontweight="bold", color=p.ink,
        )  # fmt: skip
        dot = dict(marker="o", ls="none", markersize=6)
        fig.legend(
            handles=[
                Line2D([], [], color=p.series[0], label=t["faster"], **dot),
                Line2D([], [], color=p.muted, lw=2.4, alpha=0.55, label=t["spread"]),
                Line2D([], [], color=p.series[1], label=t["slower"], **dot),
                Line2D([], [], color=p.muted, ls="--", lw=1.2, label=t["even"]),
            ],
            loc="lower center",
            bbox_to_anchor=(0.5, 0.04 / height),
            ncols=2,
            fontsize=FONT,
            handlelength=1.6,
            columnspacing=1.2,
        )
    return fig


def _alt(chart: Chart) -> str:
    """What `chart` shows, with every number it draws, from the committed file."""
    rows = chart_rows(chart, load_results()["rows"])
    each = "; ".join(
        f"{row['name']} vs {row['reference']}: {row['ratio']:.2f} "
        f"({row['min']:.2f} to {row['max']:.2f})"
        for row in rows
    ).translate(str.maketrans("[]", "()"))  # brackets would end the Markdown alt text
    return (
        f"{chart.title(RATIOS_LABELS['en'])}: for each row of the benchmark table, our "
        "layer's time per call divided by the reference's, the median over the "
        "interleaved rounds as a dot (below 1.0, blue, ours is faster; above, orange, "
        "the reference is) and the smallest to the largest round's ratio as a bar, on a "
        f"log scale with a dashed line at 1.0, where both are as fast. {each}."
    )


SPECS: list[tuple] = [
    (chart.name, partial(chart_figure, chart), _alt(chart)) for chart in CHARTS
]
