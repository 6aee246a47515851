"""Figures of chapter 4: the 2017 encoder-decoder, its learning-rate schedule and label smoothing."""

# Over 450 lines on purpose: chapter 4's three figures, each with its English and
# Russian labels; the architecture diagram's box helpers serve only it.

from __future__ import annotations

import textwrap
from itertools import pairwise

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from literate.figures.style import BOX_INK, style, text
from literate.models.transformer2017 import transformer_lr

ARCHITECTURE_LABELS = {
    "en": {
        "encoder": "Encoder",
        "decoder": "Decoder",
        "source": "source tokens\n(PAD keys masked)",
        "target": "targets shifted right\nBOS, $y_0$, ..., $y_{T-2}$",
        "embed": "$\\sqrt{d}\\,E[x]$ + positions",
        "shared": "one matrix $E$",
        "self": "Self-attention",
        "masked": "Causal self-attention",
        "cross": "Cross-attention",
        "ffn": "Feed-forward (ReLU)",
        "norm": "Add & LayerNorm",
        "out": "logits $= h\\,E^{\\top}$",
        "memory": "memory [B, S, d]",
        "kv": "K, V from\nthe encoder",
        "q": "Q from the decoder",
        "residual": "residual",
        "n": "× N",
    },
    "ru": {
        "encoder": "Энкодер",
        "decoder": "Декодер",
        "source": "токены источника\n(PAD-ключи скрыты)",
        "target": "цели со сдвигом вправо\nBOS, $y_0$, ..., $y_{T-2}$",
        "embed": "$\\sqrt{d}\\,E[x]$ + позиции",
        "shared": "одна матрица $E$",
        "self": "Self-attention",
        "masked": "Каузальное self-attention",
        "cross": "Cross-attention",
        "ffn": "Полносвязный слой (ReLU)",
        "norm": "Сложение и LayerNorm",
        "out": "логиты $= h\\,E^{\\top}$",
        "memory": "память [B, S, d]",
        "kv": "K, V из\nэнкодера",
        "q": "Q из декодера",
        "residual": "остаточная связь",
        "n": "× N",
    },
}

LR_LABELS = {
    "en": {
        "title_paper": "The schedule of the paper (warm-up 4000)",
        "title_ours": "The notebook's run",
        "x": "training step",
        "y_milli": "learning rate, $\\times 10^{-3}$",
        "base": "$d$ = 512 (base)",
        "big": "$d$ = 1024 (big)",
        "rise": "$d^{-1/2}\\,s\\,w^{-3/2}$ (warm-up)",
        "decay": "$d^{-1/2}\\,s^{-1/2}$ (decay)",
        "peak": "peak at $s = w$",
        "ours": "$d$ = {d}, warm-up {w}",
    },
    "ru": {
        "title_paper": "Расписание из статьи (разогрев 4000)",
        "title_ours": "Запуск в ноутбуке",
        "x": "шаг обучения",
        "y_milli": "скорость обучения, $\\times 10^{-3}$",
        "base": "$d$ = 512 (base)",
        "big": "$d$ = 1024 (big)",
        "rise": "$d^{-1/2}\\,s\\,w^{-3/2}$ (разогрев)",
        "decay": "$d^{-1/2}\\,s^{-1/2}$ (спад)",
        "peak": "пик при $s = w$",
        "ours": "$d$ = {d}, разогрев {w}",
    },
}

SMOOTHING_LABELS = {
    "en": {
        "title_target": "The target the loss aims at",
        "title_loss": "Loss as the right token gains probability",
        "class": "token",
        "q": "target probability",
        "hard": "one-hot ($\\varepsilon$ = 0)",
        "soft": "smoothed ($\\varepsilon$ = 0.1)",
        "p": "probability given to the right token",
        "loss": "loss",
        "nll": "cross-entropy, one-hot target",
        "ls": "cross-entropy, smoothed target",
        "best": "minimum at $1 - \\varepsilon + \\varepsilon / V$",
        "rest": "every other token: $\\varepsilon / V$ = {q:g}",
    },
    "ru": {
        "title_target": "Цель, к которой стремится лосс",
        "title_loss": "Лосс и вероятность верного токена",
        "class": "токен",
        "q": "целевая вероятность",
        "hard": "one-hot ($\\varepsilon$ = 0)",
        "soft": "сглаженная ($\\varepsilon$ = 0.1)",
        "p": "вероятность верного токена",
        "loss": "лосс",
        "nll": "кросс-энтропия, one-hot цель",
        "ls": "кросс-энтропия, сглаженная цель",
        "best": "минимум в $1 - \\varepsilon + \\varepsilon / V$",
        "rest": "каждый другой токен: $\\varepsilon / V$ = {q:g}",
    },
}

