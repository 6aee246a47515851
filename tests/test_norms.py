"""LayerNorm and RMSNorm written out, equal to PyTorch's own, forward and backward."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from literate.golden import reference
from literate.norms import LayerNorm, RMSNorm, layer_norm, rms_norm


def rand(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def test_layer_norm_matches_the_reference_example():
    ref = reference()["layer_norm"]
    x = torch.tensor(ref["input"], dtype=torch.float64)
    ones, zeros = torch.ones(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    out = layer_norm(x, ones, zeros, eps=0.0)
    torch.testing.assert_close(out, torch.tensor(ref["normalized"], dtype=torch.float64), atol=1e-12, rtol=0)
    assert x.mean().item() == ref["mean"]
    assert ((x - x.mean()) ** 2).mean().item() == ref["variance"]


def _grads(out, probe, tensors):
    return torch.autograd.grad((out * probe).sum(), tensors)


def test_layer_norm_module_equals_torch_forward_and_backward():
    x = (rand(3, 5, 8) * 3 + 1).requires_grad_()
    ours = LayerNorm(8).double()
    with torch.no_grad():
        ours.weight.copy_(rand(8, seed=1))
        ours.bias.copy_(rand(8, seed=2))
    theirs = torch.nn.LayerNorm(8, eps=1e-5).double()
    theirs.load_state_dict(ours.state_dict())
    a, b = ours(x), theirs(x)
    torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    probe = rand(3, 5, 8, seed=3)
    for ga, gb in zip(_grads(a, probe, (x, ours.weight, ours.bias)), _grads(b, probe, (x, theirs.weight, theirs.bias))):
        torch.testing.assert_close(ga, gb, atol=1e-12, rtol=0)


def test_rms_norm_module_equals_torch_forward_and_backward():
    x = (rand(2, 4, 6) * 2).requires_grad_()
    ours = RMSNorm(6, eps=1e-6).double()
    with torch.no_grad():
        ours.weight.copy_(rand(6, seed=4))
    theirs = torch.nn.RMSNorm(6, eps=1e-6).double()
    theirs.load_state_dict(ours.state_dict())
    a, b = ours(x), theirs(x)
    torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    probe = rand(2, 4, 6, seed=5)
    for ga, gb in zip(_grads(a, probe, (x, ours.weight)), _grads(b, probe, (x, theirs.weight))):
        torch.testing.assert_close(ga, gb, atol=1e-12, rtol=0)


def test_rms_norm_differs_from_layer_norm_exactly_by_the_mean():
    x = rand(4, 10) + 5.0  # a large mean
    ones = torch.ones(10, dtype=torch.float64)
    centred = x - x.mean(-1, keepdim=True)
    torch.testing.assert_close(rms_norm(centred, ones, 0.0), layer_norm(x, ones, ones * 0, 0.0), atol=1e-12, rtol=0)
    assert not torch.allclose(rms_norm(x, ones, 0.0), layer_norm(x, ones, ones * 0, 0.0), atol=1e-2)


def test_f_layer_norm_is_the_same_function():
    x = rand(7, 16)
    w, b = rand(16, seed=1), rand(16, seed=2)
    torch.testing.assert_close(layer_norm(x, w, b, 1e-5), F.layer_norm(x, (16,), w, b, 1e-5), atol=1e-12, rtol=0)


@pytest.mark.parametrize("cls", [LayerNorm, RMSNorm])
def test_bad_input_is_refused(cls):
    with pytest.raises(TypeError, match="^d_model must be an int"):
        cls(True)
    with pytest.raises(ValueError, match="^d_model must be >= 1"):
        cls(0)
    with pytest.raises(ValueError, match="^eps must be finite and > 0"):
        cls(4, eps=0.0)
    norm = cls(4)
    with pytest.raises(ValueError, match="^x must have last axis 4"):
        norm(torch.randn(2, 5))
    with pytest.raises(TypeError, match="^x must have a floating-point dtype"):
        norm(torch.ones(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="^x contains NaN"):
        norm(torch.full((2, 4), float("nan")))
    with pytest.raises(TypeError, match="^x has dtype torch.float16, the layer's parameters torch.float32"):
        norm(torch.ones(2, 4, dtype=torch.float16))
    with pytest.raises(ValueError, match="^x is on cpu, the layer's parameters on meta"):
        cls(4).to("meta")(torch.ones(2, 4))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("ours", "theirs"), [(LayerNorm, torch.nn.LayerNorm), (RMSNorm, torch.nn.RMSNorm)])
def test_half_precision_is_normalised_in_float32_like_torch(ours, theirs, dtype):
    """|x| ~ 300: its square overflows float16 (max 65504). Computed in the input dtype the
    norm would come out as zeros; PyTorch and ours normalise in float32 and cast back, so
    the two agree to the input dtype's rounding (one ulp: 2^-10 for float16, 2^-7 for bfloat16)."""
    x = (rand(3, 8) * 100 + 300).to(dtype)
    a_mod, b_mod = ours(8).to(dtype), theirs(8, eps=ours(8).eps).to(dtype)
    b_mod.load_state_dict(a_mod.state_dict())
    a, b = a_mod(x), b_mod(x)
    assert a.dtype == dtype and torch.isfinite(a).all() and a.abs().max() > 0.5
    ulp = 2.0**-10 if dtype is torch.float16 else 2.0**-7
    torch.testing.assert_close(a.double(), b.double(), atol=2 * ulp * b.double().abs().max().item(), rtol=0)
