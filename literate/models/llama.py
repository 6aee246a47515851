"""A Llama-style language model around the modern block (chapter 7).

GPT-2's model (chapter 5) with three changes: no position embedding (RoPE sits inside
every attention layer), a final RMSNorm, and an output projection of its own (untied:
Llama 2 and 3 at 7-8B and up; `lm_head=None` ties it to the embedding, as Llama 3.2's
small models and GPT-2 do). Checking the ids and generating are GPT-2's, unchanged:
they need only `check`, `run`, `vocab_size` and `context`.

Weights load from Hugging Face's `LlamaForCausalLM` by name, after the configuration
is checked: `llama_from_hf_config`, `check_llama_config`, `load_hf_llama`.

Shapes: B batch, T tokens, V vocabulary, d model width.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial

import torch
from torch import Tensor, nn

from literate.models.decoder import DecoderLanguageModel
from literate.parts.blocks import llama_block, same_width
from literate.parts.checks import boolean, checked_entry, positive_float, positive_int
from literate.parts.multi_head import MultiHeadAttention
from literate.parts.norms import RMSNorm
from literate.parts.positions import Llama3RotaryEmbedding

__all__ = [
    "LlamaLanguageModel",
    "llama_model",
    "llama_init_",
    "LLAMA_DEFAULTS",
    "config_object",
    "config_field",
    "llama_field",
    "llama_rope_base",
    "LLAMA_UNSUPPORTED",
    "check_llama_supported",
    "llama_from_hf_config",
    "check_llama_config",
    "refuse_mismatches",
    "HF_LLAMA_NAMES",
    "tensor_mapping",
    "load_renamed",
    "tied_head_state",
    "load_hf_llama",
]


# --8<-- [start:llama_language_model]
class LlamaLanguageModel(DecoderLanguageModel):
    """ids [B, T] -> token embedding -> blocks (RoPE inside) -> final norm -> logits
    [B, T, V]. `lm_head` None: the output projection is the embedding (tied).
    Checking, running and generating are `DecoderLanguageModel`'s (chapter 5)."""

    def __init__(self, token_embedding: nn.Embedding, blocks: Sequence[nn.Module],
                 final_norm: nn.Module, lm_head: nn.Linear | None, *,
                 context: int) -> None:
        super().__init__()
        if not isinstance(token_embedding, nn.Embedding):
            raise TypeError(f"token_embedding must be an nn.Embedding, "
                            f"got {type(token_embedding).__name__}")
        blocks = list(blocks)
        if not blocks:
            raise ValueError("blocks must hold at least one block")
        self.d_model = same_width(final_norm=final_norm,
                                  **{f"blocks[{i}]": b for i, b in enumerate(blocks)})
        head_shape = (token_embedding.num_embeddings, self.d_model)
        if token_embedding.embedding_dim != self.d_model or (
                lm_head is not None and (not isinstance(lm_head, nn.Linear)
                                         or tuple(lm_head.weight.shape) != head_shape)):
            raise ValueError(f"token_embedding and lm_head must map between "
                             f"{head_shape[0]} tokens and width {self.d_model}")
        self.token_embedding = token_embedding  # [V, d], HF's embed_tokens
        self.blocks = nn.ModuleList(blocks)
        self.final_norm = final_norm  # HF's model.norm
        self.lm_head = lm_head if lm_head is not None else nn.Linear(
            self.d_model, head_shape[0], bias=False)
        if lm_head is None:
            self.lm_head.weight = self.token_embedding.weight  # tied: one tensor
        self.max_positions = positive_int("context", context)

    @property
    def context(self) -> int:
        """The longest input `generate` feeds back (the configured maximum)."""
        return self.max_positions

    def embed(self, ids: Tensor, *, offset: int = 0,
              positions: Tensor | None = None) -> Tensor:
        """ids [B, T] -> [B, T, d]: no position is added, RoPE turns q and k inside
        each attention (the arguments are GPT-2's `embed`'s, for chapter 8)."""
        return self.token_embedding(ids)
# --8<-- [end:llama_language_model]


