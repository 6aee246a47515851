"""Figures of chapter 4: the 2017 encoder-decoder, its learning-rate schedule and label smoothing."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from literate.figures.style import style, text
from literate.seq2seq import transformer_lr

ARCHITECTURE_LABELS = {
    "en": {
        "encoder": "Encoder", "decoder": "Decoder",
        "source": "source tokens\n(PAD keys masked)", "target": "targets shifted right\nBOS, $y_0$, ..., $y_{T-2}$",
        "embed": "$\\sqrt{d}\\,E[x]$ + positions", "shared": "one matrix $E$",
        "self": "Self-attention", "masked": "Causal self-attention", "cross": "Cross-attention",
        "ffn": "Feed-forward (ReLU)", "norm": "Add & LayerNorm",
        "out": "logits $= h\\,E^{\\top}$", "memory": "memory\n[B, S, d]",
        "n": "× N",
    },
    "ru": {
        "encoder": "Энкодер", "decoder": "Декодер",
        "source": "токены источника\n(PAD-ключи скрыты)", "target": "цели со сдвигом вправо\nBOS, $y_0$, ..., $y_{T-2}$",
        "embed": "$\\sqrt{d}\\,E[x]$ + позиции", "shared": "одна матрица $E$",
        "self": "Self-attention", "masked": "Каузальное self-attention", "cross": "Cross-attention",
        "ffn": "Полносвязный слой (ReLU)", "norm": "Сложение и LayerNorm",
        "out": "логиты $= h\\,E^{\\top}$", "memory": "память\n[B, S, d]",
        "n": "× N",
    },
}

LR_LABELS = {
    "en": {
        "title_paper": "The schedule of the paper (warm-up 4000)",
        "title_ours": "The notebook's run",
        "x": "training step", "y_milli": "learning rate, $\\times 10^{-3}$",
        "base": "$d$ = 512 (base)", "big": "$d$ = 1024 (big)",
        "rise": "$d^{-1/2}\\,s\\,w^{-3/2}$ (warm-up)", "decay": "$d^{-1/2}\\,s^{-1/2}$ (decay)",
        "peak": "peak at $s = w$", "ours": "$d$ = {d}, warm-up {w}",
    },
    "ru": {
        "title_paper": "Расписание из статьи (разогрев 4000)",
        "title_ours": "Запуск в ноутбуке",
        "x": "шаг обучения", "y_milli": "скорость обучения, $\\times 10^{-3}$",
        "base": "$d$ = 512 (base)", "big": "$d$ = 1024 (big)",
        "rise": "$d^{-1/2}\\,s\\,w^{-3/2}$ (разогрев)", "decay": "$d^{-1/2}\\,s^{-1/2}$ (спад)",
        "peak": "пик при $s = w$", "ours": "$d$ = {d}, разогрев {w}",
    },
}

SMOOTHING_LABELS = {
    "en": {
        "title_target": "The target the loss aims at",
        "title_loss": "Loss as the right token gains probability",
        "class": "token", "q": "target probability",
        "hard": "one-hot ($\\varepsilon$ = 0)", "soft": "smoothed ($\\varepsilon$ = 0.1)",
        "p": "probability given to the right token", "loss": "loss",
        "nll": "cross-entropy, one-hot target", "ls": "cross-entropy, smoothed target",
        "best": "minimum at $1 - \\varepsilon + \\varepsilon / V$",
        "rest": "every other token: $\\varepsilon / V$ = {q:g}",
    },
    "ru": {
        "title_target": "Цель, к которой стремится лосс",
        "title_loss": "Лосс и вероятность верного токена",
        "class": "токен", "q": "целевая вероятность",
        "hard": "one-hot ($\\varepsilon$ = 0)", "soft": "сглаженная ($\\varepsilon$ = 0.1)",
        "p": "вероятность верного токена", "loss": "лосс",
        "nll": "кросс-энтропия, one-hot цель", "ls": "кросс-энтропия, сглаженная цель",
        "best": "минимум в $1 - \\varepsilon + \\varepsilon / V$",
        "rest": "каждый другой токен: $\\varepsilon / V$ = {q:g}",
    },
}

# The notebook's training run (docs/notebooks/seq2seq_reverse.py) uses these numbers.
NOTEBOOK_D_MODEL, NOTEBOOK_WARMUP, NOTEBOOK_STEPS = 32, 200, 1500


def _box(ax, x: float, y: float, w: float, h: float, label: str, color: str, ink: str) -> None:
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=color, edgecolor="none", alpha=0.9))
    ax.text(x, y, label, ha="center", va="center", fontsize=10.5, color=ink)


def _arrow(ax, start, end, color: str, **kwargs) -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color=color, lw=1.3,
                                 shrinkA=2, shrinkB=2, **kwargs))


def architecture_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Vaswani et al. 2017, fig. 1, as this chapter builds it: post-norm layers, one shared
    embedding matrix E used three times, cross-attention reading the encoder's memory."""
    t = text(ARCHITECTURE_LABELS, language)
    with style(theme) as p:
        fig, ax = plt.subplots(figsize=(10, 7.4), layout="constrained")
        ax.set(xlim=(0, 10), ylim=(0, 10.1), aspect="equal")
        ax.axis("off")
        dark = "#2E3440"
        attn, ffn, norm, emb = p.series[0], p.series[2], p.border, p.series[1]
        w, h = 3.0, 0.62
        ex, dx = 2.6, 7.2  # encoder and decoder columns

        # Encoder: embedding, then N x [self-attention, add & norm, FFN, add & norm]
        ax.text(ex, 0.35, t["source"], ha="center", va="center", fontsize=10, color=p.ink)
        _box(ax, ex, 1.6, w, h, t["embed"], emb, dark)
        enc_y = [3.0, 3.9, 4.8, 5.7]
        for y, label, color in zip(enc_y, [t["self"], t["norm"], t["ffn"], t["norm"]], [attn, norm, ffn, norm]):
            _box(ax, ex, y, w, h, label, color, dark if color != norm else p.ink)
        ax.add_patch(FancyBboxPatch((ex - w / 2 - 0.25, 2.45), w + 0.5, 3.8, boxstyle="round,pad=0.02",
                                    facecolor="none", edgecolor=p.muted, lw=1.0, ls="--"))
        ax.text(ex - w / 2 - 0.45, 4.35, t["n"], ha="right", va="center", fontsize=12, color=p.ink)
        ax.text(ex, 6.65, t["encoder"], ha="center", va="center", fontsize=13, fontweight="bold", color=p.ink)
        _arrow(ax, (ex, 0.8), (ex, 1.6 - h / 2), p.muted)
        _arrow(ax, (ex, 1.6 + h / 2), (ex, enc_y[0] - h / 2), p.muted)
        for a, b in zip(enc_y, enc_y[1:]):
            _arrow(ax, (ex, a + h / 2), (ex, b - h / 2), p.muted)

        # Decoder: embedding, then N x [causal self-attn, norm, cross-attn, norm, FFN, norm], logits
        ax.text(dx, 0.35, t["target"], ha="center", va="center", fontsize=10, color=p.ink)
        _box(ax, dx, 1.6, w, h, t["embed"], emb, dark)
        dec_y = [3.0, 3.9, 4.8, 5.7, 6.6, 7.5]
        labels = [t["masked"], t["norm"], t["cross"], t["norm"], t["ffn"], t["norm"]]
        colors = [attn, norm, attn, norm, ffn, norm]
        for y, label, color in zip(dec_y, labels, colors):
            _box(ax, dx, y, w, h, label, color, dark if color != norm else p.ink)
        ax.add_patch(FancyBboxPatch((dx - w / 2 - 0.25, 2.45), w + 0.5, 5.6, boxstyle="round,pad=0.02",
                                    facecolor="none", edgecolor=p.muted, lw=1.0, ls="--"))
        ax.text(dx + w / 2 + 0.4, 5.25, t["n"], ha="left", va="center", fontsize=12, color=p.ink)
        ax.text(dx, 8.45, t["decoder"], ha="center", va="center", fontsize=13, fontweight="bold", color=p.ink)
        _box(ax, dx, 9.6, w, h, t["out"], emb, dark)
        _arrow(ax, (dx, 0.8), (dx, 1.6 - h / 2), p.muted)
        _arrow(ax, (dx, 1.6 + h / 2), (dx, dec_y[0] - h / 2), p.muted)
        for a, b in zip(dec_y, dec_y[1:]):
            _arrow(ax, (dx, a + h / 2), (dx, b - h / 2), p.muted)
        _arrow(ax, (dx, dec_y[-1] + h / 2), (dx, 9.6 - h / 2), p.muted)

        # Memory: the encoder's output feeds every decoder layer's cross-attention
        top, mx = enc_y[-1] + h / 2, 4.85
        ax.plot([ex + 0.8, ex + 0.8, mx, mx], [top, 6.45, 6.45, dec_y[2]], color=attn, lw=1.3)
        _arrow(ax, (mx, dec_y[2]), (dx - w / 2, dec_y[2]), attn)
        ax.text(mx, 7.05, t["memory"], ha="center", va="center", fontsize=10, color=p.ink)

        # One embedding matrix, three uses: source embedding, target embedding, output projection
        shared = {"color": emb, "lw": 1.2, "ls": (0, (3, 3))}
        ax.plot([ex + w / 2, dx - w / 2], [1.6, 1.6], **shared)
        ax.plot([dx + w / 2, 9.75, 9.75, dx + w / 2], [1.6, 1.6, 9.6, 9.6], **shared)
        ax.text(mx, 1.85, t["shared"], ha="center", va="bottom", fontsize=10.5, color=emb, fontweight="bold")
    return fig


