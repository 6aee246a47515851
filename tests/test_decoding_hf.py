"""Cached decoding (`literate.decoding.generate.generate`, `literate.parts.cache.DecodeCache`) against
Hugging Face `generate`, for GPT-2 (learned absolute positions) and Llama (RoPE, GQA),
weights copied, float64.

- Greedy, no padding: tokens == HF's `sequences`, every step's logits == HF's.
- EOS per row: a row that produced EOS repeats it (HF: pad_token_id = eos_token_id) and
  decoding stops when every row has: the same tokens, the same length.
- Left padding (`valid` / `attention_mask`): == HF; each row == that prompt alone; what
  a padding slot holds is never read (any id, in the vocabulary or not: check_prompt
  accepts both).
- The traps, shown: right padding continues from a pad's logits (and `check_prompt`
  refuses it, naming the row); positions from arange instead of cumsum - 1 change
  GPT-2's continuation, and Llama's logits only by the rounding of RoPE's float32 tables.
- Chunked prefill == one prefill; the context limit; the host syncs.
- cached decoding at the layer level: a `MultiHeadAttention` decoding token by token with a KVCache
  == its full causal forward, and the cache holds the keys (rotated) and values an
  independent computation gives, for MHA, GQA and MQA, with and without RoPE.

Logits compared with HF's come from a forward hook on HF's model, in float64: HF's
`generate` casts each step's logits to float32 before `output_logits` (and before its
argmax), so its returned `logits` are checked to be exactly the float32 rounding of what
the hook saw, and the hook's float64 logits are compared with ours.

Tolerances (float64 throughout):
- ours vs HF: max |diff| <= REL * max |HF logit|, REL = 1e-10. Same formulas, sums in
  another order (HF's eager or sdpa attention vs ours, another matmul split): measured
  ~1e-15 relative; a bug (a wrong position, a key cached in the wrong slot, a pad read)
  moves logits by 1e-2 or more. HF's `LlamaRMSNorm` computes in float32
  (`hidden_states.to(torch.float32)`): the Llama comparisons patch it (test harness, as
  tests/test_llama.py does) to compute its formula in the input dtype; unpatched, the
  logits agree to float32 units only (shown in one test, F32_BOUND).
- ours vs ours (a row alone vs in a padded batch, chunked vs one prefill, cached vs full
  at the layer level): 1e-12 absolute, the same sums in another grouping; not bit-equal
  in general (another T_q, another batch, the masked path of the kernel).
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
from transformers.models.llama import modeling_llama

from literate.decoding.generate import (
    cached_run,
    check_prompt,
    generate,
    new_decode_cache,
)
from literate.decoding.sampling import greedy
from literate.models.gpt2 import copy_hf_gpt2, gpt2_from_hf_config
from literate.models.llama import llama_from_hf_config, load_hf_llama
from literate.parts.cache import DecodeCache
from literate.parts.multi_head import MultiHeadAttention
from literate.parts.positions import apply_rope, rope_cache
from literate.tools.syncs import HostReads

from harness import (
    F32_BOUND,
    NO_SPECIAL_TOKENS,
    hf_norms_in_input_dtype,
    hf_sizes,
    random_gains_hf_model,
)

F64 = torch.float64
REL = 1e-10  # ours vs HF, times the largest |logit|
SAME = 1e-12  # ours vs ours, absolute
VOCAB, CONTEXT, PAD = 29, 24, 0
B, T0, N = 3, 6, 10  # batch, prompt length, new tokens


# --- the models -------------------------------------------------------------------------
def gpt2_pair():
    """(ours, theirs): a GPT2LMHeadModel with weights of std 0.5 (so that greedy decoding
    wanders over many tokens instead of settling on one) and random biases and gains,
    copied into ours. Eager attention: float64 throughout (no float32 step in HF's
    GPT-2)."""
    config = GPT2Config(
        n_embd=24,
        n_head=4,
        n_layer=2,
        n_positions=CONTEXT,
        vocab_size=VOCAB,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        initializer_range=0.5,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    theirs = GPT2LMHeadModel(config).double().eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in theirs.parameters():
            if p.ndim == 1:  # biases and LayerNorm gains: nonzero, so each one matters
                p.add_(0.1 * torch.randn(p.shape, generator=g, dtype=F64))
    ours = copy_hf_gpt2(gpt2_from_hf_config(config).double().eval(), theirs)
    return ours, theirs


def llama_pair():
    """(ours, theirs): a LlamaForCausalLM with GQA (4 query heads, 2 key/value heads), an
    untied head and random RMSNorm gains, loaded into ours. sdpa attention (float64; HF's
    eager one takes its softmax in float32)."""
    config = LlamaConfig(
        **hf_sizes(VOCAB, 32, 4, 2, 48, 2),
        max_position_embeddings=CONTEXT,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        initializer_range=0.3,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
        **NO_SPECIAL_TOKENS,
        attn_implementation="sdpa",
    )
    theirs = random_gains_hf_model(LlamaForCausalLM, config)
    ours = load_hf_llama(
        llama_from_hf_config(config).double().eval(), theirs.state_dict(), config
    )
    return ours, theirs


@pytest.fixture(scope="module")
def gpt2():
    return gpt2_pair()


@pytest.fixture(scope="module")
def llama():
    return llama_pair()


@pytest.fixture(params=["gpt2", "llama"])
def pair(request):
    return request.getfixturevalue(request.param)


def prompt(seed: int = 2, b: int = B, t: int = T0) -> torch.Tensor:
    return torch.randint(
        0, VOCAB, (b, t), generator=torch.Generator().manual_seed(seed)
    )


def left_padded(lengths, seed: int = 3, pad: int = PAD):
    """ids [B, max length], valid [B, max length]: row i's prompt right-aligned,
    `pad` before it (tokenizer-style left padding)."""
    t0 = max(lengths)
    ids = prompt(seed, len(lengths), t0)
    valid = torch.arange(t0)[None, :] >= t0 - torch.tensor(lengths)[:, None]
    return ids.masked_fill(~valid, pad), valid


def hf_generate(theirs, ids, n, *, attention_mask=None, eos=None):
    """HF's greedy `generate`, every setting that could change it given: (sequences,
    float64 logits [B, steps, V]). The logits are HF's model outputs at the last
    position of every forward call, seen by a forward hook before generate casts them
    to float32."""
    seen = []
    hook = theirs.register_forward_hook(
        lambda module, args, out: seen.append(out.logits[:, -1].clone())
    )
    mask = torch.ones_like(ids) if attention_mask is None else attention_mask
    try:
        with (
            hf_norms_in_input_dtype(theirs, modeling_llama)
            if isinstance(theirs, LlamaForCausalLM)
            else contextlib.nullcontext()
        ):
            out = theirs.generate(
                ids,
                attention_mask=mask,
                max_new_tokens=n,
                do_sample=False,
                num_beams=1,
                use_cache=True,
                eos_token_id=eos,
                pad_token_id=PAD if eos is None else eos,
                output_logits=True,
                return_dict_in_generate=True,
            )
    finally:
        hook.remove()
    logits = torch.stack(seen, dim=1)  # [B, steps, V]
    returned = torch.stack(out.logits, dim=1)
    assert returned.dtype == torch.float32 and logits.shape == returned.shape
    assert torch.equal(
        logits.float(), returned
    )  # the hook saw what generate chose from
    return out.sequences, logits


def assert_like_hf(got_logits, want_logits):
    assert got_logits.shape == want_logits.shape
    diff = (got_logits - want_logits).abs().max().item()
    bound = REL * want_logits.abs().max().item()
    assert diff <= bound, f"max |diff| {diff:.3g} > {bound:.3g}"


def assert_same(a, b, atol=SAME):
    assert a.shape == b.shape
    diff = (a - b).abs().max().item()
    assert diff <= atol, f"max |diff| {diff:.3g} > {atol:.3g}"


# --- 1. greedy, no padding --------------------------------------------------------------
def test_the_models_are_what_we_think(gpt2, llama):
    for ours, theirs in (gpt2, llama):
        # no sampling, penalty, length or token setting sneaks in from the config
        assert set(theirs.generation_config.to_diff_dict()) <= {
            "output_attentions",
            "output_hidden_states",
            "use_cache",
            "transformers_version",
            "_from_model_config",
        }
        assert ours.context == CONTEXT and ours.vocab_size == VOCAB
    ours, theirs = llama
    attn = ours.blocks[0].attn
    assert (attn.n_heads, attn.n_kv_heads) == (4, 2)  # GQA on both sides
    assert theirs.config.num_key_value_heads == 2
    assert new_decode_cache(ours, B, 8).layers[0].k.shape == (B, 2, 8, attn.d_head)


def test_greedy_tokens_and_logits_equal_hf_generate(pair):
    ours, theirs = pair
    ids = prompt()
    want, want_logits = hf_generate(theirs, ids, N)
    got, got_logits = generate(ours, ids, N, return_logits=True)
    assert got.shape == want.shape == (B, T0 + N) and torch.equal(got, want)
    new = got[:, T0:]
    assert len(new.unique()) >= 7 and all(
        len(r.unique()) >= 4 for r in new
    )  # not trivial
    assert got_logits.dtype == F64 and got_logits.shape == (B, N, VOCAB)
    assert_like_hf(got_logits, want_logits)


def test_hf_llama_unpatched_agrees_to_float32_units_only(llama):
    """HF's RMSNorm computes in float32: without the harness patch its float64 logits
    are within F32_BOUND of ours and further than 1e-12; the tokens still agree."""
    ours, theirs = llama
    ids = prompt()
    with torch.no_grad():
        unpatched = theirs(input_ids=ids).logits[:, -1]
    _, got_logits = generate(ours, ids, 1, return_logits=True)
    diff = (got_logits[:, 0] - unpatched).abs().max().item()
    assert 1e-12 < diff <= F32_BOUND * unpatched.abs().max().item()
    want = theirs.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=N,
        do_sample=False,
        num_beams=1,
        eos_token_id=None,
        pad_token_id=PAD,
    )
    assert torch.equal(generate(ours, ids, N), want)


# --- 2. EOS per row ---------------------------------------------------------------------
def first_hits(new: torch.Tensor, token: int) -> list[int | None]:
    """The step at which each row first produces `token` (None: never)."""
    hits = [(row == token).nonzero() for row in new]
    return [int(h[0]) if len(h) else None for h in hits]


def test_eos_per_row_equals_hf(pair):
    """Two EOS ids read off the run without EOS: one that some rows produce mid-way and
    another row never (full length, finished rows repeat it), and one every row produces,
    at different steps, before the last (decoding stops when the last row has)."""
    ours, theirs = pair
    ids = prompt(5)
    new = generate(ours, ids, N)[:, T0:]
    hits = {t: first_hits(new, t) for t in range(VOCAB)}
    some = [
        t
        for t, h in hits.items()
        if None in h and any(s is not None and 1 <= s < N - 1 for s in h)
    ]
    every = [
        t
        for t, h in hits.items()
        if None not in h and max(h) < N - 1 and len(set(h)) > 1
    ]
    assert some and every, "the prompt no longer gives both kinds of EOS: pick another"
    for eos, length in ((some[0], N), (every[0], max(hits[every[0]]) + 1)):
        want, want_logits = hf_generate(theirs, ids, N, eos=eos)
        got, got_logits = generate(ours, ids, N, eos_id=eos, return_logits=True)
        assert got.shape == want.shape == (B, T0 + length) and torch.equal(got, want)
        for row, hit in zip(got[:, T0:], hits[eos]):
            if hit is None:
                assert not (row == eos).any()
            else:  # EOS from its first appearance on
                assert (row[hit:] == eos).all() and not (row[:hit] == eos).any()
        assert_like_hf(got_logits, want_logits)


# --- 3. left padding --------------------------------------------------------------------
LENGTHS = [6, 3, 1]  # row 0 unpadded, row 2 a single real token after 5 pads


def test_left_padding_equals_hf_generate(pair):
    ours, theirs = pair
    ids, valid = left_padded(LENGTHS)
    want, want_logits = hf_generate(theirs, ids, N, attention_mask=valid.long())
    got, got_logits = generate(ours, ids, N, valid=valid, return_logits=True)
    assert torch.equal(got, want)
    assert_like_hf(got_logits, want_logits)


def test_each_padded_row_equals_its_prompt_alone(pair):
    ours, _ = pair
    ids, valid = left_padded(LENGTHS)
    got, got_logits = generate(ours, ids, N, valid=valid, return_logits=True)
    for i, length in enumerate(LENGTHS):
        alone, alone_logits = generate(
            ours, ids[i : i + 1, T0 - length :], N, return_logits=True
        )
        assert torch.equal(got[i, T0 - length :], alone[0])
        assert_same(got_logits[i], alone_logits[0])


def test_padding_ids_are_never_read(pair):
    """What a padding slot holds does not matter: another id in the vocabulary gives the
    same tokens and logits, bit for bit (a masked key has weight exactly 0)."""
    ours, _ = pair
    ids, valid = left_padded(LENGTHS)
    got, got_logits = generate(ours, ids, N, valid=valid, return_logits=True)
    other = ids.masked_fill(~valid, VOCAB - 1)
    again, again_logits = generate(ours, other, N, valid=valid, return_logits=True)
    assert torch.equal(again[:, T0:], got[:, T0:]) and torch.equal(
        again_logits, got_logits
    )


@pytest.mark.parametrize("pad", [-1, VOCAB], ids=["pad=-1", "pad=vocab_size"])
def test_padding_ids_outside_the_vocabulary_are_never_read(gpt2, pad):
    """check_prompt lets a padding slot hold any id ("a padding slot may hold any id"),
    so generate must not embed it: the same tokens as with an id in the vocabulary."""
    ours, _ = gpt2
    ids, valid = left_padded(LENGTHS)
    want = generate(ours, ids, N, valid=valid)
    assert (
        check_prompt(ours, ids.masked_fill(~valid, pad), valid)[1] is valid
    )  # accepted
    got = generate(ours, ids.masked_fill(~valid, pad), N, valid=valid)
    assert torch.equal(got[:, T0:], want[:, T0:])


def test_an_all_true_valid_equals_no_valid(pair):
    """valid all True takes the padded path (key_valid, positions from cumsum) and must
    give what the plain causal path gives."""
    ours, _ = pair
    ids = prompt()
    plain, plain_logits = generate(ours, ids, N, return_logits=True)
    everything = torch.ones_like(ids, dtype=torch.bool)
    masked, masked_logits = generate(ours, ids, N, valid=everything, return_logits=True)
    assert torch.equal(plain, masked)
    assert_same(plain_logits, masked_logits)


# --- 4. the traps -----------------------------------------------------------------------
@torch.no_grad()
def decode_unchecked(model, ids, valid, n):
    """generate's loop without check_prompt: what generate would do with a right-padded
    batch if it did not refuse it. The mask is right (no query reads a pad's key, and
    the positions count real tokens only), but the next token is chosen from the last
    column, a pad's logits, and the new tokens land after the pads. Returns the new
    tokens [B, n] and each step's logits [B, n, V]."""
    cache = new_decode_cache(model, ids.shape[0], ids.shape[1] + n)
    logits = cached_run(model, ids, cache, valid=valid, last=True)
    new, steps = [], []
    for _ in range(n):
        new.append(greedy(logits))
        steps.append(logits)
        logits = cached_run(model, new[-1][:, None], cache, last=True)
    return torch.stack(new, dim=1), torch.stack(steps, dim=1)


