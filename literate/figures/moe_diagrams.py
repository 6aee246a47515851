"""Diagrams (issue 26): drawn from the code, light and dark, English and Russian.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

Chapter 9's two diagrams. `moe-layer`: one token through the minimal `MixtralMoE`
(4 experts, top 2, fixed seed), its logits, probabilities, chosen experts and gates read
from the run (`one_token`). `moe-dispatch`: `dispatch` of `literate.parts.moe` on four
tokens routed top-2 among three experts by `mixtral_router`; the sort, the counts, the
slots and the way back are read from what `dispatch` hands its experts and returns
(`dispatch_run`), never typed.
"""

# Over 450 lines on purpose: chapter 9's two diagrams, each with the run that reads its
# numbers from the code, share one set of drawing helpers laid out in inches.

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

from literate.figures.style import BOX_INK, GREEN, ORANGE, style, text
from literate.minimal.moe import MixtralMoE
from literate.parts.moe import dispatch
from literate.parts.routers import mixtral_router

F64 = torch.float64
WIDTH = 5.2  # inches: the phone column (358 px) shows 9.5 pt as 9 px
SMALL, LABEL, TITLE = 9.5, 10.0, 12.0  # font sizes, pt
MINUS = "\u2212"

# --- the layer ---------------------------------------------------------------------

LAYER_SEED = 0
LAYER_SHAPE = {"d_model": 8, "d_ff": 16, "n_experts": 4, "top_k": 2}


@dataclass(frozen=True)
class LayerRun:
    d_model: int
    n_experts: int
    top_k: int
    logits: tuple[float, ...]  # [E]
    probs: tuple[float, ...]  # [E], the router's float32 softmax
    chosen: tuple[int, ...]  # [k], most probable first
    gates: tuple[float, ...]  # [k], renormalised, the weights of `chosen`


def layer_example() -> tuple[MixtralMoE, torch.Tensor]:
    """The minimal Mixtral layer and one token `[1, 1, d]`, float64, from `LAYER_SEED`
    (the global random state is left as it was)."""
    with torch.random.fork_rng():
        torch.manual_seed(LAYER_SEED)
        moe = MixtralMoE(**LAYER_SHAPE).double()
        x = torch.randn(1, 1, LAYER_SHAPE["d_model"], dtype=F64)
    return moe, x


def one_token() -> LayerRun:
    """Run the layer on its token. The logits are what the layer returns; the experts
    chosen are the ones it ran on a row (a hook on `moe.experts`); the gates are its
    router's (softmax, top k, renormalised), proven to be the ones it applied: the
    output equals their weighted sum of the chosen experts, else RuntimeError."""
    moe, x = layer_example()
    ran: list[int] = []
    hook = moe.experts.register_forward_hook(
        lambda module, args, out: ran.append(args[1]) if len(args[0]) else None
    )
    with torch.no_grad():
        y, logits = moe(x)
        hook.remove()
        probs = logits.float().softmax(dim=-1)[0]  # [E]
        gates, chosen = probs.topk(moe.top_k)
        gates = gates / gates.sum()
        by_hand = sum(
            g * moe.experts(x[0], e) for g, e in zip(gates.tolist(), chosen.tolist())
        )
    if sorted(ran) != sorted(chosen.tolist()) or not torch.allclose(
        y[0], by_hand, rtol=0, atol=1e-6
    ):
        raise RuntimeError(f"the layer ran experts {ran}, its router chose {chosen}")
    return LayerRun(
        d_model=moe.gate.in_features,
        n_experts=moe.gate.out_features,
        top_k=moe.top_k,
        logits=tuple(logits[0].tolist()),
        probs=tuple(probs.tolist()),
        chosen=tuple(chosen.tolist()),
        gates=tuple(gates.tolist()),
    )


# --- the dispatch ------------------------------------------------------------------

DISPATCH_SEED = 4  # a routing whose three experts get 1, 4 and 3 of the 8 pairs
DISPATCH_SHAPE = {"n_tokens": 4, "n_experts": 3, "top_k": 2}


