"""Bad calls into the model loaders, the configuration readers, RoPE's widths, YaRN and
the export CLI (issue 27): each row of `BAD_CALLS` is a call a reader could make while
experimenting (a model id where a configuration is meant, `None`, a flag as a string, a
state dict that is not one, an odd rotary width, YaRN's betas swapped), the exception it
must raise (TypeError: the wrong kind of thing; ValueError: the right kind, a wrong value)
and a pattern the message must match, which names the argument the caller passed.

Every loader refuses before it builds or copies anything: after each refused call, every
model a row could have loaded into still holds the weights it had (`test_..._unchanged`).

Then what must keep working: each family built from its config.json dict and from its
transformers configuration, a load of a model's own weights, a YaRN ramp of zero width
(beta_fast == beta_slow), a rotary width of the whole head, the published configurations,
and the export CLI writing a file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import transformers
from torch import nn

from literate.models.deepseek_v3 import (
    check_deepseek_v3_config,
    deepseek_v3_from_hf_config,
    load_hf_deepseek_v3,
    mla_from_hf_config,
)
from literate.models.gemma3 import (
    check_gemma3_config,
    gemma3_from_hf_config,
    load_hf_gemma3,
)
from literate.models.gpt2 import check_gpt2_config, gpt2_from_hf_config, load_hf_gpt2
from literate.models.gpt_oss import (
    check_gpt_oss_config,
    gpt_oss_from_hf_config,
    load_hf_gpt_oss,
)
from literate.models.llama import (
    check_llama_config,
    config_object,
    llama_from_hf_config,
    load_hf_llama,
    load_renamed,
)
from literate.models.mistral import (
    check_mistral_config,
    load_hf_mistral,
    mistral_from_hf_config,
    without_window,
)
from literate.models.mixtral import (
    check_mixtral_config,
    load_hf_mixtral,
    mixtral_from_hf_config,
)
from literate.models.parallel import (
    cohere_block_from_hf_config,
    gptj_block_from_hf_config,
    load_hf_cohere_block,
    load_hf_gptj_block,
    load_hf_neox_block,
    neox_block_from_hf_config,
)
from literate.numbers.published import (
    built_published_model,
    cache_shape,
    parameter_counts,
    published_config,
    published_model,
)
from literate.parts.blocks import gptj_block, neox_block
from literate.parts.mla import MultiHeadLatentAttention
from literate.parts.multi_head import MultiHeadAttention
from literate.parts.positions import RotaryEmbedding
from literate.parts.rope_scaling import (
    LinearScaledRotaryEmbedding,
    YarnRotaryEmbedding,
    yarn_inverse_frequencies,
    yarn_settings,
)
from literate.tools.export import main as export_main

# --- tiny configurations, as config.json dicts --------------------------------------
SHAPE = {
    "vocab_size": 50,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 64,
}
CONFIGS: dict[str, dict] = {
    "gpt2": {
        "model_type": "gpt2",
        "vocab_size": 50,
        "n_positions": 16,
        "n_embd": 32,
        "n_layer": 2,
        "n_head": 4,
        "attn_pdrop": 0.0,
    },
    "llama": SHAPE | {"model_type": "llama", "num_key_value_heads": 2},
    "mixtral": SHAPE
    | {
        "model_type": "mixtral",
        "num_key_value_heads": 2,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
    },
    "mistral": SHAPE
    | {"model_type": "mistral", "num_key_value_heads": 2, "sliding_window": 8},
    "gemma3": SHAPE
    | {
        "model_type": "gemma3_text",
        "num_key_value_heads": 2,
        "head_dim": 8,
        "query_pre_attn_scalar": 8,
        "sliding_window": 4,
        "layer_types": ["sliding_attention", "full_attention"],
    },
    "gpt_oss": SHAPE
    | {
        "model_type": "gpt_oss",
        "intermediate_size": 16,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "sliding_window": 4,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10_000.0},
    },
    "deepseek_v3": SHAPE
    | {
        "model_type": "deepseek_v3",
        "num_key_value_heads": 4,
        "moe_intermediate_size": 16,
        "n_routed_experts": 4,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "n_group": 2,
        "topk_group": 1,
        "first_k_dense_replace": 1,
        "q_lora_rank": 16,
        "kv_lora_rank": 8,
        "qk_nope_head_dim": 8,
        "qk_rope_head_dim": 4,
        "v_head_dim": 8,
        "rope_scaling": None,
    },
}
FAMILY = {  # name: (from_hf_config, check_<name>_config, load_hf_<name>)
    "gpt2": (
        lambda c: gpt2_from_hf_config(c, inference=True),
        check_gpt2_config,
        load_hf_gpt2,
    ),
    "llama": (llama_from_hf_config, check_llama_config, load_hf_llama),
    "mixtral": (mixtral_from_hf_config, check_mixtral_config, load_hf_mixtral),
    "mistral": (mistral_from_hf_config, check_mistral_config, load_hf_mistral),
    "gemma3": (gemma3_from_hf_config, check_gemma3_config, load_hf_gemma3),
    "gpt_oss": (gpt_oss_from_hf_config, check_gpt_oss_config, load_hf_gpt_oss),
    "deepseek_v3": (
        deepseek_v3_from_hf_config,
        check_deepseek_v3_config,
        load_hf_deepseek_v3,
    ),
}
HF_NAME = {  # a weight's name in each family's Hugging Face state dict
    "gpt2": "transformer.wte.weight",
    **{name: "model.embed_tokens.weight" for name in CONFIGS if name != "gpt2"},
}

_MODELS: dict[str, nn.Module] = {}  # built once, loaded into only by refused calls
_SNAPSHOTS: dict[str, dict[str, torch.Tensor]] = {}


def ours(name: str) -> nn.Module:
    """The family's tiny model (built at first use, its weights remembered)."""
    if name not in _MODELS:
        torch.manual_seed(0)
        _MODELS[name] = model = FAMILY[name][0](CONFIGS[name])
        _SNAPSHOTS[name] = {k: v.clone() for k, v in model.state_dict().items()}
    return _MODELS[name]


