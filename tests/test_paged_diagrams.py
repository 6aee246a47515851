"""Chapter 8's "paged-blocks" figure draws what a paged cache holds after a prompt is
forked twice and each fork appends a token: the pool's blocks, the positions in their
slots, `pool.refs`, and each block table as arrows, all read from a real run of
`BlockPool` and `PagedSequence`, never typed."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.patches import FancyArrowPatch, Rectangle
from matplotlib.text import Text

from literate.figures import FIGURES, paged_diagrams
from literate.figures.paged_diagrams import (
    BLOCK_SIZE,
    N_BLOCKS,
    PROMPT_LENGTH,
    WRITERS,
    paged_walk,
)
from literate.parts.paged_cache import BlockPool, PagedSequence

CYRILLIC = re.compile("[\u0400-\u04ff]")
PAGE = Path(__file__).parents[1] / "docs" / "decoding" / "kv-cache.md"


def replayed() -> tuple[BlockPool, list[PagedSequence]]:
    """The figure's run again, its keys and values other numbers (every slot's key is
    100 + its position here): the bookkeeping must not depend on them."""
    pool = BlockPool(N_BLOCKS, BLOCK_SIZE, n_kv_heads=2, d_head=3)
    prompt = PagedSequence(pool)
    for t in range(PROMPT_LENGTH):
        prompt.append(torch.full((2, 3), 100.0 + t), torch.zeros(2, 3))
    forks = [prompt.fork(), prompt.fork()]
    for block in prompt.table:
        pool.release(block)
    for writer, seq in enumerate(forks, start=1):
        seq.append(torch.full((2, 3), 100.0 + seq.length), torch.full((2, 3), writer))
    return pool, forks


@pytest.fixture(scope="module")
def walk():
    return paged_walk()


@pytest.fixture
def figure():
    fig = FIGURES["paged-blocks"].draw(language="en", theme="light")
    yield fig
    plt.close(fig)


def centre(patch: Rectangle) -> tuple[float, float]:
    return (
        patch.get_x() + patch.get_width() / 2,
        patch.get_y() + patch.get_height() / 2,
    )


def block_rows(fig) -> dict[float, int]:
    """The y of each physical block's row -> its id, from the bold/muted id labels
    left of the slots (the texts that are a bare number in the id column)."""
    slots = [
        p for p in fig.findobj(Rectangle) if (p.get_gid() or "").startswith("paged-")
    ]
    x_slots = min(
        p.get_x() for p in slots if "-slot-" in p.get_gid() or "-empty-" in p.get_gid()
    )
    rows = {}
    for t in fig.findobj(Text):
        x, y = t.get_position()
        if t.get_text().isdigit() and x_slots - 0.4 < x < x_slots:
            rows[round(y, 6)] = int(t.get_text())
    return rows


def drawn_slots(fig) -> dict[tuple[int, int], tuple[int, str] | None]:
    """(block, slot) -> (the position written in it, the writer of its gid), or None
    for a slot drawn empty; each rectangle checked to stand in its block's row and
    its slot's column, and its label checked to be the position of its gid."""
    rows = block_rows(fig)
    texts = [(t.get_position(), t.get_text()) for t in fig.findobj(Text)]

    def label_at(x: float, y: float) -> str:
        (found,) = [w for (tx, ty), w in texts if abs(tx - x) + abs(ty - y) < 1e-9]
        return found

    cells = {}
    found = [
        p for p in fig.findobj(Rectangle) if (p.get_gid() or "").startswith("paged-")
    ]
    filled = [p for p in found if "-slot-" in p.get_gid() or "-empty-" in p.get_gid()]
    x0 = min(p.get_x() for p in filled) - 0.03  # the left edge of slot 0
    width = paged_diagrams.SLOT_W
    for patch in filled:
        x, y = centre(patch)
        if m := re.fullmatch(r"paged-slot-(\d+)-(\d+)-(\d+)-(\w+)", patch.get_gid()):
            block, slot, position, writer = int(m[1]), int(m[2]), int(m[3]), m[4]
            assert label_at(x, y) == str(position), patch.get_gid()
            cells[block, slot] = (position, writer)
        else:
            m = re.fullmatch(r"paged-empty-(\d+)-(\d+)", patch.get_gid())
            block, slot = int(m[1]), int(m[2])
            cells[block, slot] = None
        assert rows[round(y, 6)] == block, patch.get_gid()
        assert x0 + slot * width < x < x0 + (slot + 1) * width, patch.get_gid()
    return cells


