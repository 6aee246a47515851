"""Decoding with a KV cache (chapter 8): the prompt in one forward pass (prefill), then
one token per step, each step reading the earlier tokens' keys and values from the
cache. Greedy at temperature 0, else sampled. Shapes: B batch, T0 prompt length, V
vocabulary.
"""

from __future__ import annotations

import torch

from literate.minimal.cache import KVCache


# --8<-- [start:generate]
@torch.no_grad()
def generate(model, ids, *, max_new_tokens, temperature=0.0, generator=None):
    """ids [B, T0] -> [B, T0 + max_new_tokens]. `model(ids, cache)` -> logits, with
    one KVCache per block (LlamaModel). Put the model in eval mode first."""
    cache = [KVCache() for _ in model.blocks]
    new = ids  # what the model has not read yet: the whole prompt, then one token
    for _ in range(max_new_tokens):
        logits = model(new, cache)[:, -1]  # [B, V]: the last position's
        if temperature == 0:
            new = logits.argmax(dim=-1, keepdim=True)  # [B, 1]: greedy
        else:
            probs = (logits / temperature).softmax(dim=-1)  # [B, V]
            new = torch.multinomial(probs, 1, generator=generator)  # [B, 1]
        ids = torch.cat((ids, new), dim=1)
    return ids
# --8<-- [end:generate]
