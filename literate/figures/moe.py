"""Figures of chapter 9: the tiny mixture of experts trained without and with the
balancing loss, each expert's share of the routed pairs over training.

Plotting only: the runs come from `literate.numbers.moe_training.train_tiny_moe` (cached, so
the figure's variants train once), which the tests and the notebook call too. Every
number written on the figure is read from those runs.
"""

from __future__ import annotations

import math
import textwrap

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from literate.figures.style import style, text
from literate.numbers.moe_training import (
    BALANCE_COEF,
    LAST,
    TINY_MOE,
    imbalance,
    topic_loss,
    train_tiny_moe,
    unigram_loss,
)

TOKENS_LABELS = {
    "en": {
        "suptitle": "A tiny MoE language model ({e} experts, top-{k}, one block) "
        "trained twice on the same data",
        "without": "Without the balancing loss",
        "with": "With the balancing loss ({coef})",
        "note": "last {last} steps: the busiest expert at {imb} × the mean",
        "loss_title": "Next-token loss",
        "step": "training step",
        "share": "share of the routed (token, choice) pairs",
        "loss": "nats per token: each step, {window}-step mean",
        "expert": "expert {e}",
        "uniform": "even load: {e} bands of 1/{e}",
        "run_without": "without the loss",
        "run_with": "with the loss",
        "guess": "$\\ln {v}$: a uniform guess",
        "unigram": "word frequencies only",
        "topic": "knowing the topic",
    },
    "ru": {
        "suptitle": "Маленькая MoE-модель языка ({e} экспертов, top-{k}, один блок), "
        "обученная дважды на одних данных",
        "without": "Без балансирующей потери",
        "with": "С балансирующей потерей ({coef})",
        "note": "последние {last} шагов: самый занятый — {imb} × среднего",
        "loss_title": "Потери на токен",
        "step": "шаг обучения",
        "share": "доля пар (токен, выбор)",
        "loss": "нат/токен: за шаг и среднее за {window}",
        "expert": "эксперт {e}",
        "uniform": "ровно: {e} полос по 1/{e}",
        "run_without": "без потери",
        "run_with": "с потерей",
        "guess": "$\\ln {v}$: равномерная догадка",
        "unigram": "только частоты слов",
        "topic": "тема известна",
    },
}

# Eight experts need eight colours: the site's five (Nord), and three more of Nord's.
EXPERT_COLOURS = (
    "#5E81AC",
    "#D08770",
    "#A3BE8C",
    "#8055A6",
    "#BF616A",
    "#88C0D0",
    "#EBCB8B",
    "#D8A0C0",
)
LOSS_WINDOW = 10  # the loss curves are running means over this many steps


def _number(x: float, language: str, digits: int) -> str:
    """2.5 -> '2.50' ('2,50' in Russian)."""
    s = f"{x:.{digits}f}"
    return s.replace(".", ",") if language == "ru" else s


def _running_mean(values: tuple[float, ...], window: int) -> list[float]:
    """The mean of each `window` consecutive values (the first at step window - 1)."""
    return [
        sum(values[i - window + 1 : i + 1]) / window
        for i in range(window - 1, len(values))
    ]


def tokens_per_expert_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Left and middle: each expert's share of the routed pairs at every step as
    stacked bands, without and with the balancing loss (seed 0, `BALANCE_COEF`), the
    dashed lines where the bands of an even load would lie, and the final imbalance
    (`imbalance` of the last `LAST` steps) above each. Right: both runs' next-token
    loss (running means) against three levels: ln V, `unigram_loss`, `topic_loss`."""
    t = text(TOKENS_LABELS, language)
    task = TINY_MOE
    runs = {
        "without": train_tiny_moe(balance_coef=0.0),
        "with": train_tiny_moe(balance_coef=BALANCE_COEF),
    }
    e = task.n_experts
    with style(theme) as p:
        # stacked: a phone shows the figure at its full width
        fig, axes = plt.subplots(3, 1, figsize=(5.2, 10.8), layout="constrained")
        fig.suptitle(
            textwrap.fill(t["suptitle"].format(e=e, k=task.top_k), 52),
            x=0.01,
            ha="left",
            fontsize=10.5,
            color=p.muted,
        )
        for ax, (name, run) in zip(axes[:2], runs.items(), strict=True):
            steps = range(len(run.shares))
            bands = list(zip(*run.shares))  # [E][S]
            ax.stackplot(
                steps, bands, colors=EXPERT_COLOURS, edgecolor=p.empty, linewidth=0.4
            )
            for j in range(1, e):
                ax.axhline(j / e, color=p.ink, ls=(0, (4, 3)), lw=0.9, alpha=0.7)
            ax.set(xlim=(0, len(run.shares) - 1), ylim=(0, 1), xlabel=t["step"])
            ax.set_title(
                t[name].format(coef=_number(run.balance_coef, language, 2)), pad=24
            )
            imb = _number(imbalance(run.final_shares(LAST)), language, 2)
            note = ax.text(
                0,
                1.02,
                t["note"].format(last=LAST, imb=imb),
                fontsize=10,
                color=p.muted,
                transform=ax.transAxes,
                va="bottom",
            )
            note.set_in_layout(False)  # the title's pad leaves it room
        for ax in axes[:2]:
            ax.set_ylabel(textwrap.fill(t["share"], 24))
        loss_ax = axes[2]
        guess = t["guess"].format(v=task.vocab_size)
        levels = (
            (math.log(task.vocab_size), ":", guess),
            (unigram_loss(task), "--", t["unigram"]),
            (topic_loss(task), "-.", t["topic"]),
        )
        for level, line, label in levels:
            loss_ax.axhline(level, color=p.muted, ls=line, lw=1.2, label=label)
        for (name, run), colour, line in zip(
            runs.items(), (p.series[4], p.series[0]), ("-", "--"), strict=True
        ):
            loss_ax.plot(
                range(len(run.lm_loss)), run.lm_loss, color=colour, lw=0.7, alpha=0.35
            )
            smooth = _running_mean(run.lm_loss, LOSS_WINDOW)
            loss_ax.plot(
                range(LOSS_WINDOW - 1, len(run.lm_loss)),
                smooth,
                color=colour,
                ls=line,
                lw=2,
                label=t[f"run_{name}"],
            )
        top = max(math.log(task.vocab_size), *(r.lm_loss[0] for r in runs.values()))
        loss_ax.set(
            xlim=(0, len(runs["with"].lm_loss) - 1),
            xlabel=t["step"],
            ylim=(topic_loss(task) - 0.1, top + 0.1),
            ylabel=textwrap.fill(t["loss"].format(window=LOSS_WINDOW), 24),
        )
        loss_ax.set_title(t["loss_title"], pad=24)
        loss_ax.grid(alpha=0.6)
        loss_ax.legend(loc="center right")  # between the curves and ln V
        for ax in axes:
            for spine in ("top", "right"):
                ax.spines[spine].set_visible(False)
        handles = [
            Patch(facecolor=c, edgecolor="none", label=t["expert"].format(e=i))
            for i, c in enumerate(EXPERT_COLOURS)
        ]
        handles.append(
            Line2D(
                [],
                [],
                color=p.ink,
                ls=(0, (4, 3)),
                lw=0.9,
                label=t["uniform"].format(e=e),
            )
        )
        fig.legend(
            handles=handles,
            loc="outside lower center",
            ncol=3,
            handlelength=1.4,
            columnspacing=1.1,
        )
    return fig
