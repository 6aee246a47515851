"""Chapter 11's published numbers (a start): every model's (total, active) parameter
count by formula == the parameter count of Hugging Face's model of that configuration,
built on the meta device (shapes only); the active count of each MoE == the meta
model's total minus its unchosen routed experts, read from its own expert shapes."""

from __future__ import annotations

import pytest
import torch
import transformers

from literate.published import PUBLISHED_CONFIGS, parameter_counts

CAUSAL_LM = {"GPT2Config": "GPT2LMHeadModel", "LlamaConfig": "LlamaForCausalLM",
             "MistralConfig": "MistralForCausalLM", "MixtralConfig": "MixtralForCausalLM",
             "Qwen3MoeConfig": "Qwen3MoeForCausalLM",
             "Gemma3TextConfig": "Gemma3ForCausalLM",
             "DeepseekV3Config": "DeepseekV3ForCausalLM",
             "GptOssConfig": "GptOssForCausalLM"}


def meta_model(name: str) -> torch.nn.Module:
    config_class, fields = PUBLISHED_CONFIGS[name]
    config = getattr(transformers, config_class)(**fields)
    with torch.device("meta"):
        return getattr(transformers, CAUSAL_LM[config_class])(config)


def unchosen_experts(model: torch.nn.Module) -> int:
    """Parameters of the routed experts one token does not use, over all MoE layers."""
    config, unused = model.config, 0
    for name, experts in model.named_modules():
        if not name.endswith("mlp.experts"):
            continue
        e = getattr(config, "num_local_experts", None) or getattr(
            config, "n_routed_experts", None) or config.num_experts
        per_expert = sum(p[0].numel() for p in experts.parameters())  # [E, ...] each
        unused += (e - config.num_experts_per_tok) * per_expert
    return unused


@pytest.mark.parametrize("name", list(PUBLISHED_CONFIGS))
def test_the_formula_counts_what_hugging_faces_model_holds(name):
    model = meta_model(name)
    total, active = parameter_counts(name)
    assert total == sum(p.numel() for p in model.parameters()), name
    assert active == total - unchosen_experts(model), name
    assert (active < total) == (unchosen_experts(model) > 0)


def test_an_unknown_model_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match=r"no published configuration named 'GPT-5'"):
        parameter_counts("GPT-5")
