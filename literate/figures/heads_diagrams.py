"""Diagrams (issue 26): drawn from the code, light and dark, English and Russian.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

Chapter 3: the page's two-head example as weights, the KV cache that a RoPE layer fills
call by call, and the T x S weights of cross-attention over a padded source.
"""

# Over 450 lines on purpose: chapter 3's three diagrams, each with its English
# and Russian labels and the run of the page's layers it reads its numbers from.

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle

from literate.figures.style import BOX_INK, style, text
from literate.minimal.attention import causal_mask, scaled_dot_product_attention
from literate.minimal.cache import KVCache
from literate.minimal.multi_head import GQAttention, MultiHeadAttention, split_heads
from literate.minimal.positions import apply_rope, rope_tables
from literate.parts.multi_head import MultiHeadAttention as HardenedMHA

F64 = torch.float64

# ---------------------------------------------------------------- two heads, by hand


STEPS_BOUND = 1e-12  # float64: the cached steps equal one full pass to rounding


@dataclass(frozen=True)
class TwoHeads:
    weights: torch.Tensor  # [H=2, T=2, T=2], from the layer's own q, k, v
    outputs: torch.Tensor  # [H=2, T=2, d_head=2], per head
    layer_out: torch.Tensor  # [T=2, d=4], the layer's forward


def two_heads_example() -> TwoHeads:
    """The page's hand example: width 4, two heads, every projection the identity,
    tokens (4, 2, 0, 0) and (0, 0, 6, 2), causal. Weights and per-head outputs come from
    the layer's projections and chapter 1's attention; `layer_out` is the layer itself."""
    with torch.random.fork_rng():  # nn.Linear's init draws numbers we then overwrite
        attn = MultiHeadAttention(d_model=4, n_heads=2, bias=False).double()
    x = torch.tensor([[[4.0, 2.0, 0.0, 0.0], [0.0, 0.0, 6.0, 2.0]]], dtype=F64)
    allowed = causal_mask(2, 2)
    with torch.no_grad():
        for projection in (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj):
            projection.weight.copy_(torch.eye(4))
        q, k, v = (
            split_heads(p(x), 2) for p in (attn.q_proj, attn.k_proj, attn.v_proj)
        )
        out, weights = scaled_dot_product_attention(q, k, v, allowed)
        layer_out = attn(x, allowed=allowed)
    return TwoHeads(weights[0], out[0], layer_out[0])


TWO_HEADS_LABELS = {
    "en": {
        "title": "Two heads, one layer: who token 1 reads",
        "head": "head {h} (columns {a}-{b})",
        "query": "query",
        "key": "key",
        "blocked": "future",
        "out": "token 1 gets {v}",
        "concat": "concatenated, token 1's output: {v}",
    },
    "ru": {
        "title": "Две головы одного слоя: что читает токен 1",
        "head": "голова {h} (столбцы {a}-{b})",
        "query": "запрос",
        "key": "ключ",
        "blocked": "скрыт",
        "out": "токен 1 получает {v}",
        "concat": "после склейки выход токена 1: {v}",
    },
}


def _vec(t: torch.Tensor) -> str:
    return "(" + ", ".join(f"{x:g}" for x in t.round(decimals=2).tolist()) + ")"


def two_heads_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """The 2 x 2 causal weights of each head of the page's example, and what each head
    hands token 1."""
    t = text(TWO_HEADS_LABELS, language)
    ex = two_heads_example()
    with style(theme) as p:
        fig, axes = plt.subplots(1, 2, figsize=(5.2, 2.9), layout="constrained")
        for h, ax in enumerate(axes):
            colour = p.series[h]
            for i in range(2):
                for j in range(2):
                    y = 1 - i  # query 0 on top
                    w = ex.weights[h, i, j].item()
                    blocked = j > i
                    ax.add_patch(
                        Rectangle(
                            (j, y),
                            1,
                            1,
                            facecolor=p.empty if blocked else colour,
                            alpha=1.0 if blocked else 0.15 + 0.85 * w,
                            edgecolor=p.border,
                            linewidth=1.0,
                            gid=f"two-heads-{h}-{i}-{j}",
                        )
                    )
                    label = t["blocked"] if blocked else f"{w:.2f}"
                    ink = p.muted if blocked or w < 0.6 else BOX_INK
                    ax.text(
                        j + 0.5,
                        y + 0.5,
                        label,
                        ha="center",
                        va="center",
                        fontsize=11,
                        color=ink,
                    )
            ax.set_xlim(0, 2)
            ax.set_ylim(0, 2)
            ax.set_aspect("equal")
            ax.set_xticks([0.5, 1.5], ["0", "1"])
            ax.set_yticks([1.5, 0.5], ["0", "1"])
            ax.set_xlabel(t["key"], fontsize=10)
            ax.set_ylabel(t["query"], fontsize=10)
            ax.set_title(
                t["head"].format(h=h, a=2 * h, b=2 * h + 1), fontsize=10, color=colour
            )
            ax.text(
                1.0,
                -0.75,
                t["out"].format(v=_vec(ex.outputs[h, 1])),
                ha="center",
                va="top",
                fontsize=10,
                color=p.ink,
                transform=ax.transData,
            )
            for spine in ax.spines.values():
                spine.set_visible(False)
        fig.suptitle(t["title"], fontsize=12, fontweight="bold", color=p.ink)
        fig.text(
            0.5,
            0.01,
            t["concat"].format(v=_vec(ex.layer_out[1])),
            ha="center",
            va="bottom",
            fontsize=10,
            color=p.ink,
        )
        fig.get_layout_engine().set(h_pad=0.12)
    return fig


