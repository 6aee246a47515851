"""Diagrams (issue 26): drawn from the code, light and dark, English and Russian.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

Chapter 9's two diagrams. `moe-layer`: one token through the minimal `MixtralMoE`
(4 experts, top 2, fixed seed), its logits, probabilities, chosen experts and gates read
from the run (`one_token`). `moe-dispatch`: `dispatch` of `literate.parts.moe` on four
tokens routed top-2 among three experts by `mixtral_router`; the sort, the counts, the
slots and the way back are read from what `dispatch` hands its experts and returns
(`dispatch_run`), never typed.

The gap figures, each read from a run of the code: `moe-routers` (every router of
`literate.parts.routers` on one token's logits), `moe-deepseek-groups` (DeepSeek-V3's
group-limited choice on one token), `moe-capacity` (the page's Switch capacity example
through `dispatch`), `moe-balancing-loss` (`load_balancing_loss` as the load collapses),
`moe-bias-update` (the page's run of `update_balancing_bias`) and `moe-cost`
(`moe_params` of three published models).
"""

# Over 450 lines on purpose: chapter 9's eight diagrams, each with the run that reads
# its numbers from the code, share one set of drawing helpers laid out in inches.

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

from literate.figures.style import BOX_INK, GREEN, ORANGE, style, text
from literate.minimal.moe import MixtralMoE, load_balancing_loss
from literate.models.mixtral import mla_params, moe_params
from literate.parts.moe import Experts, dispatch, dropped_pairs, update_balancing_bias
from literate.parts.routers import (
    Router,
    deepseek_v3_router,
    gpt_oss_router,
    mixtral_router,
    qwen3_moe_router,
    switch_router,
)

F64 = torch.float64
WIDTH = 5.2  # inches: the phone column (358 px) shows 9.5 pt as 9 px
SMALL, LABEL, TITLE = 9.5, 10.0, 12.0  # font sizes, pt
MINUS = "\u2212"

# --- the layer ---------------------------------------------------------------------

LAYER_SEED = 0  # the experts' weights; the router and the token are chapter 9's by hand
LAYER_SHAPE = {"d_model": 4, "d_ff": 3, "n_experts": 4, "top_k": 2}
LAYER_TOKEN = (2.0, 1.0, 0.0, -1.0)  # with the identity router, its own logits


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
    """The minimal Mixtral layer and the token of chapter 9's example by hand, `[1, 1,
    d]`, float64: the router's weight the identity, so the logits are the token itself;
    the experts from `LAYER_SEED` (the global random state is left as it was)."""
    with torch.random.fork_rng():
        torch.manual_seed(LAYER_SEED)
        moe = MixtralMoE(**LAYER_SHAPE).double()
    with torch.no_grad():
        moe.gate.weight.copy_(torch.eye(LAYER_SHAPE["d_model"], dtype=F64))
    x = torch.tensor([[LAYER_TOKEN]], dtype=F64)
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


# --- five routers on one token -------------------------------------------------------

ROUTERS_SEED = 24  # a token whose DeepSeek-V3 choice the bias changes
ROUTERS_SHAPE = {"n_experts": 6, "top_k": 2, "n_group": 3, "topk_group": 2}
FONT = 10.0  # the gap figures' smallest font, pt


@dataclass(frozen=True)
class RoutersRun:
    logits: tuple[float, ...]  # [E]
    bias: tuple[float, ...]  # [E], DeepSeek-V3's balancing bias
    rows: dict[str, dict[int, float]]  # router -> {expert: weight}


def routers_example() -> tuple[torch.Tensor, torch.Tensor]:
    """One token's logits `[1, E]` and a bias `[E]`, float64, from `ROUTERS_SEED`."""
    g = torch.Generator().manual_seed(ROUTERS_SEED)
    logits = 1.5 * torch.randn(1, ROUTERS_SHAPE["n_experts"], generator=g, dtype=F64)
    bias = 0.1 * torch.randn(ROUTERS_SHAPE["n_experts"], generator=g, dtype=F64)
    return logits, bias


def routers_run(logits: torch.Tensor, bias: torch.Tensor) -> RoutersRun:
    """Each router of `literate.parts.routers` on the token: its experts and weights."""
    k = ROUTERS_SHAPE["top_k"]
    ds = {
        "n_group": ROUTERS_SHAPE["n_group"],
        "topk_group": ROUTERS_SHAPE["topk_group"],
        "norm_topk_prob": True,
        "routed_scaling_factor": 2.5,
    }
    routed = {
        "switch": switch_router(logits),
        "mixtral": mixtral_router(logits, top_k=k),
        "qwen3": qwen3_moe_router(logits, top_k=k, norm_topk_prob=False),
        "gpt-oss": gpt_oss_router(logits, top_k=k),
        "deepseek-0": deepseek_v3_router(
            logits, top_k=k, score_bias=torch.zeros_like(bias), **ds
        ),
        "deepseek-b": deepseek_v3_router(logits, top_k=k, score_bias=bias, **ds),
    }
    rows = {
        name: dict(zip(e[0].tolist(), w[0].double().tolist()))
        for name, (w, e) in routed.items()
    }
    return RoutersRun(tuple(logits[0].tolist()), tuple(bias.tolist()), rows)


