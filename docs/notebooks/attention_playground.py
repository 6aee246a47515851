# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Attention playground
#
# A notebook to change and re-run: it is executed when the site is built (a failing cell
# fails the build), and you can download it with the button at the top of the page. It
# uses the functions of [chapter 1](../../attention/scaled-dot-product/).
#
# **What it needs to run on its own**: torch, matplotlib, and the code of chapters 1-3.
# The site is built with this site's `literate` package installed, and the notebook
# imports the code from it. Without the package, download chapters 1-3's code as one
# file, [attention.py](../../downloads/attention.py), into the directory of the
# notebook: the first cell then imports the same functions from that file.
#
# We make eight tokens whose keys and queries are built so that token $i$ "looks for"
# token $i - 2$, then watch what the causal mask, padding and the $1/\sqrt{d_k}$ scale
# do to the weights.

# %%
import math
import os
from types import SimpleNamespace

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from IPython.display import display

try:  # the site's package, installed
    from literate.parts.attention import (
        causal_allowed,
        padding_allowed,
        scaled_dot_product_attention,
    )
except ImportError:  # or chapters 1-3's one file, next to this notebook
    try:
        from attention import (
            causal_allowed,
            padding_allowed,
            scaled_dot_product_attention,
        )
    except ImportError as error:
        raise ImportError(
            "this notebook needs the code of chapters 1-3: install the site's literate "
            "package, or download attention.py (chapter 1 links it) into the "
            "notebook's directory") from error

# The site's figure style (literate/figures/style.py), in its two palettes: Nord ink on
# a transparent background, figures sized for the page's column. A figure cell draws its
# figure in a function of a palette, `draw(p)`, and hands it to `show`, which draws and
# displays it once per theme in THEMES: here, once, light. The site's build starts its
# kernels with LITERATE_FIGURE_THEMES=light,dark: each figure is drawn twice, each
# output says which theme it is (its metadata), and the page shows the one of the
# reader's colour scheme.
PALETTES = {
    "light": SimpleNamespace(ink="#2E3440", muted="#4C566A", border="#D8DEE9",
                             series=["#5E81AC", "#D08770", "#A3BE8C", "#8055A6",
                                     "#BF616A"]),  # blue, orange, green, purple, red
    "dark": SimpleNamespace(ink="#ECEFF4", muted="#D8DEE9", border="#4C566A",
                            series=["#81A1C1", "#D08770", "#A3BE8C", "#B48EAD",
                                    "#BF616A"]),
}
THEMES = os.environ.get("LITERATE_FIGURE_THEMES", "light").split(",")


def figure_style(p):
    """Matplotlib's settings for a figure in the palette `p`."""
    return {
        "figure.dpi": 100, "font.family": "DejaVu Sans", "font.size": 10,
        "text.color": p.ink, "axes.labelcolor": p.ink, "axes.titlecolor": p.ink,
        "axes.titlesize": 11, "axes.titleweight": "bold", "axes.titlelocation": "left",
        "xtick.color": p.muted, "ytick.color": p.muted, "axes.edgecolor": p.border,
        "axes.linewidth": 0.7, "figure.facecolor": "none", "axes.facecolor": "none",
        "savefig.facecolor": "none", "legend.frameon": False, "legend.fontsize": 9,
        "legend.labelcolor": p.ink, "axes.prop_cycle": plt.cycler(color=p.series),
    }


def show(draw):
    """Display the figure `draw(p)` returns, drawn in the palette of each theme."""
    for theme in THEMES:
        p = PALETTES[theme]
        with plt.rc_context(figure_style(p)):
            fig = draw(p)
            metadata = {"theme": theme}
            if theme == "light":  # as Jupyter's inline backend marks dark ink on a
                # transparent figure: JupyterLab's dark theme puts it on a light one
                metadata["needs_background"] = "light"
            display(fig, metadata=metadata)  # the image is made here, in the style
        plt.close(fig)


plt.rcParams.update(figure_style(PALETTES["light"]))  # a figure drawn without `show`

torch.manual_seed(0)
T, d_k = 8, 16
# T orthonormal rows of width d_k
basis = torch.linalg.qr(torch.randn(d_k, d_k, dtype=torch.float64)).Q[:T]
keys = 6.0 * basis                     # key j points along direction j
queries = 6.0 * basis.roll(2, dims=0)  # query i points along direction i - 2
values = torch.arange(T, dtype=torch.float64)[:, None]  # value j is just the number j

