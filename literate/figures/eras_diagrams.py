"""Diagrams (issue 26): drawn from the code, light and dark, English and Russian.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

Chapter 11, what a model costs: how each published model's parameters split into the
embedding, the weights a token multiplies by (N) and the routed experts it skips
(`parameter_counts`, `non_embedding_active`); and a decoding step's FLOPs at 1, 8,192
and 131,072 keys over the rule of thumb's 2N (`published_flops`). Chapter 11, from one
era to the next: which cells of `era_table` change from each era's row to the next.
"""

# Over 450 lines on purpose: chapter 11's three figures, each with its English
# and Russian labels and the reading of the era table or the counts it draws.

from __future__ import annotations

import re
from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from literate.figures.style import BOX_INK, style, text
from literate.numbers.eras import era_table
from literate.numbers.flops import non_embedding_active, published_flops
from literate.numbers.published import (
    PUBLISHED_CONFIGS,
    parameter_counts,
    published_config,
)

# ---------------------------------------------------------------- the parameters, split


@dataclass(frozen=True)
class ParameterSplit:
    name: str
    total: int  # parameter_counts' total
    active: int  # parameter_counts' active: what one token's forward uses
    n: int  # non_embedding_active: the weights a token multiplies by (N)

    @property
    def embedding(self) -> int:
        """The lookup tables (token embedding, GPT-2's positions; a tied head with them)."""
        return self.active - self.n

    @property
    def skipped(self) -> int:
        """The routed experts a token's router does not choose."""
        return self.total - self.active


def parameter_splits() -> list[ParameterSplit]:
    """Each model of `PUBLISHED_CONFIGS`, in its order, split by the page's functions."""
    splits = []
    for name in PUBLISHED_CONFIGS:
        total, active = parameter_counts(name)
        splits.append(ParameterSplit(name, total, active, non_embedding_active(name)))
    return splits


def short_count(n: float, units) -> str:
    """124M, 8.03B, 671B: three significant digits at most."""
    for scale, suffix in units:
        if n >= scale:
            value = n / scale
            digits = 0 if value >= 100 else 1 if value >= 10 else 2
            return f"{value:.{digits}f}{suffix}"
    return f"{n:g}"


SPLIT_LABELS = {
    "en": {
        "title": "What a token uses of a model's parameters",
        "x": "share of the total (the total beside each name)",
        "embedding": "embedding tables (a lookup)",
        "n": "N: weights a token multiplies by",
        "skipped": "routed experts it does not choose",
        "units": ((10**9, "B"), (10**6, "M")),
    },
    "ru": {
        "title": "Какую часть параметров модели использует токен",
        "x": "доля от всех (их число — у названия)",
        "embedding": "таблицы эмбеддингов (поиск по таблице)",
        "n": "N: веса, на которые умножается токен",
        "skipped": "эксперты, которых роутер не выбрал",
        "units": ((10**9, " млрд"), (10**6, " млн")),
    },
}

SHOWN_SHARE = 0.08  # a segment this wide or wider carries its percentage


def parameter_split_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """One bar per published model, its total parameters as 100%: the embedding tables
    (orange), N (blue) and the experts a token skips (grey); the total on the label."""
    t = text(SPLIT_LABELS, language)
    splits = parameter_splits()
    with style(theme) as p:
        colours = {"embedding": p.series[1], "n": p.series[0], "skipped": p.border}
        fig, ax = plt.subplots(figsize=(5.2, 4.9), layout="constrained")
        for row, s in enumerate(splits):
            left = 0.0
            for part in ("embedding", "n", "skipped"):
                share = getattr(s, part) / s.total
                if share <= 0:
                    continue
                ax.barh(
                    row,
                    share,
                    left=left,
                    height=0.72,
                    color=colours[part],
                    edgecolor="none",
                    gid=f"split-{s.name}-{part}",
                )
                if share >= SHOWN_SHARE:
                    ax.text(
                        left + share / 2,
                        row,
                        f"{share:.0%}",
                        ha="center",
                        va="center",
                        fontsize=10,
                        color=p.ink if part == "skipped" else BOX_INK,
                    )
                left += share
        ax.set_yticks(
            range(len(splits)),
            [f"{s.name} · {short_count(s.total, t['units'])}" for s in splits],
        )
        ax.invert_yaxis()
        ax.tick_params(axis="y", length=0)
        ax.set_xlim(0, 1)
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1], ["0", "25%", "50%", "75%", "100%"])
        ax.set_xlabel(t["x"], fontsize=10)
        fig.suptitle(t["title"], fontsize=12, fontweight="bold", color=p.ink)
        for spine in ("top", "right", "left"):
            ax.spines[spine].set_visible(False)
        handles = [
            Patch(color=colours[part], label=t[part])
            for part in ("embedding", "n", "skipped")
        ]
        fig.legend(
            handles=handles,
            loc="outside lower center",
            ncol=1,
            fontsize=10,
            frameon=False,
        )
    return fig


