"""Diagrams (issue 26): drawn from the code, light and dark, English and Russian.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

"paged-blocks" (chapter 8, "Paged caches"): a `BlockPool` of 4-token blocks after a
10-token prompt was forked into two sequences, A and B, the prompt's own table let go,
and A, then B, appended one token each. Nothing of it is typed: `paged_walk` runs
`PagedSequence.append` and `fork` and the figure draws what the objects hold: the pool's
blocks, the token positions in their slots (each key is its token's position, each value
names the sequence that wrote it), `pool.refs`, and each table as arrows from logical to
physical blocks. A's write finds block 2 held by two tables and copies it; B, its last
holder by then, writes in place.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle

from literate.figures.style import BOX_INK, style, text
from literate.parts.paged_cache import BlockPool, PagedSequence

BLOCK_SIZE = 4
N_BLOCKS = 5
PROMPT_LENGTH = 10
WRITERS = ("prompt", "A", "B")  # the value each writer stores: its index here


@dataclass(frozen=True)
class PagedWalk:
    """What the pool and the two forks hold, read from the objects.

    `tables_at_fork` / `tables`: A's and B's block tables right after the fork and at
    the end; `refs_at_fork` / `refs`: `pool.refs` then; `free`: the free blocks at the
    end; `slots[block][slot]`: (position, writer) of the token the slot holds for a
    table that holds the block, None when no table reads it; `gathered[s]`: sequence
    s's `gather()` as (position, writer) pairs, in order."""

    block_size: int
    n_blocks: int
    prompt_length: int
    tables_at_fork: tuple[tuple[int, ...], ...]
    refs_at_fork: tuple[int, ...]
    tables: tuple[tuple[int, ...], ...]
    lengths: tuple[int, ...]
    refs: tuple[int, ...]
    free: tuple[int, ...]
    slots: tuple[tuple[tuple[int, int] | None, ...], ...]
    gathered: tuple[tuple[tuple[int, int], ...], ...]

    @property
    def copies(self) -> dict[int, tuple[int, int]]:
        """Sequence index -> (old block, its copy), for each table a write changed."""
        out = {}
        for s, (before, after) in enumerate(
            zip(self.tables_at_fork, self.tables, strict=True)
        ):
            for old, new in zip(before, after):
                if old != new:
                    out[s] = (old, new)
        return out

    @property
    def shared(self) -> tuple[int, ...]:
        """The blocks more than one table holds at the end."""
        return tuple(b for b, n in enumerate(self.refs) if n > 1)


