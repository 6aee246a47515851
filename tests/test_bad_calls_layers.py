"""Bad calls into chapter 9's mixture of experts and chapter 10's sinks and windows (issue
27): each row of `BAD_CALLS` is a call a reader could make while experimenting, the
exception it must raise (TypeError: the wrong kind of thing; ValueError: the right kind,
a wrong value) and a pattern the message must match, which starts with the argument the
caller passed. The calls into stateful objects (a MoE layer's last routing, the balancing
bias, a ring cache) assert after the refusal that nothing changed.

Then what must keep working: the valid edge cases (one token, k = E, a capacity above
the token count, bfloat16 experts on the CPU, float32 gates into bfloat16 experts, a
window of 1 or above T, masks of every broadcastable shape), the balancing loss over a
batch of nothing but padding (0, with a gradient of zeros, not NaN), NaN propagating,
and no host sync in any of the checks.
"""

from __future__ import annotations

import math
import re
from functools import partial

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from literate.parts.checks import checked_entry
from literate.parts.ffn import GatedFFN
from literate.parts.moe import (
    Experts,
    GptOssExperts,
    MoEFFN,
    clamped_swiglu,
    dispatch,
    dropped_pairs,
    load_balancing_loss,
    update_balancing_bias,
)
from literate.parts.routers import Router, mixtral_router
from literate.parts.sinks import (
    SlidingWindowSinkAttention,
    check_sink_call,
    sink_attention,
    sink_attention_sdpa,
)
from literate.parts.window import (
    RingKVCache,
    SlidingWindowAttention,
    window_allowed,
    window_attention_allowed,
)
from literate.tools.syncs import host_reads

E, D, I, N, K = 4, 16, 8, 6, 2  # experts, width, expert width, tokens, choices
B, H, H_KV, T, DH = 2, 4, 2, 5, 8  # attention: batch, heads, kv heads, tokens, d_head
F64 = torch.float64

torch.manual_seed(0)
BANK = Experts(E, D, I)
OSS = GptOssExperts(E, D, I)
X = torch.randn(N, D)
GATES = torch.rand(N, K)
IDS = torch.stack([torch.randperm(E)[:K] for _ in range(N)])  # [N, K], distinct
GROUPS = torch.randn(E, 3, D)
ROWS = torch.randn(N * K, D)
OFFS = torch.tensor([3, 6, 9, 12], dtype=torch.int32)
GATE, UP = torch.randn(3, I), torch.randn(3, I)
LOGITS = torch.randn(B * T, E)
MASK = torch.ones(B, T, dtype=torch.bool)
Q, KK, V = (
    torch.randn(B, H, T, DH),
    torch.randn(B, H_KV, T, DH),
    torch.randn(B, H_KV, T, DH),
)
SINKS = torch.zeros(H)
CAUSAL = torch.ones(T, T, dtype=torch.bool).tril()


def moe_layer(**options) -> MoEFFN:
    return MoEFFN(
        Router(D, E, partial(mixtral_router, top_k=K)), Experts(E, D, I), **options
    )


def router() -> Router:
    return Router(D, E, partial(mixtral_router, top_k=K))


def call_dispatch(x=X, weights=GATES, experts=IDS, expert_fn=BANK, **options):
    options.setdefault("n_experts", E)
    return dispatch(x, weights, experts, expert_fn, **options)


def balancing(logits=LOGITS, top_k=K, n_experts=E, attention_mask=None):
    return load_balancing_loss(logits, top_k, n_experts, attention_mask)


def sinks(q=Q, k=KK, v=V, s=SINKS, allowed=None, *, scale=None, sdpa=False):
    run = sink_attention_sdpa if sdpa else sink_attention
    return run(q, k, v, s, allowed, scale=scale)


def windowed(t_q=T, t_k=T, **options):
    options.setdefault("window", 3)
    return window_attention_allowed(t_q, t_k, **options)


META = "meta"
NUM = r"finite and > 0"

