"""Mixture of experts against the layers people run: `literate.parts.moe` against Hugging Face's
`MixtralSparseMoeBlock`, `Qwen3MoeSparseMoeBlock` (norm_topk_prob True and False),
`DeepseekV3MoE` (group-limited routing, a balancing bias that changes the choice, a
shared expert) and `GptOssMLP` (router bias, interleaved gate/up, clamped SwiGLU), and
`load_balancing_loss` against `load_balancing_loss_func`.

Every comparison is in float64, with HF's fused expert tensors (built with torch.empty)
filled from ours by `load_state_dict(strict=True)`, so names and shapes must agree.
Outputs, router logits and the gradients w.r.t. the input and every parameter.

Tolerances. HF's routers compute in float32 (Mixtral and Qwen3-MoE take the softmax in
float32, DeepSeek-V3 the logits themselves), and ours copy them, op for op: the same
float32 weights enter both sides. The expert products are float64 on both sides,
summed in another order (batched per expert vs HF's loop), so outputs agree to
F64_TOL = 1e-12. A gradient that flows back through the float32 router is rounded to
float32 on its way, and a last-bit difference in float64 can round to a different
float32: so each gradient is allowed max(F64_TOL, F32_BOUND = 16 float32 ulps of the
tensor's largest entry). Measured (torch 2.13, transformers 5.24, these seeds): router
logits 0 everywhere; outputs <= 3.4e-14; gradients <= 2.7e-15 (Mixtral, Qwen3-MoE),
2.8e-14 (DeepSeek-V3), 4.5e-13 (gpt-oss, inputs of scale 3 for the clamp), the router
weight's 0 (Mixtral, Qwen3, DeepSeek): no float32 rounding flipped. The balancing loss:
HF accumulates in float32, ours in the logits' dtype: within F32_BOUND, and > 1e-12.
"""

from __future__ import annotations

from functools import partial

import pytest
import torch
import torch.nn.functional as F
from transformers import DeepseekV3Config, GptOssConfig, MixtralConfig, Qwen3MoeConfig
from transformers.models.deepseek_v3 import modeling_deepseek_v3
from transformers.models.gpt_oss import modeling_gpt_oss
from transformers.models.mixtral import modeling_mixtral
from transformers.models.qwen3_moe import modeling_qwen3_moe

import literate.parts.moe as moe_module
from literate.parts.ffn import GatedFFN
from literate.parts.moe import (
    Experts,
    GptOssExperts,
    MoEFFN,
    dispatch,
    dropped_pairs,
    load_balancing_loss,
    update_balancing_bias,
)
from literate.parts.routers import (
    DeepSeekV3Router,
    Router,
    deepseek_v3_router,
    gpt_oss_router,
    mixtral_router,
    qwen3_moe_router,
    switch_router,
)
from literate.tools.syncs import host_reads

from harness import F32_BOUND

F64 = torch.float64
F64_TOL = 1e-12
D, I, E, K, B, T = 16, 12, 8, 2, 2, 9


# --- the harness ------------------------------------------------------------------------
def randomise(
    module: torch.nn.Module, seed: int, scale: float = 0.3
) -> torch.nn.Module:
    """Every parameter of `module` random (HF's fused experts are torch.empty)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(scale * torch.randn(p.shape, generator=g, dtype=F64))
    return module


def copy_into(ours: torch.nn.Module, theirs: torch.nn.Module, rename) -> None:
    theirs.load_state_dict(
        {rename(k): v for k, v in ours.state_dict().items()}, strict=True
    )


def inputs(seed: int = 1, scale: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    x = scale * torch.randn(B, T, D, generator=g, dtype=F64)
    return x.requires_grad_(), torch.randn(B, T, D, generator=g, dtype=F64)


def recorded_logits(router_module: torch.nn.Module):
    """A forward hook keeping HF's router logits (a standalone block returns none)."""
    seen = []
    handle = router_module.register_forward_hook(lambda m, a, out: seen.append(out[0]))
    return seen, handle


