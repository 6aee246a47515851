"""Figure of chapter 11: the blocks of the eras side by side, one panel per era.

Plotting only: the blocks come from the cells of `literate.numbers.eras.era_table`, which
tests/test_eras.py checks against the models our loaders build. This module only reads
those cells into drawings (`panel`), lays each out as a list of primitives in points
(`layout`: boxes, arrows, the residual's circle; its height known before drawing) and
draws them (`era_blocks_figure`): an unknown block topology is refused, never drawn as a
known one.
"""

# Over 450 lines on purpose: one figure whose text is measured and laid out in points
# before it is drawn (so every panel's height is known): the reading of the table's
# cells, the layout and the drawing belong to this figure only.

from __future__ import annotations

import re
from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.patches import Circle, FancyBboxPatch
from matplotlib.textpath import text_to_path

from literate.figures.modern import _arrow
from literate.figures.style import BOX_INK, style, text

BLOCK_LABELS = {
    "en": {
        "title": "One block of each era, bottom to top",
        "block only": "the block alone",
        "note": "Vertical line: the residual stream from the block's input $x$; each "
        "branch rejoins it at a (+).\nOrange: a norm;  blue: attention;  "
        "green: the feed-forward layer.",
        "heads": "{h} heads",
        "grouped": "{h} q · {kv} kv heads",
        "latent": "{h} heads, rank {r}",
        "moe": "MoE: top-{k} of {n}",
        "shared": "+ a shared expert",
        "experts": "{kind} experts",
        "layers": "layers {a}–{b}: {kind}",
        "qk_norm": {
            "per head": "QK-norm",
            "over projection": "QK-norm",
            "none (RMSNorm on the q and kv latents)": "latent norms",
        },
        "cross": "cross-attention",
        "encoder": "encoder",
        "added": {"learned": "learned positions", "sinusoidal": "sinusoidal positions"},
        "positions": "positions",
        "rope": "RoPE θ={base}",
        "partial": "RoPE on {r}/{d} dims, θ={base}",
        "window": "window {w}",
        "window_some": "window {w} in {k}/{n} layers",
        "sinks": "sinks",
        "units": ((10**6, "M"), (10**3, "K")),
    },
    "ru": {
        "title": "По одному блоку каждой эпохи, снизу вверх",
        "block only": "только блок",
        "note": "Вертикальная линия — остаточный поток от входа блока $x$; каждая "
        "ветвь возвращается в него в (+).\nОранжевый — нормализация;  синий — "
        "внимание;  зелёный — полносвязный слой.",
        "heads": "голов: {h}",
        "grouped": "голов: {h} q · {kv} kv",
        "latent": "голов: {h}, ранг {r}",
        "moe": "MoE: top-{k} из {n}",
        "shared": "+ общий эксперт",
        "experts": "эксперты: {kind}",
        "layers": "слои {a}–{b}: {kind}",
        "qk_norm": {
            "per head": "QK-norm",
            "over projection": "QK-norm",
            "none (RMSNorm on the q and kv latents)": "нормы латентов",
        },
        "cross": "кросс-внимание",
        "encoder": "энкодер",
        "added": {
            "learned": "обучаемые позиции",
            "sinusoidal": "синусоидальные позиции",
        },
        "positions": "позиции",
        "rope": "RoPE θ={base}",
        "partial": "RoPE на {r}/{d} изм., θ={base}",
        "window": "окно {w}",
        "window_some": "окно {w} в {k}/{n} слоях",
        "sinks": "стоки",
        "units": ((10**6, "\u00a0млн"), (10**3, "\u00a0тыс.")),
    },
}

# The table's "block" cell (chapter 7's `block_norms` placement, and the residual) ->
# the topology drawn. Any other value is refused: a new topology needs its own drawing.
TOPOLOGIES = {
    "pre-norm, serial": "pre",
    "post-norm, serial": "post",
    "sandwich, serial": "sandwich",
    "output norm, serial": "output",
    "parallel (one norm)": "parallel-one",
    "parallel (two norms)": "parallel-two",
}

