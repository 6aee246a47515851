"""Gemma 3's text model, local and global layers (chapter 10), against Hugging Face's
`Gemma3ForCausalLM` (transformers 5.24, a `Gemma3TextConfig`), weights copied, float64.

- The tiny model follows Gemma 3's layer-type list, 5 local to 1 global (HF's default
  `layer_types` for 6 layers): local layers with the window (4, the sequence 12) and RoPE
  base `rope_parameters["sliding_attention"]["rope_theta"]` = 10,000, the global one
  full with `rope_parameters["full_attention"]["rope_theta"]` = 1,000,000; each layer is
  chapter 7's `gemma3_block`, a local one with chapter 10's `SlidingWindowAttention`.
  Model-level parts: the embedding times sqrt(d) (HF's
  `Gemma3TextScaledWordEmbedding`), the zero-centred final norm, the tied head, the pad
  row's zero gradient (`padding_idx` = pad_token_id 0). Logits and every gradient equal.
- Greedy cached decoding past the window (6 + 20 tokens) == HF `generate` (DynamicCache:
  sliding layers in a DynamicSlidingWindowLayer, the global one growing) == our uncached
  forward; our cache is five rings of 4 slots and one full cache. A left-padded batch ==
  HF's.
- The scale: HF's float32 sqrt(d), a buffer cast with the model (in bfloat16 rounded
  before it multiplies, bit for bit as HF; in float64 its float32 rounding, as HF's).
- Linear RoPE scaling (Gemma 3 4B-27B's global layers, factor 8): our
  LinearScaledRotaryEmbedding's float32 tables are bit-equal to HF's
  Gemma3RotaryEmbedding("full_attention") at lengths 1 to 5,000 (factor 8, and 3, where
  dividing the positions instead of the frequencies rounds otherwise); the six-layer
  model with factor 8 on its global layer == HF in logits and every gradient (12
  positions: the scaled layer's fastest pair turns 11 rad against 1.4, so the factor
  on the local layers instead, or on none, moves the logits by 1e-3 or more); the
  older `rope_scaling` form and `rope_parameters` build the same model.
- Loading: from the config object, its config.json, and an older config.json
  (rope_theta, rope_local_base_freq, sliding_window_pattern) alike; refused, naming the
  field: logit soft-capping, RoPE scaling other than linear (and a linear one without
  a positive factor, or an old `type` that contradicts `rope_type`), bidirectional
  attention, a multimodal config, an unknown layer type, a mismatched layer (window,
  RoPE kind, base, factor).
- KV-cache bytes by formula (global layers: the context; local: min(window, context))
  == what `generate` allocates; no host sync in `run`.

Tolerances as in tests/test_modern_blocks.py: HF's Gemma3RMSNorm computes in float32 (HF's
embedding scale is a float32 tensor, sqrt(32) rounded to float32 even in a float64 model,
and so is ours). (1) HF as it is: each tensor within DEEP_F32_BOUND of its largest entry, and
further than 1e-12; (2) HF with its norms in the input dtype (a test-harness patch): max
|diff| <= 1e-10. Measured: (1) 17.5 float32 ulps at
worst (a k_proj gradient of a local layer; the logits 3.4), DEEP_F32_BOUND = 64 ulps, four times
the single block's 16 of tests/test_modern_blocks.py, for six blocks of six norms; (2)
1.4e-13 (the logits 0); with linear factor 8 on the global layer, (1) 18.1 ulps (a
q_proj gradient; the logits 4.3), (2) 8.5e-14. A wrong window, base, scale or scaled
layer kind moves logits by 1e-3 or more (the factor on the local layers: 0.24). Ours
vs ours (cached vs uncached): 1e-12.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import Gemma3ForCausalLM, Gemma3TextConfig
from transformers.models.gemma3 import modeling_gemma3 as gemma3

from literate.decoding.generate import generate, new_decode_cache
from literate.models.gemma3 import (
    HF_GEMMA3_NAMES,
    Gemma3LanguageModel,
    check_gemma3_config,
    gemma3_from_hf_config,
    gemma3_layer_types,
    gemma3_model,
    gemma3_rope_settings,
    layer_windows,
    load_hf_gemma3,
)
from literate.numbers.params import kv_cache_bytes
from literate.parts.positions import RotaryEmbedding
from literate.parts.rope_scaling import LinearScaledRotaryEmbedding
from literate.tools.syncs import host_reads

from harness import (
    assert_equal_to_hf,
    hf_greedy,
    hf_model_grads,
    hf_norms_in_input_dtype,
    hf_renamer,
    hf_sizes,
    random_gains_hf_model,
    random_tokens,
)

F64 = torch.float64
DEEP_F32_BOUND = (
    64 * 2.0**-23
)  # times the largest |entry|: 6 layers of 6 float32 norms each
F64_TOL = 1e-10
SAME = 1e-12
D, H, H_KV, D_HEAD, D_FF, W, T, B, VOCAB, LAYERS = 32, 4, 2, 16, 48, 4, 12, 2, 61, 6


# the published 27B's RoPE (google/gemma-3-27b-pt, text_config), in transformers 5's form
LINEAR_8 = {
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
    }
}


def hf_config(**changes) -> Gemma3TextConfig:
    settings = hf_sizes(VOCAB, D, H, H_KV, D_FF, LAYERS) | {
        "head_dim": D_HEAD,
        "max_position_embeddings": 64,
        "query_pre_attn_scalar": 24,
        "rms_norm_eps": 1e-6,
        "sliding_window": W,
        "bos_token_id": None,
        "eos_token_id": None,
        "attn_implementation": "sdpa",
    }
    return Gemma3TextConfig(**(settings | changes))


def hf_exact(model: torch.nn.Module):
    """Test-harness patch: every Gemma3RMSNorm computes its formula in the input dtype
    (HF: float32). The embedding scale needs none: ours is HF's float32 sqrt(d), cast
    with the model as HF's is."""
    return hf_norms_in_input_dtype(
        model,
        gemma3,
        lambda m, x: (
            x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + m.eps) * (1.0 + m.weight)
        ),
    )


