"""PyTorch's twins of the 2017 layers, and what they (and the 2017 constructors) refuse.

A twin is only a reference if it computes what our layer computes. So `torch_twins`
refuses, naming the part, every layer PyTorch's `nn.TransformerEncoderLayer` /
`nn.TransformerDecoderLayer` cannot hold: GQA/MQA, RoPE, missing biases, an FFN that is
not a ReLU DenseFFN, a norm that is not LayerNorm, norms with different eps. The 2017
constructors check their sizes and parts before any weight is allocated.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from literate.models.torch_twins import (
    torch_decoder_layer,
    torch_encoder_layer,
    twin_eps,
)
from literate.models.transformer2017 import EncoderDecoder
from literate.parts.blocks import (
    PostNormDecoderLayer,
    PostNormEncoderLayer,
    decoder_layer_2017,
    encoder_layer_2017,
)
from literate.parts.ffn import DenseFFN, GatedFFN
from literate.parts.multi_head import MultiHeadAttention
from literate.parts.norms import LayerNorm, RMSNorm

D, H, D_FF = 16, 4, 32


def encoder(
    *, attn=None, ffn=None, self_attn_norm=None, ffn_norm=None
) -> PostNormEncoderLayer:
    return PostNormEncoderLayer(
        attn or MultiHeadAttention(D, H, bias=True),
        ffn or DenseFFN(D, D_FF, F.relu, bias=True),
        self_attn_norm or LayerNorm(D),
        ffn_norm or LayerNorm(D),
    )


def decoder(*, self_attn=None, cross_attn=None, ffn_norm=None) -> PostNormDecoderLayer:
    return PostNormDecoderLayer(
        self_attn or MultiHeadAttention(D, H, bias=True),
        cross_attn or MultiHeadAttention(D, H, bias=True),
        DenseFFN(D, D_FF, F.relu, bias=True),
        LayerNorm(D),
        LayerNorm(D),
        ffn_norm or LayerNorm(D),
    )


def test_the_twins_compute_what_our_layers_compute():
    torch.manual_seed(0)
    enc = encoder_layer_2017(D, H, D_FF, dropout=0.0, eps=1e-6).double()
    dec = decoder_layer_2017(D, H, D_FF, dropout=0.0, eps=1e-6).double()
    x, memory = (
        torch.randn(2, 5, D, dtype=torch.float64),
        torch.randn(2, 7, D, dtype=torch.float64),
    )
    valid = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    theirs_enc, theirs_dec = torch_encoder_layer(enc), torch_decoder_layer(dec)
    assert theirs_enc.norm1.eps == theirs_dec.norm3.eps == 1e-6 == twin_eps(enc)
    causal = torch.triu(
        torch.ones(5, 5, dtype=torch.bool), diagonal=1
    )  # True = blocked
    with torch.no_grad():
        torch.testing.assert_close(
            enc(memory, key_valid=valid),
            theirs_enc(memory, src_key_padding_mask=~valid),
            atol=1e-12,
            rtol=0,
        )
        torch.testing.assert_close(
            dec(x, memory, memory_valid=valid),
            theirs_dec(x, memory, tgt_mask=causal, memory_key_padding_mask=~valid),
            atol=1e-12,
            rtol=0,
        )


def test_relu_as_a_module_or_torch_function_is_mirrored():
    for relu in (torch.relu, nn.ReLU()):
        layer = encoder(ffn=DenseFFN(D, D_FF, relu, bias=True))
        assert isinstance(torch_encoder_layer(layer), nn.TransformerEncoderLayer)


@pytest.mark.parametrize(
    "parts, error, message",
    [
        (
            {"attn": MultiHeadAttention(D, H, 2, bias=True)},
            ValueError,
            r"^self_attn has n_kv_heads=2 != n_heads=4: nn\.MultiheadAttention has no GQA or MQA$",
        ),
        (
            {"attn": MultiHeadAttention(D, H, 1, bias=True)},
            ValueError,
            r"^self_attn has n_kv_heads=1",
        ),
        (
            {"attn": MultiHeadAttention(D, H, bias=True, rope=True)},
            ValueError,
            r"^self_attn uses RoPE: nn\.MultiheadAttention rotates nothing$",
        ),
        (
            {"attn": MultiHeadAttention(D, H, bias=False)},
            ValueError,
            r"^self_attn has no biases: the 2017 twin has them everywhere$",
        ),
        (
            {"ffn": DenseFFN(D, D_FF, F.gelu, bias=True)},
            ValueError,
            r"^ffn's activation must be ReLU \(F\.relu\), got gelu$",
        ),
        (
            {"ffn": DenseFFN(D, D_FF, F.relu, bias=False)},
            ValueError,
            r"^ffn has no biases: the 2017 twin has them everywhere$",
        ),
        (
            {"ffn": GatedFFN(D, D_FF, F.relu, bias=True)},
            TypeError,
            r"^ffn must be a DenseFFN, got GatedFFN$",
        ),
        (
            {"ffn_norm": RMSNorm(D)},
            TypeError,
            r"^ffn_norm must be a LayerNorm, got RMSNorm$",
        ),
        (
            {"ffn_norm": LayerNorm(D, eps=1e-6)},
            ValueError,
            (
                r"^the norms have different eps \{'self_attn_norm': 1e-05, 'ffn_norm': 1e-06\}: PyTorch's layer has one "
                r"layer_norm_eps$"
            ),
        ),
    ],
)
def test_the_encoder_twin_refuses_what_it_cannot_mirror(parts, error, message):
    layer = encoder(**parts)
    with pytest.raises(error, match=message):
        torch_encoder_layer(layer)


@pytest.mark.parametrize(
    "parts, message",
    [
        (
            {"cross_attn": MultiHeadAttention(D, H, 2, bias=True)},
            r"^cross_attn has n_kv_heads=2",
        ),
        (
            {"cross_attn": MultiHeadAttention(D, H, bias=False)},
            r"^cross_attn has no biases",
        ),
        (
            {"self_attn": MultiHeadAttention(D, H, bias=True, rope=True)},
            r"^self_attn uses RoPE",
        ),
        (
            {"ffn_norm": LayerNorm(D, eps=1e-6)},
            r"^the norms have different eps .*'ffn_norm': 1e-06",
        ),
    ],
)
def test_the_decoder_twin_refuses_what_it_cannot_mirror(parts, message):
    with pytest.raises(ValueError, match=message):
        torch_decoder_layer(decoder(**parts))


def test_a_twin_of_the_wrong_layer_is_refused():
    with pytest.raises(
        TypeError,
        match=r"^ours must be a PostNormEncoderLayer, got PostNormDecoderLayer$",
    ):
        torch_encoder_layer(decoder())
    with pytest.raises(
        TypeError,
        match=r"^ours must be a PostNormDecoderLayer, got PostNormEncoderLayer$",
    ):
        torch_decoder_layer(encoder())


def test_a_refused_layer_is_refused_before_anything_is_built(monkeypatch):
    built = []
    original = nn.TransformerEncoderLayer.__init__

    def spy(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(nn.TransformerEncoderLayer, "__init__", spy)
    with pytest.raises(ValueError, match="RoPE"):
        torch_encoder_layer(
            encoder(attn=MultiHeadAttention(D, H, bias=True, rope=True))
        )
    assert built == []


# The constructors that take parts, and the builders that make them.


def test_layers_check_the_type_and_width_of_each_part_naming_it():
    with pytest.raises(
        ValueError,
        match=r"must share one width d_model, got "
        r"\{'self_attn': 16, 'ffn': 16, 'self_attn_norm': 16, 'ffn_norm': 8\}$",
    ):
        encoder(ffn_norm=LayerNorm(8))
    with pytest.raises(ValueError, match=r"'cross_attn': 32"):
        decoder(cross_attn=MultiHeadAttention(32, H, bias=True))
    with pytest.raises(
        TypeError, match=r"^self_attn_norm must be an nn\.Module with an int d_model"
    ):
        encoder(self_attn_norm=nn.LayerNorm(D))  # no d_model: its width is not declared
    with pytest.raises(
        TypeError, match=r"^ffn must be an nn\.Module with an int d_model .*function$"
    ):
        encoder(ffn=F.relu)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"n_heads": True}, TypeError, r"^n_heads must be an int, got bool$"),
        ({"n_heads": 3}, ValueError, r"^d_model=16 must be divisible by n_heads=3"),
        ({"d_ff": True}, TypeError, r"^d_ff must be an int, got bool$"),
        ({"d_ff": 0}, ValueError, r"^d_ff must be >= 1, got 0$"),
        (
            {"dropout": True},
            TypeError,
            r"^dropout must be a real number in \[0, 1\), got bool$",
        ),
        ({"eps": True}, TypeError, r"^eps must be a real number, got bool$"),
    ],
)
def test_the_2017_builders_refuse_bad_sizes(kwargs, error, message):
    sizes = {"n_heads": H, "d_ff": D_FF} | {
        k: v for k, v in kwargs.items() if k in ("n_heads", "d_ff")
    }
    options = {k: v for k, v in kwargs.items() if k in ("dropout", "eps")}
    for builder in (encoder_layer_2017, decoder_layer_2017):
        with pytest.raises(error, match=message):
            builder(D, sizes["n_heads"], sizes["d_ff"], **options)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"n_heads": True}, TypeError, r"^n_heads must be an int, got bool$"),
        ({"n_heads": 3}, ValueError, r"^d_model=16 must be divisible by n_heads=3"),
        ({"d_ff": True}, TypeError, r"^d_ff must be an int, got bool$"),
        ({"d_ff": 2.0}, TypeError, r"^d_ff must be an int, got float$"),
        (
            {"dropout": True},
            TypeError,
            r"^dropout must be a real number in \[0, 1\), got bool$",
        ),
        ({"n_layers": True}, TypeError, r"^n_layers must be an int, got bool$"),
    ],
)
def test_the_model_checks_its_sizes_before_allocating_any_weight(
    kwargs, error, message, monkeypatch
):
    def no_weights(*args, **kwargs):
        raise AssertionError("a weight was allocated before the sizes were checked")

    monkeypatch.setattr(nn.Embedding, "__init__", no_weights)
    monkeypatch.setattr(nn.Linear, "__init__", no_weights)
    sizes = {"n_heads": H, "d_ff": D_FF, "n_layers": 1, "dropout": 0.1} | kwargs
    with pytest.raises(error, match=message):
        EncoderDecoder(
            13,
            D,
            sizes["n_heads"],
            sizes["d_ff"],
            sizes["n_layers"],
            dropout=sizes["dropout"],
            max_length=8,
        )


@pytest.mark.parametrize("twin_name", ["torch_encoder_layer", "torch_decoder_layer"])
def test_the_2017_self_check_compares_both_layers_with_their_twins(
    twin_name, monkeypatch
):
    """check_transformer2017 (run by transformer2017.py) passes as it is, and fails when
    either twin computes something else: a LayerNorm bias off by 1e-9 is enough."""
    import literate.tools.selfcheck as selfcheck

    selfcheck.check_transformer2017()
    make_twin = getattr(selfcheck, twin_name)

    def off_by_a_little(ours):
        theirs = make_twin(ours)
        with torch.no_grad():
            theirs.norm2.bias.add_(1e-9)
        return theirs

    monkeypatch.setattr(selfcheck, twin_name, off_by_a_little)
    with pytest.raises(AssertionError):
        selfcheck.check_transformer2017()
