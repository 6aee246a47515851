"""The minimal OLMo 2 and Gemma 3 blocks (literate/minimal/norm_placements.py) against
Hugging Face's `Olmo2DecoderLayer` and `Gemma3DecoderLayer` (a global,
"full_attention" layer), and against the hardened `olmo2_block` / `gemma3_block` of
literate.parts.blocks; weights copied by name, float64 (modules built, then
`.double()`).

Each comparison covers the output and the gradient of sum(output * probe), a fixed
random probe, w.r.t. the input and every parameter. Every parameter is random (1-D
weights, the norms' gains or Gemma's w, ~ N(1, 0.3^2); matrices ~ N(0, 0.3^2)), so a
norm in the wrong place, a gain read as w instead of 1 + w, a QK-norm over the wrong
width or a wrong scale cannot go unseen. HF runs "sdpa" attention (which computes in
the input dtype) with its additive causal mask and the position_embeddings of the
family's own rotary module.

Tolerances, relative to each tensor's scale (its reference's largest |entry|, at least
1):
- HF with its norms patched to compute in the input dtype (`harness.hf_in_input_dtype`
  for OLMo 2; `gemma_norms_in_input_dtype` below for Gemma's 1 + w): TOL = 1e-12. Both
  sides then compute the same formulas in float64, products summed in another order at
  most, ~1e-16 relative per operation over a few hundred operations of a block and its
  backward (measured <= 1.5e-15); a real difference is 1e-2 or more (measured: Gemma's
  gains read as w instead of 1 + w, 1.1; the scale d_head^-1/2 instead of 24^-1/2,
  0.24).
- HF as it is: its RMSNorms compute in float32 whatever the input (OLMo 2: 4 in the
  path, Gemma 3: 6), each rounding at 2^-24 relative, spread through a few sums:
  `harness.assert_float32_limited`, within F32_BOUND = 16 float32 ulps of the largest
  entry (measured <= 2.2 ulps for OLMo 2, <= 5 for Gemma 3), and above 1e-12 (the
  float32 steps are really in the path).
"""

from __future__ import annotations

import contextlib
import re

import pytest
import torch
from transformers import Gemma3TextConfig, Olmo2Config
from transformers.models.gemma3 import modeling_gemma3 as hf_gemma3
from transformers.models.olmo2 import modeling_olmo2 as hf_olmo2

from literate.minimal.norm_placements import Gemma3Block, OLMo2Block

from harness import assert_float32_limited, hf_causal_mask, hf_in_input_dtype

F64 = torch.float64
TOL = 1e-12
B, T, D, H, H_KV, D_FF, D_HEAD = 2, 7, 32, 4, 2, 48, 16

# (Hugging Face's name, ours), applied in turn to every key
OLMO2_NAMES = [
    (r"^self_attn\.", "attn."),
    (r"^mlp\.", "ffn."),
    (r"^post_attention_layernorm\.", "attn_out_norm."),
    (r"^post_feedforward_layernorm\.", "ffn_out_norm."),
]
GEMMA3_NAMES = OLMO2_NAMES + [
    (r"^input_layernorm\.", "attn_norm."),
    (r"^pre_feedforward_layernorm\.", "ffn_norm."),
]


# --- the harness ----------------------------------------------------------------------
def rand(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def randomised(module, seed):
    """float64, eval mode, 1-D weights ~ N(1, 0.09), everything else ~ N(0, 0.09)."""
    module = module.double().eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=g, dtype=F64) + (p.ndim == 1))
    return module


def renamed(state, names):
    out = {}
    for key, value in state.items():
        for pattern, replacement in names:
            key = re.sub(pattern, replacement, key)
        out[key] = value
    return out


def load(ours, theirs, names):
    """Every parameter of `ours` from HF's `theirs`, renamed; the names must match."""
    state = renamed({n: p.detach() for n, p in theirs.named_parameters()}, names)
    params = dict(ours.double().eval().named_parameters())
    assert params.keys() == state.keys(), params.keys() ^ state.keys()
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(state[name])
    return ours


def run(module, call, x, names=(), seed=99):
    """{"out": call(x), "x": d/dx, each parameter (renamed by `names`): its gradient}
    of sum(call(x) * probe)."""
    x = x.detach().clone().requires_grad_()
    out = call(x)
    params = renamed(dict(module.named_parameters()), names)
    grads = torch.autograd.grad(
        (out * rand(*out.shape, seed=seed)).sum(), [x, *params.values()]
    )
    return {"out": out.detach()} | dict(zip(["x", *params], grads))