NORM_NAMES = {
    "LayerNorm": "LayerNorm",
    "LayerNorm (no bias)": "LayerNorm, no bias",
    "RMSNorm": "RMSNorm",
    "RMSNorm (1 + w)": "RMSNorm (1 + w)",
}
ACTIVATIONS = {
    "silu": "SiLU",
    "gelu": "GELU",
    "relu": "ReLU",
    "gelu (tanh)": "GELU (tanh)",
}

# Sizes in points: the panels are laid out in points, one data unit = 1 pt.
PANEL_W, NAME_H, CAPTION_LINE, GAP_X, GAP_Y = 172.0, 19.0, 12.5, 6.0, 14.0
NORM_H, NORM_W, SUB_W, PARALLEL_W = 17.5, 96.0, 110.0, 78.0
BOX_LINE, STEP, FORK, JOIN, R = 11.5, 10.0, 11.0, 11.0, 6.5
BOX_FONT, NAME_FONT, LINE_FONT, MIN_FONT = 10.0, 11.0, 9.5, 8.0
NBSP = "\u00a0"  # a space `_wrap` does not break at


def _font(size: float) -> FontProperties:
    return FontProperties(family="DejaVu Sans", size=size)  # style()'s font


def topology(cell: str) -> str:
    """The topology of a "block" cell of `era_table`; ValueError for any other."""
    if cell not in TOPOLOGIES:
        raise ValueError(
            f"block must be one of {sorted(TOPOLOGIES)}, got {cell!r}: "
            "no drawing for this topology"
        )
    return TOPOLOGIES[cell]


def _int(s: str) -> int:
    return int(s.replace(",", ""))


def _number(n: int, language: str) -> str:
    """4096 -> '4,096' ('4096' in Russian, a thin space from five digits)."""
    if language == "ru":
        return f"{n:,}".replace(",", "\u2009") if n >= 10_000 else str(n)
    return f"{n:,}"


def _short(n: int, units) -> str:
    """500000 -> '500K' (exact multiples only; else the number as it is)."""
    for scale, suffix in units:
        if n >= scale and n % scale == 0:
            return f"{n // scale}{suffix}"
    return str(n)


def text_width(s: str, size: float) -> float:
    """The width in points of `s` set in the figures' font at `size`."""
    width, _, _ = text_to_path.get_text_width_height_descent(
        s, _font(size), ismath=False
    )
    return width


def _wrap(s: str, size: float, width: float, sep: str = " ") -> list[str]:
    """`s` broken at `sep` into lines at most `width` points wide (a piece wider than
    that stays whole on its own line)."""
    lines: list[str] = []
    for piece in s.split(sep):
        if lines and text_width(lines[-1] + sep + piece, size) <= width:
            lines[-1] += sep + piece
        else:
            lines.append(piece)
    return lines


def _cell(row: dict, column: str) -> str:
    if column not in row:
        raise ValueError(
            f"an era_table row needs a {column!r} cell, got the columns {sorted(row)}"
        )
    return str(row[column])


def _heads(cell: str, t) -> list[str] | None:
    """'GQA, 32 heads, 8 key/value' -> ['GQA', '32 q · 8 kv heads']; None if the
    cell is not one of the attention cells this figure knows."""
    m = re.fullmatch(r"(MHA|GQA|MQA), (\d+) heads(?:, (\d+) key/value)?", cell)
    if m:
        kind, h, kv = m.groups()
        return [kind, t["grouped"].format(h=h, kv=kv) if kv else t["heads"].format(h=h)]
    m = re.fullmatch(r"latent, (\d+) heads \(rank (\d+), RoPE part \d+\)", cell)
    if m:
        return ["MLA", t["latent"].format(h=m[1], r=m[2])]
    return None


def _attention(cell: str, qk_norm: str | None, t) -> tuple[list[str], list[str] | None]:
    """The self-attention box's lines, and the cross-attention box's (None without
    one): 'MHA, 8 heads; cross-attention, MHA, 8 heads' is a decoder layer's."""
    parts = cell.split("; ")
    cross = [part for part in parts[1:] if part.startswith("cross-attention")]
    own = _heads(parts[0], t) or [parts[0]]
    if qk_norm not in (None, "none"):
        own.append(t["qk_norm"].get(qk_norm, f"QK-norm: {qk_norm}"))
    if not cross:
        return own, None
    rest = cross[0].removeprefix("cross-attention").lstrip(", ")
    heads = _heads(rest, t)
    return own, [t["cross"], *(heads[1:] if heads else [rest] if rest else [])]


