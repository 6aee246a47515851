"""Mixtral against Hugging Face: `mixtral_block` == `MixtralDecoderLayer`, the tiny
Mixtral (2 layers, 4 experts, top-2) == `MixtralForCausalLM` (logits, every gradient,
the balancing loss and the training loss with `router_aux_loss_coef`), and
`moe_params` == the parameter count of HF models built on the meta device from the
published configs of Mixtral 8x7B, Qwen3-30B-A3B and DeepSeek-V3.

Float64 throughout. Tolerances as in tests/test_llama.py: HF's RMSNorm (and its eager
softmax) compute in float32, so (1) HF as it is: each tensor within F32_BOUND = 16
float32 ulps of its largest entry, and further than 1e-12 from ours (the float32 steps
are really in the path); (2) HF with its norms and eager softmax computing in the
input dtype (a test-harness patch): max |diff| <= F64_TOL. Both routers take their
softmax in float32, op for op alike, so the same float32 gates enter both sides.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from transformers import (
    DeepseekV3Config,
    DeepseekV3ForCausalLM,
    MixtralConfig,
    MixtralForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)
from transformers.models.mixtral import modeling_mixtral

from literate.models.llama import LlamaLanguageModel
from literate.models.mixtral import (
    HF_MIXTRAL_NAMES,
    check_mixtral_config,
    load_hf_mixtral,
    mixtral_block,
    mixtral_from_hf_config,
    mla_params,
    moe_params,
    router_aux_loss,
)
from literate.parts.moe import MoEFFN
from literate.tools.syncs import host_reads

from harness import (
    F32_BOUND,
    NO_SPECIAL_TOKENS,
    assert_equal_to_hf,
    compare_grads,
    hf_causal_mask,
    hf_in_input_dtype,
    hf_model_grads,
    hf_renamer,
    hf_sizes,
    random_tokens,
)

F64 = torch.float64
F64_TOL = 1e-12
D, H, H_KV, D_FF, E, K, T, B, VOCAB, LAYERS = 32, 4, 2, 24, 4, 2, 7, 2, 61, 2


def hf_config(**changes) -> MixtralConfig:
    settings = hf_sizes(VOCAB, D, H, H_KV, D_FF, LAYERS) | {
        "num_local_experts": E,
        "num_experts_per_tok": K,
        "max_position_embeddings": 32,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
        "router_aux_loss_coef": 0.02,
        "router_jitter_noise": 0.0,
        **NO_SPECIAL_TOKENS,
        "attn_implementation": "eager",
        "experts_implementation": "eager",
    }  # grouped_mm has no float64
    return MixtralConfig(**(settings | changes))


# --- the block --------------------------------------------------------------------------
BLOCK_NAMES = [
    ("attn.", "self_attn."),
    ("ffn.router.", "mlp.gate."),
    ("ffn.experts.", "mlp.experts."),
    ("attn_norm.", "input_layernorm."),
    ("ffn_norm.", "post_attention_layernorm."),
]


def hf_block_name(name: str) -> str:
    for ours, theirs in BLOCK_NAMES:
        if name.startswith(ours):
            return theirs + name[len(ours) :]
    raise KeyError(name)


@pytest.fixture(scope="module")
def block_pair():
    config = hf_config(num_hidden_layers=1)
    torch.manual_seed(0)
    ours = mixtral_block(D, H, H_KV, D_FF, E, K, rope_base=1e6, eps=1e-5).double()
    with torch.no_grad():
        for norm in (ours.attn_norm, ours.ffn_norm):
            norm.weight.normal_(1.0, 0.3)
        ours.ffn.router.weight.normal_(0.0, 0.5)  # routing far from uniform
    theirs = modeling_mixtral.MixtralDecoderLayer(config, 0).double().eval()
    theirs.load_state_dict(
        {hf_block_name(k): v for k, v in ours.state_dict().items()}, strict=True
    )
    assert theirs.self_attn.config._attn_implementation == "eager"
    return ours.eval(), theirs, modeling_mixtral.MixtralRotaryEmbedding(config)


def block_grads(ours, theirs, rope):
    cos_sin = rope(torch.zeros(B, T, D, dtype=F64), torch.arange(T).expand(B, T))
    return compare_grads(
        ours,
        ours,
        theirs,
        lambda x: theirs(
            x, attention_mask=hf_causal_mask(T), position_embeddings=cos_sin
        ),
        hf_block_name,
        shape=(B, T, D),
    )


def test_mixtral_block_equals_hf_mixtral_decoder_layer(block_pair):
    ours, theirs, rope = block_pair
    assert isinstance(ours.ffn, MoEFFN)
    assert len(list(ours.parameters())) == len(list(theirs.parameters())) == 9
    assert_equal_to_hf(
        lambda: block_grads(ours, theirs, rope),
        hf_in_input_dtype(theirs, modeling_mixtral),
        tol=F64_TOL,
    )
    assert ours.ffn.router_logits.shape == (B * T, E)


def test_no_host_sync_in_a_mixtral_block(block_pair):
    ours, _, _ = block_pair
    assert host_reads(ours, torch.randn(B, T, D, dtype=F64)) == 0


# --- the model --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pair():
    torch.manual_seed(0)
    theirs = MixtralForCausalLM(hf_config()).double().eval()
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            if p.ndim == 1:
                p.normal_(1.0, 0.3)  # HF initialises gains to 1
            elif name.endswith("mlp.gate.weight"):
                p.normal_(0.0, 0.5)  # HF's std 0.02 routes almost uniformly
    ours = mixtral_from_hf_config(theirs.config).double().eval()
    load_hf_mixtral(ours, theirs.state_dict(), theirs.config)
    return ours, theirs


def tokens(seed: int = 2, t: int = 9) -> torch.Tensor:
    return random_tokens(VOCAB, B, t, seed)


def test_the_model_is_what_we_think_it_is(pair):
    ours, theirs = pair
    assert isinstance(ours, LlamaLanguageModel) and len(ours.blocks) == LAYERS
    assert all(isinstance(b.ffn, MoEFFN) for b in ours.blocks)
    assert (
        len(list(ours.parameters())) == len(list(theirs.parameters())) == 3 + 9 * LAYERS
    )
    check_mixtral_config(ours, theirs.config.to_dict())


def test_logits_and_every_gradient_equal_mixtral_for_causal_lm(pair):
    ours, theirs = pair
    assert_equal_to_hf(
        lambda: hf_model_grads(ours, theirs, tokens(), hf_renamer(HF_MIXTRAL_NAMES)),
        hf_in_input_dtype(theirs, modeling_mixtral),
        tol=F64_TOL,
    )


def test_balancing_loss_and_training_loss_equal_hf(pair):
    """HF's aux_loss (output_router_logits=True) accumulates in float32 and its
    cross-entropy upcasts the logits to float32: within F32_BOUND of ours. Loss =
    CE + router_aux_loss_coef * aux, as MixtralForCausalLM adds them."""
    ours, theirs = pair
    ids = tokens(5)
    with torch.no_grad():
        out = theirs(input_ids=ids, labels=ids, output_router_logits=True)
        logits = ours(ids)
        aux = router_aux_loss(ours)
        ce = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        loss = ce + theirs.config.router_aux_loss_coef * aux
    assert len(out.router_logits) == LAYERS
    for moe_logits, hf_logits in zip(
        (b.ffn.router_logits for b in ours.blocks), out.router_logits
    ):
        assert (moe_logits - hf_logits).abs().max() <= F32_BOUND * hf_logits.abs().max()
    assert aux > K  # uniform routing gives k: ours is not
    for name, a, b in (("aux", aux, out.aux_loss), ("loss", loss, out.loss)):
        assert abs(a.item() - b.item()) <= F32_BOUND * abs(b.item()), name


def test_no_host_sync_in_run(pair):
    ours, _ = pair
    assert host_reads(ours.run, tokens()) == 0


def test_a_wrong_config_is_refused_naming_both_sides(pair):
    ours, _ = pair
    with pytest.raises(
        ValueError,
        match=r"^ours has n_experts=4, theirs "
        r"num_local_experts=8$",
    ):
        check_mixtral_config(ours, hf_config(num_local_experts=8))
    with pytest.raises(
        ValueError,
        match=r"^ours has top_k=2, theirs "
        r"num_experts_per_tok=1$",
    ):
        check_mixtral_config(ours, hf_config(num_experts_per_tok=1))
    with pytest.raises(
        ValueError, match=r"^config sliding_window=4096 is not supported"
    ):
        mixtral_from_hf_config(hf_config(sliding_window=4096))


# --- parameter counts -------------------------------------------------------------------
def meta_count(model_class, config) -> int:
    with torch.device("meta"):
        model = model_class(config)
    return sum(p.numel() for p in model.parameters())


MIXTRAL_8X7B = MixtralConfig()  # transformers' defaults are Mixtral 8x7B's config.json
QWEN3_30B_A3B = Qwen3MoeConfig(
    hidden_size=2048,
    num_hidden_layers=48,
    num_attention_heads=32,
    num_key_value_heads=4,
    head_dim=128,
    moe_intermediate_size=768,
    num_experts=128,
    num_experts_per_tok=8,
    vocab_size=151936,
    tie_word_embeddings=False,
    decoder_sparse_step=1,
    mlp_only_layers=[],
)
DEEPSEEK_V3 = DeepseekV3Config(  # its config.json (also transformers' defaults)
    hidden_size=7168,
    num_hidden_layers=61,
    num_attention_heads=128,
    num_key_value_heads=128,
    intermediate_size=18432,
    moe_intermediate_size=2048,
    n_routed_experts=256,
    num_experts_per_tok=8,
    n_shared_experts=1,
    first_k_dense_replace=3,
    vocab_size=129280,
    q_lora_rank=1536,
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
    tie_word_embeddings=False,
)


def test_moe_params_mixtral_8x7b():
    """46.7 B total, 12.9 B active per token (Mistral AI's announcement)."""
    c = MIXTRAL_8X7B
    assert (
        c.hidden_size,
        c.num_hidden_layers,
        c.intermediate_size,
        c.vocab_size,
        c.num_local_experts,
        c.num_experts_per_tok,
    ) == (4096, 32, 14336, 32000, 8, 2)
    total, active = moe_params(4096, 32, 8, 2, 14336, 32, 8, 32000)
    assert total == meta_count(MixtralForCausalLM, c) == 46_702_792_704
    assert active == 12_879_925_248
    assert (round(total / 1e9, 1), round(active / 1e9, 1)) == (46.7, 12.9)


def test_moe_params_qwen3_30b_a3b():
    """30.5 B total, 3.3 B active (Qwen3 technical report). Its q_norm and k_norm add
    2 d_head per layer. Active is 3.353 B: "3.3" truncates it (rounded, 3.4)."""
    total, active = moe_params(
        2048, 48, 128, 8, 768, 32, 4, 151936, d_head=128, qk_norm=True
    )
    assert total == meta_count(Qwen3MoeForCausalLM, QWEN3_30B_A3B) == 30_532_122_624
    assert active == 3_353_032_704
    assert round(total / 1e9, 1) == 30.5 and math.floor(active / 1e8) / 10 == 3.3


def test_moe_params_deepseek_v3():
    """671 B total, 37 B active (DeepSeek-V3 report; the checkpoint's 685 B adds the
    14 B multi-token-prediction module, which HF's model does not build). MLA by
    formula, checked against the meta model's attention; 3 dense layers first, one
    shared expert. The active count is also the meta model's total minus the unchosen
    routed experts, read from its own parameter shapes."""
    attention = mla_params(
        7168,
        128,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
    )
    total, active = moe_params(
        7168,
        61,
        256,
        8,
        2048,
        128,
        128,
        129280,
        shared=1,
        dense_layers=3,
        dense_d_ff=18432,
        attention=attention,
    )
    with torch.device("meta"):
        model = DeepseekV3ForCausalLM(DEEPSEEK_V3)
    assert total == sum(p.numel() for p in model.parameters()) == 671_026_404_352
    assert attention == sum(
        p.numel() for p in model.model.layers[0].self_attn.parameters()
    )
    unchosen = sum(
        (256 - 8)
        * (
            layer.mlp.experts.gate_up_proj[0].numel()
            + layer.mlp.experts.down_proj[0].numel()
        )
        for layer in model.model.layers[3:]
    )
    assert active == total - unchosen == 37_552_282_624
    assert (round(total / 1e9), math.floor(active / 1e9)) == (671, 37)


def test_moe_params_refuses_bad_arguments():
    with pytest.raises(ValueError, match=r"^top_k=9 > n_experts=8$"):
        moe_params(64, 2, 8, 9, 32, 4, 2, 100)
    with pytest.raises(ValueError, match=r"needs dense_d_ff"):
        moe_params(64, 2, 8, 2, 32, 4, 2, 100, dense_layers=1)
    with pytest.raises(TypeError, match=r"tied"):
        moe_params(64, 2, 8, 2, 32, 4, 2, 100, tied=1)
