"""literate/parts/moe_losses.py: the router z-loss against Hugging Face's, the
sequence-wise balance loss and expert-choice routing against references written from
their papers (loops over sequences, tokens and experts), and the refusals."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from transformers.models.switch_transformers.modeling_switch_transformers import (
    router_z_loss_func,
)

from literate.parts.moe import Experts, dispatch
from literate.parts.moe_losses import (
    expert_choice,
    expert_choice_moe,
    router_z_loss,
    sequence_wise_balance_loss,
)

F64 = torch.float64


# Router z-loss (Zoph et al. 2022, sec. 3.5, eq. 5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_z_loss_equals_hf_value_and_gradient(seed):
    """Pooled over three layers as HF concatenates them (`_unpack_router_logits`, along
    the tokens). Float64 throughout, and HF computes in the logits' dtype: the same
    logsumexp, squared, summed over the same tokens, so 1e-12 relative leaves room
    only for a different order of the final sum."""
    g = torch.Generator().manual_seed(seed)
    b, t, e = 2, 9, 8
    layers = [
        (3 * torch.randn(b * t, e, generator=g, dtype=F64)).requires_grad_()
        for _ in range(3)
    ]
    ours = router_z_loss(layers)
    theirs = router_z_loss_func(torch.cat([x.view(b, t, e) for x in layers], dim=1))
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=0.0)
    for a, c in zip(
        torch.autograd.grad(ours, layers), torch.autograd.grad(theirs, layers)
    ):
        torch.testing.assert_close(a, c, rtol=1e-12, atol=1e-15)


def test_z_loss_is_eq_5_by_a_loop_and_its_gradient_is_2_log_z_p_over_n():
    logits = torch.randn(7, 5, dtype=F64, requires_grad=True)
    by_loop = sum(
        math.log(sum(math.exp(v) for v in row)) ** 2 for row in logits.tolist()
    ) / len(logits)
    loss = router_z_loss(logits)
    assert abs(loss.item() - by_loop) < 1e-12
    (grad,) = torch.autograd.grad(loss, logits)
    log_z = torch.logsumexp(logits, dim=-1, keepdim=True)
    expected = 2 * log_z * logits.softmax(dim=-1) / len(logits)
    torch.testing.assert_close(grad, expected.detach(), rtol=0.0, atol=1e-15)


def test_z_loss_sees_a_shift_the_softmax_does_not():
    logits = torch.randn(4, 6, dtype=F64)
    shifted = logits + 10.0
    torch.testing.assert_close(logits.softmax(-1), shifted.softmax(-1))
    assert router_z_loss(shifted) > 10 * router_z_loss(logits)
    # zero where log Z = 0: E equal logits of -log E
    flat = torch.full((3, 4), -math.log(4.0), dtype=F64)
    assert router_z_loss(flat).abs() < 1e-28


def test_z_loss_is_taken_in_float32_at_least():
    logits = 8 * torch.randn(64, 16)
    low = router_z_loss(logits.bfloat16())
    assert low.dtype == torch.float32
    torch.testing.assert_close(
        low, router_z_loss(logits.bfloat16().float()), rtol=0.0, atol=0.0
    )


@pytest.mark.parametrize(
    "bad, error, name",
    [
        ([], TypeError, "router_logits"),
        (3, TypeError, "router_logits"),
        (torch.zeros(4, 3, dtype=torch.long), TypeError, "router_logits[0]"),
        (torch.zeros(2, 4, 3), ValueError, "router_logits[0]"),
        ([torch.zeros(4, 3), torch.zeros(4, 5)], ValueError, "router_logits[1]"),
        (torch.zeros(0, 3), ValueError, "router_logits[0]"),
    ],
)
def test_z_loss_refuses(bad, error, name):
    with pytest.raises(error, match=name.replace("[", r"\[").replace("]", r"\]")):
        router_z_loss(bad)


# DeepSeek-V3's sequence-wise balance loss (DeepSeek-AI 2024b, sec. 2.1.2, eqs. 17-20)


def sequence_loss_by_loop(scores, top_k, alpha, experts=None):
    """Eqs. 17-20 written out, one sequence and one token at a time; the batch's loss is
    the mean over its sequences. `scores [B, T, N_r]` (autograd flows through P)."""
    b, t, n_r = scores.shape
    losses = []
    for seq in range(b):
        f = [0.0] * n_r
        p = [0.0] * n_r
        for tok in range(t):
            s = scores[seq, tok]
            if experts is None:
                ranked = sorted(range(n_r), key=lambda i: -s[i].item())
                top = set(ranked[:top_k])  # eq. 18's Topk of the s_{j,t}
            else:
                top = set(experts[seq, tok].tolist())
            for i in range(n_r):
                f[i] += n_r / (top_k * t) * (1.0 if i in top else 0.0)  # eq. 18
                p[i] = p[i] + s[i] / s.sum() / t  # eqs. 19-20
        losses.append(alpha * sum(fi * pi for fi, pi in zip(f, p)))  # eq. 17
    return sum(losses) / b


@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_sequence_wise_loss_equals_the_papers_equations(top_k):
    """Float64; the loop sums the same terms in another order: 1e-15 absolute on a
    loss of about alpha (1e-4), and on gradients of about alpha / T."""
    g = torch.Generator().manual_seed(top_k)
    logits = torch.randn(3, 6, 8, generator=g, dtype=F64, requires_grad=True)
    scores = logits.sigmoid()
    ours = sequence_wise_balance_loss(scores, top_k=top_k, alpha=1e-4)
    ref = sequence_loss_by_loop(scores, top_k, 1e-4)
    assert abs(ours.item() - ref.item()) < 1e-15
    (g_ours,) = torch.autograd.grad(ours, logits, retain_graph=True)
    (g_ref,) = torch.autograd.grad(ref, logits)
    torch.testing.assert_close(g_ours, g_ref, rtol=0.0, atol=1e-15)
    assert torch.count_nonzero(g_ours) == g_ours.numel()  # P carries the gradient


def test_sequence_wise_loss_with_the_routers_choices():
    """`experts`: the choices the router made (here a biased top-k), not eq. 18's."""
    g = torch.Generator().manual_seed(5)
    scores = torch.rand(2, 7, 6, generator=g, dtype=F64) + 0.05
    bias = torch.linspace(-0.5, 0.5, 6, dtype=F64)
    chosen = (scores + bias).topk(2, dim=-1).indices
    ours = sequence_wise_balance_loss(scores, top_k=2, alpha=1.0, experts=chosen)
    ref = sequence_loss_by_loop(scores, 2, 1.0, experts=chosen)
    assert abs(ours.item() - ref.item()) < 1e-13
    plain = sequence_wise_balance_loss(scores, top_k=2, alpha=1.0)
    assert abs(ours.item() - plain.item()) > 1e-3  # the bias changed f