def with_fields(name: str, **fields: object) -> dict:
    return CONFIGS[name] | fields


def build(name: str, **fields: object) -> Callable[[], object]:
    return lambda: FAMILY[name][0](with_fields(name, **fields))


def load(name: str, state_dict: object, config: object = None) -> Callable[[], object]:
    return lambda: FAMILY[name][2](
        ours(name), state_dict, CONFIGS[name] if config is None else config
    )


NOT_A_CONFIG = (
    r"^config must be a transformers configuration or the dict of a config\.json, "
)
MODEL_ID = (
    NOT_A_CONFIG + r"got the string 'openai/gpt-oss-20b'; "
    r"load it with AutoConfig\.from_pretrained first$"
)
NOT_A_STATE = r"^state_dict must be a Mapping of names to tensors"

BAD_CALLS: list[tuple[str, Callable[[], object], type[Exception], str]] = []
for name, (make, check, loader) in FAMILY.items():
    BAD_CALLS += [
        # a model id, None, a path, a list: refused before anything is built
        (
            f"{name}-model-id",
            lambda m=make: m("openai/gpt-oss-20b"),
            TypeError,
            MODEL_ID,
        ),
        (
            f"{name}-none",
            lambda m=make: m(None),
            TypeError,
            NOT_A_CONFIG + "got NoneType$",
        ),
        (
            f"{name}-path",
            lambda m=make: m(Path("config.json")),
            TypeError,
            NOT_A_CONFIG + r"got \w*Path$",
        ),
        (f"{name}-list", lambda m=make: m([CONFIGS["llama"]]), TypeError, NOT_A_CONFIG),
        # the configuration checks, and the loaders, refuse it the same way
        (
            f"check_{name}-model-id",
            lambda c=check, n=name: c(ours(n), "openai/gpt-oss-20b"),
            TypeError,
            MODEL_ID,
        ),
        (
            f"check_{name}-none",
            lambda c=check, n=name: c(ours(n), None),
            TypeError,
            NOT_A_CONFIG,
        ),
        (
            f"load_{name}-config-model-id",
            load(name, {}, "openai/gpt-oss-20b"),
            TypeError,
            MODEL_ID,
        ),
        # a state dict that is not one
        (
            f"load_{name}-state-none",
            load(name, None),
            TypeError,
            NOT_A_STATE + ".*None",
        ),
        (
            f"load_{name}-state-list",
            load(name, [torch.zeros(3)]),
            TypeError,
            NOT_A_STATE + ".*list",
        ),
        (
            f"load_{name}-state-not-tensor",
            load(name, {HF_NAME[name]: [[0.0] * 32] * 50}),
            TypeError,
            r"^state_dict\[.*\] must be a (floating-point )?tensor",
        ),
        (
            f"load_{name}-ours-none",
            lambda ld=loader, n=name: ld(None, {}, CONFIGS[n]),
            TypeError,
            r"^ours must be a",
        ),
        # a flag as a string: "false" is true
        (
            f"{name}-tie-string",
            build(name, tie_word_embeddings="false"),
            TypeError,
            r"^config tie_word_embeddings must be a bool, got 'false'$",
        ),
        (
            f"{name}-tie-int",
            build(name, tie_word_embeddings=0),
            TypeError,
            r"^config tie_word_embeddings must be a bool, got 0$",
        ),
    ]
