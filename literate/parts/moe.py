"""Mixture of experts: a router picks k of E feed-forward networks for each token, and
the token's output is their gated sum (Shazeer et al. 2017; Fedus et al. 2021). The
routers are in `literate/parts/routers.py`; here, what they route to:

* `Experts` (HF's fused layout: `gate_up_proj (E, 2I, d)`, `down_proj (E, d, I)`) and
  `GptOssExperts` (`gate_up_proj (E, d, 2I)` interleaved, biases, clamped SwiGLU): all
  E experts at once on `[E, C, d]` groups, one batched matrix product per matrix; and
  `grouped(rows, offs)`, each on the rows sorted to it, by `F.grouped_mm`.
* `dispatch`: sort the (token, expert) pairs by expert; dropless, in float32 or
  bfloat16, run each pair once through the experts' `grouped` path; otherwise lay each
  expert's pairs out in its own group of C slots, run the experts, gather each pair's
  output back; and sum them weighted by the gates. Index arithmetic only: no tensor
  value is read into Python (no host sync), so it compiles with `fullgraph=True`.
* `MoEFFN`: the FFN interface `[B, T, d] -> [B, T, d]`; it keeps the router logits of
  its last call for `load_balancing_loss` (Fedus et al. 2021, eqs. 4-6, pooled over
  layers as HF's `load_balancing_loss_func`).
"""

# Over 450 lines on purpose: chapter 9's layer in the order the page shows it (the
# experts, the dispatch, the layer, the balancing loss), each part with the metadata
# checks of its entry; the page includes its sections one by one.

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from literate.parts.checks import (
    bool_tensor,
    features,
    float_tensor,
    positive_float,
    positive_int,
)
from literate.parts.ffn import check_activation
from literate.parts.routers import router_logits_and_k

__all__ = [
    "Experts",
    "clamped_swiglu",
    "GptOssExperts",
    "dispatch",
    "dropped_pairs",
    "MoEFFN",
    "load_balancing_loss",
    "update_balancing_bias",
    "OPS",
]


# --8<-- [start:grouped_mm]
# The ops' namespace is the defining module's name ("literate_parts_moe" here): this
# code run again in the same process (a page that shows it, the standalone file) then
# makes ops of its own, instead of replacing these and leaving them broken once its copy
# is gone.
OPS = __name__.replace(".", "_")


@torch.library.custom_op(f"{OPS}::grouped_mm", mutates_args=())
def _grouped_mm(rows: Tensor, weight: Tensor, offs: Tensor) -> Tensor:
    """rows `[M, i]` sorted by expert, `weight (E, o, i)`, `offs [E]` int32 (the running
    counts, offs[-1] = M): rows offs[e-1]:offs[e] times weight[e]^T, `[M, o]`. An op of
    its own, opaque to torch.compile: torch 2.13's fake kernel of grouped_mm accepts
    bfloat16 only, and would stop a float32 fullgraph compile."""
    return F.grouped_mm(rows, weight.mT, offs=offs)


@_grouped_mm.register_fake
def _grouped_mm_shape(rows: Tensor, weight: Tensor, offs: Tensor) -> Tensor:
    return rows.new_empty(rows.shape[0], weight.shape[1])


@torch.library.custom_op(f"{OPS}::grouped_mm_backward", mutates_args=())
def _grouped_mm_backward(grad: Tensor, rows: Tensor, weight: Tensor,
                         offs: Tensor) -> tuple[Tensor, Tensor]:
    """(d rows, d weight); an expert with no rows gets a zero gradient. `contiguous`:
    grouped_mm refuses a gradient of stride 0, as `out.sum()` hands back."""
    grad = grad.contiguous()
    return (F.grouped_mm(grad, weight, offs=offs),
            F.grouped_mm(grad.mT, rows, offs=offs))  # (E, o, i)


@_grouped_mm_backward.register_fake
def _grouped_mm_backward_shape(grad: Tensor, rows: Tensor, weight: Tensor,
                               offs: Tensor) -> tuple[Tensor, Tensor]:
    # contiguous, as grouped_mm returns them, whatever the strides of rows and weight
    # (GptOssExperts passes a transposed view): empty_like would copy those strides
    return rows.new_empty(rows.shape), weight.new_empty(weight.shape)


