"""Position-wise feed-forward networks: the half of a block that works on one token at a
time.

* `DenseFFN`: down(act(up(x))), two matrices (Vaswani et al. 2017, sec. 3.3: ReLU,
  d_ff = 4 d_model; GPT-2: GELU).
* `GatedFFN`: down(act(gate(x)) * up(x)), three matrices (Shazeer 2020): SiLU gives
  SwiGLU (PaLM, Llama), GELU gives GeGLU. With d_ff = 8/3 d_model it has the same number
  of parameters as a dense FFN with d_ff = 4 d_model.

The activation is passed in (a function), not chosen by a flag. Layer names follow
Hugging Face's Llama MLP (`gate_proj`, `up_proj`, `down_proj`), so weights load by name.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from literate.parts.checks import (
    boolean,
    features,
    positive_float,
    positive_int,
    weights_fit,
)

__all__ = ["DenseFFN", "GatedFFN", "gelu_tanh", "check_activation", "llama_ffn_width"]

# --8<-- [start:gelu_tanh]
# GPT-2's GELU is the tanh approximation (Hendrycks & Gimpel 2016, sec. 2).
gelu_tanh = partial(F.gelu, approximate="tanh")
# --8<-- [end:gelu_tanh]


# --8<-- [start:check_activation]
def check_activation(activation: object) -> Callable[[Tensor], Tensor]:
    """`activation` if it can be called, as a function such as `F.relu` can."""
    if not callable(activation):
        raise TypeError(f"activation must be a function such as F.relu, "
                        f"got {type(activation).__name__}")
    return activation  # type: ignore[return-value]
# --8<-- [end:check_activation]


# --8<-- [start:dense_ffn]
class DenseFFN(nn.Module):
    """down(act(up(x))): d_model -> d_ff -> d_model, applied to every position alike."""

    def __init__(self, d_model: int, d_ff: int, activation: Callable[[Tensor], Tensor],
                 *, bias: bool = True) -> None:
        super().__init__()
        self.d_model = positive_int("d_model", d_model)
        self.d_ff = positive_int("d_ff", d_ff)
        self.activation = check_activation(activation)
        bias = boolean("bias", bias)
        self.up_proj = nn.Linear(self.d_model, self.d_ff, bias=bias)
        self.down_proj = nn.Linear(self.d_ff, self.d_model, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        weights_fit(self)  # from outside: a replaced weight must keep its shape
        x = features("x", x, width=self.d_model, like=self.down_proj.weight)
        return self.down_proj(self.activation(self.up_proj(x)))
# --8<-- [end:dense_ffn]


# --8<-- [start:gated_ffn]
class GatedFFN(nn.Module):
    """down(act(gate(x)) * up(x)): the gate decides, per hidden unit, how much of up(x)
    passes. SwiGLU with `activation=F.silu` (Shazeer 2020, eq. 6)."""

    def __init__(self, d_model: int, d_ff: int, activation: Callable[[Tensor], Tensor],
                 *, bias: bool = False) -> None:
        super().__init__()
        self.d_model = positive_int("d_model", d_model)
        self.d_ff = positive_int("d_ff", d_ff)
        self.activation = check_activation(activation)
        bias = boolean("bias", bias)
        self.gate_proj = nn.Linear(self.d_model, self.d_ff, bias=bias)
        self.up_proj = nn.Linear(self.d_model, self.d_ff, bias=bias)
        self.down_proj = nn.Linear(self.d_ff, self.d_model, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        weights_fit(self)  # from outside: a replaced weight must keep its shape
        x = features("x", x, width=self.d_model, like=self.down_proj.weight)
        return self.down_proj(self.activation(self.gate_proj(x)) * self.up_proj(x))
# --8<-- [end:gated_ffn]


# --8<-- [start:llama_ffn_width]
def llama_ffn_width(d_model: int, *, multiple_of: int = 256,
                    ffn_dim_multiplier: float | None = None) -> int:
    """The hidden width of Llama's SwiGLU (Meta's reference code): 2/3 of 4 d, so that
    three matrices hold as many numbers as a dense FFN's two of 4 d, times an optional
    multiplier, rounded up to a multiple of `multiple_of`."""
    multiple_of = positive_int("multiple_of", multiple_of)
    hidden = int(2 * 4 * positive_int("d_model", d_model) / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(positive_float("ffn_dim_multiplier", ffn_dim_multiplier) * hidden)
    return multiple_of * -(-hidden // multiple_of)  # ceil(hidden / multiple_of)
# --8<-- [end:llama_ffn_width]