def test_trap_right_padding_continues_from_a_pad(pair):
    ours, _ = pair
    ids, left = left_padded(LENGTHS, seed=4)
    right = left.flip(1)  # the same real counts, padding after the prompt
    right_ids = torch.stack([torch.cat((r[v], r[~v])) for r, v in zip(ids, left)])
    assert torch.equal(right_ids[right], ids[left])  # the same real tokens, in order
    wrong, wrong_logits = decode_unchecked(ours, right_ids, right, N)
    good, good_logits = generate(ours, ids, N, valid=left, return_logits=True)
    assert torch.equal(wrong[0], good[0, T0:])  # the unpadded row is unaffected
    assert_same(wrong_logits[0], good_logits[0])
    for i in (1, 2):  # a padded row's first token is chosen from a pad's logits
        assert (wrong_logits[i, 0] - good_logits[i, 0]).abs().max() > 1e-2
    # which may still pick the same token by chance (row 2, one real token then pads,
    # does here for both models: the pad's query reads that one token only); row 1's
    # continuation goes elsewhere
    assert not torch.equal(wrong[1], good[1, T0:])
    for call in (
        lambda: check_prompt(ours, right_ids, right),
        lambda: generate(ours, right_ids, N, valid=right),
    ):
        with pytest.raises(
            ValueError,
            match=r"^valid row 1 is not left-padded: padding "
            r"\(False\) must come first",
        ):
            call()
    holes = left.clone()
    holes[2, 0] = True  # a real token, pads, a real token: padding in the middle
    with pytest.raises(ValueError, match=r"^valid row 2 is not left-padded"):
        check_prompt(ours, ids, holes)
    empty = left.clone()
    empty[1] = False  # nothing real
    with pytest.raises(ValueError, match=r"^valid row 1 is not left-padded"):
        check_prompt(ours, ids, empty)


