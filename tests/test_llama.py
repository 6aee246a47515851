"""Llama's core against the layers people run (chapter 7): `RMSNorm`, `llama_block` and the
tiny `LlamaLanguageModel`, each against PyTorch and Hugging Face.

- `RMSNorm` == `torch.nn.RMSNorm` bit for bit in every floating dtype (both call
  `F.rms_norm`), forward and backward. Against HF's `LlamaRMSNorm`: bit for bit in float32;
  in float16/bfloat16 HF rounds the normalised x to the input dtype *before* multiplying by
  the weight (two roundings, ours one), so they differ by at most one unit in the last
  place on a quarter of the entries; float64 input HF computes in float32. eps sits inside
  the square root, added to the mean square, in all three.
- `llama_block` == `LlamaDecoderLayer`, float64, output and the gradient w.r.t. the input
  and every parameter, with `position_embeddings` from `LlamaRotaryEmbedding`: the "sdpa"
  layer with `attention_mask=None` (causal for T_q == T_k) and the "eager" layer with an
  explicit additive causal mask. The two traps: eager with `attention_mask=None` is not
  causal, and eager *adds* a bool mask as 0/1.
- The tiny model (untied head, final RMSNorm; and tied) == `LlamaForCausalLM`: logits and
  every parameter's gradient, greedy tokens == its `generate(do_sample=False)`. Weights load
  by name from a state dict or a `save_pretrained` folder (config.json + model.safetensors),
  after the configuration is checked (each mismatch named on both sides); a missing, extra
  or misshapen weight is refused before anything is copied.
- fullgraph compile (aot_eager) of the model equals eager; no host sync in `run`, one (the
  id check) in `forward`.

Tolerances as in tests/test_modern_blocks.py: HF's norms (and the eager softmax) compute in
float32, so (1) HF as it is: each tensor within F32_BOUND = 16 float32 ulps of its largest
entry and further than 1e-12 from ours; (2) HF with its norms (and, for eager, its softmax)
computing in the input dtype, a test-harness patch: max |diff| <= 1e-10.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama import modeling_llama

from literate.models.llama import (
    HF_LLAMA_NAMES,
    LLAMA_DEFAULTS,
    LlamaLanguageModel,
    check_llama_config,
    config_field,
    llama_from_hf_config,
    load_hf_llama,
)
from literate.parts.blocks import llama_block
from literate.parts.norms import RMSNorm
from literate.parts.positions import Llama3RotaryEmbedding, llama3_inverse_frequencies
from literate.tools.syncs import host_reads

from harness import (
    F32_BOUND,
    NO_SPECIAL_TOKENS,
    assert_equal_to_hf,
    compare_grads,
    hf_causal_mask,
    hf_in_input_dtype,
    hf_layer_name,
    hf_model_grads,
    hf_renamer,
    hf_sizes,
    input_and_probe,
    random_gains_hf_model,
    random_tokens,
)

F64 = torch.float64
F64_TOL = 1e-10
D, H, H_KV, D_FF, T, B, VOCAB, LAYERS = 32, 4, 2, 48, 7, 2, 61, 2


# --- RMSNorm ----------------------------------------------------------------------------
DTYPES = pytest.mark.parametrize(
    "dtype",
    [torch.float16, torch.bfloat16, torch.float32, F64],
    ids=["float16", "bfloat16", "float32", "float64"],
)


def norm_input(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = 3 * torch.randn(4, 16, 64, generator=g, dtype=F64)
    weight = 1 + 0.5 * torch.randn(64, generator=g, dtype=F64)
    return x.to(dtype), weight.to(dtype)


def with_weight(norm, weight):
    with torch.no_grad():
        norm.weight.copy_(weight)
    return norm


@DTYPES
def test_rms_norm_is_torch_rms_norm_bit_for_bit(dtype):
    x, weight = norm_input(dtype)
    ours = with_weight(RMSNorm(64, eps=1e-5).to(dtype), weight)
    theirs = with_weight(torch.nn.RMSNorm(64, eps=1e-5).to(dtype), weight)
    x = x.requires_grad_()
    a, b = ours(x), theirs(x)
    assert a.dtype == dtype and torch.equal(a, b)
    probe = torch.randn(a.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    for g_ours, g_theirs in zip(
        torch.autograd.grad((a * probe).sum(), (x, ours.weight)),
        torch.autograd.grad((b * probe).sum(), (x, theirs.weight)),
    ):
        assert torch.equal(g_ours, g_theirs)


def test_rms_norm_equals_hf_llama_rms_norm_bit_for_bit_in_float32():
    x, weight = norm_input(torch.float32)
    ours = with_weight(RMSNorm(64, eps=1e-5), weight)
    theirs = with_weight(modeling_llama.LlamaRMSNorm(64, eps=1e-5), weight)
    assert torch.equal(ours(x), theirs(x))


@pytest.mark.parametrize(
    "dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"]
)
def test_in_half_precision_hf_rounds_before_the_weight_ours_once(dtype):
    """HF: weight * (normalised in float32).to(dtype): two roundings. Ours: the whole
    formula in float32, rounded once. Ours is the float64 answer to half a unit in the last
    place; HF's is off by up to one unit, and the two differ by at most one unit."""
    x, weight = norm_input(dtype)
    ours = with_weight(RMSNorm(64, eps=1e-5).to(dtype), weight)
    theirs = with_weight(modeling_llama.LlamaRMSNorm(64, eps=1e-5).to(dtype), weight)
    a, b = ours(x), theirs(x)
    normalised = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5)
    assert torch.equal(b, weight * normalised.to(dtype))  # HF's order, reproduced
    exact = with_weight(RMSNorm(64, eps=1e-5).double(), weight.double())(x.double())
    unit = torch.finfo(dtype).eps * exact.abs()  # >= the spacing of dtype at each value
    err_ours, err_hf = (a.double() - exact).abs(), (b.double() - exact).abs()
    assert (err_ours <= unit / 2).all()  # rounded once
    assert (err_hf <= unit).all() and (err_hf > unit / 2).any()  # rounded twice
    assert ((a.double() - b.double()).abs() <= unit).all()
    assert 0.1 < (a != b).double().mean() < 0.5  # about a quarter of the entries