def _ffn_kind(cell: str, t) -> list[str]:
    m = re.fullmatch(
        r"MoE, top-(\d+) of (\d+) (?:(.+?) )?experts( \+ a shared expert)?", cell
    )
    if m:
        kind = [t["experts"].format(kind=m[3])] if m[3] else []
        return [t["moe"].format(k=m[1], n=m[2]), *kind] + (
            [t["shared"]] if m[4] else []
        )
    return [ACTIVATIONS.get(cell, cell)]


def _ffn(cell: str, t) -> list[str]:
    """The FFN box's lines. A cell of runs of layers ('SwiGLU in 3 layers, then MoE,
    ... in 58 layers') shows the last run, and a line 'layers 1-3: SwiGLU' for each
    earlier one."""
    runs = [re.fullmatch(r"(.+) in (\d+) layers", run) for run in cell.split(", then ")]
    if len(runs) < 2 or not all(runs):
        return _ffn_kind(cell, t)
    lines, first = _ffn_kind(runs[-1][1], t), 1
    for run in runs[:-1]:
        last = first + int(run[2]) - 1
        lines.append(
            t["layers"].format(a=first, b=last, kind=" ".join(_ffn_kind(run[1], t)))
        )
        first = last + 1
    return lines


def _positions(cell: str, t) -> str:
    m = re.fullmatch(r"(\w+), added to the embeddings", cell)
    if m:
        return t["added"].get(m[1], cell)
    m = re.fullmatch(
        r"RoPE \((?:rotate-half|interleaved)(?:, (\d+) of (\d+) dims)?\), "
        r"base (.+?)(?:, YaRN x([\d.]+))?",
        cell,
    )
    if not m:
        return cell
    rotated, d_head, bases, yarn = m.groups()
    each = re.findall(r"([\d,]+)(?: \(([^)]*)\))?", bases)  # '10,000 (YaRN x40)'
    if " / ".join(b + (f" ({sc})" if sc else "") for b, sc in each) != bases:
        return cell
    shown = []
    for number, scaling in each:
        scaling = re.sub(r"YaRN x([\d.]+)", r"YaRN ×\1", scaling)
        scaling = scaling.replace("positions", t["positions"])
        scaled = f" ({scaling.replace(' ', NBSP)})" if scaling else ""  # kept whole
        shown.append(_short(_int(number), t["units"]) + scaled)
    base = " / ".join(shown)
    line = (
        t["partial"].format(r=rotated, d=d_head, base=base)
        if rotated
        else t["rope"].format(base=base)
    )
    return line + (f", YaRN ×{yarn}" if yarn else "")


def _windows(cell: str, t, language: str) -> str | None:
    if cell == "none":
        return None
    m = re.fullmatch(r"([\d,]+) in every layer", cell)
    if m:
        return t["window"].format(w=_number(_int(m[1]), language))
    m = re.fullmatch(r"([\d,]+) in (\d+) of (\d+) layers", cell)
    if m:
        return t["window_some"].format(w=_number(_int(m[1]), language), k=m[2], n=m[3])
    return cell


@dataclass(frozen=True)
class Panel:
    """What one era's panel draws, read from its row of `era_table`."""

    era: str
    topology: str  # a value of TOPOLOGIES
    norm: str
    attention: tuple[str, ...]
    cross: tuple[str, ...] | None  # a decoder layer's cross-attention
    ffn: tuple[str, ...]
    caption: tuple[str, ...]  # positions · windows · sinks, in lines that fit


def panel(row: dict, language: str = "en") -> Panel:
    """The panel of one row of `era_table` (the columns it does not draw are
    ignored); ValueError for a "block" cell of no known topology."""
    t = text(BLOCK_LABELS, language)
    shape = topology(_cell(row, "block"))
    attention, cross = _attention(_cell(row, "attention"), row.get("QK-norm"), t)
    parts = [_positions(_cell(row, "positions"), t)]
    window = _windows(_cell(row, "windows"), t, language)
    if window is not None:
        parts.append(window)
    if _cell(row, "sinks") != "none":
        parts.append(t["sinks"])
    norm = _cell(row, "norm")
    era = _cell(row, "era")
    if era.endswith(" (a block)"):  # the catalog's block alone: said in the caption
        era = era.removesuffix(" (a block)")
        parts.insert(0, t["block only"])
    era += f" ({row['year']})" if "year" in row else ""
    return Panel(
        era=era,
        topology=shape,
        norm=NORM_NAMES.get(norm, norm),
        attention=tuple(attention),
        cross=None if cross is None else tuple(cross),
        ffn=tuple(_ffn(_cell(row, "FFN"), t)),
        caption=tuple(_caption(parts)),
    )