for name in CONFIGS:  # a count as a string, a count of 0
    if name == "gpt2":
        continue
    BAD_CALLS += [
        (
            f"{name}-hidden-size-string",
            build(name, hidden_size="32"),
            TypeError,
            r"^config hidden_size must be an int, got str$",
        ),
        (
            f"{name}-layers-zero",
            build(name, num_hidden_layers=0),
            ValueError,
            r"^config num_hidden_layers must be >= 1, got 0$",
        ),
        (
            f"{name}-rope-parameters-string",
            build(name, rope_parameters="yarn"),
            TypeError,
            r"^config rope_parameters must be a dict or None, got 'yarn'$",
        ),
    ]
BAD_CALLS += [
    (
        "gpt2-n-embd-string",
        build("gpt2", n_embd="32"),
        TypeError,
        r"^n_embd must be an int, got str$",
    ),
    (
        "gpt2-cross-attention-string",
        build("gpt2", add_cross_attention="False"),
        TypeError,
        r"^config add_cross_attention must be a bool, got 'False'$",
    ),
    (
        "llama-heads-float",
        build("llama", num_attention_heads=4.0),
        TypeError,
        r"^config num_attention_heads must be an int, got float$",
    ),
    (
        "llama-kv-heads-bool",
        build("llama", num_key_value_heads=True),
        TypeError,
        r"^config num_key_value_heads must be an int, got bool$",
    ),
    (
        "llama-attention-bias-string",
        build("llama", attention_bias="false"),
        TypeError,
        r"^config attention_bias must be a bool, got 'false'$",
    ),
    (
        "llama-attention-string",
        lambda: llama_from_hf_config(CONFIGS["llama"], attention="sliding"),
        TypeError,
        r"^attention must be an attention class, such as MultiHeadAttention, got str$",
    ),
    (
        "gpt2-inference-string",
        lambda: gpt2_from_hf_config(CONFIGS["gpt2"], inference="yes"),
        TypeError,
        r"^inference must be a bool, got str$",
    ),
    (
        "mistral-without-window-model-id",
        lambda: without_window("mistralai/Mistral-7B-v0.1"),
        TypeError,
        NOT_A_CONFIG + r"got the string 'mistralai/Mistral-7B-v0\.1'",
    ),
    (
        "mixtral-experts-string",
        build("mixtral", num_local_experts="4"),
        TypeError,
        r"^config num_local_experts must be an int, got str$",
    ),
    (
        "mistral-window-zero",
        build("mistral", sliding_window=0),
        ValueError,
        r"^config sliding_window must be >= 1, got 0$",
    ),
    (
        "gemma3-bidirectional-string",
        build("gemma3", use_bidirectional_attention="no"),
        TypeError,
        r"^config use_bidirectional_attention must be a bool, got 'no'$",
    ),
    (
        "gemma3-rope-scaling-string",
        build("gemma3", rope_scaling="linear"),
        TypeError,
        r"^config rope_scaling must be a dict or None, got 'linear'$",
    ),
    (
        "gpt_oss-attention-bias-string",
        build("gpt_oss", attention_bias="true"),
        TypeError,
        r"^config attention_bias must be a bool, got 'true'$",
    ),
    (
        "gpt_oss-yarn-factor-zero",
        build(
            "gpt_oss",
            rope_parameters={"rope_type": "yarn", "factor": 0, "rope_theta": 1e4},
        ),
        ValueError,
        r"^rope_parameters\['factor'\] must be finite and > 0, got 0$",
    ),
    (
        "gpt_oss-yarn-betas-swapped",
        build(
            "gpt_oss",
            rope_parameters={
                "rope_type": "yarn",
                "factor": 4.0,
                "beta_fast": 1.0,
                "beta_slow": 32.0,
                "rope_theta": 1e4,
            },
        ),
        ValueError,
        r"^beta_fast=1\.0 must be >= beta_slow=32",
    ),
    (
        "deepseek-norm-topk-int",
        build("deepseek_v3", norm_topk_prob=1),
        TypeError,
        r"^config norm_topk_prob must be a bool, got 1$",
    ),
    (
        "deepseek-rope-interleave-string",
        build("deepseek_v3", rope_interleave="yes"),
        TypeError,
        r"^config rope_interleave must be a bool, got 'yes'$",
    ),
    (
        "deepseek-odd-rope-width",
        build("deepseek_v3", qk_rope_head_dim=5),
        ValueError,
        r"^config qk_rope_head_dim must be even",
    ),
    (
        "deepseek-yarn-factor-negative",
        build(
            "deepseek_v3",
            rope_scaling={"type": "yarn", "factor": -2, "rope_theta": 1e4},
        ),
        ValueError,
        r"^rope_parameters\['factor'\] must be finite and > 0, got -2$",
    ),
    (
        "mla-model-id",
        lambda: mla_from_hf_config("openai/gpt-oss-20b"),
        TypeError,
        MODEL_ID,
    ),
    ("mla-none", lambda: mla_from_hf_config(None), TypeError, NOT_A_CONFIG),
    (
        "mla-odd-rope-width",
        lambda: mla_from_hf_config(with_fields("deepseek_v3", qk_rope_head_dim=3)),
        ValueError,
        r"^config qk_rope_head_dim must be even",
    ),
    (
        "config_object-int",
        lambda: config_object("config", 7),
        TypeError,
        NOT_A_CONFIG + "got int$",
    ),
    (
        "load_renamed-state-none",
        lambda: load_renamed(ours("llama"), None, []),
        TypeError,
        NOT_A_STATE,
    ),
    (
        "load_renamed-ours-none",
        lambda: load_renamed(None, {}, []),
        TypeError,
        r"^ours must be an nn\.Module, got NoneType$",
    ),
]