class _GroupedMM(torch.autograd.Function):
    """`_grouped_mm` with its backward, both opaque ops."""

    @staticmethod
    def forward(ctx, rows: Tensor, weight: Tensor, offs: Tensor) -> Tensor:
        ctx.save_for_backward(rows, weight, offs)
        return _grouped_mm(rows, weight, offs)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor, None]:
        return *_grouped_mm_backward(grad, *ctx.saved_tensors), None


def _grouped_linear(rows: Tensor, weight: Tensor, offs: Tensor) -> Tensor:
    """`_grouped_mm(rows, weight, offs)`, `[M, i] -> [M, o]`. Autograd and
    torch.compile need the ops above; eager inference calls `F.grouped_mm` itself, the
    same product without the op's dispatch (`python -m literate.tools.bench --only moe`
    times the layer)."""
    if torch.is_grad_enabled() or torch.compiler.is_compiling():
        return _GroupedMM.apply(rows, weight, offs)
    return F.grouped_mm(rows, weight.mT, offs=offs)
# --8<-- [end:grouped_mm]


# --8<-- [start:experts]
def expert_groups(groups: object, bank: nn.Module) -> Tensor:
    """The input of an expert bank's forward (`Experts`, `GptOssExperts`): float groups
    `[E, C, d]` of the bank's E, width, dtype and device. Metadata only."""
    groups = features("groups", groups, width=bank.d_model, like=bank.down_proj)
    if groups.ndim != 3 or groups.shape[0] != bank.n_experts:
        raise ValueError(f"groups must be [E={bank.n_experts}, C, d], got "
                         f"{tuple(groups.shape)}")
    return groups


def expert_rows(rows: object, offs: object, bank: nn.Module) -> Tensor:
    """The input of an expert bank's `grouped`: float rows `[M, d]` sorted by expert,
    of the bank's width, dtype and device, and their running counts `offs [E]` int32."""
    rows = features("rows", rows, width=bank.d_model, like=bank.down_proj)
    if rows.ndim != 2:
        raise ValueError(f"rows must be [M, d], got {tuple(rows.shape)}")
    if not isinstance(offs, Tensor) or offs.dtype != torch.int32:
        kind = offs.dtype if isinstance(offs, Tensor) else type(offs).__name__
        raise TypeError(f"offs must be an int32 tensor [E={bank.n_experts}], "
                        f"got {kind}")
    if offs.shape != (bank.n_experts,):
        raise ValueError(f"offs must be [E={bank.n_experts}], got {tuple(offs.shape)}")
    return rows


class Experts(nn.Module):
    """E gated FFNs, down(act(gate(x)) * up(x)), in HF's fused layout (Mixtral,
    Qwen3-MoE, DeepSeek-V3): `gate_up_proj (E, 2I, d)`, the gate's rows then the up's,
    and `down_proj (E, d, I)`. Runs all experts at once on groups `[E, C, d]`, expert e
    on group e: `[E, C, d] -> [E, C, d]` (the transparent path, any float dtype).

    `grouped(rows, offs)`, the fast path: the same experts on rows sorted by expert,
    `[M, d] -> [M, d]`, expert e on rows offs[e-1]:offs[e], by `F.grouped_mm`: each row
    computed once. `takes_grouped(dtype)` says whether it runs: float32 or bfloat16
    (torch 2.13 has no float64 kernel), and rows of d and I that are whole 16 bytes."""

    def __init__(self, n_experts: int, d_model: int, d_ff: int,
                 activation: Callable[[Tensor], Tensor] = F.silu) -> None:
        super().__init__()
        self.n_experts = positive_int("n_experts", n_experts)
        self.d_model = positive_int("d_model", d_model)
        self.d_ff = positive_int("d_ff", d_ff)
        self.activation = check_activation(activation)
        e, d, i = self.n_experts, self.d_model, self.d_ff
        bound_in, bound_out = d**-0.5, i**-0.5  # as nn.Linear's default init
        self.gate_up_proj = nn.Parameter(torch.empty(e, 2 * i, d).uniform_(
            -bound_in, bound_in))
        self.down_proj = nn.Parameter(torch.empty(e, d, i).uniform_(
            -bound_out, bound_out))

    def forward(self, groups: Tensor) -> Tensor:
        groups = expert_groups(groups, self)
        gate, up = (groups @ self.gate_up_proj.mT).chunk(2, dim=-1)  # [E, C, I] each
        return (self.activation(gate) * up) @ self.down_proj.mT  # [E, C, d]

    def takes_grouped(self, dtype: torch.dtype) -> bool:
        size = dtype.itemsize  # bytes per number
        return (hasattr(F, "grouped_mm")  # an older torch has none: the padded path
                and dtype in (torch.float32, torch.bfloat16)
                and self.d_model * size % 16 == 0 and self.d_ff * size % 16 == 0)

    def grouped(self, rows: Tensor, offs: Tensor) -> Tensor:
        rows = expert_rows(rows, offs, self)
        gate, up = _grouped_linear(rows, self.gate_up_proj, offs).chunk(2, dim=-1)
        return _grouped_linear(self.activation(gate) * up, self.down_proj, offs)
