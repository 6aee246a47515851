"""The YaRN figure draws what the code computes: each curve is DeepSeek-V3's published
YaRN frequencies, unstretched over stretched, at its factor; the ramp's ends are where
the pairs' turns cross the betas; the dotted lines are position interpolation's one
divisor; the alt text states the numbers the code gives."""

from __future__ import annotations

import math
import re

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.text import Text

from literate.figures import FIGURES, yarn_diagrams
from literate.figures.style import BLUE, ORANGE
from literate.numbers.published import published_config
from literate.parts.rope_scaling import yarn_inverse_frequencies

NAME = "yarn-two-factors"


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text().strip()]


def published_ratio(factor: float) -> list[float]:
    """theta_i / theta'_i from DeepSeek-V3's configuration read here, theta_i
    written out in float64, theta'_i from `yarn_inverse_frequencies`."""
    c = published_config("DeepSeek-V3")
    p, d = c.rope_parameters, c.qk_rope_head_dim
    scaled = yarn_inverse_frequencies(
        d,
        base=float(p["rope_theta"]),
        factor=factor,
        original_context=p["original_max_position_embeddings"],
        beta_fast=p["beta_fast"],
        beta_slow=p["beta_slow"],
    )
    theta = 1.0 / p["rope_theta"] ** (torch.arange(0, d, 2).double() / d)
    return (theta / scaled.double()).tolist()


def test_the_figure_is_registered_from_this_module():
    assert FIGURES[NAME].draw.__module__ == yarn_diagrams.__name__


def test_each_curve_is_the_codes_frequency_ratio_at_its_factor():
    curves = yarn_diagrams.yarn_divisors_at()
    assert [c.factor for c in curves] == [8.0, 40.0]
    c = published_config("DeepSeek-V3")
    assert c.rope_parameters["factor"] == 40  # the second is DeepSeek-V3's own
    for curve in curves:
        assert curve.original_context == 4096
        assert (curve.beta_fast, curve.beta_slow) == (32, 1)
        assert len(curve.divisors) == c.qk_rope_head_dim // 2 == 32
        assert curve.divisors == pytest.approx(published_ratio(curve.factor), rel=1e-6)
        assert curve.divisors[-1] == pytest.approx(curve.factor, rel=1e-6)
        assert all(
            a <= b * (1 + 1e-6) for a, b in zip(curve.divisors, curve.divisors[1:])
        )
    # inside the ramp the larger stretch divides more, outside the kept pairs agree
    small, big = curves
    assert all(b > s for s, b in zip(small.divisors[11:23], big.divisors[11:23]))
    assert small.divisors[:11] == big.divisors[:11] == (1.0,) * 11


def test_the_ramps_ends_are_where_the_turns_cross_the_betas_at_both_factors():
    c = published_config("DeepSeek-V3")
    base, d = c.rope_parameters["rope_theta"], c.qk_rope_head_dim
    turns = [4096 * base ** (-2 * i / d) / (2 * math.pi) for i in range(d // 2)]
    for curve in yarn_diagrams.yarn_divisors_at():
        lo, hi = curve.last_kept, curve.first_divided
        assert (lo, hi) == (10, 23)
        assert turns[lo] >= curve.beta_fast > turns[lo + 1]
        assert turns[hi - 1] > curve.beta_slow > turns[hi]


def test_the_figure_draws_the_curves_the_interpolation_lines_and_the_ramp():
    curves = yarn_diagrams.yarn_divisors_at()
    fig = FIGURES[NAME].draw(language="en", theme="light")
    try:
        ax = fig.axes[0]
        drawn = {
            line.get_marker(): line for line in ax.lines if line.get_marker() in "so"
        }
        for marker, curve, colour in (("s", curves[0], ORANGE), ("o", curves[1], BLUE)):
            line = drawn[marker]
            assert list(line.get_xdata()) == list(range(32))
            assert list(line.get_ydata()) == pytest.approx(
                published_ratio(curve.factor), rel=1e-6
            )
            assert line.get_color().lower() == colour.lower()
        dotted = sorted(
            line.get_ydata()[0] for line in ax.lines if line.get_linestyle() == ":"
        )
        assert dotted == [8.0, 40.0]
        dashed = sorted(
            line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == "--"
        )
        assert dashed == [10, 23]
        words = texts(fig)
        for s in ("8", "40"):
            assert f"position interpolation: every pair / {s}" in words
            assert f"YaRN, $s$ = {s}" in words
        assert "kept: > 32 turns\nin 4,096 positions" in words
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        assert ticks == [
            "0",
            "10\n$\\beta_{fast}$ = 32",
            "23\n$\\beta_{slow}$ = 1",
            "31",
        ]
    finally:
        plt.close(fig)


def test_it_draws_in_russian_with_the_same_numbers_and_legibly():
    figs = {
        lang: FIGURES[NAME].draw(language=lang, theme="light") for lang in ("en", "ru")
    }
    try:
        digits = {
            lang: sorted(
                re.findall(
                    r"\d+",
                    re.sub(r"(?<=\d)[,\u2009](?=\d{3})", "", " ".join(texts(fig))),
                )
            )
            for lang, fig in figs.items()
        }
        assert digits["en"] == digits["ru"]
        assert re.search("[а-я]", " ".join(texts(figs["ru"])))
        assert not re.search("[а-я]", " ".join(texts(figs["en"])))
        for fig in figs.values():
            width, height = fig.get_size_inches()
            assert width <= 5.2 and height <= 5.0
            sizes = [
                t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip()
            ]
            assert min(sizes) * 358 / (72 * width) >= 9
    finally:
        for fig in figs.values():
            plt.close(fig)


def test_the_alt_text_states_the_numbers_the_code_gives():
    small, big = yarn_diagrams.yarn_divisors_at()
    alt = FIGURES[NAME].alt
    assert f"1 for pairs 0 to {small.last_kept} at both" in alt
    assert f"the whole factor for pairs {small.first_divided} to 31" in alt
    assert (
        f"pair 18 is divided by {small.divisors[18]:.2f} at s = 8 and "
        f"{big.divisors[18]:.2f} at s = 40" in alt
    )
    assert f"pair 22 by {small.divisors[22]:.2f} and {big.divisors[22]:.2f}" in alt
    assert f"pair {small.last_kept} (beta_fast) and pair {small.first_divided}" in alt
