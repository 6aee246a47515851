"""Greedy decoding of the 2017 encoder-decoder with caches: the source once, one token
per step.

`EncoderDecoder.greedy_decode` reruns the decoder on the whole prefix for every new
token, and every decoder layer's cross-attention projects the encoder's output to keys
and values again at every step, though the source has not changed. Two caches remove
the repeated work:

* the **cross-attention's keys and values** depend on the source only: each decoder
  layer projects the memory once (`cross_attn.keys_values(memory)`, a `MemoryKV`) and
  every step reads them unchanged;
* the **self-attention's keys and values** of the tokens decoded so far do not change
  when a token is appended (the layer is causal): a preallocated `KVCache` per layer
  keeps them, so each step projects one token.

`Seq2SeqCache` holds both, with the source's padding flags and the decoder input's
(PAD after a row's EOS is hidden from every later query, as `run` hides it).
`cached_decode_step` feeds the tokens after those cached; `cached_greedy_decode` is
`greedy_decode` on top of it, token for token the same output.

Host syncs: one for the source's ids (`model.check`), then one per token to ask whether
every row has finished (none after the last). Steps read no tensor value.

Shapes: B batch, S source length, T new tokens, d model width, V vocabulary, H heads,
d_head = d / H.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from literate.decoding.beam import (
    BeamResult,
    EarlyStopping,
    beam_search,
    gnmt_length_penalty,
    stopping_rule,
)
from literate.models.transformer2017 import EncoderDecoder
from literate.parts.cache import KVCache, MemoryKV
from literate.parts.checks import (
    bool_tensor,
    checked_entry,
    features,
    positive_int,
    token_ids,
)

__all__ = ["Seq2SeqCache", "new_seq2seq_cache", "cached_decode_step",
           "cached_greedy_decode", "beam_translate"]


# --8<-- [start:seq2seq_cache]
class Seq2SeqCache:
    """What the decoder of an encoder-decoder keeps between steps, per decoder layer:
    its self-attention's `KVCache` [B, H, capacity, d_head] (filled one step at a time)
    and its cross-attention's `MemoryKV` [B, H, S, d_head] (projected once from the
    memory); and for the whole stack, the source's flags `source_valid` [B, S] and the
    decoder input's `target_valid` [B, capacity] (True: a real token, not PAD).
    Every layer's slot t holds the same token: `next_pos` counts them.
    """

    def __init__(self, layers: list[KVCache], memory: list[MemoryKV],
                 source_valid: Tensor) -> None:
        layers, memory = list(layers), list(memory)
        if not layers or not all(isinstance(c, KVCache) for c in layers):
            raise TypeError("layers must be a non-empty list of KVCache, one per layer")
        if len(memory) != len(layers) or not all(isinstance(m, MemoryKV)
                                                 for m in memory):
            raise TypeError(f"memory must be a list of {len(layers)} MemoryKV, one "
                            "per layer")
        first = layers[0]
        if any((c.batch, c.capacity, c.device, c.next_pos)
               != (first.batch, first.capacity, first.device, first.next_pos)
               for c in layers):
            raise ValueError("the layers' caches must share batch, capacity, device "
                             "and next_pos")
        shape = (first.batch, memory[0].k.shape[-2])  # [B, S]
        if (bool_tensor("source_valid", source_valid).shape != shape
                or source_valid.device != first.device):
            raise ValueError(f"source_valid must be [B, S] = {list(shape)} on "
                             f"{first.device}, got {tuple(source_valid.shape)} on "
                             f"{source_valid.device}")
        self.layers, self.memory, self.source_valid = layers, memory, source_valid
        self.target_valid = torch.ones(first.batch, first.capacity, dtype=torch.bool,
                                       device=first.device)  # [B, capacity]

    @property
    def next_pos(self) -> int:
        """The position of the next token fed, the number of tokens cached."""
        return self.layers[0].next_pos

    @property
    def capacity(self) -> int:
        """How many decoder input tokens the caches can hold."""
        return self.layers[0].capacity

    @property
    def nbytes(self) -> int:
        """Bytes of every layer's keys and values, self- and cross-attention."""
        return sum(c.nbytes + m.k.nbytes + m.v.nbytes
                   for c, m in zip(self.layers, self.memory, strict=True))

    def reorder(self, rows: Tensor) -> None:
        """Row i of the decoded history becomes row rows[i] (beam search). The memory
        is not moved: rows stay within their input, whose source they all read."""
        for c in self.layers:
            c.reorder(rows)
        n = self.next_pos
        self.target_valid[:, :n] = self.target_valid[:, :n].index_select(0, rows)
