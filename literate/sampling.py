"""Choosing the next token: greedy, temperature, top-k, top-p, and when to stop.

Shapes: `...` leading axes (batch, beam, anything), V the vocabulary. Every
function takes logits `[..., V]` and works on all rows at once; a single vector
`[V]` is the case with no leading axes.

The order is fixed: temperature, then top-k, then top-p, as in Hugging Face's
`GenerationMixin._get_logits_processor`. The three do not all commute (temperature
and top-k do; top-p commutes with neither), so the order is part of the contract.

Ties are broken by the **lower token id**, everywhere: `greedy_step` returns the
first maximal id, and top-k and top-p rank equal logits by id before cutting.

Half-precision logits are upcast to float32 first (what Hugging Face's `generate`
does with the last position's logits), so results are float32 or float64.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from literate.checks import float_tensor, non_negative_int, positive_float, positive_int

__all__ = [
    "StopReason",
    "StepLogits",
    "checked_logits",
    "checked_top_k",
    "checked_top_p",
    "as_step_function",
    "top_k_filter",
    "top_p_filter",
    "filter_logits",
    "next_token_distribution",
    "greedy_step",
    "sample_step",
    "greedy_trace",
]

StopReason = Literal["eos", "length_limit"]
StepLogits = Union[Callable[[tuple[int, ...]], Tensor], Iterable[Union[Tensor, Sequence[float]]]]


# ---------------------------------------------------------------------------------------
# Validation (shared by every function below)


def checked_logits(name: str, value: object, *, allow_removed: bool = False) -> Tensor:
    """A non-empty floating-point tensor `[..., V]`, upcast to at least float32.

    Every entry must be finite, unless `allow_removed`: then -inf (a token an earlier
    filter removed) is allowed, as long as every row keeps one finite entry. NaN and
    +inf are always refused.
    """
    if not allow_removed:
        value = float_tensor(name, value, min_ndim=1)
    else:
        if not isinstance(value, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
        if not value.is_floating_point():
            raise TypeError(f"{name} must have a floating-point dtype, got {value.dtype}")
        if value.ndim < 1 or value.numel() == 0:
            raise ValueError(f"{name} must be a non-empty [..., V] tensor, got shape {tuple(value.shape)}")
        if torch.isnan(value).any() or (value == float("inf")).any():
            raise ValueError(f"{name} contains NaN or +inf; only -inf (a removed token) is allowed")
        if not torch.isfinite(value).any(dim=-1).all():
            raise ValueError(f"{name} has a row where every token is -inf: nothing is left to choose")
    return value.to(torch.promote_types(value.dtype, torch.float32))  # float16/bfloat16 -> float32


def checked_top_k(top_k: object, vocab: int) -> int:
    """An int in [1, vocab]; bools refused."""
    top_k = positive_int("top_k", top_k)
    if top_k > vocab:
        raise ValueError(f"top_k must be in [1, vocabulary size {vocab}], got {top_k}")
    return top_k


def checked_top_p(top_p: object) -> float:
    """A real number in (0, 1]; bools refused."""
    top_p = positive_float("top_p", top_p)
    if top_p > 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    return top_p


# ---------------------------------------------------------------------------------------
# The three filters


# --8<-- [start:top_k_filter]
def top_k_filter(logits: Tensor, top_k: int) -> Tensor:
    """Keep exactly the `top_k` largest logits of each row, set the rest to -inf.

    Top-k sampling (Fan et al. 2018). Equal logits are ranked by token id, lower
    first, so a tie at the k-th place keeps the lower ids and the count is exactly k.
    `logits [..., V]` may already hold -inf (tokens an earlier filter removed).
    """
    logits = checked_logits("logits", logits, allow_removed=True)
    top_k = checked_top_k(top_k, logits.shape[-1])
    order = logits.argsort(dim=-1, descending=True, stable=True)  # [..., V] rank -> token id
    keep_ranked = (torch.arange(logits.shape[-1], device=logits.device) < top_k).expand_as(order)
    keep = torch.zeros_like(keep_ranked).scatter(-1, order, keep_ranked)  # [..., V] back to token ids
    return logits.masked_fill(~keep, float("-inf"))
# --8<-- [end:top_k_filter]


# --8<-- [start:top_p_filter]
def top_p_filter(logits: Tensor, top_p: float) -> Tensor:
    """Keep the smallest set of most likely tokens whose probability reaches `top_p`.

    Nucleus sampling (Holtzman et al. 2020, sec. 3.1). Rank the tokens by
    probability, largest first (equal logits: lower id first), and keep a token
    while the mass *before* it is still below `top_p`. The most likely token is
    always kept; `top_p = 1` keeps everything. `logits [..., V]` may hold -inf.
    """
    logits = checked_logits("logits", logits, allow_removed=True)
    top_p = checked_top_p(top_p)
    if top_p == 1.0:
        return logits
    order = logits.argsort(dim=-1, descending=True, stable=True)  # [..., V] rank -> token id
    probs = torch.softmax(logits.gather(-1, order), dim=-1)  # [..., V] by rank, largest first
    mass_before = F.pad(probs.cumsum(dim=-1)[..., :-1], (1, 0))  # [..., V] mass of the ranks above
    keep_ranked = mass_before < top_p  # rank 0 has mass_before 0: always kept
    keep = torch.zeros_like(keep_ranked).scatter(-1, order, keep_ranked)  # [..., V] back to token ids
    return logits.masked_fill(~keep, float("-inf"))
# --8<-- [end:top_p_filter]


# --8<-- [start:filter_logits]
def filter_logits(
    logits: Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> Tensor:
    """Temperature, then top-k, then top-p: logits `[..., V]` -> logits with -inf
    where a token was removed. Softmax of the result is the distribution to sample.

    The order matters: top-p measures mass on the temperature-scaled distribution
    that remains after top-k, renormalised (as Hugging Face's `generate` does).
    A temperature so small that logits / temperature overflows the dtype is an error
    (softmax of infinities is NaN), not a silent NaN: greedy is that limit.
    """
    logits = checked_logits("logits", logits)
    temperature = positive_float("temperature", temperature)
    if top_k is not None:
        top_k = checked_top_k(top_k, logits.shape[-1])  # checked before any work is done
    if top_p is not None:
        top_p = checked_top_p(top_p)
    scores = logits / temperature  # 1. sharpen (T < 1) or flatten (T > 1)
    if not torch.isfinite(scores).all():  # a tiny T overflows the dtype: softmax would be NaN
        raise ValueError(
            f"temperature {temperature:g} is too small for these logits in {scores.dtype}: "
            f"logits / temperature overflows to infinity; for the T -> 0 limit use greedy_step"
        )
    if top_k is not None:
        scores = top_k_filter(scores, top_k)  # 2. at most k candidates
    if top_p is not None:
        scores = top_p_filter(scores, top_p)  # 3. the nucleus of what is left
    return scores
# --8<-- [end:filter_logits]


# --8<-- [start:next_token_distribution]
def next_token_distribution(
    logits: Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> Tensor:
    """Probabilities `[..., V]` after the filters; removed tokens get exactly 0."""
    filtered = filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    return torch.softmax(filtered, dim=-1)
# --8<-- [end:next_token_distribution]


# ---------------------------------------------------------------------------------------
# Choosing a token


# --8<-- [start:greedy_step]
def greedy_step(logits: Tensor) -> Tensor:
    """The most likely token id of each row: logits `[..., V]` -> int64 `[...]`.

    Ties go to the lower id (`torch.argmax` returns the first maximal index).
    Temperature, top-k and top-p never change this choice, so greedy takes none.
    """
    logits = checked_logits("logits", logits)
    return logits.argmax(dim=-1)
# --8<-- [end:greedy_step]


# --8<-- [start:sample_step]
def sample_step(
    logits: Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Draw one token id per row from `next_token_distribution`: `[..., V]` -> int64 `[...]`.

    One `torch.multinomial` call for the whole batch (what Hugging Face's `generate`
    calls). Pass a seeded `torch.Generator` to make the draw reproducible.
    """
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    probs = next_token_distribution(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    rows = probs.reshape(-1, probs.shape[-1])  # [N, V], N = product of the leading axes
    ids = torch.multinomial(rows, num_samples=1, generator=generator)  # [N, 1]
    return ids.reshape(probs.shape[:-1])  # [...]
# --8<-- [end:sample_step]


# ---------------------------------------------------------------------------------------
# When to stop


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
                    f"steps ran out after {len(generated)} logit vectors, before EOS or the length limit"
                ) from None

    def step_function(generated: tuple[int, ...]) -> Tensor:
        logits = source(generated)
        if not isinstance(logits, Tensor):
            logits = torch.as_tensor(logits, dtype=torch.float64)  # a plain list of numbers
        if logits.ndim != 1:
            raise ValueError(
                f"steps gave logits of shape {tuple(logits.shape)} after {len(generated)} tokens, expected [V]"
            )
        return logits

    return step_function


# --8<-- [start:greedy_trace]
def greedy_trace(
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
    `choose` picks a token from logits; the default is greedy.
    """
    max_new_tokens = positive_int("max_new_tokens", max_new_tokens)
    if eos_id is not None:
        eos_id = non_negative_int("eos_id", eos_id)
    if not callable(choose):
        raise TypeError(f"choose must be callable (logits [V] -> token id), got {type(choose).__name__}")
    next_logits = as_step_function(steps)
    generated: list[int] = []
    while len(generated) < max_new_tokens:
        logits = next_logits(tuple(generated))  # [V]
        if eos_id is not None and eos_id >= logits.shape[-1]:
            raise ValueError(f"eos_id must be < vocabulary size {logits.shape[-1]}, got {eos_id}")
        token = int(choose(logits))
        generated.append(token)
        if token == eos_id:
            return generated, "eos"
    return generated, "length_limit"
# --8<-- [end:greedy_trace]
