"""The parallel-residual families of Hugging Face transformers, block by block
(chapter 7): GPT-J, GPT-NeoX and Cohere.

Each family's block is one of our builders (`literate.parts.blocks.gptj_block`, `neox_block`,
`cohere_block`); what separates it from the Hugging Face layer is names, and for
GPT-NeoX the layout of its packed projection:

* `*_block_from_hf_config`: our block in the shape of a transformers configuration
  (`GPTJConfig`, `GPTNeoXConfig`, `CohereConfig`; a model id is refused).
  Refused rather than silently changed: what the builders do not implement (dropout,
  RoPE scaling, other activations, QK-norm in Cohere, GPT-NeoX without biases).
  GPT-NeoX with `use_parallel_residual=False` is a `PreNormBlock` of the same parts.
* `neox_unpack_qkv` / `neox_pack_qkv`: GPT-NeoX's `query_key_value` computes q, k and v
  in one matmul, but its rows are grouped by head, `[H, 3, d_head]` (head 0's q, k, v,
  then head 1's ...), not stacked `q; k; v` as in `heads.pack_qkv`.
* `load_hf_*_block(ours, state_dict, config)`: one HF layer's state dict, by name, all
  or nothing, after the configuration is checked against ours (shapes alone cannot
  tell 4 heads from 8, and GPT-NeoX's unpacking depends on the head count).

Shapes: d model width, H heads, d_head head width.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from literate.models.llama import load_renamed, tensor_mapping
from literate.parts.blocks import (
    ParallelBlock,
    PreNormBlock,
    cohere_block,
    gptj_block,
    neox_block,
)
from literate.parts.checks import float_tensor, positive_float, positive_int
from literate.parts.ffn import gelu_tanh

__all__ = [
    "hf_config_field",
    "gptj_block_from_hf_config",
    "neox_block_from_hf_config",
    "cohere_block_from_hf_config",
    "block_settings",
    "check_block_config",
    "neox_unpack_qkv",
    "neox_pack_qkv",
    "HF_GPTJ_BLOCK_NAMES",
    "HF_NEOX_BLOCK_NAMES",
    "HF_COHERE_BLOCK_NAMES",
    "load_hf_gptj_block",
    "load_hf_neox_block",
    "load_hf_cohere_block",
]


# --8<-- [start:from_hf_config]
def hf_config_field(config: object, name: str) -> object:
    """`config.name` of a transformers configuration (a PretrainedConfig: a model id,
    a dict or None is refused); refused if it has none, or if a flag is not a bool."""
    if not any(c.__name__.lower() == "pretrainedconfig" for c in type(config).__mro__):
        given = (f"the string {config!r}; load it with AutoConfig.from_pretrained "
                 "first" if isinstance(config, str) else type(config).__name__)
        raise TypeError(f"config must be a transformers configuration (GPTJConfig, "
                        f"GPTNeoXConfig, CohereConfig), got {given}")
    if not hasattr(config, name):
        raise ValueError(f"config {type(config).__name__} has no {name!r} field")
    value = getattr(config, name)
    if name.startswith("use_") and not isinstance(value, bool):
        raise TypeError(f"config {name} must be a bool, got {value!r}")
    return value


def refuse_unsupported(config: object, needed: Mapping[str, object]) -> None:
    """Refuse a configuration whose fields ask for what our builder does not do."""
    for name, value in needed.items():
        if hf_config_field(config, name) != value:
            raise ValueError(f"config {name}={hf_config_field(config, name)!r} is not "
                             f"supported (ours: {value!r})")


def plain_rope(config: object) -> dict:
    """The config's RoPE parameters, refusing any scaling we do not implement."""
    parameters = dict(hf_config_field(config, "rope_parameters") or {})
    if parameters.get("rope_type", "default") != "default":
        raise ValueError(f"RoPE type {parameters['rope_type']!r} is not implemented "
                         "(chapter 7 turns the plain frequencies)")
    return parameters


