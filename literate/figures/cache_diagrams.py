"""Diagrams (issue 26): drawn from the code, light and dark, English and Russian.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

"cache-buffers" (chapter 8): the slots of one layer's preallocated KV cache for a batch
of two rows, one of them left-padded, after a prefill and two decoding steps. Nothing
of it is typed: `cache_walk` runs a real attention layer into a real `DecodeCache` and
the figure draws what the cache holds (`next_pos`, the written slots, the padding flags),
the positions `advance` gave each token and the keys the last query gave a weight.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle

from literate.figures.style import BOX_INK, style, text
from literate.parts.cache import DecodeCache
from literate.parts.multi_head import MultiHeadAttention

# The example: two prompts of 5 and 3 tokens, the short one left-padded to 5, then two
# decoding steps, in a cache of 8 slots.
CAPACITY = 8
PROMPT_LENGTHS = (5, 3)
DECODE_STEPS = 2


@dataclass(frozen=True)
class CacheWalk:
    """What one layer's cache holds after the example's calls, read from the objects.

    Per row and slot [B][capacity]: `written`, the slot holds a key and a value (a
    nonzero row of the buffers); `valid`, the cache's flag (False: padding, slots >=
    next_pos count as not written, not as padding); `position`, the position `advance`
    gave the slot's token (None for padding and unwritten slots); `reads`, the last
    call's query gave the key a weight > 0 (False from next_pos on)."""

    shape: tuple[int, ...]  # of each buffer, [B, H_kv, capacity, d_head]
    next_pos_after: tuple[int, ...]  # cache.next_pos after each call
    written: tuple[tuple[bool, ...], ...]
    valid: tuple[tuple[bool, ...], ...]
    position: tuple[tuple[int | None, ...], ...]
    reads: tuple[tuple[bool, ...], ...]

    @property
    def next_pos(self) -> int:
        return self.next_pos_after[-1]

    @property
    def prefill(self) -> int:
        """The slots the prompt filled: next_pos after the first call."""
        return self.next_pos_after[0]


def cache_walk() -> CacheWalk:
    """A GQA layer (2 query heads, 1 key/value head, RoPE) run as `cached_run` runs each
    block: `DecodeCache.advance` gives the padding flags and positions, the layer writes
    its keys into the cache. Prefill of the left-padded prompts, then DECODE_STEPS
    steps of one token each; fixed seed, the global random state left as it was."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        layer = MultiHeadAttention(d_model=8, n_heads=2, n_kv_heads=1, rope=True)
        layer = layer.double()
        t0 = max(PROMPT_LENGTHS)
        x = torch.randn(len(PROMPT_LENGTHS), t0 + DECODE_STEPS, 8, dtype=torch.float64)
    lengths = torch.tensor(PROMPT_LENGTHS)
    prompt_valid = torch.arange(t0) >= t0 - lengths[:, None]  # [B, T0]: pads first
    cache = DecodeCache([layer.new_cache(batch=len(PROMPT_LENGTHS), capacity=CAPACITY)])
    calls = [(x[:, :t0], prompt_valid)]
    calls += [(x[:, t : t + 1], None) for t in range(t0, t0 + DECODE_STEPS)]
    position = [[None] * CAPACITY for _ in PROMPT_LENGTHS]
    after = []
    with torch.no_grad():
        for chunk, flags in calls:
            start = cache.next_pos
            key_valid, positions = cache.advance(chunk.shape[1], flags)
            _, weights = layer(
                chunk,
                causal=True,
                key_valid=key_valid,
                cache=cache.layers[0],
                positions=positions,
                empty_row="zero",
                return_weights=True,
            )  # weights [B, H, T, next_pos]
            for b, row in enumerate(positions.tolist()):
                for s, pos in enumerate(row, start=start):
                    position[b][s] = pos if bool(key_valid[b, s]) else None
            after.append(cache.next_pos)
    kv = cache.layers[0]
    n = cache.next_pos
    written = (kv.k != 0).any(dim=-1).any(dim=1) & (kv.v != 0).any(dim=-1).any(dim=1)
    valid = cache.valid.clone()
    valid[:, n:] = True  # beyond next_pos a flag means nothing yet
    reads = torch.zeros_like(valid)
    reads[:, :n] = (weights[:, :, -1] > 0).any(dim=1)  # the last query, any head
    rows = range(len(PROMPT_LENGTHS))
    return CacheWalk(
        shape=tuple(kv.k.shape),
        next_pos_after=tuple(after),
        written=tuple(tuple(written[b].tolist()) for b in rows),
        valid=tuple(tuple(valid[b].tolist()) for b in rows),
        position=tuple(tuple(position[b]) for b in rows),
        reads=tuple(tuple(reads[b].tolist()) for b in rows),
    )


def slot_kind(walk: CacheWalk, b: int, s: int) -> str:
    """How slot s of row b is drawn: "prompt", "decoded", "pad" or "empty"."""
    if not walk.written[b][s]:
        return "empty"
    if not walk.valid[b][s]:
        return "pad"
    return "prompt" if s < walk.prefill else "decoded"


def read_span(walk: CacheWalk, b: int) -> tuple[int, int]:
    """The first and last slot row b's last query reads (they are contiguous)."""
    slots = [s for s, r in enumerate(walk.reads[b]) if r]
    return slots[0], slots[-1]


