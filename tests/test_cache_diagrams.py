"""Chapter 8's "cache-buffers" figure draws what the KV cache holds: its slots, next_pos,
the padding flags and the keys the last query reads, read from a real cache after the
same calls, never typed."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.patches import FancyArrowPatch, Rectangle
from matplotlib.text import Text

from literate.figures import FIGURES, cache_diagrams
from literate.figures.cache_diagrams import (
    CAPACITY,
    DECODE_STEPS,
    PROMPT_LENGTHS,
    cache_walk,
    slot_kind,
)
from literate.parts.cache import DecodeCache, KVCache

CYRILLIC = re.compile("[\u0400-\u04ff]")
PAGE = Path(__file__).parents[1] / "docs" / "decoding" / "kv-cache.md"


def replayed_cache() -> DecodeCache:
    """The figure's calls again, on a bare cache: flags from `advance`, keys and values
    of ones appended by `KVCache.append` (no attention layer)."""
    b, t0 = len(PROMPT_LENGTHS), max(PROMPT_LENGTHS)
    layer = KVCache(b, 1, CAPACITY, 4, dtype=torch.float64)
    cache = DecodeCache([layer])
    valid = torch.tensor([[s >= t0 - n for s in range(t0)] for n in PROMPT_LENGTHS])
    for t, flags in [(t0, valid)] + [(1, None)] * DECODE_STEPS:
        cache.advance(t, flags)
        ones = torch.ones(b, 1, t, 4, dtype=torch.float64)
        layer.append(ones, ones)
    return cache


def drawn_slots(fig) -> dict[tuple[int, int], str]:
    """(row, slot) -> the kind its rectangle is drawn as, from the gids, each rectangle
    checked to stand in its slot's column."""
    slots = {}
    for patch in fig.findobj(Rectangle):
        gid = patch.get_gid() or ""
        if m := re.fullmatch(r"cache-(prompt|decoded|pad|empty)-(\d+)-(\d+)", gid):
            kind, b, s = m[1], int(m[2]), int(m[3])
            assert s < patch.get_x() + patch.get_width() / 2 < s + 1, gid
            slots[b, s] = kind
    return slots


def drawn_next_pos(fig) -> tuple[int, float]:
    """The slot the next_pos arrow names in its gid, and the x its tip points at."""
    (arrow,) = [
        a
        for a in fig.findobj(FancyArrowPatch)
        if (a.get_gid() or "").startswith("cache-next-pos-")
    ]
    n = int(arrow.get_gid().rsplit("-", 1)[1])
    tip_x = arrow._posA_posB[1][0]
    return n, tip_x


@pytest.fixture(scope="module")
def walk():
    return cache_walk()


@pytest.fixture
def figure():
    fig = FIGURES["cache-buffers"].draw(language="en", theme="light")
    yield fig
    plt.close(fig)


def test_the_walk_reads_what_a_replayed_cache_reports(walk):
    cache = replayed_cache()
    n = cache.next_pos
    assert walk.next_pos == n == max(PROMPT_LENGTHS) + DECODE_STEPS
    assert walk.next_pos_after == tuple(
        max(PROMPT_LENGTHS) + i for i in range(DECODE_STEPS + 1)
    )
    filled = (cache.layers[0].k != 0).any(dim=-1).any(dim=1)  # [B, capacity]
    assert [list(r) for r in walk.written] == filled.tolist()
    assert [list(r[:n]) for r in walk.valid] == cache.valid[:, :n].tolist()
    assert walk.shape == (len(PROMPT_LENGTHS), 1, CAPACITY, 4)


def test_the_drawn_slots_are_the_cache_slots(walk, figure):
    cache = replayed_cache()
    n = cache.next_pos
    filled = (cache.layers[0].k != 0).any(dim=-1).any(dim=1)
    slots = drawn_slots(figure)
    assert set(slots) == {
        (b, s) for b in range(cache.valid.shape[0]) for s in range(CAPACITY)
    }
    for (b, s), kind in slots.items():
        assert (kind != "empty") == bool(filled[b, s]) == (s < n)
        assert kind == slot_kind(walk, b, s)
        if kind in ("prompt", "decoded"):
            assert (kind == "prompt") == (s < max(PROMPT_LENGTHS))


def test_the_padded_slots_are_exactly_the_padding_masks_false_entries(figure):
    cache = replayed_cache()
    n = cache.next_pos
    pads = {key for key, kind in drawn_slots(figure).items() if kind == "pad"}
    assert pads == {tuple(i) for i in (~cache.valid[:, :n]).nonzero().tolist()}
    assert pads == {(1, 0), (1, 1)}  # row 1: 3 tokens left-padded to 5


