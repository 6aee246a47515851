"""Mistral with a sliding window shorter than the sequence (chapter 10), against Hugging
Face's Mistral (transformers 5.24), weights copied, float64.

- `mistral_block(window=4)` (chapter 7's `llama_block` with chapter 10's
  `SlidingWindowAttention`) == `MistralDecoderLayer` over 12 tokens, output and the gradient
  w.r.t. the input and every parameter, given HF's own sliding-window mask (built by
  `sdpa_mask` with `sliding_window_causal_mask_function(4)`; bool for "sdpa", additive
  0 / -inf for "eager"): the config's `sliding_window` is W keys including the query. With
  W - 1 or W + 1 ours is another layer.
- The tiny `MistralForCausalLM` (sliding_window 4, 12 tokens), built and loaded with
  `mistral_from_hf_config` / `load_hf_mistral` (chapter 7's Llama loaders, given the
  window; chapter 7's own refuse a `sliding_window`):
  logits and every gradient equal.
- Greedy cached decoding past the window (a 6-token prompt, 20 new tokens, window 4: the
  rings wrap five times) == HF `generate` (its DynamicCache holds a
  DynamicSlidingWindowLayer per layer) == our uncached forward, fed back token by token;
  the same with the prompt prefilled in chunks longer and shorter than the window, and
  for a left-padded batch (== HF with its attention_mask, each row == its prompt alone).
- Loading refuses a window that differs (named on both sides) and a layer_types list that
  mixes kinds. KV-cache bytes by formula == what `generate`'s cache allocates. No host
  sync in `run`; fullgraph compile (aot_eager) of a windowed block == eager.
- HF's cache after a prefill longer than the window keeps W - 1 keys (it attends over
  the whole prefill, masked, then trims); our ring keeps W slots, the same W - 1 keys and
  one stale. Beam search past the window (rings reordered with the beams) == HF's.

Tolerances as in tests/test_llama.py: HF's RMSNorm (and the eager softmax) compute in
float32, so (1) HF as it is: each tensor within F32_BOUND = 16 float32 ulps of its largest
entry, and further than 1e-12 (the float32 steps are really there); (2) HF with its norms
(and eager's softmax) computing in the input dtype, a test-harness patch: max |diff| <=
1e-10. Ours vs ours (cached vs uncached): 1e-12.
"""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, MistralConfig, MistralForCausalLM
from transformers.masking_utils import sdpa_mask, sliding_window_causal_mask_function
from transformers.models.mistral import modeling_mistral as mistral

from literate.decoding.beam import beam_generate
from literate.decoding.generate import cached_run, generate, new_decode_cache
from literate.models.llama import llama_from_hf_config, load_hf_llama
from literate.models.mistral import (
    check_mistral_config,
    load_hf_mistral,
    mistral_block,
    mistral_from_hf_config,
)
from literate.numbers.params import kv_cache_bytes
from literate.parts.multi_head import MultiHeadAttention
from literate.parts.window import SlidingWindowAttention, layer_window
from literate.tools.syncs import host_reads

from harness import (
    LLAMA_LAYER_NAMES,
    NO_SPECIAL_TOKENS,
    assert_equal_to_hf,
    compare_grads,
    hf_greedy,
    hf_in_input_dtype,
    hf_layer_name,
    hf_model_grads,
    hf_sizes,
    random_gains_hf_model,
    random_tokens,
)

F64 = torch.float64
F64_TOL = 1e-10
SAME = 1e-12
D, H, H_KV, D_FF, W, T, B, VOCAB, LAYERS = 32, 4, 2, 48, 4, 12, 2, 61, 2


def our_name(hf: str) -> str:
    """HF's model's parameter name -> ours."""
    hf = hf.replace("model.embed_tokens.", "token_embedding.").replace(
        "model.norm.", "final_norm."
    )
    for theirs_name, ours_name in LLAMA_LAYER_NAMES.items():
        hf = hf.replace(f".{ours_name}.", f".{theirs_name}.")
    return hf.replace("model.layers.", "blocks.")


