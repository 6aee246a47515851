"""How fast our layers run next to the production layers they are proven equal to.

    python -m literate.tools.bench            # every row, one intra-op thread
    python -m literate.tools.bench --quick    # fewer rounds, for a smoke run
    python -m literate.tools.bench --only gpt2 --threads 2
    python -m literate.tools.bench --json literate/data/bench.json --pin   # what `make bench` runs

Each row builds our layer and the production layer with the same weights, checks that they
compute the same thing (the largest difference is printed), and then times them
**interleaved** in one run: round after round, each contender runs `n` calls, the order
alternating (A B, B A, ...), so that a noisy, shared machine slows both alike. A round's
ratio is ours / theirs; the table gives the median ratio over the rounds and its spread
(min-max). Below 1.0 ours is faster. Times are wall-clock medians per call.

Speed is measured here, never asserted in tests: a timing test on a shared 2-core machine
would fail at random. Float32 on the CPU throughout, inference rows under `torch.no_grad()`.

`--json PATH` also writes the results as JSON, in the structure `RESULTS_SCHEMA` describes
and `check_results` checks: the machine, the versions, the date and the commit, then one
entry per row. The site's benchmarks page and its figure read the committed file,
`literate/data/bench.json`, through `load_results`, never a live run. The site caches
what its pages print and its figures keyed on the source of `literate/*.py`, which the
JSON is not: `--pin` writes the file's SHA-256 into `RESULTS_SHA256` below, so that new
results change that source (and the caches), and `load_results` refuses a committed file
whose digest is not the pinned one.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from literate.tools.timing import measure

__all__ = ["Row", "ROWS", "RESULTS_PATH", "RESULTS_SCHEMA", "check_results", "load_results",
           "main"]

RESULTS_PATH = Path(__file__).parents[1] / "data" / "bench.json"
# The committed file's digest, written by `--pin`.
RESULTS_SHA256 = "5fd4f59f01424e7315105496b001abbfa014210228c4c593a623877563710cb3"


@dataclass
class Row:
    """One comparison: what it is, and a function that builds the two contenders."""

    group: str  # a word to select rows with --only
    name: str
    reference: str
    build: Callable[[], tuple[Callable[[], object], Callable[[], object], float]]
    # build() -> (ours, theirs, max |difference| of their outputs)
    rounds: int = 0  # at least this many rounds (not with --quick): a close race


def _max_diff(a: object, b: object) -> float:
    a = a[0] if isinstance(a, tuple) else a
    b = b[0] if isinstance(b, tuple) else b
    return (a.float() - b.float()).abs().max().item()


def _fwd(module: nn.Module, *args, **kwargs) -> Callable[[], object]:
    def run():
        with torch.no_grad():
            return module(*args, **kwargs)
    return run


def _fwd_bwd(module: nn.Module, x: torch.Tensor, grad: torch.Tensor, **kwargs) -> Callable[[], object]:
    def run():
        out = module(x, **kwargs)
        out = out[0] if isinstance(out, tuple) else out
        out.backward(grad)
        return out
    return run


# ---------------------------------------------------------------------------------------
# The contenders


def _gpt2_pair(d: int, heads: int):
    from transformers import GPT2Config
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    from literate.models.gpt2 import copy_hf_gpt2_block
    from literate.parts.blocks import gpt2_block

    torch.manual_seed(0)
    config = GPT2Config(n_embd=d, n_head=heads, n_positions=2048, resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, attn_implementation="sdpa")
    theirs = GPT2Block(config, layer_idx=0).eval()
    ours = gpt2_block(d, heads, dropout=0.0).eval()
    copy_hf_gpt2_block(ours, theirs)
    return ours, theirs


def gpt2_block_forward(batch: int, length: int, d: int = 768, heads: int = 12):
    def build():
        ours, theirs = _gpt2_pair(d, heads)
        x = torch.randn(batch, length, d)
        a, b = _fwd(ours, x), _fwd(theirs, x)
        return a, b, _max_diff(a(), b())
    return build


def gpt2_block_backward(batch: int, length: int, d: int = 768, heads: int = 12):
    def build():
        ours, theirs = _gpt2_pair(d, heads)
        x1 = torch.randn(batch, length, d, requires_grad=True)
        x2 = x1.detach().clone().requires_grad_()
        grad = torch.randn(batch, length, d)
        a, b = _fwd_bwd(ours, x1, grad), _fwd_bwd(theirs, x2, grad)
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
        a = _fwd(ours, x, causal=False)
        b = _fwd(theirs, x, x, x, need_weights=False)
        return a, b, _max_diff(a(), b())
    return build


def gqa_rope_forward(batch: int = 2, length: int = 256, d: int = 512, heads: int = 8, kv_heads: int = 2):
    def build():
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import (
            LlamaAttention,
            LlamaRotaryEmbedding,
        )

        from literate.parts.multi_head import MultiHeadAttention

        torch.manual_seed(0)
        config = LlamaConfig(hidden_size=d, num_attention_heads=heads, num_key_value_heads=kv_heads,
                             max_position_embeddings=4096, attn_implementation="sdpa")
        theirs = LlamaAttention(config, layer_idx=0).eval()
        rotary = LlamaRotaryEmbedding(config)
        ours = MultiHeadAttention(d, heads, kv_heads, rope=True, rope_base=config.rope_parameters["rope_theta"]).eval()
        ours.load_state_dict(theirs.state_dict(), strict=False)
        x = torch.randn(batch, length, d)
        positions = torch.arange(length)[None].expand(batch, -1)

        def hf():  # the rotary tables are part of the work: our layer makes (or reuses) its own
            with torch.no_grad():
                return theirs(x, position_embeddings=rotary(x, positions), attention_mask=None)[0]

        a = _fwd(ours, x, causal=True)
        return a, hf, _max_diff(a(), hf())
    return build


def gpt2_model_forward(batch: int = 4, length: int = 128, d: int = 256, heads: int = 4, layers: int = 4,
                       vocab: int = 5000):
    def build():
        from transformers import GPT2Config, GPT2LMHeadModel

        from literate.models.gpt2 import copy_hf_gpt2, gpt2_from_hf_config

        torch.manual_seed(0)
        config = GPT2Config(vocab_size=vocab, n_positions=length, n_embd=d, n_layer=layers, n_head=heads,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
                            attn_implementation="sdpa")
        theirs = GPT2LMHeadModel(config).eval()
        ours = gpt2_from_hf_config(config).eval()
        copy_hf_gpt2(ours, theirs)
        ids = torch.randint(0, vocab, (batch, length))
        a = _fwd(ours, ids)

        def hf():
            with torch.no_grad():
                return theirs(ids).logits

        return a, hf, _max_diff(a(), hf())
    return build


def _llama_config(d: int, heads: int, kv_heads: int, d_ff: int, **extra):
    from transformers import LlamaConfig

    return LlamaConfig(hidden_size=d, num_attention_heads=heads, num_key_value_heads=kv_heads,
                       intermediate_size=d_ff, max_position_embeddings=4096, rms_norm_eps=1e-5,
                       attn_implementation="sdpa", **extra)


def _hf_layer_call(theirs: nn.Module, rotary: nn.Module, x: torch.Tensor):
    positions = torch.arange(x.shape[1])[None].expand(x.shape[0], -1)

    def call():  # the rotary tables are part of the work: our layers make (or reuse) theirs
        return theirs(x, position_embeddings=rotary(x, positions), attention_mask=None)
    return call


def llama_block_pass(batch: int = 2, length: int = 256, d: int = 512, heads: int = 8,
                     kv_heads: int = 2, d_ff: int = 1376, backward: bool = False):
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
        ours = llama_block(d, heads, kv_heads, d_ff,
                           rope_base=config.rope_parameters["rope_theta"]).eval()
        load_renamed(ours, theirs.state_dict(), [
            (r"^self_attn\.", "attn."), (r"^mlp\.", "ffn."),
            (r"^input_layernorm\.", "norm1."), (r"^post_attention_layernorm\.", "norm2.")])
        x = torch.randn(batch, length, d, requires_grad=backward)
        hf = _hf_layer_call(theirs, LlamaRotaryEmbedding(config), x)
        if not backward:
            a = _fwd(ours, x)

            def b():
                with torch.no_grad():
                    return hf()
            return a, b, _max_diff(a(), b())
        grad = torch.randn(batch, length, d)

        def a():
            out = ours(x)
            out.backward(grad)
            return out

        def b():
            out = hf()
            out.backward(grad)
            return out
        return a, b, _max_diff(a().detach(), b().detach())
    return build


def llama_model_forward(batch: int = 4, length: int = 128, d: int = 256, heads: int = 4,
                        kv_heads: int = 2, layers: int = 4, d_ff: int = 688, vocab: int = 5000):
    def build():
        from transformers import LlamaForCausalLM

        from literate.models.llama import llama_from_hf_config, load_hf_llama

        torch.manual_seed(0)
        config = _llama_config(d, heads, kv_heads, d_ff, vocab_size=vocab,
                               num_hidden_layers=layers, bos_token_id=None, eos_token_id=None)
        theirs = LlamaForCausalLM(config).eval()
        ours = load_hf_llama(llama_from_hf_config(config).eval(), theirs.state_dict(), config)
        ids = torch.randint(0, vocab, (batch, length))
        a = _fwd(ours, ids)

        def hf():
            with torch.no_grad():
                return theirs(ids).logits

        return a, hf, _max_diff(a(), hf())
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
        config = GPTNeoXConfig(hidden_size=d, num_attention_heads=heads, intermediate_size=4 * d,
                               use_parallel_residual=True, attn_implementation="sdpa")
        theirs = GPTNeoXLayer(config, layer_idx=0).eval()
        ours = load_hf_neox_block(neox_block_from_hf_config(config).eval(), theirs.state_dict(), config)
        x = torch.randn(batch, length, d)
        hf = _hf_layer_call(theirs, GPTNeoXRotaryEmbedding(config), x)
        a = _fwd(ours, x)

        def b():
            with torch.no_grad():
                return hf()
        return a, b, _max_diff(a(), b())
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
        a, b = _fwd(ours, x), _fwd(theirs, x)
        return a, b, _max_diff(a(), b())
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
        a, b = _fwd(ours, x), _fwd(theirs, x)
        return a, b, _max_diff(a(), b())
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
        a, b = _fwd(ours, x), _fwd(theirs, x)
        return a, b, _max_diff(a(), b())
    return build


def sampling_filters(batch: int = 8, vocab: int = 50257, temperature: float | None = None,
                     top_k: int | None = None, top_p: float | None = None):
    def build():
        from transformers.generation.logits_process import (
            LogitsProcessorList,
            TemperatureLogitsWarper,
            TopKLogitsWarper,
            TopPLogitsWarper,
        )

        from literate.decoding.sampling import filter_logits

        torch.manual_seed(0)
        logits = torch.randn(batch, vocab) * 3
        warpers = LogitsProcessorList()
        if temperature is not None:
            warpers.append(TemperatureLogitsWarper(temperature))
        if top_k is not None:
            warpers.append(TopKLogitsWarper(top_k))
        if top_p is not None:
            warpers.append(TopPLogitsWarper(top_p))
        ids = torch.zeros(batch, 1, dtype=torch.long)
        settings = {"temperature": 1.0 if temperature is None else temperature, "top_k": top_k, "top_p": top_p}

        def ours():
            return filter_logits(logits, **settings)

        def theirs():
            return warpers(ids, logits)

        a, b = ours(), theirs()
        same = torch.equal(torch.isinf(a), torch.isinf(b))
        diff = (a.masked_fill(torch.isinf(a), 0) - b.masked_fill(torch.isinf(b), 0)).abs().max().item()
        return ours, theirs, diff if same else float("nan")
    return build


def llama_decoding(beams: int = 1, prompt: int = 32, new_tokens: int = 64):
    """The tiny Llama of literate.numbers.decode_cost: our cached generate (or beam search)
    against HF generate on the same weights; the 'diff' is 0 if the tokens are equal."""
    def build():
        from literate.decoding.beam import beam_generate
        from literate.decoding.generate import generate
        from literate.numbers.decode_cost import TINY_LLAMA
        from literate.tools.decode_timing import _hf_twin

        ours, theirs = _hf_twin(TINY_LLAMA)
        ids = torch.randint(0, TINY_LLAMA["vocab_size"], (2, prompt),
                            generator=torch.Generator().manual_seed(1))
        hf_kwargs = dict(attention_mask=torch.ones_like(ids), do_sample=False,
                         max_new_tokens=new_tokens, pad_token_id=0, num_beams=beams)

        def a():
            if beams == 1:
                return generate(ours, ids, new_tokens)
            return beam_generate(ours, ids, beams, new_tokens)[0]

        def b():
            with torch.no_grad():
                return theirs.generate(ids, **hf_kwargs)

        return a, b, 0.0 if torch.equal(a(), b()) else float("nan")
    return build


def window_decode_step(against: str, window: int = 64, far: int = 8):
    """One decoding step (`cached_run` of one token) of the tiny Llama of
    literate.numbers.decode_cost given a sliding window (Mistral's layout), at position
    far * window, its rings wrapped many times, against the same model's step at
    position window // 2, inside the window (`against="inside"`: what a step past the
    window costs next to one inside it, 1.0 the same), or against the step at the same
    position through plain caches that keep every key (`against="full"`: far * window
    keys, masked to the window). Each call takes its token back (`truncate`), so every
    round times the same position. The 'diff': the far step's logits through the rings
    against through plain caches."""
    def build():
        from literate.decoding.generate import cached_run, new_decode_cache
        from literate.models.mistral import mistral_model
        from literate.numbers.decode_cost import TINY_LLAMA
        from literate.parts.cache import DecodeCache, KVCache

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = mistral_model(**TINY_LLAMA, window=window).eval()
        position = far * window
        ids = torch.randint(0, TINY_LLAMA["vocab_size"], (1, position + 1),
                            generator=torch.Generator().manual_seed(1))

        def plain(capacity: int) -> DecodeCache:
            attn = model.blocks[0].attn
            return DecodeCache([KVCache(1, attn.n_kv_heads, capacity, attn.d_head)
                                for _ in model.blocks])

        def step_at(t: int, cache: DecodeCache) -> Callable[[], object]:
            with torch.no_grad():
                cached_run(model, ids[:, :t], cache, last=True)  # the prompt

            def step():
                with torch.no_grad():
                    logits = cached_run(model, ids[:, t:t + 1], cache, last=True)
                for layer in cache.layers:
                    layer.truncate(t)  # back to position t for the next call
                return logits
            return step

        ours = step_at(position, new_decode_cache(model, 1, position + 1))
        if against == "inside":
            theirs = step_at(window // 2, new_decode_cache(model, 1, position + 1))
        else:
            theirs = step_at(position, plain(position + 1))
        return ours, theirs, _max_diff(ours(), step_at(position, plain(position + 1))())
    return build


def mixtral_moe_forward(experts_implementation: str, batch: int = 2, length: int = 256,
                        d: int = 256, d_ff: int = 128, n_experts: int = 64, top_k: int = 6):
    """Fine-grained MoE, inference: our MoEFFN (dispatch's grouped_mm path in float32)
    against HF's MixtralSparseMoeBlock with the same weights, its experts run by
    `experts_implementation` ("grouped_mm", a MixtralForCausalLM's default, or "eager",
    a loop over the experts hit)."""
    def build():
        from functools import partial

        from transformers import MixtralConfig
        from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

        from literate.parts.moe import Experts, MoEFFN, Router, mixtral_router

        torch.manual_seed(0)
        config = MixtralConfig(hidden_size=d, intermediate_size=d_ff, num_local_experts=n_experts,
                               num_experts_per_tok=top_k, router_jitter_noise=0.0)
        config._experts_implementation = experts_implementation
        theirs = MixtralSparseMoeBlock(config).eval()
        ours = MoEFFN(Router(d, n_experts, partial(mixtral_router, top_k=top_k)),
                      Experts(n_experts, d, d_ff)).eval()
        theirs.load_state_dict({k.replace("router.", "gate."): v for k, v in ours.state_dict().items()},
                               strict=True)
        x = torch.randn(batch, length, d)
        a, b = _fwd(ours, x), _fwd(theirs, x)
        return a, b, _max_diff(a(), b())
    return build


# Chapter 10: long context (window, sinks, MLA)


def _window_mask(length: int, window: int, *, additive: bool = False) -> torch.Tensor:
    """Hugging Face's own sliding-window mask [1, 1, T, T] (`sdpa_mask` of
    `sliding_window_causal_mask_function(window)`, what its models hand their layers):
    bool for sdpa, or additive 0 / -inf for an eager layer."""
    from transformers.masking_utils import (
        sdpa_mask,
        sliding_window_causal_mask_function,
    )

    allowed = sdpa_mask(1, length, length, mask_function=sliding_window_causal_mask_function(window),
                        allow_is_causal_skip=False)
    return torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf")) if additive else allowed


def gpt_oss_sliding_forward(batch: int = 2, length: int = 256, d: int = 512, heads: int = 8,
                            kv_heads: int = 2, d_head: int = 64, window: int = 128):
    """gpt-oss's sliding layer, a full forward: our SlidingWindowSinkAttention (window 128,
    sinks, biases on q, k, v and o, gpt-oss's YaRN RoPE) against HF's GptOssAttention of a
    "sliding_attention" layer holding our weights, eager (GptOss has no sdpa; eager is
    what HF picks on the CPU, flex being opt-in). HF is handed its additive [1, 1, T, T]
    window mask, made once (its model makes one per forward for all its layers); its
    rotary tables (GptOssRotaryEmbedding) are made in the call, ours makes (or reuses) its
    own. The 'diff': the outputs."""
    def build():
        from transformers import GptOssConfig
        from transformers.models.gpt_oss.modeling_gpt_oss import (
            GptOssAttention,
            GptOssRotaryEmbedding,
        )

        from literate.models.gpt_oss import gpt_oss_rope
        from literate.parts.sinks import SlidingWindowSinkAttention

        config = GptOssConfig(hidden_size=d, num_attention_heads=heads, num_key_value_heads=kv_heads,
                              head_dim=d_head, num_hidden_layers=2, sliding_window=window,
                              layer_types=["sliding_attention", "full_attention"],
                              attn_implementation="eager")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            ours = SlidingWindowSinkAttention(d, heads, kv_heads, d_head=d_head, bias=True,
                                              rope=gpt_oss_rope(config)(), window=window).eval()
            with torch.no_grad():
                ours.sinks.normal_()
            x = torch.randn(batch, length, d)
        theirs = GptOssAttention(config, layer_idx=0).eval()
        theirs.load_state_dict(ours.state_dict(), strict=True)
        rotary, mask = GptOssRotaryEmbedding(config), _window_mask(length, window, additive=True)
        positions = torch.arange(length)[None].expand(batch, -1)

        def hf():
            with torch.no_grad():
                return theirs(x, rotary(x, positions), mask)[0]

        a = _fwd(ours, x, causal=True)
        return a, hf, _max_diff(a(), hf())
    return build


def _deepseek_attention_pair(d: int = 512, heads: int = 8, q_lora_rank: int = 192, kv_lora_rank: int = 128,
                             qk_nope: int = 32, qk_rope: int = 16, v_head: int = 32):
    """HF's DeepseekV3Attention (sdpa, plain interleaved RoPE) and our
    MultiHeadLatentAttention holding its weights, and HF's rotary module."""
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
        DeepseekV3Attention,
        DeepseekV3RotaryEmbedding,
    )

    from literate.models.deepseek_v3 import mla_from_hf_config

    config = DeepseekV3Config(hidden_size=d, num_attention_heads=heads, num_key_value_heads=heads,
                              q_lora_rank=q_lora_rank, kv_lora_rank=kv_lora_rank, qk_nope_head_dim=qk_nope,
                              qk_rope_head_dim=qk_rope, v_head_dim=v_head, num_hidden_layers=1,
                              max_position_embeddings=4096,
                              rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
                              attn_implementation="sdpa")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        theirs = DeepseekV3Attention(config, layer_idx=0).eval()
    ours = mla_from_hf_config(config).eval()
    ours.load_state_dict(theirs.state_dict(), strict=True)  # HF's names, as they are
    return ours, theirs, DeepseekV3RotaryEmbedding(config), config


