"""Chapter 1's two later diagrams draw what the code computes: the masked row prints the
steps `masked_softmax` takes on one row, and the tiled figure the running maximum and
sums of an online softmax whose output equals the attention function's."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.text import Text

from literate.figures import FIGURES
from literate.figures.attention_diagrams import (
    ONLINE,
    ROW_ALLOWED,
    ROW_SCORES,
    masked_row_steps,
    online_softmax_steps,
)
from literate.parts.attention import masked_softmax


def words(name: str, language: str = "en") -> list[str]:
    fig = FIGURES[name].draw(language=language, theme="light")
    found = [t.get_text() for t in fig.findobj(Text) if t.get_text().strip()]
    plt.close(fig)
    return found


def test_the_masked_row_is_what_masked_softmax_computes():
    r = masked_row_steps()
    z = torch.tensor([ROW_SCORES])
    allowed = torch.tensor([ROW_ALLOWED])
    fresh = masked_softmax(z, allowed)[0]
    assert r["weights"] == fresh.tolist()
    assert r["weights"][3] == 0.0  # the blocked key, whose score is the largest
    top = max(s for s, a in zip(ROW_SCORES, ROW_ALLOWED) if a)
    assert r["max"] == top == 1002.0
    assert r["shifted"][:3] == [s - top for s in ROW_SCORES[:3]]
    assert r["shifted"][3] == -math.inf
    assert r["total"] == pytest.approx(
        sum(math.exp(s) for s in r["shifted"][:3]), rel=1e-6
    )
    assert all(math.isnan(w) for w in r["naive"])  # the textbook formula overflows


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_masked_row_figure_prints_the_weights(language):
    r = masked_row_steps()
    shown = words("attention-masked-row", language)
    for w in r["weights"][:3]:
        label = f"{w:.3f}"
        assert (label.replace(".", ",") if language == "ru" else label) in shown
    assert "NaN" in " ".join(shown) and "1002" in shown


def test_the_online_softmax_ends_with_the_attention_output():
    r = online_softmax_steps()
    torch.testing.assert_close(
        torch.tensor(r["output"]), torch.tensor(r["full_output"]), rtol=0, atol=1e-12
    )
    scores = r["scores"]
    assert len(scores) == ONLINE["keys"] and len(r["tiles"]) == 3
    top = max(scores)
    assert r["tiles"][-1]["top"] == top
    assert r["tiles"][-1]["total"] == pytest.approx(
        sum(math.exp(s - top) for s in scores), rel=1e-12
    )
    weights = [math.exp(s - top) / r["tiles"][-1]["total"] for s in scores]
    assert weights == pytest.approx(r["full_weights"], abs=1e-12)
    for tile in r["tiles"][1:]:
        assert tile["rescale"] == pytest.approx(math.exp(tile["before"] - tile["top"]))
    # the figure's story: the maximum rises once (tile 1), then stays (tile 2)
    assert r["tiles"][1]["rescale"] < 1 and r["tiles"][2]["rescale"] == 1.0


def test_the_online_figure_prints_the_running_sums_and_the_output():
    r = online_softmax_steps()
    shown = " ".join(words("attention-online-softmax"))
    for tile in r["tiles"]:
        assert f"{tile['total']:.2f}" in shown and f"{tile['top']:.2f}" in shown
    full = ", ".join(f"{x:.3f}" for x in r["full_output"])
    assert shown.count(f"({full})") == 2  # the tiled output and the whole row's