# ---------------------------------------------------------------- RoPE and the cache

PROMPT, STEPS = 4, (4, 5)


@dataclass(frozen=True)
class CacheWalk:
    offsets: list[int]  # cache.offset before each call
    filled: list[int]  # cache.offset after each call
    kept: list[
        bool
    ]  # after each call: the slots cached before are bit for bit the same
    rotation_error: float  # max |cached key p - k_proj(x_p) rotated at p|, all p
    max_difference: float  # max |stepwise - one full forward|
    cache_shape: tuple[int, ...]


def cache_walk() -> CacheWalk:
    """The page's run: GQA (d=32, 4 query heads, 2 K/V heads), a 4-token prompt, then
    one token at a time, positions 4 and 5, through the minimal KVCache."""
    g = torch.Generator().manual_seed(0)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        gqa = GQAttention(d_model=32, n_heads=4, n_kv_heads=2).double()
    x = torch.randn(1, PROMPT + len(STEPS), 32, dtype=F64, generator=g)
    cache = KVCache()
    offsets, filled, kept, outs = [], [], [], []
    chunks = [(0, PROMPT)] + [(s, s + 1) for s in STEPS]
    with torch.no_grad():
        for a, b in chunks:
            before = None if cache.k is None else cache.k.clone()
            offsets.append(cache.offset)
            outs.append(gqa(x[:, a:b], cache))
            filled.append(cache.offset)
            kept.append(
                before is None or torch.equal(cache.k[:, :, : before.shape[2]], before)
            )
        full = gqa(x)
        n = x.shape[1]
        cos, sin = rope_tables(gqa.d_head, n)
        expected = apply_rope(split_heads(gqa.k_proj(x), 2), cos, sin)
    walk = CacheWalk(
        offsets=offsets,
        filled=filled,
        kept=kept,
        rotation_error=(cache.k - expected).abs().max().item(),
        max_difference=(torch.cat(outs, dim=1) - full).abs().max().item(),
        cache_shape=tuple(cache.k.shape),
    )
    # the figure states a bound, not the float64 rounding of one run (which may change
    # with the thread count), and refuses to draw if the run breaks it
    if not walk.max_difference < STEPS_BOUND:
        raise ValueError(
            f"the steps differ from one pass by {walk.max_difference:.1e} >= {STEPS_BOUND}"
        )
    return walk


CACHE_LABELS = {
    "en": {
        "title": "The KV cache of a RoPE layer, call by call",
        "calls": ("prompt", "step", "step"),
        "offset": "offset {a} → {b}",
        "query": "new q at t = {t}",
        "queries": "q at 0..{t}",
        "note": "each key rotated once, at its own position p, then\n"
        "never touched again; q@5 scores k@p by the distance 5 − p",
        "footer": "cache.k {shape} · steps vs one pass: max |diff| < {d:.0e}",
    },
    "ru": {
        "title": "KV-кеш слоя с RoPE, вызов за вызовом",
        "calls": ("промпт", "шаг", "шаг"),
        "offset": "offset {a} → {b}",
        "query": "новый q, t = {t}",
        "queries": "q на 0..{t}",
        "note": "каждый ключ повёрнут один раз, на своей позиции p,\n"
        "и больше не меняется; q@5 оценивает k@p по расстоянию 5 − p",
        "footer": "cache.k {shape} · шаги и один проход: max |разн.| < {d:.0e}",
    },
}


