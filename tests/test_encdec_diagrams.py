"""Chapter 4's diagrams draw what the code computes: `encdec-add-norm` one vector through
the minimal LayerNorm and FFN, post-norm and pre-norm; `encdec-mask-polarity` the
self-attention weights of PyTorch's twin of our encoder layer given the padding mask in
each polarity, worked out again here from our layer's own weights; and
`encdec-shared-embedding` the scales of the page's small model's one embedding matrix.
Each check is also shown to fail on a figure of other numbers."""

from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
import torch.nn.functional as F
from matplotlib.text import Text

from literate.figures import FIGURES, encdec_diagrams
from literate.figures.encdec_diagrams import number
from literate.models.transformer2017 import EncoderDecoder
from literate.parts.blocks import encoder_layer_2017
from literate.parts.positions import sinusoidal_table

F64 = torch.float64
NAMES = ("encdec-add-norm", "encdec-mask-polarity", "encdec-shared-embedding")
PAGE = Path(__file__).parents[1] / "docs" / "eras" / "encoder-decoder.md"
CYRILLIC = re.compile("[\u0400-\u04ff]")


def drawn(fig) -> dict[str, str]:
    """The texts the figure names (gid), by name."""
    return {t.get_gid(): t.get_text() for t in fig.findobj(Text) if t.get_gid()}


def draw(name: str, language: str = "en"):
    return FIGURES[name].draw(language=language, theme="light")


# --- encdec-add-norm -------------------------------------------------------------------


def fresh_add_norm(seed: int) -> dict[str, list[float]]:
    """The rows again, with PyTorch's own layer_norm (gain 1, bias 0, eps 1e-5) and the
    FFN written out from the seeded weights."""
    d = encdec_diagrams.ADD_NORM_D
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        up, down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
        x = torch.randn(d, dtype=F64) * 3 + 1
    with torch.no_grad():

        def ffn(v):
            return F.linear(
                F.relu(F.linear(v, up.weight.double(), up.bias.double())),
                down.weight.double(),
                down.bias.double(),
            )

        def ln(v):
            return F.layer_norm(v, (d,), eps=1e-5)

        rows = {
            "x": x,
            "sub": ffn(x),
            "sum": x + ffn(x),
            "post": ln(x + ffn(x)),
            "pre": x + ffn(ln(x)),
        }
    return {k: v.tolist() for k, v in rows.items()}


def assert_add_norm_drawn(fig, rows, language) -> None:
    texts = drawn(fig)
    for name, row in rows.items():
        assert [texts[f"{name}-{i}"] for i in range(len(row))] == [
            number(v, 1, language) for v in row
        ], name
        t = torch.tensor(row, dtype=F64)
        mu, sigma = t.mean().item(), t.std(unbiased=False).item()
        want = f"{number(mu, 2, language)}, {number(sigma, 2, language)}"
        assert texts[f"stats-{name}"] == want, (name, texts[f"stats-{name}"], want)


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_add_norm_figure_prints_a_fresh_run(language):
    rows = fresh_add_norm(encdec_diagrams.ADD_NORM_SEED)
    run = encdec_diagrams.add_norm_run()
    for name, row in rows.items():
        assert run.rows[name] == pytest.approx(row, abs=1e-12), name
    fig = draw("encdec-add-norm", language)
    assert_add_norm_drawn(fig, rows, language)
    texts = drawn(fig)
    zero = number(0, 2, language)
    assert texts["stats-post"] == f"{zero}, {number(1, 2, language)}"  # normalised
    sigma_x, sigma_pre = (
        torch.tensor(rows[k]).std(unbiased=False) for k in ("x", "pre")
    )
    assert sigma_x > 2 and sigma_pre > 2  # pre-norm keeps the stream's scale
    plt.close(fig)


