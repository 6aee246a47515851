"""The table of published blocks: every cell read from a block our builders make, on
the meta device, equals the cell the published numbers give; parameter counts equal the
formula; the names the table uses are Hugging Face's functions."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from transformers.activations import ACT2FN

from literate.numbers.catalog import (
    COLUMNS,
    HF_ACTIVATIONS,
    PUBLISHED_BLOCKS,
    block_parameter_count,
    catalog_notes,
    catalog_table,
    describe_block,
    expected_row,
    published_block,
    render_markdown,
)
from literate.parts.blocks import gpt2_block, llama_block, neox_block
from literate.parts.ffn import llama_ffn_width
from literate.parts.norms import LayerNorm

SPECS = {spec.name: spec for spec in PUBLISHED_BLOCKS}
REFERENCES = Path(__file__).resolve().parents[1] / "docs" / "appendix" / "references.md"


def on_meta(spec):
    with torch.device("meta"):
        return published_block(spec)


@pytest.fixture(scope="module")
def built():
    return {name: on_meta(spec) for name, spec in SPECS.items()}


@pytest.mark.parametrize("name", SPECS)
def test_every_cell_is_read_from_the_block_and_equals_the_published_number(built, name):
    cells = describe_block(built[name])
    assert tuple(cells) == COLUMNS
    assert cells == expected_row(SPECS[name])


@pytest.mark.parametrize("name", SPECS)
def test_parameter_count_from_numel_on_meta_equals_the_formula(built, name):
    block = built[name]
    assert sum(p.numel() for p in block.parameters()) == block_parameter_count(
        SPECS[name]
    )


def test_parameter_counts_by_hand():
    """The formula, checked on two blocks by hand. Llama 3 8B: W_q and W_o 4096^2 each,
    W_k and W_v 4096 x 1024 each, three FFN matrices 4096 x 14336, two RMSNorm gains.
    GPT-NeoX 20B: four 6144^2 matrices with biases, up and down 6144 x 24576 with
    biases, two LayerNorms with gain and shift."""
    d = 4096
    llama = 2 * d * d + 2 * d * 1024 + 3 * d * 14336 + 2 * d
    assert block_parameter_count(SPECS["Llama 3 8B"]) == llama == 218_112_000
    d, f = 6144, 24576
    neox = 4 * d * d + 4 * d + 2 * d * f + f + d + 2 * 2 * d
    assert block_parameter_count(SPECS["GPT-NeoX 20B"]) == neox


@pytest.mark.parametrize("name", SPECS)
def test_built_on_meta_nothing_has_storage_and_the_block_runs(built, name):
    """Parameters and RotaryEmbedding's cos/sin buffers are meta tensors; a forward on
    meta runs the shapes through (the RoPE tables are made, on meta, too)."""
    block = built[name]
    tensors = [*block.parameters(), *block.buffers()]
    assert tensors and all(t.is_meta for t in tensors)
    assert {n.rsplit(".", 1)[-1] for n, _ in block.named_buffers()} == {
        "cos",
        "sin",
        "signed_sin",
    }
    y = block(torch.empty(2, 5, block.d_model, device="meta"))
    assert y.is_meta and y.shape == (2, 5, block.d_model)
    assert block.attn.rope.cos.is_meta and block.attn.rope.cos.shape[0] >= 5


@pytest.mark.parametrize("hf_name", sorted({s.hf_activation for s in PUBLISHED_BLOCKS}))
def test_activation_names_are_hugging_faces_functions(built, hf_name):
    """Each config's activation (transformers' ACT2FN) equals the function the built
    block's FFN calls, to 1e-11 in float64: gelu_fast rounds sqrt(2/pi) to 10 digits
    (measured difference ~1e-12), the others agree to rounding."""
    x = torch.linspace(-8.0, 8.0, 4001, dtype=torch.float64)
    for name, spec in SPECS.items():
        if spec.hf_activation == hf_name:
            ours = built[name].ffn.activation
            assert describe_block(built[name])["activation"] == HF_ACTIVATIONS[hf_name]
            torch.testing.assert_close(ours(x), ACT2FN[hf_name](x), atol=1e-11, rtol=0)


def test_llama3_width_is_metas_rule():
    """Llama 3 8B's 14336 is Meta's rule with multiple_of 1024 and ffn_dim_multiplier
    1.3; the rule's other anchors: Llama 2 7B 11008, the 70B models 28672."""
    assert SPECS["Llama 3 8B"].d_ff == llama_ffn_width(
        4096, multiple_of=1024, ffn_dim_multiplier=1.3
    )
    assert llama_ffn_width(4096) == 11008
    assert llama_ffn_width(8192, multiple_of=4096, ffn_dim_multiplier=1.3) == 28672