def compare(
    ours: MoEFFN,
    theirs: torch.nn.Module,
    hf_router: torch.nn.Module,
    rename,
    *,
    seed: int = 1,
    scale: float = 1.0,
    output=lambda out: out,
):
    """(max diffs by name) of output, router logits, d/dx and every parameter's grad;
    asserts the tolerances of the module docstring."""
    x, probe = inputs(seed, scale)
    seen, handle = recorded_logits(hf_router)
    try:
        want = output(theirs(x))
    finally:
        handle.remove()
    got = ours(x)
    names = [n for n, _ in ours.named_parameters()]
    g_ours = torch.autograd.grad((got * probe).sum(), [x, *ours.parameters()])
    g_ref = torch.autograd.grad(
        (want * probe).sum(), [x, *(theirs.get_parameter(rename(n)) for n in names)]
    )
    diffs = {
        "output": (got - want).abs().max().item(),
        "router_logits": (ours.router_logits - seen[0]).abs().max().item(),
    }
    assert ours.router_logits.dtype == seen[0].dtype
    assert diffs["output"] <= F64_TOL and diffs["router_logits"] <= F64_TOL, diffs
    for name, a, b in zip(["x", *names], g_ours, g_ref):
        diffs[name] = (a - b).abs().max().item()
        bound = max(F32_BOUND * b.abs().max().item(), F64_TOL)
        assert diffs[name] <= bound, f"{name}: {diffs[name]:.3g} > {bound:.3g}"
    return diffs


def hf_gate_names(name: str) -> str:
    return name.replace("router.", "gate.").replace("shared.", "shared_experts.")


# --- Mixtral, Qwen3-MoE -----------------------------------------------------------------
def mixtral_pair(top_k: int = K, seed: int = 0):
    config = MixtralConfig(
        hidden_size=D,
        intermediate_size=I,
        num_local_experts=E,
        num_experts_per_tok=top_k,
        router_jitter_noise=0.0,
    )
    ours = randomise(
        MoEFFN(
            Router(D, E, partial(mixtral_router, top_k=top_k)), Experts(E, D, I)
        ).double(),
        seed,
    )
    theirs = modeling_mixtral.MixtralSparseMoeBlock(config).double().eval()
    copy_into(ours, theirs, hf_gate_names)
    return ours, theirs


def test_hf_layout_is_what_we_hold():
    """HF 5.24: gate_up_proj (E, 2I, d) with [gate; up], down_proj (E, d, I)."""
    _, theirs = mixtral_pair()
    assert theirs.experts.gate_up_proj.shape == (E, 2 * I, D)
    assert theirs.experts.down_proj.shape == (E, D, I)
    assert theirs.gate.weight.shape == (E, D)
    assert theirs.experts.config._experts_implementation in (None, "eager")


def test_mixtral_moe_equals_mixtral_sparse_moe_block():
    ours, theirs = mixtral_pair()
    compare(ours, theirs, theirs.gate, hf_gate_names)


@pytest.mark.parametrize("norm_topk_prob", [True, False])
def test_qwen3_moe_equals_qwen3_moe_sparse_moe_block(norm_topk_prob):
    config = Qwen3MoeConfig(
        hidden_size=D,
        moe_intermediate_size=I,
        num_experts=E,
        num_experts_per_tok=K,
        norm_topk_prob=norm_topk_prob,
    )
    route = partial(qwen3_moe_router, top_k=K, norm_topk_prob=norm_topk_prob)
    ours = randomise(MoEFFN(Router(D, E, route), Experts(E, D, I)).double(), 2)
    theirs = modeling_qwen3_moe.Qwen3MoeSparseMoeBlock(config).double().eval()
    copy_into(ours, theirs, hf_gate_names)
    compare(ours, theirs, theirs.gate, hf_gate_names)
    weights = ours.router(torch.randn(5, D, dtype=F64))[1]
    sums = weights.sum(-1)
    assert (sums - 1).abs().max() < 1e-6 if norm_topk_prob else (sums < 1 - 1e-3).all()


# --- DeepSeek-V3 ------------------------------------------------------------------------
DS = {
    "top_k": 3,
    "n_group": 4,
    "topk_group": 2,
    "norm_topk_prob": True,
    "routed_scaling_factor": 2.5,
}


def test_deepseek_v3_moe_equals_deepseek_v3_moe_with_a_bias_that_changes_the_choice():
    config = DeepseekV3Config(
        hidden_size=D,
        moe_intermediate_size=I,
        n_routed_experts=E,
        num_experts_per_tok=DS["top_k"],
        n_group=DS["n_group"],
        topk_group=DS["topk_group"],
        n_shared_experts=2,
        norm_topk_prob=True,
        routed_scaling_factor=2.5,
    )
    ours = MoEFFN(
        DeepSeekV3Router(D, E, **DS),
        Experts(E, D, I),
        shared=GatedFFN(D, 2 * I, F.silu),
    ).double()
    randomise(ours, 3, scale=0.5)
    bias = 0.3 * torch.randn(E, generator=torch.Generator().manual_seed(4), dtype=F64)
    ours.router.e_score_correction_bias.copy_(bias)
    theirs = modeling_deepseek_v3.DeepseekV3MoE(config).double().eval()
    copy_into(ours, theirs, hf_gate_names)
    assert theirs.gate.e_score_correction_bias.abs().min() > 0
    x, _ = inputs()
    with torch.no_grad():  # the bias changes which experts are chosen
        logits = ours.router(x.reshape(-1, D))[0]
        with_bias = deepseek_v3_router(logits, score_bias=bias, **DS)[1]
        without = deepseek_v3_router(logits, score_bias=torch.zeros_like(bias), **DS)[1]
        changed = (with_bias.sort(-1).values != without.sort(-1).values).any(-1)
        assert 0 < changed.sum() < changed.numel()
    compare(ours, theirs, theirs.gate, hf_gate_names)
    assert ours.router_logits.dtype == torch.float32  # HF's: logits in float32


