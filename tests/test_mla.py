"""Multi-head latent attention (literate/parts/mla.py) against Hugging Face's DeepSeek-V3 and
against itself.

- `MultiHeadLatentAttention` == `DeepseekV3Attention` (float64; sdpa, so its softmax is
  float64 too): output and the gradients of the input and of every parameter, with the
  query bottleneck and without (q_proj), RoPE interleaved (HF's default) and rotate-half,
  with attention biases; in the naive form and in the absorbed one.
- The absorbed form == the naive form: outputs, weights and gradients of a full forward
  (padded, causal), and cached decoding step by step == the full forward, in both forms.
- The tiny `DeepseekV3ForCausalLM` (one dense block, one MoE block with a shared expert
  and a balancing bias that changes the choice) == ours built from its config and loaded
  by name: logits and every gradient; greedy cached `generate` == HF `generate` on a
  left-padded batch, beam search == HF's beam search, and a reorder that moves the
  latent twice (the inherited KVCache.reorder) breaks the beam scores.
- HF's cache holds the latent too: its layers' keys are our cached c_kv and its values
  our cached k_rope, in HF's de-interleaved order.
- Counts: the layer's parameters == `mla_params` == HF's; the cache bytes per token ==
  the formulas == the `.nbytes` of our caches and of HF's.
- No host read in a forward; fullgraph compile (aot_eager) == eager.

Tolerances as in tests/test_llama.py: HF's RMSNorms compute in float32, so (1) HF as it
is: each tensor within F32_BOUND = 16 float32 ulps of its largest entry, and further than
1e-12 from ours (the float32 steps really are in its path); (2) HF with its norms
computing in the input dtype (a test-harness patch): max |diff| <= F64_TOL = 1e-12
(measured: 3e-14 for the layer, 1.1e-13 for the model's gradients). RoPE's tables are float32 numbers on both sides, cast to
float64 exactly. Absorbed against naive: both ours, float64, the same products summed in
another order: <= 1e-12 (measured ~3e-15).
"""

from __future__ import annotations

import warnings
from functools import partial

import pytest
import torch
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM, DynamicCache
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf_ds

from literate.decoding.beam import beam_generate
from literate.decoding.generate import generate, new_decode_cache
from literate.models.deepseek_v3 import (
    HF_DEEPSEEK_V3_NAMES,
    check_deepseek_v3_config,
    deepseek_rope,
    deepseek_v3_from_hf_config,
    load_hf_deepseek_v3,
    mla_from_hf_config,
)
from literate.models.mixtral import mla_params
from literate.numbers.params import kv_cache_bytes_per_token
from literate.parts.cache import DecodeCache, KVCache
from literate.parts.mla import (
    LatentCache,
    MultiHeadLatentAttention,
    expanded_cache_bytes_per_token,
    latent_cache_bytes_per_token,
)
from literate.parts.moe import MoEFFN
from literate.parts.positions import interleaved_to_half_permutation
from literate.parts.rope_scaling import YarnRotaryEmbedding, yarn_inverse_frequencies
from literate.tools.syncs import host_reads
from literate.tools.timing import time_decode_steps

import harness
from harness import (
    assert_equal_to_hf,
    compare_grads,
    hf_model_grads,
    hf_norms_in_input_dtype,
    hf_renamer,
    input_and_probe,
    latent_dims,
    random_gains_hf_model,
    random_tokens,
    randomise_,
    tiny_deepseek_v3_config,
)

F64 = torch.float64
F64_TOL = 1e-12
D, H, R_Q, R_KV, D_NOPE, D_ROPE, D_V = 32, 4, 24, 16, 10, 6, 12
B, T, VOCAB, LAYERS = 2, 7, 61, 2


DIMS = latent_dims(R_Q, R_KV, D_NOPE, D_ROPE, D_V)
hf_config = tiny_deepseek_v3_config  # these sizes: D, H, DIMS, VOCAB, LAYERS
assert_float64_equal = partial(harness.assert_float64_equal, tol=F64_TOL)


def inputs(seed: int = 1, t: int = T):
    return input_and_probe(B, t, D, seed=seed)