# The notebook's training run (docs/notebooks/seq2seq_reverse.py) uses these numbers.
NOTEBOOK_D_MODEL, NOTEBOOK_WARMUP, NOTEBOOK_STEPS = 32, 200, 1500


def _box(
    ax, x: float, y: float, w: float, h: float, label: str, color: str, ink: str
) -> None:
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor=color,
            edgecolor="none",
            alpha=0.9,
        )
    )
    if "$" not in label and len(label) > 17:  # two lines in the box
        label = textwrap.fill(label, 14, break_on_hyphens=False)
    ax.text(
        x, y, label, ha="center", va="center", fontsize=10, color=ink, linespacing=1.0
    )


def _arrow(ax, start, end, color: str, *, lw: float = 1.3) -> None:
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=12,
            color=color,
            lw=lw,
            shrinkA=0,
            shrinkB=1,
        )
    )


def _stack(
    ax,
    x: float,
    ys: list[float],
    labels: list[str],
    colors: list[str],
    side: int,
    *,
    w: float,
    h: float,
    ink: str,
    dark: str,
    norm: str,
    line: str,
) -> None:
    """One column of sublayer and add & norm boxes, the arrows between them, and the
    residual connection around each sublayer: it leaves the stream just below the
    sublayer, runs beside it (left if side = -1, right if side = +1) and enters the add &
    norm above it."""
    for y, label, color in zip(ys, labels, colors):
        _box(ax, x, y, w, h, label, color, ink if color == norm else dark)
    for a, b in pairwise(ys):
        _arrow(ax, (x, a + h / 2), (x, b - h / 2), line)
    gap = ys[1] - ys[0] - h
    rail = x + side * (w / 2 + 0.12)
    for sub, add in zip(ys[0::2], ys[1::2]):
        fork = sub - h / 2 - gap / 2
        ax.plot(
            [x, rail, rail],
            [fork, fork, add],
            color=line,
            lw=1.1,
            solid_joinstyle="round",
        )
        ax.plot([x], [fork], "o", color=line, ms=3.5)
        _arrow(ax, (rail, add), (x + side * w / 2, add), line)


