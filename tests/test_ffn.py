"""Feed-forward networks: what they compute, parameter parity, and Hugging Face's Llama MLP."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from literate.parts.ffn import DenseFFN, GatedFFN, gelu_tanh


def rand(*shape, seed=0):
    return torch.randn(
        *shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )


def n_params(module):
    return sum(p.numel() for p in module.parameters())


def test_dense_ffn_is_the_two_layer_formula():
    ffn = DenseFFN(6, 24, F.relu).double()
    x = rand(2, 3, 6)
    expected = (
        F.relu(x @ ffn.up_proj.weight.T + ffn.up_proj.bias) @ ffn.down_proj.weight.T
        + ffn.down_proj.bias
    )
    torch.testing.assert_close(ffn(x), expected, atol=1e-12, rtol=0)


def test_gated_ffn_is_the_swiglu_formula():
    ffn = GatedFFN(6, 16, F.silu).double()
    x = rand(2, 3, 6)
    gate, up, down = ffn.gate_proj.weight, ffn.up_proj.weight, ffn.down_proj.weight
    expected = (F.silu(x @ gate.T) * (x @ up.T)) @ down.T
    torch.testing.assert_close(ffn(x), expected, atol=1e-12, rtol=0)


def test_parameter_parity_of_dense_4d_and_gated_8d_over_3():
    """Parameter parity: d=96, dense hidden 384 and gated hidden 256 both have 73,728 weights."""
    assert n_params(DenseFFN(96, 384, F.relu, bias=False)) == 73_728
    assert n_params(GatedFFN(96, 256, F.silu, bias=False)) == 73_728


def test_gelu_tanh_is_the_gpt2_approximation():
    x = torch.linspace(-5, 5, 101, dtype=torch.float64)
    expected = 0.5 * x * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (x + 0.044715 * x**3)))
    torch.testing.assert_close(gelu_tanh(x), expected, atol=1e-12, rtol=0)
    assert not torch.allclose(
        gelu_tanh(x), F.gelu(x), atol=1e-5
    )  # it is an approximation


def test_gated_ffn_equals_hugging_face_llama_mlp_by_state_dict():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaMLP

    config = LlamaConfig(
        hidden_size=8, intermediate_size=20, num_attention_heads=2, hidden_act="silu"
    )
    theirs = LlamaMLP(config).double()
    ours = GatedFFN(8, 20, F.silu).double()
    ours.load_state_dict(
        theirs.state_dict()
    )  # same names: gate_proj, up_proj, down_proj
    x = rand(2, 5, 8).requires_grad_()
    a, b = ours(x), theirs(x)
    torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    probe = rand(2, 5, 8, seed=1)
    ga = torch.autograd.grad((a * probe).sum(), (x, *ours.parameters()))
    gb = torch.autograd.grad((b * probe).sum(), (x, *theirs.parameters()))
    for u, v in zip(ga, gb):
        torch.testing.assert_close(u, v, atol=1e-12, rtol=0)


@pytest.mark.parametrize("cls", [DenseFFN, GatedFFN])
def test_bad_input_is_refused(cls):
    with pytest.raises(TypeError, match=r"^d_ff must be an int, got float$"):
        cls(4, 2.5, F.relu)
    with pytest.raises(ValueError, match=r"^d_model must be >= 1, got 0$"):
        cls(0, 8, F.relu)
    with pytest.raises(TypeError, match=r"^d_model must be an int, got bool$"):
        cls(True, 8, F.relu)
    with pytest.raises(
        TypeError, match=r"^activation must be a function such as F\.relu, got str$"
    ):
        cls(4, 8, "relu")
    for bias, kind in (("no", "str"), (1, "int"), (None, "NoneType")):
        with pytest.raises(TypeError, match=rf"^bias must be a bool, got {kind}$"):
            cls(4, 8, F.relu, bias=bias)
    ffn = cls(4, 8, F.relu)
    with pytest.raises(ValueError, match=r"^x must have last axis 4, got \(3, 5\)$"):
        ffn(torch.randn(3, 5))
    with pytest.raises(
        TypeError, match=r"^x must be a floating-point tensor, got torch\.int64$"
    ):
        ffn(torch.ones(3, 4, dtype=torch.int64))
    with pytest.raises(
        TypeError, match=r"^x is torch\.float64, the layer's parameters torch\.float32$"
    ):
        ffn(torch.ones(3, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^x is on cpu, the layer on meta$"):
        cls(4, 8, F.relu).to("meta")(torch.ones(3, 4))


def test_check_activation_returns_what_it_is_given():
    from literate.parts.ffn import check_activation

    assert (
        check_activation(F.silu) is F.silu and check_activation(gelu_tanh) is gelu_tanh
    )
    module = torch.nn.GELU()
    assert check_activation(module) is module  # any callable, a module too


@pytest.mark.parametrize("cls", [DenseFFN, GatedFFN])
def test_nan_stays_in_its_position_and_nothing_raises(cls):
    """Position-wise, and like PyTorch: a NaN token gives a NaN output row and leaves the
    other positions exactly as they were."""
    ffn = cls(6, 12, F.silu).double()
    x = rand(2, 3, 6)
    poisoned = x.clone()
    poisoned[1, 2, 0] = float("nan")
    out, clean = ffn(poisoned), ffn(x)
    assert torch.isnan(out[1, 2]).all()
    keep = torch.ones(2, 3, dtype=torch.bool)
    keep[1, 2] = False
    assert torch.equal(out[keep], clean[keep])
