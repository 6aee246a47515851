"""The short self-check at the bottom of every exported era file.

`python -m literate.tools.export NAME` writes one standalone file per era; running that file
(`python gpt2.py`) runs its self-check, which needs nothing but torch: it compares the
file's layers with PyTorch's own (`F.scaled_dot_product_attention`,
`nn.MultiheadAttention`, `nn.TransformerEncoderLayer`, `nn.TransformerDecoderLayer`)
and checks what a model must do (causality, greedy decoding, loading weights by name).
Each function below uses only names its era file defines, so the same code runs here
(tests/test_export.py) and there.
"""

# Over 450 lines on purpose: one self-check per era file (seven functions, each exported
# whole into its era's standalone file, which may import nothing); they share no helper,
# so they cannot be split without copying.

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from literate.decoding.beam import beam_generate
from literate.decoding.generate import generate
from literate.decoding.sampling import sampler
from literate.models.gpt2 import (
    gpt2_block_targets,
    gpt2_from_hf_config,
    gpt2_model,
    load_hf_gpt2,
)
from literate.models.gpt_oss import gpt_oss_model
from literate.models.llama import llama_from_hf_config, llama_model, load_hf_llama
from literate.models.mistral import mistral_model
from literate.models.mixtral import (
    load_hf_mixtral,
    mixtral_from_hf_config,
    mixtral_model,
    router_aux_loss,
)
from literate.models.torch_twins import torch_decoder_layer, torch_encoder_layer
from literate.models.transformer2017 import EncoderDecoder
from literate.models.transformer2017_decoding import (
    beam_translate,
    cached_greedy_decode,
)
from literate.numbers.params import cache_bytes, kv_cache_shape
from literate.parts.attention import (
    causal_allowed,
    padding_allowed,
    scaled_dot_product_attention,
)
from literate.parts.blocks import (
    cohere_block,
    gemma3_block,
    gptj_block,
    llama_block,
    neox_block,
    olmo2_block,
    qwen3_block,
)
from literate.parts.mla import MultiHeadLatentAttention
from literate.parts.moe import dispatch
from literate.parts.multi_head import (
    MultiHeadAttention,
    load_packed_qkv,
    merge_heads,
    split_heads,
)
from literate.parts.positions import apply_rope, rope_cache
from literate.parts.sinks import sink_attention, sink_share
from literate.parts.window import SlidingWindowAttention, window_allowed
from literate.tools.syncs import host_reads

__all__ = ["check_attention", "check_transformer2017", "check_decoding", "check_gpt2",
           "check_llama", "check_mixtral", "check_long_context"]


