"""Tests for `literate.decoding.sampling`.

What is checked, and against what:

- the source notebook's scalar reference `token_distribution` (copied below verbatim in
  its arithmetic): its printed scenario ([3, 2, 1, 0] under T=1, T=2, top-k=2, top-p=0.9),
  its two tie cases exactly, and agreement on hypothesis-generated vectors with ties;
- properties (hypothesis, derandomised): probabilities sum to one, top-k keeps the k
  largest and every token tied with the k-th (as Hugging Face and nanoGPT do), top-p
  keeps the smallest prefix reaching p, lower temperature sharpens, T -> 0 is argmax,
  batched equals row by row, greedy ignores the filters;
- equality with Hugging Face's `TemperatureLogitsWarper`, `TopKLogitsWarper` and
  `TopPLogitsWarper` applied in `generate`'s order, on random batches in float32 and
  float64 (top-k bit-identical also on integer-valued logits full of ties), and every
  documented difference, each exhibited by a test;
- where values are read: `check_logits` refuses NaN, +inf, rows with no finite logit and
  too small a temperature in the entry points (`next_token_distribution`, `greedy_step`,
  `sample_step`), with one host sync; the filters read no values at all (counted with a
  `TorchFunctionMode`), so NaN passes through them as it passes through PyTorch;
- `draw` (token for token `torch.multinomial`'s draw for the same generator, without its
  two value checks), sampling (reproducible, vectorised, the 20,000-draw frequency check),
  `sampler` (settings checked once, top-k against the vocabulary at every call, no host
  sync per call, draws that follow `next_token_distribution`),
  `decode_trace` (EOS, length limit, callables, `choose=`), dtypes, and every error path.

Every random tensor comes from a `torch.Generator` with a fixed seed.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.generation.logits_process import (
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from literate.decoding.sampling import (
    as_step_function,
    check_logits,
    decode_trace,
    draw,
    filter_logits,
    greedy_step,
    next_token_distribution,
    sample_step,
    sampler,
    top_k_filter,
    top_p_filter,
)
from literate.tools.syncs import HostReads as HostSyncs

F64 = torch.float64
F32 = torch.float32
PROPERTY = settings(derandomize=True, deadline=None, max_examples=60)
LIGHT = settings(
    derandomize=True, deadline=None, max_examples=30
)  # cross-checks of the above


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def kept(scores: torch.Tensor) -> torch.Tensor:
    """Which tokens a filter left in (not -inf)."""
    return torch.isfinite(scores)


def kth_largest(rows: torch.Tensor, k: int) -> torch.Tensor:
    """The k-th largest value of each row, [..., 1], from a full sort (not `topk`)."""
    return rows.sort(dim=-1, descending=True).values[..., k - 1 : k]


def count_syncs(call):
    """(what `call()` returned, how many host syncs it made)."""
    with HostSyncs() as syncs:
        result = call()
    return result, len(syncs.calls)


# --------------------------------------------------------------------------------------
# A scalar reference in plain Python, one row at a time
# --------------------------------------------------------------------------------------


def token_distribution(logits, temperature=1.0, top_k=None, top_p=None):
    """Return probabilities for one finite logit vector; apply temperature, k, then p."""
    values = list(logits)
    if not values or any(
        isinstance(x, bool) or not isinstance(x, Real) or not math.isfinite(x)
        for x in values
    ):
        raise ValueError("logits must be a nonempty vector of finite real numbers")
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, Real)
        or not math.isfinite(temperature)
        or temperature <= 0
    ):
        raise ValueError("temperature must be finite and positive")
    if top_k is not None and (
        isinstance(top_k, bool)
        or not isinstance(top_k, Integral)
        or not 1 <= top_k <= len(values)
    ):
        raise ValueError("top_k must be an integer in [1, vocabulary size]")
    if top_p is not None and (
        isinstance(top_p, bool)
        or not isinstance(top_p, Real)
        or not math.isfinite(top_p)
        or not 0 < top_p <= 1
    ):
        raise ValueError("top_p must lie in (0, 1]")
    maximum = max(values)
    weights = [math.exp((x - maximum) / temperature) for x in values]
    ranked = sorted(range(len(values)), key=lambda i: (-values[i], i))
    candidates = ranked if top_k is None else ranked[:top_k]
    if top_p is not None and top_p < 1:
        mass = math.fsum(weights[i] for i in candidates)
        cumulative = 0.0
        kept_ids = []
        for i in candidates:
            kept_ids.append(i)
            cumulative += weights[i] / mass
            if cumulative >= top_p:
                break
        candidates = kept_ids
    total = math.fsum(weights[i] for i in candidates)
    selected = set(candidates)
    return [
        weight / total if i in selected else 0.0 for i, weight in enumerate(weights)
    ]


def top_p_margin(logits, temperature, top_k, top_p) -> float:
    """Distance from top_p to the nearest cumulative mass the reference compares it with:
    a tiny margin means the decision is made by rounding, not by the rule."""
    if top_p is None or top_p == 1:
        return math.inf
    maximum = max(logits)
    weights = [math.exp((x - maximum) / temperature) for x in logits]
    ranked = sorted(range(len(logits)), key=lambda i: (-logits[i], i))[
        : top_k or len(logits)
    ]
    mass = math.fsum(weights[i] for i in ranked)
    heads = [
        math.fsum(weights[i] for i in ranked[: n + 1]) / mass
        for n in range(len(ranked))
    ]
    return min(abs(h - top_p) for h in heads)


SCENARIO = {  # the notebook's policies on [3, 2, 1, 0], each filter on its own
    "temperature_1": {},
    "temperature_2": {"temperature": 2},
    "top_k_2": {"top_k": 2},
    "top_p_09": {"top_p": 0.9},
}


@pytest.mark.parametrize("name", sorted(SCENARIO))
def test_seed_scenario_values(name):
    logits = [3.0, 2.0, 1.0, 0.0]
    ours = next_token_distribution(
        torch.tensor(logits, dtype=F64), **SCENARIO[name]
    ).tolist()
    theirs = token_distribution(logits, **SCENARIO[name])
    # Equal to one or two units in the last place: the reference divides by an fsum,
    # torch's softmax multiplies by a reciprocal of a plain sum.
    assert max(abs(a - b) for a, b in zip(ours, theirs)) <= 1e-16
    assert [a == 0.0 for a in ours] == [
        b == 0.0 for b in theirs
    ]  # the same tokens removed


def test_seed_scenario_matches_the_notebooks_hand_built_truncations():
    z = torch.tensor([3.0, 2.0, 1.0, 0.0], dtype=F64)
    for count, settings_ in [(2, {"top_k": 2}), (3, {"top_p": 0.9})]:
        truncated = torch.zeros_like(z)
        truncated[:count] = torch.softmax(z[:count], dim=0)
        assert torch.allclose(
            next_token_distribution(z, **settings_), truncated, atol=1e-15, rtol=0
        )


def test_seed_top_p_tie_case_exactly():
    assert next_token_distribution(torch.zeros(4, dtype=F64), top_p=0.5).tolist() == [
        0.5,
        0.5,
        0.0,
        0.0,
    ]
    assert token_distribution([0.0, 0.0, 0.0, 0.0], top_p=0.5) == [0.5, 0.5, 0.0, 0.0]


def test_seed_exact_k_tie_case_keeps_both_tokens_here_as_hugging_face_does():
    """The reference cuts ties at the k-th place to exactly k (lower id first): [1, 0].
    Our top-k keeps every token tied with the k-th, as Hugging Face's TopKLogitsWarper
    does, so both tokens stay (the exact-k variant is shown and checked in chapter 6)."""
    assert token_distribution([0.0, 0.0], top_k=1) == [
        1.0,
        0.0,
    ]  # all the mass on the first of two ties
    assert next_token_distribution(torch.zeros(2, dtype=F64), top_k=1).tolist() == [
        0.5,
        0.5,
    ]
    theirs = torch.softmax(hf_filter(torch.zeros(1, 2, dtype=F64), top_k=1), -1)
    assert theirs.tolist() == [[0.5, 0.5]]


@st.composite
def policies(draw, *, vocab_min: int = 1, vocab_max: int = 9):
    """Logits with frequent ties (multiples of 1/2), and a temperature, top-k, top-p."""
    vocab = draw(st.integers(vocab_min, vocab_max))
    logits = [
        x / 2
        for x in draw(st.lists(st.integers(-8, 8), min_size=vocab, max_size=vocab))
    ]
    temperature = draw(st.sampled_from([0.3, 0.5, 1.0, 1.7, 3.0]))
    top_k = draw(st.none() | st.integers(1, vocab))
    top_p = draw(
        st.none()
        | st.sampled_from([0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 1.0])
        | st.floats(0.01, 1.0)
    )
    return logits, temperature, top_k, top_p


def with_ties(logits: list[float], top_k: int | None) -> int | None:
    """The k for which the reference's exact-k cut keeps what our top-k keeps: k plus
    every token tied with the k-th largest logit."""
    if top_k is None:
        return None
    kth = sorted(logits, reverse=True)[top_k - 1]
    return sum(x >= kth for x in logits)


@LIGHT
@given(policies())
def test_equals_the_seed_reference_including_ties(policy):
    """Against the reference with k widened to the tokens tied with the k-th: then the
    two keep the same set, and top-p, which ranks ties lower id first in both, agrees."""
    logits, temperature, top_k, top_p = policy
    top_k_ties = with_ties(logits, top_k)
    if top_p_margin(logits, temperature, top_k_ties, top_p) < 1e-9:
        return  # mass exactly p: decided by rounding (see the boundary tests below)
    ours = next_token_distribution(
        torch.tensor(logits, dtype=F64),
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
    )
    theirs = token_distribution(
        logits, temperature=temperature, top_k=top_k_ties, top_p=top_p
    )
    assert [p > 0 for p in ours.tolist()] == [p > 0 for p in theirs]
    assert max(abs(a - b) for a, b in zip(ours.tolist(), theirs)) < 1e-15


def test_seed_decode_trace_results():
    assert decode_trace(
        [[3.0, 2.0, 1.0, 0.0], [0.0, 0.0, 0.0, 3.0]], eos_id=3, max_new_tokens=3
    ) == ([0, 3], "eos")
    assert decode_trace([[3.0, 2.0, 1.0, 0.0]] * 3, eos_id=3, max_new_tokens=3) == (
        [0, 0, 0],
        "length_limit",
    )


# --------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------


@st.composite
def batches(draw, *, distinct: bool = False):
    """A seeded random [B, V] float64 batch (distinct values unless ties are wanted)."""
    seed = draw(st.integers(0, 2**31 - 1))
    b, v = draw(st.integers(1, 6)), draw(st.integers(1, 40))
    scale = draw(st.sampled_from([0.1, 1.0, 4.0, 20.0]))
    rows = torch.randn(b, v, generator=gen(seed), dtype=F64) * scale
    if not distinct:
        rows = torch.round(rows)  # integers: many ties
    return rows


@PROPERTY
@given(batches(), st.data())
def test_probabilities_sum_to_one_and_removed_tokens_are_exactly_zero(rows, data):
    v = rows.shape[-1]
    temperature = data.draw(st.floats(0.05, 10.0))
    top_k = data.draw(st.none() | st.integers(1, v))
    top_p = data.draw(st.none() | st.floats(0.01, 1.0))
    dtype = data.draw(st.sampled_from([F32, F64]))
    x = rows.to(dtype)
    filtered = filter_logits(x, temperature=temperature, top_k=top_k, top_p=top_p)
    probs = torch.softmax(filtered, dim=-1)
    assert torch.equal(
        probs,
        next_token_distribution(x, temperature=temperature, top_k=top_k, top_p=top_p),
    )
    assert probs.shape == x.shape and probs.dtype == dtype
    tol = 1e-12 if dtype == F64 else 1e-5
    assert ((probs.sum(-1) - 1).abs() <= tol).all()
    assert (probs[~kept(filtered)] == 0).all() and (probs >= 0).all()
    assert torch.equal(
        filtered[kept(filtered)], (x / temperature)[kept(filtered)]
    )  # survivors untouched


@PROPERTY
@given(batches(distinct=True), st.data())
def test_top_k_keeps_exactly_the_k_largest_without_ties(rows, data):
    k = data.draw(st.integers(1, rows.shape[-1]))
    survivors = kept(top_k_filter(rows, k))
    assert (survivors.sum(-1) == k).all()
    assert torch.equal(survivors, rows >= rows.topk(k, dim=-1).values[..., -1:])


@PROPERTY
@given(batches(), st.data())
def test_top_k_keeps_every_token_tied_with_the_kth(rows, data):
    """Integer logits, so many ties: kept = every logit >= the k-th largest, which is k
    tokens when the k-th is not tied with the (k+1)-th and more when it is. Survivors
    keep their values bit for bit; the rest are -inf."""
    k = data.draw(st.integers(1, rows.shape[-1]))
    filtered = top_k_filter(rows, k)
    survivors = kept(filtered)
    assert torch.equal(survivors, rows >= kth_largest(rows, k))
    assert (survivors.sum(-1) >= k).all()
    if k < rows.shape[-1]:
        untied = (kth_largest(rows, k) > kth_largest(rows, k + 1))[..., 0]  # [B]
        assert torch.equal(survivors.sum(-1) == k, untied)
    assert torch.equal(filtered[survivors], rows[survivors])
    assert (filtered[~survivors] == -math.inf).all()


@PROPERTY
@given(batches(), st.data())
def test_top_k_is_bit_identical_to_hugging_face_with_ties(rows, data):
    k = data.draw(st.integers(1, rows.shape[-1]))
    dtype = data.draw(st.sampled_from([F32, F64]))
    x = rows.to(dtype)
    assert torch.equal(top_k_filter(x, k), TopKLogitsWarper(k)(None, x))


@PROPERTY
@given(batches(distinct=True), st.data())
def test_top_k_is_bit_identical_to_hugging_face_without_ties(rows, data):
    k = data.draw(st.integers(1, rows.shape[-1]))
    dtype = data.draw(st.sampled_from([F32, F64]))
    x = rows.to(dtype)
    assert torch.equal(top_k_filter(x, k), TopKLogitsWarper(k)(None, x))


@PROPERTY
@given(batches(distinct=True), st.floats(0.01, 0.999))
def test_top_p_keeps_the_smallest_prefix_whose_mass_reaches_p(rows, p):
    survivors = kept(top_p_filter(rows, p))
    probs = torch.softmax(rows, dim=-1)
    for row, keep in zip(probs.tolist(), survivors.tolist()):
        order = sorted(range(len(row)), key=lambda i: -row[i])
        n = sum(keep)
        assert {i for i, flag in enumerate(keep) if flag} == set(order[:n])  # a prefix
        head = math.fsum(row[i] for i in order[:n])
        shorter = math.fsum(row[i] for i in order[: n - 1])
        if min(abs(head - p), abs(shorter - p)) < 1e-12:
            continue  # mass exactly p: rounding decides
        assert head >= p and shorter < p  # reaches p, and is the smallest that does


@PROPERTY
@given(batches(distinct=True), st.floats(0.05, 5.0), st.floats(1.01, 4.0))
def test_lower_temperature_sharpens(rows, t, factor):
    colder = next_token_distribution(rows, temperature=t)
    warmer = next_token_distribution(rows, temperature=t * factor)

    def entropy(p):
        return -(p * torch.log(p.clamp_min(1e-300))).sum(-1)

    assert (colder.amax(-1) >= warmer.amax(-1) - 1e-12).all()
    assert (entropy(colder) <= entropy(warmer) + 1e-9).all()


@PROPERTY
@given(batches(distinct=True))
def test_temperature_to_zero_approaches_argmax(rows):
    top2 = rows.topk(min(2, rows.shape[-1]), dim=-1).values
    gap = (top2[:, 0] - top2[:, -1]).min().item() if rows.shape[-1] > 1 else 1.0
    if gap < 1e-6:
        return
    t = gap / 1000  # every rival is at least 1000 temperatures below the top
    one_hot = torch.nn.functional.one_hot(greedy_step(rows), rows.shape[-1]).to(F64)
    assert (next_token_distribution(rows, temperature=t) - one_hot).abs().max() <= 1e-12


@LIGHT
@given(batches(), st.data())
def test_batched_equals_row_by_row(rows, data):
    v = rows.shape[-1]
    kwargs = {
        "temperature": data.draw(st.sampled_from([0.5, 1.0, 2.0])),
        "top_k": data.draw(st.none() | st.integers(1, v)),
        "top_p": data.draw(st.none() | st.sampled_from([0.3, 0.8, 1.0])),
    }
    together = filter_logits(rows, **kwargs)
    one_by_one = torch.stack([filter_logits(row, **kwargs) for row in rows])
    assert torch.equal(together, one_by_one)
    deeper = rows.reshape(1, *rows.shape).expand(2, *rows.shape)  # [2, B, V]
    assert torch.equal(filter_logits(deeper, **kwargs), together.expand(2, *rows.shape))


@LIGHT
@given(batches(), st.data())
def test_greedy_ignores_every_filter_and_ties_go_to_the_lower_id(rows, data):
    v = rows.shape[-1]
    filtered = filter_logits(
        rows,
        temperature=data.draw(st.floats(0.05, 10.0)),
        top_k=data.draw(st.none() | st.integers(1, v)),
        top_p=data.draw(st.none() | st.floats(0.01, 1.0)),
    )
    assert torch.equal(filtered.argmax(-1), greedy_step(rows))
    firsts = [
        max(range(v), key=lambda i: (row[i], -i)) for row in rows.tolist()
    ]  # lowest id among maxima
    assert greedy_step(rows).tolist() == firsts


@LIGHT
@given(batches(distinct=True), st.floats(0.1, 5.0), st.data())
def test_temperature_and_top_k_commute(rows, t, data):
    k = data.draw(st.integers(1, rows.shape[-1]))
    assert torch.equal(kept(top_k_filter(rows / t, k)), kept(top_k_filter(rows, k)))


def test_top_p_commutes_with_neither_temperature_nor_top_k():
    z = torch.tensor([3.0, 2.0, 1.0, 0.0], dtype=F64)
    assert kept(filter_logits(z, temperature=2.0, top_p=0.9)).sum() == 4
    assert kept(top_p_filter(z, 0.9) / 2.0).sum() == 3
    assert kept(filter_logits(z, top_k=3, top_p=0.9)).sum() == 2
    assert kept(top_k_filter(top_p_filter(z, 0.9), 3)).sum() == 3


def test_top_p_one_keeps_everything_and_equals_no_filter():
    rows = torch.randn(4, 30, generator=gen(2), dtype=F64) * 30  # far tails
    assert torch.equal(filter_logits(rows, top_p=1.0), filter_logits(rows))


def test_filters_accept_what_an_earlier_filter_removed():
    rows = torch.randn(3, 10, generator=gen(3), dtype=F64)
    once = top_k_filter(rows, 4)
    assert torch.equal(top_k_filter(once, 4), once)
    assert torch.equal(
        top_k_filter(once, 8), once
    )  # k beyond the survivors keeps them all
    assert kept(top_p_filter(once, 0.999)).sum(-1).le(4).all()


# --------------------------------------------------------------------------------------
# Equal to Hugging Face's warpers, and every difference exhibited
# --------------------------------------------------------------------------------------


def hf_filter(scores, temperature=1.0, top_k=None, top_p=None, min_tokens_to_keep=1):
    """Hugging Face's warpers on [B, V], in `generate`'s order (temperature, top-k, top-p)."""
    input_ids = torch.zeros(
        scores.shape[0], 1, dtype=torch.long
    )  # ignored by these three
    scores = TemperatureLogitsWarper(float(temperature))(input_ids, scores)
    if top_k is not None:
        scores = TopKLogitsWarper(top_k, min_tokens_to_keep=min_tokens_to_keep)(
            input_ids, scores
        )
    if top_p is not None:
        scores = TopPLogitsWarper(top_p, min_tokens_to_keep=min_tokens_to_keep)(
            input_ids, scores
        )
    return scores


HF_SETTINGS = [
    (1.0, None, None),
    (0.7, None, None),
    (1.0, 5, None),
    (1.0, None, 0.9),
    (0.5, 20, 0.8),
    (1.3, 50, 0.95),
    (2.0, 3, 0.3),
    (1.0, 100, 0.5),
]


@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
@pytest.mark.parametrize("temperature, top_k, top_p", HF_SETTINGS)
def test_equals_hugging_face_warpers_on_random_batches(
    dtype, temperature, top_k, top_p
):
    g = gen(HF_SETTINGS.index((temperature, top_k, top_p)))
    scores = (torch.randn(64, 100, generator=g, dtype=F64) * 3).to(dtype)
    ours = filter_logits(scores, temperature=temperature, top_k=top_k, top_p=top_p)
    theirs = hf_filter(scores, temperature, top_k, top_p)
    assert ours.dtype == theirs.dtype == dtype
    assert torch.equal(ours, theirs)  # same tokens removed, bit-identical survivors
    assert torch.equal(torch.softmax(ours, -1), torch.softmax(theirs, -1))


def test_equals_hugging_face_on_more_leading_axes_after_flattening():
    scores = torch.randn(2, 3, 5, 50, generator=gen(4), dtype=F64)  # [..., V]
    ours = filter_logits(scores, temperature=0.8, top_k=10, top_p=0.7)
    theirs = hf_filter(scores.reshape(-1, 50), 0.8, 10, 0.7).reshape(scores.shape)
    assert torch.equal(ours, theirs)


def test_top_k_tie_at_the_kth_value_keeps_all_tied_as_hugging_face_does():
    scores = torch.tensor([[3.0, 2.0, 2.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    assert kept(hf_filter(scores, top_k=2)).tolist() == [
        [True, True, True, False],
        [True] * 4,
    ]
    assert kept(filter_logits(scores, top_k=2)).tolist() == [
        [True, True, True, False],
        [True] * 4,
    ]
    assert torch.equal(filter_logits(scores, top_k=2), hf_filter(scores, top_k=2))


TIED_SETTINGS = [(1.0, 1), (1.0, 5), (0.7, 2), (1.3, 20), (2.0, 99), (0.5, 100)]


@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
@pytest.mark.parametrize("temperature, top_k", TIED_SETTINGS)
def test_equals_hugging_face_on_integer_logits_full_of_ties(dtype, temperature, top_k):
    """Integer-valued logits in [-9, 9]: the k-th value is tied in most rows. Temperature
    and top-k agree bit for bit (top-p ranks ties differently: see the next tests)."""
    g = gen(100 + TIED_SETTINGS.index((temperature, top_k)))
    scores = torch.round(torch.randn(64, 100, generator=g, dtype=F64) * 3).to(dtype)
    ours = filter_logits(scores, temperature=temperature, top_k=top_k)
    theirs = hf_filter(scores, temperature, top_k)
    assert torch.equal(ours, theirs)
    assert torch.equal(torch.softmax(ours, -1), torch.softmax(theirs, -1))
    if top_k < 100:
        assert (kept(ours).sum(-1) > top_k).any()  # the ties were there, and were kept


def test_difference_top_p_ties_hf_keeps_the_higher_ids():
    # Ascending sort puts the lower ids of a tie first, and HF removes from the bottom.
    scores = torch.zeros(1, 4, dtype=F64)
    assert torch.softmax(hf_filter(scores, top_p=0.5), -1).tolist() == [
        [0.0, 0.0, 0.5, 0.5]
    ]
    assert next_token_distribution(scores, top_p=0.5).tolist() == [[0.5, 0.5, 0.0, 0.0]]


@pytest.mark.parametrize(
    "probabilities, p, ours_keep, hf_keep",
    [
        (
            [0.5, 0.4, 0.1],
            0.9,
            2,
            3,
        ),  # our head sum is 0.9 exactly; HF's tail beats 1 - 0.9
        (
            [0.7, 0.2, 0.1],
            0.7,
            2,
            1,
        ),  # softmax gives 0.6999999999999998 < 0.7: we keep one more
        ([0.4, 0.3, 0.2, 0.1], 0.4, 1, 2),
    ],
)
def test_difference_mass_exactly_p_is_decided_by_rounding(
    probabilities, p, ours_keep, hf_keep
):
    scores = torch.log(torch.tensor([probabilities], dtype=F64))
    assert math.isclose(
        math.fsum(sorted(probabilities, reverse=True)[: min(ours_keep, hf_keep)]), p
    )  # on paper: exactly p
    assert int(kept(filter_logits(scores, top_p=p)).sum()) == ours_keep
    assert int(kept(hf_filter(scores, top_p=p)).sum()) == hf_keep


def test_the_two_top_p_rules_agree_away_from_the_boundary():
    """Mass above a token < p  <=>  mass at or below it > 1 - p: same rule, different sums."""
    g = gen(5)
    disagreements = 0
    for _ in range(12):
        scores = torch.randn(64, 30, generator=g, dtype=F64) * 2
        p = float(torch.rand((), generator=g, dtype=F64)) * 0.98 + 0.01
        disagreements += int(
            (
                kept(filter_logits(scores, top_p=p)) != kept(hf_filter(scores, top_p=p))
            ).sum()
        )
    assert disagreements == 0


def test_difference_min_tokens_to_keep_has_no_counterpart():
    scores = torch.tensor([[2.0, 1.0, 0.0]])
    assert kept(hf_filter(scores, top_p=0.1, min_tokens_to_keep=2)).tolist() == [
        [True, True, False]
    ]
    assert kept(filter_logits(scores, top_p=0.1)).tolist() == [[True, False, False]]
    assert torch.equal(
        hf_filter(scores, top_p=0.1), filter_logits(scores, top_p=0.1)
    )  # the default, 1, agrees


def test_difference_top_p_one_hf_removes_tokens_whose_probability_underflows():
    scores = torch.tensor([[0.0, -200.0]])  # exp(-200) underflows to 0 in float32
    assert torch.softmax(scores, -1).tolist() == [[1.0, 0.0]]
    assert hf_filter(scores, top_p=1.0).tolist() == [[0.0, -math.inf]]
    assert filter_logits(scores, top_p=1.0).tolist() == [[0.0, -200.0]]
    assert torch.equal(
        torch.softmax(hf_filter(scores, top_p=1.0), -1),
        next_token_distribution(scores, top_p=1.0),
    )


def test_difference_hf_accepts_settings_we_refuse():
    scores = torch.tensor([[2.0, 1.0, 0.0]])
    assert kept(hf_filter(scores, top_p=0.0)).tolist() == [
        [True, False, False]
    ]  # p = 0: greedy
    with pytest.raises(ValueError, match=r"^top_p must be finite and > 0, got 0\.0$"):
        filter_logits(scores, top_p=0.0)
    assert torch.equal(hf_filter(scores, top_k=10), scores)  # k > V: silently clamped
    with pytest.raises(
        ValueError, match=r"^top_k must be in \[1, vocabulary size 3\], got 10$"
    ):
        filter_logits(scores, top_k=10)


def test_difference_hf_refuses_an_int_temperature_we_accept():
    with pytest.raises(
        ValueError, match=r"^`temperature` \(=2\)"
    ):  # Hugging Face's message
        TemperatureLogitsWarper(2)
    assert filter_logits(torch.tensor([2.0, 1.0]), temperature=2).tolist() == [1.0, 0.5]


def test_difference_hf_top_p_takes_batch_vocab_only():
    with pytest.raises(IndexError):
        TopPLogitsWarper(0.5)(None, torch.zeros(4))  # a single [V] vector
    with pytest.raises(RuntimeError):
        TopPLogitsWarper(0.5)(None, torch.randn(2, 3, 5, generator=gen(6)))  # [B, T, V]
    assert filter_logits(torch.zeros(4), top_p=0.5).shape == (4,)
    assert filter_logits(torch.randn(2, 3, 5, generator=gen(6)), top_p=0.5).shape == (
        2,
        3,
        5,
    )


# --------------------------------------------------------------------------------------
# Where values are read: check_logits in the entry points, nothing in the filters
# --------------------------------------------------------------------------------------


def test_the_sync_counter_sees_every_conversion():
    """So that a count of 0 below means something."""
    t = torch.tensor([1.0, 2.0])
    calls = [
        lambda: bool(t[0]),
        lambda: t[0].item(),
        lambda: t.tolist(),
        lambda: int(t[0]),
        lambda: float(t[0]),
        lambda: [0, 1, 2][torch.tensor(1)],
        lambda: 1 if t.all() else 0,
    ]
    assert [count_syncs(call)[1] for call in calls] == [1] * len(calls)
    assert count_syncs(lambda: t * 2 + t.amax())[1] == 0


FILTER_CALLS = {
    "filter_logits": lambda x: filter_logits(x, temperature=0.7, top_k=3, top_p=0.9),
    "filter_logits_k": lambda x: filter_logits(x, top_k=2),
    "filter_logits_p": lambda x: filter_logits(x, temperature=2.0, top_p=0.5),
    "top_k_filter": lambda x: top_k_filter(x, 3),
    "top_p_filter": lambda x: top_p_filter(x, 0.8),
}
NAN = math.nan


@pytest.mark.parametrize("name", sorted(FILTER_CALLS))
def test_filters_read_no_values(name):
    """No host sync in a filter, on good logits and on bad ones alike: NaN, +inf and rows
    of -inf pass through without an error (as through PyTorch's own layers)."""
    good = torch.randn(4, 10, generator=gen(20), dtype=F64)
    bad = good.clone()
    bad[0, 2], bad[1, 5], bad[2] = NAN, math.inf, -math.inf
    for x in (good, bad, good.float(), torch.full((2, 5), NAN)):
        result, syncs = count_syncs(lambda: FILTER_CALLS[name](x))
        assert syncs == 0 and result.shape == x.shape


@pytest.mark.parametrize("name", sorted(FILTER_CALLS))
def test_a_nan_logit_stays_nan_or_is_removed(name):
    """NaN is never laundered into a finite logit, and nothing raises."""
    x = torch.randn(6, 10, generator=gen(21), dtype=F64)
    where = torch.zeros_like(x, dtype=torch.bool)
    where[torch.arange(6), torch.tensor([0, 3, 9, 5, 5, 1])] = True
    where[5] = True  # a row of nothing but NaN
    x = x.masked_fill(where, NAN)
    out = FILTER_CALLS[name](x)
    assert (out[where].isnan() | (out[where] == -math.inf)).all()


def test_with_nan_top_k_does_what_hugging_face_does():
    """torch.topk ranks NaN above every number: a NaN is kept, and when it is the k-th
    largest every comparison with it is False, so nothing is removed. The same in HF."""
    x = torch.tensor([[2.0, NAN, 0.0, 1.0], [1.0, NAN, 0.0, 3.0], [NAN, NAN, 0.0, 1.0]])
    for k in (1, 2, 3):
        torch.testing.assert_close(
            top_k_filter(x, k),
            TopKLogitsWarper(k)(None, x),
            atol=0,
            rtol=0,
            equal_nan=True,
        )
    assert top_k_filter(x, 2)[0].tolist()[::2] == [2.0, -math.inf]


ENTRY_POINTS = {
    "next_token_distribution": lambda x: next_token_distribution(x),
    "next_token_distribution_filtered": lambda x: next_token_distribution(
        x, top_k=1, top_p=0.5
    ),
    "greedy_step": lambda x: greedy_step(x),
    "sample_step": lambda x: sample_step(x, generator=gen(0)),
}
BAD_VALUES = {
    "nan": torch.tensor([1.0, NAN, 0.0]),
    "plus_inf": torch.tensor([1.0, math.inf, 0.0]),
    "all_minus_inf": torch.tensor([-math.inf, -math.inf, -math.inf]),
    "nan_in_a_batch": torch.tensor([[1.0, 0.0, 0.0], [0.0, NAN, 0.0]]),
    "plus_inf_in_a_batch": torch.tensor([[1.0, 0.0, 0.0], [0.0, math.inf, 0.0]]),
    "every_row_minus_inf": torch.full((2, 3), -math.inf),
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("bad", sorted(BAD_VALUES))
def test_entry_points_refuse_bad_logit_values(entry, bad):
    with pytest.raises(
        ValueError,
        match=r"^logits holds NaN or \+inf, or a row where every token is -inf$",
    ):
        ENTRY_POINTS[entry](BAD_VALUES[bad])


def test_entry_points_refuse_one_row_of_minus_inf_among_good_rows():
    """A batch where one row has no finite logit left (every token removed) must be
    refused like the single row above: softmax of that row is NaN, and greedy picks id 0
    of a row where no token is possible. Currently it passes the check (sample_step then
    fails inside torch.multinomial): check_logits tests
    `~torch.isfinite(scaled).any(dim=-1).any()`, "no row at all has a finite entry",
    where "some row has none", `(~torch.isfinite(scaled).any(dim=-1)).any()`, is meant."""
    batch = torch.tensor([[1.0, 0.0, -1.0], [-math.inf, -math.inf, -math.inf]])
    for entry in sorted(ENTRY_POINTS):
        with pytest.raises(
            ValueError,
            match=r"^logits holds NaN or \+inf, or a row where every token is -inf$",
        ):
            ENTRY_POINTS[entry](batch)


def test_minus_inf_is_how_a_token_is_removed_and_is_accepted():
    x = torch.tensor([[1.0, -math.inf, 0.0], [-math.inf, 2.0, -math.inf]], dtype=F64)
    probs = next_token_distribution(x)
    assert probs[0, 1] == 0 and probs[1].tolist() == [0.0, 1.0, 0.0]
    assert greedy_step(x).tolist() == [0, 1]
    assert sample_step(x, generator=gen(1))[1] == 1


def test_check_logits_names_its_argument_and_returns_the_logits():
    x = torch.tensor([[1.0, 0.0]])
    assert check_logits("scores", x) is x
    with pytest.raises(
        ValueError,
        match=r"^scores holds NaN or \+inf, or a row where every token is -inf$",
    ):
        check_logits("scores", torch.tensor([NAN, 0.0]))
    with pytest.raises(
        TypeError, match=r"^scores must be a floating-point tensor, got torch\.int64$"
    ):
        check_logits("scores", torch.tensor([1, 2]))
    with pytest.raises(
        ValueError, match=r"^scores must be \[\.\.\., V\] with V >= 1, got \(\)$"
    ):
        check_logits("scores", torch.tensor(1.0))
    with pytest.raises(
        ValueError, match=r"^scores must be \[\.\.\., V\] with V >= 1, got \(3, 0\)$"
    ):
        check_logits("scores", torch.empty(3, 0))


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_entry_points_read_the_values_once(entry):
    """One host sync for the whole batch, whatever the filters."""
    x = torch.randn(8, 30, generator=gen(22), dtype=F64)
    _, syncs = count_syncs(lambda: ENTRY_POINTS[entry](x))
    assert syncs == 1


# --------------------------------------------------------------------------------------
# Drawing
# --------------------------------------------------------------------------------------


def test_frequency_check_of_the_source_notebook():
    z = torch.tensor([3.0, 2.0, 1.0, 0.0], dtype=F64)
    probs = next_token_distribution(z, top_p=0.9)
    draws = sample_step(z.expand(20_000, 4), top_p=0.9, generator=gen(7))
    assert draws.shape == (20_000,) and draws.dtype == torch.int64
    frequencies = torch.bincount(draws, minlength=4).double() / draws.numel()
    assert (frequencies - probs).abs().max() < 0.015
    assert (draws != 3).all()  # removed: never drawn


def test_sampling_is_reproducible_and_keeps_leading_axes():
    logits = torch.randn(2, 3, 20, generator=gen(8), dtype=F64)
    a = sample_step(logits, temperature=0.7, top_k=5, generator=gen(9))
    b = sample_step(logits, temperature=0.7, top_k=5, generator=gen(9))
    assert a.shape == (2, 3) and torch.equal(a, b)
    top5 = logits.topk(5, dim=-1).indices
    assert (top5 == a[..., None]).any(-1).all()  # only survivors are drawn
    assert sample_step(torch.tensor([0.0, 5.0, 1.0]), generator=gen(1)).shape == ()


def test_top_k_one_sampling_is_greedy():
    logits = torch.randn(50, 30, generator=gen(10))
    assert torch.equal(
        sample_step(logits, top_k=1, generator=gen(11)), greedy_step(logits)
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_upcast_to_float32(dtype):
    logits = torch.randn(3, 16, generator=gen(12)).to(dtype)
    probs = next_token_distribution(logits, temperature=0.8, top_p=0.9)
    assert probs.dtype == F32
    assert torch.equal(
        probs, next_token_distribution(logits.float(), temperature=0.8, top_p=0.9)
    )
    assert sample_step(logits, generator=gen(1)).shape == (3,)
    assert torch.equal(greedy_step(logits), logits.float().argmax(-1))


# --------------------------------------------------------------------------------------
# sampler: the `choose` function of a model's generate
# --------------------------------------------------------------------------------------


def test_sampler_draws_follow_next_token_distribution():
    """A frequency check, through the sampler: 20,000 draws of one batch."""
    z = torch.tensor([3.0, 2.0, 1.0, 0.0], dtype=F64)
    for settings_ in ({"top_p": 0.9}, {"temperature": 2.0, "top_k": 3}):
        probs = next_token_distribution(z, **settings_)
        draws = sampler(**settings_, generator=gen(7))(z.expand(20_000, 4))
        assert draws.shape == (20_000,) and draws.dtype == torch.int64
        frequencies = torch.bincount(draws, minlength=4).double() / draws.numel()
        assert (frequencies - probs).abs().max() < 0.015
        assert (
            draws[:, None] != torch.nonzero(probs == 0).flatten()[None]
        ).all()  # removed: never drawn


def test_sampler_draws_what_sample_step_draws_from_the_same_generator_state():
    logits = torch.randn(16, 40, generator=gen(23), dtype=F64)
    for settings_ in (
        {},
        {"temperature": 0.6},
        {"top_k": 7},
        {"top_p": 0.8},
        {"temperature": 1.4, "top_k": 12, "top_p": 0.9},
    ):
        ours = sampler(**settings_, generator=gen(24))(logits)
        assert torch.equal(ours, sample_step(logits, **settings_, generator=gen(24)))


def test_sampler_is_reproducible_with_a_seeded_generator():
    logits = torch.randn(8, 50, generator=gen(25))
    draws = [
        sampler(temperature=1.5, top_p=0.95, generator=gen(seed))(logits)
        for seed in (3, 3, 4)
    ]
    assert torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], draws[2])
    choose = sampler(temperature=1.5, generator=gen(5))
    assert not all(
        torch.equal(choose(logits), choose(logits)) for _ in range(3)
    )  # the state advances


def test_sampler_with_top_k_one_is_greedy():
    logits = torch.randn(50, 30, generator=gen(26))
    assert torch.equal(sampler(top_k=1, generator=gen(27))(logits), greedy_step(logits))


def test_sampler_reads_no_values_per_call():
    choose = sampler(temperature=0.8, top_k=5, top_p=0.9, generator=gen(28))
    logits = torch.randn(4, 30, generator=gen(29))
    ids, syncs = count_syncs(lambda: choose(logits))
    assert syncs == 0 and ids.shape == (4,) and ids.dtype == torch.int64


@pytest.mark.parametrize(
    "settings_, error, pattern",
    [
        (
            {"temperature": 0.0},
            ValueError,
            r"^temperature must be finite and > 0, got 0\.0$",
        ),
        (
            {"temperature": -1.0},
            ValueError,
            r"^temperature must be finite and > 0, got -1\.0$",
        ),
        (
            {"temperature": math.inf},
            ValueError,
            r"^temperature must be finite and > 0, got inf$",
        ),
        (
            {"temperature": True},
            TypeError,
            r"^temperature must be a real number, got bool$",
        ),
        (
            {"temperature": "1"},
            TypeError,
            r"^temperature must be a real number, got str$",
        ),
        ({"top_k": 0}, ValueError, r"^top_k must be >= 1, got 0$"),
        ({"top_k": 2.0}, TypeError, r"^top_k must be an int, got float$"),
        ({"top_k": True}, TypeError, r"^top_k must be an int, got bool$"),
        ({"top_p": 0.0}, ValueError, r"^top_p must be finite and > 0, got 0\.0$"),
        ({"top_p": 1.5}, ValueError, r"^top_p must be in \(0, 1\], got 1\.5$"),
        ({"top_p": math.nan}, ValueError, r"^top_p must be finite and > 0, got nan$"),
        ({"top_p": True}, TypeError, r"^top_p must be a real number, got bool$"),
        (
            {"generator": 7},
            TypeError,
            r"^generator must be a torch\.Generator, got int$",
        ),
    ],
)
def test_sampler_checks_its_settings_when_it_is_made(settings_, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        sampler(**settings_)
    assert type(info.value) is error


def test_sampler_checks_top_k_against_the_vocabulary_at_every_call():
    choose = sampler(top_k=9, generator=gen(30))  # the vocabulary is not known yet
    assert choose(torch.zeros(2, 10)).shape == (2,)  # 9 of 10: fine
    with pytest.raises(
        ValueError, match=r"^top_k must be in \[1, vocabulary size 4\], got 9$"
    ):
        choose(
            torch.zeros(2, 4)
        )  # a later call with a smaller vocabulary is refused too
    _, syncs = count_syncs(lambda: choose(torch.zeros(2, 10)))
    assert syncs == 0  # from the shape: metadata, no value read


# --------------------------------------------------------------------------------------
# draw: the exponential race, torch.multinomial's own algorithm without its checks
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, F64])
def test_draw_returns_the_tokens_multinomial_returns_for_the_same_generator(dtype):
    probs = torch.softmax(
        torch.randn(300, 37, generator=gen(31), dtype=F64) * 2, -1
    ).to(dtype)
    probs[:, :4] = 0  # removed tokens
    probs[7] = 0
    probs[7, 11] = 1  # one certain token
    for seed in (0, 1, 2):
        ours = draw(probs, gen(seed))
        theirs = torch.multinomial(probs, 1, generator=gen(seed))[:, 0]
        assert torch.equal(ours, theirs)
        assert (ours >= 4).all() and ours[7] == 11
    one_row = probs[0]  # [V] -> a 0-dim id, as multinomial's [1]
    assert torch.equal(
        draw(one_row, gen(5)), torch.multinomial(one_row, 1, generator=gen(5))[0]
    )
    leading = probs[:30].reshape(5, 6, 37)  # [..., V]: more leading axes, one call
    assert torch.equal(draw(leading, gen(6)).flatten(), draw(probs[:30], gen(6)))


