"""Chapter 9's gap figures draw what the code computes: `moe-routers` each router of
`literate.parts.routers` on one token, `moe-deepseek-groups` DeepSeek-V3's group-limited
choice, `moe-capacity` the page's capacity example, `moe-balancing-loss` the page's
`load_balancing_loss` as the load collapses, `moe-bias-update` the page's sign-rule run,
`moe-cost` `moe_params` of the three published models. Each check is recomputed here,
independently of the module's helpers, and shown to fail on another run."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
import torch
import torch.nn.functional as F
from matplotlib.lines import Line2D
from matplotlib.patches import FancyBboxPatch
from matplotlib.text import Text

from literate.figures import FIGURES, moe_diagrams
from literate.figures.style import palette
from literate.models.mixtral import mla_params, moe_params
from literate.parts.moe import Experts, dispatch, update_balancing_bias
from literate.parts.routers import (
    Router,
    deepseek_v3_router,
    gpt_oss_router,
    mixtral_router,
    qwen3_moe_router,
    switch_router,
)

F64 = torch.float64
NEW = (
    "moe-routers",
    "moe-deepseek-groups",
    "moe-capacity",
    "moe-balancing-loss",
    "moe-bias-update",
    "moe-cost",
)


def drawn(fig) -> dict[str, Text]:
    return {t.get_gid(): t for t in fig.findobj(Text) if t.get_gid()}


def texts(fig) -> dict[str, str]:
    return {gid: t.get_text() for gid, t in drawn(fig).items()}


def lines(fig) -> dict[str, Line2D]:
    return {ln.get_gid(): ln for ln in fig.findobj(Line2D) if ln.get_gid()}


def fmt(v: float, language: str, digits: int = 2) -> str:
    s = f"{v:.{digits}f}".replace("-", "\u2212")
    return s.replace(".", ",") if language == "ru" else s


@pytest.mark.parametrize("name", NEW)
@pytest.mark.parametrize("language", ["en", "ru"])
def test_each_figure_fits_a_phone_with_fonts_of_10_pt(name, language):
    fig = FIGURES[name].draw(language=language, theme="light")
    width, height = fig.get_size_inches()
    assert width <= 5.2 and height <= 5
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip()]
    assert min(sizes) >= 10
    words = " ".join(t.get_text() for t in fig.findobj(Text))
    assert any("\u0400" <= c <= "\u04ff" for c in words) == (language == "ru")
    plt.close(fig)


# --- moe-routers ---------------------------------------------------------------------


def fresh_routers() -> tuple[torch.Tensor, torch.Tensor, dict[str, dict[int, float]]]:
    g = torch.Generator().manual_seed(moe_diagrams.ROUTERS_SEED)
    logits = 1.5 * torch.randn(1, 6, generator=g, dtype=F64)
    bias = 0.1 * torch.randn(6, generator=g, dtype=F64)
    ds = dict(n_group=3, topk_group=2, norm_topk_prob=True, routed_scaling_factor=2.5)
    routed = {
        "switch": switch_router(logits),
        "mixtral": mixtral_router(logits, 2),
        "qwen3": qwen3_moe_router(logits, 2, norm_topk_prob=False),
        "gpt-oss": gpt_oss_router(logits, 2),
        "deepseek-0": deepseek_v3_router(logits, 2, score_bias=0 * bias, **ds),
        "deepseek-b": deepseek_v3_router(logits, 2, score_bias=bias, **ds),
    }
    rows = {
        name: {int(e): float(w) for e, w in zip(experts[0], weights[0].double())}
        for name, (weights, experts) in routed.items()
    }
    return logits, bias, rows


def assert_routers_drawn(fig, logits, bias, rows, language) -> None:
    got = texts(fig)
    for e in range(6):
        assert got[f"logits-{e}"] == fmt(float(logits[0, e]), language)
        assert got[f"bias-{e}"] == fmt(float(bias[e]), language)
    for name, weights in rows.items():
        printed = {e for e in range(6) if f"{name}-{e}" in got}
        assert printed == set(weights), name
        for e, w in weights.items():
            assert got[f"{name}-{e}"] == fmt(w, language)
        assert got[f"{name}-sum"] == fmt(sum(weights.values()), language)


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_routers_figure_prints_each_routers_weights(language):
    logits, bias, rows = fresh_routers()
    # what the figure is drawn to show: the bias changes DeepSeek-V3's choice only
    assert set(rows["deepseek-0"]) - set(rows["deepseek-b"]) == {1}  # the caption's
    assert set(rows["deepseek-b"]) - set(rows["deepseek-0"]) == {5}  # swap, 1 for 5
    assert rows["mixtral"] == pytest.approx(rows["gpt-oss"], abs=1e-6)
    assert sum(rows["qwen3"].values()) < 1
    fig = FIGURES["moe-routers"].draw(language=language, theme="light")
    assert_routers_drawn(fig, logits, bias, rows, language)
    plt.close(fig)


def test_the_routers_check_fails_on_a_figure_of_other_logits():
    logits, bias, _ = fresh_routers()
    _, _, other = fresh_routers()
    weights, experts = mixtral_router(-logits, 2)  # the two least probable
    other["mixtral"] = dict(zip(experts[0].tolist(), weights[0].tolist()))
    fig = FIGURES["moe-routers"].draw(language="en", theme="light")
    with pytest.raises(AssertionError):
        assert_routers_drawn(fig, logits, bias, other, "en")
    plt.close(fig)


# --- moe-deepseek-groups -------------------------------------------------------------


def fresh_groups():
    g = torch.Generator().manual_seed(moe_diagrams.GROUPS_SEED)
    logits = torch.randn(1, 8, generator=g, dtype=F64)
    bias = 0.2 * torch.randn(8, generator=g, dtype=F64)
    weights, experts = deepseek_v3_router(
        logits,
        3,
        score_bias=bias,
        n_group=4,
        topk_group=2,
        norm_topk_prob=True,
        routed_scaling_factor=2.5,
    )
    biased = logits[0].sigmoid() + bias
    group_scores = [sorted(biased[2 * g : 2 * g + 2].tolist())[::-1] for g in range(4)]
    return (
        logits[0].sigmoid(),
        bias,
        [a + b for a, b in group_scores],
        {int(e): float(w) for e, w in zip(experts[0], weights[0])},
    )


def assert_groups_drawn(fig, scores, bias, group_scores, weights, language) -> None:
    got, p = texts(fig), palette("light")
    for e in range(8):
        assert got[f"scores-{e}"] == fmt(float(scores[e]), language)
        assert got[f"bias-{e}"] == fmt(float(bias[e]), language)
        assert got[f"biased-{e}"] == fmt(float(scores[e] + bias[e]), language)
        assert (f"weight-{e}" in got) == (e in weights)
    for e, w in weights.items():
        assert got[f"weight-{e}"] == fmt(w, language)
    kept = sorted(range(4), key=lambda g: -group_scores[g])[:2]
    boxes = {
        round(b.get_x() + b.get_width() / 2, 3): b for b in fig.findobj(FancyBboxPatch)
    }
    for g, v in enumerate(group_scores):
        label = drawn(fig)[f"group-{g}"]
        assert label.get_text() == fmt(v, language)
        box = boxes[round(label.get_position()[0], 3)]
        on = box.get_facecolor()[:3] == plt.matplotlib.colors.to_rgb(p.series[0])
        assert on == (g in kept), g


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_groups_figure_prints_the_routers_choice(language):
    scores, bias, group_scores, weights = fresh_groups()
    best = int((scores + bias).argmax())
    assert best not in weights  # the lesson: the best expert's group is not kept
    assert best == 4  # as the caption says
    assert sum(weights.values()) == pytest.approx(2.5)
    fig = FIGURES["moe-deepseek-groups"].draw(language=language, theme="light")
    assert_groups_drawn(fig, scores, bias, group_scores, weights, language)
    plt.close(fig)
    assert f"expert {best}," in FIGURES["moe-deepseek-groups"].alt


def test_the_groups_check_fails_without_the_group_limit():
    scores, bias, group_scores, _ = fresh_groups()
    top = (scores + bias).topk(3).indices.tolist()  # chosen among all 8
    weights = {e: 2.5 * float(scores[e] / scores[top].sum()) for e in top}
    fig = FIGURES["moe-deepseek-groups"].draw(language="en", theme="light")
    with pytest.raises(AssertionError):
        assert_groups_drawn(fig, scores, bias, group_scores, weights, "en")
    plt.close(fig)


# --- moe-capacity --------------------------------------------------------------------


def fresh_capacity(capacity_factor: float = 1.0) -> tuple[list[int], int, list[int]]:
    """The page's example again: (each token's expert, C, the dropped tokens)."""
    with torch.random.fork_rng():
        torch.manual_seed(3)
        router = Router(d_model=8, n_experts=4, route=switch_router).double()
        four = Experts(n_experts=4, d_model=8, d_ff=12).double()
        tokens = torch.randn(12, 8, dtype=F64)
    with torch.no_grad():
        _, gates, chosen = router(tokens)
        c = math.ceil(capacity_factor * 12 / 4)
        capped = dispatch(tokens, gates, chosen, four, n_experts=4, capacity=c)
    dropped = (capped == 0).all(dim=-1).nonzero()[:, 0].tolist()
    return chosen[:, 0].tolist(), c, dropped


def assert_capacity_drawn(fig, chosen, c, dropped, language) -> None:
    got, p = drawn(fig), palette("light")
    red = plt.matplotlib.colors.to_rgba(p.series[4])
    for n in range(12):
        assert got[f"token-{n}"].get_text() == f"t{n}"
        is_red = plt.matplotlib.colors.to_rgba(got[f"token-{n}"].get_color()) == red
        assert is_red == (n in dropped), n
    assert f"{c}" in got["capacity"].get_text()
    assert got["note"].get_text().count(str(len(dropped))) >= 1
    # each token sits in its expert's column, in batch order
    for e in range(4):
        column = [n for n in range(12) if chosen[n] == e]
        ys = [got[f"token-{n}"].get_position()[1] for n in column]
        xs = {round(got[f"token-{n}"].get_position()[0], 3) for n in column}
        assert ys == sorted(ys) and len(xs) <= 1


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_capacity_figure_drops_what_dispatch_drops(language):
    chosen, c, dropped = fresh_capacity()
    loads = [chosen.count(e) for e in range(4)]
    assert len(dropped) == sum(max(0, n - c) for n in loads) > 0
    assert c == 3 and {chosen[n] for n in dropped} == {1}  # as the caption says
    fig = FIGURES["moe-capacity"].draw(language=language, theme="light")
    assert_capacity_drawn(fig, chosen, c, dropped, language)
    plt.close(fig)


def test_the_capacity_check_fails_on_a_roomier_capacity():
    chosen, c, dropped = fresh_capacity(capacity_factor=1.5)
    assert len(dropped) > 0
    fig = FIGURES["moe-capacity"].draw(language="en", theme="light")
    with pytest.raises(AssertionError):
        assert_capacity_drawn(fig, chosen, c, dropped, "en")
    plt.close(fig)


# --- moe-balancing-loss --------------------------------------------------------------


def fresh_balance() -> tuple[list[float], list[float], list[float]]:
    """Switch's loss written out here (E sum f P), m = 3 .. 12 tokens on expert 0."""
    shares, losses, terms = [], [], []
    for m in range(3, 13):
        prefer = torch.tensor([0] * m + [1 + i % 3 for i in range(12 - m)])
        probs = (3.0 * F.one_hot(prefer, 4).double()).softmax(dim=-1)
        f = F.one_hot(probs.argmax(dim=-1), 4).double().mean(dim=0)
        p = probs.mean(dim=0)
        shares.append(m / 12)
        losses.append(float(4 * (f * p).sum()))
        terms.append(float(4 * f[0] * p[0]))
    return shares, losses, terms


