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
# # A tiny mixture of experts that learns to balance
#
# The mixture of experts of [chapter 9](../../moe/mixture-of-experts/), trained from
# scratch, twice, on the same data: once on the next-token loss alone, once with
# Switch's **balancing loss** added ([the chapter's section on
# it](../../moe/mixture-of-experts/#balancing-the-load)). Without it the router
# **collapses**: within a few steps two of the eight experts get nearly every token,
# and the load stays lopsided to the end. With it every expert keeps about its eighth,
# and the language model learns just as well.
#
# The model is a one-block Mixtral: Llama's attention and norms, and in place of the
# feed-forward network 8 SwiGLU experts, each token sent to the top 2 of them by
# Mixtral's router. It is small enough to train in under a second on one CPU thread.
# The notebook is executed when the site is built (a failing cell fails the build);
# download it with the button at the top of the page and change anything.
#
# **What it needs to run on its own**: torch, matplotlib, and the code of chapter 9.
# The site is built with this site's `literate` package installed, and the notebook
# imports the code from it. Without the package, download chapter 9's code as one
# file, [mixtral.py](../../downloads/mixtral.py), into the directory of the notebook:
# the first cell then imports the same code from that file.

# %%
import inspect
import math
import os
import statistics
import time
from types import SimpleNamespace

import matplotlib.pyplot as plt
import torch
from IPython.display import display

try:  # the site's package, installed
    from literate.numbers.moe_training import (
        BALANCE_COEF,
        LAST,
        STEPS,
        TINY_MOE,
        imbalance,
        moe_training_loop,
        topic_batch,
        topic_distributions,
        topic_loss,
        train_tiny_moe,
        unigram_loss,
    )
