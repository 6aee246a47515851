"""Chapter 5's diagrams draw what the chapter's modules compute: `gpt2-causality-probe`
the page's probe run through chapter 3's attention, `gpt2-model-stack` the page's tiny
GPT-2 (its shapes, counts and the one tied matrix), `gpt2-generate-crop` what
`generate` reads at each step. Each check also fails on a figure of other numbers."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.text import Text

from literate.figures import FIGURES
from literate.figures import gpt2_diagrams as gd
from literate.minimal.gpt2 import GPT2Model
from literate.models.gpt2 import gpt2_model

F64 = torch.float64
PAGE = Path(__file__).parents[1] / "docs" / "eras" / "gpt2.md"
NAMES = ("gpt2-causality-probe", "gpt2-model-stack", "gpt2-generate-crop")


def drawn(fig) -> dict[str, str]:
    return {t.get_gid(): t.get_text() for t in fig.findobj(Text) if t.get_gid()}


def render(name: str, language: str) -> dict[str, str]:
    fig = FIGURES[name].draw(language=language, theme="light")
    try:
        return drawn(fig)
    finally:
        plt.close(fig)


def fmt(v: float, language: str) -> str:
    s = f"{v:.2f}"
    return s.replace(".", ",") if language == "ru" else s


def test_the_figures_use_the_pages_probe_and_tiny_model():
    page = PAGE.read_text(encoding="utf-8")
    assert "[[3, 0, 0, 0], [0, 3, 0, 0], [0, 0, 3, 0]]" in page
    assert gd.PROBE_TOKENS == ((3, 0, 0, 0), (0, 3, 0, 0), (0, 0, 3, 0))
    assert (
        "torch.manual_seed(1)\ntiny_gpt2 = GPT2Model(vocab_size=11, n_positions=12, "
        "d_model=16, n_heads=4,\n                      n_layers=2" in page
    )
    assert gd.TINY == dict(
        vocab_size=11, n_positions=12, d_model=16, n_heads=4, n_layers=2
    )
    assert "tiny_gpt2(torch.tensor([[1, 2, 3]]))" in page and gd.TINY_IDS == (
        (1, 2, 3),
    )


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_probe_figure_prints_the_probes_weights_and_outputs(language):
    texts = render("gpt2-causality-probe", language)
    x = torch.tensor([gd.PROBE_TOKENS], dtype=F64)
    sep = "; " if language == "ru" else ", "
    for name, causal in (("causal", True), ("open", False)):
        out = gd.causality_probe(x, causal=causal)[0]
        for i in range(3):
            weights = (out[i] - x[0, i])[:3] / 3
            for j in range(3):
                want = "" if (causal and j > i) else fmt(weights[j].item(), language)
                assert texts[f"{name}-w-{i}-{j}"] == want, (name, i, j)
            numbers = [
                f"{v:g}".replace(".", ",") if language == "ru" else f"{v:g}"
                for v in out[i].tolist()
            ]
            assert texts[f"{name}-out-{i}"] == "(" + sep.join(numbers) + ")"
    # the numbers the page states: with the mask 6, 1.5 + 3, 1 + 3; without, 1 + 3
    assert (
        texts["causal-out-1"]
        == "("
        + sep.join(
            ["1,5", "4,5", "0", "0"] if language == "ru" else ["1.5", "4.5", "0", "0"]
        )
        + ")"
    )
    assert texts["open-out-0"] == "(" + sep.join(["4", "1", "1", "0"]) + ")"


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_stack_figure_prints_the_tiny_models_shapes_and_counts(language):
    texts = render("gpt2-model-stack", language)
    torch.manual_seed(1)
    model = GPT2Model(**gd.TINY, dropout=0.0).double().eval()
    assert model.lm_head.weight is model.token_embedding.weight
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        x = model.positions(model.token_embedding(ids))
        shapes = {
            "token_embedding": model.token_embedding(ids).shape,
            "positions": x.shape,
        }
        for i, block in enumerate(model.blocks):
            x = block(x)
            shapes[f"block_{i}"] = x.shape
        x = model.final_norm(x)
        shapes["final_norm"] = x.shape
        shapes["lm_head"] = model(ids).shape
    for key, shape in shapes.items():
        assert texts[f"shape-{key}"] == "[" + ", ".join(map(str, shape)) + "]", key
    assert texts["shape-lm_head"] == "[1, 3, 11]" and texts["shape-ids"] == "[1, 3]"
    sep = "\u202f" if language == "ru" else ","
    d, per_block = 16, 12 * 16**2 + 13 * 16
    want = {
        "token_embedding": 11 * d,
        "positions": 12 * d,
        "block_0": per_block,
        "block_1": per_block,
        "final_norm": 2 * d,
    }
    for key, n in want.items():
        assert texts[f"count-{key}"] == f"{n:,}".replace(",", sep), key
    total = sum(p.numel() for p in model.parameters())
    assert total == 6960 and texts["count-total"] == f"{total:,}".replace(",", sep)
    assert texts["count-lm_head"].startswith("0 ") and "tied" in texts


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_crop_figure_shows_what_each_step_of_generate_reads(language):
    texts = render("gpt2-generate-crop", language)
    torch.manual_seed(gd.CROP_SEED)
    model = gpt2_model(**gd.CROP, dropout=0.0).double().eval()
    with torch.no_grad():
        for weight in model.parameters():
            if weight.ndim == 2:
                weight.normal_(0.0, gd.CROP_STD)
    prompt = torch.tensor([gd.CROP_PROMPT])
    generated = model.generate(prompt, gd.CROP_STEPS)[0].tolist()
    c = model.context
    assert c == 6 and len(gd.CROP_PROMPT) > c  # the prompt itself is cropped
    new = generated[len(gd.CROP_PROMPT) :]
    assert len(set(new)) == len(new)  # three different tokens: the steps differ
    for s in range(gd.CROP_STEPS):
        n = len(gd.CROP_PROMPT) + s
        for i in range(n):
            assert texts[f"step{s}-id-{i}"] == str(generated[i])
            position = texts.get(f"step{s}-pos-{i}")
            assert position == (str(i - (n - c)) if i >= n - c else None)
        assert texts[f"step{s}-new"] == str(new[s])
        # the chosen token is greedy on the window alone: cropping is all generate does
        with torch.no_grad():
            window = torch.tensor([generated[n - c : n]])
            assert int(model(window)[0, -1].argmax()) == new[s]


@pytest.mark.parametrize("name", NAMES)
def test_the_figures_fit_a_phone_and_are_placed_once(name):
    page = PAGE.read_text(encoding="utf-8")
    assert page.count(f"../figures/{name}-light.svg#only-light") == 1
    assert page.count(f"../figures/{name}-dark.svg#only-dark") == 1
    fig = FIGURES[name].draw(language="ru", theme="light")
    width, height = fig.get_size_inches()
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip()]
    plt.close(fig)
    assert width <= 5.2 and height <= 5
    assert min(sizes) >= 10
