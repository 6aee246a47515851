"""The parallel-residual families as whole models (chapter 7): our GPT-NeoX, GPT-J and
Cohere models (`literate.models.gpt_neox`, `gptj`, `cohere`) against Hugging Face's
`GPTNeoXForCausalLM`, `GPTJForCausalLM` and `CohereForCausalLM`.

- Logits and the gradient of every parameter, float64, tiny random configurations of 2
  layers (every 1-d parameter random: HF initialises gains to 1 and biases to 0, where
  a swapped or missing one would not show). HF's gradients are carried into our names
  by the family's own loader (renaming, and for GPT-NeoX unpacking query_key_value
  head by head: linear maps, so a gradient goes where its weight goes). GPT-NeoX (the
  parallel residual, the serial one, a tied head) and GPT-J (its head with a bias,
  untied and tied) to 1e-10 as HF computes them; Cohere computes its LayerNorms and its
  RoPE in float32: as it is, within float32's bound, and with those two steps patched
  to the input dtype (`cohere_in_input_dtype`, a test-harness patch), to 1e-10.
- Chapter 8's cached `generate` chooses HF's greedy tokens (`generate(do_sample=False)`,
  no special tokens, so that neither stops early), token for token.
- A config.json (a dict, `to_dict()`) builds the model its configuration object builds,
  weights included from one seed; the older layouts (GPT-NeoX's `rotary_pct` and
  `rotary_emb_base`, Cohere's top-level `rope_theta`) are read as transformers reads
  them; a checkpoint's names load (GPT-NeoX's `embed_out`, the buffers older files
  store).
- What the models do not implement is refused by name, and a model of another shape
  is refused before a weight is copied.
"""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch
import transformers
from transformers.models.cohere import modeling_cohere as hf_cohere

from literate.decoding.generate import generate
from literate.models.cohere import (
    LogitScaledHead,
    check_cohere_config,
    cohere_from_hf_config,
    load_hf_cohere,
)
from literate.models.gpt_neox import (
    check_gpt_neox_config,
    gpt_neox_from_hf_config,
    load_hf_gpt_neox,
)
from literate.models.gptj import check_gptj_config, gptj_from_hf_config, load_hf_gptj
from literate.models.llama import LlamaLanguageModel
from literate.models.parallel import block_settings, model_settings
from literate.parts.blocks import ParallelBlock, PreNormBlock

from harness import (
    NO_SPECIAL_TOKENS,
    assert_equal_to_hf,
    assert_float64_equal,
    random_gains_hf_model,
    random_tokens,
)

F64 = torch.float64
F64_TOL = 1e-10
VOCAB, D, LAYERS, B = 61, 32, 2, 2  # 4 heads of 8


def neox_config(**changes) -> transformers.GPTNeoXConfig:
    """rotary 0.5: 4 of 8 coordinates turn (with 2, rotate-half and interleaved would
    be the same rotation, and a wrong layout would go unseen)."""
    settings = {
        "vocab_size": VOCAB,
        "hidden_size": D,
        "num_attention_heads": 4,
        "intermediate_size": 64,
        "num_hidden_layers": LAYERS,
        "max_position_embeddings": 32,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10_000.0,
            "partial_rotary_factor": 0.5,
        },
        "initializer_range": 0.2,
        "attn_implementation": "sdpa",
        **NO_SPECIAL_TOKENS,
    }
    return transformers.GPTNeoXConfig(**(settings | changes))


def gptj_config(**changes) -> transformers.GPTJConfig:
    settings = {
        "vocab_size": VOCAB,
        "n_embd": D,
        "n_head": 4,
        "rotary_dim": 4,
        "n_inner": 64,
        "n_layer": LAYERS,
        "n_positions": 32,
        "initializer_range": 0.2,
        "attn_implementation": "sdpa",
        **NO_SPECIAL_TOKENS,
    }
    return transformers.GPTJConfig(**(settings | changes))