# (id, the bad call, the exception, a pattern the message matches from its start)
BAD_CALLS = [
    # --- dispatch: the tokens, the gates, the ids, the experts, the options --------------
    (
        "dispatch-x-wide",
        lambda: call_dispatch(x=torch.randn(N, D + 1)),
        ValueError,
        r"^x must have last axis 16, got \(6, 17\)",
    ),
    (
        "dispatch-x-narrow",
        lambda: call_dispatch(x=torch.randn(N, D - 4)),
        ValueError,
        r"^x must have last axis 16",
    ),
    (
        "dispatch-x-f64-into-f32-experts",
        lambda: call_dispatch(x=X.double()),
        TypeError,
        r"^x is torch\.float64, the layer's parameters torch\.float32",
    ),
    (
        "dispatch-x-bf16-into-f32-experts",
        lambda: call_dispatch(x=X.bfloat16()),
        TypeError,
        r"^x is torch\.bfloat16",
    ),
    (
        "dispatch-x-3d",
        lambda: call_dispatch(x=X[None]),
        ValueError,
        r"^x must have 2 axes, got \(1, 6, 16\)",
    ),
    (
        "dispatch-x-1d",
        lambda: call_dispatch(x=X[0]),
        ValueError,
        r"^x must have 2 axes",
    ),
    (
        "dispatch-x-int",
        lambda: call_dispatch(x=X.long()),
        TypeError,
        r"^x must be a floating-point tensor, got torch\.int64",
    ),
    (
        "dispatch-x-list",
        lambda: call_dispatch(x=X.tolist()),
        TypeError,
        r"^x must be a floating-point tensor, got list",
    ),
    (
        "dispatch-x-f64-into-f32-gpt-oss",
        lambda: call_dispatch(x=X.double(), expert_fn=OSS),
        TypeError,
        r"^x is torch\.float64",
    ),
    (
        "dispatch-x-wide-gpt-oss",
        lambda: call_dispatch(x=torch.randn(N, 8), expert_fn=OSS),
        ValueError,
        r"^x must have last axis 16",
    ),
    (
        "dispatch-x-1d-bare-function",
        lambda: call_dispatch(x=X[0], expert_fn=lambda g: g),
        ValueError,
        r"^x must have 2 axes",
    ),
    (
        "dispatch-n-experts-fewer",
        lambda: call_dispatch(n_experts=3),
        ValueError,
        r"^n_experts=3, but expert_fn holds 4",
    ),
    (
        "dispatch-n-experts-more",
        lambda: call_dispatch(n_experts=8),
        ValueError,
        r"^n_experts=8, but expert_fn holds 4",
    ),
    (
        "dispatch-n-experts-more-padded",
        lambda: call_dispatch(n_experts=8, capacity=2),
        ValueError,
        r"^n_experts=8, but expert_fn holds 4",
    ),
    (
        "dispatch-n-experts-zero",
        lambda: call_dispatch(n_experts=0),
        ValueError,
        r"^n_experts must be >= 1, got 0",
    ),
    (
        "dispatch-n-experts-bool",
        lambda: call_dispatch(n_experts=True),
        TypeError,
        r"^n_experts must be an int, got bool",
    ),
    (
        "dispatch-n-experts-float",
        lambda: call_dispatch(n_experts=4.0),
        TypeError,
        r"^n_experts must be an int, got float",
    ),
    (
        "dispatch-n-experts-tensor",
        lambda: call_dispatch(n_experts=torch.tensor(4)),
        TypeError,
        r"^n_experts must be an int, got Tensor",
    ),
    (
        "dispatch-ids-int32",
        lambda: call_dispatch(experts=IDS.int()),
        TypeError,
        r"^experts must be a torch\.long tensor \[N, k\], got torch\.int32",
    ),
    (
        "dispatch-ids-float",
        lambda: call_dispatch(experts=IDS.float()),
        TypeError,
        r"^experts must be a torch\.long tensor \[N, k\], got torch\.float32",
    ),
    (
        "dispatch-ids-list",
        lambda: call_dispatch(experts=IDS.tolist()),
        TypeError,
        r"^experts must be a torch\.long tensor \[N, k\], got list",
    ),
    (
        "dispatch-ids-gates-swapped",
        lambda: call_dispatch(weights=IDS, experts=GATES),
        TypeError,
        r"^weights must be a floating-point tensor, got torch\.int64",
    ),
    (
        "dispatch-ids-one-more-column",
        lambda: call_dispatch(experts=torch.zeros(N, K + 1, dtype=torch.long)),
        ValueError,
        r"^weights \(6, 2\) and experts \(6, 3\) must both",
    ),
    (
        "dispatch-ids-1d",
        lambda: call_dispatch(experts=IDS[:, 0]),
        ValueError,
        r"^weights \(6, 2\) and experts \(6,\) must both be \[N, k\]",
    ),
    (
        "dispatch-ids-fewer-tokens",
        lambda: call_dispatch(weights=GATES[:-1], experts=IDS[:-1]),
        ValueError,
        r"^weights \(5, 2\) and experts \(5, 2\) .* N = 6",
    ),
    (
        "dispatch-k-above-e",
        lambda: call_dispatch(
            weights=torch.rand(N, E + 1),
            experts=torch.zeros(N, E + 1, dtype=torch.long),
        ),
        ValueError,
        r"^experts has k=5 choices per token > n_experts=4",
    ),
    (
        "dispatch-ids-on-meta",
        lambda: call_dispatch(experts=IDS.to(META)),
        ValueError,
        r"^weights \(cpu\) and experts \(meta\) must be on x's device, cpu",
    ),
    (
        "dispatch-weights-int",
        lambda: call_dispatch(weights=GATES.long()),
        TypeError,
        r"^weights must be a floating-point tensor",
    ),
    (
        "dispatch-weights-1d",
        lambda: call_dispatch(weights=GATES[:, 0]),
        ValueError,
        r"^weights must have 2 axes",
    ),
    (
        "dispatch-weights-on-meta",
        lambda: call_dispatch(weights=GATES.to(META)),
        ValueError,
        r"^weights \(meta\) and experts \(cpu\) must be on x's device",
    ),
    (
        "dispatch-expert-fn-str",
        lambda: call_dispatch(expert_fn="experts"),
        TypeError,
        r"^expert_fn must be callable, got str",
    ),
    (
        "dispatch-expert-fn-none",
        lambda: call_dispatch(expert_fn=None),
        TypeError,
        r"^expert_fn must be callable, got NoneType",
    ),
    (
        "dispatch-expert-fn-tensor",
        lambda: call_dispatch(expert_fn=BANK.down_proj),
        TypeError,
        r"^expert_fn must be callable, got Parameter",
    ),
    (
        "dispatch-capacity-zero",
        lambda: call_dispatch(capacity=0),
        ValueError,
        r"^capacity must be >= 1, got 0",
    ),
    (
        "dispatch-capacity-bool",
        lambda: call_dispatch(capacity=True),
        TypeError,
        r"^capacity must be an int, got bool",
    ),
    (
        "dispatch-capacity-float",
        lambda: call_dispatch(capacity=2.5),
        TypeError,
        r"^capacity must be an int, got float",
    ),
    # --- Experts and GptOssExperts: their groups, their rows and offsets --------------
    (
        "experts-groups-wide",
        lambda: BANK(torch.randn(E, 3, D + 1)),
        ValueError,
        r"^groups must have last axis 16, got \(4, 3, 17\)",
    ),
    (
        "experts-groups-f64",
        lambda: BANK(GROUPS.double()),
        TypeError,
        r"^groups is torch\.float64, the layer's parameters torch\.float32",
    ),
    (
        "experts-groups-bf16",
        lambda: BANK(GROUPS.bfloat16()),
        TypeError,
        r"^groups is torch\.bfloat16",
    ),
    (
        "experts-groups-other-e",
        lambda: BANK(torch.randn(E + 1, 3, D)),
        ValueError,
        r"^groups must be \[E=4, C, d\], got \(5, 3, 16\)",
    ),
    (
        "experts-groups-2d",
        lambda: BANK(X),
        ValueError,
        r"^groups must be \[E=4, C, d\], got \(6, 16\)",
    ),
    (
        "experts-groups-4d",
        lambda: BANK(GROUPS[None]),
        ValueError,
        r"^groups must be \[E=4, C, d\]",
    ),
    (
        "experts-groups-int",
        lambda: BANK(GROUPS.long()),
        TypeError,
        r"^groups must be a floating-point tensor, got torch\.int64",
    ),
    (
        "experts-groups-none",
        lambda: BANK(None),
        TypeError,
        r"^groups must be a floating-point tensor, got NoneType",
    ),
    (
        "gpt-oss-groups-wide",
        lambda: OSS(torch.randn(E, 3, D + 1)),
        ValueError,
        r"^groups must have last axis 16",
    ),
    (
        "gpt-oss-groups-f64",
        lambda: OSS(GROUPS.double()),
        TypeError,
        r"^groups is torch\.float64",
    ),
    (
        "gpt-oss-groups-other-e",
        lambda: OSS(torch.randn(2, 3, D)),
        ValueError,
        r"^groups must be \[E=4, C, d\]",
    ),
    ("gpt-oss-groups-2d", lambda: OSS(X), ValueError, r"^groups must be \[E=4, C, d\]"),
    (
        "gpt-oss-groups-int",
        lambda: OSS(GROUPS.int()),
        TypeError,
        r"^groups must be a floating-point tensor, got torch\.int32",
    ),
    (
        "gpt-oss-groups-list",
        lambda: OSS([[0.0] * D]),
        TypeError,
        r"^groups must be a floating-point tensor, got list",
    ),
    (
        "experts-rows-wide",
        lambda: BANK.grouped(torch.randn(12, D + 1), OFFS),
        ValueError,
        r"^rows must have last axis 16",
    ),
    (
        "experts-rows-f64",
        lambda: BANK.grouped(ROWS.double(), OFFS),
        TypeError,
        r"^rows is torch\.float64",
    ),
    (
        "experts-rows-3d",
        lambda: BANK.grouped(ROWS[None], OFFS),
        ValueError,
        r"^rows must be \[M, d\], got \(1, 12, 16\)",
    ),
    (
        "experts-offs-long",
        lambda: BANK.grouped(ROWS, OFFS.long()),
        TypeError,
        r"^offs must be an int32 tensor \[E=4\], got torch\.int64",
    ),
    (
        "experts-offs-list",
        lambda: BANK.grouped(ROWS, [3, 6, 9, 12]),
        TypeError,
        r"^offs must be an int32 tensor \[E=4\], got list",
    ),
    (
        "experts-offs-missing",
        lambda: BANK.grouped(ROWS, None),
        TypeError,
        r"^offs must be an int32 tensor \[E=4\], got NoneType",
    ),
    (
        "experts-offs-other-e",
        lambda: BANK.grouped(ROWS, OFFS[:3]),
        ValueError,
        r"^offs must be \[E=4\], got \(3,\)",
    ),
    (
        "gpt-oss-rows-wide",
        lambda: OSS.grouped(torch.randn(12, 3), OFFS),
        ValueError,
        r"^rows must have last axis 16",
    ),
    (
        "gpt-oss-offs-long",
        lambda: OSS.grouped(ROWS, OFFS.long()),
        TypeError,
        r"^offs must be an int32 tensor",
    ),
    (
        "gpt-oss-offs-2d",
        lambda: OSS.grouped(ROWS, OFFS[None]),
        ValueError,
        r"^offs must be \[E=4\], got \(1, 4\)",
    ),
    # --- clamped_swiglu and gpt-oss's options -------------------------------------------
    (
        "swiglu-limit-zero",
        lambda: clamped_swiglu(GATE, UP, limit=0),
        ValueError,
        rf"^limit must be {NUM}, got 0",
    ),
    (
        "swiglu-limit-negative",
        lambda: clamped_swiglu(GATE, UP, limit=-7),
        ValueError,
        rf"^limit must be {NUM}, got -7",
    ),
    (
        "swiglu-limit-nan",
        lambda: clamped_swiglu(GATE, UP, limit=math.nan),
        ValueError,
        rf"^limit must be {NUM}",
    ),
    (
        "swiglu-limit-inf",
        lambda: clamped_swiglu(GATE, UP, limit=math.inf),
        ValueError,
        rf"^limit must be {NUM}",
    ),
    (
        "swiglu-limit-str",
        lambda: clamped_swiglu(GATE, UP, limit="7"),
        TypeError,
        r"^limit must be a real number, got str",
    ),
    (
        "swiglu-limit-bool",
        lambda: clamped_swiglu(GATE, UP, limit=True),
        TypeError,
        r"^limit must be a real number, got bool",
    ),
    (
        "swiglu-limit-tensor",
        lambda: clamped_swiglu(GATE, UP, limit=torch.tensor(7.0)),
        TypeError,
        r"^limit must be a real number, got Tensor",
    ),
    (
        "swiglu-alpha-zero",
        lambda: clamped_swiglu(GATE, UP, alpha=0.0),
        ValueError,
        rf"^alpha must be {NUM}",
    ),
    (
        "swiglu-alpha-negative",
        lambda: clamped_swiglu(GATE, UP, alpha=-1.702),
        ValueError,
        rf"^alpha must be {NUM}",
    ),
    (
        "swiglu-gate-int",
        lambda: clamped_swiglu(GATE.long(), UP),
        TypeError,
        r"^gate must be a floating-point tensor, got torch\.int64",
    ),
    (
        "swiglu-up-list",
        lambda: clamped_swiglu(GATE, UP.tolist()),
        TypeError,
        r"^up must be a floating-point tensor, got list",
    ),
    (
        "gpt-oss-experts-limit-zero",
        lambda: GptOssExperts(E, D, I, limit=0),
        ValueError,
        rf"^limit must be {NUM}",
    ),
    (
        "gpt-oss-experts-alpha-negative",
        lambda: GptOssExperts(E, D, I, alpha=-1),
        ValueError,
        rf"^alpha must be {NUM}",
    ),
    # --- MoEFFN: parts of the wrong kind, parts that do not fit, its input ------------
    (
        "moe-experts-dense-ffn",
        lambda: MoEFFN(router(), GatedFFN(D, I, F.silu)),
        TypeError,
        r"^experts must be a module with d_model, n_experts \(such as Experts\), "
        r"got GatedFFN",
    ),
    (
        "moe-experts-linear",
        lambda: MoEFFN(router(), nn.Linear(D, D)),
        TypeError,
        r"^experts must be a module .* got Linear",
    ),
    (
        "moe-experts-function",
        lambda: MoEFFN(router(), lambda g: g),
        TypeError,
        r"^experts must be a module .* got function",
    ),
    (
        "moe-experts-none",
        lambda: MoEFFN(router(), None),
        TypeError,
        r"^experts must be a module .* got NoneType",
    ),
    (
        "moe-experts-list",
        lambda: MoEFFN(router(), [Experts(E, D, I)]),
        TypeError,
        r"^experts must be a module .* got list",
    ),
    (
        "moe-router-linear",
        lambda: MoEFFN(nn.Linear(D, E), BANK),
        TypeError,
        r"^router must be a module with weight, d_model, n_experts \(such as Router\), "
        r"got Linear",
    ),
    (
        "moe-router-function",
        lambda: MoEFFN(partial(mixtral_router, top_k=K), BANK),
        TypeError,
        r"^router must be a module .* got partial",
    ),
    (
        "moe-router-and-experts-swapped",
        lambda: MoEFFN(BANK, router()),
        TypeError,
        r"^router must be a module .* got Experts",
    ),
    (
        "moe-router-str",
        lambda: MoEFFN("mixtral", BANK),
        TypeError,
        r"^router must be a module .* got str",
    ),
    (
        "moe-shared-str",
        lambda: MoEFFN(router(), BANK, "ffn"),
        TypeError,
        r"^shared must be an FFN module \[N, d\] -> \[N, d\] or None, got str",
    ),
    (
        "moe-shared-other-width",
        lambda: MoEFFN(router(), BANK, GatedFFN(D + 1, I, F.silu)),
        ValueError,
        r"^shared must have d_model=16",
    ),
    (
        "moe-router-other-e",
        lambda: MoEFFN(Router(D, E + 1, partial(mixtral_router, top_k=K)), BANK),
        ValueError,
        r"^router is for d_model=16, n_experts=5",
    ),
    (
        "moe-router-other-width",
        lambda: MoEFFN(Router(D + 2, E, partial(mixtral_router, top_k=K)), BANK),
        ValueError,
        r"^router is for d_model=18, n_experts=4",
    ),
    (
        "moe-capacity-zero",
        lambda: moe_layer(capacity=0),
        ValueError,
        r"^capacity must be >= 1",
    ),
    (
        "moe-capacity-float",
        lambda: moe_layer(capacity=1.5),
        TypeError,
        r"^capacity must be an int, got float",
    ),
    # --- load_balancing_loss ------------------------------------------------------------
    (
        "balance-mask-long",
        lambda: balancing(attention_mask=MASK.long()),
        TypeError,
        r"^attention_mask must be a bool tensor .* got torch\.int64; convert a 0/1 mask",
    ),
    (
        "balance-mask-float",
        lambda: balancing(attention_mask=MASK.float()),
        TypeError,
        r"^attention_mask must be a bool tensor .* got torch\.float32",
    ),
    (
        "balance-mask-list",
        lambda: balancing(attention_mask=MASK.tolist()),
        TypeError,
        r"^attention_mask must be a bool tensor .* got list",
    ),
    (
        "balance-mask-too-few",
        lambda: balancing(attention_mask=MASK[:, :-1]),
        ValueError,
        r"^attention_mask \(2, 4\) must have one entry per row of every router_logits",
    ),
    (
        "balance-mask-on-meta",
        lambda: balancing(attention_mask=MASK.to(META)),
        ValueError,
        r"^attention_mask is on meta, router_logits on cpu",
    ),
    (
        "balance-empty-list",
        lambda: balancing(logits=[]),
        ValueError,
        r"^router_logits is empty",
    ),
    (
        "balance-logits-int",
        lambda: balancing(logits=LOGITS.long()),
        TypeError,
        r"^router_logits\[0\] must be a floating-point tensor, got torch\.int64",
    ),
    (
        "balance-logits-1d",
        lambda: balancing(logits=LOGITS[0]),
        ValueError,
        r"^router_logits\[0\] must have 2 axes",
    ),
    (
        "balance-logits-3d",
        lambda: balancing(logits=LOGITS.view(B, T, E)),
        ValueError,
        r"^router_logits\[0\] must have 2 axes, got \(2, 5, 4\)",
    ),
    (
        "balance-logits-other-e",
        lambda: balancing(logits=torch.randn(N, E + 1)),
        ValueError,
        r"^router_logits\[0\] must be \[N >= 1, n_experts=4\], got \(6, 5\)",
    ),
    (
        "balance-logits-no-rows",
        lambda: balancing(logits=torch.randn(0, E)),
        ValueError,
        r"^router_logits\[0\] must be \[N >= 1, n_experts=4\], got \(0, 4\)",
    ),
    (
        "balance-second-layer-other-e",
        lambda: balancing(logits=[LOGITS, torch.randn(B * T, 2)]),
        ValueError,
        r"^router_logits\[1\] must be \[N >= 1",
    ),
    (
        "balance-second-layer-list",
        lambda: balancing(logits=[LOGITS, LOGITS.tolist()]),
        TypeError,
        r"^router_logits\[1\] must be a floating-point tensor, got list",
    ),
    (
        "balance-top-k-zero",
        lambda: balancing(top_k=0),
        ValueError,
        r"^top_k must be >= 1",
    ),
    (
        "balance-top-k-above-e",
        lambda: balancing(top_k=E + 1),
        ValueError,
        r"^top_k=5 > the number of experts 4",
    ),
    (
        "balance-top-k-float",
        lambda: balancing(top_k=2.0),
        TypeError,
        r"^top_k must be an int, got float",
    ),
    (
        "balance-n-experts-zero",
        lambda: balancing(n_experts=0),
        ValueError,
        r"^n_experts must be >= 1",
    ),
    (
        "balance-n-experts-bool",
        lambda: balancing(n_experts=True),
        TypeError,
        r"^n_experts must be an int, got bool",
    ),
    (
        "balance-n-experts-other",
        lambda: balancing(n_experts=8),
        ValueError,
        r"^router_logits\[0\] must be \[N >= 1, n_experts=8\], got \(10, 4\)",
    ),
    (
        "dropped-ids-float",
        lambda: dropped_pairs(IDS.float(), E, 2),
        TypeError,
        r"^experts must be a torch\.long tensor \[N, k\], got torch\.float32",
    ),
    (
        "dropped-capacity-zero",
        lambda: dropped_pairs(IDS, E, 0),
        ValueError,
        r"^capacity must be >= 1",
    ),
    # --- sink_attention and sink_attention_sdpa ---------------------------------------
    (
        "sinks-mask-0-1-long",
        lambda: sinks(allowed=CAUSAL.long()),
        TypeError,
        r"^allowed must be a bool tensor \(True = may attend\), got torch\.int64; pass a "
        r"0/1 mask as `mask\.bool\(\)`$",
    ),
    (
        "sinks-mask-0-1-int32",
        lambda: sinks(allowed=CAUSAL.int()),
        TypeError,
        r"^allowed must be a bool tensor .* got torch\.int32; .*`mask\.bool\(\)`$",
    ),
    (
        "sinks-mask-uint8",
        lambda: sinks(allowed=CAUSAL.to(torch.uint8)),
        TypeError,
        r"^allowed must be a bool tensor .* got torch\.uint8; .*`mask\.bool\(\)`",
    ),
    (
        "sinks-mask-additive-float",
        lambda: sinks(allowed=torch.zeros(T, T)),
        TypeError,
        r"^allowed must be a bool tensor .* got torch\.float32; .*`mask\.bool\(\)`, an "
        r"additive 0/-inf mask with `mask == 0`$",
    ),
    (
        "sinks-mask-list",
        lambda: sinks(allowed=CAUSAL.tolist()),
        TypeError,
        r"^allowed must be a bool tensor \(True = may attend\), got list",
    ),
    (
        "sinks-mask-more-keys",
        lambda: sinks(allowed=torch.ones(T, T + 1, dtype=torch.bool)),
        ValueError,
        r"^allowed must broadcast to \[B, H, T_q, T_k\] = \(2, 4, 5, 5\), got "
        r"\(5, 6\)",
    ),
    (
        "sinks-mask-more-rows",
        lambda: sinks(allowed=torch.ones(B + 1, 1, T, T, dtype=torch.bool)),
        ValueError,
        r"^allowed must broadcast to",
    ),
    (
        "sinks-mask-hf-padding-2d",
        lambda: sinks(allowed=MASK),
        ValueError,
        r"^allowed must broadcast to .* got \(2, 5\)",
    ),  # [B, T] needs [B, 1, 1, T]
    (
        "sinks-mask-5d",
        lambda: sinks(allowed=CAUSAL[None, None, None]),
        ValueError,
        r"^allowed must broadcast to",
    ),
    (
        "sinks-mask-on-meta",
        lambda: sinks(allowed=CAUSAL.to(META)),
        ValueError,
        r"^allowed is on meta, q on cpu",
    ),
    (
        "sinks-k-f64",
        lambda: sinks(k=KK.double()),
        TypeError,
        r"^q, k, v must have one dtype, got torch\.float32, torch\.float64, torch\.float32",
    ),
    (
        "sinks-v-bf16",
        lambda: sinks(v=V.bfloat16()),
        TypeError,
        r"^q, k, v must have one dtype",
    ),
    ("sinks-q-f64", lambda: sinks(q=Q.double()), TypeError, r"^q, k, v must have one"),
    (
        "sinks-k-wider",
        lambda: sinks(k=torch.randn(B, H_KV, T, DH + 1)),
        ValueError,
        r"^k has head width 9, q 8",
    ),
    (
        "sinks-k-on-meta",
        lambda: sinks(k=KK.to(META)),
        ValueError,
        r"^q, k, v, sinks must be on one device, got cpu, meta, cpu, cpu",
    ),
    (
        "sinks-sinks-on-meta",
        lambda: sinks(s=SINKS.to(META)),
        ValueError,
        r"^q, k, v, sinks must be on one device",
    ),
    (
        "sinks-scale-negative",
        lambda: sinks(scale=-0.3),
        ValueError,
        rf"^scale must be {NUM}, got -0\.3",
    ),
    (
        "sinks-scale-zero",
        lambda: sinks(scale=0.0),
        ValueError,
        rf"^scale must be {NUM}",
    ),
    (
        "sinks-scale-nan",
        lambda: sinks(scale=math.nan),
        ValueError,
        rf"^scale must be {NUM}",
    ),
    (
        "sinks-scale-inf",
        lambda: sinks(scale=math.inf),
        ValueError,
        rf"^scale must be {NUM}",
    ),
    (
        "sinks-scale-str",
        lambda: sinks(scale="0.35"),
        TypeError,
        r"^scale must be a real number, got str",
    ),
    (
        "sinks-scale-bool",
        lambda: sinks(scale=True),
        TypeError,
        r"^scale must be a real number, got bool",
    ),
    (
        "sinks-scale-tensor",
        lambda: sinks(scale=torch.tensor(0.35)),
        TypeError,
        r"^scale must be a real number, got Tensor",
    ),
    ("sinks-q-3d", lambda: sinks(q=Q[0]), ValueError, r"^q must have 4 axes"),
    (
        "sinks-q-int",
        lambda: sinks(q=Q.long()),
        TypeError,
        r"^q must be a floating-point tensor",
    ),
    (
        "sinks-v-list",
        lambda: sinks(v=V.tolist()),
        TypeError,
        r"^v must be a floating-point tensor, got list",
    ),
    (
        "sinks-kv-heads-not-dividing",
        lambda: sinks(k=torch.randn(B, 3, T, DH), v=torch.randn(B, 3, T, DH)),
        ValueError,
        r"^need q \[B, H, T_q, d\]",
    ),
    (
        "sinks-kv-no-heads",
        lambda: sinks(k=torch.randn(B, 0, T, DH), v=torch.randn(B, 0, T, DH)),
        ValueError,
        r"^need q \[B, H, T_q, d\]",
    ),
    ("sinks-v-fewer-keys", lambda: sinks(v=V[:, :, :-1]), ValueError, r"^need q"),
    (
        "sinks-sinks-per-kv-head",
        lambda: sinks(s=torch.zeros(H_KV)),
        ValueError,
        r"^sinks must be \[H=4\], got \(2,\)",
    ),
    (
        "sinks-sinks-long",
        lambda: sinks(s=SINKS.long()),
        TypeError,
        r"^sinks must be a floating-point tensor",
    ),
    (
        "sdpa-mask-0-1-long",
        lambda: sinks(allowed=CAUSAL.long(), sdpa=True),
        TypeError,
        r"^allowed must be a bool tensor .*`mask\.bool\(\)`",
    ),
    (
        "sdpa-mask-more-keys",
        lambda: sinks(allowed=torch.ones(T, 7, dtype=torch.bool), sdpa=True),
        ValueError,
        r"^allowed must broadcast to",
    ),
    (
        "sdpa-k-f64",
        lambda: sinks(k=KK.double(), sdpa=True),
        TypeError,
        r"^q, k, v must have one dtype",
    ),
    (
        "sdpa-k-wider",
        lambda: sinks(k=torch.randn(B, H_KV, T, 4), sdpa=True),
        ValueError,
        r"^k has head width 4, q 8",
    ),
    (
        "sdpa-scale-negative",
        lambda: sinks(scale=-1, sdpa=True),
        ValueError,
        rf"^scale must be {NUM}",
    ),
    (
        "sdpa-scale-nan",
        lambda: sinks(scale=math.nan, sdpa=True),
        ValueError,
        rf"^scale must be {NUM}",
    ),
    (
        "sdpa-sinks-wrong",
        lambda: sinks(s=torch.zeros(1, H), sdpa=True),
        ValueError,
        r"^sinks must be \[H=4\]",
    ),
    # --- window masks -----------------------------------------------------------------
    (
        "window-t-q-negative",
        lambda: windowed(t_q=-1),
        ValueError,
        r"^t_q must be >= 0, got -1",
    ),
    (
        "window-t-k-negative",
        lambda: windowed(t_k=-3),
        ValueError,
        r"^t_k must be >= 0, got -3",
    ),
    (
        "window-t-q-float",
        lambda: windowed(t_q=2.0),
        TypeError,
        r"^t_q must be an int, got float",
    ),
    (
        "window-t-k-bool",
        lambda: windowed(t_k=True),
        TypeError,
        r"^t_k must be an int, got bool",
    ),
    (
        "window-t-q-tensor",
        lambda: windowed(t_q=torch.tensor(5)),
        TypeError,
        r"^t_q must be an int, got Tensor",
    ),
    (
        "window-offset-negative",
        lambda: windowed(query_offset=-1),
        ValueError,
        r"^query_offset must be >= 0, got -1",
    ),
    (
        "window-offset-none",
        lambda: windowed(query_offset=None),
        TypeError,
        r"^query_offset must be an int, got NoneType",
    ),
    (
        "window-offset-float",
        lambda: windowed(query_offset=1.0),
        TypeError,
        r"^query_offset must be an int, got float",
    ),
    (
        "window-zero",
        lambda: windowed(window=0),
        ValueError,
        r"^window must be >= 1, got 0",
    ),
    (
        "window-negative",
        lambda: windowed(window=-4),
        ValueError,
        r"^window must be >= 1, got -4",
    ),
    (
        "window-bool",
        lambda: windowed(window=True),
        TypeError,
        r"^window must be an int, got bool",
    ),
    (
        "window-none",
        lambda: windowed(window=None),
        TypeError,
        r"^window must be an int, got NoneType",
    ),
    (
        "window-key-valid-long",
        lambda: windowed(key_valid=MASK.long()),
        TypeError,
        r"^key_valid must be a bool tensor",
    ),
    (
        "window-key-valid-narrow",
        lambda: windowed(key_valid=MASK[:, :-1]),
        ValueError,
        r"^key_valid must be \[B, T_k=5\], got \(2, 4\)",
    ),
    (
        "window-key-positions-int32",
        lambda: windowed(key_positions=torch.arange(3, dtype=torch.int32)),
        TypeError,
        r"^key_positions must be a torch\.long tensor \[T_k'\], got torch\.int32",
    ),
    (
        "window-key-positions-list",
        lambda: windowed(key_positions=[0, 1, 2]),
        TypeError,
        r"^key_positions must be a torch\.long tensor \[T_k'\], got list",
    ),
    (
        "window-key-positions-2d",
        lambda: windowed(key_positions=torch.arange(4).view(2, 2)),
        ValueError,
        r"^key_positions must be \[T_k'\], one position per key, got \(2, 2\)",
    ),
    (
        "window-allowed-zero",
        lambda: window_allowed(torch.arange(3), torch.arange(3), 0),
        ValueError,
        r"^window must be >= 1, got 0",
    ),
    (
        "window-allowed-float-positions",
        lambda: window_allowed(torch.arange(3.0), torch.arange(3), 2),
        TypeError,
        r"^query_positions must be a torch\.long tensor",
    ),
    (
        "window-layer-window-zero",
        lambda: SlidingWindowAttention(D, 2, window=0),
        ValueError,
        r"^window must be >= 1, got 0",
    ),
    (
        "window-ring-window-negative",
        lambda: RingKVCache(1, 1, 8, 2, window=-1),
        ValueError,
        r"^window must be >= 1, got -1",
    ),
]


