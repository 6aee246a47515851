"""Chapters 1 and 3's diagrams draw what the code computes: the one-token figure prints
the weights `scaled_dot_product_attention` gives the page's worked example, and the
heads figure the shapes `GQAttention` makes; neither types a number a run produces."""

from __future__ import annotations

import ast
import math
import re

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from matplotlib.text import Text

from literate.figures import FIGURES, attention_diagrams
from literate.figures.attention_diagrams import (
    AXES,
    EXAMPLE_K,
    EXAMPLE_Q,
    EXAMPLE_V,
    QUERY,
    SPLIT_CONFIG,
    shape_text,
)
from literate.minimal.attention import scaled_dot_product_attention
from literate.minimal.multi_head import GQAttention, merge_heads, split_heads
from literate.site.docblocks import ROOT

NAMES = ("attention-one-token", "heads-split")
LABEL = re.compile(
    r"(?:score|оценка) (?P<s>\S+)\n(?:weight|вес) (?P<w>\S+)"
)  # an arrow's label
SHAPE = re.compile(r"\[\d+(?:, \d+)*\]")
# The drawing order of the heads figure's shapes: the input, the query lane, the
# key/value lane, attention, the merge, o_proj.
STAGES = (
    "x",
    "q_proj",
    "q_view",
    "q_heads",
    "k_proj",
    "k_view",
    "k_heads",
    "kv_repeated",
    "weights",
    "heads_out",
    "merge_transpose",
    "merged",
    "out",
)


def texts(fig) -> list[Text]:
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def value(s: str) -> float:
    """'0,40' or '0.40' (or '−0.40') -> 0.4."""
    return float(s.replace(",", ".").replace("\u2212", "-"))


def example() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return tuple(
        torch.tensor(rows, dtype=torch.float64)
        for rows in (EXAMPLE_Q, EXAMPLE_K, EXAMPLE_V)
    )


def fresh_call(attention=scaled_dot_product_attention) -> dict[str, list[float]]:
    """Query QUERY's weights and output from a fresh call, and its scores computed
    here from the formula."""
    q, k, v = example()
    out, weights = attention(q, k, v)
    scores = (q @ k.T / math.sqrt(q.shape[-1]))[QUERY]
    return {
        "scores": scores.tolist(),
        "weights": weights[QUERY].tolist(),
        "output": out[QUERY].tolist(),
    }


def unscaled_attention(q, k, v, allowed=None):
    """The mutant: chapter 1's function without the 1 / sqrt(d_k)."""
    weights = (q @ k.transpose(-2, -1)).softmax(dim=-1)
    return weights @ v, weights


def drawn_arrows(fig) -> tuple[list[float], list[float]]:
    """The scores and weights the one-token figure prints, token by token."""
    labels = [m for t in texts(fig) if (m := LABEL.fullmatch(t.get_text()))]
    return [value(m["s"]) for m in labels], [value(m["w"]) for m in labels]


def drawn_output(fig) -> tuple[list[float], list[float]]:
    """The weights of the output's sum and the output vector, as printed."""
    (label,) = [t.get_text() for t in texts(fig) if " + " in t.get_text()]
    terms = re.findall(r"(\d+[.,]\d+) \$v_\d\$", label)
    vector = re.search(r"= \((\S+)[,;] (\S+)\)$", label)
    return [value(w) for w in terms], [value(x) for x in vector.groups()]


@pytest.mark.parametrize("name", NAMES)
def test_the_figures_are_registered_and_legible_on_a_phone(name):
    """At most 5.2 x 5 inches, and every font at least 9 px when the figure is shown
    358 px wide: f * 358 / (72 * width) >= 9."""
    for language in ("en", "ru"):
        fig = FIGURES[name].draw(language=language, theme="light")
        width, height = fig.get_size_inches()
        assert width <= 5.2 and height <= 5.0, (name, width, height)
        for t in texts(fig):
            assert t.get_fontsize() * 358 / (72 * width) >= 9, (name, t.get_text())
        plt.close(fig)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("language", ["en", "ru"])
def test_every_label_lies_inside_the_figure_and_inside_its_box(name, language):
    fig = FIGURES[name].draw(language=language, theme="light")
    renderer = fig.canvas.get_renderer()
    page = fig.bbox
    boxes = [
        p.get_window_extent(renderer)
        for p in fig.findobj(FancyBboxPatch)
        if p.get_visible() and p is not fig.patch
    ]
    for t in texts(fig):
        extent = t.get_window_extent(renderer)
        assert page.x0 <= extent.x0 and extent.x1 <= page.x1, t.get_text()
        assert page.y0 <= extent.y0 and extent.y1 <= page.y1, t.get_text()
        centre = ((extent.x0 + extent.x1) / 2, (extent.y0 + extent.y1) / 2)
        for box in boxes:
            if box.contains(*centre):
                assert box.x0 <= extent.x0 and extent.x1 <= box.x1, t.get_text()
                assert box.y0 <= extent.y0 and extent.y1 <= box.y1, t.get_text()
    others = texts(fig)
    for i, a in enumerate(others):
        for b in others[i + 1 :]:
            assert not a.get_window_extent(renderer).overlaps(
                b.get_window_extent(renderer)
            ), (a.get_text(), b.get_text())
    plt.close(fig)