# --8<-- [start:llama_model]
def llama_init_(model: LlamaLanguageModel, *, std: float = 0.02) -> LlamaLanguageModel:
    """Hugging Face's Llama initialisation, in place: every linear map and the
    embedding ~ N(0, std^2) (initializer_range), norms' gains 1."""
    std = positive_float("std", std)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                module.weight.normal_(0.0, std)
    return model


def llama_model(vocab_size: int, context: int, d_model: int, n_heads: int,
                n_kv_heads: int, n_layers: int, d_ff: int, *,
                d_head: int | None = None, rope_base: float = 10_000.0,
                eps: float = 1e-5, tied: bool = False, std: float = 0.02,
                attention: Callable[..., MultiHeadAttention] = MultiHeadAttention,
                ) -> LlamaLanguageModel:
    """A Llama of any size, initialised as Hugging Face does (weights ~ N(0, std^2)).
    `tied`: the output projection is the token embedding (Llama 3.2 1B and 3B).
    `attention`: every block's attention class (`llama_block`; chapter 10's window)."""
    vocab_size = positive_int("vocab_size", vocab_size)
    context, n_layers = positive_int("context", context), positive_int("n_layers",
                                                                       n_layers)
    tied, std = boolean("tied", tied), positive_float("std", std)
    if not callable(attention):
        raise TypeError(f"attention must be an attention class, such as "
                        f"MultiHeadAttention, got {type(attention).__name__}")
    block = partial(llama_block, d_model, n_heads, n_kv_heads, d_ff, d_head=d_head,
                    rope_base=rope_base, eps=eps, attention=attention)
    blocks = [block()]  # llama_block checks a block's arguments
    with checked_entry():  # the other layers and the model's parts trust them
        blocks += [block() for _ in range(n_layers - 1)]
        model = LlamaLanguageModel(
            nn.Embedding(vocab_size, d_model),
            blocks,
            RMSNorm(d_model, eps=eps),
            None if tied else nn.Linear(d_model, vocab_size, bias=False),
            context=context,
        )
        return llama_init_(model, std=std)
# --8<-- [end:llama_model]


# --8<-- [start:llama_from_hf_config]
# transformers' LlamaConfig defaults, for what a config.json leaves out
LLAMA_DEFAULTS = {
    "num_key_value_heads": None, "hidden_act": "silu", "max_position_embeddings": 2048,
    "initializer_range": 0.02, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
    "attention_bias": False, "mlp_bias": False, "head_dim": None,
    "rope_theta": 10_000.0, "rope_scaling": None, "rope_parameters": None,
    "pretraining_tp": 1, "attention_dropout": 0.0,
    "sliding_window": None,  # Mistral's, refused: windows are chapter 10's
}


def config_object(name: str, value: object) -> object:
    """`value` if it is a transformers configuration (a PreTrainedConfig) or the dict
    of a config.json. Anything else (a model id, None) is refused before anything is
    built: read as a configuration, it would give every field its default."""
    if isinstance(value, Mapping) or any(
            c.__name__.lower() == "pretrainedconfig" for c in type(value).__mro__):
        return value
    given = type(value).__name__
    if isinstance(value, str):
        given = (f"the string {value!r}; load it with AutoConfig.from_pretrained "
                 "first")
    raise TypeError(f"{name} must be a transformers configuration or the dict of a "
                    f"config.json, got {given}")


def check_model_type(config: object, *kinds: str) -> None:
    """Refuse a configuration of another family by its `model_type` (a config.json
    without one is taken as the family's): read as this family's, a Qwen3's or a
    Qwen2's would build a model without their QK-norm or biases."""
    kind = (config.get("model_type") if isinstance(config, Mapping)
            else getattr(config, "model_type", None))
    if kind is not None and kind not in kinds:
        wanted = " or ".join(map(repr, kinds))
        raise ValueError(f"config model_type={kind!r} is not {wanted}: load it with "
                         "its own family's loader")


CONFIG_COUNTS = {  # fields that count something: an int >= 1 where given
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings",
    "sliding_window", "num_local_experts", "num_experts_per_tok",
    "moe_intermediate_size", "n_routed_experts", "n_shared_experts", "n_group",
    "topk_group", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
    "qk_rope_head_dim", "v_head_dim",
}


