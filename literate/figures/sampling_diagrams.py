"""Diagrams (issue 26): drawn from the code, light and dark, English and Russian.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

Chapter 6: temperature from greedy to uniform, the three filters in their order (and
what the other order keeps), the exponential race `draw` runs (and 20,000 draws
counted), and `decode_trace` stopping at EOS or at the length limit. Every number is
computed here by the chapter's own functions.
"""

# Over 450 lines on purpose: chapter 6's five diagrams, each with its English
# and Russian labels and the run of the page's sampler it reads its numbers from.

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Rectangle

from literate.decoding.sampling import (
    decode_trace,
    draw,
    next_token_distribution,
    sample_step,
    top_k_filter,
    top_p_filter,
)
from literate.figures.style import BOX_INK, style, text

F64 = torch.float64
LOGITS = (3.0, 2.0, 1.0, 0.0)  # the page's z
MARKED_TEMPERATURES = (0.5, 1.0, 2.0)  # the page prints these
ORDER_TOP_K, ORDER_TOP_P = 3, 0.9  # the page's example of "top-k, then top-p"
RACE_SEED = 2  # one draw, shown in full
COUNT_SEED, COUNT_DRAWS = 7, 20_000  # the page's count
# The page's bigram "model" over five tokens (token 4 is EOS), prompt token 0.
BIGRAM = (
    (0.0, 3.0, 1.0, 0.0, -2.0),
    (0.0, 0.0, 3.0, 1.0, -2.0),
    (2.0, 0.0, 0.0, 3.0, 0.5),
    (0.0, 0.0, 0.0, 0.0, 3.0),
    (0.0, 0.0, 0.0, 0.0, 0.0),
)
BIGRAM_EOS, BIGRAM_LIMIT, TRACE_SEED = 4, 10, 2


def fmt(value: float, language: str, digits: int = 2) -> str:
    s = f"{value:.{digits}f}"
    return s.replace(".", ",") if language == "ru" else s


def canvas(width: float, height: float):
    """A figure and one axes whose data coordinates are inches from the bottom left."""
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    return fig, ax


def cell(ax, x, y, w, h, label, *, face, ink, gid=None, size=11, edge=None):
    """A rounded box with a centred label; returns the label's Text."""
    ax.add_patch(
        FancyBboxPatch(
            (x + 0.03, y + 0.03),
            w - 0.06,
            h - 0.06,
            boxstyle="round,pad=0,rounding_size=0.05",
            facecolor=face,
            edgecolor=edge or face,
            linewidth=1.0,
        )
    )
    t = ax.text(x + w / 2, y + h / 2, label, ha="center", va="center", fontsize=size)
    t.set_color(ink)
    if gid:
        t.set_gid(gid)
    return t


# --- sampling-temperature ----------------------------------------------------------


def temperature_curves(n: int = 121) -> tuple[np.ndarray, np.ndarray]:
    """Temperatures from 0.1 to 10 (log-spaced) and p_T of each token: [n], [n, V]."""
    temperatures = np.logspace(-1, 1, n)
    z = torch.tensor(LOGITS, dtype=F64)
    probs = [next_token_distribution(z, temperature=float(t)) for t in temperatures]
    return temperatures, torch.stack(probs).numpy()


TEMPERATURE_LABELS = {
    "en": {
        "title": "Temperature on the logits [3, 2, 1, 0]",
        "x": "Temperature T (log scale)",
        "y": "Probability p_T(i)",
        "token": "ID {i}",
        "cold": "T → 0: greedy,\none-hot on ID 0",
        "hot": "T → ∞:\nuniform, 1/4",
    },
    "ru": {
        "title": "Температура на логитах [3, 2, 1, 0]",
        "x": "Температура T (лог. шкала)",
        "y": "Вероятность p_T(i)",
        "token": "ID {i}",
        "cold": "T → 0: жадный,\nвсё на ID 0",
        "hot": "T → ∞:\nравномерно, 1/4",
    },
}


