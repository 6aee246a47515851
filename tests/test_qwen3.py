"""Qwen3's dense model (`literate.models.qwen3`) against Hugging Face's `Qwen3ForCausalLM`
(transformers 5, a `Qwen3Config`), weights copied, float64.

- The tiny model (3 layers, 4 query heads over 2 key/value heads, heads of 16 where
  d / H is 8, every gain random: the QK-norms' too), untied and tied: logits and every
  parameter's gradient equal HF's; greedy tokens from chapter 8's cached `generate` equal
  HF's `generate(do_sample=False)` token for token, for prompts of 1, 5 and 9 tokens (no
  EOS: neither side stops early).
- The config.json dict (`to_dict()`) builds and loads the same model as the config
  object; Qwen3 0.6B's published config.json (the 4.x layout: `rope_theta`,
  `sliding_window: null`) builds its shape on the meta device, as HF's model of it; a
  config.json without `head_dim` gets HF's default, 128, not d / H.
- Refused, naming the field, before any weight is copied: biases, another activation,
  attention dropout, a sliding window (`use_sliding_window`, or sliding layers in
  `layer_types`), RoPE scaling; a config of another shape (both sides named); a model
  that is not Qwen3's (a Llama: no QK-norm); a Llama checkpoint (no q_norm or k_norm).

Tolerances as in tests/test_llama.py: HF's RMSNorms (the QK-norms too) compute in float32,
so (1) HF as it is: each tensor within F32_BOUND of its largest entry and further than
1e-12 from ours; (2) HF with its norms in the input dtype (a test-harness patch): max
|diff| <= F64_TOL.
"""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM
from transformers.models.qwen3 import modeling_qwen3

from literate.decoding.generate import generate
from literate.models.llama import LlamaLanguageModel, llama_from_hf_config
from literate.models.qwen3 import (
    HF_QWEN3_NAMES,
    QWEN3_DEFAULTS,
    check_qwen3_config,
    load_hf_qwen3,
    qwen3_from_hf_config,
)
from literate.numbers.published import PUBLISHED_CONFIGS
from literate.tools.syncs import host_reads

from harness import (
    NO_SPECIAL_TOKENS,
    assert_equal_to_hf,
    hf_greedy,
    hf_in_input_dtype,
    hf_model_grads,
    hf_renamer,
    hf_sizes,
    random_gains_hf_model,
    random_tokens,
)

F64 = torch.float64
F64_TOL = 1e-10
D, H, H_KV, D_HEAD, D_FF, B, VOCAB, LAYERS = 32, 4, 2, 16, 48, 2, 61, 3


def hf_config(**changes) -> Qwen3Config:
    settings = hf_sizes(VOCAB, D, H, H_KV, D_FF, LAYERS) | {
        "head_dim": D_HEAD,
        "max_position_embeddings": 32,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10_000.0},
        **NO_SPECIAL_TOKENS,
        "attn_implementation": "sdpa",
    }
    return Qwen3Config(**(settings | changes))


def hf_model(tied: bool, seed: int = 0) -> Qwen3ForCausalLM:
    """A float64 Qwen3ForCausalLM with every gain random (HF initialises them to 1)."""
    return random_gains_hf_model(
        Qwen3ForCausalLM, hf_config(tie_word_embeddings=tied), seed=seed
    )


@pytest.fixture(scope="module", params=[False, True], ids=["untied", "tied"])
def pair(request):
    theirs = hf_model(request.param)
    ours = qwen3_from_hf_config(theirs.config).double().eval()
    load_hf_qwen3(ours, theirs.state_dict(), theirs.config)
    return ours, theirs


def ids(seed: int = 2, t: int = 9) -> torch.Tensor:
    return random_tokens(VOCAB, B, t, seed)


def test_the_model_is_what_we_think_it_is(pair):
    ours, theirs = pair
    tied = theirs.config.tie_word_embeddings
    assert isinstance(ours, LlamaLanguageModel) and len(ours.blocks) == LAYERS
    assert (ours.lm_head.weight is ours.token_embedding.weight) == tied
    # per layer: q, k, v, o, q_norm, k_norm, gate, up, down and two norms
    assert (
        len(list(ours.parameters()))
        == len(list(theirs.parameters()))
        == 3 + 11 * LAYERS - tied
    )
    attn = ours.blocks[0].attn
    assert (attn.d_head, attn.qk_norm, attn.q_proj.out_features) == (16, "head", 64)
    assert tuple(attn.q_norm.weight.shape) == tuple(attn.k_norm.weight.shape) == (16,)


