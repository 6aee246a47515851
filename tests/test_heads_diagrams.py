"""Chapter 3's diagrams draw what the code computes: the two heads of the page's hand
example, the KV cache a RoPE layer fills call by call, and cross-attention's T x S
weights over a padded source. Each number is checked against a second computation."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.patches import FancyArrowPatch, Rectangle

from literate.figures import FIGURES
from literate.figures.heads_diagrams import (
    CROSS_S,
    CROSS_T,
    CROSS_VALID,
    SPECS,
    cache_walk,
    cross_weights,
    two_heads_example,
)
from literate.minimal.attention import scaled_dot_product_attention
from literate.minimal.multi_head import MultiHeadAttention as MinimalMHA
from literate.minimal.multi_head import split_heads
from literate.parts.multi_head import MultiHeadAttention

CYRILLIC = re.compile("[\u0400-\u04ff]")
PAGE = Path(__file__).parents[1] / "docs" / "attention" / "multi-head.md"
NAMES = [name for name, _, _ in SPECS]
F64 = torch.float64


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(match=lambda a: hasattr(a, "get_text"))]


def cell_texts(fig, prefix: str) -> dict[tuple[int, ...], str]:
    """The text drawn at the centre of each gid-named cell, keyed by the gid's numbers."""
    out = {}
    for patch in fig.findobj(Rectangle):
        gid = patch.get_gid() or ""
        if not gid.startswith(prefix):
            continue
        key = tuple(int(x) for x in gid[len(prefix) :].split("-"))
        cx = patch.get_x() + patch.get_width() / 2
        cy = patch.get_y() + patch.get_height() / 2
        ax = patch.axes
        (label,) = [
            t.get_text()
            for t in ax.texts
            if abs(t.get_position()[0] - cx) < 1e-9
            and abs(t.get_position()[1] - cy) < 1e-9
        ]
        out[key] = label
    return out


@pytest.fixture
def draw():
    opened = []

    def _draw(name, language="en", theme="light"):
        fig = FIGURES[name].draw(language=language, theme=theme)
        opened.append(fig)
        return fig

    yield _draw
    for fig in opened:
        plt.close(fig)


@pytest.mark.parametrize("name", NAMES)
def test_the_figure_draws_in_each_language_and_theme(name, draw):
    words = {}
    for language in ("en", "ru"):
        for theme in ("light", "dark"):
            fig = draw(name, language, theme)
            words[language] = " ".join(texts(fig))
            w, h = fig.get_size_inches()
            assert w <= 5.2 and h <= 5.0
            fonts = [
                t.get_fontsize()
                for t in fig.findobj(match=lambda a: hasattr(a, "get_fontsize"))
            ]
            assert min(fonts) >= 9, (name, min(fonts))
            plt.close(fig)
    assert CYRILLIC.search(words["ru"]) and not CYRILLIC.search(words["en"])


def test_two_heads_weights_are_the_layers_and_the_hardened_layers(draw):
    ex = two_heads_example()
    # the same example through the hardened layer, which returns its weights itself
    layer = MultiHeadAttention(d_model=4, n_heads=2).double()
    with torch.no_grad():
        for proj in (layer.q_proj, layer.k_proj, layer.v_proj, layer.o_proj):
            proj.weight.copy_(torch.eye(4))
        x = torch.tensor([[[4.0, 2.0, 0.0, 0.0], [0.0, 0.0, 6.0, 2.0]]], dtype=F64)
        out, weights = layer(x, causal=True, return_weights=True)
    assert torch.allclose(ex.weights, weights[0], atol=1e-12, rtol=0)
    assert torch.allclose(ex.layer_out, out[0], atol=1e-12, rtol=0)
    assert torch.allclose(ex.outputs[0, 1], torch.tensor([2.0, 1.0], dtype=F64))
    assert torch.allclose(ex.outputs[1, 1], torch.tensor([6.0, 2.0], dtype=F64))

    fig = draw("heads-two-heads")
    cells = cell_texts(fig, "two-heads-")
    assert len(cells) == 8
    for (h, i, j), label in cells.items():
        expected = "future" if j > i else f"{weights[0, h, i, j].item():.2f}"
        assert label == expected, (h, i, j)
    words = texts(fig)
    assert "token 1 gets (2, 1)" in words and "token 1 gets (6, 2)" in words
    assert "concatenated, token 1's output: (2, 1, 6, 2)" in words