# ---------------------------------------------------------------- FLOPs over 2N

CONTEXTS = (1, 8_192, 131_072)


@dataclass(frozen=True)
class StepOverTwoN:
    name: str
    two_n: int  # 2 * non_embedding_active
    context: int  # the configuration's context
    ratios: dict[int, float]  # keys -> published_flops total / 2N, within the context


def step_ratios() -> list[StepOverTwoN]:
    """Each model of `PUBLISHED_CONFIGS`: its step's FLOPs (`published_flops`, the
    total) at each of `CONTEXTS` keys that its context holds, over 2N."""
    rows = []
    for name in PUBLISHED_CONFIGS:
        config = published_config(name)
        context = getattr(config, "max_position_embeddings", None) or config.n_positions
        two_n = 2 * non_embedding_active(name)
        ratios = {
            keys: published_flops(name, keys)["total"] / two_n
            for keys in CONTEXTS
            if keys <= context
        }
        rows.append(StepOverTwoN(name, two_n, context, ratios))
    return rows


FLOPS_LABELS = {
    "en": {
        "title": "A decoding step's FLOPs over 2N",
        "subtitle": "beside each name: 2N in GFLOPs per token",
        "x": "FLOPs per token / 2N (log scale)",
        "keys": ("1 key", "8,192 keys", "131,072 keys"),
        "rule": "2N, the rule of thumb",
    },
    "ru": {
        "title": "FLOPs шага декодирования, деленные на 2N",
        "subtitle": "у названия: 2N в ГФЛОП на токен",
        "x": "FLOPs на токен / 2N (лог. шкала)",
        "keys": ("1 ключ", "8 192 ключа", "131 072 ключа"),
        "rule": "2N, эмпирическое правило",
    },
}

MARKERS = ("o", "s", "^")


def ratio_text(ratio: float) -> str:
    """1.45, 4.77, 31.4: three significant digits."""
    return f"{ratio:.1f}" if ratio >= 10 else f"{ratio:.2f}"


RATIO_TICKS = (1, 2, 5, 10, 20)