def rope_cache_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Three rows, one per call: the cache's key slots after the call, coloured by the
    call that wrote them and labelled with the position they were rotated at; the last
    row's query at t = 5 reads every slot."""
    t = text(CACHE_LABELS, language)
    walk = cache_walk()
    n = walk.filled[-1]
    with style(theme) as p:
        fig, ax = plt.subplots(figsize=(5.2, 4.2), layout="constrained")
        rows = len(walk.filled)
        for r in range(rows):
            y = (rows - 1 - r) * 1.25
            ax.text(
                -0.2,
                y + 0.2,
                f"{t['calls'][r]}",
                ha="right",
                va="center",
                fontsize=10,
                color=p.series[r],
            )
            ax.text(
                -0.2,
                y - 0.15,
                t["offset"].format(a=walk.offsets[r], b=walk.filled[r]),
                ha="right",
                va="center",
                fontsize=9.5,
                color=p.muted,
            )
            for s in range(n):
                writer = next(i for i, f in enumerate(walk.filled) if s < f)
                present = s < walk.filled[r]
                ax.add_patch(
                    Rectangle(
                        (s + 0.06, y - 0.3),
                        0.88,
                        0.6,
                        facecolor=p.series[writer] if present else p.empty,
                        edgecolor=p.ink if present and writer == r else p.border,
                        linewidth=1.4 if present and writer == r else 0.8,
                        gid=f"rope-cache-{r}-{s}-{writer if present else 'empty'}",
                    )
                )
                if present:
                    ax.text(
                        s + 0.5,
                        y,
                        f"k@{s}",
                        ha="center",
                        va="center",
                        fontsize=10,
                        color=BOX_INK,
                    )
            new = range(walk.offsets[r], walk.filled[r])
            label = (
                t["queries"].format(t=new[-1])
                if len(new) > 1
                else t["query"].format(t=new[0])
            )
            ax.text(
                new[0] + len(new) / 2,
                y + 0.42,
                label,
                ha="center",
                va="bottom",
                fontsize=10,
                color=p.ink,
            )
        # the last call's query, below its row, reads every cached key
        q_x, q_y = walk.offsets[-1] + 0.5, -0.95
        last = p.series[len(walk.filled) - 1]
        ax.text(
            q_x,
            q_y,
            f"q@{walk.offsets[-1]}",
            ha="center",
            va="center",
            fontsize=10,
            color=BOX_INK,
            gid="rope-cache-query",
            bbox={
                "boxstyle": "round,pad=0.25",
                "facecolor": last,
                "edgecolor": p.ink,
                "linewidth": 1.0,
            },
        )
        for s in range(n):
            ax.add_patch(
                FancyArrowPatch(
                    (q_x, q_y + 0.2),
                    (s + 0.5, -0.33),
                    arrowstyle="-|>",
                    mutation_scale=7,
                    color=last,
                    linewidth=0.9,
                    connectionstyle=f"arc3,rad={-0.12 if s < n - 1 else 0}",
                    gid=f"rope-cache-reads-{s}",
                )
            )
        ax.text(
            n / 2 - 0.8,
            -1.55,
            t["note"],
            ha="center",
            va="center",
            fontsize=10,
            color=p.ink,
            linespacing=1.3,
        )
        shape = "[" + ", ".join(str(d) for d in walk.cache_shape) + "]"
        ax.text(
            n / 2 - 0.8,
            -2.2,
            t["footer"].format(shape=shape, d=STEPS_BOUND),
            ha="center",
            va="top",
            fontsize=9.5,
            color=p.muted,
        )
        ax.set_xlim(-2.3, n + 0.1)
        ax.set_ylim(-2.45, (rows - 1) * 1.25 + 0.75)
        ax.axis("off")
        ax.set_title(t["title"], fontsize=12, loc="center")
    return fig


# ---------------------------------------------------------------- cross-attention

CROSS_T, CROSS_S, CROSS_VALID = 3, 7, (7, 4)


def cross_weights() -> torch.Tensor:
    """Weights [B=2, H=4, T=3, S=7] of cross-attention (d=16, no causal mask) over a
    7-token source, the second sequence's last 3 tokens padding: the hardened layer."""
    g = torch.Generator().manual_seed(0)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        layer = HardenedMHA(d_model=16, n_heads=4, bias=True).double()
    xt = torch.randn(2, CROSS_T, 16, dtype=F64, generator=g)
    memory = torch.randn(2, CROSS_S, 16, dtype=F64, generator=g)
    valid = torch.tensor([[s < n for s in range(CROSS_S)] for n in CROSS_VALID])
    with torch.no_grad():
        _, weights = layer(
            xt, memory, causal=False, key_valid=valid, return_weights=True
        )
    return weights