# --- the parallel families' blocks: a configuration or its config.json only ---------
def gptj_config(**fields) -> transformers.GPTJConfig:
    return transformers.GPTJConfig(
        **{
            "n_embd": 32,
            "n_head": 4,
            "rotary_dim": 4,
            "resid_pdrop": 0.0,
            "attn_pdrop": 0.0,
            "embd_pdrop": 0.0,
        }
        | fields
    )


def neox_config(rotary: float = 0.5, **fields) -> transformers.GPTNeoXConfig:
    return transformers.GPTNeoXConfig(
        **{
            "hidden_size": 32,
            "num_attention_heads": 4,
            "intermediate_size": 64,
            "attention_dropout": 0.0,
            "hidden_dropout": 0.0,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10_000.0,
                "partial_rotary_factor": rotary,
            },
        }
        | fields
    )


def cohere_config(**fields) -> transformers.CohereConfig:
    return transformers.CohereConfig(
        **{
            "hidden_size": 32,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "intermediate_size": 64,
        }
        | fields
    )


PARALLEL_ID = (
    r"^config must be a transformers configuration or the dict of a config\.json, got "
)
PARALLEL = {  # name: (config, from_hf_config, loader)
    "gptj": (gptj_config, gptj_block_from_hf_config, load_hf_gptj_block),
    "neox": (neox_config, neox_block_from_hf_config, load_hf_neox_block),
    "cohere": (cohere_config, cohere_block_from_hf_config, load_hf_cohere_block),
}
_BLOCKS: dict[str, nn.Module] = {}