def temperature_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """p_T of each of the four tokens against T: the curves never cross (no
    reordering), ID 0 goes to 1 as T -> 0, all go to 1/4 as T grows."""
    t = text(TEMPERATURE_LABELS, language)
    temperatures, probs = temperature_curves()
    z = torch.tensor(LOGITS, dtype=F64)
    with style(theme) as p:
        fig = plt.figure(figsize=(5.2, 3.6), layout="constrained")
        ax = fig.add_subplot()
        for i in range(len(LOGITS)):
            ax.plot(
                temperatures,
                probs[:, i],
                color=p.series[i],
                lw=2.2,
                label=t["token"].format(i=i),
            )
        for temperature in MARKED_TEMPERATURES:
            ax.axvline(temperature, color=p.border, lw=1.2, ls="--")
            top = next_token_distribution(z, temperature=temperature)[0].item()
            ax.plot([temperature], [top], "o", color=p.series[0], ms=6)
            label = ax.text(
                temperature * 1.06,
                top + 0.035,
                fmt(top, language),
                fontsize=10,
                color=p.ink,
            )
            label.set_gid(f"top-{temperature:g}")
        ax.axhline(0.25, color=p.muted, lw=1, ls=":")
        ax.text(0.12, 0.82, t["cold"], fontsize=10, color=p.muted, va="top")
        ax.text(9.5, 0.97, t["hot"], fontsize=10, color=p.muted, ha="right", va="top")
        ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncol=4, borderaxespad=0.2)
        ax.set_xscale("log")
        ax.set_xlim(0.1, 10)
        ax.set_ylim(0, 1.04)
        ax.set_xticks([0.1, 0.5, 1, 2, 10], ["0.1", "0.5", "1", "2", "10"])
        ax.set_xlabel(t["x"])
        ax.set_ylabel(t["y"])
        ax.set_title(t["title"], fontsize=12, pad=26)
        ax.grid(axis="y", alpha=0.6)
        for spine in ("top", "right"):
            ax.spines[spine].set_visible(False)
    return fig


# --- sampling-top-k-ties -----------------------------------------------------------

TIED_LOGITS, TIED_K = (3.0, 2.0, 2.0, 2.0, 0.0), 2  # the page's example


def top_k_ties() -> dict[str, object]:
    """`top_k_filter` on the page's tied logits: the k-th largest value (the cut) and
    which tokens stay."""
    logits = torch.tensor(TIED_LOGITS, dtype=F64)
    kept = torch.isfinite(top_k_filter(logits, TIED_K))
    kth = logits.topk(TIED_K).values[-1].item()
    return {"kept": kept.tolist(), "kth": kth}


TIES_LABELS = {
    "en": {
        "title": "top-k = {k} of [3, 2, 2, 2, 0] keeps {n} tokens",
        "cut": "the cut: the k-th largest logit, {v}",
        "kept": "kept (not below the cut)",
        "removed": "below the cut: −∞",
        "token": "ID {i}",
        "y": "Logit",
    },
    "ru": {
        "title": "top-k = {k} от [3, 2, 2, 2, 0] оставляет {n} токена",
        "cut": "порог: k-й по величине логит, {v}",
        "kept": "оставлен (не ниже порога)",
        "removed": "ниже порога: −∞",
        "token": "ID {i}",
        "y": "Логит",
    },
}


def top_k_ties_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Bars of the five logits, the k-th largest as a dashed line: the three tokens
    tied with it are not below it, so four stay."""
    t = text(TIES_LABELS, language)
    run = top_k_ties()
    kept, kth = run["kept"], run["kth"]
    x = np.arange(len(TIED_LOGITS))
    with style(theme) as p:
        fig = plt.figure(figsize=(5.2, 2.9), layout="constrained")
        ax = fig.add_subplot()
        for xi, value, keep in zip(x, TIED_LOGITS, kept):
            colour = p.series[0] if keep else p.muted
            ax.bar(
                xi,
                value if value else 0.08,
                0.62,
                color=colour,
                alpha=1.0 if keep else 0.35,
                label=t["kept"] if keep and xi == 0 else None,
            )
            mark = ax.text(
                xi,
                max(value, 0.08) + 0.12,
                fmt(value, language, 0) if keep else "−∞",
                ha="center",
                fontsize=10,
                color=p.ink if keep else p.muted,
            )
            mark.set_gid(f"tie-{xi}")
        ax.add_patch(
            Rectangle((0, 0), 0, 0, color=p.muted, alpha=0.35, label=t["removed"])
        )
        ax.axhline(kth, color=p.series[4], ls="--", lw=1.5)
        cut = ax.text(
            0.42,
            kth + 0.42,
            t["cut"].format(k=TIED_K, v=fmt(kth, language, 0)),
            ha="left",
            fontsize=10,
            color=p.series[4],
        )
        cut.set_gid("tie-cut")
        ax.set_xticks(x, [t["token"].format(i=i) for i in x])
        ax.set_ylim(0, 3.9)
        ax.set_xlim(-0.5, 4.5)
        ax.set_ylabel(t["y"])
        title = t["title"].format(k=TIED_K, n=sum(kept))
        ax.set_title(title, fontsize=12).set_gid("tie-title")
        ax.legend(loc="upper right", fontsize=10)
        for spine in ("top", "right"):
            ax.spines[spine].set_visible(False)
    return fig


# --- sampling-order ----------------------------------------------------------------


def order_stages() -> dict[str, list[float]]:
    """The distribution after each step of our order (T = 1, top-k, top-p), the other
    order's result, and the two masses that decide whether ID 2 stays."""
    z = torch.tensor(LOGITS, dtype=F64)
    softmax = next_token_distribution(z)
    after_k = torch.softmax(top_k_filter(z, ORDER_TOP_K), dim=-1)
    ours = next_token_distribution(z, top_k=ORDER_TOP_K, top_p=ORDER_TOP_P)
    other = torch.softmax(top_k_filter(top_p_filter(z, ORDER_TOP_P), ORDER_TOP_K), -1)
    return {
        "softmax": softmax.tolist(),
        "top_k": after_k.tolist(),
        "ours": ours.tolist(),
        "other": other.tolist(),
        "mass_ours": after_k[:2].sum().item(),  # mass ranked above ID 2, after top-k
        "mass_other": softmax[:2].sum().item(),  # the same on the full distribution
    }


