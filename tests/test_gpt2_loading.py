"""Loading Hugging Face GPT-2 weights by name (`load_hf_gpt2`), and the configuration
checks that come before any copy (`check_gpt2_config`, `gpt2_from_hf_config`).

Every accepted source gives Hugging Face's own logits: a `GPT2LMHeadModel` state dict
("transformer." prefix, a tied `lm_head.weight`), a `GPT2Model` state dict (no prefix, no
head), a dict that went through safetensors (`save_file` / `load_file`, where the tied
head cannot be stored twice), and a whole `save_pretrained` checkpoint read back as
config.json + model.safetensors. Every refusal is exhibited with its exact message:
a missing, an extra or a misshapen weight, an untied head, each configuration mismatch
(naming our field and theirs), each unsupported option.

Tolerance: 1e-12 absolute in float64, as in tests/test_gpt2.py (same sums in another
order; a wrong transpose or a missing bias is off by 1e-2 or more).
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from literate.models.gpt2 import (
    GPT2_DEFAULTS,
    GPTLanguageModel,
    check_gpt2_config,
    copy_hf_gpt2,
    copy_hf_gpt2_block,
    gpt2_from_hf_config,
    gpt2_model,
    hf_field,
    load_hf_gpt2,
)
from literate.parts.blocks import gpt2_block

from harness import gpt2_settings

TOL = dict(atol=1e-12, rtol=0)
D, H, LAYERS, CONTEXT, VOCAB = 16, 4, 3, 12, 11
SETTINGS = gpt2_settings(D, H, LAYERS, CONTEXT, VOCAB)


@pytest.fixture(scope="module")
def hf():
    """Hugging Face's GPT-2 classes (imported once) and a small eager, dropout-free config."""
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

    config = GPT2Config(**SETTINGS, attn_implementation="eager")
    return {
        "config": config,
        "Config": GPT2Config,
        "LM": GPT2LMHeadModel,
        "Base": GPT2Model,
    }


@pytest.fixture(scope="module")
def theirs(hf):
    """A GPT2LMHeadModel with weights of order one, so that every term matters."""
    torch.manual_seed(0)
    model = hf["LM"](hf["config"]).double().eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(
                torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3
            )  # biases and gains too
    return model


@pytest.fixture(scope="module")
def ids():
    return torch.randint(
        0, VOCAB, (3, CONTEXT), generator=torch.Generator().manual_seed(2)
    )


def fresh(hf) -> GPTLanguageModel:
    """Our model in the shape of the config, with its own (GPT-2) initialisation."""
    torch.manual_seed(5)
    return gpt2_from_hf_config(hf["config"]).double().eval()


def assert_gives_their_logits(ours, theirs, ids):
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), theirs(ids).logits, **TOL)


# ---------------------------------------------------------------------------------------
# Every source gives Hugging Face's logits


def test_load_from_a_gpt2lmheadmodel_state_dict(hf, theirs, ids):
    state = theirs.state_dict()
    assert "lm_head.weight" in state and all(
        k.startswith(("transformer.", "lm_head.")) for k in state
    )
    ours = fresh(hf)
    with torch.no_grad():
        assert not torch.allclose(
            ours(ids), theirs(ids).logits, atol=1e-3
        )  # not by luck
    assert load_hf_gpt2(ours, state, hf["config"]) is ours
    assert_gives_their_logits(ours, theirs, ids)
    assert (
        ours.lm_head.weight is ours.token_embedding.weight
    )  # still tied after loading


def test_load_from_a_gpt2model_state_dict(hf, theirs, ids):
    """GPT2Model has no head and no "transformer." prefix: our head is the embedding."""
    base = hf["Base"](hf["config"]).double().eval()
    base.load_state_dict(theirs.transformer.state_dict())
    state = base.state_dict()
    assert not any(k.startswith(("transformer.", "lm_head")) for k in state)
    ours = load_hf_gpt2(fresh(hf), state, hf["config"])
    assert_gives_their_logits(ours, theirs, ids)
    with torch.no_grad():
        hidden = base(ids).last_hidden_state
        torch.testing.assert_close(ours(ids), hidden @ base.wte.weight.T, **TOL)


