"""Diagrams (issue 26): drawn from the code, light and dark, English and Russian.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

Chapter 7's mechanisms, each from a run of the code the page shows: RMSNorm against
LayerNorm on the page's vector (`norm_run`), which key/value head each query head of the
minimal `GQAttention` reads (`gqa_run`, found by switching the value heads on one at a
time), the triangle PyTorch's `is_causal` draws for a chunk of queries over a longer
cache against the bottom-right mask the chunk needs (`chunk_masks`), and where the
parameters of the published blocks sit (`block_shares`, built on the meta device).
"""

# Over 450 lines on purpose: chapter 7's five diagrams, each with its English
# and Russian labels and the run of the page's code it reads its numbers from.

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Rectangle

from literate.figures.style import BOX_INK, style, text

WIDTH = 5.2  # inches: at a phone's 358 px, 10 pt renders at 9.6 px
SMALL, LABEL, TITLE = 10, 11, 12
MINUS = "\u2212"


def _num(v: float, language: str, digits: int = 2) -> str:
    s = f"{v:.{digits}f}".replace("-", MINUS)
    return s.replace(".", ",") if language == "ru" else s


def _canvas(height: float) -> tuple[Figure, plt.Axes]:
    """A figure WIDTH x height inches whose one axes has 1 data unit = 1 inch."""
    fig = plt.figure(figsize=(WIDTH, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, WIDTH)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    return fig, ax


def _box(ax, x, y, w, h, label, *, face, edge, ink, size=SMALL) -> None:
    """A rounded box centred at (x, y) with its label."""
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0,rounding_size=0.05",
            facecolor=face,
            edgecolor=edge,
            linewidth=1.0,
        )
    )
    ax.text(x, y, label, ha="center", va="center", fontsize=size, color=ink)


# --- RMSNorm against LayerNorm ----------------------------------------------------


@dataclass(frozen=True)
class NormRun:
    x: tuple[float, ...]
    rms: tuple[float, ...]  # RMSNorm(x), unit gain
    layer: tuple[float, ...]  # LayerNorm(x) without a bias, unit gain
    root_mean_square: float
    mean: float
    std: float


NORM_VECTOR = (0.0, 3.0, 4.0, 0.0)  # the page's vector, "by hand"


def norm_run() -> NormRun:
    """The page's vector through the site's RMSNorm and a bias-free LayerNorm (eps
    1e-6, unit gains), with the statistics each divides by."""
    from literate.parts.norms import LayerNorm, RMSNorm

    x = torch.tensor(NORM_VECTOR, dtype=torch.float64)
    d = len(NORM_VECTOR)
    rms = RMSNorm(d_model=d, eps=1e-6).double()
    ln = LayerNorm(d_model=d, eps=1e-6, bias=False).double()
    with torch.no_grad():
        y_rms, y_ln = rms(x), ln(x)
    return NormRun(
        x=tuple(x.tolist()),
        rms=tuple(y_rms.tolist()),
        layer=tuple(y_ln.tolist()),
        root_mean_square=x.pow(2).mean().sqrt().item(),
        mean=x.mean().item(),
        std=x.var(unbiased=False).sqrt().item(),
    )


NORM_LABELS = {
    "en": {
        "title": "One vector, two norms",
        "rms": "RMSNorm: $x$ / RMS {r}",
        "ln": "LayerNorm: ($x$ {m}) / σ {s}",
        "coord": "$x_{i}$ = {v}",
    },
    "ru": {
        "title": "Один вектор, две нормы",
        "rms": "RMSNorm: $x$ / RMS {r}",
        "ln": "LayerNorm: ($x$ {m}) / σ {s}",
        "coord": "$x_{i}$ = {v}",
    },
}