def cohere_config(**changes) -> transformers.CohereConfig:
    """Grouped-query: 4 query heads over 2 key/value heads."""
    settings = {
        "vocab_size": VOCAB,
        "hidden_size": D,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 48,
        "num_hidden_layers": LAYERS,
        "max_position_embeddings": 32,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10_000.0},
        "initializer_range": 0.2,
        "attn_implementation": "sdpa",
        **NO_SPECIAL_TOKENS,
    }
    return transformers.CohereConfig(**(settings | changes))


FAMILIES = {  # name: (config, HF model, ours from a config, check, loader)
    "gpt_neox": (
        neox_config,
        transformers.GPTNeoXForCausalLM,
        gpt_neox_from_hf_config,
        check_gpt_neox_config,
        load_hf_gpt_neox,
    ),
    "gptj": (
        gptj_config,
        transformers.GPTJForCausalLM,
        gptj_from_hf_config,
        check_gptj_config,
        load_hf_gptj,
    ),
    "cohere": (
        cohere_config,
        transformers.CohereForCausalLM,
        cohere_from_hf_config,
        check_cohere_config,
        load_hf_cohere,
    ),
}
VARIANTS = {  # a family's configurations under test: (family, config changes)
    "gpt_neox": ("gpt_neox", {}),
    "gpt_neox-serial": ("gpt_neox", {"use_parallel_residual": False}),
    "gpt_neox-tied": ("gpt_neox", {"tie_word_embeddings": True}),
    "gptj": ("gptj", {}),
    "gptj-tied": ("gptj", {"tie_word_embeddings": True}),
    "cohere": ("cohere", {}),  # tied, as Command R
    "cohere-untied": ("cohere", {"tie_word_embeddings": False, "logit_scale": 0.3}),
}
_PAIRS: dict[str, tuple] = {}


def pair(variant: str) -> tuple:
    """(ours, theirs, config, family): HF's float64 model with random gains and
    biases, and ours built from its configuration and loaded with its weights."""
    if variant not in _PAIRS:
        family, changes = VARIANTS[variant]
        make_config, hf_model, build, _, load = FAMILIES[family]
        config = make_config(**changes)
        theirs = random_gains_hf_model(hf_model, config, seed=0)
        ours = load(build(config).double().eval(), theirs.state_dict(), config)
        _PAIRS[variant] = (ours, theirs, config, family)
    return _PAIRS[variant]


def tokens(seed: int = 2, t: int = 9) -> torch.Tensor:
    return random_tokens(VOCAB, B, t, seed)


def compared(variant: str) -> tuple[list[str], list[torch.Tensor], list[torch.Tensor]]:
    """(labels, ours, theirs): the logits of both models on the same tokens, then the
    gradient of sum(logits * probe) w.r.t. each of our parameters, and HF's gradients
    carried into our names by the family's loader (into a copy of ours)."""
    ours, theirs, config, family = pair(variant)
    ids = tokens()
    got, want = ours(ids), theirs(input_ids=ids).logits
    probe = torch.randn(
        got.shape, generator=torch.Generator().manual_seed(3), dtype=F64
    )
    mine = dict(ours.named_parameters())
    hf = dict(theirs.named_parameters())
    g_ours = torch.autograd.grad((got * probe).sum(), list(mine.values()))
    g_hf = torch.autograd.grad((want * probe).sum(), list(hf.values()))
    carried = FAMILIES[family][4](
        copy.deepcopy(ours), dict(zip(hf, (g.detach() for g in g_hf))), config
    )
    theirs_as_ours = dict(carried.named_parameters())
    assert set(theirs_as_ours) == set(mine)
    assert sum(p.numel() for p in mine.values()) == sum(p.numel() for p in hf.values())
    names = list(mine)
    return (
        ["logits", *names],
        [got, *g_ours],
        [want, *(theirs_as_ours[n] for n in names)],
    )