def test_next_pos_is_drawn_at_the_first_unwritten_slot(figure):
    """Off by one either way fails: the slot the arrow points at must be empty in every
    row, and the one before it filled."""
    cache = replayed_cache()
    n, tip_x = drawn_next_pos(figure)
    assert n == cache.next_pos
    assert n < tip_x < n + 1
    slots = drawn_slots(figure)
    rows = range(len(PROMPT_LENGTHS))
    assert all(slots[b, n] == "empty" for b in rows)
    assert all(slots[b, n - 1] != "empty" for b in rows)
    labels = [
        t.get_text() for t in figure.findobj(match=lambda a: hasattr(a, "get_text"))
    ]
    assert f"next_pos = {cache.next_pos}: the next token's slot" in labels


def test_each_row_reads_its_real_slots_and_no_padding(walk, figure):
    """The weights the layer gave the last query: > 0 exactly on the real slots before
    next_pos; the bracket under each row spans them."""
    cache = replayed_cache()
    n = cache.next_pos
    for b in range(len(PROMPT_LENGTHS)):
        assert list(walk.reads[b][:n]) == cache.valid[b, :n].tolist()
        assert not any(walk.reads[b][n:])
    gids = {line.get_gid() for line in figure.axes[0].lines if line.get_gid()}
    assert gids == {"cache-reads-0-0-6", "cache-reads-1-2-6"}
    for gid in gids:
        b, lo, hi = map(int, gid.split("-")[2:])
        assert [walk.valid[b][s] for s in range(lo, hi + 1)] == [True] * (hi - lo + 1)
        assert lo == 0 or not walk.valid[b][lo - 1]
        assert hi == n - 1


def test_the_drawn_positions_count_real_tokens_only(walk, figure):
    """Each real slot shows the position `advance` gave its token: the real tokens
    before it in its row."""
    assert walk.position[0][:7] == tuple(range(7))
    assert walk.position[1][:7] == (None, None, 0, 1, 2, 3, 4)
    cache = replayed_cache()
    expected = cache.valid.long().cumsum(dim=1) - 1
    n = cache.next_pos
    cells = {}
    for t in figure.axes[0].texts:
        x, y = t.get_position()
        if (
            t.get_text().isdigit() and y < 0
        ):  # inside a slot (the slot numbers are above)
            cells[round(-y), int(x)] = int(t.get_text())
    for b in range(len(PROMPT_LENGTHS)):
        for s in range(n):
            if cache.valid[b, s]:
                assert walk.position[b][s] == expected[b, s]
    assert sorted(cells.values()) == sorted(
        p for row in walk.position for p in row if p is not None
    )


def test_the_alt_text_states_what_the_walk_holds(walk):
    alt = FIGURES["cache-buffers"].alt
    n = walk.next_pos
    assert f"next_pos = {n}" in alt and f"Slot {n} is not written yet" in alt
    assert f"shape ({', '.join(map(str, walk.shape))})" in alt
    assert "padding in slots 0 and 1" in alt and "row 1's slots 2 to 6" in alt
    decoded = [walk.position[b][walk.prefill : n] for b in range(len(PROMPT_LENGTHS))]
    assert decoded == [(5, 6), (3, 4)]
    assert "positions 5 and 6" in alt and "positions 3 and 4" in alt
    assert not set(alt) & set("[]\n`\\<>")  # plain text, no Markdown


def test_the_subtitle_names_the_buffers_shape(walk, figure):
    shape = "[" + ", ".join(map(str, walk.shape)) + "]"
    assert any(shape in t.get_text() for t in figure.findobj(Text))


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_figure_draws_in_each_language_small_and_legible(language):
    fig = cache_diagrams.buffers_figure(language=language, theme="light")
    width, height = fig.get_size_inches()
    assert width <= 5.2 and height <= 5.0
    texts = fig.findobj(Text)
    words = " ".join(t.get_text() for t in texts)
    assert bool(CYRILLIC.search(words)) == (language == "ru")
    assert min(t.get_fontsize() for t in texts if t.get_text().strip()) >= 10
    plt.close(fig)


def test_the_page_shows_the_figure_in_one_layers_cache():
    page = PAGE.read_text(encoding="utf-8")
    section = page.split("## One layer's cache", 1)[1].split("\n## ", 1)[0]
    first_code = section.index("```")
    assert section.index("figures/cache-buffers-light.svg") < first_code
    assert page.count("figures/cache-buffers-light.svg") == 1
