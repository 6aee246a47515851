"""A tiny mixture-of-experts language model that learns, trained twice on the same data:
without the balancing loss its router collapses onto a few experts, with it every
expert keeps about its share (chapter 9).

* `TinyMoE`, `TINY_MOE`: the numbers of the task and of the model, in one frozen
  dataclass (hashable, so a run is cached by its arguments).
* `topic_distributions`, `topic_batch`: the task. A sequence is about one of a few
  topics; most of its tokens are common words that every topic shares (Zipf
  frequencies, like "the", "of", "and"), the rest are words of its own topic. A model
  that reads the context can tell the topic and predict its words.
* `unigram_loss`, `topic_loss`: two floors for the loss: the entropy of the word
  frequencies alone, and of a topic's distribution (a model that knows the topic).
* `train_tiny_moe`: one run, a `MoERun`: for every step, each expert's share of the
  routed (token, choice) pairs, the language-model loss and the balancing loss.
* `imbalance`: the busiest expert's share over the mean share.

Why common words. A linear router sends every token to the same experts only along a
direction that all the tokens' hidden states share. Three quarters of the text are a
handful of common words, and the model's first lesson, their frequencies, is the same
at every position: the hidden states get that direction within a few steps. The experts
chosen then are trained on nearly everything, the router prefers them everywhere, and
they get chosen more (the collapse Shazeer et al. 2017, sec. 4, describe). The balancing
loss pushes the router's probability off the busy experts and keeps the load even while
the model learns the same thing.

Sizes. `init_std` is the model's `std` (HF's `initializer_range`): 0.02 suits widths in
the thousands; at width 32 it leaves 32 token embeddings so small that a few Adam steps
make them all alike, and then no router can split them, with the loss or without
(the balanced run only takes turns between experts). 0.18, about 1/sqrt(32), keeps the
tokens apart.

Deterministic: the weights come from `seed` (the caller's random state is left as it
was), the data from a generator of its own, and the run uses one intra-op thread
(restored after), so two runs give the same numbers bit for bit.

Shapes: B batch, T tokens, V vocabulary, E experts, k choices per token, S steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from numbers import Real

import torch
import torch.nn.functional as F
from torch import Tensor

from literate.models.mixtral import mixtral_model, router_aux_loss
from literate.parts.checks import (
    non_negative_int,
    positive_float,
    positive_int,
    probability,
)

__all__ = [
    "TinyMoE",
    "TINY_MOE",
    "STEPS",
    "BALANCE_COEF",
    "LAST",
    "topic_distributions",
    "topic_batch",
    "unigram_loss",
    "topic_loss",
    "MoERun",
    "train_tiny_moe",
    "moe_training_loop",
    "imbalance",
]


# --8<-- [start:tiny_moe_task]
@dataclass(frozen=True)
class TinyMoE:
    """The task and the model of the tiny MoE run. Numbers only."""

    common_words: int = 8  # tokens 0..7, shared by every topic, frequencies 1/rank
    n_topics: int = 4
    topic_words: int = 6  # each topic's own tokens, after the common ones
    p_common: float = 0.75  # a token is a common word with this probability
    context: int = 16  # tokens a sequence feeds the model (it has context + 1)
    batch: int = 32  # sequences per step: 512 tokens, 1,024 routed pairs
    d_model: int = 32
    n_heads: int = 4
    n_kv_heads: int = 2
    d_ff: int = 32  # each expert's width
    n_experts: int = 8
    top_k: int = 2  # Mixtral's k: with k = 1 the renormalised weight is 1, no signal
    init_std: float = 0.18  # about 1/sqrt(d_model); HF's 0.02 is for widths ~ 2,500
    lr: float = 1e-2  # AdamW, constant, no weight decay

    def __post_init__(self) -> None:
        for name in ("common_words", "n_topics", "topic_words", "context", "batch",
                     "d_model", "n_heads", "n_kv_heads", "d_ff", "n_experts", "top_k"):
            positive_int(name, getattr(self, name))
        probability("p_common", self.p_common)
        positive_float("init_std", self.init_std)
        positive_float("lr", self.lr)

    @property
    def vocab_size(self) -> int:
        return self.common_words + self.n_topics * self.topic_words


TINY_MOE = TinyMoE()
STEPS = 100  # enough to learn the topics: the loss goes below `unigram_loss`
BALANCE_COEF = 0.05  # Switch's 0.01 evens the load less at this size and rate
LAST = 30  # the final shares: the pairs of the last 30 steps


def topic_distributions(task: TinyMoE = TINY_MOE) -> Tensor:
    """Each topic's token probabilities `[n_topics, V]`: the common words with
    probability `p_common` in all, in proportion to 1/rank (Zipf), and the topic's
    own words sharing the rest equally; other topics' words never."""
    zipf = 1.0 / torch.arange(1, task.common_words + 1, dtype=torch.float64)
    probs = torch.zeros(task.n_topics, task.vocab_size, dtype=torch.float64)
    probs[:, :task.common_words] = task.p_common * zipf / zipf.sum()
    for topic in range(task.n_topics):
        first = task.common_words + topic * task.topic_words
        probs[topic, first:first + task.topic_words] = ((1 - task.p_common)
                                                        / task.topic_words)
    return probs


