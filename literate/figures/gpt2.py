"""Figures of chapter 5: why GPT-2 normalises before each sublayer (gradients at
initialisation, Xiong et al. 2020, sec. 3), and the tiny language model's loss curve.

Both figures are measurements, made when the figure is drawn, from fixed seeds; the
measuring functions are also what the chapter's claims call.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from torch import Tensor, nn

from literate.blocks import PreNormBlock, gpt2_block
from literate.checks import choice, positive_int
from literate.figures.style import style, text
from literate.golden import reference
from literate.models import train_period_lm
from literate.norms import LayerNorm

NORM_POSITIONS = ("pre", "post")
STUDY_LAYERS = 12
STUDY_DEPTHS = (1, 2, 3, 6, 12, 24)

GRADIENT_LABELS = {
    "en": {
        "title_layers": "12 layers: gradient of each FFN output weight",
        "title_depth": "The top layer's gradient against depth",
        "layer": "Layer (1 = next to the embeddings)",
        "depth": "Number of layers $L$",
        "y": "$\\|\\partial \\mathcal{L} / \\partial W_2\\|_F$ at initialisation",
        "pre": "pre-norm: $x + F(\\mathrm{LN}(x))$",
        "post": "post-norm: $\\mathrm{LN}(x + F(x))$",
        "slope": "slope of $1/\\sqrt{L}$",
    },
    "ru": {
        "title_layers": "12 слоёв: градиент выходной матрицы FFN",
        "title_depth": "Градиент верхнего слоя и глубина",
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


@contextmanager
def one_thread() -> Iterator[None]:
    """Run tiny tensor work on one CPU thread (faster for tiny matrices, and the same
    reduction order on every machine), then restore the thread count."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class PostNormCausalBlock(nn.Module):
    """For the comparison only: the 2017 placement, x = N(x + F(x)) (Vaswani et al. 2017,
    sec. 3.1), wrapped around the very same causal attention, FFN and norms as a
    `PreNormBlock`, so that the one thing that differs is where the norm sits."""

    def __init__(self, block: PreNormBlock) -> None:
        super().__init__()
        self.block = block

    def forward(self, x: Tensor) -> Tensor:
        b = self.block
        x = b.norm1(x + b.attn(x, causal=True))
        return b.norm2(x + b.ffn(x))


@dataclass(frozen=True)
class InitStudy:
    """One stack at initialisation, bottom layer first."""

    ffn_grad: list[float]  # ||dL/dW_2||_F of each layer's FFN output weight (down_proj)
    stream_rms: list[float]  # RMS of the residual stream after each layer


def init_study(norm_position: str, n_layers: int, *, seed: int = 0, d_model: int = 64, n_heads: int = 4,
               batch: int = 8, length: int = 16, vocab: int = 64) -> InitStudy:
    """Xiong et al. (2020, sec. 3)'s measurement: a stack of `n_layers` GPT-2 blocks at
    initialisation, arranged pre-norm (with a final LayerNorm, as in GPT-2) or post-norm
    (whose output is already normalised), reads unit-variance inputs; a fixed random
    readout and cross-entropy against random targets give a loss; we record the gradient
    norm of every FFN output weight and the residual stream's RMS after every layer.

    Both arrangements share the same weights for a given seed: Xavier-normal matrices
    (Glorot & Bengio 2010; the Gaussian, variance ~ 1/d scaling of Xiong et al.'s analysis),
    zero biases, LayerNorm gain 1 and bias 0. float32, one thread, a few hundred ms.
    """
    norm_position = choice("norm_position", norm_position, NORM_POSITIONS)
    n_layers = positive_int("n_layers", n_layers)
    with one_thread():
        g = torch.Generator().manual_seed(seed)
        blocks = [gpt2_block(d_model, n_heads, dropout=0.0) for _ in range(n_layers)]
        with torch.no_grad():
            for block in blocks:
                for module in block.modules():
                    if isinstance(module, nn.Linear):
                        module.weight.copy_(torch.randn(module.weight.shape, generator=g)
                                            * math.sqrt(2.0 / sum(module.weight.shape)))  # Xavier normal
                        module.bias.zero_()
        readout = torch.randn(vocab, d_model, generator=g) * math.sqrt(2.0 / (vocab + d_model))  # [V, d]
        x = torch.randn(batch, length, d_model, generator=g)  # [B, T, d], unit variance
        targets = torch.randint(0, vocab, (batch, length), generator=g)  # [B, T]
        layers = blocks if norm_position == "pre" else [PostNormCausalBlock(b) for b in blocks]
        rms = []
        for layer in layers:
            x = layer(x)
            rms.append(float(x.detach().pow(2).mean().sqrt()))
        if norm_position == "pre":
            x = LayerNorm(d_model)(x)  # GPT-2's final norm (Radford et al. 2019, sec. 2.3)
        logits = x @ readout.T  # [B, T, V]
        loss = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))  # [B * T, V] vs [B * T]
        grads = torch.autograd.grad(loss, [b.ffn.down_proj.weight for b in blocks])
    return InitStudy(ffn_grad=[float(gr.norm()) for gr in grads], stream_rms=rms)