def test_draw_reads_no_value_and_runs_none_of_multinomials_checks():
    """What chapter 6 says of this PyTorch: multinomial checks the probabilities with two
    `aten::_assert_async` calls (no host wait on a GPU, a ruined CUDA context when one
    fails); draw runs neither and reads nothing. host_reads sees neither: C++ is
    invisible to it."""
    from torch.profiler import profile

    probs = torch.softmax(torch.randn(4, 10, generator=gen(32)), -1)

    def aten_calls(function, *args):
        with profile() as recorded:
            function(*args)
        return [event.name for event in recorded.events()]

    assert aten_calls(torch.multinomial, probs, 1).count("aten::_assert_async") == 2
    in_draw = aten_calls(draw, probs)
    assert not {"aten::_assert_async", "aten::item", "aten::_local_scalar_dense"} & set(
        in_draw
    )
    assert count_syncs(lambda: draw(probs, gen(0)))[1] == 0
    assert (
        count_syncs(lambda: torch.multinomial(probs, 1))[1] == 0
    )  # its reads are in C++


def test_draw_checks_nothing_a_nan_row_gives_a_token_where_multinomial_raises():
    probs = torch.tensor([[0.5, 0.5, 0.0], [math.nan, math.nan, math.nan]])
    assert draw(probs, gen(0))[1] == 0  # the argmax of NaNs: the first
    with pytest.raises(RuntimeError, match="probability tensor contains either"):
        torch.multinomial(probs, 1)


