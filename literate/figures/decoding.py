"""Figures of chapter 8: what one decoding step costs with a preallocated KV cache, with
a cache grown by `torch.cat`, and with no cache.

Plotting only: the counts come from `literate.numbers.decode_cost.step_traffic`, which runs the
real decoding code under a counting dispatch mode; the tests and the chapter's claims
call it too. Counts, not timings: two builds of the site draw the same figure.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from literate.figures.style import style, text
from literate.numbers.decode_cost import STRATEGIES, TINY_LLAMA, step_traffic

STEP_COST_LABELS = {
    "en": {
        "suptitle": "One decoding step of a tiny Llama ({layers} layers, {kv} "
        "key/value heads of width {d}, float32, batch 1), counted while "
        "it runs",
        "title_bytes": "Bytes written in one step",
        "title_rows": "Token rows projected in one step",
        "x": "position $t$: the step's token is the $t$-th, it attends to $t$ keys",
        "bytes": "bytes (log scale)",
        "rows": "rows through $W_k$, in each layer",
        "strategies": {
            "preallocated": "preallocated cache",
            "cat": "cache grown by torch.cat",
            "none": "no cache: the whole prefix again",
        },
        "every_op": "by every op of the step",
        "into_cache": "into the cache's storage",
        "units": ("B", "KiB", "MiB"),
    },
    "ru": {
        "suptitle": "Один шаг декодирования маленькой Llama ({layers} слоя, {kv} "
        "головы K/V ширины {d}, float32, батч 1), подсчитано во время "
        "работы",
        "title_bytes": "Байты, записанные за один шаг",
        "title_rows": "Строки токенов, спроецированные за шаг",
        "x": "позиция $t$: токен шага $t$-й, он читает $t$ ключей",
        "bytes": "байты (лог. шкала)",
        "rows": "строк через $W_k$ в каждом слое",
        "strategies": {
            "preallocated": "предвыделенный кеш",
            "cat": "кеш, растущий через torch.cat",
            "none": "без кеша: весь префикс заново",
        },
        "every_op": "всеми операциями шага",
        "into_cache": "в память кеша",
        "units": ("Б", "КиБ", "МиБ"),
    },
}

MARKERS = {"preallocated": "o", "cat": "s", "none": "^"}
BYTE_TICKS = (2**10, 2**15, 2**20, 2**25)  # 1 KiB, 32 KiB, 1 MiB, 32 MiB


def _byte_label(n: int, units: tuple[str, ...]) -> str:
    """1024 -> '1 KiB', 2**25 -> '32 MiB' (tick labels: powers of two)."""
    power = 0
    while n >= 1024 and power + 1 < len(units):
        n, power = n // 1024, power + 1
    return f"{n} {units[power]}"


def step_cost_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """`step_traffic` at every position in TRAFFIC_POSITIONS, log-log. Left: the bytes
    one step writes, by all its ops (solid) and into the cache's storage (dotted; the
    step without a cache stores nothing). Right: the token rows each layer projects
    (the two caches' lines coincide at one row)."""
    t = text(STEP_COST_LABELS, language)
    traffic = step_traffic()
    x = traffic.positions
    with style(theme) as p:
        colours = dict(
            zip(STRATEGIES, (p.series[0], p.series[1], p.series[4]), strict=True)
        )
        # stacked: a phone shows the figure at its full width
        fig, (left, right) = plt.subplots(
            2, 1, figsize=(5.2, 8.4), layout="constrained"
        )
        attn = TINY_LLAMA
        suptitle = t["suptitle"].format(
            layers=traffic.n_layers,
            kv=attn["n_kv_heads"],
            d=attn["d_model"] // attn["n_heads"],
        )
        fig.suptitle(
            "\n".join(textwrap.fill(line, 52) for line in suptitle.split("\n")),
            x=0.01,
            ha="left",
            fontsize=10.5,
            color=p.muted,
        )
        for s in STRATEGIES:
            name = t["strategies"][s]
            left.plot(
                x,
                traffic.step_bytes[s],
                MARKERS[s] + "-",
                color=colours[s],
                lw=2,
                ms=5,
                label=name,
            )
            if s != "none":  # no cache: nothing is stored, no dotted line
                left.plot(
                    x,
                    traffic.cache_bytes[s],
                    MARKERS[s] + ":",
                    color=colours[s],
                    lw=1.8,
                    ms=4,
                    mfc="none",
                    label=f"{name}: {t['into_cache']}",
                )
            style_ = "--" if s == "cat" else "-"  # drawn over the preallocated line
            right.plot(
                x,
                traffic.rows_projected[s],
                MARKERS[s] + style_,
                color=colours[s],
                lw=2,
                ms=5,
                mfc="none" if s == "cat" else None,
                label=name,
            )
        left.set(
            yscale="log",
            ylabel=t["bytes"],
            title=t["title_bytes"],
            ylim=(BYTE_TICKS[0] / 2, BYTE_TICKS[-1] * 2),
        )
        left.set_yticks(BYTE_TICKS, [_byte_label(b, t["units"]) for b in BYTE_TICKS])
        right.set(yscale="log", ylabel=t["rows"], title=t["title_rows"])
        right.set_yscale("log", base=2)
        right.set_yticks(x, [str(v) for v in x])
        for ax in (left, right):
            ax.set_xscale("log", base=2)
            ax.set_xticks(x, [str(v) for v in x])
            ax.minorticks_off()
            ax.set_xlabel(textwrap.fill(t["x"], 44))
            ax.grid(alpha=0.6)
            for spine in ("top", "right"):
                ax.spines[spine].set_visible(False)
        kinds = [
            Line2D([], [], color=p.muted, lw=2, ls="-", label=t["every_op"]),
            Line2D([], [], color=p.muted, lw=1.8, ls=":", label=t["into_cache"]),
        ]
        first = left.legend(handles=kinds, loc="upper left")
        left.add_artist(first)
        right.legend(loc="upper left")
    return fig