def windows(model) -> list[int | None]:
    return [layer_window(block.attn) for block in model.blocks]


def hf_config(**changes) -> MistralConfig:
    settings = hf_sizes(VOCAB, D, H, H_KV, D_FF, LAYERS) | {
        "max_position_embeddings": 64,
        "rms_norm_eps": 1e-5,
        "sliding_window": W,
        "tie_word_embeddings": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10_000.0},
        **NO_SPECIAL_TOKENS,
        "attn_implementation": "sdpa",
    }
    return MistralConfig(**(settings | changes))


def hf_window_mask(window: int, implementation: str) -> torch.Tensor:
    """[1, 1, T, T]: HF's own sliding-window mask; bool for sdpa, additive for eager."""
    allowed = sdpa_mask(
        1,
        T,
        T,
        mask_function=sliding_window_causal_mask_function(window),
        allow_is_causal_skip=False,
    )
    if implementation == "sdpa":
        return allowed
    return torch.zeros(allowed.shape, dtype=F64).masked_fill(~allowed, float("-inf"))


# --- the block --------------------------------------------------------------------------
def block_pair(implementation: str, window: int = W, seed: int = 0):
    config = hf_config(num_hidden_layers=1, attn_implementation=implementation)
    torch.manual_seed(seed)
    ours = mistral_block(
        D, H, H_KV, D_FF, rope_base=10_000.0, eps=1e-5, window=window
    ).double()
    with torch.no_grad():
        for norm in (ours.attn_norm, ours.ffn_norm):
            norm.weight.normal_(1.0, 0.3)
    theirs = mistral.MistralDecoderLayer(config, 0).double()
    theirs.load_state_dict({hf_layer_name(k): v for k, v in ours.state_dict().items()})
    return ours, theirs, mistral.MistralRotaryEmbedding(config)


def block_grads(ours, theirs, rope, mask):
    cos_sin = rope(torch.zeros(B, T, D, dtype=F64), torch.arange(T).expand(B, T))
    return compare_grads(
        ours,
        ours,
        theirs,
        lambda x: theirs(x, attention_mask=mask, position_embeddings=cos_sin),
        hf_layer_name,
        shape=(B, T, D),
    )


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_mistral_block_equals_mistral_decoder_layer(implementation):
    ours, theirs, rope = block_pair(implementation)
    assert theirs.self_attn.config.sliding_window == W == ours.attn.window
    mask = hf_window_mask(W, implementation)
    assert_equal_to_hf(
        lambda: block_grads(ours, theirs, rope, mask),
        hf_in_input_dtype(theirs, mistral),
        tol=F64_TOL,
    )


@pytest.mark.parametrize("window", [W - 1, W + 1], ids=["W-1", "W+1"])
def test_sliding_window_is_w_keys_the_query_included_not_one_more_or_less(window):
    """HF's layer given its mask for sliding_window=W; ours with a window of W - 1 or
    W + 1 (the off-by-one readings) is another layer: its output moves by far more than
    the float32 steps."""
    ours, theirs, rope = block_pair("sdpa", window=window)
    _, got, want = block_grads(ours, theirs, rope, hf_window_mask(W, "sdpa"))
    assert (got[0] - want[0]).abs().max() > 1e-3


# --- the model --------------------------------------------------------------------------
def hf_model(seed: int = 0, **changes) -> MistralForCausalLM:
    """A float64 MistralForCausalLM with every gain random (HF initialises them to 1)."""
    return random_gains_hf_model(MistralForCausalLM, hf_config(**changes), seed=seed)


@pytest.fixture(scope="module")
def pair():
    theirs = hf_model()
    ours = mistral_from_hf_config(theirs.config).double()
    load_hf_mistral(ours, theirs.state_dict(), theirs.config)
    return ours, theirs


def ids(seed: int = 2, t: int = T) -> torch.Tensor:
    return random_tokens(VOCAB, B, t, seed)


