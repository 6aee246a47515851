"""LayerNorm and RMSNorm: the formulas written out (`layer_norm`, `rms_norm`) equal PyTorch's
kernels, which the modules call; both validate their input alike and read no tensor value."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from literate.numbers.golden import reference
from literate.parts.norms import LayerNorm, RMSNorm, layer_norm, rms_norm
from literate.tools.syncs import HostReads as HostSyncs

F64 = torch.float64
TINY_EPS = (
    1e-300  # eps must be > 0; var + 1e-300 == var in float64 for any var >= 1e-284
)


def rand(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=F64)


def test_layer_norm_matches_the_reference_example():
    ref = reference()["layer_norm"]
    x = torch.tensor(ref["input"], dtype=F64)
    ones, zeros = torch.ones(4, dtype=F64), torch.zeros(4, dtype=F64)
    out = layer_norm(x, ones, zeros, eps=TINY_EPS)  # the reference has no eps
    torch.testing.assert_close(
        out, torch.tensor(ref["normalized"], dtype=F64), atol=1e-12, rtol=0
    )
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
    for ga, gb in zip(
        _grads(a, probe, (x, ours.weight, ours.bias)),
        _grads(b, probe, (x, theirs.weight, theirs.bias)),
    ):
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
    for ga, gb in zip(
        _grads(a, probe, (x, ours.weight)), _grads(b, probe, (x, theirs.weight))
    ):
        torch.testing.assert_close(ga, gb, atol=1e-12, rtol=0)


def test_rms_norm_differs_from_layer_norm_exactly_by_the_mean():
    x = rand(4, 10) + 5.0  # a large mean
    ones = torch.ones(10, dtype=F64)
    centred = x - x.mean(-1, keepdim=True)
    torch.testing.assert_close(
        rms_norm(centred, ones, TINY_EPS),
        layer_norm(x, ones, ones * 0, TINY_EPS),
        atol=1e-12,
        rtol=0,
    )
    assert not torch.allclose(
        rms_norm(x, ones, TINY_EPS), layer_norm(x, ones, ones * 0, TINY_EPS), atol=1e-2
    )


@pytest.mark.parametrize(
    "eps", [1e-5, 0.5]
)  # a large eps shows that it sits inside the root
def test_the_formulas_equal_torch_kernels_and_the_modules_forward_and_backward(eps):
    x = (rand(3, 7, 16) * 2 + 0.5).requires_grad_()
    w, b = rand(16, seed=1).requires_grad_(), rand(16, seed=2).requires_grad_()
    probe = rand(3, 7, 16, seed=3)
    ours, theirs = layer_norm(x, w, b, eps), F.layer_norm(x, (16,), w, b, eps)
    torch.testing.assert_close(ours, theirs, atol=1e-12, rtol=0)
    for ga, gb in zip(_grads(ours, probe, (x, w, b)), _grads(theirs, probe, (x, w, b))):
        torch.testing.assert_close(ga, gb, atol=1e-12, rtol=0)
    ours, theirs = rms_norm(x, w, eps), F.rms_norm(x, (16,), w, eps)
    torch.testing.assert_close(ours, theirs, atol=1e-12, rtol=0)
    for ga, gb in zip(_grads(ours, probe, (x, w)), _grads(theirs, probe, (x, w))):
        torch.testing.assert_close(ga, gb, atol=1e-12, rtol=0)

    ln, rms = LayerNorm(16, eps=eps).double(), RMSNorm(16, eps=eps).double()
    with torch.no_grad():
        ln.weight.copy_(w), ln.bias.copy_(b), rms.weight.copy_(w)
    torch.testing.assert_close(ln(x), layer_norm(x, w, b, eps), atol=1e-12, rtol=0)
    torch.testing.assert_close(rms(x), rms_norm(x, w, eps), atol=1e-12, rtol=0)


def test_the_modules_call_the_fused_kernels(monkeypatch):
    """What the module docstrings promise: F.layer_norm / F.rms_norm, not the formula."""
    import literate.parts.norms as norms

    calls = []
    monkeypatch.setattr(
        norms.F, "layer_norm", lambda *a, **k: calls.append("layer_norm") or a[0]
    )
    monkeypatch.setattr(
        norms.F, "rms_norm", lambda *a, **k: calls.append("rms_norm") or a[0]
    )
    x = torch.ones(2, 4)
    LayerNorm(4)(x), RMSNorm(4)(x)
    assert calls == ["layer_norm", "rms_norm"]


# --------------------------------------------------------------------------------------
# Validation: the functional forms refuse what the modules refuse, naming the argument
# --------------------------------------------------------------------------------------

FORMS = {
    "LayerNorm": lambda x, w, eps=1e-5: (
        LayerNorm(4, eps=eps).to(w.dtype).to(w.device)(x)
    ),
    "RMSNorm": lambda x, w, eps=1e-6: RMSNorm(4, eps=eps).to(w.dtype).to(w.device)(x),
    "layer_norm": lambda x, w, eps=1e-5: layer_norm(x, w, torch.zeros_like(w), eps),
    "rms_norm": lambda x, w, eps=1e-6: rms_norm(x, w, eps),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_bad_input_is_refused_alike_by_formulas_and_modules(form):
    norm = FORMS[form]
    w = torch.ones(4)
    cases = [
        (
            torch.randn(2, 5),
            w,
            ValueError,
            # a formula is given its gains: either side may be wrong, both are named
            r"^x has last axis 5 and weight 4 entries: one gain per feature, they must "
            r"agree$"
            if form in ("layer_norm", "rms_norm")
            else r"^x must have last axis 4, got \(2, 5\)$",
        ),
        (torch.tensor(1.0), w, ValueError, r"^x must have last axis 4, got \(\)$"),
        (
            torch.ones(2, 4, dtype=torch.long),
            w,
            TypeError,
            r"^x must be a floating-point tensor, got torch\.int64$",
        ),
        ([[1.0] * 4], w, TypeError, r"^x must be a floating-point tensor, got list$"),
        (
            torch.ones(2, 4, dtype=torch.float16),
            w,
            TypeError,
            r"^x is torch\.float16, the layer's parameters torch\.float32$",
        ),
        (
            torch.ones(2, 4),
            w.to("meta"),
            ValueError,
            r"^x is on cpu, the layer on meta$",
        ),
    ]
    for x, weight, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            norm(x, weight)
    for eps, error, pattern in [
        (0.0, ValueError, r"^eps must be finite and > 0, got 0\.0$"),
        (-1e-5, ValueError, r"^eps must be finite and > 0, got -1e-05$"),
        (math.nan, ValueError, r"^eps must be finite and > 0, got nan$"),
        (True, TypeError, r"^eps must be a real number, got bool$"),
        ("1e-5", TypeError, r"^eps must be a real number, got str$"),
    ]:
        with pytest.raises(error, match=pattern):
            norm(torch.ones(2, 4), w, eps)


@pytest.mark.parametrize("cls", [LayerNorm, RMSNorm])
def test_constructor_refuses_bad_sizes(cls):
    with pytest.raises(TypeError, match=r"^d_model must be an int, got bool$"):
        cls(True)
    with pytest.raises(ValueError, match=r"^d_model must be >= 1, got 0$"):
        cls(0)
    with pytest.raises(ValueError, match=r"^eps must be finite and > 0, got 0\.0$"):
        cls(4, eps=0.0)


@pytest.mark.parametrize("form", list(FORMS))
def test_nan_comes_out_as_nan_in_its_row_only_and_nothing_is_read(form):
    """Like PyTorch: a NaN input is not an error; it poisons its own row and no other."""
    x = rand(3, 4).float()
    x[1, 2] = math.nan
    with HostSyncs() as syncs:
        out = FORMS[form](x, torch.ones(4))
    assert syncs.calls == []
    assert torch.isnan(out[1]).all() and torch.isfinite(out[[0, 2]]).all()


def test_layer_norm_refuses_a_bias_that_is_not_one_value_per_feature():
    """BUG: `layer_norm` checks x against `weight` but never looks at `bias`: a bias of shape
    [1] (or [3, d]) broadcasts silently and the result is wrong without an error, where
    F.layer_norm (which the module calls) refuses it."""
    x, w = rand(3, 4), torch.ones(4, dtype=F64)
    with pytest.raises(RuntimeError, match="bias"):
        F.layer_norm(x, (4,), w, torch.zeros(1, dtype=F64))
    with pytest.raises(ValueError, match=r"^bias"):
        layer_norm(x, w, torch.zeros(1, dtype=F64), 1e-5)


# --------------------------------------------------------------------------------------
# Half precision: normalised in float32, returned in the input dtype
# --------------------------------------------------------------------------------------


def ulp(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Spacing of `dtype` floats around each float64 value of `x` (subnormals included)."""
    mantissa_bits = {torch.float16: 11, torch.bfloat16: 8}[dtype]
    _, exponent = torch.frexp(x.double())
    spacing = torch.ldexp(torch.ones_like(x, dtype=F64), exponent - mantissa_bits)
    return spacing.clamp_min(
        torch.finfo(dtype).smallest_normal * 2.0 ** (1 - mantissa_bits)
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    ("ours", "theirs"), [(LayerNorm, torch.nn.LayerNorm), (RMSNorm, torch.nn.RMSNorm)]
)
def test_half_precision_is_normalised_in_float32_like_torch(ours, theirs, dtype):
    """|x| ~ 300: its square overflows float16 (max 65504). Computed in the input dtype the
    norm would come out as zeros; PyTorch and ours normalise in float32 and cast back, so
    the two agree to the input dtype's rounding (one ulp: 2^-10 for float16, 2^-7 for bfloat16)."""
    x = (rand(3, 8) * 100 + 300).to(dtype)
    a_mod, b_mod = ours(8).to(dtype), theirs(8, eps=ours(8).eps).to(dtype)
    b_mod.load_state_dict(a_mod.state_dict())
    a, b = a_mod(x), b_mod(x)
    assert a.dtype == dtype and torch.isfinite(a).all() and a.abs().max() > 0.5
    ulp_1 = 2.0**-10 if dtype is torch.float16 else 2.0**-7
    torch.testing.assert_close(
        a.double(), b.double(), atol=2 * ulp_1 * b.double().abs().max().item(), rtol=0
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("form", ["layer_norm", "rms_norm"])
def test_half_precision_formulas_are_the_float64_answer_rounded_once(form, dtype):
    """Spread ~300: the squared deviations (up to ~1e6) overflow float16. In float32 the
    result is the float64 answer rounded once to `dtype`: within half an ulp plus 1e-5
    relative; computed in `dtype` itself it would be inf, NaN or zeros. The kernels agree."""
    x = (rand(4, 16) * 300).to(dtype)
    w, b = (rand(16, seed=1) * 0.5 + 1).to(dtype), (rand(16, seed=2) * 0.1).to(dtype)
    if form == "layer_norm":
        got, kernel = layer_norm(x, w, b, 1e-5), F.layer_norm(x, (16,), w, b, 1e-5)
        ref = F.layer_norm(x.double(), (16,), w.double(), b.double(), 1e-5)
    else:
        got, kernel = rms_norm(x, w, 1e-6), F.rms_norm(x, (16,), w, 1e-6)
        ref = F.rms_norm(x.double(), (16,), w.double(), 1e-6)
    assert got.dtype == dtype and torch.isfinite(got).all()
    err = (got.double() - ref).abs()
    bound = 0.5 * ulp(ref, dtype) + 1e-5 * ref.abs()
    assert torch.all(err <= bound), f"max excess {float((err - bound).max())}"
    assert (
        (got.double() - kernel.double()).abs() <= ulp(ref, dtype)
    ).all()  # at most one rounding apart