def hf_model(seed: int = 0, **changes) -> Gemma3ForCausalLM:
    """A float64 Gemma3ForCausalLM, every norm's w random (HF initialises them to 0)."""
    return random_gains_hf_model(
        Gemma3ForCausalLM, hf_config(**changes), seed=seed, gain_mean=0.0
    )


def built_pair(**changes):
    theirs = hf_model(**changes)
    ours = gemma3_from_hf_config(theirs.config).double()
    load_hf_gemma3(ours, theirs.state_dict(), theirs.config)
    return ours, theirs


@pytest.fixture(scope="module")
def pair():
    return built_pair()


@pytest.fixture(scope="module")
def scaled_pair():
    """The model with the published 27B's RoPE: linear factor 8 on the global layer."""
    return built_pair(**LINEAR_8)


def ids(seed: int = 2, t: int = T) -> torch.Tensor:
    tokens = random_tokens(VOCAB, B, t, seed)
    tokens[0, 3] = 0  # the pad id appears: its embedding row gets no gradient
    return tokens


# --- the model --------------------------------------------------------------------------
def test_the_model_is_what_we_think_it_is(pair):
    ours, theirs = pair
    config = theirs.config
    kinds = ["sliding_attention"] * 5 + ["full_attention"]
    assert config.layer_types == kinds == gemma3_layer_types(LAYERS)
    assert config.rope_parameters == {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
        "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
    }
    assert [layer.self_attn.sliding_window for layer in theirs.model.layers] == [
        W
    ] * 5 + [None]
    assert layer_windows(ours) == [W] * 5 + [None]
    assert [b.attn.rope.base for b in ours.blocks] == [1e4] * 5 + [1e6]
    assert all(b.attn.scale == 24**-0.5 for b in ours.blocks)
    assert (
        config.final_logit_softcapping is None and config.attn_logit_softcapping is None
    )
    assert theirs.model.embed_tokens.scalar_embed_scale == D**0.5
    assert torch.equal(
        ours.embed_scale, theirs.model.embed_tokens.embed_scale
    )  # float64
    assert ours.embed_scale.item() != D**0.5  # its float32 rounding, as HF's
    assert "embed_scale" not in ours.state_dict()
    assert ours.lm_head.weight is ours.token_embedding.weight  # tied, as in HF
    assert theirs.lm_head.weight is theirs.model.embed_tokens.weight
    assert (
        ours.token_embedding.padding_idx == theirs.model.embed_tokens.padding_idx == 0
    )
    assert isinstance(ours, Gemma3LanguageModel)
    assert (
        len(list(ours.parameters()))
        == len(list(theirs.parameters()))
        == 2 + 13 * LAYERS
    )


