"""The 2017 post-norm layers equal PyTorch's own, forward and backward, and keep their
contracts (cross-attention reads the memory and decouples T from S, zeroed sublayers leave
the norms alone, cross-attention refuses RoPE and a cache, the decoder is causal by
construction); every block checks its parts (`same_width`) and reads no
tensor values in a forward unless a padding mask may leave a query row empty;
`PostNormBlock` is the 2017 placement, x = N(x + F(x)), of a causal block.

References: `nn.TransformerEncoderLayer` / `nn.TransformerDecoderLayer` (norm_first=False,
activation="relu", batch_first=True, dropout=0) and the stacks `nn.TransformerEncoder` /
`nn.TransformerDecoder`, holding copies of our weights (`literate.models.transformer2017.torch_*_layer`).

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
import torch.nn.functional as F
from torch import nn

from literate.models.torch_twins import (
    TORCH_DECODER_NORMS,
    TORCH_ENCODER_NORMS,
    torch_decoder_layer,
    torch_encoder_layer,
)
from literate.parts.attention import causal_allowed
from literate.parts.blocks import (
    PostNormBlock,
    PostNormDecoderLayer,
    PostNormEncoderLayer,
    PreNormBlock,
    decoder_layer_2017,
    encoder_layer_2017,
    gpt2_block,
    same_width,
)
from literate.parts.ffn import DenseFFN
from literate.parts.multi_head import MultiHeadAttention
from literate.parts.norms import LayerNorm, RMSNorm
from literate.tools.syncs import HostReads as HostSyncs

TOL = {"atol": 1e-12, "rtol": 0.0}
D, H, D_FF = 16, 4, 32


def rand(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def count_syncs(call):
    """(what `call()` returned, how many host syncs it made)."""
    with HostSyncs() as syncs:
        result = call()
    return result, len(syncs.calls)


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
        out[f"{name}.in_proj_weight"] = torch.cat(
            [a.q_proj.weight.grad, a.k_proj.weight.grad, a.v_proj.weight.grad]
        )
        out[f"{name}.in_proj_bias"] = torch.cat(
            [a.q_proj.bias.grad, a.k_proj.bias.grad, a.v_proj.bias.grad]
        )
        out[f"{name}.out_proj.weight"] = a.o_proj.weight.grad
        out[f"{name}.out_proj.bias"] = a.o_proj.bias.grad
    out["linear1.weight"], out["linear1.bias"] = (
        layer.ffn.up_proj.weight.grad,
        layer.ffn.up_proj.bias.grad,
    )
    out["linear2.weight"], out["linear2.bias"] = (
        layer.ffn.down_proj.weight.grad,
        layer.ffn.down_proj.bias.grad,
    )
    decoder = isinstance(layer, PostNormDecoderLayer)
    for ours, theirs in (
        TORCH_DECODER_NORMS if decoder else TORCH_ENCODER_NORMS
    ).items():
        out[f"{theirs}.weight"] = getattr(layer, ours).weight.grad
        out[f"{theirs}.bias"] = getattr(layer, ours).bias.grad
    return out


def assert_same_gradients(ours: nn.Module, theirs: nn.Module) -> float:
    mapped = ours_in_torch_layout(ours)
    names = {n for n, _ in theirs.named_parameters()}
    assert names == set(mapped), f"unmapped parameters: {names ^ set(mapped)}"
    worst = 0.0
    for name, p in theirs.named_parameters():
        assert mapped[name] is not None and p.grad is not None, name
        torch.testing.assert_close(
            mapped[name], p.grad, **TOL, msg=lambda m: f"{name}: {m}"
        )
        worst = max(worst, (mapped[name] - p.grad).abs().max().item())
    return worst


# ---------------------------------------------------------------------------------------
# One layer each, forward and backward


def test_encoder_layer_equals_torch_with_source_padding():
    ours = encoder()
    theirs = torch_encoder_layer(ours)
    x = rand(3, 6, D, seed=1).requires_grad_()
    x_t = x.detach().clone().requires_grad_()
    valid = torch.tensor(
        [[True] * 6, [True] * 4 + [False] * 2, [True] + [False] * 5]
    )  # ours: True = real
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
    memory_valid = torch.tensor(
        [[True] * 7, [True] * 3 + [False] * 4, [True] * 6 + [False]]
    )
    target_valid = torch.tensor([[True] * 5, [True] * 5, [True] * 3 + [False] * 2])
    a = ours(x, memory, target_valid=target_valid, memory_valid=memory_valid)
    b = theirs(
        x_t,
        memory_t,
        tgt_mask=~causal_allowed(5, 5),
        tgt_key_padding_mask=~target_valid,
        memory_key_padding_mask=~memory_valid,
    )
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
    theirs = nn.TransformerEncoder(
        torch_encoder_layer(layers[0]), num_layers=2, enable_nested_tensor=False
    )
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
    theirs = nn.TransformerEncoder(
        torch_encoder_layer(layers[0]), num_layers=2
    ).eval()  # the default
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
    b = theirs(
        x_t,
        memory_t,
        tgt_mask=~causal_allowed(4, 4),
        memory_key_padding_mask=~memory_valid,
    )
    torch.testing.assert_close(a, b, **TOL)
    probe = rand(2, 4, D, seed=13)
    (a * probe).sum().backward()
    (b * probe).sum().backward()
    torch.testing.assert_close(x.grad, x_t.grad, **TOL)
    torch.testing.assert_close(memory.grad, memory_t.grad, **TOL)
    for ours, t in zip(layers, theirs.layers):
        assert_same_gradients(ours, t)


# ---------------------------------------------------------------------------------------
# The layers' contracts


def test_cross_attention_decouples_t_from_s_and_reads_the_memory():
    layer = decoder(seed=30)
    x = rand(2, 7, D, seed=14)
    memory, other = rand(2, 5, D, seed=15), rand(2, 5, D, seed=16)
    with torch.no_grad():
        out = layer(x, memory)
        out_other = layer(x, other)
    assert out.shape == (2, 7, D) and memory.shape[1] == 5
    assert (
        (out - out_other).abs().amin(dim=-1).gt(1e-6).all()
    )  # every position reads the memory
    enc = encoder(seed=31)
    assert enc(x).shape == x.shape


def test_post_norm_with_both_sublayers_zeroed_is_exactly_the_norms():
    x = rand(4, 5, D, seed=17) * 3 + 1
    enc = encoder(seed=32)
    dec = decoder(seed=33)
    with torch.no_grad():
        for layer in (enc, dec):
            for attn in [layer.self_attn] + (
                [layer.cross_attn] if layer is dec else []
            ):
                attn.o_proj.weight.zero_()
                attn.o_proj.bias.zero_()
            layer.ffn.down_proj.weight.zero_()
            layer.ffn.down_proj.bias.zero_()
        assert torch.equal(enc(x), enc.ffn_norm(enc.self_attn_norm(x)))
        assert torch.equal(
            dec(x, rand(4, 3, D, seed=18)),
            dec.ffn_norm(dec.cross_attn_norm(dec.self_attn_norm(x))),
        )
        assert not torch.allclose(
            enc(x), x, atol=1e-3
        )  # post-norm is not the identity ...
        pre = gpt2_block(D, H, d_ff=D_FF, dropout=0.0).double()
        pre.attn.o_proj.weight.zero_()
        pre.attn.o_proj.bias.zero_()
        pre.ffn.down_proj.weight.zero_()
        pre.ffn.down_proj.bias.zero_()
        assert torch.equal(pre(x), x)  # ... pre-norm is


def test_cross_attention_refuses_rope_and_a_cache():
    """Each refusal names what cross-attention cannot take (the messages are heads.py's)."""
    memory, x = rand(1, 3, D, seed=19), rand(1, 4, D, seed=20)
    refused = r"^cross-attention \(memory given\) "
    roped = MultiHeadAttention(D, H, rope=True).double()
    with pytest.raises(
        ValueError, match=refused + r"on a layer built with rope=True: "
    ):
        roped(x, memory, causal=False)
    plain = MultiHeadAttention(D, H, bias=True).double()
    cache = plain.new_cache(1, 8)
    with pytest.raises(ValueError, match=refused + r"takes no cache: "):
        plain(x, memory, causal=False, cache=cache)
    assert cache.next_pos == 0  # refused before anything was cached
    with pytest.raises(ValueError, match=refused + r"takes causal=False: "):
        plain(x, memory, causal=True)
    with pytest.raises(
        ValueError, match=refused + r"takes no start_pos or positions: "
    ):
        plain(x, memory, causal=False, start_pos=2)
    with pytest.raises(
        ValueError, match=refused + r"takes no start_pos or positions: "
    ):
        plain(x, memory, causal=False, positions=torch.zeros(1, 4, dtype=torch.long))
    assert plain(x, memory, causal=False).shape == (
        1,
        4,
        D,
    )  # plain cross-attention works
    dec = decoder(seed=34)
    assert dec.cross_attn.rope is None


def test_the_decoder_layer_is_causal_by_construction():
    """There is no mask or causal argument to forget: the layer builds its causal mask itself."""
    params = inspect.signature(PostNormDecoderLayer.forward).parameters
    assert not {"causal", "mask", "tgt_mask", "attn_mask"} & set(params)
    layer = decoder(seed=35)
    x, memory = rand(2, 6, D, seed=21), rand(2, 4, D, seed=22)
    t = 2
    changed = x.clone()
    changed[:, t + 1 :] = rand(2, 6 - t - 1, D, seed=23)
    with torch.no_grad():
        a, b = layer(x, memory), layer(changed, memory)
        c = layer(x.clone().index_fill_(1, torch.tensor([0]), 0.5), memory)
    assert torch.equal(a[:, : t + 1], b[:, : t + 1])  # nothing flows backwards in time
    assert (
        a[:, 1:] - c[:, 1:]
    ).abs().amax() > 1e-3  # and position 0 does flow forwards


# ---------------------------------------------------------------------------------------
# Errors


def test_layers_refuse_bad_inputs_with_the_argument_named():
    """The first sublayer to read an argument checks it, under its own name; the decoder
    layer names its two padding masks itself (both attentions call theirs `key_valid`),
    telling the target's T from the memory's S."""
    enc, dec = encoder(), decoder()
    x = rand(2, 3, D, seed=24)
    with pytest.raises(
        ValueError, match=r"^x must be \[B, T, d_model=16\], got \(3, 16\)$"
    ):
        enc(x[0])
    with pytest.raises(
        ValueError, match=r"^memory must be \[B=2, S >= 1, d\], got \(3, 16\)$"
    ):
        dec(x, x[0])
    with pytest.raises(
        TypeError, match=r"^x must be a floating-point tensor, got torch\.int64$"
    ):
        enc(torch.ones(2, 3, D, dtype=torch.long))
    with pytest.raises(
        TypeError, match=r"^x is torch\.float32, the layer's parameters torch\.float64$"
    ):
        enc(x.float())
    with pytest.raises(
        ValueError, match=r"^x must have last axis 16, got \(2, 3, 17\)$"
    ):
        enc(rand(2, 3, D + 1, seed=1))
    with pytest.raises(
        ValueError,
        match=r"^key_valid must be \[B=2, T_k=3\] \(one flag per key the queries see: "
        r"the memory's S, or the cached plus new tokens\), got \(2, 4\)$",
    ):
        enc(x, key_valid=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(
        TypeError,
        match=r"^memory_valid must be a bool tensor \(True = may attend\), got "
        r"torch\.float32; convert a 0/1 mask with `mask == 1`$",
    ):
        dec(x, x, memory_valid=torch.ones(2, 3))
    with pytest.raises(
        ValueError, match=r"^target_valid must be \[B=2, T_k=3\] "
    ):  # target_valid: the target's T
        dec(x, x, target_valid=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(
        ValueError, match=r"^memory_valid must be \[B=2, S=5\] "
    ):  # memory_valid: the memory's S
        dec(x, rand(2, 5, D, seed=25), memory_valid=torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"^dropout must be in \[0, 1\), got 1\.0$"):
        encoder_layer_2017(D, H, D_FF, dropout=1.0)
    with pytest.raises(
        TypeError,
        match=r"^ours must be a PostNormEncoderLayer, got PostNormDecoderLayer$",
    ):
        torch_encoder_layer(dec)
    with pytest.raises(
        TypeError,
        match=r"^ours must be a PostNormDecoderLayer, got PostNormEncoderLayer$",
    ):
        torch_decoder_layer(enc)


def test_left_padded_targets_need_and_accept_the_zero_policy():
    """Left padding puts padding keys first: the first target queries have no real key to
    read. The default refuses that; empty_row="zero" gives them a zero attention output
    and the real positions the values they have without the padding."""
    dec = decoder()
    x, memory = rand(1, 4, D, seed=26), rand(1, 3, D, seed=27)
    left = torch.tensor([[False, False, True, True]])
    with pytest.raises(
        ValueError,
        match=r"^causal and key_valid leaves 2 query row\(s\) with no key to attend to, "
        r"at index \[\.\.\., query\] \[\[0, 0\], \[0, 1\]\]; fix the mask, "
        r"or pass empty_row='zero' to give those rows a zero output$",
    ):
        dec(x, memory, target_valid=left)
    padded = dec(x, memory, target_valid=left, empty_row="zero")
    alone = dec(x[:, 2:], memory)
    torch.testing.assert_close(padded[:, 2:], alone, atol=1e-12, rtol=0)


# ---------------------------------------------------------------------------------------
# Blocks check their parts


BLOCKS = {  # block class -> its parts, by keyword, in the order of the constructor
    "PostNormEncoderLayer": (
        PostNormEncoderLayer,
        ["self_attn", "ffn", "self_attn_norm", "ffn_norm"],
    ),
    "PostNormDecoderLayer": (
        PostNormDecoderLayer,
        [
            "self_attn",
            "cross_attn",
            "ffn",
            "self_attn_norm",
            "cross_attn_norm",
            "ffn_norm",
        ],
    ),
    "PreNormBlock": (PreNormBlock, ["attn", "ffn", "attn_norm", "ffn_norm"]),
    "PostNormBlock": (PostNormBlock, ["attn", "ffn", "attn_norm", "ffn_norm"]),
}


def block_parts(names, width=D):
    made = {
        "attn": lambda: MultiHeadAttention(width, H),
        "ffn": lambda: DenseFFN(width, D_FF, F.relu),
        "norm": lambda: LayerNorm(width),
    }
    return {
        n: made["attn" if "attn" in n else "ffn" if n == "ffn" else "norm"]()
        for n in names
    }


@pytest.mark.parametrize("kind", sorted(BLOCKS))
def test_every_block_knows_its_width_and_refuses_wrong_parts_by_name(kind):
    cls, names = BLOCKS[kind]
    assert cls(**block_parts(names)).d_model == D
    last = names[-1]
    not_a_module = block_parts(names) | {last: lambda x: x}
    with pytest.raises(
        TypeError,
        match=rf"^{last} must be an nn\.Module with an int d_model \(its width\), "
        r"got function$",
    ):
        cls(**not_a_module)
    no_width = block_parts(names) | {names[0]: nn.Identity()}
    with pytest.raises(
        TypeError,
        match=rf"^{names[0]} must be an nn\.Module with an int d_model \(its width\), "
        r"got torch\.nn\.modules\.linear\.Identity$",
    ):
        cls(**no_width)
    first_norm = next(n for n in names if n.endswith("norm"))
    torch_norm = block_parts(names) | {
        first_norm: nn.LayerNorm(D)
    }  # normalized_shape, no d_model
    with pytest.raises(
        TypeError,
        match=rf"^{first_norm} must be an nn\.Module with an int d_model \(its width\), "
        r"got torch\.nn\.modules\.normalization\.LayerNorm$",
    ):
        cls(**torch_norm)
    widths = block_parts(names) | {"ffn": DenseFFN(2 * D, D_FF, F.relu)}
    expected = ", ".join(f"'{n}': {2 * D if n == 'ffn' else D}" for n in names)
    with pytest.raises(
        ValueError,
        match=rf"^the parts must share one width d_model, got \{{{expected}\}}$",
    ):
        cls(**widths)
    with pytest.raises(ValueError, match=r"^dropout must be in \[0, 1\), got 1\.0$"):
        cls(**block_parts(names), dropout=1.0)


def test_same_width_returns_the_shared_width_and_names_the_part():
    assert same_width(attn=MultiHeadAttention(D, H), norm=RMSNorm(D)) == D
    odd = nn.Identity()
    odd.d_model = "16"  # not an int
    with pytest.raises(
        TypeError,
        match=r"^ffn must be an nn\.Module with an int d_model \(its width\), got torch\.nn\.modules\.linear\.Identity$",
    ):
        same_width(attn=MultiHeadAttention(D, H), ffn=odd)
    with pytest.raises(
        TypeError,
        match=r"^norm must be an nn\.Module with an int d_model \(its width\), got str$",
    ):
        same_width(norm="LayerNorm")
    with pytest.raises(
        ValueError,
        match=r"^the parts must share one width d_model, "
        r"got \{'attn': 16, 'norm': 8\}$",
    ):
        same_width(attn=MultiHeadAttention(D, H), norm=LayerNorm(8))


# ---------------------------------------------------------------------------------------
# PostNormBlock: the 2017 placement of a causal block


def test_post_norm_block_is_the_2017_placement_built_by_hand():
    """x = N1(x + Attn(x)); x = N2(x + FFN(x)), causal, from the very parts of a GPT-2
    block: equal to the formula written here, and not equal to the pre-norm block."""
    torch.manual_seed(40)
    pre = randomise(gpt2_block(D, H, d_ff=D_FF, dropout=0.0).double(), 40)
    post = PostNormBlock(pre.attn, pre.ffn, pre.attn_norm, pre.ffn_norm)
    assert post.d_model == D and post.attn is pre.attn and post.ffn_norm is pre.ffn_norm
    x = rand(2, 6, D, seed=41).requires_grad_()
    by_hand = pre.attn_norm(x + pre.attn(x, causal=True))
    by_hand = pre.ffn_norm(by_hand + pre.ffn(by_hand))
    ours = post(x)
    assert torch.equal(ours, by_hand)
    probe = rand(2, 6, D, seed=42)
    params = [x, *post.parameters()]
    for a, b in zip(
        torch.autograd.grad((ours * probe).sum(), params),
        torch.autograd.grad((by_hand * probe).sum(), params),
    ):
        assert torch.equal(a, b)
    with torch.no_grad():
        assert (post(x) - pre(x)).abs().amax() > 1e-2  # the placement matters
        bare = PostNormBlock(
            pre.attn, pre.ffn, LayerNorm(D).double(), LayerNorm(D).double()
        )
        out = bare(x * 10)  # unit gains, zero biases: every position leaves normalised
    torch.testing.assert_close(
        out.mean(-1), torch.zeros(2, 6, dtype=torch.float64), atol=1e-12, rtol=0
    )
    assert inspect.signature(PostNormBlock.forward).parameters.keys() == {"self", "x"}


def test_post_norm_block_is_causal_and_matches_torch_encoder_layer_with_a_causal_mask():
    """The 2017 encoder layer with a causal mask is PostNormBlock (same parts)."""
    layer = encoder(seed=43)
    post = PostNormBlock(
        layer.self_attn, layer.ffn, layer.self_attn_norm, layer.ffn_norm
    )
    theirs = torch_encoder_layer(layer)
    x = rand(2, 5, D, seed=44)
    with torch.no_grad():
        a = post(x)
        b = theirs(x, src_mask=~causal_allowed(5, 5), is_causal=True)
        changed = x.clone()
        changed[:, 3:] = rand(2, 2, D, seed=45)
        c = post(changed)
    torch.testing.assert_close(a, b, **TOL)
    assert torch.equal(a[:, :3], c[:, :3])  # nothing flows back in time


# ---------------------------------------------------------------------------------------
# Host syncs: a block reads no values unless padding may empty a row


def test_blocks_read_no_tensor_values_without_a_padding_mask():
    enc, dec = encoder(), decoder()
    pre = gpt2_block(D, H, dropout=0.0).double()
    post = PostNormBlock(pre.attn, pre.ffn, pre.attn_norm, pre.ffn_norm)
    x, memory = rand(2, 5, D, seed=46), rand(2, 7, D, seed=47)
    for call in (
        lambda: enc(x),
        lambda: dec(x, memory),
        lambda: pre(x),
        lambda: post(x),
    ):
        _, syncs = count_syncs(call)
        assert syncs == 0


def test_a_padding_mask_costs_one_sync_to_refuse_empty_rows_and_none_with_zero():
    enc, dec = encoder(), decoder()
    x, memory = rand(2, 5, D, seed=48), rand(2, 7, D, seed=49)
    valid = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    memory_valid = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    _, syncs = count_syncs(lambda: enc(x, key_valid=valid))
    assert syncs == 1
    _, syncs = count_syncs(
        lambda: dec(x, memory, target_valid=valid, memory_valid=memory_valid)
    )
    assert syncs == 2  # one per padded attention: self and cross
    _, syncs = count_syncs(lambda: enc(x, key_valid=valid, empty_row="zero"))
    assert syncs == 0
    _, syncs = count_syncs(
        lambda: dec(
            x, memory, target_valid=valid, memory_valid=memory_valid, empty_row="zero"
        )
    )
    assert syncs == 0