# --8<-- [end:experts]


# --8<-- [start:clamped_swiglu]
def clamped_swiglu(gate: Tensor, up: Tensor, *, alpha: float = 1.702,
                   limit: float = 7.0) -> Tensor:
    """gpt-oss's activation (HF's `GptOssExperts._apply_gate`): the gate clamped from
    above and the up from both sides at `limit`, then (up + 1) * gate * sigmoid(alpha *
    gate), a SwiGLU whose sigmoid is sharpened (alpha = 1.702: x sigmoid(1.702 x) is
    GELU's sigmoid approximation) and whose up carries a +1."""
    gate, up = float_tensor("gate", gate), float_tensor("up", up)
    alpha, limit = positive_float("alpha", alpha), positive_float("limit", limit)
    gate = gate.clamp(max=limit)
    up = up.clamp(min=-limit, max=limit)
    return (up + 1) * (gate * torch.sigmoid(gate * alpha))
# --8<-- [end:clamped_swiglu]


# --8<-- [start:gpt_oss_experts]
class GptOssExperts(nn.Module):
    """gpt-oss's experts in HF's layout: `gate_up_proj (E, d, 2I)` (x @ W, not x W^T)
    whose columns interleave gate and up (gate_0, up_0, gate_1, ...),
    `gate_up_proj_bias (E, 2I)`, `down_proj (E, I, d)`, `down_proj_bias (E, d)`, and
    `clamped_swiglu`. `[E, C, d] -> [E, C, d]` (the transparent path, any float dtype).

    `grouped(rows, offs)`, the fast path, as `Experts.grouped`: rows sorted by expert,
    `[M, d] -> [M, d]`, expert e on rows offs[e-1]:offs[e], each row computed once. The
    grouped product takes W^T, a view of W (no copy), and each row's biases are its
    expert's, found from the offsets on the device (`searchsorted`, no host read).
    `takes_grouped(dtype)`: float32 or bfloat16, rows of d and I that are whole 16
    bytes."""

    def __init__(self, n_experts: int, d_model: int, d_ff: int, *,
                 alpha: float = 1.702, limit: float = 7.0) -> None:
        super().__init__()
        self.n_experts = positive_int("n_experts", n_experts)
        self.d_model = positive_int("d_model", d_model)
        self.d_ff = positive_int("d_ff", d_ff)
        self.alpha = positive_float("alpha", alpha)
        self.limit = positive_float("limit", limit)
        e, d, i = self.n_experts, self.d_model, self.d_ff

        def uniform(*shape: int, fan_in: int) -> nn.Parameter:
            return nn.Parameter(torch.empty(shape).uniform_(-fan_in**-0.5,
                                                            fan_in**-0.5))

        self.gate_up_proj = uniform(e, d, 2 * i, fan_in=d)
        self.gate_up_proj_bias = uniform(e, 2 * i, fan_in=d)
        self.down_proj = uniform(e, i, d, fan_in=i)
        self.down_proj_bias = uniform(e, d, fan_in=i)

    def forward(self, groups: Tensor) -> Tensor:
        groups = expert_groups(groups, self)
        gate_up = groups @ self.gate_up_proj + self.gate_up_proj_bias[:, None]
        h = clamped_swiglu(gate_up[..., ::2], gate_up[..., 1::2], alpha=self.alpha,
                           limit=self.limit)  # [E, C, I]
        return h @ self.down_proj + self.down_proj_bias[:, None]  # [E, C, d]

    def takes_grouped(self, dtype: torch.dtype) -> bool:
        size = dtype.itemsize  # bytes per number
        return (hasattr(F, "grouped_mm")  # an older torch has none: the padded path
                and dtype in (torch.float32, torch.bfloat16)
                and self.d_model * size % 16 == 0 and self.d_ff * size % 16 == 0)

    def grouped(self, rows: Tensor, offs: Tensor) -> Tensor:
        rows = expert_rows(rows, offs, self)
        row = torch.arange(rows.shape[0], dtype=offs.dtype, device=rows.device)
        expert = torch.searchsorted(offs, row, right=True)  # [M]: the e of each row
        gate_up = (_grouped_linear(rows, self.gate_up_proj.mT, offs)  # x W, W^T a view
                   + self.gate_up_proj_bias.index_select(0, expert))  # [M, 2I]
        h = clamped_swiglu(gate_up[:, ::2], gate_up[:, 1::2], alpha=self.alpha,
                           limit=self.limit)  # [M, I]
        return (_grouped_linear(h, self.down_proj.mT, offs)
                + self.down_proj_bias.index_select(0, expert))  # [M, d]
