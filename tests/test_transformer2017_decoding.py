"""Cached greedy decoding of the 2017 encoder-decoder (`literate.models.transformer2017_decoding`).

What is proven, all in float64:

- `cached_greedy_decode` returns `EncoderDecoder.greedy_decode`'s tokens, on two models
  whose rows stop at different steps (PAD after EOS), on right-padded sources;
- every step's logits equal the last row of the teacher-forced `run` over the same
  prefix, one token at a time or fed in chunks (max abs diff <= 1e-12);
- the cache holds what an independent projection gives: the self-attention's keys and
  values of each layer's input, the cross-attention's of the memory;
- the work: each layer's cross-attention projects the source once per decode (the
  uncached decode: once per step), the self-attention projects one query row per step
  (n in all, against n (n + 1) / 2 uncached), counted with forward hooks, not timed;
- host syncs: one for the ids, then at most one per token; the steps make none;
- bad input is refused by name; the mode is restored; a step compiles (fullgraph).

Tolerance. Cached and uncached decoding compute the same sums in different groupings
(one query row against T keys instead of T rows; a [B, 1, d] matmul instead of
[B, T, d]), so they agree to rounding, not bit for bit: float64 rounding of O(1)
activations through two layers is ~1e-15, and 1e-12 leaves room for the growth through
the layers while any real mistake (a wrong position, a forgotten mask, a stale key)
moves logits by >= 1e-3.
"""

from __future__ import annotations

import functools
import math

import pytest
import torch

from literate.models.transformer2017 import EncoderDecoder, shift_right
from literate.models.transformer2017_decoding import (
    Seq2SeqCache,
    beam_translate,
    cached_decode_step,
    cached_greedy_decode,
    new_seq2seq_cache,
)
from literate.tools.syncs import HostReads

from harness import BAD_SOURCE_IDS

TOL = 1e-12  # float64; see the module docstring
PAD, BOS, EOS = 0, 1, 2
MAX_NEW = 10  # the decodes below ask for this many tokens


def tiny(seed: int = 0, **overrides) -> EncoderDecoder:
    torch.manual_seed(seed)
    config = {"dropout": 0.0, "max_length": 12} | overrides
    return EncoderDecoder(11, 16, 4, 32, 2, **config).double().eval()


def untrained() -> tuple[EncoderDecoder, torch.Tensor]:
    """A random model whose EOS embedding row is made 6 times longer: the EOS logit
    (hidden @ E[EOS]) then wins after 3 steps on two rows and 4 on the other two, so
    every row stops early and two are PAD after their EOS. Sources right-padded."""
    model = tiny(seed=3)
    with torch.no_grad():
        model.embedding.weight[EOS] *= 6.0
    source = torch.tensor(
        [
            [3, 4, 5, 2, 0, 0],
            [6, 7, 8, 9, 10, 2],
            [3, 2, 0, 0, 0, 0],
            [5, 5, 6, 7, 2, 0],
        ]
    )
    return model, source