def mla_forward(batch: int = 2, length: int = 256):
    """MLA, a prefill (a full causal forward): our MultiHeadLatentAttention (absorb
    "decode", which up-projects a call that starts at position 0: the naive form)
    against HF's DeepseekV3Attention (sdpa, causal) with the same weights; hidden 512, 8
    heads, q_lora_rank 192, kv_lora_rank 128, d_nope 32, d_rope 16, d_v 32. HF's rotary
    tables are made in its call. The 'diff': the outputs."""
    def build():
        ours, theirs, rotary, config = _deepseek_attention_pair()
        x = torch.randn(batch, length, config.hidden_size, generator=torch.Generator().manual_seed(1))
        positions = torch.arange(length)[None].expand(batch, -1)

        def hf():
            with torch.no_grad():
                return theirs(x, position_embeddings=rotary(x, positions), attention_mask=None)[0]

        a = _fwd(ours, x, causal=True)
        return a, hf, _max_diff(a(), hf())
    return build


def mla_decode_step(against: str, context: int = 1024):
    """One MLA decoding step (B = 1, one token after `context` cached ones), the layer of
    `mla_forward`: ours absorbed (absorb="decode", its LatentCache) against HF's
    DeepseekV3Attention step with its DynamicCache (`against="hf"`; HF 5.24 caches the
    latent too, c_kv and k_rope, and up-projects all of it at every step: the naive form,
    the whole cache concatenated anew by DynamicLayer.update), or against our own naive
    step (`against="naive"`, absorb="never", same cache, same position: what the
    absorption saves). Each call takes its token back (our `truncate`, HF's `crop(-1)`),
    so every round times the same position. The 'diff': the step's outputs."""
    def build():
        import copy

        from transformers import DynamicCache

        ours, theirs, rotary, config = _deepseek_attention_pair()
        g = torch.Generator().manual_seed(1)
        prompt = torch.randn(1, context, config.hidden_size, generator=g)
        x = torch.randn(1, 1, config.hidden_size, generator=g)

        def our_step(layer: nn.Module) -> Callable[[], object]:
            cache = layer.new_cache(1, context + 1)
            with torch.no_grad():
                layer(prompt, causal=True, cache=cache)  # the prefill

            def step():
                with torch.no_grad():
                    out = layer(x, causal=True, cache=cache)
                cache.truncate(context)  # back to `context` for the next call
                return out
            return step

        def hf_step() -> Callable[[], object]:
            cache = DynamicCache(config=config)
            with torch.no_grad():
                theirs(prompt, position_embeddings=rotary(prompt, torch.arange(context)[None]),
                       attention_mask=None, cache=cache)
            position = torch.tensor([[context]])

            def step():
                with torch.no_grad():
                    out = theirs(x, position_embeddings=rotary(x, position), attention_mask=None,
                                 cache=cache)[0]
                cache.crop(-1)  # back to `context` for the next call
                return out
            return step

        absorbed = our_step(ours)
        if against == "hf":
            other = hf_step()
        else:
            naive = copy.deepcopy(ours)
            naive.absorb = "never"
            other = our_step(naive)
        return absorbed, other, _max_diff(absorbed(), other())
    return build