def test_a_wrong_number_changes_its_cell():
    """The comparison can fail: a block built with one number off differs in exactly
    that cell."""
    spec = SPECS["Llama 3 8B"]
    with torch.device("meta"):
        block = llama_block(4096, 32, 8, 14336, rope_base=500_000.0, eps=1e-6)
    cells, expected = describe_block(block), expected_row(spec)
    assert {k for k in cells if cells[k] != expected[k]} == {"norm eps"}
    changed = expected_row(replace(spec, d_ff=11008))
    assert {k for k in changed if changed[k] != expected[k]} == {"FFN width"}


def test_neox_block_defaults_to_pythias_exact_gelu_and_takes_20bs_tanh_form():
    """`neox_block`'s default activation is exact GELU (Pythia's hidden_act "gelu"); 20B's
    config says gelu_fast, the tanh form, which the row passes as `activation`."""
    spec = SPECS["GPT-NeoX 20B"]
    with torch.device("meta"):
        block = neox_block(6144, 64, 24576, rotary_pct=0.25, rope_base=10_000.0)
    cells, expected = describe_block(block), expected_row(spec)
    assert {k for k in cells if cells[k] != expected[k]} == {"activation"}
    assert (cells["activation"], expected["activation"]) == ("gelu", "gelu (tanh)")
    with torch.device("meta"):
        assert describe_block(published_block(spec)) == expected


def test_describe_reads_a_gpt2_block_too():
    with torch.device("meta"):
        cells = describe_block(gpt2_block(768, 12))
    assert (cells["placement"], cells["norm"], cells["norm eps"]) == (
        "pre-norm",
        "LayerNorm",
        "1e-05",
    )
    assert (cells["FFN"], cells["FFN width"], cells["activation"]) == (
        "dense",
        "3072",
        "gelu (tanh)",
    )
    assert (cells["RoPE base"], cells["biases"]) == ("none", "attention, FFN")


def test_describe_refuses_what_it_cannot_name():
    with pytest.raises(TypeError, match="not a decoder block of ours: .*Linear"):
        describe_block(torch.nn.Linear(2, 2))
    with torch.device("meta"):
        block = gpt2_block(8, 2)
        block.ffn_norm = torch.nn.LayerNorm(8)
    with pytest.raises(TypeError, match="not one of our norms: torch.nn"):
        describe_block(block)
    with torch.device("meta"):
        block = gpt2_block(8, 2)
        block.ffn_norm = LayerNorm(8, eps=1e-6)
    with pytest.raises(ValueError, match=r"norm eps differ: \['1e-05', '1e-06'\]"):
        describe_block(block)
    with torch.device("meta"):
        block = gpt2_block(8, 2, activation=torch.tanh)
    with pytest.raises(ValueError, match="no name for"):
        describe_block(block)


def test_catalog_table_rows():
    rows = catalog_table()
    assert [row["model"] for row in rows] == list(SPECS)
    for row, spec in zip(rows, PUBLISHED_BLOCKS):
        assert list(row) == ["model", *COLUMNS, "tied embeddings", "config"]
        assert {k: row[k] for k in COLUMNS} == expected_row(spec)
        assert row["tied embeddings"] == ("yes" if spec.tied else "no")
        assert row["config"] == spec.hf_repo


def test_render_markdown_is_a_table_of_every_cell():
    rows = catalog_table()
    text = render_markdown(rows)
    lines = text.splitlines()
    assert len(lines) == 2 + len(rows[0]) - 1  # header, rule, one line per cell
    assert re.fullmatch(r"\|(-+\|)+", lines[1])
    assert len({line.count("|") for line in lines}) == 1  # every line has 1 + 8 cells
    assert len({len(line) for line in lines}) == 1  # padded: reads as plain text too
    parsed = [[c.strip() for c in line.strip("|").split(" | ")] for line in lines]
    assert parsed[0][1:] == [row["model"] for row in rows]
    for line in parsed[2:]:
        assert line[1:] == [row[line[0]] for row in rows]
    with pytest.raises(ValueError, match="same cells"):
        render_markdown([rows[0], {"model": "x"}])


def test_sources_and_notes():
    anchors = set(re.findall(r"\{ #([a-z0-9-]+) \}", REFERENCES.read_text("utf-8")))
    for spec in PUBLISHED_BLOCKS:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", spec.hf_repo)
        assert spec.config_url.endswith(f"/{spec.hf_repo}/blob/main/config.json")
        assert spec.paper in anchors or (spec.paper == "" and "Command R" in spec.name)
    notes = catalog_notes()
    assert notes.count("\n") + 1 == sum(len(s.not_modelled) for s in PUBLISHED_BLOCKS)
    assert "sliding_window 4096" in notes and "factor 8" in notes