def naive_advance(advance):
    """DecodeCache.advance with the positions a naive batch would use: each call's
    columns start .. start + T - 1 in every row, padding or not (the masks kept)."""

    def naive(self, t_new, valid=None):
        start = self.next_pos
        key_valid, positions = advance(self, t_new, valid)
        if positions is None:
            return key_valid, positions
        return key_valid, torch.arange(start, start + t_new).expand_as(positions)

    return naive


def test_trap_arange_positions_change_gpt2s_continuation(gpt2, monkeypatch):
    """GPT-2 adds a learned vector per absolute position: a row after p pads read at
    positions p, p + 1, ... instead of 0, 1, ... gets other logits, other tokens."""
    ours, _ = gpt2
    ids, valid = left_padded(LENGTHS)
    right, right_logits = generate(ours, ids, N, valid=valid, return_logits=True)
    monkeypatch.setattr(DecodeCache, "advance", naive_advance(DecodeCache.advance))
    naive, naive_logits = generate(ours, ids, N, valid=valid, return_logits=True)
    assert torch.equal(naive[0], right[0])  # the unpadded row: the same positions
    assert_same(naive_logits[0], right_logits[0])
    for i in (1, 2):
        assert (naive_logits[i] - right_logits[i]).abs().max() > 1e-2
        assert not torch.equal(naive[i], right[i])


