"""The tiny MoE of chapter 9: its runs are deterministic, without the balancing loss the
router collapses and with it the load stays even, the language model learns in both,
the bookkeeping counts what the router chose, and the figure draws these runs.

The thresholds are set from the measured runs with a margin. Measured on torch 2.13
(CPU, one thread), seeds 0-9, over the last 30 of 100 steps: without the loss the
busiest expert had 2.3-4.0 times the mean share (3.1-3.6 for seeds 0-2), with it
(0.05) 1.04-1.19; the next-token loss ended 0.18-0.24 nats below the unigram level
2.72 in both runs. The tests use seeds 0-2.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
import xml.etree.ElementTree as ET

import matplotlib.pyplot as plt
import pytest
import torch
import torch.nn.functional as F

from literate.figures import FIGURES, LANGUAGES, THEMES, moe, render
from literate.models.mixtral import mixtral_model
from literate.numbers import moe_training
from literate.numbers.moe_training import (
    BALANCE_COEF,
    LAST,
    STEPS,
    TINY_MOE,
    MoERun,
    imbalance,
    moe_training_loop,
    topic_batch,
    topic_distributions,
    topic_loss,
    train_tiny_moe,
    unigram_loss,
)

SEEDS = (0, 1, 2)
PAIRS = TINY_MOE.batch * TINY_MOE.context * TINY_MOE.top_k  # routed per step: 1,024


def runs(coef: float) -> list[MoERun]:
    return [train_tiny_moe(balance_coef=coef, seed=s) for s in SEEDS]


def per_step_imbalance(run: MoERun) -> float:
    """The mean over the last LAST steps of each step's own imbalance."""
    return statistics.mean(imbalance(s) for s in run.shares[-LAST:])


def top_two(shares: tuple[float, ...]) -> float:
    return sum(sorted(shares)[-2:])


# The task


def test_each_topic_is_the_common_words_and_its_own():
    probs = topic_distributions()
    c, w = TINY_MOE.common_words, TINY_MOE.topic_words
    assert probs.shape == (TINY_MOE.n_topics, TINY_MOE.vocab_size) == (4, 32)
    torch.testing.assert_close(probs.sum(dim=1), torch.ones(4, dtype=torch.float64))
    zipf = torch.tensor([1 / r for r in range(1, c + 1)], dtype=torch.float64)
    for topic in range(4):
        torch.testing.assert_close(probs[topic, :c], 0.75 * zipf / zipf.sum())
        own = slice(c + topic * w, c + (topic + 1) * w)
        torch.testing.assert_close(
            probs[topic, own], torch.full((w,), 0.25 / w, dtype=torch.float64)
        )
        assert probs[topic, c:].sum() == pytest.approx(0.25, abs=1e-15)  # none other


