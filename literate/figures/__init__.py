"""Every figure of the site, by name. The MkDocs hook draws each one in both themes.

A figure is a function `draw(*, language="en", theme="light") -> Figure`. Add one by
writing the function in the module of its chapter and registering it here, with the
alt text a reader who cannot see it hears: a page shows it as
`![](../figures/<name>-light.svg#only-light)`, the brackets left empty, and the build
writes the alt text in (`with_alt_text`), so there is one description per figure, next
to the code that draws it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from matplotlib.figure import Figure

from literate.figures import (
    attention,
    attention_diagrams,
    bench,
    block_diagrams,
    cache_diagrams,
    checkpoint_diagrams,
    decoding,
    encdec,
    encdec_diagrams,
    eras,
    eras_diagrams,
    gpt2,
    gpt2_diagrams,
    heads,
    heads_diagrams,
    long_context,
    long_diagrams,
    modern,
    modern_diagrams,
    moe,
    moe_diagrams,
    paged_diagrams,
    positions,
    positions_diagrams,
    sampling,
    sampling_diagrams,
    sink_diagrams,
    traffic_diagrams,
    yarn_diagrams,
)
from literate.figures.style import LANGUAGES, THEMES, recolour_dark, svg_bytes


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
            "Six masks as grids of 1 (may attend, filled) and 0 (blocked before softmax), "
            "one row per query, one column per key. Padding: 5 queries, keys 3 and 4 blocked "
            "in every row. Causal: query i sees keys 0 to i, a lower triangle. Both: that "
            "triangle with keys 3 and 4 also blocked. Cross-attention: 4 target queries "
            "against 6 source keys, the padded key 5 blocked. Cached decode: one query at "
            "position 4 against 5 cached keys sees all five with the right offset, and only "
            "key 0 with the offset forgotten.",
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
            "Eight query heads, q0 to q7, each linked to the key/value head it reads, query "
            "head h reading key/value head h // G. MHA: eight key/value heads, one per query "
            "head. GQA: two, q0 to q3 sharing kv0 and q4 to q7 sharing kv1. MQA: one, kv0, "
            "shared by all eight. Under each panel, the key and value heads cached per token "
            "and layer: 8, 2 and 1.",
        ),
        FigureSpec(
            "heads-kv-memory",
            heads.kv_memory_figure,
            "Horizontal bars on a log scale: KV-cache memory per token in fp16 over all "
            "layers, each bar labelled with its size, its cache for a 4,096-token sequence "
            "and its shape. GPT-2 small (MHA) 36 KiB, 144 MiB per sequence; Llama-2-7B (MHA) "
            "512 KiB, 2 GiB; Llama-2-70B (GQA, 64 query and 8 key/value heads) 320 KiB, 1.25 "
            "GiB, less than Llama-2-7B; Falcon-7B (MQA, 71 query heads, 1 key/value head) 8 "
            "KiB, 32 MiB. Dashed outlines show the same models with MHA: 2.5 MiB per token "
            "for Llama-2-70B and 568 KiB for Falcon-7B.",
        ),
        FigureSpec(
            "sampling-distributions",
            sampling.distributions_figure,
            "Grouped bars, each labelled with its value: the probabilities of four tokens "
            "with logits 3, 2, 1, 0 under four policies. Temperature 1: 0.64, 0.24, 0.09, "
            "0.03. Temperature 2, flatter: 0.46, 0.28, 0.17, 0.10. Top-k = 2 keeps the two "
            "largest and renormalises them: 0.73 and 0.27, the other two crossed out. Top-p "
            "= 0.9 keeps the three largest: 0.67, 0.24, 0.09, the last crossed out.",
        ),
        FigureSpec(
            "sampling-nucleus",
            sampling.nucleus_figure,
            "The same ten logits at two temperatures, their probabilities sorted as bars, "
            "the cumulative mass as a line and top-p = 0.9 as a dashed line; kept tokens "
            "coloured, removed ones grey. At T = 0.7 the nucleus holds 4 of the 10 tokens: "
            "the mass passes 0.9 at the fourth. At T = 1.5 the distribution is flatter and "
            "the nucleus holds 6: the mass passes 0.9 only at the sixth.",
        ),
        FigureSpec(
            "gpt2-prenorm-gradients",
            gpt2.gradient_figure,
            "Gradient norms of each FFN output weight at initialisation, pre-norm against "
            "post-norm, in two rows: Xavier's initialisation with unit-variance inputs "
            "(post-norm's top gradient stays level as the stack deepens, pre-norm's falls) "
            "and GPT-2's own initialisation at its embeddings' scale (neither depends on "
            "depth; pre-norm's gradients sit far above post-norm's; a dotted unit-input "
            "control lies on post-norm's).",
        ),
        FigureSpec(
            "gpt2-tiny-lm-loss",
            gpt2.loss_figure,
            "Training loss per step of the one-block tiny GPT-2 learning a repeating "
            "sequence of six tokens, on a log scale: it starts near the dotted line ln 6, a "
            "uniform guess over six tokens, falls below the dashed target of 0.02 nats per "
            "token and keeps falling, flattening out far below it.",
        ),
        FigureSpec(
            "encdec-architecture",
            encdec.architecture_figure,
            "The 2017 encoder-decoder: an encoder stack of N post-norm layers (self-attention, "
            "add & LayerNorm, ReLU feed-forward, add & LayerNorm) and a decoder stack of N "
            "layers (causal self-attention, cross-attention, feed-forward, each followed by add "
            "& LayerNorm), with a residual connection around every sublayer; cross-attention "
            "takes its queries from the decoder and its keys and values from the encoder's "
            "output; one embedding matrix E embeds the source and the shifted targets and gives "
            "the logits h E^T.",
        ),
        FigureSpec(
            "encdec-lr-schedule",
            encdec.lr_schedule_figure,
            "The learning rate of Vaswani et al. 2017, sec. 5.3: a linear rise to a peak at "
            "the end of the warm-up, then decay as one over the square root of the step, for "
            "two model widths; and the same formula with the notebook's width and warm-up.",
        ),
        FigureSpec(
            "encdec-label-smoothing",
            encdec.label_smoothing_figure,
            "Left: target probabilities over 10 tokens: one-hot puts 1 on the right token; "
            "smoothed with epsilon = 0.1 puts 0.91 on it and 0.01 on each other token. "
            "Right: the loss against the probability the model gives the right token. The "
            "one-hot cross-entropy falls to 0 as that probability goes to 1; the smoothed "
            "one crosses it near 0.1 and lies above it from there, has its minimum at 0.91, "
            "marked by a dashed line, and rises again towards 1.",
        ),
        FigureSpec(
            "modern-residual-topologies",
            modern.topology_figure,
            "Five residual functions as block diagrams, each a vertical residual "
            "stream from the input x whose sublayer branch rejoins it at a (+): "
            "post-norm LN(x + F(x)) (the 2017 Transformer), the LayerNorm on the "
            "stream after the join; pre-norm x + F(N(x)) (GPT-2, Llama, Qwen3), the "
            "norm on the branch before the sublayer; sandwich x + N2(F(N1(x))) (Gemma "
            "3), a norm before and one after the sublayer on the branch; output-norm x "
            "+ N(F(x)) (OLMo 2), the norm on the branch after the sublayer; parallel x "
            "+ Attn(N1 x) + FFN(N2 x) (GPT-NeoX; GPT-J and Cohere share one norm, N1 = "
            "N2), an attention branch and a feed-forward branch joining the stream at "
            "one (+).",
        ),
        FigureSpec(
            "modern-swiglu-gate",
            modern.swiglu_gate_figure,
            "Left: SiLU(a) = a sigmoid(a) beside ReLU and GELU for a from -4 to 4; SiLU dips "
            "below zero for negative a, to a marked minimum of -0.278 at a = -1.278, and "
            "approaches ReLU as |a| grows. Right: SwiGLU's gated product SiLU(a) b as a "
            "heatmap over the gate a and the value b, both from -4 to 4, blue negative, red "
            "positive, pale at zero: near zero over the whole left half (the gate shut) and "
            "growing like a b on the right (the gate open, b passing).",
        ),
        FigureSpec(
            "modern-qk-norm-scores",
            modern.qk_norm_figure,
            "One causal RoPE attention layer (4 query heads over 2 key/value heads, "
            "d_head = 16, inputs of RMS 1) with its query and key weights multiplied "
            "by s from 1/2 to 16. Left, on log scales: without QK-norm the largest "
            "|score| grows as s squared, far past the dashed line sqrt(d_head) = 4; "
            "with QK-norm (an RMSNorm of unit gain on each head's q and k) it stays "
            "level below that bound. Right: the mean entropy of the attention rows "
            "falls towards 0 without QK-norm (each row on one key) and stays level "
            "with it, below the dashed entropy of uniform rows.",
        ),
        FigureSpec(
            "kv-cache-step-cost",
            decoding.step_cost_figure,
            "One decoding step of a tiny two-layer Llama at positions 1 to 512, counted "
            "while it runs, on log-log axes. Left: the bytes the step writes. With a "
            "preallocated cache both its total and what goes into the cache (one row "
            "per layer) stay level; with a cache grown by torch.cat the bytes written "
            "into the cache grow in proportion to the position (every stored row is "
            "copied at every step) and come to dominate the step; with no cache the total grows fastest, the "
            "whole prefix recomputed. Right: the token rows each layer projects: one "
            "for either cache, t for no cache.",
        ),
        FigureSpec(
            "moe-tokens-per-expert",
            moe.tokens_per_expert_figure,
            "A tiny mixture-of-experts language model (8 experts, top-2, one block) trained "
            "twice for 100 steps on the same data. Left and middle: each expert's share of "
            "the routed (token, choice) pairs per step as eight stacked bands, dashed lines "
            "marking an even load of 1/8 each. Without the balancing loss (left) two experts "
            "take most pairs within a few steps, others returning later; over the last 30 "
            "steps the busiest gets more than 2.5 times the mean share, one almost nothing. "
            "With the balancing loss, coefficient 0.05 (middle), the bands jitter around the "
            "dashed lines, the busiest within 1.2 times the mean. Right: both runs' "
            "next-token loss, on top of each other, falls below that of a model knowing only "
            "the word frequencies, towards that of one knowing the topic.",
        ),
        FigureSpec(
            "kv-cache-memory",
            long_context.kv_memory_figure,
            "KV-cache memory in GiB against context length from 128 to 1M tokens, both on "
            "log scales, in bfloat16 at batch 1, one line per model: Llama 3 8B and 70B "
            "grow in proportion to the context; Mistral 7B v0.1 stops growing at its "
            "4,096-token window; Gemma 3 27B and gpt-oss-120b bend where their local "
            "layers stop (1,024 and 128 tokens) and then grow with their global layers "
            "only; DeepSeek-V3's latent cache grows in proportion, below Llama 3 8B's. "
            "Hollow markers show where the windowed layers stop growing.",
        ),
        FigureSpec(
            "eras-params-cache",
            eras.params_cache_figure,
            "The published models on log-log axes: total parameters, from GPT-2 small's "
            "124 million to DeepSeek-V3's 671 billion, against KV-cache bytes per token in "
            "bfloat16 within every window, from GPT-2 small's 36 KiB to Command R v01's "
            "1,280 KiB (multi-head attention in 40 layers of width 8,192). Colour marks the cache: full MHA or GQA, windowed layers (Mistral "
            "7B, Gemma 3 27B, gpt-oss-120b) or latent (DeepSeek-V3). Mixtures of experts "
            "(Mixtral 8x7B, Qwen3-30B-A3B, gpt-oss-120b, DeepSeek-V3) are triangles, filled "
            "at the total, joined by a line to a hollow one at the active count; dense "
            "models are circles. Mixtral caches as much per token as Llama 3 8B and Mistral "
            "7B, the other three mixtures less; Llama 3 70B caches less than Llama 2 7B, "
            "Gemma 3 27B nearly as much.",
        ),
        *(FigureSpec(*spec) for spec in block_diagrams.ERA_SPECS),
        *(FigureSpec(*spec) for spec in bench.SPECS),  # one chart per group of rows
    ]
}
# The diagrams, each module's own list (issue 26)
for _module in (
    attention_diagrams,
    block_diagrams,
    cache_diagrams,
    paged_diagrams,
    moe_diagrams,
    long_diagrams,
    positions_diagrams,
    heads_diagrams,
    encdec_diagrams,
    gpt2_diagrams,
    sampling_diagrams,
    modern_diagrams,
    eras_diagrams,
    checkpoint_diagrams,
    yarn_diagrams,
    traffic_diagrams,
    sink_diagrams,
):
    for _name, _draw, _alt in _module.SPECS:
        if _name in FIGURES:
            raise ValueError(f"figure {_name!r} is registered twice")
        FIGURES[_name] = FigureSpec(_name, _draw, _alt)


# Figures drawn again for the dark theme; every other one's dark SVG is its light one
# recoloured (`recolour_dark`: half the drawing of a build), which the tests prove equal
# to drawing it dark (tests/test_figures.py).
DRAWN_DARK = {
    "attention-masks": "an image (imshow) of palette colours",
    "modern-swiglu-gate": "an image (imshow) of a colormap made from palette colours",
    "moe-tokens-per-expert": "expert colours fixed across themes, one is the light blue",
}


def render(name: str, *, language: str = "en", theme: str = "light") -> bytes:
    """The SVG bytes of one figure."""
    if name not in FIGURES:
        raise ValueError(f"name must be one of {sorted(FIGURES)}, got {name!r}")
    if theme == "dark" and name not in DRAWN_DARK:
        return recolour_dark(render(name, language=language, theme="light"))
    return svg_bytes(FIGURES[name].draw(language=language, theme=theme))


def draw_files(jobs: list[tuple[str, str, Path]], *, language: str = "en") -> None:
    """Draw each `(name, theme, path)` of `jobs` into its path, each file whole or not at
    all; a dark variant recoloured from a light one drawn here reuses its bytes."""
    light: dict[str, bytes] = {}
    for name, theme, path in jobs:
        if theme == "dark" and name in light and name not in DRAWN_DARK:
            data = recolour_dark(light[name])
        else:
            data = render(name, language=language, theme=theme)
        if theme == "light":
            light[name] = data
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)


# A generated figure shown in Markdown, `![alt](<path>figures/<name>-<theme>.svg...)`, or
# code (a span or a fenced block, from its backticks to the same number again), where it
# is left alone.
FIGURE_IMAGE = re.compile(
    r"(?P<code>`+)[\s\S]*?(?<!`)(?P=code)(?!`)"
    r"|!\[(?P<alt>[^\]]*)\]\((?P<src>(?:[^()\s]*/)?figures/(?P<name>[\w-]+?)-(?:light|dark)\.svg"
    r"(?:#[\w-]*)?)\)"
)


def with_alt_text(markdown: str, where: str = "the page") -> str:
    """`markdown` with each generated figure's alt text written into its empty brackets:
    `FIGURES[name].alt`. A figure whose brackets hold text already (a second
    description, which would drift from the first), or whose file names no figure, is
    refused with a ValueError naming `where`."""

    def fill(match: re.Match[str]) -> str:
        if match["code"]:
            return match[0]
        name = match["name"]
        if name not in FIGURES:
            raise ValueError(
                f"{where}: {match['src']!r} is no figure; the figures are {sorted(FIGURES)}"
            )
        if match["alt"].strip():
            raise ValueError(
                f"{where}: figure {name!r} has alt text in the Markdown "
                f"({match['alt']!r}): leave its brackets empty, the build writes "
                f"in FIGURES[{name!r}].alt"
            )
        return f"![{FIGURES[name].alt}]({match['src']})"

    return FIGURE_IMAGE.sub(fill, markdown)


__all__ = [
    "DRAWN_DARK",
    "FIGURES",
    "FIGURE_IMAGE",
    "FigureSpec",
    "LANGUAGES",
    "THEMES",
    "draw_files",
    "render",
    "with_alt_text",
]