# RoPE's cos and sin tables are float32 (HF's convention: angles pos * theta in float32,
# cast at use), so shifting a row's positions by its pad count p changes each table
# entry by float32 rounding (the angle's rounding grows with the position: up to
# ~CONTEXT * 2^-24 rad), not float64 rounding. The scores depend on the positions'
# differences only in exact arithmetic.
ROPE_SHIFT_BOUND = 1e-6  # times the largest |logit|; measured 6e-8


def test_trap_arange_positions_change_llamas_logits_by_rounding_only(
    llama, monkeypatch
):
    """RoPE is relative: q_i . k_j depends on pos_i - pos_j, which a shift by the pad
    count keeps. The continuation is the same; the logits move by the float32 rounding
    of the rotation tables only (further than float64 rounding: the tables are float32)."""
    ours, _ = llama
    ids, valid = left_padded(LENGTHS)
    right, right_logits = generate(ours, ids, N, valid=valid, return_logits=True)
    monkeypatch.setattr(DecodeCache, "advance", naive_advance(DecodeCache.advance))
    naive, naive_logits = generate(ours, ids, N, valid=valid, return_logits=True)
    assert torch.equal(naive, right)
    assert_same(
        naive_logits[0], right_logits[0]
    )  # the unpadded row: the same positions
    diff = (naive_logits[1:] - right_logits[1:]).abs().max().item()
    assert 1e-12 < diff <= ROPE_SHIFT_BOUND * right_logits.abs().max().item()


