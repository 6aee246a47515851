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
# # Learning to reverse
#
# The encoder-decoder of [chapter 4](../../eras/encoder-decoder/), trained from scratch
# on a task small enough to learn in seconds on a CPU: **reverse a sequence**. The
# source is a sequence of 3 to 8 tokens followed by EOS; the target is the same tokens
# in reverse order, then EOS. Sequences of different lengths share a batch, so both
# sides are padded with PAD.
#
# Reversal is a good test of cross-attention. To write target token $i$ of a length-$L$
# source, the decoder has to read source position $L - 1 - i$: a different position for
# every length, found by attention, not by a fixed wiring. When it works, the
# cross-attention weights of one example form an **anti-diagonal**.
#
# Everything the paper prescribes for training is used: the shared, scaled embedding,
# the learning-rate schedule of sec. 5.3, Adam with $\beta_2 = 0.98$, dropout 0.1 and
# label smoothing 0.1 (sec. 5.4). The notebook is executed when the site is built (a
# failing cell fails the build); download it with the button at the top of the page and
# change anything.
#
# **What it needs to run on its own**: torch, matplotlib, and the model of chapter 4.
# The site is built with this site's `literate` package installed, and the notebook
# imports the model from it. Without the package, download chapter 4's code as one
# file, [transformer2017.py](../../downloads/transformer2017.py), into the directory of
# the notebook: the first cell then imports the same model from that file.

# %%
import math
import os
import time
from types import SimpleNamespace

import matplotlib.pyplot as plt
import torch
from IPython.display import display

try:  # the site's package, installed
    from literate.models.transformer2017 import (
        EncoderDecoder,
        cross_attention_weights,
        transformer_lr,
    )