def test_deepseek_v3_weights_are_unbiased_scores_of_the_kept_groups():
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(6, E, generator=g, dtype=F64)
    bias = torch.randn(E, generator=g, dtype=F64)
    weights, experts = deepseek_v3_router(logits, score_bias=bias, **DS)
    scores = logits.sigmoid().gather(1, experts)
    torch.testing.assert_close(
        weights, 2.5 * scores / scores.sum(-1, keepdim=True), atol=1e-14, rtol=0
    )
    groups = experts // (E // DS["n_group"])  # each token's experts in <= 2 groups
    assert all(len(set(row)) <= DS["topk_group"] for row in groups.tolist())


# --- gpt-oss ----------------------------------------------------------------------------
def test_gpt_oss_moe_equals_gpt_oss_mlp():
    """Router with a bias, top-k on logits then a softmax over the k; experts (E, d, 2I)
    interleaved with biases and the clamped SwiGLU, the clamp active on these inputs."""
    config = GptOssConfig(
        hidden_size=D, intermediate_size=I, num_local_experts=E, num_experts_per_tok=K
    )
    ours = MoEFFN(
        Router(D, E, partial(gpt_oss_router, top_k=K), bias=True),
        GptOssExperts(E, D, I),
    ).double()
    randomise(ours, 6, scale=1.0)
    theirs = modeling_gpt_oss.GptOssMLP(config).double().eval()
    copy_into(ours, theirs, lambda n: n)  # HF's names are ours
    assert theirs.experts.gate_up_proj.shape == (E, D, 2 * I)
    assert theirs.experts.down_proj.shape == (E, I, D)
    assert (theirs.experts.alpha, theirs.experts.limit) == (1.702, 7.0)
    x, _ = inputs(scale=3.0)
    with torch.no_grad():
        gate_up = x.reshape(-1, D) @ ours.experts.gate_up_proj[0]
        assert (gate_up[:, ::2] > 7).any() and (gate_up[:, 1::2].abs() > 7).any()
    compare(
        ours, theirs, theirs.router, lambda n: n, scale=3.0, output=lambda out: out[0]
    )


# --- the balancing loss -----------------------------------------------------------------
def layer_logits(seed: int, layers: int = 3):
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randn(B * T, E, generator=g, dtype=F64, requires_grad=True)
        for _ in range(layers)
    ]


@pytest.mark.parametrize("masked", [False, True], ids=["no mask", "attention_mask"])
def test_load_balancing_loss_equals_hf(masked):
    logits = layer_logits(7)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[0, :3] = 0  # left padding in the first row
    ours = load_balancing_loss(logits, K, E, mask == 1 if masked else None)
    theirs = modeling_mixtral.load_balancing_loss_func(
        tuple(logits), E, K, mask if masked else None
    )
    diff = (ours - theirs).abs().item()
    assert 1e-12 < diff <= F32_BOUND * theirs.abs().item()  # HF: float32 sums
    for a, b in zip(
        torch.autograd.grad(ours, logits), torch.autograd.grad(theirs, logits)
    ):
        assert (a - b).abs().max() <= F32_BOUND * b.abs().max()
    if masked:  # the padding is really left out
        assert (load_balancing_loss(logits, K, E) - ours).abs() > 1e-6


def test_uniform_routing_gives_k():
    for k in (1, 2, 3):
        loss = load_balancing_loss(torch.zeros(B * T, E, dtype=F64), k, E)
        assert abs(loss.item() - k) < 1e-12


def test_a_single_layer_tensor_is_one_layer():
    logits = layer_logits(8, layers=1)
    assert torch.equal(
        load_balancing_loss(logits[0], K, E), load_balancing_loss(logits, K, E)
    )


