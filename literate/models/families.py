"""The table of model families: one row for each family whose whole model loads from a
Hugging Face checkpoint, read by whatever needs every family.

A family is one module of `literate/models/` with three functions named after it:
`<name>_from_hf_config(config)` (our model in the shape of a Hugging Face configuration
or config.json), `check_<name>_config(ours, config)` and `load_hf_<name>(ours,
state_dict, config)`. Its row here names the module, the configuration class and the
model class of `transformers` ours is proven equal to, the chapter that builds it and
the test that proves it. Who reads the table:

* `literate.numbers.published.published_model`: the loader of a published
  configuration, by its configuration class;
* `literate.numbers.eras.ERA_ROWS`: the page and the proof of each era that is a
  published model;
* `literate.tools.era_files.ERAS`: the production classes each standalone file is proven
  equal to;
* `literate.tools.bench.models`: one benchmark row per family, the whole model's logits
  against `hf_model`'s, in the configuration of the row's `bench` keywords;
* tests/test_families.py: every family module has its row and its three functions, and
  every row's proof is a test that exists.

The self-checks of the standalone files (`literate.tools.selfcheck`) do not read it:
each is exported into a file that may import nothing.

Adding a family: its module, its row, its equivalence test (and, if the site should
count it, a published configuration in `literate/numbers/published.py`). The families
whose blocks alone load (OLMo 2 in chapter 7's builders, the 2017 layers' PyTorch
twins) are not in this table: they have no model loader.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Family", "FAMILIES", "family", "family_of_config"]


# --8<-- [start:families]
@dataclass(frozen=True)
class Family:
    name: str  # the module's name under literate/models, and its functions'
    hf_config: str  # transformers' configuration class
    hf_model: str  # transformers' model class ours is proven equal to
    page: str  # the chapter that builds it, docs-relative
    proof: str  # pytest id of the test proving the whole model equal to hf_model
    # keywords of `<name>_from_hf_config` for a model built to be read, not trained
    inference_options: dict = field(default_factory=dict)
    # the name a reader knows it by, and the configuration keywords (beyond the shared
    # shape in `literate.tools.bench.models`) of the model the benchmarks time
    title: str = ""
    bench: dict = field(default_factory=dict)
    # the `model_type` of a checkpoint's config.json that this family loads
    model_type: str = ""
    # a mixture of experts whose files keep each expert's matrices apart: their names
    # (gate, up, down), then (old, new) renames of the files' names
    # (`literate.models.checkpoint.stacked_experts`)
    experts_apart: tuple = ()

    @property
    def module(self) -> str:
        return f"literate.models.{self.name}"

    def function(self, kind: str) -> Callable:
        """One of the family's three functions: "from_hf_config", "check", "load"."""
        names = {
            "from_hf_config": f"{self.name}_from_hf_config",
            "check": f"check_{self.name}_config",
            "load": f"load_hf_{self.name}",
        }
        if kind not in names:
            raise ValueError(f"kind must be one of {sorted(names)}, got {kind!r}")
        return getattr(importlib.import_module(self.module), names[kind])