def test_load_from_a_dict_that_went_through_safetensors(hf, theirs, ids, tmp_path):
    from safetensors.torch import load_file, save_file

    state = theirs.state_dict()
    with pytest.raises(
        RuntimeError, match="share memory"
    ):  # the tied head is one tensor
        save_file(state, tmp_path / "tied.safetensors")
    without_head = {
        k: v.contiguous() for k, v in state.items() if k != "lm_head.weight"
    }
    save_file(without_head, tmp_path / "model.safetensors")
    loaded = load_file(tmp_path / "model.safetensors")
    assert set(loaded) == set(without_head)
    assert_gives_their_logits(
        load_hf_gpt2(fresh(hf), loaded, hf["config"]), theirs, ids
    )
    # A head stored as its own copy (equal to wte) is accepted too.
    with_head = {**without_head, "lm_head.weight": state["lm_head.weight"].clone()}
    save_file(with_head, tmp_path / "with_head.safetensors")
    loaded = load_file(tmp_path / "with_head.safetensors")
    assert_gives_their_logits(
        load_hf_gpt2(fresh(hf), loaded, hf["config"]), theirs, ids
    )


def test_load_a_save_pretrained_checkpoint_config_and_weights(
    hf, theirs, ids, tmp_path
):
    """What a reader downloads: config.json and model.safetensors. The model is built
    from the json, the configuration checked, then the weights loaded by name."""
    from safetensors.torch import load_file

    theirs.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text(encoding="utf-8"))
    ours = gpt2_from_hf_config(config, inference=True).double()
    assert not ours.training  # inference=True: eval mode, no dropout
    load_hf_gpt2(ours, load_file(tmp_path / "model.safetensors"), config)
    assert_gives_their_logits(ours, theirs, ids)