ROUTERS_LABELS = {
    "en": {
        "title": "One token's logits, six routings (top 2 of 6)",
        "expert": "expert",
        "sum": "sum",
        "group": "group {g}",
        "logits": "logits $l$",
        "bias": "bias $b$",
        "switch": "Switch (top 1)",
        "mixtral": "Mixtral,\nQwen3 (norm)",
        "qwen3": "Qwen3,\nnot renormalised",
        "gpt-oss": "gpt-oss",
        "deepseek-0": "DeepSeek-V3,\n$b = 0$",
        "deepseek-b": "DeepSeek-V3,\nwith $b$",
    },
    "ru": {
        "title": "Один токен, шесть маршрутизаций (2 из 6)",
        "expert": "эксперт",
        "sum": "сумма",
        "group": "группа {g}",
        "logits": "логиты $l$",
        "bias": "смещение $b$",
        "switch": "Switch (1 из 6)",
        "mixtral": "Mixtral,\nQwen3 (норм.)",
        "qwen3": "Qwen3\nбез нормировки",
        "gpt-oss": "gpt-oss",
        "deepseek-0": "DeepSeek-V3,\n$b = 0$",
        "deepseek-b": "DeepSeek-V3,\nсо смещением $b$",
    },
}
ROUTER_ROWS = ("switch", "mixtral", "qwen3", "gpt-oss", "deepseek-0", "deepseek-b")


def routers_figure(*, language: str = "en", theme: str = "light") -> Figure:
    t = text(ROUTERS_LABELS, language)
    run = routers_run(*routers_example())
    n_experts = len(run.logits)
    per_group = n_experts // ROUTERS_SHAPE["n_group"]
    rows = ["logits", *ROUTER_ROWS[:4], "deepseek-0", "bias", "deepseek-b"]
    row_h, x0, cell = 0.4, 1.55, 0.5
    height = 1.05 + row_h * len(rows)
    with style(theme) as p:
        fig, ax = _canvas(height)
        ax.text(
            0.05,
            height - 0.2,
            t["title"],
            fontsize=TITLE,
            color=p.ink,
            fontweight="bold",
            va="center",
        )
        y_head = height - 0.55
        for e in range(n_experts):
            _write(ax, x0 + cell * (e + 0.5), y_head, f"{e}", p.muted, size=FONT)
        for g in range(ROUTERS_SHAPE["n_group"]):
            left = x0 + cell * per_group * g
            _write(
                ax,
                left + cell * per_group / 2,
                y_head - 0.25,
                t["group"].format(g=g),
                p.muted,
                size=FONT,
            )
            if g:
                ax.plot(
                    [left, left], [0.05, y_head - 0.1], color=p.border, lw=0.8, ls=":"
                )
        _write(ax, 0.05, y_head, t["expert"], p.muted, size=FONT, ha="left")
        x_sum = x0 + cell * n_experts + 0.4
        _write(ax, x_sum, y_head, t["sum"], p.muted, size=FONT)
        colours = dict(zip(ROUTER_ROWS, (*p.series, p.series[4])))
        for r, name in enumerate(rows):
            y = y_head - 0.6 - row_h * r
            _write(ax, 0.05, y, t[name], p.ink, size=FONT, ha="left", linespacing=1.0)
            if name in ("logits", "bias"):
                values = run.logits if name == "logits" else run.bias
                for e, v in enumerate(values):
                    _write(
                        ax,
                        x0 + cell * (e + 0.5),
                        y,
                        _num(v, language),
                        p.muted,
                        size=FONT,
                        gid=f"{name}-{e}",
                    )
                continue
            weights = run.rows[name]
            for e in range(n_experts):
                on = e in weights
                _box(
                    ax,
                    x0 + cell * (e + 0.5),
                    y,
                    cell - 0.06,
                    row_h - 0.08,
                    _num(weights[e], language) if on else "",
                    face=colours[name] if on else p.empty,
                    edge=colours[name] if on else p.border,
                    ink=BOX_INK,
                    size=FONT,
                    gid=f"{name}-{e}" if on else None,
                )
            _write(
                ax,
                x_sum,
                y,
                _num(sum(weights.values()), language),
                p.ink,
                size=FONT,
                gid=f"{name}-sum",
            )
    return fig