FAMILIES: tuple[Family, ...] = (  # in the order the chapters build them
    Family(
        "gpt2",
        "GPT2Config",
        "GPT2LMHeadModel",
        "eras/gpt2.md",
        "tests/test_gpt2.py::test_model_logits_and_gradients_equal_gpt2lmheadmodel",
        inference_options={"inference": True},
        title="GPT-2",
        model_type="gpt2",
    ),
    Family(
        "llama",
        "LlamaConfig",
        "LlamaForCausalLM",
        "modern/modern-block.md",
        "tests/test_llama.py::test_logits_and_every_gradient_equal_llama_for_causal_lm",
        title="Llama",
        model_type="llama",
    ),
    Family(
        "qwen3",
        "Qwen3Config",
        "Qwen3ForCausalLM",
        "modern/modern-block.md",
        "tests/test_qwen3.py::test_logits_and_every_gradient_equal_qwen3_for_causal_lm",
        title="Qwen3",
        model_type="qwen3",
        bench={"head_dim": 64},
    ),
    Family(
        "mixtral",
        "MixtralConfig",
        "MixtralForCausalLM",
        "moe/mixture-of-experts.md",
        "tests/test_mixtral.py::"
        "test_logits_and_every_gradient_equal_mixtral_for_causal_lm",
        title="Mixtral",
        model_type="mixtral",
        experts_apart=("w1", "w3", "w2", (".block_sparse_moe.", ".mlp.")),
        bench={"num_local_experts": 8, "num_experts_per_tok": 2},
    ),
    Family(
        "qwen3_moe",
        "Qwen3MoeConfig",
        "Qwen3MoeForCausalLM",
        "moe/mixture-of-experts.md",
        "tests/test_qwen3_moe.py::"
        "test_logits_and_every_gradient_equal_qwen3_moe_for_causal_lm",
        title="Qwen3-MoE",
        model_type="qwen3_moe",
        experts_apart=("gate_proj", "up_proj", "down_proj"),
        bench={
            "head_dim": 64,
            "num_experts": 8,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 688,
            "norm_topk_prob": True,
        },
    ),
    Family(
        "mistral",
        "MistralConfig",
        "MistralForCausalLM",
        "long-context/long-context.md",
        "tests/test_mistral_window.py::"
        "test_logits_and_every_gradient_equal_mistral_for_causal_lm",
        title="Mistral",
        model_type="mistral",
        bench={"sliding_window": 64},
    ),
    Family(
        "gemma3",
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        "long-context/long-context.md",
        "tests/test_gemma3_model.py::"
        "test_logits_and_every_gradient_equal_gemma3_for_causal_lm",
        title="Gemma 3",
        model_type="gemma3_text",
        bench={"head_dim": 64, "sliding_window": 64},
    ),
    Family(
        "gpt_oss",
        "GptOssConfig",
        "GptOssForCausalLM",
        "long-context/long-context.md",
        "tests/test_gpt_oss.py::test_tiny_gpt_oss_equals_hf",
        title="gpt-oss",
        model_type="gpt_oss",
        bench={
            "head_dim": 64,
            "sliding_window": 64,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "attn_implementation": "eager",
        },
    ),
    Family(
        "deepseek_v3",
        "DeepseekV3Config",
        "DeepseekV3ForCausalLM",
        "long-context/long-context.md",
        "tests/test_mla.py::"
        "test_logits_and_every_gradient_equal_deepseek_v3_for_causal_lm",
        title="DeepSeek-V3",
        model_type="deepseek_v3",
        experts_apart=("gate_proj", "up_proj", "down_proj"),
        bench={
            "num_key_value_heads": 4,
            "first_k_dense_replace": 1,
            "n_routed_experts": 8,
            "num_experts_per_tok": 2,
            "n_group": 2,
            "topk_group": 1,
            "moe_intermediate_size": 256,
            "q_lora_rank": 128,
            "kv_lora_rank": 64,
            "qk_nope_head_dim": 64,
            "qk_rope_head_dim": 32,
            "v_head_dim": 64,
            "rope_scaling": None,
        },
    ),
    # chapter 7's parallel residual, as whole models (`parallel.py`'s blocks); the
    # dense FFNs of width 4d hold what the shared shape's SwiGLU of 688 holds
    Family(
        "gpt_neox",
        "GPTNeoXConfig",
        "GPTNeoXForCausalLM",
        "modern/modern-block.md",
        "tests/test_parallel_models.py::"
        "test_logits_and_every_gradient_equal_gpt_neox_for_causal_lm",
        title="GPT-NeoX",
        model_type="gpt_neox",
        bench={"intermediate_size": 1024},
    ),
    Family(
        "gptj",
        "GPTJConfig",
        "GPTJForCausalLM",
        "modern/modern-block.md",
        "tests/test_parallel_models.py::"
        "test_logits_and_every_gradient_equal_gptj_for_causal_lm",
        title="GPT-J",
        model_type="gptj",
        bench={"n_inner": 1024, "rotary_dim": 16},
    ),
    Family(
        "cohere",
        "CohereConfig",
        "CohereForCausalLM",
        "modern/modern-block.md",
        "tests/test_parallel_models.py::"
        "test_logits_and_every_gradient_equal_cohere_for_causal_lm",
        title="Cohere",
        model_type="cohere",
        bench={"logit_scale": 0.0625},
    ),
)


def family(name: str) -> Family:
    """The row of a family, by its name."""
    for row in FAMILIES:
        if row.name == name:
            return row
    raise ValueError(f"no model family {name!r}; known: {[f.name for f in FAMILIES]}")


def family_of_config(config_class: str) -> Family:
    """The row of the family a Hugging Face configuration class (by its name) loads
    into."""
    for row in FAMILIES:
        if row.hf_config == config_class:
            return row
    raise ValueError(
        f"no loader here for a {config_class}; the families load "
        f"{[f.hf_config for f in FAMILIES]}"
    )


# --8<-- [end:families]