def test_the_example_is_the_pages_by_hand_example():
    """The figure draws the three tokens chapter 1 works out by hand, and its query."""
    page = (ROOT / "docs" / "attention" / "scaled-dot-product.md").read_text("utf-8")
    by_hand = page[page.index("By hand: three tokens") :]
    tensors = {
        name: ast.literal_eval(rows)
        for name, rows in re.findall(
            r"^(q|k|v) = torch\.tensor\((\[\[.*?\]\]), dtype", by_hand, re.M
        )[:3]
    }
    assert tensors["q"] == [list(r) for r in EXAMPLE_Q]
    assert tensors["k"] == [list(r) for r in EXAMPLE_K]
    assert tensors["v"] == [list(r) for r in EXAMPLE_V]
    q = EXAMPLE_Q[QUERY]
    assert f"Row {QUERY} is query $q_{QUERY} = ({q[0]:g}, {q[1]:g})$" in by_hand


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_printed_weights_are_a_fresh_call_and_sum_to_one(language):
    fig = FIGURES["attention-one-token"].draw(language=language, theme="light")
    scores, weights = drawn_arrows(fig)
    terms, output = drawn_output(fig)
    plt.close(fig)
    fresh = fresh_call()
    assert len(weights) == len(EXAMPLE_K) == 3
    assert math.fsum(fresh["weights"]) == pytest.approx(1, abs=1e-12)
    assert math.fsum(weights) == pytest.approx(1, abs=0.015)  # three roundings
    assert weights == [round(w, 2) for w in fresh["weights"]]
    assert terms == weights  # the output's sum uses the arrows' weights
    assert scores == [round(s, 2) for s in fresh["scores"]]
    assert output == [round(x, 2) for x in fresh["output"]]
    # and what the page's prose says of them
    assert [round(w, 1) for w in weights] == [0.2, 0.4, 0.4]
    assert [round(x, 1) for x in output] == [1.4, 1.2]


def test_each_arrow_is_as_thick_as_its_weight():
    fig = FIGURES["attention-one-token"].draw(language="en", theme="light")
    arrows = {a.get_label(): a.get_linewidth() for a in fig.findobj(FancyArrowPatch)}
    plt.close(fig)
    weights = fresh_call()["weights"]
    for name in ("weight", "value"):
        widths = [arrows[f"{name} {j}"] for j in range(len(weights))]
        # one straight line through (weight, width): thickness proportional to weight
        slope = (widths[1] - widths[0]) / (weights[1] - weights[0])
        assert slope > 0
        for w, lw in zip(weights, widths):
            assert lw == pytest.approx(widths[0] + slope * (w - weights[0]), abs=1e-9)


def test_dropping_the_scale_changes_the_weights_the_test_expects(monkeypatch):
    """Without 1 / sqrt(d_k) the weights are 0.16, 0.42, 0.42, not 0.20, 0.40, 0.40: a
    figure drawn from such a function fails the comparison with a fresh call."""
    right = [round(w, 2) for w in fresh_call()["weights"]]
    wrong = [round(w, 2) for w in fresh_call(unscaled_attention)["weights"]]
    assert wrong != right and wrong == [0.16, 0.42, 0.42]
    monkeypatch.setattr(
        attention_diagrams, "scaled_dot_product_attention", unscaled_attention
    )
    fig = FIGURES["attention-one-token"].draw(language="en", theme="light")
    _, weights = drawn_arrows(fig)
    plt.close(fig)
    assert weights == wrong != right


def test_the_one_token_alt_text_states_the_computed_numbers():
    alt = FIGURES["attention-one-token"].alt
    fresh = fresh_call()
    for j, (s, w) in enumerate(zip(fresh["scores"], fresh["weights"])):
        assert f"token {j} score {s:.2f}, weight {w:.2f}" in alt
    x, y = fresh["output"]
    terms = " + ".join(f"{w:.2f} v{j}" for j, w in enumerate(fresh["weights"]))
    assert f"{terms} = ({x:.2f}, {y:.2f})" in alt
    assert f"q{QUERY} = ({EXAMPLE_Q[QUERY][0]:g}, {EXAMPLE_Q[QUERY][1]:g})" in alt


