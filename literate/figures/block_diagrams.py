"""Diagrams (issue 26): drawn from the code, light and dark, English and Russian.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

Each era's block on its own, at the top of its chapter or at its section: the panels of
the home page's sheet (`literate.figures.era_blocks`: `panel` reads a row of
`literate.numbers.eras.era_table`, `layout` places it, `_draw` draws it), one or two to a
figure, sized for a phone. `FIGURE_ROWS` names the era rows each figure draws.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from literate.figures.era_blocks import (
    CAPTION_LINE,
    LINE_FONT,
    NAME_FONT,
    NAME_H,
    PANEL_W,
    PARALLEL_W,
    SUB_W,
    Panel,
    _draw,
    _wrap,
    layout,
    panel,
)
from literate.figures.style import style, text

# The era rows (`ERA_ROWS` names) each figure draws, one panel each, left to right
FIGURE_ROWS = {
    "block-gpt2": ("GPT-2 small",),
    "block-llama": ("Llama 3 8B",),
    "block-modern-norms": ("OLMo 2 7B (a block)", "Gemma 3 27B"),
    "block-parallel": ("GPT-J 6B (a block)", "GPT-NeoX 20B (a block)"),
    "block-mixtral": ("Mixtral 8x7B",),
    "block-mistral": ("Mistral 7B v0.1",),
    "block-deepseek-v3": ("DeepSeek-V3",),
    "block-gpt-oss": ("gpt-oss-120b",),
}

TITLES = {
    "en": {
        "block-gpt2": "GPT-2's block",
        "block-llama": "Llama 3's block",
        "block-modern-norms": "Norms after the sublayer",
        "block-parallel": "The parallel residual",
        "block-mixtral": "Mixtral's block",
        "block-mistral": "Mistral's block",
        "block-deepseek-v3": "DeepSeek-V3's block",
        "block-gpt-oss": "gpt-oss's block",
    },
    "ru": {
        "block-gpt2": "Блок GPT-2",
        "block-llama": "Блок Llama 3",
        "block-modern-norms": "Нормы после подслоя",
        "block-parallel": "Параллельный блок",
        "block-mixtral": "Блок Mixtral",
        "block-mistral": "Блок Mistral",
        "block-deepseek-v3": "Блок DeepSeek-V3",
        "block-gpt-oss": "Блок gpt-oss",
    },
}

# Phone sizes: no text below MIN_FONT points (the sheet lets a box's text shrink to 8);
# a figure of two panels is 358 pt wide, so at a phone's 358 px a point is a pixel.
MIN_FONT, TITLE_FONT, SIDE, GAP, TOP, BOTTOM = 9.0, 12.0, 4.0, 6.0, 24.0, 4.0


def era_rows(names: tuple[str, ...]) -> list[dict[str, str]]:
    """The rows of `era_table` of those era names, in that order (only those models
    are built); ValueError for a name the table has no row of."""
    from literate.numbers import eras  # the models are built when a figure is drawn

    by_name = {row.name: row for row in eras.ERA_ROWS}
    missing = [name for name in names if name not in by_name]
    if missing:
        raise ValueError(f"no era row {missing}; the rows are {sorted(by_name)}")
    return eras.era_table(tuple(by_name[name] for name in names))


def legible(pan: Panel) -> Panel:
    """The panel with each box's lines broken at spaces so that each fits its box at
    MIN_FONT (`era_blocks.box_font` then sets them at MIN_FONT or larger): the same
    words, in the same order, as `panel` read them."""
    w = PARALLEL_W if pan.topology.startswith("parallel") else SUB_W

    def fit(lines):
        if lines is None:
            return None
        return tuple(piece for line in lines for piece in _wrap(line, MIN_FONT, w - 8))

    return replace(
        pan, attention=fit(pan.attention), cross=fit(pan.cross), ffn=fit(pan.ffn)
    )


def blocks_figure(
    name: str,
    *,
    language: str = "en",
    theme: str = "light",
    rows: list[dict] | None = None,
) -> Figure:
    """The figure `name` of FIGURE_ROWS: one panel of the era sheet per row (its rows of
    `era_table`, or `rows`), side by side, under a short title."""
    title = text(TITLES, language)[name]
    if rows is None:
        rows = era_rows(FIGURE_ROWS[name])
    panels = [legible(panel(row, language)) for row in rows]
    drawings = [layout(pan, language) for pan in panels]
    h = max(height for _, height in drawings)
    cap = NAME_H + CAPTION_LINE * max(len(pan.caption) for pan in panels)
    n = len(panels)
    width = 2 * SIDE + n * PANEL_W + (n - 1) * GAP
    height = TOP + h + cap + BOTTOM
    with style(theme) as p:
        fig = plt.figure(figsize=(width / 72, height / 72))
        for i, (pan, (ops, _)) in enumerate(zip(panels, drawings)):
            x = SIDE + i * (PANEL_W + GAP)
            ax = fig.add_axes(
                (x / width, BOTTOM / height, PANEL_W / width, (h + cap) / height)
            )
            ax.set(xlim=(0, PANEL_W), ylim=(-cap, h))
            ax.axis("off")
            _draw(ax, ops, p)
            ax.text(
                PANEL_W / 2,
                -NAME_H / 2,
                pan.era,
                ha="center",
                va="center",
                fontsize=NAME_FONT,
                fontweight="bold",
                color=p.ink,
            )
            ax.text(
                PANEL_W / 2,
                -NAME_H + 2.0,
                "\n".join(pan.caption),
                ha="center",
                va="top",
                fontsize=LINE_FONT,
                color=p.muted,
                linespacing=1.25,
            )
        fig.text(
            SIDE / width,
            1 - 6 / height,
            title,
            ha="left",
            va="top",
            fontsize=TITLE_FONT,
            fontweight="bold",
            color=p.ink,
        )
    return fig


SPECS: list[tuple] = [
    (
        "block-gpt2",
        partial(blocks_figure, "block-gpt2"),
        "GPT-2 small's block (2019), drawn bottom to top from the input x: the residual "
        "stream a vertical line, each sublayer on a branch that rejoins it at a (+). "
        "Pre-norm: a LayerNorm, then MHA with 12 heads, back into the stream; a "
        "LayerNorm, then the GELU (tanh) feed-forward, back into the stream. Learned "
        "positions.",
    ),
    (
        "block-llama",
        partial(blocks_figure, "block-llama"),
        "Llama 3 8B's block (2024), drawn bottom to top from the input x: the residual "
        "stream a vertical line, each sublayer on a branch that rejoins it at a (+). "
        "Pre-norm: an RMSNorm, then GQA with 32 query and 8 key/value heads, back into "
        "the stream; an RMSNorm, then the SwiGLU feed-forward, back into the stream. "
        "RoPE with base 500K.",
    ),
    (
        "block-modern-norms",
        partial(blocks_figure, "block-modern-norms"),
        "Two blocks side by side, drawn bottom to top from the input x, each sublayer "
        "on a branch that rejoins the residual stream at a (+). Left, OLMo 2 7B (2024), "
        "the block alone: output-norm, MHA with 32 heads and QK-norm, then an RMSNorm "
        "on its output; the SwiGLU feed-forward, then an RMSNorm on its output; RoPE "
        "with base 500K. Right, Gemma 3 27B (2025): the sandwich, an RMSNorm (1 + w) "
        "before and one after each sublayer, GQA with 32 query and 16 key/value heads "
        "and QK-norm, then the GeGLU (tanh) feed-forward; RoPE with bases 10K and 1M "
        "(positions / 8), a window of 1,024 in 52 of 62 layers.",
    ),
    (
        "block-parallel",
        partial(blocks_figure, "block-parallel"),
        "Two parallel blocks side by side, drawn bottom to top from the input x: "
        "attention and the feed-forward side by side, both added to the residual stream "
        "at one (+). Left, GPT-J 6B (2021), the block alone: one LayerNorm shared by "
        "both branches, MHA with 16 heads beside the GELU (tanh) feed-forward; RoPE on "
        "64 of 256 dimensions, base 10K. Right, GPT-NeoX 20B (2022), the block alone: a "
        "LayerNorm on each branch, MHA with 64 heads beside the GELU (tanh) "
        "feed-forward; RoPE on 24 of 96 dimensions, base 10K.",
    ),
    (
        "block-mixtral",
        partial(blocks_figure, "block-mixtral"),
        "Mixtral 8x7B's block (2023), drawn bottom to top from the input x, each "
        "sublayer on a branch that rejoins the residual stream at a (+). Pre-norm: an "
        "RMSNorm, then GQA with 32 query and 8 key/value heads; an RMSNorm, then a "
        "mixture of experts, the top 2 of 8 SwiGLU experts. RoPE with base 1M.",
    ),
    (
        "block-mistral",
        partial(blocks_figure, "block-mistral"),
        "Mistral 7B v0.1's block (2023), drawn bottom to top from the input x, each "
        "sublayer on a branch that rejoins the residual stream at a (+). Pre-norm: an "
        "RMSNorm, then GQA with 32 query and 8 key/value heads; an RMSNorm, then the "
        "SwiGLU feed-forward. RoPE with base 10K, a window of 4,096 in every layer.",
    ),
    (
        "block-deepseek-v3",
        partial(blocks_figure, "block-deepseek-v3"),
        "DeepSeek-V3's block (2024), drawn bottom to top from the input x, each "
        "sublayer on a branch that rejoins the residual stream at a (+). Pre-norm: an "
        "RMSNorm, then latent attention (MLA) with 128 heads, rank 512 and norms on "
        "the latents; an RMSNorm, then a mixture of experts, the top 8 of 256 SwiGLU "
        "experts plus a shared expert, with a plain SwiGLU in layers 1 to 3. RoPE with "
        "base 10K, YaRN x40.",
    ),
    (
        "block-gpt-oss",
        partial(blocks_figure, "block-gpt-oss"),
        "gpt-oss-120b's block (2025), drawn bottom to top from the input x, each "
        "sublayer on a branch that rejoins the residual stream at a (+). Pre-norm: an "
        "RMSNorm, then GQA with 64 query and 8 key/value heads; an RMSNorm, then a "
        "mixture of experts, the top 4 of 128 clamped SwiGLU experts. RoPE with base "
        "150K, YaRN x32; a window of 128 in 18 of 36 layers; attention sinks.",
    ),
]