@contextlib.contextmanager
def cohere_in_input_dtype(model: torch.nn.Module):
    """Test harness: every CohereLayerNorm of `model` and Cohere's RoPE compute in the
    input dtype (HF: float32), the same formulas without their casts; undone on exit."""
    norms = [m for m in model.modules() if isinstance(m, hf_cohere.CohereLayerNorm)]
    assert len(norms) == LAYERS + 1  # each layer's and the final one

    def layer_norm(norm, x):
        mean = x.mean(-1, keepdim=True)
        variance = (x - mean).pow(2).mean(-1, keepdim=True)
        return norm.weight * (
            (x - mean) * torch.rsqrt(variance + norm.variance_epsilon)
        )

    def rope(q, k, cos, sin, unsqueeze_dim=1):
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        turn = hf_cohere.rotate_half  # Cohere's: pairs (2i, 2i + 1)
        return q * cos + turn(q) * sin, k * cos + turn(k) * sin

    original = hf_cohere.apply_rotary_pos_emb
    for norm in norms:
        norm.forward = lambda x, norm=norm: layer_norm(norm, x)
    hf_cohere.apply_rotary_pos_emb = rope
    try:
        yield
    finally:
        for norm in norms:
            del norm.forward
        hf_cohere.apply_rotary_pos_emb = original


# --- logits and gradients ---------------------------------------------------------------


@pytest.mark.parametrize("variant", ["gpt_neox", "gpt_neox-serial", "gpt_neox-tied"])
def test_logits_and_every_gradient_equal_gpt_neox_for_causal_lm(variant):
    assert_float64_equal(*compared(variant), tol=F64_TOL)
    ours, theirs, config, _ = pair(variant)
    kind = PreNormBlock if variant == "gpt_neox-serial" else ParallelBlock
    assert all(type(b) is kind for b in ours.blocks)
    tied = config.tie_word_embeddings
    assert (ours.lm_head.weight is ours.token_embedding.weight) == tied
    assert ours.lm_head.bias is None and ours.final_norm.bias is not None


@pytest.mark.parametrize("variant", ["gptj", "gptj-tied"])
def test_logits_and_every_gradient_equal_gptj_for_causal_lm(variant):
    assert_float64_equal(*compared(variant), tol=F64_TOL)
    ours, theirs, config, _ = pair(variant)
    assert ours.lm_head.bias is not None  # GPT-J's head has a bias, tied or not
    assert (ours.lm_head.weight is ours.token_embedding.weight) == (
        config.tie_word_embeddings
    )
    assert torch.equal(ours.lm_head.bias, theirs.lm_head.bias)


@pytest.mark.parametrize("variant", ["cohere", "cohere-untied"])
def test_logits_and_every_gradient_equal_cohere_for_causal_lm(variant):
    """HF as it is: each tensor within 16 float32 units of its largest entry (and
    further than 1e-12: the float32 steps are there); its norms and RoPE patched to the
    input dtype: 1e-10."""
    ours, theirs, config, _ = pair(variant)
    assert_equal_to_hf(
        lambda: compared(variant), cohere_in_input_dtype(theirs), tol=F64_TOL
    )
    assert isinstance(ours.lm_head, LogitScaledHead)
    assert ours.lm_head.scale == config.logit_scale
    assert ours.final_norm.bias is None and ours.blocks[0].attn_norm.bias is None
    assert ours.blocks[0].attn.n_kv_heads == 2
    tied = config.tie_word_embeddings
    assert (ours.lm_head.weight is ours.token_embedding.weight) == tied


def test_the_logit_scale_multiplies_the_logits():
    """Cohere's logits are scale * (x W^T): the same model with a head of scale 1
    gives the logits divided by 0.0625."""
    ours = pair("cohere")[0]
    unscaled = copy.deepcopy(ours)
    unscaled.lm_head.scale = 1.0
    ids = tokens()
    with torch.no_grad():
        torch.testing.assert_close(
            ours(ids), unscaled(ids) * 0.0625, atol=0, rtol=1e-15
        )


# --- decoding with the cache ------------------------------------------------------------


