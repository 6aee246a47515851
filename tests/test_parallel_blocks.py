"""The parallel residual (chapter 7): GPT-J, GPT-NeoX and Cohere blocks against their
Hugging Face layers, partial rotary against HF's RoPE helpers, and where each FFN reads.

- `gptj_block` == `GPTJBlock`, `neox_block` == `GPTNeoXLayer` (use_parallel_residual
  True; with False, a `PreNormBlock` of the same parts), `cohere_block` ==
  `CohereDecoderLayer`: float64, weights copied by `literate.models.parallel`'s loaders
  (every parameter random, gains and biases included, so that a weight sent to the
  wrong place shows), the output and the gradients of the input and of every
  parameter, at 1e-12. HF's attention is "sdpa" with attention_mask=None (causal when
  T_q == T_k). Its "eager" attention with None is not causal (proven below), and agrees
  to float32 only even with an additive causal mask: GPT-J's computes q k^T in float32,
  GPT-NeoX's and Cohere's take the softmax in float32, whatever the input dtype.
- Cohere computes its LayerNorm in float32 and rounds q and k to float32 before RoPE:
  compared as it is at a tolerance derived from float32, and with those two steps
  patched to the input dtype (`cohere_in_input_dtype`, a test-harness patch) at 1e-12.
- Partial rotary: the first rotary_dim coordinates turn as a head of that width would,
  the rest pass bit-identical, and the result equals HF's GPT-NeoX, GPT-J and Cohere
  helpers on q and k, bit for bit.
- Where the FFN reads (hooks during one real forward): serially, the stream the
  attention has updated; in parallel, the same normalised input as the attention.
- No host syncs in a forward (fullgraph compile: the page's claim).

Every random tensor comes from a fixed seed. Importing the HF modules costs ~2 s: every
test that needs them is in this file.
"""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch
from transformers import CohereConfig, GPTJConfig, GPTNeoXConfig
from transformers.models.cohere import modeling_cohere as hf_cohere
from transformers.models.gpt_neox import modeling_gpt_neox as hf_neox
from transformers.models.gptj import modeling_gptj as hf_gptj

from literate.models.parallel import (
    check_block_config,
    cohere_block_from_hf_config,
    gptj_block_from_hf_config,
    load_hf_cohere_block,
    load_hf_gptj_block,
    load_hf_neox_block,
    neox_block_from_hf_config,
    neox_pack_qkv,
    neox_unpack_qkv,
)
from literate.parts.blocks import ParallelBlock, PreNormBlock, gptj_block, neox_block
from literate.parts.multi_head import load_packed_qkv
from literate.parts.positions import RotaryEmbedding, rope_cache
from literate.tools.syncs import host_reads

F64 = torch.float64
TOL = dict(atol=1e-12, rtol=0)
U32 = 2.0**-24  # float32's unit roundoff: rounding to float32 moves v by <= U32 |v|
B, T, D = 2, 7, 32  # 4 heads of 8


def gptj_config(**kw) -> GPTJConfig:
    return GPTJConfig(
        n_embd=D,
        n_head=4,
        rotary_dim=4,
        n_inner=64,
        n_layer=1,
        n_positions=64,
        attn_implementation="sdpa",
        **kw,
    )


def neox_config(parallel: bool = True, act: str = "gelu", **rope) -> GPTNeoXConfig:
    """rotary_pct 0.5: 4 of 8 coordinates turn (with 2, rotate-half and interleaved
    would be the same rotation, and a wrong layout would go unseen)."""
    rope = {
        "rope_type": "default",
        "rope_theta": 10_000.0,
        "partial_rotary_factor": 0.5,
    } | rope
    return GPTNeoXConfig(
        hidden_size=D,
        num_attention_heads=4,
        intermediate_size=64,
        num_hidden_layers=1,
        use_parallel_residual=parallel,
        hidden_act=act,
        rope_parameters=rope,
        attn_implementation="sdpa",
    )


def cohere_config(**kw) -> CohereConfig:
    rope = {"rope_type": "default", "rope_theta": 10_000.0}
    return CohereConfig(
        hidden_size=D,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        num_hidden_layers=1,
        rope_parameters=rope,
        attn_implementation="sdpa",
        **kw,
    )


