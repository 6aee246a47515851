"""Diagrams: StreamingLLM's cache, four sinks and a ring (chapter 10).

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

* "sink-ring-cache": a `SinkRingCache` (literate/parts/sink_cache.py) of S = 4 sinks and
  W = 8 slots, fed tokens 0 .. 20, each key its token's text position, as on the page
  (`sink_snapshots`). At the steps that decode tokens 9 (the paper's example, sec. 3.2)
  and 20 (the page's), the text's tokens are drawn as a row, kept or evicted; under
  them, the cache's W slots as they are stored (the sink buffers, then the ring's slots,
  read from the cache's tensors), and the place in the cache, the rotary position, each
  held token gets: its index in what `update` returns.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from literate.figures.style import BOX_INK, GREEN, ORANGE, style, text
from literate.parts.sink_cache import SinkRingCache

__all__ = ["SINK_SHOWN", "SinkSnapshot", "sink_ring_figure", "sink_snapshots"]

SINK_SINKS, SINK_WINDOW = 4, 8  # the page's example: S = 4, W = 8
SINK_SHOWN = (9, 20)  # the steps drawn: the paper's token 9, the page's token 20


@dataclass(frozen=True)
class SinkSnapshot:
    token: int  # the token just decoded (its text position)
    sinks: int  # S
    window: int  # W
    kept: tuple[int, ...]  # text positions held, in cache order (`kept()`)
    places: dict[int, int]  # text position -> place in the cache (RoPE position)
    sink_slots: tuple[int, ...]  # what each sink slot holds, read from k_sinks
    ring_slots: tuple[int, ...]  # what each ring slot holds, read from the ring's k
    evicted: tuple[int, ...]  # text positions seen and held no more


def sink_snapshots(
    shown: tuple[int, ...] = SINK_SHOWN,
    sinks: int = SINK_SINKS,
    window: int = SINK_WINDOW,
) -> list[SinkSnapshot]:
    """Tokens 0 .. max(shown) through a `SinkRingCache`, each key its text position
    and each value 0, as on the page; after each step in `shown`, what the cache
    holds: the keys `update` returns (in cache order, so a key's index is its place),
    the stored slots as they lie in memory, and the tokens it no longer holds."""
    cache = SinkRingCache(
        batch=1, n_kv_heads=1, d_head=1, window=window, sinks=sinks, dtype=torch.float64
    )
    out: list[SinkSnapshot] = []
    for p in range(max(shown) + 1):
        held, _ = cache.update(
            torch.full((1, 1, 1, 1), float(p), dtype=torch.float64),
            torch.zeros(1, 1, 1, 1, dtype=torch.float64),
        )
        if p not in shown:
            continue
        order = [int(x) for x in held.flatten().tolist()]  # cache order
        if order != cache.kept():
            raise ValueError(f"update returned {order}, kept() says {cache.kept()}")
        filled = min(cache.ring.next_pos, cache.ring.slots)
        out.append(
            SinkSnapshot(
                token=p,
                sinks=cache.sinks,
                window=cache.window,
                kept=tuple(order),
                places={q: place for place, q in enumerate(order)},
                sink_slots=tuple(
                    int(x) for x in cache.k_sinks[0, 0, : min(p + 1, cache.sinks), 0]
                ),
                ring_slots=tuple(int(x) for x in cache.ring.k[0, 0, :filled, 0]),
                evicted=tuple(q for q in range(p + 1) if q not in order),
            )
        )
    return out


def _span(positions: tuple[int, ...]) -> str:
    """(4, 5, 6) -> '4–6'; (4, 5) -> '4, 5'; one run of consecutive positions."""
    if len(positions) <= 2:
        return ", ".join(map(str, positions))
    return f"{positions[0]}–{positions[-1]}"


SINK_LABELS = {
    "en": {
        "title": "StreamingLLM: S = {s} sinks and a ring, W = {w} slots",
        "step": "Decoding token {t}: tokens {gone} evicted",
        "slot": "slot holds",
        "place": "place",
        "key": "green: sinks, kept for good; blue: the ring, token p in\n"
        "slot (p − {s}) mod {r}; orange: the token decoded. Places:\n"
        "the sinks, then the ring from its oldest slot",
    },
    "ru": {
        "title": "StreamingLLM: S = {s} стока и кольцо, W = {w} ячеек",
        "step": "Декодируем токен {t}: токены {gone} вытеснены",
        "slot": "в ячейке",
        "place": "место",
        "key": "зелёные — стоки, хранятся всегда; синие — кольцо,\n"
        "токен p в ячейке (p − {s}) mod {r}; оранжевый — новый.\n"
        "Места: стоки, затем кольцо от самой старой ячейки",
    },
}


def _box(ax, x, y, w, h, face, edge="none", lw=1.0) -> None:
    ax.add_patch(
        FancyBboxPatch(
            (x, y),
            w,
            h,
            boxstyle="round,pad=0,rounding_size=0.04",
            facecolor=face,
            edgecolor=edge,
            linewidth=lw,
        )
    )


def sink_ring_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """One panel per step shown: the text's tokens as a row (sinks green, the ring's
    blue, the token decoded orange, the evicted dimmed), each held one joined to the
    slot that stores it, and under each slot the place it is turned at."""
    t = text(SINK_LABELS, language)
    snaps = sink_snapshots()
    s, w = snaps[0].sinks, snaps[0].window
    last = max(snap.token for snap in snaps)
    width, margin = 5.2, 0.06
    cell = (width - 2 * margin) / (last + 1)  # one token of the longest text
    cell_h, box_w, box_h, gap, group_gap = 0.3, 0.4, 0.34, 0.05, 0.2
    slots_x = width - margin - (w * box_w + (w - 2) * gap + group_gap)
    panel_h = 1.9
    key_h = 0.68
    height = 0.42 + panel_h * len(snaps) + key_h
    with style(theme) as p:
        fig = plt.figure(figsize=(width, height))
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(0, width)
        ax.set_ylim(0, height)
        ax.set_axis_off()
        ax.text(
            margin,
            height - 0.2,
            t["title"].format(s=s, w=w),
            fontsize=11.5,
            fontweight="bold",
            color=p.ink,
            va="center",
        )
        for i, snap in enumerate(snaps):
            top = height - 0.42 - i * panel_h
            ax.text(
                margin,
                top - 0.12,
                t["step"].format(t=snap.token, gone=_span(snap.evicted)),
                fontsize=10.5,
                color=p.ink,
                va="center",
                gid=f"sink-t{snap.token}-step",
            )
            text_y = top - 0.3 - cell_h  # the text's row, bottom
            newest = snap.token
            for q in range(snap.token + 1):
                x = margin + q * cell
                if q not in snap.places:
                    face, ink = p.empty, p.muted
                elif q == newest:
                    face, ink = ORANGE, BOX_INK
                elif q < s:
                    face, ink = GREEN, BOX_INK
                else:
                    face, ink = p.series[0], BOX_INK
                _box(ax, x + 0.01, text_y, cell - 0.02, cell_h, face)
                ax.text(
                    x + cell / 2,
                    text_y + cell_h / 2,
                    str(q),
                    ha="center",
                    va="center",
                    fontsize=10,
                    color=ink,
                    gid=f"sink-t{snap.token}-text{q}",
                )
            slot_y = text_y - 0.5 - box_h  # the slots' row, bottom
            stored = [("sink", j, q) for j, q in enumerate(snap.sink_slots)]
            stored += [("ring", j, q) for j, q in enumerate(snap.ring_slots)]
            for k, (kind, j, q) in enumerate(stored):
                x = slots_x + k * (box_w + gap) + (group_gap - gap) * (kind == "ring")
                face = (
                    ORANGE if q == newest else GREEN if kind == "sink" else p.series[0]
                )
                _box(ax, x, slot_y, box_w, box_h, face)
                ax.text(
                    x + box_w / 2,
                    slot_y + box_h / 2,
                    str(q),
                    ha="center",
                    va="center",
                    fontsize=11,
                    color=BOX_INK,
                    gid=f"sink-t{snap.token}-{kind}{j}",
                )
                ax.text(
                    x + box_w / 2,
                    slot_y - 0.2,
                    str(snap.places[q]),
                    ha="center",
                    va="center",
                    fontsize=11,
                    color=p.ink,
                    fontweight="bold",
                    gid=f"sink-t{snap.token}-{kind}{j}-place",
                )
                ax.plot(  # the token in the text -> the slot it is stored in
                    [margin + (q + 0.5) * cell, x + box_w / 2],
                    [text_y - 0.02, slot_y + box_h + 0.02],
                    color=p.muted,
                    lw=0.9,
                    solid_capstyle="round",
                )
            for label, y in (
                (t["slot"], slot_y + box_h / 2),
                (t["place"], slot_y - 0.2),
            ):
                ax.text(
                    margin, y, label, ha="left", va="center", fontsize=10, color=p.muted
                )
        ax.text(
            margin,
            key_h / 2 + 0.02,
            t["key"].format(s=s, r=w - s),
            ha="left",
            va="center",
            fontsize=10,
            color=p.ink,
            linespacing=1.3,
        )
    return fig


SPECS: list[tuple] = [
    (
        "sink-ring-cache",
        sink_ring_figure,
        "StreamingLLM's cache with S = 4 sinks and W = 8 slots, fed the text one token "
        "at a time, in two panels. Decoding token 9: tokens 0 to 3 sit in the 4 sink "
        "slots, tokens 4 and 5 are evicted, and the ring's 4 slots hold 8, 9, 6, 7, "
        "token p in slot (p - 4) mod 4; their places in the cache, the positions RoPE "
        "turns them at, are 6, 7, 4, 5, the sinks 0 to 3. Decoding token 20: the sinks "
        "still hold 0 to 3 at places 0 to 3, tokens 4 to 16 are evicted, and the ring "
        "holds 20, 17, 18, 19 at places 7, 4, 5, 6. Token 9 and token 20 are both "
        "turned at place 7, whatever their text positions.",
    ),
]
