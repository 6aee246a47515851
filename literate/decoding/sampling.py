"""Choosing the next token: greedy, temperature, top-k, top-p, and when to stop.

Shapes: `...` leading axes (batch, beam, anything), V the vocabulary. Every
function takes logits `[..., V]` and works on all rows at once; a single vector
`[V]` is the case with no leading axes.

The order is fixed: temperature, then top-k, then top-p, as in Hugging Face's
`GenerationMixin._get_logits_processor`. The three do not all commute (temperature
and top-k do; top-p commutes with neither), so the order is part of the contract.

Ties: `greedy_step` returns the first maximal id; top-p ranks equal logits by id, lower
first, before cutting; top-k keeps every token tied with the k-th largest, as Hugging
Face's `TopKLogitsWarper` and nanoGPT do.

Checks at the boundary: the filters read no values. The public entry points
(`next_token_distribution`, `greedy_step`, `sample_step`) check logits that come from
outside with `check_logits` (one host sync); `sampler`, which a model's `generate`
calls on the model's own logits, checks its settings once and no values.

Half-precision logits are upcast to float32 first (what Hugging Face's `generate`
does with the last position's logits), so results are float32 or float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Literal, Union

import torch
from torch import Tensor

from literate.parts.checks import (
    float_tensor,
    non_negative_int,
    positive_float,
    positive_int,
)

__all__ = [
    "StopReason",
    "StepLogits",
    "checked_top_k",
    "checked_top_p",
    "check_logits",
    "top_k_filter",
    "top_p_filter",
    "filter_logits",
    "next_token_distribution",
    "greedy_step",
    "draw",
    "sample_step",
    "sampler",
    "as_step_function",
    "decode_trace",
    "logit_rows",
    "greedy",
]


# --8<-- [start:checks]
def checked_top_k(top_k: object, vocab: int) -> int:
    """An int in [1, vocab]; bools refused."""
    if positive_int("top_k", top_k) > vocab:
        raise ValueError(f"top_k must be in [1, vocabulary size {vocab}], got {top_k}")
    return int(top_k)


def checked_top_p(top_p: object) -> float:
    """A real number in (0, 1]; bools refused."""
    if positive_float("top_p", top_p) > 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    return float(top_p)


def logit_rows(name: str, logits: object) -> Tensor:
    """`logits` if it is a floating-point tensor `[..., V]` with V >= 1 (metadata)."""
    if float_tensor(name, logits).ndim == 0 or logits.shape[-1] == 0:
        raise ValueError(f"{name} must be [..., V] with V >= 1, "
                         f"got {tuple(logits.shape)}")
    return logits


def check_logits(name: str, logits: object, *, temperature: float = 1.0) -> Tensor:
    """Logits `[..., V]` that come into the sampler from outside, checked by value (one
    host sync): no NaN, no +inf, and every row keeps a finite entry, also after
    dividing by `temperature` (a tiny one overflows: softmax would be NaN). -inf is
    allowed: it is how a token is removed. The filters below do not look at values;
    the public entry points `next_token_distribution`, `greedy_step` and `sample_step`
    call this.
    """
    scaled = logit_rows(name, logits) / positive_float("temperature", temperature)
    bad = torch.isnan(scaled) | (scaled == math.inf)  # [..., V]
    no_finite = ~torch.isfinite(scaled).any(dim=-1)  # [...]: a row with nothing left
    if not (bad.any() | no_finite.any()):  # the one host sync
        return logits
    no_finite = ~torch.isfinite(logits).any(dim=-1)  # [...]: a row of -inf only
    if no_finite.any() or (torch.isnan(logits) | (logits == math.inf)).any():
        raise ValueError(f"{name} holds NaN or +inf, "
                         "or a row where every token is -inf")
    raise ValueError(f"temperature {temperature:g} is too small for these "
                     f"{logits.dtype} logits: logits / temperature overflows; for the "
                     "T -> 0 limit use greedy_step")
# --8<-- [end:checks]


# --8<-- [start:top_k_filter]
def top_k_filter(logits: Tensor, top_k: int) -> Tensor:
    """Keep the `top_k` largest logits of each row, and any logit equal to the k-th;
    set the rest to -inf.

    Top-k sampling (Fan et al. 2018), computed as Hugging Face's `TopKLogitsWarper` and
    nanoGPT do: `topk` finds the k-th largest value (no full sort); a token tied with it
    is kept, so ties at the k-th place keep more than k tokens. `logits [..., V]` may
    already hold -inf (tokens an earlier filter removed).
    """
    top_k = checked_top_k(top_k, logit_rows("logits", logits).shape[-1])
    kth = logits.topk(top_k, dim=-1).values[..., -1:]  # [..., 1]: the k-th largest
    return logits.masked_fill(logits < kth, -math.inf)
# --8<-- [end:top_k_filter]


# --8<-- [start:top_p_filter]
def top_p_filter(logits: Tensor, top_p: float) -> Tensor:
    """Keep the smallest set of most likely tokens whose probability reaches `top_p`.

    Nucleus sampling (Holtzman et al. 2020, sec. 3.1). Rank the tokens by probability,
    largest first (equal logits: lower id first), and keep a token while the mass
    *before* it is still below `top_p`. The most likely token is always kept; top_p = 1
    keeps everything. `logits [..., V]` may hold -inf.
    """
    logits, top_p = logit_rows("logits", logits), checked_top_p(top_p)
    if top_p == 1.0:
        return logits
    values, ids = logits.sort(dim=-1, descending=True, stable=True)  # ties: lower id
    cumulative = values.softmax(dim=-1).cumsum(dim=-1)  # mass of ranks 0..r
    first = torch.ones_like(cumulative[..., :1], dtype=torch.bool)  # rank 0: kept
    keep = torch.cat((first, cumulative[..., :-1] < top_p), dim=-1)  # mass before r < p
    kept = keep.scatter(-1, ids, keep)  # back from ranks to token ids
    return logits.masked_fill(~kept, -math.inf)
# --8<-- [end:top_p_filter]


# --8<-- [start:filter_logits]
def filter_logits(logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float | None = None) -> Tensor:
    """Temperature, then top-k, then top-p: logits `[..., V]` -> logits with -inf where
    a token was removed. Softmax of the result is the distribution to sample.

    The order matters: top-p measures mass on the temperature-scaled distribution that
    remains after top-k, renormalised (as Hugging Face's `generate` does). Half
    precision is upcast to float32. Values are not checked here (NaN stays NaN): the
    entry points below check logits from outside, and `sampler` calls this on a
    model's own logits.
    """
    scores = logit_rows("logits", logits)
    scores = scores.to(torch.promote_types(logits.dtype, torch.float32))
    temperature = positive_float("temperature", temperature)
    top_k = None if top_k is None else checked_top_k(top_k, scores.shape[-1])
    top_p = None if top_p is None else checked_top_p(top_p)
    if temperature != 1.0:
        scores = scores / temperature  # 1. sharpen (T < 1) or flatten (T > 1)
    if top_k is not None:
        scores = top_k_filter(scores, top_k)  # 2. at most k candidates, and their ties
    if top_p is not None:
        scores = top_p_filter(scores, top_p)  # 3. the nucleus of what is left
    return scores
# --8<-- [end:filter_logits]


# --8<-- [start:next_token_distribution]
def next_token_distribution(logits: Tensor, *, temperature: float = 1.0,
                            top_k: int | None = None,
                            top_p: float | None = None) -> Tensor:
    """Probabilities `[..., V]` after the filters; removed tokens get exactly 0."""
    check_logits("logits", logits, temperature=temperature)
    filtered = filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    return torch.softmax(filtered, dim=-1)
# --8<-- [end:next_token_distribution]


# --8<-- [start:greedy_step]
def greedy_step(logits: Tensor) -> Tensor:
    """The most likely token id of each row: logits `[..., V]` -> int64 `[...]`.

    Ties go to the lower id (`torch.argmax` returns the first maximal index).
    Temperature, top-k and top-p never change this choice, so greedy takes none.
    """
    return check_logits("logits", logits).argmax(dim=-1)
# --8<-- [end:greedy_step]


# --8<-- [start:draw]
def draw(probs: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """One token id per row of `probs [..., V]`, id i with probability probs[..., i]:
    the argmax of probs / q, with q ~ Exp(1) drawn independently for every entry (the
    smallest of the times q_i / p_i, exponential with rates p_i, is i's with probability
    p_i). It is the algorithm `torch.multinomial(probs, 1)` runs, token for token with
    the same generator, without the two checks multinomial makes on the values first
    (asserts that, on a GPU, leave the CUDA context unusable when they fail; host syncs
    in older PyTorch). Nothing is checked: NaN probabilities give a token, not an error.
    The generator must be on the device of `probs`.
    """
    q = torch.empty_like(probs).exponential_(1.0, generator=generator)  # [..., V]
    return (probs / q).argmax(dim=-1)  # [...]
# --8<-- [end:draw]


# --8<-- [start:sample_step]
def sample_step(logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                top_p: float | None = None,
                generator: torch.Generator | None = None) -> Tensor:
    """Draw one token id per row from `next_token_distribution`: `[..., V]` -> `[...]`.

    The same tokens as `torch.multinomial` (what Hugging Face's `generate` calls) for
    the same generator, drawn by `draw`. Pass a seeded `torch.Generator` on the logits'
    device (`torch.Generator(device=logits.device)`; `torch.Generator()` is on the CPU)
    to make the draw reproducible.
    """
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, "
                        f"got {type(generator).__name__}")
    probs = next_token_distribution(logits, temperature=temperature, top_k=top_k,
                                    top_p=top_p)
    return draw(probs, generator)  # [...]
# --8<-- [end:sample_step]


# --8<-- [start:sampler]
def sampler(*, temperature: float = 1.0, top_k: int | None = None,
            top_p: float | None = None,
            generator: torch.Generator | None = None) -> Callable[[Tensor], Tensor]:
    """A `choose` function for a model's `generate`: logits [B, V] -> ids [B], drawn
    after temperature, top-k and top-p by `draw`. The settings are checked now, once
    (top_k against the vocabulary at every call: metadata, free); the logits it gets are
    the model's own, so it reads no values: no host sync per token, on any device. The
    generator must be on the logits' device: for CUDA logits,
    `torch.Generator(device=logits.device)`, not `torch.Generator()` (the CPU's)."""
    positive_float("temperature", temperature)
    top_p = None if top_p is None else checked_top_p(top_p)
    if top_k is not None:
        positive_int("top_k", top_k)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, "
                        f"got {type(generator).__name__}")

    def choose(logits: Tensor) -> Tensor:  # [..., V] -> [...]
        filtered = filter_logits(logits, temperature=temperature, top_k=top_k,
                                 top_p=top_p)
        return draw(filtered.softmax(dim=-1), generator)

    return choose
# --8<-- [end:sampler]


# -------------------------------------------------------------------------------------
# When to stop


# --8<-- [start:as_step_function]
def as_step_function(steps: object) -> Callable[[tuple[int, ...]], Tensor]:
    """`steps` as a callable: tokens generated so far -> next logits `[V]`.

    A callable is wrapped as it is; an iterable of prepared logit vectors (a list of
    tensors or of lists of numbers, or a `[steps, V]` tensor) is replayed one vector
    per step, and running out of vectors before a stop is an error.
    """
    if callable(steps):
        source = steps
    elif isinstance(steps, (str, bytes)) or not isinstance(steps, Iterable):
        raise TypeError(
            "steps must be a callable (tokens so far -> logits [V]) or an iterable of "
            f"logit vectors, got {type(steps).__name__}"
        )
    else:
        iterator = iter(steps)

        def source(generated: tuple[int, ...]) -> object:
            try:
                return next(iterator)
            except StopIteration:
                raise ValueError(
                    f"steps ran out after {len(generated)} logit vectors, "
                    "before EOS or the length limit"
                ) from None

    def step_function(generated: tuple[int, ...]) -> Tensor:
        logits = source(generated)
        if not isinstance(logits, Tensor):
            logits = torch.as_tensor(logits, dtype=torch.float64)  # a list of numbers
        if logits.ndim != 1:
            raise ValueError(
                f"steps gave logits of shape {tuple(logits.shape)} after "
                f"{len(generated)} tokens, expected [V]"
            )
        return logits

    return step_function
# --8<-- [end:as_step_function]


# --8<-- [start:decode_trace]
StopReason = Literal["eos", "length_limit"]
StepLogits = Union[Callable[[tuple[int, ...]], Tensor],  # tokens so far -> logits [V]
                   Iterable[Union[Tensor, Sequence[float]]]]  # or prepared logits


def decode_trace(
    steps: StepLogits,
    eos_id: int | None,
    max_new_tokens: int,
    *,
    choose: Callable[[Tensor], Tensor] = greedy_step,
) -> tuple[list[int], StopReason]:
    """Generate until EOS or `max_new_tokens`: returns (tokens, "eos" | "length_limit").

    `steps` is a callable that maps the tokens generated so far (a tuple) to the
    next logits `[V]` (a model, in chapter 5), or a prepared sequence of logit
    vectors. The EOS token is kept in the output, and EOS wins when it arrives
    exactly at the limit. `eos_id=None` stops at the length limit only.
    `choose` picks a token from logits `[V]`; the default is greedy.
    """
    max_new_tokens = positive_int("max_new_tokens", max_new_tokens)
    if eos_id is not None:
        eos_id = non_negative_int("eos_id", eos_id)
    if not callable(choose):
        raise TypeError(f"choose must be callable (logits [V] -> token id), "
                        f"got {type(choose).__name__}")
    next_logits = as_step_function(steps)
    generated: list[int] = []
    while len(generated) < max_new_tokens:
        logits = next_logits(tuple(generated))  # [V]
        if eos_id is not None and eos_id >= logits.shape[-1]:
            raise ValueError(f"eos_id must be < vocabulary size {logits.shape[-1]}, "
                             f"got {eos_id}")
        token = int(choose(logits))
        generated.append(token)
        if token == eos_id:
            return generated, "eos"
    return generated, "length_limit"
# --8<-- [end:decode_trace]


# --8<-- [start:greedy]
def greedy(logits: Tensor) -> Tensor:
    """The most likely token of each row, logits [B, V] -> ids [B]; ties go to the
    lowest id. `generate`'s default `choose`; chapter 6's `sampler` makes the others."""
    return logits.argmax(dim=-1)
# --8<-- [end:greedy]