# --------------------------------------------------------------------------------------
# decode_trace
# --------------------------------------------------------------------------------------


def test_eos_at_the_limit_is_eos_and_eos_is_kept():
    assert decode_trace([[0.0, 1.0], [1.0, 0.0]], eos_id=0, max_new_tokens=2) == (
        [1, 0],
        "eos",
    )
    assert decode_trace([[1.0, 0.0]], eos_id=0, max_new_tokens=1) == ([0], "eos")


def test_without_eos_only_the_limit_stops():
    assert decode_trace([[0.0, 1.0]] * 4, eos_id=None, max_new_tokens=4) == (
        [1, 1, 1, 1],
        "length_limit",
    )


def test_a_callable_sees_the_tokens_generated_so_far():
    seen = []

    def steps(generated):
        seen.append(generated)
        return torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0]).index_fill(
            0, torch.tensor([len(generated) + 1]), 1.0
        )

    assert decode_trace(steps, eos_id=4, max_new_tokens=10) == ([1, 2, 3, 4], "eos")
    assert seen == [(), (1,), (1, 2), (1, 2, 3)]


def test_trace_accepts_tensors_and_samples_with_choose():
    rows = torch.tensor([[0.0, 3.0, 1.0], [2.0, 0.0, 0.0]])
    assert decode_trace(rows, eos_id=0, max_new_tokens=5) == ([1, 0], "eos")
    g1, g2 = gen(13), gen(13)
    one = decode_trace(
        [rows[0]] * 6,
        eos_id=None,
        max_new_tokens=6,
        choose=lambda z: sample_step(z, generator=g1),
    )
    two = decode_trace(
        [rows[0]] * 6,
        eos_id=None,
        max_new_tokens=6,
        choose=lambda z: sample_step(z, generator=g2),
    )
    assert one == two and one[1] == "length_limit"
    many = decode_trace(
        [torch.zeros(3)] * 60,
        eos_id=None,
        max_new_tokens=60,
        choose=lambda z: sample_step(z, generator=g1),
    )
    assert set(many[0]) == {
        0,
        1,
        2,
    }  # it does sample: uniform logits, every token drawn