def rmsnorm_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Bars of RMSNorm(x) and LayerNorm(x) for each coordinate of the page's vector."""
    t = text(NORM_LABELS, language)
    run = norm_run()
    n = len(run.x)
    with style(theme) as p:
        fig = plt.figure(figsize=(WIDTH, 3.3))
        ax = fig.add_axes((0.1, 0.14, 0.88, 0.62))
        width = 0.36
        colours = (p.series[0], p.series[1])
        for k, (values, colour) in enumerate(zip((run.rms, run.layer), colours)):
            xs = [i + (k - 0.5) * width for i in range(n)]
            ax.bar(xs, values, width=width * 0.95, color=colour, gid=f"bars-{k}")
            for xi, v in zip(xs, values):
                ax.text(
                    xi,
                    v + (0.06 if v >= 0 else -0.06),
                    _num(v, language),
                    ha="center",
                    va="bottom" if v >= 0 else "top",
                    fontsize=SMALL,
                    color=p.ink,
                )
        ax.axhline(0, color=p.muted, lw=0.8)
        ax.set_xticks(range(n))
        ax.set_xticklabels(
            [
                t["coord"].format(i=i, v=_num(v, language, 0))
                for i, v in enumerate(run.x)
            ],
            fontsize=LABEL,
            color=p.ink,
        )
        low = min(run.layer) - 0.45
        high = max(max(run.rms), max(run.layer)) + 0.35
        ax.set_ylim(low, high)
        ax.set_yticks([])
        for side in ("left", "right", "top", "bottom"):
            ax.spines[side].set_visible(False)
        ax.set_xlim(-0.6, n - 0.4)
        mean = f"{MINUS} {_num(run.mean, language)}"
        fig.text(0.02, 0.95, t["title"], fontsize=TITLE, fontweight="bold", va="top")
        for k, (label, colour) in enumerate(
            zip(
                (
                    t["rms"].format(r=_num(run.root_mean_square, language)),
                    t["ln"].format(m=mean, s=_num(run.std, language)),
                ),
                colours,
            )
        ):
            y = 0.855 - k * 0.065
            fig.patches.append(
                Rectangle(
                    (0.03, y - 0.018),
                    0.025,
                    0.04,
                    transform=fig.transFigure,
                    facecolor=colour,
                    edgecolor="none",
                )
            )
            fig.text(0.07, y, label, fontsize=SMALL, va="center", color=p.ink)
    return fig


def _rmsnorm_alt() -> str:
    run = norm_run()
    fmt = ", ".join
    return (
        f"Bars for the vector x = ({fmt(f'{v:g}' for v in run.x)}), coordinate by "
        f"coordinate. RMSNorm divides by the root mean square {run.root_mean_square:.2f}"
        f" and gives {fmt(f'{v:.2f}' for v in run.rms)}: zeros stay zero. LayerNorm "
        f"subtracts the mean {run.mean:.2f} and divides by the standard deviation "
        f"{run.std:.2f}, giving {fmt(f'{v:.2f}' for v in run.layer)}: the zeros "
        "become negative."
    )


# --- grouped-query attention ------------------------------------------------------


@dataclass(frozen=True)
class GQARun:
    shapes: dict[str, tuple[int, ...]]  # parameter name -> shape
    reads: tuple[int, ...]  # query head h reads key/value head reads[h]
    n_heads: int
    n_kv_heads: int
    d_head: int


def gqa_run(d_model: int = 32, n_heads: int = 4, n_kv_heads: int = 2) -> GQARun:
    """The page's minimal `GQAttention`, and which key/value head each query head
    reads, found by running it: with W_o the identity, only the value rows of one
    key/value head kept, the query heads whose output is not zero are the ones that
    read it."""
    from literate.minimal.multi_head import GQAttention

    torch.manual_seed(0)
    layer = GQAttention(d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads)
    layer = layer.double()
    shapes = {name: tuple(p.shape) for name, p in layer.named_parameters()}
    d_head = layer.d_head
    x = torch.randn(1, 5, d_model, dtype=torch.float64)
    v_weight = layer.v_proj.weight.detach().clone()
    reads: dict[int, list[int]] = {h: [] for h in range(n_heads)}
    with torch.no_grad():
        layer.o_proj.weight.copy_(torch.eye(d_model, dtype=torch.float64))
        for j in range(n_kv_heads):
            keep = torch.zeros_like(v_weight)
            rows = slice(j * d_head, (j + 1) * d_head)
            keep[rows] = v_weight[rows]
            layer.v_proj.weight.copy_(keep)
            out = layer(x).reshape(1, 5, n_heads, d_head)
            for h in range(n_heads):
                if out[..., h, :].abs().max() > 0:
                    reads[h].append(j)
    if any(len(js) != 1 for js in reads.values()):
        raise RuntimeError(f"each query head should read one key/value head: {reads}")
    return GQARun(
        shapes=shapes,
        reads=tuple(reads[h][0] for h in range(n_heads)),
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        d_head=d_head,
    )


