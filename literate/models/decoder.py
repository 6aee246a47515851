"""What every decoder-only language model here shares (chapter 5, then 7, 9 and 10):
ids [B, T] -> logits [B, T, V], checked once where the ids come in, and generation.

A family's model (GPT-2's `GPTLanguageModel`, Llama's `LlamaLanguageModel` and the
models built on it) holds four parts, `token_embedding`, `blocks`, `final_norm` and
`lm_head`, and says two things of its own: how it embeds (`embed`: GPT-2 adds learned
positions, Llama adds none, Gemma 3 scales) and the longest input `generate` feeds back
(`context`). The rest is here, written once.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from literate.decoding.sampling import greedy
from literate.parts.checks import (
    checked_entry,
    ids_in_vocabulary,
    non_negative_int,
    positive_int,
    token_ids,
)

__all__ = ["DecoderLanguageModel"]


# --8<-- [start:decoder_language_model]
class DecoderLanguageModel(nn.Module):
    """The interface of a decoder-only language model: ids [B, T] -> logits [B, T, V].

    `forward` = `run(check(ids))`: `check` is the one value check (ids in the
    vocabulary, one host sync); `run` is unchecked, for ids the model made itself:
    `embed`, the causal blocks, the final norm, the output projection. A subclass
    holds `token_embedding`, `blocks`, `final_norm`, `lm_head` and gives `embed` and
    `context`.
    """

    @property
    def context(self) -> int:
        """The longest input `generate` feeds back."""
        raise NotImplementedError

    def embed(self, ids: Tensor, *, offset: int = 0,
              positions: Tensor | None = None) -> Tensor:
        """ids [B, T] -> [B, T, d], at positions offset .. offset + T - 1, or each
        row's own (`positions` [B, T], chapter 8)."""
        raise NotImplementedError

    @property
    def vocab_size(self) -> int:
        return self.token_embedding.num_embeddings

    def check(self, ids: object, *, max_length: int | None) -> Tensor:
        """Ids from outside: metadata, then one host sync for their values (a value
        check that torch.compile skips: call `check` eagerly, compile `run`)."""
        ids = token_ids("ids", ids, max_length=max_length)
        if ids.device != self.token_embedding.weight.device:
            raise ValueError(f"ids is on {ids.device}, the model on "
                             f"{self.token_embedding.weight.device}")
        ids_in_vocabulary({"ids": ids}, vocab_size=self.vocab_size)
        return ids

    def forward(self, ids: Tensor) -> Tensor:
        return self.run(self.check(ids, max_length=self.context))

    def run(self, ids: Tensor) -> Tensor:
        """ids [B, T] -> logits [B, T, V], unchecked: the blocks and parts it calls do
        not check the hidden states again (`checked_entry`)."""
        with checked_entry(self):  # a weight that does not fit is named
            x = self.embed(ids)  # [B, T, d]
            for block in self.blocks:
                x = block(x)  # causal: position t reads positions 0..t only
            return self.lm_head(self.final_norm(x))  # [B, T, V]

    @torch.no_grad()
    def generate(self, ids: Tensor, max_new_tokens: int, *, eos_id: int | None = None,
                 choose: Callable[[Tensor], Tensor] = greedy) -> Tensor:
        """Append up to `max_new_tokens` tokens to every row of `ids` [B, T0]; returns
        [B, T0 + n], the prompt first. `choose` turns the last position's logits [B, V]
        into ids [B]: `greedy` by default, or a sampler (chapter 6). Stops when every
        row has produced `eos_id` (kept; a finished row repeats it while the others go
        on) or after `max_new_tokens`. Each step reads the last `context` tokens only,
        so a prompt may be longer than the context. Rows share one length: no padding.
        Runs in eval mode, restoring the previous mode after. Host syncs: one for the
        prompt's ids, one per token for the EOS test (after every token but the last;
        none without `eos_id`); `greedy` and `sampler` add none.
        """
        ids = self.check(ids, max_length=None)  # any length: cropped below
        max_new_tokens = positive_int("max_new_tokens", max_new_tokens)
        if eos_id is not None and non_negative_int("eos_id", eos_id) >= self.vocab_size:
            raise ValueError(f"eos_id must be < vocabulary size {self.vocab_size}, "
                             f"got {eos_id}")
        if not callable(choose):
            raise TypeError(f"choose must be a function logits -> ids, "
                            f"got {type(choose).__name__}")
        finished = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)  # [B]
        was_training = self.training
        self.eval()
        try:
            for step in range(max_new_tokens):
                logits = self.run(ids[:, -self.context:])[:, -1]  # [B, V]: the last one
                next_id = choose(logits)  # [B]
                if eos_id is not None:
                    next_id = next_id.masked_fill(finished, eos_id)  # done: repeat it
                    finished |= next_id == eos_id
                ids = torch.cat((ids, next_id[:, None]), dim=1)  # [B, T + 1]
                if eos_id is not None and step + 1 < max_new_tokens and finished.all():
                    break  # the one host sync of a step
        finally:
            self.train(was_training)
        return ids
# --8<-- [end:decoder_language_model]
