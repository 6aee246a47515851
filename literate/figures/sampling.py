"""Figures of chapter 6: one logit vector under four decoding policies, and the nucleus
under two temperatures (why temperature comes before top-p)."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from literate.figures.style import style, text
from literate.numbers.studies import (
    NUCLEUS_LOGITS,
    NUCLEUS_TEMPERATURES,
    NUCLEUS_TOP_P,
    POLICIES,
    SCENARIO_LOGITS,
    nucleus_example,
    sampling_scenario,
)

DISTRIBUTION_LABELS = {
    "en": {
        "policies": ("T = 1", "T = 2", "T = 1, top-k = 2", "T = 1, top-p = 0.9"),
        "token": "ID {i}",
        "y": "Renormalised probability",
        "title": "One logit vector [3, 2, 1, 0], four distributions",
    },
    "ru": {
        "policies": ("T = 1", "T = 2", "T = 1, top-k = 2", "T = 1, top-p = 0.9"),
        "token": "ID {i}",
        "y": "Вероятность после нормировки",
        "title": "Одни логиты [3, 2, 1, 0] — четыре распределения",
    },
}

NUCLEUS_LABELS = {
    "en": {
        "title": "T = {t}: the nucleus holds {n} of 10 tokens",
        "x": "Tokens, most likely first",
        "y": "Probability",
        "kept": "kept (in the nucleus)",
        "dropped": "removed",
        "cumulative": "mass up to and including this token",
        "threshold": "top-p = {p}",
        "suptitle": "Top-p after temperature: the same logits, p = {p}",
    },
    "ru": {
        "title": "T = {t}: в ядре {n} из 10 токенов",
        "x": "Токены, от самого вероятного",
        "y": "Вероятность",
        "kept": "оставлен (в ядре)",
        "dropped": "убран",
        "cumulative": "масса до этого токена включительно",
        "threshold": "top-p = {p}",
        "suptitle": "Top-p после температуры: одни логиты, p = {p}",
    },
}


def distributions_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Grouped bars: the probability of each of the four tokens under each policy."""
    t = text(DISTRIBUTION_LABELS, language)
    scenario = sampling_scenario()
    positions = np.arange(len(SCENARIO_LOGITS))
    width = 0.19
    with style(theme) as p:
        # horizontal bars, the tokens top to bottom: the figure fits a phone
        fig, ax = plt.subplots(figsize=(5.2, 6.4), layout="constrained")
        colors = (p.series[0], p.series[1], p.series[2], p.series[3])
        for index, (policy, label, color) in enumerate(
            zip(POLICIES, t["policies"], colors)
        ):
            y = positions + (index - 1.5) * width
            values = scenario[policy]
            ax.barh(y, values, width, label=label, color=color)
            for yi, value in zip(y, values):
                mark = f"{value:.2f}" if value > 0 else "×"
                ax.text(
                    value + 0.012,
                    yi,
                    mark,
                    ha="left",
                    va="center",
                    fontsize=10,
                    color=p.ink if value > 0 else p.muted,
                )
        ax.set_yticks(positions, [t["token"].format(i=i) for i in positions])
        ax.invert_yaxis()  # ID 0 on top
        ax.set_xlim(0, 0.85)
        ax.set_xlabel(t["y"])
        ax.set_title(textwrap.fill(t["title"], 36), fontsize=12, pad=44)
        ax.legend(ncol=2, loc="lower left", bbox_to_anchor=(0, 1.0))
        ax.grid(axis="x", alpha=0.6)
        for spine in ("top", "right"):
            ax.spines[spine].set_visible(False)
    return fig


def nucleus_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Two panels, T = 0.7 and T = 1.5: sorted probabilities (kept ones coloured), the
    cumulative mass as a step line, and the threshold p. The nucleus grows with T."""
    t = text(NUCLEUS_LABELS, language)
    with style(theme) as p:
        fig, axes = plt.subplots(
            2, 1, figsize=(5.2, 7.6), layout="constrained", sharey=True
        )
        ranks = np.arange(len(NUCLEUS_LOGITS))
        for ax, temperature in zip(axes, NUCLEUS_TEMPERATURES):
            example = nucleus_example(temperature)
            kept = example["kept"]
            ax.bar(
                ranks[:kept],
                example["probs"][:kept],
                0.7,
                color=p.series[0],
                label=t["kept"],
            )
            ax.bar(
                ranks[kept:],
                example["probs"][kept:],
                0.7,
                color=p.muted,
                alpha=0.35,
                label=t["dropped"],
            )
            ax.plot(
                ranks,
                example["cumulative"],
                "o-",
                color=p.series[1],
                lw=1.8,
                ms=5,
                label=t["cumulative"],
            )
            ax.axhline(
                NUCLEUS_TOP_P,
                color=p.series[4],
                ls="--",
                lw=1.5,
                label=t["threshold"].format(p=NUCLEUS_TOP_P),
            )
            ax.set_title(t["title"].format(t=temperature, n=kept), fontsize=12)
            ax.set_xticks(ranks, [str(r) for r in ranks])
            ax.set_xlabel(t["x"])
            ax.set_ylim(0, 1.05)
            ax.grid(axis="y", alpha=0.6)
            for spine in ("top", "right"):
                ax.spines[spine].set_visible(False)
            ax.set_ylabel(t["y"])
        axes[1].legend(loc="center right")
        fig.suptitle(
            textwrap.fill(t["suptitle"].format(p=NUCLEUS_TOP_P), 40),
            fontsize=12,
            fontweight="bold",
            color=p.ink,
        )
    return fig
