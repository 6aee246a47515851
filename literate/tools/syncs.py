"""Counting host syncs: the calls that read a tensor's value into Python.

`bool(t)`, `t.item()`, `t.tolist()`, `int(t)`, `float(t)`, using a tensor as an index,
`t.cpu()`, and ops whose output size depends on values (`nonzero`, `masked_select`,
`unique`, a boolean mask as an index) make the host wait until the device has computed
`t` (a synchronisation, costly on a GPU) and stop `torch.compile(fullgraph=True)` from
capturing the graph. On the CPU they cost nothing, so they are counted, not timed. PyTorch lets a
`TorchFunctionMode` see every call on a tensor, so the reads can be counted; the chapters
and tests count them to prove where the checks that read values are, and that layers
make none.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

__all__ = ["HOST_READS", "reads_values", "HostReads", "host_reads"]


# --8<-- [start:host_reads]
# Each turns a tensor's value into a Python object, or makes a tensor whose size depends
# on values (nonzero, masked_select, a boolean mask as an index): the host waits.
HOST_READS = {Tensor.__bool__, Tensor.item, Tensor.tolist, Tensor.__int__,
              Tensor.__float__, Tensor.__index__, Tensor.cpu, Tensor.numpy,
              Tensor.nonzero, torch.nonzero, Tensor.argwhere, torch.argwhere,
              Tensor.masked_select, torch.masked_select, Tensor.unique, torch.unique,
              Tensor.bincount, torch.bincount}
REPEAT_INTERLEAVE = {torch.repeat_interleave, Tensor.repeat_interleave}


def reads_values(func: Callable[..., object], args: tuple,
                 kwargs: dict | None = None) -> bool:
    """Whether a call reads values into the host: one of HOST_READS; `torch.where(c)`
    with one argument (a `nonzero`); `repeat_interleave` with a tensor of repeats and
    no `output_size`; or indexing with a boolean tensor (the result's size is the
    number of True values)."""
    kwargs = kwargs or {}
    if func in HOST_READS:
        return True
    if func is torch.where:
        return len(args) + len(kwargs) == 1
    if func in REPEAT_INTERLEAVE:  # torch.repeat_interleave(r) repeats arange by r
        repeats = args[1] if len(args) > 1 else kwargs.get("repeats", args[0])
        return isinstance(repeats, Tensor) and "output_size" not in kwargs
    if func is not Tensor.__getitem__ or len(args) < 2:
        return False
    index = args[1] if isinstance(args[1], tuple) else (args[1],)
    return any(isinstance(i, Tensor) and i.dtype == torch.bool for i in index)


class HostReads(TorchFunctionMode):
    """Inside `with HostReads() as reads:`, records every call that reads a tensor's
    value into Python (`reads.calls`, their names in order)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if reads_values(func, args, kwargs):
            self.calls.append(func.__name__)
        return func(*args, **(kwargs or {}))


def host_reads(function: Callable[..., object], *args: object,
               **kwargs: object) -> int:
    """How many tensor values one call of `function(*args, **kwargs)` reads."""
    with HostReads() as reads:
        function(*args, **kwargs)
    return len(reads.calls)
# --8<-- [end:host_reads]