def test_float64_input_hf_computes_in_float32():
    x, weight = norm_input(F64)
    ours = with_weight(RMSNorm(64, eps=1e-5).double(), weight)
    theirs = with_weight(modeling_llama.LlamaRMSNorm(64, eps=1e-5).double(), weight)
    a, b = ours(x), theirs(x)
    assert torch.equal(b, theirs(x.float()))  # float64 input: the float32 answer
    exact = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight
    torch.testing.assert_close(a, exact, atol=1e-15, rtol=0)  # ours: float64
    diff = (a - b).abs().max().item()
    assert 1e-9 < diff <= F32_BOUND * b.abs().max().item()


def test_eps_sits_inside_the_square_root_added_to_the_mean_square():
    """A constant row c with eps = c^2: x / sqrt(mean(x^2) + eps) = 1 / sqrt(2) exactly.
    eps added to the root mean square instead, x / (rms + eps) = 1 / (1 + c), is far from
    it (0.99 for c = 0.01): the three norms agree on the first."""
    c = 0.01
    x = torch.full((2, 8), c, dtype=F64)
    ours = RMSNorm(8, eps=c * c).double()
    theirs = modeling_llama.LlamaRMSNorm(8, eps=c * c).double()
    torch_norm = torch.nn.RMSNorm(8, eps=c * c).double()
    inside = torch.full_like(x, 2**-0.5)
    torch.testing.assert_close(ours(x), inside, atol=1e-15, rtol=0)
    torch.testing.assert_close(torch_norm(x), inside, atol=1e-15, rtol=0)
    torch.testing.assert_close(theirs(x), inside, atol=1e-7, rtol=0)  # float32 inside
    outside = x / (
        x.pow(2).mean(-1, keepdim=True).sqrt() + c * c
    )  # eps added to the rms
    assert (outside - inside).abs().min() > 0.2


