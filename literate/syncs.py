"""Counting host syncs: the calls that read a tensor's value into Python.

`bool(t)`, `t.item()`, `t.tolist()`, `int(t)`, `float(t)` and using a tensor as an index
make the host wait until the device has computed `t` (a synchronisation, costly on a GPU)
and stop `torch.compile(fullgraph=True)` from capturing the graph. PyTorch lets a
`TorchFunctionMode` see every call on a tensor, so the reads can be counted; the chapters
and tests count them to prove where the checks that read values are, and that layers
make none.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor
from torch.overrides import TorchFunctionMode

__all__ = ["HOST_READS", "HostReads", "host_reads"]


# --8<-- [start:host_reads]
# Each turns a tensor's value into a Python object: the host waits for the device.
HOST_READS = {Tensor.__bool__, Tensor.item, Tensor.tolist, Tensor.__int__,
              Tensor.__float__, Tensor.__index__}


class HostReads(TorchFunctionMode):
    """Inside `with HostReads() as reads:`, records every call that reads a tensor's
    value into Python (`reads.calls`, their names in order)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in HOST_READS:
            self.calls.append(func.__name__)
        return func(*args, **(kwargs or {}))


def host_reads(function: Callable[..., object], *args: object,
               **kwargs: object) -> int:
    """How many tensor values one call of `function(*args, **kwargs)` reads."""
    with HostReads() as reads:
        function(*args, **kwargs)
    return len(reads.calls)
# --8<-- [end:host_reads]