def topic_batch(task: TinyMoE, n: int, generator: torch.Generator) -> Tensor:
    """n sequences `[n, context + 1]`: each picks a topic, then every token is drawn
    from that topic's distribution, independently."""
    n = positive_int("n", n)
    probs = topic_distributions(task).float()  # [n_topics, V]
    topics = torch.randint(task.n_topics, (n,), generator=generator)  # [n]
    return torch.multinomial(probs[topics], task.context + 1, replacement=True,
                             generator=generator)  # [n, T + 1]


def unigram_loss(task: TinyMoE = TINY_MOE) -> float:
    """The entropy (nats) of the word frequencies over all topics: the best loss of a
    model that ignores the context."""
    p = topic_distributions(task).mean(dim=0)  # [V]
    p = p[p > 0]
    return float(-(p * p.log()).sum())


def topic_loss(task: TinyMoE = TINY_MOE) -> float:
    """The entropy (nats) of one topic's distribution: the best loss of a model that
    knows the topic (the first token of a sequence cannot, so the mean stays above)."""
    p = topic_distributions(task)[0]  # every topic has the same entropy
    p = p[p > 0]
    return float(-(p * p.log()).sum())
# --8<-- [end:tiny_moe_task]


# --8<-- [start:train_tiny_moe]
@dataclass(frozen=True)
class MoERun:
    """One training run. `shares[s][e]`: expert e's share of the (token, choice) pairs
    routed at step s (each row sums to 1; uniform is 1/E). `lm_loss[s]`,
    `aux_loss[s]`: the next-token loss and the balancing loss (`router_aux_loss`,
    k when balanced) of step s's batch, measured before its update."""

    balance_coef: float
    seed: int
    shares: tuple[tuple[float, ...], ...]  # [S][E]
    lm_loss: tuple[float, ...]  # [S]
    aux_loss: tuple[float, ...]  # [S]

    def final_shares(self, last: int = LAST) -> tuple[float, ...]:
        """Each expert's share of the pairs of the last `last` steps (every step
        routes the same number of pairs, so this is the mean of their rows)."""
        last = positive_int("last", last)
        rows = self.shares[-last:]
        return tuple(sum(column) / len(rows) for column in zip(*rows))