def architecture_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Vaswani et al. 2017, fig. 1, as this chapter builds it: post-norm layers, each
    sublayer on a residual connection that enters its add & norm, one shared embedding
    matrix E used three times, and cross-attention taking its queries from the decoder
    and its keys and values from the encoder's output (the memory)."""
    t = text(ARCHITECTURE_LABELS, language)
    with style(theme) as p:
        # drawn in inches, at a phone's width: one data unit is one inch of the figure
        width, height = 5.2, 5.75
        fig = plt.figure(figsize=(width, height))
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set(xlim=(0, width), ylim=(0, height), aspect="equal")
        ax.axis("off")
        dark = BOX_INK
        attn, ffn, norm, emb = p.series[0], p.series[2], p.border, p.series[1]
        w, h, step = 1.45, 0.36, 0.56
        ex, dx, emb_y, first = 1.245, 4.1, 0.85, 1.65  # columns, embeddings, sublayer
        enc_y = [first + i * step for i in range(4)]
        dec_y = [first + i * step for i in range(6)]
        parts = {
            "w": w,
            "h": h,
            "ink": p.ink,
            "dark": dark,
            "norm": norm,
            "line": p.muted,
        }

        for x, ys, title, side, label in [
            (ex, enc_y, t["encoder"], -1, t["source"]),
            (dx, dec_y, t["decoder"], +1, t["target"]),
        ]:
            ax.text(x, 0.22, label, ha="center", va="center", fontsize=10, color=p.ink)
            _box(ax, x, emb_y, w, h, t["embed"], emb, dark)
            _arrow(ax, (x, 0.45), (x, emb_y - h / 2), p.muted)
            _arrow(ax, (x, emb_y + h / 2), (x, ys[0] - h / 2), p.muted)
            bottom, top = first - step / 2 - 0.06, ys[-1] + h / 2 + 0.1
            # the residual rails run on the outer side: the frame leaves them room
            left = x - w / 2 - (0.2 if side < 0 else 0.08)
            right = x + w / 2 + (0.2 if side > 0 else 0.08)
            ax.add_patch(
                FancyBboxPatch(
                    (left, bottom),
                    right - left,
                    top - bottom,
                    boxstyle="round,pad=0.02",
                    facecolor="none",
                    edgecolor=p.muted,
                    lw=1.0,
                    ls="--",
                )
            )
            ax.text(
                left + 0.03,
                top + 0.15,
                title,
                ha="left",
                va="center",
                fontsize=12,
                fontweight="bold",
                color=p.ink,
            )
            ax.text(
                right - 0.03,
                top + 0.15,
                t["n"],
                ha="right",
                va="center",
                fontsize=11,
                color=p.ink,
            )

        _stack(
            ax,
            ex,
            enc_y,
            [t["self"], t["norm"], t["ffn"], t["norm"]],
            [attn, norm, ffn, norm],
            -1,
            **parts,
        )
        _stack(
            ax,
            dx,
            dec_y,
            [t["masked"], t["norm"], t["cross"], t["norm"], t["ffn"], t["norm"]],
            [attn, norm, attn, norm, ffn, norm],
            +1,
            **parts,
        )

        # The memory: the encoder's output, read by every decoder layer's cross-attention
        # as keys and values; its queries come from the decoder's own stream below it.
        cross, over, mx = dec_y[2], enc_y[-1] + h / 2 + 0.45, 2.24
        ax.text(
            ex - w / 2 - 0.3,
            (enc_y[0] + enc_y[1]) / 2,
            t["residual"],
            rotation=90,
            ha="center",
            va="center",
            fontsize=10,
            color=p.muted,
        )
        ax.plot(
            [ex, ex, mx, mx],
            [enc_y[-1] + h / 2, over, over, cross],
            color=attn,
            lw=1.6,
            solid_joinstyle="round",
        )
        _arrow(ax, (mx, cross), (dx - w / 2, cross), attn, lw=1.6)
        ax.text(
            (ex + mx) / 2 + 0.15,
            over + 0.05,
            t["memory"],
            ha="center",
            va="bottom",
            fontsize=10,
            color=p.ink,
        )
        ax.text(
            mx + 0.04,
            cross + 0.06,
            t["kv"],
            ha="left",
            va="bottom",
            fontsize=10,
            color=attn,
            fontweight="bold",
            linespacing=1.1,
        )
        ax.text(
            dx - 0.06,
            cross - h / 2 - (step - h) / 2,
            t["q"],
            ha="right",
            va="center",
            fontsize=10,
            color=attn,
            fontweight="bold",
        )

        # One embedding matrix, three uses: source embedding, target embedding, logits.
        out_y = dec_y[-1] + 0.9
        _box(ax, dx, out_y, w, h, t["out"], emb, dark)
        _arrow(ax, (dx, dec_y[-1] + h / 2), (dx, out_y - h / 2), p.muted)
        shared = {"color": emb, "lw": 1.2, "ls": (0, (3, 3))}
        ax.plot([ex + w / 2, dx - w / 2], [emb_y, emb_y], **shared)
        edge = width - 0.06
        ax.plot(
            [dx + w / 2, edge, edge, dx + w / 2], [emb_y, emb_y, out_y, out_y], **shared
        )
        ax.text(
            (ex + dx) / 2,
            emb_y + 0.06,
            t["shared"],
            ha="center",
            va="bottom",
            fontsize=10,
            color=emb,
            fontweight="bold",
        )
    return fig