# --8<-- [end:gpt_oss_experts]


# --8<-- [start:dispatch]
def _sorted_dispatch(x: Tensor, weights: Tensor, experts: Tensor,
                     expert_fn: nn.Module, e: int) -> Tensor:
    """`dispatch`'s fast path: the N k pairs sorted by expert into one `[N k, d]`, the
    offsets a running count kept as a tensor (no host read), `expert_fn.grouped` on
    them, and each output, gated, added into its token's row."""
    (n, d), k = x.shape, experts.shape[1]
    flat = experts.reshape(-1)  # [N k]: pair p is token p // k
    order = torch.argsort(flat, stable=True)  # [N k]: the pairs, expert by expert
    counts = torch.zeros(e, dtype=torch.long, device=x.device).scatter_add_(
        0, flat, torch.ones_like(flat))  # [E]
    offs = counts.cumsum(0).to(torch.int32)  # [E]: where each expert's rows end
    token = order // k  # [N k]: the token of each sorted pair
    rows = x.index_select(0, token)  # [N k, d]: row copies; x[token] is 5x slower (CPU)
    out = expert_fn.grouped(rows, offs)  # [N k, d], row i is pair order[i]
    w = weights.reshape(-1)[order, None].float()  # [N k, 1]: each sorted pair's gate
    gated = out * w  # [N k, d] float32: summed in bfloat16, k adds would round k times
    y = torch.zeros(n, d, dtype=gated.dtype, device=x.device)
    return y.index_add_(0, token, gated).to(x.dtype)  # [N, d]: each token's k summed


def _check_dispatch(x: object, weights: object, experts: object, expert_fn: object,
                    n_experts: object) -> int:
    """`dispatch`'s refusals, from metadata alone (no value is read); returns E. An
    expert bank (a module with `d_model`) must have E experts and x its width, dtype
    and device; the gates may be of another float dtype (a router's are float32)."""
    e = positive_int("n_experts", n_experts)
    if not callable(expert_fn):
        raise TypeError(f"expert_fn must be callable, got {type(expert_fn).__name__}")
    if getattr(expert_fn, "n_experts", e) != e:
        raise ValueError(f"n_experts={e}, but expert_fn holds {expert_fn.n_experts}")
    x = float_tensor("x", x, ndim=2)
    if isinstance(expert_fn, nn.Module) and hasattr(expert_fn, "d_model"):
        features("x", x, width=expert_fn.d_model,
                 like=getattr(expert_fn, "down_proj", x))  # Experts, GptOssExperts
    weights = float_tensor("weights", weights, ndim=2)
    if not isinstance(experts, Tensor) or experts.dtype != torch.long:
        kind = experts.dtype if isinstance(experts, Tensor) else type(experts).__name__
        raise TypeError(f"experts must be a torch.long tensor [N, k], got {kind}")
    if experts.shape != weights.shape or weights.shape[0] != x.shape[0]:
        raise ValueError(f"weights {tuple(weights.shape)} and experts "
                         f"{tuple(experts.shape)} must both be [N, k], N = "
                         f"{x.shape[0]} tokens of x")
    if experts.shape[1] > e:
        raise ValueError(f"experts has k={experts.shape[1]} choices per token > "
                         f"n_experts={e}")
    if weights.device != x.device or experts.device != x.device:
        raise ValueError(f"weights ({weights.device}) and experts ({experts.device}) "
                         f"must be on x's device, {x.device}")
    return e


