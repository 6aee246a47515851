"""The 2017 post-norm layers equal PyTorch's own, forward and backward, and keep the seed's
contracts (D01, D02, D12, D14).

References: `nn.TransformerEncoderLayer` / `nn.TransformerDecoderLayer` (norm_first=False,
activation="relu", batch_first=True, dropout=0) and the stacks `nn.TransformerEncoder` /
`nn.TransformerDecoder`, holding copies of our weights (`literate.seq2seq.torch_*_layer`).

Tolerance: 1e-12 absolute in float64 everywhere. Both sides compute the same sums in
slightly different orders (PyTorch packs q, k, v into one matmul and runs its fused
attention), so bitwise equality is not expected; float64 rounding differences on these
O(1) values are ~1e-15, and 1e-12 leaves room for accumulation through two layers while
still catching any real difference (a wrong mask, norm or scale shows up at 1e-2 or more).
"""

from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn

from literate.attention import causal_allowed
from literate.blocks import (
    PostNormDecoderLayer,
    PostNormEncoderLayer,
    decoder_layer_2017,
    encoder_layer_2017,
    gpt2_block,
)
from literate.heads import MultiHeadAttention
from literate.torch_twins import torch_decoder_layer, torch_encoder_layer

TOL = {"atol": 1e-12, "rtol": 0.0}
D, H, D_FF = 16, 4, 32


