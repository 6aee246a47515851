"""Chapter 8's figures of what a decoding step reads, and what batching buys on a CPU.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

"decode-bytes-per-token": the bytes one generated token costs, weights against cache,
for Llama 2 7B (MHA) and Llama 3 8B (GQA), at batch 1 and 16, against the position:
`literate.numbers.decode_traffic.published_step`, the weights' bytes divided by the batch
that shares them, the cache's per row. "decode-batch-throughput": tokens per second
against the batch on this CPU, read from the committed measurement
(`literate.tools.decode_batch.load_decode_batch`), never timed while the site builds.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator

from literate.figures.style import style, text
from literate.numbers.decode_traffic import (
    TRAFFIC_BATCHES,
    TRAFFIC_MODELS,
    cache_passes_weights_at,
    published_step,
)
from literate.numbers.published import cache_shape, published_config
from literate.tools.decode_batch import load_decode_batch

__all__ = [
    "per_token_bytes",
    "model_positions",
    "bytes_per_token_figure",
    "throughput_figure",
    "SPECS",
]

GB = 10**9
FIRST_POSITION = 128

# ---------------------------------------------------------------------------------------
# Bytes read per generated token

BYTES_LABELS = {
    "en": {
        "title": "Bytes read per generated token (bfloat16)",
        "x": "position t: keys each query reads (log scale)",
        "y": "GB per token (log scale)",
        "weights": "weights ÷ B, B = {b}",
        "cache": "this row's cache (any B)",
        "meet": "cache = weights ÷ {b} at t = {t:,}",
    },
    "ru": {
        "title": "Байты, прочитанные на токен (bfloat16)",
        "x": "позиция t: ключей на запрос (лог. шкала)",
        "y": "ГБ на токен (лог. шкала)",
        "weights": "веса ÷ B, B = {b}",
        "cache": "кеш этой строки (любой B)",
        "meet": "кеш = веса ÷ {b} при t = {t:,}",
    },
}


def model_positions(name: str) -> tuple[int, ...]:
    """Powers of two from FIRST_POSITION to the model's context
    (`max_position_embeddings` of its configuration)."""
    context = published_config(name).max_position_embeddings
    positions, t = [], FIRST_POSITION
    while t <= context:
        positions.append(t)
        t *= 2
    return tuple(positions)


def per_token_bytes(name: str, batch: int, position: int) -> tuple[float, float]:
    """(weights, cache) bytes per generated token of a step of `batch` rows at
    `position`: `published_step`'s weight bytes shared by the batch, its cache bytes
    per row."""
    step = published_step(name, batch=batch, position=position)
    return step.weight_bytes / batch, step.cache_bytes / batch


def bytes_per_token_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """One panel per model of TRAFFIC_MODELS, stacked: the weights' bytes per token at
    each batch of TRAFFIC_BATCHES (level lines, gid "weights-B"), the cache's (rising,
    the same at any batch, gid "cache"), and a dot where the cache reaches the weights
    of the largest batch (`cache_passes_weights_at`)."""
    t = text(BYTES_LABELS, language)
    big = max(TRAFFIC_BATCHES)
    with style(theme) as p:
        fig, axes = plt.subplots(
            len(TRAFFIC_MODELS),
            1,
            figsize=(5.0, 5.0),
            sharex=True,
            layout="constrained",
        )
        for ax, name in zip(axes, TRAFFIC_MODELS):
            positions = model_positions(name)
            for batch, dash in zip(TRAFFIC_BATCHES, ("-", "--")):
                weights = [per_token_bytes(name, batch, n)[0] / GB for n in positions]
                ax.plot(
                    positions,
                    weights,
                    dash,
                    color=p.series[0],
                    lw=2,
                    gid=f"weights-{batch}",
                    label=t["weights"].format(b=batch),
                )
            cache = [per_token_bytes(name, big, n)[1] / GB for n in positions]
            ax.plot(
                positions,
                cache,
                "-",
                color=p.series[1],
                lw=2,
                gid="cache",
                label=t["cache"],
            )
            meet = cache_passes_weights_at(name, batch=big)
            meet_gb = per_token_bytes(name, big, meet)[0] / GB
            ax.plot(meet, meet_gb, "o", color=p.ink, ms=6, gid="meet", zorder=3)
            ax.annotate(
                t["meet"].format(b=big, t=meet).replace(",", "\u202f"),
                (meet, meet_gb),
                xytext=(-4, 7),
                textcoords="offset points",
                fontsize=10,
                ha="right",
            )
            kind = cache_shape(name).kind
            ax.set_title(f"{name} ({kind})", fontsize=11, fontweight="bold")
            ax.set_yscale("log")
            ax.set_ylabel(t["y"], fontsize=10)
            ax.grid(alpha=0.6)
            for spine in ("top", "right"):
                ax.spines[spine].set_visible(False)
        axes[0].legend(loc="lower right", fontsize=10)
        ticks = model_positions(max(TRAFFIC_MODELS, key=lambda m: model_positions(m)))
        axes[-1].set_xscale("log", base=2)
        axes[-1].xaxis.set_major_locator(FixedLocator(ticks))
        axes[-1].xaxis.set_major_formatter(lambda x, _: f"{x:.0f}")
        axes[-1].xaxis.set_minor_locator(NullLocator())
        axes[-1].set_xlabel(t["x"], fontsize=10)
        fig.suptitle(t["title"], fontsize=12, fontweight="bold", x=0.02, ha="left")
    return fig


def _bytes_alt() -> str:
    parts = []
    big = max(TRAFFIC_BATCHES)
    for name in TRAFFIC_MODELS:
        positions = model_positions(name)
        w1, c_low = per_token_bytes(name, 1, positions[0])
        w_big, c_high = per_token_bytes(name, big, positions[-1])
        parts.append(
            f"{name} ({cache_shape(name).kind}): weights {w1 / GB:.1f} GB per token at "
            f"batch 1 and {w_big / GB:.2f} GB at batch {big}; its cache "
            f"{c_low / GB:.3f} GB at position {positions[0]} and {c_high / GB:.2f} GB "
            f"at {positions[-1]}, reaching the weights of batch {big} at position "
            f"{cache_passes_weights_at(name, batch=big):,}"
        )
    return (
        "Two stacked log-log panels: the gigabytes a decoding step reads per generated "
        "token in bfloat16 against the position, the weights shared by the batch as "
        "level lines at batch 1 and 16, the row's own cache rising in proportion. "
        + ". ".join(parts)
        + "."
    )


# ---------------------------------------------------------------------------------------
# Tokens per second against the batch, measured

THROUGHPUT_LABELS = {
    "en": {
        "title": "Tokens/s on one CPU thread, {n:.1f}M weights",
        "x": "batch B (log scale)",
        "y": "tokens per second (log scale)",
        "measured": "median of {r} rounds, bar: min-max",
        "free": "B × the rate at B = 1",
    },
    "ru": {
        "title": "Токены/с на одном потоке CPU, {n:.1f}M весов",
        "x": "батч B (лог. шкала)",
        "y": "токенов в секунду (лог. шкала)",
        "measured": "медиана {r} раундов, отрезок: min-max",
        "free": "B × скорость при B = 1",
    },
}


def throughput_figure(
    *, language: str = "en", theme: str = "light", data: dict | None = None
) -> Figure:
    """Tokens per second against the batch from `data` (default: the committed
    measurement): the medians as dots on a line (gid "measured"), the min-max of the
    rounds as bars (gid "spread"), each dot labelled with its rounded rate, and the
    batch-1 rate times B dashed (gid "free")."""
    t = text(THROUGHPUT_LABELS, language)
    data = load_decode_batch() if data is None else data
    rows = data["rows"]
    batches = [row["batch"] for row in rows]
    rates = [row["tokens_per_s"] for row in rows]
    with style(theme) as p:
        fig, ax = plt.subplots(figsize=(5.0, 3.8), layout="constrained")
        ax.plot(
            batches,
            [b * rates[0] / batches[0] for b in batches],
            "--",
            color=p.muted,
            lw=1.5,
            gid="free",
            label=t["free"],
        )
        ax.vlines(
            batches,
            [row["min"] for row in rows],
            [row["max"] for row in rows],
            colors=p.series[0],
            lw=3,
            alpha=0.5,
            gid="spread",
        )
        ax.plot(
            batches,
            rates,
            "o-",
            color=p.series[0],
            lw=2,
            ms=6,
            gid="measured",
            label=t["measured"].format(r=data["rounds"]),
        )
        for b, rate in zip(batches, rates):
            ax.annotate(
                f"{rate:.0f}",
                (b, rate),
                xytext=(7, -5),
                textcoords="offset points",
                ha="left",
                fontsize=10,
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_locator(FixedLocator(batches))
        ax.xaxis.set_major_formatter(lambda x, _: f"{x:.0f}")
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlim(batches[0] / 1.3, batches[-1] * 1.7)  # room for the last label
        ax.set_xlabel(t["x"], fontsize=10)
        ax.set_ylabel(t["y"], fontsize=10)
        ax.set_title(
            t["title"].format(n=data["model"]["parameters"] / 1e6), fontsize=11
        )
        ax.grid(alpha=0.6)
        for spine in ("top", "right"):
            ax.spines[spine].set_visible(False)
        ax.legend(loc="upper left", fontsize=10)
    return fig


def _throughput_alt() -> str:
    data = load_decode_batch()
    rows = data["rows"]
    listed = ", ".join(f"{r['tokens_per_s']:,.0f} at {r['batch']}" for r in rows)
    return (
        "Tokens per second against the batch size, both on log scales, for a Llama of "
        f"{data['model']['parameters'] / 1e6:.1f} million parameters decoding "
        f"{data['new_tokens']} tokens per row on one thread of the CPU that measured "
        f"it ({data['machine']['cpu']}), the median of {data['rounds']} rounds with a bar from the slowest to the fastest: {listed}. "
        "A dashed line shows batch 1's rate times B, what a step costing the same at "
        "every batch would give."
    )


SPECS: list[tuple] = [
    ("decode-bytes-per-token", bytes_per_token_figure, _bytes_alt()),
    ("decode-batch-throughput", throughput_figure, _throughput_alt()),
]