@dataclass(frozen=True)
class DispatchRun:
    experts: tuple[tuple[int, ...], ...]  # [N][k], the routing
    weights: tuple[tuple[float, ...], ...]  # [N][k]
    order: tuple[int, ...]  # [N k]: the pairs (p = n k + j), expert by expert
    counts: tuple[int, ...]  # [E]: pairs per expert
    slots: tuple[tuple[int | None, ...], ...]  # [E][C]: the token in each slot
    back: tuple[tuple[tuple[int, int], ...], ...]  # [N][k]: (expert, slot) read back


def dispatch_routing() -> tuple[torch.Tensor, torch.Tensor]:
    """`mixtral_router` on logits `[N, E]` drawn from `DISPATCH_SEED`: (weights, experts)
    `[N, k]` each."""
    n, e = DISPATCH_SHAPE["n_tokens"], DISPATCH_SHAPE["n_experts"]
    logits = torch.randn(n, e, generator=torch.Generator().manual_seed(DISPATCH_SEED))
    return mixtral_router(logits, top_k=DISPATCH_SHAPE["top_k"])


def dispatch_run(weights: torch.Tensor, experts: torch.Tensor) -> DispatchRun:
    """Run `dispatch` with experts that record their groups `[E, C, d]`. Token n's row
    is (n, 1, 0), so a filled slot holds (its token, 1, 0) and an empty one zeros; expert
    e's output in slot c is (e, c, filled), so with weights 1 on choice j and 0 on the
    others `dispatch` returns, for each token, the (expert, slot) its j-th pair came
    back from."""
    (n, k), e = experts.shape, DISPATCH_SHAPE["n_experts"]
    x = torch.stack([torch.arange(n, dtype=F64), torch.ones(n, dtype=F64)], dim=1)
    x = torch.nn.functional.pad(x, (0, 1))  # [N, 3]
    seen: list[torch.Tensor] = []

    def recording_experts(groups: torch.Tensor) -> torch.Tensor:
        seen.append(groups.clone())
        index = torch.meshgrid(
            torch.arange(groups.shape[0], dtype=F64),
            torch.arange(groups.shape[1], dtype=F64),
            indexing="ij",
        )
        return torch.stack([*index, groups[..., 1]], dim=-1)  # [E, C, 3]

    back = []
    for j in range(k):
        one_hot = torch.zeros(n, k, dtype=F64)
        one_hot[:, j] = 1.0
        y = dispatch(x, one_hot, experts, recording_experts, n_experts=e)
        if not torch.equal(y[:, 2], torch.ones(n, dtype=F64)):
            raise RuntimeError("a pair came back from an empty slot")
        back.append([(int(a), int(b)) for a, b in y[:, :2].tolist()])
    groups = seen[0]  # [E, C, 3]; every run hands the experts the same groups
    filled = groups[..., 1] == 1
    slots = tuple(
        tuple(int(t) if f else None for t, f in zip(row[:, 0].tolist(), full.tolist()))
        for row, full in zip(groups, filled)
    )
    routing = experts.tolist()
    order = tuple(
        t * k + routing[t].index(expert)
        for expert, row in enumerate(slots)
        for t in row
        if t is not None
    )
    return DispatchRun(
        experts=tuple(map(tuple, routing)),
        weights=tuple(map(tuple, weights.tolist())),
        order=order,
        counts=tuple(int(c) for c in filled.sum(dim=1).tolist()),
        slots=slots,
        back=tuple(zip(*back)),
    )


# --- drawing -----------------------------------------------------------------------


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


def _write(ax, x, y, s, colour, *, size=SMALL, ha="center", **kw) -> None:
    ax.text(x, y, s, ha=ha, va="center", fontsize=size, color=colour, **kw)


def _box(ax, x, y, w, h, label, *, face, edge, ink, size=SMALL, gid=None) -> None:
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
    _write(ax, x, y, label, ink, size=size, gid=gid)


def _arrow(ax, start, end, colour) -> None:
    ax.add_patch(
        FancyArrowPatch(
            start, end, arrowstyle="-|>", mutation_scale=10, color=colour, lw=1.2
        )
    )


