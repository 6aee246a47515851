"""Which checkpoints each standalone file loads: one table per era file, by the
`model_type` of a checkpoint's config.json, built on the table of the file before it
(the Mixtral file loads everything the Llama file loads, and more).

The package's own table of every family is `literate.models.checkpoint.MODEL_TYPES`,
read from `literate.models.families.FAMILIES`; these are written out because a
download cannot import that table. tests/test_checkpoint.py holds that together they
cover every family, each with the family's own functions.
"""

from __future__ import annotations

from functools import partial

from literate.models.checkpoint import load_experts_apart
from literate.models.cohere import cohere_from_hf_config, load_hf_cohere
from literate.models.deepseek_v3 import deepseek_v3_from_hf_config, load_hf_deepseek_v3
from literate.models.gemma3 import gemma3_from_hf_config, load_hf_gemma3
from literate.models.gpt2 import gpt2_from_hf_config, load_hf_gpt2
from literate.models.gpt_neox import gpt_neox_from_hf_config, load_hf_gpt_neox
from literate.models.gpt_oss import gpt_oss_from_hf_config, load_hf_gpt_oss
from literate.models.gptj import gptj_from_hf_config, load_hf_gptj
from literate.models.llama import llama_from_hf_config, load_hf_llama
from literate.models.mistral import load_hf_mistral, mistral_from_hf_config
from literate.models.mixtral import load_hf_mixtral, mixtral_from_hf_config
from literate.models.qwen3 import load_hf_qwen3, qwen3_from_hf_config
from literate.models.qwen3_moe import load_hf_qwen3_moe, qwen3_moe_from_hf_config

__all__ = ["GPT2_CHECKPOINTS", "LLAMA_CHECKPOINTS", "MIXTRAL_CHECKPOINTS",
           "LONG_CONTEXT_CHECKPOINTS"]


# --8<-- [start:gpt2]
GPT2_CHECKPOINTS = {  # model_type: (build from config.json, load the weights)
    "gpt2": (partial(gpt2_from_hf_config, inference=True), load_hf_gpt2),
}
# --8<-- [end:gpt2]


# --8<-- [start:llama]
LLAMA_CHECKPOINTS = {  # model_type: (build from config.json, load the weights)
    "llama": (llama_from_hf_config, load_hf_llama),
    "qwen3": (qwen3_from_hf_config, load_hf_qwen3),
    "gpt_neox": (gpt_neox_from_hf_config, load_hf_gpt_neox),
    "gptj": (gptj_from_hf_config, load_hf_gptj),
    "cohere": (cohere_from_hf_config, load_hf_cohere),
}
# --8<-- [end:llama]


# --8<-- [start:mixtral]
MIXTRAL_CHECKPOINTS = {  # the Llama file's, and chapter 9's
    **LLAMA_CHECKPOINTS,
    "mixtral": (mixtral_from_hf_config,  # its files keep each expert apart
                partial(load_experts_apart, load_hf_mixtral, names=("w1", "w3", "w2"),
                        renames=((".block_sparse_moe.", ".mlp."),))),
    "qwen3_moe": (qwen3_moe_from_hf_config,
                  partial(load_experts_apart, load_hf_qwen3_moe,
                          names=("gate_proj", "up_proj", "down_proj"))),
}
# --8<-- [end:mixtral]


# --8<-- [start:long_context]
LONG_CONTEXT_CHECKPOINTS = {  # the Mixtral file's, and chapter 10's
    **MIXTRAL_CHECKPOINTS,
    "mistral": (mistral_from_hf_config, load_hf_mistral),
    "gemma3_text": (gemma3_from_hf_config, load_hf_gemma3),
    "deepseek_v3": (deepseek_v3_from_hf_config,
                    partial(load_experts_apart, load_hf_deepseek_v3,
                            names=("gate_proj", "up_proj", "down_proj"))),
    "gpt_oss": (gpt_oss_from_hf_config, load_hf_gpt_oss),
}
# --8<-- [end:long_context]
