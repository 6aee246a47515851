"""Beam search: keep the k most likely continuations, not only the best token.

Greedy decoding commits to the most likely token at every step; a sequence whose first
token is the second most likely can still be the most likely sequence. Beam search keeps
`k` running hypotheses ("beams") per input. At each step every beam proposes every token,
the k * V candidates are scored by the sum of their log-probabilities, and the best
survive. A candidate that ends in EOS leaves the beam and joins the row's **finished**
hypotheses, scored by its sum divided by a **length penalty** (a sum of log-probabilities
only falls as a sequence grows, so without it the shortest hypothesis would win). The
2017 Transformer decoded this way: beam 4, length penalty alpha = 0.6 (Vaswani et al.
2017, sec. 6.1), the penalty of Wu et al. (2016, sec. 7, eq. 14).

The rules of the search are Hugging Face's `generate(num_beams=k, do_sample=False)`
(transformers 5.x, `_beam_search`), so that the two can be compared token for token:
2k candidates per step (so that k of them survive even if k end in EOS), an EOS
candidate counts only if it ranks among the first k, a finished hypothesis's length
counts the generated tokens, EOS included, and not the prompt, and the three
`early_stopping` rules. Hugging Face computes every score in float32 whatever the
model's dtype; here they stay in the logits' dtype. Every beam has its own history, so
every layer's cache is **reordered** after each step: row i of the new cache is the row
of the beam that candidate i extends (`DecodeCache.reorder`). That copies the filled
part of every cache at every step, as Hugging Face's `reorder_cache` does; serving
systems avoid the copy with paged caches whose blocks beams share.

Host syncs: one per step but the last (is every input done?), and one at the end (the
longest hypothesis's length).

Shapes: B inputs, k beams, N = B * k rows, V vocabulary, n new tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal, NamedTuple

import torch
from torch import Tensor, nn

from literate.decoding.generate import (
    cached_run,
    check_prompt,
    check_request,
    new_decode_cache,
)
from literate.parts.checks import non_negative_int, positive_int

__all__ = ["BeamResult", "hf_length_penalty", "gnmt_length_penalty", "beam_search",
           "beam_generate"]

# --8<-- [start:length_penalties]
def finite_real(name: str, value: object) -> float:
    """`value` as a float if it is a finite real number (not a bool)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return float(value)


def hf_length_penalty(length_penalty: float = 1.0) -> Callable[[int], float]:
    """Hugging Face's: a finished hypothesis of n tokens scores sum / n ** a, with a
    its `length_penalty` (1 by default; 0: no penalty)."""
    a = finite_real("length_penalty", length_penalty)
    return lambda n: float(n) ** a


def gnmt_length_penalty(alpha: float = 0.6) -> Callable[[int], float]:
    """Wu et al. (2016), eq. 14: lp(n) = (5 + n)^alpha / (5 + 1)^alpha; alpha = 0.6 is
    the 2017 Transformer's (Vaswani et al. 2017, sec. 6.1). (Eq. 14 adds a coverage
    penalty, which the 2017 paper does not use.)"""
    if finite_real("alpha", alpha) < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    return lambda n: ((5.0 + n) / 6.0) ** alpha
# --8<-- [end:length_penalties]


# --8<-- [start:beam_search]
EarlyStopping = Literal[True, False, "never"]


def stopping_rule(early_stopping: object) -> EarlyStopping:
    """`early_stopping` if it is True, False or "never" (a bool, not 0 or 1.0)."""
    if not (isinstance(early_stopping, bool) or early_stopping == "never"):
        raise ValueError(f"early_stopping must be True, False or 'never', "
                         f"got {early_stopping!r}")
    return early_stopping


def beam_logits(name: str, logits: object, like: Tensor | None = None) -> Tensor:
    """`logits` if they are floating-point logits [N, V] (of `like`'s shape and device,
    if given): the prefill's, or what `step` returned. Metadata only."""
    if not isinstance(logits, Tensor) or not logits.is_floating_point():
        kind = logits.dtype if isinstance(logits, Tensor) else type(logits).__name__
        raise TypeError(f"{name} must be logits [N, V] of a floating dtype, got {kind}")
    if like is None and logits.ndim != 2:
        raise ValueError(f"{name} must be [N, V] (one row per beam), got "
                         f"{tuple(logits.shape)}")
    if like is not None and (logits.shape, logits.device) != (like.shape, like.device):
        raise ValueError(f"{name} must be [N, V] = {list(like.shape)} on {like.device} "
                         f"like the prefill's, got {tuple(logits.shape)} on "
                         f"{logits.device}")
    return logits


