"""QK-norm and where the norms went: `qwen3_block`, `olmo2_block` and `gemma3_block` against
Hugging Face's decoder layers (chapter 7), with the modern blocks' dense checks.

Every comparison is float64, weights copied by name (every gain random, so a swapped or
misplaced norm shows), RoPE's `position_embeddings` from the family's own rotary module,
HF's "sdpa" attention with `attention_mask=None` (causal for T_q == T_k), and covers the
output and the gradient w.r.t. the input and every parameter:

- `Qwen3DecoderLayer`: pre-norm, an RMSNorm of width head_dim on each head's q and k, before
  RoPE; head_dim both 2 x hidden / heads (Qwen3's small models project wider) and equal.
- `Olmo2DecoderLayer`: QK-norm over the whole q and k projections (widths H * d_head and
  H_kv * d_head), before the heads are split; the block's norms on the sublayer outputs,
  x + N(F(x)), and no norm in front of either sublayer.
- `Gemma3DecoderLayer`, a global ("full_attention") layer: the sandwich of four
  zero-centred RMSNorms (gain 1 + w), QK-norm per head, scores scaled by
  query_pre_attn_scalar^-1/2 (not head_dim^-1/2), GeGLU (gelu_pytorch_tanh), no logit
  softcapping (Gemma 3 has none; Gemma 2 had). It takes the position_embeddings of its layer
  type: the global base (1e6) for a full layer, the local one (1e4) for a sliding layer,
  which equals ours when its window covers the sequence.

Tolerances. HF's norms compute in float32 whatever the input dtype (LlamaRMSNorm's family
casts to float32; Gemma3RMSNorm calls x.float()), so a float64 comparison through them is
float32-limited. Each comparison is made twice:
(1) HF as it is: every tensor within F32_BOUND = 16 float32 ulps (2^-23) of its largest
    entry (each norm rounds once, relative 2^-24, and the errors spread through a few sums;
    measured <= 6.1 ulps, Gemma 3 with six norms in the path), and further than 1e-12 (the
    float32 steps are really there);
(2) HF with `hf_norms_in_input_dtype` (a test-harness patch: each HF norm instance's forward
    swapped for its own formula in the input dtype): max |diff| <= 1e-10 (measured <= 6e-14).
A wrong transpose, norm placement or scale is off by 1e-2 or more.

Also here: the Gemma trap (1 + w in bfloat16 loses every |w| up to 2^-8), the parameter
parity (FFN, and the attention formula 2 d^2 (1 + H_kv / H)), gradients (every parameter of each modern block
gets a finite, non-zero gradient), Llama's FFN width rule against published configurations,
no host syncs in any block's forward (compile: the page's claim modern.blocks-read-no-values).
"""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F
from transformers import Gemma3TextConfig, Olmo2Config, Qwen3Config
from transformers.models.gemma3 import modeling_gemma3 as gemma3
from transformers.models.olmo2 import modeling_olmo2 as olmo2
from transformers.models.qwen3 import modeling_qwen3 as qwen3

from literate.parts.blocks import gemma3_block, llama_block, olmo2_block, qwen3_block
from literate.parts.ffn import DenseFFN, GatedFFN, llama_ffn_width
from literate.parts.norms import RMSNorm, ZeroCentredRMSNorm
from literate.tools.syncs import host_reads

from harness import assert_float32_limited

F64 = torch.float64
F64_TOL = 1e-10
D, H, H_KV, D_FF, T, B = 32, 4, 2, 48, 7, 2


# --- the harness ------------------------------------------------------------------------
@contextlib.contextmanager
def hf_norms_in_input_dtype(module: torch.nn.Module):
    """Test-harness patch: inside the block, every HF RMSNorm instance in `module` runs its
    own formula in the input dtype (HF computes in float32). Gemma's gain is 1 + w."""
    patched = []
    for m in module.modules():
        kind = type(m).__name__
        if kind.endswith("RMSNorm"):
            eps = m.variance_epsilon if hasattr(m, "variance_epsilon") else m.eps
            zero = kind.startswith("Gemma")

            def forward(x, m=m, eps=eps, zero=zero):
                gain = 1.0 + m.weight if zero else m.weight
                return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gain

            m.forward = forward
            patched.append(m)
    assert patched, "no HF norm found to patch"
    try:
        yield
    finally:
        for m in patched:
            del m.forward


