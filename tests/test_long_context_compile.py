"""Every language model of chapter 10 compiles whole: `torch.compile(model.run,
fullgraph=True)` captures a tiny Mistral (windows), Gemma 3 (local and global layers),
gpt-oss (sinks, windows, YaRN, the mixture of experts) and DeepSeek-V3 (latent
attention with YaRN, a dense and an MoE block) in one graph each, fresh (their RoPE
tables grow inside the graph), and the compiled logits equal the eager ones bit for
bit. backend="eager": dynamo captures the whole forward (what a host sync or a graph
break would stop) and runs the captured graph with the same kernels; the blocks, rings
and latent steps are compiled with "aot_eager" (AOTAutograd's tracing as well) in
chapter 10's page and in tests/test_mistral_window.py and tests/test_mla.py.
"""

from __future__ import annotations

import pytest
import torch

from literate.models.deepseek_v3 import deepseek_v3_from_hf_config
from literate.models.gemma3 import gemma3_model
from literate.models.gpt_oss import gpt_oss_model
from literate.models.mistral import mistral_model

from harness import tiny_deepseek_v3_config

VOCAB, T = 61, 12


def tiny(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if name == "mistral":
        return mistral_model(VOCAB, 32, 32, 4, 2, 2, 48, window=4)  # 2 layers, d_ff 48
    if name == "gemma3":
        return gemma3_model(
            VOCAB,
            32,
            32,
            4,
            2,
            48,
            d_head=8,
            window=4,
            layer_types=["sliding_attention", "full_attention"],
            query_pre_attn_scalar=8,
        )
    if name == "gpt_oss":
        return gpt_oss_model(VOCAB, 32, 32, 4, 2, 16, 4, 2, windows=[4, None], d_head=8)
    return deepseek_v3_from_hf_config(
        tiny_deepseek_v3_config(
            rope_parameters={
                "rope_type": "yarn",
                "rope_theta": 10_000.0,
                "factor": 4.0,
                "original_max_position_embeddings": 8,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
            }
        )
    )


@pytest.mark.parametrize("name", ["mistral", "gemma3", "gpt_oss", "deepseek_v3"])
def test_the_model_compiles_whole_and_equals_eager(name):
    eager, fresh = tiny(name).eval(), tiny(name).eval()  # the same weights, no tables
    assert len(eager.blocks) == 2
    ids = torch.randint(0, VOCAB, (2, T), generator=torch.Generator().manual_seed(1))
    compiled = torch.compile(fresh.run, fullgraph=True, backend="eager")
    with torch.no_grad():
        assert torch.equal(compiled(ids), eager.run(ids))
