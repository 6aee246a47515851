"""The era table's blocks in three figures of four (`block_diagrams.eras_figure`): the
figures together draw every row of `era_table`, in its order, two by two, each panel's
boxes what `era_blocks.panel` reads from its row (so a changed cell changes the
figure), and each figure is legible on a phone: at most 5.2 inches wide, short enough
for a 900 px window, no text under 9.5 points (the 2017 encoder's label included)."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import pytest
from matplotlib.patches import Circle, FancyBboxPatch
from matplotlib.text import Text

import literate.numbers.eras
from literate.figures import FIGURES, LANGUAGES
from literate.figures import block_diagrams as blocks
from literate.figures.era_blocks import TOPOLOGIES, panel

NAMES = list(blocks.ERA_FIGURES)

# What each topology draws: the (+) joins and the norm boxes of one block
DRAWN = {
    "pre": (2, 2),
    "post": (2, 2),
    "sandwich": (2, 4),
    "output": (2, 2),
    "parallel-one": (1, 1),
    "parallel-two": (1, 2),
}


def drawn(monkeypatch, name: str, language: str = "en", change=None):
    """The registered figure `name` drawn, and the era_table rows it was drawn from
    (each passed through `change` first, if given)."""
    built = []
    real = literate.numbers.eras.era_table

    def recorded(rows):
        built.append([row if change is None else change(row) for row in real(rows)])
        return built[-1]

    monkeypatch.setattr(literate.numbers.eras, "era_table", recorded)
    fig = FIGURES[name].draw(language=language, theme="light")
    (rows,) = built
    return fig, rows


def boxes(ax, role: str) -> list[str]:
    """The words of a panel's boxes of one role, one string a box."""
    return [
        t.get_text().replace("\n", " ") for t in ax.texts if t.get_label() == f"_{role}"
    ]


def test_the_three_figures_are_registered_and_replace_the_sheet():
    assert NAMES == ["eras-blocks-1", "eras-blocks-2", "eras-blocks-3"]
    assert [spec[0] for spec in blocks.ERA_SPECS] == NAMES
    assert all(FIGURES[name].draw is draw for name, draw, _ in blocks.ERA_SPECS)
    assert "eras-blocks" not in FIGURES


def test_together_they_draw_every_era_row_in_the_tables_order():
    groups = [blocks.era_group(name) for name in NAMES]
    assert [row for group in groups for row in group] == list(
        literate.numbers.eras.ERA_ROWS
    )
    assert [len(group) for group in groups] == [4, 4, 4]


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("name", NAMES)
def test_each_panel_draws_the_cells_of_its_era_row(monkeypatch, name, language):
    fig, rows = drawn(monkeypatch, name, language)
    try:
        eras = literate.numbers.eras
        want = eras.era_table(blocks.era_group(name))
        assert rows == want  # the rows of its group, read fresh
        assert len(fig.axes) == len(rows) == 4
        years = [row["year"] for row in rows]
        (title,) = fig.texts
        assert title.get_text().endswith(f"{years[0]}–{years[-1]}")
        for ax, row in zip(fig.axes, rows):
            pan = blocks.legible(panel(row, language), blocks.ERA_FONT)
            texts = [t.get_text() for t in ax.texts]
            assert pan.era in texts and "\n".join(pan.caption) in texts
            assert f"({row['year']})" in pan.era
            joins, norms = DRAWN[TOPOLOGIES[row["block"]]]
            cross = pan.cross is not None
            assert sum(isinstance(p, Circle) for p in ax.patches) == joins + cross
            assert boxes(ax, "norm") == [pan.norm] * (norms + cross)
            assert boxes(ax, "attn") == [" ".join(pan.attention)]
            assert boxes(ax, "ffn") == [" ".join(pan.ffn)]
            assert boxes(ax, "cross") == ([" ".join(pan.cross)] if cross else [])
    finally:
        plt.close(fig)