@lru_cache(maxsize=1)
def gradient_study() -> dict[str, dict[int, InitStudy]]:
    """init_study for both arrangements at every depth in STUDY_DEPTHS (seed 0), cached:
    the figure is drawn twice per build (light and dark) from one measurement."""
    return {pos: {depth: init_study(pos, depth) for depth in STUDY_DEPTHS} for pos in NORM_POSITIONS}


def gradient_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Left: per-layer FFN gradient norms in a 12-layer stack, pre versus post. Right: the
    top layer's gradient as the stack deepens: post-norm's stays put, pre-norm's falls
    like 1/sqrt(L) (Xiong et al. 2020, theorem 1)."""
    t = text(GRADIENT_LABELS, language)
    study = gradient_study()
    with style(theme) as p:
        fig, (left, right) = plt.subplots(1, 2, figsize=(11.5, 4.4), layout="constrained")
        layers = range(1, STUDY_LAYERS + 1)
        colours = {"pre": p.series[0], "post": p.series[1]}
        for pos in NORM_POSITIONS:
            left.plot(layers, study[pos][STUDY_LAYERS].ffn_grad, "o-", color=colours[pos], label=t[pos])
            top = [study[pos][depth].ffn_grad[-1] for depth in STUDY_DEPTHS]
            right.plot(STUDY_DEPTHS, top, "o-", color=colours[pos], label=t[pos])
        anchor = study["pre"][STUDY_LAYERS].ffn_grad[-1] * math.sqrt(STUDY_LAYERS)  # through pre-norm at L = 12
        right.plot(STUDY_DEPTHS, [anchor / math.sqrt(d) for d in STUDY_DEPTHS], "--", color=p.muted,
                   lw=1.2, label=t["slope"])
        left.set(xlabel=t["layer"], ylabel=t["y"], title=t["title_layers"], ylim=(0, None))
        left.set_xticks(list(layers))
        right.set(xscale="log", yscale="log", xlabel=t["depth"], title=t["title_depth"])
        right.set_xticks(list(STUDY_DEPTHS), [str(d) for d in STUDY_DEPTHS])
        right.minorticks_off()
        ticks = [0.1, 0.2, 0.3, 0.5, 0.7]
        right.set_yticks(ticks, [str(v) for v in ticks])
        right.set_ylim(0.07, 1.0)
        for ax in (left, right):
            ax.grid(alpha=0.6)
            for spine in ("top", "right"):
                ax.spines[spine].set_visible(False)
        left.legend(loc="lower left")
        right.legend(loc="lower left")
    return fig


@lru_cache(maxsize=1)
def tiny_lm_losses() -> tuple[float, ...]:
    """The loss history of the chapter's tiny LM (`train_period_lm` with the source
    notebook's settings), on one thread."""
    with one_thread():
        _, losses = train_period_lm(reference()["tiny_lm"])
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