# --- 5. chunked prefill -----------------------------------------------------------------
@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "left-padded"])
def test_chunked_prefill_equals_one_prefill(pair, padded):
    ours, _ = pair
    ids, valid = left_padded(LENGTHS) if padded else (prompt(), None)
    one, one_logits = generate(ours, ids, N, valid=valid, return_logits=True)
    for chunk in (1, 3, T0, T0 + 5):  # T0 + 5: one piece, like None
        got, got_logits = generate(
            ours, ids, N, valid=valid, prefill_chunk=chunk, return_logits=True
        )
        assert torch.equal(got, one), chunk
        if chunk >= T0:
            assert torch.equal(got_logits, one_logits)  # the very same calls
        else:
            assert_same(got_logits, one_logits)


# --- 6. the context -------------------------------------------------------------------
def test_prompt_and_new_tokens_must_fit_the_context(pair):
    ours, _ = pair
    ids = prompt(t=CONTEXT - 4)
    assert generate(ours, ids, 4).shape == (B, CONTEXT)  # exactly full: allowed
    with pytest.raises(
        ValueError,
        match=rf"^the prompt \({CONTEXT - 4} tokens\) and "
        rf"max_new_tokens=5 need {CONTEXT + 1} positions, "
        rf"the model has context={CONTEXT}$",
    ):
        generate(ours, ids, 5)