def test_sequence_wise_loss_is_alpha_when_balanced_and_sees_what_the_batch_hides():
    row = torch.linspace(-2.0, 2.0, 8, dtype=F64).sigmoid()
    shifted = torch.stack([row.roll(t) for t in range(8)])[None]  # [1, T=8, N_r=8]
    for k in (1, 2, 4):
        loss = sequence_wise_balance_loss(shifted, top_k=k, alpha=1e-4)
        assert abs(loss.item() - 1e-4) < 1e-18
    # two sequences, each on its own two experts of four: balanced over the batch
    first = torch.tensor([0.9, 0.8, 0.1, 0.2], dtype=F64).repeat(4, 1)
    second = first.flip(-1)
    batch = torch.stack([first, second])  # [B=2, T=4, N_r=4]
    per_sequence = sequence_wise_balance_loss(batch, top_k=2, alpha=1.0)
    pooled = sequence_wise_balance_loss(batch.reshape(1, 8, 4), top_k=2, alpha=1.0)
    assert abs(pooled.item() - 1.0) < 1e-12
    assert per_sequence.item() > 1.5


@pytest.mark.parametrize(
    "kwargs, error, name",
    [
        ({"scores": torch.rand(4, 8)}, ValueError, "scores"),
        ({"scores": torch.ones(2, 4, 8, dtype=torch.long)}, TypeError, "scores"),
        ({"top_k": 9}, ValueError, "top_k"),
        ({"top_k": 2.0}, TypeError, "top_k"),
        ({"alpha": 0.0}, ValueError, "alpha"),
        ({"experts": torch.zeros(2, 4, 3, dtype=torch.long)}, TypeError, "experts"),
        ({"experts": torch.zeros(2, 4, 2)}, TypeError, "experts"),
    ],
)
def test_sequence_wise_loss_refuses(kwargs, error, name):
    args = {"scores": torch.rand(2, 4, 8), "top_k": 2, **kwargs}
    with pytest.raises(error, match=name):
        sequence_wise_balance_loss(**args)


# Expert-choice routing (Zhou et al. 2022, sec. 3)


def expert_choice_by_loop(x, logits, capacity, bank):
    """Each expert, in turn, ranks every token by its score, takes the first
    `capacity`, runs on each alone and adds the gated output to the token's row."""
    scores = logits.softmax(dim=-1)
    y = torch.zeros_like(x)
    for e in range(bank.n_experts):
        ranked = sorted(range(len(x)), key=lambda n: -scores[n, e].item())
        for n in ranked[:capacity]:
            gate, up = (x[n] @ bank.gate_up_proj[e].T).chunk(2)
            out = (F.silu(gate) * up) @ bank.down_proj[e].T
            y[n] = y[n] + scores[n, e] * out
    return y


