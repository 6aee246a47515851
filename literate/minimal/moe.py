"""A mixture of experts, minimal (chapter 9): Mixtral's sparse FFN and Switch's
balancing loss, in plain PyTorch.

A router scores the E experts for each token, the token goes to its top k, and its
output is their gated sum (Shazeer et al. 2017; Mixtral, Jiang et al. 2024, sec. 2.1).
Parameter names are Hugging Face's `MixtralSparseMoeBlock`'s (`gate.weight`,
`experts.gate_up_proj`, `experts.down_proj`), so its state dict loads as it is.

Shapes: N tokens (B T flattened), d model width, E experts, k experts per token,
I each expert's hidden width.
"""

import torch
import torch.nn.functional as F
from torch import nn


# --8<-- [start:experts]
class Experts(nn.Module):
    """E SwiGLU FFNs, down(silu(gate(x)) * up(x)), their weights stacked as Hugging
    Face stores them: `gate_up_proj` (E, 2I, d), the gate's rows then the up's, and
    `down_proj` (E, d, I)."""

    def __init__(self, *, n_experts, d_model, d_ff):
        super().__init__()
        self.gate_up_proj = nn.Parameter(
            torch.randn(n_experts, 2 * d_ff, d_model) / d_model**0.5)
        self.down_proj = nn.Parameter(torch.randn(n_experts, d_model, d_ff) / d_ff**0.5)

    def forward(self, x, e):
        """Expert e on the rows x [n, d] -> [n, d]."""
        gate, up = F.linear(x, self.gate_up_proj[e]).chunk(2, dim=-1)  # [n, I] each
        return F.linear(F.silu(gate) * up, self.down_proj[e])  # [n, d]
# --8<-- [end:experts]


# --8<-- [start:mixtral_moe]
class MixtralMoE(nn.Module):
    """Mixtral's sparse FFN: softmax router, top k, the k gates renormalised to sum to
    1, each expert run on the tokens that chose it. Returns (output [B, T, d], router
    logits [N, E]); the logits feed `load_balancing_loss`."""

    def __init__(self, *, d_model, d_ff, n_experts, top_k):
        super().__init__()
        self.n_experts, self.top_k = n_experts, top_k
        self.gate = nn.Linear(d_model, n_experts, bias=False)  # the router
        self.experts = Experts(n_experts=n_experts, d_model=d_model, d_ff=d_ff)

    def forward(self, x):
        B, T, d = x.shape
        x = x.reshape(B * T, d)  # [N, d]
        logits = self.gate(x)  # [N, E]
        probs = logits.float().softmax(dim=-1)  # float32, as Mixtral routes
        gates, chosen = probs.topk(self.top_k, dim=-1)  # [N, k] each
        gates = (gates / gates.sum(dim=-1, keepdim=True)).to(x.dtype)  # renormalised
        y = torch.zeros_like(x)  # [N, d]
        for e in range(self.n_experts):
            token, slot = torch.where(chosen == e)  # the tokens that chose e, and where
            out = self.experts(x[token], e) * gates[token, slot, None]  # [n_e, d]
            y.index_add_(0, token, out)  # each token's k outputs summed
        return y.view(B, T, d), logits
# --8<-- [end:mixtral_moe]


# --8<-- [start:load_balancing_loss]
def load_balancing_loss(router_logits, *, top_k):
    """Switch's auxiliary loss (Fedus et al. 2021, eq. 4), as Hugging Face's
    `load_balancing_loss_func`: E * sum_e f_e P_e, f_e the share of tokens that chose
    expert e among their top k, P_e its mean router probability. router_logits
    [N, E]: every layer's, concatenated (HF pools the layers). Uniform routing gives
    k; only P carries a gradient."""
    n_experts = router_logits.shape[-1]
    probs = router_logits.softmax(dim=-1)  # [N, E]
    chosen = F.one_hot(probs.topk(top_k, dim=-1).indices, n_experts).sum(dim=1)
    f = chosen.to(probs.dtype).mean(dim=0)  # [E]: a token's top k, counted
    p = probs.mean(dim=0)  # [E]
    return n_experts * (f * p).sum()
# --8<-- [end:load_balancing_loss]