def config_field(config: object, name: str, defaults: Mapping[str, object]) -> object:
    """`config.name` of a transformers configuration, or `config[name]` of its
    config.json (a dict), with `defaults[name]` where it has none; a field that is
    neither there nor in `defaults` is a ValueError naming it, and one whose default
    is a bool must be a bool (the string "false" is true)."""
    if isinstance(config_object("config", config), Mapping) and name in config:
        value = config[name]
    elif not isinstance(config, Mapping) and hasattr(config, name):
        value = getattr(config, name)
    elif name not in defaults:
        raise ValueError(f"config has no {name!r} (and no default for it)")
    else:
        value = defaults[name]
    if isinstance(defaults.get(name), bool) and not isinstance(value, bool):
        raise TypeError(f"config {name} must be a bool, got {value!r}")
    if name in CONFIG_COUNTS and value is not None:
        positive_int(f"config {name}", value)
    if name in ("rope_parameters", "rope_scaling") and not isinstance(
            value, (Mapping, type(None))):
        raise TypeError(f"config {name} must be a dict or None, got {value!r}")
    return value


def llama_field(config: object, name: str) -> object:
    """`config.name` of a LlamaConfig, or `config[name]` of its config.json."""
    return config_field(config, name, LLAMA_DEFAULTS)


def llama_rope_parameters(config: object) -> dict:
    """A Llama config's RoPE settings as one dict ({"rope_type", "rope_theta", ...}):
    transformers 5 keeps them in `rope_parameters`; older config.json files have
    `rope_theta` and `rope_scaling` (whose kind was "type" before it was
    "rope_type"). A kind other than "default" and Llama 3.1's "llama3" is refused."""
    scaling = dict(llama_field(config, "rope_scaling") or {})
    if "type" in scaling:
        scaling.setdefault("rope_type", scaling.pop("type"))
    parameters = {"rope_type": "default",
                  "rope_theta": llama_field(config, "rope_theta"), **scaling,
                  **(llama_field(config, "rope_parameters") or {})}
    if parameters["rope_type"] not in ("default", "llama3"):
        raise ValueError(f"RoPE scaling {parameters['rope_type']!r} is not implemented "
                         "(Llama turns the plain frequencies, or Llama 3.1's)")
    return parameters


def llama_rope_base(config: object) -> float:
    """The RoPE base of a Llama config (`llama_rope_parameters`)."""
    return float(llama_rope_parameters(config)["rope_theta"])


def llama3_settings(config: object) -> dict | None:
    """`Llama3RotaryEmbedding`'s options for a config whose rope_type is "llama3"
    (Llama 3.1, 3.2), else None."""
    parameters = llama_rope_parameters(config)
    if parameters["rope_type"] != "llama3":
        return None
    names = {"factor": "factor", "low_freq_factor": "low_freq_factor",
             "high_freq_factor": "high_freq_factor",
             "original_context": "original_max_position_embeddings"}
    missing = sorted(theirs for theirs in names.values() if theirs not in parameters)
    if missing:
        raise ValueError(f"config's llama3 RoPE scaling lacks {missing}")
    return {ours: parameters[theirs] for ours, theirs in names.items()}


LLAMA_UNSUPPORTED = {  # a field, and the one value our Llama has for it
    "attention_bias": False, "mlp_bias": False, "hidden_act": "silu",
    "pretraining_tp": 1, "attention_dropout": 0.0, "sliding_window": None,
}


def check_llama_supported(config: object) -> None:
    """Refuse, rather than change, what our Llama does not do: biases, another
    activation, tensor-parallel slicing, attention dropout, a sliding window (Mistral
    7B's `sliding_window`: chapter 10) (RoPE scaling: `llama_rope_base`)."""
    for name, needed in LLAMA_UNSUPPORTED.items():
        if llama_field(config, name) != needed:
            raise ValueError(f"config {name}={llama_field(config, name)!r} is not "
                             f"supported (ours: {needed!r})")


