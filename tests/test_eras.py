"""Chapter 11's era table (a start): each cell read from the published model our loaders
build from its configuration on the meta device (or chapter 7's published block),
checked against the same cell written here from the published configuration; every
row names a test that exists and a page that teaches it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from torch import nn

from literate.eras import ERA_COLUMNS, ERA_ROWS, describe_model, era_table

ROOT = Path(__file__).resolve().parents[1]

EXPECTED = {  # era: the cells, in ERA_COLUMNS order, from the published configurations
    "GPT-2 small": ("pre-norm, serial", "LayerNorm", "learned, added to the embeddings",
                    "MHA, 12 heads", "none", "none", "gelu (tanh)", "attention, FFN",
                    "yes"),
    "Llama 3 8B": ("pre-norm, serial", "RMSNorm", "RoPE (rotate-half), base 500,000",
                   "GQA, 32 heads, 8 key/value", "none", "none", "SwiGLU", "none", "no"),
    "Mistral 7B v0.1": ("pre-norm, serial", "RMSNorm", "RoPE (rotate-half), base 10,000",
                        "GQA, 32 heads, 8 key/value", "4,096 in every layer", "none",
                        "SwiGLU", "none", "no"),
    "Qwen3 8B (a block)": ("pre-norm, serial", "RMSNorm",
                           "RoPE (rotate-half), base 1,000,000",
                           "GQA, 32 heads, 8 key/value", "none", "none", "SwiGLU", "none",
                           "no"),
    "OLMo 2 7B (a block)": ("output norm, serial", "RMSNorm",
                            "RoPE (rotate-half), base 500,000", "MHA, 32 heads", "none",
                            "none", "SwiGLU", "none", "no"),
    "Gemma 3 27B": ("sandwich, serial", "RMSNorm (1 + w)",
                    "RoPE (rotate-half), base 10,000 / 1,000,000",
                    "GQA, 32 heads, 16 key/value", "1,024 in 52 of 62 layers", "none",
                    "GeGLU (tanh)", "none", "yes"),
    "GPT-J 6B (a block)": ("parallel (one norm)", "LayerNorm",
                           "RoPE (interleaved, 64 of 256 dims), base 10,000",
                           "MHA, 16 heads", "none", "none", "gelu (tanh)", "FFN", "no"),
    "GPT-NeoX 20B (a block)": ("parallel (two norms)", "LayerNorm",
                               "RoPE (rotate-half, 24 of 96 dims), base 10,000",
                               "MHA, 64 heads", "none", "none", "gelu (tanh)",
                               "attention, FFN", "no"),
    "Mixtral 8x7B": ("pre-norm, serial", "RMSNorm", "RoPE (rotate-half), base 1,000,000",
                     "GQA, 32 heads, 8 key/value", "none", "none", "MoE, top-2 of 8 experts",
                     "none", "no"),
    "DeepSeek-V3": ("pre-norm, serial", "RMSNorm",
                    "RoPE (interleaved), base 10,000, YaRN x40",
                    "latent, 128 heads (rank 512, RoPE part 64)", "none", "none",
                    "MoE, top-8 of 256 experts + a shared expert", "none", "no"),
    "gpt-oss-120b": ("pre-norm, serial", "RMSNorm",
                     "RoPE (rotate-half), base 150,000, YaRN x32",
                     "GQA, 64 heads, 8 key/value", "128 in 18 of 36 layers", "per head",
                     "MoE, top-4 of 128 experts", "attention, FFN", "no"),
}


def test_every_cell_is_read_from_the_built_model():
    table = era_table()
    assert [row["era"] for row in table] == list(EXPECTED)
    for row in table:
        assert tuple(row[c] for c in ERA_COLUMNS) == EXPECTED[row["era"]], row["era"]


@pytest.mark.parametrize("row", ERA_ROWS, ids=[r.name for r in ERA_ROWS])
def test_every_row_names_a_test_that_exists_and_a_page_that_teaches_it(row):
    path, name = row.proof.split("::")
    source = (ROOT / path).read_text(encoding="utf-8")
    assert re.search(rf"^def {re.escape(name)}\(", source, re.MULTILINE), row.proof
    assert (ROOT / "docs" / row.page).is_file(), row.page


def test_a_cell_changes_with_the_model():
    """The cells are read, not looked up by name: change a part, the cell follows."""
    model = ERA_ROWS[1].build()  # Llama 3 8B, on the meta device
    assert describe_model(model)["tied output"] == "no"
    model.lm_head.weight = model.token_embedding.weight
    assert describe_model(model)["tied output"] == "yes"
    model.blocks[0].attn.n_kv_heads = 1
    assert describe_model(model)["attention"] == "MQA, 32 heads, 1 key/value"


def test_what_is_not_a_language_model_of_ours_is_refused():
    with pytest.raises(TypeError, match="not a language model of ours: Linear"):
        describe_model(nn.Linear(2, 2))


def test_the_diff_view_is_generated_from_the_builders_sections():
    from literate.eras import BUILDERS, DIFF_PAIRS, block_diff, block_expression
    from literate.export import section_source

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
        module, section, _ = BUILDERS[newer]
        newer_source = section_source(module, section)
        assert all(line[2:].strip() in newer_source
                   for line in changed if line.startswith("+ "))
    assert block_expression("Llama 3")[0] == "return PreNormBlock("