def randomised(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """float64, eval, every parameter random: a gain or a bias sent to the wrong place
    (or left at 1 or 0) cannot go unseen."""
    module = module.double().eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=F64) * 0.3)
    return module


FAMILIES = {  # name: (config, HF layer, its rotary embedding, ours from config, loader)
    "gptj": (
        gptj_config,
        hf_gptj.GPTJBlock,
        hf_gptj.GPTJRotaryEmbedding,
        gptj_block_from_hf_config,
        load_hf_gptj_block,
    ),
    "neox": (
        neox_config,
        hf_neox.GPTNeoXLayer,
        hf_neox.GPTNeoXRotaryEmbedding,
        neox_block_from_hf_config,
        load_hf_neox_block,
    ),
    "neox_serial": (
        lambda: neox_config(False),
        hf_neox.GPTNeoXLayer,
        hf_neox.GPTNeoXRotaryEmbedding,
        neox_block_from_hf_config,
        load_hf_neox_block,
    ),
    "neox_tanh": (
        lambda: neox_config(act="gelu_new"),
        hf_neox.GPTNeoXLayer,
        hf_neox.GPTNeoXRotaryEmbedding,
        neox_block_from_hf_config,
        load_hf_neox_block,
    ),
    "cohere": (
        cohere_config,
        hf_cohere.CohereDecoderLayer,
        hf_cohere.CohereRotaryEmbedding,
        cohere_block_from_hf_config,
        load_hf_cohere_block,
    ),
}
BLOCKS = ["gptj", "neox", "neox_serial", "cohere"]


def pair(family: str, seed: int = 0):
    """(ours, theirs, call): HF's random layer, ours loaded with its weights, and a
    function that runs HF's layer on x at positions 0 .. T-1 (its position_embeddings
    from the family's rotary embedding: GPT-J's returns (sin, cos))."""
    make_config, layer, rotary, from_config, load = FAMILIES[family]
    config = make_config()
    theirs = randomised(layer(config, 0), seed)
    ours = load(from_config(config).double().eval(), theirs.state_dict(), config)
    rope = rotary(config)

    def call(x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[1]).expand(x.shape[0], -1)
        return theirs(x, position_embeddings=rope(x, positions))

    return ours, theirs, call


def run(module: torch.nn.Module, call, x: torch.Tensor, upstream: torch.Tensor):
    """Output, input gradient and every parameter's gradient (by name) of one call."""
    module.zero_grad(set_to_none=True)
    x = x.detach().clone().requires_grad_(True)
    out = call(x)
    (out * upstream).sum().backward()
    grads = {n: p.grad for n, p in module.named_parameters()}
    assert all(v is not None for v in grads.values())  # every parameter takes part
    return out.detach(), x.grad, grads


def differences(family: str, ours, theirs, call, seed: int = 1) -> dict[str, float]:
    """max |ours - HF| of the output, the input gradient and each parameter's gradient
    (key name + "_scale": the reference's max |value|). HF's parameter gradients are
    renamed and unpacked into our names by the family's loader, as the weights were
    (every map it makes is linear)."""
    g = torch.Generator().manual_seed(seed)
    x, upstream = (torch.randn(B, T, D, generator=g, dtype=F64) for _ in range(2))
    mine, hers = run(ours, ours, x, upstream), run(theirs, call, x, upstream)
    holder = copy.deepcopy(ours)
    FAMILIES[family][4](holder, hers[2], FAMILIES[family][0]())
    theirs_grads = dict(holder.named_parameters())
    assert set(theirs_grads) == set(mine[2])
    pairs = {"out": (mine[0], hers[0]), "x.grad": (mine[1], hers[1])}
    pairs.update({f"{n}.grad": (mine[2][n], theirs_grads[n]) for n in mine[2]})
    result = {}
    for name, (a, b) in pairs.items():
        result[name] = (a - b).abs().max().item()
        result[name + "_scale"] = b.abs().max().item()
    return result


def worst(diffs: dict[str, float]) -> float:
    return max(v for k, v in diffs.items() if not k.endswith("_scale"))


# --- the blocks equal their HF layers ----------------------------------------------