def test_there_are_enough_bad_calls_and_their_ids_are_unique():
    ids = [row[0] for row in BAD_CALLS]
    assert len(ids) == len(set(ids)) and len(ids) >= 110


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [row[1:] for row in BAD_CALLS],
    ids=[row[0] for row in BAD_CALLS],
)
def test_a_bad_call_is_refused_naming_the_argument(call, error, pattern):
    with pytest.raises(error) as info:
        call()
    assert type(info.value) is error  # not a subclass from deep inside torch
    assert re.search(pattern, str(info.value)), str(info.value)


# --- refused calls change nothing ---------------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    [
        torch.randn(B, T, D + 1),
        torch.randn(B, T, D, dtype=F64),
        torch.randint(0, 3, (B, T, D)),
        [[0.0] * D],
    ],
    ids=["wide", "f64", "int", "list"],
)
def test_a_refused_moe_call_keeps_the_last_routing(bad):
    moe = moe_layer(capacity=3)
    moe(torch.randn(B, T, D))
    before = (moe.router_logits, moe.chosen, moe.dropped)
    state = {k: v.clone() for k, v in moe.state_dict().items()}
    with pytest.raises((TypeError, ValueError), match=r"^x "):
        moe(bad)
    assert (moe.router_logits, moe.chosen, moe.dropped) == before  # the same tensors
    assert all(torch.equal(v, moe.state_dict()[k]) for k, v in state.items())


