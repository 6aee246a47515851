"""The quick path's self-check: the function at the bottom of `quick.py`
(`python -m literate.tools.export quick`), which needs nothing but torch and the
minimal blocks it checks."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from literate.minimal.attention import causal_mask, scaled_dot_product_attention
from literate.minimal.generate import generate
from literate.minimal.llama import LlamaModel
from literate.minimal.norms import RMSNorm


# --8<-- [start:check_quick]
def check_quick() -> None:
    """The quick path's model, Llama's and Qwen3's (QK-norm): generating with the cache
    gives the tokens of rerunning the whole sequence at every step, and a later token
    never changes an earlier logit; attention equals PyTorch's fused kernel and RMSNorm
    PyTorch's, in float64."""
    torch.manual_seed(0)
    for qk_norm in (False, True):
        model = LlamaModel(vocab_size=50, d_model=32, n_layers=2, n_heads=4,
                           n_kv_heads=2, d_ff=64, d_head=16 if qk_norm else None,
                           qk_norm=qk_norm).double().eval()
        prompt = torch.randint(0, 50, (2, 5))
        out = generate(model, prompt, max_new_tokens=8)
        ids = prompt
        with torch.no_grad():
            for _ in range(8):
                ids = torch.cat((ids, model(ids)[:, -1:].argmax(dim=-1)), dim=1)
            changed = ids.clone()
            changed[:, 7:] = (changed[:, 7:] + 1) % 50
            torch.testing.assert_close(model(changed)[:, :7], model(ids)[:, :7],
                                       atol=0, rtol=0)
        if not torch.equal(out, ids):
            raise AssertionError(f"cached generate differs: {out.tolist()}")
    q, k, v = (torch.randn(2, 4, 6, 8, dtype=torch.float64) for _ in range(3))
    out, _ = scaled_dot_product_attention(q, k, v, causal_mask(6, 6))
    fused = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, fused, atol=1e-12, rtol=0)
    x = torch.randn(3, 16, dtype=torch.float64)
    norm = RMSNorm(d_model=16, eps=1e-6).double()
    torch.testing.assert_close(norm(x), F.rms_norm(x, (16,), norm.weight, 1e-6),
                               atol=1e-12, rtol=0)
# --8<-- [end:check_quick]