def moe_training_loop(balance_coef: float, steps: int, seed: int,
                      task: TinyMoE) -> MoERun:
    """The loop of `train_tiny_moe`, unchecked and uncached: the weights from torch's
    random state (`train_tiny_moe` seeds it with `seed`), the data from a generator
    seeded with `seed`. Each step: a fresh batch, the next-token loss plus
    `balance_coef` times the balancing loss, one AdamW step; the experts each token
    chose are kept. The losses and the choices stay tensors and are read once, after
    the loop (reading a value at every step would wait for it: a host sync on a GPU)."""
    model = mixtral_model(task.vocab_size, task.context, task.d_model, task.n_heads,
                          task.n_kv_heads, 1, task.d_ff, task.n_experts, task.top_k,
                          std=task.init_std)
    optimizer = torch.optim.AdamW(model.parameters(), lr=task.lr, weight_decay=0.0)
    data = torch.Generator().manual_seed(seed)
    chosen, lm_losses, aux_losses = [], [], []
    for _ in range(steps):
        ids = topic_batch(task, task.batch, data)  # [B, T + 1]
        logits = model(ids[:, :-1])  # [B, T, V]
        lm = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())  # chapter 5's
        aux = router_aux_loss(model)  # pooled over the MoE blocks (here one)
        loss = lm + balance_coef * aux
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        chosen.append(torch.cat([b.ffn.chosen.flatten() for b in model.blocks]))
        lm_losses.append(lm.detach())
        aux_losses.append(aux.detach())
    counts = F.one_hot(torch.stack(chosen), task.n_experts).sum(dim=1)  # [S, E]
    shares = counts.double() / counts.sum(dim=1, keepdim=True)  # [S, E], rows sum to 1
    return MoERun(balance_coef, seed, tuple(map(tuple, shares.tolist())),
                  tuple(torch.stack(lm_losses).tolist()),
                  tuple(torch.stack(aux_losses).tolist()))


@lru_cache(maxsize=8)
def _train(balance_coef: float, steps: int, seed: int, task: TinyMoE) -> MoERun:
    """`moe_training_loop` from `seed`, on one thread, the caller's state restored."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same sums in the same order, and faster this small
    try:
        with torch.random.fork_rng(devices=[]):  # the caller's random state is kept
            torch.manual_seed(seed)
            return moe_training_loop(balance_coef, steps, seed, task)
    finally:
        torch.set_num_threads(threads)


def train_tiny_moe(*, balance_coef: float, steps: int = STEPS, seed: int = 0,
                   task: TinyMoE = TINY_MOE) -> MoERun:
    """Train a one-block Mixtral (`mixtral_model`, top-k of E SwiGLU experts) on
    `topic_batch`es with AdamW, minimising the next-token loss plus `balance_coef`
    times the balancing loss (0.01 in Switch; 0 trains without it: the same loop, the
    same data, the aux loss still measured). Cached by its arguments: the result is
    read-only, and the figure's variants and the tests share one run."""
    if isinstance(balance_coef, bool) or not isinstance(balance_coef, Real):
        raise TypeError(f"balance_coef must be a real number, "
                        f"got {type(balance_coef).__name__}")
    if not (math.isfinite(balance_coef) and balance_coef >= 0):
        raise ValueError(f"balance_coef must be finite and >= 0, got {balance_coef}")
    if not isinstance(task, TinyMoE):
        raise TypeError(f"task must be a TinyMoE, got {type(task).__name__}")
    return _train(float(balance_coef), positive_int("steps", steps),
                  non_negative_int("seed", seed), task)
# --8<-- [end:train_tiny_moe]


# --8<-- [start:imbalance]
def imbalance(shares: object) -> float:
    """The busiest expert's share over the mean share, max_e f_e / mean_e f_e, for the
    shares of E experts (any non-negative loads: only their ratios count). 1 is a
    perfectly even load; top-k routing can reach E / k at most (every token to the
    same k experts). It minus one is Wang et al.'s (2024) MaxVio. The maximum, not a
    spread such as the coefficient of variation, because the busiest expert is the one
    that sets the step's time and, with a capacity, drops tokens."""
    try:
        loads = torch.as_tensor(shares).double()
    except (TypeError, ValueError, RuntimeError) as error:
        raise TypeError(f"shares must be a sequence or tensor of numbers, got "
                        f"{type(shares).__name__}") from error
    if loads.ndim != 1 or loads.numel() < 1:
        raise ValueError(f"shares must be one load per expert, got shape "
                         f"{tuple(loads.shape)}")
    if not torch.isfinite(loads).all() or (loads < 0).any() or loads.sum() <= 0:
        raise ValueError("shares must be finite, >= 0, and not all 0")
    return float(loads.max() / loads.mean())
# --8<-- [end:imbalance]