@pytest.mark.parametrize(
    ("experts", "speed", "error"),
    [
        (IDS.int(), 1e-3, TypeError),
        (IDS.float(), 1e-3, TypeError),
        (IDS, 0.0, ValueError),
        (IDS, -1e-3, ValueError),
        (IDS, "1e-3", TypeError),
    ],
    ids=["ids-int32", "ids-float", "speed-zero", "speed-negative", "speed-str"],
)
def test_a_refused_bias_update_leaves_the_bias_as_it_was(experts, speed, error):
    bias = torch.linspace(-0.1, 0.1, E)
    before = bias.clone()
    with pytest.raises(error, match=r"^(experts|speed) "):
        update_balancing_bias(bias, experts, speed=speed)
    assert torch.equal(bias, before)


@pytest.mark.parametrize(
    "bad",
    [torch.randn(1, 1, D + 1), torch.randn(1, 1, D, dtype=F64)],
    ids=["wide", "f64"],
)
@torch.no_grad()  # a KV cache is for inference
def test_a_refused_step_leaves_a_sink_layers_ring_as_it_was(bad):
    torch.manual_seed(1)
    attn = SlidingWindowSinkAttention(D, H, H_KV, window=3)
    cache = attn.new_cache(1, 16)
    attn(torch.randn(1, 5, D), causal=True, cache=cache)  # the ring has wrapped
    before = (cache.next_pos, cache.positions.clone(), cache.k.clone(), cache.v.clone())
    with pytest.raises((TypeError, ValueError), match=r"^x "):
        attn(bad, causal=True, cache=cache)
    assert cache.next_pos == before[0]
    assert all(
        torch.equal(a, b)
        for a, b in zip(before[1:], (cache.positions, cache.k, cache.v))
    )