def _routers_alt() -> str:
    run = routers_run(*routers_example())
    logits = ", ".join(f"{v:.2f}" for v in run.logits)

    def chosen(name: str) -> str:
        return " and ".join(f"{e} ({w:.2f})" for e, w in sorted(run.rows[name].items()))

    return (
        f"One token's router logits over 6 experts, {logits}, routed by each router "
        f"of the chapter. Switch: expert {chosen('switch')}. Mixtral, and Qwen3 "
        f"renormalised: experts {chosen('mixtral')}, summing to 1. Qwen3 not "
        f"renormalised: {chosen('qwen3')}, summing to less than 1. gpt-oss: "
        f"{chosen('gpt-oss')}, Mixtral's. DeepSeek-V3, sigmoid scores in 3 groups of "
        f"2, 2 groups kept, weights times 2.5: with no bias {chosen('deepseek-0')}; "
        f"with a bias that lowers expert 1, {chosen('deepseek-b')}, the weights "
        "computed from the unbiased scores."
    )


# --- DeepSeek-V3's group-limited choice ----------------------------------------------

GROUPS_SEED = 13  # a token whose best-scored expert 4 lies in a group not kept
GROUPS_SHAPE = {"n_experts": 8, "top_k": 3, "n_group": 4, "topk_group": 2}
GROUPS_SCALE = 2.5  # routed_scaling_factor


@dataclass(frozen=True)
class GroupsRun:
    logits: tuple[float, ...]  # [E]
    scores: tuple[float, ...]  # [E], sigmoid
    bias: tuple[float, ...]  # [E]
    group_scores: tuple[float, ...]  # [n_group], the sum of each group's two best s + b
    kept: tuple[int, ...]  # the topk_group groups kept
    weights: dict[int, float]  # expert -> weight, from `deepseek_v3_router`


def groups_example() -> tuple[torch.Tensor, torch.Tensor]:
    """One token's logits `[1, 8]` and a bias `[8]`, float64, from `GROUPS_SEED`."""
    g = torch.Generator().manual_seed(GROUPS_SEED)
    logits = torch.randn(1, GROUPS_SHAPE["n_experts"], generator=g, dtype=F64)
    bias = 0.2 * torch.randn(GROUPS_SHAPE["n_experts"], generator=g, dtype=F64)
    return logits, bias


def groups_run(logits: torch.Tensor, bias: torch.Tensor) -> GroupsRun:
    """`deepseek_v3_router` on the token; the group scores it ranks, recomputed."""
    n_group, per = GROUPS_SHAPE["n_group"], GROUPS_SHAPE["n_experts"] // 4
    weights, experts = deepseek_v3_router(
        logits,
        top_k=GROUPS_SHAPE["top_k"],
        score_bias=bias,
        n_group=n_group,
        topk_group=GROUPS_SHAPE["topk_group"],
        norm_topk_prob=True,
        routed_scaling_factor=GROUPS_SCALE,
    )
    scores = logits[0].sigmoid()
    group_scores = (scores + bias).view(n_group, per).topk(2, dim=-1).values.sum(-1)
    kept = group_scores.topk(GROUPS_SHAPE["topk_group"]).indices.sort().values
    return GroupsRun(
        tuple(logits[0].tolist()),
        tuple(scores.tolist()),
        tuple(bias.tolist()),
        tuple(group_scores.tolist()),
        tuple(kept.tolist()),
        dict(zip(experts[0].tolist(), weights[0].tolist())),
    )


GROUPS_LABELS = {
    "en": {
        "title": "DeepSeek-V3: top 3 of 8 experts in 2 of 4 groups",
        "expert": "expert",
        "scores": "scores $s = \\sigma(l)$",
        "bias": "bias $b$",
        "biased": "$s + b$: choose",
        "groups": "group: sum of\nits 2 best $s + b$",
        "weights": "weights\n$2.5\\, s_i / \\Sigma_S\\, s_j$",
    },
    "ru": {
        "title": "DeepSeek-V3: 3 из 8 экспертов в 2 из 4 групп",
        "expert": "эксперт",
        "scores": "оценки $s = \\sigma(l)$",
        "bias": "смещение $b$",
        "biased": "$s + b$: выбор",
        "groups": "сумма 2 лучших\n$s + b$ в группе",
        "weights": "веса\n$2{,}5\\, s_i / \\Sigma_S\\, s_j$",
    },
}


