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

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

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

# The site's figure style (its light palette, literate/figures/style.py): Nord ink on a
# transparent background, figures sized for the page's column.
INK, MUTED, BORDER = "#2E3440", "#4C566A", "#D8DEE9"
SERIES = ["#5E81AC", "#D08770", "#A3BE8C", "#8055A6", "#BF616A"]  # blue, orange, ...
plt.rcParams.update({
    "figure.dpi": 100, "font.family": "DejaVu Sans", "font.size": 10,
    "text.color": INK, "axes.labelcolor": INK, "axes.titlecolor": INK,
    "axes.titlesize": 11, "axes.titleweight": "bold", "axes.titlelocation": "left",
    "xtick.color": MUTED, "ytick.color": MUTED, "axes.edgecolor": BORDER,
    "axes.linewidth": 0.7, "figure.facecolor": "none", "axes.facecolor": "none",
    "savefig.facecolor": "none", "legend.frameon": False, "legend.fontsize": 9,
    "legend.labelcolor": INK, "axes.prop_cycle": plt.cycler(color=SERIES),
})

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
def show(weights, title, ax):
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

fig, axes = plt.subplots(1, 3, figsize=(7.2, 2.9), layout="constrained")
show(free.weights, "no mask", axes[0])
show(causal.weights, "causal", axes[1])
show(padded.weights[0, 0], "causal & padding (last 2)", axes[2])
plt.show()

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
fig, axes = plt.subplots(1, 3, figsize=(7.2, 2.9), layout="constrained")
for ax, factor in zip(axes, factors):
    scaled_queries = queries * factor * math.sqrt(d_k)  # it divides by sqrt(d_k)
    result = scaled_dot_product_attention(scaled_queries, keys, values,
                                          causal_allowed(T, T))
    show(result.weights, f"scores x {factor:.3g}", ax)
plt.show()
# the chapter's scale, the last panel:
partner = [result.weights[i, i - 2].item() for i in range(2, T)]
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