def test_the_add_norm_check_fails_on_another_vector(monkeypatch):
    other = fresh_add_norm(encdec_diagrams.ADD_NORM_SEED + 1)
    fig = draw("encdec-add-norm")
    with pytest.raises(AssertionError):
        assert_add_norm_drawn(fig, other, "en")
    plt.close(fig)
    monkeypatch.setattr(
        encdec_diagrams, "ADD_NORM_SEED", encdec_diagrams.ADD_NORM_SEED + 1
    )
    fig = draw("encdec-add-norm")
    assert_add_norm_drawn(fig, other, "en")
    plt.close(fig)


# --- encdec-mask-polarity --------------------------------------------------------------


def by_hand_weights(allowed: torch.Tensor) -> list[list[float]]:
    """Our seeded encoder layer's self-attention weights, head average, worked out from
    its own q, k, v projections: softmax(q k^T / sqrt(d_head)) over the allowed keys."""
    sizes = encdec_diagrams.POLARITY_SIZES
    with torch.random.fork_rng():
        torch.manual_seed(encdec_diagrams.POLARITY_SEED)
        ours = encoder_layer_2017(**sizes, dropout=0.0).double()
        x = torch.randn(
            len(encdec_diagrams.POLARITY_SOURCE), sizes["d_model"], dtype=F64
        )
    a, h = ours.self_attn, sizes["n_heads"]
    d_head = sizes["d_model"] // h
    with torch.no_grad():
        q, k = (
            proj(x).view(-1, h, d_head).transpose(0, 1) for proj in (a.q_proj, a.k_proj)
        )
        scores = q @ k.transpose(1, 2) / math.sqrt(d_head)  # [H, S, S]
        scores = scores.masked_fill(~allowed, float("-inf"))
        return scores.softmax(dim=-1).mean(dim=0).tolist()


def assert_grid_drawn(texts, name, grid, language) -> None:
    for i, row in enumerate(grid):
        for j, w in enumerate(row):
            want = number(w, 2, language) if w else "0"
            assert texts[f"{name}-{i}-{j}"] == want, (name, i, j, w)


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_polarity_figure_prints_the_layers_weights_in_each_polarity(language):
    source = torch.tensor(encdec_diagrams.POLARITY_SOURCE)
    key_valid = source != 0
    right, wrong = by_hand_weights(key_valid), by_hand_weights(~key_valid)
    run = encdec_diagrams.polarity_run()
    assert run.key_valid == (True, True, True, True, False, False)
    for got, want in ((run.right, right), (run.wrong, wrong)):
        assert torch.allclose(
            torch.tensor(got, dtype=F64), torch.tensor(want, dtype=F64), atol=1e-12
        )
    assert all(row[4] == row[5] == 0 for row in run.right)  # PAD keys get nothing
    assert all(sum(row[4:]) == pytest.approx(1) for row in run.wrong)  # only PAD read
    fig = draw("encdec-mask-polarity", language)
    texts = drawn(fig)
    assert_grid_drawn(texts, "right", right, language)
    assert_grid_drawn(texts, "wrong", wrong, language)
    assert [texts[f"ids-{j}"] for j in range(6)] == [str(t) for t in source.tolist()]
    assert [texts[f"ours-{j}"] for j in range(6)] == [
        str(v) for v in key_valid.tolist()
    ]
    assert [texts[f"theirs-{j}"] for j in range(6)] == [
        str(v) for v in (~key_valid).tolist()
    ]
    with pytest.raises(AssertionError):  # the two grids swapped
        assert_grid_drawn(texts, "right", wrong, language)
    plt.close(fig)