@pytest.mark.parametrize("which", ["pair", "scaled_pair"], ids=["plain", "linear-8"])
def test_logits_and_every_gradient_equal_gemma3_for_causal_lm(which, request):
    ours, theirs = request.getfixturevalue(which)
    assert_equal_to_hf(
        lambda: hf_model_grads(ours, theirs, ids(), hf_renamer(HF_GEMMA3_NAMES)),
        hf_exact(theirs),
        tol=F64_TOL,
        bound=DEEP_F32_BOUND,
    )
    lookup = torch.autograd.grad(ours.embed(ids()).sum(), ours.token_embedding.weight)[
        0
    ]
    assert not lookup[0].any() and lookup[ids()[0, 0]].any()  # the pad row: no gradient


def test_each_part_is_in_the_path(pair):
    """The embedding scale, the local window and the global base each change the logits:
    a model without one of them is another model."""
    ours, _ = pair
    tokens = ids()
    with torch.no_grad():
        base = ours(tokens)
        unscaled = ours.lm_head(
            ours.final_norm(
                torch.nn.Sequential(*ours.blocks)(ours.token_embedding(tokens))
            )
        )
        assert (unscaled - base).abs().max() > 1e-3
        for change in ("window", "base"):
            other = gemma3_from_hf_config(
                hf_config(
                    **(
                        {"sliding_window": T}
                        if change == "window"
                        else {
                            "rope_parameters": {
                                "sliding_attention": {"rope_theta": 1e6},
                                "full_attention": {"rope_theta": 1e6},
                            }
                        }
                    )
                )
            ).double()
            other.load_state_dict(ours.state_dict())
            assert (other(tokens) - base).abs().max() > 1e-3, change


def test_the_scaled_model_divides_the_global_layers_frequencies_only(scaled_pair):
    """Linear factor 8 on the global layer, as HF builds it: our global block's RoPE is a
    LinearScaledRotaryEmbedding of factor 8, the local ones plain; the factor put on
    the local layers instead, or on none, is another model (logits off HF's by 1e-3 or
    more), so the equivalence test above sees which kind is scaled."""
    ours, theirs = scaled_pair
    assert theirs.config.rope_parameters["full_attention"] == {
        "rope_type": "linear",
        "factor": 8.0,
        "rope_theta": 1e6,
    }
    assert [type(b.attn.rope) for b in ours.blocks] == [RotaryEmbedding] * 5 + [
        LinearScaledRotaryEmbedding
    ]
    assert (
        ours.blocks[5].attn.rope.factor == 8.0 and ours.blocks[5].attn.rope.base == 1e6
    )
    tokens = ids()
    with torch.no_grad():
        want = theirs(input_ids=tokens).logits
        assert (ours(tokens) - want).abs().max() <= DEEP_F32_BOUND * want.abs().max()
        for local_factor, global_factor in ((8.0, None), (None, None)):
            other = gemma3_model(
                VOCAB,
                64,
                D,
                H,
                H_KV,
                D_FF,
                d_head=D_HEAD,
                layer_types=gemma3_layer_types(LAYERS),
                window=W,
                query_pre_attn_scalar=24,
                local_factor=local_factor,
                global_factor=global_factor,
                pad_id=0,
            ).double()
            other.load_state_dict(ours.state_dict())
            assert (other(tokens) - want).abs().max() > 1e-3, (
                local_factor,
                global_factor,
            )


