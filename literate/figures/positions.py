"""Figures of chapter 2: the sinusoidal table's fast and slow coordinates, and RoPE's
relative-position property next to an additive table that lacks it."""

from __future__ import annotations

import math
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from literate.figures.style import style, text
from literate.parts.positions import apply_rope, rope_cache, sinusoidal_table

SINUSOID_LABELS = {
    "en": {
        "titles": ("Fast coordinates", "Slow coordinates"),
        "coordinate": "coordinate ",
        "x": "Position (zero-based)",
        "suptitle": "Sinusoidal positions · width D=8",
    },
    "ru": {
        "titles": ("Быстрые координаты", "Медленные координаты"),
        "coordinate": "координата ",
        "x": "Позиция (с нуля)",
        "suptitle": "Синусоидальные позиции · ширина D=8",
    },
}

RELATIVE_LABELS = {
    "en": {
        "titles": (
            "Table added to the input: depends on where",
            "RoPE: depends only on m − n",
        ),
        "x": "Offset m − n (query at m, key at n)",
        "y": "score $q \\cdot k / \\sqrt{d}$",
        "start": "query at m = {m}",
        "suptitle": "One query and one key, moved together along the sequence",
    },
    "ru": {
        "titles": (
            "Таблица прибавлена ко входу: зависит от места",
            "RoPE: зависит только от m − n",
        ),
        "x": "Сдвиг m − n (запрос в m, ключ в n)",
        "y": "скор $q \\cdot k / \\sqrt{d}$",
        "start": "запрос в m = {m}",
        "suptitle": "Один запрос и один ключ, сдвинутые вместе вдоль последовательности",
    },
}


def sinusoid_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Coordinates 0, 1 (the fastest pair) and 4, 5 (a slow pair) of the width-8 table
    over positions 0..80."""
    t = text(SINUSOID_LABELS, language)
    pe = sinusoidal_table(81, 8, dtype=torch.float64).numpy()  # [81, 8]
    with style(theme) as p:
        fig, axes = plt.subplots(
            2, 1, figsize=(5.2, 6.0), layout="constrained", sharex=True
        )
        for ax, dims, title in zip(axes, ((0, 1), (4, 5)), t["titles"]):
            for dim, colour, line in zip(dims, (p.series[0], p.series[1]), ("-", "--")):
                ax.plot(
                    np.arange(len(pe)),
                    pe[:, dim],
                    color=colour,
                    ls=line,
                    lw=2,
                    label=t["coordinate"] + str(dim),
                )
            ax.set_title(title, pad=24)  # the legend goes between title and plot
            ax.set(ylim=(-1.1, 1.1), xlim=(0, len(pe) - 1), ylabel="PE")
            ax.grid(alpha=0.6)
            ax.legend(ncol=2, loc="lower left", bbox_to_anchor=(0, 1.0))
        axes[-1].set_xlabel(t["x"])
        fig.suptitle(
            textwrap.fill(t["suptitle"], 36),
            fontsize=13,
            fontweight="bold",
            color=p.ink,
        )
    return fig


def relative_score_curves(
    *,
    d: int = 32,
    max_offset: int = 64,
    starts: tuple[int, ...] = (64, 300, 1000),
    seed: int = 2,
) -> dict[str, np.ndarray]:
    """Scores of one fixed query/key pair (content vectors c_q, c_k) with the query at m and
    the key at n = m - offset, for each starting m: `absolute` adds the sinusoidal table to
    both, `rope` rotates both. Arrays are [len(starts), max_offset + 1]."""
    g = torch.Generator().manual_seed(seed)
    c_q = torch.randn(d, generator=g, dtype=torch.float64)
    c_k = 0.6 * c_q + 0.8 * torch.randn(
        d, generator=g, dtype=torch.float64
    )  # a key that matches
    offsets = torch.arange(max_offset + 1)
    length = max(starts) + 1
    table = sinusoidal_table(length, d, dtype=torch.float64)  # [length, d]
    cos, sin = rope_cache(length, d)
    rows_q = apply_rope(
        c_q.expand(length, d), cos, sin
    )  # [length, d]: c_q at every position
    rows_k = apply_rope(c_k.expand(length, d), cos, sin)
    absolute, rope = [], []
    for m in starts:
        n = m - offsets  # [offsets]
        absolute.append(((c_q + table[m]) * (c_k + table[n])).sum(-1) / math.sqrt(d))
        rope.append((rows_q[m] * rows_k[n]).sum(-1) / math.sqrt(d))
    return {
        "offsets": offsets.numpy(),
        "starts": np.array(starts),
        "absolute": torch.stack(absolute).numpy(),
        "rope": torch.stack(rope).numpy(),
    }


def rope_relative_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Left: with the table added, the same query/key pair scores differently at different
    absolute positions. Right: with RoPE the curves from three starting positions coincide."""
    t = text(RELATIVE_LABELS, language)
    curves = relative_score_curves()
    with style(theme) as p:
        fig, axes = plt.subplots(
            2, 1, figsize=(5.2, 7.6), layout="constrained", sharex=True, sharey=True
        )
        looks = (
            dict(lw=6, alpha=0.45, ls="-"),
            dict(lw=2, ls="--"),
            dict(lw=1.6, ls=":"),
        )
        for ax, key, title in zip(axes, ("absolute", "rope"), t["titles"]):
            for row, m, look, colour in zip(
                curves[key], curves["starts"], looks, p.series
            ):
                ax.plot(
                    curves["offsets"],
                    row,
                    color=colour,
                    label=t["start"].format(m=m),
                    **look,
                )
            ax.set_title(textwrap.fill(title, 40), fontsize=12)
            ax.set_ylabel(t["y"])
            ax.set_xlim(0, curves["offsets"][-1])
            ax.grid(alpha=0.6)
        axes[0].legend(loc="lower right")  # under the curves, which the table lifts
        axes[1].legend(loc="upper right")  # over them
        axes[1].set_xlabel(t["x"])
        fig.suptitle(
            textwrap.fill(t["suptitle"], 36),
            fontsize=13,
            fontweight="bold",
            color=p.ink,
        )
    return fig