def llama_from_hf_config(
        config: object, *,
        attention: Callable[..., MultiHeadAttention] = MultiHeadAttention,
) -> LlamaLanguageModel:
    """Our model in the shape of a Hugging Face Llama configuration (a LlamaConfig or
    its config.json dict). Refused rather than changed: `check_llama_supported`.
    `attention`: `llama_model`'s (chapter 10's sliding window)."""
    check_model_type(config_object("config", config), "llama",
                     "mistral")  # Mistral without a window is a Llama
    check_llama_supported(config)
    d = llama_field(config, "hidden_size")
    heads = llama_field(config, "num_attention_heads")
    kv = llama_field(config, "num_key_value_heads") or heads
    model = llama_model(llama_field(config, "vocab_size"),
                       llama_field(config, "max_position_embeddings"), d, heads, kv,
                       llama_field(config, "num_hidden_layers"),
                       llama_field(config, "intermediate_size"),
                       d_head=llama_field(config, "head_dim"),
                       rope_base=llama_rope_base(config),
                       eps=llama_field(config, "rms_norm_eps"),
                       tied=bool(llama_field(config, "tie_word_embeddings")),
                       std=llama_field(config, "initializer_range"),
                       attention=attention)
    longer = llama3_settings(config)
    if longer is not None:  # Llama 3.1's frequencies in every block's RoPE
        for block in model.blocks:
            rope = block.attn.rope
            block.attn.rope = Llama3RotaryEmbedding(rope.d_head, base=rope.base,
                                                    **longer)
    return model
# --8<-- [end:llama_from_hf_config]


# --8<-- [start:check_llama_config]
def refuse_mismatches(pairs: Sequence[tuple[str, object, str, object]]) -> None:
    """A ValueError naming both sides for the first (our name, ours, their field,
    theirs) whose two values differ (floats: beyond rounding)."""
    for name, mine, field, theirs in pairs:
        close = isinstance(mine, float) and math.isclose(mine, theirs)
        if mine != theirs and not close:
            raise ValueError(f"ours has {name}={mine!r}, theirs {field}={theirs!r}")


