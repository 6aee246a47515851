"""The rows of chapters 1-7: attention, the GPT-2 and Llama blocks, GPT-NeoX's
parallel block, the norms, and the MoE layer of chapter 9. Each function returns a
`build()` that makes the two contenders with the same weights and their largest
difference."""

from __future__ import annotations

import torch
from torch import nn

from literate.tools.bench.common import fwd, fwd_bwd, max_diff


def _gpt2_pair(d: int, heads: int):
    from transformers import GPT2Config
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    from literate.models.gpt2 import copy_hf_gpt2_block
    from literate.parts.blocks import gpt2_block

    torch.manual_seed(0)
    config = GPT2Config(
        n_embd=d,
        n_head=heads,
        n_positions=2048,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        attn_implementation="sdpa",
    )
    theirs = GPT2Block(config, layer_idx=0).eval()
    ours = gpt2_block(d, heads, dropout=0.0).eval()
    copy_hf_gpt2_block(ours, theirs)
    return ours, theirs


def gpt2_block_forward(batch: int, length: int, d: int = 768, heads: int = 12):
    def build():
        ours, theirs = _gpt2_pair(d, heads)
        x = torch.randn(batch, length, d)
        a, b = fwd(ours, x), fwd(theirs, x)
        return a, b, max_diff(a(), b())

    return build


def gpt2_block_backward(batch: int, length: int, d: int = 768, heads: int = 12):
    def build():
        ours, theirs = _gpt2_pair(d, heads)
        x1 = torch.randn(batch, length, d, requires_grad=True)
        x2 = x1.detach().clone().requires_grad_()
        grad = torch.randn(batch, length, d)
        a, b = fwd_bwd(ours, x1, grad), fwd_bwd(theirs, x2, grad)
        x1.grad = x2.grad = None
        a(), b()
        return a, b, (x1.grad - x2.grad).abs().max().item()

    return build


def mha_forward(batch: int = 4, length: int = 128, d: int = 512, heads: int = 8):
    def build():
        from literate.parts.multi_head import MultiHeadAttention, load_packed_qkv

        torch.manual_seed(0)
        theirs = nn.MultiheadAttention(d, heads, batch_first=True).eval()
        ours = MultiHeadAttention(d, heads, bias=True).eval()
        with torch.no_grad():
            load_packed_qkv(ours, theirs.in_proj_weight, theirs.in_proj_bias)
            ours.o_proj.weight.copy_(theirs.out_proj.weight)
            ours.o_proj.bias.copy_(theirs.out_proj.bias)
        x = torch.randn(batch, length, d)
        a = fwd(ours, x, causal=False)
        b = fwd(theirs, x, x, x, need_weights=False)
        return a, b, max_diff(a(), b())

    return build


def gqa_rope_forward(
    batch: int = 2, length: int = 256, d: int = 512, heads: int = 8, kv_heads: int = 2
):
    def build():
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import (
            LlamaAttention,
            LlamaRotaryEmbedding,
        )

        from literate.parts.multi_head import MultiHeadAttention

        torch.manual_seed(0)
        config = LlamaConfig(
            hidden_size=d,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            max_position_embeddings=4096,
            attn_implementation="sdpa",
        )
        theirs = LlamaAttention(config, layer_idx=0).eval()
        rotary = LlamaRotaryEmbedding(config)
        ours = MultiHeadAttention(
            d,
            heads,
            kv_heads,
            rope=True,
            rope_base=config.rope_parameters["rope_theta"],
        ).eval()
        ours.load_state_dict(theirs.state_dict(), strict=False)
        x = torch.randn(batch, length, d)
        positions = torch.arange(length)[None].expand(batch, -1)

        def hf():  # the rotary tables are part of the work: our layer makes (or reuses) its own
            with torch.no_grad():
                return theirs(
                    x, position_embeddings=rotary(x, positions), attention_mask=None
                )[0]

        a = fwd(ours, x, causal=True)
        return a, hf, max_diff(a(), hf())

    return build


def _llama_config(d: int, heads: int, kv_heads: int, d_ff: int, **extra):
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=d,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        intermediate_size=d_ff,
        max_position_embeddings=4096,
        rms_norm_eps=1e-5,
        attn_implementation="sdpa",
        **extra,
    )


def _hf_layer_call(theirs: nn.Module, rotary: nn.Module, x: torch.Tensor):
    positions = torch.arange(x.shape[1])[None].expand(x.shape[0], -1)

    def call():  # the rotary tables are part of the work: our layers make (or reuse) theirs
        return theirs(x, position_embeddings=rotary(x, positions), attention_mask=None)

    return call


