"""Figures of chapter 7: where the newer blocks put their norms (the residual
topologies), what SwiGLU's gate does, and what QK-norm does to the scores as the query
and key weights grow.

Plotting only: the QK-norm measurement comes from `literate.numbers.studies.qk_norm_study`,
which the chapter's claims call too.
"""

# Over 450 lines on purpose: chapter 7's figures of the residual topologies, the
# SwiGLU gate and the QK-norm study, each with its English and Russian labels.

from __future__ import annotations

import math
import textwrap

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

from literate.figures.style import BOX_INK, style, text
from literate.numbers.studies import QK_HEADS, QK_KV_HEADS, QK_SCALES, qk_norm_study

TOPOLOGY_LABELS = {
    "en": {
        "names": ("Post-norm", "Pre-norm", "Sandwich", "Output-norm", "Parallel"),
        "models": (
            "Transformer (2017)",
            "GPT-2, Llama, Qwen3",
            "Gemma 3",
            "OLMo 2",
            "GPT-NeoX; GPT-J, Cohere: $N_1 = N_2$",
        ),
        "note": "Vertical line: the residual stream.  $F$: a sublayer (attention or "
        "feed-forward), one such function per sublayer of a block.\n$N$, LN: a "
        "norm (LayerNorm or RMSNorm).  The parallel block adds both sublayers "
        "to the stream at once.",
    },
    "ru": {
        "names": (
            "Норма после суммы",
            "Норма до подслоя",
            "Сэндвич",
            "Норма на выходе",
            "Параллельный блок",
        ),
        "models": (
            "Трансформер (2017)",
            "GPT-2, Llama, Qwen3",
            "Gemma 3",
            "OLMo 2",
            "GPT-NeoX; у GPT-J и Cohere $N_1 = N_2$",
        ),
        "note": "Вертикальная линия — остаточный поток.  $F$ — подслой (внимание или "
        "полносвязный слой), по такой функции на каждый подслой блока.\n$N$, "
        "LN — нормализация (LayerNorm или RMSNorm).  Параллельный блок "
        "прибавляет к потоку оба подслоя сразу.",
    },
}

# One panel per residual function: its equation, the boxes on its branch (bottom to
# top; "N" boxes are norms) and the box after the join, on the stream (post-norm's LN).
TOPOLOGIES = (
    ("$\\mathrm{LN}(x + F(x))$", ("$F$",), "LN"),
    ("$x + F(N(x))$", ("$N$", "$F$"), None),
    ("$x + N_2(F(N_1(x)))$", ("$N_1$", "$F$", "$N_2$"), None),
    ("$x + N(F(x))$", ("$F$", "$N$"), None),
)
PARALLEL = (
    "$x + \\mathrm{Attn}(N_1 x) + \\mathrm{FFN}(N_2 x)$",
    (("$N_1$", "Attn"), ("$N_2$", "FFN")),
)

GATE_LABELS = {
    "en": {
        "title_act": "SiLU$(a) = a\\,\\sigma(a)$ against ReLU and GELU",
        "title_gate": "SwiGLU's gated unit SiLU$(a) \\cdot b$",
        "a": "$a$",
        "act": "activation",
        "gate_axis": "$a$: the gate, $x W_{\\mathrm{gate}}$",
        "up_axis": "$b$: the value, $x W_{\\mathrm{up}}$",
        "min": "minimum {value} at $a$ = {where}",
        "open": "gate open:\n$\\approx a \\cdot b$, $b$ passes",
        "shut": "gate shut:\n$\\approx 0$",
    },
    "ru": {
        "title_act": "SiLU$(a) = a\\,\\sigma(a)$ рядом с ReLU и GELU",
        "title_gate": "Гейт SwiGLU: SiLU$(a) \\cdot b$",
        "a": "$a$",
        "act": "значение активации",
        "gate_axis": "$a$: гейт, $x W_{\\mathrm{gate}}$",
        "up_axis": "$b$: значение, $x W_{\\mathrm{up}}$",
        "min": "минимум {value} при $a$ = {where}",
        "open": "гейт открыт:\n$\\approx a \\cdot b$, $b$ проходит",
        "shut": "гейт закрыт:\n$\\approx 0$",
    },
}

