"""No host syncs in a forward, and whole-graph capture by torch.compile.

A Python branch on a tensor's value (`if mask.any():`, `.item()`, `int(t)`) makes the host
wait for the device (a sync per call on a GPU) and stops `torch.compile(fullgraph=True)`
from capturing the graph. The layers read no values; the value checks run once where data
enters (ids at a model's forward, one per generated token for the EOS test). Counted with
`literate.tools.syncs.host_reads` (a `TorchFunctionMode` that sees every `__bool__`, `item`,
`tolist`, `__int__`, `__float__` and `__index__` on a tensor).
"""

from __future__ import annotations

import pytest
import torch

from literate.decoding.sampling import filter_logits, sampler
from literate.models.gpt2 import gpt2_model
from literate.models.transformer2017 import EncoderDecoder
from literate.parts.blocks import decoder_layer_2017, encoder_layer_2017, gpt2_block
from literate.parts.multi_head import MultiHeadAttention
from literate.tools.syncs import host_reads


def syncs(fn, *args, **kwargs) -> int:
    return host_reads(fn, *args, **kwargs)


def test_the_counter_sees_a_branch_on_a_value():
    t = torch.ones(3)
    assert syncs(lambda: bool(t.any())) == 1
    assert syncs(lambda: t.sum().item()) == 1
    assert syncs(lambda: t * 2) == 0


def test_the_counter_sees_every_size_that_depends_on_values():
    """One-argument where is a nonzero; bincount and argwhere size their output by the
    values; repeat_interleave does with a tensor of repeats, unless told output_size."""
    x = torch.tensor([1, 0, 2])
    for reads in (
        lambda: torch.where(x > 0),
        lambda: x.argwhere(),
        lambda: x.bincount(),
        lambda: torch.bincount(x),
        lambda: x.repeat_interleave(x),
        lambda: x.repeat_interleave(repeats=x),
        lambda: torch.repeat_interleave(x),
        lambda: x.repeat_interleave(x, dim=0),
    ):
        assert syncs(reads) == 1
    for free in (
        lambda: torch.where(x > 0, x, 0),
        lambda: x.repeat_interleave(2),
        lambda: torch.repeat_interleave(x, x, output_size=3),
    ):
        assert syncs(free) == 0


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return {
        "gpt2": gpt2_model(50, 16, 32, 4, 2, dropout=0.0).eval(),
        "encdec": EncoderDecoder(13, 16, 2, 32, 1, dropout=0.0, max_length=16).eval(),
        "ids": torch.randint(0, 50, (2, 12)),
        "source": torch.tensor([[3, 4, 2, 0, 0], [5, 6, 7, 2, 0]]),
        "targets": torch.tensor([[4, 3, 2, 0], [7, 6, 5, 2]]),
    }


@pytest.mark.parametrize("n_kv_heads, rope", [(4, False), (2, True), (1, True)])
def test_attention_and_blocks_read_no_values_without_padding(n_kv_heads, rope):
    x = torch.randn(2, 6, 32)
    attn = MultiHeadAttention(32, 4, n_kv_heads, rope=rope)
    assert syncs(attn, x, causal=True) == 0
    assert syncs(attn, x, causal=False) == 0
    with torch.no_grad():
        cache = attn.new_cache(2, 8)
        assert syncs(attn, x[:, :5], causal=True, cache=cache) == 0
        assert syncs(attn, x[:, 5:], causal=True, cache=cache) == 0
    assert syncs(gpt2_block(32, 4, dropout=0.0), x) == 0
    assert syncs(encoder_layer_2017(32, 4, 64, dropout=0.0), x) == 0
    assert syncs(decoder_layer_2017(32, 4, 64, dropout=0.0), x, x[:, :3]) == 0


def test_a_padding_mask_costs_one_sync_unless_empty_rows_are_zeroed():
    x = torch.randn(2, 6, 32)
    valid = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    attn = MultiHeadAttention(32, 4)
    assert syncs(attn, x, causal=True, key_valid=valid) == 1
    assert syncs(attn, x, causal=True, key_valid=valid, empty_row="zero") == 0


