"""Diagrams (issue 26): drawn from the code, light and dark, English and Russian.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

Chapter 4's three diagrams, each a small run of the chapter's code, never typed numbers.
`encdec-add-norm`: one vector through the minimal `LayerNorm` and `FeedForward`, post-norm
LN(x + F(x)) against pre-norm x + F(LN(x)) (`add_norm_run`). `encdec-mask-polarity`: the
page's source row through PyTorch's twin of our encoder layer, its self-attention weights
with the padding mask given as `~key_valid` and, wrongly, as `key_valid`
(`polarity_run`). `encdec-shared-embedding`: the one matrix E of the page's small
`EncoderDecoder` used three times, and the scales that make sqrt(d) necessary
(`embedding_run`).
"""

# Over 450 lines on purpose: chapter 4's three diagrams, each with its English
# and Russian labels and the run of the page's layers it reads its numbers from.

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from literate.figures.style import style, text
from literate.minimal.ffn import FeedForward
from literate.minimal.norms import LayerNorm
from literate.models.torch_twins import torch_encoder_layer
from literate.models.transformer2017 import EncoderDecoder
from literate.parts.blocks import encoder_layer_2017
from literate.parts.positions import sinusoidal_table

F64 = torch.float64
WIDTH = 5.2  # inches: the phone column (358 px) shows 10 pt as 9.6 px
SMALL, LABEL, TITLE = 10.0, 10.5, 12.0  # font sizes, pt
MINUS = "\u2212"


def number(value: float, digits: int, language: str) -> str:
    """A value as the figure prints it: a true minus, a decimal comma in Russian."""
    s = f"{value:.{digits}f}".replace("-", MINUS)
    if s == MINUS + f"{0:.{digits}f}":
        s = s[1:]  # no "-0.00"
    return s.replace(".", ",") if language == "ru" else s