def assert_balance_drawn(fig, shares, losses, terms) -> None:
    drawn_lines = lines(fig)
    assert list(drawn_lines["loss"].get_xdata()) == pytest.approx(shares)
    assert list(drawn_lines["loss"].get_ydata()) == pytest.approx(losses, abs=1e-9)
    assert list(drawn_lines["term"].get_ydata()) == pytest.approx(terms, abs=1e-9)


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_balancing_figure_draws_the_loss(language):
    shares, losses, terms = fresh_balance()
    assert losses[0] == pytest.approx(1) and losses[-1] == pytest.approx(
        4 * math.exp(3) / (math.exp(3) + 3)
    )
    fig = FIGURES["moe-balancing-loss"].draw(language=language, theme="light")
    assert_balance_drawn(fig, shares, losses, terms)
    assert texts(fig)["last"] == fmt(losses[-1], language)
    plt.close(fig)


def test_the_balancing_check_fails_on_megatrons_normalisation():
    shares, losses, terms = fresh_balance()
    fig = FIGURES["moe-balancing-loss"].draw(language="en", theme="light")
    with pytest.raises(AssertionError):  # top 1: the same; so scale as top 2 would
        assert_balance_drawn(fig, shares, [v / 2 for v in losses], terms)
    plt.close(fig)


