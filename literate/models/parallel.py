"""The parallel-residual families of Hugging Face transformers (chapter 7): GPT-J,
GPT-NeoX and Cohere, block by block, and what their whole models share.

Each family's block is one of our builders (`literate.parts.blocks.gptj_block`, `neox_block`,
`cohere_block`); what separates it from the Hugging Face layer is names, and for
GPT-NeoX the layout of its packed projection:

* `*_block_from_hf_config`: our block in the shape of a transformers configuration
  (`GPTJConfig`, `GPTNeoXConfig`, `CohereConfig`) or of its config.json (a dict, read
  with transformers' defaults for what it leaves out; a model id is refused).
  Refused rather than silently changed: what the builders do not implement (dropout,
  RoPE scaling, other activations, QK-norm in Cohere, GPT-NeoX without biases).
  GPT-NeoX with `use_parallel_residual=False` is a `PreNormBlock` of the same parts.
* `neox_unpack_qkv` / `neox_pack_qkv`: GPT-NeoX's `query_key_value` computes q, k and v
  in one matmul, but its rows are grouped by head, `[H, 3, d_head]` (head 0's q, k, v,
  then head 1's ...), not stacked `q; k; v` as in `heads.pack_qkv`.
* `load_hf_*_block(ours, state_dict, config)`: one HF layer's state dict, by name, all
  or nothing, after the configuration is checked against ours (shapes alone cannot
  tell 4 heads from 8, and GPT-NeoX's unpacking depends on the head count).
* `parallel_model`, `check_parallel_model`, `in_layers`: what the three whole models
  (`literate.models.gpt_neox`, `gptj`, `cohere`) share around these blocks.

Shapes: d model width, H heads, d_head head width.
"""

# Over 450 lines on purpose: the three families' blocks, their configuration readers
# and loaders, and the whole-model frame they share, read together in chapter 7's one
# section on the parallel residual; split, each module would import the other two.

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from literate.models.llama import (
    LlamaLanguageModel,
    config_field,
    load_renamed,
    tensor_mapping,
)
from literate.parts.blocks import (
    ParallelBlock,
    PreNormBlock,
    cohere_block,
    gptj_block,
    neox_block,
)
from literate.parts.checks import (
    boolean,
    checked_entry,
    float_tensor,
    positive_float,
    positive_int,
)
from literate.parts.ffn import gelu_tanh

__all__ = [
    "GPTJ_DEFAULTS",
    "GPT_NEOX_DEFAULTS",
    "COHERE_DEFAULTS",
    "gptj_field",
    "gpt_neox_field",
    "cohere_field",
    "refuse_unsupported",
    "plain_rope",
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
    "neox_unpacked",
    "load_hf_gptj_block",
    "load_hf_neox_block",
    "load_hf_cohere_block",
    "hf_init_",
    "parallel_model",
    "model_settings",
    "check_parallel_model",
    "in_layers",
]


# --8<-- [start:from_hf_config]
# transformers' defaults of each configuration, for what a config.json leaves out; the
# RoPE fields of the files older transformers wrote (before `rope_parameters`) too
GPTJ_DEFAULTS = {
    "vocab_size": 50400, "n_positions": 2048, "n_embd": 4096, "n_layer": 28,
    "n_head": 16, "rotary_dim": 64, "n_inner": None, "activation_function": "gelu_new",
    "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
    "layer_norm_epsilon": 1e-5, "initializer_range": 0.02,
    "tie_word_embeddings": False,
}
GPT_NEOX_DEFAULTS = {
    "vocab_size": 50432, "hidden_size": 6144, "num_hidden_layers": 44,
    "num_attention_heads": 64, "intermediate_size": 24576, "hidden_act": "gelu",
    "attention_dropout": 0.0, "hidden_dropout": 0.0, "max_position_embeddings": 2048,
    "initializer_range": 0.02, "layer_norm_eps": 1e-5, "tie_word_embeddings": False,
    "use_parallel_residual": True, "attention_bias": True, "rope_parameters": None,
    "rope_scaling": None, "rotary_pct": 0.25, "rotary_emb_base": 10_000.0,
}
COHERE_DEFAULTS = {
    "vocab_size": 256000, "hidden_size": 8192, "intermediate_size": 22528,
    "logit_scale": 0.0625, "num_hidden_layers": 40, "num_attention_heads": 64,
    "num_key_value_heads": None, "head_dim": None, "hidden_act": "silu",
    "max_position_embeddings": 8192, "initializer_range": 0.02, "layer_norm_eps": 1e-5,
    "tie_word_embeddings": True, "attention_bias": False, "attention_dropout": 0.0,
    "use_qk_norm": False, "rope_parameters": None, "rope_scaling": None,
    "rope_theta": 500_000.0,
}