@pytest.mark.parametrize("variant", ["gpt_neox", "gpt_neox-serial", "gptj", "cohere"])
def test_greedy_tokens_equal_hf_generate(variant):
    """Chapter 8's `generate` (prefill, then one token a step through the KV cache)
    and chapter 5's (the whole prefix each step) choose HF's greedy tokens."""
    ours, theirs, _, _ = pair(variant)
    prompt = tokens(4, 5)
    want = theirs.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=10,
        do_sample=False,
    )
    assert want.shape == (B, 15)
    assert torch.equal(generate(ours, prompt, 10), want)
    assert torch.equal(ours.generate(prompt, 10), want)


# --- configurations: objects and config.json alike --------------------------------------


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_config_json_builds_the_model_its_configuration_builds(variant):
    """From one seed, `to_dict()` and the configuration object give the same model,
    weights and all; each passes the other's check; and the dict-built model loads
    HF's weights and gives HF's logits as the object-built one does."""
    family, changes = VARIANTS[variant]
    make_config, _, build, check, load = FAMILIES[family]
    config = make_config(**changes)
    fields = config.to_dict()
    torch.manual_seed(0)
    from_object = build(config)
    torch.manual_seed(0)
    from_dict = build(fields)
    assert model_settings(from_dict) == model_settings(from_object)
    assert [block_settings(b) for b in from_dict.blocks] == [
        block_settings(b) for b in from_object.blocks
    ]
    a, b = from_object.state_dict(), from_dict.state_dict()
    assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)
    check(from_object, fields)
    check(from_dict, config)
    ours, theirs, _, _ = pair(variant)
    loaded = load(build(fields).double().eval(), theirs.state_dict(), fields)
    with torch.no_grad():
        assert torch.equal(loaded(tokens()), ours(tokens()))


def test_older_config_json_layouts_are_read_as_transformers_reads_them():
    """transformers 4.x wrote GPT-NeoX's RoPE as rotary_pct and rotary_emb_base (no
    rope_parameters) and Cohere's as a top-level rope_theta; a file with neither gets
    transformers' defaults (0.25 and 10,000; Cohere's 500,000)."""
    neox = {k: v for k, v in neox_config().to_dict().items() if k != "rope_parameters"}
    for given, (pct, base) in (
        ({"rotary_pct": 0.5, "rotary_emb_base": 500.0}, (0.5, 500.0)),
        ({"rope_scaling": None}, (0.25, 10_000.0)),
    ):
        hf = transformers.GPTNeoXConfig(**(neox | given))
        assert hf.rope_parameters["partial_rotary_factor"] == pct
        assert hf.rope_parameters["rope_theta"] == base
        rope = gpt_neox_from_hf_config(neox | given).blocks[0].attn.rope
        assert (rope.rotary_dim, rope.base) == (int(8 * pct), base)
        check_gpt_neox_config(gpt_neox_from_hf_config(hf), neox | given)
    cohere = {
        k: v for k, v in cohere_config().to_dict().items() if k != "rope_parameters"
    }
    for given, base in (({"rope_theta": 8e6}, 8e6), ({}, 500_000.0)):
        hf = transformers.CohereConfig(**(cohere | given))
        assert hf.rope_parameters["rope_theta"] == base
        assert cohere_from_hf_config(cohere | given).blocks[0].attn.rope.base == base
        check_cohere_config(cohere_from_hf_config(hf), cohere | given)


