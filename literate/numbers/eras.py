"""Chapter 11's table of the eras: each row a model built by this site's own builders
(the published model from its configuration, on the meta device, or chapter 7's
published block), each cell read from the built object's classes and attributes, and
each row naming the test that proves the model (or its block) equal to its production
twin.

`describe_model(model)` reads the cells of `ERA_COLUMNS`: the block's topology and norm
(chapter 7's `block_norms`, `norm_name`), QK-norm, the positions (learned, sinusoidal,
RoPE with its layout, rotated fraction, bases and any stretching of the positions), the
attention (MHA, GQA, MQA, latent; cross-attention), the windows over the layers, the
sinks, the FFN (dense, gated, or a mixture of experts with its top-k, its experts'
activation and a shared expert), its width as a multiple of d, the router, the biases
and a tied output. `ERA_ROWS` lists the eras in the order of their publication, with
the chapter that builds each and the test that proves it; tests/test_eras.py checks
every cell against the published description and that every row's test exists.

`block_diff(older, newer)` is the diff view: the lines of the block builders' `return`
statements (the block each builder assembles) that change from one era to the next.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
from torch import nn

from literate.models.families import family
from literate.models.gpt2 import GPTLanguageModel
from literate.models.gpt_oss import gpt_oss_block
from literate.models.llama import LlamaLanguageModel
from literate.models.mixtral import mixtral_block
from literate.models.transformer2017 import EncoderDecoder
from literate.numbers.catalog import (
    PUBLISHED_BLOCKS,
    QK_NORM,
    activation_name,
    block_norms,
    norm_name,
    number,
    published_block,
)
from literate.numbers.published import published_model
from literate.parts.blocks import (
    ParallelBlock,
    PostNormDecoderLayer,
    gemma3_block,
    gpt2_block,
    llama_block,
    olmo2_block,
    qwen3_block,
)
from literate.parts.ffn import DenseFFN, GatedFFN
from literate.parts.mla import MultiHeadLatentAttention
from literate.parts.moe import GptOssExperts, MoEFFN
from literate.parts.multi_head import MultiHeadAttention
from literate.parts.norms import RMSNorm
from literate.parts.rope_scaling import LinearScaledRotaryEmbedding, YarnRotaryEmbedding
from literate.parts.routers import DeepSeekV3Router
from literate.parts.sinks import SinkAttention
from literate.parts.window import layer_window

__all__ = ["ERA_COLUMNS", "EraRow", "ERA_ROWS", "describe_model", "era_table",
           "BUILDERS", "DIFF_PAIRS", "block_diff"]


# --8<-- [start:attention_cells]
def attention_cell(attn: nn.Module) -> str:
    if isinstance(attn, MultiHeadLatentAttention):
        return (f"latent, {attn.n_heads} heads (rank {attn.kv_lora_rank}, RoPE part "
                f"{attn.qk_rope_head_dim})")
    if not isinstance(attn, MultiHeadAttention):
        raise TypeError(f"not an attention of ours: {type(attn).__name__}")
    kind = ("MHA" if attn.n_kv_heads == attn.n_heads
            else "MQA" if attn.n_kv_heads == 1 else "GQA")
    heads = (f"{attn.n_heads} heads" if kind == "MHA"
             else f"{attn.n_heads} heads, {attn.n_kv_heads} key/value")
    return f"{kind}, {heads}"


def qk_norm_cell(attn: nn.Module) -> str:
    if isinstance(attn, MultiHeadLatentAttention):  # norms before the up-projections
        return "none (RMSNorm on the q and kv latents)"
    return QK_NORM[attn.qk_norm]


def rope_scaling(rope: nn.Module) -> str:
    """How a RoPE layer stretches its positions: '' (not at all), 'YaRN x40'
    (chapter 10), or 'positions / 8' (linear interpolation, Gemma 3's global layers)."""
    if isinstance(rope, YarnRotaryEmbedding):
        return f"YaRN x{number(rope.yarn['factor'])}"
    if isinstance(rope, LinearScaledRotaryEmbedding):
        return f"positions / {number(rope.factor)}"
    return ""


def positions_cell(model: nn.Module) -> str:
    if isinstance(model, GPTLanguageModel):
        return "learned, added to the embeddings"
    ropes = [block.attn.rope for block in model.blocks]
    if any(rope is None for rope in ropes):
        raise ValueError("a layer without RoPE in a RoPE model")
    first = ropes[0]
    layout = "rotate-half" if first.layout == "half" else "interleaved"
    part = ("" if first.rotary_dim == first.d_head
            else f", {first.rotary_dim} of {first.d_head} dims")
    kinds = sorted({(rope.base, rope_scaling(rope)) for rope in ropes})
    bases = " / ".join(number(b) + (f" ({scaling})" if scaling else "")
                       for b, scaling in kinds)
    return f"RoPE ({layout}{part}), base {bases}"


def windows_cell(model: nn.Module) -> str:
    windows = [layer_window(block.attn) for block in model.blocks]
    windowed = [w for w in windows if w is not None]
    if not windowed:
        return "none"
    if len(set(windowed)) != 1:
        raise ValueError(f"layers with different windows: {windows}")
    w, n = number(windowed[0]), len(windows)
    if len(windowed) == n:
        return f"{w} in every layer"
    return f"{w} in {len(windowed)} of {n} layers"
# --8<-- [end:attention_cells]


# --8<-- [start:ffn_cells]
def router_top_k(router: nn.Module) -> int:
    """The k of chapter 9's routers: a `Router`'s route function's `top_k`, or a
    DeepSeek-V3 router's option."""
    route = getattr(router, "route", None)
    if isinstance(route, partial) and "top_k" in route.keywords:
        return route.keywords["top_k"]
    options = getattr(router, "options", None)
    if isinstance(options, dict) and "top_k" in options:
        return options["top_k"]
    raise ValueError(f"a router whose k this table cannot read: {router!r}")


ACTIVATIONS = {"silu": "SwiGLU", "gelu": "GeGLU", "gelu (tanh)": "GeGLU (tanh)"}
DENSE = {"relu": "ReLU", "gelu": "GELU", "gelu (tanh)": "GELU (tanh)"}


def ffn_cell(ffn: nn.Module) -> str:
    if isinstance(ffn, MoEFFN):
        experts = ffn.experts
        kind = ("clamped SwiGLU" if isinstance(experts, GptOssExperts)
                else ACTIVATIONS[activation_name(experts.activation)])
        shared = " + a shared expert" if ffn.shared is not None else ""
        return (f"MoE, top-{router_top_k(ffn.router)} of {ffn.n_experts} {kind} "
                f"experts{shared}")
    if type(ffn) is GatedFFN:
        return ACTIVATIONS[activation_name(ffn.activation)]
    if type(ffn) is DenseFFN:
        return DENSE[activation_name(ffn.activation)]
    raise TypeError(f"not an FFN of ours: {type(ffn).__name__}")


def runs(cells: list[str], *, counted: bool = True) -> str:
    """One cell for the layers' values: the value, or each run of equal values, with
    its length if `counted`: 'SwiGLU in 3 layers, then MoE, top-8 ... in 58 layers'."""
    groups: list[list] = []
    for cell in cells:
        if groups and groups[-1][0] == cell:
            groups[-1][1] += 1
        else:
            groups.append([cell, 1])
    if len(groups) == 1:
        return groups[0][0]
    return ", then ".join(f"{cell} in {n} layers" if counted else cell
                          for cell, n in groups)


def width(d_ff: int, d_model: int) -> str:
    """An FFN's hidden width and its rule: '14,336 = 3.5 d'."""
    return f"{number(d_ff)} = {d_ff / d_model:.3g} d"


def width_cell(ffn: nn.Module, d_model: int) -> str:
    if isinstance(ffn, MoEFFN):
        shared = ("" if ffn.shared is None
                  else f", the shared one {width(ffn.shared.d_ff, d_model)}")
        return f"{width(ffn.experts.d_ff, d_model)} per expert{shared}"
    return width(ffn.d_ff, d_model)


# Chapter 9's route functions, by what they compute. A softmax over the E experts
# kept at the top k and renormalised is the softmax of the top k logits: Mixtral's
# and gpt-oss's routers weigh the same (they differ in precision, and gpt-oss's
# logits have a bias).
ROUTERS = {
    "switch_router": "softmax, top-1, not renormalised",
    "mixtral_router": "softmax over the top-k",
    "qwen3_moe_router": "softmax, top-k, not renormalised",
    "gpt_oss_router": "softmax over the top-k",
}


def router_cell(ffn: nn.Module) -> str:
    if not isinstance(ffn, MoEFFN):
        return "none"
    router = ffn.router
    if isinstance(router, DeepSeekV3Router):
        o = router.options
        return (f"sigmoid, top-k in {o['topk_group']} of {o['n_group']} groups, "
                f"a bias to choose")
    route = router.route
    name = getattr(route.func if isinstance(route, partial) else route, "__name__", "")
    if name not in ROUTERS:
        raise ValueError(f"a route function the table has no name for: {route!r}")
    if name == "qwen3_moe_router" and route.keywords.get("norm_topk_prob"):
        return ROUTERS["mixtral_router"]
    return ROUTERS[name]


def biases_cell(block: nn.Module) -> str:
    attentions = ([block.self_attn, block.cross_attn]
                  if isinstance(block, PostNormDecoderLayer) else [block.attn])
    attn_bias = any(isinstance(m, nn.Linear) and m.bias is not None
                    for attn in attentions for m in attn.modules())
    ffn_bias = any(isinstance(m, nn.Linear) and m.bias is not None
                   for m in block.ffn.modules()
                   if not isinstance(block.ffn, MoEFFN) or m is not block.ffn.router)
    if isinstance(block.ffn, MoEFFN):
        experts = block.ffn.experts
        ffn_bias = ffn_bias or getattr(experts, "gate_up_proj_bias", None) is not None
    return ", ".join(n for n, b in (("attention", attn_bias), ("FFN", ffn_bias)) if b) \
        or "none"
# --8<-- [end:ffn_cells]


# --8<-- [start:describe_model]
ERA_COLUMNS = ("block", "norm", "QK-norm", "positions", "attention", "windows", "sinks",
               "FFN", "FFN width", "router", "biases", "tied output")


def describe_model(model: nn.Module) -> dict[str, str]:
    """Every column of ERA_COLUMNS, read from a built language model of ours (the first
    block for the block-level cells; `windows` and `positions` over all of them)."""
    if not isinstance(model, (GPTLanguageModel, LlamaLanguageModel, EncoderDecoder)):
        raise TypeError(f"not a language model of ours: {type(model).__name__}")
    if isinstance(model, EncoderDecoder):
        return describe_encoder_decoder(model)
    block, blocks = model.blocks[0], list(model.blocks)
    placement, norms = block_norms(block)
    residual = "parallel" if isinstance(block, ParallelBlock) else "serial"
    return {
        "block": f"{placement}, {residual}" if residual == "serial" else placement,
        "norm": norm_name(norms[0]),
        "QK-norm": qk_norm_cell(block.attn),
        "positions": positions_cell(model),
        "attention": attention_cell(block.attn),
        "windows": windows_cell(model),
        "sinks": ("per head" if any(isinstance(b.attn, SinkAttention)
                                    for b in blocks) else "none"),
        "FFN": runs([ffn_cell(b.ffn) for b in blocks]),
        "FFN width": runs([width_cell(b.ffn, model.d_model) for b in blocks],
                          counted=False),
        "router": runs([router_cell(b.ffn) for b in blocks
                        if isinstance(b.ffn, MoEFFN)] or ["none"]),
        "biases": biases_cell(block),
        "tied output": ("yes" if model.lm_head.weight is model.token_embedding.weight
                        else "no"),
    }


def describe_encoder_decoder(model: EncoderDecoder) -> dict[str, str]:
    """The cells of chapter 4's 2017 model, read from its decoder's first layer (the
    encoder's layers are the same parts without the cross-attention) and its class:
    a `PostNormDecoderLayer` adds each sublayer to the stream and then norms it, and
    an `EncoderDecoder` adds the fixed sinusoids to its embeddings (it has no position
    parameters) and makes the logits with its one embedding matrix, which also embeds
    both languages."""
    layer = model.decoder[0]
    if not isinstance(layer, PostNormDecoderLayer):
        raise TypeError(f"not a 2017 decoder layer: {type(layer).__name__}")
    ffn, attn = layer.ffn, layer.self_attn
    return {
        "block": "post-norm, serial", "norm": norm_name(layer.self_attn_norm),
        "QK-norm": qk_norm_cell(attn),
        "positions": "sinusoidal, added to the embeddings",
        "attention": (f"{attention_cell(attn)}; cross-attention, "
                      f"{attention_cell(layer.cross_attn)}"),
        "windows": "none" if layer_window(attn) is None else "windowed",
        "sinks": "per head" if isinstance(attn, SinkAttention) else "none",
        "FFN": ffn_cell(ffn), "FFN width": width_cell(ffn, model.d_model),
        "router": router_cell(ffn), "biases": biases_cell(layer),
        "tied output": "yes, and with the source's embedding",
    }
# --8<-- [end:describe_model]


# --8<-- [start:era_rows]
def catalog_model(name: str) -> LlamaLanguageModel:
    """A one-block language model around chapter 7's published block of that name,
    built on the meta device (the catalog describes a block, not its stack: its
    cells are the block's, its output tied if the catalog says the model's is; the
    vocabulary is a stand-in)."""
    spec = next(spec for spec in PUBLISHED_BLOCKS if spec.name == name)
    with torch.device("meta"):
        block = published_block(spec)
        d = block.d_model
        embedding, head = nn.Embedding(1, d), nn.Linear(d, 1, bias=False)
        if spec.tied:  # the model's fact the catalog records
            head.weight = embedding.weight
        return LlamaLanguageModel(embedding, [block], RMSNorm(d), head, context=1)


def transformer_base() -> EncoderDecoder:
    """The base model of Vaswani et al. 2017 (table 3: d 512, 8 heads, d_ff 2048, 6
    layers a stack; sec. 5.1: a shared vocabulary of 37,000 tokens for English-German),
    as chapter 4 builds it, on the meta device."""
    with torch.device("meta"):
        return EncoderDecoder(37_000, 512, 8, 2048, 6, dropout=0.1, max_length=512)


@dataclass(frozen=True)
class EraRow:
    name: str
    year: int  # of the model's publication
    build: Callable[[], nn.Module]  # the era's model by our builders, on meta
    page: str  # the chapter that builds it, docs-relative
    proof: str  # the pytest id of the test proving it equal to its production twin


def published_row(name: str, year: int, family_name: str) -> EraRow:
    """An era that is a published model: built by its family's loader, taught and
    proven where the family's row (`literate.models.families`) says."""
    row = family(family_name)
    return EraRow(name, year, lambda: published_model(name), row.page, row.proof)


ERA_ROWS: tuple[EraRow, ...] = (  # in the order of publication
    EraRow("Transformer base", 2017, transformer_base, "eras/encoder-decoder.md",
           "tests/test_transformer2017.py::"
           "test_model_equals_pytorch_stacks_forward_and_backward"),
    published_row("GPT-2 small", 2019, "gpt2"),
    EraRow("GPT-J 6B (a block)", 2021, lambda: catalog_model("GPT-J 6B"),
           "modern/modern-block.md",
           "tests/test_parallel_blocks.py::test_block_equals_its_hf_layer_in_float64"),
    EraRow("GPT-NeoX 20B (a block)", 2022, lambda: catalog_model("GPT-NeoX 20B"),
           "modern/modern-block.md",
           "tests/test_parallel_blocks.py::test_block_equals_its_hf_layer_in_float64"),
    published_row("Mistral 7B v0.1", 2023, "mistral"),
    published_row("Mixtral 8x7B", 2023, "mixtral"),
    published_row("Llama 3 8B", 2024, "llama"),
    EraRow("OLMo 2 7B (a block)", 2024, lambda: catalog_model("OLMo 2 7B"),
           "modern/modern-block.md",
           "tests/test_modern_blocks.py::"
           "test_olmo2_block_equals_hf_olmo2_decoder_layer"),
    published_row("DeepSeek-V3", 2024, "deepseek_v3"),
    published_row("Gemma 3 27B", 2025, "gemma3"),
    EraRow("Qwen3 8B (a block)", 2025, lambda: catalog_model("Qwen3 8B"),
           "modern/modern-block.md",
           "tests/test_modern_blocks.py::"
           "test_qwen3_block_equals_hf_qwen3_decoder_layer"),
    published_row("gpt-oss-120b", 2025, "gpt_oss"),
)


def era_table(rows: tuple[EraRow, ...] = ERA_ROWS) -> list[dict[str, str]]:
    """One dict per row: its name and year, then the cells `describe_model` reads."""
    return [{"era": row.name, "year": str(row.year)} | describe_model(row.build())
            for row in rows]
# --8<-- [end:era_rows]


# --8<-- [start:block_diff]
# The builder of each era's block, as chapters 5, 7, 9 and 10 show it
BUILDERS = {"GPT-2": gpt2_block, "Llama 3": llama_block, "Qwen3": qwen3_block,
            "OLMo 2": olmo2_block, "Gemma 3": gemma3_block, "Mixtral": mixtral_block,
            "gpt-oss": gpt_oss_block}
# The steps a reader takes, each from the block it changes
DIFF_PAIRS = (("GPT-2", "Llama 3"), ("Llama 3", "Qwen3"), ("Qwen3", "OLMo 2"),
              ("Qwen3", "Gemma 3"), ("Llama 3", "Mixtral"), ("Mixtral", "gpt-oss"))


def block_expression(builder: Callable[..., nn.Module]) -> list[str]:
    """The lines of a block builder's last `return` statement (the block it
    assembles), as its source shows them, dedented."""
    source = textwrap.dedent(inspect.getsource(builder))
    fn = ast.parse(source).body[0]
    ret = [node for node in ast.walk(fn) if isinstance(node, ast.Return)][-1]
    lines = source.splitlines()[ret.lineno - 1:ret.end_lineno]
    return textwrap.dedent("\n".join(lines)).splitlines()


def block_diff(older: str, newer: str) -> list[str]:
    """The diff from the older era's block to the newer's (eras of BUILDERS): '- ' for
    a line only the older builder has, '+ ' only the newer, '  ' both. Lines that
    differ only in their spaces (a call re-indented under a longer name) count as
    the same, shown as the newer builder writes them."""
    a, b = block_expression(BUILDERS[older]), block_expression(BUILDERS[newer])
    words = partial(map, lambda line: " ".join(line.split()))
    match = difflib.SequenceMatcher(None, list(words(a)), list(words(b)),
                                    autojunk=False)
    diff = []
    for op, i1, i2, j1, j2 in match.get_opcodes():
        if op == "equal":
            diff += ["  " + line for line in b[j1:j2]]
        else:
            diff += ["- " + line for line in a[i1:i2]]
            diff += ["+ " + line for line in b[j1:j2]]
    return diff
# --8<-- [end:block_diff]