# --- the block --------------------------------------------------------------------------
def block_pair(implementation: str, d_head: int | None, seed: int = 0):
    """(ours, theirs, rope): our float64 llama_block and HF's LlamaDecoderLayer holding the
    same weights (random gains), and HF's rotary embedding for the same config."""
    config = LlamaConfig(
        hidden_size=D,
        num_attention_heads=H,
        num_key_value_heads=H_KV,
        head_dim=d_head or D // H,
        intermediate_size=D_FF,
        num_hidden_layers=1,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
        attn_implementation=implementation,
    )
    torch.manual_seed(seed)
    ours = llama_block(
        D, H, H_KV, D_FF, d_head=d_head, rope_base=10_000.0, eps=1e-5
    ).double()
    with torch.no_grad():
        for norm in (ours.attn_norm, ours.ffn_norm):
            norm.weight.normal_(1.0, 0.3)
    theirs = modeling_llama.LlamaDecoderLayer(config, 0).double()
    theirs.load_state_dict({hf_layer_name(k): v for k, v in ours.state_dict().items()})
    assert theirs.self_attn.config._attn_implementation == implementation
    return ours, theirs, modeling_llama.LlamaRotaryEmbedding(config)


def block_input():
    return input_and_probe(B, T, D)


def block_grads(ours, theirs, rope, mask):
    cos_sin = rope(torch.zeros(B, T, D, dtype=F64), torch.arange(T).expand(B, T))
    return compare_grads(
        ours,
        ours,
        theirs,
        lambda x: theirs(x, attention_mask=mask, position_embeddings=cos_sin),
        hf_layer_name,
        shape=(B, T, D),
    )


@pytest.mark.parametrize("d_head", [None, 16], ids=["head_dim=d/H", "head_dim=2d/H"])
@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_llama_block_equals_hf_llama_decoder_layer(implementation, d_head):
    """sdpa: attention_mask=None (causal by itself); eager: the additive causal mask."""
    ours, theirs, rope = block_pair(implementation, d_head)
    assert len(list(ours.parameters())) == len(list(theirs.parameters())) == 9
    mask = hf_causal_mask(T) if implementation == "eager" else None
    assert_equal_to_hf(
        lambda: block_grads(ours, theirs, rope, mask),
        hf_in_input_dtype(theirs, modeling_llama),
        tol=F64_TOL,
    )


def test_trap_eager_with_no_mask_is_not_causal():
    """Eager attention with attention_mask=None attends to every key: the first position's
    output changes when the last token does. sdpa with None, and ours, are causal."""
    x, _ = block_input()
    later = x.detach().clone()
    later[:, -1] += 1.0  # change only the last token
    ours, eager, rope = block_pair("eager", None)
    _, sdpa, _ = block_pair("sdpa", None)
    cos_sin = rope(x, torch.arange(T).expand(B, T))
    with torch.no_grad():

        def first(layer, inputs, **kwargs):
            return layer(inputs, position_embeddings=cos_sin, **kwargs)[:, 0]

        assert (
            first(eager, x, attention_mask=None)
            - first(eager, later, attention_mask=None)
        ).abs().max() > 1e-3  # the future leaks into position 0
        assert torch.equal(
            first(sdpa, x, attention_mask=None), first(sdpa, later, attention_mask=None)
        )
        assert torch.equal(ours(x)[:, 0], ours(later)[:, 0])
        assert (
            eager(x, attention_mask=None, position_embeddings=cos_sin) - ours(x)
        ).abs().max() > 1e-3