# --- the layer against DeepseekV3Attention ----------------------------------------------
LAYER_CASES = {
    "q_lora": {},
    "q_proj": {"q_lora_rank": None},
    "rotate_half": {"rope_interleave": False},
    "bias": {"attention_bias": True},
}


def layer_pair(case: str):
    config = hf_config(**LAYER_CASES[case])
    theirs = randomise_(hf_ds.DeepseekV3Attention(config, layer_idx=0).double(), 0)
    ours = mla_from_hf_config(config).double()
    ours.load_state_dict(theirs.state_dict(), strict=True)  # HF's names, as they are
    return ours, theirs, hf_ds.DeepseekV3RotaryEmbedding(config)


def layer_grads(ours, theirs, rope, t: int = T):
    cos_sin = rope(torch.zeros(B, t, D, dtype=F64), torch.arange(t).expand(B, t))
    return compare_grads(
        ours,
        lambda x: ours(x, causal=True),
        theirs,
        lambda x: theirs(x, position_embeddings=cos_sin, attention_mask=None)[0],
        shape=(B, t, D),
    )  # sdpa, no mask: causal


@pytest.mark.parametrize("absorb", ["never", "always"])
@pytest.mark.parametrize("case", LAYER_CASES)
def test_layer_equals_deepseek_v3_attention(case, absorb):
    ours, theirs, rope = layer_pair(case)
    ours.absorb = absorb
    assert len(list(ours.parameters())) == len(list(theirs.parameters()))
    assert_equal_to_hf(
        lambda: layer_grads(ours, theirs, rope),
        hf_norms_in_input_dtype(theirs, hf_ds),
        tol=F64_TOL,
    )


def test_hf_layout_rope_and_scale_are_what_the_module_says():
    """HF 5.24: interleaved RoPE by default, its output de-interleaved; scale 1/sqrt(d_qk);
    its latent norms' eps is 1e-6 whatever rms_norm_eps; ours the same."""
    ours, theirs, _ = layer_pair("q_lora")
    assert theirs.config.rope_interleave and ours.rope.layout == "interleaved"
    assert theirs.scaling == ours.scale == (D_NOPE + D_ROPE) ** -0.5
    assert theirs.kv_a_layernorm.variance_epsilon == ours.kv_a_layernorm.eps == 1e-6
    assert theirs.q_a_layernorm.variance_epsilon == ours.q_a_layernorm.eps == 1e-6
    x = torch.randn(1, 2, 3, D_ROPE, dtype=F64)  # [B, H, T, d_rope]
    cos, sin = hf_ds.DeepseekV3RotaryEmbedding(theirs.config)(x, torch.arange(3)[None])
    hf_q, _ = hf_ds.apply_rotary_pos_emb_interleave(x, x, cos, sin)  # de-interleaved
    ours_q = ours.rope(x)  # interleaved: the same numbers, in another order
    assert torch.equal(hf_q, ours_q[..., interleaved_to_half_permutation(D_ROPE)])
    assert not torch.equal(hf_q, ours_q)


YARN_CASES = {  # DeepSeek-V3's kind (mscale = mscale_all_dim: cos and sin unscaled), and
    # one whose attention factor is not 1, with an untruncated ramp
    "deepseek": {"factor": 4.0, "mscale": 1.0, "mscale_all_dim": 1.0},
    "attention_factor": {
        "factor": 3.0,
        "mscale": 1.0,
        "mscale_all_dim": 0.5,
        "truncate": False,
        "beta_fast": 8.0,
    },
}


