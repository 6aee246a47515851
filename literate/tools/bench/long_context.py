"""The rows of chapter 10: sliding-window layers and blocks (gpt-oss, Mistral, Gemma 3),
multi-head latent attention (a forward and a decoding step), attention sinks and the
latent attention of the absorbed form."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from literate.tools.bench.common import fwd, max_diff


def _window_mask(length: int, window: int, *, additive: bool = False) -> torch.Tensor:
    """Hugging Face's own sliding-window mask [1, 1, T, T] (`sdpa_mask` of
    `sliding_window_causal_mask_function(window)`, what its models hand their layers):
    bool for sdpa, or additive 0 / -inf for an eager layer."""
    from transformers.masking_utils import (
        sdpa_mask,
        sliding_window_causal_mask_function,
    )

    allowed = sdpa_mask(
        1,
        length,
        length,
        mask_function=sliding_window_causal_mask_function(window),
        allow_is_causal_skip=False,
    )
    return (
        torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))
        if additive
        else allowed
    )


def gpt_oss_sliding_forward(
    batch: int = 2,
    length: int = 256,
    d: int = 512,
    heads: int = 8,
    kv_heads: int = 2,
    d_head: int = 64,
    window: int = 128,
):
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

        config = GptOssConfig(
            hidden_size=d,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            head_dim=d_head,
            num_hidden_layers=2,
            sliding_window=window,
            layer_types=["sliding_attention", "full_attention"],
            attn_implementation="eager",
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            ours = SlidingWindowSinkAttention(
                d,
                heads,
                kv_heads,
                d_head=d_head,
                bias=True,
                rope=gpt_oss_rope(config)(),
                window=window,
            ).eval()
            with torch.no_grad():
                ours.sinks.normal_()
            x = torch.randn(batch, length, d)
        theirs = GptOssAttention(config, layer_idx=0).eval()
        theirs.load_state_dict(ours.state_dict(), strict=True)
        rotary, mask = (
            GptOssRotaryEmbedding(config),
            _window_mask(length, window, additive=True),
        )
        positions = torch.arange(length)[None].expand(batch, -1)

        def hf():
            with torch.no_grad():
                return theirs(x, rotary(x, positions), mask)[0]

        a = fwd(ours, x, causal=True)
        return a, hf, max_diff(a(), hf())

    return build


def _deepseek_attention_pair(
    d: int = 512,
    heads: int = 8,
    q_lora_rank: int = 192,
    kv_lora_rank: int = 128,
    qk_nope: int = 32,
    qk_rope: int = 16,
    v_head: int = 32,
):
    """HF's DeepseekV3Attention (sdpa, plain interleaved RoPE) and our
    MultiHeadLatentAttention holding its weights, and HF's rotary module."""
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
        DeepseekV3Attention,
        DeepseekV3RotaryEmbedding,
    )

    from literate.models.deepseek_v3 import mla_from_hf_config

    config = DeepseekV3Config(
        hidden_size=d,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        q_lora_rank=q_lora_rank,
        kv_lora_rank=kv_lora_rank,
        qk_nope_head_dim=qk_nope,
        qk_rope_head_dim=qk_rope,
        v_head_dim=v_head,
        num_hidden_layers=1,
        max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
        attn_implementation="sdpa",
    )
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
        x = torch.randn(
            batch,
            length,
            config.hidden_size,
            generator=torch.Generator().manual_seed(1),
        )
        positions = torch.arange(length)[None].expand(batch, -1)

        def hf():
            with torch.no_grad():
                return theirs(
                    x, position_embeddings=rotary(x, positions), attention_mask=None
                )[0]

        a = fwd(ours, x, causal=True)
        return a, hf, max_diff(a(), hf())

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
                theirs(
                    prompt,
                    position_embeddings=rotary(prompt, torch.arange(context)[None]),
                    attention_mask=None,
                    cache=cache,
                )
            position = torch.tensor([[context]])

            def step():
                with torch.no_grad():
                    out = theirs(
                        x,
                        position_embeddings=rotary(x, position),
                        attention_mask=None,
                        cache=cache,
                    )[0]
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
        return absorbed, other, max_diff(absorbed(), other())

    return build


