"""Chapter 10's diagrams draw what the code computes: the ring's slots are what a ring
cache holds after the same writes, MLA's widths are DeepSeek-V3's published ones, and
YaRN's divisors are the code's frequencies, unscaled over scaled."""

from __future__ import annotations

import math
import re

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.colors import to_hex
from matplotlib.text import Text

from literate.figures import FIGURES, long_diagrams
from literate.figures.style import ORANGE
from literate.minimal.window import RingKVCache as MinimalRing
from literate.numbers.cache_ledger import published_cache
from literate.numbers.published import published_config
from literate.parts.rope_scaling import yarn_inverse_frequencies
from literate.parts.window import RingKVCache

NAMES = ("ring-cache", "mla-compression", "yarn-divisor")
GROUPING = r"(?<=\d)[,\u2009](?=\d{3})"  # 40,960 and 40\u2009960: one number


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text().strip()]


def gid_texts(fig) -> dict[str, str]:
    return {t.get_gid(): t.get_text() for t in fig.findobj(Text) if t.get_gid()}


def test_the_three_figures_are_registered_from_this_module():
    for name in NAMES:
        assert name in FIGURES
        assert FIGURES[name].draw.__module__ == long_diagrams.__name__


# ---------------------------------------------------------------------------------------
# The ring


def minimal_ring_after(p: int, window: int) -> list[int | None]:
    """What the page's RingKVCache holds after positions 0 .. p are written, each as
    its own number: the filled slots, then None for the empty ones."""
    ring = MinimalRing(batch=1, n_kv_heads=1, d_head=1, window=window)
    for q in range(p + 1):
        k, _ = ring.update(torch.full((1, 1, 1, 1), float(q)), torch.zeros(1, 1, 1, 1))
    held = [int(x) for x in k.flatten().tolist()]
    return held + [None] * (window - len(held))


def hardened_ring_after(p: int, window: int) -> list[int | None]:
    """The positions the site's RingKVCache stores per slot after the same writes
    (-1, an empty slot, as None)."""
    ring = RingKVCache(1, 1, 100, 1, window=window)
    for q in range(p + 1):
        x = torch.full((1, 1, 1, 1), float(q))
        ring.append(x, x)
    return [None if q < 0 else q for q in ring.positions.tolist()]


def test_the_snapshots_are_what_both_rings_hold():
    w = long_diagrams.RING_WINDOW
    snapshots = long_diagrams.ring_snapshots()
    assert [s.position for s in snapshots] == list(range(long_diagrams.RING_POSITIONS))
    for s in snapshots:
        slots = list(s.slots)
        assert slots == minimal_ring_after(s.position, w)
        assert slots == hardened_ring_after(s.position, w)
        assert s.written == s.position % w and slots[s.written] == s.position
        assert s.forgotten == tuple(range(max(0, s.position - w + 1)))


def test_the_ring_figure_draws_the_slots_the_cache_holds():
    w = long_diagrams.RING_WINDOW
    fig = FIGURES["ring-cache"].draw(language="en", theme="light")
    try:
        drawn = gid_texts(fig)
        assert long_diagrams.RING_SHOWN == (2, 3, 4, 5, 6, 9)
        for p in long_diagrams.RING_SHOWN:
            held = minimal_ring_after(p, w)
            for j in range(w):
                want = "·" if held[j] is None else str(held[j])
                assert drawn[f"ring-p{p}-slot{j}"] == want, (p, j)
            gone = [q for q in range(p + 1) if q not in held]
            assert drawn[f"ring-p{p}-gone"] == long_diagrams._span(tuple(gone))
        assert drawn["ring-p9-gone"] == "0–5" and drawn["ring-p4-gone"] == "0"
        words = texts(fig)
        assert all(f"write p = {p}" in words for p in long_diagrams.RING_SHOWN)
        # the slot written is the orange one, outlined
        orange = [
            a
            for a in fig.axes[0].patches
            if to_hex(a.get_facecolor()) == ORANGE.lower()
        ]
        assert len(orange) == len(long_diagrams.RING_SHOWN)
    finally:
        plt.close(fig)


# ---------------------------------------------------------------------------------------
# MLA


