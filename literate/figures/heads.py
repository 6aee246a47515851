"""Figures of chapter 3: which query heads share which key/value head, and what that saves
in KV-cache memory for published models."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from literate.figures.style import BOX_INK, style, text
from literate.numbers.params import PUBLISHED_ATTENTION, kv_cache_bytes_per_token
from literate.parts.multi_head import grouped_attention

GROUPING_LABELS = {
    "en": {
        "titles": (
            "MHA: 8 key/value heads",
            "GQA: 2 key/value heads",
            "MQA: 1 key/value head",
        ),
        "query": "query heads",
        "kv": "K/V heads\n(cached)",
        "suptitle": "8 query heads; query head h reads key/value head h // G",
        "per_token": "cache per token per layer: {n} K + {n} V head(s)",
    },
    "ru": {
        "titles": ("MHA: 8 голов K/V", "GQA: 2 головы K/V", "MQA: 1 голова K/V"),
        "query": "головы запросов",
        "kv": "головы K/V\n(в кеше)",
        "suptitle": "8 голов запросов; голова h читает голову K/V номер h // G",
        "per_token": "кеш на токен и слой: {n} K + {n} V",
    },
}

MEMORY_LABELS = {
    "en": {
        "title": "KV-cache memory per token, fp16, all layers",
        "x": "KiB per token (log scale)",
        "actual": "as published",
        "as_mha": "same model with MHA (n_kv = n_heads)",
        "note": "{per_token} per token · {per_seq} per 4,096-token sequence",
        "layers": "{layers} layers, {heads} query / {kv} K/V heads, d_head {d_head}",
    },
    "ru": {
        "title": "Память KV-кеша на токен, fp16, все слои",
        "x": "КиБ на токен (лог. шкала)",
        "actual": "как опубликовано",
        "as_mha": "та же модель с MHA (n_kv = n_heads)",
        "note": "{per_token} на токен · {per_seq} на 4096 токенов",
        "layers": "{layers} слоёв, голов: {heads} запросов / {kv} K/V, d_head {d_head}",
    },
}

UNITS = {"en": ("B", "KiB", "MiB", "GiB"), "ru": ("Б", "КиБ", "МиБ", "ГиБ")}


def kv_head_of(n_heads: int, n_kv_heads: int) -> list[int]:
    """Which key/value head each query head reads, measured through `grouped_attention`:
    value head j holds the constant j, every score ties, so head h's output is the index
    of the value head it was given."""
    q = torch.zeros(1, n_heads, 1, 2, dtype=torch.float64)
    k = torch.zeros(1, n_kv_heads, 1, 2, dtype=torch.float64)
    v = torch.arange(n_kv_heads, dtype=torch.float64).view(1, n_kv_heads, 1, 1)
    out = grouped_attention(q, k, v).output  # [1, H, 1, 1]
    return [int(round(x)) for x in out.flatten().tolist()]


def kind_of(n_heads: int, n_kv_heads: int) -> str:
    return "MHA" if n_kv_heads == n_heads else "MQA" if n_kv_heads == 1 else "GQA"


def human_bytes(n: float, language: str = "en") -> str:
    """1536 -> '1.5 KiB' (binary units)."""
    units = UNITS[language]
    i = 0
    while n >= 1024 and i < len(units) - 1:
        n /= 1024
        i += 1
    return f"{n:.3g} {units[i]}".replace(".", "," if language == "ru" else ".")


def grouping_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Three panels, MHA / GQA / MQA with 8 query heads: a line from each query head to the
    key/value head it reads, coloured by group."""
    t = text(GROUPING_LABELS, language)
    with style(theme) as p:
        # stacked: a phone shows the figure at its full width
        fig, axes = plt.subplots(3, 1, figsize=(5.2, 6.4), layout="constrained")
        for ax, n_kv, title in zip(axes, (8, 2, 1), t["titles"]):
            mapping = kv_head_of(8, n_kv)
            kv_x = [
                (j + 0.5) * 8 / n_kv - 0.5 for j in range(n_kv)
            ]  # centred under their group
            colours = [
                p.series[j % len(p.series)] if n_kv > 1 else p.series[0]
                for j in range(n_kv)
            ]
            for h, j in enumerate(mapping):
                ax.plot(
                    [h, kv_x[j]],
                    [1.0, 0.0],
                    color=colours[j],
                    lw=1.6,
                    alpha=0.8,
                    zorder=1,
                )
                ax.add_patch(
                    FancyBboxPatch(
                        (h - 0.32, 0.92),
                        0.64,
                        0.16,
                        boxstyle="round,pad=0.02",
                        facecolor=colours[j],
                        edgecolor="none",
                        zorder=2,
                    )
                )
                ax.text(
                    h,
                    1.0,
                    f"q{h}",
                    ha="center",
                    va="center",
                    fontsize=10,
                    color=BOX_INK,
                    zorder=3,
                )
            for j, xj in enumerate(kv_x):
                width = 0.64 if n_kv == 8 else 0.9
                ax.add_patch(
                    FancyBboxPatch(
                        (xj - width / 2, -0.1),
                        width,
                        0.2,
                        boxstyle="round,pad=0.02",
                        facecolor=colours[j],
                        edgecolor=p.ink,
                        linewidth=1.2,
                        zorder=2,
                    )
                )
                ax.text(
                    xj,
                    0.0,
                    f"kv{j}",
                    ha="center",
                    va="center",
                    fontsize=10,
                    color=BOX_INK,
                    zorder=3,
                )
            ax.set_title(title, fontsize=11)
            ax.set_xlim(-0.7, 7.7)
            ax.set_ylim(-0.45, 1.2)
            ax.set_xticks([])
            ax.set_yticks([0.0, 1.0], [t["kv"], t["query"]])
            ax.text(
                3.5,
                -0.33,
                t["per_token"].format(n=n_kv),
                ha="center",
                va="center",
                fontsize=10,
                color=p.muted,
                in_layout=False,
            )
            for spine in ax.spines.values():
                spine.set_visible(False)
        fig.suptitle(
            textwrap.fill(t["suptitle"], 40),
            fontsize=12,
            fontweight="bold",
            color=p.ink,
        )
    return fig