@pytest.mark.parametrize("family", ["gptj", "neox", "neox_serial", "neox_tanh"])
def test_block_equals_its_hf_layer_in_float64(family):
    """Output and every gradient (input, each parameter) at 1e-12."""
    ours, theirs, call = pair(family)
    diffs = differences(family, ours, theirs, call)
    assert worst(diffs) <= TOL["atol"], diffs
    assert type(ours) is (PreNormBlock if family == "neox_serial" else ParallelBlock)


def test_the_configured_blocks_are_our_builders():
    """GPT-J rotates 4 of 8 coordinates, interleaved, one norm; GPT-NeoX
    int(0.5 * 8) = 4, rotate-half, two norms; Cohere the whole head, interleaved,
    one bias-free norm, 2 key/value heads: each is its builder called with the
    config's numbers."""
    gptj = gptj_block_from_hf_config(gptj_config())
    rope = gptj.attn.rope
    assert (rope.rotary_dim, rope.layout, gptj.ffn_norm) == (4, "interleaved", None)
    check_block_config(gptj_block(D, 4, 64, rotary_dim=4), gptj)
    neox = neox_block_from_hf_config(neox_config())
    assert (neox.attn.rope.rotary_dim, neox.attn.rope.layout) == (4, "half")
    check_block_config(neox_block(D, 4, 64, rotary_pct=0.5), neox)
    cohere = cohere_block_from_hf_config(cohere_config())
    assert (cohere.attn.rope.rotary_dim, cohere.attn.rope.layout) == (8, "interleaved")
    assert (cohere.attn.n_kv_heads, cohere.attn_norm.bias, cohere.ffn_norm) == (
        2,
        None,
        None,
    )


def test_gptj_masks_causally_only_under_sdpa():
    """attention_mask=None: sdpa is causal (position 0 ignores the last token), eager
    is not; eager with an additive causal mask computes q k^T in float32, so it agrees
    with us to float32 precision only."""
    ours, theirs, call = pair("gptj")
    g = torch.Generator().manual_seed(2)
    x = torch.randn(B, T, D, generator=g, dtype=F64)
    later = x.clone()
    later[:, -1] = torch.randn(B, D, generator=g, dtype=F64)  # only the last token
    with torch.no_grad():
        assert torch.equal(call(x)[:, 0], call(later)[:, 0])  # sdpa: causal
        theirs.attn.config._attn_implementation = "eager"
        assert not torch.allclose(call(x)[:, 0], call(later)[:, 0])  # eager: not
        blocked = torch.ones(T, T, dtype=torch.bool).triu(1)
        additive = torch.zeros(T, T, dtype=F64).masked_fill(blocked, float("-inf"))
        positions = torch.arange(T).expand(B, -1)
        rope = hf_gptj.GPTJRotaryEmbedding(theirs.attn.config)
        eager = theirs(
            x,
            attention_mask=additive[None, None],
            position_embeddings=rope(x, positions),
        )
        diff = (ours(x) - eager).abs().max().item()
    assert 1e-12 < diff < 64 * U32 * eager.abs().max().item()


# --- GPT-NeoX's packed projection --------------------------------------------------


def test_neox_packs_q_k_v_head_by_head():
    """query_key_value's rows are [H, 3, d_head]: what HF chunks out of each head's
    slice of the packed output is our q, k and v projection of that head; pack and
    unpack are inverse, bit for bit; loading the rows as q; k; v thirds
    (`load_packed_qkv`, nn.MultiheadAttention's layout) makes another block."""
    ours, theirs, call = pair("neox")
    qkv = theirs.attention.query_key_value
    h = torch.randn(B, T, D, dtype=F64)
    projections = (ours.attn.q_proj, ours.attn.k_proj, ours.attn.v_proj)
    with torch.no_grad():
        chunks = qkv(h).view(B, T, 4, 3 * 8).transpose(1, 2).chunk(3, dim=-1)
        for chunk, projection in zip(chunks, projections):
            heads = projection(h).view(B, T, 4, 8).transpose(1, 2)
            torch.testing.assert_close(chunk, heads, **TOL)
    for packed in (qkv.weight, qkv.bias):
        assert torch.equal(neox_pack_qkv(*neox_unpack_qkv(packed, 4), 4), packed)
    naive = copy.deepcopy(ours)
    load_packed_qkv(naive.attn, qkv.weight.detach(), qkv.bias.detach())
    with torch.no_grad():
        assert (naive(h) - call(h)).abs().max() > 1e-2
        torch.testing.assert_close(ours(h), call(h), **TOL)