# --8<-- [end:seq2seq_cache]


# --8<-- [start:new_seq2seq_cache]
def new_seq2seq_cache(model: EncoderDecoder, memory: Tensor, source_valid: Tensor,
                      capacity: int, *, beams: int = 1) -> Seq2SeqCache:
    """The caches for decoding `capacity` input tokens against memory [B, S, d] (the
    encoder's output) with source_valid [B, S]: each decoder layer gets an empty
    self-attention KVCache and its cross-attention's keys and values of the memory,
    projected here, once. `beams`: each row becomes that many consecutive rows (beam
    search), the projected keys and values repeated, not projected again. Metadata
    checks only: no value is read."""
    capacity, k = positive_int("capacity", capacity), positive_int("beams", beams)
    if capacity > model.max_length:
        raise ValueError(f"capacity={capacity} > max_length={model.max_length}")
    memory = features("memory", memory, width=model.d_model,
                      like=model.embedding.weight)
    if memory.ndim != 3 or memory.shape[1] == 0:
        raise ValueError(f"memory must be [B, S >= 1, d={model.d_model}], "
                         f"got {tuple(memory.shape)}")
    b, layers = memory.shape[0], model.decoder
    projected = [layer.cross_attn.keys_values(memory) for layer in layers]  # once
    if k > 1:
        projected = [MemoryKV(*(t.repeat_interleave(k, dim=0) for t in kv))
                     for kv in projected]
        source_valid = source_valid.repeat_interleave(k, dim=0)
    own = [layer.self_attn.new_cache(b * k, capacity) for layer in layers]
    return Seq2SeqCache(own, projected, source_valid)
# --8<-- [end:new_seq2seq_cache]


# --8<-- [start:cached_decode_step]
def cached_decode_step(model: EncoderDecoder, tokens: Tensor,
                       cache: Seq2SeqCache) -> Tensor:
    """tokens [B, T], the decoder input after the `cache.next_pos` tokens cached ->
    logits [B, T, V], what `model.run` gives at those positions. Unchecked: ids as
    `run` takes them (the first token fed is BOS)."""
    start, end = cache.next_pos, cache.next_pos + tokens.shape[1]
    if end > cache.capacity:
        raise ValueError(f"feeding {tokens.shape[1]} token(s) at next_pos={start} "
                         f"needs capacity >= {end}, the cache has "
                         f"capacity={cache.capacity}")
    cache.target_valid[:, start:end] = tokens != model.pad_id  # PAD: hidden from now on
    target_valid = cache.target_valid[:, :end]  # [B, end]: every key the queries see
    with checked_entry(model):  # the layers do not check again
        y = model.embed(tokens, offset=start)  # [B, T, d]: positions start .. end - 1
        parts = zip(model.decoder, cache.layers, cache.memory, strict=True)
        for layer, kv, memory in parts:  # memory: this layer's keys and values of it
            y = layer(y, memory, target_valid=target_valid,
                      memory_valid=cache.source_valid, cache=kv,
                      empty_row="zero")  # key 0 (BOS) is real: no row is empty
        return model.logits(y)  # [B, T, V]
# --8<-- [end:cached_decode_step]