def test_logits_and_every_gradient_equal_qwen3_for_causal_lm(pair):
    ours, theirs = pair
    assert_equal_to_hf(
        lambda: hf_model_grads(ours, theirs, ids(), hf_renamer(HF_QWEN3_NAMES)),
        hf_in_input_dtype(theirs, modeling_qwen3),
        tol=F64_TOL,
    )


@pytest.mark.parametrize("t", [1, 5, 9])
def test_greedy_tokens_equal_hf_generate(pair, t):
    ours, theirs = pair
    prompt = ids(4 + t, t)
    want = hf_greedy(theirs, prompt, 12)
    got = generate(ours, prompt, 12)
    assert want.shape == (B, t + 12) and torch.equal(got, want)
    assert torch.equal(ours.generate(prompt, 12), got)  # chapter 5's, uncached


def test_no_host_sync_in_run(pair):
    ours, _ = pair
    assert host_reads(ours.run, ids()) == 0


# --- the configuration as config.json ---------------------------------------------------
def test_a_config_json_builds_and_loads_the_same_model(pair):
    ours, theirs = pair
    config = theirs.config.to_dict()
    rebuilt = qwen3_from_hf_config(config).double().eval()
    check_qwen3_config(rebuilt, config)
    check_qwen3_config(ours, config)
    load_hf_qwen3(rebuilt, theirs.state_dict(), config)
    with torch.no_grad():
        assert torch.equal(rebuilt(ids()), ours(ids()))


QWEN3_0_6B_JSON = {  # Qwen/Qwen3-0.6B's config.json, written by transformers 4.51
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 1024,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 40960,
    "max_window_layers": 28,
    "model_type": "qwen3",
    "num_attention_heads": 16,
    "num_hidden_layers": 28,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}


def test_qwen3_0_6b_config_json_builds_its_shape():
    """The released config.json (the older layout) and the published configuration of
    literate/numbers/published.py build one model, parameter for parameter the shapes of
    HF's model of that config.json (the meta device: no memory)."""
    with torch.device("meta"):
        ours = qwen3_from_hf_config(QWEN3_0_6B_JSON)
        published = qwen3_from_hf_config(
            Qwen3Config(**PUBLISHED_CONFIGS["Qwen3-0.6B"][1])
        )
        theirs = Qwen3ForCausalLM(Qwen3Config.from_dict(QWEN3_0_6B_JSON))
    attn = ours.blocks[0].attn
    assert (attn.n_heads, attn.n_kv_heads, attn.d_head) == (16, 8, 128)
    assert attn.rope.base == 1e6 and ours.context == 40960
    assert ours.lm_head.weight is ours.token_embedding.weight
    check_qwen3_config(ours, QWEN3_0_6B_JSON)
    check_qwen3_config(published, QWEN3_0_6B_JSON)
    shapes = {n: tuple(p.shape) for n, p in ours.state_dict().items()}
    assert shapes == {n: tuple(p.shape) for n, p in published.state_dict().items()}
    rename = hf_renamer(HF_QWEN3_NAMES)
    assert shapes == {rename(n): tuple(p.shape) for n, p in theirs.state_dict().items()}
    assert sum(p.numel() for p in ours.parameters()) == sum(
        p.numel() for p in theirs.parameters()
    )


def test_a_config_json_without_head_dim_gets_hf_default_not_d_over_h():
    config = {k: v for k, v in hf_config().to_dict().items() if k != "head_dim"}
    assert QWEN3_DEFAULTS["head_dim"] == Qwen3Config.from_dict(config).head_dim == 128
    assert qwen3_from_hf_config(config).blocks[0].attn.d_head == 128


# --- refusals ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def untied():
    theirs = hf_model(False, seed=5)
    return theirs, theirs.state_dict()


def refused(ours, state, config, pattern):
    before = {k: v.clone() for k, v in ours.state_dict().items()}
    with pytest.raises(ValueError, match=pattern):
        load_hf_qwen3(ours, state, config)
    after = ours.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # nothing was copied