def test_a_checkpoints_names_load():
    """A GPT-NeoX checkpoint names its head `embed_out` (transformers 5 renames it
    `lm_head` on loading, and back on saving) and older ones store each layer's causal
    mask and RoPE frequencies; GPT-J's older checkpoints store its causal masks as
    `attn.bias` and `attn.masked_bias`; a tied Cohere checkpoint stores its head once.
    Each loads to the same model."""
    ours, theirs, config, _ = pair("gpt_neox")
    state = dict(theirs.state_dict())
    state["embed_out.weight"] = state.pop("lm_head.weight")
    for i in range(LAYERS):
        prefix = f"gpt_neox.layers.{i}.attention."
        state[prefix + "bias"] = torch.ones(1, 1, 32, 32, dtype=torch.bool).tril()
        state[prefix + "masked_bias"] = torch.tensor(-1e9)
        state[prefix + "rotary_emb.inv_freq"] = torch.ones(2)
    loaded = load_hf_gpt_neox(gpt_neox_from_hf_config(config).double(), state, config)
    with torch.no_grad():
        assert torch.equal(loaded(tokens()), ours(tokens()))
    with pytest.raises(ValueError, match="both embed_out.weight and lm_head.weight"):
        load_hf_gpt_neox(
            gpt_neox_from_hf_config(config).double(),
            state | {"lm_head.weight": state["embed_out.weight"]},
            config,
        )
    ours, theirs, config, _ = pair("gptj")
    state = dict(theirs.state_dict())
    for i in range(LAYERS):
        state[f"transformer.h.{i}.attn.bias"] = torch.ones(1, 1, 32, 32).tril()
        state[f"transformer.h.{i}.attn.masked_bias"] = torch.tensor(-1e9)
    loaded = load_hf_gptj(gptj_from_hf_config(config).double(), state, config)
    with torch.no_grad():
        assert torch.equal(loaded(tokens()), ours(tokens()))
    ours, theirs, config, _ = pair("cohere")
    state = {k: v for k, v in theirs.state_dict().items() if k != "lm_head.weight"}
    loaded = load_hf_cohere(cohere_from_hf_config(config).double(), state, config)
    with torch.no_grad():
        assert torch.equal(loaded(tokens()), ours(tokens()))


# --- refusals ---------------------------------------------------------------------------


REFUSED = [  # (family, config.json changes, the message naming the field)
    ("gpt_neox", {"hidden_act": "gelu_fast"}, r"^config hidden_act='gelu_fast' is not"),
    ("gpt_neox", {"hidden_dropout": 0.1}, r"^config hidden_dropout=0\.1 is not"),
    ("gpt_neox", {"attention_dropout": 0.1}, r"^config attention_dropout=0\.1 is not"),
    ("gpt_neox", {"attention_bias": False}, r"^config attention_bias=False is not"),
    (
        "gpt_neox",
        {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}},
        r"^RoPE type 'linear' is not implemented",
    ),
    (
        "gpt_neox",
        {"rope_parameters": None, "rope_scaling": {"type": "dynamic", "factor": 2.0}},
        r"^RoPE type 'dynamic' is not implemented",
    ),
    ("gptj", {"activation_function": "gelu"}, r"^config activation_function='gelu'"),
    ("gptj", {"embd_pdrop": 0.1}, r"^config embd_pdrop=0\.1 is not supported"),
    ("gptj", {"resid_pdrop": 0.1}, r"^config resid_pdrop=0\.1 is not supported"),
    ("gptj", {"attn_pdrop": 0.1}, r"^config attn_pdrop=0\.1 is not supported"),
    ("gptj", {"rotary_dim": None}, r"^config rotary_dim=None is not supported"),
    ("cohere", {"use_qk_norm": True}, r"^config use_qk_norm=True is not supported"),
    ("cohere", {"attention_bias": True}, r"^config attention_bias=True is not"),
    ("cohere", {"hidden_act": "gelu"}, r"^config hidden_act='gelu' is not supported"),
    ("cohere", {"attention_dropout": 0.1}, r"^config attention_dropout=0\.1 is not"),
    ("cohere", {"logit_scale": None}, r"^config logit_scale=None is not supported"),
    ("cohere", {"head_dim": 16}, r"^config head_dim=16 is not hidden_size / heads"),
    (
        "cohere",
        {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}},
        r"^RoPE type 'yarn' is not implemented",
    ),
]