LAYER_LABELS = {
    "en": {
        "title": "One token through a Mixtral layer",
        "note": "{e} experts, top {k}, $d$ = {d}; the numbers of one run",
        "token": "token $x$ ({d} numbers)",
        "router": "router: $l = W_r\\,x$",
        "logits": "logits $l$",
        "probs": "softmax $p$\nover all {e}",
        "gates": "top {k}, divided\nby their sum: $g$",
        "experts": "experts",
        "skipped": "not run",
        "sum": "weighted sum",
    },
    "ru": {
        "title": "Один токен в слое Mixtral",
        "note": "экспертов: {e}, top {k}, $d$ = {d}; числа одного прогона",
        "token": "токен $x$ ({d} чисел)",
        "router": "роутер: $l = W_r\\,x$",
        "logits": "логиты $l$",
        "probs": "softmax $p$\nпо всем {e}",
        "gates": "top {k}, делённые\nна их сумму: $g$",
        "experts": "эксперты",
        "skipped": "пропущен",
        "sum": "взвешенная\nсумма",
    },
}


def layer_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """The token, the router, each expert's logit and probability (a bar), the top k
    renormalised, the k experts run (the others grey) and their weighted sum."""
    t = text(LAYER_LABELS, language)
    run = one_token()
    gate_of = dict(zip(run.chosen, run.gates))
    height = 4.7
    with style(theme) as p:
        fig, ax = _canvas(height)
        _write(
            ax,
            0.1,
            height - 0.2,
            t["title"],
            p.ink,
            size=TITLE,
            ha="left",
            weight="bold",
        )
        note = t["note"].format(e=run.n_experts, k=run.top_k, d=run.d_model)
        _write(ax, 0.1, height - 0.47, note, p.muted, ha="left")
        cols = [1.85 + 0.9 * i for i in range(run.n_experts)]
        mid = (cols[0] + cols[-1]) / 2
        y_in = height - 0.95
        token = t["token"].format(d=run.d_model)
        _box(ax, 0.95, y_in, 1.7, 0.34, token, face=p.empty, edge=p.muted, ink=p.ink)
        _box(
            ax,
            mid,
            y_in,
            1.75,
            0.34,
            t["router"],
            face=p.series[0],
            edge=p.series[0],
            ink=BOX_INK,
        )
        _arrow(ax, (1.8, y_in), (mid - 0.875, y_in), p.muted)
        _arrow(ax, (mid, y_in - 0.17), (mid, y_in - 0.42), p.muted)
        ax.plot([cols[0] - 0.4, cols[-1] + 0.4], [y_in - 0.42] * 2, color=p.border)
        y_logit, bar_base, bar_top = y_in - 0.6, y_in - 1.72, y_in - 1.02
        y_gate, y_ffn, y_sum = y_in - 2.0, y_in - 2.6, y_in - 3.2
        rows = {"logits": y_logit, "probs": (bar_base + bar_top) / 2}
        rows |= {"gates": y_gate, "experts": y_ffn, "sum": y_sum}
        for key, y in rows.items():
            label = t[key].format(e=run.n_experts, k=run.top_k)
            _write(ax, 1.35, y, label, p.ink, ha="right")
        for e, x in enumerate(cols):
            on = e in gate_of
            _write(
                ax, x, y_logit, _num(run.logits[e], language), p.ink, gid=f"logit-{e}"
            )
            h = (bar_top - bar_base) * run.probs[e] / max(run.probs)
            ax.add_patch(
                plt.Rectangle(
                    (x - 0.25, bar_base), 0.5, h, color=GREEN if on else p.border
                )
            )
            _write(
                ax,
                x,
                bar_base + h + 0.1,
                _num(run.probs[e], language),
                p.ink,
                gid=f"prob-{e}",
            )
            _write(ax, x, bar_base - 0.1, f"e{e}", p.muted)
            gate = _num(gate_of[e], language) if on else "\u2014"
            _write(
                ax,
                x,
                y_gate,
                gate,
                p.ink if on else p.muted,
                size=LABEL,
                weight="bold" if on else "normal",
                gid=f"gate-{e}",
            )
            label = f"FFN {e}" if on else f"FFN {e}\n{t['skipped']}"
            _box(
                ax,
                x,
                y_ffn,
                0.8,
                0.5,
                label,
                face=GREEN if on else p.empty,
                edge=GREEN if on else p.border,
                ink=BOX_INK if on else p.muted,
                size=LABEL if on else SMALL,
                gid=f"expert-{e}",
            )
            if on:
                _arrow(ax, (x, y_ffn - 0.25), (mid, y_sum + 0.16), p.muted)
                side = 1 if x >= mid else -1
                _write(
                    ax,
                    x + side * 0.08,
                    y_ffn - 0.4,
                    "\u00d7\u2009" + _num(gate_of[e], language),
                    p.ink,
                    ha="left" if side > 0 else "right",
                )
        ax.add_patch(Circle((mid, y_sum), 0.16, facecolor="none", edgecolor=p.ink))
        _write(ax, mid, y_sum, "+", p.ink, size=LABEL)
        terms = " + ".join(
            f"{_num(g, language)}\u00b7FFN$_{e}$($x$)"
            for e, g in zip(run.chosen, run.gates)
        )
        _write(ax, mid, y_sum - 0.38, f"$y$ = {terms}", p.ink, size=LABEL, gid="output")
    return fig