except ImportError:  # or chapter 4's one file, next to this notebook
    try:
        from transformer2017 import (
            EncoderDecoder,
            cross_attention_weights,
            transformer_lr,
        )
    except ImportError as error:
        raise ImportError(
            "this notebook needs the model of chapter 4: install the site's literate "
            "package, or download transformer2017.py (chapter 4 links it) into the "
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

# One thread: at this size the work per operation is tiny, and a second thread costs
# more in synchronisation than it saves (and loses badly when the machine is busy).
torch.set_num_threads(1)
torch.manual_seed(0)

PAD, BOS, EOS = 0, 1, 2
N_SYMBOLS = 10  # tokens 3..12 are the "words"
VOCAB = 3 + N_SYMBOLS
MIN_LEN, MAX_LEN = 3, 8

# %% [markdown]
# ## The data
#
# `make_batch` draws lengths and tokens from a generator, so the data is the same on
# every run. A fixed **held-out** set of 1,000 sequences is drawn first, from its own
# generator; any training sequence that happens to equal one of them is dropped, so the
# final accuracy is measured on sequences the model has never seen.

# %%
def make_batch(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """n random sequences: source = tokens + EOS, target = reversed tokens + EOS;
    PAD after both."""
    lengths = torch.randint(MIN_LEN, MAX_LEN + 1, (n,), generator=generator)  # [n]
    tokens = torch.randint(3, VOCAB, (n, MAX_LEN), generator=generator)  # [n, MAX_LEN]
    pos = torch.arange(MAX_LEN + 1)  # [MAX_LEN + 1]
    real = pos[None, :MAX_LEN] < lengths[:, None]  # [n, MAX_LEN]
    tokens = tokens.masked_fill(~real, PAD)
    backwards = (lengths[:, None] - 1 - pos[None, :MAX_LEN]).clamp(min=0)  # to copy
    reversed_tokens = tokens.gather(1, backwards).masked_fill(~real, PAD)  # [n, MAX]
    rows = torch.arange(n)
    source = torch.cat((tokens, torch.full((n, 1), PAD)), dim=1)  # [n, MAX_LEN + 1]
    target = torch.cat((reversed_tokens, torch.full((n, 1), PAD)), dim=1)  # same
    source[rows, lengths] = EOS
    target[rows, lengths] = EOS
    return source, target


held_out_source, held_out_target = make_batch(1000, torch.Generator().manual_seed(2))
held_out = set(map(tuple, held_out_source.tolist()))
train_generator = torch.Generator().manual_seed(1)


def training_batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of n training sequences, none of them in the held-out set."""
    source, target = make_batch(n + 16, train_generator)
    fresh = torch.tensor([tuple(row) not in held_out for row in source.tolist()])
    return source[fresh][:n], target[fresh][:n]


example_source, example_target = make_batch(3, torch.Generator().manual_seed(5))
print(example_source)
print(example_target)

# %% [markdown]
# ## The model and the schedule
#
# One encoder layer and one decoder layer of width 32 with 4 heads: the paper's
# architecture at a size a CPU trains in seconds. The feed-forward width is 2 × 32
# rather than the paper's 4 × 32, which is enough for this task. The schedule is the
# paper's formula; only the warm-up is shortened to suit a run of 1,500 steps.

# %%
D_MODEL, N_HEADS, D_FF, N_LAYERS = 32, 4, 64, 1
WARMUP, STEPS, BATCH = 200, 1500, 64

model = EncoderDecoder(VOCAB, D_MODEL, N_HEADS, D_FF, N_LAYERS, dropout=0.1,
                       max_length=MAX_LEN + 1)
optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98),
                             eps=1e-9)  # sec. 5.3
schedule = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda s: transformer_lr(s + 1, D_MODEL, WARMUP))
print(f"{sum(p.numel() for p in model.parameters()):,} parameters; "
      f"peak learning rate {transformer_lr(WARMUP, D_MODEL, WARMUP):.4f} "
      f"at step {WARMUP}")

# %% [markdown]
# ## Training
#
# Each step: a fresh batch, the label-smoothed loss (`model.loss`,
# $\epsilon_{ls} = 0.1$, PAD targets ignored), one Adam step, one step of the schedule.
# The losses are kept as tensors and read once, after the loop, not with `loss.item()`
# at every step, which would make Python wait for each step to finish (a host sync,
# costly on a GPU).

# %%
model.train()
losses = []
start = time.perf_counter()
for step in range(STEPS):
    source, target = training_batch(BATCH)
    loss = model.loss(source, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    schedule.step()
    losses.append(loss.detach())
losses = torch.stack(losses).tolist()  # one read for all the steps
train_seconds = time.perf_counter() - start
print(f"{STEPS} steps; mean loss over the last 100 steps {sum(losses[-100:]) / 100:.3f}")

# %% tags=["measured"]
# How long training took on your machine. The site leaves this cell out (its text
# differs at every run, and two builds of the site must give the same bytes).
print(f"{STEPS} steps in {train_seconds:.1f} s on one thread")

# %% [markdown]
# Label smoothing puts a floor under the loss. For a model that is certain of the right
# token in the smoothed sense ($q = 0.9 + 0.1/V$ on it, $0.1/V$ on every other), the
# loss is the entropy of $q$, printed below; giving the right token probability 1 would
# make it infinite.

# %% alt="Label-smoothed cross-entropy on a log scale against the training step, per step and as a mean of 25 steps, with a dashed line at the label-smoothing floor. The loss falls steeply, flattens, and ends just above the floor, below which it cannot go."
q_right, q_other = 0.9 + 0.1 / VOCAB, 0.1 / VOCAB
floor = -(q_right * math.log(q_right) + (VOCAB - 1) * q_other * math.log(q_other))
print(f"label-smoothing floor for V = {VOCAB}: {floor:.3f}")

window = 25
smooth = torch.tensor(losses).unfold(0, window, 1).mean(1)


def draw(p):
    fig, ax = plt.subplots(figsize=(7.2, 3.2), layout="constrained")
    ax.plot(losses, lw=0.8, alpha=0.5, label="loss per step")
    ax.plot(range(window - 1, STEPS), smooth, lw=2, label=f"mean of {window} steps")
    ax.axhline(floor, color=p.muted, ls="--", lw=1,
               label=f"label-smoothing floor {floor:.2f}")
    ax.set(xlabel="step", ylabel="label-smoothed cross-entropy", yscale="log",
           title="Training loss")
    ax.legend()
    return fig


show(draw)

# %% [markdown]
# ## Held-out accuracy
#
# Greedy decoding (chapter 4): start from BOS, append the most likely token, stop at
# EOS. A sequence counts as right only if every token and the EOS are right, and nothing
# follows.

# %%
model.eval()
decoded = model.greedy_decode(held_out_source, MAX_LEN + 1)  # [1000, <= MAX_LEN + 1]
padded = torch.full_like(held_out_target, PAD)
padded[:, : decoded.shape[1]] = decoded
exact = (padded == held_out_target).all(dim=1)
accuracy = exact.float().mean().item()
print(f"exact-match accuracy on 1,000 held-out sequences: {accuracy:.1%}")
for src, out in zip(held_out_source[:3].tolist(), padded[:3].tolist()):
    print([t for t in src if t != PAD], "->", [t for t in out if t != PAD])
assert accuracy >= 0.99

# %% [markdown]
# ## What cross-attention learned
#
# The cross-attention weights for one held-out example of length 8 whose tokens are all
# different (with a repeated token, either copy gives the right answer, and the weight
# may split between them), averaged over the four heads. Row $i$ is target position $i$
# (the decoder predicting target token $i$), column $j$ is source position $j$. The
# weight sits on the anti-diagonal: to write the $i$-th token of the reversal, the
# decoder reads source position $L - 1 - i$ (asserted below). Where the last row,
# predicting EOS, looks is printed but not asserted: nothing in the task needs one
# place (the decoder can tell it has written $L$ tokens from its own input), and it moved
# between PyTorch versions in our runs.

# %% alt="Heatmap of the cross-attention weights, averaged over the heads, for one held-out source of eight different tokens: target tokens as rows, source tokens as columns. The weight lies on the anti-diagonal: the first target token reads the last source token, the second the one before it, and so on, each target token reading its own copy in the source. The last row predicts the end of the sequence."
n_tokens = (held_out_source != PAD).sum(dim=1) - 1  # [1000]: tokens before the EOS
distinct = torch.tensor([len(set(row[:n])) == n for row, n in
                         zip(held_out_source.tolist(), n_tokens.tolist())])
longest = int(torch.nonzero((n_tokens == MAX_LEN) & distinct)[0])
src = held_out_source[longest : longest + 1]
tgt = held_out_target[longest : longest + 1]
weights = cross_attention_weights(model, src, tgt)[-1, 0].mean(dim=0)  # [T, S]


def names(tokens: torch.Tensor) -> list[str]:
    return [str(t) if t > 2 else "EOS" for t in tokens.tolist()]


def draw(p):
    fig, ax = plt.subplots(figsize=(4.6, 4.2), layout="constrained")
    ax.imshow(weights, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(src.shape[1]), names(src[0]))
    ax.set_yticks(range(tgt.shape[1]), names(tgt[0]))
    ax.set(xlabel="source token", ylabel="target token (predicted)",
           title="Cross-attention, one held-out example")
    return fig


show(draw)

length = int((src != PAD).sum()) - 1  # tokens before the EOS
reads = weights[:length].argmax(dim=1)  # the source position each target reads most
print("target position i reads source position", reads.tolist())
print(f"the EOS row reads source position {int(weights[length].argmax())}; "
      f"the source's EOS is at {length}")
assert reads.tolist() == list(range(length - 1, -1, -1))  # the anti-diagonal
print(f"{accuracy:.1%} of held-out sequences reversed exactly")
