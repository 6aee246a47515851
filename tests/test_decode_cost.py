"""The deterministic half of `literate.numbers.decode_cost` (the timings are printed by
`python -m literate.numbers.decode_cost`, never asserted): the KV-cache bytes per token by
formula against live caches, the per-step traffic counted while the real decoding code
runs, the counter itself, the torch.cat baseline, and the figure that draws the counts.

The tiny Llama: 2 layers, 2 key/value heads of width 32, float32, so one token's keys
and values take 2 x 2 x 32 x 4 = 512 bytes per layer, 1024 over the layers."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch

from literate.decoding.generate import cached_run, new_decode_cache
from literate.figures import FIGURES
from literate.figures import decoding as decoding_figures
from literate.numbers import decode_cost
from literate.numbers.decode_cost import (
    STRATEGIES,
    TRAFFIC_POSITIONS,
    ConcatCache,
    WriteCounter,
    concat_decode_cache,
    kv_bytes_facts,
    step_traffic,
    tiny_llama,
)
from literate.numbers.params import kv_cache_bytes_per_token
from literate.parts.cache import DecodeCache, KVCache


@pytest.fixture(scope="module")
def traffic():
    return step_traffic()


@pytest.fixture(scope="module")
def facts():
    return kv_bytes_facts()


# --- bytes per token ---------------------------------------------------------------------
@pytest.mark.parametrize("name, h_kv", [("gpt2-tiny", 4), ("llama-tiny", 2)])
def test_bytes_per_token_by_formula_are_the_live_caches_nbytes(facts, name, h_kv):
    f = facts["per_token"][name]
    assert (f["n_layers"], f["n_kv_heads"], f["d_head"], f["bytes_per_value"]) == (
        2,
        h_kv,
        32,
        4,
    )
    assert (
        f["formula"]
        == kv_cache_bytes_per_token(2, h_kv, 32, 4)
        == 2 * 2 * h_kv * 32 * 4
    )
    assert f["nbytes"] == f["formula"] * f["batch"] * f["capacity"]
    assert f["measured"] == f["formula"]
    assert (
        0 < f["filled"] < f["capacity"]
    )  # a live cache, partly filled: nbytes is all of it


def test_gqa_and_mqa_save_memory_by_the_exact_factor(facts):
    heads = facts["heads"]
    assert [heads[k]["n_kv_heads"] for k in ("mha", "gqa", "mqa")] == [4, 2, 1]
    assert all(heads[k]["n_heads"] == 4 for k in heads)
    mha, gqa, mqa = (heads[k]["nbytes"] for k in ("mha", "gqa", "mqa"))
    assert mqa < gqa < mha
    assert mha == 2 * gqa == 4 * mqa  # the ratio H / H_kv, exactly
    for f in heads.values():
        assert f["measured"] == f["formula"]
    assert (
        heads["gqa"] == facts["per_token"]["llama-tiny"]
    )  # the tiny Llama is the GQA one


def test_the_facts_refuse_a_prompt_longer_than_the_cache():
    with pytest.raises(
        ValueError, match=r"^prompt must be in \[1, capacity=4\], got 5$"
    ):
        kv_bytes_facts(capacity=4, prompt=5)


# --- the counter ---------------------------------------------------------------------------
def test_the_counter_counts_writes_not_views():
    buffer = torch.zeros(2, 3, 10, 4)
    new = torch.ones(2, 3, 1, 4)
    with WriteCounter() as counter:
        buffer[:, :, 5:6] = new  # a slice (a view) and a copy_ into it
    assert counter.bytes == new.nbytes == 2 * 3 * 4 * 4
    with WriteCounter() as counter:
        grown = torch.cat((buffer, new), dim=2)
    assert counter.bytes == grown.nbytes == 2 * 3 * 11 * 4 * 4
    with WriteCounter() as counter:
        buffer[:, :, :5].transpose(1, 2).reshape(2, 5, 12)  # views, then one real copy
    assert counter.bytes == 2 * 5 * 12 * 4
    with WriteCounter() as counter:
        buffer.view(6, 40)
        buffer[0]
    assert counter.bytes == 0 and counter.ops == 2


# --- the per-step traffic ------------------------------------------------------------------
def test_the_positions_double_from_1_to_512(traffic):
    assert traffic.positions == TRAFFIC_POSITIONS == tuple(2**i for i in range(10))
    assert traffic.n_layers == 2 and traffic.row_bytes == 2 * 2 * 32 * 4
    for counts in (traffic.cache_bytes, traffic.rows_projected, traffic.step_bytes):
        assert tuple(counts) == STRATEGIES
        assert all(len(v) == len(traffic.positions) for v in counts.values())


def test_the_preallocated_cache_writes_one_row_per_layer_at_every_step(traffic):
    per_step = traffic.n_layers * traffic.row_bytes  # 1024 bytes
    assert traffic.cache_bytes["preallocated"] == (per_step,) * len(traffic.positions)
    assert traffic.rows_projected["preallocated"] == (1,) * len(traffic.positions)


def test_the_cat_cache_copies_the_whole_history_at_every_step(traffic):
    per_row = traffic.n_layers * traffic.row_bytes
    assert traffic.cache_bytes["cat"] == tuple(t * per_row for t in traffic.positions)
    assert traffic.rows_projected["cat"] == (1,) * len(
        traffic.positions
    )  # a cache still


def test_without_a_cache_step_t_projects_t_rows_and_stores_nothing(traffic):
    assert traffic.rows_projected["none"] == traffic.positions
    assert traffic.cache_bytes["none"] == (0,) * len(traffic.positions)


def test_the_cat_step_differs_from_the_preallocated_one_by_the_copied_rows_only(
    traffic,
):
    """Everything else the two steps write is the same: the same layers, the same code."""
    per_row = traffic.n_layers * traffic.row_bytes
    pre, cat = traffic.step_bytes["preallocated"], traffic.step_bytes["cat"]
    assert [c - p for p, c in zip(pre, cat, strict=True)] == [
        (t - 1) * per_row for t in traffic.positions
    ]


def test_every_op_of_the_step_without_a_cache_grows_fastest(traffic):
    """From t = 2 on: preallocated < cat < no cache; no cache writes at least t times
    what one token costs; the preallocated step's own writes grow far more slowly than
    the step without a cache (level with torch 2.13's kernel)."""
    pre, cat, none = (traffic.step_bytes[s] for s in STRATEGIES)
    for i, t in enumerate(traffic.positions[1:], start=1):
        assert pre[i] < cat[i] < none[i]
        assert none[i] >= t * none[0] * 0.9
    span = traffic.positions[-1] - traffic.positions[1]
    growth = (pre[-1] - pre[1]) / span  # bytes per key, all layers
    # level with torch 2.13's attention kernel; older kernels write the [t] scores of
    # the one query, still far below what the step without a cache adds per position
    assert 0 <= growth < (none[-1] - none[1]) / span / 10


def test_the_counts_are_deterministic_and_ignore_the_global_seed(traffic):
    torch.manual_seed(123)
    again = decode_cost._traffic.__wrapped__((1, 3, 8))
    assert again.rows_projected == {
        "preallocated": (1, 1, 1),
        "cat": (1, 1, 1),
        "none": (1, 3, 8),
    }
    assert again.cache_bytes["cat"] == (1024, 3 * 1024, 8 * 1024)
    for s in STRATEGIES:
        assert again.step_bytes[s][2] == traffic.step_bytes[s][3]  # t = 8 both times
    assert step_traffic([1, 3, 8]) is step_traffic((1, 3, 8))  # counted once


def test_the_traffic_refuses_bad_positions():
    with pytest.raises(ValueError, match=r"^position must be >= 1, got 0$"):
        step_traffic((0, 1))


# --- the torch.cat baseline ----------------------------------------------------------------
def test_the_cat_cache_decodes_what_the_preallocated_one_does():
    model = tiny_llama()
    ids = torch.randint(0, 256, (2, 9), generator=torch.Generator().manual_seed(3))
    out = {}
    with torch.no_grad():
        for name, make in (("pre", new_decode_cache), ("cat", concat_decode_cache)):
            cache = make(model, 2, 12)
            assert isinstance(cache, DecodeCache)
            steps = [cached_run(model, ids[:, :5], cache)]
            steps += [cached_run(model, ids[:, t : t + 1], cache) for t in range(5, 9)]
            out[name] = torch.cat(steps, dim=1), cache
    assert (
        out["cat"][0] - out["pre"][0]
    ).abs().max() <= 1e-6  # the cache's layout only
    pre, cat = out["pre"][1], out["cat"][1]
    assert all(type(c) is ConcatCache and isinstance(c, KVCache) for c in cat.layers)
    assert cat.nbytes == 9 * 1024 * 2  # what is filled: 9 tokens x 2 rows
    assert pre.nbytes == 12 * 1024 * 2  # what is allocated: the capacity
    for a, b in zip(pre.layers, cat.layers, strict=True):
        assert torch.equal(a.k[:, :, :9], b.k) and torch.equal(a.v[:, :, :9], b.v)


def test_the_cat_cache_keeps_the_kv_cache_checks():
    cache = ConcatCache(1, 2, 3, 32)
    k = torch.zeros(1, 2, 2, 32)
    with torch.no_grad():
        cache.append(k, k)
        with pytest.raises(ValueError, match=r"needs capacity >= 4"):
            cache.append(k, k)
        with pytest.raises(ValueError, match=r"the cache holds \[batch"):
            cache.append(torch.zeros(1, 1, 1, 32), torch.zeros(1, 1, 1, 32))
    cache.truncate(1)
    assert cache.next_pos == 1 and cache.k.shape == (1, 2, 1, 32)
    cache.reset()
    assert cache.next_pos == 0 and cache.nbytes == 0


# --- the figure ----------------------------------------------------------------------------
def test_the_figure_is_registered_and_draws_what_decode_cost_counts():
    assert FIGURES["kv-cache-step-cost"].draw is decoding_figures.step_cost_figure
    assert decoding_figures.step_traffic is decode_cost.step_traffic
    for name in decode_cost.__all__:  # nothing of the measurement is redefined
        assert getattr(decoding_figures, name, getattr(decode_cost, name)) is getattr(
            decode_cost, name
        )


@pytest.mark.parametrize("language, theme", [("en", "light"), ("ru", "dark")])
def test_the_figure_plots_the_counts(traffic, language, theme):
    fig = decoding_figures.step_cost_figure(language=language, theme=theme)
    left, right = fig.axes
    names = decoding_figures.STEP_COST_LABELS[language]["strategies"]
    into = decoding_figures.STEP_COST_LABELS[language]["into_cache"]
    lines = {line.get_label(): line for line in left.lines}
    for s in STRATEGIES:
        assert list(lines[names[s]].get_xdata()) == list(traffic.positions)
        assert list(lines[names[s]].get_ydata()) == list(traffic.step_bytes[s])
    for s in ("preallocated", "cat"):
        drawn = lines[f"{names[s]}: {into}"].get_ydata()
        assert list(drawn) == list(traffic.cache_bytes[s])
    assert f"{names['none']}: {into}" not in lines  # no cache, no cache line
    rows = {line.get_label(): list(line.get_ydata()) for line in right.lines}
    assert rows == {names[s]: list(traffic.rows_projected[s]) for s in STRATEGIES}
    assert left.get_yscale() == right.get_yscale() == "log"
    assert left.get_xscale() == right.get_xscale() == "log"
    plt.close(fig)
