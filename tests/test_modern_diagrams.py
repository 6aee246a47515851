"""Chapter 7's diagrams draw what the code computes: the two norms of the page's vector,
the key/value head each query head of GQAttention reads, the two causal triangles of a
chunk over a longer cache, and the parameter shares of the published blocks."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.patches import Rectangle

from literate.figures import FIGURES
from literate.figures import modern_diagrams as md
from literate.numbers.catalog import PUBLISHED_BLOCKS, block_parameter_count

NAMES = [
    "modern-rmsnorm-vs-layernorm",
    "modern-gqa-sharing",
    "modern-chunk-causal",
    "modern-gemma-gain",
    "modern-block-shares",
]


def texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [
        t.get_text() for t in fig.texts
    ]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_figure_is_registered_phone_sized_and_labelled(name, language):
    fig = FIGURES[name].draw(language=language, theme="light")
    try:
        w, h = fig.get_size_inches()
        assert w <= 5.2 and h <= 5.0
        all_text = " ".join(texts(fig))
        cyrillic = any("\u0400" <= c <= "\u04ff" for c in all_text)
        assert cyrillic == (language == "ru")
    finally:
        plt.close(fig)


def test_the_norm_bars_are_the_two_layers_outputs():
    run = md.norm_run()
    x = torch.tensor(md.NORM_VECTOR, dtype=torch.float64)
    rms = x / torch.sqrt(x.pow(2).mean() + 1e-6)
    centred = x - x.mean()
    ln = centred / torch.sqrt(centred.pow(2).mean() + 1e-6)
    assert run.rms == pytest.approx(rms.tolist(), abs=1e-12)
    assert run.layer == pytest.approx(ln.tolist(), abs=1e-12)
    assert (run.root_mean_square, run.mean) == pytest.approx((2.5, 1.75))
    fig = md.rmsnorm_figure()
    try:
        (ax,) = fig.axes
        heights = {
            round(p.get_height(), 12) for container in ax.containers for p in container
        }
        assert heights == {round(v, 12) for v in (*run.rms, *run.layer)}
        shown = texts(fig)
        for v in (*run.rms, *run.layer):
            assert md._num(v, "en") in shown
        assert "RMSNorm: $x$ / RMS 2.50" in shown
        assert "LayerNorm: ($x$ \u2212 1.75) / σ 1.79" in shown
    finally:
        plt.close(fig)


@pytest.mark.parametrize("n_heads, n_kv_heads", [(4, 2), (6, 2), (4, 1), (4, 4)])
def test_each_query_head_reads_the_key_value_head_of_its_group(n_heads, n_kv_heads):
    run = md.gqa_run(d_model=8 * n_heads, n_heads=n_heads, n_kv_heads=n_kv_heads)
    group = n_heads // n_kv_heads
    assert run.reads == tuple(h // group for h in range(n_heads))
    assert run.shapes["k_proj.weight"] == (n_kv_heads * 8, 8 * n_heads)


def test_the_gqa_figure_draws_the_layers_shapes_and_groups():
    run = md.gqa_run()
    assert run.reads == (0, 0, 1, 1) and run.d_head == 8
    fig = md.gqa_figure()
    try:
        (ax,) = fig.axes
        lines = sorted(line.get_gid() for line in ax.lines)
        assert lines == [f"reads-{h}-{j}" for h, j in enumerate(run.reads)]
        shown = texts(fig)
        assert "query heads ($W_q$ 32 × 32)" in shown
        assert "key/value heads ($W_k$, $W_v$ 16 × 32 each)" in shown
        assert [s for s in shown if "RoPE" in s and s.startswith("$")] == [
            "$q_0$ + RoPE",
            "$q_1$ + RoPE",
            "$q_2$ + RoPE",
            "$q_3$ + RoPE",
            "$k_0$ + RoPE",
            "$k_1$ + RoPE",
        ]
        assert "$v_0$" in shown and "$v_1$" in shown
    finally:
        plt.close(fig)


def test_is_causal_is_top_left_and_the_chunk_needs_bottom_right():
    masks = md.chunk_masks()
    ones = torch.ones(3, 8, dtype=torch.bool)
    assert torch.equal(masks["is_causal"], ones.tril())
    assert torch.equal(masks["bottom_right"], ones.tril(diagonal=5))
    fig = md.chunk_figure()
    try:
        (ax,) = fig.axes
        cells = [p.get_gid() for p in ax.patches if isinstance(p, Rectangle)]
        for name, mask in masks.items():
            for i in range(3):
                for j in range(8):
                    assert f"{name}-{i}-{j}-{int(mask[i, j])}" in cells
        assert len(cells) == 2 * 3 * 8
        assert {"query 5", "query 6", "query 7", "cache", "chunk"} <= set(texts(fig))
    finally:
        plt.close(fig)


def test_the_shares_are_the_published_blocks_counts():
    shares = md.block_shares()
    assert [s.model for s in shares] == [spec.name for spec in PUBLISHED_BLOCKS]
    for s, spec in zip(shares, PUBLISHED_BLOCKS):
        assert s.total == block_parameter_count(spec)
        q, kv = spec.n_heads * spec.d_head, spec.n_kv_heads * spec.d_head
        matrices = 3 if spec.ffn == "gated" else 2
        assert s.ffn >= matrices * spec.d_model * spec.d_ff
        assert s.attention >= 2 * spec.d_model * (q + kv)
        assert s.norms / s.total < md._norm_ceiling(shares)
    fig = md.shares_figure()
    try:
        (ax,) = fig.axes
        shown = texts(fig)
        for r, s in enumerate(shares):
            assert s.model in shown
            assert f"{round(s.total / 1e6)} M" in shown
            for part in ("attention", "ffn"):
                (bar,) = [p for p in ax.patches if p.get_gid() == f"share-{r}-{part}"]
                assert bar.get_width() == pytest.approx(
                    md.BAR_W * getattr(s, part) / s.total
                )
    finally:
        plt.close(fig)


def test_the_gain_staircase_is_bfloat16s_own_rounding():
    run = md.gain_run()
    assert run.lost == (-(2.0**-9), 2.0**-8)
    assert run.example_rounded == 1.0 and abs(run.example - 1e-3) < 2**-17
    exact = 1 + run.w.double()
    # bfloat16 keeps 8 significant bits: 1 + w rounds to a multiple of 2^-8 below 1
    # and of 2^-7 from 1 up, the nearest one
    assert ((run.rounded.double() - exact).abs() <= 2.0**-8).all()
    below, above = run.rounded < 1, run.rounded >= 1
    assert torch.equal(run.rounded[below] * 2**8, (run.rounded[below] * 2**8).round())
    assert torch.equal(run.rounded[above] * 2**7, (run.rounded[above] * 2**7).round())
    fig = md.gain_figure()
    try:
        (ax,) = fig.axes
        (step,) = [line for line in ax.lines if line.get_gid() == "bf16"]
        assert torch.equal(torch.tensor(step.get_ydata()), run.rounded)
        assert "$1 + w = 1$ for $w$ from $-2^{-9}$ to $2^{-8}$ (shaded)" in texts(fig)
    finally:
        plt.close(fig)