# --- routers ----------------------------------------------------------------------------
def test_renormalised_softmax_top_k_is_softmax_over_the_top_k_logits():
    """p_i / sum_{j in top k} p_j = exp(l_i) / sum_{j in top k} exp(l_j): the normaliser
    over all E cancels. Ours (HF's order) against the softmax of the k logits."""
    logits = torch.randn(50, E, generator=torch.Generator().manual_seed(9), dtype=F64)
    weights, experts = mixtral_router(logits, 3)
    direct = logits.gather(1, experts).softmax(-1)
    assert (weights.double() - direct).abs().max() < 4 * 2.0**-24  # float32 softmax
    assert torch.equal(experts, logits.topk(3, dim=-1).indices)


def test_switch_router_is_top_1_gated_by_its_probability():
    logits = torch.randn(10, E, generator=torch.Generator().manual_seed(10), dtype=F64)
    gate, expert = switch_router(logits)
    probs = logits.float().softmax(-1).double()
    assert gate.shape == expert.shape == (10, 1) and gate.dtype == F64
    assert torch.equal(expert[:, 0], logits.argmax(-1))
    assert torch.equal(gate, probs.max(-1, keepdim=True).values)


# --- gradients ---------------------------------------------------------------------
def test_idle_experts_get_exactly_zero_gradient_and_hf_agrees():
    ours, theirs = mixtral_pair(seed=11)
    x = torch.randn(1, 2, D, generator=torch.Generator().manual_seed(12), dtype=F64)
    with torch.no_grad():
        used = ours.router(x.reshape(-1, D))[2].unique()
    idle = [e for e in range(E) if e not in used.tolist()]
    assert len(idle) >= E - 2 * K
    for module in (ours, theirs):
        out = module(x)
        grads = torch.autograd.grad(
            out.square().sum(), [module.experts.gate_up_proj, module.experts.down_proj]
        )
        for g in grads:
            assert torch.count_nonzero(g[idle]) == 0  # exactly zero, not None
            assert all(torch.count_nonzero(g[e]) > 0 for e in used.tolist())


def test_idle_gpt_oss_experts_get_zero_gradient_despite_their_biases():
    """Empty slots of a group give bias-only outputs; they are never gathered."""
    ours = randomise(
        MoEFFN(
            Router(D, E, partial(gpt_oss_router, top_k=K), bias=True),
            GptOssExperts(E, D, I),
        ).double(),
        13,
    )
    x = torch.randn(1, 2, D, generator=torch.Generator().manual_seed(14), dtype=F64)
    used = ours.router(x.reshape(-1, D))[2].unique().tolist()
    idle = [e for e in range(E) if e not in used]
    params = [p for n, p in ours.experts.named_parameters()]
    for g in torch.autograd.grad(ours(x).square().sum(), params):
        assert torch.count_nonzero(g[idle]) == 0


def router_grads(top_k: int, route=None):
    """(ours, HF's) gradient of the router weight, Mixtral's block with top_k; with
    `route`, ours uses that routing function instead of Mixtral's."""
    ours, theirs = mixtral_pair(top_k=top_k, seed=15)
    if route is not None:
        ours.router.route = partial(route, top_k=top_k)
    x, probe = inputs()
    return (
        torch.autograd.grad((ours(x) * probe).sum(), ours.router.weight)[0],
        torch.autograd.grad((theirs(x) * probe).sum(), theirs.gate.weight)[0],
    )


def test_the_router_learns_with_top_2_and_not_with_renormalised_top_1():
    """Renormalised over one expert the weight is p / p = 1, whatever the logits: the
    router gets no gradient (Switch gates by the un-normalised p for this reason).
    Exactly none in the softmax-over-the-k form (gpt_oss_router, equal to the
    renormalised softmax, above); in Mixtral's order, p / sum p in float32, what is
    left is float32 rounding, ~1e-8 of the top-2 gradient, and HF's is the same, bit
    for bit. Top-2: every expert's row of the router gets a gradient."""
    top2, top2_hf = router_grads(2)
    assert torch.count_nonzero(top2) == E * D and torch.equal(top2, top2_hf)
    top1, top1_hf = router_grads(1)
    assert torch.equal(top1, top1_hf)
    assert 0 < top1.abs().max() <= 2.0**-20 * top2.abs().max()  # rounding, not signal
    assert torch.count_nonzero(router_grads(1, gpt_oss_router)[0]) == 0  # exactly none


