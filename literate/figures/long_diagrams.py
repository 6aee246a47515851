"""Diagrams (issue 26): drawn from the code, light and dark, English and Russian.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

Chapter 10's diagrams, each drawn from what the code computes:

* "ring-cache": the slots of chapter 10's minimal `RingKVCache` (W = 4) read back after
  each of positions 0 to 9 is written into it (`ring_snapshots`);
* "mla-compression": MLA's widths for DeepSeek-V3, read from its published configuration
  (`mla_widths`), the floats a token leaves in a `LatentCache` against those of
  multi-head attention with the same heads (`expanded_cache_bytes_per_token`).

(YaRN's divisors are drawn by `literate.figures.yarn_diagrams`.)
"""

# Over 450 lines on purpose: chapter 10's two diagrams are one module, the one whose
# SPECS list `literate.figures` registers (issue 26); each is laid out in inches, one
# argument a line as `ruff format` writes it.

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from literate.figures.style import BOX_INK, GREEN, ORANGE, style, text
from literate.minimal.window import RingKVCache
from literate.numbers.published import published_config
from literate.parts.mla import LatentCache, expanded_cache_bytes_per_token

# ---------------------------------------------------------------------------------------
# The ring cache

RING_WINDOW, RING_POSITIONS = 4, 10  # positions 0 .. 9 through a ring of 4 slots
RING_SHOWN = (2, 3, 4, 5, 6, 9)  # the steps drawn, one row each


@dataclass(frozen=True)
class RingSnapshot:
    position: int  # the position just written
    written: int  # the slot it went to, read from the ring
    slots: tuple[int | None, ...]  # the position each slot holds, None if empty
    forgotten: tuple[int, ...]  # positions written before and held no more


def ring_snapshots(
    window: int = RING_WINDOW, n_positions: int = RING_POSITIONS
) -> list[RingSnapshot]:
    """Positions 0 .. n_positions - 1 written one per step into chapter 10's minimal
    `RingKVCache`, each as its own number (the key; the value is 0, as on the page),
    and the slots read back after every step: which position each holds (the slots
    `update` returns are the filled ones, the rest are empty), which slot changed,
    and which positions are gone."""
    ring = RingKVCache(
        batch=1, n_kv_heads=1, d_head=1, window=window, dtype=torch.float64
    )
    snapshots: list[RingSnapshot] = []
    before: tuple[int | None, ...] = (None,) * window
    for p in range(n_positions):
        k, _ = ring.update(
            torch.full((1, 1, 1, 1), float(p), dtype=torch.float64),
            torch.zeros(1, 1, 1, 1, dtype=torch.float64),
        )
        filled = [int(x) for x in k.flatten().tolist()]
        slots = tuple(filled) + (None,) * (window - len(filled))
        (written,) = [j for j in range(window) if slots[j] != before[j]]
        held = {s for s in slots if s is not None}
        forgotten = tuple(q for q in range(p + 1) if q not in held)
        snapshots.append(RingSnapshot(p, written, slots, forgotten))
        before = slots
    return snapshots


def _span(positions: tuple[int, ...]) -> str:
    """(0, 1, 2) -> '0–2'; (0, 1) -> '0, 1'; () -> a dash."""
    if not positions:
        return "—"
    if len(positions) <= 2:
        return ", ".join(map(str, positions))
    return f"{positions[0]}–{positions[-1]}"


RING_LABELS = {
    "en": {
        "title": "A ring of W = {w} slots: p goes to slot p mod {w}",
        "slot": "slot",
        "step": "write p = {p}",
        "forgotten": "forgotten",
        "key": "orange: the slot written at step p, over position p − {w}\n"
        "once the ring is full; the filled slots hold the window\n"
        "of the query at p",
    },
    "ru": {
        "title": "Кольцо из W = {w} ячеек: p идёт в ячейку p mod {w}",
        "slot": "ячейка",
        "step": "запись p = {p}",
        "forgotten": "забыты",
        "key": "оранжевая — ячейка шага p, поверх позиции p − {w},\n"
        "когда кольцо заполнено; заполненные ячейки хранят\n"
        "окно запроса на позиции p",
    },
}


