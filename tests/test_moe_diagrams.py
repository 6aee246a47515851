"""Chapter 9's diagrams draw what the code computes: `moe-layer` the minimal Mixtral
layer's router on its token (logits, probabilities, the experts chosen and their
weights), `moe-dispatch` what `dispatch` does with four tokens routed top-2 among three
experts (the stable sort by expert, the counts, the slots, the way back). Each check
is also shown to fail on a figure of another routing."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.text import Text

from literate.figures import FIGURES, moe_diagrams
from literate.minimal.moe import MixtralMoE
from literate.parts.moe import Experts, dispatch
from literate.parts.routers import mixtral_router

F64 = torch.float64


def drawn(fig) -> dict[str, str]:
    """The texts the figure names (gid), by name."""
    return {t.get_gid(): t.get_text() for t in fig.findobj(Text) if t.get_gid()}


def fmt(v: float, language: str) -> str:
    s = f"{v:.2f}".replace("-", "\u2212")
    return s.replace(".", ",") if language == "ru" else s


def font_sizes(fig) -> list[float]:
    return [t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip()]


# --- moe-layer ---------------------------------------------------------------------


def fresh_router() -> tuple[list[float], list[float], list[int], list[float]]:
    """The layer's router built again (the identity, on the page's token), run by
    `mixtral_router`:
    (logits [E], probabilities [E], experts chosen [k], weights [k])."""
    moe = MixtralMoE(**moe_diagrams.LAYER_SHAPE).double()
    with torch.no_grad():
        moe.gate.weight.copy_(torch.eye(moe_diagrams.LAYER_SHAPE["d_model"]))
    x = torch.tensor([moe_diagrams.LAYER_TOKEN], dtype=F64)  # chapter 9's token
    with torch.no_grad():
        logits = moe.gate(x)  # [1, E]
    weights, chosen = mixtral_router(logits, top_k=moe.top_k)
    probs = logits.float().softmax(dim=-1)[0]
    return logits[0].tolist(), probs.tolist(), chosen[0].tolist(), weights[0].tolist()


def assert_layer_drawn(fig, logits, probs, chosen, gates, language) -> None:
    texts = drawn(fig)
    gate_of = dict(zip(chosen, gates))
    for e, (logit, prob) in enumerate(zip(logits, probs, strict=True)):
        assert texts[f"logit-{e}"] == fmt(logit, language)
        assert texts[f"prob-{e}"] == fmt(prob, language)
        want = fmt(gate_of[e], language) if e in gate_of else "\u2014"
        assert texts[f"gate-{e}"] == want, (e, texts[f"gate-{e}"], want)
        assert (texts[f"expert-{e}"] == f"FFN {e}") == (e in gate_of)
    terms = [f"{fmt(g, language)}\u00b7FFN$_{e}$($x$)" for e, g in gate_of.items()]
    assert texts["output"] == "$y$ = " + " + ".join(terms)


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_layer_figure_prints_a_fresh_run_of_the_layers_router(language):
    logits, probs, chosen, gates = fresh_router()
    run = moe_diagrams.one_token()
    assert run.chosen == tuple(chosen) and run.n_experts == len(probs) == 4
    assert run.top_k == len(chosen) == 2 and run.d_model == 4
    # chapter 9's example by hand: experts 0 and 1, gates softmax(2, 1) = (e, 1) / (e + 1)
    assert run.chosen == (0, 1)
    e = math.e
    assert run.gates == pytest.approx((e / (e + 1), 1 / (e + 1)), abs=1e-7)
    assert run.probs == pytest.approx(probs, abs=1e-7)
    assert run.gates == pytest.approx(gates, abs=1e-7)
    assert run.logits == pytest.approx(logits, abs=1e-12)
    assert sorted(probs, reverse=True)[:2] == [probs[e] for e in chosen]
    fig = FIGURES["moe-layer"].draw(language=language, theme="light")
    assert_layer_drawn(fig, logits, probs, chosen, gates, language)
    plt.close(fig)


def test_the_layer_check_fails_on_a_figure_of_another_routing():
    """The two least probable experts instead of the two most: the drawn figure is not
    theirs."""
    logits, probs, _, _ = fresh_router()
    least = sorted(range(len(probs)), key=probs.__getitem__)[:2]
    mass = sum(probs[e] for e in least)
    fig = FIGURES["moe-layer"].draw(language="en", theme="light")
    with pytest.raises(AssertionError):
        assert_layer_drawn(
            fig, logits, probs, least, [probs[e] / mass for e in least], "en"
        )
    plt.close(fig)


def test_the_layer_run_refuses_a_layer_that_ran_other_experts(monkeypatch):
    """If the layer ran other experts than its router's top k (here: a forward that
    routes on the negated logits but returns the true ones), `one_token` refuses."""
    real = moe_diagrams.layer_example

    def routed_elsewhere():
        moe, x = real()
        forward = moe.forward

        def lying(tokens):
            logits = moe.gate(tokens.reshape(-1, tokens.shape[-1]))
            moe.gate.weight.neg_()
            y, _ = forward(tokens)
            moe.gate.weight.neg_()
            return y, logits

        moe.forward = lying
        return moe, x

    monkeypatch.setattr(moe_diagrams, "layer_example", routed_elsewhere)
    with pytest.raises(RuntimeError, match="the layer ran experts"):
        moe_diagrams.one_token()


# --- moe-dispatch ------------------------------------------------------------------


def fresh_routing() -> tuple[torch.Tensor, torch.Tensor]:
    """`mixtral_router` on the seeded logits, run here: (weights, experts) [4, 2]."""
    generator = torch.Generator().manual_seed(moe_diagrams.DISPATCH_SEED)
    return mixtral_router(torch.randn(4, 3, generator=generator), top_k=2)


def assert_dispatch_drawn(fig, weights, experts, language) -> None:
    """What the figure prints, against the routing: the pairs in token order, their
    order after `dispatch`'s stable sort, torch.bincount's counts, the slots (expert
    e's tokens in token order, then zeros) and each token's way back."""
    texts = drawn(fig)
    (n, k), e = experts.shape, 3
    flat = experts.reshape(-1)
    order = torch.argsort(flat, stable=True).tolist()
    counts = torch.bincount(flat, minlength=e).tolist()
    for p in range(n * k):
        assert texts[f"pair-{p}"] == f"t{p // k}\ne{flat[p]}"
    for rank, p in enumerate(order):
        assert texts[f"sorted-{rank}"] == f"t{p // k}\ne{flat[p]}"
    for expert in range(e):
        if counts[expert]:
            assert texts[f"count-{expert}"] == f"e{expert}: {counts[expert]}"
        tokens = [p // k for p in order if flat[p] == expert]
        for s in range(n):
            want = f"t{tokens[s]}" if s < len(tokens) else "0"
            assert texts[f"slot-{expert}-{s}"] == want
    for t in range(n):
        terms = []
        for j in range(k):
            expert = int(experts[t, j])
            slot = [p // k for p in order if flat[p] == expert].index(t)
            head = "+ " if j else f"$y_{t}$ = "
            terms.append(f"{head}{fmt(weights[t, j], language)}\u00b7e{expert}[{slot}]")
        assert texts[f"back-{t}"] == "\n".join(terms)
    words = " ".join(t.get_text() for t in fig.findobj(Text))
    assert f"order = [{', '.join(map(str, order))}]" in words
    assert f"counts = [{', '.join(map(str, counts))}]" in words


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_dispatch_figure_prints_what_dispatch_does(language):
    weights, experts = fresh_routing()
    fig = FIGURES["moe-dispatch"].draw(language=language, theme="light")
    assert_dispatch_drawn(fig, weights, experts, language)
    plt.close(fig)


def test_the_dispatch_check_fails_on_a_figure_of_another_routing():
    """Token 0 sent to experts 0 and 1 instead: other counts, another order."""
    weights, experts = fresh_routing()
    wrong = experts.clone()
    wrong[0] = torch.tensor([0, 1])
    assert not torch.equal(wrong, experts)
    fig = FIGURES["moe-dispatch"].draw(language="en", theme="light")
    with pytest.raises(AssertionError):
        assert_dispatch_drawn(fig, weights, wrong, "en")
    plt.close(fig)


def test_the_dispatch_run_reads_the_counts_order_and_slots_of_dispatch():
    weights, experts = fresh_routing()
    run = moe_diagrams.dispatch_run(weights, experts)
    flat = experts.reshape(-1)
    assert run.counts == tuple(torch.bincount(flat, minlength=3).tolist()) == (1, 4, 3)
    assert run.order == tuple(torch.argsort(flat, stable=True).tolist())
    assert run.experts == tuple(map(tuple, experts.tolist()))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_dispatch_run_follows_any_routing(seed):
    """Six tokens routed at random: the run's counts and order are bincount's and the
    stable argsort's of that routing, not of the figure's."""
    generator = torch.Generator().manual_seed(seed)
    weights, experts = mixtral_router(torch.randn(6, 3, generator=generator), top_k=2)
    run = moe_diagrams.dispatch_run(weights, experts)
    flat = experts.reshape(-1)
    assert run.counts == tuple(torch.bincount(flat, minlength=3).tolist())
    assert run.order == tuple(torch.argsort(flat, stable=True).tolist())


def test_the_slots_and_the_way_back_are_dispatchs_with_real_experts():
    """Real experts on groups built from the run's slots, each token's outputs read back
    from its (expert, slot) pairs and weighted: `dispatch`'s own output, float64."""
    weights, experts = fresh_routing()
    weights = weights.double()
    run = moe_diagrams.dispatch_run(weights, experts)
    torch.manual_seed(0)
    stacked = Experts(n_experts=3, d_model=5, d_ff=4).double()
    x = torch.randn(4, 5, dtype=F64)
    groups = torch.zeros(3, 4, 5, dtype=F64)
    for e, row in enumerate(run.slots):
        for s, token in enumerate(row):
            if token is not None:
                groups[e, s] = x[token]
    with torch.no_grad():
        out = stacked(groups)
        want = dispatch(x, weights, experts, stacked, n_experts=3)
    got = torch.stack(
        [
            sum(weights[t, j] * out[e, s] for j, (e, s) in enumerate(run.back[t]))
            for t in range(4)
        ]
    )
    torch.testing.assert_close(got, want, rtol=0, atol=1e-14)


# --- both ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["moe-layer", "moe-dispatch"])
@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_figures_fit_a_phone(name, language):
    """At most 5.2 in wide and 5.1 in tall; no font under 9.5 pt (9 px at 358 px)."""
    fig = FIGURES[name].draw(language=language, theme="light")
    width, height = fig.get_size_inches()
    assert width <= 5.2 and height <= 5.1
    assert min(font_sizes(fig)) * 358 / (72 * width) >= 9
    plt.close(fig)


def test_the_alt_texts_state_the_runs_numbers():
    layer = moe_diagrams.one_token()
    alt = FIGURES["moe-layer"].alt
    assert ", ".join(f"{p:.2f}" for p in layer.probs) in alt
    for e, g in zip(layer.chosen, layer.gates):
        assert f"{e} ({g:.2f})" in alt
    weights, experts = fresh_routing()
    alt = FIGURES["moe-dispatch"].alt
    flat = experts.reshape(-1)
    assert ", ".join(map(str, torch.argsort(flat, stable=True).tolist())) in alt
    counts = torch.bincount(flat, minlength=3).tolist()
    assert ", ".join(f"expert {e} {c}" for e, c in enumerate(counts)) in alt
