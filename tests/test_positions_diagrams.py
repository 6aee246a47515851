"""Chapter 2's diagrams draw what the code computes: the learned table stops where
`LearnedPositions` refuses, RoPE's pairs turn by m * theta_i as `apply_rope` turns them,
and the layouts pair the coordinates `apply_rope` and `apply_rope_interleaved` pair."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.text import Text

from literate.figures import FIGURES
from literate.figures.positions_diagrams import (
    LEARNED,
    learned_vs_table,
    pair_index,
    partners,
    rope_pair_points,
)
from literate.parts.positions import (
    apply_rope,
    apply_rope_interleaved,
    interleaved_to_half_permutation,
    sinusoidal_table,
)


def words(name: str, language: str = "en") -> str:
    fig = FIGURES[name].draw(language=language, theme="light")
    found = " ".join(t.get_text() for t in fig.findobj(Text) if t.get_text().strip())
    plt.close(fig)
    return found


def test_the_learned_panel_stops_where_the_layer_refuses():
    r = learned_vs_table()
    n = LEARNED["max_length"]
    assert r["rows"] == n and all(len(row) == n for row in r["learned"])
    assert f"max_length={n}" in r["refusal"]
    table = sinusoidal_table(LEARNED["shown"], LEARNED["d_model"], dtype=torch.float64)
    assert r["table"][0] == table[:, 0].tolist()
    assert r["table"][1] == [math.sin(pos / 10) for pos in range(LEARNED["shown"])]
    assert f"max_length={n}" in words("positions-learned-vs-table")


def test_each_pair_turns_by_m_theta_i():
    r = rope_pair_points()
    assert r["thetas"] == pytest.approx([1.0, 0.1, 0.01, 0.001], rel=1e-6)
    for i, points in r["points"].items():
        for m, (a, b) in enumerate(points):
            angle = m * r["thetas"][i]
            assert (a, b) == pytest.approx((math.cos(angle), math.sin(angle)), abs=1e-6)


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_pairs_figure_prints_every_theta(language):
    shown = words("positions-rope-pairs", language)
    sep = "; " if language == "ru" else ", "
    thetas = sep.join(("1", "0.1", "0.01", "0.001")).replace(
        ".", "," if language == "ru" else "."
    )
    assert thetas in shown


def test_the_layouts_pair_what_the_rotations_pair():
    assert partners(apply_rope_interleaved) == [1, 0, 3, 2, 5, 4, 7, 6]
    assert partners(apply_rope) == [4, 5, 6, 7, 0, 1, 2, 3]
    assert pair_index(apply_rope_interleaved) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert pair_index(apply_rope) == [0, 1, 2, 3, 0, 1, 2, 3]
    p = interleaved_to_half_permutation(8).tolist()
    # reordering by p carries each interleaved pair onto a rotate-half pair
    half_pair, inter_pair = pair_index(apply_rope), pair_index(apply_rope_interleaved)
    assert [inter_pair[p[j]] for j in range(8)] == half_pair
    assert str(tuple(p)) in words("positions-rope-layouts")
