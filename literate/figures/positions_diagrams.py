"""Diagrams (issue 26): drawn from the code, light and dark, English and Russian.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

Chapter 2's "positions-learned-vs-table": the sinusoidal table, a formula with a row for
every position, against `LearnedPositions`, whose rows stop at `max_length`.
"positions-rope-pairs": `apply_rope` turning pair i of a head by m * theta_i, read off
its output. "positions-rope-layouts": which coordinates form a pair in each layout, found
by turning each basis vector with `apply_rope` and `apply_rope_interleaved`, and the
permutation `interleaved_to_half_permutation` between them.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from literate.figures.attention_diagrams import _arrow, _box, _canvas
from literate.figures.style import BOX_INK, style, text
from literate.parts.positions import (
    LearnedPositions,
    apply_rope,
    apply_rope_interleaved,
    interleaved_to_half_permutation,
    rope_cache,
    sinusoidal_table,
)

SMALL, TITLE = 10.0, 12.0  # points, in figures 5.2 inches wide

# "Learned positions": a table of width 8 trained for 8 positions, drawn to 16.
LEARNED = {"max_length": 8, "d_model": 8, "shown": 16, "seed": 0, "coordinates": (0, 2)}


def learned_vs_table() -> dict:
    """Coordinates 0 and 2 of the width-8 sinusoidal table over 16 positions, the same
    coordinates of `LearnedPositions(max_length=8)`'s rows as initialised (seed 0), and
    the message it refuses position 8 with."""
    c = LEARNED
    table = sinusoidal_table(c["shown"], c["d_model"], dtype=torch.float64)
    torch.manual_seed(c["seed"])
    learned = LearnedPositions(c["max_length"], c["d_model"], dtype=torch.float64)
    try:
        learned(torch.zeros(1, 1, c["d_model"], dtype=torch.float64),
                offset=c["max_length"])  # fmt: skip
    except ValueError as error:
        refusal = str(error)
    else:
        raise RuntimeError("LearnedPositions gave a row past max_length")
    rows = learned.embedding.weight.detach()
    return {
        "table": table[:, list(c["coordinates"])].T.tolist(),  # [2, shown]
        "learned": rows[:, list(c["coordinates"])].T.tolist(),  # [2, max_length]
        "rows": rows.shape[0],
        "refusal": refusal,
    }


LEARNED_LABELS = {
    "en": {
        "title": "A formula has every row; a trained table stops",
        "table": "sinusoidal table: a row for every position",
        "learned": "LearnedPositions(max_length={n}), as initialised",
        "coordinate": "coordinate {i}",
        "none": "no row:\nValueError\nmax_length={n}",
        "x": "position",
    },
    "ru": {
        "title": "Формула даёт любую строку, таблица — нет",
        "table": "синусоиды: строка для любой позиции",
        "learned": "LearnedPositions(max_length={n}), начальные",
        "coordinate": "координата {i}",
        "none": "строки нет:\nValueError\nmax_length={n}",
        "x": "позиция",
    },
}


def learned_vs_table_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Two panels over positions 0..15: the table's coordinates 0 and 2, and the
    learned table's, which end at position 7, the rest marked as refused."""
    t = text(LEARNED_LABELS, language)
    r = learned_vs_table()
    c = LEARNED
    n = c["max_length"]
    with style(theme) as p:
        fig, axes = plt.subplots(
            2, 1, figsize=(5.2, 4.1), layout="constrained", sharex=True
        )
        for ax, key, title in zip(axes, ("table", "learned"), ("table", "learned")):
            for values, i, colour, marker in zip(
                r[key], c["coordinates"], p.series, ("o", "s")
            ):
                ax.plot(range(len(values)), values, color=colour, marker=marker,
                        ms=4, lw=1.6, label=t["coordinate"].format(i=i))  # fmt: skip
            ax.set_title(t[title].format(n=n), fontsize=SMALL + 1, pad=4)
            ax.axvline(n - 0.5, color=p.muted, lw=1, ls="--")
            ax.grid(alpha=0.6)
            ax.tick_params(labelsize=SMALL)
        axes[0].legend(loc="lower left", ncol=2, fontsize=SMALL)
        axes[0].set_ylim(-1.95, 1.2)
        bottom = axes[1]
        bottom.axvspan(n - 0.5, c["shown"] - 0.5, color=p.empty, zorder=0)
        bottom.text((n + c["shown"] - 1) / 2, 0, t["none"].format(n=n), ha="center",
                    va="center", fontsize=SMALL, color=p.ink)  # fmt: skip
        bottom.set_xlim(-0.5, c["shown"] - 0.5)
        bottom.set_xticks(range(0, c["shown"], 2))
        bottom.set_xlabel(t["x"], fontsize=SMALL)
        fig.suptitle(t["title"], fontsize=TITLE, fontweight="bold", color=p.ink)
    return fig


