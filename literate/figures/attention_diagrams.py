"""Diagrams (issue 26): drawn from the code, light and dark, English and Russian.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

Chapter 1's "attention-one-token": the worked example's query 1 reading its three keys,
the scores, weights and output those of `literate.minimal.attention`'s function run on
the page's own tensors. Chapter 3's "heads-split": the shapes through `GQAttention`, each
one the shape of a tensor the layer made while it ran (`traced_shapes`).
"""

# Over 450 lines on purpose: chapters 1 and 3's four diagrams, each with its
# English and Russian labels and the small run of the page's code it reads its numbers
# from; the draw functions share the module's box helpers.

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from torch.overrides import TorchFunctionMode

from literate.figures.style import BOX_INK, style, text
from literate.minimal.attention import scaled_dot_product_attention
from literate.minimal.multi_head import GQAttention
from literate.parts.attention import masked_softmax

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


# Chapter 1's "Softmax without overflow": one row of large scores, the last key blocked
# (and the largest, so that only the mask keeps it out), through `masked_softmax`.
ROW_SCORES = (1000.0, 1002.0, 1001.0, 1003.0)
ROW_ALLOWED = (True, True, True, False)


class _Steps(TorchFunctionMode):
    """Every tensor a call makes, in order, by the name of the torch call."""

    def __init__(self) -> None:
        super().__init__()
        self.made: list[tuple[str, torch.Tensor]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor):
            name = getattr(func, "__name__", str(func))
            self.made.append((name, out.detach().clone()))
        return out


def masked_row_steps() -> dict:
    """The row through `literate.parts.attention.masked_softmax` (float32, as a model
    runs it): the tensors it makes on the way, read off its own calls, and the weights
    the textbook formula exp(z) / sum exp(z) gives the same row."""
    scores = torch.tensor([ROW_SCORES])  # [1, T_k], float32
    allowed = torch.tensor([ROW_ALLOWED])
    with _Steps() as steps:
        weights = masked_softmax(scores, allowed)
    made = steps.made

    def first(name: str) -> torch.Tensor:
        return next(t for n, t in made if n == name)

    exps = first("exp")
    if not torch.equal(made[-1][1], weights):
        raise RuntimeError("masked_softmax's last call is not its result")
    naive = torch.exp(scores) / torch.exp(scores).sum()
    return {
        "scores": scores[0].tolist(),
        "allowed": list(ROW_ALLOWED),
        "masked": first("masked_fill")[0].tolist(),
        "max": first("amax").item(),
        "shifted": first("sub")[0].tolist(),
        "exps": exps[0].tolist(),
        "total": first("sum").item(),
        "weights": weights[0].tolist(),
        "naive_exp": torch.exp(scores)[0].tolist(),
        "naive": naive[0].tolist(),
    }


