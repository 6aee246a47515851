"""Figures of chapter 5: why GPT-2 normalises before each sublayer (gradients at
initialisation, Xiong et al. 2020, sec. 3, under Xavier's and under GPT-2's own
initialisation), and the tiny language model's loss curve.

Plotting only: the measurements come from `literate.studies.gradient_study` and
`literate.models.train_period_lm`, which the chapter's claims call too.
"""

from __future__ import annotations

import math
from functools import lru_cache

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from literate.figures.style import style, text
from literate.golden import reference
from literate.models import train_period_lm
from literate.studies import INITS, NORM_POSITIONS, STUDY_DEPTHS, STUDY_LAYERS, gradient_study

GRADIENT_LABELS = {
    "en": {
        "title_layers": "{init}: each layer's FFN gradient, $L = 12$",
        "title_depth": "{init}: the top layer's gradient against $L$",
        "xavier": "Xavier init",
        "gpt2": "GPT-2 init",
        "layer": "Layer (1 = next to the embeddings)",
        "depth": "Number of layers $L$",
        "y": "$\\|\\partial \\mathcal{L} / \\partial W_2\\|_F$ at init",
        "pre": "pre-norm: $x + F(\\mathrm{LN}(x))$",
        "post": "post-norm: $\\mathrm{LN}(x + F(x))$",
        "slope": "slope of $1/\\sqrt{L}$",
    },
    "ru": {
        "title_layers": "{init}: градиент FFN по слоям, $L = 12$",
        "title_depth": "{init}: градиент верхнего слоя и $L$",
        "xavier": "Xavier",
        "gpt2": "GPT-2",
        "layer": "Слой (1 — у эмбеддингов)",
        "depth": "Число слоёв $L$",
        "y": "$\\|\\partial \\mathcal{L} / \\partial W_2\\|_F$ при инициализации",
        "pre": "pre-norm: $x + F(\\mathrm{LN}(x))$",
        "post": "post-norm: $\\mathrm{LN}(x + F(x))$",
        "slope": "наклон $1/\\sqrt{L}$",
    },
}

LOSS_LABELS = {
    "en": {
        "title": "A one-block GPT-2 learns the period 0 1 2 3 4 5",
        "x": "Optimisation step",
        "y": "Next-token NLL, nats/token (log scale)",
        "loss": "training loss",
        "uniform": "$\\ln 6$: a uniform guess",
        "threshold": "target: below 0.02",
    },
    "ru": {
        "title": "GPT-2 из одного блока выучивает период 0 1 2 3 4 5",
        "x": "Шаг оптимизации",
        "y": "NLL следующего токена, нат/токен (лог. шкала)",
        "loss": "потери на обучении",
        "uniform": "$\\ln 6$: равномерная догадка",
        "threshold": "цель: ниже 0.02",
    },
}


def gradient_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """One row per initialisation (Xavier, then GPT-2's). Left: per-layer FFN gradient
    norms in a 12-layer stack, pre versus post. Right: the top layer's gradient as the
    stack deepens (Xiong et al. 2020, theorem 1, is about the Xavier row). The axes of
    a column are shared, so the two rows compare directly."""
    t = text(GRADIENT_LABELS, language)
    with style(theme) as p:
        fig, axes = plt.subplots(len(INITS), 2, figsize=(11.5, 8.4), layout="constrained",
                                 sharey="col")
        layers = range(1, STUDY_LAYERS + 1)
        colours = {"pre": p.series[0], "post": p.series[1]}
        for (left, right), init in zip(axes, INITS):
            study = gradient_study(init)
            for pos in NORM_POSITIONS:
                left.plot(layers, study[pos][STUDY_LAYERS].ffn_grad, "o-",
                          color=colours[pos], label=t[pos])
                top = [study[pos][depth].ffn_grad[-1] for depth in STUDY_DEPTHS]
                right.plot(STUDY_DEPTHS, top, "o-", color=colours[pos], label=t[pos])
            # The 1/sqrt(L) slope, through pre-norm's top gradient at L = 12.
            anchor = study["pre"][STUDY_LAYERS].ffn_grad[-1] * math.sqrt(STUDY_LAYERS)
            right.plot(STUDY_DEPTHS, [anchor / math.sqrt(d) for d in STUDY_DEPTHS], "--",
                       color=p.muted, lw=1.2, label=t["slope"])
            left.set(xlabel=t["layer"], ylabel=t["y"], ylim=(0, None),
                     title=t["title_layers"].format(init=t[init]))
            left.set_xticks(list(layers))
            right.set(xscale="log", yscale="log", xlabel=t["depth"],
                      title=t["title_depth"].format(init=t[init]))
            right.set_xticks(list(STUDY_DEPTHS), [str(d) for d in STUDY_DEPTHS])
            right.minorticks_off()
            ticks = [0.05, 0.1, 0.2, 0.3, 0.5, 0.7]
            right.set_yticks(ticks, [str(v) for v in ticks])
            right.set_ylim(0.04, 1.0)
            for ax in (left, right):
                ax.grid(alpha=0.6)
                for spine in ("top", "right"):
                    ax.spines[spine].set_visible(False)
            where = "lower left" if init == "xavier" else "upper right"  # clear of lines
            left.legend(loc=where)
            right.legend(loc=where)
    return fig


@lru_cache(maxsize=1)
def tiny_lm_losses() -> tuple[float, ...]:
    """The loss history of the chapter's tiny LM (`train_period_lm` with the settings
    in `reference()["tiny_lm"]`), on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same reduction order on every machine
    try:
        _, losses = train_period_lm(reference()["tiny_lm"])
    finally:
        torch.set_num_threads(threads)
    return tuple(losses)


def loss_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """The tiny LM's training loss per step, log scale, with ln 6 and the 0.02 target."""
    t = text(LOSS_LABELS, language)
    losses = tiny_lm_losses()
    threshold = reference()["tiny_lm"]["loss_threshold"]
    with style(theme) as p:
        fig, ax = plt.subplots(figsize=(11, 4.4), layout="constrained")
        ax.axhline(math.log(6), color=p.muted, ls=":", lw=1.3, label=t["uniform"])
        ax.axhline(threshold, color=p.series[4], ls="--", lw=1.3, label=t["threshold"])
        ax.plot(range(len(losses)), losses, color=p.series[0], lw=2, label=t["loss"])
        ax.set(yscale="log", xlabel=t["x"], ylabel=t["y"], title=t["title"], xlim=(0, len(losses) - 1))
        ax.grid(alpha=0.6)
        for spine in ("top", "right"):
            ax.spines[spine].set_visible(False)
        ax.legend(loc="upper right", bbox_to_anchor=(1.0, 0.92))
    return fig