def sink_attention_step(batch: int = 1, keys: int = 128, heads: int = 64, kv_heads: int = 8, d_head: int = 64):
    """The attention of one decoding step with sinks, gpt-oss's 64 query and 8 key/value
    heads of 64: `sink_attention` (the explicit softmax, SinkAttention's) against
    `sink_attention_sdpa` (the fused kernel given the sink as an appended zero key, K and V
    copied at every call), one query over `keys` keys, no mask. The 'diff': the outputs."""
    def build():
        from literate.parts.sinks import sink_attention, sink_attention_sdpa

        g = torch.Generator().manual_seed(0)
        q = torch.randn(batch, heads, 1, d_head, generator=g)
        k, v = (torch.randn(batch, kv_heads, keys, d_head, generator=g) for _ in range(2))
        sinks = torch.randn(heads, generator=g)

        def ours():
            return sink_attention(q, k, v, sinks)[0]

        def theirs():
            return sink_attention_sdpa(q, k, v, sinks)

        return ours, theirs, _max_diff(ours(), theirs())
    return build


def latent_attention_step(heads: int = 16, keys: int = 2048, kv_lora_rank: int = 512, d_rope: int = 64):
    """The absorbed form's attention at one decoding step (T_q = 1): `latent_attention`
    (the heads stacked on the query axis of one key head, then the fused kernel) against
    F.scaled_dot_product_attention(enable_gqa=True) over the same one key head: 16 heads,
    2048 latent keys of 576 (DeepSeek's r + d_rope), values their first 512 columns (a
    view, as the LatentCache gives them), scale 1/sqrt(192). The 'diff': the outputs."""
    def build():
        import torch.nn.functional as F

        from literate.parts.mla import latent_attention

        g = torch.Generator().manual_seed(0)
        width, scale = kv_lora_rank + d_rope, 192**-0.5
        q = torch.randn(1, heads, 1, width, generator=g)
        k = torch.randn(1, 1, keys, width, generator=g)
        v = k[..., :kv_lora_rank]

        def ours():
            return latent_attention(q, k, v, None, scale=scale)

        def theirs():
            return F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=True)

        return ours, theirs, _max_diff(ours(), theirs())
    return build