DISPATCH_LABELS = {
    "en": {
        "title": "Dispatch: {n} tokens, {e} experts, top {k}",
        "pairs": "1. the {m} (token, expert) pairs, numbered in token order",
        "sorted": "2. sorted by expert, stably: order = [{order}]",
        "counts": "3. pairs per expert: counts = [{counts}]",
        "slots": "4. expert $e$ runs on group $e$ of $C$ = {c} slots (empty: zeros)",
        "slot": "slot {c}",
        "back": "5. back to each token: its pairs' outputs e[slot], weighted, summed",
    },
    "ru": {
        "title": "Диспетчеризация: токенов {n}, экспертов {e}, top {k}",
        "pairs": "1. {m} пар (токен, эксперт), пронумерованы по токенам",
        "sorted": "2. отсортированы по эксперту, устойчиво: order = [{order}]",
        "counts": "3. пар на эксперта: counts = [{counts}]",
        "slots": "4. эксперт $e$ считает группу $e$ из $C$ = {c} мест (пустые — нули)",
        "slot": "место {c}",
        "back": "5. каждому токену — сумма выходов его пар e[место] с весами",
    },
}


def dispatch_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Five stages stacked: the pairs in token order, their stable sort by expert (a
    line from each pair to its rank), the counts per expert, the groups of slots each
    expert runs on, and each token's output, its k pairs' outputs read back from their
    slots."""
    t = text(DISPATCH_LABELS, language)
    run = dispatch_run(*dispatch_routing())
    n, k = len(run.experts), len(run.experts[0])
    n_experts, c = len(run.counts), len(run.slots[0])
    height = 5.1
    w, h = 0.52, 0.42  # a pair's box
    xs = [0.42 + 0.62 * i for i in range(n * k)]
    with style(theme) as p:
        colours = (p.series[0], ORANGE, GREEN)  # the first is a role: dark differs
        fig, ax = _canvas(height)
        title = t["title"].format(n=n, e=n_experts, k=k)
        _write(
            ax, 0.1, height - 0.2, title, p.ink, size=TITLE, ha="left", weight="bold"
        )

        def heading(y, label):
            _write(ax, 0.1, y, label, p.ink, ha="left")

        def pair_box(x, y, pair, gid):
            token, expert = pair // k, run.experts[pair // k][pair % k]
            _box(
                ax,
                x,
                y,
                w,
                h,
                f"t{token}\ne{expert}",
                face=colours[expert],
                edge=colours[expert],
                ink=BOX_INK,
                gid=gid,
            )

        y_a, y_b = height - 1.0, height - 1.75
        heading(height - 0.5, t["pairs"].format(m=n * k))
        for i, x in enumerate(xs):
            _write(ax, x, y_a + 0.3, f"{i}", p.muted)
            pair_box(x, y_a, i, f"pair-{i}")
        for rank, pair in enumerate(run.order):
            expert = run.experts[pair // k][pair % k]
            ax.plot(
                [xs[pair], xs[rank]],
                [y_a - h / 2, y_b + h / 2],
                color=colours[expert],
                lw=1.3,
            )
            pair_box(xs[rank], y_b, pair, f"sorted-{rank}")
        y_c, start = y_b - h / 2 - 0.08, 0
        for expert, count in enumerate(run.counts):
            if count:
                left, right = xs[start] - w / 2, xs[start + count - 1] + w / 2
                ax.plot(
                    [left, left, right, right],
                    [y_c, y_c - 0.07, y_c - 0.07, y_c],
                    color=colours[expert],
                    lw=1.3,
                )
                _write(
                    ax,
                    (left + right) / 2,
                    y_c - 0.2,
                    f"e{expert}: {count}",
                    p.ink,
                    gid=f"count-{expert}",
                )
            start += count
        heading(y_c - 0.45, t["sorted"].format(order=", ".join(map(str, run.order))))
        heading(y_c - 0.67, t["counts"].format(counts=", ".join(map(str, run.counts))))
        y_d = y_c - 0.92
        heading(y_d, t["slots"].format(c=c))
        slot_x = [1.2 + 0.95 * s for s in range(c)]
        for s, x in enumerate(slot_x):
            _write(ax, x, y_d - 0.23, t["slot"].format(c=s), p.muted)
        for expert, row in enumerate(run.slots):
            y, colour = y_d - 0.5 - 0.34 * expert, colours[expert]
            _box(
                ax, 0.42, y, w, 0.3, f"e{expert}", face=colour, edge=colour, ink=BOX_INK
            )
            for s, token in enumerate(row):
                on = token is not None
                _box(
                    ax,
                    slot_x[s],
                    y,
                    0.8,
                    0.3,
                    f"t{token}" if on else "0",
                    face=colour if on else p.empty,
                    edge=colour if on else p.border,
                    ink=BOX_INK if on else p.muted,
                    gid=f"slot-{expert}-{s}",
                )
        y_e = y_d - 0.5 - 0.34 * n_experts - 0.01
        heading(y_e, t["back"])
        for token in range(n):
            terms = [
                f"{'+ ' if j else f'$y_{token}$ = '}"
                f"{_num(run.weights[token][j], language)}\u00b7e{e}[{s}]"
                for j, (e, s) in enumerate(run.back[token])
            ]
            _write(
                ax,
                1.28 * (token + 1) - 0.05,
                y_e - 0.36,
                "\n".join(terms),
                p.ink,
                ha="right",
                multialignment="right",
                linespacing=1.35,
                gid=f"back-{token}",
            )
    return fig


def _layer_alt() -> str:
    run = one_token()
    probs = ", ".join(f"{p:.2f}" for p in run.probs)
    chosen = " and ".join(f"{e} ({g:.2f})" for e, g in zip(run.chosen, run.gates))
    return (
        f"One token of width {run.d_model} through a minimal Mixtral layer with "
        f"{run.n_experts} experts and top {run.top_k}: the router's logits, their "
        f"softmax over all experts as bars, {probs} for experts 0 to "
        f"{run.n_experts - 1}; the two most probable, experts {chosen} with their "
        "probabilities divided by their sum, are run, the others greyed out and not "
        "computed; the output is the weighted sum of the two experts' outputs."
    )


def _dispatch_alt() -> str:
    run = dispatch_run(*dispatch_routing())
    routing = "; ".join(
        f"token {n} to experts {a} and {b}" for n, (a, b) in enumerate(run.experts)
    )
    counts = ", ".join(f"expert {e} {c}" for e, c in enumerate(run.counts))
    return (
        f"Dispatch of {len(run.experts)} tokens routed top 2 among {len(run.counts)} "
        f"experts: {routing}. The {len(run.order)} pairs, "
        "numbered in token order, are sorted by expert, stably, giving the order "
        f"{', '.join(map(str, run.order))}; the pairs per expert are {counts}. Each "
        f"expert runs on its group of {len(run.slots[0])} slots, its tokens in the first slots and zeros "
        "in the rest; each token's output is its two pairs' outputs, read back from "
        "their slots and weighted by the router."
    )


SPECS: list[tuple] = [
    ("moe-layer", layer_figure, _layer_alt()),
    ("moe-dispatch", dispatch_figure, _dispatch_alt()),
]
