"""The routers of a mixture of experts (chapter 9): from a token to the k experts it goes
to and their gates.

* one small function each, from router logits `[N, E]` to
  `(weights [N, k], experts [N, k] long)`: `switch_router` (Switch Transformer, Fedus et
  al. 2021), `mixtral_router`, `qwen3_moe_router`, `deepseek_v3_router`,
  `gpt_oss_router`, each in the order and the dtypes of Hugging Face's implementation;
* `Router`, `DeepSeekV3Router`: the linear map from a token to its logits, then one of
  those functions.

The experts, the dispatch and the balancing loss: `literate/parts/moe.py`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from literate.parts.checks import (
    boolean,
    features,
    float_tensor,
    positive_float,
    positive_int,
)

__all__ = [
    "Routing",
    "router_logits_and_k",
    "switch_router",
    "mixtral_router",
    "qwen3_moe_router",
    "deepseek_v3_router",
    "gpt_oss_router",
    "Router",
    "DeepSeekV3Router",
]


# --8<-- [start:router_logits_and_k]
Routing = tuple[Tensor, Tensor]  # (weights [N, k], experts [N, k] long)


def router_logits_and_k(logits: object, top_k: object) -> tuple[Tensor, int]:
    """`logits` if it is a float tensor `[N, E]`, and `top_k` if it is an int in
    [1, E]. A top-k outside that range is refused, never quietly run as another k."""
    logits = float_tensor("logits", logits, ndim=2)
    top_k = positive_int("top_k", top_k)
    if top_k > logits.shape[-1]:
        raise ValueError(f"top_k={top_k} > the number of experts {logits.shape[-1]}")
    return logits, top_k
# --8<-- [end:router_logits_and_k]


# --8<-- [start:switch_router]
def switch_router(logits: Tensor) -> Routing:
    """Switch Transformer (Fedus et al. 2021, sec. 2.1): p = softmax(logits) over the E
    experts, each token goes to its most probable expert, gated by that p (not 1, so
    the router learns). The softmax in float32 ("selective precision", sec. 2.4), the
    gate cast back to the logits' dtype. `[N, E] -> ([N, 1], [N, 1])`."""
    logits, _ = router_logits_and_k(logits, 1)
    probs = logits.float().softmax(dim=-1)
    gate, expert = probs.max(dim=-1, keepdim=True)
    return gate.to(logits.dtype), expert
# --8<-- [end:switch_router]


# --8<-- [start:mixtral_router]
def mixtral_router(logits: Tensor, top_k: int) -> Routing:
    """Mixtral (Jiang et al. 2024, sec. 2.1), as HF's `MixtralTopKRouter`: softmax over
    the E experts in float32, the top k, renormalised to sum to one over the k. The
    weights stay float32, as HF's do. `[N, E] -> ([N, k], [N, k])`."""
    logits, top_k = router_logits_and_k(logits, top_k)
    probs = logits.float().softmax(dim=-1)
    weights, experts = probs.topk(top_k, dim=-1)
    return weights / weights.sum(dim=-1, keepdim=True), experts
# --8<-- [end:mixtral_router]


# --8<-- [start:qwen3_moe_router]
def qwen3_moe_router(logits: Tensor, top_k: int, *, norm_topk_prob: bool) -> Routing:
    """Qwen3-MoE (Qwen Team 2025), as HF's `Qwen3MoeTopKRouter`: Mixtral's router,
    renormalised over the k only if `norm_topk_prob`, the weights cast back to the
    logits' dtype. `[N, E] -> ([N, k], [N, k])`."""
    logits, top_k = router_logits_and_k(logits, top_k)
    weights, experts = logits.float().softmax(dim=-1).topk(top_k, dim=-1)
    if boolean("norm_topk_prob", norm_topk_prob):
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights.to(logits.dtype), experts
# --8<-- [end:qwen3_moe_router]