except ImportError:  # or chapter 9's one file, next to this notebook
    try:
        from mixtral import (
            BALANCE_COEF,
            LAST,
            STEPS,
            TINY_MOE,
            imbalance,
            moe_training_loop,
            topic_batch,
            topic_distributions,
            topic_loss,
            train_tiny_moe,
            unigram_loss,
        )
    except ImportError as error:
        raise ImportError(
            "this notebook needs the code of chapter 9: install the site's literate "
            "package, or download mixtral.py (chapter 9 links it) into the "
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

SEED = 0  # the figure of the chapter is this seed's run; try others

# %% [markdown]
# ## The task: topics and common words
#
# Every sequence is about one of 4 topics. Three quarters of its tokens are **common
# words**, tokens 0 to 7, which every topic uses with the same Zipf frequencies (the
# most common twice as often as the second, three times as often as the third, like
# "the", "of", "and"); the rest are words of **its own topic**, 6 per topic, tokens 8
# to 31. Each token is drawn independently, so the only thing to learn beyond the word
# frequencies is which topic the sequence is about, and that can be read from the topic
# words already seen.
#
# Two levels bound the loss. A model that ignores the context can do no better than the
# entropy of the overall word frequencies (`unigram_loss`); one that knows the topic,
# no better than the entropy of the topic's distribution (`topic_loss`). Its first
# prediction of a sequence, made before it has seen a token, cannot know the topic, so
# the mean loss stays a little above the second level.

# %% alt="Heatmap of each topic's token probabilities: four topic rows against the 32 token columns. The common words, left of a grey line, have the same probabilities in every topic, highest for the first and falling to the right. Each topic then has its own block of the remaining tokens, at a low, even probability, and zero for the other topics' tokens."
task = TINY_MOE
probs = topic_distributions(task)  # [topics, V]


def draw(p):
    fig, ax = plt.subplots(figsize=(7.2, 2.6), layout="constrained")
    image = ax.imshow(probs, aspect="auto", cmap="Blues")
    ax.set(xlabel="token", ylabel="topic", yticks=range(task.n_topics),
           title="Each topic's token probabilities")
    # on the heatmap, whose colours are the same in both themes: one grey in both
    ax.axvline(task.common_words - 0.5, color=PALETTES["light"].muted, lw=1)
    fig.colorbar(image, ax=ax, label="probability")
    return fig


show(draw)

print("three sequences:")
print(topic_batch(task, 3, torch.Generator().manual_seed(5)))
print(f"ln V = {math.log(task.vocab_size):.3f} (a uniform guess), "
      f"unigram_loss = {unigram_loss(task):.3f}, topic_loss = {topic_loss(task):.3f}")

# %% [markdown]
# ## The training loop
#
# `train_tiny_moe` builds the model with a fixed seed and runs the loop below on one
# intra-op thread, with fresh batches from a generator of its own, so a run gives the
# same numbers every time. Only the coefficient of the balancing loss differs between
# the two runs: 0 or `BALANCE_COEF`. The balancing loss (`router_aux_loss`, Switch's
# $E \sum_e f_e P_e$ pooled over the MoE blocks) is measured in both. At every step the
# loop keeps which experts each token chose; a run returns, per step, every expert's
# share of the 1,024 (token, choice) pairs of the batch, and the two losses. This is
# the loop, printed from the module that runs it:

# %%
print(inspect.getsource(moe_training_loop))
print(task)

# %% [markdown]
# ## Two runs
#
# The coefficient: Switch used 0.01 and Mixtral's configuration 0.001, for models far
# larger and trained far longer. Here 0.05: at this size and learning rate Switch's 0.01
# evens the load less (try it: the last section lists changes to make).

# %%
runs, seconds = {}, {}
for name, coef in (("without", 0.0), ("with", BALANCE_COEF)):
    start = time.perf_counter()
    runs[name] = train_tiny_moe(balance_coef=coef, steps=STEPS, seed=SEED, task=task)
    seconds[name] = time.perf_counter() - start
    print(f"{name} the balancing loss (coefficient {coef}): {STEPS} steps")

# %% tags=["measured"]
# How long each run took on your machine. The site leaves this cell out (its text
# differs at every run, and two builds of the site must give the same bytes).
for name, took in seconds.items():
    print(f"{name} the balancing loss: {took:.2f} s")
print("(the first run also pays a one-time cost: the experts' first call of their "
      "custom operator makes torch import part of its compiler)")

# %% [markdown]
# ## Tokens per expert
#
# Each band is one expert's share of the routed pairs at that step, stacked; the dashed
# lines are where the band edges would lie if every expert got its eighth. The measure
# of balance is `imbalance`: the busiest expert's share over the mean share, 1 for an
# even load and at most $E/k = 4$, when every token goes to the same two experts. (It
# minus one is the "MaxVio" of
# [Wang et al. 2024](../../appendix/references/#wang-2024).) The busiest expert is the
# one that matters: it sets how long the step takes and, with a capacity, drops tokens.

# %% alt="Two stacked-area charts of the share of (token, choice) pairs each of the eight experts receives at each training step, with dashed lines at even eighths. Without the balancing loss, two experts take almost all of the pairs within the first few steps, and other experts win back only part of the load later. With the loss, the eight bands jitter from step to step around the even shares."
colours = plt.get_cmap("tab10").colors[:task.n_experts]  # eight: more than p.series


def draw(p):
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.2), layout="constrained",
                             sharey=True)
    for ax, (name, run) in zip(axes, runs.items()):
        ax.stackplot(range(STEPS), list(zip(*run.shares)), colors=colours,
                     labels=[f"expert {e}" for e in range(task.n_experts)])
        for j in range(1, task.n_experts):
            ax.axhline(j / task.n_experts, color=p.ink, ls="--", lw=0.7, alpha=0.6)
        ax.set(xlim=(0, STEPS - 1), ylim=(0, 1), xlabel="training step",
               title=f"{name} the balancing loss:\nimbalance "
                     f"{imbalance(run.final_shares(LAST)):.2f} (last {LAST} steps)")
    axes[0].set_ylabel("share of the (token, choice) pairs")
    axes[1].legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


show(draw)