def test_a_batch_uses_the_common_words_and_one_topic_per_sequence():
    ids = topic_batch(TINY_MOE, 200, torch.Generator().manual_seed(3))
    assert ids.shape == (200, TINY_MOE.context + 1) and ids.dtype == torch.long
    c, w = TINY_MOE.common_words, TINY_MOE.topic_words
    for row in ids.tolist():
        topics = {(t - c) // w for t in row if t >= c}
        assert len(topics) <= 1
    share = (ids < c).float().mean().item()
    assert abs(share - 0.75) < 0.02  # 3,400 tokens: the standard error is 0.007
    again = topic_batch(TINY_MOE, 200, torch.Generator().manual_seed(3))
    assert torch.equal(ids, again)


def test_the_two_loss_levels_are_the_entropies_written_out():
    """H = -sum p ln p, by hand: a topic's distribution (common words and 6 words of
    1/24 each), and the mixture over the 4 topics (each topic word 1/96)."""

    def h(ps: list[float]) -> float:
        return -sum(p * math.log(p) for p in ps)

    z = [1 / r for r in range(1, 9)]
    common = [0.75 * v / sum(z) for v in z]
    assert topic_loss() == pytest.approx(h(common + [0.25 / 6] * 6), abs=1e-12)
    assert unigram_loss() == pytest.approx(h(common + [0.25 / 24] * 24), abs=1e-12)
    assert topic_loss() < unigram_loss() < math.log(32)


# Determinism and bookkeeping


def test_two_runs_are_equal_and_a_longer_run_begins_with_a_shorter_one():
    """Uncached runs (`_train.__wrapped__`) from different global seeds are equal bit
    for bit, and the first 30 steps of the 100-step run are the 30-step run: the data
    of a step does not depend on how many steps follow."""
    torch.manual_seed(1)
    once = moe_training._train.__wrapped__(0.0, 30, 0, TINY_MOE)
    torch.manual_seed(2)
    again = moe_training._train.__wrapped__(0.0, 30, 0, TINY_MOE)
    assert once == again
    full = train_tiny_moe(balance_coef=0.0)
    assert full.shares[:30] == once.shares
    assert full.lm_loss[:30] == once.lm_loss and full.aux_loss[:30] == once.aux_loss
    assert train_tiny_moe(balance_coef=0.0) is full  # cached: the figure trains once


def test_a_run_keeps_the_callers_random_state_and_thread_count():
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.manual_seed(7)
        state = torch.get_rng_state()
        moe_training._train.__wrapped__(BALANCE_COEF, 2, 5, TINY_MOE)
        assert torch.equal(torch.get_rng_state(), state)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("coef", [0.0, BALANCE_COEF])
def test_every_step_records_shares_of_the_routed_pairs(coef):
    """Each row: E shares, each a whole number of the step's 1,024 pairs, at most
    1/k (a token picks an expert once), summing to 1 exactly; one loss of each kind
    per step, finite. The balancing loss is k = 2 for an even load and can dip below
    only where the busier experts have the lower mean probabilities: above 0.9 k."""
    run = train_tiny_moe(balance_coef=coef)
    assert run.balance_coef == coef and run.seed == 0
    assert len(run.shares) == len(run.lm_loss) == len(run.aux_loss) == STEPS
    for row in run.shares:
        assert len(row) == TINY_MOE.n_experts
        assert sum(row) == 1.0
        assert all(0 <= s <= 1 / TINY_MOE.top_k for s in row)
        assert all((s * PAIRS).is_integer() for s in row)
    assert all(math.isfinite(v) for v in run.lm_loss + run.aux_loss)
    assert min(run.aux_loss) > 0.9 * TINY_MOE.top_k


def test_the_shares_are_what_the_router_chose():
    """Step 0 replayed by hand: the same seeded model, the same first batch, the
    router's top 2 of its softmax counted per expert; and its balancing loss is
    Switch's E sum_e f_e P_e with f from those counts (summing to k)."""
    run = train_tiny_moe(balance_coef=0.0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = mixtral_model(
            32,
            TINY_MOE.context,
            TINY_MOE.d_model,
            TINY_MOE.n_heads,
            TINY_MOE.n_kv_heads,
            1,
            TINY_MOE.d_ff,
            8,
            2,
            std=TINY_MOE.init_std,
        )
    ids = topic_batch(TINY_MOE, TINY_MOE.batch, torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = model(ids[:, :-1])
        router_logits = model.blocks[0].ffn.router_logits  # [B T, E]
    probs = router_logits.softmax(dim=-1)
    counts = torch.bincount(probs.topk(2, dim=-1).indices.flatten(), minlength=8)
    assert list(run.shares[0]) == (counts / PAIRS).tolist()
    f, p = counts / (PAIRS / 2), probs.mean(dim=0)  # f sums to k = 2
    assert run.aux_loss[0] == pytest.approx(float(8 * (f * p).sum()), rel=1e-6)
    lm = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
    assert run.lm_loss[0] == pytest.approx(lm.item(), rel=1e-6)


# The claims


def test_without_the_balancing_loss_the_router_collapses():
    """Within a few steps two experts take most of the pairs (uniform: 1/4); at the
    end the busiest expert has more than 2.5 times the mean share over the last 30
    steps and step by step, and some expert gets less than 1% of the pairs."""
    for run in runs(0.0):
        assert statistics.mean(top_two(s) for s in run.shares[5:41]) > 0.7
        assert imbalance(run.final_shares(LAST)) > 2.5
        assert per_step_imbalance(run) > 2.5
        assert min(run.final_shares(LAST)) < 0.01
        assert statistics.mean(run.aux_loss[-LAST:]) > 3.0  # k = 2 when even


def test_with_the_balancing_loss_the_load_stays_even():
    """Over the last 30 steps the busiest expert is within 1.3 times the mean and
    every expert has at least 8%; step by step (32 sequences a batch, whose mix of
    topics varies) within 1.9 times on average; the balancing loss near its even
    value k = 2."""
    for run in runs(BALANCE_COEF):
        assert statistics.mean(top_two(s) for s in run.shares[5:41]) < 0.55
        assert imbalance(run.final_shares(LAST)) < 1.3
        assert min(run.final_shares(LAST)) > 0.08
        assert per_step_imbalance(run) < 1.9
        assert statistics.mean(run.aux_loss[-LAST:]) < 2.2


def test_the_language_model_learns_in_both_runs_alike():
    """From above ln 32 at the first step to below the unigram level by more than 0.1
    nats (so it reads the topic from the context), above the topic level; the two
    runs end within 0.05 nats of each other."""
    for without, with_ in zip(runs(0.0), runs(BALANCE_COEF), strict=True):
        finals = []
        for run in (without, with_):
            assert run.lm_loss[0] > math.log(TINY_MOE.vocab_size)
            final = statistics.mean(run.lm_loss[-LAST:])
            assert topic_loss() < final < unigram_loss() - 0.1
            finals.append(final)
        assert abs(finals[0] - finals[1]) < 0.05


# Arguments


def test_imbalance_is_the_busiest_over_the_mean():
    assert imbalance([1 / 8] * 8) == 1.0
    assert imbalance([0.5, 0.5] + [0.0] * 6) == 4.0  # top-2, every token the same two
    assert imbalance(torch.tensor([3, 1, 1, 1])) == 2.0  # counts are loads too
    with pytest.raises(
        ValueError,
        match=r"^shares must be one load per expert, got "
        r"shape \(2, 2\)$",
    ):
        imbalance([[0.5, 0.5], [0.5, 0.5]])
    for bad in ([0.5, -0.1, 0.6], [0.0, 0.0], [math.nan, 1.0]):
        with pytest.raises(
            ValueError,
            match=r"^shares must be finite, >= 0, and not "
            r"all 0$",
        ):
            imbalance(bad)
    with pytest.raises(
        TypeError,
        match=r"^shares must be a sequence or tensor of "
        r"numbers, got str$",
    ):
        imbalance("even")


def test_train_tiny_moe_refuses_bad_arguments():
    with pytest.raises(
        TypeError,
        match=r"^balance_coef must be a real number, got "
        r"bool$",
    ):
        train_tiny_moe(balance_coef=True)
    for bad in (-0.01, math.inf, math.nan):
        with pytest.raises(ValueError, match=r"^balance_coef must be finite and >= 0"):
            train_tiny_moe(balance_coef=bad)
    with pytest.raises(ValueError, match=r"^steps must be >= 1, got 0$"):
        train_tiny_moe(balance_coef=0.0, steps=0)
    with pytest.raises(ValueError, match=r"^seed must be >= 0, got -1$"):
        train_tiny_moe(balance_coef=0.0, seed=-1)
    with pytest.raises(TypeError, match=r"^task must be a TinyMoE, got dict$"):
        train_tiny_moe(balance_coef=0.0, task={})
    with pytest.raises(ValueError, match=r"^last must be >= 1, got 0$"):
        train_tiny_moe(balance_coef=0.0).final_shares(0)
    with pytest.raises(ValueError, match=r"^p_common must be in \[0, 1\), got 1\.0$"):
        dataclasses.replace(TINY_MOE, p_common=1.0)
    with pytest.raises(TypeError, match=r"^n_experts must be an int, got float$"):
        dataclasses.replace(TINY_MOE, n_experts=8.0)
    with pytest.raises(ValueError, match=r"^lr must be finite and > 0, got 0$"):
        dataclasses.replace(TINY_MOE, lr=0)


# The figure


def test_the_figure_is_registered_and_draws_the_runs():
    spec = FIGURES["moe-tokens-per-expert"]
    assert spec.draw is moe.tokens_per_expert_figure
    assert moe.train_tiny_moe is train_tiny_moe and moe.imbalance is imbalance
    fig = moe.tokens_per_expert_figure(language="en", theme="light")
    without, with_, loss = fig.axes
    for ax, coef in ((without, 0.0), (with_, BALANCE_COEF)):
        run = train_tiny_moe(balance_coef=coef)
        tops = [
            path.vertices[:, 1].max()
            for c in ax.collections
            for path in c.get_paths()
            if len(path.vertices)
        ]
        assert len(ax.collections) == TINY_MOE.n_experts and max(tops) == 1.0
        texts = " ".join(t.get_text() for t in ax.texts)
        assert f"{imbalance(run.final_shares(LAST)):.2f}" in texts
        drawn = [list(line.get_ydata()) for line in loss.lines]
        assert list(run.lm_loss) in drawn
    plt.close(fig)


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("theme", THEMES)
def test_the_figure_draws_in_each_language_and_theme(language, theme):
    fig = moe.tokens_per_expert_figure(language=language, theme=theme)
    words = " ".join(
        t.get_text() for t in fig.findobj(match=lambda a: hasattr(a, "get_text"))
    )
    assert bool(re.search("[\u0400-\u04ff]", words)) == (language == "ru")
    number = f"{imbalance(train_tiny_moe(balance_coef=0.0).final_shares(LAST)):.2f}"
    assert (number.replace(".", ",") if language == "ru" else number) in words
    plt.close(fig)


def test_the_figure_is_byte_reproducible_and_differs_by_theme():
    light = render("moe-tokens-per-expert", theme="light")
    assert ET.fromstring(light).tag.endswith("svg")
    assert light == render("moe-tokens-per-expert", theme="light")
    assert light != render("moe-tokens-per-expert", theme="dark")


def test_the_loop_is_the_one_the_cache_runs():
    """`train_tiny_moe` is `moe_training_loop` seeded and on one thread (the notebook
    prints the loop's source as what runs)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            direct = moe_training_loop(0.0, 30, 0, TINY_MOE)
        finally:
            torch.set_num_threads(threads)
    assert direct.shares == train_tiny_moe(balance_coef=0.0).shares[:30]