def canvas(height: float) -> tuple[Figure, plt.Axes]:
    """A figure WIDTH x height whose one axes counts in inches, origin bottom left."""
    fig = plt.figure(figsize=(WIDTH, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, WIDTH)
    ax.set_ylim(0, height)
    ax.axis("off")
    return fig, ax


def cell(ax, x, y, w, h, label, *, face, alpha, ink, edge, gid=None, size=SMALL):
    """One cell of a row or grid: a box (x, y its lower left corner) and its label."""
    ax.add_patch(Rectangle((x, y), w, h, facecolor=face, alpha=alpha, edgecolor="none"))
    ax.add_patch(Rectangle((x, y), w, h, facecolor="none", edgecolor=edge, lw=0.7))
    ax.text(
        x + w / 2, y + h / 2, label, ha="center", va="center", color=ink, fontsize=size
    ).set_gid(gid)


# --- add & norm on one vector ------------------------------------------------------

ADD_NORM_SEED = 0
ADD_NORM_D = 6


@dataclass(frozen=True)
class AddNormRun:
    rows: dict[str, tuple[float, ...]]  # x, sub, sum, post, pre: [d] each


def add_norm_example() -> tuple[LayerNorm, FeedForward, torch.Tensor]:
    """The minimal LayerNorm (gain 1, bias 0) and FFN of width d, and one vector x of
    mean about 1 and spread about 3, as on the page, from `ADD_NORM_SEED`."""
    d = ADD_NORM_D
    with torch.random.fork_rng():
        torch.manual_seed(ADD_NORM_SEED)
        ffn = FeedForward(d_model=d, d_ff=4 * d).double()
        x = torch.randn(d, dtype=F64) * 3 + 1
    return LayerNorm(d_model=d).double(), ffn, x


def add_norm_run() -> AddNormRun:
    """x, the sublayer's output F(x), the sum, post-norm LN(x + F(x)) and pre-norm
    x + F(LN(x)), as the layers compute them."""
    ln, ffn, x = add_norm_example()
    with torch.no_grad():
        sub = ffn(x)
        rows = {"x": x, "sub": sub, "sum": x + sub, "post": ln(x + sub)}
        rows["pre"] = x + ffn(ln(x))
    return AddNormRun(rows={k: tuple(v.tolist()) for k, v in rows.items()})


def mean_std(values) -> tuple[float, float]:
    """The mean and the standard deviation over d (divided by d, as LayerNorm does)."""
    t = torch.tensor(values, dtype=F64)
    return t.mean().item(), ((t - t.mean()) ** 2).mean().sqrt().item()


ADD_NORM_LABELS = {
    "en": {
        "title": f"Add & norm on one vector, d = {ADD_NORM_D}",
        "x": "x: the residual stream",
        "sub": "F(x): the sublayer's output (here the FFN)",
        "sum": "x + F(x): the residual sum",
        "post": "post-norm, 2017: LN(x + F(x)) is the new stream",
        "pre": "pre-norm, for comparison: x + F(LN(x))",
    },
    "ru": {
        "title": f"Add & norm на одном векторе, d = {ADD_NORM_D}",
        "x": "x: остаточный поток",
        "sub": "F(x): выход подслоя (здесь FFN)",
        "sum": "x + F(x): остаточная сумма",
        "post": "post-norm, 2017: LN(x + F(x)) — новый поток",
        "pre": "pre-norm, для сравнения: x + F(LN(x))",
    },
}
ADD_NORM_ROWS = ("x", "sub", "sum", "post", "pre")


def add_norm_figure(*, language: str = "en", theme: str = "light") -> Figure:
    labels = text(ADD_NORM_LABELS, language)
    run = add_norm_run()
    biggest = max(abs(v) for row in run.rows.values() for v in row)
    cw, ch, pitch, left = 0.5, 0.34, 0.66, 0.12
    height = 0.5 + pitch * len(ADD_NORM_ROWS) + 0.2
    with style(theme) as p:
        fig, ax = canvas(height)
        ax.text(
            left,
            height - 0.12,
            labels["title"],
            fontsize=TITLE,
            weight="bold",
            va="top",
            color=p.ink,
        )
        ax.text(
            left + ADD_NORM_D * cw + 0.15,
            height - 0.5,
            "μ, σ",
            fontsize=LABEL,
            va="center",
            color=p.muted,
        )
        y = height - 0.5
        for name in ADD_NORM_ROWS:
            if name == "pre":
                y -= 0.2
                ax.plot(
                    [left, WIDTH - left],
                    [y + 0.1, y + 0.1],
                    color=p.border,
                    lw=0.8,
                    ls="--",
                )
            ax.text(
                left, y - 0.02, labels[name], fontsize=LABEL, va="top", color=p.ink
            ).set_gid(f"label-{name}")
            top = y - 0.26
            for i, v in enumerate(run.rows[name]):
                cell(
                    ax,
                    left + i * cw,
                    top - ch,
                    cw,
                    ch,
                    number(v, 1, language),
                    face=p.series[0] if v >= 0 else p.series[1],
                    alpha=0.12 + 0.5 * abs(v) / biggest,
                    ink=p.ink,
                    edge=p.border,
                    gid=f"{name}-{i}",
                )
            mu, sigma = mean_std(run.rows[name])
            stats = f"{number(mu, 2, language)}, {number(sigma, 2, language)}"
            ax.text(
                left + ADD_NORM_D * cw + 0.15,
                top - ch / 2,
                stats,
                fontsize=LABEL,
                va="center",
                color=p.muted if name != "post" else p.ink,
                weight="bold" if name == "post" else "normal",
            ).set_gid(f"stats-{name}")
            y -= pitch
    return fig


# --- mask polarity -------------------------------------------------------------------

POLARITY_SEED = 0
POLARITY_SOURCE = (3, 4, 5, 2, 0, 0)  # the page's first source row: EOS = 2, PAD = 0
POLARITY_SIZES = {"d_model": 16, "n_heads": 4, "d_ff": 64}


@dataclass(frozen=True)
class PolarityRun:
    source: tuple[int, ...]  # [S]
    key_valid: tuple[bool, ...]  # [S]: source != PAD, True = a real token
    right: tuple[tuple[float, ...], ...]  # [S, S]: given ~key_valid, head average
    wrong: tuple[tuple[float, ...], ...]  # [S, S]: given key_valid unchanged


def polarity_example() -> tuple[torch.nn.TransformerEncoderLayer, torch.Tensor]:
    """PyTorch's twin of a 2017 encoder layer (our weights from `POLARITY_SEED`) and an
    input [1, S, d] from the same seed."""
    with torch.random.fork_rng():
        torch.manual_seed(POLARITY_SEED)
        ours = encoder_layer_2017(**POLARITY_SIZES, dropout=0.0).double()
        x = torch.randn(1, len(POLARITY_SOURCE), POLARITY_SIZES["d_model"], dtype=F64)
    return torch_encoder_layer(ours), x


def polarity_run() -> PolarityRun:
    """The twin's self-attention weights (averaged over heads) given the padding mask
    in PyTorch's polarity, `~key_valid`, and in ours, `key_valid`, as its
    `src_key_padding_mask` is given them."""
    theirs, x = polarity_example()
    source = torch.tensor([POLARITY_SOURCE])
    key_valid = source != 0  # [1, S]

    def weights(mask):
        with torch.no_grad():
            _, w = theirs.self_attn(x, x, x, key_padding_mask=mask, need_weights=True)
        return tuple(tuple(row) for row in w[0].tolist())

    return PolarityRun(
        source=POLARITY_SOURCE,
        key_valid=tuple(key_valid[0].tolist()),
        right=weights(~key_valid),
        wrong=weights(key_valid),
    )


POLARITY_LABELS = {
    "en": {
        "title": "One padding mask, two polarities",
        "ids": "source (PAD = 0)",
        "ours": "key_valid\n(ours: True = real)",
        "theirs": "~key_valid\n(PyTorch: True = ignored)",
        "right": "given ~key_valid:\nthe PAD keys get 0",
        "wrong": "given key_valid as it is:\nonly the PAD keys are read",
        "keys": "keys",
        "queries": "queries",
    },
    "ru": {
        "title": "Одна маска паддинга, две полярности",
        "ids": "источник (PAD = 0)",
        "ours": "key_valid\n(у нас: True = токен)",
        "theirs": "~key_valid\n(PyTorch: True = скрыт)",
        "right": "передан ~key_valid:\nключам PAD — 0",
        "wrong": "передан key_valid:\nчитаются только PAD",
        "keys": "ключи",
        "queries": "запросы",
    },
}


def polarity_figure(*, language: str = "en", theme: str = "light") -> Figure:
    labels = text(POLARITY_LABELS, language)
    run = polarity_run()
    s = len(run.source)
    height = 4.75
    with style(theme) as p:
        fig, ax = canvas(height)
        ax.text(
            0.12,
            height - 0.12,
            labels["title"],
            fontsize=TITLE,
            weight="bold",
            va="top",
            color=p.ink,
        )
        # the source row and its two masks
        sw, sh, x0 = 0.44, 0.3, 2.45
        rows = [
            ("ids", [str(t) for t in run.source], None),
            ("ours", [str(v) for v in run.key_valid], run.key_valid),
            (
                "theirs",
                [str(not v) for v in run.key_valid],
                [not v for v in run.key_valid],
            ),
        ]
        y = height - 0.55
        for name, cells, filled in rows:
            ax.text(
                x0 - 0.12,
                y - sh / 2,
                labels[name],
                ha="right",
                va="center",
                fontsize=SMALL,
                color=p.ink,
                linespacing=1.0,
            )
            for j, label in enumerate(cells):
                on = filled is not None and filled[j]
                cell(
                    ax,
                    x0 + j * sw,
                    y - sh,
                    sw,
                    sh,
                    label,
                    face=p.series[0] if name != "theirs" else p.series[1],
                    alpha=0.45 if on else 0.0,
                    ink=p.ink,
                    edge=p.border,
                    gid=f"{name}-{j}",
                )
            y -= sh + 0.16
        # the two weight grids
        gw, gh = 0.37, 0.3
        grids = (("right", run.right, p.series[0]), ("wrong", run.wrong, p.series[1]))
        gx = (0.45, 0.45 + s * gw + 0.28)
        top = y - 0.62
        for (name, grid, face), x in zip(grids, gx):
            ax.text(
                x,
                top + 0.55,
                labels[name],
                fontsize=LABEL,
                va="top",
                color=p.ink,
                linespacing=1.1,
            )
            for j, t in enumerate(run.source):
                ax.text(
                    x + (j + 0.5) * gw,
                    top + 0.02,
                    str(t),
                    ha="center",
                    va="bottom",
                    fontsize=SMALL,
                    color=p.muted,
                )
            for i, row in enumerate(grid):
                ax.text(
                    x - 0.06,
                    top - (i + 0.5) * gh,
                    str(i),
                    ha="right",
                    va="center",
                    fontsize=SMALL,
                    color=p.muted,
                )
                for j, w in enumerate(row):
                    label = number(w, 2, language) if w else "0"
                    cell(
                        ax,
                        x + j * gw,
                        top - (i + 1) * gh,
                        gw,
                        gh,
                        label,
                        face=face if w else p.empty,
                        alpha=0.15 + 0.7 * w if w else 1.0,
                        ink=p.ink if w else p.muted,
                        edge=p.border,
                        gid=f"{name}-{i}-{j}",
                    )
        bottom = top - s * gh
        ax.text(
            gx[0] - 0.3,
            bottom + s * gh / 2,
            labels["queries"],
            rotation=90,
            ha="center",
            va="center",
            fontsize=SMALL,
            color=p.muted,
        )
        for x in gx:
            ax.text(
                x + s * gw / 2,
                bottom - 0.08,
                labels["keys"],
                ha="center",
                va="top",
                fontsize=SMALL,
                color=p.muted,
            )
    return fig


# --- the shared embedding --------------------------------------------------------------

EMBEDDING_SEED = 0
EMBEDDING_MODEL = {
    "vocab_size": 13,
    "d_model": 16,
    "n_heads": 4,
    "d_ff": 64,
    "n_layers": 2,
}  # the page's small model


@dataclass(frozen=True)
class EmbeddingRun:
    vocab_size: int
    d_model: int
    n_matrices: int  # parameters with a dimension of size V: 1, the shared E
    rms_e: float  # of all of E's entries
    rms_scaled: float  # of sqrt(d) E
    rms_positions: float  # of a row of the sinusoidal table (every row: 1/sqrt 2)


def embedding_run() -> EmbeddingRun:
    """The page's small model at initialisation: its one V x d matrix, the root mean
    square of E and of sqrt(d) E, and that of a row of the position table."""
    with torch.random.fork_rng():
        torch.manual_seed(EMBEDDING_SEED)
        model = EncoderDecoder(**EMBEDDING_MODEL, dropout=0.0, max_length=16).double()
    v, d = model.vocab_size, model.d_model
    e = model.embedding.weight.detach()
    shaped = [n for n, q in model.named_parameters() if v in q.shape]
    table = sinusoidal_table(16, d, dtype=F64)
    return EmbeddingRun(
        vocab_size=v,
        d_model=d,
        n_matrices=len(shaped),
        rms_e=e.pow(2).mean().sqrt().item(),
        rms_scaled=(e * math.sqrt(d)).pow(2).mean().sqrt().item(),
        rms_positions=table.pow(2).mean(dim=-1).sqrt().max().item(),
    )


EMBEDDING_LABELS = {
    "en": {
        "title": "One matrix E, three uses",
        "E": "E",
        "source": "source ids  →  √d · E[ids] + PE  →  encoder",
        "target": "shifted target ids  →  √d · E[ids] + PE  →  decoder",
        "output": "decoder output h  →  logits = h Eᵀ",
        "scales": "root mean square at initialisation (the page's model)",
        "rms_e": "E",
        "rms_pe": "PE",
        "rms_scaled": "√d · E",
    },
    "ru": {
        "title": "Одна матрица E, три применения",
        "E": "E",
        "source": "id источника  →  √d · E[ids] + PE  →  кодировщик",
        "target": "сдвинутые id цели  →  √d · E[ids] + PE  →  декодер",
        "output": "выход декодера h  →  логиты = h Eᵀ",
        "scales": "RMS в начале обучения (модель страницы)",
        "rms_e": "E",
        "rms_pe": "PE",
        "rms_scaled": "√d · E",
    },
}


def shared_embedding_figure(*, language: str = "en", theme: str = "light") -> Figure:
    labels = text(EMBEDDING_LABELS, language)
    run = embedding_run()
    height = 3.9
    with style(theme) as p:
        fig, ax = canvas(height)
        ax.text(
            0.12,
            height - 0.12,
            labels["title"],
            fontsize=TITLE,
            weight="bold",
            va="top",
            color=p.ink,
        )
        # E, and its three uses
        ex, ey, ew, eh = 0.15, height - 2.0, 0.75, 1.35
        ax.add_patch(
            FancyBboxPatch(
                (ex, ey),
                ew,
                eh,
                boxstyle="round,pad=0.02",
                facecolor=p.series[2],
                alpha=0.5,
                edgecolor=p.border,
            )
        )
        ax.text(
            ex + ew / 2,
            ey + eh / 2 + 0.15,
            "E",
            ha="center",
            va="center",
            fontsize=TITLE + 2,
            weight="bold",
            color=p.ink,
        )
        ax.text(
            ex + ew / 2,
            ey + eh / 2 - 0.25,
            f"{run.vocab_size} × {run.d_model}",
            ha="center",
            va="center",
            fontsize=SMALL,
            color=p.ink,
        ).set_gid("shape")
        uses = ("source", "target", "output")
        for k, name in enumerate(uses):
            y = ey + eh - 0.2 - k * 0.47
            ax.add_patch(
                FancyArrowPatch(
                    (ex + ew + 0.03, ey + eh / 2),
                    (1.2, y),
                    arrowstyle="-|>",
                    mutation_scale=10,
                    color=p.muted,
                    lw=0.9,
                )
            )
            ax.text(
                1.12,
                y + 0.03,
                f"{k + 1}",
                ha="right",
                va="bottom",
                fontsize=SMALL,
                color=p.muted,
            )
            ax.text(
                1.25, y, labels[name], va="center", fontsize=SMALL, color=p.ink
            ).set_gid(f"use-{name}")
        # the scales
        bars = fig.add_axes((0.2, 0.1, 0.62, 0.28))
        names = ("rms_e", "rms_pe", "rms_scaled")
        values = (run.rms_e, run.rms_positions, run.rms_scaled)
        colours = (p.series[2], p.series[1], p.series[0])
        bars.barh(range(3), values, color=colours, height=0.6)
        bars.set_yticks(range(3), [labels[n] for n in names], fontsize=LABEL)
        bars.invert_yaxis()
        bars.set_xlim(0, 1.25)
        bars.set_xticks([0, 0.5, 1.0], [number(t, 1, language) for t in (0, 0.5, 1)])
        bars.tick_params(labelsize=SMALL)
        for side in ("top", "right"):
            bars.spines[side].set_visible(False)
        for i, (n, v) in enumerate(zip(names, values)):
            bars.text(
                v + 0.02,
                i,
                number(v, 2, language),
                va="center",
                fontsize=SMALL,
                color=p.ink,
            ).set_gid(n)
        ax.text(
            0.12,
            0.38 * height + 0.12,
            labels["scales"],
            fontsize=LABEL,
            color=p.ink,
            va="bottom",
        )
    return fig


SPECS: list[tuple] = [
    (
        "encdec-add-norm",
        add_norm_figure,
        "One vector of width 6 through add and norm, its six numbers in each row. The "
        "residual stream x has mean 0.44 and standard deviation 3.37; the feed-forward "
        "sublayer's output F(x) is added to it; post-norm, the 2017 order, normalises "
        "the sum LN(x + F(x)) to mean 0 and standard deviation 1, so the new stream "
        "has lost the scale of x. Pre-norm, for comparison, x + F(LN(x)) keeps it, "
        "standard deviation 3.30.",
    ),
    (
        "encdec-mask-polarity",
        polarity_figure,
        "The source 3, 4, 5, 2, PAD, PAD: our padding mask key_valid is True, True, "
        "True, True, False, False (True for a real token), PyTorch's "
        "src_key_padding_mask is its negation (True for a token to ignore). Two grids "
        "of the self-attention weights of PyTorch's encoder layer holding our weights, "
        "6 queries by 6 keys: given the negated mask, the two PAD keys get weight 0 in "
        "every row; given our mask unchanged, every query reads only the two PAD keys, "
        "and no error is raised.",
    ),
    (
        "encdec-shared-embedding",
        shared_embedding_figure,
        "One embedding matrix E of 13 tokens by 16 features with three arrows: it "
        "embeds the source ids, scaled by the square root of d and added to the "
        "positions, for the encoder; the shifted target ids the same way for the "
        "decoder; and, transposed, turns the decoder's output h into logits h E "
        "transposed. Below, root mean squares at initialisation: E 0.26, "
        "the position table 0.71, the square root of d times E 1.04.",
    ),
]