def block(name: str) -> nn.Module:
    if name not in _BLOCKS:
        torch.manual_seed(0)
        _BLOCKS[name] = b = PARALLEL[name][1](PARALLEL[name][0]())
        _SNAPSHOTS[f"block-{name}"] = {k: v.clone() for k, v in b.state_dict().items()}
    return _BLOCKS[name]


for name, (config, make, loader) in PARALLEL.items():
    BAD_CALLS += [
        (
            f"{name}-block-model-id",
            lambda m=make: m("EleutherAI/gpt-j-6b"),
            TypeError,
            PARALLEL_ID
            + r"the string 'EleutherAI/gpt-j-6b'; load it with AutoConfig\.from_pretrained",
        ),
        (
            f"{name}-block-none",
            lambda m=make: m(None),
            TypeError,
            PARALLEL_ID + "NoneType$",
        ),
        (
            f"{name}-block-items",
            lambda m=make, c=config: m(list(c().to_dict().items())),
            TypeError,
            PARALLEL_ID + "list$",
        ),
        (
            f"load_{name}-block-state-none",
            lambda ld=loader, c=config, n=name: ld(block(n), None, c()),
            TypeError,
            NOT_A_STATE,
        ),
        (
            f"load_{name}-block-ours-none",
            lambda ld=loader, c=config: ld(None, {}, c()),
            TypeError,
            r"^ours must be a ParallelBlock or PreNormBlock, got NoneType$",
        ),
        (
            f"load_{name}-block-config-string",
            lambda ld=loader, n=name: ld(block(n), {}, "EleutherAI/gpt-j-6b"),
            TypeError,
            PARALLEL_ID,
        ),
    ]
BAD_CALLS += [
    (
        "gptj-rotary-dim-wider-than-head",
        lambda: gptj_block_from_hf_config(gptj_config(rotary_dim=12)),
        ValueError,
        r"^config rotary_dim=12 must be even and <= the head width n_embd / n_head = 8$",
    ),
    (
        "gptj-rotary-dim-odd",
        lambda: gptj_block_from_hf_config(gptj_config(rotary_dim=5)),
        ValueError,
        r"^config rotary_dim=5 must be even and <= the head width",
    ),
    (
        "neox-partial-rotary-above-one",
        lambda: neox_block_from_hf_config(neox_config(1.5)),
        ValueError,
        r"^config partial_rotary_factor=1\.5 must be <= 1",
    ),
    (
        "neox-partial-rotary-zero",
        lambda: neox_block_from_hf_config(neox_config(0.0)),
        ValueError,
        r"^config partial_rotary_factor must be finite and > 0, got 0\.0$",
    ),
]