def sink_attention_step(
    batch: int = 1,
    keys: int = 128,
    heads: int = 64,
    kv_heads: int = 8,
    d_head: int = 64,
):
    """The attention of one decoding step with sinks, gpt-oss's 64 query and 8 key/value
    heads of 64: `sink_attention` (the explicit softmax, SinkAttention's) against
    `sink_attention_sdpa` (the fused kernel given the sink as an appended zero key, K and V
    copied at every call), one query over `keys` keys, no mask. The 'diff': the outputs."""

    def build():
        from literate.parts.sinks import sink_attention, sink_attention_sdpa

        g = torch.Generator().manual_seed(0)
        q = torch.randn(batch, heads, 1, d_head, generator=g)
        k, v = (
            torch.randn(batch, kv_heads, keys, d_head, generator=g) for _ in range(2)
        )
        sinks = torch.randn(heads, generator=g)

        def ours():
            return sink_attention(q, k, v, sinks)[0]

        def theirs():
            return sink_attention_sdpa(q, k, v, sinks)

        return ours, theirs, max_diff(ours(), theirs())

    return build


def latent_attention_step(
    heads: int = 16, keys: int = 2048, kv_lora_rank: int = 512, d_rope: int = 64
):
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

        return ours, theirs, max_diff(ours(), theirs())

    return build


def window_block_forward(
    kind: str,
    batch: int = 2,
    length: int = 256,
    d: int = 512,
    heads: int = 8,
    kv_heads: int = 2,
    d_ff: int = 1376,
    window: int = 128,
):
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

        names = {"attn": "self_attn", "ffn": "mlp", "attn_norm": "input_layernorm"}
        names |= (
            {"ffn_norm": "post_attention_layernorm"}
            if kind == "mistral"
            else {
                "attn_out_norm": "post_attention_layernorm",
                "ffn_norm": "pre_feedforward_layernorm",
                "ffn_out_norm": "post_feedforward_layernorm",
            }
        )
        fields = {
            "hidden_size": d,
            "num_attention_heads": heads,
            "num_key_value_heads": kv_heads,
            "intermediate_size": d_ff,
            "num_hidden_layers": 1,
            "sliding_window": window,
            "max_position_embeddings": 4096,
            "attn_implementation": "sdpa",
        }
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            if kind == "mistral":
                config = MistralConfig(
                    **fields,
                    rms_norm_eps=1e-5,
                    rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
                )
                ours = mistral_block(
                    d,
                    heads,
                    kv_heads,
                    d_ff,
                    window=window,
                    rope_base=10_000.0,
                    eps=1e-5,
                )
                theirs = modeling_mistral.MistralDecoderLayer(config, 0)
                rotary = modeling_mistral.MistralRotaryEmbedding(config)
            else:
                config = Gemma3TextConfig(
                    **fields,
                    head_dim=d // heads,
                    query_pre_attn_scalar=d // heads,
                    layer_types=["sliding_attention"],
                    rms_norm_eps=1e-6,
                )
                ours = gemma3_block(
                    d,
                    heads,
                    kv_heads,
                    d_ff,
                    d_head=d // heads,
                    query_pre_attn_scalar=d // heads,
                    rope_base=10_000.0,
                    eps=1e-6,
                    attention=partial(SlidingWindowAttention, window=window),
                )
                theirs = modeling_gemma3.Gemma3DecoderLayer(config, 0)
                rotary = partial(
                    modeling_gemma3.Gemma3RotaryEmbedding(config),
                    layer_type="sliding_attention",
                )
            with torch.no_grad():
                for p in ours.parameters():
                    if p.ndim == 1:  # the norms' gains: not their initial 1 (or 0)
                        p.normal_(0.0, 0.3).add_(1.0 if kind == "mistral" else 0.0)
            x = torch.randn(batch, length, d)
        ours.eval(), theirs.eval()
        theirs.load_state_dict(
            {
                f"{names[k.split('.', 1)[0]]}.{k.split('.', 1)[1]}": v
                for k, v in ours.state_dict().items()
            },
            strict=True,
        )
        mask = _window_mask(length, window)
        positions = torch.arange(length)[None].expand(batch, -1)

        def hf():
            with torch.no_grad():
                return theirs(
                    x, position_embeddings=rotary(x, positions), attention_mask=mask
                )

        a = fwd(ours, x)
        return a, hf, max_diff(a(), hf())

    return build