def _box(ax, x, y, w, h, face, edge="none", lw=1.0, ls="-", **kw) -> None:
    ax.add_patch(
        FancyBboxPatch(
            (x, y),
            w,
            h,
            boxstyle="round,pad=0,rounding_size=0.05",
            facecolor=face,
            edgecolor=edge,
            linewidth=lw,
            linestyle=ls,
            **kw,
        )
    )


def _canvas(width: float, height: float):
    """A figure of `width` x `height` inches with one axes whose data units are inches,
    (0, 0) at the bottom left: a diagram is laid out in inches."""
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    return fig, ax


def ring_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """One row per step shown: the W slots of the ring after position p is written
    (its slot orange), and the positions it has forgotten."""
    t = text(RING_LABELS, language)
    w = RING_WINDOW
    shown = [s for s in ring_snapshots() if s.position in RING_SHOWN]
    row_h, box_w, gap = 0.46, 0.62, 0.08
    x0, top = 1.5, 0.8 + row_h * len(shown) + 0.35
    width, height = 5.2, top + 0.55  # 0.6 in at the bottom for the key
    with style(theme) as p:
        fig, ax = _canvas(width, height)
        ax.text(
            0.05,
            height - 0.22,
            t["title"].format(w=w),
            fontsize=11.5,
            fontweight="bold",
            color=p.ink,
            va="center",
        )
        head_y = top - 0.12
        ax.text(
            0.05, head_y, t["slot"], ha="left", va="center", fontsize=10, color=p.muted
        )
        for j in range(w):
            ax.text(
                x0 + j * (box_w + gap) + box_w / 2,
                head_y,
                str(j),
                ha="center",
                va="center",
                fontsize=10,
                color=p.muted,
            )
        x_forgot = x0 + w * (box_w + gap) + 0.1
        ax.text(
            x_forgot,
            head_y,
            t["forgotten"],
            ha="left",
            va="center",
            fontsize=10,
            color=p.muted,
        )
        for row, snap in enumerate(shown):
            y = top - 0.32 - (row + 1) * row_h
            ax.text(
                0.05,
                y + (row_h - 0.1) / 2,
                t["step"].format(p=snap.position),
                ha="left",
                va="center",
                fontsize=10.5,
                color=p.ink,
            )
            for j, held in enumerate(snap.slots):
                x = x0 + j * (box_w + gap)
                if held is None:
                    face, label, ink = p.empty, "·", p.muted
                else:
                    face = ORANGE if j == snap.written else p.series[0]
                    label, ink = str(held), BOX_INK
                _box(
                    ax,
                    x,
                    y,
                    box_w,
                    row_h - 0.1,
                    face,
                    edge=p.ink if j == snap.written else "none",
                    lw=1.2,
                )
                ax.text(
                    x + box_w / 2,
                    y + (row_h - 0.1) / 2,
                    label,
                    ha="center",
                    va="center",
                    fontsize=11,
                    color=ink,
                    gid=f"ring-p{snap.position}-slot{j}",
                )
            ax.text(
                x_forgot,
                y + (row_h - 0.1) / 2,
                _span(snap.forgotten),
                ha="left",
                va="center",
                fontsize=10.5,
                color=p.muted,
                gid=f"ring-p{snap.position}-gone",
            )
        ax.text(
            0.05,
            0.42,
            t["key"].format(w=w),
            ha="left",
            va="center",
            fontsize=10,
            color=p.ink,
            linespacing=1.3,
        )
    return fig


# ---------------------------------------------------------------------------------------
# MLA's compression


@dataclass(frozen=True)
class MlaWidths:
    d_model: int
    n_heads: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    latent_floats: int  # what one token leaves in one layer's LatentCache
    mha_floats: int  # what multi-head attention with the same heads would leave


