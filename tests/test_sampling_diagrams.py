"""Chapter 6's diagrams draw what the chapter's functions compute: `sampling-temperature`
the softmax of z / T, `sampling-order` the three filters in their order and the other
order, `sampling-race` the waiting times `draw` draws and the page's count,
`sampling-stop` `decode_trace` on the page's bigram table. Each check also fails on a
figure of other numbers."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.text import Text

from literate.decoding.sampling import (
    decode_trace,
    draw,
    next_token_distribution,
    sample_step,
    top_k_filter,
    top_p_filter,
)
from literate.figures import FIGURES
from literate.figures import sampling_diagrams as sd

F64 = torch.float64
PAGE = Path(__file__).parents[1] / "docs" / "decoding" / "sampling.md"
NAMES = (
    "sampling-temperature",
    "sampling-top-k-ties",
    "sampling-order",
    "sampling-race",
    "sampling-stop",
)


def drawn(fig) -> dict[str, str]:
    return {t.get_gid(): t.get_text() for t in fig.findobj(Text) if t.get_gid()}


def fmt(v: float, language: str, digits: int = 2) -> str:
    s = f"{v:.{digits}f}"
    return s.replace(".", ",") if language == "ru" else s


def render(name: str, language: str) -> dict[str, str]:
    fig = FIGURES[name].draw(language=language, theme="light")
    try:
        return drawn(fig)
    finally:
        plt.close(fig)


z = torch.tensor([3.0, 2.0, 1.0, 0.0], dtype=F64)


def test_the_figures_use_the_pages_logits_and_bigram_table():
    page = PAGE.read_text(encoding="utf-8")
    assert "z = torch.tensor([3.0, 2.0, 1.0, 0.0], dtype=F64)" in page
    assert sd.LOGITS == tuple(z.tolist())
    rows = re.findall(
        r"\[\[?([-\d., ]+)\]\]?, dtype=torch.float64\)|\[([-\d., ]+)\],",
        page[page.index("bigram = torch.tensor(") :][:600],
    )
    table = [tuple(float(v) for v in (a or b).split(",")) for a, b in rows][:5]
    assert tuple(table) == sd.BIGRAM
    assert "eos_id=4, max_new_tokens=10" in page and "sampled_trace(2)" in page
    assert (sd.BIGRAM_EOS, sd.BIGRAM_LIMIT, sd.TRACE_SEED) == (4, 10, 2)
    assert "manual_seed(7)" in page and "z.expand(20_000, 4), top_p=0.9" in page


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_temperature_figure_prints_the_softmax_of_z_over_t(language):
    texts = render("sampling-temperature", language)
    for t in sd.MARKED_TEMPERATURES:
        assert texts[f"top-{t:g}"] == fmt(
            torch.softmax(z / t, dim=-1)[0].item(), language
        )
    temperatures, probs = sd.temperature_curves(n=9)
    for t, row in zip(temperatures, probs):
        assert row == pytest.approx(torch.softmax(z / t, dim=-1).tolist(), abs=1e-12)
    # the curves never cross: every row is in the logits' order
    assert all(list(row) == sorted(row, reverse=True) for row in probs)
    assert texts["top-0.5"] != fmt(torch.softmax(z / 0.6, dim=-1)[0].item(), language)


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_order_figure_prints_each_step_and_the_other_order(language):
    texts = render("sampling-order", language)
    softmax = torch.softmax(z, dim=-1)
    after_k = torch.softmax(top_k_filter(z, 3), dim=-1)
    ours = next_token_distribution(z, top_k=3, top_p=0.9)
    other = torch.softmax(top_k_filter(top_p_filter(z, 0.9), 3), dim=-1)
    for key, values in (
        ("softmax", softmax),
        ("top_k", after_k),
        ("ours", ours),
        ("other", other),
    ):
        for i, v in enumerate(values.tolist()):
            want = fmt(v, language) if v > 0 else "×"
            assert texts[f"{key}-{i}"] == want, (key, i)
    assert [texts[f"logits-{i}"] for i in range(4)] == ["3", "2", "1", "0"]
    assert int((ours > 0).sum()) == 2 and int((other > 0).sum()) == 3
    assert fmt(after_k[:2].sum().item(), language) in texts["why-ours"]
    assert fmt(softmax[:2].sum().item(), language) in texts["why-other"]
    assert "2" in texts["why-ours"] and "3" in texts["why-other"]


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_race_figure_is_the_draw_of_its_seed_and_the_pages_count(language):
    texts = render("sampling-race", language)
    probs = next_token_distribution(z, top_p=0.9)
    q = torch.empty_like(probs).exponential_(
        1.0, generator=torch.Generator().manual_seed(sd.RACE_SEED)
    )
    token = int(draw(probs, torch.Generator().manual_seed(sd.RACE_SEED)))
    assert token == int((probs / q).argmax())
    for i in range(4):
        assert texts[f"race-p-{i}"] == fmt(probs[i].item(), language)
        assert texts[f"race-q-{i}"] == fmt(q[i].item(), language)
        assert texts[f"race-ratio-{i}"] == fmt((probs / q)[i].item(), language)
    winner_row = [
        i
        for i in range(4)
        if texts[f"race-ratio-{i}"] == fmt((probs / q).max().item(), language)
    ]
    assert winner_row == [token] and token != 0  # a less likely token can win
    draws = sample_step(
        z.expand(20_000, 4), top_p=0.9, generator=torch.Generator().manual_seed(7)
    )
    frequencies = torch.bincount(draws, minlength=4).double() / 20_000
    for i in range(4):
        assert texts[f"frequency-{i}"] == fmt(frequencies[i].item(), language, 3)


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_stop_figure_is_decode_trace_on_the_bigram_table(language):
    texts = render("sampling-stop", language)
    bigram = torch.tensor(sd.BIGRAM, dtype=F64)

    def next_logits(generated):
        return bigram[generated[-1] if generated else 0]

    g = torch.Generator().manual_seed(2)
    runs = {
        "greedy": decode_trace(next_logits, eos_id=4, max_new_tokens=10),
        "sampled": decode_trace(
            next_logits,
            eos_id=4,
            max_new_tokens=10,
            choose=lambda row: sample_step(row, generator=g),
        ),
    }
    assert runs["greedy"] == ([1, 2, 3, 4], "eos")
    assert runs["sampled"][1] == "length_limit"
    for name, (tokens, reason) in runs.items():
        shown = sorted(k for k in texts if k.startswith(f"{name}-token-"))
        assert len(shown) == len(tokens)
        for i, (a, b) in enumerate(zip([0, *tokens], tokens)):
            assert texts[f"{name}-token-{i}"] == str(b)
            p = torch.softmax(bigram[a], dim=-1)[b].item()
            assert texts[f"{name}-p-{i}"] == fmt(p, language)
        assert ("EOS" in texts[f"{name}-stop"]) == (reason == "eos")
    assert texts["greedy-prompt"] == "0"


@pytest.mark.parametrize("name", NAMES)
def test_the_figures_fit_a_phone_and_are_placed_once(name):
    page = PAGE.read_text(encoding="utf-8")
    assert page.count(f"../figures/{name}-light.svg#only-light") == 1
    assert page.count(f"../figures/{name}-dark.svg#only-dark") == 1
    fig = FIGURES[name].draw(language="ru", theme="light")
    width, height = fig.get_size_inches()
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip()]
    plt.close(fig)
    assert width <= 5.2 and height <= 5.4
    assert min(sizes) >= 10


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_ties_figure_is_top_k_filter_on_the_pages_tied_logits(language):
    page = PAGE.read_text(encoding="utf-8")
    assert "tied = torch.tensor([3.0, 2.0, 2.0, 2.0, 0.0])" in page
    assert "top_k_filter(tied, top_k=2)" in page
    texts = render("sampling-top-k-ties", language)
    tied = torch.tensor(sd.TIED_LOGITS)
    filtered = top_k_filter(tied, sd.TIED_K)
    for i, v in enumerate(filtered.tolist()):
        assert texts[f"tie-{i}"] == (fmt(v, language, 0) if v > -1e9 else "−∞")
    kept = int(torch.isfinite(filtered).sum())
    assert kept == 4 > sd.TIED_K and f" {kept} " in texts["tie-title"]
    assert texts["tie-cut"].endswith(
        fmt(tied.topk(sd.TIED_K).values[-1].item(), language, 0)
    )
