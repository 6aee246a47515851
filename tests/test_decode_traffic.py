"""Chapter 8's "Decoding reads every weight": the counts of `literate.numbers.decode_traffic`
against independent ones (the parameters of the built models, the `.nbytes` of real
caches, PyTorch's FlopCounterMode on a batched step, `decoding_flops`), the committed
measurement of `literate.tools.decode_batch` (its structure, and that the page's claim
holds for it), and the figures of `literate.figures.traffic_diagrams` drawing both."""

from __future__ import annotations

import copy
import json

import matplotlib.pyplot as plt
import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from literate.decoding.generate import cached_run, new_decode_cache
from literate.figures import FIGURES, traffic_diagrams
from literate.models.llama import llama_model
from literate.numbers.decode_traffic import (
    TRAFFIC_BATCHES,
    TRAFFIC_MODELS,
    DecodeStep,
    cache_passes_weights_at,
    decode_step,
    published_step,
    step_numbers,
)
from literate.numbers.flops import decoding_flops, published_flops
from literate.numbers.published import published_config, published_model
from literate.parts.multi_head import grouped_attention
from literate.tools import decode_batch
from literate.tools.decode_batch import (
    BATCH_MODEL,
    BATCHES,
    DATA_PATH,
    batch_model,
    check_decode_batch,
    dump,
    load_decode_batch,
    measure,
)

DENSE = ["Llama 2 7B", "Llama 3 8B", "GPT-2 small", "Qwen3-0.6B"]


def read_weights(model: nn.Module) -> list[nn.Parameter]:
    """The parameters a decoding step reads whole: all but the lookup tables (every
    nn.Embedding's weight), unless a Linear multiplies by that table (a tied head)."""
    multiplied = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
    tables = {
        id(m.weight)
        for m in model.modules()
        if isinstance(m, nn.Embedding) and id(m.weight) not in multiplied
    }
    return [p for p in model.parameters() if id(p) not in tables]


# ---------------------------------------------------------------------------------------
# The counts


@pytest.mark.parametrize("name", DENSE)
def test_n_weights_are_the_built_models_parameters_but_its_lookup_tables(name):
    """`step_numbers` counts by formula from the configuration; our loader's model of
    that configuration (meta device) holds exactly that many parameters outside its
    lookup tables (GPT-2: tied head, so only the positions are left out)."""
    model = published_model(name)
    numbers = step_numbers(name)
    assert numbers["n_weights"] == sum(p.numel() for p in read_weights(model))
    attn = model.blocks[0].attn
    layers = len(model.blocks)
    assert numbers["kv_per_token"] == 2 * layers * attn.n_kv_heads * attn.d_head
    assert numbers["attention_per_key"] == 4 * layers * attn.n_heads * attn.d_head


@pytest.mark.parametrize("name", DENSE)
@pytest.mark.parametrize("batch, position", [(1, 1), (3, 17), (16, 4096)])
def test_the_cache_bytes_are_the_buffers_of_a_real_cache(name, batch, position):
    """A cache of `position` slots for `batch` rows of our loader's model, on the meta
    device (float32: 4 bytes a value), holds what the step at `position` reads."""
    model = published_model(name)
    cache = new_decode_cache(model, batch, position)
    step = published_step(name, batch=batch, position=position, bytes_per_value=4)
    assert step.cache_bytes == cache.nbytes
    assert step.weight_bytes == sum(p.nbytes for p in read_weights(model))


@pytest.mark.parametrize("name", ["Llama 2 7B", "Llama 3 8B", "GPT-2 small"])
@pytest.mark.parametrize("batch, position", [(1, 1), (8, 300)])
def test_the_flops_are_decoding_flops_per_row_plus_two_per_gain_and_bias(
    name, batch, position
):
    """`decode_step` counts 2 FLOPs per weight read; `decoding_flops` (chapter 11,
    checked there against FlopCounterMode) counts only what a matmul multiplies. The
    difference is 2 per vector parameter (norm gains, biases) per row, exactly."""
    vectors = sum(p.numel() for p in published_model(name).parameters() if p.ndim == 1)
    step = published_step(name, batch=batch, position=position)
    exact = published_flops(name, position)["total"]
    assert step.flops == batch * (exact + 2 * vectors)
    assert 2 * vectors < 1e-3 * exact  # the docstring's "under a thousandth"