ORDER_LABELS = {
    "en": {
        "title": "The three steps in order, top-k = {k}, top-p = {p}",
        "logits": "logits z",
        "softmax": "1. softmax(z / T), T = 1",
        "top_k": "2. top-k = {k}, renormalised",
        "ours": "3. top-p = {p} of step 2",
        "other": "top-p first, then top-k",
        "why_ours": "ranked above ID 2: {m} ≥ {p}, so ID 2 goes: {n} tokens",
        "why_other": "on the full distribution {m} < {p}, ID 2 stays: {n} tokens",
        "token": "ID {i}",
    },
    "ru": {
        "title": "Три шага по порядку, top-k = {k}, top-p = {p}",
        "logits": "логиты z",
        "softmax": "1. softmax(z / T), T = 1",
        "top_k": "2. top-k = {k}, нормировка",
        "ours": "3. top-p = {p} от шага 2",
        "other": "сначала top-p, потом top-k",
        "why_ours": "выше ID 2: {m} ≥ {p}, ID 2 убран: {n} токена",
        "why_other": "на полном распределении {m} < {p}, ID 2 остаётся: {n} токена",
        "token": "ID {i}",
    },
}


def order_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """A grid: one row per step, one column per token, each cell the probability (a
    cross where the token was removed); under it the other order's row."""
    t = text(ORDER_LABELS, language)
    stages = order_stages()
    k, top_p = ORDER_TOP_K, fmt(ORDER_TOP_P, language, 1)
    w, h, left, cw = 5.2, 4.3, 2.35, 0.68
    with style(theme) as p:
        fig, ax = canvas(w, h)
        ax.text(
            0.05,
            h - 0.22,
            t["title"].format(k=k, p=top_p),
            fontsize=12,
            fontweight="bold",
            va="center",
            color=p.ink,
        )
        y = h - 0.72
        for i in range(len(LOGITS)):
            ax.text(
                left + (i + 0.5) * cw,
                y,
                t["token"].format(i=i),
                ha="center",
                va="center",
                fontsize=10,
                color=p.muted,
            )
        rows = [
            ("logits", t["logits"], [fmt(v, language, 0) for v in LOGITS], None),
            ("softmax", t["softmax"], stages["softmax"], p.series[0]),
            ("top_k", t["top_k"].format(k=k), stages["top_k"], p.series[0]),
            ("ours", t["ours"].format(p=top_p), stages["ours"], p.series[2]),
            ("other", t["other"], stages["other"], p.series[1]),
        ]
        y -= 0.52
        for key, label, values, colour in rows:
            if key == "other":
                y -= 0.1
            ax.text(0.05, y, label, va="center", fontsize=10, color=p.ink)
            for i, value in enumerate(values):
                x0 = left + i * cw
                if colour is None:
                    cell(
                        ax,
                        x0,
                        y - 0.22,
                        cw,
                        0.44,
                        value,
                        face=p.empty,
                        ink=p.ink,
                        gid=f"{key}-{i}",
                    )
                elif value > 0:
                    cell(
                        ax,
                        x0,
                        y - 0.22,
                        cw,
                        0.44,
                        fmt(value, language),
                        face=colour,
                        ink=BOX_INK,
                        gid=f"{key}-{i}",
                    )
                else:
                    cell(
                        ax,
                        x0,
                        y - 0.22,
                        cw,
                        0.44,
                        "×",
                        face="none",
                        ink=p.muted,
                        gid=f"{key}-{i}",
                        edge=p.border,
                    )
            if key in ("ours", "other"):
                kept = sum(v > 0 for v in values)
                mass = fmt(stages[f"mass_{key}"], language)
                note = t[f"why_{key}"].format(m=mass, p=top_p, n=kept)
                ax.text(
                    0.05, y - 0.4, note, va="center", fontsize=10, color=p.muted
                ).set_gid(f"why-{key}")
                y -= 0.3
            y -= 0.5
    return fig