def test_the_panels_are_two_by_two_in_the_tables_order():
    fig = FIGURES["eras-blocks-2"].draw()
    try:
        boxes_at = [ax.get_position() for ax in fig.axes]
        (x0, y0), (x1, y1), (x2, y2), (x3, y3) = [(b.x0, b.y0) for b in boxes_at]
        assert x0 == x2 < x1 == x3 and y0 == y1 > y2 == y3
        names = [t.get_text() for ax in fig.axes for t in ax.texts]
        assert names.index("Mistral 7B v0.1 (2023)") < names.index("OLMo 2 7B (2024)")
    finally:
        plt.close(fig)


def test_a_changed_cell_changes_the_figure(monkeypatch):
    def older(row):
        return row | {"norm": "LayerNorm", "FFN": "gelu", "windows": "none"}

    fig, rows = drawn(monkeypatch, "eras-blocks-2", change=older)
    try:
        assert rows[0]["era"] == "Mistral 7B v0.1"
        for ax in fig.axes:
            assert set(boxes(ax, "norm")) == {"LayerNorm"}
            assert boxes(ax, "ffn") == ["GELU"]
        texts = [t.get_text() for t in fig.axes[0].texts]
        assert not any("4,096" in t for t in texts)
    finally:
        plt.close(fig)


def test_the_2017_panel_draws_the_encoders_cross_attention_legibly():
    fig = FIGURES["eras-blocks-1"].draw()
    try:
        first = fig.axes[0]
        assert boxes(first, "cross") == ["cross-attention 8 heads"]
        (label,) = [t for t in first.texts if t.get_text() == "encoder"]
        assert label.get_fontsize() >= blocks.ERA_FONT == 9.5
    finally:
        plt.close(fig)


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("name", NAMES)
def test_the_figure_fits_a_phone_and_a_window(name, language):
    """Width at most 5.2 in; at most 810 px high at 96 px an inch (the 90vh a figure
    may take of a 900 px window); every text at least 9.5 pt, and at least 9 px on a
    390 px phone; no text outside the figure, no box label outside its box."""
    fig = FIGURES[name].draw(language=language, theme="light")
    try:
        width, height = fig.get_size_inches()
        assert width <= 5.2 and height * 96 <= 0.9 * 900 * 1.03, (width, height)
        texts = [t for t in fig.findobj(Text) if t.get_text().strip()]
        smallest = min(t.get_fontsize() for t in texts)
        shown = min(358, 96 * width) / (72 * width)
        assert smallest >= 9.5 and smallest * shown >= 9, smallest
        (title,) = fig.texts
        assert 11 <= title.get_fontsize() <= 13
        renderer = fig.canvas.get_renderer()
        page = fig.bbox
        for t in texts:
            box = t.get_window_extent(renderer)
            assert page.x0 - 1 <= box.x0 and box.x1 <= page.x1 + 1, t.get_text()
            assert page.y0 - 1 <= box.y0 and box.y1 <= page.y1 + 1, t.get_text()
        for ax in fig.axes:
            patches = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
            labels = [
                t for t in ax.texts if t.get_label() in {p.get_label() for p in patches}
            ]
            assert len(patches) == len(labels) >= 3
            for patch, label in zip(patches, labels):
                outer = patch.get_window_extent(renderer)
                inner = label.get_window_extent(renderer)
                assert outer.x0 < inner.x0 and inner.x1 < outer.x1, label.get_text()
                assert outer.y0 < inner.y0 and inner.y1 < outer.y1, label.get_text()
    finally:
        plt.close(fig)


NUMBER = re.compile(r"\d[\d,]*[KM]?")


@pytest.mark.parametrize("name", NAMES)
def test_the_alt_text_states_the_cells(name):
    """Each panel's era and norm, and every number on it (heads, experts, RoPE bases,
    windows, the year), are in the figure's alt text."""
    alt = FIGURES[name].alt
    for row in literate.numbers.eras.era_table(blocks.era_group(name)):
        pan = panel(row)
        assert row["era"].removesuffix(" (a block)") in alt, row["era"]
        assert pan.norm in alt, row["era"]
        words = [pan.era, *pan.attention, *pan.ffn, *pan.caption]
        for number in NUMBER.findall(" ".join(words)):
            assert re.search(rf"(?<![\d,]){number}(?![\d])", alt), (row["era"], number)
