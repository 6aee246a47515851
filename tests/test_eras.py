"""Chapter 11's era table (a start): each cell read from the published model our loaders
build from its configuration on the meta device (or chapter 7's published block),
checked against the same cell written here from the published configuration; every
row names a test that exists and a page that teaches it.
"""

from __future__ import annotations

import inspect
import re
from functools import partial
from pathlib import Path

import pytest
from torch import nn

from literate.numbers.eras import ERA_COLUMNS, ERA_ROWS, describe_model, era_table
from literate.parts.routers import qwen3_moe_router

ROOT = Path(__file__).resolve().parents[1]

# era: its cells other than 'none', written from the published configurations
EXPECTED = {
    "Transformer base": {
        "block": "post-norm, serial",
        "norm": "LayerNorm",
        "positions": "sinusoidal, added to the embeddings",
        "attention": "MHA, 8 heads; cross-attention, MHA, 8 heads",
        "FFN": "ReLU",
        "FFN width": "2,048 = 4 d",
        "biases": "attention, FFN",
        "tied output": "yes, and with the source's embedding",
    },
    "GPT-2 small": {
        "block": "pre-norm, serial",
        "norm": "LayerNorm",
        "positions": "learned, added to the embeddings",
        "attention": "MHA, 12 heads",
        "FFN": "GELU (tanh)",
        "FFN width": "3,072 = 4 d",
        "biases": "attention, FFN",
        "tied output": "yes",
    },
    "GPT-J 6B (a block)": {
        "block": "parallel (one norm)",
        "norm": "LayerNorm",
        "positions": "RoPE (interleaved, 64 of 256 dims), base 10,000",
        "attention": "MHA, 16 heads",
        "FFN": "GELU (tanh)",
        "FFN width": "16,384 = 4 d",
        "biases": "FFN",
        "tied output": "no",
    },
    "GPT-NeoX 20B (a block)": {
        "block": "parallel (two norms)",
        "norm": "LayerNorm",
        "positions": "RoPE (rotate-half, 24 of 96 dims), base 10,000",
        "attention": "MHA, 64 heads",
        "FFN": "GELU (tanh)",
        "FFN width": "24,576 = 4 d",
        "biases": "attention, FFN",
        "tied output": "no",
    },
    "Mistral 7B v0.1": {
        "block": "pre-norm, serial",
        "norm": "RMSNorm",
        "positions": "RoPE (rotate-half), base 10,000",
        "attention": "GQA, 32 heads, 8 key/value",
        "windows": "4,096 in every layer",
        "FFN": "SwiGLU",
        "FFN width": "14,336 = 3.5 d",
        "tied output": "no",
    },
    "Mixtral 8x7B": {
        "block": "pre-norm, serial",
        "norm": "RMSNorm",
        "positions": "RoPE (rotate-half), base 1,000,000",
        "attention": "GQA, 32 heads, 8 key/value",
        "FFN": "MoE, top-2 of 8 SwiGLU experts",
        "FFN width": "14,336 = 3.5 d per expert",
        "router": "softmax over the top-k",
        "tied output": "no",
    },
    "Llama 3 8B": {
        "block": "pre-norm, serial",
        "norm": "RMSNorm",
        "positions": "RoPE (rotate-half), base 500,000",
        "attention": "GQA, 32 heads, 8 key/value",
        "FFN": "SwiGLU",
        "FFN width": "14,336 = 3.5 d",
        "tied output": "no",
    },
    "OLMo 2 7B (a block)": {
        "block": "output norm, serial",
        "norm": "RMSNorm",
        "QK-norm": "over projection",
        "positions": "RoPE (rotate-half), base 500,000",
        "attention": "MHA, 32 heads",
        "FFN": "SwiGLU",
        "FFN width": "11,008 = 2.69 d",
        "tied output": "no",
    },
    "DeepSeek-V3": {
        "block": "pre-norm, serial",
        "norm": "RMSNorm",
        "QK-norm": "none (RMSNorm on the q and kv latents)",
        "positions": "RoPE (interleaved), base 10,000 (YaRN x40)",
        "attention": "latent, 128 heads (rank 512, RoPE part 64)",
        "FFN": (
            "SwiGLU in 3 layers, then MoE, top-8 of 256 SwiGLU experts + "
            "a shared expert in 58 layers"
        ),
        "FFN width": (
            "18,432 = 2.57 d, then 2,048 = 0.286 d per expert, the shared"
            " one 2,048 = 0.286 d"
        ),
        "router": "sigmoid, top-k in 4 of 8 groups, a bias to choose",
        "tied output": "no",
    },
    "Gemma 3 27B": {
        "block": "sandwich, serial",
        "norm": "RMSNorm (1 + w)",
        "QK-norm": "per head",
        "positions": "RoPE (rotate-half), base 10,000 / 1,000,000 (positions / 8)",
        "attention": "GQA, 32 heads, 16 key/value",
        "windows": "1,024 in 52 of 62 layers",
        "FFN": "GeGLU (tanh)",
        "FFN width": "21,504 = 4 d",
        "tied output": "yes",
    },
    "Qwen3 8B (a block)": {
        "block": "pre-norm, serial",
        "norm": "RMSNorm",
        "QK-norm": "per head",
        "positions": "RoPE (rotate-half), base 1,000,000",
        "attention": "GQA, 32 heads, 8 key/value",
        "FFN": "SwiGLU",
        "FFN width": "12,288 = 3 d",
        "tied output": "no",
    },
    "gpt-oss-120b": {
        "block": "pre-norm, serial",
        "norm": "RMSNorm",
        "positions": "RoPE (rotate-half), base 150,000 (YaRN x32)",
        "attention": "GQA, 64 heads, 8 key/value",
        "windows": "128 in 18 of 36 layers",
        "sinks": "per head",
        "FFN": "MoE, top-4 of 128 clamped SwiGLU experts",
        "FFN width": "2,880 = 1 d per expert",
        "router": "softmax over the top-k",
        "biases": "attention, FFN",
        "tied output": "no",
    },
}


