"""What the tests share, isolated: each test starts with no pyplot figure open and the
process's torch settings as the suite set them (default dtype, intra-op threads, grad
mode, the global random state), whatever an earlier test or page in the same process
left behind, and leaves them so.

So the suite passes in one process (a plain `pytest`), in any file order, as it does
under xdist, where each worker starts fresh. A page's blocks (docs/) share one namespace
and may draw in one block what the next one saves, so this applies to tests/ only; a
test here still closes before it starts whatever a page left open.
"""

from __future__ import annotations

import sys

import pytest
import torch


def _close_figures() -> None:
    pyplot = sys.modules.get("matplotlib.pyplot")  # never import pyplot just for this
    if pyplot is not None:
        pyplot.close("all")


@pytest.fixture(autouse=True)
def isolated_process_state():
    _close_figures()
    dtype, threads = torch.get_default_dtype(), torch.get_num_threads()
    grad, rng = torch.is_grad_enabled(), torch.get_rng_state()
    yield
    _close_figures()
    torch.set_default_dtype(dtype)
    torch.set_num_threads(threads)
    torch.set_grad_enabled(grad)
    torch.set_rng_state(rng)
