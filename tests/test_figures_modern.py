"""Chapter 7's figures: the QK-norm study measures what it says it measures, and the
figures draw it (and SiLU's minimum) without typing a number a run produces."""

from __future__ import annotations

import math
import re
from itertools import pairwise

import matplotlib.pyplot as plt
import pytest
import torch
import torch.nn.functional as F

from literate.figures import FIGURES, modern
from literate.numbers import studies
from literate.numbers.studies import QK_SCALES, qk_attention, qk_norm_study, qk_scores
from literate.parts.attention import causal_allowed
from literate.parts.multi_head import MultiHeadAttention
from literate.parts.norms import RMSNorm


def sweep(qk_norm: bool) -> list[studies.QKNormStudy]:
    return [qk_norm_study(s, qk_norm=qk_norm) for s in QK_SCALES]


def test_the_scales_double_from_one_half_to_sixteen():
    assert QK_SCALES == (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


def test_without_qk_norm_the_largest_score_grows_as_the_square_of_the_scale():
    """Scores are bilinear in W_q and W_k (RoPE is linear, there are no biases), so
    doubling both multiplies every score by 4; with power-of-two scales even the
    rounding scales exactly, and 1e-12 is a generous tolerance."""
    runs = sweep(qk_norm=False)
    for small, large in pairwise(runs):
        assert large.max_abs_score / small.max_abs_score == pytest.approx(4, rel=1e-12)
    bound = math.sqrt(runs[0].d_head)
    assert runs[0].max_abs_score < bound < runs[-1].max_abs_score / 100


def test_with_qk_norm_every_score_stays_within_sqrt_d_head():
    """|q| = |k| = sqrt(d_head) after an RMSNorm of unit gain (a hair less for eps),
    RoPE turns without stretching, so |q.k| / sqrt(d_head) <= sqrt(d_head). The scale
    no longer matters: it only moves eps / (s^2 ms), a relative change below 1e-5."""
    runs = sweep(qk_norm=True)
    assert all(r.d_head == 16 for r in runs)
    for r in runs:
        assert r.max_abs_score <= math.sqrt(r.d_head) + 1e-12
    scores = [r.max_abs_score for r in runs]
    assert max(scores) / min(scores) - 1 < 1e-5


def test_the_rows_collapse_without_qk_norm_and_not_with_it():
    """Without QK-norm the mean row entropy falls with every doubling and ends below
    0.05 nats (row 0 reads one key, so 0 is the floor); with QK-norm it stays above
    80% of the entropy of uniform rows at every scale."""
    plain, normed = sweep(qk_norm=False), sweep(qk_norm=True)
    entropies = [r.mean_entropy for r in plain]
    assert all(a > b for a, b in pairwise(entropies))
    assert entropies[-1] < 0.05
    for r in normed:
        assert 0.8 * r.uniform_entropy < r.mean_entropy < r.uniform_entropy


def test_uniform_entropy_is_the_mean_of_ln_keys_per_row():
    r = qk_norm_study(1.0, qk_norm=False)
    t = studies.QK_LENGTH
    assert r.uniform_entropy == pytest.approx(math.lgamma(t + 1) / t, rel=1e-12)


@pytest.mark.parametrize("qk_norm", [False, True])
@pytest.mark.parametrize("scale", [0.5, 4.0, 16.0])
def test_qk_scores_are_the_layers_own_scores(scale, qk_norm):
    """Their softmax is the weights the layer itself returns (transparent path), so the
    study's max |score| is a property of MultiHeadAttention, not of a copy of it."""
    layer, x = qk_attention(scale, qk_norm=qk_norm)
    assert layer.qk_norm == ("head" if qk_norm else None) and layer.rope is not None
    assert x.dtype == torch.float64 and layer.q_proj.weight.dtype == torch.float64
    assert torch.allclose(
        x.pow(2).mean(-1), torch.ones((), dtype=torch.float64), rtol=0, atol=1e-12
    )
    with torch.no_grad():
        scores = qk_scores(layer, x)
        _, weights = layer(x, causal=True, return_weights=True)
    assert (
        scores.shape
        == weights.shape
        == (studies.QK_BATCH, studies.QK_HEADS, studies.QK_LENGTH, studies.QK_LENGTH)
    )
    blocked = ~causal_allowed(studies.QK_LENGTH, studies.QK_LENGTH)  # [T, T]
    assert torch.isneginf(scores[..., blocked]).all()
    assert torch.isfinite(scores[..., ~blocked]).all()
    torch.testing.assert_close(scores.softmax(-1), weights, rtol=0, atol=1e-12)


@pytest.mark.parametrize("scope", ["head", "projection"])
def test_qk_scores_follow_any_layer_scope_scale_and_grouping(scope):
    """qk_scores reads the layer's own parts: norms over the projection (OLMo 2) as well
    as per head, a scale of its own (Gemma 3), GQA and RoPE."""
    torch.manual_seed(0)
    d, h, h_kv, d_head = 32, 4, 2, 6
    widths = (d_head, d_head) if scope == "head" else (h * d_head, h_kv * d_head)
    layer = MultiHeadAttention(
        d,
        h,
        h_kv,
        d_head=d_head,
        rope=True,
        scale=0.3,
        q_norm=RMSNorm(widths[0]),
        k_norm=RMSNorm(widths[1]),
        qk_norm=scope,
    )
    layer = layer.double()
    with torch.no_grad():
        for norm in (layer.q_norm, layer.k_norm):
            norm.weight.uniform_(0.5, 2.0)  # gains that are not 1, to be seen
        x = torch.randn(2, 7, d, dtype=torch.float64)
        scores = qk_scores(layer, x)
        _, weights = layer(x, causal=True, return_weights=True)
    assert layer.qk_norm == scope
    torch.testing.assert_close(scores.softmax(-1), weights, rtol=0, atol=1e-12)


def test_the_study_is_deterministic_and_ignores_the_global_seed():
    torch.manual_seed(1)
    once = qk_norm_study(2.0, qk_norm=True), qk_norm_study(2.0, qk_norm=False)
    torch.manual_seed(2)
    again = qk_norm_study(2.0, qk_norm=True), qk_norm_study(2.0, qk_norm=False)
    assert once == again


def test_the_study_refuses_bad_settings():
    with pytest.raises(ValueError, match=r"^scale must be finite and > 0, got 0\.0$"):
        qk_norm_study(0.0, qk_norm=True)
    with pytest.raises(TypeError, match=r"^qk_norm must be a bool, got int$"):
        qk_norm_study(1.0, qk_norm=1)


def test_the_figures_are_registered_and_draw_what_the_study_measures():
    assert {
        "modern-residual-topologies",
        "modern-swiglu-gate",
        "modern-qk-norm-scores",
    } <= set(FIGURES)
    assert modern.qk_norm_study is studies.qk_norm_study
    for name in studies.__all__:  # nothing of the study is redefined for plotting
        assert getattr(modern, name, getattr(studies, name)) is getattr(studies, name)


def test_the_qk_figure_plots_the_study():
    fig = modern.qk_norm_figure(language="en", theme="light")
    left, right = fig.axes
    plain, normed = sweep(qk_norm=False), sweep(qk_norm=True)
    lines = {line.get_label(): line for line in left.lines}
    drawn = list(lines["without QK-norm"].get_ydata())
    assert drawn == [r.max_abs_score for r in plain]
    drawn = list(lines["with QK-norm"].get_ydata())
    assert drawn == [r.max_abs_score for r in normed]
    entropies = [list(line.get_ydata()) for line in right.lines]
    assert [r.mean_entropy for r in plain] in entropies
    assert [r.mean_entropy for r in normed] in entropies
    plt.close(fig)


@pytest.mark.parametrize("language, point", [("en", "."), ("ru", ",")])
def test_the_gate_figure_labels_silus_minimum_where_it_is(language, point):
    """SiLU'(a) = sigmoid(a) (1 + a (1 - sigmoid(a))) vanishes where
    1 + a (1 - sigmoid(a)) = 0; there SiLU(a) = a + 1. Bisection finds it, and the label
    the figure computed on its grid shows both to 3 decimals."""
    lo, hi = -2.0, -1.0  # the slope changes sign between these two

    def slope(a: float) -> float:  # SiLU'(a) / sigmoid(a)
        return 1 + a * (1 - 1 / (1 + math.exp(-a)))

    assert slope(lo) < 0 < slope(hi)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if slope(mid) < 0 else (lo, mid)
    where = (lo + hi) / 2
    value = float(F.silu(torch.tensor(where, dtype=torch.float64)))
    assert value == pytest.approx(where + 1, abs=1e-12)
    fig = modern.swiglu_gate_figure(language=language, theme="dark")
    texts = [t.get_text() for t in fig.findobj(match=lambda a: hasattr(a, "get_text"))]
    minus = "\u2212"
    expected = [
        f"{value:.3f}".replace("-", minus).replace(".", point),
        f"{where:.3f}".replace("-", minus).replace(".", point),
    ]
    label = next(t for t in texts if re.search("minimum|минимум", t))
    assert all(number in label for number in expected), (label, expected)
    plt.close(fig)