def assert_same(ours, theirs, tol=TOL):
    """Each tensor within tol * max(1, max |entry| of theirs); returns the largest."""
    assert ours.keys() == theirs.keys(), ours.keys() ^ theirs.keys()
    ratios = {
        k: (ours[k] - theirs[k]).abs().max().item()
        / max(1.0, theirs[k].abs().max().item())
        for k in ours
    }
    worst = max(ratios, key=ratios.get)
    assert ratios[worst] <= tol, f"{worst}: {ratios[worst]:.3g} > {tol:g}"
    return ratios[worst]


def assert_f32_limited(ours, theirs):
    assert ours.keys() == theirs.keys(), ours.keys() ^ theirs.keys()
    keys = list(ours)
    return assert_float32_limited(
        keys, [ours[k] for k in keys], [theirs[k] for k in keys]
    )


@contextlib.contextmanager
def gemma_norms_in_input_dtype(module):
    """Test-harness patch, as `harness.hf_in_input_dtype` for the Llama family: every
    Gemma3RMSNorm in `module` computes its own formula, x / rms(x) * (1 + w), in the
    input dtype (HF: float32). Undone on exit."""
    norms = [m for m in module.modules() if isinstance(m, hf_gemma3.Gemma3RMSNorm)]
    assert norms
    for m in norms:
        m.forward = lambda x, m=m: m._norm(x) * (1.0 + m.weight)
    try:
        yield
    finally:
        for m in norms:
            del m.forward


# --- the pairs ------------------------------------------------------------------------
def olmo2_pair():
    """(ours, theirs, call_theirs): a random float64 Olmo2DecoderLayer (GQA, base 5e5)
    and our OLMo2Block holding its weights."""
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
    theirs = randomised(hf_olmo2.Olmo2DecoderLayer(config, 0), seed=1)
    ours = OLMo2Block(d_model=D, n_heads=H, n_kv_heads=H_KV, d_ff=D_FF, eps=1e-6)
    x = rand(B, T, D, seed=2)
    cos_sin = hf_olmo2.Olmo2RotaryEmbedding(config)(x, torch.arange(T)[None])

    def call(x):
        return theirs(x, attention_mask=hf_causal_mask(T), position_embeddings=cos_sin)

    return load(ours, theirs, OLMO2_NAMES), theirs, call


def gemma3_pair():
    """(ours, theirs, call_theirs): a random float64 Gemma3DecoderLayer, global
    ("full_attention": RoPE base 1e6, no window), head_dim 16 != D / H, scores scaled
    by query_pre_attn_scalar^-1/2 = 24^-1/2, and our Gemma3Block holding its weights."""
    config = Gemma3TextConfig(
        hidden_size=D,
        num_attention_heads=H,
        num_key_value_heads=H_KV,
        head_dim=D_HEAD,
        intermediate_size=D_FF,
        num_hidden_layers=1,
        layer_types=["full_attention"],
        query_pre_attn_scalar=24,
        rms_norm_eps=1e-6,
        vocab_size=50,
        attn_implementation="sdpa",
    )
    theirs = randomised(hf_gemma3.Gemma3DecoderLayer(config, 0), seed=3)
    ours = Gemma3Block(
        d_model=D,
        n_heads=H,
        n_kv_heads=H_KV,
        d_ff=D_FF,
        d_head=D_HEAD,
        query_pre_attn_scalar=24,
        rope_base=config.rope_parameters["full_attention"]["rope_theta"],
        eps=1e-6,
    )
    x = rand(B, T, D, seed=4)
    rotary = hf_gemma3.Gemma3RotaryEmbedding(config)
    cos_sin = rotary(x, torch.arange(T)[None], "full_attention")

    def call(x):
        return theirs(x, attention_mask=hf_causal_mask(T), position_embeddings=cos_sin)

    return load(ours, theirs, GEMMA3_NAMES), theirs, call