# --- refusals ----------------------------------------------------------------------
ROUTERS = {
    "mixtral": mixtral_router,
    "gpt-oss": gpt_oss_router,
    "qwen3": partial(qwen3_moe_router, norm_topk_prob=True),
    "deepseek": partial(
        deepseek_v3_router,
        score_bias=torch.zeros(E),
        n_group=4,
        topk_group=2,
        norm_topk_prob=True,
        routed_scaling_factor=1.0,
    ),
}


@pytest.mark.parametrize("route", ROUTERS.values(), ids=ROUTERS.keys())
@pytest.mark.parametrize(
    "top_k, error",
    [(0, ValueError), (E + 1, ValueError), (2.0, TypeError), (True, TypeError)],
    ids=["0", "E+1", "float", "bool"],
)
def test_a_bad_top_k_is_refused_naming_it(route, top_k, error):
    with pytest.raises(error, match="top_k"):
        route(torch.randn(3, E), top_k)


def test_a_bad_top_k_is_refused_by_the_layer_and_the_loss():
    moe = MoEFFN(Router(D, E, partial(mixtral_router, top_k=E + 1)), Experts(E, D, I))
    with pytest.raises(ValueError, match="top_k=9 > the number of experts 8"):
        moe(torch.randn(B, T, D))
    with pytest.raises(ValueError, match="top_k=5 > the 4 experts of the topk_group=2"):
        DeepSeekV3Router(D, E, top_k=5, n_group=4, topk_group=2)
    with pytest.raises(ValueError, match="top_k"):
        load_balancing_loss(torch.randn(4, E), 0, E)


def test_parts_that_do_not_fit_are_refused():
    with pytest.raises(ValueError, match="router is for d_model=16, n_experts=4"):
        MoEFFN(Router(D, 4, partial(mixtral_router, top_k=2)), Experts(E, D, I))
    with pytest.raises(ValueError, match=r"experts \(4, 3\) must both be \[N, k\]"):
        dispatch(
            torch.randn(4, D),
            torch.rand(4, 2),
            torch.zeros(4, 3, dtype=torch.long),
            Experts(E, D, I),
            n_experts=E,
        )
    with pytest.raises(TypeError, match="experts must be a torch.long"):
        dispatch(
            torch.randn(4, D),
            torch.rand(4, 2),
            torch.zeros(4, 2),
            Experts(E, D, I),
            n_experts=E,
        )


# --- dispatch ---------------------------------------------------------------------------
def test_capacity_drops_the_pairs_beyond_an_experts_first_c():
    """All tokens to expert 0 with capacity 2: the first two tokens get its output,
    the rest 0; dropless gives every token its output."""
    experts_module = randomise(Experts(E, D, I).double(), 16)
    x = torch.randn(5, D, dtype=F64)
    weights, experts = torch.ones(5, 1, dtype=F64), torch.zeros(5, 1, dtype=torch.long)
    alone = experts_module(x[None].expand(E, 5, D))[0]  # expert 0 on every token
    dropless = dispatch(x, weights, experts, experts_module, n_experts=E)
    capped = dispatch(x, weights, experts, experts_module, n_experts=E, capacity=2)
    torch.testing.assert_close(dropless, alone, atol=1e-14, rtol=0)
    torch.testing.assert_close(capped[:2], alone[:2], atol=1e-14, rtol=0)
    assert torch.count_nonzero(capped[2:]) == 0


def all_moes():
    torch.manual_seed(17)
    return {
        "mixtral": MoEFFN(
            Router(D, E, partial(mixtral_router, top_k=K)), Experts(E, D, I)
        ),
        "deepseek": MoEFFN(
            DeepSeekV3Router(D, E, **DS),
            Experts(E, D, I),
            shared=GatedFFN(D, I, F.silu),
        ),
        "gpt-oss": MoEFFN(
            Router(D, E, partial(gpt_oss_router, top_k=K), bias=True),
            GptOssExperts(E, D, I),
        ),
    }


def test_no_host_sync_in_a_forward():
    x = torch.randn(B, T, D)
    for name, moe in all_moes().items():
        assert host_reads(moe, x) == 0, name
        flat = x.reshape(-1, D)
        _, weights, experts = moe.router(flat)
        assert (
            host_reads(dispatch, flat, weights, experts, moe.experts, n_experts=E) == 0
        )
        assert host_reads(load_balancing_loss, [moe.router_logits] * 2, K, E) == 0
    mask = torch.ones(B, T, dtype=torch.bool).tril()
    assert host_reads(load_balancing_loss, torch.randn(B * T, E), K, E, mask) == 0


