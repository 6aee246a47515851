"""The rows of chapters 6 and 8: the sampling filters, cached generation and beam search
against Hugging Face's `generate`, and a decoding step through ring caches."""

from __future__ import annotations

from collections.abc import Callable

import torch

from literate.tools.bench.common import max_diff


def sampling_filters(
    batch: int = 8,
    vocab: int = 50257,
    temperature: float | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
):
    def build():
        from transformers.generation.logits_process import (
            LogitsProcessorList,
            TemperatureLogitsWarper,
            TopKLogitsWarper,
            TopPLogitsWarper,
        )

        from literate.decoding.sampling import filter_logits

        torch.manual_seed(0)
        logits = torch.randn(batch, vocab) * 3
        warpers = LogitsProcessorList()
        if temperature is not None:
            warpers.append(TemperatureLogitsWarper(temperature))
        if top_k is not None:
            warpers.append(TopKLogitsWarper(top_k))
        if top_p is not None:
            warpers.append(TopPLogitsWarper(top_p))
        ids = torch.zeros(batch, 1, dtype=torch.long)
        settings = {
            "temperature": 1.0 if temperature is None else temperature,
            "top_k": top_k,
            "top_p": top_p,
        }

        def ours():
            return filter_logits(logits, **settings)

        def theirs():
            return warpers(ids, logits)

        a, b = ours(), theirs()
        same = torch.equal(torch.isinf(a), torch.isinf(b))
        diff = (
            (a.masked_fill(torch.isinf(a), 0) - b.masked_fill(torch.isinf(b), 0))
            .abs()
            .max()
            .item()
        )
        return ours, theirs, diff if same else float("nan")

    return build


def llama_decoding(beams: int = 1, prompt: int = 32, new_tokens: int = 64):
    """The tiny Llama of literate.numbers.decode_cost: our cached generate (or beam search)
    against HF generate on the same weights; the 'diff' is 0 if the tokens are equal."""

    def build():
        from literate.decoding.beam import beam_generate
        from literate.decoding.generate import generate
        from literate.numbers.decode_cost import TINY_LLAMA
        from literate.tools.decode_timing import _hf_twin

        ours, theirs = _hf_twin(TINY_LLAMA)
        ids = torch.randint(
            0,
            TINY_LLAMA["vocab_size"],
            (2, prompt),
            generator=torch.Generator().manual_seed(1),
        )
        hf_kwargs = dict(
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=new_tokens,
            pad_token_id=0,
            num_beams=beams,
        )

        def a():
            if beams == 1:
                return generate(ours, ids, new_tokens)
            return beam_generate(ours, ids, beams, new_tokens)[0]

        def b():
            with torch.no_grad():
                return theirs.generate(ids, **hf_kwargs)

        return a, b, 0.0 if torch.equal(a(), b()) else float("nan")

    return build


def window_decode_step(against: str, window: int = 64, far: int = 8):
    """One decoding step (`cached_run` of one token) of the tiny Llama of
    literate.numbers.decode_cost given a sliding window (Mistral's layout), at position
    far * window, its rings wrapped many times, against the same model's step at
    position window // 2, inside the window (`against="inside"`: what a step past the
    window costs next to one inside it, 1.0 the same), or against the step at the same
    position through plain caches that keep every key (`against="full"`: far * window
    keys, masked to the window). Each call takes its token back (`truncate`), so every
    round times the same position. The 'diff': the far step's logits through the rings
    against through plain caches."""

    def build():
        from literate.decoding.generate import cached_run, new_decode_cache
        from literate.models.mistral import mistral_model
        from literate.numbers.decode_cost import TINY_LLAMA
        from literate.parts.cache import DecodeCache, KVCache

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = mistral_model(**TINY_LLAMA, window=window).eval()
        position = far * window
        ids = torch.randint(
            0,
            TINY_LLAMA["vocab_size"],
            (1, position + 1),
            generator=torch.Generator().manual_seed(1),
        )

        def plain(capacity: int) -> DecodeCache:
            attn = model.blocks[0].attn
            return DecodeCache(
                [
                    KVCache(1, attn.n_kv_heads, capacity, attn.d_head)
                    for _ in model.blocks
                ]
            )

        def step_at(t: int, cache: DecodeCache) -> Callable[[], object]:
            with torch.no_grad():
                cached_run(model, ids[:, :t], cache, last=True)  # the prompt

            def step():
                with torch.no_grad():
                    logits = cached_run(model, ids[:, t : t + 1], cache, last=True)
                for layer in cache.layers:
                    layer.truncate(t)  # back to position t for the next call
                return logits

            return step

        ours = step_at(position, new_decode_cache(model, 1, position + 1))
        if against == "inside":
            theirs = step_at(window // 2, new_decode_cache(model, 1, position + 1))
        else:
            theirs = step_at(position, plain(position + 1))
        return ours, theirs, max_diff(ours(), step_at(position, plain(position + 1))())

    return build