def dispatch(x: Tensor, weights: Tensor, experts: Tensor,
             expert_fn: Callable[[Tensor], Tensor], *, n_experts: int,
             capacity: int | None = None) -> Tensor:
    """sum_j weights[n, j] * expert_{experts[n, j]}(x[n]) for every token n: `x [N, d]`,
    `weights [N, k]`, `experts [N, k]` (long, distinct in a row, as top-k makes them)
    -> `[N, d]`, the dtype of x.

    The N k (token, expert) pairs are sorted by expert (stably: in token order within
    an expert), and expert e's pairs fill the first slots of group e of C slots; the
    rest of the group is zeros. `expert_fn` runs every expert on its group at once,
    `[E, C, d] -> [E, C, d]`, and each pair's output is gathered back from its slot.
    `capacity=None` is dropless: C = N, since an expert is chosen at most once per
    token. A capacity C < N is Switch's (Fedus et al. 2021, sec. 2.2): the pairs an
    expert gets beyond its first C are dropped, their output 0 (the residual carries
    the token). Only index arithmetic on tensors: no value is read into Python.

    One path, two speeds. That padded layout computes E C rows for N k pairs, E / k
    times the work when dropless. If `expert_fn` offers `grouped` and
    `expert_fn.takes_grouped(x.dtype)` (`Experts` and `GptOssExperts` in float32 or
    bfloat16), a dropless dispatch runs `_sorted_dispatch` instead: the same sort, each
    pair computed once, gated and added into its token's row (`index_add_`, in float32;
    on CUDA in no fixed order unless `torch.use_deterministic_algorithms`). Equal to the
    padded path up to float rounding (its products and each token's k outputs are
    summed in another order), gradients included; float64, a capacity, or an
    `expert_fn` without `grouped` (a bare function) take the padded path."""
    e = _check_dispatch(x, weights, experts, expert_fn, n_experts)
    (n, d), k = x.shape, experts.shape[1]
    c = n if capacity is None else positive_int("capacity", capacity)
    fast = capacity is None and hasattr(expert_fn, "grouped")  # no bool(method):
    if fast and expert_fn.takes_grouped(x.dtype):  # torch 2.7's dynamo cannot
        return _sorted_dispatch(x, weights, experts, expert_fn, e)
    flat = experts.reshape(-1)  # [N k]: pair p is token p // k
    order = torch.argsort(flat, stable=True)  # [N k]: the pairs, expert by expert
    counts = torch.zeros(e, dtype=torch.long, device=x.device).scatter_add_(
        0, flat, torch.ones_like(flat))  # [E], no host sync (bincount would make one)
    starts = counts.cumsum(0) - counts  # [E]: where each expert's pairs begin in order
    slot = torch.arange(c, device=x.device)  # [C]
    filled = slot < counts[:, None]  # [E, C]
    source = (starts[:, None] + slot).clamp(max=n * k - 1)  # [E, C]: a sorted pair
    groups = torch.where(filled[..., None], x[order[source] // k], 0)  # [E, C, d]
    out = expert_fn(groups)  # [E, C, d]
    rank = torch.empty_like(order).scatter_(0, order, torch.arange(n * k,
                                                                   device=x.device))
    position = rank - starts[flat]  # [N k]: each pair's slot in its expert's group
    kept = (position < c)[:, None]  # [N k, 1]
    y = torch.where(kept, out[flat, position.clamp(max=c - 1)], 0)  # [N k, d]
    return (y.view(n, k, d) * weights[..., None]).sum(dim=1).to(x.dtype)
# --8<-- [end:dispatch]


# --8<-- [start:dropped_pairs]
def dropped_pairs(experts: Tensor, n_experts: int, capacity: int) -> Tensor:
    """How many (token, expert) pairs of `experts [N, k]` a capacity of `capacity`
    slots per expert drops (Switch, Fedus et al. 2021, sec. 2.2): a 0-d tensor, the
    sum over experts of what each receives beyond its capacity."""
    if not isinstance(experts, Tensor) or experts.dtype != torch.long:
        kind = experts.dtype if isinstance(experts, Tensor) else type(experts).__name__
        raise TypeError(f"experts must be a torch.long tensor [N, k], got {kind}")
    e, c = positive_int("n_experts", n_experts), positive_int("capacity", capacity)
    flat = experts.reshape(-1)
    load = torch.zeros(e, dtype=torch.long, device=flat.device).scatter_add_(
        0, flat, torch.ones_like(flat))  # [E]
    return (load - c).clamp(min=0).sum()
# --8<-- [end:dropped_pairs]


# --8<-- [start:moe_ffn]
def _check_moe_parts(router: object, experts: object, shared: object) -> None:
    """`MoEFFN`'s parts are modules of the right kind: a router with `weight`,
    `d_model` and `n_experts` (`Router`, `DeepSeekV3Router`), an expert bank with
    `d_model` and `n_experts` (`Experts`, `GptOssExperts`), and a shared FFN or None."""
    for name, part, needs, example in (
            ("router", router, ("weight", "d_model", "n_experts"), "Router"),
            ("experts", experts, ("d_model", "n_experts"), "Experts")):
        if not isinstance(part, nn.Module) or not all(hasattr(part, a) for a in needs):
            raise TypeError(f"{name} must be a module with {', '.join(needs)} (such as "
                            f"{example}), got {type(part).__name__}")
    if shared is not None and not isinstance(shared, nn.Module):
        raise TypeError(f"shared must be an FFN module [N, d] -> [N, d] or None, got "
                        f"{type(shared).__name__}")


class MoEFFN(nn.Module):
    """A mixture-of-experts FFN, `[B, T, d] -> [B, T, d]`, to put where a block's FFN
    goes: `router` ([N, d] -> (logits, weights, experts)) picks, `dispatch` runs the
    `experts` (a module `[E, C, d] -> [E, C, d]` with `n_experts` and `d_model`), and a
    `shared` FFN, if given, is added for every token (DeepSeek-V3's shared expert,
    Dai et al. 2024). `router_logits` holds the logits `[B T, E]` of the last call, for
    `load_balancing_loss`, `chosen` its experts (for `update_balancing_bias`), and,
    with a `capacity`, `dropped` the number of (token, expert) pairs it dropped."""

    def __init__(self, router: nn.Module, experts: nn.Module,
                 shared: nn.Module | None = None, *,
                 capacity: int | None = None) -> None:
        super().__init__()
        _check_moe_parts(router, experts, shared)
        self.d_model = positive_int("experts.d_model", experts.d_model)
        self.n_experts = positive_int("experts.n_experts", experts.n_experts)
        if (router.d_model, router.n_experts) != (self.d_model, self.n_experts):
            raise ValueError(f"router is for d_model={router.d_model}, n_experts="
                             f"{router.n_experts}; experts for {self.d_model}, "
                             f"{self.n_experts}")
        if shared is not None and getattr(shared, "d_model", None) != self.d_model:
            raise ValueError(f"shared must have d_model={self.d_model}")
        self.capacity = None if capacity is None else positive_int("capacity", capacity)
        self.router, self.experts, self.shared = router, experts, shared
        self.router_logits: Tensor | None = None
        self.chosen: Tensor | None = None  # [B T, k]: the experts of the last call
        self.dropped: Tensor | None = None  # pairs over capacity in the last call

    def forward(self, x: Tensor) -> Tensor:
        x = features("x", x, width=self.d_model, like=self.router.weight)
        flat = x.reshape(-1, self.d_model)  # [N, d], N = B T
        logits, weights, experts = self.router(flat)
        y = dispatch(flat, weights, experts, self.experts, n_experts=self.n_experts,
                     capacity=self.capacity)
        self.router_logits, self.chosen = logits, experts  # once dispatch took them
        if self.capacity is not None:  # a tensor: counting it reads no value
            self.dropped = dropped_pairs(experts, self.n_experts, self.capacity)
        if self.shared is not None:
            y = y + self.shared(flat)
        return y.view(x.shape)
# --8<-- [end:moe_ffn]


# --8<-- [start:load_balancing_loss]
def load_balancing_loss(router_logits: Tensor | Sequence[Tensor], top_k: int,
                        n_experts: int, attention_mask: Tensor | None = None) -> Tensor:
    """Switch's auxiliary loss (Fedus et al. 2021, eqs. 4-6), as HF's
    `load_balancing_loss_func`: E * sum_e f_e P_e, f_e the share of (token, choice)
    pairs sent to expert e (the shares sum to k), P_e the mean router probability of e.
    `router_logits`: one layer's `[N, E]` or a sequence of them, pooled (the
    statistics of all layers' tokens together, not a mean of per-layer losses).
    `attention_mask [B, T]` (bool, True = a real token, B T = N) leaves padding out;
    with no real token the loss is 0, its gradient zeros (HF's 0/0 gives NaN). Uniform
    routing gives k; only P carries a gradient."""
    layers = [router_logits] if isinstance(router_logits, Tensor) else list(
        router_logits)
    if not layers:
        raise ValueError("router_logits is empty")
    e = positive_int("n_experts", n_experts)
    for i, layer in enumerate(layers):
        float_tensor(f"router_logits[{i}]", layer, ndim=2)
        if layer.shape[1] != e or layer.shape[0] == 0:
            raise ValueError(f"router_logits[{i}] must be [N >= 1, n_experts={e}], got "
                             f"{tuple(layer.shape)}")
    top_k = router_logits_and_k(layers[0], top_k)[1]
    logits = torch.cat(layers)  # [L N, E]
    probs = logits.softmax(dim=-1)
    chosen = F.one_hot(probs.topk(top_k, dim=-1).indices, e).sum(dim=1)  # [L N, E]
    if attention_mask is None:
        f, p = chosen.to(probs.dtype).mean(dim=0), probs.mean(dim=0)
    else:
        mask = bool_tensor("attention_mask", attention_mask)
        if any(layer.shape[0] != mask.numel() for layer in layers):
            raise ValueError(f"attention_mask {tuple(mask.shape)} must have one entry "
                             f"per row of every router_logits")
        if mask.device != logits.device:
            raise ValueError(f"attention_mask is on {mask.device}, router_logits on "
                             f"{logits.device}")
        valid = mask.reshape(-1).repeat(len(layers)).to(probs.dtype)[:, None]
        rows = valid.sum().clamp(min=1)  # no real token: 0 (and 0 gradient), not 0/0
        f, p = (chosen * valid).sum(dim=0) / rows, (probs * valid).sum(dim=0) / rows
    return e * (f * p).sum()
# --8<-- [end:load_balancing_loss]


# --8<-- [start:update_balancing_bias]
@torch.no_grad()
def update_balancing_bias(bias: Tensor, experts: Tensor, *,
                          speed: float = 1e-3) -> Tensor:
    """DeepSeek-V3's auxiliary-loss-free balancing (DeepSeek-AI 2024b, sec. 2.1.2), in
    place, after a training step: each expert's selection bias `bias [E]` goes down
    by `speed` (their gamma, 0.001) if the step's tokens chose it more often than the
    average expert, and up by `speed` if less; `experts [N, k]` are the step's choices.
    No loss and no gradient: the bias changes which experts are chosen, never the
    weights they get."""
    bias = float_tensor("bias", bias, ndim=1)
    if bias.dtype not in (torch.float32, torch.float64):  # HF keeps it float32 too
        raise TypeError(f"bias must be float32 or float64, got {bias.dtype}: steps of "
                        f"speed={speed} vanish in its rounding (keep the router's "
                        "bias in float32 when the model is cast)")
    if not isinstance(experts, Tensor) or experts.dtype != torch.long:
        raise TypeError("experts must be a torch.long tensor [N, k]")
    speed = positive_float("speed", speed)
    flat = experts.reshape(-1)
    load = torch.zeros_like(bias).scatter_add_(0, flat,
                                               torch.ones_like(flat, dtype=bias.dtype))
    return bias.add_(speed * torch.sign(load.mean() - load))  # [E]
# --8<-- [end:update_balancing_bias]