@pytest.mark.parametrize("case", YARN_CASES)
def test_yarn_layer_equals_deepseek_v3_attention_past_the_original_context(case):
    """YaRN over an original context of 8, inputs of 20 positions: HF's inverse
    frequencies and attention factor bit for bit, its scale, its output and gradients."""
    rope = {
        "rope_type": "yarn",
        "rope_theta": 10_000.0,
        "original_max_position_embeddings": 8,
    } | YARN_CASES[case]
    config = hf_config(rope_parameters=rope)
    theirs = randomise_(hf_ds.DeepseekV3Attention(config, layer_idx=0).double(), 0)
    ours = mla_from_hf_config(config).double()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    hf_rope = hf_ds.DeepseekV3RotaryEmbedding(config)
    assert isinstance(ours.rope, YarnRotaryEmbedding)
    inv_freq = yarn_inverse_frequencies(D_ROPE, base=10_000.0, **ours.rope.yarn)
    assert torch.equal(inv_freq, hf_rope.inv_freq)
    assert ours.rope.attention_factor == hf_rope.attention_scaling
    assert (hf_rope.attention_scaling != 1) == (case == "attention_factor")
    assert ours.scale == theirs.scaling != (D_NOPE + D_ROPE) ** -0.5
    kept = inv_freq == 1 / 10_000.0 ** (torch.arange(0, D_ROPE, 2).float() / D_ROPE)
    assert 0 < kept.sum() < len(kept)  # some pairs keep their frequency, some do not
    assert_equal_to_hf(
        lambda: layer_grads(ours, theirs, hf_rope, t=20),
        hf_norms_in_input_dtype(theirs, hf_ds),
        tol=F64_TOL,
    )


def test_deepseek_v3_published_rope_equals_hf():
    """DeepSeek-V3's config.json (old style, `rope_scaling`): yarn, factor 40 over 4096;
    the softmax scale 1/sqrt(192) times (0.1 ln 40 + 1)^2 = 1.87."""
    published = {
        "rope_theta": 10_000,
        "max_position_embeddings": 163_840,
        "rope_scaling": {
            "type": "yarn",
            "factor": 40,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
        },
    }
    config = DeepseekV3Config(**published)
    rope, scale = deepseek_rope(published)  # read from the plain dict
    with torch.device("meta"):
        attention = hf_ds.DeepseekV3Attention(config, layer_idx=0)
    hf_rope = hf_ds.DeepseekV3RotaryEmbedding(config)
    assert scale == attention.scaling and round(scale * 192**0.5, 4) == 1.8739
    assert torch.equal(
        yarn_inverse_frequencies(64, base=10_000.0, **rope.yarn), hf_rope.inv_freq
    )
    assert rope.attention_factor == hf_rope.attention_scaling == 1.0
    assert deepseek_rope(config)[1] == scale  # and from the config object


# --- absorbed == naive ------------------------------------------------------------------
def twin_layers(seed: int = 0, **options):
    naive = randomise_(
        MultiHeadLatentAttention(D, H, **DIMS, absorb="never", **options).double(),
        seed,
    )
    absorbed = MultiHeadLatentAttention(
        D, H, **DIMS, absorb="always", **options
    ).double()
    absorbed.load_state_dict(naive.state_dict())
    return naive, absorbed


def test_absorbed_equals_naive_outputs_weights_and_gradients():
    naive, absorbed = twin_layers()
    key_valid = torch.ones(B, T, dtype=torch.bool)
    key_valid[1, :3] = False  # left padding: row 1's first queries see no key
    diffs = []
    for kwargs in ({}, {"key_valid": key_valid, "empty_row": "zero"}):
        x, probe = inputs()
        got = {}
        for name, layer in (("naive", naive), ("absorbed", absorbed)):
            out, weights = layer(x, causal=True, return_weights=True, **kwargs)
            fused = layer(x, causal=True, **kwargs)  # the kernel's path
            grads = torch.autograd.grad((out * probe).sum(), [x, *layer.parameters()])
            got[name] = [out, fused, weights, *grads]
        labels = [
            "out",
            "fused",
            "weights",
            "x",
            *(n for n, _ in naive.named_parameters()),
        ]
        diffs.append(assert_float64_equal(labels, got["absorbed"], got["naive"]))
        assert_float64_equal(["fused"], [got["naive"][1]], [got["naive"][0]])
    assert min(diffs) > 0  # two computations, not one


@pytest.mark.parametrize("absorb", ["never", "decode", "always"])
def test_cached_decoding_equals_the_full_forward(absorb):
    """Prefill 3 tokens, a chunk of 2, then one at a time: every output == the full
    forward's at its position. "decode" is naive for the prefill, absorbed after."""
    naive, _ = twin_layers(seed=2)
    naive.absorb = absorb
    x, _ = inputs(3, t=9)
    with torch.no_grad():
        full = naive(x, causal=True)
        cache = naive.new_cache(B, 9)
        pieces = [
            naive(x[:, s:e], causal=True, cache=cache)
            for s, e in ((0, 3), (3, 5), *((i, i + 1) for i in range(5, 9)))
        ]
    assert cache.next_pos == 9
    assert_float64_equal(["cached"], [torch.cat(pieces, dim=1)], [full])