def lr_schedule_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Left: sec. 5.3's schedule for the base and big models, the two branches of the min,
    and the peak at step = warm-up. Right: the same formula with the notebook's numbers."""
    t = text(LR_LABELS, language)
    steps = np.arange(1, 30_001)
    with style(theme) as p:
        # stacked: a phone shows the figure at its full width
        fig, (left, right) = plt.subplots(
            2, 1, figsize=(5.2, 7.6), layout="constrained"
        )
        warmup = 4000
        milli = 1e3  # the left panel is drawn in units of 10^-3
        rise = milli * 512**-0.5 * steps * warmup**-1.5
        decay = milli * 512**-0.5 * steps**-0.5
        left.plot(
            steps[:9000], rise[:9000], ls=":", color=p.muted, lw=1.4, label=t["rise"]
        )
        left.plot(
            steps[200:], decay[200:], ls="--", color=p.muted, lw=1.2, label=t["decay"]
        )
        for d, label, color in [
            (512, t["base"], p.series[0]),
            (1024, t["big"], p.series[1]),
        ]:
            left.plot(
                steps,
                [milli * transformer_lr(int(s), d, warmup) for s in steps],
                color=color,
                lw=2.2,
                label=label,
            )
            left.plot(
                [warmup], [milli * transformer_lr(warmup, d, warmup)], "o", color=color
            )
        left.annotate(
            t["peak"],
            (warmup, milli * transformer_lr(warmup, 512, warmup)),
            xytext=(9000, 0.95),
            color=p.ink,
            fontsize=10,
            arrowprops={"arrowstyle": "->", "color": p.muted},
        )
        left.set(
            xlabel=t["x"], ylabel=t["y_milli"], title=t["title_paper"], ylim=(0, 1.2)
        )
        ours = np.arange(1, NOTEBOOK_STEPS + 1)
        right.plot(
            ours,
            [transformer_lr(int(s), NOTEBOOK_D_MODEL, NOTEBOOK_WARMUP) for s in ours],
            color=p.series[2],
            lw=2.2,
            label=t["ours"].format(d=NOTEBOOK_D_MODEL, w=NOTEBOOK_WARMUP),
        )
        right.plot(
            [NOTEBOOK_WARMUP],
            [transformer_lr(NOTEBOOK_WARMUP, NOTEBOOK_D_MODEL, NOTEBOOK_WARMUP)],
            "o",
            color=p.series[2],
        )
        right.set(xlabel=t["x"], title=t["title_ours"], ylim=(0, None))
        for ax in (left, right):
            ax.title.set_fontsize(12)
            ax.grid(alpha=0.6)
            ax.legend(loc="upper right")
    return fig


def smoothed_loss(p_right: np.ndarray, eps: float, vocab: int) -> np.ndarray:
    """Cross-entropy against the smoothed target when the model gives p_right to the right
    token and spreads the rest evenly over the other vocab - 1."""
    p_other = (1 - p_right) / (vocab - 1)
    q_right = 1 - eps + eps / vocab
    return -q_right * np.log(p_right) - (1 - q_right) * np.log(p_other)


def label_smoothing_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Left: the one-hot target and the smoothed one. Right: the loss as the right token's
    probability grows; with smoothing it has a minimum before 1, so logits stay finite."""
    t = text(SMOOTHING_LABELS, language)
    vocab, eps, right_token = 10, 0.1, 3
    with style(theme) as p:
        # stacked: a phone shows the figure at its full width
        fig, (left, right) = plt.subplots(
            2, 1, figsize=(5.2, 7.6), layout="constrained"
        )
        k = np.arange(vocab)
        hard = (k == right_token).astype(float)
        soft = (1 - eps) * hard + eps / vocab
        left.bar(k - 0.2, hard, width=0.4, color=p.series[1], label=t["hard"])
        left.bar(k + 0.2, soft, width=0.4, color=p.series[0], label=t["soft"])
        left.text(
            right_token + 3.5,
            0.07,
            t["rest"].format(q=eps / vocab),
            ha="center",
            fontsize=10,
            color=p.ink,
        )
        left.set(
            xticks=k,
            xlabel=t["class"],
            ylabel=t["q"],
            title=t["title_target"],
            ylim=(0, 1.15),
        )
        pr = np.linspace(0.05, 0.9999, 2000)
        right.plot(pr, -np.log(pr), color=p.series[1], lw=2.2, label=t["nll"])
        right.plot(
            pr, smoothed_loss(pr, eps, vocab), color=p.series[0], lw=2.2, label=t["ls"]
        )
        best = 1 - eps + eps / vocab
        lowest = smoothed_loss(np.array(best), eps, vocab)
        right.plot([best], [lowest], "o", color=p.series[0])
        right.plot(
            [best, best], [0, lowest], color=p.muted, ls="--", lw=1
        )  # under the legend
        right.annotate(
            t["best"],
            (best, lowest),
            xytext=(0.3, 2.2),
            color=p.ink,
            fontsize=10,
            arrowprops={"arrowstyle": "->", "color": p.muted},
        )
        # no 0 on the x axis: it would run into the y axis's 0
        right.set(
            xlabel=t["p"],
            ylabel=t["loss"],
            title=t["title_loss"],
            ylim=(0, 3.2),
            xlim=(0, 1),
            xticks=(0.2, 0.4, 0.6, 0.8, 1.0),
        )
        for ax in (left, right):
            ax.title.set_fontsize(12)
            ax.grid(alpha=0.6)
            ax.legend(loc="upper right")
    return fig