def test_the_model_is_what_we_think_it_is(pair):
    ours, theirs = pair
    assert windows(ours) == [W] * LAYERS
    assert all(
        layer.self_attn.config.sliding_window == W for layer in theirs.model.layers
    )
    assert (
        len(list(ours.parameters())) == len(list(theirs.parameters())) == 3 + 9 * LAYERS
    )
    assert T > 2 * W  # the window is really shorter than the sequence


def test_logits_and_every_gradient_equal_mistral_for_causal_lm(pair):
    ours, theirs = pair
    assert_equal_to_hf(
        lambda: hf_model_grads(ours, theirs, ids(), our_name),
        hf_in_input_dtype(theirs, mistral),
        tol=F64_TOL,
    )


def test_the_window_is_in_the_path(pair):
    """The same weights without the window (a Llama): other logits."""
    ours, _ = pair
    llama = llama_from_hf_config(
        LlamaConfig(
            **{
                k: v
                for k, v in hf_config().to_dict().items()
                if k
                in (
                    "vocab_size",
                    "hidden_size",
                    "num_attention_heads",
                    "num_key_value_heads",
                    "intermediate_size",
                    "num_hidden_layers",
                    "max_position_embeddings",
                    "rms_norm_eps",
                    "rope_parameters",
                )
            }
        )
    ).double()
    llama.load_state_dict(ours.state_dict())
    with torch.no_grad():
        assert (llama(ids()) - ours(ids())).abs().max() > 1e-3
        torch.testing.assert_close(llama(ids(t=W)), ours(ids(t=W)), atol=SAME, rtol=0)


@pytest.mark.parametrize(
    "chunk", [None, 5, 2], ids=["one-prefill", "chunks-longer-than-W", "chunks-shorter"]
)
def test_greedy_decoding_past_the_window_equals_hf_generate_and_our_uncached_forward(
    pair, chunk
):
    ours, theirs = pair
    prompt = ids(4, 6)
    with torch.no_grad():
        want = theirs.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=20,
            do_sample=False,
        )
    got, logits = generate(ours, prompt, 20, prefill_chunk=chunk, return_logits=True)
    assert want.shape == (B, 26) and torch.equal(got, want)
    assert torch.equal(
        ours.generate(prompt, 20), got
    )  # uncached: the whole prefix each step
    with torch.no_grad():
        full = ours(got[:, :-1])[:, 5:]  # the logits each new token was chosen from
    torch.testing.assert_close(logits, full, atol=SAME, rtol=0)


def test_left_padded_batch_equals_hf_generate_and_each_row_alone(pair):
    ours, theirs = pair
    t0, pads = 8, [0, 3, 5]
    prompt = torch.randint(
        1, VOCAB, (3, t0), generator=torch.Generator().manual_seed(5)
    )
    valid = torch.arange(t0)[None] >= torch.tensor(pads)[:, None]
    prompt = prompt.masked_fill(~valid, 0)
    want = hf_greedy(theirs, prompt, 12, valid)
    got = generate(ours, prompt, 12, valid=valid)
    assert torch.equal(got, want)
    for row, pad in enumerate(pads):
        alone = generate(ours, prompt[row : row + 1, pad:], 12)
        assert torch.equal(alone[0, t0 - pad :], got[row, t0:])


def test_hf_keeps_w_minus_1_keys_between_calls_ours_w_slots(pair):
    """HF's DynamicSlidingWindowLayer, after a 12-token prefill (longer than the
    window), attends over all 12 (masked) and keeps the last W - 1 keys; each step
    concatenates the new one (W keys, a new tensor per step). Our ring keeps W slots:
    the W - 1 and one stale key, which the next token overwrites in place (W keys, no
    new tensor). The same positions are read: outputs equal (the tests above)."""
    ours, theirs = pair
    tokens = ids()
    with torch.no_grad(), hf_in_input_dtype(theirs, mistral):
        out = theirs(input_ids=tokens, use_cache=True)
    layer = out.cache.layers[0]
    assert (
        type(layer).__name__ == "DynamicSlidingWindowLayer"
        and layer.sliding_window == W
    )
    assert layer.keys.shape[-2] == W - 1 and layer.get_seq_length() == T
    cache = new_decode_cache(ours, B, T + 1)
    with torch.no_grad():
        cached_run(ours, tokens, cache)
    ring = cache.layers[0]
    assert ring.k.shape[2] == W and sorted(ring.positions.tolist()) == list(
        range(T - W, T)
    )
    k = ring.k[
        :, :, [p % W for p in range(T - W + 1, T)]
    ]  # the W - 1 a query at T reads
    torch.testing.assert_close(k, layer.keys, atol=SAME, rtol=0)