def rand(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def randomise(module: nn.Module, seed: int) -> nn.Module:
    """Every parameter random, LayerNorm gains and biases included, so that no parameter
    is an identity that would hide a wrong mapping."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)
    return module


def encoder(seed=0) -> PostNormEncoderLayer:
    torch.manual_seed(seed)
    return randomise(encoder_layer_2017(D, H, D_FF, dropout=0.0).double(), seed)


def decoder(seed=0) -> PostNormDecoderLayer:
    torch.manual_seed(seed)
    return randomise(decoder_layer_2017(D, H, D_FF, dropout=0.0).double(), seed)


def ours_in_torch_layout(layer: nn.Module) -> dict[str, torch.Tensor]:
    """Our parameters' gradients, renamed and packed the way PyTorch's layers hold them."""
    out = {}
    attns = [("self_attn", layer.self_attn)]
    if isinstance(layer, PostNormDecoderLayer):
        attns.append(("multihead_attn", layer.cross_attn))
    for name, a in attns:
        out[f"{name}.in_proj_weight"] = torch.cat([a.q_proj.weight.grad, a.k_proj.weight.grad, a.v_proj.weight.grad])
        out[f"{name}.in_proj_bias"] = torch.cat([a.q_proj.bias.grad, a.k_proj.bias.grad, a.v_proj.bias.grad])
        out[f"{name}.out_proj.weight"] = a.o_proj.weight.grad
        out[f"{name}.out_proj.bias"] = a.o_proj.bias.grad
    out["linear1.weight"], out["linear1.bias"] = layer.ffn.up_proj.weight.grad, layer.ffn.up_proj.bias.grad
    out["linear2.weight"], out["linear2.bias"] = layer.ffn.down_proj.weight.grad, layer.ffn.down_proj.bias.grad
    for i in (1, 2, 3):
        if hasattr(layer, f"norm{i}"):
            out[f"norm{i}.weight"] = getattr(layer, f"norm{i}").weight.grad
            out[f"norm{i}.bias"] = getattr(layer, f"norm{i}").bias.grad
    return out


def assert_same_gradients(ours: nn.Module, theirs: nn.Module) -> float:
    mapped = ours_in_torch_layout(ours)
    names = {n for n, _ in theirs.named_parameters()}
    assert names == set(mapped), f"unmapped parameters: {names ^ set(mapped)}"
    worst = 0.0
    for name, p in theirs.named_parameters():
        assert mapped[name] is not None and p.grad is not None, name
        torch.testing.assert_close(mapped[name], p.grad, **TOL, msg=lambda m: f"{name}: {m}")
        worst = max(worst, (mapped[name] - p.grad).abs().max().item())
    return worst


# ---------------------------------------------------------------------------------------
# One layer each, forward and backward


def test_encoder_layer_equals_torch_with_source_padding():
    ours = encoder()
    theirs = torch_encoder_layer(ours)
    x = rand(3, 6, D, seed=1).requires_grad_()
    x_t = x.detach().clone().requires_grad_()
    valid = torch.tensor([[True] * 6, [True] * 4 + [False] * 2, [True] + [False] * 5])  # ours: True = real
    a = ours(x, key_valid=valid)
    b = theirs(x_t, src_key_padding_mask=~valid)  # theirs: True = padding, ignored
    torch.testing.assert_close(a, b, **TOL)
    probe = rand(3, 6, D, seed=2)
    (a * probe).sum().backward()
    (b * probe).sum().backward()
    torch.testing.assert_close(x.grad, x_t.grad, **TOL)
    assert_same_gradients(ours, theirs)


def test_decoder_layer_equals_torch_with_causal_mask_and_memory_padding():
    ours = decoder()
    theirs = torch_decoder_layer(ours)
    x = rand(3, 5, D, seed=3).requires_grad_()
    memory = rand(3, 7, D, seed=4).requires_grad_()
    x_t, memory_t = (t.detach().clone().requires_grad_() for t in (x, memory))
    memory_valid = torch.tensor([[True] * 7, [True] * 3 + [False] * 4, [True] * 6 + [False]])
    target_valid = torch.tensor([[True] * 5, [True] * 5, [True] * 3 + [False] * 2])
    a = ours(x, memory, target_valid=target_valid, memory_valid=memory_valid)
    b = theirs(x_t, memory_t, tgt_mask=~causal_allowed(5, 5), tgt_key_padding_mask=~target_valid,
               memory_key_padding_mask=~memory_valid)
    torch.testing.assert_close(a, b, **TOL)
    probe = rand(3, 5, D, seed=5)
    (a * probe).sum().backward()
    (b * probe).sum().backward()
    torch.testing.assert_close(x.grad, x_t.grad, **TOL)
    torch.testing.assert_close(memory.grad, memory_t.grad, **TOL)
    assert_same_gradients(ours, theirs)


def test_decoder_layer_equals_torch_with_the_float_causal_mask_too():
    """`nn.Transformer.generate_square_subsequent_mask` gives an additive float mask (-inf
    above the diagonal); with it and `tgt_is_causal=True` the result is the same."""
    ours = decoder(seed=1)
    theirs = torch_decoder_layer(ours)
    x, memory = rand(2, 6, D, seed=6), rand(2, 4, D, seed=7)
    mask = nn.Transformer.generate_square_subsequent_mask(6, dtype=torch.float64)
    with torch.no_grad():
        a = ours(x, memory)
        b = theirs(x, memory, tgt_mask=mask, tgt_is_causal=True)
    torch.testing.assert_close(a, b, **TOL)


# ---------------------------------------------------------------------------------------
# Stacks of two


def test_two_encoder_layers_equal_nn_transformer_encoder_without_nested_tensors():
    """enable_nested_tensor=False: in eval mode without grad, nn.TransformerEncoder would
    otherwise pack the batch as a nested tensor and return zeros at padded positions (next test)."""
    layers = [encoder(seed=10), encoder(seed=11)]
    theirs = nn.TransformerEncoder(torch_encoder_layer(layers[0]), num_layers=2, enable_nested_tensor=False)
    theirs.layers[1].load_state_dict(torch_encoder_layer(layers[1]).state_dict())
    x = rand(2, 5, D, seed=8).requires_grad_()
    x_t = x.detach().clone().requires_grad_()
    valid = torch.tensor([[True] * 5, [True] * 2 + [False] * 3])
    a = x
    for layer in layers:
        a = layer(a, key_valid=valid)
    b = theirs(x_t, src_key_padding_mask=~valid)
    torch.testing.assert_close(a, b, **TOL)
    probe = rand(2, 5, D, seed=9)
    (a * probe).sum().backward()
    (b * probe).sum().backward()
    torch.testing.assert_close(x.grad, x_t.grad, **TOL)
    for ours, t in zip(layers, theirs.layers):
        assert_same_gradients(ours, t)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")
def test_nested_tensor_fast_path_zeroes_padded_positions_only():
    """The trap: the default nn.TransformerEncoder (enable_nested_tensor=True), in eval mode
    under no_grad, returns exact zeros at padded positions. The real positions still match."""
    layers = [encoder(seed=12), encoder(seed=13)]
    theirs = nn.TransformerEncoder(torch_encoder_layer(layers[0]), num_layers=2).eval()  # the default
    theirs.layers[1].load_state_dict(torch_encoder_layer(layers[1]).state_dict())
    x = rand(2, 5, D, seed=10)
    valid = torch.tensor([[True] * 5, [True] * 2 + [False] * 3])
    with torch.no_grad():
        a = x
        for layer in layers:
            a = layer(a, key_valid=valid)
        b = theirs(x, src_key_padding_mask=~valid)
    if not bool((b[1, 2:] == 0).all()):
        pytest.skip("this PyTorch build did not take the nested-tensor fast path")
    assert bool((a[1, 2:] != 0).all())  # ours computes padded positions like any other
    torch.testing.assert_close(a[valid], b[valid], **TOL)


def test_two_decoder_layers_equal_nn_transformer_decoder():
    layers = [decoder(seed=20), decoder(seed=21)]
    theirs = nn.TransformerDecoder(torch_decoder_layer(layers[0]), num_layers=2)
    theirs.layers[1].load_state_dict(torch_decoder_layer(layers[1]).state_dict())
    x = rand(2, 4, D, seed=11).requires_grad_()
    memory = rand(2, 6, D, seed=12).requires_grad_()
    x_t, memory_t = (t.detach().clone().requires_grad_() for t in (x, memory))
    memory_valid = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    a = x
    for layer in layers:
        a = layer(a, memory, memory_valid=memory_valid)
    b = theirs(x_t, memory_t, tgt_mask=~causal_allowed(4, 4), memory_key_padding_mask=~memory_valid)
    torch.testing.assert_close(a, b, **TOL)
    probe = rand(2, 4, D, seed=13)
    (a * probe).sum().backward()
    (b * probe).sum().backward()
    torch.testing.assert_close(x.grad, x_t.grad, **TOL)
    torch.testing.assert_close(memory.grad, memory_t.grad, **TOL)
    for ours, t in zip(layers, theirs.layers):
        assert_same_gradients(ours, t)


# ---------------------------------------------------------------------------------------
# The seed's contracts


def test_d01_cross_attention_decouples_t_from_s_and_reads_the_memory():
    layer = decoder(seed=30)
    x = rand(2, 7, D, seed=14)
    memory, other = rand(2, 5, D, seed=15), rand(2, 5, D, seed=16)
    with torch.no_grad():
        out = layer(x, memory)
        out_other = layer(x, other)
    assert out.shape == (2, 7, D) and memory.shape[1] == 5
    assert (out - out_other).abs().amin(dim=-1).gt(1e-6).all()  # every position reads the memory
    enc = encoder(seed=31)
    assert enc(x).shape == x.shape


def test_d02_post_norm_with_both_sublayers_zeroed_is_exactly_the_norms():
    x = rand(4, 5, D, seed=17) * 3 + 1
    enc = encoder(seed=32)
    dec = decoder(seed=33)
    with torch.no_grad():
        for layer in (enc, dec):
            for attn in [layer.self_attn] + ([layer.cross_attn] if layer is dec else []):
                attn.o_proj.weight.zero_()
                attn.o_proj.bias.zero_()
            layer.ffn.down_proj.weight.zero_()
            layer.ffn.down_proj.bias.zero_()
        assert torch.equal(enc(x), enc.norm2(enc.norm1(x)))
        assert torch.equal(dec(x, rand(4, 3, D, seed=18)), dec.norm3(dec.norm2(dec.norm1(x))))
        assert not torch.allclose(enc(x), x, atol=1e-3)  # post-norm is not the identity ...
        pre = gpt2_block(D, H, d_ff=D_FF, dropout=0.0).double()
        pre.attn.o_proj.weight.zero_()
        pre.attn.o_proj.bias.zero_()
        pre.ffn.down_proj.weight.zero_()
        pre.ffn.down_proj.bias.zero_()
        assert torch.equal(pre(x), x)  # ... pre-norm is


def test_d12_cross_attention_refuses_rope_and_a_cache():
    memory, x = rand(1, 3, D, seed=19), rand(1, 4, D, seed=20)
    roped = MultiHeadAttention(D, H, rope=True).double()
    with pytest.raises(ValueError, match="rope"):
        roped(x, memory, causal=False)
    plain = MultiHeadAttention(D, H, bias=True).double()
    with pytest.raises(ValueError, match="cache"):
        plain(x, memory, causal=False, cache=plain.new_cache(1, 8))
    with pytest.raises(ValueError, match="causal"):
        plain(x, memory, causal=True)
    assert plain(x, memory, causal=False).shape == (1, 4, D)  # plain cross-attention works
    dec = decoder(seed=34)
    assert dec.cross_attn.rope is False


def test_d14_the_decoder_layer_is_causal_by_construction():
    """There is no mask or causal argument to forget: the layer builds its causal mask itself."""
    params = inspect.signature(PostNormDecoderLayer.forward).parameters
    assert not {"causal", "mask", "tgt_mask", "attn_mask"} & set(params)
    layer = decoder(seed=35)
    x, memory = rand(2, 6, D, seed=21), rand(2, 4, D, seed=22)
    t = 2
    changed = x.clone()
    changed[:, t + 1:] = rand(2, 6 - t - 1, D, seed=23)
    with torch.no_grad():
        a, b = layer(x, memory), layer(changed, memory)
        c = layer(x.clone().index_fill_(1, torch.tensor([0]), 0.5), memory)
    assert torch.equal(a[:, : t + 1], b[:, : t + 1])  # nothing flows backwards in time
    assert (a[:, 1:] - c[:, 1:]).abs().amax() > 1e-3  # and position 0 does flow forwards


# ---------------------------------------------------------------------------------------
# Errors


def test_layers_refuse_bad_inputs_with_the_argument_named():
    enc, dec = encoder(), decoder()
    x = rand(2, 3, D, seed=24)
    with pytest.raises(ValueError, match="^x must have at least 3 dims"):
        enc(x[0])
    with pytest.raises(ValueError, match="^memory must have at least 3 dims"):
        dec(x, x[0])
    with pytest.raises(TypeError, match="x must have a floating-point dtype"):
        enc(torch.ones(2, 3, D, dtype=torch.long))
    with pytest.raises(ValueError, match=r"^key_valid must be \[B=2, 3\]"):
        enc(x, key_valid=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="^memory_valid must be a bool tensor"):
        dec(x, x, memory_valid=torch.ones(2, 3))
    with pytest.raises(ValueError, match=r"^target_valid must be \[B=2, 3\]"):
        dec(x, x, target_valid=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"^memory_valid must be \[B=2, 5\]"):
        dec(x, rand(2, 5, D, seed=25), memory_valid=torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="dropout"):
        encoder_layer_2017(D, H, D_FF, dropout=1.0)
    with pytest.raises(TypeError, match="ours must be a PostNormEncoderLayer"):
        torch_encoder_layer(dec)
    with pytest.raises(TypeError, match="ours must be a PostNormDecoderLayer"):
        torch_decoder_layer(enc)


def test_left_padded_targets_need_and_accept_the_zero_policy():
    """Left padding puts padding keys first: the first target queries have no real key to
    read. The default refuses that; empty_row="zero" gives them a zero attention output
    and the real positions the values they have without the padding."""
    dec = decoder()
    x, memory = rand(1, 4, D, seed=26), rand(1, 3, D, seed=27)
    left = torch.tensor([[False, False, True, True]])
    with pytest.raises(ValueError, match="no key"):
        dec(x, memory, target_valid=left)
    padded = dec(x, memory, target_valid=left, empty_row="zero")
    alone = dec(x[:, 2:], memory)
    torch.testing.assert_close(padded[:, 2:], alone, atol=1e-12, rtol=0)