def flops_over_two_n_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """One row per published model: its step's FLOPs over 2N at 1, 8,192 and 131,072
    keys (a marker each, left out past the model's context), a dashed line at 1, the
    largest ratio written beside it; 2N in GFLOPs on the row's label."""
    t = text(FLOPS_LABELS, language)
    rows = step_ratios()
    with style(theme) as p:
        colours = (p.series[0], p.series[1], p.series[4])
        fig, ax = plt.subplots(figsize=(5.2, 4.9), layout="constrained")
        ax.axvline(1, color=p.muted, ls="--", lw=1.0, zorder=1)
        for row, r in enumerate(rows):
            values = [r.ratios[k] for k in CONTEXTS if k in r.ratios]
            ax.plot(
                [min(values), max(values)],
                [row, row],
                "-",
                color=p.border,
                lw=2.0,
                zorder=2,
            )
            for i, keys in enumerate(CONTEXTS):
                if keys in r.ratios:
                    ax.scatter(
                        [r.ratios[keys]],
                        [row],
                        s=46,
                        marker=MARKERS[i],
                        color=colours[i],
                        edgecolors="none",
                        zorder=3 + i,
                        label=f"_{r.name} {keys}",
                    )
            ax.annotate(
                f"×{ratio_text(max(values))}",
                (max(values), row),
                xytext=(8, 0),
                textcoords="offset points",
                ha="left",
                va="center",
                fontsize=10,
                color=p.ink,
            )
        ax.set_yticks(
            range(len(rows)),
            [f"{r.name} · {r.two_n / 1e9:,.1f}" for r in rows],
        )
        ax.invert_yaxis()
        ax.tick_params(axis="y", length=0)
        ax.set_xscale("log")
        ax.set_xticks(RATIO_TICKS, [f"{v}" for v in RATIO_TICKS])
        ax.minorticks_off()
        ax.set_xlim(0.8, 80)
        ax.set_xlabel(t["x"], fontsize=10)
        ax.set_title(t["subtitle"], fontsize=10, fontweight="normal", color=p.muted)
        fig.suptitle(t["title"], fontsize=12, fontweight="bold", color=p.ink)
        ax.grid(axis="x", alpha=0.6)
        for spine in ("top", "right", "left"):
            ax.spines[spine].set_visible(False)
        handles = [
            Line2D(
                [],
                [],
                ls="none",
                marker=MARKERS[i],
                ms=7,
                color=colours[i],
                label=label,
            )
            for i, label in enumerate(t["keys"])
        ]
        handles.append(Line2D([], [], ls="--", lw=1.0, color=p.muted, label=t["rule"]))
        fig.legend(
            handles=handles,
            loc="outside lower center",
            ncol=2,
            fontsize=10,
            frameon=False,
        )
    return fig


# ---------------------------------------------------------------- what changes, era to era

CHANGE_COLUMNS = (
    "norm",
    "positions",
    "attention",
    "QK-norm",
    "windows",
    "sinks",
    "FFN",
    "block",
)

# The short forms of the cells' words; numbers (RoPE's bases, windows) are parsed.
SHORT_WORDS = {
    "en": {
        "LayerNorm": "LN",
        "RMSNorm": "RMS",
        "RMSNorm (1 + w)": "1+w",
        "sinusoidal": "sin",
        "learned": "learned",
        "none": "none",
        "over projection": "proj",
        "per head": "head",
        "post-norm": "post",
        "pre-norm": "pre",
        "parallel (one norm)": "par 1",
        "parallel (two norms)": "par 2",
        "output norm": "out",
        "sandwich": "sand",
        "latent": "latent",
        "MHA": "MHA",
        "GQA": "GQA",
        "MQA": "MQA",
    },
    "ru": {
        "LayerNorm": "LN",
        "RMSNorm": "RMS",
        "RMSNorm (1 + w)": "1+w",
        "sinusoidal": "sin",
        "learned": "обуч.",
        "none": "нет",
        "over projection": "проек",
        "per head": "гол.",
        "post-norm": "пост",
        "pre-norm": "пре",
        "parallel (one norm)": "пар 1",
        "parallel (two norms)": "пар 2",
        "output norm": "выход",
        "sandwich": "сэнд.",
        "latent": "лат.",
        "MHA": "MHA",
        "GQA": "GQA",
        "MQA": "MQA",
    },
}


def short_number(n: int) -> str:
    """10,000 -> 10k, 1,000,000 -> 1M, 500,000 -> 500k."""
    if n >= 10**6 and n % 10**6 == 0:
        return f"{n // 10**6}M"
    if n >= 10**3 and n % 10**3 == 0:
        return f"{n // 10**3}k"
    return f"{n}"