# --- the comparisons ------------------------------------------------------------------
def test_olmo2_block_equals_hf_olmo2_decoder_layer():
    ours, theirs, call = olmo2_pair()
    # the reference is what we think: no norm in front of either sublayer, QK-norm
    # over the whole projections (widths H d_head and H_kv d_head)
    assert not hasattr(theirs, "input_layernorm")
    assert not hasattr(theirs, "pre_feedforward_layernorm")
    assert theirs.self_attn.q_norm.weight.shape == (H * D // H,)
    assert theirs.self_attn.k_norm.weight.shape == (H_KV * D // H,)
    x = rand(B, T, D, seed=5)
    mine = run(ours, ours, x)
    assert_f32_limited(mine, run(theirs, call, x, OLMO2_NAMES))
    with hf_in_input_dtype(theirs, hf_olmo2):
        assert_same(mine, run(theirs, call, x, OLMO2_NAMES))


def test_gemma3_block_equals_hf_gemma3_decoder_layer():
    ours, theirs, call = gemma3_pair()
    config, attn = theirs.config, theirs.self_attn
    # the reference is what we think: per-head QK-norm, its scale, GeGLU with the tanh
    # GELU, no softcapping, no window, RoPE base 1e6
    assert attn.q_norm.weight.shape == attn.k_norm.weight.shape == (D_HEAD,)
    assert attn.scaling == 24**-0.5 != D_HEAD**-0.5 and ours.attn.scale == 24**-0.5
    assert config.hidden_activation == "gelu_pytorch_tanh"
    assert config.attn_logit_softcapping is None and attn.sliding_window is None
    assert ours.attn.rope_base == 1e6
    x = rand(B, T, D, seed=6)
    mine = run(ours, ours, x)
    assert_f32_limited(mine, run(theirs, call, x, GEMMA3_NAMES))
    with gemma_norms_in_input_dtype(theirs):
        assert_same(mine, run(theirs, call, x, GEMMA3_NAMES))


@pytest.mark.parametrize("family", ["olmo2", "gemma3"])
def test_the_blocks_equal_the_hardened_ones(family):
    """literate.parts.blocks' olmo2_block / gemma3_block (the same names by role),
    random, and ours holding their weights: TOL, both float64 throughout."""
    from literate.parts.blocks import gemma3_block, olmo2_block

    if family == "olmo2":
        hard = olmo2_block(D, H, H_KV, D_FF, eps=1e-6)
        ours = OLMo2Block(d_model=D, n_heads=H, n_kv_heads=H_KV, d_ff=D_FF, eps=1e-6)
    else:
        sizes = dict(d_head=D_HEAD, query_pre_attn_scalar=24, eps=1e-6)
        hard = gemma3_block(D, H, H_KV, D_FF, **sizes)
        ours = Gemma3Block(d_model=D, n_heads=H, n_kv_heads=H_KV, d_ff=D_FF, **sizes)
    hard = randomised(hard, seed=8)
    ours = load(ours, hard, names=())
    x = rand(B, T, D, seed=9)
    assert_same(run(ours, ours, x), run(hard, hard, x))


# --- where the norms sit --------------------------------------------------------------
def pre_norm(block, attn_norm, ffn_norm):
    """The block's own parts placed as Llama's: x + F(N(x)), nothing on the outputs."""

    def forward(x):
        x = x + block.attn(attn_norm(x))
        return x + block.ffn(ffn_norm(x))

    return forward


def output_norm(block, attn_out_norm, ffn_out_norm):
    """The block's own parts placed as OLMo 2's: x + N(F(x)), nothing on the inputs."""

    def forward(x):
        x = x + attn_out_norm(block.attn(x))
        return x + ffn_out_norm(block.ffn(x))

    return forward


@pytest.mark.parametrize("family", ["olmo2", "gemma3"])
def test_the_norms_sit_where_hf_puts_them_not_before_the_sublayers(family):
    """The same weights placed otherwise give another layer, which the comparisons
    above would reject: pre-norm (Llama's placement, the norms on the sublayers'
    inputs) and, for Gemma 3, the sandwich's halves alone (its input norms only:
    pre-norm; its output norms only: OLMo 2's) are each off from HF by more than 0.1
    of the output's scale, while the block itself equals HF to TOL."""
    ours, theirs, call = (olmo2_pair if family == "olmo2" else gemma3_pair)()
    if family == "olmo2":
        others = {"pre-norm": pre_norm(ours, ours.attn_out_norm, ours.ffn_out_norm)}
        patch = hf_in_input_dtype(theirs, hf_olmo2)
    else:
        others = {
            "pre-norm": pre_norm(ours, ours.attn_norm, ours.ffn_norm),
            "output norm": output_norm(ours, ours.attn_out_norm, ours.ffn_out_norm),
        }
        patch = gemma_norms_in_input_dtype(theirs)
    x = rand(B, T, D, seed=7)
    with torch.no_grad(), patch:
        reference = call(x)
        scale = max(1.0, reference.abs().max().item())
        assert (ours(x) - reference).abs().max().item() / scale <= TOL
        for name, other in others.items():
            assert (other(x) - reference).abs().max().item() / scale > 0.1, name