def groups_figure(*, language: str = "en", theme: str = "light") -> Figure:
    t = text(GROUPS_LABELS, language)
    run = groups_run(*groups_example())
    n_experts = len(run.logits)
    per = n_experts // len(run.group_scores)
    row_h, x0, cell = 0.42, 1.42, 0.47
    height = 0.75 + row_h * 6
    with style(theme) as p:
        fig, ax = _canvas(height)
        ax.text(
            0.05,
            height - 0.2,
            t["title"],
            fontsize=TITLE,
            color=p.ink,
            fontweight="bold",
            va="center",
        )

        def x_of(e: float) -> float:
            return x0 + cell * (e + 0.5)

        y = height - 0.55
        _write(ax, 0.05, y, t["expert"], p.muted, size=FONT, ha="left")
        for e in range(n_experts):
            _write(ax, x_of(e), y, f"{e}", p.muted, size=FONT)
        for g in range(1, len(run.group_scores)):
            left = x0 + cell * per * g
            ax.plot([left, left], [0.05, y - 0.15], color=p.border, lw=0.8, ls=":")
        for r, name in enumerate(("scores", "bias")):
            y = height - 0.55 - row_h * (r + 1)
            values = (run.scores, run.bias)[r]
            _write(ax, 0.05, y, t[name], p.ink, size=FONT, ha="left")
            for e, v in enumerate(values):
                colour = p.ink if name == "scores" else p.muted
                _write(
                    ax,
                    x_of(e),
                    y,
                    _num(v, language),
                    colour,
                    size=FONT,
                    gid=f"{name}-{e}",
                )
        y = height - 0.55 - row_h * 3
        _write(ax, 0.05, y, t["groups"], p.ink, size=FONT, ha="left", linespacing=1.0)
        for g, v in enumerate(run.group_scores):
            on = g in run.kept
            _box(
                ax,
                x_of(per * g + (per - 1) / 2),
                y,
                cell * per - 0.06,
                row_h - 0.08,
                _num(v, language),
                face=p.series[0] if on else p.empty,
                edge=p.series[0] if on else p.border,
                ink=BOX_INK if on else p.muted,
                size=FONT,
                gid=f"group-{g}",
            )
        y = height - 0.55 - row_h * 4
        _write(ax, 0.05, y, t["biased"], p.ink, size=FONT, ha="left")
        for e in range(n_experts):
            allowed, chosen = e // per in run.kept, e in run.weights
            _box(
                ax,
                x_of(e),
                y,
                cell - 0.05,
                row_h - 0.08,
                _num(run.scores[e] + run.bias[e], language),
                face=p.series[1] if chosen else p.empty,
                edge=p.series[1] if chosen else p.border,
                ink=BOX_INK if chosen else (p.ink if allowed else p.muted),
                size=FONT,
                gid=f"biased-{e}",
            )
        y = height - 0.55 - row_h * 5.2
        _write(ax, 0.05, y, t["weights"], p.ink, size=FONT, ha="left", linespacing=1.0)
        for e, w in run.weights.items():
            _box(
                ax,
                x_of(e),
                y,
                cell - 0.05,
                row_h - 0.08,
                _num(w, language),
                face=p.series[2],
                edge=p.series[2],
                ink=BOX_INK,
                size=FONT,
                gid=f"weight-{e}",
            )
    return fig


def _groups_alt() -> str:
    run = groups_run(*groups_example())
    kept = " and ".join(str(g) for g in run.kept)
    groups = ", ".join(f"{v:.2f}" for v in run.group_scores)
    best = max(range(len(run.scores)), key=lambda e: run.scores[e] + run.bias[e])
    chosen = ", ".join(f"{e} ({w:.2f})" for e, w in sorted(run.weights.items()))
    return (
        "DeepSeek-V3's router on one token, 8 experts in 4 groups of 2: the sigmoid "
        "scores of its logits, the balancing bias and the biased scores. Each group is "
        f"scored by the sum of its two best biased scores, {groups}; groups {kept} "
        f"are kept, so expert {best}, whose biased score is the highest of all, is "
        "left out with its group. The top 3 biased scores inside the "
        f"kept groups choose experts {chosen}: the weights, 2.5 times the unbiased "
        "scores renormalised, sum to 2.5."
    )


# --- Switch's capacity ---------------------------------------------------------------

CAPACITY_SEED = 3  # the page's example: 12 tokens, top 1 among 4 experts


@dataclass(frozen=True)
class CapacityRun:
    chosen: tuple[int, ...]  # [N], each token's expert
    capacity: int
    dropped: tuple[int, ...]  # the tokens whose MoE output the capacity zeroed
    n_dropped: int  # dropped_pairs


def switch_capacity(n_tokens: int, n_experts: int, capacity_factor: float) -> int:
    """The page's `switch_capacity` at top 1: ceil(c_f N / E)."""
    return math.ceil(capacity_factor * n_tokens / n_experts)