# "RoPE": a head of width 8, every pair starting at (1, 0), turned to positions 0..5.
ROPE_PAIRS = {"d_head": 8, "positions": 6, "pairs": (0, 1)}


def rope_pair_points() -> dict:
    """`apply_rope` on a vector whose every pair is (1, 0), at positions 0..5: for
    pairs 0 and 1 (coordinates (i, i + d/2)) the points it gives, and every pair's
    angle per position theta_i, read back from position 1's output."""
    c = ROPE_PAIRS
    d, half = c["d_head"], c["d_head"] // 2
    x = torch.cat((torch.ones(half), torch.zeros(half))).to(torch.float64)
    cos, sin = rope_cache(length=c["positions"], d_head=d)
    turned = apply_rope(x.expand(c["positions"], d), cos, sin)  # [positions, d]
    thetas = torch.atan2(turned[1, half:], turned[1, :half])  # [d/2]
    return {
        "points": {
            i: list(zip(turned[:, i].tolist(), turned[:, i + half].tolist()))
            for i in c["pairs"]
        },
        "thetas": thetas.tolist(),
        "half": half,
    }


ROPE_PAIR_LABELS = {
    "en": {
        "title": "RoPE turns pair $i$ by $m\\,\\theta_i$ at position $m$",
        "pair": "pair {i}: coordinates {a}, {b}\n$\\theta_{i}$ = {theta} rad",
        "thetas": "$d_{{head}}$ = {d}: $\\theta_i$ = {values}",
        "m": "$m$={m}",
    },
    "ru": {
        "title": "RoPE поворачивает пару $i$ на $m\\,\\theta_i$ в позиции $m$",
        "pair": "пара {i}: координаты {a}, {b}\n$\\theta_{i}$ = {theta} рад",
        "thetas": "$d_{{head}}$ = {d}: $\\theta_i$ = {values}",
        "m": "$m$={m}",
    },
}


def theta_text(x: float, language: str) -> str:
    """0.1 -> '0.1' ('0,1'), as few digits as the value needs at 3 significant."""
    s = f"{x:.3g}"
    return s.replace(".", ",") if language == "ru" else s