def test_a_router_whose_ids_dispatch_refuses_leaves_the_last_routing():
    """A route of one's own that returns int32 ids: refused by the dispatch, naming
    `experts`, and the layer still holds the routing of its last good call."""
    moe = moe_layer()
    moe(torch.randn(B, T, D))
    before = (moe.router_logits, moe.chosen)

    def int32_route(logits):
        weights, ids = mixtral_router(logits, K)
        return weights, ids.int()

    moe.router.route = int32_route
    with pytest.raises(TypeError, match=r"^experts must be a torch\.long tensor"):
        moe(torch.randn(B, T, D))
    assert (moe.router_logits, moe.chosen) == before


# --- the balancing loss over a batch with no real token ------------------------------------
def test_the_balancing_loss_of_a_batch_of_only_padding_is_zero_with_a_zero_gradient():
    layers = [torch.randn(B * T, E, dtype=F64, requires_grad=True) for _ in range(2)]
    padding = torch.zeros(B, T, dtype=torch.bool)
    loss = load_balancing_loss(layers, K, E, padding)
    assert loss.item() == 0.0 and loss.requires_grad  # 0, and still in the graph
    grads = torch.autograd.grad(loss, layers, retain_graph=True)
    assert all(g.abs().max().item() == 0.0 for g in grads)
    total = torch.tensor(2.3, dtype=F64, requires_grad=True) + 0.01 * loss
    total.backward()  # a training step's loss stays finite
    assert total.isfinite()