QK_LABELS = {
    "en": {
        "suptitle": "One causal RoPE attention layer: {h} query heads over {kv} "
        "key/value heads, $d_{{\\mathrm{{head}}}}$ = {d}, inputs of RMS 1\n"
        "QK-norm: an RMSNorm of unit gain on each head's q and k, before RoPE",
        "title_score": "The largest |score| in the layer",
        "title_entropy": "Mean entropy of the attention rows",
        "x": "scale $s$ of $W_q$ and $W_k$",
        "score": "$\\max\\,|q \\cdot k| / \\sqrt{d_{\\mathrm{head}}}$",
        "entropy": "entropy, nats",
        "plain": "without QK-norm",
        "qk": "with QK-norm",
        "bound": "$\\sqrt{{d_{{\\mathrm{{head}}}}}}$ = {bound:g}: "
        "the bound under QK-norm",
        "uniform": "uniform rows",
    },
    "ru": {
        "suptitle": "Один каузальный слой внимания с RoPE: {h} голов запросов на {kv} "
        "головы K/V, $d_{{\\mathrm{{head}}}}$ = {d}, вход с RMS 1\n"
        "QK-norm: RMSNorm с единичным весом для q и k каждой головы, до RoPE",
        "title_score": "Наибольший модуль оценки",
        "title_entropy": "Средняя энтропия строк внимания",
        "x": "множитель $s$ при $W_q$ и $W_k$",
        "score": "$\\max\\,|q \\cdot k| / \\sqrt{d_{\\mathrm{head}}}$",
        "entropy": "энтропия, нат",
        "plain": "без QK-norm",
        "qk": "с QK-norm",
        "bound": "$\\sqrt{{d_{{\\mathrm{{head}}}}}}$ = {bound:g}: граница при QK-norm",
        "uniform": "равномерные строки",
    },
}


def _number(x: float, language: str, digits: int = 3) -> str:
    """-0.2785 -> '−0.278' ('−0,278' in Russian)."""
    s = f"{x:.{digits}f}".replace("-", "\u2212")
    return s.replace(".", ",") if language == "ru" else s


def _wrap(label: str, width: int) -> str:
    """`label` on lines of at most `width` characters, never breaking inside $...$."""
    parts = label.split("$")
    kept = "$".join(
        part.replace(" ", "\x00") if i % 2 else part for i, part in enumerate(parts)
    )
    return textwrap.fill(kept, width, break_long_words=False).replace("\x00", " ")


def _box(ax, x: float, y: float, w: float, h: float, label: str, color: str) -> None:
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0.02,rounding_size=0.1",
            facecolor=color,
            edgecolor="none",
        )
    )
    ax.text(x, y, label, ha="center", va="center", fontsize=12, color=BOX_INK)


def _arrow(ax, start, end, color: str) -> None:
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=11,
            color=color,
            lw=1.3,
            shrinkA=0,
            shrinkB=0,
        )
    )


def _topology(
    ax, branches: tuple[tuple[float, tuple[str, ...]], ...], after: str | None, p
) -> None:
    """One residual function: the stream runs up x = 0 from the input x, forks, and
    each branch (at its own x, through its boxes) comes back into the (+) join; `after`
    is a box on the stream above the join."""
    line, w, h, step = p.muted, 1.25, 0.62, 1.1
    fork, middle, join, top, r = 1.0, 3.1, 5.05, 6.75, 0.26
    ax.text(0, 0.25, "$x$", ha="center", va="center", fontsize=13, color=p.ink)
    ax.plot([0, 0], [0.5, fork], color=line, lw=1.3)
    _arrow(ax, (0, fork), (0, join - r), line)  # the identity path
    ax.plot([0], [fork], "o", color=line, ms=4.5)
    for bx, labels in branches:
        ys = [middle + (i - (len(labels) - 1) / 2) * step for i in range(len(labels))]
        ax.plot(
            [0, bx, bx],
            [fork, fork, ys[0] - h / 2 - 0.25],
            color=line,
            lw=1.3,
            solid_joinstyle="round",
        )
        _arrow(ax, (bx, ys[0] - h / 2 - 0.3), (bx, ys[0] - h / 2), line)
        for i, (y, label) in enumerate(zip(ys, labels)):
            norm = label.startswith("$N") or label == "LN"
            _box(ax, bx, y, w, h, label, p.series[1] if norm else p.series[0])
            if i:
                _arrow(ax, (bx, ys[i - 1] + h / 2), (bx, y - h / 2), line)
        ax.plot([bx, bx], [ys[-1] + h / 2, join], color=line, lw=1.3)
        _arrow(ax, (bx, join), (math.copysign(r, bx), join), line)
    ax.add_patch(Circle((0, join), r, facecolor="none", edgecolor=p.ink, lw=1.4))
    ax.text(0, join, "+", ha="center", va="center_baseline", fontsize=15, color=p.ink)
    if after is None:
        _arrow(ax, (0, join + r), (0, top), line)
    else:
        low = join + r + 0.3  # the box on the stream, just above the join
        _arrow(ax, (0, join + r), (0, low), line)
        _box(ax, 0, low + h / 2, w, h, after, p.series[1])
        _arrow(ax, (0, low + h), (0, top), line)


