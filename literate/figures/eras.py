"""Figure of chapter 11: the published models by parameters and KV cache per token (the
blocks of the eras side by side: `literate/figures/era_blocks.py`).

Plotting only: the parameters come from `literate.numbers.published.parameter_counts`,
the caches from `literate.numbers.published.cache_shape` read by chapter 10's
`literate.numbers.cache_ledger.ledger_row`, which tests/test_published.py checks against
the models our loaders build.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from literate.figures.style import style, text
from literate.numbers.cache_ledger import growth_stops, ledger_row
from literate.numbers.published import PUBLISHED_CONFIGS, cache_shape, parameter_counts

# --------------------------------------------------------------------------------------
# Parameters against the KV cache per token

PARAMS_CACHE_LABELS = {
    "en": {
        "title": "Parameters against KV cache per token (bfloat16, batch 1)",
        "x": "parameters (log scale)",
        "y": "KV cache per token, KiB (log scale)\na context within every window",
        "families": {
            "full": "dense, MHA/GQA cache",
            "windowed": "windowed layers",
            "latent": "latent (MLA) cache",
        },
        "dense": "dense FFN: total = active",
        "moe": "MoE: total (filled), active per token (hollow)",
        "kib": "{n} KiB",
        "units": ((10**12, "T"), (10**9, "B"), (10**6, "M")),
    },
    "ru": {
        "title": "Параметры и KV-кеш на токен (bfloat16, батч 1)",
        "x": "параметры (лог. шкала)",
        "y": "KV-кеш на токен, КиБ (лог. шкала)\nконтекст в пределах всех окон",
        "families": {
            "full": "плотные, кеш MHA/GQA",
            "windowed": "слои с окном",
            "latent": "латентный кеш (MLA)",
        },
        "dense": "плотный FFN: всего = активных",
        "moe": "MoE: всего (закрашен), активных на токен (полый)",
        "kib": "{n} КиБ",
        "units": ((10**12, " трлн"), (10**9, " млрд"), (10**6, " млн")),
    },
}

PARAMS_TICKS = (10**8, 10**9, 10**10, 10**11, 10**12)
KIB_TICKS = (32, 64, 128, 256, 512, 1024)

# Where each name sits around its total's marker: (dx, dy) in points, horizontal
# alignment. Placed by hand so that no two labels overlap (checked on the rendering).
LABEL_PLACES = {
    "GPT-2 small": ((7, 0), "left"),
    "GPT-2 XL": ((7, 0), "left"),
    "Llama 2 7B": ((-8, 0), "right"),
    "Llama 3 8B": ((6, 9), "left"),
    "Mistral 7B v0.1": ((-8, -8), "right"),
    "Llama 3 70B": ((7, 0), "left"),
    "Mixtral 8x7B": ((7, 0), "left"),
    "Qwen3-30B-A3B": ((7, -1), "left"),
    "Gemma 3 27B": ((7, 0), "left"),
    "DeepSeek-V3": ((6, -11), "right"),
    "gpt-oss-120b": ((0, 10), "center"),
}
DEFAULT_PLACE = ((7, 0), "left")


def cache_family(name: str) -> str:
    """ "latent" for an MLA cache, "windowed" when some layers keep a window
    (`growth_stops`), "full" for a cache of every key and value of MHA/GQA."""
    shape = cache_shape(name)
    if shape.kind == "MLA":
        return "latent"
    return "windowed" if growth_stops(shape) is not None else "full"


def _count(n: float, units) -> str:
    for scale, suffix in units:
        if n >= scale:
            return f"{n / scale:g}{suffix}"
    return f"{n:g}"


def params_cache_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Each model of `PUBLISHED_CONFIGS` at (total parameters, KV-cache bytes per token
    in bfloat16: `ledger_row(cache_shape(name))["bytes/token"]`), log-log. A MoE model
    (total != active in `parameter_counts`) also has a hollow marker at its active
    count, joined to the total by a thin line. Colour: the cache's family; marker: a
    circle for a dense FFN, a triangle for a mixture of experts."""
    t = text(PARAMS_CACHE_LABELS, language)
    with style(theme) as p:
        colours = {"full": p.series[0], "windowed": p.series[2], "latent": p.series[3]}
        fig, ax = plt.subplots(
            figsize=(5.4, 6.0), layout="constrained"
        )  # a phone's width
        for name in PUBLISHED_CONFIGS:
            total, active = parameter_counts(name)
            per_token = ledger_row(cache_shape(name))["bytes/token"]
            colour = colours[cache_family(name)]
            marker = "o" if total == active else "^"
            if total != active:
                ax.plot(
                    [active, total],
                    [per_token, per_token],
                    "-",
                    color=colour,
                    lw=1.0,
                    zorder=2,
                    label=f"_link {name}",
                )
                ax.scatter(
                    [active],
                    [per_token],
                    s=52,
                    marker=marker,
                    facecolors="none",
                    edgecolors=colour,
                    linewidths=1.6,
                    zorder=3,
                    label=f"_active {name}",
                )
            ax.scatter(
                [total],
                [per_token],
                s=60,
                marker=marker,
                color=colour,
                edgecolors="none",
                zorder=4,
                label=f"_total {name}",
            )
            (dx, dy), ha = LABEL_PLACES.get(name, DEFAULT_PLACE)
            ax.annotate(
                name,
                (total, per_token),
                xytext=(dx, dy),
                textcoords="offset points",
                ha=ha,
                va="center",
                fontsize=10,
                color=p.ink,
            )
        ax.set_xscale("log")
        ax.set_yscale("log", base=2)
        ax.set_xticks(PARAMS_TICKS, [_count(n, t["units"]) for n in PARAMS_TICKS])
        ax.set_yticks(
            [k * 1024 for k in KIB_TICKS], [t["kib"].format(n=k) for k in KIB_TICKS]
        )
        ax.minorticks_off()
        ax.set(
            xlim=(6e7, 2e12),
            ylim=(27 * 1024, 1700 * 1024),
            xlabel=t["x"],
            ylabel=t["y"],
            title=textwrap.fill(t["title"], 34),
        )
        ax.title.set_fontsize(12)
        ax.grid(alpha=0.6)
        for spine in ("top", "right"):
            ax.spines[spine].set_visible(False)
        handles = [
            Line2D(
                [],
                [],
                ls="none",
                marker="s",
                ms=8,
                color=colours[f],
                label=t["families"][f],
            )
            for f in ("full", "windowed", "latent")
        ]
        handles += [
            Line2D(
                [], [], ls="none", marker="o", ms=7, color=p.muted, label=t["dense"]
            ),
            Line2D(
                [],
                [],
                ls="-",
                lw=1.0,
                marker="^",
                ms=7,
                color=p.muted,
                mfc="none",
                mew=1.6,
                label=t["moe"],
            ),
        ]
        fig.legend(handles=handles, loc="outside lower center", ncol=1)
    return fig
