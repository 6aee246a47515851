"""Figures of chapter 5: why GPT-2 normalises before each sublayer (gradients at
initialisation, Xiong et al. 2020, sec. 3: under Xavier's initialisation with
unit-variance inputs, their setting, and under GPT-2's own initialisation at the scale
of GPT-2's embeddings), and the tiny language model's loss curve.

Plotting only: the measurements come from `literate.numbers.studies.gradient_study` and
`literate.models.gpt2.train_period_lm`, which the chapter's claims call too.
"""

from __future__ import annotations

import math
import textwrap
from functools import lru_cache

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from literate.figures.style import style, text
from literate.models.gpt2 import train_period_lm
from literate.numbers.golden import reference
from literate.numbers.studies import (
    GPT2_INPUT_STD,
    NORM_POSITIONS,
    STUDY_DEPTHS,
    STUDY_LAYERS,
    gradient_study,
)

# The rows of the gradient figure: (label key, init, input_std), and the control drawn
# in the GPT-2 row: pre-norm under GPT-2's init with unit-variance inputs.
GRADIENT_ROWS = (("xavier", "xavier", 1.0), ("gpt2", "gpt2", GPT2_INPUT_STD))
CONTROL = ("gpt2", 1.0)

GRADIENT_LABELS = {
    "en": {
        "title_layers": "Each layer's FFN gradient, $L = 12$",
        "title_depth": "The top layer's gradient against $L$",
        "xavier": "Xavier's init, unit-variance input (Xiong et al.'s setting)",
        "gpt2": "GPT-2's init, input RMS {std:.3f} (GPT-2's embeddings)",
        "layer": "Layer (1 = next to the input)",
        "depth": "Number of layers $L$",
        "y": "$\\|\\partial \\mathcal{L} / \\partial W_2\\|_F$ at init",
        "pre": "pre-norm: $x + F(\\mathrm{LN}(x))$",
        "post": "post-norm: $\\mathrm{LN}(x + F(x))$",
        "control": "pre-norm, input std 1 (control)",
        "slope": "slope of $1/\\sqrt{L}$",
    },
    "ru": {
        "title_layers": "Градиент FFN по слоям, $L = 12$",
        "title_depth": "Градиент верхнего слоя и $L$",
        "xavier": "Инициализация Xavier, вход с дисперсией 1 (как у Xiong et al.)",
        "gpt2": "Инициализация GPT-2, вход RMS {std:.3f} (эмбеддинги GPT-2)",
        "layer": "Слой (1 — у входа)",
        "depth": "Число слоёв $L$",
        "y": "$\\|\\partial \\mathcal{L} / \\partial W_2\\|_F$ при инициализации",
        "pre": "pre-norm: $x + F(\\mathrm{LN}(x))$",
        "post": "post-norm: $\\mathrm{LN}(x + F(x))$",
        "control": "pre-norm, вход std 1 (контроль)",
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
    """One row per setting: Xavier's init with unit-variance inputs (Xiong et al.'s),
    then GPT-2's init with inputs at the scale of GPT-2's embeddings, where the control
    (pre-norm, GPT-2's init, unit-variance inputs) is drawn dotted. Left: per-layer FFN
    gradient norms in a 12-layer stack, pre versus post. Right: the top layer's
    gradient as the stack deepens (Xiong et al. 2020, theorem 1, is about the Xavier
    row). One log scale for all four panels, so the rows compare directly."""
    t = text(GRADIENT_LABELS, language)
    with style(theme) as p:
        # two narrow columns, one legend per row under it: the figure fits a phone
        fig = plt.figure(figsize=(5.2, 10.4), layout="constrained")
        rows = fig.subfigures(len(GRADIENT_ROWS), 1, hspace=0.06)
        layers = range(1, STUDY_LAYERS + 1)
        colours = {"pre": p.series[0], "post": p.series[1]}
        for row, (key, init, input_std) in zip(rows, GRADIENT_ROWS):
            left, right = row.subplots(1, 2, sharey=True)
            row.suptitle(
                t[key].format(std=input_std).replace(" (", "\n(", 1),
                x=0.01,
                ha="left",
                fontsize=12,
                fontweight="bold",
            )
            study = gradient_study(init, input_std)
            for pos in NORM_POSITIONS:
                left.plot(
                    layers,
                    study[pos][STUDY_LAYERS].ffn_grad,
                    "o-",
                    color=colours[pos],
                    label=t[pos],
                )
                top = [study[pos][depth].ffn_grad[-1] for depth in STUDY_DEPTHS]
                right.plot(STUDY_DEPTHS, top, "o-", color=colours[pos], label=t[pos])
            if init == CONTROL[0]:
                control = gradient_study(*CONTROL)["pre"]
                left.plot(
                    layers,
                    control[STUDY_LAYERS].ffn_grad,
                    ":",
                    color=p.ink,
                    lw=1.6,
                    label=t["control"],
                )
                right.plot(
                    STUDY_DEPTHS,
                    [control[d].ffn_grad[-1] for d in STUDY_DEPTHS],
                    ":",
                    color=p.ink,
                    lw=1.6,
                    label=t["control"],
                )
            # The 1/sqrt(L) slope, through pre-norm's top gradient at L = 12.
            anchor = study["pre"][STUDY_LAYERS].ffn_grad[-1] * math.sqrt(STUDY_LAYERS)
            right.plot(
                STUDY_DEPTHS,
                [anchor / math.sqrt(d) for d in STUDY_DEPTHS],
                "--",
                color=p.muted,
                lw=1.2,
                label=t["slope"],
            )
            left.set(
                xlabel=t["layer"].replace(" (", "\n(", 1),
                ylabel=t["y"],
                yscale="log",
                title=textwrap.fill(t["title_layers"], 20),
            )
            left.set_xticks(list(layers))
            right.set(
                xscale="log",
                xlabel=textwrap.fill(t["depth"], 18),
                title=textwrap.fill(t["title_depth"], 20),
            )
            right.set_xticks(list(STUDY_DEPTHS), [str(d) for d in STUDY_DEPTHS])
            for ax in (left, right):
                ax.minorticks_off()
                ticks = [0.1, 0.2, 0.5, 1, 2, 5]
                ax.set_yticks(ticks, [str(v) for v in ticks])
                ax.set_ylim(0.08, 9.0)
                ax.title.set_fontsize(11)
                ax.grid(alpha=0.6)
                for spine in ("top", "right"):
                    ax.spines[spine].set_visible(False)
            handles, labels = right.get_legend_handles_labels()
            row.legend(handles, labels, loc="outside lower center", ncol=1)
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
        fig, ax = plt.subplots(figsize=(5.2, 4.4), layout="constrained")
        ax.axhline(math.log(6), color=p.muted, ls=":", lw=1.3, label=t["uniform"])
        ax.axhline(threshold, color=p.series[4], ls="--", lw=1.3, label=t["threshold"])
        ax.plot(range(len(losses)), losses, color=p.series[0], lw=2, label=t["loss"])
        ax.set(
            yscale="log",
            xlabel=t["x"],
            ylabel=t["y"],
            title=t["title"],
            xlim=(0, len(losses) - 1),
        )
        ax.grid(alpha=0.6)
        for spine in ("top", "right"):
            ax.spines[spine].set_visible(False)
        ax.legend(loc="upper right", bbox_to_anchor=(1.0, 0.92))
    return fig
