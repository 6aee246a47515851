"""Chapter 11's grid of what changes from one era to the next draws `era_table`: a cell
is marked exactly where an era's cell differs from the row above, and labelled with the
new value in short."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.patches import Rectangle

from literate.figures import FIGURES
from literate.figures.eras_diagrams import (
    CHANGE_COLUMNS,
    SPECS,
    era_changes,
    short_cell,
    short_era,
)
from literate.numbers.eras import ERA_ROWS, era_table

CYRILLIC = re.compile("[\u0400-\u04ff]")
PAGE = Path(__file__).parents[1] / "docs" / "eras" / "side-by-side.md"


@pytest.fixture(scope="module")
def table():
    return era_table()


def gids(fig, prefix: str) -> set[tuple[int, str]]:
    found = set()
    for artist in fig.findobj(lambda a: (a.get_gid() or "").startswith(prefix)):
        _, row, column = artist.get_gid().split("-", 2)
        found.add((int(row), column))
    return found


def test_the_rows_are_era_table_in_era_rows_order(table):
    rows = era_changes()
    assert [era for era, _, _ in rows] == [row["era"] for row in table]
    assert [era for era, _, _ in rows] == [era.name for era in ERA_ROWS]
    for (_, cells, _), row in zip(rows, table):
        assert cells == {c: row[c] for c in CHANGE_COLUMNS}


def test_the_marked_cells_are_a_fresh_comparison_of_the_rows(table):
    expected = {(0, c) for c in CHANGE_COLUMNS} | {
        (i, c)
        for i in range(1, len(table))
        for c in CHANGE_COLUMNS
        if table[i][c] != table[i - 1][c]
    }
    fig = FIGURES["eras-changes"].draw(language="en", theme="light")
    try:
        marked = gids(fig, "change-")
        same = gids(fig, "same-")
        assert marked == expected
        assert marked | same == {
            (i, c) for i in range(len(table)) for c in CHANGE_COLUMNS
        }
        assert not marked & same
        assert all(
            isinstance(a, Rectangle)
            for a in fig.findobj(lambda a: a.get_gid())
            if a.get_gid().startswith(("change-", "same-"))
        )
    finally:
        plt.close(fig)
    # the steps the page names: OLMo 2 after Llama 3, Gemma 3 the biggest step
    names = [row["era"] for row in table]
    olmo = names.index("OLMo 2 7B (a block)")
    assert names[olmo - 1] == "Llama 3 8B"
    assert {c for i, c in expected if i == olmo} == {"block", "QK-norm", "attention"}
    steps = {
        names[i]: sum(1 for j, _ in expected if j == i) for i in range(1, len(names))
    }
    assert max(steps, key=steps.get) == "Gemma 3 27B" and steps["Gemma 3 27B"] == 7
    assert sorted(steps.values())[-2] < 7


@pytest.mark.parametrize("language", ["en", "ru"])
def test_each_marked_cell_is_labelled_with_its_new_value(table, language):
    fig = FIGURES["eras-changes"].draw(language=language, theme="light")
    try:
        labels = {
            tuple(t.get_gid().split("-", 2)[1:]): t.get_text()
            for t in fig.findobj(lambda a: (a.get_gid() or "").startswith("label-"))
        }
        assert {(int(r), c) for r, c in labels} == gids(fig, "change-")
        for (r, c), label in labels.items():
            assert label == short_cell(c, table[int(r)][c], language)
        words = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
        shown = "".join(words)
        assert bool(CYRILLIC.search(shown)) == (language == "ru")
        for row in table:
            assert short_era(row["era"]) in words
        sizes = [
            t.get_fontsize() for t in fig.findobj(lambda a: hasattr(a, "get_fontsize"))
        ]
        assert min(sizes) >= 10
        assert fig.get_figwidth() <= 5.2
    finally:
        plt.close(fig)


def test_the_short_forms_read_the_cells():
    assert short_cell("positions", "RoPE (rotate-half), base 500,000") == "500k"
    assert (
        short_cell("positions", "RoPE (rotate-half), base 10,000 / 1,000,000")
        == "10k/1M"
    )
    assert (
        short_cell("positions", "RoPE (interleaved), base 10,000 (YaRN x40)") == "YaRN"
    )
    assert short_cell("windows", "128 in 18 of 36 layers") == "128"
    assert short_cell("FFN", "SwiGLU in 3 layers, then MoE, top-8 of 256") == "MoE"
    assert short_cell("attention", "GQA, 32 heads, 8 key/value") == "GQA"
    assert short_cell("block", "parallel (two norms)") == "par 2"
    assert short_era("gpt-oss-120b") == "gpt-oss"
    assert short_era("Mistral 7B v0.1") == "Mistral"


def test_the_page_shows_the_grid_in_from_one_era_to_the_next():
    page = PAGE.read_text(encoding="utf-8")
    spot = page.index("![](../figures/eras-changes-light.svg#only-light){ .figure }")
    assert (
        page.index("## From one era to the next") < spot < page.index("## What a model")
    )
    assert "eras-changes" in [name for name, _, _ in SPECS]