def test_fullgraph_compile_equals_eager_bit_for_bit():
    """aot_eager: the graph is captured whole (no value read breaks it), and the
    forward and the router logits kept equal eager's exactly, every gradient to 2
    float32 ulps of its largest entry: aot_eager's backward may sum in another order
    (torch 2.13 gives the same bits; torch 2.7, on the padded path, differs by one ulp
    in two of the gradients). DeepSeek-V3's, the one with every part (group routing,
    bias, shared expert); one compile, to keep the file fast."""
    x = torch.randn(B, T, D, generator=torch.Generator().manual_seed(18))
    for name, moe in [("deepseek", all_moes()["deepseek"])]:
        compiled = torch.compile(moe, fullgraph=True, backend="aot_eager")
        results = []
        for run in (moe, compiled):
            out = run(x)
            grads = torch.autograd.grad(out.square().sum(), list(moe.parameters()))
            results.append((out, moe.router_logits, *grads))
        (out, logits, *grads), (c_out, c_logits, *c_grads) = results
        assert torch.equal(out, c_out) and torch.equal(logits, c_logits), name
        for g, c in zip(grads, c_grads, strict=True):
            assert (g - c).abs().max() <= 2 * 2.0**-23 * g.abs().max(), name


# --- the fast path: grouped_mm on the sorted pairs ------------------------------------
F32_ULPS = 8 * 2.0**-23  # times the largest |entry|: float32 sums in another order
HAS_GROUPED_MM = hasattr(torch.nn.functional, "grouped_mm")
NO_GROUPED_MM = (
    "this torch has no F.grouped_mm: only the padded path exists, tested above"
)


def test_the_fast_path_is_taken_exactly_when_torch_has_grouped_mm():
    assert Experts(E, D, I).takes_grouped(torch.float32) == HAS_GROUPED_MM
    assert GptOssExperts(E, D, I).takes_grouped(torch.float32) == HAS_GROUPED_MM
    assert not GptOssExperts(E, D, I).takes_grouped(F64)
    assert not GptOssExperts(E, D, I).takes_grouped(torch.bfloat16)  # I = 12: 24 bytes
    assert GptOssExperts(E, D, 16).takes_grouped(torch.bfloat16) == HAS_GROUPED_MM


@pytest.mark.skipif(not HAS_GROUPED_MM, reason=NO_GROUPED_MM)
def test_grouped_path_equals_padded_path_with_idle_experts_values_and_gradients():
    assert_grouped_equals_padded()


def assert_grouped_equals_padded():
    """float32, 3 tokens x top-2 = 6 pairs for 8 experts: at least 2 get no token. The
    fast path (`Experts.grouped`) against the padded one (the bare `forward`, which has
    no `grouped`): outputs and every gradient within 8 float32 ulps of the largest
    entry (measured: <= 2 ulps); idle experts' gradients exactly 0 on both. The loss is
    `.sum()`, whose gradient of stride 0 grouped_mm's own backward refuses."""
    torch.manual_seed(19)
    experts_module = Experts(E, D, I)
    assert experts_module.takes_grouped(torch.float32)
    assert not experts_module.takes_grouped(F64)
    assert not experts_module.takes_grouped(torch.bfloat16)  # I = 12: 24 bytes
    x = torch.randn(3, D, requires_grad=True)
    router = Router(D, E, partial(mixtral_router, top_k=K))
    _, weights, experts = router(x)
    idle = [e for e in range(E) if e not in experts.unique().tolist()]
    assert len(idle) >= 2
    params = [x, experts_module.gate_up_proj, experts_module.down_proj]
    results = []
    for fn in (experts_module, experts_module.forward):
        out = dispatch(x, weights.detach(), experts, fn, n_experts=E)
        results.append((out, *torch.autograd.grad(out.sum(), params)))
    for name, a, b in zip(["output", "x", "gate_up", "down"], *results):
        assert (a - b).abs().max() <= F32_ULPS * b.abs().max(), name
    for g in results[0][2:]:
        assert torch.count_nonzero(g[idle]) == 0


@pytest.mark.skipif(not HAS_GROUPED_MM, reason=NO_GROUPED_MM)
@pytest.mark.parametrize("name", ["mixtral", "gpt-oss"])
def test_grouped_path_makes_no_host_sync_and_compiles_whole(name, monkeypatch):
    """The offsets stay a tensor: no read (gpt-oss's row experts come from them by
    searchsorted); under torch.compile(fullgraph=True, aot_eager) grouped_mm is an
    opaque op (its fake kernel is bfloat16-only), the graph has no break (fullgraph
    would raise), the grouped path is the one traced (the padded `forward` never
    runs), and the compiled forward and gradients equal eager's bit for bit."""
    moe = all_moes()[name]
    assert moe.experts.takes_grouped(torch.float32)
    x = torch.randn(B, T, D, generator=torch.Generator().manual_seed(20))
    assert host_reads(moe, x) == 0
    monkeypatch.setattr(
        type(moe.experts), "forward", lambda *a: pytest.fail("the padded path ran")
    )
    compiled = torch.compile(moe, fullgraph=True, backend="aot_eager")
    results = []
    for run in (moe, compiled):
        out = run(x)
        results.append(
            (out, *torch.autograd.grad(out.square().sum(), list(moe.parameters())))
        )
    assert all(torch.equal(a, b) for a, b in zip(*results))