def window_block_forward(kind: str, batch: int = 2, length: int = 256, d: int = 512, heads: int = 8,
                         kv_heads: int = 2, d_ff: int = 1376, window: int = 128):
    """A sliding-window block (window 128 < T), a full forward: our `mistral_block`
    against HF's MistralDecoderLayer (`kind="mistral"`), or our `gemma3_block` with a
    SlidingWindowAttention (RoPE base 10 000, d_head 64, query_pre_attn_scalar 64)
    against HF's Gemma3DecoderLayer of a "sliding_attention" layer (`kind="gemma3"`),
    sdpa, the same weights. HF is handed its bool [1, 1, T, T] window mask, made once (its
    model makes one per forward); its rotary tables are made in the call. The 'diff': the
    outputs."""
    def build():
        from functools import partial

        from transformers import Gemma3TextConfig, MistralConfig
        from transformers.models.gemma3 import modeling_gemma3
        from transformers.models.mistral import modeling_mistral

        from literate.models.mistral import mistral_block
        from literate.parts.blocks import gemma3_block
        from literate.parts.window import SlidingWindowAttention

        names = {"attn": "self_attn", "ffn": "mlp", "norm1": "input_layernorm",
                 "norm2": "post_attention_layernorm", "norm3": "pre_feedforward_layernorm",
                 "norm4": "post_feedforward_layernorm"}
        fields = {"hidden_size": d, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
                  "intermediate_size": d_ff, "num_hidden_layers": 1, "sliding_window": window,
                  "max_position_embeddings": 4096, "attn_implementation": "sdpa"}
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            if kind == "mistral":
                config = MistralConfig(**fields, rms_norm_eps=1e-5,
                                       rope_parameters={"rope_type": "default", "rope_theta": 10_000.0})
                ours = mistral_block(d, heads, kv_heads, d_ff, window=window, rope_base=10_000.0, eps=1e-5)
                theirs = modeling_mistral.MistralDecoderLayer(config, 0)
                rotary = modeling_mistral.MistralRotaryEmbedding(config)
            else:
                config = Gemma3TextConfig(**fields, head_dim=d // heads, query_pre_attn_scalar=d // heads,
                                          layer_types=["sliding_attention"], rms_norm_eps=1e-6)
                ours = gemma3_block(d, heads, kv_heads, d_ff, d_head=d // heads,
                                    query_pre_attn_scalar=d // heads, rope_base=10_000.0, eps=1e-6,
                                    attention=partial(SlidingWindowAttention, window=window))
                theirs = modeling_gemma3.Gemma3DecoderLayer(config, 0)
                rotary = partial(modeling_gemma3.Gemma3RotaryEmbedding(config), layer_type="sliding_attention")
            with torch.no_grad():
                for p in ours.parameters():
                    if p.ndim == 1:  # the norms' gains: not their initial 1 (or 0)
                        p.normal_(0.0, 0.3).add_(1.0 if kind == "mistral" else 0.0)
            x = torch.randn(batch, length, d)
        ours.eval(), theirs.eval()
        theirs.load_state_dict({f"{names[k.split('.', 1)[0]]}.{k.split('.', 1)[1]}": v
                                for k, v in ours.state_dict().items()}, strict=True)
        mask = _window_mask(length, window)
        positions = torch.arange(length)[None].expand(batch, -1)

        def hf():
            with torch.no_grad():
                return theirs(x, position_embeddings=rotary(x, positions), attention_mask=mask)

        a = _fwd(ours, x)
        return a, hf, _max_diff(a(), hf())
    return build


