"""PyTorch's own Transformer layers holding a copy of our weights: the references that
chapter 4's 2017 layers are proven equal to.

`nn.TransformerEncoderLayer` / `nn.TransformerDecoderLayer` with `norm_first=False`,
ReLU, `batch_first=True` and dropout 0 are the 2017 post-norm layers. They keep W_q,
W_k, W_v stacked in one `in_proj_weight` (rows q; k; v) and call W_o `out_proj`; the FFN
is `linear1`, ReLU, `linear2`; the norms are `norm1`, `norm2` (and `norm3` in the
decoder).

They hold exactly that layer and nothing else: one key/value head per query head, no
rotation, biases everywhere, one LayerNorm eps. A layer of ours that differs in any of
these is refused with an error naming the part, never copied into a twin that computes
something else.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from literate.parts.blocks import PostNormDecoderLayer, PostNormEncoderLayer
from literate.parts.ffn import DenseFFN
from literate.parts.multi_head import MultiHeadAttention, pack_qkv
from literate.parts.norms import LayerNorm

__all__ = ["twin_eps", "torch_encoder_layer", "torch_decoder_layer"]


# --8<-- [start:twin_eps]
def twin_eps(ours: PostNormEncoderLayer | PostNormDecoderLayer) -> float:
    """The one LayerNorm eps of PyTorch's twin of `ours`, after refusing, by name, every
    part the twin cannot hold: attention other than MHA with biases and no RoPE, an FFN
    other than a DenseFFN with ReLU and biases, a norm other than LayerNorm, two eps."""
    attentions = {"self_attn": ours.self_attn}
    if isinstance(ours, PostNormDecoderLayer):
        attentions["cross_attn"] = ours.cross_attn
    for name, attn in attentions.items():
        if not isinstance(attn, MultiHeadAttention):
            raise TypeError(f"{name} must be a MultiHeadAttention, "
                            f"got {type(attn).__name__}")
        if attn.n_kv_heads != attn.n_heads:
            raise ValueError(f"{name} has n_kv_heads={attn.n_kv_heads} != n_heads="
                             f"{attn.n_heads}: nn.MultiheadAttention has no GQA or MQA")
        if attn.rope is not None:
            raise ValueError(f"{name} uses RoPE: nn.MultiheadAttention rotates nothing")
        if attn.q_proj.bias is None:
            raise ValueError(f"{name} has no biases: the 2017 twin has them everywhere")
    ffn = ours.ffn
    if not isinstance(ffn, DenseFFN):
        raise TypeError(f"ffn must be a DenseFFN, got {type(ffn).__name__}")
    act = ffn.activation
    if act not in (F.relu, torch.relu) and not isinstance(act, nn.ReLU):
        name = getattr(act, "__name__", repr(act))
        raise ValueError(f"ffn's activation must be ReLU (F.relu), got {name}")
    if ffn.up_proj.bias is None:
        raise ValueError("ffn has no biases: the 2017 twin has them everywhere")
    names = ("self_attn_norm", "cross_attn_norm", "ffn_norm")
    norms = {name: getattr(ours, name) for name in names if hasattr(ours, name)}
    for name, norm in norms.items():
        if not isinstance(norm, LayerNorm):
            raise TypeError(f"{name} must be a LayerNorm, got {type(norm).__name__}")
    eps = {name: norm.eps for name, norm in norms.items()}
    if len(set(eps.values())) != 1:
        raise ValueError(f"the norms have different eps {eps}: PyTorch's layer has "
                         "one layer_norm_eps")
    return ours.self_attn_norm.eps
# --8<-- [end:twin_eps]


# --8<-- [start:torch_twins]
def copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    packed = pack_qkv(ours)  # one Linear with rows q; k; v
    with torch.no_grad():
        theirs.in_proj_weight.copy_(packed.weight)
        theirs.in_proj_bias.copy_(packed.bias)
        theirs.out_proj.weight.copy_(ours.o_proj.weight)
        theirs.out_proj.bias.copy_(ours.o_proj.bias)


# our norms, by role -> PyTorch's, by position
TORCH_ENCODER_NORMS = {"self_attn_norm": "norm1", "ffn_norm": "norm2"}
TORCH_DECODER_NORMS = {"self_attn_norm": "norm1", "cross_attn_norm": "norm2",
                       "ffn_norm": "norm3"}


def copy_ffn_and_norms(ours: nn.Module, theirs: nn.Module,
                       norms: dict[str, str]) -> None:
    with torch.no_grad():
        theirs.linear1.weight.copy_(ours.ffn.up_proj.weight)
        theirs.linear1.bias.copy_(ours.ffn.up_proj.bias)
        theirs.linear2.weight.copy_(ours.ffn.down_proj.weight)
        theirs.linear2.bias.copy_(ours.ffn.down_proj.bias)
        for mine, their in norms.items():
            getattr(theirs, their).weight.copy_(getattr(ours, mine).weight)
            getattr(theirs, their).bias.copy_(getattr(ours, mine).bias)


def torch_encoder_layer(ours: PostNormEncoderLayer) -> nn.TransformerEncoderLayer:
    """PyTorch's post-norm ReLU encoder layer holding a copy of our weights, dropout 0:
    self_attn, linear1/linear2, norm1 and norm2 (`TORCH_ENCODER_NORMS`)."""
    if not isinstance(ours, PostNormEncoderLayer):
        raise TypeError(f"ours must be a PostNormEncoderLayer, "
                        f"got {type(ours).__name__}")
    eps, w = twin_eps(ours), ours.ffn.up_proj.weight
    theirs = nn.TransformerEncoderLayer(
        ours.d_model, ours.self_attn.n_heads, ours.ffn.d_ff, dropout=0.0,
        activation="relu", layer_norm_eps=eps, batch_first=True, norm_first=False,
        dtype=w.dtype, device=w.device)
    copy_attention(ours.self_attn, theirs.self_attn)
    copy_ffn_and_norms(ours, theirs, TORCH_ENCODER_NORMS)
    return theirs


def torch_decoder_layer(ours: PostNormDecoderLayer) -> nn.TransformerDecoderLayer:
    """PyTorch's post-norm ReLU decoder layer holding a copy of our weights, dropout 0:
    self_attn, multihead_attn (the cross-attention), linear1/linear2, norm1..norm3
    (`TORCH_DECODER_NORMS`)."""
    if not isinstance(ours, PostNormDecoderLayer):
        raise TypeError(f"ours must be a PostNormDecoderLayer, "
                        f"got {type(ours).__name__}")
    eps, w = twin_eps(ours), ours.ffn.up_proj.weight
    theirs = nn.TransformerDecoderLayer(
        ours.d_model, ours.self_attn.n_heads, ours.ffn.d_ff, dropout=0.0,
        activation="relu", layer_norm_eps=eps, batch_first=True, norm_first=False,
        dtype=w.dtype, device=w.device)
    copy_attention(ours.self_attn, theirs.self_attn)
    copy_attention(ours.cross_attn, theirs.multihead_attn)
    copy_ffn_and_norms(ours, theirs, TORCH_DECODER_NORMS)
    return theirs
# --8<-- [end:torch_twins]