def reversal_batch(g: torch.Generator, batch: int, width: int = 7):
    """Sources of 1..width-1 tokens in 3..10, then EOS, right-padded with PAD; the
    targets are the tokens reversed, then EOS."""
    lengths = torch.randint(1, width, (batch,), generator=g)
    source = torch.zeros(batch, width, dtype=torch.long)
    targets = torch.zeros(batch, width, dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        tokens = torch.randint(3, 11, (n,), generator=g)
        source[i, :n], targets[i, :n] = tokens, tokens.flip(0)
        source[i, n] = targets[i, n] = EOS
    return source, targets


@functools.lru_cache(
    maxsize=1
)  # trained once per run (1-2 s); the tests do not change it
def partly_trained() -> tuple[EncoderDecoder, torch.Tensor]:
    """60 Adam steps on reversing the source: the model has learned to stop at
    different lengths (EOS at step 2 on four rows, 4 on one) but not to reverse a long
    source, so one row (six tokens) runs to the length limit, not repeating a single
    token, while the others are PAD. One thread, so the weights are the same on every
    machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = tiny(seed=0).train()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(0)
        for _ in range(60):
            loss = model.loss(*reversal_batch(g, 32), label_smoothing=0.0)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    source, _ = reversal_batch(torch.Generator().manual_seed(1), 6)
    return model.eval(), source


CASES = {"untrained": untrained, "partly_trained": partly_trained}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    """(model, source, the uncached decode's output)."""
    model, source = CASES[request.param]()
    return request.param, model, source, model.greedy_decode(source, MAX_NEW)


def eos_steps(out: torch.Tensor) -> list[int | None]:
    """The step of each row's first EOS, None if it has none."""
    return [row.index(EOS) if EOS in row else None for row in out.tolist()]


# ---------------------------------------------------------------------------------------
# The same tokens, the same logits


def test_the_cases_run_every_path(case):
    """The fixtures exercise what the loop does differently per row: rows that stop at
    different steps, PAD after EOS, padded sources, and (untrained) an early stop of the
    whole batch, (partly trained) a row that reaches the length limit."""
    name, _, source, out = case
    steps = eos_steps(out)
    assert (source == PAD).any(dim=1).sum() >= 2  # right-padded source rows
    assert len({s for s in steps if s is not None}) >= 2  # rows stop at different steps
    assert any(s is not None and s + 1 < out.shape[1] for s in steps)  # PAD after EOS
    for row, s in zip(out.tolist(), steps):
        if s is not None:
            assert set(row[s + 1 :]) <= {PAD}
    if name == "untrained":
        assert None not in steps and out.shape[1] < MAX_NEW  # everyone stopped early
    else:
        assert None in steps and out.shape[1] == MAX_NEW  # one row ran to the limit
        assert len(set(out[steps.index(None)].tolist())) >= 2  # and is not one token


def scripted(model: EncoderDecoder, script: list[list[int]]) -> EncoderDecoder:
    """Make `model.logits` prefer script[k][b] for row b at decoding step k (one call
    per step in both decodes: [B, d] uncached, [B, 1, d] cached), with PAD and BOS
    scored highest of all (they must still never be produced)."""
    calls = {"k": 0}

    def logits(hidden):
        k = calls["k"]
        calls["k"] += 1
        out = torch.zeros(*hidden.shape[:-1], model.vocab_size, dtype=hidden.dtype)
        out[..., [PAD, BOS]] = 100.0
        for b, token in enumerate(script[k]):
            out[b, ..., token] = 50.0
        return out

    model.logits = logits
    return model


@pytest.mark.parametrize(
    "limit, expected",
    [
        (10, [[2, 0, 0, 0], [5, 2, 0, 0], [7, 8, 2, 0], [9, 9, 9, 2]]),  # done after 4
        (3, [[2, 0, 0], [5, 2, 0], [7, 8, 2], [9, 9, 9]]),  # the limit first
    ],
)
def test_rows_stop_at_their_first_eos_and_are_pad_after(limit, expected):
    """Scripted logits: row 0 says EOS at step 0, the others later; what a row's logits
    say after its EOS (scripted 5, 8, 9, here) never shows: PAD. The uncached decode,
    scripted the same way, agrees."""
    script = [[2, 5, 7, 9], [5, 2, 8, 9], [8, 8, 2, 9], [9, 9, 9, 2]] + [[9] * 4] * 6
    _, source = untrained()
    assert (
        cached_greedy_decode(scripted(tiny(), script), source, limit).tolist()
        == expected
    )
    assert scripted(tiny(), script).greedy_decode(source, limit).tolist() == expected


def test_cached_greedy_equals_greedy_decode_token_for_token(case):
    _, model, source, expected = case
    out = cached_greedy_decode(model, source, MAX_NEW)
    assert out.dtype == torch.long and out.shape == expected.shape
    assert torch.equal(out, expected)
    for n in (1, 3):  # the length limit cuts both at the same place
        assert torch.equal(
            cached_greedy_decode(model, source, n), model.greedy_decode(source, n)
        )


def test_each_step_equals_the_teacher_forced_run_over_its_prefix(case):
    """Step k (fed BOS, out_0 .. out_{k-1}, one token at a time) gives the logits of
    the last row of run(source, out[:, :k + 1]): all rows, also those past their EOS
    (whose PAD inputs must stay hidden from later queries, as run hides them)."""
    _, model, source, out = case
    source_valid = source != PAD
    memory = model.encode(model.embed(source), source_valid)
    cache = new_seq2seq_cache(model, memory, source_valid, out.shape[1])
    decoder_input = shift_right(out, BOS)  # [B, L]
    worst = 0.0
    with torch.no_grad():
        for k in range(out.shape[1]):
            step = cached_decode_step(
                model, decoder_input[:, k : k + 1], cache
            )  # [B, 1, V]
            full = model.run(source, out[:, : k + 1])[:, -1]  # [B, V]
            worst = max(worst, (step[:, 0] - full).abs().max().item())
    assert cache.next_pos == out.shape[1]
    assert worst <= TOL, worst


@pytest.mark.parametrize("chunks", [(3, 1, 2), (1, 4), (2, 2, 2, 2, 2)])
def test_chunks_of_several_tokens_equal_the_full_run(case, chunks):
    """Tokens fed several at a time, at offsets > 0: the rows of run(source, out)."""
    _, model, source, out = case
    n = min(sum(chunks), out.shape[1])
    source_valid = source != PAD
    memory = model.encode(model.embed(source), source_valid)
    cache = new_seq2seq_cache(model, memory, source_valid, n)
    decoder_input = shift_right(out[:, :n], BOS)
    with torch.no_grad():
        full = model.run(source, out[:, :n])  # [B, n, V]
        start, pieces = 0, []
        for size in chunks:
            if start >= n:
                break
            pieces.append(
                cached_decode_step(model, decoder_input[:, start : start + size], cache)
            )
            start += size
    got = torch.cat(pieces, dim=1)
    assert got.shape == full.shape
    assert (got - full).abs().max().item() <= TOL


def test_embed_offset_places_the_positions():
    """offset=0 is the old embed; offset=k gives rows k.. of the embedding of the whole
    sequence (the same sinusoid rows, to rounding: sin/cos of the same angles)."""
    model = tiny()
    tokens = torch.tensor([[3, 4, 5, 6, 7, 8], [9, 10, 3, 4, 5, 6]])
    whole = model.embed(tokens)
    assert torch.equal(model.embed(tokens, offset=0), whole)
    for k in (1, 2, 5):
        tail = model.embed(tokens[:, k:], offset=k)
        assert (tail - whole[:, k:]).abs().max().item() <= TOL
    assert (
        model.embed(tokens[:, 2:]) - whole[:, 2:]
    ).abs().max().item() > 0.1  # matters


# ---------------------------------------------------------------------------------------
# What the cache holds


def test_the_cache_holds_independently_projected_keys_and_values(case):
    """Self-attention: layer i's cache slots 0..L-1 hold layer i's self_attn.keys_values
    of its input, that input computed by running the decoder layer by layer on the
    whole prefix at once; slots after those fed stay zero. Cross-attention: the
    keys and values of the memory, as the layer projects them."""
    _, model, source, out = case
    n = out.shape[1]
    source_valid = source != PAD
    memory = model.encode(model.embed(source), source_valid)
    cache = new_seq2seq_cache(model, memory, source_valid, n + 2)  # 2 slots unused
    decoder_input = shift_right(out, BOS)
    target_valid = decoder_input != PAD
    with torch.no_grad():
        for k in range(n):
            cached_decode_step(model, decoder_input[:, k : k + 1], cache)
        y = model.embed(decoder_input)  # [B, L, d]: the input of layer 0
        for i, layer in enumerate(model.decoder):
            k_ref, v_ref = layer.self_attn.keys_values(y)  # [B, H, L, d_head]
            kv = cache.layers[i]
            assert kv.next_pos == n and kv.k.shape == (source.shape[0], 4, n + 2, 4)
            assert (kv.k[:, :, :n] - k_ref).abs().max().item() <= TOL
            assert (kv.v[:, :, :n] - v_ref).abs().max().item() <= TOL
            assert not kv.k[:, :, n:].any() and not kv.v[:, :, n:].any()
            k_mem, v_mem = layer.cross_attn.keys_values(memory)  # [B, H, S, d_head]
            assert torch.equal(cache.memory[i].k, k_mem)
            assert torch.equal(cache.memory[i].v, v_mem)
            y = layer(
                y,
                memory,
                target_valid=target_valid,
                memory_valid=source_valid,
                empty_row="zero",
            )
    assert torch.equal(cache.target_valid[:, :n], target_valid)
    assert torch.equal(cache.source_valid, source_valid)
    per_layer = 2 * (n + 2) * 16 + 2 * source.shape[1] * 16  # k and v rows of width d
    assert cache.nbytes == len(model.decoder) * source.shape[0] * per_layer * 8


# ---------------------------------------------------------------------------------------
# The work, counted


def count_calls(modules: dict[str, torch.nn.Module], call):
    """call() with a forward hook on each module: (result, {name: [rows of each call's
    input, ...]}), rows = the input's second-to-last axis (tokens per sequence)."""
    seen: dict[str, list[int]] = {name: [] for name in modules}
    handles = [
        m.register_forward_hook(
            lambda module, args, output, name=name: seen[name].append(args[0].shape[-2])
        )
        for name, m in modules.items()
    ]
    try:
        result = call()
    finally:
        for h in handles:
            h.remove()
    return result, seen


def projections(model: EncoderDecoder) -> dict[str, torch.nn.Module]:
    names = {}
    for i, layer in enumerate(model.decoder):
        for attn in ("self_attn", "cross_attn"):
            for proj in ("q_proj", "k_proj", "v_proj"):
                names[f"{i}.{attn}.{proj}"] = getattr(getattr(layer, attn), proj)
    return names


def test_the_source_is_projected_once_and_each_step_projects_one_token(case):
    """Cached: each layer's cross-attention k_proj and v_proj run once per decode,
    over the S source rows; its self-attention k_proj and v_proj once per step, over
    one row. The uncached decode, counted the same way, projects the source at every
    step: the counts tell the two apart."""
    _, model, source, expected = case
    n, s = expected.shape[1], source.shape[1]
    out, seen = count_calls(
        projections(model), lambda: cached_greedy_decode(model, source, MAX_NEW)
    )
    assert torch.equal(out, expected) and n >= 4
    for i in range(len(model.decoder)):
        assert seen[f"{i}.cross_attn.k_proj"] == [s]
        assert seen[f"{i}.cross_attn.v_proj"] == [s]
        assert seen[f"{i}.self_attn.k_proj"] == [1] * n
        assert seen[f"{i}.self_attn.v_proj"] == [1] * n
    _, seen = count_calls(
        projections(model), lambda: model.greedy_decode(source, MAX_NEW)
    )
    for i in range(len(model.decoder)):
        assert seen[f"{i}.cross_attn.k_proj"] == [s] * n
        assert seen[f"{i}.self_attn.k_proj"] == list(range(1, n + 1))


def test_query_rows_projected_are_n_cached_and_n_n_plus_1_over_2_uncached(case):
    """A timing-free cost: the self-attention's q_proj of every layer sees one row per
    step when cached (n in all), the whole prefix when not (1 + 2 + ... + n)."""
    _, model, source, expected = case
    n = expected.shape[1]
    layers = {str(i): layer.self_attn.q_proj for i, layer in enumerate(model.decoder)}
    _, cached = count_calls(
        layers, lambda: cached_greedy_decode(model, source, MAX_NEW)
    )
    _, uncached = count_calls(layers, lambda: model.greedy_decode(source, MAX_NEW))
    for i in layers:
        assert sum(cached[i]) == n
        assert sum(uncached[i]) == n * (n + 1) // 2


# ---------------------------------------------------------------------------------------
# Host syncs


def test_one_host_sync_for_the_ids_and_at_most_one_per_token(case):
    """1 (the ids' check) + one per token asking whether every row is done, none after
    the last step: 1 + (n - 1) at the length limit, 1 + n when all rows stop early.
    Making the cache and a step read no tensor value."""
    _, model, source, expected = case
    n = expected.shape[1]
    with HostReads() as reads:
        out = cached_greedy_decode(model, source, MAX_NEW)
    assert torch.equal(out, expected)
    assert len(reads.calls) <= 1 + n
    assert len(reads.calls) == (1 + n if n < MAX_NEW else MAX_NEW), reads.calls
    with HostReads() as reads:
        source_valid = source != PAD
        memory = model.encode(model.embed(source), source_valid)
        cache = new_seq2seq_cache(model, memory, source_valid, 3)
        with torch.no_grad():
            for _ in range(3):
                cached_decode_step(model, torch.full((source.shape[0], 1), BOS), cache)
    assert reads.calls == []


# ---------------------------------------------------------------------------------------
# Bad input, modes


def test_bad_max_new_tokens_are_refused_by_name():
    model, source = untrained()
    with pytest.raises(ValueError, match=r"^max_new_tokens=13 > max_length=12$"):
        cached_greedy_decode(model, source, 13)
    with pytest.raises(ValueError, match=r"^max_new_tokens must be >= 1, got 0$"):
        cached_greedy_decode(model, source, 0)
    with pytest.raises(TypeError, match=r"^max_new_tokens must be an int, got float$"):
        cached_greedy_decode(model, source, 2.0)
    with pytest.raises(TypeError, match=r"^max_new_tokens must be an int, got bool$"):
        cached_greedy_decode(model, source, True)
    assert cached_greedy_decode(model, source, 12).shape[1] <= 12  # the limit itself


@pytest.mark.parametrize("tokens, error, match", BAD_SOURCE_IDS)
def test_bad_source_ids_are_refused_by_name(tokens, error, match):
    model = tiny()
    with pytest.raises(error, match=match):
        cached_greedy_decode(model, tokens, 4)


@pytest.mark.parametrize(
    "offset, error, match",
    [
        (10, ValueError, r"^offset=10 \+ 3 tokens > max_length=12$"),
        (12, ValueError, r"^offset=12 \+ 3 tokens > max_length=12$"),
        (-1, ValueError, r"^offset must be >= 0, got -1$"),
        (1.0, TypeError, r"^offset must be an int, got float$"),
        (True, TypeError, r"^offset must be an int, got bool$"),
    ],
)
def test_embed_refuses_a_bad_offset_by_name(offset, error, match):
    model = tiny()
    with pytest.raises(error, match=match):
        model.embed(torch.tensor([[3, 4, 5]]), offset=offset)
    assert model.embed(torch.tensor([[3, 4, 5]]), offset=9).shape == (1, 3, 16)  # fits


def test_a_step_past_the_capacity_is_refused_before_anything_changes():
    model, source = untrained()
    source_valid = source != PAD
    memory = model.encode(model.embed(source), source_valid)
    cache = new_seq2seq_cache(model, memory, source_valid, 2)
    bos = torch.full((source.shape[0], 1), BOS)
    with torch.no_grad():
        cached_decode_step(model, bos, cache)
        with pytest.raises(
            ValueError,
            match=r"^feeding 2 token\(s\) at next_pos=1 needs "
            r"capacity >= 3, the cache has capacity=2$",
        ):
            cached_decode_step(model, torch.cat((bos, bos), dim=1), cache)
    assert cache.next_pos == 1 and all(c.next_pos == 1 for c in cache.layers)


def test_new_seq2seq_cache_refuses_bad_parts_by_name():
    model, source = untrained()
    source_valid = source != PAD
    memory = model.encode(model.embed(source), source_valid)
    with pytest.raises(ValueError, match=r"^capacity=13 > max_length=12$"):
        new_seq2seq_cache(model, memory, source_valid, 13)
    with pytest.raises(ValueError, match=r"^capacity must be >= 1, got 0$"):
        new_seq2seq_cache(model, memory, source_valid, 0)
    with pytest.raises(TypeError, match=r"^memory is torch\.float32"):
        new_seq2seq_cache(model, memory.float(), source_valid, 4)
    with pytest.raises(ValueError, match=r"^memory must have last axis 16"):
        new_seq2seq_cache(model, memory[..., :8], source_valid, 4)
    with pytest.raises(ValueError, match=r"^memory must be \[B, S >= 1, d=16\]"):
        new_seq2seq_cache(model, memory[0], source_valid, 4)
    with pytest.raises(TypeError, match=r"^source_valid must be a bool tensor"):
        new_seq2seq_cache(model, memory, source_valid.long(), 4)
    with pytest.raises(ValueError, match=r"^source_valid must be \[B, S\] = \[4, 6\]"):
        new_seq2seq_cache(model, memory, source_valid[:, :5], 4)
    kv = model.decoder[0].cross_attn.keys_values(memory)
    with pytest.raises(TypeError, match=r"^memory must be a list of 2 MemoryKV"):
        Seq2SeqCache(
            [model.decoder[i].self_attn.new_cache(4, 3) for i in (0, 1)],
            [kv],
            source_valid,
        )
    with pytest.raises(ValueError, match=r"^the layers' caches must share"):
        Seq2SeqCache(
            [
                model.decoder[0].self_attn.new_cache(4, 3),
                model.decoder[1].self_attn.new_cache(4, 5),
            ],
            [kv, kv],
            source_valid,
        )


def test_runs_in_eval_mode_and_restores_the_mode():
    """Dropout 0.5 configured: in train mode the decode is still the eval-mode one (two
    calls, two different generator states, the same tokens), and the mode is restored,
    also after a refused call."""
    model = tiny(seed=3, dropout=0.5)
    _, source = untrained()
    expected = model.greedy_decode(source, 6)
    model.train()
    torch.manual_seed(0)
    assert torch.equal(cached_greedy_decode(model, source, 6), expected)
    assert torch.equal(cached_greedy_decode(model, source, 6), expected)
    assert all(m.training for m in model.modules())
    with pytest.raises(ValueError, match="max_new_tokens"):
        cached_greedy_decode(model, source, 0)
    assert model.training
    model.eval()
    cached_greedy_decode(model, source, 2)
    assert not any(m.training for m in model.modules())


def test_pad_and_bos_are_never_produced():
    """With 100 added to the PAD and BOS logits they are the most likely tokens at every
    position; the decode still never emits them, except PAD after a row's EOS."""
    model, source = untrained()
    plain = model.logits

    def boosted(hidden):
        out = plain(hidden).clone()
        out[..., [PAD, BOS]] += 100.0
        return out

    model.logits = boosted  # what both decodes call
    out = cached_greedy_decode(model, source, MAX_NEW)
    assert torch.equal(out, model.greedy_decode(source, MAX_NEW))
    assert set(model.run(source, out).argmax(-1).unique().tolist()) <= {PAD, BOS}
    for row, s in zip(out.tolist(), eos_steps(out)):
        stop = len(row) if s is None else s + 1
        assert PAD not in row[:stop] and BOS not in row


def test_a_compiled_step_equals_the_eager_one():
    """A step captures as one graph (fullgraph; aot_eager: no C compiler) and gives the
    eager step's logits bit for bit, at offset 0 and after it."""
    model, source = untrained()
    source_valid = source != PAD
    memory = model.encode(model.embed(source), source_valid)
    eager = new_seq2seq_cache(model, memory, source_valid, 2)
    compiled = new_seq2seq_cache(model, memory, source_valid, 2)
    step = torch.compile(cached_decode_step, fullgraph=True, backend="aot_eager")
    tokens = torch.full((source.shape[0], 1), BOS)
    with torch.no_grad():
        for _ in range(2):  # offset 0, then 1 (a recompile)
            expected = cached_decode_step(model, tokens, eager)
            assert torch.equal(step(model, tokens, compiled), expected)
            tokens = expected[:, -1].argmax(-1, keepdim=True)
    assert compiled.next_pos == eager.next_pos == 2


# --- beam search, the 2017 paper's decoder -----------------------------------------------


def gnmt_scores(
    model: EncoderDecoder, source: torch.Tensor, tokens: torch.Tensor, alpha: float
) -> torch.Tensor:
    """Each row's hypothesis scored without a cache: the summed log-probabilities (PAD and BOS banned, as the
    decoders ban them) of its tokens through its first EOS, from one teacher-forced `run`, over Wu et al.'s
    ((5 + n) / 6) ** alpha."""
    with torch.no_grad():
        logits = model.run(source, tokens)  # position i predicts tokens[:, i]
    logits[..., [PAD, BOS]] = -math.inf
    logp = torch.log_softmax(logits, -1).gather(2, tokens[..., None])[..., 0]  # [B, L]
    scores = []
    for row in range(tokens.shape[0]):
        listed = tokens[row].tolist()
        n = listed.index(EOS) + 1 if EOS in listed else len(listed)
        scores.append(logp[row, :n].sum() / ((5 + n) / 6) ** alpha)
    return torch.stack(scores)


def test_one_beam_is_cached_greedy(case):
    _, model, source, _ = case
    for stopping in (False, True):  # with "never" one beam may search past an EOS
        best = beam_translate(model, source, MAX_NEW, beams=1, early_stopping=stopping)
        assert torch.equal(best.tokens, cached_greedy_decode(model, source, MAX_NEW))


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_a_beam_score_is_its_hypothesis_own_and_the_reordering_is_needed(
    case, alpha, monkeypatch
):
    _, model, source, _ = case
    best = beam_translate(model, source, MAX_NEW, beams=4, alpha=alpha)
    assert (
        best.scores - gnmt_scores(model, source, best.tokens, alpha)
    ).abs().max() < TOL
    lengths = [(row.tolist() + [EOS]).index(EOS) + 1 for row in best.tokens]
    assert best.lengths.tolist() == [min(n, MAX_NEW) for n in lengths]
    monkeypatch.setattr(Seq2SeqCache, "reorder", lambda self, rows: None)
    broken = beam_translate(model, source, MAX_NEW, beams=4, alpha=alpha)
    gap = (broken.scores - gnmt_scores(model, source, broken.tokens, alpha)).abs().max()
    assert gap > 1e-6


def test_four_beams_find_better_hypotheses_than_greedy_on_the_trained_model():
    """Not a theorem (a beam can prune greedy's prefix), but on these inputs: no row's best hypothesis scores
    worse than greedy's output under the same score, and at least one scores better."""
    model, source = partly_trained()
    best = beam_translate(model, source, MAX_NEW, beams=4, alpha=0.6)
    greedy = gnmt_scores(
        model, source, cached_greedy_decode(model, source, MAX_NEW), 0.6
    )
    assert (best.scores >= greedy - TOL).all() and (best.scores > greedy + 1e-6).any()


def test_beam_translate_refuses_bad_arguments():
    model, source = untrained()
    with pytest.raises(ValueError, match=r"^max_new_tokens=13 > max_length=12$"):
        beam_translate(model, source, 13)
    with pytest.raises(ValueError, match=r"^beams must be"):
        beam_translate(model, source, 4, beams=0)
    with pytest.raises(ValueError, match=r"^alpha must be >= 0, got -1$"):
        beam_translate(model, source, 4, alpha=-1)