def gptj_block_from_hf_config(config: object) -> ParallelBlock:
    """Our `gptj_block` in the shape of a `GPTJConfig`. GPT-J's base is fixed at 10000
    in its code. rotary_dim=None is refused: HF then builds a table as wide as the
    model, not a head."""
    refuse_unsupported(config, {"activation_function": "gelu_new", "resid_pdrop": 0.0,
                                "attn_pdrop": 0.0})
    rotary_dim = hf_config_field(config, "rotary_dim")
    if rotary_dim is None:
        raise ValueError("config rotary_dim=None is not supported: give the rotated "
                         "width of a head")
    d, heads = hf_config_field(config, "n_embd"), hf_config_field(config, "n_head")
    if positive_int("config rotary_dim", rotary_dim) % 2 or rotary_dim > positive_int(
            "config n_embd", d) // positive_int("config n_head", heads):
        raise ValueError(f"config rotary_dim={rotary_dim} must be even and <= the head "
                         f"width n_embd / n_head = {d // heads}")
    d_ff = hf_config_field(config, "n_inner") or 4 * d  # HF: None means 4 d
    return gptj_block(d, heads, d_ff,
                      rotary_dim=rotary_dim,
                      eps=hf_config_field(config, "layer_norm_epsilon"))


# hidden_act names of GPT-NeoX configs -> the functions they compute (exactly)
NEOX_ACTIVATIONS = {"gelu": F.gelu, "gelu_new": gelu_tanh,
                    "gelu_pytorch_tanh": gelu_tanh}


def neox_block_from_hf_config(config: object) -> ParallelBlock | PreNormBlock:
    """Our `neox_block` in the shape of a `GPTNeoXConfig`; with
    use_parallel_residual=False, a `PreNormBlock` of the very same parts (the one line
    that differs: the FFN reads the stream after the attention has added to it)."""
    refuse_unsupported(config, {"attention_bias": True, "attention_dropout": 0.0,
                                "hidden_dropout": 0.0})
    act = hf_config_field(config, "hidden_act")
    if act not in NEOX_ACTIVATIONS:
        raise ValueError(f"config hidden_act={act!r} is not supported (ours: "
                         f"{sorted(NEOX_ACTIVATIONS)}; gelu_fast rounds sqrt(2/pi) to "
                         "10 digits, so it is not the tanh form to float64)")
    rope = plain_rope(config)
    pct = positive_float("config partial_rotary_factor",
                         rope.get("partial_rotary_factor", 1.0))
    if pct > 1:
        raise ValueError(f"config partial_rotary_factor={pct} must be <= 1: the share "
                         "of each head's coordinates that turn")
    block = neox_block(hf_config_field(config, "hidden_size"),
                       hf_config_field(config, "num_attention_heads"),
                       hf_config_field(config, "intermediate_size"),
                       rotary_pct=pct,
                       rope_base=rope["rope_theta"],
                       eps=hf_config_field(config, "layer_norm_eps"),
                       activation=NEOX_ACTIVATIONS[act])
    if hf_config_field(config, "use_parallel_residual"):
        return block
    return PreNormBlock(block.attn, block.ffn, block.attn_norm, block.ffn_norm)