# --- RoPE's widths and YaRN: the name the caller passed ------------------------------
YARN = {"base": 10_000.0, "factor": 4.0, "original_context": 64}
BAD_CALLS += [
    (
        "rope-odd-d-head",
        lambda: RotaryEmbedding(7),
        ValueError,
        r"^d_head must be even: coordinates rotate in pairs; got 7$",
    ),
    (
        "rope-rotary-dim-wider",
        lambda: RotaryEmbedding(8, rotary_dim=12),
        ValueError,
        r"^rotary_dim=12 must be <= d_head=8$",
    ),
    (
        "rope-rotary-dim-odd",
        lambda: RotaryEmbedding(8, rotary_dim=5),
        ValueError,
        r"^rotary_dim must be even",
    ),
    (
        "linear-rope-odd-d-head",
        lambda: LinearScaledRotaryEmbedding(7, factor=2.0),
        ValueError,
        r"^d_head must be even",
    ),
    (
        "linear-rope-factor-zero",
        lambda: LinearScaledRotaryEmbedding(8, factor=0),
        ValueError,
        r"^factor must be finite and > 0, got 0$",
    ),
    (
        "mha-rope-odd-d-head",
        lambda: MultiHeadAttention(14, 2, rope=True),
        ValueError,
        r"^rope=True needs an even d_head",
    ),
    (
        "mla-odd-qk-rope-head-dim",
        lambda: MultiHeadLatentAttention(
            32,
            4,
            q_lora_rank=None,
            kv_lora_rank=8,
            qk_nope_head_dim=8,
            qk_rope_head_dim=5,
            v_head_dim=8,
        ),
        ValueError,
        r"^qk_rope_head_dim must be even",
    ),
    (
        "neox-block-rotary-pct-above-one",
        lambda: neox_block(32, 4, 64, rotary_pct=1.5),
        ValueError,
        r"^rotary_pct=1\.5 must be <= 1 .*d_head=8 coordinates, not 12$",
    ),
    (
        "neox-block-rotary-pct-odd-width",
        lambda: neox_block(40, 4, 64, rotary_pct=0.5),
        ValueError,
        r"^rotary_pct=0\.5 must be <= 1 and turn an even number >= 2 of d_head=10",
    ),
    (
        "neox-block-rotary-pct-nothing-turns",
        lambda: neox_block(32, 4, 64, rotary_pct=0.1),
        ValueError,
        r"^rotary_pct=0\.1 must be .*, not 0$",
    ),
    (
        "neox-block-rotary-pct-string",
        lambda: neox_block(32, 4, 64, rotary_pct="0.25"),
        TypeError,
        r"^rotary_pct must be a real number, got str$",
    ),
    (
        "gptj-block-rotary-dim-wider",
        lambda: gptj_block(32, 4, 64, rotary_dim=12),
        ValueError,
        r"^rotary_dim=12 must be <= d_head=8$",
    ),
    (
        "yarn-frequencies-odd-width",
        lambda: yarn_inverse_frequencies(7, **YARN),
        ValueError,
        r"^d_rope must be even: coordinates rotate in pairs; got 7$",
    ),
    (
        "yarn-odd-d-head",
        lambda: YarnRotaryEmbedding(7, **YARN),
        ValueError,
        r"^d_head must be even",
    ),
    (
        "yarn-betas-swapped",
        lambda: YarnRotaryEmbedding(8, **YARN, beta_fast=1.0, beta_slow=32.0),
        ValueError,
        r"^beta_fast=1\.0 must be >= beta_slow=32\.0: the ramp",
    ),
    (
        "yarn-factor-zero",
        lambda: YarnRotaryEmbedding(8, **(YARN | {"factor": 0})),
        ValueError,
        r"^factor must be finite and > 0, got 0$",
    ),
    (
        "yarn-factor-negative",
        lambda: YarnRotaryEmbedding(8, **(YARN | {"factor": -4.0})),
        ValueError,
        r"^factor must be finite and > 0, got -4\.0$",
    ),
    (
        "yarn-beta-fast-zero",
        lambda: YarnRotaryEmbedding(8, **YARN, beta_fast=0),
        ValueError,
        r"^beta_fast must be finite and > 0, got 0$",
    ),
    (
        "yarn-truncate-string",
        lambda: YarnRotaryEmbedding(8, **YARN, truncate="False"),
        TypeError,
        r"^truncate must be a bool, got str$",
    ),
    (
        "yarn-settings-factor-zero",
        lambda: yarn_settings({"rope_type": "yarn", "factor": 0}, 4096),
        ValueError,
        r"^rope_parameters\['factor'\] must be finite and > 0, got 0$",
    ),
    (
        "yarn-settings-factor-negative",
        lambda: yarn_settings({"rope_type": "yarn", "factor": -2.0}, 4096),
        ValueError,
        r"^rope_parameters\['factor'\] must be finite and > 0, got -2\.0$",
    ),
    (
        "yarn-settings-original-zero",
        lambda: yarn_settings({"original_max_position_embeddings": 0}, 4096),
        ValueError,
        r"^rope_parameters\['original_max_position_embeddings'\] must be >= 1, got 0$",
    ),
    (
        "yarn-settings-not-a-dict",
        lambda: yarn_settings("yarn", 4096),
        TypeError,
        r"^parameters must be a dict \(rope_parameters\), got str$",
    ),
    (
        "yarn-settings-max-positions-string",
        lambda: yarn_settings({"factor": 4.0}, "4096"),
        TypeError,
        r"^max_positions must be an int, got str$",
    ),
]