def capacity_run() -> CapacityRun:
    """The page's capacity example (seed 3, `Router` with `switch_router`, `Experts`,
    12 tokens), run dropless and at c_f = 1; the dropped tokens are those whose
    output the capacity changed."""
    with torch.random.fork_rng():
        torch.manual_seed(CAPACITY_SEED)
        router = Router(d_model=8, n_experts=4, route=switch_router).double()
        four = Experts(n_experts=4, d_model=8, d_ff=12).double()
        tokens = torch.randn(12, 8, dtype=F64)
    with torch.no_grad():
        _, gates, chosen = router(tokens)
        c = switch_capacity(n_tokens=12, n_experts=4, capacity_factor=1.0)
        dropless = dispatch(tokens, gates, chosen, four, n_experts=4)
        capped = dispatch(tokens, gates, chosen, four, n_experts=4, capacity=c)
    changed = (capped - dropless).abs().amax(dim=-1) > 1e-12
    return CapacityRun(
        tuple(chosen[:, 0].tolist()),
        c,
        tuple(torch.nonzero(changed)[:, 0].tolist()),
        int(dropped_pairs(chosen, n_experts=4, capacity=c)),
    )


CAPACITY_LABELS = {
    "en": {
        "title": "Switch: 12 tokens, top 1 of 4 experts, $c_f = 1$",
        "capacity": "capacity $C$ = {c}",
        "expert": "\u2190 expert",
        "kept": "kept, in batch\norder",
        "dropped": "over capacity:\ndropped, output 0",
        "note": "{n} tokens dropped; dropless, all 12 run",
    },
    "ru": {
        "title": "Switch: 12 токенов, 1 из 4 экспертов, $c_f = 1$",
        "capacity": "ёмкость $C$ = {c}",
        "expert": "\u2190 эксперт",
        "kept": "обработаны\nв порядке батча",
        "dropped": "сверх ёмкости:\nсброшены, выход 0",
        "note": "сброшено токенов: {n}; без сброса работают все 12",
    },
}


def capacity_figure(*, language: str = "en", theme: str = "light") -> Figure:
    t = text(CAPACITY_LABELS, language)
    run = capacity_run()
    columns = [[n for n, e in enumerate(run.chosen) if e == x] for x in range(4)]
    box_h, base = 0.34, 0.75
    height = base + box_h * max(map(len, columns)) + 0.6
    with style(theme) as p:
        fig, ax = _canvas(height)
        ax.text(
            0.05,
            height - 0.22,
            t["title"],
            fontsize=TITLE,
            color=p.ink,
            fontweight="bold",
            va="center",
        )
        x_of = [0.5 + 0.82 * e for e in range(4)]
        for e, column in enumerate(columns):
            _write(ax, x_of[e], base - 0.22, f"{e}", p.ink, size=FONT)
            for slot, n in enumerate(column):
                drop = n in run.dropped
                _box(
                    ax,
                    x_of[e],
                    base + box_h * (slot + 0.5),
                    0.7,
                    box_h - 0.05,
                    f"t{n}",
                    face=p.empty if drop else p.series[e],
                    edge=p.series[4] if drop else p.series[e],
                    ink=p.series[4] if drop else BOX_INK,
                    size=FONT,
                    gid=f"token-{n}",
                )
        _write(
            ax, x_of[-1] + 0.5, base - 0.22, t["expert"], p.muted, size=FONT, ha="left"
        )
        y_c = base + box_h * run.capacity
        right = x_of[-1] + 0.45
        ax.plot([0.1, right], [y_c, y_c], color=p.ink, lw=1.2, ls="--")
        _write(
            ax,
            right + 0.08,
            y_c,
            t["capacity"].format(c=run.capacity),
            p.ink,
            size=FONT,
            ha="left",
            gid="capacity",
        )
        _write(
            ax,
            right + 0.08,
            y_c + 0.45,
            t["dropped"],
            p.series[4],
            size=FONT,
            ha="left",
        )
        _write(ax, right + 0.08, y_c - 0.45, t["kept"], p.muted, size=FONT, ha="left")
        _write(
            ax,
            0.05,
            0.18,
            t["note"].format(n=run.n_dropped),
            p.ink,
            size=FONT,
            ha="left",
            gid="note",
        )
    return fig


def _capacity_alt() -> str:
    run = capacity_run()
    loads = [run.chosen.count(e) for e in range(4)]
    return (
        f"Twelve tokens routed top 1 among 4 experts by Switch's router, stacked in "
        f"each expert's column in batch order: loads {', '.join(map(str, loads))}. A "
        f"dashed line marks the capacity C = {run.capacity} of capacity factor 1; "
        f"the {run.n_dropped} tokens above it, "
        f"{', '.join(f't{n}' for n in run.dropped)}, are dropped and get an MoE "
        "output of 0; dropless, all 12 run."
    )