def _caption(parts: list[str]) -> list[str]:
    """The parts joined by ' · ' in lines as wide as the panel: broken between parts,
    and a part wider than the panel between its words."""
    lines = _wrap(" · ".join(parts), LINE_FONT, PANEL_W - 4, " · ")
    return [piece for line in lines for piece in _wrap(line, LINE_FONT, PANEL_W - 4)]


# A drawing is a list of primitives in points, so its height is known before the
# axes are placed: ("box", x, y, w, h, lines, role), ("line", xs, ys),
# ("arrow", start, end), ("join", x, y), ("dot", x, y), ("label", x, y, text).


def _sublayers(pan: Panel) -> list[tuple[str, tuple[str, ...]]]:
    cross = [] if pan.cross is None else [("cross", pan.cross)]
    return [("attn", pan.attention), *cross, ("ffn", pan.ffn)]


def _box_h(lines) -> float:
    return NORM_H + (len(lines) - 1) * BOX_LINE


def _fit(lines, w: float) -> tuple[str, ...]:
    """The lines of a box `w` wide: each broken at spaces only if it is wider than
    the box even at MIN_FONT (`box_font` shrinks the others to fit)."""
    return tuple(piece for line in lines for piece in _wrap(line, MIN_FONT, w - 8.0))


def layout(pan: Panel, language: str = "en") -> tuple[list[tuple], float]:
    """The primitives of one panel's block, bottom to top from y = 0, and its height."""
    t = text(BLOCK_LABELS, language)
    ops: list[tuple] = []
    if pan.topology.startswith("parallel"):
        return _parallel(pan, ops)
    norm = ("norm", _fit((pan.norm,), NORM_W))
    sx = 34.0  # the stream; the branch's boxes just right of it (post-norm's on it)
    bx = sx + 12.0 + SUB_W / 2
    ops.append(("label", sx, 4.0, "$x$"))
    y = 12.0
    for role, lines in _sublayers(pan):
        sub = (role, _fit(lines, SUB_W))
        branch = {
            "pre": [norm, sub],
            "post": [sub],
            "sandwich": [norm, sub, norm],
            "output": [sub, norm],
        }[pan.topology]
        fork = y + 6.0
        ops.append(("line", (sx, sx), (y, fork)))
        ops.append(("dot", sx, fork))
        boxes, top = [], fork + FORK
        for kind, labels in branch:
            h = _box_h(labels)
            boxes.append((top, h, kind, labels))
            top += h + STEP
        join = top - STEP + JOIN
        ops.append(("line", (sx, bx, bx), (fork, fork, boxes[0][0] - 6.0)))
        ops.append(("arrow", (bx, boxes[0][0] - 6.0), (bx, boxes[0][0])))
        for i, (bottom, h, kind, labels) in enumerate(boxes):
            ops.append(
                (
                    "box",
                    bx,
                    bottom,
                    NORM_W if kind == "norm" else SUB_W,
                    h,
                    labels,
                    kind,
                )
            )
            if i:
                ops.append(
                    ("arrow", (bx, boxes[i - 1][0] + boxes[i - 1][1]), (bx, bottom))
                )
            if kind == "cross":  # the keys and values come from the encoder
                ops.append(
                    (
                        "arrow",
                        (bx + SUB_W / 2 + 14.0, bottom + h / 2),
                        (bx + SUB_W / 2, bottom + h / 2),
                    )
                )
                ops.append(("side", PANEL_W, bottom - 3.0, t["encoder"]))
        last = boxes[-1][0] + boxes[-1][1]
        ops.append(("line", (bx, bx), (last, join)))
        ops.append(("arrow", (bx, join), (sx + R, join)))
        ops.append(("arrow", (sx, fork), (sx, join - R)))
        ops.append(("join", sx, join))
        y = join + R
        if pan.topology == "post":  # LN(x + F(x)): the norm on the stream
            ops.append(("arrow", (sx, y), (sx, y + 7.0)))
            ops.append(("box", sx, y + 7.0, 2 * sx - 4.0, NORM_H, (pan.norm,), "norm"))
            y += 7.0 + NORM_H
    ops.append(("arrow", (sx, y), (sx, y + 12.0)))
    return ops, y + 12.0