@pytest.mark.parametrize("factor", [8.0, 3.0])
def test_linear_scaled_tables_are_bit_equal_to_hf(factor):
    """Our float32 cos and sin == HF's Gemma3RotaryEmbedding for "full_attention" (linear),
    bit for bit, at each length, the tables grown from one call to the next (d_head 128
    and base 1e6: Gemma 3 27B's). Factor 3 is not a power of two: there, dividing the
    positions by it instead of the frequencies gives other bits."""
    config = hf_config(
        head_dim=128,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            "full_attention": {
                "rope_type": "linear",
                "factor": factor,
                "rope_theta": 1e6,
            },
        },
    )
    theirs = gemma3.Gemma3RotaryEmbedding(config)
    ours = LinearScaledRotaryEmbedding(128, base=1e6, factor=factor)
    for length in (1, 7, 64, 1000, 5000):
        x = torch.zeros(1, length, 128)
        cos, sin = theirs(x, torch.arange(length)[None], "full_attention")
        mine_cos, mine_sin = ours.tables(length)
        assert mine_cos.dtype == mine_sin.dtype == torch.float32
        assert torch.equal(mine_cos[:length], cos[0]), length
        assert torch.equal(mine_sin[:length], sin[0]), length
    inv_freq = 1.0 / 1e6 ** (torch.arange(0, 128, 2).float() / 128)
    angles = torch.outer(
        torch.arange(5000).float() / factor, inv_freq
    )  # the other order
    assert torch.equal(angles.cos(), cos[0, :, :64]) == (factor == 8.0)
    rotated = ours(torch.ones(1, 1, 3, 128), offset=4)  # ours turns by its tables
    x = torch.ones(3, 128)
    expected = x * cos[0, 4:7] + torch.cat((-x[:, 64:], x[:, :64]), -1) * sin[0, 4:7]
    assert torch.equal(rotated[0, 0], expected)
    with pytest.raises(ValueError, match="factor must be finite and > 0, got 0"):
        LinearScaledRotaryEmbedding(128, base=1e6, factor=0)


def test_greedy_decoding_past_the_window_equals_hf_generate_and_our_uncached_forward(
    pair,
):
    ours, theirs = pair
    prompt = ids(4, 6)
    with torch.no_grad():
        want = theirs.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=20,
            do_sample=False,
        )
    got, logits = generate(ours, prompt, 20, return_logits=True)
    assert want.shape == (B, 26) and torch.equal(got, want)
    assert torch.equal(ours.generate(prompt, 20), got)
    with torch.no_grad():
        full = ours(got[:, :-1])[:, 5:]
    torch.testing.assert_close(logits, full, atol=SAME, rtol=0)
    assert torch.equal(generate(ours, prompt, 20, prefill_chunk=5), got)
    cache = new_decode_cache(
        ours, B, 26
    )  # what generate makes: each layer its own kind
    assert [(type(c).__name__, c.k.shape[2]) for c in cache.layers] == [
        ("RingKVCache", W)
    ] * 5 + [("KVCache", 26)]
    assert [type(b.attn).__name__ for b in ours.blocks] == [
        "SlidingWindowAttention"
    ] * 5 + ["MultiHeadAttention"]


def test_a_left_padded_batch_equals_hf_generate(pair):
    """Rings and a growing cache side by side, padding flags read at each ring slot's
    position: == HF with its attention_mask (pad id 0)."""
    ours, theirs = pair
    t0, pads = 8, [0, 3, 5]
    prompt = torch.randint(
        1, VOCAB, (3, t0), generator=torch.Generator().manual_seed(5)
    )
    valid = torch.arange(t0)[None] >= torch.tensor(pads)[:, None]
    prompt = prompt.masked_fill(~valid, 0)
    want = hf_greedy(theirs, prompt, 12, valid)
    assert torch.equal(generate(ours, prompt, 12, valid=valid), want)