def test_decode_mode_up_projects_the_prefill_and_absorbs_each_step(monkeypatch):
    from literate.parts import mla

    calls = []
    monkeypatch.setattr(
        mla,
        "absorb_query",
        lambda *a: calls.append(1) or mla.torch.cat((a[0] @ a[2], a[1]), dim=-1),
    )
    layer, _ = twin_layers(seed=3)
    layer.absorb = "decode"
    x, _ = inputs(2, t=4)
    with torch.no_grad():
        cache = layer.new_cache(B, 5)
        layer(x, causal=True, cache=cache)  # the prefill: naive
        assert calls == []
        layer(x[:, :1], causal=True, cache=cache)  # a step: absorbed
        assert calls == [1]
        layer(x, causal=True)  # a full forward: naive
        assert calls == [1]


def test_decoding_steps_of_the_two_forms_agree_on_the_same_cache():
    naive, absorbed = twin_layers(seed=4)
    x, _ = inputs(5, t=6)
    with torch.no_grad():
        cache = naive.new_cache(B, 7)
        naive(x, causal=True, cache=cache)
        step = torch.randn(B, 1, D, dtype=F64)
        a = naive(step, causal=True, cache=cache)
        cache.truncate(6)
        cache.owner = None  # the same latents, read by the twin
        b = absorbed(step, causal=True, cache=cache)
    assert 0 < (a - b).abs().max() <= F64_TOL


# --- the cache --------------------------------------------------------------------------
def test_the_latent_cache_stores_the_latent_once():
    cache = LatentCache(3, 5, R_KV, D_ROPE, dtype=torch.bfloat16)
    assert cache.k.shape == (3, 1, 5, R_KV + D_ROPE)
    assert cache.v.data_ptr() == cache.k.data_ptr() and cache.v.shape[-1] == R_KV
    assert cache.nbytes == 3 * 5 * latent_cache_bytes_per_token(1, R_KV, D_ROPE, 2)
    g = torch.Generator().manual_seed(0)
    c, k_rope = (
        torch.randn(3, 1, 4, R_KV, generator=g),
        torch.randn(3, 1, 4, D_ROPE, generator=g),
    )
    filled = cache.append(c.bfloat16(), k_rope.bfloat16())
    assert filled.shape == (3, 1, 4, R_KV + D_ROPE) and cache.next_pos == 4
    assert torch.equal(filled, torch.cat((c, k_rope), -1).bfloat16())
    before = cache.k.clone()
    rows = torch.tensor([2, 0, 1])  # a 3-cycle: applied twice it is another permutation
    cache.reorder(rows)
    assert torch.equal(cache.k[:, :, :4], before[rows][:, :, :4])
    cache.truncate(1)
    assert cache.next_pos == 1 and cache.k[:, :, 1:].abs().sum() == 0
    cache.reset()
    assert cache.next_pos == 0 and cache.owner is None and cache.k.abs().sum() == 0


def test_the_latent_cache_refuses_what_does_not_fit():
    cache = LatentCache(2, 3, R_KV, D_ROPE)
    with pytest.raises(ValueError, match=r"c_new must be \[B, 1, T, 16\]"):
        cache.append(torch.zeros(2, 1, 1, R_KV + 1), torch.zeros(2, 1, 1, D_ROPE))
    with pytest.raises(ValueError, match=r"needs capacity >= 4"):
        cache.append(torch.zeros(2, 1, 4, R_KV), torch.zeros(2, 1, 4, D_ROPE))
    with pytest.raises(ValueError, match=r"rows must be torch.long \[batch=2\]"):
        cache.reorder(torch.tensor([0]))
    layer = MultiHeadLatentAttention(
        D,
        H,
        q_lora_rank=None,
        kv_lora_rank=R_KV + 2,
        qk_nope_head_dim=D_NOPE,
        qk_rope_head_dim=D_ROPE,
        v_head_dim=D_V,
    )
    x = torch.randn(2, 1, D)
    with torch.no_grad():
        with pytest.raises(ValueError, match=r"latents of \[kv_lora_rank, d_rope\]"):
            layer(x, causal=True, cache=cache)
        with pytest.raises(TypeError, match=r"cache must be a LatentCache"):
            layer(x, causal=True, cache=KVCache(2, 1, 3, R_KV + 2 + D_ROPE))
        layer(x, causal=True, cache=layer.new_cache(2, 3))
    with pytest.raises(ValueError, match=r"for inference"):
        layer(x, causal=True, cache=layer.new_cache(2, 3))


