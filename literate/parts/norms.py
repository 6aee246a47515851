"""Normalisation layers: the formula written out, and the module that runs it fast.

* `LayerNorm` (Ba et al. 2016): subtract the mean of the features, divide by their
  standard deviation, then scale and shift by learned vectors. The 2017 Transformer and
  GPT-2 use it.
* `RMSNorm` (Zhang & Sennrich 2019): no mean, no shift; divide by the root mean square
  and scale. Llama and its descendants use it.

Both normalise over the last axis only (the model width); every position is normalised
on its own. `layer_norm` and `rms_norm` are the formulas, line by line; the modules call
PyTorch's fused kernels (`F.layer_norm`, `F.rms_norm`), which compute the same thing in
one pass (the chapters prove the two equal).
"""

from __future__ import annotations

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

__all__ = ["LayerNorm", "RMSNorm", "ZeroCentredRMSNorm", "agree", "layer_norm",
           "rms_norm"]


# --8<-- [start:layer_norm]
def agree(name: str, x: object, gains: str, d: int) -> None:
    """A width mismatch between an input and the gains passed with it, named on both
    sides (either may be the wrong one)."""
    if isinstance(x, Tensor) and x.ndim and x.shape[-1] != d:
        raise ValueError(f"{name} has last axis {x.shape[-1]} and {gains} {d} entries: "
                         "one gain per feature, they must agree")


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias, over the last axis.

    The variance is the biased one (divide by d, not d - 1), as in Ba et al. (2016) and
    `torch.nn.functional.layer_norm`. Half-precision input is normalised in float32, as
    PyTorch does (its squares would overflow float16 from |x| ~ 256), and cast back.
    """
    d = float_tensor("weight", weight, ndim=1).shape[0]
    agree("x", x, "weight", d)
    x = features("x", x, width=d, like=weight)
    if features("bias", bias, width=d, like=weight).shape != weight.shape:
        raise ValueError(f"bias must be [{d}] like weight, got {tuple(bias.shape)}")
    eps = positive_float("eps", eps)
    h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    mean = h.mean(dim=-1, keepdim=True)  # [..., 1]
    var = ((h - mean) ** 2).mean(dim=-1, keepdim=True)  # [..., 1]
    return ((h - mean) / torch.sqrt(var + eps) * weight + bias).to(x.dtype)
# --8<-- [end:layer_norm]


# --8<-- [start:rms_norm]
def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * weight, over the last axis. No mean is subtracted
    and there is no bias (Zhang & Sennrich 2019, eq. 4, which has no eps: it sits
    inside the root, as in Llama's code and PyTorch's). Half precision is normalised
    in float32 and cast back, as in PyTorch."""
    d = float_tensor("weight", weight, ndim=1).shape[0]
    agree("x", x, "weight", d)
    x = features("x", x, width=d, like=weight)
    eps = positive_float("eps", eps)
    h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    ms = (h * h).mean(dim=-1, keepdim=True)  # [..., 1]
    return (h * torch.rsqrt(ms + eps) * weight).to(x.dtype)
# --8<-- [end:rms_norm]


# --8<-- [start:layer_norm_module]
class LayerNorm(nn.Module):
    """`layer_norm` as a layer, with a learned gain (ones) and bias (zeros); it runs
    PyTorch's fused `F.layer_norm`, proven equal to the formula. `eps` defaults to 1e-5
    as in `torch.nn.LayerNorm` (GPT-2 uses 1e-5 too); `bias=False` drops the shift."""

    def __init__(self, d_model: int, *, eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        self.d_model = positive_int("d_model", d_model)
        self.eps = positive_float("eps", eps)
        self.weight = nn.Parameter(torch.ones(self.d_model))
        # Cohere's LayerNorm has no bias: the mean is still taken out.
        self.bias = nn.Parameter(torch.zeros(self.d_model)) if boolean("bias", bias) \
            else None

    def forward(self, x: Tensor) -> Tensor:
        x = features("x", x, width=self.d_model, like=self.weight)
        return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)
# --8<-- [end:layer_norm_module]


# --8<-- [start:rms_norm_module]
class RMSNorm(nn.Module):
    """`rms_norm` as a layer, with a learned gain (ones); it runs PyTorch's fused
    `F.rms_norm`, as `torch.nn.RMSNorm` does (bit for bit the same). Unlike LayerNorm:
    no mean, no bias. eps is added to the mean square, inside the square root. `eps`
    defaults to 1e-6, as in Hugging Face's LlamaConfig (Llama 2 and 3 set 1e-5).

    Hugging Face's LlamaRMSNorm computes in float32 whatever the input (float64 too),
    and in half precision rounds the normalised x before multiplying by the gain: one
    rounding more than here, up to one unit in the last place apart."""

    def __init__(self, d_model: int, *, eps: float = 1e-6) -> None:
        super().__init__()
        self.d_model = positive_int("d_model", d_model)
        self.eps = positive_float("eps", eps)
        self.weight = nn.Parameter(torch.ones(self.d_model))

    def forward(self, x: Tensor) -> Tensor:
        x = features("x", x, width=self.d_model, like=self.weight)
        return F.rms_norm(x, (self.d_model,), self.weight, self.eps)
# --8<-- [end:rms_norm_module]


# --8<-- [start:zero_centred_rms_norm]
class ZeroCentredRMSNorm(nn.Module):
    """RMSNorm whose gain is stored as 1 + w, with w initialised to zeros (Gemma): at
    initialisation the layer is the plain normalisation (and, our reading, weight
    decay then pulls the gain towards 1, not 0). Computed in float32 or wider, 1 + w
    included: in bfloat16 (8 significant bits), 1 + w rounds back to 1 for every w in
    [-2^-9, 2^-8], and the learned w is lost. Hugging Face's Gemma3RMSNorm computes
    in float32 (float64 too).
    """

    def __init__(self, d_model: int, *, eps: float = 1e-6) -> None:
        super().__init__()
        self.d_model = positive_int("d_model", d_model)
        self.eps = positive_float("eps", eps)
        self.weight = nn.Parameter(torch.zeros(self.d_model))  # the gain is 1 + weight

    def forward(self, x: Tensor) -> Tensor:
        x = features("x", x, width=self.d_model, like=self.weight)
        dtype = torch.promote_types(x.dtype, torch.float32)  # at least float32
        gain = 1.0 + self.weight.to(dtype)
        return F.rms_norm(x.to(dtype), (self.d_model,), gain, self.eps).to(x.dtype)
# --8<-- [end:zero_centred_rms_norm]
