"""The KV cache of one attention layer: the keys and values of every token seen so far,
so that decoding projects only the new token (chapter 8). Shapes: B batch, H_kv
key/value heads, T cached tokens, d_head head width.
"""

from __future__ import annotations

import torch


# --8<-- [start:kv_cache]
class KVCache:
    """Keys and values [B, H_kv, T, d_head], grown by torch.cat at every step. T, the
    number cached, is also the position of the next token (`offset`)."""

    def __init__(self):
        self.k = self.v = None

    @property
    def offset(self):
        return 0 if self.k is None else self.k.shape[2]

    def update(self, k, v):
        """Append the new tokens' k, v [B, H_kv, T_new, d_head]; return all of them."""
        if self.k is not None:
            k, v = torch.cat((self.k, k), dim=2), torch.cat((self.v, v), dim=2)
        self.k, self.v = k, v
        return k, v  # [B, H_kv, T + T_new, d_head]
# --8<-- [end:kv_cache]