def drawn_arrows(fig) -> dict[str, dict[int, int]]:
    """Sequence -> {logical block: the physical block its arrow points at}, the block
    read from the row the arrow's tip reaches, checked against the gid."""
    rows = block_rows(fig)
    tables: dict[str, dict[int, int]] = {}
    for arrow in fig.findobj(FancyArrowPatch):
        m = re.fullmatch(r"paged-arrow-(\w+)-(\d+)-(\d+)", arrow.get_gid() or "")
        if not m:
            continue
        tip_y = arrow._posA_posB[1][1]
        assert rows[round(tip_y, 6)] == int(m[3]), arrow.get_gid()
        tables.setdefault(m[1], {})[int(m[2])] = int(m[3])
    return tables


def test_the_walk_reads_what_a_replayed_run_reports(walk):
    pool, forks = replayed()
    assert walk.tables == tuple(tuple(s.table) for s in forks)
    assert walk.refs == tuple(pool.refs) and walk.free == tuple(sorted(pool.free))
    assert walk.lengths == tuple(s.length for s in forks) == (PROMPT_LENGTH + 1,) * 2
    for s, seq in enumerate(forks):
        k, v = seq.gather()  # [H_kv, length, d_head]
        assert [p for p, _ in walk.gathered[s]] == (k[0, :, 0] - 100).long().tolist()
        assert [w for _, w in walk.gathered[s]] == v[0, :, 0].long().tolist()


def test_the_forks_share_the_full_blocks_and_one_copies_the_partial_one(walk):
    """The page's story: the prompt's full blocks are held by both tables; the partial
    one, held by both after the fork, is copied once, by A, the first to write."""
    full = PROMPT_LENGTH // BLOCK_SIZE
    assert walk.tables_at_fork[0] == walk.tables_at_fork[1]
    assert walk.shared == walk.tables[0][:full] == walk.tables[1][:full]
    assert all(walk.refs_at_fork[b] == 2 for b in walk.tables_at_fork[0])
    partial = walk.tables_at_fork[0][full]
    assert walk.copies == {0: (partial, walk.tables[0][full])}
    assert walk.tables[1][full] == partial and walk.refs[partial] == 1
    for s in range(2):  # each reads the prompt, then its own token
        assert walk.gathered[s] == tuple((t, 0) for t in range(PROMPT_LENGTH)) + (
            (PROMPT_LENGTH, s + 1),
        )


def test_the_drawn_slots_are_the_pools_slots(walk, figure):
    cells = drawn_slots(figure)
    assert set(cells) == {(b, s) for b in range(N_BLOCKS) for s in range(BLOCK_SIZE)}
    for (block, slot), cell in cells.items():
        held = walk.slots[block][slot]
        assert cell == (None if held is None else (held[0], WRITERS[held[1]]))
    # what a fresh pool holds there: the key is 100 + the position
    pool, forks = replayed()
    for seq in forks:
        for i, block in enumerate(seq.table):
            for s in range(min(BLOCK_SIZE, seq.length - i * BLOCK_SIZE)):
                assert cells[block, s][0] == int(pool.k[block, s, 0, 0]) - 100


