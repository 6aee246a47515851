"""The one-block diagrams (`literate.figures.block_diagrams`) draw the era table's cells:
each figure has one panel per era row it names, each panel's boxes say what
`era_blocks.panel` reads from that row (so a changed cell changes the figure), and
every figure fits a phone: at most 5.2 inches wide and 6 high, no text under 9 points,
none outside the figure or its box."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import pytest
from matplotlib.patches import Circle, FancyBboxPatch
from matplotlib.text import Text

import literate.numbers.eras
from literate.figures import FIGURES, LANGUAGES
from literate.figures import block_diagrams as blocks
from literate.figures.era_blocks import panel

NAMES = sorted(blocks.FIGURE_ROWS)

# What each topology draws: the (+) joins and the norm boxes of one block
DRAWN = {
    "pre": (2, 2),
    "post": (2, 2),
    "sandwich": (2, 4),
    "output": (2, 2),
    "parallel-one": (1, 1),
    "parallel-two": (1, 2),
}


@pytest.fixture(scope="module")
def table() -> dict[str, dict[str, str]]:
    """A fresh run of `era_table` over every row the figures name, by era name."""
    eras = literate.numbers.eras
    names = {name for rows in blocks.FIGURE_ROWS.values() for name in rows}
    rows = tuple(row for row in eras.ERA_ROWS if row.name in names)
    assert len(rows) == len(names), "every row a figure names is an era row"
    return {row["era"]: row for row in eras.era_table(rows)}


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
    """The words of the panel's boxes of one role ("norm", "attn", "cross", "ffn"),
    one string a box, its lines joined by spaces."""
    assert sum(p.get_label() == f"_{role}" for p in ax.patches) == sum(
        t.get_label() == f"_{role}" for t in ax.texts
    )
    return [
        t.get_text().replace("\n", " ") for t in ax.texts if t.get_label() == f"_{role}"
    ]


def test_every_figure_is_registered_with_its_rows():
    assert [spec[0] for spec in blocks.SPECS] == list(blocks.FIGURE_ROWS)
    assert all(FIGURES[name].draw is draw for name, draw, _ in blocks.SPECS)
    for language in LANGUAGES:
        assert set(blocks.TITLES[language]) == set(blocks.FIGURE_ROWS)
    with pytest.raises(ValueError, match=r"^no era row \['GPT-5'\]"):
        blocks.era_rows(("GPT-5",))


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("name", NAMES)
def test_each_panel_draws_the_cells_of_its_era_row(monkeypatch, table, name, language):
    fig, rows = drawn(monkeypatch, name, language)
    try:
        assert [row["era"] for row in rows] == list(blocks.FIGURE_ROWS[name])
        assert rows == [table[row["era"]] for row in rows]  # the table as it is
        assert len(fig.axes) == len(rows)
        for ax, row in zip(fig.axes, rows):
            pan = panel(row, language)
            texts = [t.get_text() for t in ax.texts]
            assert pan.era in texts and "\n".join(pan.caption) in texts
            joins, norms = DRAWN[pan.topology]
            assert sum(isinstance(p, Circle) for p in ax.patches) == joins
            assert boxes(ax, "norm") == [pan.norm] * norms
            assert boxes(ax, "attn") == [" ".join(pan.attention)]
            assert boxes(ax, "ffn") == [" ".join(pan.ffn)]
            assert boxes(ax, "cross") == []
    finally:
        plt.close(fig)


def test_a_changed_cell_changes_the_figure(monkeypatch):
    def older(row):
        return row | {
            "norm": "LayerNorm",
            "attention": "MHA, 12 heads",
            "FFN": "gelu",
            "positions": "learned, added to the embeddings",
        }

    fig, rows = drawn(monkeypatch, "block-llama", change=older)
    (ax,) = fig.axes
    assert rows[0]["era"] == "Llama 3 8B"
    assert boxes(ax, "norm") == ["LayerNorm", "LayerNorm"]
    assert boxes(ax, "attn") == ["MHA 12 heads"] and boxes(ax, "ffn") == ["GELU"]
    assert "learned positions" in [t.get_text() for t in ax.texts]
    plt.close(fig)
    fig, _ = drawn(
        monkeypatch,
        "block-modern-norms",
        change=lambda r: r | {"block": "pre-norm, serial"},
    )
    assert [sum(isinstance(p, Circle) for p in ax.patches) for ax in fig.axes] == [2, 2]
    assert [len(boxes(ax, "norm")) for ax in fig.axes] == [2, 2]  # no longer 2 and 4
    plt.close(fig)


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("name", NAMES)
def test_the_figure_fits_a_phone(name, language):
    """Width at most 5.2 in, height at most 6; every text at least 9 pt, and at least
    9 px on a 390 px phone (a figure is shown at most 358 px wide, at 96 px an inch);
    the title 11 to 13 pt; no text outside the figure, no box label outside its box."""
    fig = FIGURES[name].draw(language=language, theme="light")
    try:
        width, height = fig.get_size_inches()
        assert width <= 5.2 and height <= 6.0, (width, height)
        texts = [t for t in fig.findobj(Text) if t.get_text().strip()]
        smallest = min(t.get_fontsize() for t in texts)
        shown = min(358, 96 * width) / (72 * width)  # px a point on the phone
        assert smallest >= 9 and smallest * shown >= 9, smallest
        (title,) = fig.texts
        assert title.get_text() == blocks.TITLES[language][name]
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
def test_the_alt_text_states_the_cells(table, name):
    """Each panel's era, norm and attention kind, and every number on it (heads,
    experts, RoPE bases, windows, the year), are in the figure's alt text."""
    alt = FIGURES[name].alt
    for era in blocks.FIGURE_ROWS[name]:
        pan = panel(table[era])
        assert era.removesuffix(" (a block)") in alt, era
        assert pan.norm in alt and pan.attention[0] in alt, era
        words = [pan.era, *pan.attention, *pan.ffn, *pan.caption]
        for number in NUMBER.findall(" ".join(words)):
            assert re.search(rf"(?<![\d,]){number}(?![\d])", alt), (era, number)
