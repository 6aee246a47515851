"""Diagrams (issue 26): drawn from the code, light and dark, English and Russian.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

Chapter 1's "attention-one-token": the worked example's query 1 reading its three keys,
the scores, weights and output those of `literate.minimal.attention`'s function run on
the page's own tensors. Chapter 3's "heads-split": the shapes through `GQAttention`, each
one the shape of a tensor the layer made while it ran (`traced_shapes`).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from torch.overrides import TorchFunctionMode

from literate.figures.style import BOX_INK, style, text
from literate.minimal.attention import scaled_dot_product_attention
from literate.minimal.multi_head import GQAttention

# Chapter 1's by-hand example (docs/attention/scaled-dot-product.md, "Queries, keys and
# values"), the same three tokens; tests/test_attention_diagrams.py holds them equal.
EXAMPLE_Q = ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0))
EXAMPLE_K = ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0))
EXAMPLE_V = ((1.0, 0.0), (0.0, 2.0), (3.0, 1.0))
QUERY = 1  # the row the page works out by hand

# Chapter 3's layer for the shapes: every size different, so each number names one axis.
SPLIT_CONFIG = {"batch": 1, "length": 5, "d_model": 24, "n_heads": 6, "n_kv_heads": 2}

FONT, SMALL, TITLE = 10.5, 10.0, 12.0  # points, in figures 5.2 inches wide


class _Trace(TorchFunctionMode):
    """Every torch call made inside it, in order: (name, output shape), and the input
    the softmax was given (the scores)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, tuple[int, ...]]] = []
        self.softmax_inputs: list[torch.Tensor] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", str(func))
        if name == "softmax":
            self.softmax_inputs.append(args[0].detach().clone())
        if isinstance(out, torch.Tensor):
            self.calls.append((name, tuple(out.shape)))
        return out


def one_token_example() -> dict:
    """Query `QUERY` of the worked example against its three keys, through
    `scaled_dot_product_attention`: the scores it fed its softmax, the weights and the
    output it returned (float64)."""
    q, k, v = (
        torch.tensor(rows, dtype=torch.float64)
        for rows in (EXAMPLE_Q, EXAMPLE_K, EXAMPLE_V)
    )
    with _Trace() as trace:
        out, weights = scaled_dot_product_attention(q, k, v)
    (scores,) = trace.softmax_inputs
    return {
        "q": q[QUERY].tolist(),
        "k": k.tolist(),
        "v": v.tolist(),
        "d_k": q.shape[-1],
        "scores": scores[QUERY].tolist(),
        "weights": weights[QUERY].tolist(),
        "output": out[QUERY].tolist(),
    }


def traced_shapes() -> dict[str, tuple[int, ...]]:
    """The shapes of the tensors `GQAttention` (SPLIT_CONFIG) makes in one forward call,
    by stage, read off the calls in the order the layer makes them."""
    c = SPLIT_CONFIG
    torch.manual_seed(0)
    layer = GQAttention(
        d_model=c["d_model"], n_heads=c["n_heads"], n_kv_heads=c["n_kv_heads"]
    )
    x = torch.randn(c["batch"], c["length"], c["d_model"])
    with torch.no_grad(), _Trace() as trace:
        y = layer(x)
    calls = trace.calls
    at = 0

    def next_call(name: str) -> tuple[int, ...]:
        nonlocal at
        found = [i for i in range(at, len(calls)) if calls[i][0] == name]
        if not found:
            raise RuntimeError(f"GQAttention made no {name!r} call where expected")
        at = found[0] + 1
        return calls[found[0]][1]

    shapes = {"x": tuple(x.shape)}
    for side in ("q", "k", "v"):  # q_proj, k_proj, v_proj, each split by split_heads
        shapes[f"{side}_proj"] = next_call("linear")
        shapes[f"{side}_view"] = next_call("view")
        shapes[f"{side}_heads"] = next_call("transpose")
    shapes["kv_repeated"] = next_call("repeat_interleave")
    shapes["weights"] = next_call("softmax")
    shapes["heads_out"] = next_call("matmul")
    shapes["merge_transpose"] = next_call("transpose")
    shapes["merged"] = next_call("reshape")
    shapes["out"] = next_call("linear")
    if shapes["out"] != tuple(y.shape) or at != len(calls):
        raise RuntimeError("GQAttention's calls are not the ones this figure draws")
    return shapes


def shape_text(shape: tuple[int, ...]) -> str:
    """(1, 5, 24) -> '[1, 5, 24]', as the code's comments write shapes."""
    return "[" + ", ".join(str(n) for n in shape) + "]"