def gptj_field(config: object, name: str) -> object:
    """`config.name` of a GPTJConfig, or `config[name]` of its config.json."""
    return config_field(config, name, GPTJ_DEFAULTS)


def gpt_neox_field(config: object, name: str) -> object:
    """`config.name` of a GPTNeoXConfig, or `config[name]` of its config.json."""
    return config_field(config, name, GPT_NEOX_DEFAULTS)


def cohere_field(config: object, name: str) -> object:
    """`config.name` of a CohereConfig, or `config[name]` of its config.json."""
    return config_field(config, name, COHERE_DEFAULTS)


def refuse_unsupported(config: object, needed: Mapping[str, object],
                       defaults: Mapping[str, object]) -> None:
    """Refuse a configuration whose fields ask for what our builder does not do."""
    for name, value in needed.items():
        given = config_field(config, name, defaults)
        if given != value:
            raise ValueError(f"config {name}={given!r} is not supported (ours: "
                             f"{value!r})")


def plain_rope(config: object, defaults: Mapping[str, object]) -> dict:
    """The config's RoPE parameters (`rope_parameters`: empty in an older config.json),
    refusing any scaling we do not implement, there or in an older `rope_scaling`."""
    parameters = dict(config_field(config, "rope_parameters", defaults) or {})
    scaling = config_field(config, "rope_scaling", defaults) or {}
    for kind in (parameters.get("rope_type", "default"),
                 scaling.get("rope_type", scaling.get("type", "default"))):
        if kind != "default":
            raise ValueError(f"RoPE type {kind!r} is not implemented (chapter 7 turns "
                             "the plain frequencies)")
    return parameters


def gptj_block_from_hf_config(config: object) -> ParallelBlock:
    """Our `gptj_block` in the shape of a `GPTJConfig`. GPT-J's base is fixed at 10000
    in its code. rotary_dim=None is refused: HF then builds a table as wide as the
    model, not a head."""
    refuse_unsupported(config, {"activation_function": "gelu_new", "resid_pdrop": 0.0,
                                "attn_pdrop": 0.0}, GPTJ_DEFAULTS)
    rotary_dim = gptj_field(config, "rotary_dim")
    if rotary_dim is None:
        raise ValueError("config rotary_dim=None is not supported: give the rotated "
                         "width of a head")
    d, heads = gptj_field(config, "n_embd"), gptj_field(config, "n_head")
    if positive_int("config rotary_dim", rotary_dim) % 2 or rotary_dim > positive_int(
            "config n_embd", d) // positive_int("config n_head", heads):
        raise ValueError(f"config rotary_dim={rotary_dim} must be even and <= the head "
                         f"width n_embd / n_head = {d // heads}")
    d_ff = gptj_field(config, "n_inner") or 4 * d  # HF: None means 4 d
    return gptj_block(d, heads, d_ff,
                      rotary_dim=rotary_dim,
                      eps=gptj_field(config, "layer_norm_epsilon"))


# hidden_act names of GPT-NeoX configs -> the functions they compute (exactly)
NEOX_ACTIVATIONS = {"gelu": F.gelu, "gelu_new": gelu_tanh,
                    "gelu_pytorch_tanh": gelu_tanh}