def test_the_cache_figure_is_the_cache_the_run_fills(draw):
    walk = cache_walk()
    assert walk.offsets == [0, 4, 5] and walk.filled == [4, 5, 6]
    assert all(walk.kept)
    assert walk.rotation_error < 1e-12 and walk.max_difference < 1e-12
    assert walk.cache_shape == (1, 2, 6, 8)  # [B, H_kv, T, d_head]: H_kv heads, not H

    fig = draw("heads-rope-cache")
    slots = {}
    for patch in fig.findobj(Rectangle):
        if m := re.fullmatch(r"rope-cache-(\d)-(\d)-(\w+)", patch.get_gid() or ""):
            r, s = int(m[1]), int(m[2])
            assert s < patch.get_x() + patch.get_width() / 2 < s + 1
            slots[r, s] = m[3]
    n = walk.filled[-1]
    for r, filled in enumerate(walk.filled):
        for s in range(n):
            # a slot is written by the first call whose cache reaches it, and kept after
            writer = next(i for i, f in enumerate(walk.filled) if s < f)
            assert slots[r, s] == (str(writer) if s < filled else "empty"), (r, s)
    reads = [
        a
        for a in fig.findobj(FancyArrowPatch)
        if (a.get_gid() or "").startswith("rope-cache-reads-")
    ]
    assert len(reads) == n  # the query at the last position reads every key
    words = " ".join(texts(fig))
    assert "cache.k [1, 2, 6, 8]" in words and "q@5" in words


def test_cross_weights_are_a_second_computation(draw):
    weights = cross_weights()
    assert weights.shape == (2, 4, CROSS_T, CROSS_S)  # [B, H, T, S]
    # the same weights through the minimal layer holding the hardened one's weights
    g = torch.Generator().manual_seed(0)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        hardened = MultiHeadAttention(d_model=16, n_heads=4, bias=True).double()
        minimal = MinimalMHA(d_model=16, n_heads=4).double()
    minimal.load_state_dict(hardened.state_dict())
    xt = torch.randn(2, CROSS_T, 16, dtype=F64, generator=g)
    memory = torch.randn(2, CROSS_S, 16, dtype=F64, generator=g)
    valid = torch.tensor([[s < n for s in range(CROSS_S)] for n in CROSS_VALID])
    with torch.no_grad():
        q = split_heads(minimal.q_proj(xt), 4)
        k = split_heads(minimal.k_proj(memory), 4)
        v = split_heads(minimal.v_proj(memory), 4)
        _, expected = scaled_dot_product_attention(q, k, v, valid[:, None, None, :])
    assert torch.allclose(weights, expected, atol=1e-12, rtol=0)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 4, CROSS_T, dtype=F64))
    assert torch.equal(
        weights[1, :, :, CROSS_VALID[1] :], torch.zeros(4, CROSS_T, 3, dtype=F64)
    )

    cells = cell_texts(draw("heads-cross-attention"), "cross-")
    assert len(cells) == 2 * CROSS_T * CROSS_S
    for (b, i, s), label in cells.items():
        real = s < CROSS_VALID[b]
        assert label == (f"{expected[b, 0, i, s].item():.2f}" if real else "PAD")


def test_alt_texts_state_the_numbers():
    alts = {name: alt for name, _, alt in SPECS}
    assert "(2, 1, 6, 2)" in alts["heads-two-heads"]
    assert "0.50 and 0.50" in alts["heads-two-heads"]
    assert "1 by 2 by 6 by 8" in alts["heads-rope-cache"]
    top = cross_weights()[0, 0, 0].max().item()
    assert f"{top:.2f}" in alts["heads-cross-attention"]


def test_the_page_shows_each_figure_once_outside_folds():
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    for name in NAMES:
        light = f"![](../figures/{name}-light.svg#only-light){{ .figure }}"
        (at,) = [i for i, line in enumerate(lines) if line == light]
        assert (
            lines[at + 1] == f"![](../figures/{name}-dark.svg#only-dark){{ .figure }}"
        )
        assert lines[at - 1] == "" and lines[at + 2] == ""
        assert lines[at + 3].startswith("*") and lines[at + 3].endswith("*")