def cohere_block_from_hf_config(config: object) -> ParallelBlock:
    """Our `cohere_block` in the shape of a `CohereConfig` (QK-norm refused)."""
    refuse_unsupported(config, {"hidden_act": "silu", "attention_bias": False,
                                "use_qk_norm": False, "attention_dropout": 0.0})
    d, heads = hf_config_field(config, "hidden_size"), hf_config_field(
        config, "num_attention_heads")
    head_dim = getattr(config, "head_dim", None)
    if head_dim not in (None, d // heads):
        raise ValueError(f"config head_dim={head_dim} is not hidden_size / heads = "
                         f"{d // heads}: not supported by cohere_block")
    return cohere_block(d, heads, hf_config_field(config, "num_key_value_heads"),
                        hf_config_field(config, "intermediate_size"),
                        rope_base=plain_rope(config)["rope_theta"],
                        eps=hf_config_field(config, "layer_norm_eps"))
# --8<-- [end:from_hf_config]


# --8<-- [start:check_block_config]
def function_key(f: object) -> object:
    """A function, or a functools.partial's (function, args, keywords): two copies of
    one partial (a deep copy of a block makes one) compare equal."""
    if isinstance(f, partial):
        return (function_key(f.func), f.args, tuple(sorted(f.keywords.items())))
    return f


def block_settings(block: nn.Module) -> dict[str, object]:
    """What a parallel or pre-norm block computes, read from its parts: residual
    topology, widths, heads, RoPE, biases, activation, norms."""
    if not isinstance(block, (ParallelBlock, PreNormBlock)):
        raise TypeError(f"block must be a ParallelBlock or PreNormBlock, "
                        f"got {type(block).__name__}")
    attn, ffn, rope = block.attn, block.ffn, block.attn.rope
    norms = [block.attn_norm] + ([] if block.ffn_norm is None else [block.ffn_norm])
    return {
        "block": type(block).__name__, "d_model": block.d_model,
        "n_heads": attn.n_heads, "n_kv_heads": attn.n_kv_heads, "d_head": attn.d_head,
        "rope": None if rope is None else (rope.rotary_dim, rope.base, rope.layout),
        "attention_bias": attn.q_proj.bias is not None, "ffn": type(ffn).__name__,
        "d_ff": ffn.d_ff, "activation": function_key(ffn.activation),
        "ffn_bias": ffn.down_proj.bias is not None,
        "norms": [(type(n).__name__, n.eps, getattr(n, "bias", None) is not None)
                  for n in norms],
    }


def check_block_config(ours: nn.Module, theirs: nn.Module) -> None:
    """Refuse to copy weights into `ours` unless it computes what `theirs` (the block
    built from the configuration) does, naming the first setting that differs."""
    if not isinstance(ours, (ParallelBlock, PreNormBlock)):
        raise TypeError(f"ours must be a ParallelBlock or PreNormBlock, "
                        f"got {type(ours).__name__}")
    mine, expected = block_settings(ours), block_settings(theirs)
    for name, value in expected.items():
        same = mine[name] == value
        if name == "rope" and not same and None not in (mine[name], value):
            same = (mine[name][0], mine[name][2]) == (value[0], value[2]) \
                and math.isclose(mine[name][1], value[1])
        if not same:
            raise ValueError(f"ours has {name}={mine[name]!r}, the configuration's "
                             f"block {name}={value!r}")
# --8<-- [end:check_block_config]


# --8<-- [start:neox_qkv]
def neox_unpack_qkv(packed: Tensor, n_heads: int) -> tuple[Tensor, Tensor, Tensor]:
    """GPT-NeoX's `query_key_value` weight [3 H d_head, d] (or bias [3 H d_head]) ->
    the q, k and v projections' [H d_head, d] (or [H d_head]).

    HF views the packed output as [B, T, H, 3 d_head] and chunks each head's slice in
    three: row h * 3 d_head + j * d_head + i is coordinate i of head h's q (j = 0),
    k (j = 1) or v (j = 2). Splitting the rows in three thirds instead would mix heads.
    """
    n_heads = positive_int("n_heads", n_heads)
    if float_tensor("packed", packed).ndim not in (1, 2) \
            or packed.shape[0] % (3 * n_heads):
        raise ValueError(f"packed must be [3 H d_head, d] or [3 H d_head] with "
                         f"H={n_heads}, got {tuple(packed.shape)}")
    d_head = packed.shape[0] // (3 * n_heads)
    grouped = packed.reshape(n_heads, 3, d_head, *packed.shape[1:])  # [H, 3, d_head, d]
    q, k, v = (grouped[:, j].reshape(n_heads * d_head, *packed.shape[1:])
               for j in range(3))
    return q, k, v


def neox_pack_qkv(q: Tensor, k: Tensor, v: Tensor, n_heads: int) -> Tensor:
    """The inverse of `neox_unpack_qkv`: q, k, v [H d_head, d] (or [H d_head]) -> the
    packed [3 H d_head, d] of GPT-NeoX, head by head."""
    n_heads = positive_int("n_heads", n_heads)
    parts = [float_tensor(n, t) for n, t in (("q", q), ("k", k), ("v", v))]
    if len({p.shape for p in parts}) != 1 or q.ndim not in (1, 2) \
            or q.shape[0] % n_heads:
        raise ValueError(f"q, k and v must share one shape [H d_head, d] or [H d_head] "
                         f"with H={n_heads}, got {[tuple(p.shape) for p in parts]}")
    rest = q.shape[1:]
    heads = [p.reshape(n_heads, 1, -1, *rest) for p in parts]  # [H, 1, d_head, d]
    return torch.cat(heads, dim=1).reshape(3 * q.shape[0], *rest)
# --8<-- [end:neox_qkv]


# --8<-- [start:load_hf_blocks]
HF_GPTJ_BLOCK_NAMES = [  # (Hugging Face's GPTJBlock name pattern, ours)
    (r"^ln_1\.", "attn_norm."),
    (r"^attn\.out_proj\.", "attn.o_proj."),  # q_proj, k_proj, v_proj: the same names
    (r"^mlp\.fc_in\.", "ffn.up_proj."),
    (r"^mlp\.fc_out\.", "ffn.down_proj."),
]
HF_NEOX_BLOCK_NAMES = [  # GPTNeoXLayer, once query_key_value is unpacked
    (r"^input_layernorm\.", "attn_norm."),
    (r"^post_attention_layernorm\.", "ffn_norm."),
    (r"^attention\.dense\.", "attn.o_proj."),
    (r"^attention\.", "attn."),
    (r"^mlp\.dense_h_to_4h\.", "ffn.up_proj."),
    (r"^mlp\.dense_4h_to_h\.", "ffn.down_proj."),
]
HF_COHERE_BLOCK_NAMES = [  # CohereDecoderLayer (q_proj ... down_proj: the same names)
    (r"^input_layernorm\.", "attn_norm."),
    (r"^self_attn\.", "attn."),
    (r"^mlp\.", "ffn."),
]
# buffers older GPT-NeoX checkpoints store in each layer (the causal mask, RoPE's
# frequencies): HF ignores them on loading, so do we
NEOX_IGNORED = re.compile(r"^attention\.(bias|masked_bias|rotary_emb\.inv_freq)$")


def load_hf_gptj_block(ours: ParallelBlock, state_dict: Mapping[str, Tensor],
                       config: object) -> ParallelBlock:
    """Load one `GPTJBlock`'s state dict (keys as `GPTJBlock.state_dict()` names them)
    into `ours`, after `check_block_config` against the configuration."""
    check_block_config(ours, gptj_block_from_hf_config(config))
    return load_renamed(ours, state_dict, HF_GPTJ_BLOCK_NAMES)


def load_hf_neox_block(ours: ParallelBlock | PreNormBlock,
                       state_dict: Mapping[str, Tensor],
                       config: object) -> ParallelBlock | PreNormBlock:
    """Load one `GPTNeoXLayer`'s state dict into `ours`, its packed query_key_value
    unpacked head by head (`neox_unpack_qkv`), after `check_block_config`."""
    check_block_config(ours, neox_block_from_hf_config(config))
    state = {k: v for k, v in tensor_mapping("state_dict", state_dict).items()
             if not NEOX_IGNORED.match(k)}
    for kind in ("weight", "bias"):
        packed = state.pop(f"attention.query_key_value.{kind}", None)
        if packed is not None:
            for name, part in zip("qkv", neox_unpack_qkv(packed, ours.attn.n_heads)):
                state[f"attention.{name}_proj.{kind}"] = part
    return load_renamed(ours, state, HF_NEOX_BLOCK_NAMES)


def load_hf_cohere_block(ours: ParallelBlock, state_dict: Mapping[str, Tensor],
                         config: object) -> ParallelBlock:
    """Load one `CohereDecoderLayer`'s state dict into `ours`, after
    `check_block_config`."""
    check_block_config(ours, cohere_block_from_hf_config(config))
    return load_renamed(ours, state_dict, HF_COHERE_BLOCK_NAMES)
# --8<-- [end:load_hf_blocks]