def test_the_mla_widths_are_the_published_configs():
    c = published_config("DeepSeek-V3")
    m = long_diagrams.mla_widths()
    assert (
        m.d_model,
        m.n_heads,
        m.kv_lora_rank,
        m.qk_nope_head_dim,
        m.qk_rope_head_dim,
        m.v_head_dim,
    ) == (
        c.hidden_size,
        c.num_attention_heads,
        c.kv_lora_rank,
        c.qk_nope_head_dim,
        c.qk_rope_head_dim,
        c.v_head_dim,
    )
    assert m.latent_floats == c.kv_lora_rank + c.qk_rope_head_dim == 576
    assert m.latent_floats == published_cache("DeepSeek-V3").width
    heads = c.num_attention_heads
    qk = c.qk_nope_head_dim + c.qk_rope_head_dim
    assert m.mha_floats == heads * (qk + c.v_head_dim) == 40_960


def test_the_mla_figure_prints_the_widths_and_the_cache_floats():
    m = long_diagrams.mla_widths()
    fig = FIGURES["mla-compression"].draw(language="en", theme="light")
    try:
        words = "\n".join(texts(fig))
        assert f"hidden $h$\n{m.d_model:,}" in words
        assert f"latent $c$  {m.kv_lora_rank}" in words
        assert f"$k_{{rope}}$  {m.qk_rope_head_dim}" in words
        assert (
            f"cached: {m.kv_lora_rank} + {m.qk_rope_head_dim} = {m.latent_floats} "
            "floats" in words
        )
        assert (
            f"K: {m.n_heads} heads ×\n({m.qk_nope_head_dim} + {m.qk_rope_head_dim} "
            "shared)" in words
        )
        assert f"V: {m.n_heads} heads × {m.v_head_dim}" in words
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        assert (
            f"MHA, same heads: {m.n_heads} × ({qk} + {m.v_head_dim}) = "
            f"{m.mha_floats:,}" in words
        )
        ratio = round(m.mha_floats / m.latent_floats)
        assert ratio == 71
        assert gid_texts(fig)["mla-latent-floats"] == (
            f"MLA: {m.latent_floats}  ({ratio}× fewer)"
        )
        # the two bars to scale
        bars = sorted(
            (a for a in fig.axes[0].patches if type(a).__name__ == "Rectangle"),
            key=lambda a: a.get_width(),
        )
        assert len(bars) == 2
        assert bars[0].get_width() / bars[1].get_width() == pytest.approx(
            m.latent_floats / m.mha_floats, rel=1e-12
        )
    finally:
        plt.close(fig)


# ---------------------------------------------------------------------------------------
# YaRN


def deepseek_yarn_ratio() -> list[float]:
    """The code's frequencies for DeepSeek-V3's published YaRN, without the stretch
    over with it."""
    from literate.models.deepseek_v3 import deepseek_rope

    rope, _ = deepseek_rope(published_config("DeepSeek-V3"))
    scaled = yarn_inverse_frequencies(rope.rotary_dim, base=rope.base, **rope.yarn)
    plain = 1.0 / (
        rope.base ** (torch.arange(0, rope.rotary_dim, 2).double() / rope.rotary_dim)
    )
    return (plain / scaled.double()).tolist()


def test_the_yarn_curve_is_the_codes_frequency_ratio():
    y = long_diagrams.yarn_divisors()
    c = published_config("DeepSeek-V3")
    settings = c.rope_parameters
    assert y.factor == settings["factor"] == 40
    assert y.original_context == settings["original_max_position_embeddings"] == 4096
    assert (y.beta_fast, y.beta_slow) == (settings["beta_fast"], settings["beta_slow"])
    ratio = deepseek_yarn_ratio()
    assert len(y.divisors) == c.qk_rope_head_dim // 2 == 32
    assert y.divisors == pytest.approx(ratio, rel=1e-6)
    assert y.divisors[0] == 1.0 and y.divisors[-1] == pytest.approx(40, rel=1e-6)
    assert all(a <= b * (1 + 1e-6) for a, b in zip(y.divisors, y.divisors[1:]))