def _parallel(pan: Panel, ops: list[tuple]) -> tuple[list[tuple], float]:
    """x + Attn(N1 x) + FFN(N2 x) (two norms: a branch each) or x + Attn(N x) +
    FFN(N x) (one norm, shared by both branches): one (+) for both."""
    w = PARALLEL_W
    norm, attention, ffn = (
        _fit(lines, w) for lines in ((pan.norm,), pan.attention, pan.ffn)
    )
    two = pan.topology == "parallel-two"
    sx = PANEL_W / 2 if two else 8.0
    left, right = (sx - 46.0, sx + 46.0) if two else (50.0, 130.0)
    ops.append(("label", sx, 4.0, "$x$"))
    fork = 18.0
    ops.append(("line", (sx, sx), (12.0, fork)))
    ops.append(("dot", sx, fork))
    sub_h = max(_box_h(attention), _box_h(ffn))
    if two:
        bottom = fork + FORK
        for bx in (left, right):
            ops.append(("line", (sx, bx, bx), (fork, fork, bottom - 6.0)))
            ops.append(("arrow", (bx, bottom - 6.0), (bx, bottom)))
            ops.append(("box", bx, bottom, w, NORM_H, norm, "norm"))
        subs = bottom + NORM_H + STEP
        for bx in (left, right):
            ops.append(("arrow", (bx, bottom + NORM_H), (bx, subs)))
    else:
        mid = (left + right) / 2
        bottom = fork + FORK
        ops.append(("line", (sx, mid, mid), (fork, fork, bottom - 6.0)))
        ops.append(("arrow", (mid, bottom - 6.0), (mid, bottom)))
        ops.append(("box", mid, bottom, w, NORM_H, norm, "norm"))
        split = bottom + NORM_H + 5.0
        subs = split + STEP
        ops.append(("line", (mid, mid), (bottom + NORM_H, split)))
        ops.append(("dot", mid, split))
        for bx in (left, right):
            ops.append(("line", (mid, bx, bx), (split, split, subs - 6.0)))
            ops.append(("arrow", (bx, subs - 6.0), (bx, subs)))
    ops.append(("box", left, subs, w, sub_h, attention, "attn"))
    ops.append(("box", right, subs, w, sub_h, ffn, "ffn"))
    join = subs + sub_h + JOIN
    for bx in (left, right):
        ops.append(("line", (bx, bx), (subs + sub_h, join)))
    if two:
        ops.append(("arrow", (left, join), (sx - R, join)))
        ops.append(("arrow", (right, join), (sx + R, join)))
    else:  # both branches come in from the right, their sum into the (+)
        ops.append(("line", (right, left), (join, join)))
        ops.append(("arrow", (left, join), (sx + R, join)))
    ops.append(("arrow", (sx, fork), (sx, join - R)))
    ops.append(("join", sx, join))
    ops.append(("arrow", (sx, join + R), (sx, join + R + 12.0)))
    return ops, join + R + 12.0


def box_font(lines, w: float) -> float:
    """BOX_FONT, or smaller (down to MIN_FONT) until the widest line fits the box."""
    widest = max(text_width(line, BOX_FONT) for line in lines)
    return max(MIN_FONT, min(BOX_FONT, BOX_FONT * (w - 8.0) / widest))