# --- the balancing loss as the load collapses ----------------------------------------

BALANCE_TOKENS, BALANCE_EXPERTS = 12, 4


def balance_logits(m: int) -> torch.Tensor:
    """12 tokens, 4 experts, top 1: m tokens prefer expert 0 (a logit of 3, as on the
    page), the rest prefer experts 1, 2, 3 in turn."""
    prefer = [0] * m + [1 + i % 3 for i in range(BALANCE_TOKENS - m)]
    return 3 * torch.eye(BALANCE_EXPERTS, dtype=F64)[prefer]


def balance_run() -> list[tuple[float, float, float]]:
    """(f_0, the loss, expert 0's term E f_0 P_0) for m = 3 .. 12; the loss is the
    page's `load_balancing_loss`."""
    out = []
    for m in range(3, BALANCE_TOKENS + 1):
        logits = balance_logits(m)
        probs = logits.softmax(dim=-1)
        f0 = float((probs.argmax(dim=-1) == 0).double().mean())
        term = BALANCE_EXPERTS * f0 * float(probs[:, 0].mean())
        out.append((f0, float(load_balancing_loss(logits, top_k=1)), term))
    return out


BALANCE_LABELS = {
    "en": {
        "title": "Balancing loss: 12 tokens, top 1 of 4",
        "x": "$f_0$: share of the tokens sent to expert 0",
        "loss": "the loss $E \\sum_e f_e P_e$",
        "term": "expert 0's term $E f_0 P_0$",
        "balanced": "balanced: $k$ = 1",
        "limit": "$E$ = 4",
    },
    "ru": {
        "title": "Балансирующая потеря: 12 токенов, 1 из 4",
        "x": "$f_0$: доля токенов, отправленных эксперту 0",
        "loss": "потеря $E \\sum_e f_e P_e$",
        "term": "слагаемое эксперта 0: $E f_0 P_0$",
        "balanced": "баланс: $k$ = 1",
        "limit": "$E$ = 4",
    },
}


def balance_figure(*, language: str = "en", theme: str = "light") -> Figure:
    t = text(BALANCE_LABELS, language)
    run = balance_run()
    with style(theme) as p:
        fig, ax = plt.subplots(figsize=(WIDTH, 3.0))
        fig.subplots_adjust(left=0.1, right=0.97, top=0.88, bottom=0.18)
        f0 = [r[0] for r in run]
        ax.plot(
            f0,
            [r[1] for r in run],
            "o-",
            color=p.series[0],
            lw=1.6,
            ms=4,
            label=t["loss"],
            gid="loss",
        )
        ax.plot(
            f0,
            [r[2] for r in run],
            "s--",
            color=p.series[1],
            lw=1.2,
            ms=3.5,
            label=t["term"],
            gid="term",
        )
        for y, label, x, ha in (
            (1.0, t["balanced"], 1.0, "right"),
            (4.0, t["limit"], 0.25, "left"),
        ):
            ax.axhline(y, color=p.muted, lw=0.8, ls=":")
            ax.text(
                x, y + 0.08, label, fontsize=FONT, color=p.muted, va="bottom", ha=ha
            )
        ax.annotate(
            _num(run[-1][1], language),
            (f0[-1], run[-1][1]),
            xytext=(-8, 6),
            textcoords="offset points",
            ha="right",
            fontsize=FONT,
            color=p.series[0],
            gid="last",
        )
        ax.set_xlim(0.22, 1.03)
        ax.set_ylim(0, 4.5)
        ax.set_xlabel(t["x"], fontsize=FONT)
        ax.legend(loc="upper left", fontsize=FONT, bbox_to_anchor=(0.0, 0.86))
        ax.grid(True, axis="y")
        fig.text(0.01, 0.97, t["title"], fontsize=TITLE, fontweight="bold", va="top")
        if language == "ru":
            ax.xaxis.set_major_formatter(lambda v, _: _num(v, language, 1))
            ax.yaxis.set_major_formatter(lambda v, _: f"{v:g}")
    return fig


def _balance_alt() -> str:
    run = balance_run()
    return (
        "Switch's balancing loss on 12 tokens routed top 1 among 4 experts, as the "
        "share of tokens sent to expert 0 grows from a quarter to all of them, the "
        "others spread over experts 1 to 3: the loss rises from "
        f"{run[0][1]:.2f} (balanced, k) to {run[-1][1]:.2f}, on its way to E = 4, "
        "almost all of it expert 0's term E f_0 P_0."
    )


# --- DeepSeek-V3's bias moving the load ----------------------------------------------

BIAS_SEED, BIAS_STEPS = 0, 200  # the page's simulation: 16 experts, 512 tokens a step


