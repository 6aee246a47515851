"""The feed-forward half of a block, applied to every position alone: the dense FFN of
the 2017 Transformer and GPT-2, and Llama's gated SwiGLU. Layer names are Hugging Face
Llama's (`gate_proj`, `up_proj`, `down_proj`). Shapes: [..., d_model] in and out.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn


# --8<-- [start:gelu_tanh]
def gelu_tanh(x):
    """GPT-2's GELU: the tanh approximation (Hendrycks & Gimpel 2016, sec. 2)."""
    return F.gelu(x, approximate="tanh")
# --8<-- [end:gelu_tanh]


# --8<-- [start:feed_forward]
class FeedForward(nn.Module):
    """down(act(up(x))), with biases (Vaswani et al. 2017, sec. 3.3): ReLU and
    d_ff = 4 d_model in 2017; GPT-2 uses `gelu_tanh`."""

    def __init__(self, *, d_model, d_ff, activation=F.relu):
        super().__init__()
        self.up_proj = nn.Linear(d_model, d_ff)
        self.down_proj = nn.Linear(d_ff, d_model)
        self.activation = activation

    def forward(self, x):
        return self.down_proj(self.activation(self.up_proj(x)))
# --8<-- [end:feed_forward]


# --8<-- [start:swiglu]
class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)), no biases (Shazeer 2020, eq. 6; Llama): the gate
    decides, unit by unit, how much of up(x) passes."""

    def __init__(self, *, d_model, d_ff):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
# --8<-- [end:swiglu]