def test_the_embedding_scale_is_rounded_to_the_dtype_as_hf_rounds_it():
    """In bfloat16 sqrt(d) is rounded before it multiplies (sqrt(2560) = 50.596 -> 50.5):
    our model's embedding and HF's scaled embedding agree bit for bit; the unrounded
    factor gives other numbers."""
    d = 2560  # Gemma 3 4B's width; one narrow head keeps the model small
    ours = gemma3_model(
        50,
        8,
        d,
        1,
        1,
        8,
        d_head=8,
        layer_types=["full_attention"],
        window=None,
        query_pre_attn_scalar=8,
        pad_id=0,
    ).bfloat16()
    theirs = gemma3.Gemma3TextScaledWordEmbedding(
        50, d, 0, embed_scale=d**0.5
    ).bfloat16()
    with torch.no_grad():
        theirs.weight.copy_(ours.token_embedding.weight)
    tokens = torch.arange(50)[None]
    assert torch.tensor(d**0.5, dtype=torch.bfloat16).item() == 50.5
    assert torch.equal(ours.embed(tokens), theirs(tokens))
    unrounded = (ours.token_embedding(tokens).float() * d**0.5).bfloat16()
    assert not torch.equal(unrounded, theirs(tokens))


# --- loading ----------------------------------------------------------------------------
def test_load_from_a_save_pretrained_folder_and_an_older_config_json(pair, tmp_path):
    ours, theirs = pair
    theirs.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    rebuilt = load_hf_gemma3(
        gemma3_from_hf_config(config).double(),
        load_file(tmp_path / "model.safetensors"),
        config,
    )
    with torch.no_grad():
        assert torch.equal(rebuilt(ids()), ours(ids()))
    older = {
        k: v for k, v in config.items() if k not in ("rope_parameters", "layer_types")
    }
    older |= {
        "rope_theta": 1e6,
        "rope_local_base_freq": 1e4,
        "sliding_window_pattern": 6,
    }
    assert layer_windows(gemma3_from_hf_config(older)) == layer_windows(ours)
    check_gemma3_config(ours, older)


def test_the_old_rope_scaling_form_and_rope_parameters_build_the_same_model(
    scaled_pair,
):
    """google/gemma-3-27b-pt's config.json says `rope_scaling` {"rope_type": "linear",
    "factor": 8.0}, for the global layers only (Gemma3TextConfig merges it into
    rope_parameters["full_attention"]); as a config.json (rope_theta and
    rope_local_base_freq beside it), as a Gemma3TextConfig, and in transformers 5's
    rope_parameters form, it builds the same model."""
    ours, theirs = scaled_pair
    old_json = {
        k: v for k, v in theirs.config.to_dict().items() if k != "rope_parameters"
    }
    old_json |= {
        "rope_theta": 1e6,
        "rope_local_base_freq": 1e4,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    }
    old_object = hf_config(rope_scaling={"rope_type": "linear", "factor": 8.0})
    assert old_object.rope_parameters == LINEAR_8["rope_parameters"]
    want = {
        "sliding_attention": {"base": 1e4, "factor": None},
        "full_attention": {"base": 1e6, "factor": 8.0},
    }
    tokens = ids()
    with torch.no_grad():
        logits = ours(tokens)
        for config in (old_json, old_object, hf_config(**LINEAR_8)):
            assert gemma3_rope_settings(config) == want
            check_gemma3_config(ours, config)
            built = gemma3_from_hf_config(config).double()
            assert [
                (
                    type(b.attn.rope),
                    b.attn.rope.base,
                    getattr(b.attn.rope, "factor", None),
                )
                for b in built.blocks
            ] == [(RotaryEmbedding, 1e4, None)] * 5 + [
                (LinearScaledRotaryEmbedding, 1e6, 8.0)
            ]
            built.load_state_dict(ours.state_dict())
            assert torch.equal(built(tokens), logits)
    local = {
        "rope_parameters": {
            "sliding_attention": {"type": "linear", "factor": 2.0},
            "full_attention": {"rope_type": "default"},
        }
    }
    assert gemma3_rope_settings(
        local
    ) == {  # either kind; an older "type" alone is read
        "sliding_attention": {"base": 1e4, "factor": 2.0},
        "full_attention": {"base": 1e6, "factor": None},
    }
    assert [
        type(b.attn.rope) for b in gemma3_from_hf_config(hf_config(**local)).blocks
    ] == [LinearScaledRotaryEmbedding] * 5 + [RotaryEmbedding]


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"final_logit_softcapping": 30.0},
            r"config final_logit_softcapping=30\.0 is not supported",
        ),
        (
            {"attn_logit_softcapping": 50.0},
            r"config attn_logit_softcapping=50\.0 is not supported",
        ),
        (
            {"use_bidirectional_attention": True},
            r"config use_bidirectional_attention=True is not supported",
        ),
        ({"attention_bias": True}, r"config attention_bias=True is not supported"),
        (
            {"hidden_activation": "gelu"},
            r"config hidden_activation='gelu' is not supported",
        ),
        (
            {
                "rope_parameters": {
                    "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                    "full_attention": {
                        "rope_type": "dynamic",
                        "factor": 8.0,
                        "rope_theta": 1e6,
                    },
                }
            },
            (
                r"^config rope_parameters\['full_attention'\]=\{'rope_type': 'dynamic', 'factor': "
                r"8\.0, 'rope_theta': 1000000\.0\} is not supported \(ours: rope_type 'default', "
                r"or 'linear' with a factor\)$"
            ),
        ),
    ],
    ids=[
        "final-softcap",
        "attn-softcap",
        "bidirectional",
        "bias",
        "activation",
        "rope-dynamic",
    ],
)
def test_what_we_do_not_implement_is_refused_naming_the_field(change, message):
    with pytest.raises(ValueError, match=message):
        gemma3_from_hf_config(hf_config(**change))