def mla_widths(name: str = "DeepSeek-V3") -> MlaWidths:
    """The widths of a published MLA model's configuration, the floats one token
    leaves in a `LatentCache` of them (one layer), and the floats it would leave in a
    multi-head cache of every head's key and value (`expanded_cache_bytes_per_token`
    at one layer and one byte per float)."""
    c = published_config(name)
    cache = LatentCache(1, 1, c.kv_lora_rank, c.qk_rope_head_dim)  # one token
    latent = cache.nbytes // cache.k.element_size()
    mha = expanded_cache_bytes_per_token(
        1,
        c.num_attention_heads,
        c.qk_nope_head_dim + c.qk_rope_head_dim,
        c.v_head_dim,
        1,
    )
    return MlaWidths(
        c.hidden_size,
        c.num_attention_heads,
        c.kv_lora_rank,
        c.qk_nope_head_dim,
        c.qk_rope_head_dim,
        c.v_head_dim,
        latent,
        mha,
    )


MLA_LABELS = {
    "en": {
        "title": "MLA in DeepSeek-V3: one latent per token",
        "naive": "Naive order (prefill): every head's K and V rebuilt",
        "absorbed": "Absorbed order (decoding): $W_{uk}$ moved into the query",
        "hidden": "hidden $h$\n{d}",
        "latent": "latent $c$  {r}",
        "rope": "$k_{{rope}}$  {d}",
        "cached": "cached: {r} + {d} = {n} floats",
        "keys": "K: {h} heads ×\n({n} + {d} shared)",
        "values": "V: {h} heads × {v}",
        "q_nope": "$q_{{nope}}$\n{n} per head",
        "q_lat": "$W_{{uk}}^\\top q_{{nope}}$  {r}",
        "q_rope": "$q_{{rope}}$  {d}",
        "scores": "scored against the\ncache as it is,\n{n} wide; $W_{{uv}}$\nafter the sum",
        "bars": "Floats cached per token and layer",
        "mla_bar": "MLA: {n}",
        "mha_bar": "MHA, same heads: {h} × ({qk} + {v}) = {n}",
        "ratio": "{x}× fewer",
    },
    "ru": {
        "title": "MLA в DeepSeek-V3: один латент на токен",
        "naive": "Прямой порядок (prefill): K и V каждой головы заново",
        "absorbed": "Поглощённый порядок (декодирование): $W_{uk}$ в запросе",
        "hidden": "вход $h$\n{d}",
        "latent": "латент $c$  {r}",
        "rope": "$k_{{rope}}$  {d}",
        "cached": "в кеше: {r} + {d} = {n} чисел",
        "keys": "K: {h} голов ×\n({n} + {d} общих)",
        "values": "V: {h} голов × {v}",
        "q_nope": "$q_{{nope}}$\n{n} на голову",
        "q_lat": "$W_{{uk}}^\\top q_{{nope}}$  {r}",
        "q_rope": "$q_{{rope}}$  {d}",
        "scores": "оценки по кешу\nкак он есть,\nширина {n};\n$W_{{uv}}$ после суммы",
        "bars": "Чисел в кеше на токен и слой",
        "mla_bar": "MLA: {n}",
        "mha_bar": "MHA, те же головы: {h} × ({qk} + {v}) = {n}",
        "ratio": "в {x} раз меньше",
    },
}


def _number(n: int, language: str) -> str:
    """40960 -> '40,960' ('40 960' in Russian, a thin space)."""
    return f"{n:,}".replace(",", "\u2009" if language == "ru" else ",")


def _arrow(ax, start, end, color, *, ls="-") -> None:
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=10,
            color=color,
            lw=1.2,
            linestyle=ls,
            shrinkA=0,
            shrinkB=0,
        )
    )