def test_loaders_check_the_configuration_first():
    """A block of another shape (8 heads for HF's 4: the packed rows would unpack
    wrongly with every shape right) is refused before anything is copied, and so is
    the other topology; what the builders do not implement is refused when the block
    is made."""
    _, theirs, _ = pair("neox")
    wrong = neox_block(D, 8, 64, rotary_pct=0.5).double()  # d_head 4
    before = copy.deepcopy(wrong.state_dict())
    with pytest.raises(ValueError, match="n_heads=8"):
        load_hf_neox_block(wrong, theirs.state_dict(), neox_config())
    assert all(torch.equal(before[k], v) for k, v in wrong.state_dict().items())
    with pytest.raises(ValueError, match="block='ParallelBlock'"):
        load_hf_neox_block(
            neox_block(D, 4, 64, rotary_pct=0.5),
            theirs.state_dict(),
            neox_config(False),
        )
    with pytest.raises(ValueError, match="hidden_act='gelu_fast'"):
        neox_block_from_hf_config(neox_config(act="gelu_fast"))
    with pytest.raises(ValueError, match="use_qk_norm"):
        cohere_block_from_hf_config(cohere_config(use_qk_norm=True))
    with pytest.raises(ValueError, match="RoPE type 'linear'"):
        neox_block_from_hf_config(neox_config(rope_type="linear", factor=2.0))


# --- Cohere: HF's float32 steps ----------------------------------------------------


@contextlib.contextmanager
def cohere_in_input_dtype(layer: hf_cohere.CohereDecoderLayer):
    """Test harness: HF's CohereLayerNorm and Cohere's RoPE run in the input dtype (the
    same formulas without their float32 casts), so that what remains is the block."""
    norm = layer.input_layernorm

    def norm_forward(x):
        mean = x.mean(-1, keepdim=True)
        variance = (x - mean).pow(2).mean(-1, keepdim=True)
        eps = norm.variance_epsilon
        return norm.weight * ((x - mean) * torch.rsqrt(variance + eps))

    def rope(q, k, cos, sin, unsqueeze_dim=1):
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        turn = hf_cohere.rotate_half
        return q * cos + turn(q) * sin, k * cos + turn(k) * sin

    original = hf_cohere.apply_rotary_pos_emb
    norm.forward, hf_cohere.apply_rotary_pos_emb = norm_forward, rope
    try:
        yield layer
    finally:
        del norm.forward  # the class's forward again
        hf_cohere.apply_rotary_pos_emb = original


def test_cohere_equals_hf_as_it_is_to_float32():
    """HF rounds the norm's output, q and k to float32: each rounding moves a value by
    at most 2^-24 of it, and the block's output and gradients combine a few such
    errors through O(1) weights, so every difference must stay below 16 * 2^-24 of the
    reference's largest value; and above 1e-12: the float32 steps are really there."""
    ours, theirs, call = pair("cohere")
    diffs = differences("cohere", ours, theirs, call)
    for name in (k for k in diffs if not k.endswith("_scale")):
        assert diffs[name] <= 16 * U32 * diffs[name + "_scale"], (name, diffs)
    assert worst(diffs) > 1e-12


def test_cohere_equals_hf_in_float64_with_its_float32_steps_patched():
    ours, theirs, call = pair("cohere")
    with cohere_in_input_dtype(theirs):
        diffs = differences("cohere", ours, theirs, call)
    assert worst(diffs) <= TOL["atol"], diffs
    assert "forward" not in vars(theirs.input_layernorm)  # the patch is undone
    assert hf_cohere.apply_rotary_pos_emb.__module__ == hf_cohere.__name__