def test_the_ramps_ends_are_where_the_turns_cross_the_betas():
    """The last pair kept turns at least beta_fast times over the original context and
    the next fewer; the first divided by the whole factor turns fewer than beta_slow
    times and the one before it more (the ends rounded outwards, as the code does)."""
    y = long_diagrams.yarn_divisors()
    assert (y.last_kept, y.first_divided) == (10, 23)
    c = published_config("DeepSeek-V3")
    base, d = c.rope_parameters["rope_theta"], c.qk_rope_head_dim
    theta = [base ** (-2 * i / d) for i in range(d // 2)]
    turns = [y.original_context * th / (2 * math.pi) for th in theta]
    assert turns[y.last_kept] >= y.beta_fast > turns[y.last_kept + 1]
    assert turns[y.first_divided - 1] > y.beta_slow > turns[y.first_divided]
    assert all(d == 1.0 for d in y.divisors[: y.last_kept + 1])
    assert y.divisors[y.last_kept + 1] > 1.05
    assert y.divisors[y.first_divided - 1] < 0.5 * y.factor
    assert all(d == pytest.approx(40, rel=1e-6) for d in y.divisors[y.first_divided :])


def test_the_yarn_figure_draws_the_curve_and_marks_the_ramp():
    y = long_diagrams.yarn_divisors()
    fig = FIGURES["yarn-divisor"].draw(language="en", theme="light")
    try:
        ax = fig.axes[0]
        (curve,) = [line for line in ax.lines if line.get_marker() == "o"]
        assert list(curve.get_xdata()) == list(range(32))
        assert list(curve.get_ydata()) == pytest.approx(deepseek_yarn_ratio(), rel=1e-6)
        verticals = sorted(
            line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == "--"
        )
        assert verticals == [y.last_kept, y.first_divided]
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        assert ticks == [
            "0",
            "10\n$\\beta_{fast}$ = 32",
            "23\n$\\beta_{slow}$ = 1",
            "31",
        ]
        assert "divided\nby $s$ = 40" in texts(fig)
        assert "kept: > 32\nturns in 4,096" in texts(fig)
    finally:
        plt.close(fig)


# ---------------------------------------------------------------------------------------
# Both languages, and the alt texts' numbers


@pytest.mark.parametrize("name", NAMES)
def test_each_figure_draws_in_russian_with_the_same_numbers(name):
    figs = {
        lang: FIGURES[name].draw(language=lang, theme="light")
        for lang in "en ru".split()
    }
    try:
        digits = {
            lang: sorted(re.findall(r"\d+", re.sub(GROUPING, "", " ".join(texts(fig)))))
            for lang, fig in figs.items()
        }
        assert digits["en"] == digits["ru"]
        assert re.search("[а-я]", " ".join(texts(figs["ru"])))
        for fig in figs.values():
            width, height = fig.get_size_inches()
            assert width <= 5.2 and height <= 5.0
            sizes = [
                t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip()
            ]
            assert min(sizes) * 358 / (72 * width) >= 9
    finally:
        for fig in figs.values():
            plt.close(fig)


def test_the_alt_texts_state_the_numbers_the_code_gives():
    ring = {s.position: s for s in long_diagrams.ring_snapshots()}
    alt = FIGURES["ring-cache"].alt
    assert "After p = 9: 8, 9, 6, 7" in alt
    assert list(ring[9].slots) == [8, 9, 6, 7] and ring[9].forgotten == tuple(range(6))
    assert list(ring[5].slots) == [4, 5, 2, 3] and list(ring[6].slots) == [4, 5, 6, 3]
    m = long_diagrams.mla_widths()
    alt = FIGURES["mla-compression"].alt
    for number in (m.d_model, m.latent_floats, m.mha_floats):
        assert f"{number:,}" in alt
    assert f"{round(m.mha_floats / m.latent_floats)} times as many" in alt
    y = long_diagrams.yarn_divisors()
    alt = FIGURES["yarn-divisor"].alt
    assert f"1 for pairs 0 to {y.last_kept}" in alt
    assert f"40 for pairs {y.first_divided} to 31" in alt
    assert f"{y.divisors[11]:.2f} at pair 11" in alt
    assert f"{y.divisors[18]:.1f} at pair 18" in alt
    assert f"{y.divisors[22]:.0f} at pair 22" in alt
