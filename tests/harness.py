"""What the comparisons with Hugging Face share: tolerances, HF's additive causal mask,
and the patch that makes HF's float32 steps run in the input dtype.

Tolerances. In float64 both sides compute the same formula to ~1e-15 relative: a test
states its own F64 tolerance (1e-12 or 1e-10 for deeper stacks). Where Hugging Face
computes in float32 whatever the input (its RMSNorms upcast and its eager softmax is
`dtype=torch.float32`), the difference is float32 rounding: `F32_BOUND` ulps of float32
(2**-23) times the largest entry compared, 16 for a block or two (a few float32 steps
in a row), more for deeper stacks (each test says why). `assert_float32_limited`
checks that bound and also that the float32 steps are really in the path (a difference
above 1e-12): a comparison that passes only because both sides ran float64 would prove
nothing about HF's float32 path.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from types import ModuleType

import torch
from torch import Tensor

from literate.parts.attention import causal_allowed

F32_BOUND = 16 * 2.0**-23  # times the largest |entry| of the tensor compared


def assert_float32_limited(
    labels: Sequence[str],
    ours: Sequence[Tensor],
    theirs: Sequence[Tensor],
    *,
    bound: float = F32_BOUND,
) -> float:
    """Each pair differs by at most `bound` times the reference's largest |entry|, and
    the largest difference is above float64 rounding. Returns that largest difference."""
    diffs = {}
    for name, a, b in zip(labels, ours, theirs, strict=True):
        diffs[name] = diff = (a - b).abs().max().item()
        limit = bound * b.abs().max().item()
        assert diff <= limit, f"{name}: max |diff| {diff:.3g} > {limit:.3g}"
    assert max(diffs.values()) > 1e-12  # HF's float32 steps are really in the path
    return max(diffs.values())


def hf_causal_mask(t: int) -> Tensor:
    """An eager HF attention with attention_mask=None attends everywhere: the causal
    mask in HF's additive form (0 = may attend, -inf = blocked), [1, 1, T, T]."""
    blocked = ~causal_allowed(t, t)
    return torch.zeros(t, t, dtype=torch.float64).masked_fill(blocked, -math.inf)[
        None, None
    ]


@contextlib.contextmanager
def hf_in_input_dtype(module: torch.nn.Module, modeling: ModuleType) -> Iterator[None]:
    """Test-harness patch: every RMSNorm of `modeling` (an HF modeling module, e.g.
    `transformers.models.llama.modeling_llama`) inside `module` computes its own formula
    in the input dtype (HF: float32), and `modeling`'s eager attention takes its softmax
    in the input dtype (HF: float32). Undone on exit."""
    norms = [
        m
        for m in module.modules()
        if type(m).__module__ == modeling.__name__
        and type(m).__name__.endswith("RMSNorm")
    ]
    if not norms:
        raise ValueError(f"no RMSNorm of {modeling.__name__} in the module")
    for m in norms:

        def forward(x, m=m):
            return m.weight * (
                x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + m.variance_epsilon)
            )

        m.forward = forward
    eager = modeling.eager_attention_forward

    def eager_in_input_dtype(
        module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs
    ):
        key = modeling.repeat_kv(key, module.num_key_value_groups)
        value = modeling.repeat_kv(value, module.num_key_value_groups)
        scores = query @ key.transpose(2, 3) * scaling
        if attention_mask is not None:
            scores = scores + attention_mask
        weights = scores.softmax(dim=-1)  # HF: softmax(..., dtype=torch.float32)
        return (weights @ value).transpose(1, 2).contiguous(), weights

    modeling.eager_attention_forward = eager_in_input_dtype
    try:
        yield
    finally:
        modeling.eager_attention_forward = eager
        for m in norms:
            del m.forward