# --- partial rotary ----------------------------------------------------------------


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_partial_rotary_turns_a_narrower_head_and_passes_the_rest(layout):
    """RotaryEmbedding(16, rotary_dim=6): the first 6 coordinates are exactly what a
    6-wide head gets (its frequencies base^(-2i/6), not a 16-wide head's), the other
    10 are bit-identical to the input."""
    x = torch.randn(2, 3, 9, 16, dtype=F64)
    partial = RotaryEmbedding(16, rotary_dim=6, layout=layout)
    out = partial(x, offset=3)
    assert torch.equal(out[..., 6:], x[..., 6:])
    narrow = RotaryEmbedding(6, layout=layout)(x[..., :6].contiguous(), offset=3)
    assert torch.equal(out[..., :6], narrow)
    cos6, _ = rope_cache(12, 6)
    assert torch.equal(partial.tables(12)[0][:12], cos6)
    cos16, _ = rope_cache(12, 16)
    assert not torch.allclose(cos6[:, :3], cos16[:, :3])  # a 16-wide head's differ


def test_partial_rotary_equals_hf_neox_and_gptj_helpers():
    """GPT-NeoX (rotate-half, rotary_pct 0.25 of 16 = 4) and GPT-J (interleaved,
    rotate_every_two, its tables returned as (sin, cos)) on q and k, at positions
    5 .. 11, float64: bit for bit."""
    g = torch.Generator().manual_seed(3)
    q, k = (torch.randn(B, 4, T, 16, generator=g, dtype=F64) for _ in range(2))
    positions = torch.arange(5, 5 + T).expand(B, -1)
    config = GPTNeoXConfig(hidden_size=64, num_attention_heads=4)  # d_head 16
    cos, sin = hf_neox.GPTNeoXRotaryEmbedding(config)(q, positions)
    theirs = hf_neox.apply_rotary_pos_emb(q, k, cos, sin)
    ours = RotaryEmbedding(16, rotary_dim=4)
    assert all(torch.equal(ours(t, offset=5), h) for t, h in zip((q, k), theirs))

    config = GPTJConfig(n_embd=64, n_head=4, rotary_dim=6, n_positions=32)
    sin, cos = hf_gptj.GPTJRotaryEmbedding(config)(q, positions)  # [B, T, 3] each
    ours = RotaryEmbedding(16, rotary_dim=6, layout="interleaved")
    assert torch.equal(sin[0].float(), ours.tables(5 + T)[1][5 : 5 + T, :3])
    for t in (q, k):
        rows = t.transpose(1, 2)  # GPT-J turns [B, T, H, d_head], before its transpose
        turned = hf_gptj.apply_rotary_pos_emb(rows[..., :6], sin, cos)
        theirs = torch.cat([turned, rows[..., 6:]], dim=-1).transpose(1, 2)
        assert torch.equal(ours(t, offset=5), theirs)


def test_cohere_rotary_is_our_interleaved_layout():
    """Cohere repeats each frequency twice in place (repeat_interleave: pairs (2i,
    2i+1)): its tables are ours with each column twice, and in float32 its rotation is
    ours bit for bit. In float64 it rounds q and k to float32 first."""
    config = cohere_config()
    g = torch.Generator().manual_seed(4)
    q, k = (torch.randn(B, 4, T, 8, generator=g) for _ in range(2))
    positions = torch.arange(5, 5 + T).expand(B, -1)
    cos, sin = hf_cohere.CohereRotaryEmbedding(config)(q, positions)  # [B, T, 8]
    ours = RotaryEmbedding(8, layout="interleaved")
    our_cos, our_sin = (t[5 : 5 + T, :4] for t in ours.tables(5 + T))
    for theirs, mine in ((cos[0], our_cos), (sin[0], our_sin)):
        assert torch.equal(theirs[:, 0::2], mine) and torch.equal(theirs[:, 1::2], mine)
    turned = hf_cohere.apply_rotary_pos_emb(q, k, cos, sin)
    assert all(torch.equal(ours(t, offset=5), h) for t, h in zip((q, k), turned))
    q64 = q.double() + 1e-9  # no longer representable in float32
    cos64, sin64 = hf_cohere.CohereRotaryEmbedding(config)(q64, positions)
    hf_q = hf_cohere.apply_rotary_pos_emb(q64, q64, cos64, sin64)[0]
    assert 1e-12 < (ours(q64, offset=5) - hf_q).abs().max() < 8 * U32 * q64.abs().max()


# --- where the FFN reads -----------------------------------------------------------