# %% [markdown]
# Without a mask every query finds its partner two steps back, wrapping around at the
# start (queries 0 and 1 look for tokens 6 and 7, in their future).

# %% alt="Three heatmaps of attention weights, query rows against key columns, for eight tokens. With no mask, each query puts its weight on the key two positions before it, and queries 0 and 1 wrap around to keys 6 and 7. With the causal mask, the same diagonal from query 2 on, while query 0 weighs only key 0 and query 1 splits its weight between keys 0 and 1. With the padding mask added, the weights look the same as the causal ones: no query's partner is one of the two padding tokens."
def heatmap(weights, title, ax):
    ax.imshow(weights, cmap="Blues", vmin=0, vmax=1)
    ax.set_title(title)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_xticks(range(weights.shape[-1]))
    ax.set_yticks(range(weights.shape[-2]))


free = scaled_dot_product_attention(queries, keys, values)
causal = scaled_dot_product_attention(queries, keys, values, causal_allowed(T, T))
valid = torch.tensor([[True] * 6 + [False] * 2])  # the last two tokens are padding
padded = scaled_dot_product_attention(
    queries[None, None], keys[None, None], values[None, None],
    causal_allowed(T, T) & padding_allowed(valid),
)


def draw(p):
    fig, axes = plt.subplots(1, 3, figsize=(7.2, 2.9), layout="constrained")
    heatmap(free.weights, "no mask", axes[0])
    heatmap(causal.weights, "causal", axes[1])
    heatmap(padded.weights[0, 0], "causal & padding (last 2)", axes[2])
    return fig


show(draw)

# %% [markdown]
# With the causal mask, queries 0 and 1 cannot reach their partners and spread their
# weight over what they may see. Each output is the weighted average of the values, so
# for query $i \ge 2$ it is close to $i - 2$:

# %%
print([round(x, 2) for x in causal.output[:, 0].tolist()])
assert all(abs(causal.output[i, 0].item() - (i - 2)) < 0.1 for i in range(2, T))

# %% [markdown]
# ## The scale, as a dial
#
# Multiply the scores by a factor instead of $1/\sqrt{d_k}$ and watch the rows go from
# nearly uniform to one-hot. These vectors were built long
# ($\lVert q\rVert = \lVert k\rVert = 6$, so a partner's score is
# $q \cdot k / \sqrt{d_k} = 9$): at the chapter's scale the partner already takes almost
# all of its row (the last cell prints how much). The scale keeps unit-variance vectors
# at unit-variance scores; it does not make every row soft.

# %% alt="Three heatmaps of causal attention weights, query rows against key columns, with the scores multiplied by 0.01, by 0.05 and by the chapter's 1/sqrt(d_k). At 0.01 each row spreads its weight almost evenly over the keys it may see; from query 2 on, the key two positions back is each row's darkest cell at 0.05, and at the chapter's scale the only dark one."
factors = [0.01, 0.05, 1 / math.sqrt(d_k)]
results = []
for factor in factors:
    scaled_queries = queries * factor * math.sqrt(d_k)  # it divides by sqrt(d_k)
    results.append(scaled_dot_product_attention(scaled_queries, keys, values,
                                                causal_allowed(T, T)))


def draw(p):
    fig, axes = plt.subplots(1, 3, figsize=(7.2, 2.9), layout="constrained")
    for ax, factor, result in zip(axes, factors, results):
        heatmap(result.weights, f"scores x {factor:.3g}", ax)
    return fig


show(draw)
# the chapter's scale, the last panel:
partner = [results[-1].weights[i, i - 2].item() for i in range(2, T)]
print(f"weight on the partner at 1/sqrt(d_k): {min(partner):.4f} or more")
assert min(partner) > 0.998

# %% [markdown]
# ## The same outputs from the fused kernel
#
# PyTorch's `F.scaled_dot_product_attention` computes the same outputs in one call. It
# returns no weights: a fused kernel never stores them, which is why it is fast (chapter
# 1, "What a fused kernel does"). The layers of chapter 3 call it unless they are asked
# for the weights.

# %%
fused = F.scaled_dot_product_attention(queries, keys, values,
                                       attn_mask=causal_allowed(T, T))
gap = (fused - causal.output).abs().max().item()
print(f"largest difference from ours: {gap:.1e}")
assert gap < 1e-12