def lr_schedule_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Left: sec. 5.3's schedule for the base and big models, the two branches of the min,
    and the peak at step = warm-up. Right: the same formula with the notebook's numbers."""
    t = text(LR_LABELS, language)
    steps = np.arange(1, 30_001)
    with style(theme) as p:
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
        warmup = 4000
        milli = 1e3  # the left panel is drawn in units of 10^-3
        rise = milli * 512**-0.5 * steps * warmup**-1.5
        decay = milli * 512**-0.5 * steps**-0.5
        left.plot(steps[:9000], rise[:9000], ls=":", color=p.muted, lw=1.4, label=t["rise"])
        left.plot(steps[200:], decay[200:], ls="--", color=p.muted, lw=1.2, label=t["decay"])
        for d, label, color in [(512, t["base"], p.series[0]), (1024, t["big"], p.series[1])]:
            left.plot(steps, [milli * transformer_lr(int(s), d, warmup) for s in steps], color=color, lw=2.2,
                      label=label)
            left.plot([warmup], [milli * transformer_lr(warmup, d, warmup)], "o", color=color)
        left.annotate(t["peak"], (warmup, milli * transformer_lr(warmup, 512, warmup)), xytext=(9000, 0.95),
                      color=p.ink, fontsize=10, arrowprops={"arrowstyle": "->", "color": p.muted})
        left.set(xlabel=t["x"], ylabel=t["y_milli"], title=t["title_paper"], ylim=(0, 1.2))
        ours = np.arange(1, NOTEBOOK_STEPS + 1)
        right.plot(ours, [transformer_lr(int(s), NOTEBOOK_D_MODEL, NOTEBOOK_WARMUP) for s in ours],
                   color=p.series[2], lw=2.2,
                   label=t["ours"].format(d=NOTEBOOK_D_MODEL, w=NOTEBOOK_WARMUP))
        right.plot([NOTEBOOK_WARMUP], [transformer_lr(NOTEBOOK_WARMUP, NOTEBOOK_D_MODEL, NOTEBOOK_WARMUP)], "o",
                   color=p.series[2])
        right.set(xlabel=t["x"], title=t["title_ours"], ylim=(0, None))
        for ax in (left, right):
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
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
        k = np.arange(vocab)
        hard = (k == right_token).astype(float)
        soft = (1 - eps) * hard + eps / vocab
        left.bar(k - 0.2, hard, width=0.4, color=p.series[1], label=t["hard"])
        left.bar(k + 0.2, soft, width=0.4, color=p.series[0], label=t["soft"])
        left.text(right_token + 3.5, 0.07, t["rest"].format(q=eps / vocab), ha="center", fontsize=10, color=p.ink)
        left.set(xticks=k, xlabel=t["class"], ylabel=t["q"], title=t["title_target"], ylim=(0, 1.15))
        pr = np.linspace(0.05, 0.9999, 2000)
        right.plot(pr, -np.log(pr), color=p.series[1], lw=2.2, label=t["nll"])
        right.plot(pr, smoothed_loss(pr, eps, vocab), color=p.series[0], lw=2.2, label=t["ls"])
        best = 1 - eps + eps / vocab
        right.plot([best], [smoothed_loss(np.array(best), eps, vocab)], "o", color=p.series[0])
        right.axvline(best, color=p.muted, ls="--", lw=1)
        right.annotate(t["best"], (best, smoothed_loss(np.array(best), eps, vocab)), xytext=(0.3, 2.2),
                       color=p.ink, fontsize=10, arrowprops={"arrowstyle": "->", "color": p.muted})
        right.set(xlabel=t["p"], ylabel=t["loss"], title=t["title_loss"], ylim=(0, 3.2), xlim=(0, 1))
        for ax in (left, right):
            ax.grid(alpha=0.6)
            ax.legend(loc="upper right")
    return fig
