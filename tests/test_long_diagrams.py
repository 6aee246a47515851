"""Chapter 10's diagrams draw what the code computes: the ring's slots are what a ring
cache holds after the same writes, MLA's widths are DeepSeek-V3's published ones, and
YaRN's divisors are the code's frequencies, unscaled over scaled."""

from __future__ import annotations

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
from literate.parts.window import RingKVCache

NAMES = ("ring-cache", "mla-compression")
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