# --- refusals ---------------------------------------------------------------------------
def test_bad_arguments_are_refused_naming_them():
    with pytest.raises(ValueError, match=r"qk_rope_head_dim must be even"):
        MultiHeadLatentAttention(D, H, **(DIMS | {"qk_rope_head_dim": 5}))
    with pytest.raises(TypeError, match=r"q_lora_rank must be an int"):
        MultiHeadLatentAttention(D, H, **(DIMS | {"q_lora_rank": True}))
    with pytest.raises(ValueError, match=r"absorb must be one of"):
        MultiHeadLatentAttention(D, H, absorb="sometimes", **DIMS)
    with pytest.raises(ValueError, match=r"rope_layout must be one of"):
        MultiHeadLatentAttention(D, H, rope_layout="neox", **DIMS)
    layer = MultiHeadLatentAttention(D, H, **DIMS)
    x = torch.randn(B, T, D)
    with pytest.raises(TypeError, match=r"causal must be a bool"):
        layer(x, causal=1)
    with pytest.raises(ValueError, match=r"x must have last axis 32"):
        layer(torch.randn(B, T, D + 1), causal=True)
    with pytest.raises(ValueError, match=r"key_valid must be \[B=2, T_k=7\]"):
        layer(x, causal=True, key_valid=torch.ones(B, T + 1, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"positions must be \[B=2, T_q=7\]"):
        layer(x, causal=True, positions=torch.zeros(B, T + 1, dtype=torch.long))
    padded = torch.ones(B, T, dtype=torch.bool)
    padded[0, :2] = False
    with pytest.raises(ValueError, match=r"no key to attend to"):
        layer(x, causal=True, key_valid=padded)


def test_a_config_ours_cannot_follow_is_refused():
    linear = {"rope_type": "linear", "rope_theta": 10_000.0, "factor": 4.0}
    with pytest.raises(ValueError, match=r"RoPE scaling 'linear' is not implemented"):
        mla_from_hf_config(hf_config(rope_parameters=linear))
    with pytest.raises(ValueError, match=r"num_key_value_heads=2 must equal"):
        mla_from_hf_config(hf_config(num_key_value_heads=2))
    with pytest.raises(ValueError, match=r"config hidden_act='gelu' is not supported"):
        deepseek_v3_from_hf_config(hf_config(hidden_act="gelu"))


# --- the model against DeepseekV3ForCausalLM --------------------------------------------
@pytest.fixture(scope="module")
def pair():
    theirs = random_gains_hf_model(DeepseekV3ForCausalLM, hf_config())
    with torch.no_grad():
        g = torch.Generator().manual_seed(7)
        bias = theirs.model.layers[1].mlp.gate.e_score_correction_bias
        bias.copy_(0.3 * torch.randn(bias.shape, generator=g, dtype=F64))
    ours = deepseek_v3_from_hf_config(theirs.config).double().eval()
    load_hf_deepseek_v3(ours, theirs.state_dict(), theirs.config)
    return ours, theirs


def tokens(seed: int = 2, t: int = 9) -> torch.Tensor:
    return random_tokens(VOCAB, B, t, seed)


def test_the_model_is_what_we_think_it_is(pair):
    ours, theirs = pair
    assert [isinstance(b.ffn, MoEFFN) for b in ours.blocks] == [False, True]
    assert len(list(ours.parameters())) == len(list(theirs.parameters()))
    assert torch.equal(
        ours.blocks[1].ffn.router.e_score_correction_bias,
        theirs.model.layers[1].mlp.gate.e_score_correction_bias,
    )
    check_deepseek_v3_config(ours, theirs.config.to_dict())
    with pytest.raises(
        ValueError,
        match=r"^ours has blocks\[0\].attn.kv_lora_rank=16, "
        r"theirs kv_lora_rank=8$",
    ):
        check_deepseek_v3_config(ours, hf_config(kv_lora_rank=8))
    with pytest.raises(
        ValueError,
        match=r"^ours has blocks\[1\].ffn is MoE=True, "
        r"theirs first_k_dense_replace=False$",
    ):
        check_deepseek_v3_config(ours, hf_config(first_k_dense_replace=2))


def test_logits_and_every_gradient_equal_deepseek_v3_for_causal_lm(pair):
    ours, theirs = pair
    assert_equal_to_hf(
        lambda: hf_model_grads(
            ours, theirs, tokens(), hf_renamer(HF_DEEPSEEK_V3_NAMES)
        ),
        hf_norms_in_input_dtype(theirs, hf_ds),
        tol=F64_TOL,
    )


PROMPT = torch.tensor([[5, 9, 17, 33, 3, 4], [0, 0, 20, 2, 11, 7], [0, 0, 0, 0, 8, 30]])
MASK = torch.tensor([[1] * 6, [0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 1, 1]])


@pytest.mark.parametrize("absorb", ["decode", "never"])
def test_greedy_cached_generate_equals_hf_generate(pair, absorb):
    ours, theirs = pair
    for block in ours.blocks:
        block.attn.absorb = absorb
    try:
        mine = generate(ours, PROMPT, 8, valid=MASK.bool())
    finally:
        for block in ours.blocks:
            block.attn.absorb = "decode"
    hf = theirs.generate(
        PROMPT, attention_mask=MASK, max_new_tokens=8, do_sample=False, pad_token_id=0
    )
    assert torch.equal(mine, hf)
    assert len({tuple(row) for row in mine[:, 6:].tolist()}) == 3  # rows that differ


def test_beam_search_equals_hf_and_needs_the_latent_reordered_once(pair, monkeypatch):
    ours, theirs = pair
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = theirs.generate(
            PROMPT,
            attention_mask=MASK,
            num_beams=3,
            do_sample=False,
            max_new_tokens=6,
            pad_token_id=1,
            output_scores=True,
            return_dict_in_generate=True,
        )
    sequences, scores = beam_generate(ours, PROMPT, 3, 6, valid=MASK.bool())
    assert torch.equal(sequences, hf.sequences)
    bound = 16 * 2.0**-23 * hf.sequences_scores.abs().max()  # HF scores in float32
    assert (scores - hf.sequences_scores).abs().max() < bound
    monkeypatch.setattr(LatentCache, "reorder", KVCache.reorder)  # k, then its view v
    wrong, _ = beam_generate(ours, PROMPT, 3, 6, valid=MASK.bool())
    assert not torch.equal(wrong, sequences)


def test_hf_caches_the_latent_too_and_ours_holds_the_same_numbers(pair):
    """HF's DynamicCache after a prefill: keys [B, 1, T, r] = the normed latent, values
    [B, 1, T, d_rope] = the rotated shared key, de-interleaved. Same bytes per token."""
    ours, theirs = pair
    ids = tokens(4, t=5)
    with torch.no_grad(), hf_norms_in_input_dtype(theirs, hf_ds):
        hf_cache = DynamicCache(config=theirs.config)
        theirs(input_ids=ids, cache=hf_cache, use_cache=True)
        cache = new_decode_cache(ours, B, 5)
        from literate.decoding.generate import cached_run

        cached_run(ours, ids, cache)
    perm = interleaved_to_half_permutation(D_ROPE)
    for layer, mine in zip(hf_cache.layers, cache.layers, strict=True):
        assert isinstance(mine, LatentCache)
        assert layer.keys.shape == (B, 1, 5, R_KV) and layer.values.shape == (
            B,
            1,
            5,
            D_ROPE,
        )
        latent = mine.k[:, :, :5]
        assert (latent[..., :R_KV] - layer.keys).abs().max() <= F64_TOL
        assert (latent[..., R_KV:][..., perm] - layer.values).abs().max() <= F64_TOL
    hf_bytes = sum(layer.keys.nbytes + layer.values.nbytes for layer in hf_cache.layers)
    per_token = latent_cache_bytes_per_token(LAYERS, R_KV, D_ROPE, 8)
    assert hf_bytes == B * 5 * per_token == cache.nbytes  # capacity 5: all filled


def test_no_host_sync_in_run_or_in_a_decoding_step(pair):
    ours, _ = pair
    assert host_reads(ours.run, tokens()) == 0
    layer = ours.blocks[0].attn
    x = torch.randn(B, 4, D, dtype=F64)
    with torch.no_grad():
        cache = layer.new_cache(B, 5)
        assert host_reads(layer, x, causal=True, cache=cache) == 0
        assert host_reads(layer, x[:, :1], causal=True, cache=cache) == 0  # absorbed


# --- counts -----------------------------------------------------------------------------
@pytest.mark.parametrize("q_lora_rank", [R_Q, None])
def test_parameters_equal_mla_params_and_hf(q_lora_rank):
    ours = mla_from_hf_config(hf_config(q_lora_rank=q_lora_rank))
    theirs = hf_ds.DeepseekV3Attention(hf_config(q_lora_rank=q_lora_rank), 0)
    formula = mla_params(D, H, **(DIMS | {"q_lora_rank": q_lora_rank}))
    assert (
        sum(p.numel() for p in ours.parameters())
        == formula
        == sum(p.numel() for p in theirs.parameters())
    )


def test_cache_bytes_per_token_formulas_and_storage(pair):
    ours, _ = pair
    cache = new_decode_cache(ours, 3, 10)
    assert isinstance(cache, DecodeCache)
    assert cache.nbytes == 3 * 10 * latent_cache_bytes_per_token(
        LAYERS, R_KV, D_ROPE, 8
    )
    layer = ours.blocks[0].attn  # what caching the up-projected keys and values costs
    c, k_rope = (
        torch.randn(3, 1, 10, R_KV, dtype=F64),
        torch.randn(3, 1, 10, D_ROPE, dtype=F64),
    )
    k, v = layer.up_project(c, k_rope)
    assert k.nbytes + v.nbytes == 3 * 10 * expanded_cache_bytes_per_token(
        1, H, D_NOPE + D_ROPE, D_V, 8
    )
    # with d_qk = d_v it is chapter 3's multi-head cache
    assert expanded_cache_bytes_per_token(
        61, 128, 128, 128, 2
    ) == kv_cache_bytes_per_token(61, 128, 128, 2)
    latent = latent_cache_bytes_per_token(61, 512, 64, 2)  # DeepSeek-V3 in bfloat16
    expanded = expanded_cache_bytes_per_token(61, 128, 192, 128, 2)
    assert (latent, expanded, round(expanded / latent, 1)) == (70_272, 4_997_120, 71.1)
    # DeepSeek-V2, Table 1: as much as GQA with 2.25 groups of d_h = 128
    assert latent == kv_cache_bytes_per_token(61, 1, 128, 2) * 2.25


# --- compile and timing -----------------------------------------------------------------
class BothForms(torch.nn.Module):
    """The naive and the absorbed twin in one module: one graph to compile."""

    def __init__(self, naive, absorbed):
        super().__init__()
        self.naive, self.absorbed = naive, absorbed

    def forward(self, x):
        return self.naive(x, causal=True), self.absorbed(x, causal=True)


def test_fullgraph_compile_equals_eager():
    both = BothForms(*twin_layers(seed=6))
    x, _ = inputs()
    compiled = torch.compile(both, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        for got, want in zip(compiled(x), both(x), strict=True):
            assert torch.equal(got, want)


def test_time_decode_steps_times_both_forms_and_leaves_the_layer_as_it_was():
    naive, _ = twin_layers(seed=8)
    naive.absorb = "decode"
    times = time_decode_steps(naive, 5, repeats=2)
    assert set(times) == {"naive", "absorbed"}
    assert all(len(s) == 2 and min(s) > 0 for s in times.values())
    assert naive.absorb == "decode"