def test_legacy_causal_mask_buffers_are_not_weights(hf, theirs, ids):
    """Old checkpoints store each layer's causal mask (attn.bias) and attn.masked_bias."""
    state = dict(theirs.state_dict())
    for i in range(LAYERS):
        state[f"transformer.h.{i}.attn.bias"] = torch.ones(
            1, 1, CONTEXT, CONTEXT, dtype=torch.bool
        ).tril()
        state[f"transformer.h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    assert_gives_their_logits(load_hf_gpt2(fresh(hf), state, hf["config"]), theirs, ids)


def test_copy_hf_gpt2_is_check_then_load(hf, theirs, ids):
    ours = copy_hf_gpt2(fresh(hf), theirs)
    assert_gives_their_logits(ours, theirs, ids)
    reference = load_hf_gpt2(fresh(hf), theirs.state_dict(), hf["config"])
    for (name, a), b in zip(ours.state_dict().items(), reference.state_dict().values()):
        assert torch.equal(a, b), name


# ---------------------------------------------------------------------------------------
# Refusals of load_hf_gpt2


def refused(hf, state, pattern):
    with pytest.raises(ValueError, match=pattern) as info:
        load_hf_gpt2(fresh(hf), state, hf["config"])
    assert type(info.value) is ValueError


def test_a_missing_weight_is_refused(hf, theirs):
    state = dict(theirs.state_dict())
    del state["transformer.h.1.ln_2.bias"]
    refused(hf, state, r"^state_dict has no 'h\.1\.ln_2\.bias'$")
    del state["transformer.wpe.weight"]
    refused(hf, state, r"^state_dict has no 'wpe\.weight'$")


def test_an_extra_weight_is_refused(hf, theirs):
    state = dict(theirs.state_dict())
    state["transformer.h.3.ln_1.weight"] = torch.ones(
        D, dtype=torch.float64
    )  # a fourth layer
    refused(
        hf,
        state,
        r"^state_dict has weights ours has no place for: \['h\.3\.ln_1\.weight'\]$",
    )
    deeper = hf["LM"](hf["Config"](**{**SETTINGS, "n_layer": LAYERS + 1})).state_dict()
    refused(
        hf,
        deeper,
        r"^state_dict has weights ours has no place for: \['h\.3\.ln_1\.weight', ",
    )
    shallower = hf["LM"](
        hf["Config"](**{**SETTINGS, "n_layer": LAYERS - 1})
    ).state_dict()
    refused(hf, shallower, r"^state_dict has no 'h\.2\.ln_1\.weight'$")


def test_a_misshapen_weight_is_refused(hf, theirs):
    state = dict(theirs.state_dict())
    packed = state["transformer.h.0.attn.c_attn.weight"]
    refused(
        hf,
        {**state, "transformer.h.0.attn.c_attn.weight": packed[:, :-1]},
        r"^h\.0\.attn\.c_attn\.weight is \(16, 47\), ours needs \(16, 48\): a Conv1D matrix is \[in, out\]$",
    )
    refused(
        hf,
        {
            **state,
            "transformer.h.0.attn.c_attn.weight": packed.T.contiguous(),
        },  # nn.Linear's layout
        r"^h\.0\.attn\.c_attn\.weight is \(48, 16\), ours needs \(16, 48\): a Conv1D matrix is \[in, out\]$",
    )
    refused(
        hf,
        {**state, "transformer.wpe.weight": state["transformer.wpe.weight"][:-1]},
        r"^wpe\.weight is \(11, 16\), ours needs \(12, 16\)$",
    )
    refused(
        hf,
        {**state, "transformer.ln_f.bias": torch.zeros(D + 1, dtype=torch.float64)},
        r"^ln_f\.bias is \(17,\), ours needs \(16,\)$",
    )


def test_an_untied_head_is_refused(hf, theirs):
    state = dict(theirs.state_dict())
    state["lm_head.weight"] = state["lm_head.weight"] + 1e-3
    refused(
        hf, state, r"^lm_head\.weight differs from wte\.weight: ours is always tied$"
    )


def test_the_configuration_is_checked_before_the_weights(hf, theirs):
    """Shapes alone cannot tell 4 heads from 8, or one eps from another: the loader wants
    the configuration the weights were made with, and refuses a model of another."""
    eight = gpt2_from_hf_config({**hf["config"].to_dict(), "n_head": 8}).double()
    before = {k: v.clone() for k, v in eight.state_dict().items()}
    with pytest.raises(ValueError, match=r"^ours has n_heads=8, theirs n_head=4$"):
        load_hf_gpt2(eight, theirs.state_dict(), hf["config"])
    assert all(torch.equal(v, eight.state_dict()[k]) for k, v in before.items())


def test_published_configs_load_for_inference_only(hf):
    published = {**hf["config"].to_dict(), "attn_pdrop": 0.1}
    with pytest.raises(
        ValueError,
        match=r"^config attn_pdrop=0\.1 is not supported: no "
        r"dropout on the attention weights; for inference",
    ):
        gpt2_from_hf_config(published)
    model = gpt2_from_hf_config(published, inference=True)
    assert not model.training
    with pytest.raises(TypeError, match=r"^inference must be a bool, got int$"):
        gpt2_from_hf_config(published, inference=1)


def test_only_our_model_is_loaded_into(theirs):
    with pytest.raises(
        TypeError, match=r"^ours must be a GPTLanguageModel, got PreNormBlock$"
    ):
        load_hf_gpt2(gpt2_block(D, H), theirs.state_dict(), theirs.config)


# ---------------------------------------------------------------------------------------
# check_gpt2_config: each mismatch named on both sides


MISMATCHES = [  # gpt2_model arguments changed, then the message
    (
        {"vocab_size": VOCAB + 1},
        rf"^ours has vocab_size={VOCAB + 1}, theirs vocab_size={VOCAB}$",
    ),
    (
        {"context": CONTEXT - 1},
        rf"^ours has context={CONTEXT - 1}, theirs n_positions={CONTEXT}$",
    ),
    ({"n_layers": 1}, rf"^ours has n_layers=1, theirs n_layer={LAYERS}$"),
    ({"d_model": 2 * D}, rf"^ours has d_model={2 * D}, theirs n_embd={D}$"),
    ({"n_heads": 2}, rf"^ours has n_heads=2, theirs n_head={H}$"),
    (
        {"d_ff": 2 * D},
        rf"^ours has d_ff={2 * D}, theirs n_inner={4 * D}$",
    ),  # n_inner=None: 4 * n_embd
    ({"eps": 1e-6}, r"^ours has eps=1e-06, theirs layer_norm_epsilon=1e-05$"),
    (
        {"activation": F.gelu},
        r"^ours has activation=<built-in function gelu>, theirs activation_function="
        r"functools\.partial\(<built-in function gelu>, approximate='tanh'\)$",
    ),
]


def ours_with(**changes) -> GPTLanguageModel:
    settings = {
        "vocab_size": VOCAB,
        "context": CONTEXT,
        "d_model": D,
        "n_heads": H,
        "n_layers": LAYERS,
    } | changes
    positional = [
        settings.pop(k)
        for k in ("vocab_size", "context", "d_model", "n_heads", "n_layers")
    ]
    return gpt2_model(*positional, dropout=0.0, **settings)


@pytest.mark.parametrize(
    "changes, pattern", MISMATCHES, ids=[next(iter(c)) for c, _ in MISMATCHES]
)
def test_check_gpt2_config_refuses_each_mismatch_naming_both_sides(
    hf, theirs, changes, pattern
):
    ours = ours_with(**changes)
    for config in (
        hf["config"],
        hf["config"].to_dict(),
    ):  # an object or its config.json
        with pytest.raises(ValueError, match=pattern):
            check_gpt2_config(ours, config)
    before = {k: v.clone() for k, v in ours.state_dict().items()}
    with pytest.raises(ValueError, match=pattern):
        copy_hf_gpt2(ours, theirs)
    assert all(
        torch.equal(v, before[k]) for k, v in ours.state_dict().items()
    )  # checked before any copy
    check_gpt2_config(ours_with(), hf["config"])  # and the unchanged model passes


@pytest.mark.parametrize(
    "changes, pattern", MISMATCHES[3:], ids=[next(iter(c)) for c, _ in MISMATCHES[3:]]
)
def test_block_configuration_is_checked_before_copying_a_block(
    hf, theirs, changes, pattern
):
    ours = ours_with(**changes).blocks[0]
    with pytest.raises(ValueError, match=pattern):
        check_gpt2_config(ours, hf["config"])
    with pytest.raises(ValueError, match=pattern):
        copy_hf_gpt2_block(ours, theirs.transformer.h[0])


def test_gelu_pytorch_tanh_is_the_same_activation_as_gelu_new(hf):
    config = hf["config"].to_dict() | {"activation_function": "gelu_pytorch_tanh"}
    check_gpt2_config(ours_with(), config)
    with pytest.raises(
        ValueError,
        match=r"^activation_function must be one of \['gelu', 'gelu_new', "
        r"'gelu_pytorch_tanh'\], got 'relu'$",
    ):
        check_gpt2_config(ours_with(), config | {"activation_function": "relu"})


def test_copy_functions_refuse_the_wrong_kind_of_model(hf, theirs):
    ours = fresh(hf)
    with pytest.raises(
        TypeError, match=r"^ours must be a GPTLanguageModel, got GPT2LMHeadModel$"
    ):
        copy_hf_gpt2(theirs, theirs)
    with pytest.raises(
        TypeError,
        match=r"^theirs must be a transformers GPT2LMHeadModel, got GPTLanguageModel$",
    ):
        copy_hf_gpt2(ours, ours)
    with pytest.raises(
        TypeError,
        match=r"^ours must be a GPTLanguageModel or a gpt2_block, got GPT2Block$",
    ):
        copy_hf_gpt2_block(theirs.transformer.h[0], theirs.transformer.h[0])
    with pytest.raises(
        TypeError, match=r"^theirs must be a transformers GPT2Block, got PreNormBlock$"
    ):
        copy_hf_gpt2_block(ours.blocks[0], ours.blocks[1])
    with pytest.raises(
        TypeError,
        match=r"^ours must be a GPTLanguageModel or a gpt2_block, got Linear$",
    ):
        check_gpt2_config(torch.nn.Linear(D, D), hf["config"])


# ---------------------------------------------------------------------------------------
# gpt2_from_hf_config: a GPT2Config or its config.json


def same_model(a: GPTLanguageModel, b: GPTLanguageModel) -> None:
    """The same structure (module tree, sizes, eps, activations, dropouts) and, built
    from one seed, the same initial weights."""
    assert repr(a) == repr(b)
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)
    for x, y in zip(a.blocks, b.blocks):
        assert (
            x.ffn.activation is y.ffn.activation and x.attn_norm.eps == y.attn_norm.eps
        )
        assert x.dropout.p == y.dropout.p and x.attn.n_heads == y.attn.n_heads
    assert a.dropout.p == b.dropout.p and a.context == b.context


