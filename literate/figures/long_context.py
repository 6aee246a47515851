"""Figures of chapter 10: the KV-cache memory of published models against the context.

Plotting only: the bytes come from `literate.numbers.cache_ledger` (`PUBLISHED_CACHES`,
`growth_stops`) and `literate.numbers.params.cache_bytes`, which the tests check against the
caches our models allocate and against Hugging Face's cache layers.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from literate.figures.style import style, text
from literate.numbers.cache_ledger import GIB, PUBLISHED_CACHES, growth_stops
from literate.numbers.params import cache_bytes

KV_MEMORY_LABELS = {
    "en": {
        "title": "KV-cache memory of one sequence (bfloat16, batch 1)",
        "x": "context length, tokens (log scale)",
        "y": "cache, GiB (log scale)",
        "stop": "hollow: windowed layers stop growing at {w}",
        "kinds": {
            "GQA": "GQA",
            "GQA + sliding": "GQA, sliding window",
            "GQA + local/global": "GQA, local/global",
            "MLA": "MLA",
        },
    },
    "ru": {
        "title": "Память KV-кеша одной последовательности (bfloat16, батч 1)",
        "x": "длина контекста, токены (лог. шкала)",
        "y": "кеш, ГиБ (лог. шкала)",
        "stop": "полый маркер: слои с окном перестают расти на {w}",
        "kinds": {
            "GQA": "GQA",
            "GQA + sliding": "GQA, скользящее окно",
            "GQA + local/global": "GQA, локальные/глобальные",
            "MLA": "MLA",
        },
    },
}

CONTEXTS = tuple(round(2 ** (e / 4)) for e in range(4 * 7, 4 * 20 + 1))  # 128 .. 1M
TICKS = (2**7, 2**10, 2**12, 2**14, 2**17, 2**20)
MARKERS = ("o", "s", "D", "^", "v", "P")


def _tokens(n: int) -> str:
    return (
        f"{n // 2**20}M" if n >= 2**20 else f"{n // 2**10}K" if n >= 2**10 else str(n)
    )


def kv_memory_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """`cache_bytes` of every model of `PUBLISHED_CACHES` at contexts 128 .. 1M, one
    line each, log-log; a hollow marker where the windowed layers stop growing
    (`growth_stops`)."""
    t = text(KV_MEMORY_LABELS, language)
    with style(theme) as p:
        fig, ax = plt.subplots(
            figsize=(5.4, 6.0), layout="constrained"
        )  # a phone's width
        colours = [*p.series, p.muted]
        for i, shape in enumerate(PUBLISHED_CACHES):
            gib = [cache_bytes(shape, n) / GIB for n in CONTEXTS]
            colour = colours[i % len(colours)]
            # the model's marker at 1M, so that the legend shows it too
            ax.plot(
                CONTEXTS,
                gib,
                "-",
                marker=MARKERS[i],
                markevery=[len(CONTEXTS) - 1],
                ms=6,
                color=colour,
                lw=2,
                label=f"{shape.name} ({t['kinds'][shape.kind]})",
            )
            stop = growth_stops(shape)
            if stop is not None:
                ax.plot(
                    stop,
                    cache_bytes(shape, stop) / GIB,
                    MARKERS[i],
                    color=colour,
                    ms=10,
                    mfc="none",
                    mew=2,
                )
        ax.plot(
            [],
            [],
            "o",
            color=p.muted,
            ms=10,
            mfc="none",
            mew=2,
            label=t["stop"].format(w="W"),
        )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(TICKS, [_tokens(n) for n in TICKS])
        ax.minorticks_off()
        ax.set(xlabel=t["x"], ylabel=t["y"], title=textwrap.fill(t["title"], 40))
        ax.title.set_fontsize(12)
        ax.grid(alpha=0.6)
        for spine in ("top", "right"):
            ax.spines[spine].set_visible(False)
        ax.legend(loc="upper left")
    return fig