def bias_run() -> tuple[list[float], list[float], list[float]]:
    """The page's sign-rule simulation (seed 0, logits skewed towards expert 15,
    top 2, 4 groups, 2 kept, speed 0.01), step by step: the busiest and the idlest
    expert's load over the mean, before each update, and the final bias [16]."""
    busiest, idlest = [], []
    with torch.random.fork_rng():
        torch.manual_seed(BIAS_SEED)
        skew = torch.linspace(-1.5, 1.5, 16)
        bias = torch.zeros(16)
        for _ in range(BIAS_STEPS + 1):
            _, chosen = deepseek_v3_router(
                torch.randn(512, 16) + skew,
                top_k=2,
                score_bias=bias,
                n_group=4,
                topk_group=2,
                norm_topk_prob=True,
                routed_scaling_factor=1.0,
            )
            load = torch.zeros(16).scatter_add_(0, chosen.flatten(), torch.ones(1024))
            update_balancing_bias(bias, chosen, speed=0.01)
            busiest.append(float(load.max() / load.mean()))
            idlest.append(float(load.min() / load.mean()))
    return busiest, idlest, bias.tolist()


BIAS_LABELS = {
    "en": {
        "title": "DeepSeek-V3's bias evens the load (16 experts)",
        "x": "training step ($\\gamma$ = 0.01)",
        "y": "load / mean load",
        "busiest": "busiest expert",
        "idlest": "idlest expert",
    },
    "ru": {
        "title": "Смещение DeepSeek-V3 выравнивает нагрузку",
        "x": "шаг обучения ($\\gamma$ = 0,01)",
        "y": "нагрузка / средняя",
        "busiest": "самый загруженный эксперт",
        "idlest": "самый свободный эксперт",
    },
}


def bias_figure(*, language: str = "en", theme: str = "light") -> Figure:
    t = text(BIAS_LABELS, language)
    busiest, idlest, _ = bias_run()
    steps = range(len(busiest))
    with style(theme) as p:
        fig, ax = plt.subplots(figsize=(WIDTH, 2.9))
        fig.subplots_adjust(left=0.12, right=0.97, top=0.88, bottom=0.18)
        ax.plot(
            steps, busiest, color=p.series[4], lw=1.5, label=t["busiest"], gid="busiest"
        )
        ax.plot(
            steps, idlest, color=p.series[0], lw=1.5, label=t["idlest"], gid="idlest"
        )
        ax.axhline(1.0, color=p.muted, lw=0.8, ls=":")
        for series, colour, name in (
            (busiest, p.series[4], "b"),
            (idlest, p.series[0], "i"),
        ):
            for step in (0, len(series) - 1):
                ax.annotate(
                    _num(series[step], language),
                    (step, series[step]),
                    xytext=(4, 5 if name == "b" else -14)
                    if step == 0
                    else (-2, 14 if name == "b" else -16),
                    textcoords="offset points",
                    ha="left" if step == 0 else "right",
                    fontsize=FONT,
                    color=colour,
                    gid=f"{name}-{step}",
                )
        ax.set_xlim(-5, len(busiest) + 4)
        ax.set_ylim(-0.45, max(busiest) * 1.15)
        ax.set_xlabel(t["x"], fontsize=FONT)
        ax.set_ylabel(t["y"], fontsize=FONT)
        ax.legend(loc="upper right", fontsize=FONT)
        ax.grid(True, axis="y")
        fig.text(0.01, 0.97, t["title"], fontsize=TITLE, fontweight="bold", va="top")
        if language == "ru":
            ax.yaxis.set_major_formatter(lambda v, _: _num(v, language, 1))
    return fig


def _bias_alt() -> str:
    busiest, idlest, _ = bias_run()
    return (
        f"Over {BIAS_STEPS} steps of DeepSeek-V3's sign rule on 16 experts whose logits "
        "favour the last, each step's busiest and idlest expert's load over the mean "
        f"load: the busiest falls from {busiest[0]:.2f} to {busiest[-1]:.2f}, the "
        f"idlest rises from {idlest[0]:.2f} to {idlest[-1]:.2f}, both towards 1."
    )


# --- what a token costs --------------------------------------------------------------


def cost_run() -> dict[str, tuple[int, int]]:
    """(total, active) parameters by `moe_params`, the page's three configurations."""
    attention = mla_params(
        d_model=7168,
        n_heads=128,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
    )
    return {
        "Mixtral 8x7B": moe_params(
            d_model=4096,
            n_layers=32,
            n_experts=8,
            top_k=2,
            d_ff=14336,
            n_heads=32,
            n_kv_heads=8,
            vocab=32000,
        ),
        "Qwen3-30B-A3B": moe_params(
            d_model=2048,
            n_layers=48,
            n_experts=128,
            top_k=8,
            d_ff=768,
            n_heads=32,
            n_kv_heads=4,
            vocab=151936,
            d_head=128,
            qk_norm=True,
        ),
        "DeepSeek-V3": moe_params(
            d_model=7168,
            n_layers=61,
            n_experts=256,
            top_k=8,
            d_ff=2048,
            n_heads=128,
            n_kv_heads=128,
            vocab=129280,
            shared=1,
            dense_layers=3,
            dense_d_ff=18432,
            attention=attention,
        ),
    }