@pytest.mark.parametrize("batch, keys", [(1, 1), (3, 9), (5, 40)])
def test_a_batched_step_costs_batch_times_the_flops(batch, keys):
    """FlopCounterMode on a real cached step of a small Llama with `batch` rows counts
    `batch` times the matmuls of one row; chapter 3's grouped attention of `batch`
    queries over `keys` keys counts the attention; with the vector parameters' 2 FLOPs
    they are `decode_step`'s FLOPs."""
    torch.manual_seed(0)
    model = llama_model(61, 64, 32, 4, 2, 2, 88).eval()
    shape = dict(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_head=8, d_ff=88)
    ids = torch.randint(0, 61, (batch, keys))
    cache = new_decode_cache(model, batch, keys)
    with torch.no_grad():
        if keys > 1:
            cached_run(model, ids[:, :-1], cache)
        with FlopCounterMode(display=False) as counter:
            cached_run(model, ids[:, -1:], cache, last=True)
    matmuls = counter.get_total_flops()
    assert matmuls == batch * decoding_flops(vocab=61, keys=keys, **shape)["matmuls"]
    q, k, v = (torch.randn(batch, n, t, 8) for n, t in ((4, 1), (2, keys), (2, keys)))
    with FlopCounterMode(display=False) as counter:
        grouped_attention(q, k, v)
    attention = 2 * counter.get_total_flops()  # two layers
    weights = read_weights(model)
    vectors = sum(p.numel() for p in weights if p.ndim == 1)
    step = decode_step(
        n_weights=sum(p.numel() for p in weights),
        kv_per_token=2 * 2 * 2 * 8,
        attention_per_key=attention // (batch * keys),
        batch=batch,
        position=keys,
        bytes_per_value=4,
    )
    assert attention == batch * keys * 4 * 2 * 4 * 8  # 4 L H d_head per key and row
    assert step.flops == matmuls + attention + 2 * batch * vectors
    assert step.weight_bytes == sum(p.nbytes for p in weights)
    assert step.cache_bytes == cache.nbytes  # capacity = keys: every slot is read


def test_the_intensity_is_the_batch_and_then_the_group():
    """At position 1 a bfloat16 step does B FLOPs per byte (to 0.5%: the cache's B c of
    N bytes, 0.25% for Llama 2 7B at batch 64); as the position
    grows the cache's H / H_kv FLOPs per byte take over, from above, at every batch."""
    for name in TRAFFIC_MODELS:
        c = published_config(name)
        group = c.num_attention_heads // c.num_key_value_heads
        for batch in (1, 2, 16, 64):
            assert published_step(
                name, batch=batch, position=1
            ).intensity == pytest.approx(batch, rel=5e-3)
            far = [
                published_step(name, batch=batch, position=2**e).intensity
                for e in range(10, 40, 3)
            ]
            assert far[-1] == pytest.approx(group, rel=1e-3)
            if batch > group:
                assert all(a > b > group for a, b in zip(far, far[1:]))


@pytest.mark.parametrize("name", TRAFFIC_MODELS)
@pytest.mark.parametrize("batch", [1, 16, 1000])
def test_the_cache_passes_the_weights_where_it_says(name, batch):
    t = cache_passes_weights_at(name, batch=batch)
    at = published_step(name, batch=batch, position=t)
    assert at.cache_bytes >= at.weight_bytes
    if t > 1:
        before = published_step(name, batch=batch, position=t - 1)
        assert before.cache_bytes < before.weight_bytes


def test_bad_calls_are_refused_naming_the_argument():
    good = dict(n_weights=10, kv_per_token=4, attention_per_key=8, batch=2, position=3)
    assert decode_step(**good) == DecodeStep(20, 48, 2 * (20 + 24))
    for key in good:
        with pytest.raises(ValueError, match=f"^{key} must be >= 1"):
            decode_step(**good | {key: 0})
    with pytest.raises(TypeError, match="^batch must be an int, got bool"):
        decode_step(**good | {"batch": True})
    with pytest.raises(ValueError, match="mixture of experts"):
        step_numbers("Mixtral 8x7B")
    with pytest.raises(ValueError, match="GQA \\+ sliding cache"):
        step_numbers("Mistral 7B v0.1")
    with pytest.raises(ValueError, match="no published configuration named"):
        step_numbers("Llama 9")
    with pytest.raises(TypeError, match="^name must be a str"):
        step_numbers(7)
    with pytest.raises(ValueError, match="^batch must be >= 1"):
        cache_passes_weights_at("Llama 3 8B", batch=0)


# ---------------------------------------------------------------------------------------
# The measurement


def test_the_committed_measurement_is_well_formed_and_written_by_dump():
    data = load_decode_batch()
    assert check_decode_batch(data) == []
    assert [row["batch"] for row in data["rows"]] == list(BATCHES)
    assert data["model"]["parameters"] == sum(
        p.numel() for p in batch_model().parameters()
    )
    assert DATA_PATH.read_text(encoding="utf-8") == dump(data)  # one text per data


def test_the_pages_claim_holds_for_the_committed_measurement():
    """decoding.batch-shares-the-step: the slowest round at batch 8 beats the fastest at
    batch 1, and batch 64's median is below 64 times batch 1's."""
    rows = {row["batch"]: row for row in load_decode_batch()["rows"]}
    assert rows[8]["min"] > rows[1]["max"]
    assert rows[64]["tokens_per_s"] < 64 * rows[1]["tokens_per_s"]
    medians = [row["tokens_per_s"] for row in rows.values()]
    assert medians == sorted(medians)  # the caption: they grow with the batch