def check_llama_config(ours: LlamaLanguageModel, config: object) -> None:
    """Refuse to copy weights between models of different shape or function, naming
    both sides."""
    if not isinstance(ours, LlamaLanguageModel):
        raise TypeError(f"ours must be a LlamaLanguageModel, got {type(ours).__name__}")
    check_llama_supported(config)
    block = ours.blocks[0]
    d = llama_field(config, "hidden_size")
    heads = llama_field(config, "num_attention_heads")
    pairs = [
        ("vocab_size", ours.vocab_size, "vocab_size",
         llama_field(config, "vocab_size")),
        ("d_model", ours.d_model, "hidden_size", d),
        ("n_layers", len(ours.blocks), "num_hidden_layers",
         llama_field(config, "num_hidden_layers")),
        ("n_heads", block.attn.n_heads, "num_attention_heads", heads),
        ("n_kv_heads", block.attn.n_kv_heads, "num_key_value_heads",
         llama_field(config, "num_key_value_heads") or heads),
        ("d_head", block.attn.d_head, "head_dim",
         llama_field(config, "head_dim") or d // heads),
        ("d_ff", block.ffn.d_ff, "intermediate_size",
         llama_field(config, "intermediate_size")),
        ("eps", block.attn_norm.eps, "rms_norm_eps",
         llama_field(config, "rms_norm_eps")),
        ("rope_base", block.attn.rope.base, "rope_theta", llama_rope_base(config)),
        ("llama3 RoPE", getattr(block.attn.rope, "llama3", None), "rope_parameters",
         llama3_settings(config)),
        ("tied", ours.lm_head.weight is ours.token_embedding.weight,
         "tie_word_embeddings", bool(llama_field(config, "tie_word_embeddings"))),
    ]
    refuse_mismatches(pairs)


HF_LLAMA_NAMES = [  # (Hugging Face's name pattern, ours)
    (r"^model\.embed_tokens\.", "token_embedding."),
    (r"^model\.norm\.", "final_norm."),
    (r"^model\.layers\.(\d+)\.self_attn\.", r"blocks.\1.attn."),
    (r"^model\.layers\.(\d+)\.mlp\.", r"blocks.\1.ffn."),
    (r"^model\.layers\.(\d+)\.input_layernorm\.", r"blocks.\1.attn_norm."),
    # in Llama, the norm after the attention's residual is the one the FFN reads
    (r"^model\.layers\.(\d+)\.post_attention_layernorm\.", r"blocks.\1.ffn_norm."),
]
# --8<-- [end:check_llama_config]


# --8<-- [start:load_renamed]
def tensor_mapping(name: str, value: object) -> Mapping[str, Tensor]:
    """`value` if it maps names to tensors: a state dict, or safetensors' load_file."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a Mapping of names to tensors (a model's "
                        f"state_dict()), got {type(value).__name__}")
    for key, tensor in value.items():
        if not isinstance(key, str) or not isinstance(tensor, Tensor):
            raise TypeError(f"{name}[{key!r}] must be a tensor under a str name, got "
                            f"{type(tensor).__name__}")
    return value


@torch.no_grad()
def load_renamed(ours: nn.Module, state_dict: Mapping[str, Tensor],
                 names: Sequence[tuple[str, str]]) -> nn.Module:
    """Load `state_dict` into `ours` after renaming its keys (each (pattern,
    replacement) applied in turn, `re.sub`), all or nothing: a weight missing, left
    over, of another shape, not floating-point or without values (meta) is refused
    before anything is copied."""
    if not isinstance(ours, nn.Module):
        raise TypeError(f"ours must be an nn.Module, got {type(ours).__name__}")
    renamed = {}
    for key, value in tensor_mapping("state_dict", state_dict).items():
        for pattern, replacement in names:
            key = re.sub(pattern, replacement, key)
        renamed[key] = value
    mine = ours.state_dict()
    missing, unused = sorted(set(mine) - set(renamed)), sorted(set(renamed) - set(mine))
    if missing or unused:
        raise ValueError(f"state_dict lacks {missing[:6]} and has no place in ours for "
                         f"{unused[:6]}")
    for key, value in renamed.items():
        if mine[key].shape != value.shape:
            raise ValueError(f"{key} is {tuple(value.shape)}, "
                             f"ours {tuple(mine[key].shape)}")
        if mine[key].is_floating_point() and not value.is_floating_point() \
                or value.is_meta and not mine[key].is_meta:
            raise TypeError(f"{key} is a {value.dtype} tensor on {value.device}, "
                            f"ours {mine[key].dtype}: weights must be floating point "
                            "and hold values")
    ours.load_state_dict(renamed)
    return ours
# --8<-- [end:load_renamed]


# --8<-- [start:load_hf_llama]


def tied_head_state(ours: LlamaLanguageModel, state_dict: Mapping[str, Tensor], *,
                    embedding: str = "model.embed_tokens.weight",
                    head: str = "lm_head.weight") -> dict[str, Tensor]:
    """A Hugging Face state dict for `ours`: if our output projection is the embedding
    (tied), HF's `head` must equal its `embedding` (or be absent) and is then the
    embedding under both names (Llama's names by default)."""
    state = dict(tensor_mapping("state_dict", state_dict))
    if ours.lm_head.weight is ours.token_embedding.weight:  # tied: one tensor, one name
        given, table = state.pop(head, None), state.get(embedding)
        if given is not None and table is not None and not torch.equal(given, table):
            raise ValueError(f"{head} differs from {embedding.split('.')[-2]}: ours is "
                             "tied")
        if table is not None:
            state[head] = table
    return state


def load_hf_llama(ours: LlamaLanguageModel, state_dict: Mapping[str, Tensor],
                  config: object) -> LlamaLanguageModel:
    """Load a `LlamaForCausalLM` state dict (or a checkpoint's safetensors) by name,
    after `check_llama_config`."""
    check_llama_config(ours, config)
    return load_renamed(ours, tied_head_state(ours, state_dict), HF_LLAMA_NAMES)
# --8<-- [end:load_hf_llama]
