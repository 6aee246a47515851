"""PyTorch's own Transformer layers holding a copy of our weights: the references that
chapter 4's 2017 layers are proven equal to.

`nn.TransformerEncoderLayer` / `nn.TransformerDecoderLayer` with `norm_first=False`,
ReLU, `batch_first=True` and dropout 0 are the 2017 post-norm layers. They keep W_q, W_k,
W_v stacked in one `in_proj_weight` (rows q; k; v) and call W_o `out_proj`; the FFN is
`linear1`, ReLU, `linear2`; the norms are `norm1`, `norm2` (and `norm3` in the decoder).
"""

from __future__ import annotations

import torch
from torch import nn

from literate.blocks import PostNormDecoderLayer, PostNormEncoderLayer
from literate.heads import pack_qkv

__all__ = ["torch_encoder_layer", "torch_decoder_layer"]


# --8<-- [start:torch_twins]
def torch_encoder_layer(ours: PostNormEncoderLayer) -> nn.TransformerEncoderLayer:
    """PyTorch's post-norm ReLU encoder layer holding a copy of our weights, dropout 0.

    nn.MultiheadAttention keeps W_q, W_k, W_v stacked in one `in_proj_weight` (q; k; v rows)
    and calls W_o `out_proj`; the FFN is linear1, ReLU, linear2.
    """
    if not isinstance(ours, PostNormEncoderLayer):
        raise TypeError(f"ours must be a PostNormEncoderLayer, got {type(ours).__name__}")
    w = ours.ffn.up_proj.weight
    theirs = nn.TransformerEncoderLayer(
        ours.self_attn.d_model, ours.self_attn.n_heads, ours.ffn.d_ff, dropout=0.0, activation="relu",
        layer_norm_eps=ours.norm1.eps, batch_first=True, norm_first=False, dtype=w.dtype, device=w.device)
    _copy_attention(ours.self_attn, theirs.self_attn)
    _copy_ffn_and_norms(ours, theirs, 2)
    return theirs


def torch_decoder_layer(ours: PostNormDecoderLayer) -> nn.TransformerDecoderLayer:
    """PyTorch's post-norm ReLU decoder layer holding a copy of our weights, dropout 0:
    self_attn, multihead_attn (the cross-attention), linear1/linear2, norm1..norm3."""
    if not isinstance(ours, PostNormDecoderLayer):
        raise TypeError(f"ours must be a PostNormDecoderLayer, got {type(ours).__name__}")
    w = ours.ffn.up_proj.weight
    theirs = nn.TransformerDecoderLayer(
        ours.self_attn.d_model, ours.self_attn.n_heads, ours.ffn.d_ff, dropout=0.0, activation="relu",
        layer_norm_eps=ours.norm1.eps, batch_first=True, norm_first=False, dtype=w.dtype, device=w.device)
    _copy_attention(ours.self_attn, theirs.self_attn)
    _copy_attention(ours.cross_attn, theirs.multihead_attn)
    _copy_ffn_and_norms(ours, theirs, 3)
    return theirs


def _copy_attention(ours, theirs: nn.MultiheadAttention) -> None:
    packed = pack_qkv(ours)  # one Linear with rows q; k; v
    with torch.no_grad():
        theirs.in_proj_weight.copy_(packed.weight)
        theirs.in_proj_bias.copy_(packed.bias)
        theirs.out_proj.weight.copy_(ours.o_proj.weight)
        theirs.out_proj.bias.copy_(ours.o_proj.bias)


def _copy_ffn_and_norms(ours, theirs, n_norms: int) -> None:
    with torch.no_grad():
        theirs.linear1.weight.copy_(ours.ffn.up_proj.weight)
        theirs.linear1.bias.copy_(ours.ffn.up_proj.bias)
        theirs.linear2.weight.copy_(ours.ffn.down_proj.weight)
        theirs.linear2.bias.copy_(ours.ffn.down_proj.bias)
        for i in range(1, n_norms + 1):
            getattr(theirs, f"norm{i}").weight.copy_(getattr(ours, f"norm{i}").weight)
            getattr(theirs, f"norm{i}").bias.copy_(getattr(ours, f"norm{i}").bias)
# --8<-- [end:torch_twins]
