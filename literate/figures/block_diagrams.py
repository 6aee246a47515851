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
GAP_Y, SIDE_FONT = 12.0, 8.5  # between two lines of panels; the encoder's label

# The whole era table in figures of ERA_PANELS eras, in the table's order, two by two
# (chapter 11 and the home page), every text at ERA_FONT points or more
ERA_FIGURES = ("eras-blocks-1", "eras-blocks-2", "eras-blocks-3")
ERA_PANELS, ERA_FONT = 4, 9.5
ERA_TITLES = {"en": "The eras' blocks, {years}", "ru": "Блоки эпох, {years}"}


def era_rows(names: tuple[str, ...]) -> list[dict[str, str]]:
    """The rows of `era_table` of those era names, in that order (only those models
    are built); ValueError for a name the table has no row of."""
    from literate.numbers import eras  # the models are built when a figure is drawn

    by_name = {row.name: row for row in eras.ERA_ROWS}
    missing = [name for name in names if name not in by_name]
    if missing:
        raise ValueError(f"no era row {missing}; the rows are {sorted(by_name)}")
    return eras.era_table(tuple(by_name[name] for name in names))


def legible(pan: Panel, font: float = MIN_FONT) -> Panel:
    """The panel with each box's lines broken at spaces so that each fits its box at
    `font` (`era_blocks.box_font` then sets them at `font` or larger): the same
    words, in the same order, as `panel` read them."""
    w = PARALLEL_W if pan.topology.startswith("parallel") else SUB_W

    def fit(lines):
        if lines is None:
            return None
        return tuple(piece for line in lines for piece in _wrap(line, font, w - 8))

    return replace(
        pan, attention=fit(pan.attention), cross=fit(pan.cross), ffn=fit(pan.ffn)
    )


def blocks_figure(
    name: str,
    *,
    language: str = "en",
    theme: str = "light",
    rows: list[dict] | None = None,
    columns: int | None = None,
    title: str | None = None,
    font: float = MIN_FONT,
) -> Figure:
    """The figure `name` of FIGURE_ROWS: one panel of the era sheet per row (its rows of
    `era_table`, or `rows`), `columns` to a line (all of them side by side if None),
    under a short title (TITLES' of `name`, or `title`); the boxes' text at `font` or
    larger, and so the encoder's label."""
    if title is None:
        title = text(TITLES, language)[name]
    if rows is None:
        rows = era_rows(FIGURE_ROWS[name])
    panels = [legible(panel(row, language), font) for row in rows]
    drawings = [layout(pan, language) for pan in panels]
    columns = columns or len(panels)
    lines = [
        range(i, min(i + columns, len(panels))) for i in range(0, len(panels), columns)
    ]
    heights = [max(drawings[i][1] for i in line) for line in lines]
    caps = [
        NAME_H + CAPTION_LINE * max(len(panels[i].caption) for i in line)
        for line in lines
    ]
    n = min(columns, len(panels))
    width = 2 * SIDE + n * PANEL_W + (n - 1) * GAP
    height = TOP + sum(heights) + sum(caps) + GAP_Y * (len(lines) - 1) + BOTTOM
    with style(theme) as p:
        fig = plt.figure(figsize=(width / 72, height / 72))
        bottoms = [BOTTOM]  # each line's bottom, the last line's first
        for h, cap in zip(heights[:0:-1], caps[:0:-1]):
            bottoms.append(bottoms[-1] + h + cap + GAP_Y)
        for line, h, cap, y in zip(lines, heights, caps, bottoms[::-1]):
            for c, i in enumerate(line):
                pan, (ops, _) = panels[i], drawings[i]
                x = SIDE + c * (PANEL_W + GAP)
                ax = fig.add_axes(
                    (x / width, y / height, PANEL_W / width, (h + cap) / height)
                )
                ax.set(xlim=(0, PANEL_W), ylim=(-cap, h))
                ax.axis("off")
                _draw(ax, ops, p, side_font=max(SIDE_FONT, font))
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


def era_group(name: str) -> tuple:
    """The rows of `ERA_ROWS` the figure `name` of ERA_FIGURES draws: the table's
    rows, in its order, ERA_PANELS to a figure."""
    from literate.numbers import eras

    i = ERA_FIGURES.index(name) * ERA_PANELS
    return eras.ERA_ROWS[i : i + ERA_PANELS]