def test_trap_eager_adds_a_bool_mask_as_zero_and_one():
    """A bool causal mask (True = attend) handed to eager attention is *added* to the
    scores: +1 where allowed, +0 where blocked; nothing is blocked."""
    ours, eager, rope = block_pair("eager", None)
    x, _ = block_input()
    cos_sin = rope(x, torch.arange(T).expand(B, T))
    allowed = torch.ones(T, T, dtype=torch.bool).tril()[None, None]
    with torch.no_grad():
        as_bool = eager(x, attention_mask=allowed, position_embeddings=cos_sin)
        as_01 = eager(x, attention_mask=allowed.to(F64), position_embeddings=cos_sin)
        assert torch.equal(as_bool, as_01)
        assert (as_bool - ours(x)).abs().max() > 1e-3
        causal = eager(x, attention_mask=hf_causal_mask(T), position_embeddings=cos_sin)
        torch.testing.assert_close(
            causal, ours(x), atol=F32_BOUND * causal.abs().max(), rtol=0
        )


# --- the model --------------------------------------------------------------------------
def hf_config(**changes) -> LlamaConfig:
    settings = hf_sizes(VOCAB, D, H, H_KV, D_FF, LAYERS) | {
        "max_position_embeddings": 32,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10_000.0},
        **NO_SPECIAL_TOKENS,
        "attn_implementation": "sdpa",
    }
    return LlamaConfig(**(settings | changes))


def hf_model(tied: bool, seed: int = 0) -> LlamaForCausalLM:
    """A float64 LlamaForCausalLM with every gain random (HF initialises them to 1)."""
    return random_gains_hf_model(
        LlamaForCausalLM, hf_config(tie_word_embeddings=tied), seed=seed
    )


@pytest.fixture(scope="module", params=[False, True], ids=["untied", "tied"])
def pair(request):
    theirs = hf_model(request.param)
    ours = llama_from_hf_config(theirs.config).double()
    load_hf_llama(ours, theirs.state_dict(), theirs.config)
    return ours, theirs


def ids(seed: int = 2, t: int = 9) -> torch.Tensor:
    return random_tokens(VOCAB, B, t, seed)


def test_the_model_is_what_we_think_it_is(pair):
    ours, theirs = pair
    tied = theirs.config.tie_word_embeddings
    assert (ours.lm_head.weight is ours.token_embedding.weight) == tied
    assert (theirs.lm_head.weight is theirs.model.embed_tokens.weight) == tied
    assert (
        len(list(ours.parameters()))
        == len(list(theirs.parameters()))
        == 3 + 9 * LAYERS - tied
    )
    assert isinstance(ours, LlamaLanguageModel) and len(ours.blocks) == LAYERS


def test_logits_and_every_gradient_equal_llama_for_causal_lm(pair):
    ours, theirs = pair
    assert_equal_to_hf(
        lambda: hf_model_grads(ours, theirs, ids(), hf_renamer(HF_LLAMA_NAMES)),
        hf_in_input_dtype(theirs, modeling_llama),
        tol=F64_TOL,
    )


def test_greedy_tokens_equal_hf_generate(pair):
    ours, theirs = pair
    prompt = ids(4, 5)
    want = theirs.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=10,
        do_sample=False,
    )
    got = ours.generate(prompt, 10)
    assert want.shape == (B, 15) and torch.equal(got, want)


def test_load_from_a_save_pretrained_folder(pair, tmp_path):
    """config.json read as a dict, model.safetensors as a state dict (a tied head is
    stored once): the model built from the dict and loaded gives the same logits."""
    ours, theirs = pair
    theirs.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    state = load_file(tmp_path / "model.safetensors")
    assert ("lm_head.weight" in state) != config["tie_word_embeddings"]
    rebuilt = load_hf_llama(llama_from_hf_config(config).double(), state, config)
    assert rebuilt.blocks[0].attn.d_head == config["head_dim"]
    with torch.no_grad():
        assert torch.equal(rebuilt(ids()), ours(ids()))


# --- loading: refusals ------------------------------------------------------------------
@pytest.fixture(scope="module")
def untied():
    theirs = hf_model(False, seed=5)
    return theirs, theirs.state_dict()


def fresh(config) -> LlamaLanguageModel:
    return llama_from_hf_config(config).double()