# --8<-- [start:cached_greedy_decode]
@torch.no_grad()
def cached_greedy_decode(model: EncoderDecoder, source: Tensor,
                         max_new_tokens: int) -> Tensor:
    """`model.greedy_decode(source, max_new_tokens)` with caches: [B, S] -> [B, L],
    L <= max_new_tokens, the same tokens.

    A row stops at its first EOS (kept) and is PAD after it; all rows stop after
    max_new_tokens, or once every row has. PAD and BOS are never produced. The source
    is encoded once, each layer's cross-attention projects it once, and each step feeds
    one token. Runs in eval mode, restoring the previous mode after.
    """
    (source,) = model.check(source=source)  # the one host sync for the ids
    n = positive_int("max_new_tokens", max_new_tokens)
    if n > model.max_length:
        raise ValueError(f"max_new_tokens={n} > max_length={model.max_length}")
    was_training = model.training
    model.eval()
    try:
        b, device = source.shape[0], source.device
        source_valid = source != model.pad_id  # [B, S]
        memory = model.encode(model.embed(source), source_valid)  # [B, S, d], once
        cache = new_seq2seq_cache(model, memory, source_valid, n)  # BOS + n - 1 fed
        banned = torch.zeros(model.vocab_size, dtype=torch.bool, device=device)  # [V]
        banned[model.pad_id] = banned[model.bos_id] = True  # not targets: never made
        token = torch.full((b,), model.bos_id, device=device)  # [B]: BOS first
        done = torch.zeros(b, dtype=torch.bool, device=device)  # [B]
        new = []
        for step in range(n):
            logits = cached_decode_step(model, token[:, None], cache)[:, -1]  # [B, V]
            logits = logits.masked_fill(banned, -math.inf)
            token = logits.argmax(dim=-1).masked_fill(done, model.pad_id)  # [B]
            new.append(token)
            done |= token == model.eos_id
            if step + 1 < n and done.all():  # one host sync a token
                break
    finally:
        model.train(was_training)
    return torch.stack(new, dim=1)  # [B, L]
# --8<-- [end:cached_greedy_decode]


# --8<-- [start:beam_translate]
@torch.no_grad()
def beam_translate(model: EncoderDecoder, source: Tensor,
                   max_new_tokens: int | None = None, *, beams: int = 4,
                   alpha: float = 0.6,
                   early_stopping: EarlyStopping = "never") -> BeamResult:
    """The 2017 paper's decoding (Vaswani et al. 2017, sec. 6.1): beam search with
    `beams` = 4, Wu et al.'s length penalty with `alpha` = 0.6, and at most the source
    length + 50 tokens (`max_new_tokens` None; and no more than the model's
    max_length). source [B, S] -> the best hypothesis of each row: tokens [B, L] (EOS
    kept, PAD after), scores [B], lengths [B]. PAD and BOS are never produced, as in
    `greedy_decode`. "never": an input is done only when no running beam could beat
    its finished ones even at the longest length, close to the bound of the paper's
    own code (tensor2tensor's beam search, which compares with fewer than k finished
    hypotheses too). The source length is the padded batch's, as there."""
    early_stopping = stopping_rule(early_stopping)
    penalty = gnmt_length_penalty(alpha)
    k = positive_int("beams", beams)
    limit = min(token_ids("source", source).shape[1] + 50, model.max_length)
    n = limit if max_new_tokens is None else positive_int("max_new_tokens",
                                                          max_new_tokens)
    if n > model.max_length:
        raise ValueError(f"max_new_tokens={n} > max_length={model.max_length}")
    (source,) = model.check(source=source)  # the one host sync for the ids
    was_training = model.training
    model.eval()
    try:
        source_valid = source != model.pad_id  # [B, S]
        memory = model.encode(model.embed(source), source_valid)  # [B, S, d], once
        cache = new_seq2seq_cache(model, memory, source_valid, n, beams=k)
        banned = torch.zeros(model.vocab_size, dtype=torch.bool, device=source.device)
        banned[model.pad_id] = banned[model.bos_id] = True  # not targets: never made

        def step(tokens: Tensor) -> Tensor:  # [B * k] -> [B * k, V]
            logits = cached_decode_step(model, tokens[:, None], cache)[:, -1]
            return logits.masked_fill(banned, -math.inf)

        bos = torch.full((source.shape[0] * k,), model.bos_id, device=source.device)
        return beam_search(step(bos), step, cache.reorder, beams=k, max_new_tokens=n,
                           eos_id=model.eos_id, penalty=penalty,
                           early_stopping=early_stopping, fill=model.pad_id)
    finally:
        model.train(was_training)
# --8<-- [end:beam_translate]
