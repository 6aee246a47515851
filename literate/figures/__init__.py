"""Every figure of the site, by name. The MkDocs hook draws each one in both themes.

A figure is a function `draw(*, language="en", theme="light") -> Figure`. Add one by
writing the function in the module of its chapter and registering it here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from matplotlib.figure import Figure

from literate.figures import attention
from literate.figures import positions
from literate.figures import heads
from literate.figures import sampling
from literate.figures import gpt2
from literate.figures import encdec
from literate.figures.style import LANGUAGES, THEMES, svg_bytes


@dataclass(frozen=True)
class FigureSpec:
    name: str
    draw: Callable[..., Figure]
    alt: str  # what the figure shows, for readers who cannot see it


FIGURES: dict[str, FigureSpec] = {
    spec.name: spec
    for spec in [
        FigureSpec(
            "attention-scaling",
            attention.scaling_figure,
            "Unscaled score variance grows like d_k while the scaled variance stays near 1; "
            "unscaled softmax rows concentrate on one key as d_k grows.",
        ),
        FigureSpec(
            "attention-masks",
            attention.masks_figure,
            "Six boolean masks: padding, causal, both, cross-attention with a padded source, "
            "cached decode with the right query offset, and with the offset forgotten.",
        ),
        FigureSpec(
            "positions-sinusoid",
            positions.sinusoid_figure,
            "Sinusoidal table of width 8 over positions 0 to 80: coordinates 0 and 1 oscillate "
            "fast, coordinates 4 and 5 change slowly.",
        ),
        FigureSpec(
            "positions-rope-relative",
            positions.rope_relative_figure,
            "The score of one query/key pair against their offset, from three starting positions: "
            "with the sinusoidal table added the three curves differ; with RoPE they coincide.",
        ),
        FigureSpec(
            "heads-grouping",
            heads.grouping_figure,
            "Eight query heads linked to the key/value head each one reads: eight for MHA, "
            "two shared by groups of four for GQA, one shared by all for MQA.",
        ),
        FigureSpec(
            "heads-kv-memory",
            heads.kv_memory_figure,
            "KV-cache bytes per token in fp16 for GPT-2 small, Llama-2-7B, Llama-2-70B and "
            "Falcon-7B, with dashed outlines for what Llama-2-70B and Falcon-7B would need with MHA.",
        ),
        FigureSpec(
            "sampling-distributions",
            sampling.distributions_figure,
            "The logits 3, 2, 1, 0 under four policies: at T=1 about 0.64, 0.24, 0.09, 0.03; "
            "T=2 flattens them; top-k=2 keeps tokens 0 and 1 (0.73, 0.27); top-p=0.9 keeps "
            "tokens 0 to 2 (0.67, 0.24, 0.09).",
        ),
        FigureSpec(
            "sampling-nucleus",
            sampling.nucleus_figure,
            "Ten sorted probabilities with their cumulative mass and the line p = 0.9: at "
            "temperature 0.7 the nucleus holds 4 tokens, at temperature 1.5 it holds 6.",
        ),
        FigureSpec(
            "gpt2-prenorm-gradients",
            gpt2.gradient_figure,
            "Gradient norms of each FFN output weight at initialisation. In a 12-layer stack, "
            "post-norm's are about 0.5 to 0.7 at every layer while pre-norm's fall from 0.53 at "
            "the bottom to 0.20 at the top; as the stack deepens from 1 to 24 layers the top "
            "layer's gradient stays near 0.5 to 0.6 with post-norm and falls to 0.12 with pre-norm.",
        ),
        FigureSpec(
            "gpt2-tiny-lm-loss",
            gpt2.loss_figure,
            "Training loss of the one-block tiny GPT-2 on a log scale: it starts near ln 6 = 1.79 "
            "and falls below the 0.02 target, ending near 1e-4 after 121 steps.",
        ),
        FigureSpec(
            "encdec-architecture",
            encdec.architecture_figure,
            "The 2017 encoder-decoder: an encoder stack of N post-norm layers (self-attention, add & "
            "LayerNorm, ReLU feed-forward, add & LayerNorm) and a decoder stack of N layers (causal "
            "self-attention, cross-attention reading the encoder's memory, feed-forward, each followed by "
            "add & LayerNorm); one embedding matrix E embeds the source and the shifted targets and gives "
            "the logits h E^T.",
        ),
        FigureSpec(
            "encdec-lr-schedule",
            encdec.lr_schedule_figure,
            "The learning rate of Vaswani et al. 2017, sec. 5.3: a linear rise to a peak at step 4000 "
            "(7.0e-4 for d = 512, 4.9e-4 for d = 1024), then decay as one over the square root of the "
            "step; and the same formula with the notebook's d and warm-up.",
        ),
        FigureSpec(
            "encdec-label-smoothing",
            encdec.label_smoothing_figure,
            "Left: a one-hot target over 10 tokens and the smoothed one (0.91 on the right token, 0.01 "
            "on each other). Right: the one-hot cross-entropy falls to 0 as the right token's "
            "probability goes to 1; the smoothed one has its minimum at 0.91.",
        ),
    ]
}


def render(name: str, *, language: str = "en", theme: str = "light") -> bytes:
    """The SVG bytes of one figure."""
    if name not in FIGURES:
        raise ValueError(f"name must be one of {sorted(FIGURES)}, got {name!r}")
    return svg_bytes(FIGURES[name].draw(language=language, theme=theme))


__all__ = ["FIGURES", "FigureSpec", "LANGUAGES", "THEMES", "render"]
