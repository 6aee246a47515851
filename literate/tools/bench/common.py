"""What every benchmark row uses: the largest difference of two outputs, and a forward
(or forward and backward) as a call with no arguments, for `measure`."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


def max_diff(a: object, b: object) -> float:
    a = a[0] if isinstance(a, tuple) else a
    b = b[0] if isinstance(b, tuple) else b
    return (a.float() - b.float()).abs().max().item()


def fwd(module: nn.Module, *args, **kwargs) -> Callable[[], object]:
    def run():
        with torch.no_grad():
            return module(*args, **kwargs)

    return run


def fwd_bwd(
    module: nn.Module, x: torch.Tensor, grad: torch.Tensor, **kwargs
) -> Callable[[], object]:
    def run():
        out = module(x, **kwargs)
        out = out[0] if isinstance(out, tuple) else out
        out.backward(grad)
        return out

    return run