def expected_shapes(config=SPLIT_CONFIG) -> dict[str, tuple[int, ...]]:
    """Each stage's shape from the layer's own parts, called one by one here."""
    c = config
    layer = GQAttention(
        d_model=c["d_model"], n_heads=c["n_heads"], n_kv_heads=c["n_kv_heads"]
    )
    x = torch.randn(c["batch"], c["length"], c["d_model"])
    group = c["n_heads"] // c["n_kv_heads"]
    with torch.no_grad():
        q = split_heads(layer.q_proj(x), c["n_heads"])
        k = split_heads(layer.k_proj(x), c["n_kv_heads"])
        k_repeated = k.repeat_interleave(group, dim=1)
        out, weights = scaled_dot_product_attention(q, k_repeated, k_repeated)
        shapes = {
            "x": x.shape,
            "q_proj": layer.q_proj(x).shape,
            "q_view": q.transpose(1, 2).shape,  # the view before the transpose
            "q_heads": q.shape,
            "k_proj": layer.k_proj(x).shape,
            "k_view": k.transpose(1, 2).shape,
            "k_heads": k.shape,
            "kv_repeated": k_repeated.shape,
            "weights": weights.shape,
            "heads_out": out.shape,
            "merge_transpose": out.transpose(1, 2).shape,
            "merged": merge_heads(out).shape,
            "out": layer(x).shape,
        }
    return {stage: tuple(shape) for stage, shape in shapes.items()}


def symbolic_shapes(config=SPLIT_CONFIG) -> dict[str, tuple[int, ...]]:
    """Each stage's axes as AXES names them, with the config's sizes."""
    c = config
    d_head = c["d_model"] // c["n_heads"]
    sizes = {
        "B": c["batch"],
        "T": c["length"],
        "H": c["n_heads"],
        "H_{kv}": c["n_kv_heads"],
        "d_{head}": d_head,
        "d_{model}": c["d_model"],
    }

    def size(axis: str) -> int:
        return math.prod(sizes[a] for a in axis.strip().split("\\,"))

    return {
        stage: tuple(size(a) for a in AXES[stage].strip("$[]").split(", "))
        for stage in STAGES
    }


def drawn_shapes(fig) -> list[tuple[int, ...]]:
    found = [m for t in texts(fig) for m in SHAPE.findall(t.get_text())]
    return [tuple(int(n) for n in m.strip("[]").split(", ")) for m in found]


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_drawn_shapes_are_the_layers(language):
    fig = FIGURES["heads-split"].draw(language=language, theme="light")
    drawn = drawn_shapes(fig)
    labels = " ".join(t.get_text() for t in texts(fig))
    plt.close(fig)
    expected = expected_shapes()
    assert expected == symbolic_shapes()  # the axes drawn name the right sizes
    assert drawn == [expected[stage] for stage in STAGES]
    for stage in STAGES:  # each shape next to its axes
        assert f"{AXES[stage]}  {shape_text(expected[stage])}" in labels, stage
    # every size differs, so each number in a shape names one axis
    c = SPLIT_CONFIG
    sizes = [*c.values(), c["d_model"] // c["n_heads"]]
    assert len(set(sizes)) == len(sizes)
    # the values' side is the keys' side, drawn once
    traced = attention_diagrams.traced_shapes()
    for part in ("proj", "view", "heads"):
        assert traced[f"v_{part}"] == traced[f"k_{part}"]


def test_the_shapes_follow_the_config_not_typed_numbers(monkeypatch):
    """Another grouping (3 key/value heads, G = 2) draws other shapes, the layer's."""
    monkeypatch.setitem(SPLIT_CONFIG, "n_kv_heads", 3)
    fig = FIGURES["heads-split"].draw(language="en", theme="light")
    drawn = drawn_shapes(fig)
    labels = " ".join(t.get_text() for t in texts(fig))
    plt.close(fig)
    expected = expected_shapes()
    assert expected["k_heads"] == (1, 3, 5, 4)
    assert drawn == [expected[stage] for stage in STAGES]
    assert "×2" in labels and "×3" not in labels


def test_the_heads_alt_text_states_the_computed_shapes():
    alt = FIGURES["heads-split"].alt
    expected = expected_shapes()
    tuples = [
        tuple(int(n) for n in m.split(", "))
        for m in re.findall(r"\((\d+(?:, \d+)+)\)", alt)
    ]
    assert tuples == [expected[stage] for stage in STAGES]
    c = SPLIT_CONFIG
    for said in (
        f"B = {c['batch']} sequence",
        f"T = {c['length']} tokens",
        f"d_model = {c['d_model']}",
        f"H = {c['n_heads']} query heads",
        f"H_kv = {c['n_kv_heads']} key/value heads",
        f"d_head = {c['d_model'] // c['n_heads']}",
        f"{c['n_heads'] // c['n_kv_heads']} times",
    ):
        assert said in alt, said