# --- sampling-race ------------------------------------------------------------------


def race() -> dict[str, list[float] | int]:
    """One draw from the top-p = 0.9 distribution of z, seed RACE_SEED: the waiting
    times q ~ Exp(1) that `draw` draws, p / q, and the winner (= `draw`'s token)."""
    z = torch.tensor(LOGITS, dtype=F64)
    probs = next_token_distribution(z, top_p=ORDER_TOP_P)
    generator = torch.Generator().manual_seed(RACE_SEED)
    q = torch.empty_like(probs).exponential_(1.0, generator=generator)
    token = int(draw(probs, torch.Generator().manual_seed(RACE_SEED)))
    return {
        "p": probs.tolist(),
        "q": q.tolist(),
        "ratio": (probs / q).tolist(),
        "token": token,
    }


def counted() -> tuple[list[float], list[float]]:
    """The page's count: frequencies of 20,000 seeded draws, and the probabilities."""
    z = torch.tensor(LOGITS, dtype=F64)
    generator = torch.Generator().manual_seed(COUNT_SEED)
    draws = sample_step(
        z.expand(COUNT_DRAWS, len(LOGITS)), top_p=ORDER_TOP_P, generator=generator
    )
    frequencies = torch.bincount(draws, minlength=len(LOGITS)).double() / COUNT_DRAWS
    probs = next_token_distribution(z, top_p=ORDER_TOP_P)
    return frequencies.tolist(), probs.tolist()


RACE_LABELS = {
    "en": {
        "title": "One draw: the largest p / q wins (seed {s})",
        "head": ("", "p", "q ~ Exp(1)", "p / q"),
        "token": "ID {i}",
        "wins": "← drawn",
        "count_title": "{n} draws counted (seed {s})",
        "probability": "probability p",
        "frequency": "frequency",
        "y": "Share",
    },
    "ru": {
        "title": "Один розыгрыш: побеждает max p / q (seed {s})",
        "head": ("", "p", "q ~ Exp(1)", "p / q"),
        "token": "ID {i}",
        "wins": "← выбран",
        "count_title": "{n} розыгрышей, подсчёт (seed {s})",
        "probability": "вероятность p",
        "frequency": "частота",
        "y": "Доля",
    },
}