def refused(ours, state, config, pattern):
    before = {k: v.clone() for k, v in ours.state_dict().items()}
    with pytest.raises(ValueError, match=pattern):
        load_hf_llama(ours, state, config)
    after = ours.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # nothing was copied


def test_a_missing_weight_is_refused(untied):
    theirs, state = untied
    state = {k: v for k, v in state.items() if k != "model.layers.1.mlp.up_proj.weight"}
    refused(
        fresh(theirs.config),
        state,
        theirs.config,
        r"^state_dict lacks \['blocks\.1\.ffn\.up_proj\.weight'\] and has no place in "
        r"ours for \[\]$",
    )


def test_an_extra_weight_is_refused(untied):
    theirs, state = untied
    state = state | {"model.layers.0.self_attn.q_proj.bias": torch.zeros(D, dtype=F64)}
    refused(
        fresh(theirs.config),
        state,
        theirs.config,
        r"^state_dict lacks \[\] and has no place in ours for "
        r"\['blocks\.0\.attn\.q_proj\.bias'\]$",
    )


def test_a_misshapen_weight_is_refused(untied):
    theirs, state = untied
    state = state | {
        "model.layers.0.mlp.gate_proj.weight": torch.zeros(D_FF + 1, D, dtype=F64)
    }
    refused(
        fresh(theirs.config),
        state,
        theirs.config,
        r"^blocks\.0\.ffn\.gate_proj\.weight is \(49, 32\), ours \(48, 32\)$",
    )


def test_a_tied_model_refuses_a_head_unlike_the_embedding():
    theirs = hf_model(True, seed=6)
    state = dict(theirs.state_dict())
    state["lm_head.weight"] = state["lm_head.weight"] + 1.0
    refused(
        fresh(theirs.config),
        state,
        theirs.config,
        r"^lm_head\.weight differs from embed_tokens: ours is tied$",
    )


MISMATCHES = [  # a LlamaConfig change, then the message naming both sides
    (
        {"num_attention_heads": 8, "head_dim": 4},
        r"^ours has n_heads=4, theirs num_attention_heads=8$",
    ),
    (
        {"num_key_value_heads": 4},
        r"^ours has n_kv_heads=2, theirs num_key_value_heads=4$",
    ),
    ({"head_dim": 16}, r"^ours has d_head=8, theirs head_dim=16$"),
    ({"intermediate_size": 64}, r"^ours has d_ff=48, theirs intermediate_size=64$"),
    ({"rms_norm_eps": 1e-6}, r"^ours has eps=1e-05, theirs rms_norm_eps=1e-06$"),
    (
        {"rope_parameters": {"rope_type": "default", "rope_theta": 5e5}},
        r"^ours has rope_base=10000\.0, theirs rope_theta=500000\.0$",
    ),
    (
        {"tie_word_embeddings": True},
        r"^ours has tied=False, theirs tie_word_embeddings=True$",
    ),
    ({"vocab_size": 62}, r"^ours has vocab_size=61, theirs vocab_size=62$"),
    ({"num_hidden_layers": 3}, r"^ours has n_layers=2, theirs num_hidden_layers=3$"),
    (
        {"hidden_act": "gelu"},
        r"^config hidden_act='gelu' is not supported \(ours: 'silu'\)$",
    ),
    (
        {"attention_bias": True},
        r"^config attention_bias=True is not supported \(ours: False\)$",
    ),
    (
        {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}},
        r"^RoPE scaling 'linear' is not implemented",
    ),
]


@pytest.mark.parametrize(
    "changes, pattern",
    MISMATCHES,
    ids=[
        next(iter(c))
        + (f"={c['rope_parameters']['rope_type']}" if "rope_parameters" in c else "")
        for c, _ in MISMATCHES
    ],
)
def test_the_configuration_is_checked_before_any_weight(untied, changes, pattern):
    theirs, state = untied
    other = hf_config(**changes)
    refused(fresh(theirs.config), state, other, pattern)
    with pytest.raises(ValueError, match=pattern):  # the same words from the dict
        check_llama_config(fresh(theirs.config), other.to_dict())