def llama_block_pass(
    batch: int = 2,
    length: int = 256,
    d: int = 512,
    heads: int = 8,
    kv_heads: int = 2,
    d_ff: int = 1376,
    backward: bool = False,
):
    def build():
        from transformers.models.llama.modeling_llama import (
            LlamaDecoderLayer,
            LlamaRotaryEmbedding,
        )

        from literate.models.llama import load_renamed
        from literate.parts.blocks import llama_block

        torch.manual_seed(0)
        config = _llama_config(d, heads, kv_heads, d_ff)
        theirs = LlamaDecoderLayer(config, layer_idx=0).eval()
        ours = llama_block(
            d, heads, kv_heads, d_ff, rope_base=config.rope_parameters["rope_theta"]
        ).eval()
        load_renamed(
            ours,
            theirs.state_dict(),
            [
                (r"^self_attn\.", "attn."),
                (r"^mlp\.", "ffn."),
                (r"^input_layernorm\.", "attn_norm."),
                (r"^post_attention_layernorm\.", "ffn_norm."),
            ],
        )
        x = torch.randn(batch, length, d, requires_grad=backward)
        hf = _hf_layer_call(theirs, LlamaRotaryEmbedding(config), x)
        if not backward:
            a = fwd(ours, x)

            def b():
                with torch.no_grad():
                    return hf()

            return a, b, max_diff(a(), b())
        grad = torch.randn(batch, length, d)

        def a():
            out = ours(x)
            out.backward(grad)
            return out

        def b():
            out = hf()
            out.backward(grad)
            return out

        return a, b, max_diff(a().detach(), b().detach())

    return build


def neox_block_forward(batch: int = 2, length: int = 256, d: int = 512, heads: int = 8):
    def build():
        from transformers import GPTNeoXConfig
        from transformers.models.gpt_neox.modeling_gpt_neox import (
            GPTNeoXLayer,
            GPTNeoXRotaryEmbedding,
        )

        from literate.models.parallel import (
            load_hf_neox_block,
            neox_block_from_hf_config,
        )

        torch.manual_seed(0)
        config = GPTNeoXConfig(
            hidden_size=d,
            num_attention_heads=heads,
            intermediate_size=4 * d,
            use_parallel_residual=True,
            attn_implementation="sdpa",
        )
        theirs = GPTNeoXLayer(config, layer_idx=0).eval()
        ours = load_hf_neox_block(
            neox_block_from_hf_config(config).eval(), theirs.state_dict(), config
        )
        x = torch.randn(batch, length, d)
        hf = _hf_layer_call(theirs, GPTNeoXRotaryEmbedding(config), x)
        a = fwd(ours, x)

        def b():
            with torch.no_grad():
                return hf()

        return a, b, max_diff(a(), b())

    return build


def llama_rms_norm_forward(shape=(4, 512, 768)):
    def build():
        from transformers.models.llama.modeling_llama import LlamaRMSNorm

        from literate.parts.norms import RMSNorm

        theirs = LlamaRMSNorm(shape[-1], eps=1e-6)
        ours = RMSNorm(shape[-1], eps=1e-6)
        with torch.no_grad():
            theirs.weight.normal_()
            ours.weight.copy_(theirs.weight)
        x = torch.randn(shape)
        a, b = fwd(ours, x), fwd(theirs, x)
        return a, b, max_diff(a(), b())

    return build


def layer_norm_forward(shape=(4, 512, 768)):
    def build():
        from literate.parts.norms import LayerNorm

        theirs = nn.LayerNorm(shape[-1])
        ours = LayerNorm(shape[-1])
        with torch.no_grad():
            theirs.weight.normal_(), theirs.bias.normal_()
            ours.weight.copy_(theirs.weight), ours.bias.copy_(theirs.bias)
        x = torch.randn(shape)
        a, b = fwd(ours, x), fwd(theirs, x)
        return a, b, max_diff(a(), b())

    return build


def rms_norm_forward(shape=(4, 512, 768)):
    def build():
        from literate.parts.norms import RMSNorm

        theirs = nn.RMSNorm(shape[-1], eps=1e-6)
        ours = RMSNorm(shape[-1], eps=1e-6)
        with torch.no_grad():
            theirs.weight.normal_()
            ours.weight.copy_(theirs.weight)
        x = torch.randn(shape)
        a, b = fwd(ours, x), fwd(theirs, x)
        return a, b, max_diff(a(), b())

    return build


def mixtral_moe_forward(
    experts_implementation: str,
    batch: int = 2,
    length: int = 256,
    d: int = 256,
    d_ff: int = 128,
    n_experts: int = 64,
    top_k: int = 6,
):
    """Fine-grained MoE, inference: our MoEFFN (dispatch's grouped_mm path in float32)
    against HF's MixtralSparseMoeBlock with the same weights, its experts run by
    `experts_implementation` ("grouped_mm", a MixtralForCausalLM's default, or "eager",
    a loop over the experts hit)."""

    def build():
        from functools import partial

        from transformers import MixtralConfig
        from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

        from literate.parts.moe import Experts, MoEFFN
        from literate.parts.routers import Router, mixtral_router

        torch.manual_seed(0)
        config = MixtralConfig(
            hidden_size=d,
            intermediate_size=d_ff,
            num_local_experts=n_experts,
            num_experts_per_tok=top_k,
            router_jitter_noise=0.0,
        )
        config._experts_implementation = experts_implementation
        theirs = MixtralSparseMoeBlock(config).eval()
        ours = MoEFFN(
            Router(d, n_experts, partial(mixtral_router, top_k=top_k)),
            Experts(n_experts, d, d_ff),
        ).eval()
        theirs.load_state_dict(
            {k.replace("router.", "gate."): v for k, v in ours.state_dict().items()},
            strict=True,
        )
        x = torch.randn(batch, length, d)
        a, b = fwd(ours, x), fwd(theirs, x)
        return a, b, max_diff(a(), b())

    return build