def short_cell(column: str, value: str, language: str = "en") -> str:
    """A cell of `era_table` in a few characters: the kind (MHA, SwiGLU, pre), RoPE's
    base (YaRN where it stretches the positions), a window's width."""
    words = SHORT_WORDS[language]
    head = value.split(",")[0].split(" (")[0]
    if column == "positions":
        if not value.startswith("RoPE"):
            return words[head]
        if "YaRN" in value:
            return "YaRN"
        bases = re.search(r"base ([\d,]+(?: / [\d,]+)?)", value).group(1)
        return "/".join(
            short_number(int(b.replace(",", ""))) for b in bases.split(" / ")
        )
    if column == "windows":
        return (
            words["none"] if value == "none" else value.split(" ")[0].replace(",", "")
        )
    if column == "FFN":
        return "MoE" if "MoE" in value else value.split(" ")[0]
    if column == "attention":
        return words.get(head, head)
    if column == "block":
        return words.get(value, words.get(value.split(",")[0], value))
    if column == "norm":
        return words[value]
    return words[head.strip()]  # QK-norm, sinks


def short_era(name: str) -> str:
    """Transformer base -> Transformer, GPT-2 small -> GPT-2, Mistral 7B v0.1 -> Mistral:
    the name without its size and without "(a block)"."""
    name = re.sub(r"-\d+b$", "", name.removesuffix(" (a block)"))
    words = [w for w in name.split(" ") if not re.fullmatch(r"\d+x?\d*B|v[\d.]+", w)]
    if words[-1] in ("base", "small"):
        words = words[:-1]
    return " ".join(words)


def era_changes() -> list[tuple[str, dict[str, str], set[str]]]:
    """Each row of `era_table` in ERA_ROWS' order: its era, its cells of CHANGE_COLUMNS
    and the columns whose cell differs from the previous row's (all, for the first)."""
    table = era_table()
    rows = []
    for i, row in enumerate(table):
        cells = {c: row[c] for c in CHANGE_COLUMNS}
        changed = (
            set(CHANGE_COLUMNS)
            if i == 0
            else {c for c in CHANGE_COLUMNS if row[c] != table[i - 1][c]}
        )
        rows.append((row["era"], cells, changed))
    return rows


CHANGE_LABELS = {
    "en": {
        "title": "What each era changes in the row above it",
        "columns": {
            "norm": "norm",
            "positions": "positions",
            "attention": "attention",
            "QK-norm": "QK-norm",
            "windows": "windows",
            "sinks": "sinks",
            "FFN": "FFN",
            "block": "block",
        },
        "start": "the starting row",
        "new": "changed: the new value",
    },
    "ru": {
        "title": "Что каждая эпоха меняет в строке над ней",
        "columns": {
            "norm": "норма",
            "positions": "позиции",
            "attention": "внимание",
            "QK-norm": "QK-норма",
            "windows": "окна",
            "sinks": "стоки",
            "FFN": "FFN",
            "block": "блок",
        },
        "start": "исходная строка",
        "new": "изменилось: новое значение",
    },
}

CELL_WIDTH_PER_CHAR = 0.085  # inches per character at 10 pt, with padding
CELL_MIN_WIDTH = 0.4