def test_models_check_their_ids_once(tiny):
    assert syncs(tiny["gpt2"], tiny["ids"]) == 1
    assert syncs(tiny["gpt2"].run, tiny["ids"]) == 0
    assert syncs(tiny["encdec"], tiny["source"], tiny["targets"]) == 1


@pytest.mark.parametrize("eos_id", [None, 7])
def test_generate_makes_at_most_one_sync_per_token(tiny, eos_id):
    n = 6
    count = syncs(tiny["gpt2"].generate, tiny["ids"][:, :4], n, eos_id=eos_id)
    assert count == (
        1 if eos_id is None else n
    )  # the prompt's ids, then EOS tests but the last
    sampled = syncs(
        tiny["gpt2"].generate,
        tiny["ids"][:, :4],
        n,
        choose=sampler(top_k=5, top_p=0.9, generator=torch.Generator().manual_seed(0)),
    )
    assert sampled == 1
    assert syncs(tiny["encdec"].greedy_decode, tiny["source"], n) <= n


def test_the_sampling_filters_read_no_values():
    logits = torch.randn(3, 40)
    assert syncs(filter_logits, logits, temperature=0.7, top_k=5, top_p=0.9) == 0


def _compiled_equals_eager(module, *args):
    compiled = torch.compile(module, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(*args), module(*args), atol=0, rtol=0)


def test_fullgraph_compile_of_the_gpt2_block_and_model(tiny):
    torch._dynamo.reset()
    block = gpt2_block(32, 4, dropout=0.0).eval()
    _compiled_equals_eager(block, torch.randn(2, 6, 32))
    _compiled_equals_eager(tiny["gpt2"], tiny["ids"])


def test_fullgraph_compile_of_the_encoder_decoder_and_a_rope_gqa_layer(tiny):
    torch._dynamo.reset()
    _compiled_equals_eager(tiny["encdec"], tiny["source"], tiny["targets"])
    attn = MultiHeadAttention(32, 4, 2, rope=True).eval()
    compiled = torch.compile(attn, fullgraph=True, backend="aot_eager")
    x = torch.randn(2, 6, 32)
    with torch.no_grad():  # the RoPE tables are made inside the compiled call
        torch.testing.assert_close(
            compiled(x, causal=True), attn(x, causal=True), atol=0, rtol=0
        )


@pytest.mark.parametrize("base", [1e4, 1.5e5, 5e5, 1e6])
def test_a_fresh_rope_layer_compiles_on_its_first_call(base):
    """The RoPE tables grow inside the first compiled call, and their argument checks run
    there on a float attribute: `math.isfinite` on it broke `fullgraph` for bases other
    than 10,000 (torch 2.13 keeps such floats symbolic); the checks compare instead.
    Chapter 10's LinearScaledRotaryEmbedding (Gemma 3's global layers) grows its tables
    with its float factor alike."""
    from literate.parts.blocks import qwen3_block
    from literate.parts.positions import RotaryEmbedding
    from literate.parts.rope_scaling import LinearScaledRotaryEmbedding

    x = torch.randn(1, 5, 8)
    for make in (
        lambda: RotaryEmbedding(8, base=base),
        lambda: LinearScaledRotaryEmbedding(8, base=base, factor=8.0),
        lambda: LinearScaledRotaryEmbedding(8, base=base, factor=3.0),
    ):
        rope = make()
        compiled = torch.compile(make(), fullgraph=True, backend="eager")
        assert torch.equal(compiled(x), rope(x))
    block, fresh = (qwen3_block(32, 4, 2, 88, d_head=16, rope_base=base) for _ in "ab")
    fresh.load_state_dict(block.state_dict())  # its RoPE tables still empty
    compiled_block = torch.compile(fresh, fullgraph=True, backend="eager")
    with torch.no_grad():
        xs = torch.randn(2, 5, 32)
        assert torch.equal(compiled_block(xs), block(xs))