def mla_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Top: the naive order, h -> [c | k_rope] (cached) -> every head's K and V.
    Middle: the absorbed order, W_uk^T q_nope and q_rope scored against the cache as
    it is. Bottom: the floats cached per token and layer, MLA against MHA, to scale."""
    t = text(MLA_LABELS, language)
    m = mla_widths()
    n = lambda k: _number(k, language)  # noqa: E731
    width, height = 5.2, 5.0
    with style(theme) as p:
        fig, ax = _canvas(width, height)
        ax.text(
            0.05,
            4.78,
            t["title"],
            fontsize=12,
            fontweight="bold",
            color=p.ink,
            va="center",
        )

        # The naive order
        ax.text(
            0.05,
            4.45,
            t["naive"],
            fontsize=10,
            color=p.ink,
            va="center",
            fontweight="bold",
        )
        _box(ax, 0.05, 3.45, 0.85, 0.7, p.empty, edge=p.border)
        ax.text(
            0.475,
            3.8,
            t["hidden"].format(d=n(m.d_model)),
            ha="center",
            va="center",
            fontsize=10,
            color=p.ink,
            linespacing=1.4,
        )
        cx, cw = 1.45, 1.3  # the cache column
        _box(
            ax, cx - 0.07, 3.08, cw + 0.14, 1.16, "none", edge=p.muted, lw=1.0, ls="--"
        )
        _box(ax, cx, 3.75, cw, 0.4, p.series[0])
        ax.text(
            cx + cw / 2,
            3.95,
            t["latent"].format(r=m.kv_lora_rank),
            ha="center",
            va="center",
            fontsize=10,
            color=BOX_INK,
        )
        _box(ax, cx, 3.3, cw, 0.36, ORANGE)
        ax.text(
            cx + cw / 2,
            3.48,
            t["rope"].format(d=m.qk_rope_head_dim),
            ha="center",
            va="center",
            fontsize=10,
            color=BOX_INK,
        )
        ax.text(
            cx + cw / 2,
            2.93,
            t["cached"].format(
                r=m.kv_lora_rank, d=m.qk_rope_head_dim, n=n(m.latent_floats)
            ),
            ha="center",
            va="center",
            fontsize=10,
            color=p.ink,
        )
        _arrow(ax, (0.9, 3.8), (cx - 0.08, 3.8), p.muted)
        ax.text(
            1.14, 3.88, "$W_{dkv}$", ha="center", va="bottom", fontsize=10, color=p.ink
        )
        kx, kw = 3.55, 1.6  # the per-head column: V on top, K below
        _box(ax, kx, 3.8, kw, 0.4, GREEN)
        ax.text(
            kx + kw / 2,
            4.0,
            t["values"].format(h=m.n_heads, v=m.v_head_dim),
            ha="center",
            va="center",
            fontsize=10,
            color=BOX_INK,
        )
        _box(ax, kx, 3.1, kw, 0.58, GREEN)
        ax.text(
            kx + kw / 2,
            3.39,
            t["keys"].format(h=m.n_heads, n=m.qk_nope_head_dim, d=m.qk_rope_head_dim),
            ha="center",
            va="center",
            fontsize=10,
            color=BOX_INK,
            linespacing=1.2,
        )
        right = cx + cw + 0.07
        _arrow(ax, (right, 4.0), (kx, 4.0), p.muted)
        ax.text(
            (right + kx) / 2,
            4.06,
            "$W_{uv}$",
            ha="center",
            va="bottom",
            fontsize=10,
            color=p.ink,
        )
        _arrow(ax, (right, 3.86), (kx, 3.55), p.muted)
        ax.text(
            (right + kx) / 2 + 0.05,
            3.74,
            "$W_{uk}$",
            ha="left",
            va="bottom",
            fontsize=10,
            color=p.ink,
        )
        _arrow(ax, (cx + cw, 3.4), (kx, 3.4), p.muted, ls=":")

        # The absorbed order
        ax.text(
            0.05,
            2.6,
            t["absorbed"],
            fontsize=10,
            color=p.ink,
            va="center",
            fontweight="bold",
        )
        _box(ax, 0.05, 1.7, 1.17, 0.62, GREEN)
        ax.text(
            0.635,
            2.01,
            t["q_nope"].format(n=m.qk_nope_head_dim),
            ha="center",
            va="center",
            fontsize=10,
            color=BOX_INK,
            linespacing=1.3,
        )
        _box(ax, cx, 1.97, cw, 0.36, p.series[0])
        ax.text(
            cx + cw / 2,
            2.15,
            t["q_lat"].format(r=m.kv_lora_rank),
            ha="center",
            va="center",
            fontsize=10,
            color=BOX_INK,
        )
        _box(ax, cx, 1.55, cw, 0.34, ORANGE)
        ax.text(
            cx + cw / 2,
            1.72,
            t["q_rope"].format(d=m.qk_rope_head_dim),
            ha="center",
            va="center",
            fontsize=10,
            color=BOX_INK,
        )
        _arrow(ax, (1.22, 2.15), (cx - 0.04, 2.15), p.muted)
        _arrow(ax, (cx + cw + 0.04, 1.94), (kx - 0.08, 1.94), p.muted)
        ax.text(
            kx,
            1.94,
            t["scores"].format(n=n(m.latent_floats)),
            ha="left",
            va="center",
            fontsize=10,
            color=p.ink,
            linespacing=1.3,
        )

        # The cache per token and layer, to scale
        ax.text(
            0.05,
            1.13,
            t["bars"],
            fontsize=10,
            color=p.ink,
            va="center",
            fontweight="bold",
        )
        full = width - 0.1
        bar_h = 0.3
        ax.add_patch(
            Rectangle((0.05, 0.12), full, bar_h, facecolor=p.border, edgecolor="none")
        )
        ax.text(
            0.12,
            0.12 + bar_h / 2,
            t["mha_bar"].format(
                h=m.n_heads,
                qk=m.qk_nope_head_dim + m.qk_rope_head_dim,
                v=m.v_head_dim,
                n=n(m.mha_floats),
            ),
            ha="left",
            va="center",
            fontsize=10,
            color=p.ink,
        )
        mla_w = full * m.latent_floats / m.mha_floats
        ax.add_patch(
            Rectangle(
                (0.05, 0.58), mla_w, bar_h, facecolor=p.series[0], edgecolor="none"
            )
        )
        ratio = round(m.mha_floats / m.latent_floats)
        ax.text(
            0.05 + mla_w + 0.08,
            0.58 + bar_h / 2,
            t["mla_bar"].format(n=n(m.latent_floats))
            + "  ("
            + t["ratio"].format(x=ratio)
            + ")",
            ha="left",
            va="center",
            fontsize=10,
            color=p.ink,
            gid="mla-latent-floats",
        )
    return fig


SPECS: list[tuple] = [
    (
        "ring-cache",
        ring_figure,
        "Six rows, one per step, of the 4 slots of a ring cache after position p is "
        "written, p going to slot p mod 4. After p = 2: slots 0 to 2 hold 0, 1, 2, "
        "slot 3 empty. After p = 3: 0, 1, 2, 3, nothing forgotten. After p = 4: slot 0 "
        "holds 4, written over position 0, now forgotten. After p = 5: 4, 5, 2, 3, "
        "positions 0 and 1 forgotten. After p = 6: 4, 5, 6, 3. After p = 9: 8, 9, 6, 7, "
        "positions 0 to 5 forgotten. The slot just written is orange; the filled "
        "slots hold the window of the query at p.",
    ),
    (
        "mla-compression",
        mla_figure,
        "Multi-head latent attention with DeepSeek-V3's widths. Naive order: the "
        "hidden vector of width 7,168 is projected down by W_dkv to the latent c of "
        "width 512 and the shared RoPE key of width 64, which are cached, 576 floats "
        "per token and layer; W_uk and W_uv project the latent up to every head's key, "
        "128 heads of 128 plus the shared 64, and value, 128 heads of 128. Absorbed "
        "order: W_uk transposed is multiplied into each head's query part of 128, "
        "giving a query of 512 and the RoPE query of 64, scored against the cache as "
        "it is, 576 wide, W_uv applied after the weighted sum. Bars to scale: MLA "
        "caches 576 floats per token and layer, multi-head attention with the same "
        "heads 128 times (192 + 128) = 40,960, 71 times as many.",
    ),
]