def test_a_mask_leaves_padding_out_exactly():
    """One real token in each row of a padded batch: the loss equals the loss of those
    rows alone, and the clamp that keeps an empty batch at 0 changes nothing here."""
    logits = torch.randn(B * T, E, dtype=F64)
    mask = torch.zeros(B, T, dtype=torch.bool)
    mask[:, -1] = True
    real = logits.view(B, T, E)[:, -1]
    torch.testing.assert_close(
        load_balancing_loss(logits, K, E, mask),
        load_balancing_loss(real, K, E),
        rtol=0,
        atol=1e-14,
    )


def test_nan_router_logits_give_a_nan_loss_not_a_laundered_number():
    logits = torch.randn(B * T, E)
    logits[3, 1] = math.nan
    assert load_balancing_loss(logits, K, E).isnan()
    assert load_balancing_loss(logits, K, E, MASK).isnan()


# --- the valid edge cases keep working -------------------------------------------------------
@pytest.mark.parametrize(
    "capacity", [None, 1, N, 10 * N], ids=["dropless", "1", "N", "10N"]
)
def test_dispatch_edge_cases(capacity):
    one = call_dispatch(x=X[:1], weights=GATES[:1], experts=IDS[:1], capacity=capacity)
    assert one.shape == (1, D)  # one token
    all_e = call_dispatch(
        weights=torch.rand(N, E),
        experts=torch.arange(E).repeat(N, 1),
        capacity=capacity,
    )  # k = E
    assert all_e.isfinite().all()
    bare = call_dispatch(expert_fn=lambda groups: 2 * groups, capacity=capacity)
    if capacity is None or capacity >= N:  # nothing dropped
        torch.testing.assert_close(bare, 2 * X * GATES.sum(dim=1, keepdim=True))