@pytest.mark.parametrize(
    "family, changes, pattern",
    REFUSED,
    ids=[f"{family}-{next(iter(changes))}" for family, changes, _ in REFUSED],
)
def test_what_is_not_implemented_is_refused_by_name(family, changes, pattern):
    make_config, _, build, check, _ = FAMILIES[family]
    fields = make_config().to_dict() | changes
    with pytest.raises(ValueError, match=pattern):
        build(fields)
    with pytest.raises(ValueError, match=pattern):  # and before loading a weight
        check(build(make_config()), fields)


MISMATCHES = [  # (variant, configuration changes, the first setting named)
    ("gpt_neox", {"vocab_size": 62}, r"^ours has vocab_size=61, the configuration's"),
    ("gpt_neox", {"num_hidden_layers": 3}, r"^ours has n_layers=2, the config"),
    ("gpt_neox", {"tie_word_embeddings": True}, r"^ours has tied=False, the config"),
    (
        "gpt_neox",
        {"use_parallel_residual": False},
        r"^blocks\[0\]: ours has block='ParallelBlock'",
    ),
    (
        "gpt_neox",
        {"num_attention_heads": 8},
        r"^blocks\[0\]: ours has n_heads=4, the configuration's block n_heads=8$",
    ),
    (
        "gptj",
        {"layer_norm_epsilon": 1e-6},
        r"^ours has final_norm=\('LayerNorm', 1e-05",
    ),
    ("gptj", {"rotary_dim": 8}, r"^blocks\[0\]: ours has rope=\(4, "),
    ("cohere", {"logit_scale": 0.5}, r"^ours has lm_head=\('LogitScaledHead', False, "),
    ("cohere", {"num_key_value_heads": 4}, r"^blocks\[0\]: ours has n_kv_heads=2"),
    (
        "cohere",
        {"rope_parameters": {"rope_type": "default", "rope_theta": 8e6}},
        r"^blocks\[0\]: ours has rope=\(8, 10000\.0, 'interleaved'\)",
    ),
]


@pytest.mark.parametrize(
    "variant, changes, pattern",
    MISMATCHES,
    ids=[f"{v}-{next(iter(c))}" for v, c, _ in MISMATCHES],
)
def test_another_configuration_is_refused_before_any_weight(variant, changes, pattern):
    ours, theirs, _, family = pair(variant)
    ours = copy.deepcopy(ours)
    before = {k: v.clone() for k, v in ours.state_dict().items()}
    make_config, _, _, check, load = FAMILIES[family]
    other = make_config(**(VARIANTS[variant][1] | changes))
    with pytest.raises(ValueError, match=pattern):
        load(ours, theirs.state_dict(), other)
    with pytest.raises(ValueError, match=pattern):  # the same words from the dict
        check(ours, other.to_dict())
    after = ours.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_a_tied_head_unlike_the_embedding_and_a_stranger_are_refused():
    ours, theirs, config, _ = pair("gptj-tied")
    state = dict(theirs.state_dict())
    state["lm_head.weight"] = state["transformer.wte.weight"] + 1.0
    with pytest.raises(ValueError, match=r"^lm_head\.weight differs from wte: ours is"):
        load_hf_gptj(gptj_from_hf_config(config).double(), state, config)
    with pytest.raises(TypeError, match=r"^ours must be a LlamaLanguageModel"):
        load_hf_cohere(torch.nn.Linear(2, 2), {}, cohere_config())
    with pytest.raises(
        TypeError, match=r"^config must be a transformers configuration"
    ):
        gpt_neox_from_hf_config("EleutherAI/pythia-1.4b")


def test_the_models_are_llama_language_models_of_the_families_blocks():
    """Chapter 7's LlamaLanguageModel: the layout `cached_run` reads (embed, blocks,
    final_norm, lm_head), with each family's final norm and head."""
    for variant in ("gpt_neox", "gptj", "cohere"):
        ours = pair(variant)[0]
        assert isinstance(ours, LlamaLanguageModel) and len(ours.blocks) == LAYERS
        assert ours.context == 32