# --- moe-bias-update -----------------------------------------------------------------


def fresh_bias_run(speed: float = 0.01) -> tuple[list[float], list[float]]:
    """The page's proof, again: 1 + 200 steps, each step's max and min load / mean."""
    busiest, idlest = [], []
    with torch.random.fork_rng():
        torch.manual_seed(0)
        skew = torch.linspace(-1.5, 1.5, 16)
        bias = torch.zeros(16)
        for _ in range(201):
            _, chosen = deepseek_v3_router(
                torch.randn(512, 16) + skew,
                top_k=2,
                score_bias=bias,
                n_group=4,
                topk_group=2,
                norm_topk_prob=True,
                routed_scaling_factor=1.0,
            )
            load = torch.bincount(chosen.flatten(), minlength=16).float()
            update_balancing_bias(bias, chosen, speed=speed)
            busiest.append(float(load.max() / load.mean()))
            idlest.append(float(load.min() / load.mean()))
    return busiest, idlest


def assert_bias_drawn(fig, busiest, idlest, language) -> None:
    drawn_lines, got = lines(fig), texts(fig)
    assert list(drawn_lines["busiest"].get_ydata()) == pytest.approx(busiest)
    assert list(drawn_lines["idlest"].get_ydata()) == pytest.approx(idlest)
    assert got["b-0"] == fmt(busiest[0], language)
    assert got[f"i-{len(idlest) - 1}"] == fmt(idlest[-1], language)


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_bias_figure_draws_the_pages_run(language):
    busiest, idlest = fresh_bias_run()
    assert busiest[0] > 3 and busiest[-1] < 1.5  # the page's claim
    fig = FIGURES["moe-bias-update"].draw(language=language, theme="light")
    assert_bias_drawn(fig, busiest, idlest, language)
    plt.close(fig)