# --- 7. host syncs --------------------------------------------------------------------
def syncs(*args, **kwargs) -> tuple[list[str], torch.Tensor]:
    with HostReads() as reads:
        out = generate(*args, **kwargs)
    return reads.calls, out


def test_host_syncs_one_for_the_prompt_one_per_token_for_eos(pair):
    ours, _ = pair
    ids, valid = left_padded(LENGTHS)
    for v in (None, valid):
        calls, out = syncs(ours, ids, N, valid=v)
        assert calls == ["__bool__"] and out.shape[1] == T0 + N  # the prompt's check
    ids = prompt(5)  # the EOS test's prompt: some token ends every row early
    new = generate(ours, ids, N)[:, T0:]
    never = next(t for t in range(VOCAB) if not (new == t).any())
    calls, out = syncs(ours, ids, N, eos_id=never)
    assert out.shape[1] == T0 + N and len(calls) == N  # 1 + 1 per token but the last
    hits = {t: first_hits(new, t) for t in range(VOCAB)}
    early = next(t for t, h in hits.items() if None not in h and max(h) < N - 1)
    calls, out = syncs(ours, ids, N, eos_id=early)
    steps = out.shape[1] - T0
    assert steps == max(hits[early]) + 1 < N and len(calls) == 1 + steps <= N
    assert set(calls) == {"__bool__"}


# --- 8. cached decoding at the layer level ----------------------------------------------------------
@pytest.mark.parametrize("rope", [False, True], ids=["no-rope", "rope"])
@pytest.mark.parametrize("n_kv", [4, 2, 1], ids=["MHA", "GQA", "MQA"])
def test_layer_decoding_with_a_cache_equals_the_full_causal_forward(n_kv, rope):
    """Token by token with a KVCache == one causal forward over the whole sequence
    (within 1e-12: one query at a time is another matmul and another kernel path, not
    bit-identical in general), and the cache holds x @ W_k^T (rotated to each position)
    and x @ W_v^T, computed here independently, in H_kv heads."""
    d, h, t, b = 32, 4, 9, 2
    torch.manual_seed(11)
    layer = MultiHeadAttention(d, h, n_kv, rope=rope).double().eval()
    x = torch.randn(b, t, d, dtype=F64, generator=torch.Generator().manual_seed(12))
    cache = layer.new_cache(b, t)
    with torch.no_grad():
        full = layer(x, causal=True)
        steps = torch.cat(
            [layer(x[:, i : i + 1], causal=True, cache=cache) for i in range(t)], dim=1
        )
    assert_same(steps, full)
    assert (
        steps - layer(x, causal=False).detach()
    ).abs().max() > 1e-2  # causality matters
    d_head = d // h
    k = (x @ layer.k_proj.weight.T).view(b, t, n_kv, d_head).transpose(1, 2)
    v = (x @ layer.v_proj.weight.T).view(b, t, n_kv, d_head).transpose(1, 2)
    if rope:
        cos, sin = rope_cache(t, d_head)  # float32 tables, as the layer's
        k = apply_rope(k, cos, sin)
    assert cache.next_pos == t and cache.k.shape == (b, n_kv, t, d_head)
    assert_same(cache.k, k)
    assert_same(cache.v, v)
    if rope:  # the cache holds rotated keys: the unrotated ones are far
        unrotated = (x @ layer.k_proj.weight.T).view(b, t, n_kv, d_head).transpose(1, 2)
        assert (cache.k - unrotated).abs().max() > 1e-2