def test_malformed_or_other_configs_are_refused():
    with pytest.raises(
        ValueError,
        match=r"config model_type='gemma3' is not supported: "
        r"pass a Gemma3TextConfig",
    ):
        gemma3_from_hf_config({"model_type": "gemma3", "text_config": {}})
    config = hf_config().to_dict() | {
        "layer_types": ["sliding_attention"] * 5 + ["chunked"]
    }
    with pytest.raises(
        ValueError,
        match=r"config layer_types=.* must give one of "
        r"\['sliding_attention', 'full_attention'\]",
    ):
        gemma3_from_hf_config(config)
    older = hf_config().to_dict()
    del older["rope_parameters"]
    with pytest.raises(
        ValueError,
        match=r"^config rope_scaling=\{'rope_type': 'yarn', "
        r"'factor': 8\.0\} is not supported",
    ):
        gemma3_from_hf_config(
            older | {"rope_scaling": {"rope_type": "yarn", "factor": 8.0}}
        )


@pytest.mark.parametrize(
    "rope, message",
    [
        (
            {
                "rope_parameters": {
                    "sliding_attention": {"rope_type": "yarn", "factor": 4.0}
                }
            },
            (
                r"^config rope_parameters\['sliding_attention'\]=\{'rope_type': 'yarn', 'factor': "
                r"4\.0\} is not supported \(ours: rope_type 'default', or 'linear' with a factor\)$"
            ),
        ),
        (
            {"rope_scaling": {"rope_type": "llama3", "factor": 8.0}},
            r"^config rope_scaling=\{'rope_type': 'llama3', 'factor': 8\.0\} is not supported",
        ),
        (
            {"rope_scaling": {"rope_type": "linear"}},
            r"^config rope_scaling=\{'rope_type': 'linear'\}: rope_type 'linear' needs a factor$",
        ),
        (
            {
                "rope_parameters": {
                    "full_attention": {"rope_type": "linear", "factor": 0.0}
                }
            },
            (
                r"^config rope_parameters\['full_attention'\]\['factor'\] must be finite and > 0, "
                r"got 0\.0$"
            ),
        ),
        (
            {
                "rope_parameters": {
                    "full_attention": {"rope_type": "linear", "factor": -8.0}
                }
            },
            r"^config rope_parameters\['full_attention'\]\['factor'\] must be finite and > 0",
        ),
        (
            {"rope_scaling": {"type": "linear", "factor": 8.0}},
            (
                r"^config rope_scaling=\{'type': 'linear', 'factor': 8\.0\} is ambiguous: "
                r"transformers 5 reads rope_type \('default' here\) and ignores type='linear'"
            ),
        ),
    ],
    ids=[
        "yarn-local",
        "llama3-old-form",
        "no-factor",
        "zero-factor",
        "negative-factor",
        "old-type",
    ],
)
def test_an_unsupported_rope_is_refused_naming_the_field(rope, message):
    """As a config.json: a dict with rope_parameters, or an older one with rope_scaling
    (HF 5.24 would build {"type": "linear"} as default RoPE: refused, not guessed)."""
    config = {k: v for k, v in hf_config().to_dict().items() if k != "rope_parameters"}
    with pytest.raises(ValueError, match=message):
        gemma3_from_hf_config(config | rope)
    with pytest.raises(ValueError, match=message):
        check_gemma3_config(gemma3_from_hf_config(config), config | rope)