def test_ties_in_a_trace_go_to_the_lower_id():
    assert decode_trace([[1.0, 1.0, 1.0]], eos_id=2, max_new_tokens=1) == (
        [0],
        "length_limit",
    )


def test_the_default_choice_checks_the_logits_of_every_step():
    with pytest.raises(
        ValueError,
        match=r"^logits holds NaN or \+inf, or a row where every token is -inf$",
    ):
        decode_trace([[1.0, 0.0], [NAN, 0.0]], eos_id=None, max_new_tokens=2)


# --------------------------------------------------------------------------------------
# Every error path
# --------------------------------------------------------------------------------------

Z = torch.tensor([3.0, 2.0, 1.0, 0.0])


@pytest.mark.parametrize(
    "call, kind, pattern",
    [
        (
            lambda: filter_logits([3.0, 2.0]),
            TypeError,
            r"^logits must be a floating-point tensor, got list$",
        ),
        (
            lambda: filter_logits(torch.tensor([3, 2])),
            TypeError,
            r"^logits must be a floating-point tensor, got torch\.int64$",
        ),
        (
            lambda: filter_logits(torch.tensor([True, False])),
            TypeError,
            r"^logits must be a floating-point tensor, got torch\.bool$",
        ),
        (
            lambda: next_token_distribution(torch.tensor(1.0)),
            ValueError,
            r"^logits must be \[\.\.\., V\] with V >= 1, got \(\)$",
        ),
        (
            lambda: next_token_distribution(torch.empty(0)),
            ValueError,
            r"^logits must be \[\.\.\., V\] with V >= 1, got \(0,\)$",
        ),
        (
            lambda: next_token_distribution(torch.empty(3, 0)),
            ValueError,
            r"^logits must be \[\.\.\., V\] with V >= 1, got \(3, 0\)$",
        ),
        (
            lambda: greedy_step(torch.empty(3, 0)),
            ValueError,
            r"^logits must be \[\.\.\., V\] with V >= 1",
        ),
        (
            lambda: filter_logits(torch.empty(0), top_k=1),
            ValueError,
            r"^logits must be \[\.\.\., V\] with V >= 1, got \(0,\)$",
        ),
        (
            lambda: filter_logits(Z, temperature=0.0),
            ValueError,
            r"^temperature must be finite and > 0, got 0\.0$",
        ),
        (
            lambda: filter_logits(Z, temperature=-1.0),
            ValueError,
            r"^temperature must be finite and > 0, got -1\.0$",
        ),
        (
            lambda: filter_logits(Z, temperature=math.inf),
            ValueError,
            r"^temperature must be finite and > 0, got inf$",
        ),
        (
            lambda: filter_logits(Z, temperature=math.nan),
            ValueError,
            r"^temperature must be finite and > 0, got nan$",
        ),
        (
            lambda: filter_logits(Z, temperature=True),
            TypeError,
            r"^temperature must be a real number, got bool$",
        ),
        (
            lambda: filter_logits(Z, temperature="hot"),
            TypeError,
            r"^temperature must be a real number, got str$",
        ),
        (lambda: filter_logits(Z, top_k=0), ValueError, r"^top_k must be >= 1, got 0$"),
        (
            lambda: filter_logits(Z, top_k=-1),
            ValueError,
            r"^top_k must be >= 1, got -1$",
        ),
        (
            lambda: filter_logits(Z, top_k=5),
            ValueError,
            r"^top_k must be in \[1, vocabulary size 4\], got 5$",
        ),
        (
            lambda: filter_logits(Z, top_k=True),
            TypeError,
            r"^top_k must be an int, got bool$",
        ),
        (
            lambda: filter_logits(Z, top_k=2.0),
            TypeError,
            r"^top_k must be an int, got float$",
        ),
        (
            lambda: filter_logits(Z, top_p=0.0),
            ValueError,
            r"^top_p must be finite and > 0, got 0\.0$",
        ),
        (
            lambda: filter_logits(Z, top_p=-0.5),
            ValueError,
            r"^top_p must be finite and > 0, got -0\.5$",
        ),
        (
            lambda: filter_logits(Z, top_p=1.0000001),
            ValueError,
            r"^top_p must be in \(0, 1\], got 1\.0000001$",
        ),
        (
            lambda: filter_logits(Z, top_p=math.nan),
            ValueError,
            r"^top_p must be finite and > 0, got nan$",
        ),
        (
            lambda: filter_logits(Z, top_p=True),
            TypeError,
            r"^top_p must be a real number, got bool$",
        ),
        (
            lambda: filter_logits(Z, top_p="0.9"),
            TypeError,
            r"^top_p must be a real number, got str$",
        ),
        (
            lambda: next_token_distribution(Z, top_k=9),
            ValueError,
            r"^top_k must be in \[1, vocabulary size 4\], got 9$",
        ),
        (
            lambda: next_token_distribution(Z, temperature=0),
            ValueError,
            r"^temperature must be finite and > 0, got 0$",
        ),
        (
            lambda: greedy_step(torch.tensor([1, 2])),
            TypeError,
            r"^logits must be a floating-point tensor, got torch\.int64$",
        ),
        (
            lambda: sample_step(Z, generator=7),
            TypeError,
            r"^generator must be a torch\.Generator, got int$",
        ),
        (
            lambda: sample_step(Z, temperature=0),
            ValueError,
            r"^temperature must be finite and > 0, got 0$",
        ),
        (
            lambda: top_k_filter(torch.tensor([1, 0]), 1),
            TypeError,
            r"^logits must be a floating-point tensor, got torch\.int64$",
        ),
        (
            lambda: top_k_filter("logits", 1),
            TypeError,
            r"^logits must be a floating-point tensor, got str$",
        ),
        (lambda: top_k_filter(Z, 0), ValueError, r"^top_k must be >= 1, got 0$"),
        (
            lambda: top_p_filter("logits", 0.5),
            TypeError,
            r"^logits must be a floating-point tensor, got str$",
        ),
        (
            lambda: top_p_filter(Z, 2.0),
            ValueError,
            r"^top_p must be in \(0, 1\], got 2\.0$",
        ),
        (
            lambda: decode_trace([[1.0, 0.0]], eos_id=2, max_new_tokens=1),
            ValueError,
            r"^eos_id must be < vocabulary size 2, got 2$",
        ),
        (
            lambda: decode_trace([[1.0, 0.0]], eos_id=-1, max_new_tokens=1),
            ValueError,
            r"^eos_id must be >= 0, got -1$",
        ),
        (
            lambda: decode_trace([[1.0, 0.0]], eos_id=True, max_new_tokens=1),
            TypeError,
            r"^eos_id must be an int, got bool$",
        ),
        (
            lambda: decode_trace([[1.0, 0.0]], eos_id=1.0, max_new_tokens=1),
            TypeError,
            r"^eos_id must be an int, got float$",
        ),
        (
            lambda: decode_trace([[1.0, 0.0]], eos_id=1, max_new_tokens=0),
            ValueError,
            r"^max_new_tokens must be >= 1, got 0$",
        ),
        (
            lambda: decode_trace([[1.0, 0.0]], eos_id=1, max_new_tokens=-2),
            ValueError,
            r"^max_new_tokens must be >= 1, got -2$",
        ),
        (
            lambda: decode_trace([[1.0, 0.0]], eos_id=1, max_new_tokens=True),
            TypeError,
            r"^max_new_tokens must be an int, got bool$",
        ),
        (
            lambda: decode_trace([[1.0, 0.0]], eos_id=1, max_new_tokens=2.0),
            TypeError,
            r"^max_new_tokens must be an int, got float$",
        ),
        (
            lambda: decode_trace([[1.0, 0.0]], eos_id=1, max_new_tokens=3),
            ValueError,
            r"^steps ran out after 1 logit vectors, before EOS or the length limit$",
        ),
        (
            lambda: decode_trace(torch.zeros(1, 2, 3), eos_id=1, max_new_tokens=1),
            ValueError,
            r"^steps gave logits of shape \(2, 3\) after 0 tokens, expected \[V\]$",
        ),
        (
            lambda: decode_trace(42, eos_id=1, max_new_tokens=1),
            TypeError,
            r"^steps must be a callable \(tokens so far -> logits \[V\]\) or an iterable of logit vectors, got int$",
        ),
        (
            lambda: decode_trace("abc", eos_id=1, max_new_tokens=1),
            TypeError,
            r"^steps must be a callable .*, got str$",
        ),
        (
            lambda: decode_trace(torch.tensor([1.0, 0.0]), eos_id=1, max_new_tokens=1),
            ValueError,
            r"^steps gave logits of shape \(\) after 0 tokens, expected \[V\]$",
        ),
        (
            lambda: decode_trace([[1.0, 0.0]], eos_id=1, max_new_tokens=1, choose=3),
            TypeError,
            r"^choose must be callable \(logits \[V\] -> token id\), got int$",
        ),
        (
            lambda: decode_trace([torch.tensor([1, 0])], eos_id=1, max_new_tokens=1),
            TypeError,
            r"^logits must be a floating-point tensor, got torch\.int64$",
        ),
        (
            lambda: check_logits("scores", torch.tensor([1, 2])),
            TypeError,
            r"^scores must be a floating-point tensor, got torch\.int64$",
        ),
        (
            lambda: as_step_function(None),
            TypeError,
            r"^steps must be a callable .*, got NoneType$",
        ),
    ],
)
def test_bad_input_raises_an_error_naming_the_argument(call, kind, pattern):
    with pytest.raises(kind, match=pattern) as info:
        call()
    assert type(info.value) is kind