def test_every_cell_is_read_from_the_built_model():
    table = era_table()
    assert [row["era"] for row in table] == list(EXPECTED)
    for row in table:
        expected = {c: EXPECTED[row["era"]].get(c, "none") for c in ERA_COLUMNS}
        assert {c: row[c] for c in ERA_COLUMNS} == expected, row["era"]


@pytest.mark.parametrize("row", ERA_ROWS, ids=[r.name for r in ERA_ROWS])
def test_every_row_names_a_test_that_exists_and_a_page_that_teaches_it(row):
    path, name = row.proof.split("::")
    source = (ROOT / path).read_text(encoding="utf-8")
    assert re.search(rf"^def {re.escape(name)}\(", source, re.MULTILINE), row.proof
    assert (ROOT / "docs" / row.page).is_file(), row.page


def test_a_cell_changes_with_the_model():
    """The cells are read, not looked up by name: change a part, the cell follows."""
    rows = {row.name: row for row in ERA_ROWS}
    model = rows["Llama 3 8B"].build()  # on the meta device
    assert describe_model(model)["tied output"] == "no"
    model.lm_head.weight = model.token_embedding.weight
    assert describe_model(model)["tied output"] == "yes"
    model.blocks[0].attn.n_kv_heads = 1
    assert describe_model(model)["attention"] == "MQA, 32 heads, 1 key/value"
    model.blocks[0].ffn.d_ff = 4 * 4096
    assert describe_model(model)["FFN width"] == "16,384 = 4 d, then 14,336 = 3.5 d"

    mixtral = rows["Mixtral 8x7B"].build()
    for block in mixtral.blocks[:2]:  # the first two layers route as Qwen3-MoE does
        block.ffn.router.route = partial(
            qwen3_moe_router, top_k=2, norm_topk_prob=False
        )
    cells = describe_model(mixtral)
    assert cells["router"] == (
        "softmax, top-k, not renormalised in 2 layers, then "
        "softmax over the top-k in 30 layers"
    )
    mixtral.blocks[0].ffn.router.route = partial(print, top_k=2)
    with pytest.raises(ValueError, match="a route function the table has no name for"):
        describe_model(mixtral)


def test_runs_of_layers_are_counted_in_order():
    from literate.numbers.eras import runs

    assert runs(["a", "a"]) == "a"
    assert runs(["a", "b", "b", "a"]) == (
        "a in 1 layers, then b in 2 layers, then a in 1 layers"
    )
    assert runs(["a", "b", "b"], counted=False) == "a, then b"


def test_what_is_not_a_language_model_of_ours_is_refused():
    with pytest.raises(TypeError, match="not a language model of ours: Linear"):
        describe_model(nn.Linear(2, 2))


def test_the_diff_view_is_generated_from_the_builders_sections():
    from literate.numbers.eras import BUILDERS, DIFF_PAIRS, block_diff, block_expression

    gpt2_to_llama = block_diff("GPT-2", "Llama 3")
    removed = [line[2:].strip() for line in gpt2_to_llama if line.startswith("- ")]
    added = [line[2:].strip() for line in gpt2_to_llama if line.startswith("+ ")]
    assert removed.count("LayerNorm(d_model, eps=eps),") == 2
    assert added.count("RMSNorm(d_model, eps=eps),") == 2
    assert "GatedFFN(d_model, d_ff, F.silu)," in added and "dropout=dropout," in removed
    assert all(line.startswith("  ") for line in block_diff("Qwen3", "Qwen3"))
    for older, newer in DIFF_PAIRS:
        changed = [line for line in block_diff(older, newer) if line[0] in "+-"]
        assert changed, (older, newer)  # every step changes the block
        newer_source = inspect.getsource(BUILDERS[newer])
        assert all(
            line[2:].strip() in newer_source
            for line in changed
            if line.startswith("+ ")
        )
    assert block_expression(BUILDERS["Llama 3"])[0] == "return PreNormBlock("


def test_the_rows_are_in_the_order_of_publication():
    years = [row.year for row in ERA_ROWS]
    assert years == sorted(years) and years[0] == 2017 and years[-1] == 2025
    assert len({row.name for row in ERA_ROWS}) == len(ERA_ROWS)