ROWS: list[Row] = [
    Row("gpt2", "GPT-2 block fwd, B=1 T=128 d=768", "HF GPT2Block (sdpa)", gpt2_block_forward(1, 128)),
    Row("gpt2", "GPT-2 block fwd, B=4 T=512 d=768", "HF GPT2Block (sdpa)", gpt2_block_forward(4, 512)),
    Row("gpt2", "GPT-2 block fwd+bwd, B=1 T=128", "HF GPT2Block (sdpa)", gpt2_block_backward(1, 128)),
    Row("gpt2", "GPT-2 block fwd+bwd, B=4 T=512", "HF GPT2Block (sdpa)", gpt2_block_backward(4, 512)),
    Row("attention", "MHA fwd, B=4 T=128 d=512 H=8", "nn.MultiheadAttention", mha_forward()),
    Row("attention", "GQA+RoPE fwd, B=2 T=256 d=512 H=8/2", "HF LlamaAttention (sdpa)", gqa_rope_forward()),
    Row("model", "GPT-2 model fwd, 4 layers d=256 T=128 B=4", "HF GPT2LMHeadModel (sdpa)", gpt2_model_forward()),
    Row("modern", "Llama block fwd, B=2 T=256 d=512 H=8/2", "HF LlamaDecoderLayer (sdpa)", llama_block_pass()),
    Row("modern", "Llama block fwd+bwd, B=2 T=256 d=512", "HF LlamaDecoderLayer (sdpa)",
        llama_block_pass(backward=True)),
    Row("modern", "Llama model fwd, 4 layers d=256 T=128 B=4", "HF LlamaForCausalLM (sdpa)", llama_model_forward()),
    Row("modern", "GPT-NeoX parallel block fwd, B=2 T=256 d=512", "HF GPTNeoXLayer (sdpa)", neox_block_forward()),
    Row("decoding", "Llama generate, greedy, tiny, B=2 32+64", "HF generate (DynamicCache)",
        llama_decoding()),
    Row("decoding", "Llama beam search k=4, tiny, B=2 32+64", "HF generate(num_beams=4)",
        llama_decoding(beams=4)),
    Row("decoding", "Window 64: a step at 512 (rings), tiny", "ours, a step at 32",
        window_decode_step("inside")),
    Row("decoding", "Window 64: a step at 512 (rings), tiny", "ours, plain caches",
        window_decode_step("full")),
    Row("norm", "LayerNorm fwd [4, 512, 768]", "nn.LayerNorm", layer_norm_forward()),
    Row("norm", "RMSNorm fwd [4, 512, 768]", "nn.RMSNorm", rms_norm_forward()),
    Row("norm", "RMSNorm fwd [4, 512, 768]", "HF LlamaRMSNorm", llama_rms_norm_forward()),
    Row("sampling", "top-k 50, [8, 50257]", "HF TopKLogitsWarper", sampling_filters(top_k=50)),
    Row("sampling", "top-p 0.9, [8, 50257]", "HF TopPLogitsWarper", sampling_filters(top_p=0.9)),
    Row("sampling", "T 0.7, top-k 50, top-p 0.9", "HF warpers, same order", sampling_filters(temperature=0.7, top_k=50, top_p=0.9)),
    Row("moe", "MoE fwd, 64 experts top-6, d=256 I=128 N=512", "HF Mixtral block (grouped_mm)",
        mixtral_moe_forward("grouped_mm"), rounds=41),
    Row("moe", "MoE fwd, 64 experts top-6, d=256 I=128 N=512", "HF Mixtral block (eager)",
        mixtral_moe_forward("eager")),
    Row("long", "gpt-oss sliding attn fwd, W=128 B=2 T=256", "HF GptOssAttention (eager)",
        gpt_oss_sliding_forward()),
    Row("long", "MLA fwd (naive), B=2 T=256 d=512 H=8", "HF DeepseekV3Attention (sdpa)", mla_forward()),
    Row("long", "MLA step at 1024, absorbed, d=512 H=8", "HF DeepseekV3 (DynamicCache)",
        mla_decode_step("hf")),
    Row("long", "MLA step at 1024, absorbed, d=512 H=8", "ours, naive (absorb=never)",
        mla_decode_step("naive")),
    Row("long", "sink attn step, H=64/8 d=64, 128 keys", "ours, sdpa + an extra key", sink_attention_step()),
    Row("long", "sink attn step, H=64/8 d=64, B=4 1024 keys", "ours, sdpa + an extra key",
        sink_attention_step(batch=4, keys=1024)),
    Row("long", "latent attn step, H=16, 2048 keys of 576", "sdpa enable_gqa, 1 key head",
        latent_attention_step()),
    Row("long", "Mistral block fwd, W=128 B=2 T=256 d=512", "HF MistralDecoderLayer (sdpa)",
        window_block_forward("mistral")),
    Row("long", "Gemma 3 local block fwd, W=128 B=2 T=256", "HF Gemma3DecoderLayer (sdpa)",
        window_block_forward("gemma3")),
]