def built(config) -> GPTLanguageModel:
    torch.manual_seed(7)
    return gpt2_from_hf_config(config)


@pytest.mark.parametrize(
    "variant",
    [
        {},
        {
            "n_inner": 24,
            "layer_norm_epsilon": 1e-6,
            "activation_function": "gelu",
            "resid_pdrop": 0.2,
            "embd_pdrop": 0.05,
            "initializer_range": 0.1,
        },
    ],
    ids=["small", "every_field_changed"],
)
def test_config_json_gives_the_model_the_config_object_gives(hf, tmp_path, variant):
    config = hf["Config"](**{**SETTINGS, **variant})
    (tmp_path / "config.json").write_text(config.to_json_string(), encoding="utf-8")
    from_json = json.loads((tmp_path / "config.json").read_text(encoding="utf-8"))
    from_dict = json.loads(json.dumps(config.to_dict()))
    reference = built(config)
    same_model(built(from_json), reference)
    same_model(built(from_dict), reference)
    block = reference.blocks[0]
    assert block.ffn.d_ff == variant.get(
        "n_inner", 4 * D
    ) and block.attn_norm.eps == variant.get("layer_norm_epsilon", 1e-5)
    assert block.dropout.p == variant.get(
        "resid_pdrop", 0.0
    ) and reference.dropout.p == variant.get("embd_pdrop", 0.0)