def test_beam_search_past_the_window_equals_hf(pair):
    """Beam search reorders every ring with its beams: == HF generate(num_beams=3)."""
    ours, theirs = pair
    prompt = ids(6, 5)
    with torch.no_grad():
        want = theirs.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            num_beams=3,
            max_new_tokens=12,
            do_sample=False,
        )
    got, _ = beam_generate(ours, prompt, 3, 12)
    assert torch.equal(got, want)


# --- loading ----------------------------------------------------------------------------
def test_loading_reads_sliding_window_and_refuses_another():
    windowed = mistral_from_hf_config(hf_config())
    assert windowed.blocks[0].attn.window == W
    assert all(type(b.attn) is SlidingWindowAttention for b in windowed.blocks)
    plain = mistral_from_hf_config(hf_config(sliding_window=None))
    assert layer_window(plain.blocks[0].attn) is None
    assert type(plain.blocks[0].attn) is MultiHeadAttention  # a Llama
    as_json = hf_config().to_dict()
    assert mistral_from_hf_config(as_json).blocks[1].attn.window == W
    as_json["sliding_window"] = None  # Mistral 7B v0.2 and later: no window
    assert layer_window(mistral_from_hf_config(as_json).blocks[1].attn) is None
    with pytest.raises(
        ValueError, match=r"^ours has window=None, theirs sliding_window=4$"
    ):
        check_mistral_config(plain, hf_config())
    with pytest.raises(
        ValueError, match=r"^ours has window=4, theirs sliding_window=8$"
    ):
        check_mistral_config(windowed, hf_config(sliding_window=8))
    check_mistral_config(windowed, hf_config())
    check_mistral_config(plain, hf_config(sliding_window=None))
    mixed = hf_config().to_dict() | {
        "layer_types": ["sliding_attention", "full_attention"]
    }
    with pytest.raises(
        ValueError,
        match=r"config layer_types=\['full_attention', "
        r"'sliding_attention'\] is not supported",
    ):
        mistral_from_hf_config(mixed)


def test_chapter_7_refuses_a_window_rather_than_dropping_it():
    """Chapter 7's loaders build no window: given one, they say so (before, a
    MistralConfig was built without its window, silently)."""
    for config in (hf_config(), hf_config().to_dict()):
        with pytest.raises(
            ValueError,
            match=r"^config sliding_window=4 is not supported "
            r"\(ours: None\)$",
        ):
            llama_from_hf_config(config)
    plain = llama_from_hf_config(hf_config(sliding_window=None))
    with pytest.raises(ValueError, match=r"^config sliding_window=4 is not supported"):
        load_hf_llama(plain, {}, hf_config())


# --- memory, syncs, compile -------------------------------------------------------------
@pytest.mark.parametrize("context", [3, W, 50])
def test_kv_cache_bytes_by_formula_equal_what_decoding_allocates(pair, context):
    ours, _ = pair
    cache = new_decode_cache(ours, B, context)
    expected = kv_cache_bytes(windows(ours), H_KV, D // H, 8, context, batch=B)
    assert (
        cache.nbytes
        == expected
        == B * LAYERS * 2 * H_KV * (D // H) * 8 * min(context, W)
    )


def test_no_host_sync_in_run_and_a_windowed_block_compiles_to_the_same_numbers():
    torch.manual_seed(7)
    model = mistral_from_hf_config(hf_config()).eval()
    tokens = ids()
    assert host_reads(model.run, tokens) == 0
    assert host_reads(model, tokens) == 1  # the id check
    block = model.blocks[0]
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    x = torch.randn(B, T, D, generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), block(x), atol=0, rtol=0)
