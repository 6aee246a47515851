"""Greedy speculative decoding: a small draft model proposes, the target checks.

A cached decoding step of a large model reads all of its weights to produce one token.
Speculative decoding (Leviathan et al. 2023; Chen et al. 2023) lets a small **draft**
model guess the next `gamma` tokens, one cheap step each, and the **target** score the
guesses in one call over `gamma + 1` positions. The target keeps the longest prefix of
the guesses that agrees with its own greedy choices, and adds its own choice after it:
every round appends between 1 and `gamma + 1` tokens, each of them the target's own
greedy token. Both caches are then rolled back (`KVCache.truncate`) to the tokens kept.

Greedy only: sampling needs the papers' modified rejection step to keep the target's
distribution. One sequence at a time: the rows of a batch would accept different numbers
of proposals, and their caches would have to hold different numbers of tokens (Hugging
Face's assisted generation refuses batches too).

Host syncs: one for the prompt's values, then one per round (how many were accepted).

Shapes: T tokens so far, T0 prompt length, V vocabulary, gamma proposals per round.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from literate.decoding.generate import (
    cached_run,
    check_decoder,
    check_prompt,
    check_request,
    new_decode_cache,
)
from literate.parts.cache import DecodeCache
from literate.parts.checks import positive_int

__all__ = ["propose", "verify", "accept", "rollback", "speculative_greedy",
           "Speculation", "check_pair", "speculative_generate"]


# --8<-- [start:propose]
def propose(draft: nn.Module, cache: DecodeCache, ids: Tensor, gamma: int) -> Tensor:
    """The draft's next gamma greedy tokens after ids [1, T]: [1, gamma]. Each call
    feeds what the cache has not read yet (the prompt, then one token or two)."""
    out = ids
    for _ in range(gamma):
        logits = cached_run(draft, out[:, cache.next_pos:], cache, last=True)  # [1, V]
        out = torch.cat((out, logits.argmax(dim=-1, keepdim=True)), dim=1)
    return out[:, ids.shape[1]:]
# --8<-- [end:propose]


# --8<-- [start:verify]
def verify(target: nn.Module, cache: DecodeCache, ids: Tensor,
           proposed: Tensor) -> Tensor:
    """The target's greedy token after ids [1, T] and after each of the gamma
    proposals: [1, gamma + 1], from one call over the last token and the proposals."""
    fed = torch.cat((ids[:, cache.next_pos:], proposed), dim=1)
    logits = cached_run(target, fed, cache)  # [1, len(fed), V]
    return logits[:, -proposed.shape[1] - 1:].argmax(dim=-1)
# --8<-- [end:verify]


# --8<-- [start:accept]
def accept(proposed: Tensor, chosen: Tensor) -> Tensor:
    """What a round appends, [1, n + 1]: the n first proposals, which the target would
    have chosen itself, then the target's own token after them."""
    agree = (proposed == chosen[:, :-1]).long().cumprod(dim=1)  # 1 until a miss
    n = int(agree.sum())  # the round's host sync
    return chosen[:, :n + 1]  # proposed[:, :n], then chosen[:, n]


def rollback(cache: DecodeCache, length: int) -> None:
    """Keep at most the first `length` tokens in every layer's cache."""
    for layer in cache.layers:
        layer.truncate(min(length, layer.next_pos))
# --8<-- [end:accept]


# --8<-- [start:speculative_greedy]
@torch.no_grad()
def speculative_greedy(target: nn.Module, draft: nn.Module, ids: Tensor,
                       max_new_tokens: int, gamma: int = 4) -> Tensor:
    """ids [1, T0] -> the target's greedy [1, T0 + max_new_tokens] (eval mode)."""
    end = ids.shape[1] + max_new_tokens
    target_cache = new_decode_cache(target, batch=1, capacity=end)
    draft_cache = new_decode_cache(draft, batch=1, capacity=end)
    while ids.shape[1] < end:
        k = min(gamma, end - ids.shape[1] - 1)  # never propose past the end
        proposed = propose(draft, draft_cache, ids, k)
        chosen = verify(target, target_cache, ids, proposed)
        ids = torch.cat((ids, accept(proposed, chosen)), dim=1)
        rollback(target_cache, ids.shape[1] - 1)  # every token but the last is read
        rollback(draft_cache, ids.shape[1] - 1)
    return ids
