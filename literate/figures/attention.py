"""Figures of chapter 1: why scores are divided by sqrt(d_k), and masks as booleans."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from literate.figures.style import BOX_INK, style, text
from literate.numbers.studies import score_statistics
from literate.parts.attention import causal_allowed, padding_allowed

SCALING_LABELS = {
    "en": {
        "title_var": "Variance of a score",
        "title_peak": "Largest softmax weight (16 keys)",
        "x": "Query/key width $d_k$",
        "raw": "$q \\cdot k$ (unscaled)",
        "scaled": "$q \\cdot k / \\sqrt{d_k}$",
        "ideal": "$d_k$",
        "peak_y": "mean of the row maximum",
    },
    "ru": {
        "title_var": "Дисперсия скора",
        "title_peak": "Наибольший вес softmax (16 ключей)",
        "x": "Ширина запроса/ключа $d_k$",
        "raw": "$q \\cdot k$ (без масштаба)",
        "scaled": "$q \\cdot k / \\sqrt{d_k}$",
        "ideal": "$d_k$",
        "peak_y": "среднее максимума строки",
    },
}

MASK_LABELS = {
    "en": {
        "titles": (
            "Hide padding keys",
            "Hide future keys",
            "Both: causal & padding",
            "Cross-attention, padded source",
            "Cached decode, offset 4",
            "Cached decode, offset forgotten",
        ),
        "keys": "Keys",
        "queries": "Queries",
        "suptitle": "1 = may attend, 0 = blocked before softmax",
    },
    "ru": {
        "titles": (
            "PAD-ключи скрыты",
            "Будущее скрыто",
            "Оба: causal и padding",
            "Cross-attention, PAD в источнике",
            "Декод с кешем, сдвиг 4",
            "Декод с кешем, сдвиг забыт",
        ),
        "keys": "Ключи",
        "queries": "Запросы",
        "suptitle": "1 — можно смотреть, 0 — запрещено до softmax",
    },
}


def scaling_figure(
    *, language: str = "en", theme: str = "light", samples: int = 16_000
) -> Figure:
    """Left: the unscaled score's variance grows like d_k, the scaled one stays near 1.
    Right: so unscaled softmax rows collapse onto one key as d_k grows."""
    t = text(SCALING_LABELS, language)
    widths = [4, 8, 16, 32, 64, 128, 256]
    stats = [score_statistics(d, samples) for d in widths]
    with style(theme) as p:
        # stacked: a phone shows the figure at its full width
        fig, (left, right) = plt.subplots(
            2, 1, figsize=(5.2, 7.6), layout="constrained"
        )
        left.plot(widths, widths, color=p.border, lw=6, alpha=0.9, label=t["ideal"])
        left.plot(
            widths,
            [s["var_raw"] for s in stats],
            "o-",
            color=p.series[1],
            label=t["raw"],
        )
        left.plot(
            widths,
            [s["var_scaled"] for s in stats],
            "o-",
            color=p.series[0],
            label=t["scaled"],
        )
        left.set(xscale="log", yscale="log", xlabel=t["x"], title=t["title_var"])
        right.plot(
            widths,
            [s["peak_raw"] for s in stats],
            "o-",
            color=p.series[1],
            label=t["raw"],
        )
        right.plot(
            widths,
            [s["peak_scaled"] for s in stats],
            "o-",
            color=p.series[0],
            label=t["scaled"],
        )
        right.set(
            xscale="log",
            ylim=(0, 1),
            xlabel=t["x"],
            ylabel=t["peak_y"],
            title=t["title_peak"],
        )
        for ax in (left, right):
            ax.set_xticks(widths, [str(w) for w in widths])
            ax.minorticks_off()
            ax.grid(alpha=0.6)
            ax.legend(loc="upper left")
    return fig


def mask_examples() -> list[tuple[torch.Tensor, list[int]]]:
    """The six masks of the figure, built with the chapter's own helpers, each with the
    absolute positions of its query rows."""
    valid = torch.tensor([[True, True, True, False, False]])
    padding = padding_allowed(valid)[0, 0].expand(5, 5)  # [T_q, T_k]
    causal = causal_allowed(5, 5)
    source_valid = torch.tensor([[True] * 5 + [False]])
    cross = padding_allowed(source_valid)[0, 0].expand(
        4, 6
    )  # T_q = 4 targets, T_k = 6 sources
    decode = causal_allowed(1, 5, query_offset=4)
    forgotten = causal_allowed(1, 5)
    rows5, rows4 = list(range(5)), list(range(4))
    return [
        (padding, rows5),
        (causal, rows5),
        (causal & padding, rows5),
        (cross, rows4),
        (decode, [4]),
        (forgotten, [4]),
    ]


def masks_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Six boolean masks, True drawn filled: padding, causal, both, cross, decode (right and wrong)."""
    t = text(MASK_LABELS, language)
    with style(theme) as p:
        # two columns: a phone shows the figure at its full width
        fig, axes = plt.subplots(
            3, 2, figsize=(5.2, 7.6), layout="constrained", height_ratios=(5, 5, 1.4)
        )
        cmap = ListedColormap([p.empty, p.series[2]])
        for ax, (mask, rows), title in zip(axes.flat, mask_examples(), t["titles"]):
            m = mask.numpy()
            ax.imshow(m, cmap=cmap, vmin=0, vmax=1)
            ax.set_title(textwrap.fill(title, 22), fontsize=10.5)
            ax.set_xlabel(t["keys"])
            ax.set_ylabel(t["queries"])
            ax.set_xticks(range(m.shape[1]))
            ax.set_yticks(range(m.shape[0]), [str(r) for r in rows])
            for spine in ax.spines.values():
                spine.set_visible(False)
            for i, j in np.ndindex(m.shape):
                ax.text(
                    j,
                    i,
                    "1" if m[i, j] else "0",
                    ha="center",
                    va="center",
                    fontsize=10,
                    color=BOX_INK if m[i, j] else p.muted,
                )
        fig.suptitle(
            textwrap.fill(t["suptitle"], 36),
            fontsize=12,
            fontweight="bold",
            color=p.ink,
        )
    return fig