# --- encdec-shared-embedding -----------------------------------------------------------


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_embedding_figure_prints_the_page_models_scales(language):
    with torch.random.fork_rng():
        torch.manual_seed(encdec_diagrams.EMBEDDING_SEED)
        model = EncoderDecoder(
            vocab_size=13,
            d_model=16,
            n_heads=4,
            d_ff=64,
            n_layers=2,
            dropout=0.0,
            max_length=16,
        ).double()
    e = model.embedding.weight.detach()
    h = torch.randn(2, 3, 16, dtype=F64)
    assert torch.equal(model.logits(h), h @ e.T)  # the third use
    rms_e = e.pow(2).mean().sqrt().item()
    assert abs(rms_e - 16**-0.5) < 0.05  # initialised with std d^-1/2
    rms_pe = sinusoidal_table(16, 16, dtype=F64).pow(2).mean(-1).sqrt()
    assert torch.allclose(rms_pe, torch.full((16,), 0.5**0.5, dtype=F64), atol=1e-12)
    run = encdec_diagrams.embedding_run()
    assert (run.vocab_size, run.d_model, run.n_matrices) == (13, 16, 1)
    assert run.rms_e == pytest.approx(rms_e, abs=1e-12)
    assert run.rms_scaled == pytest.approx(4 * rms_e, abs=1e-12)
    fig = draw("encdec-shared-embedding", language)
    texts = drawn(fig)
    assert texts["shape"] == "13 × 16"
    assert texts["rms_e"] == number(rms_e, 2, language)
    assert texts["rms_scaled"] == number(4 * rms_e, 2, language)
    assert texts["rms_pe"] == number(0.5**0.5, 2, language)
    assert texts["rms_e"] != number(rms_e * 1.1, 2, language)  # would catch 10% off
    plt.close(fig)


# --- all three -------------------------------------------------------------------------


def test_the_alt_texts_state_the_numbers_drawn():
    alts = {name: FIGURES[name].alt for name in NAMES}
    rows = encdec_diagrams.add_norm_run().rows
    for name in ("x", "pre"):
        t = torch.tensor(rows[name], dtype=F64)
        assert (
            f"standard deviation {t.std(unbiased=False).item():.2f}"
            in alts["encdec-add-norm"]
        )
    assert (
        f"mean {torch.tensor(rows['x']).mean().item():.2f}" in alts["encdec-add-norm"]
    )
    run = encdec_diagrams.embedding_run()
    for value in (run.rms_e, run.rms_positions, run.rms_scaled):
        assert f"{value:.2f}" in alts["encdec-shared-embedding"]
    assert "13 tokens by 16 features" in alts["encdec-shared-embedding"]
    assert "3, 4, 5, 2, PAD, PAD" in alts["encdec-mask-polarity"]


@pytest.mark.parametrize("name", NAMES)
def test_each_figure_fits_a_phone_in_both_languages(name):
    for language in ("en", "ru"):
        fig = draw(name, language)
        width, height = fig.get_size_inches()
        assert width <= 5.2 and height <= 5
        words = [t.get_text() for t in fig.findobj(Text) if t.get_text().strip()]
        sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip()]
        assert min(sizes) >= 10, (name, min(sizes))
        assert bool(CYRILLIC.search(" ".join(words))) == (language == "ru"), name
        fig.canvas.draw()  # every text inside the figure
        box = fig.bbox
        renderer = fig.canvas.get_renderer()
        for t in fig.findobj(Text):
            if t.get_text().strip() and t.get_visible():
                b = t.get_window_extent(renderer)
                assert b.x0 >= box.x0 - 1 and b.x1 <= box.x1 + 1, (name, t.get_text())
                assert b.y0 >= box.y0 - 1 and b.y1 <= box.y1 + 1, (name, t.get_text())
        plt.close(fig)


def test_the_page_shows_each_figure_in_its_section():
    page = PAGE.read_text(encoding="utf-8")
    sections = {
        "encdec-add-norm": "## Add & norm, after the sublayer",
        "encdec-mask-polarity": "## Proven equal to PyTorch's layers",
        "encdec-shared-embedding": "## Embeddings, scaled and shared",
    }
    for name, heading in sections.items():
        at = page.index(f"![](../figures/{name}-light.svg#only-light)")
        assert page.rindex("\n## ", 0, at) == page.index(heading) - 1, name