@pytest.mark.skipif(not HAS_GROUPED_MM, reason=NO_GROUPED_MM)
def test_gpt_oss_grouped_path_equals_padded_path_values_and_every_gradient(monkeypatch):
    """float32, gpt-oss's experts (x @ W, interleaved gate/up, biases, the clamp
    reached), 3 tokens x top-2 = 6 pairs for 8 experts: the fast path
    (`GptOssExperts.grouped`, spied on: once, on the 6 sorted rows) against the padded
    one (the bare `forward`). Outputs and the gradients of the input, the router's
    weight and bias and all four expert tensors within F32_ULPS (8 float32 ulps of the
    largest entry; measured over seeds 0-19 with 3 and 18 tokens: <= 2.1 with this
    recipe, the router's gradients <= 6.7 with the default init); the idle experts'
    gradients, biases included, exactly 0 on both paths, the others' not."""
    torch.manual_seed(21)
    experts_module = GptOssExperts(E, D, I)
    with torch.no_grad():
        for p in experts_module.parameters():
            p.normal_(0.0, 0.5)  # pre-activations that reach the clamp
    router = Router(D, E, partial(gpt_oss_router, top_k=K), bias=True)
    x = (3 * torch.randn(3, D)).requires_grad_()
    _, _, experts = router(x)
    idle = [e for e in range(E) if e not in experts.unique().tolist()]
    assert len(idle) >= 2
    with torch.no_grad():  # each pair's pre-activations [N, k, 2I]: beyond the limit
        pre = (x[:, None, None] @ experts_module.gate_up_proj[experts]).squeeze(
            -2
        ) + experts_module.gate_up_proj_bias[experts]
        assert (pre[..., ::2] > 7).any() and (pre[..., 1::2].abs() > 7).any()
    grouped, calls = GptOssExperts.grouped, []

    def spy(self, rows, offs):
        calls.append(rows.shape)
        return grouped(self, rows, offs)

    monkeypatch.setattr(GptOssExperts, "grouped", spy)
    params = [x, router.weight, router.bias, *experts_module.parameters()]
    results = []
    for fn in (experts_module, experts_module.forward):
        _, weights, experts = router(x)  # the router's graph, once per path
        out = dispatch(x, weights, experts, fn, n_experts=E)
        results.append((out, *torch.autograd.grad(out.sum(), params)))
    assert calls == [(3 * K, D)]  # the first run only: the second is padded
    names = [
        "output",
        "x",
        "router",
        "router bias",
        *dict(experts_module.named_parameters()),
    ]
    for name, a, b in zip(names, *results, strict=True):
        assert (a - b).abs().max() <= F32_ULPS * b.abs().max(), name
    for grads in results:
        assert all(torch.count_nonzero(g[idle]) == 0 for g in grads[4:])
        assert all(torch.count_nonzero(g) > 0 for g in grads[4:])


@pytest.mark.skipif(not HAS_GROUPED_MM, reason=NO_GROUPED_MM)
def test_the_ops_take_a_transposed_weight_and_say_the_strides_they_return():
    """GptOssExperts hands the ops W^T, a view of its (E, i, o) weight (no copy): the
    real kernels and the fake ones (what torch.compile traces with) must agree on
    every output's shape and strides, forward and backward (opcheck; a fake that
    copied the weight's strides made inductor refuse the backward's output)."""
    g = torch.Generator().manual_seed(22)
    weight = torch.randn(E, D, 2 * I, generator=g)  # gpt-oss's x @ W layout
    rows, grad = torch.randn(10, D, generator=g), torch.randn(10, 2 * I, generator=g)
    offs = torch.tensor([0, 3, 3, 3, 7, 7, 9, 10], dtype=torch.int32)  # idle experts
    for op, args in (
        (moe_module._grouped_mm, (rows, weight.mT, offs)),
        (moe_module._grouped_mm_backward, (grad, rows, weight.mT, offs)),
    ):
        torch.library.opcheck(op, args)
    d_rows, d_weight = moe_module._grouped_mm_backward(grad, rows, weight.mT, offs)
    for e, (start, end) in enumerate(zip([0, *offs[:-1].tolist()], offs.tolist())):
        torch.testing.assert_close(
            d_weight[e], (rows[start:end].T @ grad[start:end]).T, atol=1e-5, rtol=0
        )  # float32 sums of <= 4 products
    torch.testing.assert_close(d_rows[3:7], grad[3:7] @ weight[4].T, atol=1e-5, rtol=0)


