"""Chapter 11's cost diagrams draw what the page's functions compute: each published
model's parameters split into the embedding, N and the experts a token skips, and a
decoding step's FLOPs over 2N at 1, 8,192 and 131,072 keys."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.collections import PathCollection
from matplotlib.patches import Rectangle

from literate.figures import FIGURES
from literate.figures.eras_diagrams import (
    CONTEXTS,
    SPECS,
    parameter_splits,
    ratio_text,
    short_count,
    step_ratios,
)
from literate.numbers.flops import non_embedding_active, published_flops
from literate.numbers.published import (
    PUBLISHED_CONFIGS,
    parameter_counts,
    published_config,
)

CYRILLIC = re.compile("[\u0400-\u04ff]")
PAGE = Path(__file__).parents[1] / "docs" / "eras" / "side-by-side.md"
NAMES = [name for name, _, _ in SPECS]
MIXTURES = {"Mixtral 8x7B", "Qwen3-30B-A3B", "DeepSeek-V3", "gpt-oss-120b"}
UNITS = ((10**9, "B"), (10**6, "M"))


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(match=lambda a: hasattr(a, "get_text"))]


@pytest.fixture(scope="module")
def splits():
    return {s.name: s for s in parameter_splits()}


@pytest.fixture(scope="module")
def ratios():
    return {r.name: r for r in step_ratios()}


# ---------------------------------------------------------------- the parameters


def test_the_split_is_the_page_counts_and_adds_up_to_the_total(splits):
    assert list(splits) == list(PUBLISHED_CONFIGS)
    for name, s in splits.items():
        total, active = parameter_counts(name)
        assert (s.total, s.active, s.n) == (total, active, non_embedding_active(name))
        assert s.embedding + s.n + s.skipped == total
        # the embedding tables, counted a second way: the token table (GPT-2: and the
        # positions' table)
        c = published_config(name)
        tables = c.vocab_size * c.hidden_size
        if c.model_type == "gpt2":
            tables += c.n_positions * c.hidden_size
        assert s.embedding == tables, name
        assert (s.skipped > 0) == (name in MIXTURES), name


def test_the_bars_are_the_shares_side_by_side(splits):
    fig = FIGURES["eras-parameter-split"].draw(language="en", theme="light")
    bars = {
        p.get_gid(): p
        for p in fig.findobj(Rectangle)
        if (p.get_gid() or "").startswith("split-")
    }
    for row, (name, s) in enumerate(splits.items()):
        left = 0.0
        for part in ("embedding", "n", "skipped"):
            share = getattr(s, part) / s.total
            bar = bars.pop(f"split-{name}-{part}", None)
            if share == 0:
                assert bar is None, (name, part)
                continue
            assert bar.get_width() == pytest.approx(share, abs=1e-12), (name, part)
            assert bar.get_x() == pytest.approx(left, abs=1e-12), (name, part)
            assert bar.get_y() + bar.get_height() / 2 == pytest.approx(row)
            left += share
        assert left == pytest.approx(1.0)
    assert not bars
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [f"{n} · {short_count(s.total, UNITS)}" for n, s in splits.items()]
    words = texts(fig)
    assert "32%" in words  # GPT-2 small's embedding
    assert f"{splits['DeepSeek-V3'].skipped / splits['DeepSeek-V3'].total:.0%}" in words
    plt.close(fig)


def test_short_counts():
    assert short_count(124_439_808, UNITS) == "124M"
    assert short_count(8_030_261_248, UNITS) == "8.03B"
    assert short_count(46_702_792_704, UNITS) == "46.7B"
    assert short_count(671_026_419_200, UNITS) == "671B"


# ---------------------------------------------------------------- FLOPs over 2N


def test_the_ratios_are_the_step_flops_over_two_n_within_each_context(ratios):
    assert list(ratios) == list(PUBLISHED_CONFIGS)
    for name, r in ratios.items():
        c = published_config(name)
        context = getattr(c, "max_position_embeddings", None) or c.n_positions
        two_n = 2 * non_embedding_active(name)
        assert (r.two_n, r.context) == (two_n, context)
        assert set(r.ratios) == {k for k in CONTEXTS if k <= context}, name
        for keys, ratio in r.ratios.items():
            assert ratio == published_flops(name, keys)["total"] / two_n
    # the page's claim: GPT-2 small's tied head puts its one-key step at 1.45 x 2N;
    # Mistral's context (32,768) holds no 131,072 keys; DeepSeek-V3's latent reads all
    assert round(ratios["GPT-2 small"].ratios[1], 2) == 1.45
    assert 131_072 not in ratios["Mistral 7B v0.1"].ratios
    assert round(ratios["Gemma 3 27B"].ratios[131_072], 2) == 1.49
    assert ratios["DeepSeek-V3"].ratios[131_072] > 30


def test_the_markers_sit_at_the_ratios(ratios):
    fig = FIGURES["eras-flops-over-2n"].draw(language="en", theme="light")
    ax = fig.axes[0]
    points = {
        c.get_label(): tuple(c.get_offsets()[0])
        for c in ax.findobj(PathCollection)
        if c.get_label().startswith("_")
    }
    expected = {
        f"_{name} {keys}": (ratio, row)
        for row, (name, r) in enumerate(ratios.items())
        for keys, ratio in r.ratios.items()
    }
    assert points.keys() == expected.keys()
    for label, (x, y) in expected.items():
        assert points[label] == pytest.approx((x, y), rel=1e-12), label
    words = texts(fig)
    for name, r in ratios.items():
        assert f"×{ratio_text(max(r.ratios.values()))}" in words, name
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [f"{n} · {r.two_n / 1e9:,.1f}" for n, r in ratios.items()]
    plt.close(fig)


def test_ratio_text():
    assert [ratio_text(x) for x in (1.0, 1.4525, 31.401)] == ["1.00", "1.45", "31.4"]


# ---------------------------------------------------------------- alt text and page


def test_the_alt_texts_state_what_the_functions_compute(splits, ratios):
    alt = dict((name, a) for name, _, a in SPECS)
    split = alt["eras-parameter-split"]

    def pct(s, part):
        return f"{getattr(s, part) / s.total:.0%}".replace("%", " percent")

    gpt2, llama2 = splits["GPT-2 small"], splits["Llama 2 7B"]
    assert f"{pct(gpt2, 'embedding')} of GPT-2 small's 124 million" in split
    assert f"{pct(llama2, 'embedding')} of Llama 2 7B's 6.74 billion" in split
    assert round(llama2.total / 1e9, 2) == 6.74
    for name, text in (
        ("Mixtral 8x7B", "Mixtral 8x7B {} of 46.7 billion"),
        ("Qwen3-30B-A3B", "Qwen3-30B-A3B {}"),
        ("DeepSeek-V3", "DeepSeek-V3 {} of 671 billion"),
        ("gpt-oss-120b", "gpt-oss-120b {} of 117"),
    ):
        assert text.format(pct(splits[name], "skipped")) in split, name
    flops = alt["eras-flops-over-2n"]
    for name, keys in (
        ("GPT-2 small", 1),
        ("Llama 3 8B", 8_192),
        ("Qwen3-30B-A3B", 8_192),
        ("DeepSeek-V3", 8_192),
        ("Gemma 3 27B", 131_072),
        ("gpt-oss-120b", 131_072),
        ("DeepSeek-V3", 131_072),
    ):
        value = ratio_text(ratios[name].ratios[keys])
        assert re.search(rf"{re.escape(name)}[^.]*?{re.escape(value)}", flops), (
            name,
            keys,
            value,
        )
    off_the_line = {
        n for n, r in ratios.items() if abs(r.ratios[1] - 1) > 1e-3
    }  # the tied heads
    assert off_the_line == {
        "GPT-2 small",
        "GPT-2 XL",
        "Qwen3-0.6B",
        "Gemma 3 27B",
        "Command R v01",
    }
    assert ratio_text(ratios["Qwen3-0.6B"].ratios[1]) == "1.35"
    assert "Qwen3-0.6B (1.35)" in flops
    assert ratio_text(ratios["Command R v01"].ratios[1]) == "1.06"
    assert "Command R v01 (1.06)" in flops


def test_the_figures_are_on_the_page_at_column_zero_outside_folds():
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    for name in NAMES:
        for theme in ("light", "dark"):
            wanted = f"![](../figures/{name}-{theme}.svg#only-{theme}){{ .figure }}"
            assert lines.count(wanted) == 1, wanted
            i = lines.index(wanted)
            # the nearest unindented line above that opens a block is no fold
            above = next(
                line for line in reversed(lines[:i]) if line and not line[0].isspace()
            )
            assert not above.startswith(("???", "!!!")), (name, above)
    split = lines.index(
        "![](../figures/eras-parameter-split-light.svg#only-light){ .figure }"
    )
    flops = lines.index(
        "![](../figures/eras-flops-over-2n-light.svg#only-light){ .figure }"
    )
    headings = {line: i for i, line in enumerate(lines) if line.startswith("#")}
    assert (
        headings["### Parameters, total and active"]
        < split
        < headings["### The cache per token"]
    )
    assert headings["### FLOPs per token"] < flops < headings["## Downloads"]


@pytest.mark.parametrize("name", NAMES)
def test_the_figure_draws_in_each_language_and_theme(name):
    words = {}
    for language in ("en", "ru"):
        for theme in ("light", "dark"):
            fig = FIGURES[name].draw(language=language, theme=theme)
            words[language] = " ".join(texts(fig))
            w, h = fig.get_size_inches()
            assert w <= 5.2 and h <= 5.0
            fonts = [
                t.get_fontsize()
                for t in fig.findobj(match=lambda a: hasattr(a, "get_fontsize"))
                if t.get_text().strip()
            ]
            assert min(fonts) >= 10, (name, min(fonts))
            plt.close(fig)
    assert CYRILLIC.search(words["ru"]) and not CYRILLIC.search(words["en"])