# ---------------------------------------------------------------------------------------
# Results as JSON

# The structure of a results file: a dict maps each key to the type of its value (a
# nested dict, a list of one item's structure, or a tuple of the types allowed). Times
# are seconds per call; ratios are ours / theirs; "rounds" is the number of interleaved
# rounds a row was timed in (its repeats) and "calls" the calls per round.
ROW_SCHEMA: dict = {
    "group": str,
    "name": str,
    "reference": str,
    "ours_s": float,  # median over the rounds
    "theirs_s": float,  # median over the rounds
    "ratio": float,  # median over the rounds of (ours / theirs in that round)
    "min": float,  # the smallest round's ratio
    "max": float,  # the largest round's ratio
    "rounds": int,
    "calls": int,
    "max_abs_diff": (float, type(None)),  # null where the outputs differ (not a number)
}
RESULTS_SCHEMA: dict = {
    "machine": {"cpu": str, "cores": int, "threads": int},  # threads: torch's intra-op
    "versions": {"python": str, "torch": str, "transformers": str},
    "date": str,  # UTC, ISO 8601, e.g. "2025-01-31T12:00:00+00:00"
    "commit": (str, type(None)),  # `git rev-parse HEAD` of the tree that ran, if any
    "quick": bool,  # a --quick smoke run
    "seconds": float,  # wall-clock time of the whole run
    "rows": [ROW_SCHEMA],
}