def test_a_config_json_of_the_older_layout_is_read():
    """transformers 4.x wrote rope_theta and rope_scaling (kind "type", then "rope_type")
    at the top level and no head_dim; 5.x writes rope_parameters and head_dim."""
    old = {
        k: v
        for k, v in hf_config().to_dict().items()
        if k not in ("rope_parameters", "head_dim")
    } | {"rope_theta": 5e5}
    model = llama_from_hf_config(old)
    assert (
        model.blocks[0].attn.rope.base == 5e5 and model.blocks[0].attn.d_head == D // H
    )
    check_llama_config(model, old)
    with pytest.raises(ValueError, match=r"^RoPE scaling 'linear' is not"):
        llama_from_hf_config(old | {"rope_scaling": {"type": "linear", "factor": 2.0}})
    with pytest.raises(ValueError, match=r"llama3 RoPE scaling lacks \['high_freq"):
        llama_from_hf_config(
            old | {"rope_scaling": {"rope_type": "llama3", "factor": 8}}
        )
    llama3 = llama_from_hf_config(old | {"rope_scaling": LLAMA3 | {"type": "llama3"}})
    assert llama3.blocks[0].attn.rope.llama3["original_context"] == 1024
    check_llama_config(llama3, old | {"rope_scaling": LLAMA3})


# Llama 3.1's RoPE scaling on heads of 8: pairs 0 and 1 (wavelengths 6 and 63) are kept,
# pair 2 (628) is mixed, pair 3 (6,283) divided by the factor
LLAMA3 = {
    "rope_type": "llama3",
    "rope_theta": 10_000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 8.0,
    "original_max_position_embeddings": 1024,
}


@pytest.mark.parametrize(
    "d_head, theta, factor, original, high",
    [
        (128, 500_000.0, 8.0, 8192, 4.0),
        (64, 500_000.0, 32.0, 8192, 4.0),
        (8, 10_000.0, 8.0, 1024, 8.0),
    ],
    ids=["llama-3.1-8b", "llama-3.2-1b", "tiny"],
)
def test_llama3_frequencies_equal_hf_bit_for_bit(d_head, theta, factor, original, high):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    settings = {"low_freq_factor": 1.0, "high_freq_factor": high}
    config = hf_config(
        hidden_size=d_head * H,
        head_dim=d_head,
        max_position_embeddings=131_072,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": theta,
            "factor": factor,
            "original_max_position_embeddings": original,
            **settings,
        },
    )
    theirs, _ = ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
    ours = llama3_inverse_frequencies(
        d_head, base=theta, factor=factor, original_context=original, **settings
    )
    assert torch.equal(ours, theirs)
    plain = 1.0 / theta ** (torch.arange(0, d_head, 2).float() / d_head)
    assert (ours == plain).any() and (ours == plain / factor).any()  # both ends
    assert ((ours != plain) & (ours != plain / factor)).any()  # and the band


def test_llama3_settings_are_refused_by_name():
    with pytest.raises(ValueError, match=r"low_freq_factor=4 must be below high"):
        llama3_inverse_frequencies(
            8,
            base=1e4,
            factor=8,
            low_freq_factor=4,
            high_freq_factor=4,
            original_context=64,
        )
    with pytest.raises(ValueError, match=r"factor must be"):
        llama3_inverse_frequencies(
            8,
            base=1e4,
            factor=0,
            low_freq_factor=1,
            high_freq_factor=4,
            original_context=64,
        )


@pytest.fixture(scope="module")
def llama3_pair():
    config = hf_config(rope_parameters=LLAMA3, max_position_embeddings=2048)
    theirs = random_gains_hf_model(LlamaForCausalLM, config, seed=3)
    ours = llama_from_hf_config(theirs.config).double()
    load_hf_llama(ours, theirs.state_dict(), theirs.config)
    return ours, theirs