@pytest.mark.skipif(not HAS_GROUPED_MM, reason=NO_GROUPED_MM)
def test_the_ops_survive_a_copy_of_their_section_run_and_dropped():
    """A page that shows the grouped_mm section runs it again in the same process, in a
    namespace that is later dropped: its ops are its own (named after the defining
    module), and the library's keep working after the copy is gone. (Named alike, the
    copy replaced the library's ops, and its garbage collection unregistered them.)"""
    import gc

    from literate.tools.export import section_source

    namespace = {"__builtins__": __builtins__}
    exec(
        "import torch\nimport torch.nn.functional as F\nfrom torch import Tensor\n"
        + section_source("parts.moe", "grouped_mm"),
        namespace,
    )
    assert namespace["OPS"] == "builtins" != moe_module.OPS == "literate_parts_moe"
    del namespace
    gc.collect()
    assert_grouped_equals_padded()  # the library's ops still work


def test_a_capacity_reports_what_it_drops_and_a_large_one_is_dropless():
    """Switch's capacity form: with C >= the busiest expert's load it equals the dropless dispatch (to
    float64 rounding, 1e-15 of outputs of size 1e-2: the batched matmuls have other shapes, C rows instead of
    N, so the kernel may block the sums differently), and drops 0 pairs; with a smaller C, `dropped` counts
    the pairs over capacity (no sync)."""
    torch.manual_seed(3)
    e, d = 4, 8
    experts_module = Experts(e, d, 12).double()
    router = Router(d, e, lambda logits: switch_router(logits)).double()
    x = torch.randn(2, 6, d, dtype=torch.float64)
    dropless = MoEFFN(router, experts_module)
    with torch.no_grad():
        expected = dropless(x)
        load = torch.bincount(dropless.chosen.flatten(), minlength=e)
        roomy = MoEFFN(router, experts_module, capacity=int(load.max()))
        assert (roomy(x) - expected).abs().max() < 1e-15 and int(roomy.dropped) == 0
        tight = MoEFFN(router, experts_module, capacity=1)
        capped = tight(x)
    assert int(tight.dropped) == int((load - 1).clamp(min=0).sum()) > 0
    assert int(dropped_pairs(dropless.chosen, e, 1)) == int(tight.dropped)
    kept = (capped - expected).abs().amax(-1).flatten() < 1e-15  # [N]: untouched tokens
    assert int((~kept).sum()) == int(tight.dropped)  # top-1: a dropped pair is a token


def test_the_loss_free_bias_evens_out_a_skewed_load():
    """DeepSeek-V3's bias update (sign rule, step `speed`): router logits skewed towards the last
    experts; after 200 updates the busiest expert's load is within 1.5x of the mean, from over 3x."""
    torch.manual_seed(0)
    e, n, k = 16, 512, 2
    skew = torch.linspace(-1.5, 1.5, e)
    bias = torch.zeros(e)

    def imbalance() -> float:
        logits = torch.randn(n, e) + skew
        _, chosen = deepseek_v3_router(
            logits,
            k,
            score_bias=bias,
            n_group=4,
            topk_group=2,
            norm_topk_prob=True,
            routed_scaling_factor=1.0,
        )
        load = torch.bincount(chosen.flatten(), minlength=e).float()
        update_balancing_bias(bias, chosen, speed=0.01)
        return float(load.max() / load.mean())

    first = imbalance()
    for _ in range(200):
        last = imbalance()
    assert first > 3 and last < 1.5
    before = bias.clone()
    update_balancing_bias(bias, torch.zeros(4, 2, dtype=torch.long), speed=0.01)
    assert bias[0] == before[0] - 0.01 and (bias[1:] == before[1:] + 0.01).all()
    with pytest.raises(ValueError, match=r"^speed must be"):
        update_balancing_bias(bias, torch.zeros(4, 2, dtype=torch.long), speed=0.0)
    with pytest.raises(
        TypeError,
        match=r"^bias must be float32 or float64, got "
        r"torch.bfloat16",
    ):
        update_balancing_bias(bias.bfloat16(), torch.zeros(4, 2, dtype=torch.long))