def test_filters_refuse_logits_without_a_vocabulary_axis():
    """A 0-d tensor has no vocabulary axis: a metadata fact, free to check where the
    argument enters. Currently top_k_filter and filter_logits(top_k=...) fail inside,
    with `IndexError: tuple index out of range` from `logits.shape[-1]`, instead of the
    ValueError naming `logits` that check_logits gives for the same input."""
    for call in (
        lambda: top_k_filter(torch.tensor(1.0), 1),
        lambda: filter_logits(torch.tensor(1.0), top_k=1),
    ):
        with pytest.raises(
            ValueError, match=r"^logits must be \[\.\.\., V\] with V >= 1, got \(\)$"
        ):
            call()


TOO_SMALL = [
    (
        lambda: next_token_distribution(torch.tensor([1.0, 0.0]), temperature=1e-50),
        "1e-50",
        "float32",
    ),  # 1e50 > float32 max
    (
        lambda: next_token_distribution(torch.tensor([1e30, 0.0]), temperature=1e-10),
        "1e-10",
        "float32",
    ),
    (
        lambda: next_token_distribution(
            torch.tensor([1e30, 0.0]), temperature=1e-10, top_k=1
        ),
        "1e-10",
        "float32",
    ),
    (
        lambda: next_token_distribution(
            torch.tensor([1e30, 0.0]), temperature=1e-10, top_p=0.5
        ),
        "1e-10",
        "float32",
    ),
    (
        lambda: sample_step(
            torch.tensor([1.0, 0.0]), temperature=1e-50, generator=gen(1)
        ),
        "1e-50",
        "float32",
    ),
    (
        lambda: next_token_distribution(
            torch.tensor([1e300, 0.0], dtype=F64), temperature=1e-10
        ),
        "1e-10",
        "float64",
    ),
    (
        lambda: next_token_distribution(torch.tensor([-1.0, -2.0]), temperature=1e-39),
        "1e-39",
        "float32",
    ),  # all -> -inf
    (
        lambda: check_logits("logits", torch.tensor([[2.0, 0.0]]), temperature=1e-40),
        "1e-40",
        "float32",
    ),
]