def _structure_problems(value: object, schema: object, where: str) -> list[str]:
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {type(value).__name__}"]
        problems = [f"{where}: missing key {key!r}" for key in schema if key not in value]
        problems += [f"{where}: unexpected key {key!r}" for key in value if key not in schema]
        for key in schema:
            if key in value:
                problems += _structure_problems(value[key], schema[key], f"{where}.{key}")
        return problems
    if isinstance(schema, list):
        if not isinstance(value, list):
            return [f"{where}: expected a list, got {type(value).__name__}"]
        return [p for i, item in enumerate(value) for p in _structure_problems(item, schema[0], f"{where}[{i}]")]
    allowed = schema if isinstance(schema, tuple) else (schema,)
    # JSON has one kind of number: a float field may hold an integer, but a bool is no number.
    ok = any(isinstance(value, t) and not (isinstance(value, bool) and t is not bool) for t in allowed)
    ok = ok or (float in allowed and type(value) is int)
    if not ok:
        names = " or ".join("null" if t is type(None) else t.__name__ for t in allowed)
        return [f"{where}: expected {names}, got {value!r}"]
    return []


def check_results(data: object) -> list[str]:
    """What is wrong with a results file's content (an empty list: nothing): its structure
    against `RESULTS_SCHEMA`, then the values: finite positive times and ratios with
    min <= ratio <= max, at least one round and one call, at least one thread and core,
    a UTC ISO date, a commit of 40 hex digits, at least one row, and no (name, reference)
    twice."""
    problems = _structure_problems(data, RESULTS_SCHEMA, "results")
    if problems:
        return problems
    machine = data["machine"]
    for key in ("cores", "threads"):
        if machine[key] < 1:
            problems.append(f"results.machine.{key}: expected at least 1, got {machine[key]}")
    try:
        date = datetime.datetime.fromisoformat(data["date"])
    except ValueError:
        problems.append(f"results.date: expected an ISO 8601 date, got {data['date']!r}")
    else:
        if date.utcoffset() != datetime.timedelta(0):
            problems.append(f"results.date: expected a UTC date, got {data['date']!r}")
    if data["commit"] is not None and not re.fullmatch(r"[0-9a-f]{40}", data["commit"]):
        problems.append(f"results.commit: expected 40 hex digits or null, got {data['commit']!r}")
    if not data["rows"]:
        problems.append("results.rows: expected at least one row")
    seen = set()
    for i, row in enumerate(data["rows"]):
        where = f"results.rows[{i}]"
        for key in ("ours_s", "theirs_s", "ratio", "min", "max"):
            if not (math.isfinite(row[key]) and row[key] > 0):
                problems.append(f"{where}.{key}: expected a finite positive number, got {row[key]!r}")
        if not row["min"] <= row["ratio"] <= row["max"]:
            problems.append(f"{where}: expected min <= ratio <= max, got "
                            f"{row['min']!r}, {row['ratio']!r}, {row['max']!r}")
        for key in ("rounds", "calls"):
            if row[key] < 1:
                problems.append(f"{where}.{key}: expected at least 1, got {row[key]}")
        if (row["name"], row["reference"]) in seen:
            problems.append(f"{where}: ({row['name']!r}, {row['reference']!r}) appears twice")
        seen.add((row["name"], row["reference"]))
    return problems


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_results(path: str | Path | None = None) -> dict:
    """The results file at `path` (default: the committed `RESULTS_PATH`, whose SHA-256
    must be the pinned `RESULTS_SHA256`), checked by `check_results`."""
    target = RESULTS_PATH if path is None else Path(path)
    if path is None and _sha256(target) != RESULTS_SHA256:
        raise ValueError(f"{target.name} has sha256 {_sha256(target)}, but RESULTS_SHA256 pins "
                         f"{RESULTS_SHA256}: regenerate it with `make bench` (which pins it)")
    data = json.loads(target.read_text(encoding="utf-8"))
    problems = check_results(data)
    if problems:
        raise ValueError(f"{target} is not a results file:\n" + "\n".join(problems))
    return data


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", commit) else None