def kv_memory_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Horizontal bars, log scale: KV-cache bytes per token (fp16, all layers) of published
    models, with the same model's cache if it used MHA drawn as a dashed outline."""
    t = text(MEMORY_LABELS, language)
    models = list(PUBLISHED_ATTENTION)
    outlined = False  # one legend entry for the outlines
    with style(theme) as p:
        # each model's name, sizes and shape above its bar: the figure fits a phone
        fig, ax = plt.subplots(figsize=(5.2, 6.4), layout="constrained")
        for i, m in enumerate(models):
            y = len(models) - 1 - i
            actual = kv_cache_bytes_per_token(m.n_layers, m.n_kv_heads, m.d_head, 2)
            as_mha = kv_cache_bytes_per_token(m.n_layers, m.n_heads, m.d_head, 2)
            colour = {"MHA": p.series[0], "GQA": p.series[2], "MQA": p.series[1]}[
                kind_of(m.n_heads, m.n_kv_heads)
            ]
            if as_mha != actual:
                ax.barh(
                    y,
                    as_mha / 1024,
                    height=0.3,
                    facecolor="none",
                    edgecolor=p.muted,
                    linestyle="--",
                    linewidth=1.2,
                    label=None if outlined else t["as_mha"],
                )
                ax.text(
                    as_mha / 1024 * 1.1,
                    y,
                    human_bytes(as_mha, language),
                    va="center",
                    ha="left",
                    fontsize=10,
                    color=p.muted,
                    in_layout=False,
                )
                outlined = True
            ax.barh(y, actual / 1024, height=0.3, color=colour, label=None)
            note = t["note"].format(
                per_token=human_bytes(actual, language),
                per_seq=human_bytes(actual * 4096, language),
            )
            shape = t["layers"].format(
                layers=m.n_layers, heads=m.n_heads, kv=m.n_kv_heads, d_head=m.d_head
            )
            ax.text(
                4.3,
                y + 0.2,
                f"{m.name} ({kind_of(m.n_heads, m.n_kv_heads)})\n{note}\n{shape}",
                va="bottom",
                ha="left",
                fontsize=10,
                color=p.ink,
                linespacing=1.3,
                in_layout=False,
            )
        ax.set_yticks([])
        ax.set_xscale("log")
        ax.set_xlim(4, 2**14)
        ax.set_ylim(-0.4, len(models) - 0.15)
        ax.set_xticks(
            [4, 16, 64, 256, 1024, 4096], ["4", "16", "64", "256", "1024", "4096"]
        )
        ax.minorticks_off()
        ax.set_xlabel(t["x"])
        ax.set_title(t["title"], fontsize=12, pad=24)  # the legend under it
        ax.grid(axis="x", alpha=0.6)
        ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), borderaxespad=0.2)
        for spine in ("top", "right"):
            ax.spines[spine].set_visible(False)
    return fig