def neox_block_from_hf_config(config: object) -> ParallelBlock | PreNormBlock:
    """Our `neox_block` in the shape of a `GPTNeoXConfig`; with
    use_parallel_residual=False, a `PreNormBlock` of the very same parts (the one line
    that differs: the FFN reads the stream after the attention has added to it). An
    older config.json's `rotary_pct` and `rotary_emb_base` are read as transformers
    reads them: where `rope_parameters` has no share and no base."""
    refuse_unsupported(config, {"attention_bias": True, "attention_dropout": 0.0,
                                "hidden_dropout": 0.0}, GPT_NEOX_DEFAULTS)
    act = gpt_neox_field(config, "hidden_act")
    if act not in NEOX_ACTIVATIONS:
        raise ValueError(f"config hidden_act={act!r} is not supported (ours: "
                         f"{sorted(NEOX_ACTIVATIONS)}; gelu_fast rounds sqrt(2/pi) to "
                         "10 digits, so it is not the tanh form to float64)")
    rope = plain_rope(config, GPT_NEOX_DEFAULTS)
    pct = positive_float("config partial_rotary_factor", rope.get(
        "partial_rotary_factor", gpt_neox_field(config, "rotary_pct")))
    if pct > 1:
        raise ValueError(f"config partial_rotary_factor={pct} must be <= 1: the share "
                         "of each head's coordinates that turn")
    block = neox_block(gpt_neox_field(config, "hidden_size"),
                       gpt_neox_field(config, "num_attention_heads"),
                       gpt_neox_field(config, "intermediate_size"),
                       rotary_pct=pct,
                       rope_base=rope.get("rope_theta",
                                          gpt_neox_field(config, "rotary_emb_base")),
                       eps=gpt_neox_field(config, "layer_norm_eps"),
                       activation=NEOX_ACTIVATIONS[act])
    if gpt_neox_field(config, "use_parallel_residual"):
        return block
    return PreNormBlock(block.attn, block.ffn, block.attn_norm, block.ffn_norm)


