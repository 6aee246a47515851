"""The short self-check at the bottom of every exported era file.

`python -m literate.export NAME` writes one standalone file per era; running that file
(`python gpt2.py`) runs its self-check, which needs nothing but torch: it compares the
file's layers with PyTorch's own (`F.scaled_dot_product_attention`,
`nn.MultiheadAttention`, `nn.TransformerEncoderLayer`) and checks what a model must do
(causality, greedy decoding, loading weights by name). Each function below uses only
names its era file defines, so the same code runs here (tests/test_export.py) and there.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from literate.attention import causal_allowed, padding_allowed, scaled_dot_product_attention
from literate.heads import MultiHeadAttention, load_packed_qkv
from literate.models import gpt2_block_targets, gpt2_model, load_hf_gpt2
from literate.sampling import sampler
from literate.seq2seq import EncoderDecoder
from literate.torch_twins import torch_encoder_layer

__all__ = ["check_attention", "check_transformer2017", "check_gpt2"]


# --8<-- [start:check_attention]
def check_attention() -> None:
    """Attention equals PyTorch's fused kernel (float64, with a mask, and gradients);
    multi-head attention equals nn.MultiheadAttention; GQA's fused and transparent paths
    agree; a cached decode equals the full forward."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g, dtype=torch.float64,
                           requires_grad=True) for _ in range(3))
    valid = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    mask = causal_allowed(5, 5) & padding_allowed(valid)
    ours = scaled_dot_product_attention(q, k, v, mask).output
    fused = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    grads = [torch.autograd.grad(o.sum(), (q, k, v)) for o in (ours, fused)]
    torch.testing.assert_close(ours, fused, atol=1e-12, rtol=0)
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)

    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(16, 4, batch_first=True, dtype=torch.float64)
    layer = MultiHeadAttention(16, 4, bias=True).double()
    with torch.no_grad():
        load_packed_qkv(layer, theirs.in_proj_weight, theirs.in_proj_bias)
        layer.o_proj.weight.copy_(theirs.out_proj.weight)
        layer.o_proj.bias.copy_(theirs.out_proj.bias)
    x = torch.randn(2, 5, 16, generator=g, dtype=torch.float64)
    expected = theirs(x, x, x, key_padding_mask=~valid, need_weights=False)[0]
    torch.testing.assert_close(layer(x, causal=False, key_valid=valid), expected,
                               atol=1e-12, rtol=0)

    gqa = MultiHeadAttention(16, 4, 2, rope=True).double().eval()
    fast = gqa(x, causal=True)
    transparent, _ = gqa(x, causal=True, return_weights=True)
    torch.testing.assert_close(fast, transparent, atol=1e-12, rtol=0)
    with torch.no_grad():
        cache = gqa.new_cache(batch=2, capacity=5)
        steps = [gqa(x[:, t:t + 1], causal=True, cache=cache) for t in range(5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), fast.detach(), atol=1e-12,
                               rtol=0)
# --8<-- [end:check_attention]


# --8<-- [start:check_transformer2017]
def check_transformer2017() -> None:
    """The encoder layer equals nn.TransformerEncoderLayer holding its weights; the
    model is causal in its targets and decodes greedily."""
    torch.manual_seed(0)
    model = EncoderDecoder(13, 16, 2, 32, 2, dropout=0.0, max_length=16).double().eval()
    layer = model.encoder[0]
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    valid = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    theirs = torch_encoder_layer(layer)
    with torch.no_grad():
        torch.testing.assert_close(layer(x, key_valid=valid),
                                   theirs(x, src_key_padding_mask=~valid),
                                   atol=1e-12, rtol=0)
        source = torch.tensor([[3, 4, 5, 2, 0], [6, 7, 2, 0, 0]])
        targets = torch.tensor([[5, 4, 3, 2], [7, 6, 2, 0]])
        logits = model(source, targets)
        changed = targets.clone()
        changed[:, 2:] = 9
        torch.testing.assert_close(model(source, changed)[:, :2], logits[:, :2],
                                   atol=0, rtol=0)  # position t never reads t + 1..
        out = model.greedy_decode(source, max_new_tokens=6)
    if out.shape[0] != 2 or out.shape[1] > 6 or not bool((out < 13).all()):
        raise AssertionError(f"greedy_decode returned {out}")
# --8<-- [end:check_transformer2017]


# --8<-- [start:check_gpt2]
def check_gpt2() -> None:
    """A tiny GPT-2 is causal; weights written under Hugging Face's names load back
    into a fresh model and give the same logits; generate is greedy (each new token is
    the argmax after the tokens before it), and it samples reproducibly."""
    torch.manual_seed(0)
    model = gpt2_model(50, 16, 32, 4, 2, dropout=0.0).eval()
    ids = torch.randint(0, 50, (2, 10))
    with torch.no_grad():
        logits = model(ids)
        changed = ids.clone()
        changed[:, 6:] = (changed[:, 6:] + 1) % 50
        torch.testing.assert_close(model(changed)[:, :6], logits[:, :6], atol=0, rtol=0)

    def conv1d_or_same(parts, conv1d):  # the HF layout of a target: stacked, transposed
        weight = torch.cat([p.detach() for p in parts])
        return weight.T.contiguous() if conv1d else weight

    state = {"transformer.wte.weight": model.token_embedding.weight.detach(),
             "transformer.wpe.weight": model.positions.embedding.weight.detach(),
             "transformer.ln_f.weight": model.final_norm.weight.detach(),
             "transformer.ln_f.bias": model.final_norm.bias.detach()}
    for i, block in enumerate(model.blocks):
        for name, (parts, conv1d) in gpt2_block_targets(block, f"h.{i}.").items():
            state[f"transformer.{name}"] = conv1d_or_same(parts, conv1d)
    fresh = gpt2_model(50, 16, 32, 4, 2, dropout=0.0).eval()
    config = {"model_type": "gpt2", "vocab_size": 50, "n_positions": 16, "n_embd": 32,
              "n_layer": 2, "n_head": 4}  # a config.json, GPT-2's defaults for the rest
    load_hf_gpt2(fresh, state, config)
    with torch.no_grad():
        torch.testing.assert_close(fresh(ids), logits, atol=0, rtol=0)
    out = model.generate(ids[:, :4], 6)
    with torch.no_grad():  # greedy: each new token is the argmax of the logits before
        expected = model(out[:, :-1])[:, 3:].argmax(dim=-1)
    if not torch.equal(out[:, :4], ids[:, :4]) or not torch.equal(out[:, 4:], expected):
        raise AssertionError(f"generate is not greedy: {out.tolist()}")
    seeded = [sampler(top_k=5, top_p=0.9, generator=torch.Generator().manual_seed(1))
              for _ in range(2)]
    draws = [model.generate(ids[:, :4], 6, choose=choose) for choose in seeded]
    if not torch.equal(draws[0], draws[1]):
        raise AssertionError("seeded sampling is not reproducible")
# --8<-- [end:check_gpt2]