def race_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Top: a table of p, q and p / q for one seeded draw, the winner marked. Bottom:
    the frequencies of 20,000 draws next to the probabilities."""
    t = text(RACE_LABELS, language)
    one = race()
    frequencies, probs = counted()
    n = f"{COUNT_DRAWS:,}".replace(",", "\u202f" if language == "ru" else ",")
    w, h = 5.2, 5.4
    with style(theme) as p:
        fig, ax = canvas(w, h)
        ax.text(
            0.05,
            h - 0.22,
            t["title"].format(s=RACE_SEED),
            fontsize=12,
            fontweight="bold",
            va="center",
            color=p.ink,
        )
        columns = (0.05, 0.95, 1.95, 3.05)
        widths = (0.8, 0.9, 1.0, 1.0)
        y = h - 0.62
        for x0, cw, head in zip(columns, widths, t["head"]):
            ax.text(
                x0 + cw / 2,
                y,
                head,
                ha="center",
                va="center",
                fontsize=10,
                color=p.muted,
            )
        for i in range(len(LOGITS)):
            y -= 0.4
            winner = i == one["token"]
            ax.text(
                columns[0] + 0.05,
                y,
                t["token"].format(i=i),
                va="center",
                fontsize=10,
                color=p.ink,
            )
            values = (one["p"][i], one["q"][i], one["ratio"][i])
            for j, value in enumerate(values):
                face = p.series[1] if winner and j == 2 else p.empty
                ink = BOX_INK if winner and j == 2 else p.ink
                cell(
                    ax,
                    columns[j + 1],
                    y - 0.18,
                    widths[j + 1],
                    0.36,
                    fmt(value, language),
                    face=face,
                    ink=ink,
                    size=10,
                    gid=f"race-{('p', 'q', 'ratio')[j]}-{i}",
                )
            if winner:
                ax.text(
                    4.1,
                    y,
                    t["wins"],
                    va="center",
                    fontsize=10,
                    color=p.series[1],
                    fontweight="bold",
                ).set_gid("race-winner")
        # the count, as bars in an inset axes
        count = fig.add_axes((0.14, 0.07, 0.83, 0.37))
        x = np.arange(len(LOGITS))
        count.bar(x - 0.18, probs, 0.34, color=p.series[0], label=t["probability"])
        count.bar(x + 0.18, frequencies, 0.34, color=p.series[1], label=t["frequency"])
        for xi, f in zip(x, frequencies):
            label = count.text(
                xi + 0.18,
                f + 0.02,
                fmt(f, language, 3),
                ha="center",
                fontsize=10,
                color=p.ink,
            )
            label.set_gid(f"frequency-{xi}")
        count.set_xticks(x, [t["token"].format(i=i) for i in x])
        count.set_ylim(0, 0.85)
        count.set_ylabel(t["y"], fontsize=10)
        count.set_title(t["count_title"].format(n=n, s=COUNT_SEED), fontsize=11)
        count.legend(loc="upper right", fontsize=10)
        count.grid(axis="y", alpha=0.6)
        for spine in ("top", "right"):
            count.spines[spine].set_visible(False)
    return fig


# --- sampling-stop -----------------------------------------------------------------


def bigram_traces() -> dict[str, tuple[list[int], str, list[float]]]:
    """`decode_trace` on the bigram table, greedy and sampled (seed TRACE_SEED): the
    tokens, the stop reason, and the probability each token had at its step."""
    bigram = torch.tensor(BIGRAM, dtype=F64)

    def next_logits(generated: tuple[int, ...]) -> torch.Tensor:
        return bigram[generated[-1] if generated else 0]  # [V]

    generator = torch.Generator().manual_seed(TRACE_SEED)
    runs = {
        "greedy": decode_trace(
            next_logits, eos_id=BIGRAM_EOS, max_new_tokens=BIGRAM_LIMIT
        ),
        "sampled": decode_trace(
            next_logits,
            eos_id=BIGRAM_EOS,
            max_new_tokens=BIGRAM_LIMIT,
            choose=lambda row: sample_step(row, generator=generator),
        ),
    }
    out = {}
    for name, (tokens, reason) in runs.items():
        previous = [0, *tokens[:-1]]
        probs = [
            next_token_distribution(bigram[a])[b].item()
            for a, b in zip(previous, tokens)
        ]
        out[name] = (tokens, reason, probs)
    return out


STOP_LABELS = {
    "en": {
        "title": "decode_trace on the bigram table, limit {n}",
        "greedy": "greedy",
        "sampled": "sampled, seed {s}",
        "eos": "stop: EOS (ID {e}), kept",
        "length_limit": "stop: the limit, {n} tokens",
        "p": "the number under a token: its probability at that step",
    },
    "ru": {
        "title": "decode_trace на таблице биграмм, предел {n}",
        "greedy": "жадно",
        "sampled": "сэмплирование, seed {s}",
        "eos": "стоп: EOS (ID {e}), сохранён",
        "length_limit": "стоп: предел, {n} токенов",
        "p": "число под токеном: его вероятность на этом шаге",
    },
}


def stop_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Two rows of token boxes after the prompt 0: greedy reaches EOS in four steps,
    the sampled run wanders and is stopped by the limit; each token's probability."""
    t = text(STOP_LABELS, language)
    traces = bigram_traces()
    w, h, bw, x0 = 5.2, 3.5, 0.44, 0.3
    with style(theme) as p:
        fig, ax = canvas(w, h)
        ax.text(
            0.05,
            h - 0.22,
            t["title"].format(n=BIGRAM_LIMIT),
            fontsize=12,
            fontweight="bold",
            va="center",
            color=p.ink,
        )
        y = h - 0.75
        for name in ("greedy", "sampled"):
            tokens, reason, probs = traces[name]
            label = t[name].format(s=TRACE_SEED)
            ax.text(
                0.05,
                y + 0.02,
                label,
                fontsize=11,
                color=p.ink,
                va="bottom",
                fontweight="bold",
            )
            y -= 0.32
            cell(
                ax,
                x0,
                y - 0.2,
                bw,
                0.4,
                "0",
                face=p.empty,
                ink=p.muted,
                gid=f"{name}-prompt",
            )
            for i, (token, prob) in enumerate(zip(tokens, probs)):
                xi = x0 + (i + 1) * bw
                eos = token == BIGRAM_EOS
                face = p.series[4] if eos else p.series[0 if name == "greedy" else 1]
                cell(
                    ax,
                    xi,
                    y - 0.2,
                    bw,
                    0.4,
                    str(token),
                    face=face,
                    ink=BOX_INK,
                    gid=f"{name}-token-{i}",
                )
                ax.text(
                    xi + bw / 2,
                    y - 0.36,
                    fmt(prob, language),
                    ha="center",
                    va="center",
                    fontsize=10,
                    color=p.muted,
                    rotation=0,
                ).set_gid(f"{name}-p-{i}")
            stop = t[reason].format(e=BIGRAM_EOS, n=BIGRAM_LIMIT)
            if reason == "eos":
                sx, ha = x0 + (len(tokens) + 1) * bw + 0.1, "left"
                sy = y
            else:
                sx, ha, sy = x0, "left", y - 0.66
            ax.text(
                sx,
                sy,
                stop,
                ha=ha,
                va="center",
                fontsize=10,
                color=p.series[4] if reason == "eos" else p.ink,
            ).set_gid(f"{name}-stop")
            y -= 1.0
        ax.text(0.05, 0.16, t["p"], fontsize=10, color=p.muted, va="center")
    return fig


