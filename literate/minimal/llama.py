"""The modern decoder (Llama 2 and 3, Touvron et al. 2023; Qwen3 with `qk_norm=True`):
pre-norm with RMSNorm, grouped-query attention with RoPE, SwiGLU, no biases, no
position embedding (RoPE turns q and k inside every attention). `cache`: one KVCache per
block, for decoding. Shapes: B batch, T tokens, V vocabulary, d_model model width.
"""

from __future__ import annotations

import re

from torch import nn

from literate.minimal.ffn import SwiGLU
from literate.minimal.multi_head import GQAttention
from literate.minimal.norms import RMSNorm


# --8<-- [start:llama_block]
class LlamaBlock(nn.Module):
    """x = x + Attn(RMSNorm(x)); x = x + SwiGLU(RMSNorm(x)). qk_norm=True: Qwen3's
    block, whose attention RMS-normalises each head's q and k before RoPE."""

    def __init__(self, *, d_model, n_heads, n_kv_heads, d_ff, d_head=None,
                 rope_base=10000.0, eps=1e-5, qk_norm=False):
        super().__init__()
        self.attn_norm = RMSNorm(d_model=d_model, eps=eps)  # HF's input_layernorm
        self.attn = GQAttention(d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads,
                                d_head=d_head, rope_base=rope_base, qk_norm=qk_norm,
                                eps=eps)
        self.ffn_norm = RMSNorm(d_model=d_model, eps=eps)  # post_attention_layernorm
        self.ffn = SwiGLU(d_model=d_model, d_ff=d_ff)

    def forward(self, x, cache=None):
        x = x + self.attn(self.attn_norm(x), cache)
        return x + self.ffn(self.ffn_norm(x))
# --8<-- [end:llama_block]


# --8<-- [start:llama_model]
class LlamaModel(nn.Module):
    """ids [B, T] -> logits [B, T, V]. tied=True: lm_head is the embedding (Llama 3.2
    1B, Qwen3's small models). cache: a list of KVCache, one per block (`generate`)."""

    def __init__(self, *, vocab_size, d_model, n_layers, n_heads, n_kv_heads, d_ff,
                 d_head=None, rope_base=10000.0, eps=1e-5, qk_norm=False, tied=False):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model)  # HF's embed_tokens
        self.blocks = nn.ModuleList(
            LlamaBlock(d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads,
                       d_ff=d_ff, d_head=d_head, rope_base=rope_base, eps=eps,
                       qk_norm=qk_norm)
            for _ in range(n_layers))
        self.final_norm = RMSNorm(d_model=d_model, eps=eps)  # HF's model.norm
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        if tied:
            self.lm_head.weight = self.token_embedding.weight

    def forward(self, ids, cache=None):
        x = self.token_embedding(ids)  # [B, T, d_model]
        for i, block in enumerate(self.blocks):
            x = block(x, None if cache is None else cache[i])
        return self.lm_head(self.final_norm(x))  # [B, T, V]
# --8<-- [end:llama_model]


# --8<-- [start:load_hf_llama]
HF_LLAMA_NAMES = [  # (Hugging Face's name, ours), applied in turn to every key
    (r"^model\.", ""), (r"^embed_tokens\.", "token_embedding."),
    (r"^norm\.", "final_norm."), (r"^layers\.", "blocks."), (r"self_attn\.", "attn."),
    (r"mlp\.", "ffn."), (r"input_layernorm\.", "attn_norm."),
    (r"post_attention_layernorm\.", "ffn_norm.")]


def load_hf_llama(model, state_dict):
    """Copy a Hugging Face LlamaForCausalLM's (or Qwen3ForCausalLM's) state dict into
    a LlamaModel of the same configuration, renaming each key; every key must match."""
    renamed = {}
    for key, value in state_dict.items():
        for theirs, ours in HF_LLAMA_NAMES:
            key = re.sub(theirs, ours, key)
        renamed[key] = value
    model.load_state_dict(renamed)
    return model
# --8<-- [end:load_hf_llama]