# --8<-- [start:deepseek_v3_router]
def deepseek_v3_router(logits: Tensor, top_k: int, *, score_bias: Tensor,
                       n_group: int, topk_group: int, norm_topk_prob: bool,
                       routed_scaling_factor: float) -> Routing:
    """DeepSeek-V3 (DeepSeek-AI 2024b, sec. 2.1.2), as HF's `DeepseekV3TopkRouter`.

    Scores are sigmoids, one per expert, not a softmax. `score_bias [E]` (the
    auxiliary-loss-free balancing bias, HF's `e_score_correction_bias`) enters the
    *selection* only: the E experts form `n_group` groups, each group ranked by the sum
    of its two best biased scores; the `topk_group` best groups are kept and the top k
    experts chosen in them. The weights are the unbiased scores of those experts,
    renormalised over the k if `norm_topk_prob`, times `routed_scaling_factor`.
    `[N, E] -> ([N, k], [N, k])`."""
    logits, top_k = router_logits_and_k(logits, top_k)
    n, e = logits.shape
    n_group = positive_int("n_group", n_group)
    topk_group = positive_int("topk_group", topk_group)
    if e % n_group or e // n_group < 2:
        raise ValueError(f"n_group={n_group} must divide the {e} experts into groups "
                         f"of at least 2")
    if topk_group > n_group:
        raise ValueError(f"topk_group={topk_group} > n_group={n_group}")
    if top_k > topk_group * (e // n_group):
        raise ValueError(f"top_k={top_k} > the {topk_group * (e // n_group)} experts "
                         f"of the topk_group={topk_group} groups kept")
    score_bias = float_tensor("score_bias", score_bias, ndim=1)
    if score_bias.shape[0] != e:
        raise ValueError(f"score_bias must have shape [{e}], got "
                         f"{tuple(score_bias.shape)}")
    scale = positive_float("routed_scaling_factor", routed_scaling_factor)
    scores = logits.sigmoid()  # [N, E]
    biased = scores + score_bias  # [N, E]: used to choose, never to weigh
    groups = biased.view(n, n_group, e // n_group).topk(2, dim=-1).values.sum(dim=-1)
    kept = groups.topk(topk_group, dim=-1, sorted=False).indices  # [N, topk_group]
    allowed = torch.zeros_like(groups, dtype=torch.bool).scatter_(1, kept, True)
    allowed = allowed.repeat_interleave(e // n_group, dim=1)  # [N, E]
    biased = biased.masked_fill(~allowed, float("-inf"))
    experts = biased.topk(top_k, dim=-1, sorted=False).indices  # [N, k]
    weights = scores.gather(1, experts)  # [N, k]: the unbiased scores
    if boolean("norm_topk_prob", norm_topk_prob):
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return weights * scale, experts
# --8<-- [end:deepseek_v3_router]


# --8<-- [start:gpt_oss_router]
def gpt_oss_router(logits: Tensor, top_k: int) -> Routing:
    """gpt-oss (OpenAI 2025), as HF's `GptOssTopKRouter`: the top k of the logits
    (its router has a bias), then a softmax over those k only, in the logits' dtype.
    `[N, E] -> ([N, k], [N, k])`."""
    logits, top_k = router_logits_and_k(logits, top_k)
    top, experts = logits.topk(top_k, dim=-1)
    return top.softmax(dim=-1), experts
# --8<-- [end:gpt_oss_router]


# --8<-- [start:router]
class Router(nn.Module):
    """A token's router logits, x W^T (+ b) `[N, d] -> [N, E]`, then `route` (one of the
    functions above, e.g. `partial(mixtral_router, top_k=2)`) turns them into
    `(weights, experts)`. `weight (E, d)` and `bias (E,)` are named as in HF (Mixtral's
    `gate.weight`; gpt-oss's `router.weight`, `router.bias`)."""

    def __init__(self, d_model: int, n_experts: int,
                 route: Callable[[Tensor], Routing], *, bias: bool = False) -> None:
        super().__init__()
        self.d_model = positive_int("d_model", d_model)
        self.n_experts = positive_int("n_experts", n_experts)
        if not callable(route):
            raise TypeError(f"route must be a function such as partial(mixtral_router, "
                            f"top_k=2), got {type(route).__name__}")
        self.route = route
        linear = nn.Linear(self.d_model, self.n_experts, bias=boolean("bias", bias))
        self.weight, self.bias = linear.weight, linear.bias

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x [N, d] -> (logits [N, E], weights [N, k], experts [N, k])."""
        x = features("x", x, width=self.d_model, like=self.weight)
        logits = F.linear(x, self.weight, self.bias)
        return logits, *self.route(logits)
# --8<-- [end:router]


# --8<-- [start:deepseek_v3_router_module]
class DeepSeekV3Router(nn.Module):
    """DeepSeek-V3's gate: logits computed in float32 (as HF's), `deepseek_v3_router`
    on them, and the balancing bias `e_score_correction_bias (E,)` kept as a buffer:
    it is not learned by gradient descent but nudged by a rule (Wang et al. 2024)."""

    def __init__(self, d_model: int, n_experts: int, *, top_k: int, n_group: int,
                 topk_group: int, norm_topk_prob: bool = True,
                 routed_scaling_factor: float = 1.0) -> None:
        super().__init__()
        self.d_model = positive_int("d_model", d_model)
        self.n_experts = positive_int("n_experts", n_experts)
        self.options = {"top_k": top_k, "n_group": n_group, "topk_group": topk_group,
                        "norm_topk_prob": norm_topk_prob,
                        "routed_scaling_factor": routed_scaling_factor}
        self.weight = nn.Linear(self.d_model, self.n_experts, bias=False).weight
        self.register_buffer("e_score_correction_bias", torch.zeros(self.n_experts))
        deepseek_v3_router(torch.zeros(1, self.n_experts), score_bias=  # check options
                           self.e_score_correction_bias, **self.options)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x [N, d] -> (logits [N, E] float32, weights [N, k], experts [N, k])."""
        x = features("x", x, width=self.d_model, like=self.weight)
        logits = F.linear(x.float(), self.weight.float())
        return logits, *deepseek_v3_router(
            logits, score_bias=self.e_score_correction_bias, **self.options)
# --8<-- [end:deepseek_v3_router_module]