def test_dispatch_takes_float32_gates_into_bfloat16_experts_on_the_cpu():
    bank = Experts(E, D, I).bfloat16()
    y = call_dispatch(x=X.bfloat16(), expert_fn=bank)  # the router's gates: float32
    assert y.dtype == torch.bfloat16 and y.isfinite().all()
    moe = moe_layer().bfloat16()
    out = moe(torch.randn(1, 1, D, dtype=torch.bfloat16))
    assert out.shape == (1, 1, D) and out.dtype == torch.bfloat16


def test_clamped_swiglu_and_experts_edge_cases():
    tiny = clamped_swiglu(GATE, UP, limit=1e-6, alpha=1e-3)
    assert tiny.isfinite().all()
    assert clamped_swiglu(GATE, UP).shape == GATE.shape
    assert BANK(torch.randn(E, 0, D)).shape == (E, 0, D)  # an expert with no token
    assert OSS(torch.randn(E, 1, D)).shape == (E, 1, D)


@pytest.mark.parametrize(
    "allowed",
    [
        None,
        CAUSAL,
        CAUSAL[None, None],
        MASK[:, None, None],
        torch.ones(B, H, T, T, dtype=torch.bool),
        torch.tensor(True),
    ],
    ids=["none", "t-t", "1-1-t-t", "b-1-1-t", "full", "0d"],
)
def test_sink_attention_takes_every_broadcastable_bool_mask(allowed):
    out, weights = sinks(allowed=allowed)
    fused = sinks(allowed=allowed, sdpa=True)
    assert out.shape == (B, H, T, DH) and weights.shape == (B, H, T, T)
    torch.testing.assert_close(out, fused, rtol=1e-5, atol=1e-5)