def eras_figure(
    name: str,
    *,
    language: str = "en",
    theme: str = "light",
    rows: list[dict] | None = None,
) -> Figure:
    """The figure `name` of ERA_FIGURES: its ERA_PANELS rows of the era table (or
    `rows`) two by two, each box's text at ERA_FONT or larger, titled with the first
    and the last year it draws."""
    from literate.numbers import eras

    if rows is None:
        rows = eras.era_table(era_group(name))
    years = sorted({row["year"] for row in rows})
    span = years[0] if len(years) == 1 else f"{years[0]}–{years[-1]}"
    title = text(ERA_TITLES, language).format(years=span)
    return blocks_figure(
        name,
        language=language,
        theme=theme,
        rows=rows,
        columns=2,
        title=title,
        font=ERA_FONT,
    )


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

# The era table's blocks, four to a figure in its order (chapter 11 and the home page);
# registered in place of the sheet of all twelve, too small to read on a phone
ERA_SPECS: list[tuple] = [
    (
        "eras-blocks-1",
        partial(eras_figure, "eras-blocks-1"),
        "The first four rows of the era table, two by two, each block drawn bottom to "
        "top from the input x: the residual stream a vertical line, each sublayer on a "
        "branch rejoining it at a (+); norms orange, attention blue, feed-forward green. "
        "Transformer base (2017), its decoder layer: post-norm, a LayerNorm on the "
        "stream after each of its three joins, MHA with 8 heads, cross-attention with 8 "
        "heads reading the encoder, the ReLU feed-forward; sinusoidal positions. GPT-2 "
        "small (2019): pre-norm, a LayerNorm before MHA with 12 heads and before the "
        "GELU (tanh) feed-forward; learned positions. GPT-J 6B (2021), the block alone: "
        "parallel, one LayerNorm shared by MHA with 16 heads and the GELU (tanh) "
        "feed-forward, both into one (+); RoPE on 64/256 dims, base 10K. GPT-NeoX 20B "
        "(2022), the block alone: parallel, a LayerNorm on each branch, MHA with 64 "
        "heads; RoPE on 24/96 dims, base 10K.",
    ),
    (
        "eras-blocks-2",
        partial(eras_figure, "eras-blocks-2"),
        "The next four rows of the era table, two by two, each block drawn bottom to "
        "top from the input x, each sublayer on a branch rejoining the residual stream "
        "at a (+); norms orange, attention blue, feed-forward green. Mistral 7B v0.1 "
        "(2023): pre-norm, an RMSNorm before GQA with 32 query and 8 key/value heads "
        "and before the SwiGLU feed-forward; RoPE base 10K, a window of 4,096. Mixtral "
        "8x7B (2023): the same but a mixture of experts, the top 2 of 8 SwiGLU experts; "
        "RoPE base 1M. Llama 3 8B (2024): pre-norm, GQA with 32 query and 8 key/value "
        "heads, SwiGLU; RoPE base 500K. OLMo 2 7B (2024), the block alone: an RMSNorm "
        "after each sublayer, MHA with 32 heads and QK-norm, SwiGLU; RoPE base 500K.",
    ),
    (
        "eras-blocks-3",
        partial(eras_figure, "eras-blocks-3"),
        "The last four rows of the era table, two by two, each block drawn bottom to "
        "top from the input x, each sublayer on a branch rejoining the residual stream "
        "at a (+); norms orange, attention blue, feed-forward green. DeepSeek-V3 "
        "(2024): pre-norm RMSNorms, latent attention (MLA) with 128 heads, rank 512 and "
        "norms on the latents; a mixture of experts, the top 8 of 256 SwiGLU experts "
        "plus a shared expert, plain SwiGLU in layers 1 to 3; RoPE base 10K, YaRN x40. "
        "Gemma 3 27B (2025): the sandwich, an RMSNorm (1 + w) before and after each "
        "sublayer, GQA with 32 query and 16 key/value heads and QK-norm, GeGLU (tanh); "
        "RoPE bases 10K and 1M (positions / 8), a window of 1,024 in 52/62 layers. "
        "Qwen3 8B (2025), the block alone: pre-norm, GQA with 32 query and 8 key/value "
        "heads and QK-norm, SwiGLU; RoPE base 1M. gpt-oss-120b (2025): pre-norm, GQA "
        "with 64 query and 8 key/value heads; a mixture of experts, the top 4 of 128 "
        "clamped SwiGLU experts; RoPE base 150K, YaRN x32; a window of 128 in 18/36 "
        "layers; attention sinks.",
    ),
]