GQA_LABELS = {
    "en": {
        "title": "Grouped-query attention:\n4 query heads, 2 key/value heads",
        "queries": "query heads ($W_q$ {q})",
        "kv": "key/value heads ($W_k$, $W_v$ {k} each)",
        "rope": "RoPE",
        "no_rope": "no RoPE on $v$",
        "out": "$W_o$ {o} merges the 4 head outputs",
    },
    "ru": {
        "title": "Grouped-query attention:\n4 головы запросов, 2 головы ключей/значений",
        "queries": "головы запросов ($W_q$ {q})",
        "kv": "головы ключей/значений ($W_k$, $W_v$ по {k})",
        "rope": "RoPE",
        "no_rope": "RoPE не трогает $v$",
        "out": "$W_o$ {o} собирает 4 выхода голов",
    },
}


def _shape(shape: tuple[int, ...]) -> str:
    return " × ".join(str(s) for s in shape)


def gqa_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Query heads above, key/value heads below, a line from each query head to the
    key/value head it reads; RoPE marked on q and k, not on v."""
    t = text(GQA_LABELS, language)
    run = gqa_run()
    height = 3.4
    with style(theme) as p:
        fig, ax = _canvas(height)
        ax.text(
            0.1, height - 0.1, t["title"], fontsize=TITLE, fontweight="bold", va="top"
        )
        group_colour = [p.series[j % len(p.series)] for j in range(run.n_kv_heads)]
        q_y, kv_y, box_h = 2.15, 0.95, 0.42
        q_w = 0.8
        q_xs = [0.9 + h * 1.15 for h in range(run.n_heads)]
        kv_xs = []
        for j in range(run.n_kv_heads):
            members = [q_xs[h] for h in range(run.n_heads) if run.reads[h] == j]
            kv_xs.append(sum(members) / len(members))
        ax.text(
            0.1,
            q_y + box_h / 2 + 0.17,
            t["queries"].format(q=_shape(run.shapes["q_proj.weight"])),
            fontsize=SMALL,
            color=p.ink,
            va="center",
        )
        for h, x in enumerate(q_xs):
            j = run.reads[h]
            ax.plot(
                [x, kv_xs[j]],
                [q_y - box_h / 2, kv_y + box_h / 2],
                color=group_colour[j],
                lw=1.6,
                gid=f"reads-{h}-{j}",
            )
            _box(
                ax,
                x,
                q_y,
                q_w,
                box_h,
                f"$q_{h}$ + {t['rope']}",
                face=group_colour[j],
                edge=group_colour[j],
                ink=BOX_INK,
            )
        kv_w = 1.7
        for j, x in enumerate(kv_xs):
            for k, (name, rope) in enumerate(((f"$k_{j}$", True), (f"$v_{j}$", False))):
                cx = x + (k - 0.5) * kv_w / 2
                label = f"{name} + {t['rope']}" if rope else name
                face = group_colour[j] if rope else p.empty
                _box(
                    ax,
                    cx,
                    kv_y,
                    kv_w / 2 - 0.05,
                    box_h,
                    label,
                    face=face,
                    edge=group_colour[j],
                    ink=BOX_INK if rope else p.ink,
                )
        ax.text(
            0.1,
            kv_y - box_h / 2 - 0.17,
            t["kv"].format(k=_shape(run.shapes["k_proj.weight"])),
            fontsize=SMALL,
            color=p.ink,
            va="center",
        )
        ax.text(
            0.1,
            kv_y - box_h / 2 - 0.47,
            t["no_rope"]
            + "; "
            + t["out"].format(o=_shape(run.shapes["o_proj.weight"])),
            fontsize=SMALL,
            color=p.muted,
            va="center",
        )
    return fig


def _gqa_alt() -> str:
    run = gqa_run()
    pairs = ", ".join(
        f"query head {h} reads key/value head {j}" for h, j in enumerate(run.reads)
    )
    s = run.shapes
    return (
        f"The minimal grouped-query attention with {run.n_heads} query heads and "
        f"{run.n_kv_heads} key/value heads of width {run.d_head}: {pairs}, found by "
        f"running the layer. W_q is {_shape(s['q_proj.weight'])}, W_k and W_v "
        f"{_shape(s['k_proj.weight'])} each, W_o {_shape(s['o_proj.weight'])}. RoPE "
        "turns the queries and the keys; the values are not rotated."
    )


# --- a chunk of queries over a longer cache ------------------------------------------

CHUNK_QUERIES, CHUNK_KEYS = 3, 8  # the page's chunk of 3 after 5 cached tokens


def chunk_masks(
    t_q: int = CHUNK_QUERIES, t_k: int = CHUNK_KEYS
) -> dict[str, torch.Tensor]:
    """Which keys each query of a chunk reads: "is_causal", measured from PyTorch's
    `scaled_dot_product_attention(is_causal=True)` (equal scores, one-hot values, so
    the output is each query's weights), and "bottom_right", the site's
    `causal_allowed` with the chunk's offset."""
    from literate.parts.attention import causal_allowed

    q = torch.zeros(1, 1, t_q, 4, dtype=torch.float64)
    k = torch.zeros(1, 1, t_k, 4, dtype=torch.float64)
    v = torch.eye(t_k, dtype=torch.float64)[None, None]
    weights = F.scaled_dot_product_attention(q, k, v, is_causal=True)[0, 0]
    return {
        "is_causal": weights > 0,
        "bottom_right": causal_allowed(t_q, t_k, query_offset=t_k - t_q),
    }


CHUNK_LABELS = {
    "en": {
        "title": "A chunk of {q} queries after {c} cached tokens",
        "is_causal": "is_causal=True, no mask (HF sdpa): top left, wrong",
        "bottom_right": "the chunk's mask: bottom right, its own past",
        "query": "query {i}",
        "key": "key position",
        "cache": "cache",
        "chunk": "chunk",
    },
    "ru": {
        "title": "Блок из {q} запросов после {c} токенов в кэше",
        "is_causal": "is_causal=True без маски (HF sdpa): слева сверху, неверно",
        "bottom_right": "маска блока: справа снизу, своё прошлое",
        "query": "запрос {i}",
        "key": "позиция ключа",
        "cache": "кэш",
        "chunk": "блок",
    },
}


def chunk_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """The two masks of a 3-query chunk over 8 keys, one grid above the other."""
    t = text(CHUNK_LABELS, language)
    masks = chunk_masks()
    t_q, t_k = masks["is_causal"].shape
    cached = t_k - t_q
    cell_w, cell_h, left = 0.44, 0.32, 1.3
    height = 3.8
    with style(theme) as p:
        fig, ax = _canvas(height)
        ax.text(
            0.1,
            height - 0.08,
            t["title"].format(q=t_q, c=cached),
            fontsize=TITLE,
            fontweight="bold",
            va="top",
        )
        # which keys are the cache and which the chunk, and their positions
        brace_y, numbers_y = height - 0.62, height - 0.88
        for start, stop, label in ((0, cached, t["cache"]), (cached, t_k, t["chunk"])):
            x0, x1 = left + start * cell_w + 0.04, left + stop * cell_w - 0.04
            ax.plot([x0, x1], [brace_y, brace_y], color=p.muted, lw=1.0)
            ax.text(
                (x0 + x1) / 2,
                brace_y + 0.05,
                label,
                ha="center",
                va="bottom",
                fontsize=SMALL,
                color=p.muted,
            )
        for j in range(t_k):
            ax.text(
                left + (j + 0.5) * cell_w,
                numbers_y,
                str(j),
                ha="center",
                va="center",
                fontsize=SMALL,
                color=p.muted,
            )
        colours = {"is_causal": p.series[4], "bottom_right": p.series[0]}
        for g, name in enumerate(("is_causal", "bottom_right")):
            grid_top = numbers_y - 0.45 - g * (t_q * cell_h + 0.5)
            ax.text(
                0.1,
                grid_top + 0.17,
                t[name],
                fontsize=SMALL,
                color=p.ink,
                va="center",
                fontweight="bold",
            )
            for i in range(t_q):
                y = grid_top - (i + 1) * cell_h
                ax.text(
                    left - 0.1,
                    y + cell_h / 2,
                    t["query"].format(i=cached + i),
                    ha="right",
                    va="center",
                    fontsize=SMALL,
                    color=p.ink,
                )
                for j in range(t_k):
                    on = bool(masks[name][i, j])
                    ax.add_patch(
                        Rectangle(
                            (left + j * cell_w, y),
                            cell_w,
                            cell_h,
                            facecolor=colours[name] if on else p.empty,
                            edgecolor=p.border,
                            linewidth=1.0,
                            gid=f"{name}-{i}-{j}-{int(on)}",
                        )
                    )
    return fig


def _chunk_alt() -> str:
    masks = chunk_masks()
    t_q, t_k = masks["is_causal"].shape
    cached = t_k - t_q

    def reads(mask: torch.Tensor) -> str:
        return "; ".join(
            f"query {cached + i} reads keys {int(row.nonzero().min())} to "
            f"{int(row.nonzero().max())}"
            for i, row in enumerate(mask)
        )

    return (
        f"Two grids of {t_q} queries (positions {cached} to {t_k - 1}, a chunk after "
        f"{cached} cached tokens) by {t_k} keys, filled where a query may read a key. "
        f"Above, PyTorch's is_causal=True, which Hugging Face's sdpa path uses when no "
        f"mask is given: the triangle sits at the top left, {reads(masks['is_causal'])},"
        f" the cache's first keys instead of the chunk's past. Below, the mask the "
        f"chunk needs, aligned to the bottom right: {reads(masks['bottom_right'])}."
    )


# --- where the parameters of a block sit ------------------------------------------


@dataclass(frozen=True)
class BlockShare:
    model: str
    attention: int
    ffn: int
    norms: int

    @property
    def total(self) -> int:
        return self.attention + self.ffn + self.norms


def block_shares() -> list[BlockShare]:
    """Each published block of the catalog, built on the meta device, its parameters
    counted by part: those of `attn` (QK-norm gains included), of `ffn`, and of the
    residual norms (every other parameter)."""
    from literate.numbers.catalog import PUBLISHED_BLOCKS, published_block

    shares = []
    with torch.device("meta"):
        for spec in PUBLISHED_BLOCKS:
            block = published_block(spec)
            count = {"attn": 0, "ffn": 0, "norms": 0}
            for name, param in block.named_parameters():
                part = name.split(".")[0]
                count[part if part in ("attn", "ffn") else "norms"] += param.numel()
            shares.append(
                BlockShare(spec.name, count["attn"], count["ffn"], count["norms"])
            )
    return shares


SHARE_LABELS = {
    "en": {
        "title": "Where a published block keeps its parameters",
        "attention": "attention",
        "ffn": "FFN",
        "norms": "norms: under {n}",
        "total": "{m} M",
    },
    "ru": {
        "title": "Где опубликованный блок держит параметры",
        "attention": "внимание",
        "ffn": "FFN",
        "norms": "нормы: меньше {n}",
        "total": "{m} млн",
    },
}


def _norm_ceiling(shares: list[BlockShare]) -> float:
    """The smallest of 0.01%, 0.1%, 1% above every block's share of norms."""
    largest = max(s.norms / s.total for s in shares)
    return next(c for c in (1e-4, 1e-3, 1e-2, 1.0) if largest < c)


BAR_W = 2.0  # inches: the width of a whole block's bar


def shares_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """One bar per published block: its attention and FFN parameters as shares of the
    block, the total at the right."""
    t = text(SHARE_LABELS, language)
    shares = block_shares()
    row = 0.42
    top, bottom = 0.75, 0.2
    height = top + bottom + row * len(shares)
    with style(theme) as p:
        fig, ax = _canvas(height)
        ax.text(
            0.1, height - 0.1, t["title"], fontsize=TITLE, fontweight="bold", va="top"
        )
        ceiling = _norm_ceiling(shares)
        legend = [
            (t["attention"], p.series[0]),
            (t["ffn"], p.series[1]),
        ]
        lx = 0.1
        for label, colour in legend:
            ax.add_patch(
                Rectangle(
                    (lx, height - 0.55), 0.16, 0.16, facecolor=colour, edgecolor="none"
                )
            )
            ax.text(
                lx + 0.22,
                height - 0.47,
                label,
                fontsize=SMALL,
                va="center",
                color=p.ink,
            )
            lx += 0.35 + 0.085 * len(label)
        norms = t["norms"].format(
            n=_num(100 * ceiling, language, 2).rstrip("0").rstrip(",.") + "%"
        )
        ax.text(lx, height - 0.47, norms, fontsize=SMALL, va="center", color=p.muted)
        bar_left, bar_w = 2.35, BAR_W
        for r, s in enumerate(shares):
            y = height - top - (r + 0.5) * row
            ax.text(
                bar_left - 0.08,
                y,
                s.model,
                ha="right",
                va="center",
                fontsize=SMALL,
                color=p.ink,
            )
            x = bar_left
            for part, colour in (("attention", p.series[0]), ("ffn", p.series[1])):
                share = getattr(s, part) / s.total
                ax.add_patch(
                    Rectangle(
                        (x, y - row * 0.38),
                        share * bar_w,
                        row * 0.76,
                        facecolor=colour,
                        edgecolor="none",
                        gid=f"share-{r}-{part}",
                    )
                )
                ax.text(
                    x + share * bar_w / 2,
                    y,
                    f"{round(100 * share)}%",
                    ha="center",
                    va="center",
                    fontsize=SMALL,
                    color=BOX_INK,
                )
                x += share * bar_w
            ax.text(
                bar_left + bar_w + 0.08,
                y,
                t["total"].format(m=_num(s.total / 1e6, language, 0)),
                ha="left",
                va="center",
                fontsize=SMALL,
                color=p.muted,
            )
    return fig


def _shares_alt() -> str:
    rows = "; ".join(
        f"{s.model}: {s.total / 1e6:.0f} M parameters, attention "
        f"{round(100 * s.attention / s.total)}%, FFN {round(100 * s.ffn / s.total)}%"
        for s in block_shares()
    )
    return (
        "One horizontal bar per published block, built on the meta device, split into "
        f"the share of its parameters in attention and in the FFN: {rows}. The norms "
        "hold a negligible share in every block."
    )


# --- Gemma's gain 1 + w in bfloat16 -----------------------------------------------


@dataclass(frozen=True)
class GainRun:
    w: torch.Tensor  # every bfloat16 number in [-W_RANGE, W_RANGE], as float32
    rounded: torch.Tensor  # 1 + w computed in bfloat16, as float32
    lost: tuple[float, float]  # the smallest and largest w whose 1 + w is exactly 1
    example: float  # GAIN_EXAMPLE, rounded to bfloat16
    example_rounded: float  # 1 + example, computed in bfloat16


W_RANGE, GAIN_EXAMPLE = 0.012, 1e-3  # the page's trained gain 1.001


def gain_run() -> GainRun:
    """Every bfloat16 w near 0 (all 2**16 bit patterns, the finite ones in range) and
    1 + w as bfloat16 computes it, as the page's claim enumerates them."""
    bf = torch.bfloat16
    every = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(bf)
    w = every[every.isfinite() & (every.float().abs() <= W_RANGE)]
    w = w[w.float().argsort()]
    rounded = 1 + w  # in bfloat16
    lost = w[rounded == 1].float()
    example = torch.tensor(GAIN_EXAMPLE, dtype=bf)
    return GainRun(
        w=w.float(),
        rounded=rounded.float(),
        lost=(lost.min().item(), lost.max().item()),
        example=example.float().item(),
        example_rounded=(1 + example).float().item(),
    )


GAIN_LABELS = {
    "en": {
        "title": "Gemma's gain $1 + w$, computed in bfloat16",
        "exact": "$1 + w$ (float32)",
        "bf16": "$1 + w$ in bfloat16",
        "lost": "$1 + w = 1$ for $w$ from $-2^{{{lo}}}$ to $2^{{{hi}}}$ (shaded)",
        "example": "$w$ = {w}: the gain is exactly 1",
        "xlabel": "the stored $w$",
    },
    "ru": {
        "title": "Усиление Gemma $1 + w$ в bfloat16",
        "exact": "$1 + w$ (float32)",
        "bf16": "$1 + w$ в bfloat16",
        "lost": "$1 + w = 1$ при $w$ от $-2^{{{lo}}}$ до $2^{{{hi}}}$ (закрашено)",
        "example": "$w$ = {w}: усиление ровно 1",
        "xlabel": "хранимое $w$",
    },
}


def _log2(v: float) -> int:
    """The exponent of a power of two (ValueError for anything else)."""
    e = math.log2(v)
    if e != int(e):
        raise ValueError(f"{v} is not a power of two")
    return int(e)


def gain_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """1 + w against w: exact, and as bfloat16 rounds it, the flat stretch shaded."""
    t = text(GAIN_LABELS, language)
    run = gain_run()
    with style(theme) as p:
        fig = plt.figure(figsize=(WIDTH, 3.3))
        ax = fig.add_axes((0.14, 0.16, 0.83, 0.6))
        lo, hi = run.lost
        ax.axvspan(lo, hi, color=p.empty, lw=0, gid="lost")
        ax.plot(run.w, 1 + run.w, color=p.muted, lw=1.0, label=t["exact"])
        ax.step(
            run.w,
            run.rounded,
            where="mid",
            color=p.series[4],
            lw=1.8,
            label=t["bf16"],
            gid="bf16",
        )
        ax.plot(
            [run.example],
            [run.example_rounded],
            "o",
            color=p.series[0],
            ms=6,
            gid="example",
        )
        ax.annotate(
            t["example"].format(w=_num(run.example, language, 4)),
            (run.example, run.example_rounded),
            xytext=(0.0115, 0.9905),
            ha="right",
            fontsize=SMALL,
            color=p.ink,
            arrowprops={"arrowstyle": "-", "color": p.muted, "lw": 0.8},
        )
        ax.set_xlim(-W_RANGE, W_RANGE)
        ax.set_xlabel(t["xlabel"], fontsize=LABEL)
        ax.grid(True)
        ticks = [-0.01, 0.0, 0.01]
        ax.set_xticks(ticks, [_num(v, language) for v in ticks])
        ax.set_yticks([1 + v for v in ticks], [_num(1 + v, language) for v in ticks])
        ax.legend(loc="upper left", fontsize=SMALL)
        fig.text(0.02, 0.95, t["title"], fontsize=TITLE, fontweight="bold", va="top")
        fig.text(
            0.02,
            0.86,
            t["lost"].format(lo=_log2(-lo), hi=_log2(hi)),
            fontsize=SMALL,
            va="top",
            color=p.ink,
        )
    return fig


def _gain_alt() -> str:
    run = gain_run()
    lo, hi = run.lost
    return (
        f"1 + w against every bfloat16 number w from {-W_RANGE} to {W_RANGE}: the "
        "exact sum is a straight line, the sum computed in bfloat16 a staircase whose "
        "steps are 1/256 apart below 1 and 1/128 above it, flat at exactly 1 for w "
        f"from {lo:g} to {hi:g} (minus 1/{round(-1 / lo)} to 1/{round(1 / hi)}, "
        f"shaded). The stored w = {run.example:.6f} (0.001 in bfloat16) gives a gain "
        f"of exactly {run.example_rounded:g}."
    )


SPECS: list[tuple] = [
    ("modern-rmsnorm-vs-layernorm", rmsnorm_figure, _rmsnorm_alt()),
    ("modern-gqa-sharing", gqa_figure, _gqa_alt()),
    ("modern-chunk-causal", chunk_figure, _chunk_alt()),
    ("modern-gemma-gain", gain_figure, _gain_alt()),
    ("modern-block-shares", shares_figure, _shares_alt()),
]