def test_the_bias_check_fails_on_a_slower_rule():
    busiest, idlest = fresh_bias_run(speed=0.001)
    fig = FIGURES["moe-bias-update"].draw(language="en", theme="light")
    with pytest.raises(AssertionError):
        assert_bias_drawn(fig, busiest, idlest, "en")
    plt.close(fig)


# --- moe-cost ------------------------------------------------------------------------


def fresh_costs() -> list[tuple[int, int]]:
    attention = mla_params(
        d_model=7168,
        n_heads=128,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
    )
    return [
        moe_params(4096, 32, 8, 2, 14336, 32, 8, 32000),
        moe_params(2048, 48, 128, 8, 768, 32, 4, 151936, d_head=128, qk_norm=True),
        moe_params(
            7168,
            61,
            256,
            8,
            2048,
            128,
            128,
            129280,
            shared=1,
            dense_layers=3,
            dense_d_ff=18432,
            attention=attention,
        ),
    ]


def assert_cost_drawn(fig, costs, language) -> None:
    got = texts(fig)
    bars = {b.get_gid(): b for b in fig.findobj(FancyBboxPatch) if b.get_gid()}
    for i, (total, active) in enumerate(costs):
        value = got[f"value-{i}"]
        assert value.startswith(fmt(active / 1e9, language))
        assert fmt(total / 1e9, language, 1) in value
        assert bars[f"bar-{i}"].get_width() == pytest.approx(4.9 * active / total)


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_cost_figure_draws_moe_params(language):
    costs = fresh_costs()
    assert [(round(t / 1e9, 1), round(a / 1e9, 2)) for t, a in costs] == [
        (46.7, 12.88),
        (30.5, 3.35),
        (671.0, 37.55),
    ]  # the page's claim
    fig = FIGURES["moe-cost"].draw(language=language, theme="light")
    assert_cost_drawn(fig, costs, language)
    plt.close(fig)


def test_the_cost_check_fails_on_every_expert_counted_active():
    costs = [(total, total) for total, _ in fresh_costs()]
    fig = FIGURES["moe-cost"].draw(language="en", theme="light")
    with pytest.raises(AssertionError):
        assert_cost_drawn(fig, costs, "en")
    plt.close(fig)