def test_logits_gradients_and_tokens_equal_hf_with_llama3_scaling(llama3_pair):
    ours, theirs = llama3_pair
    assert all(isinstance(b.attn.rope, Llama3RotaryEmbedding) for b in ours.blocks)
    assert_equal_to_hf(
        lambda: hf_model_grads(ours, theirs, ids(t=40), hf_renamer(HF_LLAMA_NAMES)),
        hf_in_input_dtype(theirs, modeling_llama),
        tol=F64_TOL,
    )
    prompt = ids(4, 5)
    want = theirs.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=10,
        do_sample=False,
    )
    assert torch.equal(ours.generate(prompt, 10), want)
    plain = llama_from_hf_config(hf_config(max_position_embeddings=2048)).double()
    plain.load_state_dict(ours.state_dict())
    with torch.no_grad():  # the scaling moves the logits far beyond float64 rounding
        assert (plain(ids(t=40)) - ours(ids(t=40))).abs().max() > 1e-6


def test_a_field_is_read_from_an_object_or_a_dict_alike():
    """The config's own value, else the default, else a ValueError naming the field, for
    a configuration object and its config.json dict the same way."""
    config = hf_config()
    for form in (config, config.to_dict()):
        assert config_field(form, "hidden_size", LLAMA_DEFAULTS) == D
        assert config_field(form, "nope", {"nope": 3}) == 3
        with pytest.raises(ValueError, match=r"^config has no 'nope' \(and no default"):
            config_field(form, "nope", LLAMA_DEFAULTS)
    assert config_field({"rms_norm_eps": 0.5}, "rms_norm_eps", LLAMA_DEFAULTS) == 0.5
    assert config_field({}, "rms_norm_eps", LLAMA_DEFAULTS) == 1e-6


def test_head_dim_other_than_hidden_over_heads_is_built():
    config = hf_config(head_dim=16)
    model = llama_from_hf_config(config)
    attn = model.blocks[0].attn
    assert (attn.d_head, attn.q_proj.out_features, attn.o_proj.in_features) == (
        16,
        64,
        64,
    )
    assert attn.rope.d_head == 16
    check_llama_config(model, config)


# --- syncs and compile ------------------------------------------------------------------
def test_no_host_sync_in_run_one_in_forward_and_in_a_block_none():
    torch.manual_seed(7)
    model = llama_from_hf_config(hf_config()).eval()
    tokens = ids()
    assert host_reads(model.run, tokens) == 0
    assert host_reads(model, tokens) == 1  # the id check
    assert host_reads(model.blocks[0], torch.randn(B, T, D)) == 0


def test_fullgraph_compile_of_the_model_equals_eager():
    torch.manual_seed(8)
    model = llama_from_hf_config(hf_config()).eval()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    tokens = ids()
    with torch.no_grad():
        torch.testing.assert_close(compiled(tokens), model(tokens), atol=0, rtol=0)


def test_the_language_models_share_one_interface():
    """Checking, running, generating and the loss are DecoderLanguageModel's, written
    once: GPT-2's and Llama's models give only their parts, `embed` and `context`
    (Llama borrowed GPT-2's methods, and chapter 5's loss refused a Llama)."""
    import torch.nn.functional as F

    from literate.models.decoder import DecoderLanguageModel
    from literate.models.gpt2 import GPTLanguageModel, next_token_loss
    from literate.models.llama import llama_model

    for cls in (GPTLanguageModel, LlamaLanguageModel):
        assert issubclass(cls, DecoderLanguageModel)
        assert {"check", "forward", "run", "generate", "vocab_size"}.isdisjoint(
            vars(cls)
        )
        assert {"embed", "context"} <= set(vars(cls))
    torch.manual_seed(0)
    model = llama_model(61, 16, 32, 4, 2, 2, 48).double()
    ids = torch.randint(0, 61, (2, 9))
    logits = model.run(ids[:, :-1])
    expected = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
    torch.testing.assert_close(next_token_loss(model, ids), expected, rtol=0, atol=0)