class BeamResult(NamedTuple):
    """The best finished hypothesis of each input: tokens [B, L] (the generated part,
    EOS included, then `fill`), its score [B] (sum of log-probabilities / penalty) and
    its length [B]."""

    tokens: Tensor
    scores: Tensor
    lengths: Tensor


def beam_search(logits: Tensor, step: Callable[[Tensor], Tensor],
                reorder: Callable[[Tensor], None], *, beams: int, max_new_tokens: int,
                eos_id: int | None = None,
                penalty: Callable[[int], float] = hf_length_penalty(1.0),
                early_stopping: EarlyStopping = False,
                fill: int | None = None) -> BeamResult:
    """Beam search over any cached decoder.

    logits [N, V]: the next-token logits of N = B * k rows after the prefill, each
    input repeated k times (rows b*k .. b*k + k - 1 are input b's beams).
    step(tokens [N]) -> logits [N, V]: appends one token to every row's cache.
    reorder(rows [N]): row i of every cache becomes row rows[i].
    early_stopping: True stops an input once it has k finished hypotheses; False
    stops it when its best running beam, at its current length, cannot beat the
    worst of them; "never" when it cannot at the longest length.
    fill: the token after a hypothesis's end (default: the EOS; Hugging Face appends
    its pad_token_id, which `generate` sets to the EOS when it is not given).
    """
    k, n = positive_int("beams", beams), positive_int("max_new_tokens", max_new_tokens)
    rows, vocab = beam_logits("logits", logits).shape
    if rows % k or 2 * k > vocab:
        raise ValueError(f"logits must be [B * beams, V] with 2 * beams <= V, "
                         f"got {tuple(logits.shape)} for beams={k}")
    for name, f in (("step", step), ("reorder", reorder), ("penalty", penalty)):
        if not callable(f):
            raise TypeError(f"{name} must be a function, got {type(f).__name__}")
    if eos_id is not None and non_negative_int("eos_id", eos_id) >= vocab:
        raise ValueError(f"eos_id must be < V={vocab}, got {eos_id}")
    early_stopping = stopping_rule(early_stopping)
    b, m, device = rows // k, 2 * k, logits.device
    if fill is None:
        fill = 0 if eos_id is None else eos_id  # after a hypothesis ends
    elif non_negative_int("fill", fill) >= vocab:
        raise ValueError(f"fill must be < V={vocab}, got {fill}")
    run_scores = torch.full((b, k), -torch.inf, dtype=logits.dtype, device=device)
    run_scores[:, 0] = 0.0  # [B, k]: the k copies of an input are one beam at first
    history = torch.zeros(b, k, 0, dtype=torch.long, device=device)  # [B, k, t]
    fin_scores = torch.full((b, k), -torch.inf, dtype=logits.dtype, device=device)
    fin_tokens = torch.full((b, k, n), fill, dtype=torch.long, device=device)
    fin_lengths = torch.zeros(b, k, dtype=torch.long, device=device)
    done = torch.zeros(b, dtype=torch.bool, device=device)  # [B]
    rank = torch.arange(m, device=device)  # [m]: a candidate's rank in its input
    for t in range(1, n + 1):  # t: the candidates' length, EOS included
        logp = torch.log_softmax(logits, dim=-1).view(b, k, vocab)  # [B, k, V]
        total = logp + run_scores[..., None]  # each beam's sum, extended by each token
        values, index = total.view(b, k * vocab).topk(m)  # [B, m], best first
        parent, token = index // vocab, index % vocab  # which beam, which token
        seqs = torch.cat((history.gather(1, parent[..., None].expand(-1, -1, t - 1)),
                          token[..., None]), dim=2)  # [B, m, t]
        ends = token == (-1 if eos_id is None else eos_id)  # [B, m]: ends in EOS
        ends = ends | (t == n)  # the last step ends every candidate
        # finished: an ending candidate among the first k, of an input still open
        keep = ends & (rank < k) & ~done[:, None]  # [B, m]
        cand = torch.where(keep, values / penalty(t), -torch.inf)
        pool = torch.cat((fin_scores, cand), dim=1)  # [B, k + m]
        fin_scores, pick = pool.topk(k)  # the best k of old and new
        new_tokens = torch.nn.functional.pad(seqs, (0, n - t), value=fill)
        fin_tokens = torch.cat((fin_tokens, new_tokens), dim=1).gather(
            1, pick[..., None].expand(-1, -1, n))
        new_lengths = torch.full((b, m), t, dtype=torch.long, device=device)
        fin_lengths = torch.cat((fin_lengths, new_lengths), dim=1).gather(1, pick)
        # running: the best k candidates that did not end
        run_scores, pick = torch.where(ends, -torch.inf, values).topk(k)  # [B, k]
        history = seqs.gather(1, pick[..., None].expand(-1, -1, t))  # [B, k, t]
        # is any input still open? ("never": at the longest length, if longer is better)
        length = n if early_stopping == "never" and penalty(n) > penalty(t) else t
        full = (fin_scores > -torch.inf).all(dim=1)
        worst = torch.where(full, fin_scores.min(dim=1).values, -torch.inf)
        done |= ~(run_scores[:, 0] / penalty(length) > worst)
        if early_stopping is True:  # k finished hypotheses: the input is done
            done |= full
        if t == n or done.all():  # the one host sync of a step
            break
        beam_rows = parent.gather(1, pick) + k * torch.arange(b, device=device)[:, None]
        reorder(beam_rows.flatten())  # each surviving beam takes its parent's cache
        logits = beam_logits("step(tokens)", step(history[:, :, -1].flatten()), logits)
    longest = int(fin_lengths[:, 0].max())
    return BeamResult(fin_tokens[:, 0, :longest], fin_scores[:, 0], fin_lengths[:, 0])