def number(x: float, language: str, digits: int = 2) -> str:
    """0.4013 -> '0.40' ('0,40' in Russian)."""
    s = f"{x:.{digits}f}".replace("-", "\u2212")
    return s.replace(".", ",") if language == "ru" else s


def vector(values, language: str, digits: int | None = None) -> str:
    """(1.4, 1.2) -> '(1.40, 1.20)' ('(1,40; 1,20)' in Russian); inputs as they are."""
    parts = [
        f"{x:g}" if digits is None else number(x, language, digits) for x in values
    ]
    return "(" + ("; " if language == "ru" else ", ").join(parts) + ")"


def _box(ax, x, y, w, h, label, face, ink, *, edge="none", size=FONT, weight="normal"):
    """A rounded box centred at (x, y), in points, with its label."""
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0,rounding_size=4",
            facecolor=face,
            edgecolor=edge,
            linewidth=1.2,
        )
    )
    ax.text(
        x,
        y,
        label,
        ha="center",
        va="center",
        fontsize=size,
        color=ink,
        linespacing=1.3,
        fontweight=weight,
    )


def _arrow(ax, start, end, color, lw=1.3, label=None) -> FancyArrowPatch:
    arrow = FancyArrowPatch(
        start,
        end,
        arrowstyle="-|>",
        mutation_scale=8 + 1.5 * lw,
        color=color,
        lw=lw,
        shrinkA=0,
        shrinkB=0,
        label=label,
    )
    ax.add_patch(arrow)
    return arrow


def _canvas(width: float, height: float):
    """A figure whose one axes is measured in points, (0, 0) at its lower left."""
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width * 72)
    ax.set_ylim(0, height * 72)
    ax.axis("off")
    return fig, ax


ONE_TOKEN_LABELS = {
    "en": {
        "title": "One query reads every key",
        "rule": "weight = softmax of the scores $q_1 \\cdot k_j\\, /\\, \\sqrt{{{d}}}$",
        "query": "query $q_1$ = {q}",
        "token": "token {j}\n$k_{j}$ = {k}\n$v_{j}$ = {v}",
        "arrow": "score {s}\nweight {w}",
        "output": "output = {terms}\n= {out}",
    },
    "ru": {
        "title": "Один запрос читает все ключи",
        "rule": "вес = softmax от оценок $q_1 \\cdot k_j\\, /\\, \\sqrt{{{d}}}$",
        "query": "запрос $q_1$ = {q}",
        "token": "токен {j}\n$k_{j}$ = {k}\n$v_{j}$ = {v}",
        "arrow": "оценка {s}\nвес {w}",
        "output": "выход = {terms}\n= {out}",
    },
}


def one_token_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """The worked example's query 1 above its three tokens: an arrow to each key as thick
    as its weight, labelled with its score and weight, and the output below as the
    weighted sum of the values, every number from `one_token_example`."""
    t = text(ONE_TOKEN_LABELS, language)
    ex = one_token_example()
    n = len(ex["weights"])
    width, height = 5.2, 4.25
    with style(theme) as p:
        fig, ax = _canvas(width, height)
        top = height * 72
        ax.text(8, top - 16, t["title"], fontsize=TITLE, fontweight="bold", color=p.ink)
        ax.text(
            8, top - 36, t["rule"].format(d=ex["d_k"]), fontsize=SMALL, color=p.muted
        )
        centre = width * 72 / 2
        xs = [centre + (j - (n - 1) / 2) * 124 for j in range(n)]
        y_query, y_keys, y_out = top - 72, top - 208, top - 280
        query_h, key_h, out_h = 26, 56, 40
        _box(
            ax,
            centre,
            y_query,
            150,
            query_h,
            t["query"].format(q=vector(ex["q"], language)),
            p.series[0],
            BOX_INK,
        )
        for j, (x, s, w) in enumerate(zip(xs, ex["scores"], ex["weights"])):
            lw = 1.0 + 12.0 * w  # the arrow's thickness is the weight
            start = (centre + (x - centre) * 0.3, y_query - query_h / 2)
            end = (x, y_keys + key_h / 2)
            _arrow(ax, start, end, p.series[0], lw=lw, label=f"weight {j}")
            side = -1 if x < centre else 1  # labels outside the fan of arrows
            lx = start[0] + 0.76 * (end[0] - start[0]) + side * (9 + lw / 2)
            ly = start[1] + 0.76 * (end[1] - start[1])
            ax.text(
                lx,
                ly,
                t["arrow"].format(s=number(s, language), w=number(w, language)),
                ha="right" if side < 0 else "left",
                va="center",
                fontsize=SMALL,
                color=p.ink,
                linespacing=1.25,
            )
            _box(
                ax,
                x,
                y_keys,
                112,
                key_h,
                t["token"].format(
                    j=j,
                    k=vector(ex["k"][j], language),
                    v=vector(ex["v"][j], language),
                ),
                p.series[1],
                BOX_INK,
                size=SMALL,
            )
            _arrow(
                ax,
                (x, y_keys - key_h / 2),
                (centre + (x - centre) * 0.35, y_out + out_h / 2),
                p.muted,
                lw=lw,
                label=f"value {j}",
            )
        terms = " + ".join(
            f"{number(w, language)} $v_{j}$" for j, w in enumerate(ex["weights"])
        )
        _box(
            ax,
            centre,
            y_out,
            300,
            out_h,
            t["output"].format(terms=terms, out=vector(ex["output"], language, 2)),
            p.series[2],
            BOX_INK,
        )
    return fig


