"""Decoding with a KV cache: prefill once, then one token per step.

Chapter 5's `generate` runs the whole prefix through the model for every new token:
token t costs t tokens' projections and attention over t x t scores, so n tokens cost
O(n^2) projections. Nothing about the old tokens changes when a new one is appended
(the blocks are causal), so their keys and values can be kept: a `DecodeCache` holds
them, one preallocated `KVCache` per layer, and each step projects one token.

Batches of prompts of different lengths are **left**-padded: the last column of every
row is then a real token, whose logits choose the next one, and every row's new token
lands in the same column. Each row's positions count its real tokens only
(`cumsum(valid) - 1`), and the padding slots are masked out of every attention; a
padding query that sees no real key gets a zero output (`empty_row="zero"`).

Host syncs: one for the prompt's values (ids in the vocabulary and, with padding, the
padding on the left), then one per token for the EOS test (none without `eos_id`).

Shapes: B batch, T0 prompt length, T new tokens, V vocabulary, n new tokens.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from literate.decoding.sampling import greedy
from literate.parts.cache import DecodeCache, KVCache
from literate.parts.checks import (
    bool_tensor,
    checked_entry,
    ids_in_vocabulary,
    non_negative_int,
    positive_int,
    token_ids,
)

__all__ = ["check_decoder", "new_decode_cache", "check_run", "cached_run",
           "check_prompt", "check_request", "check_chosen", "generate"]


# --8<-- [start:cached_run]
def check_decoder(model: object) -> nn.Module:
    """`model` if it is a decoder-only language model of this site (GPT-2's layout,
    Llama's and theirs): a module with `embed`, `blocks`, `final_norm`, `lm_head`."""
    parts = ("embed", "blocks", "final_norm", "lm_head")
    if not isinstance(model, nn.Module) or not all(hasattr(model, p) for p in parts):
        raise TypeError(f"model must be a decoder-only language model (gpt2_model, "
                        f"llama_model...: embed, blocks, final_norm, lm_head), got "
                        f"{type(model).__name__}")
    return model


def new_decode_cache(model: nn.Module, batch: int, capacity: int) -> DecodeCache:
    """An empty cache for every block of `model` (GPT-2's or Llama's layout)."""
    blocks = check_decoder(model).blocks
    return DecodeCache([b.attn.new_cache(batch, capacity) for b in blocks])


def check_run(model: nn.Module, ids: object, cache: object, last: object) -> None:
    """What `cached_run` refuses, from metadata: ids [B, T] as torch.long, a
    DecodeCache of one layer cache per block and B rows, on the ids' device, each
    layer's of the layout its layer writes (checked while it is empty), a bool `last`.
    """
    ids = token_ids("ids", ids)
    if not isinstance(cache, DecodeCache):
        one = "; a KVCache is one layer's" if isinstance(cache, KVCache) else ""
        raise TypeError(f"cache must be a DecodeCache (new_decode_cache(model, batch, "
                        f"capacity)), got {type(cache).__name__}{one}")
    blocks, layers = check_decoder(model).blocks, cache.layers
    if len(layers) != len(blocks):
        raise ValueError(f"cache holds {len(layers)} layer caches, the model has "
                         f"{len(blocks)} blocks: make it with new_decode_cache(model, "
                         "batch, capacity)")
    if ids.shape[0] != cache.valid.shape[0] or ids.device != cache.valid.device:
        raise ValueError(f"ids is [B={ids.shape[0]}, T] on {ids.device}, the cache "
                         f"holds {cache.valid.shape[0]} rows on {cache.valid.device}")
    fresh = cache.next_pos == 0  # a filled cache was checked empty, bound since
    for i, (block, c) in enumerate(zip(blocks, layers) if fresh else ()):
        want = block.attn.new_cache(1, 1)  # what the layer writes (a tiny one)
        held, needed = ([x.n_kv_heads, x.d_head, x.dtype, str(x.device)]
                        for x in (c, want))
        latent = [getattr(x, "kv_lora_rank", None) for x in (c, want)]  # MLA's
        if held != needed or latent[0] != latent[1]:
            raise ValueError(f"cache.layers[{i}] holds [n_kv_heads, d_head, dtype, "
                             f"device] = {held}, model.blocks[{i}] writes {needed}: "
                             "make the cache with new_decode_cache(model, ...)")
    if not isinstance(last, bool):
        raise TypeError(f"last must be a bool, got {type(last).__name__}")


def cached_run(model: nn.Module, ids: Tensor, cache: DecodeCache, *,
               valid: Tensor | None = None, last: bool = False) -> Tensor:
    """ids [B, T] (the tokens after those cached) -> logits [B, T, V], or [B, V] for
    the last position only (`last`: the output projection is a small model's largest
    matmul). `valid` [B, T]: False marks padding. Metadata checked (`check_run`); the
    ids' values are read only if the embedding fails on one (no host sync otherwise)."""
    check_run(model, ids, cache, last)
    start, padded = cache.next_pos, cache.padded
    key_valid, positions = cache.advance(ids.shape[1], valid)
    try:
        with checked_entry(model):  # the layers do not check again
            x = model.embed(ids, offset=start, positions=positions)  # [B, T, d]
            for block, layer_cache in zip(model.blocks, cache.layers, strict=True):
                x = block(x, key_valid=key_valid, cache=layer_cache,
                          positions=positions,
                          empty_row="zero")  # a padding query may see no real key
            if last:
                x = x[:, -1]  # [B, d]
            return model.lm_head(model.final_norm(x))
    except BaseException as error:  # a failed call leaves no token in any layer's cache
        for layer_cache in cache.layers:
            if layer_cache.next_pos > start:
                layer_cache.truncate(start)
        cache.padded = padded
        if isinstance(error, IndexError):  # torch's "index out of range in self"
            ids_in_vocabulary({"ids": ids}, vocab_size=model.vocab_size)  # names it
        raise
# --8<-- [end:cached_run]


# --8<-- [start:check_prompt]
def check_prompt(model: nn.Module, ids: object,
                 valid: object) -> tuple[Tensor, Tensor | None]:
    """A prompt from outside: ids [B, T0] and valid [B, T0] (None: no padding), with
    every row's padding on the left (a real last token) and its ids in the vocabulary.
    Metadata first, then one host sync for both value checks."""
    check_decoder(model)
    ids = token_ids("ids", ids)
    if ids.device != model.lm_head.weight.device:
        raise ValueError(f"ids is on {ids.device}, the model on "
                         f"{model.lm_head.weight.device}")
    bad_ids = (ids < 0) | (ids >= model.vocab_size)  # [B, T0]
    if valid is None:
        bad_rows = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
    else:
        if bool_tensor("valid", valid).shape != ids.shape or valid.device != ids.device:
            raise ValueError(f"valid must be [B, T0] = {list(ids.shape)} on "
                             f"{ids.device}, got {tuple(valid.shape)} on "
                             f"{valid.device}")
        right = (valid[:, :-1] & ~valid[:, 1:]).any(dim=1)  # a real token before a pad
        bad_rows = right | ~valid[:, -1]  # [B]: not left-padded, or nothing real
    if valid is not None:
        bad_ids &= valid  # a padding slot may hold any id
    if not torch.stack((bad_ids.any(), bad_rows.any())).any():  # the one host sync
        return ids, valid
    if bad_rows.any():
        row = int(bad_rows.nonzero()[0])
        raise ValueError(f"valid row {row} is not left-padded: padding (False) must "
                         "come first and the last token must be real; pad on the left")
    row, col = bad_ids.nonzero()[0].tolist()
    raise ValueError(f"ids[{row}, {col}] = {int(ids[row, col])} is outside the "
                     f"vocabulary [0, {model.vocab_size})")


def check_request(model: nn.Module, ids: object, max_new_tokens: object,
                  eos_id: object, pad_id: object) -> int:
    """What a generation request asks, from metadata, before the prompt's values are
    read: ids [B, T0] and max_new_tokens >= 1 within the model's context, eos_id and
    pad_id ids of the vocabulary (pad_id only with an eos_id). Returns n."""
    check_decoder(model)
    t0 = token_ids("ids", ids).shape[1]
    n = positive_int("max_new_tokens", max_new_tokens)
    if t0 + n > model.context:
        raise ValueError(f"the prompt ({t0} tokens) and max_new_tokens={n} need "
                         f"{t0 + n} positions, the model has context={model.context}")
    for name, value in (("eos_id", eos_id), ("pad_id", pad_id)):
        if value is not None and non_negative_int(name, value) >= model.vocab_size:
            raise ValueError(f"{name} must be < vocabulary size {model.vocab_size}, "
                             f"got {value}")
    if pad_id is not None and eos_id is None:
        raise ValueError("pad_id fills the rows that have produced eos_id: give an "
                         "eos_id too")
    return n


def check_chosen(next_id: object, logits: Tensor) -> Tensor:
    """What `choose` returned from logits [B, V], if it is ids [B] (torch.long, on the
    logits' device): metadata only, read at every step without a host sync."""
    if not isinstance(next_id, Tensor) or next_id.dtype != torch.long:
        kind = next_id.dtype if isinstance(next_id, Tensor) else type(next_id).__name__
        raise TypeError(f"choose must return token ids as torch.long, got {kind}")
    if next_id.shape != logits.shape[:1] or next_id.device != logits.device:
        raise ValueError(f"choose must return ids [B={logits.shape[0]}] on "
                         f"{logits.device}, one per row of logits [B, V], got "
                         f"{tuple(next_id.shape)} on {next_id.device}")
    return next_id
# --8<-- [end:check_prompt]


# --8<-- [start:generate]
@torch.no_grad()
def generate(model: nn.Module, ids: Tensor, max_new_tokens: int, *,
             valid: Tensor | None = None, eos_id: int | None = None,
             pad_id: int | None = None, choose: Callable[[Tensor], Tensor] = greedy,
             prefill_chunk: int | None = None,
             return_logits: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """Chapter 5's `generate` with a KV cache: ids [B, T0] -> [B, T0 + n], n <=
    max_new_tokens, the prompt first. `valid` [B, T0]: False marks left padding.
    `choose` turns logits [B, V] into ids [B] (`greedy`, or chapter 6's `sampler`).
    A row that has produced `eos_id` goes on with `pad_id` (by default the EOS again,
    as in chapter 5; Hugging Face's `pad_token_id`) while the others go on; decoding
    stops when all rows have. `prefill_chunk`: feed the prompt in pieces of that many
    tokens (the same result, a smaller peak of memory). `return_logits`: also the
    logits of every step, [B, n, V]. The prompt and the new tokens must fit the
    model's context.
    """
    n = check_request(model, ids, max_new_tokens, eos_id, pad_id)
    if not callable(choose):
        raise TypeError(f"choose must be a function logits [B, V] -> ids [B] (greedy, "
                        f"a sampler), got {type(choose).__name__}")
    if not isinstance(return_logits, bool):
        raise TypeError(f"return_logits must be a bool, got "
                        f"{type(return_logits).__name__}")
    ids, valid = check_prompt(model, ids, valid)  # the one host sync of the prompt
    b, t0 = ids.shape
    fill = eos_id if pad_id is None else pad_id  # what a finished row appends
    chunk = t0 if prefill_chunk is None else positive_int("prefill_chunk",
                                                          prefill_chunk)
    was_training = model.training
    model.eval()
    try:
        cache = new_decode_cache(model, b, t0 + n)
        # padding is never read, but it is embedded: give it an id in the vocabulary
        prompt = ids if valid is None else ids.masked_fill(~valid, 0)
        for s in range(0, t0, chunk):  # prefill: the prompt, chunk by chunk
            piece = None if valid is None else valid[:, s:s + chunk]
            logits = cached_run(model, prompt[:, s:s + chunk], cache, valid=piece,
                                last=True)
        finished = torch.zeros(b, dtype=torch.bool, device=ids.device)  # [B]
        new, steps = [], []
        for step in range(n):
            next_id = check_chosen(choose(logits), logits)  # [B]
            if eos_id is not None:
                next_id = next_id.masked_fill(finished, fill)  # done: pad
                finished |= next_id == eos_id
            new.append(next_id)
            steps.append(logits)
            if step + 1 == n or (eos_id is not None and finished.all()):  # one sync
                break
            logits = cached_run(model, next_id[:, None], cache, last=True)  # [B, V]
    finally:
        model.train(was_training)
    out = torch.cat((ids, torch.stack(new, dim=1)), dim=1)  # [B, T0 + n]
    return (out, torch.stack(steps, dim=1)) if return_logits else out
# --8<-- [end:generate]