@pytest.mark.parametrize("n, e, capacity", [(12, 4, 3), (10, 5, 4), (6, 3, 6)])
def test_expert_choice_equals_the_loop_and_dispatch(n, e, capacity):
    """Float64: the loop, our layer and dispatch (every expert on every token, gated by
    the expert-choice gates, 0 where not taken) make the same products and sums in
    another order: 1e-14."""
    torch.manual_seed(n + e)
    bank = Experts(n_experts=e, d_model=8, d_ff=6).double()
    x = torch.randn(n, 8, dtype=F64)
    logits = torch.randn(n, e, dtype=F64)
    gates, tokens = expert_choice(logits, capacity=capacity)
    assert gates.shape == tokens.shape == (e, capacity) and tokens.dtype == torch.long
    with torch.no_grad():
        ours = expert_choice_moe(x, gates, tokens, bank)
        loop = expert_choice_by_loop(x, logits, capacity, bank)
        dense = torch.zeros(e, n, dtype=F64).scatter(1, tokens, gates).T  # [N, E]
        every = torch.arange(e).expand(n, e)
        via_dispatch = dispatch(x, dense, every, bank, n_experts=e)
    torch.testing.assert_close(ours, loop, rtol=0.0, atol=1e-14)
    torch.testing.assert_close(ours, via_dispatch, rtol=0.0, atol=1e-14)
    load = torch.bincount(tokens.flatten(), minlength=n)
    assert int(load.sum()) == e * capacity and int(load.max()) <= e


def test_expert_choice_gradients_equal_the_loop():
    torch.manual_seed(4)
    bank = Experts(n_experts=4, d_model=8, d_ff=6).double()
    x = torch.randn(12, 8, dtype=F64, requires_grad=True)
    logits = torch.randn(12, 4, dtype=F64, requires_grad=True)
    params = [x, logits, bank.gate_up_proj, bank.down_proj]
    gates, tokens = expert_choice(logits, capacity=3)
    ours = torch.autograd.grad(expert_choice_moe(x, gates, tokens, bank).sum(), params)
    loop = torch.autograd.grad(expert_choice_by_loop(x, logits, 3, bank).sum(), params)
    for a, b in zip(ours, loop):
        torch.testing.assert_close(a, b, rtol=0.0, atol=1e-13)


def test_expert_choice_balances_by_construction_and_leaves_tokens_out():
    torch.manual_seed(0)
    logits = torch.randn(64, 8) + torch.linspace(0, 3, 8)  # expert 7 favoured
    gates, tokens = expert_choice(logits, capacity=16)  # k = 2 on average
    per_expert = torch.tensor([len(set(row)) for row in tokens.tolist()])
    assert (per_expert == 16).all()  # every expert: exactly C distinct tokens
    per_token = torch.bincount(tokens.flatten(), minlength=64)
    assert int((per_token == 0).sum()) > 0 and int(per_token.max()) > 2
    scores = logits.softmax(dim=-1)
    torch.testing.assert_close(gates, scores.gather(0, tokens.T).T)
    # each expert's C tokens are its C best: none left out scores higher
    for e in range(8):
        taken = set(tokens[e].tolist())
        left = [float(scores[n, e]) for n in range(64) if n not in taken]
        assert max(left) <= float(gates[e].min())


def test_expert_choice_in_bfloat16_sums_in_float32():
    torch.manual_seed(1)
    bank = Experts(n_experts=4, d_model=16, d_ff=8)
    x = torch.randn(12, 16)
    gates, tokens = expert_choice(torch.randn(12, 4).bfloat16(), capacity=3)
    assert gates.dtype == torch.float32
    with torch.no_grad():
        low = expert_choice_moe(x.bfloat16(), gates, tokens, bank.bfloat16())
        high = expert_choice_moe(x, gates, tokens, bank.float())
    assert low.dtype == torch.bfloat16
    assert (low.float() - high).abs().max() < 0.05 * high.abs().max()


@pytest.mark.parametrize(
    "call, error, name",
    [
        (lambda: expert_choice(torch.randn(4, 3), capacity=5), ValueError, "capacity"),
        (lambda: expert_choice(torch.randn(4, 3), capacity=0), ValueError, "capacity"),
        (
            lambda: expert_choice(torch.randn(4, 3), capacity=True),
            TypeError,
            "capacity",
        ),
        (lambda: expert_choice(torch.randn(2, 4, 3), capacity=1), ValueError, "logits"),
        (
            lambda: expert_choice(torch.ones(4, 3, dtype=torch.long), capacity=1),
            TypeError,
            "logits",
        ),
    ],
)
def test_expert_choice_refuses(call, error, name):
    with pytest.raises(error, match=name):
        call()


def test_expert_choice_moe_refuses():
    bank = Experts(n_experts=3, d_model=8, d_ff=4)
    x = torch.randn(6, 8)
    gates, tokens = expert_choice(torch.randn(6, 3), capacity=2)
    with pytest.raises(ValueError, match="x"):
        expert_choice_moe(torch.randn(6, 5), gates, tokens, bank)
    with pytest.raises(TypeError, match="x"):
        expert_choice_moe(x.double(), gates, tokens, bank)
    with pytest.raises(ValueError, match="tokens"):
        expert_choice_moe(x, gates, tokens.int(), bank)
    with pytest.raises(ValueError, match="gates"):
        expert_choice_moe(x, gates[:2], tokens[:2], bank)
    with pytest.raises(TypeError, match="gates"):
        expert_choice_moe(x, tokens, tokens, bank)
    with pytest.raises(TypeError, match="experts"):
        expert_choice_moe(x, gates, tokens, bank.forward)