def test_the_arrows_are_the_block_tables_and_read_what_gather_reads(walk, figure):
    tables = drawn_arrows(figure)
    cells = drawn_slots(figure)
    pool, forks = replayed()
    for s, seq in enumerate(forks):
        drawn = tables[WRITERS[s + 1]]
        assert [drawn[i] for i in sorted(drawn)] == seq.table
        # follow the drawn arrows into the drawn slots: the sequence's gather
        read = [
            cells[drawn[t // BLOCK_SIZE], t % BLOCK_SIZE] for t in range(seq.length)
        ]
        k, v = seq.gather()
        assert [p for p, _ in read] == (k[0, :, 0] - 100).long().tolist()
        assert [WRITERS.index(w) for _, w in read] == v[0, :, 0].long().tolist()


def test_the_refs_and_the_shared_frames_are_the_pools(walk, figure):
    refs = {}
    for t in figure.findobj(Text):
        if m := re.fullmatch(r"paged-refs-(\d+)-(\d+)", t.get_gid() or ""):
            assert t.get_text() == m[2]
            refs[int(m[1])] = int(t.get_text())
    pool, _ = replayed()
    assert [refs[b] for b in range(N_BLOCKS)] == pool.refs
    frames = {
        int(p.get_gid().rsplit("-", 1)[1])
        for p in figure.findobj(Rectangle)
        if (p.get_gid() or "").startswith("paged-shared-")
    }
    assert frames == {b for b, n in enumerate(pool.refs) if n > 1} == set(walk.shared)


def test_the_notes_name_the_copy_the_free_block_and_the_refs_at_the_fork(walk, figure):
    words = [t.get_text() for t in figure.findobj(Text)]
    (old, new) = walk.copies[0]
    assert f"copy of {old}\nfor A" in words
    assert words.count("free") == len(walk.free) == 1
    fork = ", ".join(str(walk.refs_at_fork[b]) for b in walk.tables_at_fork[0])
    note = next(w for w in words if w.startswith("In a slot"))
    assert f"refs were {fork};" in note and f"copied block {old} to {new};" in note
    assert any(f"a {PROMPT_LENGTH}-token prompt" in w for w in words)
    assert any(w.startswith(f"{N_BLOCKS} blocks of {BLOCK_SIZE};") for w in words)


def test_the_alt_text_states_what_the_walk_holds(walk):
    alt = FIGURES["paged-blocks"].alt
    (old, new) = walk.copies[0]
    assert f"a pool of {N_BLOCKS} blocks of {BLOCK_SIZE} token slots" in alt
    assert f"a {PROMPT_LENGTH}-token prompt" in alt
    assert f"copied block {old} to block {new}" in alt
    for s, table in zip(WRITERS[1:], walk.tables, strict=True):
        assert f"{s}'s table is {', '.join(map(str, table))}." in alt
    assert "(refs 2)" in alt and set(walk.shared) == {0, 1}
    assert f"Blocks {old} and {new} have refs 1" in alt
    assert walk.refs[old] == walk.refs[new] == 1
    assert f"block {walk.free[0]} is free" in alt and len(walk.free) == 1
    assert not set(alt) & set("[]\n`\\<>")  # plain text, no Markdown


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_figure_draws_in_each_language_small_and_legible(language):
    fig = paged_diagrams.paged_blocks_figure(language=language, theme="light")
    width, height = fig.get_size_inches()
    assert width <= 5.2 and height <= 5.0
    texts = [t for t in fig.findobj(Text) if t.get_text().strip()]
    words = " ".join(t.get_text() for t in texts)
    assert bool(CYRILLIC.search(words)) == (language == "ru")
    assert min(t.get_fontsize() for t in texts) >= 10
    fig.canvas.draw()  # every label inside the figure
    box = fig.bbox
    for t in texts:
        extent = t.get_window_extent()
        assert box.x0 - 1 <= extent.x0 and extent.x1 <= box.x1 + 1, t.get_text()
        assert box.y0 - 1 <= extent.y0 and extent.y1 <= box.y1 + 1, t.get_text()
    plt.close(fig)


def test_the_page_shows_the_figure_before_the_paged_sections_code():
    page = PAGE.read_text(encoding="utf-8")
    section = page.split("## Paged caches", 1)[1].split("\n## ", 1)[0]
    at = section.index("figures/paged-blocks-light.svg")
    assert at < section.index("??? ") and at < section.index("```")
    assert section.index("$$\n\n![](../figures/paged-blocks-light.svg") < at
    assert page.count("figures/paged-blocks-light.svg") == 1
    assert page.count("figures/paged-blocks-dark.svg") == 1
    caption = section[at:].split("\n\n", 2)[1]
    assert caption.startswith("*") and caption.endswith("*") and "\n" not in caption