CROSS_LABELS = {
    "en": {
        "title": "Cross-attention: weights T = 3 × S = 7",
        "panel": "sequence {b}, head 0: {n} real source tokens",
        "target": "target",
        "source": "source token",
        "pad": "PAD",
    },
    "ru": {
        "title": "Перекрёстное внимание: веса T = 3 × S = 7",
        "panel": "последовательность {b}, голова 0: {n} настоящих токенов",
        "target": "цель",
        "source": "токен источника",
        "pad": "PAD",
    },
}


def cross_attention_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Head 0's [T, S] weights for both sequences, stacked; padded source columns drawn
    empty (weight 0), every row of real keys summing to 1."""
    t = text(CROSS_LABELS, language)
    weights = cross_weights()
    with style(theme) as p:
        fig, axes = plt.subplots(2, 1, figsize=(5.2, 3.9), layout="constrained")
        for b, ax in enumerate(axes):
            for i in range(CROSS_T):
                for s in range(CROSS_S):
                    w = weights[b, 0, i, s].item()
                    real = s < CROSS_VALID[b]
                    y = CROSS_T - 1 - i
                    ax.add_patch(
                        Rectangle(
                            (s, y),
                            1,
                            1,
                            facecolor=p.series[0] if real else p.empty,
                            alpha=min(1.0, 0.1 + 1.5 * w) if real else 1.0,
                            edgecolor=p.border,
                            linewidth=0.8,
                            gid=f"cross-{b}-{i}-{s}",
                        )
                    )
                    label = f"{w:.2f}" if real else t["pad"]
                    ink = (
                        BOX_INK
                        if real and w >= 0.35
                        else p.muted
                        if not real
                        else p.ink
                    )
                    ax.text(
                        s + 0.5,
                        y + 0.5,
                        label,
                        ha="center",
                        va="center",
                        fontsize=10,
                        color=ink,
                    )
            ax.set_xlim(0, CROSS_S)
            ax.set_ylim(0, CROSS_T)
            ax.set_xticks(
                [s + 0.5 for s in range(CROSS_S)], [str(s) for s in range(CROSS_S)]
            )
            ax.set_yticks(
                [CROSS_T - 0.5 - i for i in range(CROSS_T)],
                [str(i) for i in range(CROSS_T)],
            )
            ax.set_ylabel(t["target"], fontsize=10)
            ax.set_title(t["panel"].format(b=b, n=CROSS_VALID[b]), fontsize=10)
            for spine in ax.spines.values():
                spine.set_visible(False)
        axes[-1].set_xlabel(t["source"], fontsize=10)
        fig.suptitle(t["title"], fontsize=11.5, fontweight="bold", color=p.ink)
    return fig


def _two_heads_alt() -> str:
    ex = two_heads_example()
    w0, w1 = ex.weights[0, 1].tolist(), ex.weights[1, 1].tolist()
    return (
        "The two heads of the page's width-4 example, causal, each as a 2 by 2 grid of "
        "attention weights. Token 0 reads only itself in both heads. Token 1 puts "
        f"{w0[0]:.2f} and {w0[1]:.2f} on keys 0 and 1 in head 0, so it gets the average "
        f"{_vec(ex.outputs[0, 1])}, and {w1[0]:.2f} and {w1[1]:.2f} in head 1, so it gets "
        f"its own {_vec(ex.outputs[1, 1])}; concatenated, the layer's output for token 1 "
        f"is {_vec(ex.layer_out[1])}."
    )


def _rope_cache_alt() -> str:
    w = cache_walk()
    return (
        "The key cache of a grouped-query layer with RoPE after each of three calls: a "
        f"4-token prompt fills slots 0 to 3 (offset {w.offsets[0]} to {w.filled[0]}), "
        f"then one step adds slot 4 and another slot 5 (offset {w.filled[-1]}). Each key "
        "is rotated at its own position when it is written and cached slots never "
        "change; the new query at position 5 reads all six keys. The cache's shape is "
        f"{' by '.join(map(str, w.cache_shape))} and the steps match one full pass to "
        f"within {STEPS_BOUND:.0e}."
    )


def _cross_alt() -> str:
    w = cross_weights()
    top = w[0, 0, 0].max().item()
    return (
        "Head 0's cross-attention weights for 3 target tokens over a 7-token source, as "
        "two 3 by 7 grids, one per sequence. Sequence 0 has 7 real source tokens and "
        "every target token spreads its weight over all of them (the largest weight of "
        f"target 0 is {top:.2f}); sequence 1's last 3 source tokens are padding and get "
        "weight 0, the 4 real ones share all of it. Nothing is causal."
    )


SPECS: list[tuple] = [
    ("heads-two-heads", two_heads_figure, _two_heads_alt()),
    ("heads-rope-cache", rope_cache_figure, _rope_cache_alt()),
    ("heads-cross-attention", cross_attention_figure, _cross_alt()),
]