UNSUPPORTED = [  # a Qwen3Config change, then the message naming the field
    ({"attention_bias": True}, r"^config attention_bias=True is not supported"),
    ({"hidden_act": "gelu"}, r"^config hidden_act='gelu' is not supported"),
    ({"attention_dropout": 0.1}, r"^config attention_dropout=0\.1 is not supported"),
    (
        {"use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1},
        r"^config use_sliding_window=True is not supported",
    ),
    (
        {"layer_types": ["full_attention", "sliding_attention", "full_attention"]},
        r"^config layer_types=\['full_attention', 'sliding_attention', 'full_attention'"
        r"\] is not supported",
    ),
    (
        {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6}},
        r"^RoPE scaling 'yarn' is not implemented",
    ),
]


@pytest.mark.parametrize(
    "changes, pattern", UNSUPPORTED, ids=[next(iter(c)) for c, _ in UNSUPPORTED]
)
def test_what_ours_does_not_do_is_refused_naming_the_field(untied, changes, pattern):
    theirs, state = untied
    other = hf_config(**changes)
    for form in (other, other.to_dict()):
        with pytest.raises(ValueError, match=pattern):
            qwen3_from_hf_config(form)
        refused(qwen3_from_hf_config(theirs.config), state, form, pattern)


MISMATCHES = [  # a Qwen3Config change, then the message naming both sides
    ({"head_dim": 8}, r"^ours has d_head=16, theirs head_dim=8$"),
    (
        {"num_key_value_heads": 4},
        r"^ours has n_kv_heads=2, theirs num_key_value_heads=4$",
    ),
    ({"intermediate_size": 64}, r"^ours has d_ff=48, theirs intermediate_size=64$"),
    ({"rms_norm_eps": 1e-5}, r"^ours has eps=1e-06, theirs rms_norm_eps=1e-05$"),
    (
        {"rope_parameters": {"rope_type": "default", "rope_theta": 1e6}},
        r"^ours has rope_base=10000\.0, theirs rope_theta=1000000\.0$",
    ),
    (
        {"tie_word_embeddings": True},
        r"^ours has tied=False, theirs tie_word_embeddings=True$",
    ),
    ({"num_hidden_layers": 2}, r"^ours has n_layers=3, theirs num_hidden_layers=2$"),
]


@pytest.mark.parametrize(
    "changes, pattern", MISMATCHES, ids=[next(iter(c)) for c, _ in MISMATCHES]
)
def test_another_shape_is_refused_naming_both_sides(untied, changes, pattern):
    theirs, state = untied
    other = hf_config(**changes)
    refused(qwen3_from_hf_config(theirs.config).double(), state, other, pattern)
    with pytest.raises(ValueError, match=pattern):  # the same words from the dict
        check_qwen3_config(qwen3_from_hf_config(theirs.config), other.to_dict())


def test_a_llama_is_not_a_qwen3_either_way(untied):
    """A Llama of the same sizes has no QK-norm: our Llama is refused as a Qwen3, and
    a Llama checkpoint lacks the q_norm and k_norm a Qwen3 needs."""
    theirs, state = untied
    fields = {k: v for k, v in hf_config().to_dict().items() if k != "model_type"}
    llama_config = LlamaConfig(**fields)  # a Llama of the same sizes
    with pytest.raises(
        TypeError, match=r"^ours must be a LlamaLanguageModel of qwen3_"
    ):
        check_qwen3_config(llama_from_hf_config(llama_config), theirs.config)
    torch.manual_seed(0)
    llama_state = LlamaForCausalLM(llama_config).double().state_dict()
    refused(
        qwen3_from_hf_config(theirs.config).double(),
        llama_state,
        theirs.config,
        r"^state_dict lacks \['blocks\.0\.attn\.k_norm\.weight', "
        r"'blocks\.0\.attn\.q_norm\.weight',",
    )


def test_a_config_that_is_not_one_is_refused():
    with pytest.raises(TypeError, match=r"load it with AutoConfig\.from_pretrained"):
        qwen3_from_hf_config("Qwen/Qwen3-0.6B")
    with pytest.raises(TypeError, match=r"^config tie_word_embeddings must be a bool"):
        qwen3_from_hf_config(hf_config().to_dict() | {"tie_word_embeddings": "false"})