# --8<-- [end:speculative_greedy]


# --8<-- [start:check_pair]
class Speculation(NamedTuple):
    """What `speculative_generate` returns: the tokens [1, T0 + n], the rounds (one
    target call each), the draft tokens proposed, and how many the target agreed
    with (the acceptance rate is accepted / proposed)."""

    tokens: Tensor
    rounds: int
    proposed: int
    accepted: int


def check_pair(target: object, draft: object, ids: object, max_new_tokens: object,
               gamma: object, eos_id: object) -> int:
    """What `speculative_generate` refuses, from metadata: decoders of one vocabulary
    on the prompt's device, one sequence, gamma >= 1, room in both contexts. -> n."""
    n = check_request(target, ids, max_new_tokens, eos_id, None)
    check_decoder(draft)
    positive_int("gamma", gamma)
    if ids.shape[0] != 1:
        raise ValueError(f"ids must hold one sequence [1, T0], got batch "
                         f"{ids.shape[0]}: its rows would accept different numbers "
                         "of proposals per round; decode them one by one")
    if draft.vocab_size != target.vocab_size:
        raise ValueError(f"the draft's vocabulary ({draft.vocab_size}) must be the "
                         f"target's ({target.vocab_size})")
    if draft.lm_head.weight.device != ids.device:
        raise ValueError(f"ids is on {ids.device}, the draft on "
                         f"{draft.lm_head.weight.device}")
    if ids.shape[1] + n > draft.context:
        raise ValueError(f"the prompt ({ids.shape[1]} tokens) and max_new_tokens={n} "
                         f"need {ids.shape[1] + n} positions, the draft has "
                         f"context={draft.context}")
    return n
# --8<-- [end:check_pair]


# --8<-- [start:speculative_generate]
@torch.no_grad()
def speculative_generate(target: nn.Module, draft: nn.Module, ids: Tensor,
                         max_new_tokens: int, *, gamma: int = 4,
                         eos_id: int | None = None) -> Speculation:
    """`speculative_greedy` with its arguments checked, an EOS, and counts: ids
    [1, T0] -> the target's greedy `generate(target, ids, max_new_tokens,
    eos_id=eos_id)`, gamma draft tokens checked per target call. Stops after the
    first EOS (kept). Both models run in eval mode and are put back as they were."""
    n = check_pair(target, draft, ids, max_new_tokens, gamma, eos_id)
    ids, _ = check_prompt(target, ids, None)  # the one host sync of the prompt
    end = ids.shape[1] + n
    modes = target.training, draft.training
    target.eval(), draft.eval()
    rounds = proposed_n = accepted_n = 0
    try:
        target_cache = new_decode_cache(target, batch=1, capacity=end)
        draft_cache = new_decode_cache(draft, batch=1, capacity=end)
        while ids.shape[1] < end:
            k = min(gamma, end - ids.shape[1] - 1)  # never propose past the end
            proposed = propose(draft, draft_cache, ids, k)  # [1, k]
            chosen = verify(target, target_cache, ids, proposed)  # [1, k + 1]
            both = torch.cat((proposed[0], chosen[0])).tolist()  # the round's sync
            drafted, own = both[:k], both[k:]
            agreed = next((i for i in range(k) if drafted[i] != own[i]), k)
            new = own[:agreed + 1]
            if eos_id is not None and eos_id in new:
                new = new[:new.index(eos_id) + 1]
            ids = torch.cat((ids, ids.new_tensor([new])), dim=1)
            rounds, proposed_n = rounds + 1, proposed_n + k
            accepted_n += agreed
            if eos_id is not None and new[-1] == eos_id:
                break
            rollback(target_cache, ids.shape[1] - 1)
            rollback(draft_cache, ids.shape[1] - 1)
    finally:
        target.train(modes[0])
        draft.train(modes[1])
    return Speculation(ids, rounds, proposed_n, accepted_n)
# --8<-- [end:speculative_generate]