def test_check_gemma3_config_names_the_layer_that_differs(pair):
    ours, theirs = pair
    other = theirs.config.to_dict()
    other["layer_types"] = ["full_attention"] + ["sliding_attention"] * 5
    with pytest.raises(
        ValueError,
        match=r"^ours has blocks\[0\] window=4, theirs "
        r"sliding_window \(full_attention\)=None$",
    ):
        check_gemma3_config(ours, other)
    other = theirs.config.to_dict()
    other["rope_parameters"]["full_attention"]["rope_theta"] = 5e5
    with pytest.raises(
        ValueError,
        match=r"^ours has blocks\[5\] rope_base=1000000\.0, theirs "
        r"rope_theta \(full_attention\)=500000\.0$",
    ):
        check_gemma3_config(ours, other)


def test_check_gemma3_config_compares_the_rope_kind_and_factor(pair, scaled_pair):
    ours, theirs = pair
    scaled, scaled_hf = scaled_pair
    with pytest.raises(
        ValueError,
        match=r"^ours has blocks\[5\] rope='RotaryEmbedding', "
        r"theirs rope \(full_attention\)="
        r"'LinearScaledRotaryEmbedding'$",
    ):
        load_hf_gemma3(ours, scaled_hf.state_dict(), scaled_hf.config)
    with pytest.raises(
        ValueError,
        match=r"^ours has blocks\[5\] rope="
        r"'LinearScaledRotaryEmbedding', theirs rope "
        r"\(full_attention\)='RotaryEmbedding'$",
    ):
        check_gemma3_config(scaled, theirs.config)
    other = scaled_hf.config.to_dict()
    other["rope_parameters"]["full_attention"]["factor"] = 4.0
    with pytest.raises(
        ValueError,
        match=r"^ours has blocks\[5\] rope_factor=8\.0, theirs "
        r"factor \(full_attention\)=4\.0$",
    ):
        check_gemma3_config(scaled, other)


# --- memory and syncs -------------------------------------------------------------------
@pytest.mark.parametrize("context", [3, W, 30])
def test_kv_cache_bytes_by_formula_equal_what_decoding_allocates(pair, context):
    ours, _ = pair
    cache = new_decode_cache(ours, B, context)
    expected = kv_cache_bytes(layer_windows(ours), H_KV, D_HEAD, 8, context, batch=B)
    per_position = B * 2 * H_KV * D_HEAD * 8
    assert cache.nbytes == expected == per_position * (5 * min(context, W) + context)


def test_past_the_window_only_the_global_layers_grow():
    """Per token of context beyond the window, the local layers add nothing: the cache
    grows by the global layers' 2 H_kv d_head bytes only, a sixth of a full model's."""
    windows = [W] * 5 + [None]
    step = kv_cache_bytes(windows, H_KV, D_HEAD, 2, 1001) - kv_cache_bytes(
        windows, H_KV, D_HEAD, 2, 1000
    )
    full = kv_cache_bytes([None] * 6, H_KV, D_HEAD, 2, 1001) - kv_cache_bytes(
        [None] * 6, H_KV, D_HEAD, 2, 1000
    )
    assert step == 2 * H_KV * D_HEAD * 2 and full == 6 * step
    with pytest.raises(ValueError, match="windows must give one entry per layer"):
        kv_cache_bytes([], H_KV, D_HEAD, 2, 10)
    with pytest.raises(ValueError, match="window must be >= 1, got 0"):
        kv_cache_bytes([0], H_KV, D_HEAD, 2, 10)


@pytest.mark.parametrize("which", ["pair", "scaled_pair"], ids=["plain", "linear-8"])
def test_no_host_sync_in_run(which, request):
    ours, _ = request.getfixturevalue(which)
    assert host_reads(ours.run, ids()) == 0
    assert host_reads(ours, ids()) == 1  # the id check
