"""Where dropout sits in each block, pinned in train mode.

Vaswani et al. (2017, sec. 5.4) apply dropout "to the output of each sub-layer, before
it is added to the sub-layer input"; GPT-2 keeps that place (Hugging Face's GPT2Block:
`resid_dropout` after the attention's projection, `dropout` after the MLP's). Every
other test runs in eval mode or with dropout 0, where deleting a dropout changes
nothing. Here:

* GPT-2's block against Hugging Face's `GPT2Block` in train mode under one seed: the two
  draw their masks in the same order and shapes (attention branch, then FFN branch), so
  the outputs and gradients are equal only if each dropout is where HF's is;
* every block with dropout 1, where each branch is dropped whole: a pre-norm block is
  then the identity, a post-norm layer its norms alone; the 2017 layers against
  PyTorch's own in train mode (which drop the attention weights and the FFN's hidden
  units too: at p = 1 the branch is zero either way, so ours and theirs agree).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from literate.models.gpt2 import copy_hf_gpt2_block
from literate.models.torch_twins import torch_decoder_layer, torch_encoder_layer
from literate.parts.blocks import (
    OutputNormBlock,
    ParallelBlock,
    PostNormBlock,
    PreNormBlock,
    SandwichBlock,
    decoder_layer_2017,
    encoder_layer_2017,
    gpt2_block,
)
from literate.parts.ffn import DenseFFN
from literate.parts.multi_head import MultiHeadAttention
from literate.parts.norms import LayerNorm

from harness import hf_causal_mask

F64 = torch.float64
D, H = 32, 4


def rand(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=F64, generator=torch.Generator().manual_seed(seed))


def test_gpt2_block_drops_where_hf_gpt2block_does():
    from transformers import GPT2Config
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    config = GPT2Config(
        n_embd=D,
        n_head=H,
        n_positions=16,
        resid_pdrop=0.3,
        attn_pdrop=0.0,
        embd_pdrop=0.0,
    )
    config._attn_implementation = "eager"
    theirs = GPT2Block(config).to(F64).train()
    ours = copy_hf_gpt2_block(gpt2_block(D, H, dropout=0.3), theirs).to(F64).train()
    x = rand(2, 7, D, seed=1).requires_grad_()
    x_t = x.detach().clone().requires_grad_()
    torch.manual_seed(0)
    a = ours(x)
    torch.manual_seed(0)
    b = theirs(x_t, attention_mask=hf_causal_mask(7))
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)  # float64, same masks
    a.square().sum().backward()
    b.square().sum().backward()
    torch.testing.assert_close(x.grad, x_t.grad, rtol=0, atol=1e-11)
    with torch.no_grad():  # and dropout did act: eval mode gives another output
        assert not torch.allclose(ours.eval()(x), a)


def dropping_everything(layer: nn.Module) -> nn.Module:
    """Train mode, dropout 1 (our builders refuse p = 1; nn.Dropout takes it)."""
    layer.dropout.p = 1.0
    return layer.to(F64).train()


def parts(n_norms: int) -> list[nn.Module]:
    return [
        MultiHeadAttention(D, H),
        DenseFFN(D, 64, torch.relu),
        *(LayerNorm(D) for _ in range(n_norms)),
    ]


@pytest.mark.parametrize(
    "block, n_norms",
    [
        (PreNormBlock, 2),
        (SandwichBlock, 4),
        (OutputNormBlock, 2),
        (ParallelBlock, 1),
        (ParallelBlock, 2),
    ],
    ids=["pre-norm", "sandwich", "output-norm", "parallel", "parallel-two-norms"],
)
def test_a_residual_block_with_every_branch_dropped_is_the_identity(block, n_norms):
    layer = dropping_everything(block(*parts(n_norms), dropout=0.5))
    x = rand(2, 5, D, seed=2)
    torch.testing.assert_close(layer(x), x, rtol=0, atol=0)
    with torch.no_grad():
        assert not torch.allclose(layer.eval()(x), x)  # the branches are not zero


def test_a_post_norm_block_with_every_branch_dropped_is_its_norms():
    layer = dropping_everything(PostNormBlock(*parts(2), dropout=0.5))
    x = rand(2, 5, D, seed=2)
    torch.testing.assert_close(
        layer(x), layer.ffn_norm(layer.attn_norm(x)), rtol=0, atol=0
    )


def test_2017_encoder_layer_drops_each_sublayer_output_as_pytorch_does():
    ours = dropping_everything(encoder_layer_2017(D, H, 64, dropout=0.5))
    theirs = torch_encoder_layer(ours).train()
    for module in (theirs.dropout, theirs.dropout1, theirs.dropout2):
        module.p = 1.0
    theirs.self_attn.dropout = 1.0
    x = rand(2, 5, D, seed=3)
    expected = ours.ffn_norm(
        ours.self_attn_norm(x)
    )  # both branches dropped: the norms alone
    torch.testing.assert_close(ours(x), expected, rtol=0, atol=0)
    torch.testing.assert_close(theirs(x), expected, rtol=0, atol=1e-12)


def test_2017_decoder_layer_drops_each_sublayer_output_as_pytorch_does():
    ours = dropping_everything(decoder_layer_2017(D, H, 64, dropout=0.5))
    theirs = torch_decoder_layer(ours).train()
    for module in (theirs.dropout, theirs.dropout1, theirs.dropout2, theirs.dropout3):
        module.p = 1.0
    theirs.self_attn.dropout = theirs.multihead_attn.dropout = 1.0
    x, memory = rand(2, 5, D, seed=4), rand(2, 6, D, seed=5)
    expected = ours.ffn_norm(ours.cross_attn_norm(ours.self_attn_norm(x)))
    torch.testing.assert_close(ours(x, memory), expected, rtol=0, atol=0)
    mask = nn.Transformer.generate_square_subsequent_mask(5, dtype=F64)
    torch.testing.assert_close(
        theirs(x, memory, tgt_mask=mask), expected, rtol=0, atol=1e-12
    )