def test_the_conversion_the_message_gives_works():
    hf_style = CAUSAL.long()  # 1 = may attend
    converted, _ = sinks(allowed=hf_style.bool())
    expected, _ = sinks(allowed=CAUSAL)
    assert torch.equal(converted, expected)
    additive = torch.zeros(T, T).masked_fill(~CAUSAL, -math.inf)
    assert torch.equal(sinks(allowed=additive == 0)[0], expected)


def test_sink_attention_edge_cases():
    scale = 0.1
    out, _ = sinks(scale=scale)
    assert out.isfinite().all()
    one = sinks(q=Q[:1, :, :1], k=KK[:1, :, :1], v=V[:1, :, :1])[0]  # T = 1, batch 1
    assert one.shape == (1, H, 1, DH)
    empty_row = CAUSAL.clone()
    empty_row[2] = False
    out, weights = sinks(allowed=empty_row)
    assert out[:, :, 2].abs().max() == 0 and weights[:, :, 2].abs().max() == 0
    nan_q = Q.clone()
    nan_q[0, 0, 0, 0] = math.nan
    assert sinks(q=nan_q)[0][0, 0, 0].isnan().all()  # NaN goes through


def test_the_sink_checks_are_skipped_inside_a_checked_entry():
    with checked_entry():
        assert check_sink_call(Q, KK, V, SINKS, CAUSAL.long(), None) == DH**-0.5
        assert check_sink_call(Q, KK, V, SINKS, None, 0.25) == 0.25
    with pytest.raises(TypeError, match=r"^allowed must be a bool tensor"):
        check_sink_call(Q, KK, V, SINKS, CAUSAL.long(), None)


@pytest.mark.parametrize(
    ("t_q", "t_k", "window", "offset"),
    [
        (1, 1, 1, 0),
        (T, T, 1, 0),
        (T, T, T, 0),
        (T, T, 10 * T, 0),
        (1, T, 3, T - 1),
        (0, T, 3, T),
        (2, T, 2, T - 2),
    ],
    ids=["one", "window-1", "window-T", "window-above-T", "step", "no-query", "chunk"],
)
def test_window_mask_edge_cases(t_q, t_k, window, offset):
    allowed = window_attention_allowed(t_q, t_k, window=window, query_offset=offset)
    if allowed is not None:
        q = torch.arange(offset, offset + t_q)[:, None]
        k = torch.arange(t_k)[None]
        assert torch.equal(allowed[0, 0], (k <= q) & (k > q - window))


def test_the_checks_read_no_value():
    moe = moe_layer(capacity=2)
    with torch.no_grad():
        assert host_reads(moe, torch.randn(B, T, D)) == 0
        assert host_reads(call_dispatch) == 0
        assert host_reads(BANK.grouped, ROWS, OFFS) == 0
    assert (
        host_reads(balancing, attention_mask=torch.zeros(B, T, dtype=torch.bool)) == 0
    )
    assert host_reads(sinks, allowed=CAUSAL, scale=0.3) == 0
    assert host_reads(sinks, allowed=CAUSAL, sdpa=True) == 0
    assert host_reads(windowed, key_valid=MASK) == 0