def changes_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """A grid of the eras (rows, ERA_ROWS' order) by eight columns of the table: a cell is
    coloured where the era's cell differs from the row above, with its new value in
    short; the first row, the start, in grey with all its values."""
    t = text(CHANGE_LABELS, language)
    rows = era_changes()
    labels = [
        {c: short_cell(c, cells[c], language) for c in CHANGE_COLUMNS}
        for _, cells, _ in rows
    ]
    widths = [
        max(CELL_MIN_WIDTH, CELL_WIDTH_PER_CHAR * max(len(lab[c]) for lab in labels))
        for c in CHANGE_COLUMNS
    ]
    lefts = [sum(widths[:i]) for i in range(len(widths))]
    with style(theme) as p:
        fig, ax = plt.subplots(figsize=(5.2, 4.7), layout="constrained")
        for r, ((era, _, changed), lab) in enumerate(zip(rows, labels)):
            for c, column in enumerate(CHANGE_COLUMNS):
                marked = column in changed
                if r == 0:
                    face, ink = p.border, p.ink
                elif marked:
                    face, ink = p.series[0], BOX_INK
                else:
                    face, ink = p.empty, p.ink
                ax.add_patch(
                    plt.Rectangle(
                        (lefts[c] + 0.02, r + 0.06),
                        widths[c] - 0.04,
                        0.88,
                        facecolor=face,
                        edgecolor="none",
                        gid=f"change-{r}-{column}" if marked else f"same-{r}-{column}",
                    )
                )
                if marked:
                    ax.text(
                        lefts[c] + widths[c] / 2,
                        r + 0.5,
                        lab[column],
                        ha="center",
                        va="center",
                        fontsize=10,
                        color=ink,
                        gid=f"label-{r}-{column}",
                    )
        ax.set_xlim(0, sum(widths))
        ax.set_ylim(len(rows), 0)
        ax.set_yticks(
            [r + 0.5 for r in range(len(rows))], [short_era(e) for e, _, _ in rows]
        )
        ax.set_xticks(
            [lefts[c] + widths[c] / 2 for c in range(len(widths))],
            [t["columns"][c] for c in CHANGE_COLUMNS],
            rotation=35,
            ha="left",
            rotation_mode="anchor",
        )
        ax.xaxis.tick_top()
        ax.tick_params(axis="both", length=0, labelsize=10)
        for spine in ax.spines.values():
            spine.set_visible(False)
        ax.grid(False)
        fig.suptitle(t["title"], fontsize=12, fontweight="bold", color=p.ink)
        handles = [
            Patch(color=p.border, label=t["start"]),
            Patch(color=p.series[0], label=t["new"]),
        ]
        fig.legend(
            handles=handles,
            loc="outside lower center",
            ncol=2,
            fontsize=10,
            frameon=False,
        )
    return fig


SPECS: list[tuple] = [
    (
        "eras-parameter-split",
        parameter_split_figure,
        "One bar per published model, its total parameters as 100 percent, split into "
        "the embedding tables, N (the weights one token multiplies by) and the routed "
        "experts its router does not choose. The dense models are all embedding and N: "
        "the embedding is 32 percent of GPT-2 small's 124 million and 2 percent of "
        "Llama 2 7B's 6.74 billion. A mixture of experts skips most of itself: "
        "Mixtral 8x7B 72 percent of 46.7 billion, Qwen3-30B-A3B 89 percent, "
        "DeepSeek-V3 94 percent of 671 billion and gpt-oss-120b 95 percent of 117 "
        "billion.",
    ),
    (
        "eras-flops-over-2n",
        flops_over_two_n_figure,
        "One row per published model, with its 2N in GFLOPs: a decoding step's FLOPs "
        "divided by 2N on a log scale, at 1, 8,192 and 131,072 keys of context where "
        "the model's context holds them, a dashed line at 1. With one key every model "
        "sits at 1 but GPT-2 small (1.45), GPT-2 XL, Qwen3-0.6B (1.35), Gemma 3 27B and "
        "Command R v01 (1.06), whose tied head 2N leaves out. At 8,192 keys Llama 3 8B is at 1.29, "
        "Qwen3-30B-A3B at 2.06 and DeepSeek-V3 at 2.90; at 131,072 keys Gemma 3 27B, its local layers windowed, "
        "is at 1.49, gpt-oss-120b at 4.77 and DeepSeek-V3 at 31.4.",
    ),
    (
        "eras-changes",
        changes_figure,
        "A grid of the twelve eras, 2017 to 2025, by eight columns of the table: norm, "
        "positions, attention, QK-norm, windows, sinks, FFN and block. A cell is coloured "
        "where the era's cell differs from the row above, with the new value in short; "
        "the first row, the 2017 model, is the start. "
        "GPT-2 changes the positions to learned, the FFN to GELU and the block to "
        "pre-norm; GPT-J brings RoPE and the parallel block; Mistral 7B brings RMSNorm, "
        "GQA, a window of 4,096 and SwiGLU; Mixtral a mixture of experts; OLMo 2 "
        "QK-norm over the projection and the output norm; DeepSeek-V3 latent attention "
        "and YaRN; Gemma 3 the sandwich and norms with gain 1 + w; gpt-oss sinks and a "
        "window of 128 in half its layers.",
    ),
]