def one_forward(modules: dict[str, torch.nn.Module], call, x: torch.Tensor) -> dict:
    """Run call(x) once, with forward hooks that store each module's input (args[0])
    and output (the first, for HF's attention, which returns a pair)."""
    seen, handles = {}, []
    for name, module in modules.items():

        def hook(module, args, output, name=name):
            seen[name] = (args[0], output[0] if isinstance(output, tuple) else output)

        handles.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            call(x)
    finally:
        for handle in handles:
            handle.remove()
    return seen


def parts(block: torch.nn.Module) -> dict[str, torch.nn.Module]:
    names = ("attn_norm", "attn", "ffn_norm", "ffn")
    return {n: getattr(block, n) for n in names if getattr(block, n) is not None}


def serial_and_parallel(seed: int) -> tuple[PreNormBlock, ParallelBlock]:
    """GPT-NeoX's parallel block, and the serial pre-norm block of the same parts."""
    parallel = randomised(neox_block(D, 4, 64), seed)
    serial = PreNormBlock(
        parallel.attn, parallel.ffn, parallel.attn_norm, parallel.ffn_norm
    )
    return serial, parallel


def test_serial_ffn_reads_the_attention_updated_stream():
    """One real forward of the serial (pre-norm) block: the FFN's input is the very
    tensor ffn_norm returned, and ffn_norm read x + Attn(attn_norm(x)), exactly; not ffn_norm(x)."""
    serial, _ = serial_and_parallel(4)
    x = torch.randn(B, T, D, dtype=F64)
    seen = one_forward(parts(serial), serial, x)
    assert seen["attn_norm"][0] is x and seen["attn"][0] is seen["attn_norm"][1]
    assert seen["ffn"][0] is seen["ffn_norm"][1]
    attn_out = seen["attn"][1]
    assert torch.equal(seen["ffn_norm"][0], x + attn_out)
    with torch.no_grad():
        assert torch.equal(seen["ffn"][0], serial.ffn_norm(x + attn_out))
        assert not torch.allclose(seen["ffn"][0], serial.ffn_norm(x))


def test_parallel_ffn_reads_what_the_attention_reads():
    """GPT-NeoX (two norms): attn_norm and ffn_norm both read the block's input itself, and
    the FFN reads ffn_norm(x), exactly, not ffn_norm(x + Attn(...)). GPT-J and Cohere (one
    norm): the attention and the FFN read the very same tensor object, attn_norm(x)."""
    _, neox = serial_and_parallel(4)
    x = torch.randn(B, T, D, dtype=F64)
    seen = one_forward(parts(neox), neox, x)
    assert seen["attn_norm"][0] is x and seen["ffn_norm"][0] is x
    assert (
        seen["attn"][0] is seen["attn_norm"][1]
        and seen["ffn"][0] is seen["ffn_norm"][1]
    )
    with torch.no_grad():
        assert torch.equal(seen["ffn"][0], neox.ffn_norm(x))
        assert not torch.allclose(seen["ffn"][0], neox.ffn_norm(x + seen["attn"][1]))
    for block in (pair("gptj")[0], pair("cohere")[0]):
        seen = one_forward(parts(block), block, x)
        assert seen["attn_norm"][0] is x
        assert (
            seen["attn"][0] is seen["attn_norm"][1]
            and seen["ffn"][0] is seen["attn"][0]
        )


@pytest.mark.parametrize("family", ["neox", "neox_serial"])
def test_hf_neox_layer_feeds_its_mlp_the_same_way(family):
    """The same hooks on HF's GPTNeoXLayer: its post_attention_layernorm reads the
    layer's input (parallel) or the input plus the attention's output (serial)."""
    _, theirs, call = pair(family)
    x = torch.randn(B, T, D, dtype=F64)
    seen = one_forward(
        {"attn": theirs.attention, "ffn_norm": theirs.post_attention_layernorm}, call, x
    )
    if family == "neox":
        assert seen["ffn_norm"][0] is x
    else:
        assert torch.equal(seen["ffn_norm"][0], seen["attn"][1] + x)


# --- syncs and compile -------------------------------------------------------------


@pytest.mark.parametrize("family", BLOCKS)
def test_no_host_syncs(family):
    """(fullgraph compile of each block, bit for bit: the page's claim
    modern.blocks-read-no-values, docs/modern/modern-block.md.)"""
    block = pair(family)[0].float()
    assert host_reads(block, torch.randn(B, T, D)) == 0
