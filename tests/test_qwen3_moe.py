"""Qwen3-MoE (`literate.models.qwen3_moe`) against Hugging Face's `Qwen3MoeForCausalLM`
(transformers 5, a `Qwen3MoeConfig`), weights copied, float64.

- The tiny model (3 layers, 4 experts of width 24, top 2, heads of 16 where d / H is 8,
  every gain random, routers far from uniform) in three variants: renormalised over the
  k (`norm_topk_prob`, as the released models), not renormalised with a tied head, and
  with a dense first layer (`mlp_only_layers`): logits and every parameter's gradient
  equal HF's; greedy tokens from chapter 8's cached `generate` equal HF's
  `generate(do_sample=False)` token for token, for prompts of 1, 5 and 9 tokens (no
  EOS); the balancing loss and the training loss with `router_aux_loss_coef` equal HF's.
- Which layers are dense follows HF's rule (`mlp_only_layers`, `decoder_sparse_step`),
  checked against the layers of HF's model for several configurations.
- The config.json dict (`to_dict()`, which writes `num_local_experts`) builds and loads
  the same model as the config object; Qwen3-30B-A3B's config.json (the 4.x layout,
  `num_experts`) builds its published configuration on the meta device, its parameter
  count HF's (30,532,122,624).
- Refused, naming the field: Qwen3's refusals, no experts, a malformed
  `mlp_only_layers`; a config of another shape or routing (both sides named).

Tolerances as in tests/test_mixtral.py: HF's RMSNorms compute in float32 and both routers
take their softmax in float32, so (1) HF as it is: each tensor within F32_BOUND of its
largest entry and further than 1e-12; (2) HF with its norms in the input dtype (a
test-harness patch): max |diff| <= F64_TOL.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
from transformers.models.qwen3_moe import modeling_qwen3_moe

from literate.decoding.generate import generate
from literate.models.llama import LlamaLanguageModel
from literate.models.mixtral import model_balancing_loss
from literate.models.qwen3_moe import (
    HF_QWEN3_MOE_NAMES,
    check_qwen3_moe_config,
    load_hf_qwen3_moe,
    qwen3_moe_dense_layers,
    qwen3_moe_from_hf_config,
    qwen3_moe_model,
    qwen3_moe_routing,
    qwen3_moe_top_k,
)
from literate.numbers.flops import published_flops, step_flops
from literate.numbers.published import published_model
from literate.parts.ffn import GatedFFN
from literate.parts.moe import MoEFFN
from literate.tools.syncs import host_reads

from harness import (
    F32_BOUND,
    NO_SPECIAL_TOKENS,
    assert_equal_to_hf,
    hf_greedy,
    hf_in_input_dtype,
    hf_model_grads,
    hf_renamer,
    hf_sizes,
    random_tokens,
)

F64 = torch.float64
F64_TOL = 1e-12
D, H, H_KV, D_HEAD, D_FF, D_MOE, E, K = 32, 4, 2, 16, 48, 24, 4, 2
B, VOCAB, LAYERS = 2, 61, 3


def hf_config(**changes) -> Qwen3MoeConfig:
    settings = hf_sizes(VOCAB, D, H, H_KV, D_FF, LAYERS) | {
        "head_dim": D_HEAD,
        "moe_intermediate_size": D_MOE,
        "num_experts": E,
        "num_experts_per_tok": K,
        "norm_topk_prob": True,
        "max_position_embeddings": 32,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10_000.0},
        "router_aux_loss_coef": 0.02,
        **NO_SPECIAL_TOKENS,
        "attn_implementation": "sdpa",
        "experts_implementation": "eager",  # grouped_mm has no float64
    }
    return Qwen3MoeConfig(**(settings | changes))


def hf_model(seed: int = 0, **changes) -> Qwen3MoeForCausalLM:
    """A float64 Qwen3MoeForCausalLM with every gain random (HF initialises them to 1)
    and routers far from uniform (HF's std 0.02 routes almost uniformly)."""
    torch.manual_seed(seed)
    model = Qwen3MoeForCausalLM(hf_config(**changes)).double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.normal_(1.0, 0.3)
            elif name.endswith("mlp.gate.weight"):
                p.normal_(0.0, 0.5)
    return model


VARIANTS = {
    "renormalised": {},
    "raw, tied": {"norm_topk_prob": False, "tie_word_embeddings": True},
    "a dense layer": {"mlp_only_layers": [0]},
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def pair(request):
    theirs = hf_model(**VARIANTS[request.param])
    ours = qwen3_moe_from_hf_config(theirs.config).double().eval()
    load_hf_qwen3_moe(ours, theirs.state_dict(), theirs.config)
    return ours, theirs


def ids(seed: int = 2, t: int = 9) -> torch.Tensor:
    return random_tokens(VOCAB, B, t, seed)


def test_the_model_is_what_we_think_it_is(pair):
    ours, theirs = pair
    config = theirs.config
    assert isinstance(ours, LlamaLanguageModel) and len(ours.blocks) == LAYERS
    kinds = [type(b.ffn) for b in ours.blocks]
    hf_kinds = [type(layer.mlp).__name__ for layer in theirs.model.layers]
    assert kinds == [GatedFFN if kind == "Qwen3MoeMLP" else MoEFFN for kind in hf_kinds]
    assert (kinds[0] is GatedFFN) == (config.mlp_only_layers == [0])
    tied = config.tie_word_embeddings
    assert (ours.lm_head.weight is ours.token_embedding.weight) == tied
    assert len(list(ours.parameters())) == len(list(theirs.parameters()))
    assert sum(p.numel() for p in ours.parameters()) == sum(
        p.numel() for p in theirs.parameters()
    )
    moe = next(b.ffn for b in ours.blocks if isinstance(b.ffn, MoEFFN))
    assert qwen3_moe_routing(moe) == (K, config.norm_topk_prob)


def test_logits_and_every_gradient_equal_qwen3_moe_for_causal_lm(pair):
    ours, theirs = pair
    assert_equal_to_hf(
        lambda: hf_model_grads(ours, theirs, ids(), hf_renamer(HF_QWEN3_MOE_NAMES)),
        hf_in_input_dtype(theirs, modeling_qwen3_moe),
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


def test_balancing_loss_and_training_loss_equal_hf(pair):
    """HF's aux_loss (output_router_logits=True: its MoE layers' router logits only)
    accumulates in float32 and its cross-entropy upcasts the logits: within F32_BOUND
    of ours, `model_balancing_loss` with `qwen3_moe_top_k`. Loss = CE +
    router_aux_loss_coef * aux, as Qwen3MoeForCausalLM adds them."""
    ours, theirs = pair
    tokens = ids(5)
    with torch.no_grad():
        out = theirs(input_ids=tokens, labels=tokens, output_router_logits=True)
        logits = ours(tokens)
        aux = model_balancing_loss(ours, qwen3_moe_top_k)
        ce = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), tokens[:, 1:].flatten())
        loss = ce + theirs.config.router_aux_loss_coef * aux
    moes = [b.ffn for b in ours.blocks if isinstance(b.ffn, MoEFFN)]
    assert len(out.router_logits) == len(moes)
    for moe, hf_logits in zip(moes, out.router_logits):
        diff = (moe.router_logits - hf_logits).abs().max()
        assert diff <= F32_BOUND * hf_logits.abs().max()
    assert aux > K  # uniform routing gives k: ours is not
    for name, a, b in (("aux", aux, out.aux_loss), ("loss", loss, out.loss)):
        assert abs(a.item() - b.item()) <= F32_BOUND * abs(b.item()), name


def test_no_host_sync_in_run(pair):
    ours, _ = pair
    assert host_reads(ours.run, ids()) == 0


# --- the dense layers -------------------------------------------------------------------
@pytest.mark.parametrize(
    "step, only, layers",
    [(1, [], 3), (2, [], 4), (3, [0], 6), (1, [1, 3, 9], 4), (2, [1], 5)],
)
def test_the_dense_layers_are_those_of_hf_rule(step, only, layers):
    config = hf_config(
        decoder_sparse_step=step, mlp_only_layers=only, num_hidden_layers=layers
    )
    with torch.device("meta"):
        theirs = Qwen3MoeForCausalLM(config)
        ours = qwen3_moe_from_hf_config(config)
    dense = [
        i
        for i, layer in enumerate(theirs.model.layers)
        if type(layer.mlp).__name__ == "Qwen3MoeMLP"
    ]
    assert qwen3_moe_dense_layers(config) == dense
    assert qwen3_moe_dense_layers(config.to_dict()) == dense
    assert [
        i for i, b in enumerate(ours.blocks) if isinstance(b.ffn, GatedFFN)
    ] == dense
    check_qwen3_moe_config(ours, config)


def test_qwen3_moe_model_refuses_bad_dense_layers():
    sizes = (VOCAB, 32, D, H, H_KV, LAYERS, D_MOE, E, K)
    with pytest.raises(ValueError, match=r"^dense_layers need dense_d_ff"):
        qwen3_moe_model(*sizes, dense_layers=[1])
    with pytest.raises(ValueError, match=r"^dense_layers=\[3\] names a layer beyond"):
        qwen3_moe_model(*sizes, dense_layers=[3], dense_d_ff=D_FF)
    with pytest.raises(TypeError, match=r"^dense_layers must be layer numbers"):
        qwen3_moe_model(*sizes, dense_layers="0", dense_d_ff=D_FF)
    with pytest.raises(ValueError, match=r"^top_k=5 > n_experts=4$"):
        qwen3_moe_model(VOCAB, 32, D, H, H_KV, LAYERS, D_MOE, E, 5)


# --- the configuration as config.json ---------------------------------------------------
def test_a_config_json_builds_and_loads_the_same_model(pair):
    ours, theirs = pair
    config = theirs.config.to_dict()
    assert "num_experts" not in config and config["num_local_experts"] == E
    rebuilt = qwen3_moe_from_hf_config(config).double().eval()
    check_qwen3_moe_config(rebuilt, config)
    check_qwen3_moe_config(ours, config)
    load_hf_qwen3_moe(rebuilt, theirs.state_dict(), config)
    with torch.no_grad():
        assert torch.equal(rebuilt(ids()), ours(ids()))


QWEN3_30B_A3B_JSON = {  # Qwen/Qwen3-30B-A3B's config.json (transformers 4.51's layout)
    "architectures": ["Qwen3MoeForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "decoder_sparse_step": 1,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 6144,
    "max_position_embeddings": 40960,
    "max_window_layers": 48,
    "mlp_only_layers": [],
    "model_type": "qwen3_moe",
    "moe_intermediate_size": 768,
    "norm_topk_prob": True,
    "num_attention_heads": 32,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "output_router_logits": False,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000.0,
    "router_aux_loss_coef": 0.001,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "use_sliding_window": False,
    "vocab_size": 151936,
}


def test_qwen3_30b_a3b_config_json_builds_the_published_model():
    """The released config.json and the published configuration
    (literate/numbers/published.py, read by its family's loader) build one model:
    30,532,122,624 parameters, the count of HF's model (tests/test_mixtral.py)."""
    with torch.device("meta"):
        ours = qwen3_moe_from_hf_config(QWEN3_30B_A3B_JSON)
    published = published_model("Qwen3-30B-A3B")
    check_qwen3_moe_config(ours, QWEN3_30B_A3B_JSON)
    check_qwen3_moe_config(published, QWEN3_30B_A3B_JSON)
    shapes = {n: tuple(p.shape) for n, p in ours.state_dict().items()}
    assert shapes == {n: tuple(p.shape) for n, p in published.state_dict().items()}
    assert sum(p.numel() for p in ours.parameters()) == 30_532_122_624
    moe = ours.blocks[0].ffn
    assert (moe.n_experts, moe.experts.d_ff, qwen3_moe_routing(moe)) == (
        128,
        768,
        (8, True),
    )
    assert ours.blocks[0].attn.d_head == 128 and ours.blocks[0].attn.rope.base == 1e6
    # chapter 11 counts its FLOPs from the configuration (`qwen3_moe_shape`): the model
    # the loader builds gives the same count
    for keys in (1, 4096, 131_072):
        assert step_flops(published, keys) == published_flops("Qwen3-30B-A3B", keys)


# --- refusals ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def renormalised():
    theirs = hf_model(seed=5)
    return theirs, theirs.state_dict()


def refused(ours, state, config, pattern):
    before = {k: v.clone() for k, v in ours.state_dict().items()}
    with pytest.raises(ValueError, match=pattern):
        load_hf_qwen3_moe(ours, state, config)
    after = ours.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # nothing was copied


UNSUPPORTED = [  # a Qwen3MoeConfig change, then the message naming the field
    ({"attention_bias": True}, r"^config attention_bias=True is not supported"),
    ({"hidden_act": "gelu"}, r"^config hidden_act='gelu' is not supported"),
    ({"attention_dropout": 0.1}, r"^config attention_dropout=0\.1 is not supported"),
    (
        {"use_sliding_window": True, "sliding_window": 4},
        r"^config use_sliding_window=True is not supported",
    ),
    (
        {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6}},
        r"^RoPE scaling 'yarn' is not implemented",
    ),
    # (in transformers 5's config.json the field is num_local_experts)
    ({"num_experts": 0}, r"^config num(_local)?_experts must be >= 1, got 0$"),
    ({"decoder_sparse_step": 0}, r"^config decoder_sparse_step must be >= 1, got 0$"),
]


@pytest.mark.parametrize(
    "changes, pattern", UNSUPPORTED, ids=[next(iter(c)) for c, _ in UNSUPPORTED]
)
def test_what_ours_does_not_do_is_refused_naming_the_field(
    renormalised, changes, pattern
):
    theirs, state = renormalised
    other = hf_config(**changes)
    for form in (other, other.to_dict()):
        with pytest.raises(ValueError, match=pattern):
            qwen3_moe_from_hf_config(form)
        refused(qwen3_moe_from_hf_config(theirs.config), state, form, pattern)


def test_a_malformed_mlp_only_layers_is_refused():
    config = hf_config().to_dict() | {"mlp_only_layers": "0"}
    with pytest.raises(TypeError, match=r"^config mlp_only_layers must be a list"):
        qwen3_moe_from_hf_config(config)


MISMATCHES = [  # a Qwen3MoeConfig change, then the message naming both sides
    ({"num_experts": 8}, r"^ours has n_experts=4, theirs num_experts=8$"),
    ({"num_experts_per_tok": 1}, r"^ours has top_k=2, theirs num_experts_per_tok=1$"),
    (
        {"norm_topk_prob": False},
        r"^ours has norm_topk_prob=True, theirs norm_topk_prob=False$",
    ),
    (
        {"moe_intermediate_size": 16},
        r"^ours has d_ff=24, theirs moe_intermediate_size=16$",
    ),
    (
        {"mlp_only_layers": [1]},
        r"^ours has dense_layers=\[\], theirs mlp_only_layers and "
        r"decoder_sparse_step=\[1\]$",
    ),
    ({"head_dim": 8}, r"^ours has d_head=16, theirs head_dim=8$"),
    (
        {"tie_word_embeddings": True},
        r"^ours has tied=False, theirs tie_word_embeddings=True$",
    ),
]


@pytest.mark.parametrize(
    "changes, pattern", MISMATCHES, ids=[next(iter(c)) for c, _ in MISMATCHES]
)
def test_another_shape_is_refused_naming_both_sides(renormalised, changes, pattern):
    theirs, state = renormalised
    other = hf_config(**changes)
    refused(qwen3_moe_from_hf_config(theirs.config).double(), state, other, pattern)
    with pytest.raises(ValueError, match=pattern):  # the same words from the dict
        check_qwen3_moe_config(qwen3_moe_from_hf_config(theirs.config), other.to_dict())


def test_the_dense_width_is_checked_where_a_layer_is_dense():
    config = hf_config(mlp_only_layers=[0])
    ours = qwen3_moe_from_hf_config(config)
    with pytest.raises(
        ValueError, match=r"^ours has dense_d_ff=48, theirs intermediate_size=64$"
    ):
        check_qwen3_moe_config(
            ours, hf_config(mlp_only_layers=[0], intermediate_size=64)
        )
    check_qwen3_moe_config(
        qwen3_moe_from_hf_config(hf_config()), hf_config(intermediate_size=64)
    )  # no dense layer: intermediate_size is not read


def test_a_mixtral_router_is_not_qwen3_moe_routing():
    from functools import partial

    from literate.parts.routers import mixtral_router

    ours = qwen3_moe_from_hf_config(hf_config())
    ours.blocks[0].ffn.router.route = partial(mixtral_router, top_k=K)
    with pytest.raises(ValueError, match=r"^ffn\.router\.route must be partial\("):
        check_qwen3_moe_config(ours, hf_config())