BUFFER_LABELS = {
    "en": {
        "title": "One layer's KV cache: batch {b}, capacity {cap}",
        "subtitle": "K and V alike: each one buffer {shape}, written in place",
        "slot": "slot",
        "row": "row {b}",
        "pad": "pad",
        "next_pos": "next_pos = {n}: the next token's slot",
        "reads": "its last query reads slots {lo}–{hi}",
        "reads_padded": "reads slots {lo}–{hi}; padding masked",
        "legend": (
            "prompt: prefill, one call",
            "decoded: one slot per step",
            "padding: written, masked out",
            "not written yet",
        ),
        "note": "In a slot: its token's position, counting real tokens only",
    },
    "ru": {
        "title": "KV-кеш одного слоя: батч {b}, ёмкость {cap}",
        "subtitle": "K и V одинаково: по буферу {shape}, запись на месте",
        "slot": "слот",
        "row": "строка {b}",
        "pad": "пад",
        "next_pos": "next_pos = {n}: слот следующего токена",
        "reads": "её последний запрос читает слоты {lo}–{hi}",
        "reads_padded": "читает слоты {lo}–{hi}; паддинг скрыт",
        "legend": (
            "промпт: префилл, один вызов",
            "декодирование: слот за шаг",
            "паддинг: записан, но скрыт",
            "ещё не записан",
        ),
        "note": "В слоте — позиция его токена: считаются только настоящие токены",
    },
}

CELL_H = 0.8  # a slot's height; a slot is 1 wide
ROW_STEP = 1.75  # from one row's slots to the next's: the slots, then the reads


