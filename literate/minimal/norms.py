"""The two normalisations of the site, written out over the last axis (the model width):
LayerNorm (Ba et al. 2016; the 2017 Transformer, GPT-2) and RMSNorm (Zhang & Sennrich
2019; Llama and after). Both compute in the input's dtype.
"""

from __future__ import annotations

import torch
from torch import nn


# --8<-- [start:layer_norm]
class LayerNorm(nn.Module):
    """(x - mean) / sqrt(var + eps) * weight + bias, with the biased variance (divide
    by d, as torch.nn.LayerNorm does)."""

    def __init__(self, *, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)  # [..., 1]
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # [..., 1]
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
# --8<-- [end:layer_norm]


# --8<-- [start:rms_norm]
class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight. Unlike LayerNorm: no mean, no bias."""

    def __init__(self, *, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        ms = x.pow(2).mean(dim=-1, keepdim=True)  # [..., 1]: the mean square
        return x * torch.rsqrt(ms + self.eps) * self.weight
# --8<-- [end:rms_norm]