def cohere_block_from_hf_config(config: object) -> ParallelBlock:
    """Our `cohere_block` in the shape of a `CohereConfig` (QK-norm refused); an older
    config.json's base is its `rope_theta`."""
    refuse_unsupported(config, {"hidden_act": "silu", "attention_bias": False,
                                "use_qk_norm": False, "attention_dropout": 0.0},
                       COHERE_DEFAULTS)
    d = cohere_field(config, "hidden_size")
    heads = cohere_field(config, "num_attention_heads")
    head_dim = cohere_field(config, "head_dim")
    if head_dim not in (None, d // heads):
        raise ValueError(f"config head_dim={head_dim} is not hidden_size / heads = "
                         f"{d // heads}: not supported by cohere_block")
    rope = plain_rope(config, COHERE_DEFAULTS)
    return cohere_block(d, heads, cohere_field(config, "num_key_value_heads") or heads,
                        cohere_field(config, "intermediate_size"),
                        rope_base=rope.get("rope_theta",
                                           cohere_field(config, "rope_theta")),
                        eps=cohere_field(config, "layer_norm_eps"))
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
# frequencies), alone or under a model's prefix: HF ignores them on loading, so do we
NEOX_IGNORED = re.compile(
    r"(^|\.)(attention\.(bias|masked_bias)|rotary_emb\.inv_freq)$")
NEOX_PACKED = re.compile(r"^(?P<layer>(.*\.)?)attention\.query_key_value\."
                         r"(?P<kind>weight|bias)$")


def neox_unpacked(state_dict: Mapping[str, Tensor], n_heads: int) -> dict[str, Tensor]:
    """A GPT-NeoX state dict (one layer's, or a whole model's) with every packed
    `attention.query_key_value` weight and bias split into `attention.q_proj`,
    `k_proj` and `v_proj` head by head (`neox_unpack_qkv`), and without the buffers
    HF ignores (`NEOX_IGNORED`)."""
    state = {}
    for key, value in tensor_mapping("state_dict", state_dict).items():
        packed = NEOX_PACKED.match(key)
        if packed is None:
            if not NEOX_IGNORED.search(key):
                state[key] = value
            continue
        for name, part in zip("qkv", neox_unpack_qkv(value, n_heads)):
            state[f"{packed['layer']}attention.{name}_proj.{packed['kind']}"] = part
    return state


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
    unpacked head by head (`neox_unpacked`), after `check_block_config`."""
    check_block_config(ours, neox_block_from_hf_config(config))
    return load_renamed(ours, neox_unpacked(state_dict, ours.attn.n_heads),
                        HF_NEOX_BLOCK_NAMES)


def load_hf_cohere_block(ours: ParallelBlock, state_dict: Mapping[str, Tensor],
                         config: object) -> ParallelBlock:
    """Load one `CohereDecoderLayer`'s state dict into `ours`, after
    `check_block_config`."""
    check_block_config(ours, cohere_block_from_hf_config(config))
    return load_renamed(ours, state_dict, HF_COHERE_BLOCK_NAMES)
# --8<-- [end:load_hf_blocks]


# --8<-- [start:parallel_model]
def hf_init_(model: LlamaLanguageModel, *, std: float) -> LlamaLanguageModel:
    """Hugging Face's initialisation, in place: every linear map and the embedding
    ~ N(0, std^2) (initializer_range), their biases 0; norms as built (gains 1)."""
    std = positive_float("std", std)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                module.weight.normal_(0.0, std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                module.bias.zero_()
    return model


def parallel_model(vocab_size: int, context: int, blocks: Sequence[nn.Module],
                   final_norm: nn.Module, lm_head: nn.Linear, *, tied: bool,
                   std: float) -> LlamaLanguageModel:
    """A whole model around GPT-J's, GPT-NeoX's or Cohere's blocks: chapter 7's
    `LlamaLanguageModel` (token embedding, the blocks with RoPE inside each attention,
    `final_norm`, `lm_head`), so chapter 5's and chapter 8's `generate` run it. The
    output projection is the family's own (GPT-J's has a bias, Cohere's scales its
    logits); `tied`: its weight is the embedding's, one tensor (a bias stays its own).
    Hugging Face-initialised (`hf_init_`)."""
    blocks, tied = list(blocks), boolean("tied", tied)
    if not blocks:
        raise ValueError("blocks must hold at least one block")
    d_model = blocks[0].d_model
    with checked_entry():  # the blocks' builders checked their arguments
        model = LlamaLanguageModel(nn.Embedding(positive_int("vocab_size", vocab_size),
                                                d_model),
                                   blocks, final_norm, lm_head, context=context)
    if tied:
        model.lm_head.weight = model.token_embedding.weight
    return hf_init_(model, std=std)


def model_settings(model: nn.Module) -> dict[str, object]:
    """What a model of `parallel_model` computes around its blocks, read from its
    parts: vocabulary, width, layers, the final norm, the output projection (its
    class, bias and logit scale) and whether it is the embedding."""
    if not isinstance(model, LlamaLanguageModel):
        raise TypeError(f"ours must be a LlamaLanguageModel (gptj_from_hf_config, "
                        f"gpt_neox_from_hf_config, cohere_from_hf_config), got "
                        f"{type(model).__name__}")
    norm, head = model.final_norm, model.lm_head
    return {
        "vocab_size": model.vocab_size, "d_model": model.d_model,
        "n_layers": len(model.blocks),
        "final_norm": (type(norm).__name__, getattr(norm, "eps", None),
                       getattr(norm, "bias", None) is not None),
        "lm_head": (type(head).__name__, head.bias is not None,
                    getattr(head, "scale", None)),
        "tied": head.weight is model.token_embedding.weight,
    }


def check_parallel_model(ours: nn.Module, theirs: nn.Module) -> None:
    """Refuse to copy weights into `ours` unless it computes what `theirs` (the model
    built from the configuration, on the meta device) does: the first setting of the
    model (`model_settings`), then of a block (`check_block_config`), that differs
    is named."""
    mine, expected = model_settings(ours), model_settings(theirs)
    for name, value in expected.items():
        if mine[name] != value:
            raise ValueError(f"ours has {name}={mine[name]!r}, the configuration's "
                             f"model {name}={value!r}")
    for i, (block, reference) in enumerate(zip(ours.blocks, theirs.blocks)):
        try:
            check_block_config(block, reference)
        except ValueError as error:
            raise ValueError(f"blocks[{i}]: {error}") from None


def in_layers(layers: str, names: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    r"""A layer's (pattern, replacement) names under the prefix of a model's layers (a
    pattern, such as `gpt_neox\.layers\.`): `^input_layernorm\.` -> `attn_norm.`
    becomes `^gpt_neox\.layers\.(\d+)\.input_layernorm\.` -> `blocks.\1.attn_norm.`;
    what a layer holds under no pattern goes to its block under the same name."""
    renamed = [(rf"^{layers}(\d+)\.{pattern.removeprefix('^')}", rf"blocks.\1.{new}")
               for pattern, new in names]
    return renamed + [(rf"^{layers}(\d+)\.", r"blocks.\1.")]
# --8<-- [end:parallel_model]