# --8<-- [end:beam_search]


# --8<-- [start:beam_generate]
@torch.no_grad()
def beam_generate(model: nn.Module, ids: Tensor, beams: int, max_new_tokens: int, *,
                  valid: Tensor | None = None, eos_id: int | None = None,
                  pad_id: int | None = None, length_penalty: float = 1.0,
                  early_stopping: EarlyStopping = False) -> tuple[Tensor, Tensor]:
    """Beam search for a decoder-only model (GPT-2's or Llama's layout): ids [B, T0]
    (`valid` [B, T0]: False marks left padding) -> (sequences [B, T0 + L], the prompt
    first, and their scores [B]), as Hugging Face's `generate(num_beams=beams,
    do_sample=False, length_penalty=..., early_stopping=...)` returns them; a
    hypothesis shorter than the longest is followed by `pad_id` (default: the EOS)."""
    n = check_request(model, ids, max_new_tokens, eos_id, pad_id)
    k = positive_int("beams", beams)
    if 2 * k > model.vocab_size:
        raise ValueError(f"beams={k} needs 2 * beams <= the vocabulary size "
                         f"{model.vocab_size} (2k candidates a step)")
    penalty = hf_length_penalty(length_penalty)
    early_stopping = stopping_rule(early_stopping)
    ids, valid = check_prompt(model, ids, valid)  # the one host sync of the prompt
    b, t0 = ids.shape
    was_training = model.training
    model.eval()
    try:
        cache = new_decode_cache(model, b * k, t0 + n)  # one row per beam
        prompt = ids if valid is None else ids.masked_fill(~valid, 0)  # as generate's
        many = None if valid is None else valid.repeat_interleave(k, dim=0)
        logits = cached_run(model, prompt.repeat_interleave(k, dim=0), cache,
                            valid=many, last=True)  # [B * k, V]

        def step(tokens: Tensor) -> Tensor:
            return cached_run(model, tokens[:, None], cache, last=True)

        best = beam_search(logits, step, cache.reorder, beams=k, max_new_tokens=n,
                           eos_id=eos_id, penalty=penalty,
                           early_stopping=early_stopping, fill=pad_id)
    finally:
        model.train(was_training)
    return torch.cat((ids, best.tokens), dim=1), best.scores
# --8<-- [end:beam_generate]