def buffers_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """The slots of `cache_walk` as a grid, one row per batch row, one column per slot:
    coloured by `slot_kind`, each real token's position written in, an arrow at
    next_pos, and under each row the span of slots its last query reads."""
    t = text(BUFFER_LABELS, language)
    walk = cache_walk()
    batch, _, capacity, _ = walk.shape
    width, left, right = 5.2, -1.75, capacity + 0.1
    per_inch = (right - left) / width  # data units per inch, equal in x and y
    top = 3.75  # title, subtitle, next_pos, slot numbers above y = 0
    bottom = -(batch - 1) * ROW_STEP - CELL_H - 2.45  # reads, legend, note
    height = (top - bottom) / per_inch
    with style(theme) as p:
        fill = {
            "prompt": p.series[0],
            "decoded": p.series[2],
            "pad": p.empty,
            "empty": "none",
        }
        edge = {"prompt": "none", "decoded": "none", "pad": p.border, "empty": p.muted}
        fig = plt.figure(figsize=(width, height))
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(left, right)
        ax.set_ylim(bottom, top)
        ax.set_axis_off()
        ax.text(
            left + 0.1,
            top - 0.15,
            t["title"].format(b=batch, cap=capacity),
            fontsize=12,
            fontweight="bold",
            color=p.ink,
            va="top",
        )
        shape = "[" + ", ".join(str(n) for n in walk.shape) + "]"
        ax.text(
            left + 0.1,
            top - 0.75,
            t["subtitle"].format(shape=shape),
            fontsize=10,
            color=p.muted,
            va="top",
        )
        # The slot numbers, and next_pos pointing at its slot
        ax.text(
            -0.15, 0.35, t["slot"], fontsize=10, color=p.muted, ha="right", va="center"
        )
        for s in range(capacity):
            ax.text(
                s + 0.5,
                0.35,
                str(s),
                fontsize=10,
                color=p.muted,
                ha="center",
                va="center",
            )
        n = walk.next_pos
        ax.text(
            right,
            1.75,
            t["next_pos"].format(n=n),
            fontsize=10,
            color=p.ink,
            ha="right",
            va="center",
            fontweight="bold",
        )
        ax.add_patch(
            FancyArrowPatch(
                (n + 0.5, 1.5),
                (n + 0.5, 0.65),
                arrowstyle="-|>",
                mutation_scale=12,
                color=p.ink,
                lw=1.4,
                gid=f"cache-next-pos-{n}",
            )
        )
        for b in range(batch):
            y = -CELL_H - b * ROW_STEP  # the bottom of row b's slots
            ax.text(
                -0.15,
                y + CELL_H / 2,
                t["row"].format(b=b),
                fontsize=10,
                color=p.ink,
                ha="right",
                va="center",
            )
            for s in range(capacity):
                kind = slot_kind(walk, b, s)
                ax.add_patch(
                    Rectangle(
                        (s + 0.04, y),
                        0.92,
                        CELL_H,
                        facecolor=fill[kind],
                        edgecolor=edge[kind],
                        lw=1.0,
                        linestyle="--" if kind == "empty" else "-",
                        gid=f"cache-{kind}-{b}-{s}",
                    )
                )
                pos = walk.position[b][s]
                label = t["pad"] if kind == "pad" else "" if pos is None else str(pos)
                ax.text(
                    s + 0.5,
                    y + CELL_H / 2,
                    label,
                    fontsize=11 if label.isdigit() else 10,
                    ha="center",
                    va="center",
                    color=p.muted if kind == "pad" else BOX_INK,
                )
            lo, hi = read_span(walk, b)
            ybar = y - 0.25
            ax.plot(
                [lo + 0.06, hi + 0.94],
                [ybar, ybar],
                color=p.ink,
                lw=1.3,
                solid_capstyle="butt",
                gid=f"cache-reads-{b}-{lo}-{hi}",
            )
            for xe in (lo + 0.06, hi + 0.94):
                ax.plot([xe, xe], [ybar, ybar + 0.15], color=p.ink, lw=1.3)
            padded = not all(walk.valid[b][:n])
            ax.text(
                (lo + hi + 1) / 2,
                ybar - 0.1,
                t["reads_padded" if padded else "reads"].format(lo=lo, hi=hi),
                fontsize=10,
                color=p.ink,
                ha="center",
                va="top",
            )
        kinds = ("prompt", "decoded", "pad", "empty")
        handles = [
            Patch(
                facecolor=fill[k],
                edgecolor=edge[k],
                linestyle="--" if k == "empty" else "-",
                label=label,
            )
            for k, label in zip(kinds, t["legend"], strict=True)
        ]
        legend_top = -CELL_H - (batch - 1) * ROW_STEP - 0.95
        ax.legend(
            handles=handles,
            loc="upper left",
            ncols=2,
            fontsize=10,
            bbox_to_anchor=(left + 0.05, legend_top),
            bbox_transform=ax.transData,
            borderaxespad=0,
            handlelength=1.4,
            columnspacing=1.0,
            labelcolor=p.ink,
        )
        ax.text(
            left + 0.1,
            bottom + 0.12,
            t["note"],
            fontsize=10,
            color=p.muted,
            va="bottom",
        )
    return fig


SPECS: list[tuple] = [
    (
        "cache-buffers",
        buffers_figure,
        "One layer's preallocated KV cache for a batch of 2 rows and 8 slots, keys and "
        "values alike, each a buffer of shape (2, 1, 8, 4), after a prefill of 5 "
        "slots and 2 decoding steps, as a grid of slots. Row 0, a prompt of 5 tokens, holds them in "
        "slots 0 to 4 at positions 0 to 4 and the decoded tokens in slots 5 and 6 at "
        "positions 5 and 6. Row 1, a prompt of 3 tokens left-padded to 5, has padding in "
        "slots 0 and 1, written but masked out, its prompt in slots 2 to 4 at positions "
        "0 to 2 and its decoded tokens in slots 5 and 6 at positions 3 and 4. Slot 7 is "
        "not written yet; an arrow marks it as next_pos = 7. Row 0's last query reads "
        "slots 0 to 6, row 1's slots 2 to 6.",
    ),
]