def _draw(ax, ops: list[tuple], p, side_font: float = 8.5) -> None:
    line = p.muted
    fills = {
        "norm": p.series[1],
        "attn": p.series[0],
        "cross": p.series[0],
        "ffn": p.series[2],
    }
    for op in ops:
        kind, args = op[0], op[1:]
        if kind == "line":
            ax.plot(args[0], args[1], color=line, lw=1.2, solid_joinstyle="round")
        elif kind == "arrow":
            _arrow(ax, args[0], args[1], line)
        elif kind == "dot":
            ax.plot([args[0]], [args[1]], "o", color=line, ms=3.5)
        elif kind == "join":
            x, y = args
            ax.add_patch(Circle((x, y), R, facecolor="none", edgecolor=p.ink, lw=1.2))
            ax.text(
                x, y, "+", ha="center", va="center_baseline", fontsize=10, color=p.ink
            )
        elif kind == "label":
            ax.text(
                args[0],
                args[1],
                args[2],
                ha="center",
                va="center",
                fontsize=11,
                color=p.ink,
            )
        elif kind == "side":
            ax.text(
                args[0],
                args[1],
                args[2],
                ha="right",
                va="top",
                fontsize=side_font,
                color=p.muted,
            )
        elif kind == "box":
            x, bottom, w, h, lines, role = args
            ax.add_patch(
                FancyBboxPatch(
                    (x - w / 2, bottom),
                    w,
                    h,
                    boxstyle="round,pad=0,rounding_size=4",
                    facecolor=fills[role],
                    edgecolor="none",
                    label=f"_{role}",
                )
            )
            size = box_font(lines, w)
            ax.text(
                x,
                bottom + h / 2,
                "\n".join(lines),
                ha="center",
                va="center",
                fontsize=size,
                color=BOX_INK,
                linespacing=1.15,
                label=f"_{role}",
            )


def era_blocks_figure(
    *,
    language: str = "en",
    theme: str = "light",
    rows: list[dict] | None = None,
    columns: int = 4,
) -> Figure:
    """One panel per row of `era_table()` (or of `rows`), `columns` to a line: the
    block drawn bottom to top as its "block" cell places the norms, attention and FFN
    on the residual stream (and a decoder layer's cross-attention when the attention
    cell names one), its boxes labelled from the norm, attention and FFN cells, and
    under it the era's name and its positions, windows and sinks."""
    t = text(BLOCK_LABELS, language)
    if rows is None:
        from literate.numbers.eras import era_table

        rows = era_table()  # built once per drawing: the eras may change between two
    panels = [panel(row, language) for row in rows]  # refuses unknown topologies first
    drawings = [layout(pan, language) for pan in panels]
    lines = [
        range(i, min(i + columns, len(panels))) for i in range(0, len(panels), columns)
    ]
    captions = [
        NAME_H + CAPTION_LINE * max(len(panels[i].caption) for i in line)
        for line in lines
    ]
    heights = [max(drawings[i][1] for i in line) for line in lines]
    top, bottom, side = 34.0, 40.0, 8.0
    width = side * 2 + columns * PANEL_W + (columns - 1) * GAP_X
    height = top + sum(heights) + sum(captions) + GAP_Y * (len(lines) - 1) + bottom
    with style(theme) as p:
        fig = plt.figure(figsize=(width / 72, height / 72))
        y = height - top
        for line, h, cap in zip(lines, heights, captions):
            y -= h + cap
            for c, i in enumerate(line):
                x = side + c * (PANEL_W + GAP_X)
                ax = fig.add_axes(
                    (x / width, y / height, PANEL_W / width, (h + cap) / height)
                )
                ax.set(xlim=(0, PANEL_W), ylim=(-cap, h))
                ax.axis("off")
                _draw(ax, drawings[i][0], p)
                ax.text(
                    PANEL_W / 2,
                    -NAME_H / 2,
                    panels[i].era,
                    ha="center",
                    va="center",
                    fontsize=NAME_FONT,
                    fontweight="bold",
                    color=p.ink,
                )
                ax.text(
                    PANEL_W / 2,
                    -NAME_H + 2.0,
                    "\n".join(panels[i].caption),
                    ha="center",
                    va="top",
                    fontsize=LINE_FONT,
                    color=p.muted,
                    linespacing=1.25,
                )
            y -= GAP_Y
        fig.text(
            side / width,
            1 - 10 / height,
            t["title"],
            ha="left",
            va="top",
            fontsize=14,
            fontweight="bold",
            color=p.ink,
        )
        fig.text(
            0.5,
            8 / height,
            t["note"],
            ha="center",
            va="bottom",
            fontsize=9.5,
            color=p.muted,
            linespacing=1.4,
        )
    return fig
