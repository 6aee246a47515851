"""Two more losses of a mixture of experts, and routing turned around (chapter 9):

* `router_z_loss`: ST-MoE's router z-loss (Zoph et al. 2022, sec. 3.3, eq. 5), the
  mean over tokens of logsumexp(router logits)^2, pooled over layers as HF's
  `router_z_loss_func` pools them (Switch Transformers).
* `sequence_wise_balance_loss`: DeepSeek-V3's complementary sequence-wise balance loss
  (DeepSeek-AI 2024b, sec. 2.1.2, eqs. 17-20), taken in each sequence, then averaged
  over the batch's sequences.
* `expert_choice` and `expert_choice_moe`: expert-choice routing (Zhou et al. 2022,
  sec. 3): each expert takes the C tokens it scores highest, so every expert gets
  exactly C tokens and a token gets anywhere from 0 to E experts; the layer runs the
  experts on those groups `[E, C, d]`, the input `Experts` takes.

The token-choice routers are in `literate/parts/routers.py`, the experts, the dispatch
and Switch's balancing loss in `literate/parts/moe.py`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from literate.parts.checks import features, float_tensor, positive_float, positive_int

__all__ = [
    "router_z_loss",
    "sequence_wise_balance_loss",
    "expert_choice",
    "expert_choice_moe",
]


# --8<-- [start:router_z_loss]
def router_z_loss(router_logits: Tensor | Sequence[Tensor]) -> Tensor:
    """ST-MoE's router z-loss (Zoph et al. 2022, sec. 3.3, eq. 5): the mean over tokens
    of (log sum_e exp l_e)^2, `router_logits [N, E]` or a sequence of layers' logits,
    pooled (the mean over all their tokens, as HF's `router_z_loss_func` on the layers
    concatenated). In float32 at least, as the router's softmax. Its gradient for
    one token is 2 log Z softmax(l) / N: it pulls log Z towards 0 (the logits down
    while log Z > 0), the probable most."""
    layers = [router_logits] if isinstance(router_logits, Tensor) else router_logits
    if not isinstance(layers, (list, tuple)) or not layers:
        raise TypeError("router_logits must be a tensor [N, E] or a non-empty list of "
                        f"them, got {type(router_logits).__name__}")
    e = float_tensor("router_logits[0]", layers[0], ndim=2).shape[1]  # E
    for i, layer in enumerate(layers):
        float_tensor(f"router_logits[{i}]", layer, ndim=2)
        if layer.shape[0] == 0 or layer.shape[1] != e:
            raise ValueError(f"router_logits[{i}] must be [N >= 1, E={e}], got "
                             f"{tuple(layer.shape)}")
    logits = torch.cat(layers)  # [L N, E]
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    return torch.logsumexp(logits, dim=-1).square().mean()
# --8<-- [end:router_z_loss]


# --8<-- [start:sequence_wise_balance_loss]
def sequence_wise_balance_loss(scores: Tensor, top_k: int, *, alpha: float = 1e-4,
                               experts: Tensor | None = None) -> Tensor:
    """DeepSeek-V3's sequence-wise balance loss (DeepSeek-AI 2024b, sec. 2.1.2, eqs.
    17-20) of each sequence, averaged over the batch: `scores [B, T, N_r]`, the sigmoid
    affinities s_{i,t}; f_i = N_r / (K_r T) * (times expert i is chosen in the
    sequence), P_i = the sequence's mean of s_{i,t} / sum_j s_{j,t}; loss alpha sum_i
    f_i P_i (alpha = 0.0001 in DeepSeek-V3, sec. 4.2). `experts [B, T, K_r]`: the
    choices the router made (its bias and groups included); None takes eq. 18 as
    written, the top K_r of the scores. Balanced, each sequence's loss is alpha."""
    scores = float_tensor("scores", scores, ndim=3)
    (b, t, n_routed), alpha = scores.shape, positive_float("alpha", alpha)
    top_k = positive_int("top_k", top_k)
    if top_k > n_routed:
        raise ValueError(f"top_k={top_k} > the number of routed experts {n_routed}")
    if experts is None:
        experts = scores.topk(top_k, dim=-1).indices  # [B, T, K_r]: eq. 18's Topk
    elif (not isinstance(experts, Tensor) or experts.dtype != torch.long
          or experts.shape != (b, t, top_k)):
        raise TypeError(f"experts must be a torch.long tensor [B={b}, T={t}, "
                        f"K_r={top_k}] or None")
    chosen = F.one_hot(experts, n_routed).sum(dim=2)  # [B, T, N_r]: 1 where chosen
    f = n_routed / (top_k * t) * chosen.sum(dim=1).to(scores.dtype)  # [B, N_r], eq. 18
    p = (scores / scores.sum(dim=-1, keepdim=True)).mean(dim=1)  # [B, N_r], 19-20
    return alpha * (f * p).sum(dim=-1).mean()  # eq. 17 per sequence, then the mean
# --8<-- [end:sequence_wise_balance_loss]


# --8<-- [start:expert_choice]
def expert_choice(router_logits: Tensor, capacity: int) -> tuple[Tensor, Tensor]:
    """Expert-choice routing (Zhou et al. 2022, sec. 3): S = softmax(logits) over the
    experts (in float32 at least), then each expert takes the `capacity` tokens of its
    largest scores, G, I = TopK(S^T, C). `[N, E] -> (gates [E, C], tokens [E, C]
    long)`: every expert gets exactly C tokens; a token, 0 to E experts."""
    logits = float_tensor("router_logits", router_logits, ndim=2)
    capacity = positive_int("capacity", capacity)
    if capacity > logits.shape[0]:
        raise ValueError(f"capacity={capacity} > the {logits.shape[0]} tokens")
    wide = torch.promote_types(logits.dtype, torch.float32)  # float64 stays
    scores = logits.to(wide).softmax(dim=-1)  # [N, E]
    gates, tokens = scores.T.topk(capacity, dim=-1)  # [E, C] each
    return gates, tokens
# --8<-- [end:expert_choice]


# --8<-- [start:expert_choice_moe]
def expert_choice_moe(x: Tensor, gates: Tensor, tokens: Tensor,
                      experts: nn.Module) -> Tensor:
    """The MoE output under expert choice, `x [N, d] -> [N, d]`: expert e runs on its C
    tokens x[tokens[e]] (the groups `[E, C, d]` an `Experts` bank takes: no sort, no
    padding), and each output, times its gate, is added into its token's row (in the
    gates' dtype, float32 at least). A token no expert took gets 0: the residual
    carries it."""
    if not isinstance(experts, nn.Module) or not hasattr(experts, "n_experts"):
        raise TypeError(f"experts must be an expert bank such as Experts, got "
                        f"{type(experts).__name__}")
    x = features("x", x, width=experts.d_model, like=experts.down_proj)
    gates = float_tensor("gates", gates, ndim=2)
    if (not isinstance(tokens, Tensor) or tokens.dtype != torch.long
            or tokens.shape != gates.shape or gates.shape[0] != experts.n_experts
            or tokens.device != x.device or gates.device != x.device):
        raise ValueError(f"gates {tuple(gates.shape)} and tokens (long) must both be "
                         f"[E={experts.n_experts}, C], on x's device")
    out = experts(x[tokens]) * gates[..., None]  # [E, C, d]
    y = torch.zeros(x.shape, dtype=out.dtype, device=x.device)  # [N, d]
    return y.index_add_(0, tokens.flatten(), out.flatten(0, 1)).to(x.dtype)
# --8<-- [end:expert_choice_moe]