def cell_text(x: float, language: str, digits: int = 3) -> str:
    """1002.0 -> '1002', -inf -> '−∞', 0.1353 -> '0.135', nan -> 'NaN'."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "\u2212\u221e" if x < 0 else "\u221e"
    if x == round(x):
        return f"{x:.0f}".replace("-", "\u2212")
    return number(x, language, digits)


MASKED_ROW_LABELS = {
    "en": {
        "title": "One row of scores through the masked softmax",
        "key": "key {j}",
        "scores": "scores $z$",
        "allowed": "allowed",
        "yes": "True",
        "no": "False",
        "masked": "blocked $\\to -\\infty$",
        "shifted": "$z - \\max$ ({m})",
        "exps": "exp (sum {s})",
        "weights": "weights",
        "naive": "textbook exp($z$) in float32: {e}; weights {w}",
    },
    "ru": {
        "title": "Строка оценок через softmax с маской",
        "key": "ключ {j}",
        "scores": "оценки $z$",
        "allowed": "разрешено",
        "yes": "True",
        "no": "False",
        "masked": "запрещённые $\\to -\\infty$",
        "shifted": "$z - \\max$ ({m})",
        "exps": "exp (сумма {s})",
        "weights": "веса",
        "naive": "учебная exp($z$) во float32: {e}; веса {w}",
    },
}


def masked_row_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """A table: one column per key, one row per step of `masked_softmax`, each cell the
    value the function made; the blocked key's column greyed; below, what the textbook
    formula gives the same row."""
    t = text(MASKED_ROW_LABELS, language)
    r = masked_row_steps()
    n = len(r["scores"])
    width, height = 5.2, 3.3
    label_w, col_w, row_h = 142, 54, 27
    rows = (
        ("scores", r["scores"]),
        ("allowed", r["allowed"]),
        ("masked", r["masked"]),
        ("shifted", r["shifted"]),
        ("exps", r["exps"]),
        ("weights", r["weights"]),
    )
    with style(theme) as p:
        fig, ax = _canvas(width, height)
        top = height * 72
        ax.text(8, top - 16, t["title"], fontsize=TITLE, fontweight="bold", color=p.ink)
        xs = [8 + label_w + (j + 0.5) * col_w for j in range(n)]
        y = top - 44
        for j, x in enumerate(xs):
            ax.text(x, y, t["key"].format(j=j), ha="center", va="center",
                    fontsize=SMALL, color=p.muted)  # fmt: skip
        for i, (name, values) in enumerate(rows):
            y = top - 70 - i * row_h
            label = t[name].format(
                m=cell_text(r["max"], language), s=number(r["total"], language, 3)
            )
            ax.text(8, y, label, va="center", fontsize=SMALL, color=p.ink)
            for j, (x, value) in enumerate(zip(xs, values)):
                blocked = not r["allowed"][j]
                if name == "allowed":
                    label = t["yes"] if value else t["no"]
                else:
                    label = cell_text(value, language)
                if blocked:
                    face, ink = p.empty, p.ink
                elif name == "weights":
                    face, ink = p.series[2], BOX_INK
                elif name == "shifted" and value == 0.0:
                    face, ink = p.series[1], BOX_INK  # the row's largest allowed score
                else:
                    face, ink = "none", p.ink
                _box(ax, x, y, col_w - 4, row_h - 5, label, face, ink,
                     edge=p.border, size=SMALL)  # fmt: skip
        y = top - 70 - len(rows) * row_h + 2
        naive = t["naive"].format(
            e=cell_text(r["naive_exp"][0], language),
            w=cell_text(r["naive"][0], language),
        )
        ax.text(8, y, naive, va="center", fontsize=SMALL, color=p.series[4])
    return fig


# Chapter 1's "What a fused kernel does": one query against 12 keys read 4 at a time. The
# seed is one whose largest score sits in the middle tile, so the running maximum rises
# once (a rescale below 1) and then stays (a rescale of exactly 1).
ONLINE = {"seed": 4, "d_k": 4, "d_v": 2, "keys": 12, "tile": 4}


def online_softmax_steps() -> dict:
    """One query's row of scores read tile by tile as a fused kernel reads it: after
    each tile the running maximum m, the factor exp(m_old - m_new) that rescales the
    sums so far, and the running sum l of exp(score - m). The output it ends with is
    compared with `scaled_dot_product_attention`'s, which holds the whole row."""
    c = ONLINE
    g = torch.Generator().manual_seed(c["seed"])
    q = torch.randn(1, c["d_k"], generator=g, dtype=torch.float64)
    k = torch.randn(c["keys"], c["d_k"], generator=g, dtype=torch.float64)
    v = torch.randn(c["keys"], c["d_v"], generator=g, dtype=torch.float64)
    scale = 1 / math.sqrt(c["d_k"])
    top, total = -math.inf, 0.0
    out = torch.zeros(c["d_v"], dtype=torch.float64)
    scores, tiles = [], []
    for start in range(0, c["keys"], c["tile"]):
        s = (q @ k[start : start + c["tile"]].T * scale)[0]  # [tile]
        new_top = max(top, s.max().item())
        rescale = math.exp(top - new_top)  # exp(-inf) = 0 before the first tile
        p = torch.exp(s - new_top)
        total = total * rescale + p.sum().item()
        out = out * rescale + p @ v[start : start + c["tile"]]
        scores += s.tolist()
        tiles.append(
            {"start": start, "tile_max": s.max().item(), "before": top,
             "top": new_top, "rescale": rescale, "total": total}
        )  # fmt: skip
        top = new_top
    full_out, full_weights = scaled_dot_product_attention(q, k, v)
    return {
        "scores": scores,
        "tiles": tiles,
        "output": (out / total).tolist(),
        "full_output": full_out[0].tolist(),
        "full_weights": full_weights[0].tolist(),
    }


ONLINE_LABELS = {
    "en": {
        "title": "A fused kernel reads the scores a tile at a time",
        "x": "key",
        "y": "score",
        "running": "running maximum $m$",
        "note": "$\\ell$ = sum of exp(score − $m$); a new $m$ rescales it by "
        "exp($m_{{old}} - m$)",
        "first": "tile {t}: $m$ = {m}, $\\ell$ = {l}",
        "rise": "tile {t}: $m$ {old} → {m}, $\\ell$ = {r} · $\\ell$ + new = {l}",
        "stay": "tile {t}: $m$ stays {m}, $\\ell$ = {r} · $\\ell$ + new = {l}",
        "end": "output {out} = the whole row's {full}",
    },
    "ru": {
        "title": "Слитное ядро читает оценки по плиткам",
        "x": "ключ",
        "y": "оценка",
        "running": "текущий максимум $m$",
        "note": "$\\ell$ = сумма exp(оценка − $m$); новый $m$ умножает её "
        "на exp($m_{{old}} - m$)",
        "first": "плитка {t}: $m$ = {m}, $\\ell$ = {l}",
        "rise": "плитка {t}: $m$ {old} → {m}, $\\ell$ = {r} · $\\ell$ + новые = {l}",
        "stay": "плитка {t}: $m$ тот же, {m}, $\\ell$ = {r} · $\\ell$ + новые = {l}",
        "end": "выход {out} = выход по всей строке {full}",
    },
}