SPECS: list[tuple] = [
    (
        "sampling-temperature",
        temperature_figure,
        "The probabilities of the four tokens of the logits 3, 2, 1, 0 as the "
        "temperature goes from 0.1 to 10 on a log scale. The curves never cross. As T "
        "falls, ID 0 takes everything (greedy); as T grows, all four approach 1/4. ID "
        "0's probability is 0.86 at T = 0.5, 0.64 at T = 1 and 0.46 at T = 2.",
    ),
    (
        "sampling-top-k-ties",
        top_k_ties_figure,
        "The logits 3, 2, 2, 2, 0 as bars, with top-k = 2. The cut is the 2nd largest "
        "logit, 2, drawn as a dashed line; the three tokens equal to it are not below "
        "it, so IDs 0 to 3 are kept, four tokens, and only ID 4 becomes minus infinity.",
    ),
    (
        "sampling-order",
        order_figure,
        "The logits 3, 2, 1, 0 through the three steps in order. Softmax at T = 1: "
        "0.64, 0.24, 0.09, 0.03. Top-k = 3 removes ID 3 and renormalises: 0.67, 0.24, "
        "0.09. Top-p = 0.9 on that: IDs 0 and 1 already hold 0.91, so ID 2 is removed, "
        "leaving 0.73 and 0.27, two tokens. Top-p first, on the full distribution, "
        "sees 0.88 above ID 2, keeps it, and ends with three tokens: 0.67, 0.24, 0.09.",
    ),
    (
        "sampling-race",
        race_figure,
        "One seeded draw from the top-p = 0.9 distribution 0.67, 0.24, 0.09, 0: each "
        "token gets an exponential waiting time q, and the token with the largest p "
        "divided by q is drawn; the removed ID 3 has p = 0 and never wins. Below, "
        "20,000 seeded draws counted: the frequencies 0.666, 0.245, 0.089 and 0 sit "
        "next to the probabilities.",
    ),
    (
        "sampling-stop",
        stop_figure,
        "decode_trace on the page's bigram table from token 0, with EOS token 4 and a "
        "limit of 10. Greedy follows the most likely next token, 1, 2, 3, then EOS, and "
        "stops there, keeping it. Sampling with seed 2 draws 1, 2, 0, 2, 3, 2, 0, 1, 1, "
        "2, never EOS, and is stopped by the limit. Each token is shown with the "
        "probability it had at its step.",
    ),
]