def _broken(change) -> list[str]:
    data = copy.deepcopy(load_decode_batch())
    change(data)
    return check_decode_batch(json.loads(json.dumps(data)))


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda d: d.pop("rounds"), "expected the keys"),
        (lambda d: d["rows"][0].update(min=d["rows"][0]["max"] * 2), "min <= "),
        (lambda d: d["rows"][1].update(tokens_per_s=float("nan")), "finite positive"),
        (lambda d: d["rows"][2].update(seconds=1.0), "is not batch x new_tokens"),
        (lambda d: d["rows"].reverse(), "increasing batches"),
        (lambda d: d["machine"].update(threads=2), "threads: expected 1"),
        (lambda d: d["model"].update(d_model=64), "decode_batch.model: expected"),
        (lambda d: d["model"].update(weight_bytes=1), "4 bytes per parameter"),
        (lambda d: d.update(rows=[]), "at least one item"),
        (lambda d: d["rows"][0].update(batch=True), "expected int"),
    ],
)
def test_a_broken_measurement_is_refused(change, problem):
    problems = _broken(change)
    assert any(problem in p for p in problems), problems


def test_load_and_dump_refuse_a_broken_file(tmp_path):
    data = load_decode_batch()
    data["rows"][0]["seconds"] *= 2
    target = tmp_path / "decode_batch.json"
    target.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match="is not a decode_batch file"):
        load_decode_batch(target)
    with pytest.raises(ValueError, match="not a decode_batch measurement"):
        dump(data)


def test_a_small_measurement_is_a_valid_file_and_leaves_the_threads():
    threads = torch.get_num_threads()
    data = measure(batches=(1, 2), rounds=1, new_tokens=2)
    assert torch.get_num_threads() == threads
    assert check_decode_batch(data) == []
    assert [row["batch"] for row in data["rows"]] == [1, 2]
    assert data["model"] == dict(
        BATCH_MODEL,
        parameters=data["model"]["parameters"],
        **{"weight_bytes": 4 * data["model"]["parameters"]},
    )


def test_measure_refuses_bad_settings():
    with pytest.raises(ValueError, match="distinct sizes"):
        measure(batches=(1, 1))
    with pytest.raises(ValueError, match="must fit the context"):
        measure(prompt=60, new_tokens=10)
    with pytest.raises(TypeError, match="^rounds must be an int"):
        measure(rounds=1.5)
    assert decode_batch.__all__ and "load_decode_batch" in decode_batch.__all__


# ---------------------------------------------------------------------------------------
# The figures


def test_the_bytes_figure_draws_published_step():
    fig = traffic_diagrams.bytes_per_token_figure(language="en", theme="light")
    big = max(TRAFFIC_BATCHES)
    for ax, name in zip(fig.axes, TRAFFIC_MODELS):
        lines = {line.get_gid(): line for line in ax.lines}
        positions = list(lines["cache"].get_xdata())
        assert positions == list(traffic_diagrams.model_positions(name))
        assert positions[-1] == published_config(name).max_position_embeddings
        for batch in TRAFFIC_BATCHES:
            drawn = list(lines[f"weights-{batch}"].get_ydata())
            step = published_step(name, batch=batch, position=1)
            assert drawn == [step.weight_bytes / batch / 1e9] * len(positions)
        kv = step_numbers(name)["kv_per_token"]
        assert list(lines["cache"].get_ydata()) == [t * kv * 2 / 1e9 for t in positions]
        meet = cache_passes_weights_at(name, batch=big)
        assert list(lines["meet"].get_xdata()) == [meet]
        texts = [t.get_text() for t in ax.texts]
        assert any(f"{meet:,}".replace(",", "\u202f") in t for t in texts), texts
        assert name in ax.get_title(loc="left")
    plt.close(fig)


def test_the_throughput_figure_draws_the_committed_measurement():
    data = load_decode_batch()
    rows = data["rows"]
    fig = traffic_diagrams.throughput_figure(language="ru", theme="dark")
    (ax,) = fig.axes
    lines = {line.get_gid(): line for line in ax.lines}
    assert list(lines["measured"].get_xdata()) == [r["batch"] for r in rows]
    assert list(lines["measured"].get_ydata()) == [r["tokens_per_s"] for r in rows]
    one = rows[0]["tokens_per_s"]
    assert list(lines["free"].get_ydata()) == [r["batch"] * one for r in rows]
    labels = [t.get_text() for t in ax.texts]
    assert labels == [f"{r['tokens_per_s']:.0f}" for r in rows]
    plt.close(fig)


def test_the_figures_are_registered_with_alt_texts_that_state_the_counts():
    assert FIGURES["decode-bytes-per-token"].draw is (
        traffic_diagrams.bytes_per_token_figure
    )
    assert FIGURES["decode-batch-throughput"].draw is traffic_diagrams.throughput_figure
    alt = FIGURES["decode-bytes-per-token"].alt
    for name in TRAFFIC_MODELS:
        assert f"{cache_passes_weights_at(name, batch=16):,}" in alt
    alt = FIGURES["decode-batch-throughput"].alt
    for row in load_decode_batch()["rows"]:
        assert f"{row['tokens_per_s']:,.0f} at {row['batch']}" in alt