# --- the published configurations, by name ------------------------------------------
BAD_CALLS += [
    (
        "published_config-none",
        lambda: published_config(None),
        TypeError,
        r"^name must be a str, one of \[",
    ),
    (
        "published_config-unknown",
        lambda: published_config("GPT-5"),
        ValueError,
        r"^no published configuration named 'GPT-5'",
    ),
    (
        "published_model-config-object",
        lambda: published_model(transformers.GPT2Config()),
        TypeError,
        r"^name must be a str, .*got GPT2Config$",
    ),
    (
        "parameter_counts-list",
        lambda: parameter_counts(["GPT-2 small"]),
        TypeError,
        r"^name must be a str, .*got list$",
    ),
    (
        "cache_shape-list",
        lambda: cache_shape(["Llama 3 8B"]),
        TypeError,
        r"^name must be a str, .*got list$",
    ),
    (
        "built_published_model-list",
        lambda: built_published_model(["DeepSeek-V3"]),
        TypeError,
        r"^name must be a str, .*got list$",
    ),
]


def test_there_are_enough_rows():
    assert len(BAD_CALLS) >= 110, len(BAD_CALLS)
    ids = [row[0] for row in BAD_CALLS]
    assert len(ids) == len(set(ids))


def assert_unchanged() -> None:
    """Every model and block a refused call could have loaded into holds its weights."""
    built = {**_MODELS, **{f"block-{k}": v for k, v in _BLOCKS.items()}}
    for name, model in built.items():
        for key, value in model.state_dict().items():
            assert torch.equal(value, _SNAPSHOTS[name][key]), (name, key)


@pytest.mark.parametrize(
    "call, error, pattern",
    [row[1:] for row in BAD_CALLS],
    ids=[r[0] for r in BAD_CALLS],
)
def test_a_bad_call_is_refused_naming_the_argument_and_nothing_changes(
    call, error, pattern
):
    with pytest.raises(error) as caught:
        call()
    assert type(caught.value) is error  # not a subclass raised from deeper down
    assert re.search(pattern, str(caught.value)), str(caught.value)
    assert_unchanged()


# --- a failed load copies nothing -------------------------------------------------------
def hf_state(name: str) -> dict[str, torch.Tensor]:
    """A complete Hugging Face state dict for the family's tiny model."""
    if name == "gpt2":
        config = transformers.GPT2Config(**CONFIGS["gpt2"])
        return transformers.GPT2LMHeadModel(config).state_dict()
    config = transformers.LlamaConfig(**CONFIGS["llama"])
    return transformers.LlamaForCausalLM(config).state_dict()


@pytest.mark.parametrize("name", ["gpt2", "llama"])
@pytest.mark.parametrize(
    "spoil, error, pattern",
    [
        (lambda t: t.long(), TypeError, r"(must be a floating-point tensor|float)"),
        (lambda t: t[:-1], ValueError, r"is \([\d, ]+\), ours"),
        (lambda t: t.to("meta"), TypeError, r"(with values|hold values)"),
    ],
    ids=["integer", "misshapen", "meta"],
)
def test_a_load_refused_at_its_last_weight_leaves_every_weight_as_it_was(
    name, spoil, error, pattern
):
    state = dict(hf_state(name))
    last = [k for k in state if not k.endswith(("attn.bias", "lm_head.weight"))][-1]
    state[last] = spoil(state[last])
    with pytest.raises(error, match=pattern):
        FAMILY[name][2](ours(name), state, CONFIGS[name])
    assert_unchanged()