SPLIT_LABELS = {
    "en": {
        "title": "Split into heads, attend, merge",
        "note": "$B$ = {batch} sequence, $T$ = {length} tokens, $d_{{model}}$ = {d_model}, "
        "$H$ = {n_heads}, $H_{{kv}}$ = {n_kv_heads}, $d_{{head}}$ = {d_head}",
        "x": "x, the input",
        "q_proj": "q_proj (queries)",
        "k_proj": "k_proj, v_proj (keys, values)",
        "kv_repeated": "repeat_interleave: each ×{group}",
        "attention": "attention, each head: weights {weights}\noutput {out}",
    },
    "ru": {
        "title": "Разбить на головы, внимание, собрать",
        "note": "$B$ = {batch}, $T$ = {length} токенов, $d_{{model}}$ = {d_model}, "
        "$H$ = {n_heads}, $H_{{kv}}$ = {n_kv_heads}, $d_{{head}}$ = {d_head}",
        "x": "x, вход",
        "q_proj": "q_proj (запросы)",
        "k_proj": "k_proj, v_proj (K и V)",
        "kv_repeated": "repeat_interleave: каждая ×{group}",
        "attention": "внимание в каждой голове: веса {weights}\nвыход {out}",
    },
}

# The axes of each stage, as the code's comments name them.
AXES = {
    "x": "$[B, T, d_{model}]$",
    "q_proj": "$[B, T, H\\,d_{head}]$",
    "q_view": "$[B, T, H, d_{head}]$",
    "q_heads": "$[B, H, T, d_{head}]$",
    "k_proj": "$[B, T, H_{kv}\\,d_{head}]$",
    "k_view": "$[B, T, H_{kv}, d_{head}]$",
    "k_heads": "$[B, H_{kv}, T, d_{head}]$",
    "kv_repeated": "$[B, H, T, d_{head}]$",
    "weights": "$[B, H, T, T]$",
    "heads_out": "$[B, H, T, d_{head}]$",
    "merge_transpose": "$[B, T, H, d_{head}]$",
    "merged": "$[B, T, H\\,d_{head}]$",
    "out": "$[B, T, d_{model}]$",
}
# What the code calls at each stage of the two lanes, top to bottom (None: a label).
QUERY_LANE = (("q_proj", None), ("q_view", "view"), ("q_heads", "transpose(1, 2)"))
KV_LANE = (
    ("k_proj", None),
    ("k_view", "view"),
    ("k_heads", "transpose(1, 2)"),
    ("kv_repeated", None),
)


def shape_label(stage: str, shapes: dict[str, tuple[int, ...]]) -> str:
    """A stage's axes and the shape the run gave it: '[B, T, H, d_head]  [1, 5, 6, 4]'."""
    return f"{AXES[stage]}  {shape_text(shapes[stage])}"