# %% [markdown]
# Without the loss, the two experts the router happened to favour in the first steps
# are trained on nearly every token while the model learns the common words'
# frequencies, the router prefers them for every token, and by step 10 they take about
# nine pairs in ten. Some experts come back as the model learns
# the topics (each topic's words give the router something to split on), but the
# busiest expert stays near three times its share. With the loss the bands jitter from
# step to step (a batch holds only 32 sequences, and its mix of topics varies) around
# the even split.
#
# Two numbers per run: the imbalance of the last 30 steps' pairs pooled, and the mean
# of each step's own imbalance, which the jitter raises.

# %%
for name, run in runs.items():
    per_step = statistics.mean(imbalance(s) for s in run.shares[-LAST:])
    print(f"{name:>7} the loss: imbalance {imbalance(run.final_shares(LAST)):.2f} "
          f"over the last {LAST} steps, {per_step:.2f} per step; shares "
          f"{[round(s, 3) for s in run.final_shares(LAST)]}")
assert imbalance(runs["without"].final_shares(LAST)) > 2.0  # seeds 0-9: 2.3-4.0
assert imbalance(runs["with"].final_shares(LAST)) < 1.3  # seeds 0-9: 1.04-1.19

# %% [markdown]
# ## The language model learns either way
#
# The next-token loss of both runs (thin: each step; thick: the mean of 10 steps). Both
# fall from above $\ln 32$ (the initial weights are not a uniform guess) past the
# frequencies-only level, and end close to the level of a model that knows the topic.
# The balancing loss, at this coefficient, costs the language model nothing visible.

# %% alt="Next-token loss at each training step for the runs with and without the balancing loss, thin lines for single steps and thick lines for the mean of 10 steps, with grey reference levels for a uniform guess (ln 32), for word frequencies only, and for a model that knows the topic. Both runs fall from above ln 32, pass the word-frequencies level, and end close to the knowing-the-topic level; the two curves almost coincide."
def draw(p):
    fig, ax = plt.subplots(figsize=(7.2, 3.2), layout="constrained")
    for (name, run), colour in zip(runs.items(), (p.series[4], p.series[0])):
        losses = torch.tensor(run.lm_loss)
        ax.plot(losses, color=colour, lw=0.7, alpha=0.4)
        ax.plot(range(9, STEPS), losses.unfold(0, 10, 1).mean(1), color=colour,
                lw=2, label=f"{name} the balancing loss")
    for level, style, label in (
        (math.log(task.vocab_size), ":", "ln 32: a uniform guess"),
        (unigram_loss(task), "--", "word frequencies only"),
        (topic_loss(task), "-.", "knowing the topic"),
    ):
        ax.axhline(level, color=p.muted, ls=style, lw=1, label=label)
    ax.set(xlabel="training step", ylabel="next-token loss (nats)",
           title="Training loss")
    ax.legend()
    return fig


show(draw)

for name, run in runs.items():
    final = sum(run.lm_loss[-LAST:]) / LAST
    print(f"{name:>7} the loss: next-token loss {run.lm_loss[0]:.3f} at the first "
          f"step, {final:.3f} over the last {LAST}; balancing loss "
          f"{sum(run.aux_loss[-LAST:]) / LAST:.3f} (k = {task.top_k} when even)")
    assert final < unigram_loss(task) - 0.1  # it reads the topic from the context

# %% [markdown]
# ## Things to try
#
# Each run takes under a second. Some changes worth making:
#
# * `SEED` (first cell): the collapse and the balance are not one lucky seed.
# * `balance_coef=0.01`, Switch's coefficient: in 100 steps it evens the load less.
# * `task = dataclasses.replace(TINY_MOE, p_common=0.25)` (after `import dataclasses`):
#   fewer common words, a weaker shared direction for the router to collapse along.
# * `dataclasses.replace(TINY_MOE, init_std=0.02)`, Hugging Face's initialisation
#   scale: at width 32 the tokens' embeddings start so small that after a few steps
#   they all look alike to the router, and even the balancing loss can only make the
#   experts take turns (compare the pooled and the per-step imbalance); nor has the
#   model learned the topics by the last step.