def hf_name(name: str, table: dict[str, str]) -> str:
    first, rest = name.split(".", 1)
    return f"{table[first]}.{rest}"


def make_pair(
    ours: torch.nn.Module, theirs: torch.nn.Module, table: dict[str, str], seed: int
):
    """Both in float64, every 1-D parameter (the norms' gains) random, HF holding ours."""
    ours, theirs = ours.double(), theirs.double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in ours.parameters():
            if p.ndim == 1:
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g, dtype=F64))
    theirs.load_state_dict({hf_name(k, table): v for k, v in ours.state_dict().items()})
    return ours, theirs


def run_both(ours, theirs, table, call_theirs, seed):
    """[output, d/dx, d/d(each parameter of ours)] for ours and for HF, same order."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, D, generator=g, dtype=F64, requires_grad=True)
    probe = torch.randn(B, T, D, generator=g, dtype=F64)
    names = [n for n, _ in ours.named_parameters()]
    theirs_params = [theirs.get_parameter(hf_name(n, table)) for n in names]
    got, want = ours(x), call_theirs(theirs, x)
    g_ours = torch.autograd.grad((got * probe).sum(), [x, *ours.parameters()])
    g_ref = torch.autograd.grad((want * probe).sum(), [x, *theirs_params])
    labels = ["output", "x", *names]
    return labels, [got, *g_ours], [want, *g_ref]


def max_diffs(labels, ours, theirs) -> dict[str, float]:
    assert len(ours) == len(theirs) == len(labels)
    return {n: (a - b).abs().max().item() for n, a, b in zip(labels, ours, theirs)}


def assert_float64_equal(labels, ours, theirs) -> float:
    diffs = max_diffs(labels, ours, theirs)
    worst = max(diffs, key=diffs.get)
    assert diffs[worst] <= F64_TOL, f"{worst}: max |diff| {diffs[worst]:.3g}"
    return diffs[worst]


def positions(x):
    return torch.arange(x.shape[1]).expand(x.shape[0], -1)


def compare(ours, theirs, table, call_theirs, seed):
    """Both comparisons; returns (max |diff| as-is, max |diff| norm-patched)."""
    as_is = assert_float32_limited(*run_both(ours, theirs, table, call_theirs, seed))
    with hf_norms_in_input_dtype(theirs):
        patched = assert_float64_equal(
            *run_both(ours, theirs, table, call_theirs, seed)
        )
    return as_is, patched


# our parts and norms, by role -> Hugging Face's
PRE_NORM = {
    "attn": "self_attn",
    "ffn": "mlp",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
OUTPUT_NORM = {
    "attn": "self_attn",
    "ffn": "mlp",
    "attn_out_norm": "post_attention_layernorm",
    "ffn_out_norm": "post_feedforward_layernorm",
}
SANDWICH = {
    "attn": "self_attn",
    "ffn": "mlp",
    "attn_norm": "input_layernorm",
    "attn_out_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "ffn_out_norm": "post_feedforward_layernorm",
}


def test_the_patch_is_each_norms_own_formula_in_the_input_dtype():
    """HF's norms give float64 input exactly the answer they give its float32 rounding;
    patched, they equal ours in float64 to rounding, and the patch is undone after."""
    x = torch.randn(3, D, generator=torch.Generator().manual_seed(0), dtype=F64)
    hf_plain = qwen3.Qwen3RMSNorm(D, eps=1e-6).double()
    hf_zero = gemma3.Gemma3RMSNorm(D, eps=1e-6).double()
    ours_plain = RMSNorm(D, eps=1e-6).double()
    ours_zero = ZeroCentredRMSNorm(D, eps=1e-6).double()
    with torch.no_grad():
        for m in (hf_plain, hf_zero, ours_plain, ours_zero):
            m.weight.copy_(torch.linspace(-0.5, 0.5, D, dtype=F64))
    for hf, ours in ((hf_plain, ours_plain), (hf_zero, ours_zero)):
        assert torch.equal(hf(x), hf(x.float()).double())  # float32 inside
        assert (hf(x) - ours(x)).abs().max() > 1e-9
        with hf_norms_in_input_dtype(hf):
            torch.testing.assert_close(hf(x), ours(x), atol=1e-15, rtol=0)
        assert torch.equal(hf(x), hf(x.float()).double())  # restored


# --- Qwen3 ------------------------------------------------------------------------------
@pytest.mark.parametrize("d_head", [16, 8], ids=["head_dim=2d/H", "head_dim=d/H"])
def test_qwen3_block_equals_hf_qwen3_decoder_layer(d_head):
    config = Qwen3Config(
        hidden_size=D,
        num_attention_heads=H,
        num_key_value_heads=H_KV,
        head_dim=d_head,
        intermediate_size=D_FF,
        num_hidden_layers=1,
        rms_norm_eps=1e-6,
        attn_implementation="sdpa",
        rope_parameters={"rope_type": "default", "rope_theta": 1e6},
    )
    torch.manual_seed(1)
    ours, theirs = make_pair(
        qwen3_block(D, H, H_KV, D_FF, d_head=d_head, rope_base=1e6, eps=1e-6),
        qwen3.Qwen3DecoderLayer(config, 0),
        PRE_NORM,
        seed=2,
    )
    # the reference is what we think: per-head norms, wider projections, no window
    assert (
        theirs.self_attn.q_norm.weight.shape
        == theirs.self_attn.k_norm.weight.shape
        == (d_head,)
    )
    assert (
        theirs.self_attn.q_proj.out_features == H * d_head
        and theirs.self_attn.sliding_window is None
    )
    assert ours.attn.qk_norm == "head" and ours.attn.d_head == d_head
    rope = qwen3.Qwen3RotaryEmbedding(config)
    compare(
        ours,
        theirs,
        PRE_NORM,
        lambda m, x: m(
            x, attention_mask=None, position_embeddings=rope(x, positions(x))
        ),
        seed=3,
    )


def test_qwen3_norms_q_and_k_before_rope():
    """QK-norm comes before RoPE: normalising after rotating gives another layer (the
    rotation keeps each head's norm, but not its coordinates, which the gains weigh)."""
    torch.manual_seed(4)
    block = qwen3_block(D, H, H_KV, D_FF, d_head=8, rope_base=1e4).double()
    with torch.no_grad():
        block.attn.q_norm.weight.normal_(1.0, 0.5)
        block.attn.k_norm.weight.normal_(1.0, 0.5)
    x = torch.randn(B, T, D, dtype=F64)
    h = block.attn_norm(x)
    attn = block.attn
    q = attn.q_proj(h).view(B, T, H, 8).transpose(1, 2)
    k = attn.k_proj(h).view(B, T, H_KV, 8).transpose(1, 2)
    v = attn.v_proj(h).view(B, T, H_KV, 8).transpose(1, 2)

    def attend(q, k):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return attn.o_proj(out.transpose(1, 2).reshape(B, T, H * 8))

    before = attend(attn.rope(attn.q_norm(q)), attn.rope(attn.k_norm(k)))
    after = attend(attn.q_norm(attn.rope(q)), attn.k_norm(attn.rope(k)))
    torch.testing.assert_close(attn(h, causal=True), before, atol=1e-14, rtol=0)
    assert (attn(h, causal=True) - after).abs().max() > 1e-3


# --- OLMo 2 -----------------------------------------------------------------------------
def test_olmo2_block_equals_hf_olmo2_decoder_layer():
    config = Olmo2Config(
        hidden_size=D,
        num_attention_heads=H,
        num_key_value_heads=H_KV,
        intermediate_size=D_FF,
        num_hidden_layers=1,
        rms_norm_eps=1e-6,
        attn_implementation="sdpa",
        rope_parameters={"rope_type": "default", "rope_theta": 5e5},
    )
    torch.manual_seed(5)
    ours, theirs = make_pair(
        olmo2_block(D, H, H_KV, D_FF, rope_base=5e5, eps=1e-6),
        olmo2.Olmo2DecoderLayer(config, 0),
        OUTPUT_NORM,
        seed=6,
    )
    # QK-norm over the projections, before the split; no norm in front of a sublayer
    assert theirs.self_attn.q_norm.weight.shape == (H * D // H,)
    assert theirs.self_attn.k_norm.weight.shape == (H_KV * D // H,)
    assert not hasattr(theirs, "input_layernorm") and ours.attn.qk_norm == "projection"
    rope = olmo2.Olmo2RotaryEmbedding(config)
    compare(
        ours,
        theirs,
        OUTPUT_NORM,
        lambda m, x: m(
            x, attention_mask=None, position_embeddings=rope(x, positions(x))
        ),
        seed=7,
    )


# --- Gemma 3 ----------------------------------------------------------------------------
def gemma3_config(*layer_types: str, **extra) -> Gemma3TextConfig:
    return Gemma3TextConfig(
        hidden_size=D,
        num_attention_heads=H,
        num_key_value_heads=H_KV,
        head_dim=16,
        intermediate_size=D_FF,
        num_hidden_layers=len(layer_types),
        layer_types=list(layer_types),
        query_pre_attn_scalar=24,
        rms_norm_eps=1e-6,
        vocab_size=50,
        attn_implementation="sdpa",
        **extra,
    )


@pytest.mark.parametrize(
    "layer_type, base",
    [("full_attention", 1e6), ("sliding_attention", 1e4)],
    ids=["global", "local-window-covers-sequence"],
)
def test_gemma3_block_equals_hf_gemma3_decoder_layer(layer_type, base):
    config = gemma3_config(layer_type, sliding_window=2 * T)
    torch.manual_seed(8)
    ours, theirs = make_pair(
        gemma3_block(
            D,
            H,
            H_KV,
            D_FF,
            d_head=16,
            query_pre_attn_scalar=24,
            rope_base=base,
            eps=1e-6,
        ),
        gemma3.Gemma3DecoderLayer(config, 0),
        SANDWICH,
        seed=9,
    )
    attn = theirs.self_attn
    # the reference is what we think: its scale, no softcapping, GeGLU, the layer's base
    assert (
        attn.scaling == 24**-0.5 != attn.head_dim**-0.5 and ours.attn.scale == 24**-0.5
    )
    assert (
        config.attn_logit_softcapping is None
        and config.hidden_activation == "gelu_pytorch_tanh"
    )
    assert attn.sliding_window == (2 * T if layer_type == "sliding_attention" else None)
    assert (
        config.rope_parameters[layer_type]["rope_theta"] == base == ours.attn.rope.base
    )
    rope = gemma3.Gemma3RotaryEmbedding(config)
    compare(
        ours,
        theirs,
        SANDWICH,
        lambda m, x: m(
            x,
            position_embeddings=rope(x, positions(x), layer_type),
            attention_mask=None,
        ),
        seed=10,
    )


def test_gemma3_rotary_embedding_gives_each_layer_type_its_own_base():
    """Gemma3DecoderLayer does not choose its RoPE: the model passes the tables of the
    layer's type. A global layer given the local tables is another layer."""
    config = gemma3_config("sliding_attention", "full_attention")
    rope = gemma3.Gemma3RotaryEmbedding(config)
    x = torch.zeros(1, T, D, dtype=F64)
    cos_global, _ = rope(x, positions(x), "full_attention")
    cos_local, _ = rope(x, positions(x), "sliding_attention")
    assert (cos_global - cos_local).abs().max() > 1e-3
    ours = gemma3_block(
        D, H, H_KV, D_FF, d_head=16, query_pre_attn_scalar=24, rope_base=1e6
    )
    table, _ = ours.attn.rope.tables(T)
    torch.testing.assert_close(cos_global[0], table[:T].double(), atol=0, rtol=0)


def test_gemma_trap_one_plus_w_in_bfloat16_loses_small_w():
    """bfloat16 keeps 8 significant bits: next to 1 its spacing is 2^-7 above and 2^-8
    below, so 1 + w rounds back to 1 for every w in [-2^-9, 2^-8] (ties to even). A gain
    computed in bfloat16 forgets such a w entirely; ours (and HF's Gemma3RMSNorm) form
    1 + w in float32, which keeps it."""
    w = torch.linspace(-0.02, 0.02, 4001).bfloat16()  # every value bfloat16 holds there
    lost = (1 + w) == 1  # the sum in bfloat16
    expected = (w.float() >= -(2.0**-9)) & (w.float() <= 2.0**-8)
    assert torch.equal(lost, expected) and lost.any() and not lost.all()
    # a bfloat16 layer whose learned w = 1e-3 everywhere
    x = torch.randn(4, 16, D, generator=torch.Generator().manual_seed(11)).bfloat16()
    ours, hf = ZeroCentredRMSNorm(D).bfloat16(), gemma3.Gemma3RMSNorm(D).bfloat16()
    with torch.no_grad():
        for norm in (ours, hf):
            norm.weight.fill_(1e-3)
    naive = F.rms_norm(x, (D,), 1 + ours.weight, 1e-6)  # 1 + w in bfloat16
    plain = F.rms_norm(x, (D,), torch.ones(D, dtype=torch.bfloat16), 1e-6)  # gain 1
    assert torch.equal(naive, plain)  # w is gone
    assert torch.equal(ours(x), hf(x))  # bit for bit with HF in bfloat16
    reference = F.rms_norm(x.double(), (D,), 1 + ours.weight.double(), 1e-6)
    ulp = 2.0**-7 * reference.abs()  # bfloat16 spacing bound
    assert (
        (ours(x).double() - reference).abs() <= ulp / 2 + 1e-30
    ).all()  # rounded once
    assert (
        ours(x) != naive
    ).float().mean() > 0.1  # the learned 0.1% changes many outputs


# --- parameter parity, the width rule, gradients -------------------------------------------------------------
def matrix_parameters(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.ndim == 2)


def test_ffn_parameter_parity_dense_4d_and_gated_8d_over_3():
    d = 96
    dense, gated = DenseFFN(d, 4 * d, F.gelu), GatedFFN(d, 8 * d // 3, F.silu)
    assert (dense.d_ff, gated.d_ff) == (384, 256)
    assert (
        matrix_parameters(dense) == matrix_parameters(gated) == 2 * d * 4 * d == 73_728
    )


@pytest.mark.parametrize("n_kv", [8, 2, 1], ids=["MHA", "GQA", "MQA"])
def test_attention_parameters_are_2_d_squared_times_1_plus_kv_over_q(n_kv):
    d, n_q = 96, 8
    attn = llama_block(d, n_q, n_kv, 256).attn
    assert sum(p.numel() for p in attn.parameters()) == 2 * d * d * (1 + n_kv / n_q)


@pytest.mark.parametrize(
    "d, multiple_of, multiplier, published",
    [
        (4096, 256, None, 11008),  # Llama 2 7B: intermediate_size 11008
        (4096, 1024, 1.3, 14336),  # Llama 3 8B: 14336
        (8192, 4096, 1.3, 28672),  # Llama 2 70B and Llama 3 70B: 28672
    ],
)
def test_llama_ffn_width_gives_the_published_intermediate_sizes(
    d, multiple_of, multiplier, published
):
    assert (
        llama_ffn_width(d, multiple_of=multiple_of, ffn_dim_multiplier=multiplier)
        == published
    )


def modern_blocks():
    torch.manual_seed(12)
    return {
        "llama": llama_block(D, H, H_KV, D_FF),
        "qwen3": qwen3_block(D, H, H_KV, D_FF, d_head=16),
        "olmo2": olmo2_block(D, H, H_KV, D_FF),
        "gemma3": gemma3_block(D, H, H_KV, D_FF, d_head=16, query_pre_attn_scalar=24),
    }


@pytest.mark.parametrize("name", ["llama", "qwen3", "olmo2", "gemma3"])
def test_every_parameter_gets_a_finite_nonzero_gradient(name):
    block = modern_blocks()[name].double()
    g = torch.Generator().manual_seed(13)
    x = torch.randn(B, T, D, generator=g, dtype=F64, requires_grad=True)
    (block(x) * torch.randn(B, T, D, generator=g, dtype=F64)).sum().backward()
    for n, p in [("x", x), *block.named_parameters()]:
        assert p.grad is not None, n
        assert torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, n


def test_no_block_reads_a_value_in_its_forward():
    x = torch.randn(B, T, D)
    counts = {name: host_reads(block, x) for name, block in modern_blocks().items()}
    assert counts == {"llama": 0, "qwen3": 0, "olmo2": 0, "gemma3": 0}


# fullgraph compile of every block of chapter 7, bit for bit against eager: the claim
# modern.blocks-read-no-values on docs/modern/modern-block.md