# --- what must keep working ------------------------------------------------------------
@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_family_loads_its_own_weights_from_a_dict_and_a_configuration(name):
    make, check, loader = FAMILY[name]
    config_class = {
        "gpt2": "GPT2Config",
        "llama": "LlamaConfig",
        "mixtral": "MixtralConfig",
        "mistral": "MistralConfig",
        "gemma3": "Gemma3TextConfig",
        "gpt_oss": "GptOssConfig",
        "deepseek_v3": "DeepseekV3Config",
    }[name]
    fields = {k: v for k, v in CONFIGS[name].items() if k != "model_type"}
    configuration = getattr(transformers, config_class)(**fields)
    torch.manual_seed(1)
    from_dict, from_object = make(CONFIGS[name]), make(configuration)
    check(from_dict, configuration)
    check(from_object, CONFIGS[name])
    assert sum(p.numel() for p in from_dict.parameters()) == sum(
        p.numel() for p in from_object.parameters()
    )


def test_a_model_loads_its_own_weights_by_hugging_face_names():
    source, target = hf_state("llama"), FAMILY["llama"][0](CONFIGS["llama"])
    load_hf_llama(target, source, CONFIGS["llama"])
    assert torch.equal(
        target.token_embedding.weight, source["model.embed_tokens.weight"]
    )


def test_the_flags_that_are_bools_load():
    for name in ("llama", "gemma3", "deepseek_v3"):
        for tied in (True, False):
            model = build(name, tie_word_embeddings=tied)()
            assert (model.lm_head.weight is model.token_embedding.weight) is tied


def test_yarn_edge_cases_still_work():
    equal = YarnRotaryEmbedding(8, **YARN, beta_fast=4.0, beta_slow=4.0)  # a step
    cos, _ = equal.tables(16)
    assert torch.isfinite(cos).all()
    settings = yarn_settings({"rope_type": "yarn", "factor": None}, 4096)
    assert settings["factor"] == 1.0  # no factor: max_positions / original
    assert yarn_settings({"factor": 40, "beta_fast": None}, 4096)["beta_fast"] == 32.0
    assert RotaryEmbedding(8, rotary_dim=8).rotary_dim == 8  # the whole head
    assert RotaryEmbedding(8, rotary_dim=2).rotary_dim == 2
    assert neox_block(32, 4, 64, rotary_pct=1.0).attn.rope.rotary_dim == 8
    assert neox_block(32, 4, 64, rotary_pct=0.25).attn.rope.rotary_dim == 2


def test_the_published_configurations_still_build():
    assert published_config("GPT-2 small").n_layer == 12
    assert cache_shape("Llama 3 8B").n_layers == 32
    assert parameter_counts("GPT-2 small")[0] > 10**8
    assert built_published_model("GPT-2 small") is built_published_model("GPT-2 small")


# --- the export CLI: one line and exit code 2, no traceback -----------------------------
@pytest.mark.parametrize("where", ["missing", "directory"])
def test_export_to_a_missing_directory_or_onto_a_directory_is_one_line(
    where, tmp_path, capsys
):
    target = tmp_path / "nowhere" / "gpt2.py" if where == "missing" else tmp_path
    with pytest.raises(SystemExit) as caught:
        export_main(["gpt2", "-o", str(target)])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert re.match(r"^python -m literate\.tools\.export: error: -o ", last), last
    assert ("is a directory" if where == "directory" else "no directory") in last
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_export_still_writes_a_file(tmp_path):
    out = tmp_path / "attention.py"
    assert export_main(["attention", "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8").startswith('"""')