# --8<-- [start:check_attention]
def check_attention() -> None:
    """Attention equals PyTorch's fused kernel (float64, causal and padding masks, a
    random upstream gradient); multi-head attention with random biases equals
    nn.MultiheadAttention on both of its paths, output and gradients; a padded GQA
    layer with RoPE equals its projections through F.scaled_dot_product_attention(
    enable_gqa=True) on both paths; a cached decode equals the full forward."""
    g = torch.Generator().manual_seed(0)

    def randn(*shape: int, grad: bool = False) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=torch.float64, requires_grad=grad)

    def same(a: torch.Tensor, b: torch.Tensor) -> None:
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)

    def grads(out: torch.Tensor, probe: torch.Tensor, wrt: list) -> tuple:
        return torch.autograd.grad((out * probe).sum(), wrt)

    def both_paths(layer: MultiHeadAttention, x: torch.Tensor, **kwargs) -> list:
        return [layer(x, **kwargs), layer(x, return_weights=True, **kwargs)[0]]

    q, k, v = (randn(2, 3, 5, 8, grad=True) for _ in range(3))
    valid = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])  # right padding
    mask = causal_allowed(5, 5) & padding_allowed(valid)  # [B, 1, T, T]
    ours = scaled_dot_product_attention(q, k, v, mask).output
    fused = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    same(ours, fused)
    probe = randn(*ours.shape)
    for a, b in zip(grads(ours, probe, [q, k, v]), grads(fused, probe, [q, k, v])):
        same(a, b)

    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(16, 4, batch_first=True, dtype=torch.float64)
    with torch.no_grad():  # PyTorch starts its biases at zero: make them count
        theirs.in_proj_bias.normal_(generator=g)
        theirs.out_proj.bias.normal_(generator=g)
    layer = MultiHeadAttention(16, 4, bias=True).double()
    load_packed_qkv(layer, theirs.in_proj_weight.detach(),
                    theirs.in_proj_bias.detach())
    layer.o_proj.load_state_dict(theirs.out_proj.state_dict())
    x = randn(2, 5, 16, grad=True)
    expected = theirs(x, x, x, key_padding_mask=~valid, attn_mask=~causal_allowed(5, 5),
                      need_weights=False)[0]
    probe = randn(*expected.shape)
    expected_grads = grads(expected, probe, [x, theirs.in_proj_weight,
                                             theirs.in_proj_bias,
                                             theirs.out_proj.weight,
                                             theirs.out_proj.bias])
    for out in both_paths(layer, x, causal=True, key_valid=valid):
        same(out, expected)
        gx, qw, qb, kw, kb, vw, vb, ow, ob = grads(out, probe, [x, *layer.parameters()])
        packed = (gx, torch.cat([qw, kw, vw]), torch.cat([qb, kb, vb]), ow, ob)
        for a, b in zip(packed, expected_grads):
            same(a, b)

    gqa = MultiHeadAttention(16, 4, 2, rope=True).double()
    q = split_heads(gqa.q_proj(x), 4)  # [B, H, T, d_head]
    k, v = split_heads(gqa.k_proj(x), 2), split_heads(gqa.v_proj(x), 2)  # H_kv = 2
    cos, sin = rope_cache(5, gqa.d_head)
    kernel = F.scaled_dot_product_attention(apply_rope(q, cos, sin),
                                            apply_rope(k, cos, sin), v,
                                            attn_mask=mask, enable_gqa=True)
    expected = gqa.o_proj(merge_heads(kernel))
    wrt = [x, *gqa.parameters()]
    expected_grads = grads(expected, probe, wrt)
    for out in both_paths(gqa, x, causal=True, key_valid=valid):
        same(out, expected)
        for a, b in zip(grads(out, probe, wrt), expected_grads):
            same(a, b)

    with torch.no_grad():
        full = gqa(x, causal=True)
        cache = gqa.new_cache(batch=2, capacity=5)
        steps = [gqa(x[:, t:t + 1], causal=True, cache=cache) for t in range(5)]
    same(torch.cat(steps, dim=1), full)
# --8<-- [end:check_attention]


