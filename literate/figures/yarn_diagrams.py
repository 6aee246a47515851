"""Diagrams: YaRN's frequencies at two stretch factors (chapter 10).

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

* "yarn-two-factors": what YaRN divides each rotary pair's frequency by, theta_i over
  theta'_i, for DeepSeek-V3's published RoPE (`deepseek_rope` of its configuration:
  64 rotated coordinates, base 10,000, original context 4,096, beta_fast 32, beta_slow
  1) stretched 8 and 40 times (`yarn_divisors_at`: `yarn_inverse_frequencies` with a
  factor of 1, which is chapter 2's theta_i, over the same with the factor), against
  position interpolation, which divides every pair by the factor.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from literate.figures.style import style, text
from literate.numbers.published import published_config
from literate.parts.rope_scaling import yarn_inverse_frequencies

__all__ = ["YARN_FACTORS", "YarnCurve", "yarn_divisors_at", "yarn_two_factors_figure"]


# --8<-- [start:yarn_divisors_at]
YARN_FACTORS = (8.0, 40.0)  # a small stretch, and DeepSeek-V3's own


@dataclass(frozen=True)
class YarnCurve:
    factor: float
    divisors: tuple[float, ...]  # per pair: theta_i / YaRN's frequency
    last_kept: int  # the last pair whose divisor is 1: the ramp's start
    first_divided: int  # the first pair divided by the whole factor: the ramp's end
    original_context: int
    beta_fast: float
    beta_slow: float


def yarn_divisors_at(factors: tuple[float, ...] = YARN_FACTORS) -> list[YarnCurve]:
    """Per factor, theta_i / theta'_i for DeepSeek-V3's YaRN settings (its
    configuration's, the factor replaced): `yarn_inverse_frequencies` with factor 1
    over the same with the factor, in float64 from the float32 frequencies."""
    from literate.models.deepseek_v3 import deepseek_rope

    rope, _ = deepseek_rope(published_config("DeepSeek-V3"))
    settings = dict(rope.yarn)
    d_rope, base = rope.rotary_dim, rope.base
    plain = yarn_inverse_frequencies(d_rope, base=base, **(settings | {"factor": 1.0}))
    curves = []
    for factor in factors:
        scaled = yarn_inverse_frequencies(
            d_rope, base=base, **(settings | {"factor": factor})
        )
        divisors = (plain.double() / scaled.double()).tolist()
        curves.append(
            YarnCurve(
                float(factor),
                tuple(divisors),
                max(i for i, x in enumerate(divisors) if x == 1.0),
                min(i for i, x in enumerate(divisors) if abs(x / factor - 1) < 1e-6),
                int(settings["original_context"]),
                float(settings["beta_fast"]),
                float(settings["beta_slow"]),
            )
        )
    return curves


# --8<-- [end:yarn_divisors_at]


# --8<-- [start:yarn_two_factors_figure]
LABELS = {
    "en": {
        "title": "YaRN, DeepSeek-V3: each pair's $\\theta_i$ divided by",
        "x": "rotary pair $i$ (fast pairs on the left)",
        "y": "divisor $\\theta_i / \\theta'_i$ (log scale)",
        "curve": "YaRN, $s$ = {s}",
        "linear": "position interpolation: every pair / {s}",
        "kept": "kept: > {b} turns\nin {L} positions",
        "start": "{i}\n$\\beta_{{fast}}$ = {b}",
        "end": "{i}\n$\\beta_{{slow}}$ = {b}",
        "ramp": "ramp",
    },
    "ru": {
        "title": "YaRN, DeepSeek-V3: во сколько раз делится $\\theta_i$",
        "x": "пара $i$ (быстрые пары слева)",
        "y": "делитель $\\theta_i / \\theta'_i$ (лог. шкала)",
        "curve": "YaRN, $s$ = {s}",
        "linear": "интерполяция позиций: все пары / {s}",
        "kept": "как есть: > {b} оборотов\nза {L} позиций",
        "start": "{i}\n$\\beta_{{fast}}$ = {b}",
        "end": "{i}\n$\\beta_{{slow}}$ = {b}",
        "ramp": "переход",
    },
}


def _plain(x: float) -> str:
    return f"{x:g}"


def yarn_two_factors_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """The divisor of each rotary pair's frequency at each factor: 1 up to the ramp,
    the factor after it, the same ramp for both; dotted, what position interpolation
    divides every pair by."""
    t = text(LABELS, language)
    curves = yarn_divisors_at()
    lo, hi = curves[0].last_kept, curves[0].first_divided
    if any((c.last_kept, c.first_divided) != (lo, hi) for c in curves):
        raise ValueError("the ramp's ends depend on the betas only, not on the factor")
    last = len(curves[0].divisors) - 1
    with style(theme) as p:
        # the smaller stretch orange, the larger blue: palette roles, so dark recolours
        colours = (p.series[1], p.series[0])
        fig, ax = plt.subplots(figsize=(5.2, 3.9), layout="constrained")
        ax.axvspan(lo, hi, color=p.empty, zorder=0)
        for x in (lo, hi):
            ax.axvline(x, color=p.muted, lw=1.0, ls="--", zorder=1)
        for curve, marker, colour in zip(curves, ("s", "o"), colours, strict=True):
            s = curve.factor
            ax.axhline(s, color=colour, lw=1.2, ls=":", zorder=2)
            ax.text(
                0,
                s * 1.12,
                t["linear"].format(s=_plain(s)),
                fontsize=10,
                color=p.ink,
                ha="left",
                va="bottom",
            )
            ax.plot(
                range(last + 1),
                curve.divisors,
                color=colour,
                lw=1.6,
                marker=marker,
                ms=4,
                zorder=3,
                label=t["curve"].format(s=_plain(s)),
            )
        top = max(c.factor for c in curves)
        ax.set_yscale("log")
        ax.set_ylim(0.7, top * 3.2)
        ticks = sorted({1, 2, 4, 20, *(c.factor for c in curves)})
        ax.set_yticks(ticks, [_plain(v) for v in ticks])
        ax.minorticks_off()
        ax.set_xlim(-1, last + 1)
        b_fast, b_slow = curves[0].beta_fast, curves[0].beta_slow
        ax.set_xticks(
            [0, lo, hi, last],
            [
                "0",
                t["start"].format(i=lo, b=_plain(b_fast)),
                t["end"].format(i=hi, b=_plain(b_slow)),
                str(last),
            ],
        )
        ax.set_xlabel(t["x"], fontsize=10.5)
        ax.set_ylabel(t["y"], fontsize=10.5)
        ax.set_title(t["title"], fontsize=11.5)
        ax.grid(axis="y", alpha=0.6)
        for spine in ("top", "right"):
            ax.spines[spine].set_visible(False)
        context = f"{curves[0].original_context:,}"
        context = context.replace(",", "\u2009" if language == "ru" else ",")
        ax.text(
            0,
            1.3,
            t["kept"].format(b=_plain(b_fast), L=context),
            fontsize=10,
            color=p.ink,
            ha="left",
            va="bottom",
            linespacing=1.2,
        )
        ax.text(
            (lo + hi) / 2,
            0.78,
            t["ramp"],
            ha="center",
            va="bottom",
            fontsize=10,
            color=p.muted,
        )
        ax.legend(loc="lower right", handlelength=1.6)
    return fig


# --8<-- [end:yarn_two_factors_figure]


SPECS: list[tuple] = [
    (
        "yarn-two-factors",
        yarn_two_factors_figure,
        "What YaRN divides each of DeepSeek-V3's 32 rotary pairs' frequencies by "
        "(original context 4,096, beta_fast 32, beta_slow 1), on a log scale, for "
        "stretch factors s = 8 and s = 40: 1 for pairs 0 to 10 at both; the whole "
        "factor for pairs 23 to 31; the same ramp between, where pair 18 is divided by "
        "2.17 at s = 8 and 2.50 at s = 40, and pair 22 by 5.20 and 10.00. Dotted lines "
        "at 8 and 40: position interpolation, which divides every pair by s. Dashed "
        "lines mark the ramp's ends, pair 10 (beta_fast) and pair 23 (beta_slow).",
    ),
]