def test_a_config_json_may_leave_out_what_gpt2config_defaults(hf):
    """GPT2_DEFAULTS are transformers' own defaults, so a minimal config.json builds the
    model a GPT2Config with the same few fields builds."""
    defaults = hf["Config"]()
    assert {k: getattr(defaults, k) for k in GPT2_DEFAULTS} == GPT2_DEFAULTS
    minimal = {
        "model_type": "gpt2",
        "vocab_size": VOCAB,
        "n_positions": CONTEXT,
        "n_embd": D,
        "n_layer": LAYERS,
        "n_head": H,
        "attn_pdrop": 0.0,
    }
    same_model(
        built(minimal),
        built(hf["Config"](**minimal | {"bos_token_id": None, "eos_token_id": None})),
    )
    assert (
        hf_field(minimal, "resid_pdrop") == 0.1
        and hf_field(hf["config"], "resid_pdrop") == 0.0
    )
    with pytest.raises(ValueError, match=r"^config has no 'n_embd'$"):
        gpt2_from_hf_config({k: v for k, v in minimal.items() if k != "n_embd"})
    with pytest.raises(ValueError, match=r"^config has no 'model_type'$"):
        gpt2_from_hf_config({k: v for k, v in minimal.items() if k != "model_type"})


UNSUPPORTED = [
    (
        "attn_pdrop",
        0.1,
        "no dropout on the attention weights; for inference pass "
        "inference=True: dropout is off there",
    ),
    ("add_cross_attention", True, "decoder-only: no cross-attention"),
    ("scale_attn_weights", False, r"scores are always divided by sqrt\(d_head\)"),
    ("scale_attn_by_inverse_layer_idx", True, "not implemented"),
    ("reorder_and_upcast_attn", True, "not implemented"),
    ("tie_word_embeddings", False, "the output projection is always tied"),
]


@pytest.mark.parametrize(
    "name, value, why", UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED]
)
def test_unsupported_options_are_refused_not_changed(hf, name, value, why):
    pattern = rf"^config {name}={value!r} is not supported: {why}$"
    with pytest.raises(ValueError, match=pattern):
        gpt2_from_hf_config(hf["Config"](**{**SETTINGS, name: value}))
    with pytest.raises(ValueError, match=pattern):
        gpt2_from_hf_config(hf["config"].to_dict() | {name: value})


def test_other_models_and_activations_are_refused(hf):
    with pytest.raises(
        TypeError,
        match=r"^config must describe a GPT-2 \(model_type 'gpt2'\), got 'llama'$",
    ):
        gpt2_from_hf_config(hf["config"].to_dict() | {"model_type": "llama"})
    with pytest.raises(
        ValueError,
        match=r"^activation_function must be one of \['gelu', 'gelu_new', "
        r"'gelu_pytorch_tanh'\], got 'relu'$",
    ):
        gpt2_from_hf_config(hf["Config"](**{**SETTINGS, "activation_function": "relu"}))
    with pytest.raises(ValueError, match=r"^n_layer must be >= 1, got 0$"):
        gpt2_from_hf_config(hf["config"].to_dict() | {"n_layer": 0})
    with pytest.raises(TypeError, match=r"^vocab_size must be an int, got float$"):
        gpt2_from_hf_config(hf["config"].to_dict() | {"vocab_size": 11.0})