def topology_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Five residual functions as block diagrams, left to right: post-norm
    LN(x + F(x)), pre-norm x + F(N(x)), sandwich x + N2(F(N1(x))), output-norm
    x + N(F(x)), and parallel x + Attn(N1 x) + FFN(N2 x). Norm boxes in orange,
    sublayers in blue, the (+) where a branch rejoins the stream."""
    t = text(TOPOLOGY_LABELS, language)
    with style(theme) as p:
        # two rows (three panels, then two), on a phone's width; sizes in inches
        unit, gap, margin = 0.46, 0.12, 0.08  # one data unit, between panels, edges
        width, title, panel = 5.2, 1.05, 6.8 * unit
        note = "\n".join(textwrap.fill(line, 62) for line in t["note"].split("\n"))
        height = 2 * (title + panel) + 0.2 + 0.2 * (note.count("\n") + 1) + margin
        fig = plt.figure(figsize=(width, height))
        half = (1.75, 2.65)  # half-widths of a one-branch and of the parallel panel
        panels = [(eq, ((0.85, boxes),), after) for eq, boxes, after in TOPOLOGIES]
        panels.append((PARALLEL[0], tuple(zip((-1.35, 1.35), PARALLEL[1])), None))
        rows = ((0, 1, 2), (3, 4))
        for r, row in enumerate(rows):
            widths = [2 * (half[1] if i == 4 else half[0]) * unit for i in row]
            x = (width - sum(widths) - gap * (len(row) - 1)) / 2
            bottom = height - (r + 1) * (title + panel)
            for i, w in zip(row, widths):
                ax = fig.add_axes(
                    (x / width, bottom / height, w / width, panel / height)
                )
                x += w + gap
                equation, branches, after = panels[i]
                half_width = half[1] if i == 4 else half[0]
                x0 = -half_width + (0.35 if i < 4 else 0.0)  # one-branch: stream left
                ax.set(xlim=(x0, x0 + 2 * half_width), ylim=(0, 6.8), aspect="equal")
                ax.axis("off")
                _topology(ax, branches, after, p)
                lift = 2.0  # points above the panel, bottom line first
                wrap = 18 if i < 4 else 30
                for label, size, weight, colour in (
                    (_wrap(t["models"][i], wrap), 10, "normal", p.muted),
                    (equation, 11, "normal", p.ink),
                    (_wrap(t["names"][i], wrap - 6), 11.5, "bold", p.ink),
                ):
                    ax.annotate(
                        label,
                        (0.5, 1.0),
                        xycoords="axes fraction",
                        xytext=(0, lift),
                        textcoords="offset points",
                        ha="center",
                        va="bottom",
                        fontsize=size,
                        fontweight=weight,
                        color=colour,
                    )
                    lift += 1.25 * size * (label.count("\n") + 1)
        fig.text(
            0.5,
            margin / height,
            note,
            ha="center",
            va="bottom",
            fontsize=10,
            color=p.muted,
            linespacing=1.4,
        )
    return fig


def swiglu_gate_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Left: SiLU(a) = a sigmoid(a) with ReLU and (exact) GELU on a in [-4, 4], SiLU's
    negative minimum found on a fine grid and marked. Right: SiLU(a) * b, the product
    SwiGLU's hidden unit computes from its gate a and its value b, on a diverging map
    centred at 0."""
    t = text(GATE_LABELS, language)
    a = torch.linspace(-4, 4, 801, dtype=torch.float64)
    fine = torch.linspace(-4, 0, 400_001, dtype=torch.float64)  # step 1e-5
    lowest = int(F.silu(fine).argmin())
    where, value = float(fine[lowest]), float(F.silu(fine[lowest]))
    with style(theme) as p:
        # stacked: a phone shows the figure at its full width
        fig, (left, right) = plt.subplots(
            2, 1, figsize=(5.2, 8.4), layout="constrained"
        )
        left.axhline(0, color=p.border, lw=1.0)
        left.axvline(0, color=p.border, lw=1.0)
        for f, ls, colour, lw, name in (
            (F.relu, ":", p.muted, 1.6, "ReLU"),
            (F.gelu, "--", p.series[2], 1.8, "GELU"),
            (F.silu, "-", p.series[0], 2.4, "SiLU"),
        ):
            left.plot(
                a.numpy(), f(a).numpy(), ls, color=colour, lw=lw, label=f"{name}$(a)$"
            )
        left.plot([where], [value], "o", color=p.series[1], ms=7, zorder=3)
        left.annotate(
            t["min"].format(
                value=_number(value, language), where=_number(where, language)
            ),
            (where, value),
            xytext=(-3.9, 1.1),
            color=p.ink,
            fontsize=10,
            arrowprops={"arrowstyle": "-", "color": p.series[1], "lw": 1.0},
        )
        left.set(
            xlim=(-4, 4),
            ylim=(-0.7, 4.1),
            xlabel=t["a"],
            ylabel=t["act"],
            title=t["title_act"],
        )
        left.grid(alpha=0.6)
        left.legend(loc="upper left")
        for spine in ("top", "right"):
            left.spines[spine].set_visible(False)

        grid = torch.linspace(-4, 4, 401, dtype=torch.float64)
        gate = F.silu(grid)[None, :] * grid[:, None]  # [b, a]: row b, column a
        vmax = float(gate.abs().max())  # symmetric limits: 0 sits mid-map
        cmap = LinearSegmentedColormap.from_list(
            "gate", [p.series[0], p.empty, p.series[4]]
        )
        image = right.imshow(
            gate.numpy(),
            origin="lower",
            extent=(-4, 4, -4, 4),
            cmap=cmap,
            vmin=-vmax,
            vmax=vmax,
            aspect="auto",
            interpolation="bilinear",
        )
        box = {
            "boxstyle": "round,pad=0.3",
            "facecolor": p.empty,
            "edgecolor": "none",
            "alpha": 0.85,
        }
        right.text(
            2.3,
            0,
            t["open"],
            ha="center",
            va="center",
            fontsize=10,
            color=p.ink,
            bbox=box,
        )
        right.text(
            -2.3,
            0,
            t["shut"],
            ha="center",
            va="center",
            fontsize=10,
            color=p.ink,
            bbox=box,
        )
        # no -4 on the x axis: it would meet the y axis's -4 in the corner
        right.set(
            xlabel=t["gate_axis"],
            ylabel=t["up_axis"],
            title=t["title_gate"],
            xticks=range(-3, 5, 1),
            yticks=range(-4, 5, 2),
        )
        bar = fig.colorbar(image, ax=right, shrink=0.9)
        bar.set_label("SiLU$(a) \\cdot b$")
        bar.outline.set_visible(False)
    return fig