COST_LABELS = {
    "en": {
        "title": "What a token multiplies by: active of total",
        "routing": {
            "Mixtral 8x7B": "top 2 of 8",
            "Qwen3-30B-A3B": "top 8 of 128",
            "DeepSeek-V3": "top 8 of 256, + 1 shared",
        },
        "value": "{a} B of {t} B ({s})",
        "active": "active",
        "skipped": "skipped experts",
    },
    "ru": {
        "title": "На что умножается токен: активные из всех",
        "routing": {
            "Mixtral 8x7B": "2 из 8",
            "Qwen3-30B-A3B": "8 из 128",
            "DeepSeek-V3": "8 из 256, + 1 общий",
        },
        "value": "{a} из {t} млрд ({s})",
        "active": "активные",
        "skipped": "пропущенные эксперты",
    },
}


def _share(v: float, language: str) -> str:
    s = f"{100 * v:.1f} %" if language == "ru" else f"{100 * v:.1f}%"
    return s.replace(".", ",") if language == "ru" else s


def cost_figure(*, language: str = "en", theme: str = "light") -> Figure:
    t = text(COST_LABELS, language)
    run = cost_run()
    bar_w, x0 = 4.9, 0.15
    height = 0.7 + 0.82 * len(run) + 0.3
    with style(theme) as p:
        fig, ax = _canvas(height)
        ax.text(
            0.05,
            height - 0.22,
            t["title"],
            fontsize=TITLE,
            color=p.ink,
            fontweight="bold",
            va="center",
        )
        for i, (name, (total, active)) in enumerate(run.items()):
            y = height - 0.78 - 0.82 * i
            _write(
                ax,
                x0,
                y + 0.1,
                f"{name}: {t['routing'][name]}",
                p.ink,
                size=LABEL,
                ha="left",
            )
            value = t["value"].format(
                a=_num(active / 1e9, language),
                t=_num(total / 1e9, language, 1),
                s=_share(active / total, language),
            )
            _write(
                ax,
                x0 + bar_w,
                y + 0.1,
                value,
                p.ink,
                size=FONT,
                ha="right",
                gid=f"value-{i}",
            )
            ax.add_patch(
                FancyBboxPatch(
                    (x0, y - 0.42),
                    bar_w,
                    0.3,
                    boxstyle="square,pad=0",
                    facecolor=p.empty,
                    edgecolor=p.border,
                    lw=0.8,
                )
            )
            ax.add_patch(
                FancyBboxPatch(
                    (x0, y - 0.42),
                    bar_w * active / total,
                    0.3,
                    boxstyle="square,pad=0",
                    facecolor=p.series[i],
                    edgecolor=p.series[i],
                    lw=0.8,
                    gid=f"bar-{i}",
                )
            )
        y_key = 0.2
        ax.add_patch(
            FancyBboxPatch(
                (x0, y_key - 0.08),
                0.3,
                0.16,
                boxstyle="square,pad=0",
                facecolor=p.series[0],
                edgecolor=p.series[0],
            )
        )
        _write(ax, x0 + 0.4, y_key, t["active"], p.ink, size=FONT, ha="left")
        ax.add_patch(
            FancyBboxPatch(
                (x0 + 1.8, y_key - 0.08),
                0.3,
                0.16,
                boxstyle="square,pad=0",
                facecolor=p.empty,
                edgecolor=p.border,
            )
        )
        _write(ax, x0 + 2.2, y_key, t["skipped"], p.ink, size=FONT, ha="left")
    return fig


def _cost_alt() -> str:
    parts = [
        f"{name}, {a / 1e9:.2f} billion active of {t / 1e9:.1f} billion ({a / t:.1%})"
        for name, (t, a) in cost_run().items()
    ]
    return (
        "For each of three published MoE models, a bar of its total parameters with "
        "the part one token's forward pass uses filled: " + "; ".join(parts) + "."
    )


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
    ("moe-routers", routers_figure, _routers_alt()),
    ("moe-deepseek-groups", groups_figure, _groups_alt()),
    ("moe-capacity", capacity_figure, _capacity_alt()),
    ("moe-balancing-loss", balance_figure, _balance_alt()),
    ("moe-bias-update", bias_figure, _bias_alt()),
    ("moe-cost", cost_figure, _cost_alt()),
]