def run_header(*, quick: bool) -> dict:
    """The top of a results file, read from this process and machine: the CPU model
    (/proc/cpuinfo), the logical cores, torch's intra-op threads, the versions, the UTC
    date now and the git commit."""
    import transformers

    return {
        "machine": {"cpu": _cpu_model(), "cores": os.cpu_count() or 1, "threads": torch.get_num_threads()},
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__},
        "date": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat(),
        "commit": _git_commit(),
        "quick": quick,
    }


def _pin(digest: str, source: Path = Path(__file__)) -> None:
    """Write `digest` into the `RESULTS_SHA256 = "..."` line of this module's source."""
    text = source.read_text(encoding="utf-8")
    new, count = re.subn(r'^RESULTS_SHA256 = "[0-9a-f]{64}"', f'RESULTS_SHA256 = "{digest}"', text,
                         flags=re.MULTILINE)
    if count != 1:
        raise ValueError(f"{source}: expected one RESULTS_SHA256 line, found {count}")
    source.write_text(new, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m literate.tools.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="3 rounds of ~50 ms: a smoke run")
    parser.add_argument("--only", action="append", default=[],
                        help=f"run the rows of one group: {sorted({r.group for r in ROWS})}")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument("--pin", action="store_true",
                        help="with --json literate/data/bench.json: pin its SHA-256 in this "
                             "module (RESULTS_SHA256)")
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    groups = {r.group for r in ROWS}
    unknown = sorted(set(args.only) - groups)
    if unknown:
        parser.error(f"--only must be one of {sorted(groups)}, got {unknown}")
    if args.pin and (args.json is None or Path(args.json).resolve() != RESULTS_PATH.resolve()):
        parser.error(f"--pin needs --json {RESULTS_PATH}")
    torch.set_num_threads(args.threads)
    rounds, target = (3, 0.05) if args.quick else (args.rounds, 0.15)
    rows = [r for r in ROWS if not args.only or r.group in args.only]
    header = run_header(quick=args.quick)
    print(f"torch {torch.__version__}, {args.threads} thread(s), float32, {rounds} interleaved rounds per row")
    line = f"{'row':<44} {'reference':<27} {'ours ms':>8} {'theirs ms':>9} {'ratio':>6}  {'spread':<11} {'max |diff|':>10}"
    print(line)
    print("-" * len(line))
    started = time.perf_counter()
    results = []
    for row in rows:
        ours, theirs, diff = row.build()
        row_rounds = rounds if args.quick else max(rounds, row.rounds)
        m = measure(ours, theirs, rounds=row_rounds, target_s=target)
        more = f"  ({row_rounds} rounds)" if row_rounds != rounds else ""
        print(f"{row.name:<44} {row.reference:<27} {m['ours_s'] * 1e3:8.3f} {m['theirs_s'] * 1e3:9.3f} "
              f"{m['ratio']:6.2f}  {m['min']:.2f}-{m['max']:.2f}{'':<2} {diff:10.1e}{more}", flush=True)
        results.append({"group": row.group, "name": row.name, "reference": row.reference,
                        "ours_s": m["ours_s"], "theirs_s": m["theirs_s"], "ratio": m["ratio"],
                        "min": m["min"], "max": m["max"], "rounds": row_rounds, "calls": m["n"],
                        "max_abs_diff": float(diff) if math.isfinite(diff) else None})
    seconds = time.perf_counter() - started
    print(f"({seconds:.0f} s)")
    if args.json is not None:
        data = {**header, "seconds": round(seconds, 1), "rows": results}
        problems = check_results(data)
        if problems:
            raise ValueError("the results do not fit RESULTS_SCHEMA:\n" + "\n".join(problems))
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path}")
        if args.pin:
            _pin(_sha256(path))
            print(f"pinned its sha256 in {Path(__file__).name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