def heads_split_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """x through GQAttention: queries split into H heads on the left, keys and values
    into H_kv heads then repeated on the right, attention per head, the merge and
    o_proj; each box gives the axes and the shape `traced_shapes` read off a run."""
    t = text(SPLIT_LABELS, language)
    s = traced_shapes()
    c = SPLIT_CONFIG
    group = c["n_heads"] // c["n_kv_heads"]
    width, height = 5.2, 4.85
    box_h, step, lane_w, wide_w = 27, 37, 180, 366
    with style(theme) as p:
        fig, ax = _canvas(width, height)
        top = height * 72
        ax.text(8, top - 16, t["title"], fontsize=TITLE, fontweight="bold", color=p.ink)
        note = t["note"].format(d_head=c["d_model"] // c["n_heads"], **c)
        ax.text(8, top - 36, note, fontsize=SMALL, color=p.muted)
        centre = width * 72 / 2
        left, right = centre - lane_w / 2 - 3, centre + lane_w / 2 + 3
        y = top - 62
        _box(
            ax, centre, y, lane_w, box_h, f"{t['x']}\n{shape_label('x', s)}",
            p.series[2], BOX_INK, size=SMALL,
        )  # fmt: skip
        fork = y - box_h / 2
        ends = []  # the bottom of each lane
        for lane, x, colour in (
            (QUERY_LANE, left, p.series[0]),
            (KV_LANE, right, p.series[1]),
        ):
            previous = (centre + (x - centre) * 0.5, fork)
            for i, (stage, op) in enumerate(lane):
                y = top - 62 - (i + 1) * step
                op = op or t[stage].format(group=group)
                _arrow(ax, previous, (x, y + box_h / 2), p.muted)
                _box(
                    ax, x, y, lane_w, box_h, f"{op}\n{shape_label(stage, s)}",
                    colour, BOX_INK, size=SMALL,
                )  # fmt: skip
                previous = (x, y - box_h / 2)
            ends.append(previous)
        y = top - 62 - (len(KV_LANE) + 1) * step - 4
        att_h = box_h + 2
        for start in ends:
            end = (centre + (start[0] - centre) * 0.45, y + att_h / 2)
            _arrow(ax, start, end, p.muted)
        weights = shape_label("weights", s)
        out = shape_label("heads_out", s)
        _box(
            ax, centre, y, wide_w, att_h, t["attention"].format(weights=weights, out=out),
            "none", p.ink, edge=p.ink, size=SMALL,
        )  # fmt: skip
        _arrow(ax, (centre, y - att_h / 2), (centre, y - step + box_h / 2 + 2), p.muted)
        y -= step + 2
        merge = (
            f"merge_heads: transpose {shape_label('merge_transpose', s)}\n"
            f"reshape {shape_label('merged', s)}"
        )
        _box(ax, centre, y, wide_w, box_h, merge, p.series[2], BOX_INK, size=SMALL)
        _arrow(ax, (centre, y - box_h / 2), (centre, y - step + box_h / 2), p.muted)
        y -= step
        _box(
            ax, centre, y, lane_w, box_h, f"o_proj\n{shape_label('out', s)}",
            p.series[2], BOX_INK, size=SMALL,
        )  # fmt: skip
    return fig


SPECS: list[tuple] = [
    (
        "attention-one-token",
        one_token_figure,
        "Query 1 of chapter 1's worked example, q1 = (0, 1), above its three tokens, "
        "with keys (1, 0), (0, 1), (1, 1) and values (1, 0), (0, 2), (3, 1). An arrow "
        "from the query to each key is as thick as its weight and labelled with its score "
        "q1 · kj / sqrt(2) and its weight: token 0 score 0.00, weight 0.20; token 1 score "
        "0.71, weight 0.40; token 2 score 0.71, weight 0.40. Below, the output is the "
        "weighted sum of the values, 0.20 v0 + 0.40 v1 + 0.40 v2 = (1.40, 1.20).",
    ),
    (
        "heads-split",
        heads_split_figure,
        "The shapes of the tensors inside chapter 3's grouped-query attention layer, read "
        "from one run with B = 1 sequence of T = 5 tokens, d_model = 24, H = 6 query heads, "
        "H_kv = 2 key/value heads and d_head = 4. The input x is (1, 5, 24). Queries: "
        "q_proj gives (1, 5, 24), view cuts it into heads, B, T, H, d_head = (1, 5, 6, 4), "
        "and a transpose moves the head axis forward, (1, 6, 5, 4). Keys and values: "
        "k_proj and v_proj give (1, 5, 8), view (1, 5, 2, 4), transpose (1, 2, 5, 4), and "
        "repeat_interleave copies each key/value head 3 times, (1, 6, 5, 4). Attention "
        "runs in every head at once: weights (1, 6, 5, 5), output (1, 6, 5, 4). "
        "merge_heads transposes back to (1, 5, 6, 4) and reshapes to (1, 5, 24), and "
        "o_proj gives (1, 5, 24).",
    ),
]