def rope_pairs_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Two unit circles: pair 0 and pair 1 of the head at positions 0..5, each point an
    arrow from the origin labelled with its position; below, every theta_i."""
    t = text(ROPE_PAIR_LABELS, language)
    r = rope_pair_points()
    c = ROPE_PAIRS
    with style(theme) as p:
        fig, axes = plt.subplots(1, 2, figsize=(5.2, 3.35))
        fig.subplots_adjust(left=0.02, right=0.98, top=0.72, bottom=0.1, wspace=0.08)
        circle = np.linspace(0, 2 * math.pi, 200)
        for ax, i, colour in zip(axes, c["pairs"], p.series):
            ax.plot(np.cos(circle), np.sin(circle), color=p.border, lw=1)
            ax.axhline(0, color=p.border, lw=0.8)
            ax.axvline(0, color=p.border, lw=0.8)
            points = r["points"][i]
            for m, (a, b) in enumerate(points):
                ax.annotate("", (a, b), (0, 0), arrowprops={
                    "arrowstyle": "-|>", "color": colour, "lw": 1.3,
                    "shrinkA": 0, "shrinkB": 0})  # fmt: skip
                ax.plot([a], [b], "o", color=colour, ms=4)
                if i == 0 or m in (0, len(points) - 1):
                    ax.text(1.3 * a, 1.3 * b, t["m"].format(m=m), ha="center",
                            va="center", fontsize=SMALL, color=p.ink)  # fmt: skip
            ax.set_title(
                t["pair"].format(
                    i=i,
                    a=i,
                    b=i + r["half"],
                    theta=theta_text(r["thetas"][i], language),
                ),
                fontsize=SMALL,
                loc="center",
                fontweight="normal",
            )
            ax.set_xlim(-1.5, 1.5)
            ax.set_ylim(-1.5, 1.5)
            ax.set_aspect("equal")
            ax.axis("off")
        values = ", " if language == "en" else "; "
        values = values.join(theta_text(x, language) for x in r["thetas"])
        fig.text(0.5, 0.04, t["thetas"].format(d=c["d_head"], values=values),
                 ha="center", fontsize=SMALL, color=p.muted)  # fmt: skip
        fig.suptitle(t["title"], fontsize=TITLE, fontweight="bold", color=p.ink)
    return fig


LAYOUT_D = 8  # the head width of the layouts figure


def partners(rotate, d_head: int = LAYOUT_D) -> list[int]:
    """For each coordinate j, the coordinate `rotate` turns it into at position 1: its
    partner in a pair. Basis vector e_j is turned; the one other nonzero entry is it."""
    cos, sin = rope_cache(length=2, d_head=d_head)
    basis = torch.eye(d_head, dtype=torch.float64)[:, None, :].expand(d_head, 2, d_head)
    turned = rotate(basis.contiguous(), cos, sin)[:, 1]  # [d, d]: e_j at position 1
    found = []
    for j in range(d_head):
        others = [i for i in range(d_head) if i != j and abs(turned[j, i]) > 1e-9]
        if len(others) != 1:
            raise RuntimeError(f"coordinate {j} turns into {others}")
        found.append(others[0])
    return found


def pair_index(rotate, d_head: int = LAYOUT_D) -> list[int]:
    """For each coordinate, the index i of its pair, pairs numbered from the fastest
    (theta_0 = 1) to the slowest: the angle e_j turns by at position 1."""
    cos, sin = rope_cache(length=2, d_head=d_head)
    basis = torch.eye(d_head, dtype=torch.float64)[:, None, :].expand(d_head, 2, d_head)
    turned = rotate(basis.contiguous(), cos, sin)[:, 1]
    mate = partners(rotate, d_head)
    angles = [abs(math.atan2(turned[j, mate[j]], turned[j, j])) for j in range(d_head)]
    speeds = sorted(set(round(a, 12) for a in angles), reverse=True)
    return [speeds.index(round(a, 12)) for a in angles]


LAYOUT_LABELS = {
    "en": {
        "title": "Two layouts: which coordinates form pair $i$",
        "interleaved": "interleaved (RoFormer, Meta's Llama, GPT-J)",
        "half": "rotate-half (GPT-NeoX, Hugging Face Llama)",
        "p": "reorder by $p$ = {p}",
        "legend": "pair {i}",
    },
    "ru": {
        "title": "Две раскладки: какие координаты в паре $i$",
        "interleaved": "чередование (RoFormer, Llama от Meta, GPT-J)",
        "half": "rotate-half (GPT-NeoX, Llama в Hugging Face)",
        "p": "переставить по $p$ = {p}",
        "legend": "пара {i}",
    },
}


def layouts_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Coordinates 0..7 of a head in each layout, coloured by pair and joined to their
    partner, and arrows for the permutation p from the interleaved row to the
    rotate-half one."""
    t = text(LAYOUT_LABELS, language)
    d = LAYOUT_D
    layouts = (
        ("interleaved", partners(apply_rope_interleaved), pair_index(apply_rope_interleaved)),
        ("half", partners(apply_rope), pair_index(apply_rope)),
    )  # fmt: skip
    perm = interleaved_to_half_permutation(d).tolist()
    width, height = 5.2, 4.0
    cell = 40
    with style(theme) as p:
        fig, ax = _canvas(width, height)
        top = height * 72
        ax.text(8, top - 16, t["title"], fontsize=TITLE, fontweight="bold", color=p.ink)
        xs = [width * 72 / 2 + (j - (d - 1) / 2) * (cell + 4) for j in range(d)]
        rows_y = (188, 88)
        ax.text(8, 252, t["p"].format(p=tuple(perm)), fontsize=SMALL, color=p.muted,
                va="center")  # fmt: skip
        for (name, mate, pair), y, side in zip(layouts, rows_y, (1, -1)):
            ax.text(8, y + side * (44 if side > 0 else 56), t[name], fontsize=SMALL, color=p.ink,
                    va="center")  # fmt: skip
            for j, x in enumerate(xs):
                _box(ax, x, y, cell, 26, f"$x_{j}$", p.series[pair[j]], BOX_INK,
                     size=SMALL)  # fmt: skip
                if mate[j] > j:  # one bracket per pair, above or below the row
                    x2 = xs[mate[j]]
                    depth = 15 + (
                        6 * pair[j] if mate[j] - j > 1 else 0
                    )  # nested, not overlaid
                    y1, y2 = y + side * 13, y + side * depth
                    ax.plot([x, x, x2, x2], [y1, y2, y2, y1], color=p.series[pair[j]],
                            lw=1.6)  # fmt: skip
        for j, source in enumerate(perm):  # x_half[j] = x_interleaved[p[j]]
            _arrow(ax, (xs[source], rows_y[0] - 13), (xs[j], rows_y[1] + 13),
                   p.muted, lw=1.0)  # fmt: skip
        legend_y = 11
        for i in range(d // 2):
            x = 30 + i * 90
            _box(ax, x, legend_y, 14, 14, "", p.series[i], BOX_INK)
            ax.text(x + 12, legend_y, t["legend"].format(i=i), fontsize=SMALL,
                    color=p.ink, va="center")  # fmt: skip
    return fig


SPECS: list[tuple] = [
    (
        "positions-learned-vs-table",
        learned_vs_table_figure,
        (
            "Two panels over positions 0 to 15. Above, coordinates 0 and 2 of the width-8 "
            "sinusoidal table, sin(pos) and sin(pos / 10), defined at every position, past "
            "a dashed line after position 7. Below, the same coordinates of "
            "LearnedPositions(max_length=8) as initialised, small random values within "
            "about 0.03 of zero at positions 0 to 7; from position 8 on the panel is shaded: "
            "no row, the layer raises a ValueError naming max_length=8."
        ),
    ),
    (
        "positions-rope-pairs",
        rope_pairs_figure,
        (
            "Two unit circles for a RoPE head of width 8 whose every pair starts at (1, 0), "
            "turned by apply_rope to positions m = 0 to 5. Pair 0, coordinates 0 and 4, "
            "turns theta_0 = 1 radian per position, so its six arrows fan around the whole "
            "circle; pair 1, coordinates 1 and 5, turns theta_1 = 0.1 radian per position, so "
            "its arrows reach only 0.5 radian at m = 5. Below: theta_i = 1, 0.1, 0.01, 0.001."
        ),
    ),
    (
        "positions-rope-layouts",
        layouts_figure,
        (
            "Coordinates x0 to x7 of a RoPE head of width 8 in two rows, coloured by the pair "
            "they belong to and joined to their partner. Interleaved layout, above: pairs "
            "(0, 1), (2, 3), (4, 5), (6, 7). Rotate-half layout, below: pairs (0, 4), (1, 5), "
            "(2, 6), (3, 7). Arrows from the top row to the bottom one show the reordering "
            "p = (0, 2, 4, 6, 1, 3, 5, 7): rotate-half coordinate j is the interleaved "
            "coordinate that entry j of p names."
        ),
    ),
]