# --8<-- [start:check_transformer2017]
def check_transformer2017() -> None:
    """The encoder layer equals nn.TransformerEncoderLayer holding its weights, and the
    decoder layer nn.TransformerDecoderLayer, with a causal target mask and the memory's
    padding (float64); the model is causal in its targets and decodes greedily."""
    torch.manual_seed(0)
    model = EncoderDecoder(13, 16, 2, 32, 2, dropout=0.0, max_length=16)
    model = model.double().eval()
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    valid = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    y = torch.randn(2, 4, 16, dtype=torch.float64)  # 4 target positions, memory x
    encoder, decoder = model.encoder[0], model.decoder[0]
    theirs_encoder = torch_encoder_layer(encoder)
    theirs_decoder = torch_decoder_layer(decoder)
    with torch.no_grad():
        torch.testing.assert_close(encoder(x, key_valid=valid),
                                   theirs_encoder(x, src_key_padding_mask=~valid),
                                   atol=1e-12, rtol=0)
        torch.testing.assert_close(decoder(y, x, memory_valid=valid),
                                   theirs_decoder(y, x, tgt_mask=~causal_allowed(4, 4),
                                                  memory_key_padding_mask=~valid),
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
    if not torch.equal(cached_greedy_decode(model, source, 6), out):
        raise AssertionError("the cached greedy decode differs from greedy_decode")
    if not torch.equal(beam_translate(model, source, 6, beams=1).tokens, out):
        raise AssertionError("beam search with one beam is not greedy")
    best = beam_translate(model, source, 6)  # 4 beams, alpha 0.6
    if best.tokens.shape[0] != 2 or not bool((best.lengths <= 6).all()):
        raise AssertionError(f"beam_translate returned {best}")
# --8<-- [end:check_transformer2017]


# --8<-- [start:check_decoding]
def check_decoding(model: nn.Module) -> None:
    """The cached `generate` of chapter 8 returns the uncached `generate`'s tokens; a
    left-padded row decodes as its prompt alone; one beam is greedy."""
    model = model.double().eval()
    ids = torch.randint(0, model.vocab_size, (2, 6))
    if not torch.equal(generate(model, ids, 5), model.generate(ids, 5)):
        raise AssertionError("the cached generate differs from the uncached one")
    valid = torch.ones(2, 6, dtype=torch.bool)
    valid[1, :3] = False  # row 1: a 3-token prompt, padded on the left
    padded, steps = generate(model, ids, 5, valid=valid, return_logits=True)
    alone, alone_steps = generate(model, ids[1:, 3:], 5, return_logits=True)
    if not torch.equal(padded[1, 3:], alone[0]) or \
            (steps[1] - alone_steps[0]).abs().max() > 1e-12:
        raise AssertionError("a left-padded row does not decode as its prompt alone")
    if not torch.equal(beam_generate(model, ids, 1, 5, valid=valid)[0], padded):
        raise AssertionError("beam search with one beam is not greedy")
# --8<-- [end:check_decoding]


# --8<-- [start:check_gpt2]
def check_gpt2() -> None:
    """A tiny GPT-2 is causal; weights written under Hugging Face's names load back,
    into a model built from a config.json with GPT-2's defaults (attn_pdrop 0.1:
    inference=True), and give the same logits; generate is greedy (each new token is
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
    config = {"model_type": "gpt2", "vocab_size": 50, "n_positions": 16, "n_embd": 32,
              "n_layer": 2, "n_head": 4}  # a config.json, GPT-2's defaults for the rest
    fresh = load_hf_gpt2(gpt2_from_hf_config(config, inference=True), state, config)
    if fresh.training:
        raise AssertionError("inference=True must return the model in eval mode")
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
    check_decoding(model)
# --8<-- [end:check_gpt2]


# --8<-- [start:check_llama]
def check_llama() -> None:
    """A tiny Llama is causal; its weights, written under Hugging Face's names, load
    back into a model built from a config.json and give the same logits; generate is
    greedy; and every block of chapter 7 is causal, for whatever input comes after."""
    torch.manual_seed(0)
    model = llama_model(50, 16, 32, 4, 2, 2, 88).eval()
    ids = torch.randint(0, 50, (2, 10))
    with torch.no_grad():
        logits = model(ids)
        changed = ids.clone()
        changed[:, 6:] = (changed[:, 6:] + 1) % 50
        torch.testing.assert_close(model(changed)[:, :6], logits[:, :6], atol=0, rtol=0)

    to_hf = [("token_embedding.", "model.embed_tokens."),
             ("final_norm.", "model.norm."), (".attn.", ".self_attn."),
             (".ffn.", ".mlp."), (".attn_norm.", ".input_layernorm."),
             (".ffn_norm.", ".post_attention_layernorm."), ("blocks.", "model.layers.")]
    state = {}
    for name, value in model.state_dict().items():
        for ours, theirs in to_hf:
            name = name.replace(ours, theirs)
        state[name] = value
    config = {"model_type": "llama", "vocab_size": 50, "hidden_size": 32,
              "num_attention_heads": 4, "num_key_value_heads": 2,
              "num_hidden_layers": 2, "intermediate_size": 88,
              "max_position_embeddings": 16, "rms_norm_eps": 1e-5,
              "rope_theta": 10_000.0}  # as a config.json has it
    fresh = load_hf_llama(llama_from_hf_config(config).eval(), state, config)
    with torch.no_grad():
        torch.testing.assert_close(fresh(ids), logits, atol=0, rtol=0)
    out = model.generate(ids[:, :4], 6)
    with torch.no_grad():  # greedy: each new token is the argmax of the logits before
        expected = model(out[:, :-1])[:, 3:].argmax(dim=-1)
    if not torch.equal(out[:, 4:], expected):
        raise AssertionError(f"generate is not greedy: {out.tolist()}")

    blocks = [llama_block(32, 4, 2, 88), qwen3_block(32, 4, 2, 88, d_head=16),
              olmo2_block(32, 4, 2, 88),
              gemma3_block(32, 4, 2, 88, d_head=16, query_pre_attn_scalar=24),
              gptj_block(32, 4, 128, rotary_dim=4), neox_block(32, 4, 128),
              cohere_block(32, 4, 2, 88, rope_base=8e6)]
    x = torch.randn(2, 6, 32)
    later = x.clone()
    later[:, 4:] = torch.randn(2, 2, 32)
    with torch.no_grad():
        for block in blocks:
            if not torch.equal(block(x)[:, :4], block(later)[:, :4]):
                raise AssertionError(f"{type(block).__name__} is not causal")
    check_decoding(model)
# --8<-- [end:check_llama]


# --8<-- [start:check_mixtral]
def check_mixtral() -> None:
    """A tiny Mixtral (4 experts, top 2) is causal and reads no tensor value in its
    forward; its MoE FFN equals a loop over the tokens and their chosen experts
    (float64); the sorted path (grouped_mm, float32) equals the padded one, gradients
    included; an expert no token chose gets exactly zero gradient on both paths;
    uniform router logits give a balancing loss of exactly top_k; weights written
    under Hugging Face's names load back into a model built from a config.json and
    give the same logits; cached decoding equals the uncached one."""
    torch.manual_seed(0)
    model = mixtral_model(50, 16, 32, 4, 2, 2, 24, 4, 2).eval()  # E = 4, k = 2
    with torch.no_grad():
        for block in model.blocks:  # HF's std 0.02 routes almost uniformly
            block.ffn.router.weight.normal_(0.0, 0.5)
    ids = torch.randint(0, 50, (2, 10))
    with torch.no_grad():
        logits = model(ids)
        changed = ids.clone()
        changed[:, 6:] = (changed[:, 6:] + 1) % 50
        torch.testing.assert_close(model(changed)[:, :6], logits[:, :6], atol=0, rtol=0)
    for dtype in (torch.float32, torch.float64):
        if host_reads(model.to(dtype).run, ids) != 0:
            raise AssertionError(f"the {dtype} forward reads tensor values")
    model.float()

    def close(a: torch.Tensor, b: torch.Tensor, units: float) -> None:
        """a == b within `units` rounding units of the dtype times b's largest entry."""
        bound = units * torch.finfo(b.dtype).eps * b.abs().max().item()
        torch.testing.assert_close(a, b, atol=bound, rtol=0)

    def unused_get_zero_gradient(moe: nn.Module, x: torch.Tensor) -> None:
        _, weights, chosen = moe.router(x)  # x: one token, so 2 experts get none
        out = dispatch(x, weights, chosen, moe.experts, n_experts=4)
        grads = torch.autograd.grad(out.square().sum(), [moe.experts.gate_up_proj,
                                                         moe.experts.down_proj])
        used = chosen[0].tolist()
        unused = [e for e in range(4) if e not in used]
        for grad in grads:
            if not bool((grad[unused] == 0).all() & (grad[used] != 0).any()):
                raise AssertionError(f"experts {unused} chose no token: their "
                                     f"gradient must be zero, the others' not")

    moe = model.blocks[0].ffn  # float32: dispatch sorts and runs grouped_mm
    x = torch.randn(9, 32, requires_grad=True)
    wrt = [x, moe.router.weight, moe.experts.gate_up_proj, moe.experts.down_proj]
    paths = [dispatch(x, *moe.router(x)[1:], moe.experts, n_experts=4,
                      capacity=capacity) for capacity in (None, 9)]  # 9 = N: padded
    probe = torch.randn(9, 32)
    grads = [torch.autograd.grad((out * probe).sum(), wrt) for out in paths]
    for a, b in zip([paths[0], *grads[0]], [paths[1], *grads[1]]):
        close(a, b, 16)  # the same float32 products, summed in another order
    unused_get_zero_gradient(moe, x[:1].detach())  # the sorted path, if torch has it
    model.double()
    unused_get_zero_gradient(moe, x[:1].detach().double())  # the padded path

    x = torch.randn(2, 5, 32, dtype=torch.float64)
    flat = x.reshape(10, 32)
    _, weights, chosen = moe.router(flat)
    if chosen.shape != (10, 2) or bool((chosen[:, 0] == chosen[:, 1]).any()):
        raise AssertionError(f"each token must go to 2 distinct experts, got {chosen}")
    close(weights.sum(dim=-1), torch.ones(10, dtype=weights.dtype), 4)
    loop = torch.zeros_like(flat)
    with torch.no_grad():
        for n in range(10):
            for w, e in zip(weights[n].tolist(), chosen[n].tolist()):
                gate, up = (moe.experts.gate_up_proj[e] @ flat[n]).chunk(2)
                loop[n] += w * (moe.experts.down_proj[e] @ (F.silu(gate) * up))
        close(moe(x).reshape(10, 32), loop, 16)

    uniform = mixtral_model(50, 16, 32, 4, 2, 2, 24, 4, 2)
    with torch.no_grad():
        for block in uniform.blocks:
            block.ffn.router.weight.zero_()
        uniform(ids)
    if router_aux_loss(uniform).item() != 2.0:
        raise AssertionError(f"uniform routing must give a balancing loss of top_k = "
                             f"2, got {router_aux_loss(uniform).item()}")

    to_hf = [("token_embedding.", "model.embed_tokens."),
             ("final_norm.", "model.norm."), (".attn.", ".self_attn."),
             (".ffn.router.", ".mlp.gate."), (".ffn.", ".mlp."),
             (".attn_norm.", ".input_layernorm."),
             (".ffn_norm.", ".post_attention_layernorm."), ("blocks.", "model.layers.")]
    state = {}
    for name, value in model.state_dict().items():
        for ours, theirs in to_hf:
            name = name.replace(ours, theirs)
        state[name] = value
    config = {"model_type": "mixtral", "vocab_size": 50, "hidden_size": 32,
              "num_attention_heads": 4, "num_key_value_heads": 2,
              "num_hidden_layers": 2, "intermediate_size": 24,
              "num_local_experts": 4, "num_experts_per_tok": 2,
              "max_position_embeddings": 16}  # a config.json: Mixtral's defaults
    fresh = load_hf_mixtral(mixtral_from_hf_config(config).double().eval(), state,
                            config)
    with torch.no_grad():
        torch.testing.assert_close(fresh(ids), model(ids), atol=0, rtol=0)
    check_decoding(model)
# --8<-- [end:check_mixtral]


# --8<-- [start:check_long_context]
def check_long_context() -> None:
    """Chapter 10: a query of a window W reads min(W, q + 1) keys; a sliding-window
    layer decoding token by token through its ring equals its full forward, the ring's
    bytes constant once made; a sink row's weights sum to 1 - its sink share; MLA's
    absorbed form equals the up-projected one (float64) and its cache holds r + d_rope
    numbers per token; the ledger's bytes of a tiny Mistral equal what its rings
    allocate; cached decoding of a Mistral and a gpt-oss equals the uncached one."""
    torch.manual_seed(0)
    window = 3
    t = torch.arange(9)
    reads = window_allowed(t, t, window).sum(-1)
    if not torch.equal(reads, (t + 1).clamp(max=window)):
        raise AssertionError(f"window_allowed reads {reads.tolist()} keys per query")

    layer = SlidingWindowAttention(16, 4, 2, window=window).double().eval()
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    with torch.no_grad():
        full = layer(x, causal=True)
        ring = layer.new_cache(2, 9)
        made = ring.nbytes
        steps = []
        for i in range(9):
            steps.append(layer(x[:, i:i + 1], causal=True, cache=ring))
            if ring.nbytes != made:
                raise AssertionError("the ring grew")
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-12, rtol=0)
    if made != 2 * 2 * 2 * window * layer.d_head * 8:  # k and v, B, H_kv, S, d_head
        raise AssertionError(f"a ring of {window} slots holds {made} bytes")

    q, k, v = (torch.randn(2, 4, 5, 8, dtype=torch.float64) for _ in range(3))
    sinks = torch.randn(4, dtype=torch.float64)
    allowed = causal_allowed(5, 5)
    _, weights = sink_attention(q, k, v, sinks, allowed)
    scores = (q @ k.transpose(-1, -2) * 8**-0.5).masked_fill(~allowed, float("-inf"))
    torch.testing.assert_close(weights.sum(-1), 1 - sink_share(scores, sinks),
                               atol=1e-12, rtol=0)

    dims = dict(q_lora_rank=12, kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=4,
                v_head_dim=6)
    naive = MultiHeadLatentAttention(16, 4, absorb="never", **dims).double().eval()
    absorbed = MultiHeadLatentAttention(16, 4, absorb="always", **dims).double().eval()
    absorbed.load_state_dict(naive.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(absorbed(x, causal=True), naive(x, causal=True),
                                   atol=1e-12, rtol=0)
        latent = naive.new_cache(2, 9)
        steps = [naive(x[:, i:i + 1], causal=True, cache=latent) for i in range(9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), naive(x, causal=True),
                               atol=1e-12, rtol=0)
    if latent.nbytes != 2 * 9 * (8 + 4) * 8:
        raise AssertionError(f"the latent cache holds {latent.nbytes} bytes")

    model = mistral_model(50, 16, 16, 4, 2, 2, 24, window=window).double().eval()
    caches = [block.attn.new_cache(2, 16) for block in model.blocks]
    shape = kv_cache_shape("tiny", n_layers=2, n_heads=4, n_kv_heads=2, d_head=4,
                           window=window)
    ledger = cache_bytes(shape, 16, bytes_per_value=8, batch=2)
    if ledger != sum(c.nbytes for c in caches):
        raise AssertionError(f"the ledger says {ledger} bytes, the rings hold "
                             f"{sum(c.nbytes for c in caches)}")
    check_decoding(model)
    oss = gpt_oss_model(50, 16, 16, 4, 2, 8, 4, 2, windows=[window, None])
    check_decoding(oss)
# --8<-- [end:check_long_context]