def online_softmax_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """The 12 scores as bars, the tiles as bands, the running maximum as a step line;
    below, one line per tile: the maximum, the rescale factor and the running sum, and
    the output equal to the unfused function's."""
    t = text(ONLINE_LABELS, language)
    r = online_softmax_steps()
    c = ONLINE
    width, height = 5.2, 3.75
    with style(theme) as p:
        fig, ax = _canvas(width, height)
        top = height * 72
        ax.text(8, top - 16, t["title"], fontsize=TITLE, fontweight="bold", color=p.ink)
        bottom, tall = top - 132, 84  # the bars' axes, in points
        bars = fig.add_axes((0.13, bottom / top, 0.84, tall / top))
        n = len(r["scores"])
        for i, tile in enumerate(r["tiles"]):
            left, right = tile["start"] - 0.5, tile["start"] + c["tile"] - 0.5
            if i % 2 == 0:
                bars.axvspan(left, right, color=p.empty, zorder=0)
            bars.hlines(tile["top"], left, right, color=p.series[1], lw=2.2,
                        label=t["running"] if i == 0 else None, zorder=3)  # fmt: skip
        bars.bar(range(n), r["scores"], color=p.series[0], width=0.7, zorder=2)
        bars.axhline(0, color=p.muted, lw=0.8)
        bars.set_xlim(-0.5, n - 0.5)
        bars.set_xticks(range(n))
        bars.set_xlabel(t["x"], fontsize=SMALL, labelpad=2)
        bars.set_ylabel(t["y"], fontsize=SMALL)
        bars.tick_params(labelsize=SMALL)
        bars.legend(loc="lower left", fontsize=SMALL, bbox_to_anchor=(0, 1.0),
                    borderaxespad=0.2)  # fmt: skip
        y = bottom - 44
        ax.text(8, y, t["note"], fontsize=SMALL, color=p.muted, va="center")
        y -= 21
        for i, tile in enumerate(r["tiles"]):
            fields = {
                "t": i,
                "m": number(tile["top"], language),
                "old": number(tile["before"], language),
                "r": number(tile["rescale"], language),
                "l": number(tile["total"], language),
            }
            kind = (
                "first"
                if i == 0
                else "rise"
                if tile["top"] > tile["before"]
                else "stay"
            )
            ax.text(8, y, t[kind].format(**fields), fontsize=SMALL, color=p.ink,
                    va="center")  # fmt: skip
            y -= 19
        end = t["end"].format(
            out=vector(r["output"], language, 3),
            full=vector(r["full_output"], language, 3),
        )
        ax.text(8, y, end, fontsize=SMALL, color=p.ink, va="center")
    return fig


SPECS += [
    (
        "attention-masked-row",
        masked_row_figure,
        "One row of four float32 scores, 1000, 1002, 1001 and 1003, through chapter 1's "
        "masked_softmax, with key 3 blocked. A table with one column per key and one row "
        "per step: the mask True, True, True, False; the blocked score set to minus "
        "infinity; the row's largest allowed score, 1002, subtracted, giving -2, 0, -1 and "
        "minus infinity; the exponentials 0.135, 1, 0.368 and 0, which sum to 1.503; and "
        "the weights 0.090, 0.665, 0.245 and exactly 0. Below, the textbook formula on "
        "the same row: exp(1000) is infinite in float32 and every weight is NaN.",
    ),
    (
        "attention-online-softmax",
        online_softmax_figure,
        "One query's scores against 12 keys drawn as bars, read in three tiles of 4 keys "
        "as a fused kernel reads them, with the running maximum m drawn over each tile. "
        "Tile 0: m = 0.75 and the running sum of exp(score - m) is 2.24. Tile 1 holds the "
        "largest score: m rises from 0.75 to 1.84, the sum so far is rescaled by "
        "exp(0.75 - 1.84) = 0.33 and becomes 2.56. Tile 2: m stays 1.84, the factor is "
        "1.00, the sum 3.09. The output, (0.482, 0.520), equals the one computed from "
        "the whole row.",
    ),
]