@pytest.mark.parametrize("call, temperature, dtype", TOO_SMALL)
def test_a_temperature_too_small_for_the_dtype_is_an_error_not_nan(
    call, temperature, dtype
):
    """logits / T overflowing to inf would make softmax NaN (inf - inf); it is refused,
    and the error names the temperature and the dtype."""
    with pytest.raises(
        ValueError,
        match=rf"^temperature {temperature} is too small for these torch\.{dtype} "
        r"logits: logits / temperature overflows; for the T -> 0 limit use greedy_step$",
    ):
        call()


def test_a_temperature_too_small_for_one_row_of_a_batch_is_an_error_too():
    """The second row is all negative: / 1e-39 sends every entry to -inf in float32, so
    softmax of it is NaN. Refused for the single row (above); in a batch it passes, by
    the same precedence slip as test_entry_points_refuse_one_row_of_minus_inf_among_good_rows."""
    with pytest.raises(
        ValueError,
        match=r"^temperature 1e-39 is too small for these torch\.float32 logits: "
        r"logits / temperature overflows; for the T -> 0 limit use greedy_step$",
    ):
        next_token_distribution(
            torch.tensor([[0.0, 0.0], [-1.0, -2.0]]), temperature=1e-39
        )


def test_a_small_temperature_that_fits_the_dtype_is_still_allowed():
    """The check refuses overflow only: the same T on float64 logits, or on logits that
    stay finite, gives the one-hot distribution (exactly, no tolerance needed); a logit
    that falls to -inf is fine while its row keeps a finite one."""
    assert next_token_distribution(
        torch.tensor([1.0, 0.0], dtype=F64), temperature=1e-50
    ).tolist() == [1.0, 0.0]
    assert next_token_distribution(
        torch.tensor([1.0, 0.0]), temperature=1e-30
    ).tolist() == [1.0, 0.0]
    assert next_token_distribution(
        torch.tensor([0.0, 0.0]), temperature=1e-30
    ).tolist() == [0.5, 0.5]
    both = next_token_distribution(
        torch.tensor([[0.0, 0.0], [-1.0, 0.0]]), temperature=1e-39
    )
    assert both.tolist() == [
        [0.5, 0.5],
        [0.0, 1.0],
    ]  # -1 / 1e-39 = -inf: removed, the limit T -> 0


def test_filter_logits_leaves_a_too_small_temperature_to_the_entry_points():
    """filter_logits reads no values, so it cannot see the overflow: it returns inf."""
    out, syncs = count_syncs(
        lambda: filter_logits(torch.tensor([1e30, 0.0]), temperature=1e-10)
    )
    assert syncs == 0 and out.tolist() == [math.inf, 0.0]


def test_the_steps_error_says_when_the_prepared_sequence_ran_out():
    with pytest.raises(
        ValueError,
        match=r"^steps ran out after 2 logit vectors, before EOS or the length limit$",
    ):
        decode_trace([[1.0, 0.0], [1.0, 0.0]], eos_id=1, max_new_tokens=5)