def _token(position: int, writer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One token of one head of width 1: the key its position, the value its writer."""
    return torch.tensor([[float(position)]]), torch.tensor([[float(writer)]])


def paged_walk() -> PagedWalk:
    """The page's paged cache, run: a pool of N_BLOCKS blocks of BLOCK_SIZE, a prompt of
    PROMPT_LENGTH tokens appended one by one, forked twice (A, B), the prompt's table
    released (the forks hold its blocks now), then one token appended to A, then to B."""
    pool = BlockPool(N_BLOCKS, BLOCK_SIZE, n_kv_heads=1, d_head=1)
    prompt = PagedSequence(pool)
    for t in range(PROMPT_LENGTH):
        prompt.append(*_token(t, 0))
    forks = [prompt.fork(), prompt.fork()]
    for block in prompt.table:
        pool.release(block)
    tables_at_fork = tuple(tuple(s.table) for s in forks)
    refs_at_fork = tuple(pool.refs)
    for writer, seq in enumerate(forks, start=1):
        seq.append(*_token(seq.length, writer))
    slots: list[list[tuple[int, int] | None]] = [
        [None] * BLOCK_SIZE for _ in range(N_BLOCKS)
    ]
    for seq in forks:  # a slot is read when a table holds its block up to its length
        for i, block in enumerate(seq.table):
            for s in range(min(BLOCK_SIZE, seq.length - i * BLOCK_SIZE)):
                slots[block][s] = (
                    int(pool.k[block, s, 0, 0]),
                    int(pool.v[block, s, 0, 0]),
                )
    gathered = []
    for seq in forks:
        k, v = seq.gather()  # [1, length, 1] each
        gathered.append(
            tuple(
                (int(a), int(b))
                for a, b in zip(k.flatten().tolist(), v.flatten().tolist(), strict=True)
            )
        )
    return PagedWalk(
        block_size=pool.block_size,
        n_blocks=len(pool.refs),
        prompt_length=PROMPT_LENGTH,
        tables_at_fork=tables_at_fork,
        refs_at_fork=refs_at_fork,
        tables=tuple(tuple(s.table) for s in forks),
        lengths=tuple(s.length for s in forks),
        refs=tuple(pool.refs),
        free=tuple(sorted(pool.free)),
        slots=tuple(tuple(row) for row in slots),
        gathered=tuple(gathered),
    )


LABELS = {
    "en": {
        "title": "A paged cache: a {n}-token prompt, two forks",
        "subtitle": "{blocks} blocks of {size}; forks A and B; A appends a token, then B",
        "table": "table {s}",
        "block": "block",
        "copy": "copy of {old}\nfor {s}",
        "free": "free",
        "legend": (
            "prompt token",
            "A's token",
            "B's token",
            "not written",
            "held by {n} tables",
        ),
        "note": (
            "In a slot: its token's position. After the fork refs were {fork};\n"
            "{a} wrote first and copied block {old} to {new}; {b}, then its only "
            "holder,\nwrote in place."
        ),
    },
    "ru": {
        "title": "Блоки кеша: промпт из {n} токенов, две ветви",
        "subtitle": "{blocks} блоков по {size}; ветви A и B; токен добавляет A, затем B",
        "table": "таблица {s}",
        "block": "блок",
        "copy": "копия {old}\nдля {s}",
        "free": "свободен",
        "legend": (
            "токен промпта",
            "токен A",
            "токен B",
            "не записан",
            "в {n} таблицах",
        ),
        "note": (
            "В слоте — позиция токена. После ветвления refs = {fork};\n"
            "{a} писала первой и скопировала блок {old} в {new}; {b}, к тому\n"
            "времени его единственная владелица, писала на месте."
        ),
    },
}

ROW = 0.46  # from one block's row to the next, in inches (the axes are in inches)
CELL_H = 0.36
SLOT_W = 0.38
BOX_W = 0.42  # a logical block of a table


def _centred(ax, x: float, y: float, label: str, **kw) -> None:
    """A label centred on (x, y), of 10 pt unless told."""
    ax.text(x, y, label, ha="center", va="center", **{"fontsize": 10, **kw})


def paged_blocks_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """`paged_walk` as three columns: A's block table, the pool (one row per physical
    block: its id, its slots with the positions they hold, its refs), B's block table;
    an arrow from each logical block to the physical block its table names."""
    t = text(LABELS, language)
    walk = paged_walk()
    width = 5.2
    x_a = 0.45  # A's logical blocks: x_a .. x_a + BOX_W
    x_id = 1.3  # the pool: block id, slots, refs
    x_slot = x_id + 0.38
    x_refs = x_slot + walk.block_size * SLOT_W
    x_end = x_refs + 0.45
    x_b = x_end + 0.5  # B's logical blocks
    top_row = 3.5  # the top of block 0's row
    bottom_of_rows = top_row - (walk.n_blocks - 1) * ROW - CELL_H
    bottom = 0.0
    height = top_row + 1.15
    legend_top = bottom_of_rows - 0.1

    def row_y(block: int) -> float:  # the bottom of a physical (or logical) row
        return top_row - block * ROW - CELL_H

    with style(theme) as p:
        seq_colour = (p.series[1], p.series[2])  # A, B
        writer_face = (p.series[0], *seq_colour)
        fig = plt.figure(figsize=(width, height))
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(0, width)
        ax.set_ylim(bottom, height)
        ax.set_axis_off()
        ax.text(
            0.08,
            height - 0.08,
            t["title"].format(n=walk.prompt_length),
            fontsize=12,
            fontweight="bold",
            color=p.ink,
            va="top",
        )
        ax.text(
            0.08,
            height - 0.4,
            t["subtitle"].format(blocks=walk.n_blocks, size=walk.block_size),
            fontsize=10,
            color=p.muted,
            va="top",
        )
        # Column heads
        head_y = top_row + 0.2
        for s, x in ((0, x_a), (1, x_b)):
            _centred(
                ax,
                x + BOX_W / 2,
                head_y,
                t["table"].format(s=WRITERS[s + 1]),
                fontsize=10,
                fontweight="bold",
                color=p.ink,
            )
        _centred(ax, x_id + 0.18, head_y, t["block"], fontsize=10, color=p.muted)
        for s in range(walk.block_size):
            _centred(
                ax,
                x_slot + (s + 0.5) * SLOT_W,
                head_y,
                str(s),
                fontsize=10,
                color=p.muted,
            )
        _centred(
            ax,
            x_refs + 0.24,
            head_y,
            "refs",
            fontsize=10,
            color=p.muted,
            family="monospace",
        )
        # The pool: one row per physical block
        copies = {new: (s, old) for s, (old, new) in walk.copies.items()}
        for block in range(walk.n_blocks):
            y = row_y(block)
            used = walk.refs[block] > 0
            ink = p.ink if used else p.muted
            _centred(
                ax,
                x_id + 0.18,
                y + CELL_H / 2,
                str(block),
                fontsize=11,
                fontweight="bold" if used else "normal",
                color=ink,
            )
            for s, held in enumerate(walk.slots[block]):
                x = x_slot + s * SLOT_W
                empty = held is None
                ax.add_patch(
                    Rectangle(
                        (x + 0.03, y),
                        SLOT_W - 0.06,
                        CELL_H,
                        facecolor="none" if empty else writer_face[held[1]],
                        edgecolor=p.muted if empty else "none",
                        lw=0.8,
                        linestyle="--" if empty else "-",
                        gid=f"paged-empty-{block}-{s}"
                        if empty
                        else f"paged-slot-{block}-{s}-{held[0]}-{WRITERS[held[1]]}",
                    )
                )
                if not empty:  # the position its key holds
                    _centred(
                        ax, x + SLOT_W / 2, y + CELL_H / 2, str(held[0]), color=BOX_INK
                    )
            shared = block in walk.shared
            _centred(
                ax,
                x_refs + 0.24,
                y + CELL_H / 2,
                str(walk.refs[block]),
                fontsize=11,
                fontweight="bold" if shared else "normal",
                color=ink,
                gid=f"paged-refs-{block}-{walk.refs[block]}",
            )
            if shared:  # a frame around the row: two tables read these keys
                ax.add_patch(
                    Rectangle(
                        (x_id, y - 0.04),
                        x_end - x_id,
                        CELL_H + 0.08,
                        facecolor="none",
                        edgecolor=p.ink,
                        lw=1.4,
                        gid=f"paged-shared-{block}",
                    )
                )
            note = None
            if block in copies:
                s, old = copies[block]
                note = t["copy"].format(old=old, s=WRITERS[s + 1])
            elif block in walk.free:
                note = t["free"]
            if note and block >= max(len(tb) for tb in walk.tables):
                ax.text(
                    x_end + 0.1,
                    y + CELL_H / 2,
                    note,
                    fontsize=10,
                    color=p.ink if block in copies else p.muted,
                    va="center",
                    linespacing=1.1,
                )
        # The tables: logical block i beside physical row i, an arrow to its block
        for s, (x, table) in enumerate(zip((x_a, x_b), walk.tables, strict=True)):
            length = walk.lengths[s]
            for i, block in enumerate(table):
                y = row_y(i)
                ax.add_patch(
                    Rectangle(
                        (x, y),
                        BOX_W,
                        CELL_H,
                        facecolor=seq_colour[s],
                        edgecolor="none",
                        gid=f"paged-logical-{WRITERS[s + 1]}-{i}",
                    )
                )
                _centred(
                    ax,
                    x + BOX_W / 2,
                    y + CELL_H / 2,
                    str(i),
                    fontsize=11,
                    color=BOX_INK,
                )
                lo = i * walk.block_size
                hi = min(lo + walk.block_size, length) - 1
                ax.text(
                    x - 0.06 if s == 0 else x + BOX_W + 0.06,
                    y + CELL_H / 2,
                    f"{lo}–{hi}",
                    fontsize=10,
                    color=p.muted,
                    ha="right" if s == 0 else "left",
                    va="center",
                )
                start = (x + BOX_W, y + CELL_H / 2) if s == 0 else (x, y + CELL_H / 2)
                end_x = x_id - 0.02 if s == 0 else x_end + 0.02
                ax.add_patch(
                    FancyArrowPatch(
                        start,
                        (end_x, row_y(block) + CELL_H / 2),
                        arrowstyle="-|>",
                        mutation_scale=11,
                        color=p.ink,
                        lw=1.3,
                        shrinkA=1,
                        shrinkB=1,
                        gid=f"paged-arrow-{WRITERS[s + 1]}-{i}-{block}",
                    )
                )
        face = dict(zip(t["legend"], (*writer_face, "none", "none")))
        edge = dict(zip(t["legend"], ("none",) * 3 + (p.muted, p.ink)))
        kind = dict(zip(t["legend"], ("-",) * 3 + ("--", "-")))
        holders = walk.refs[walk.shared[0]]
        handles = [
            Patch(
                facecolor=face[label],
                edgecolor=edge[label],
                linestyle=kind[label],
                lw=1.4 if label == t["legend"][4] else 1.0,
                label=label.format(n=holders),
            )  # filled by columns: row 1 the tokens, row 2 the outlines
            for label in (t["legend"][i] for i in (0, 3, 1, 4, 2))
        ]
        ax.legend(
            handles=handles,
            loc="upper left",
            ncols=3,
            fontsize=10,
            bbox_to_anchor=(0.05, legend_top),
            bbox_transform=ax.transData,
            borderaxespad=0,
            handlelength=1.2,
            handletextpad=0.4,
            columnspacing=0.8,
            labelcolor=p.ink,
        )
        (a, b), (old, new) = WRITERS[1:], next(iter(walk.copies.values()))
        fork = ", ".join(str(walk.refs_at_fork[i]) for i in walk.tables_at_fork[0])
        ax.text(
            0.08,
            bottom + 0.08,
            t["note"].format(fork=fork, a=a, b=b, old=old, new=new),
            fontsize=10,
            color=p.muted,
            va="bottom",
            linespacing=1.3,
        )
    return fig


SPECS: list[tuple] = [
    (
        "paged-blocks",
        paged_blocks_figure,
        "A paged cache: a pool of 5 blocks of 4 token slots, after a 10-token prompt "
        "was forked into sequences A and B, the prompt's own table released, and A, "
        "then B, appended one token each. Block 0 holds positions 0 to 3 and block 1 "
        "positions 4 to 7, each held by both tables (refs 2). After the fork block 2, "
        "with positions 8 and 9, was held by both too; A wrote first, so it copied "
        "block 2 to block 3 and wrote its position 10 there: A's table is 0, 1, 3. B, "
        "then block 2's only holder, wrote its position 10 in place: B's table is 0, "
        "1, 2. Blocks 2 and 3 have refs 1; block 4 is free.",
    )
]