def qk_norm_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """`qk_norm_study` at every scale in QK_SCALES, with and without QK-norm. Left: the
    largest |score| (log-log), with sqrt(d_head) dashed. Right: the rows' mean entropy,
    with the entropy of uniform rows dashed."""
    t = text(QK_LABELS, language)
    runs = {
        qk: [qk_norm_study(s, qk_norm=qk) for s in QK_SCALES] for qk in (False, True)
    }
    d_head = runs[True][0].d_head
    with style(theme) as p:
        # stacked: a phone shows the figure at its full width
        fig, (left, right) = plt.subplots(
            2, 1, figsize=(5.2, 8.4), layout="constrained"
        )
        suptitle = t["suptitle"].format(h=QK_HEADS, kv=QK_KV_HEADS, d=d_head)
        fig.suptitle(
            "\n".join(textwrap.fill(line, 52) for line in suptitle.split("\n")),
            x=0.01,
            ha="left",
            fontsize=10.5,
            color=p.muted,
        )
        left.axhline(
            math.sqrt(d_head),
            color=p.muted,
            ls="--",
            lw=1.3,
            label=t["bound"].format(bound=math.sqrt(d_head)),
        )
        uniform = right.axhline(
            runs[True][0].uniform_entropy,
            color=p.muted,
            ls="--",
            lw=1.3,
            label=t["uniform"],
        )
        for qk, colour, marker in ((False, p.series[1], "o"), (True, p.series[0], "s")):
            label = t["qk" if qk else "plain"]
            left.plot(
                QK_SCALES,
                [r.max_abs_score for r in runs[qk]],
                marker + "-",
                color=colour,
                lw=2,
                label=label,
            )
            right.plot(
                QK_SCALES,
                [r.mean_entropy for r in runs[qk]],
                marker + "-",
                color=colour,
                lw=2,
            )
        left.set(yscale="log", ylabel=t["score"], title=t["title_score"])
        right.set(
            ylabel=t["entropy"],
            title=t["title_entropy"],
            # below 0 a little: a row's entropy reaches 0, and its marker is whole
            ylim=(
                -0.04 * runs[True][0].uniform_entropy,
                1.15 * runs[True][0].uniform_entropy,
            ),
        )
        names = [f"1/{round(1 / s)}" if s < 1 else f"{s:g}" for s in QK_SCALES]
        for ax in (left, right):
            ax.set_xscale("log", base=2)
            ax.set_xticks(QK_SCALES, names)
            ax.minorticks_off()
            ax.set_xlabel(t["x"])
            ax.grid(alpha=0.6)
            for spine in ("top", "right"):
                ax.spines[spine].set_visible(False)
        left.legend(loc="upper left")  # the two series, named once
        right.legend(handles=[uniform], loc="center right")
    return fig
