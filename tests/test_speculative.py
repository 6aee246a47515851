"""Greedy speculative decoding (literate/decoding/speculative.py) against the target's own
greedy decoding, an independent reference written from the paper, and Hugging Face.

- The output is the target's greedy `generate` exactly, for drafts that are perfect (the
  target itself), half as deep (the target's first block), random, and of another family,
  for gamma from 1 to 8, with and without an EOS; the minimal `speculative_greedy` and the
  hardened `speculative_generate` agree.
- The counts (rounds, proposals, accepted) are those of a reference written from
  Leviathan et al. 2023, Algorithm 1 at temperature 0, without any cache: every guess and
  every check a full forward. A cache that is rolled back wrongly changes the draft's
  guesses (so the counts) before it changes the output, which the target corrects.
- After every round both caches hold exactly the keys and values of a fresh prefill of
  the tokens they should hold (to 1e-12, float64: sums in another order).
- Hugging Face's assisted generation (`assistant_model=`, greedy, a constant number of
  candidate tokens, no confidence threshold) returns the same tokens with the same
  number of target calls and draft calls; its float32 argmax and our float64 one agree
  on these models (a near-tie would show as a different token, and none does).
- Bad arguments are refused naming them; one host read per round.
"""

from __future__ import annotations

import copy
import math
import warnings
from functools import lru_cache

import pytest
import torch

from literate.decoding import speculative
from literate.decoding.generate import cached_run, generate, new_decode_cache
from literate.decoding.speculative import (
    accept,
    propose,
    rollback,
    speculative_generate,
    speculative_greedy,
    verify,
)
from literate.models.gpt2 import gpt2_init_, gpt2_model
from literate.models.llama import llama_from_hf_config, llama_model, load_hf_llama
from literate.tools.syncs import host_reads

transformers = pytest.importorskip("transformers")
V = 64


def tiny_llama(seed: int, **shape) -> torch.nn.Module:
    torch.manual_seed(seed)
    config = dict(vocab_size=V, context=32, d_model=32, n_heads=4, n_kv_heads=2)
    config |= dict(n_layers=2, d_ff=64, std=0.2) | shape
    return llama_model(**config).double().eval()


@lru_cache(maxsize=None)
def target_and_drafts():
    """The target (a tiny Llama, weights large enough that its choices depend on the
    context) and four drafts: itself, its first block alone, a random small Llama, and a
    random small GPT-2 (another layout, the same vocabulary)."""
    target = tiny_llama(0)
    shallow = copy.deepcopy(target)
    shallow.blocks = shallow.blocks[:1]
    small = tiny_llama(1, d_model=16, n_heads=2, n_kv_heads=1, n_layers=1, d_ff=32)
    torch.manual_seed(2)
    gpt = gpt2_model(vocab_size=V, context=32, d_model=16, n_heads=2, n_layers=1)
    gpt = gpt2_init_(gpt, std=0.3).double().eval()
    return target, {"perfect": target, "shallow": shallow, "random": small, "gpt2": gpt}


def prompts():
    g = torch.Generator().manual_seed(5)
    return [torch.randint(0, V, (1, t0), generator=g) for t0 in (1, 4, 7)]


def reference(target, draft, ids, n, gamma, eos_id=None):
    """Leviathan et al. 2023, Algorithm 1 at temperature 0, without a cache: the draft
    guesses gamma tokens one full forward at a time, the target scores the guessed
    sequence in one full forward, and keeps the guesses it agrees with plus its own
    next token. -> (tokens, rounds, proposed, accepted)."""
    end = ids.shape[1] + n
    rounds = proposed = accepted = 0
    with torch.no_grad():
        while ids.shape[1] < end:
            k = min(gamma, end - ids.shape[1] - 1)
            guess = ids
            for _ in range(k):
                guess = torch.cat((guess, draft(guess)[:, -1:].argmax(-1)), dim=1)
            own = target(guess)[0, ids.shape[1] - 1 :].argmax(-1).tolist()  # k + 1
            drafted = guess[0, ids.shape[1] :].tolist()
            agreed = 0
            while agreed < k and drafted[agreed] == own[agreed]:
                agreed += 1
            new = own[: agreed + 1]
            if eos_id is not None and eos_id in new:
                new = new[: new.index(eos_id) + 1]
            ids = torch.cat((ids, torch.tensor([new])), dim=1)
            rounds, proposed, accepted = rounds + 1, proposed + k, accepted + agreed
            if eos_id is not None and new[-1] == eos_id:
                break
    return ids, rounds, proposed, accepted


@pytest.mark.parametrize("gamma", [1, 2, 4, 8])
@pytest.mark.parametrize("name", ["perfect", "shallow", "random", "gpt2"])
def test_the_output_is_the_targets_greedy_decoding(name, gamma):
    target, drafts = target_and_drafts()
    draft = drafts[name]
    for ids in prompts():
        expected = generate(target, ids, 20)
        minimal = speculative_greedy(target, draft, ids, 20, gamma=gamma)
        hardened = speculative_generate(target, draft, ids, 20, gamma=gamma)
        assert torch.equal(minimal, expected)
        assert torch.equal(hardened.tokens, expected)
        tokens, *counts = reference(target, draft, ids, 20, gamma)
        assert torch.equal(tokens, expected)
        assert (hardened.rounds, hardened.proposed, hardened.accepted) == tuple(counts)
        if name == "perfect":  # every proposal accepted: gamma + 1 tokens a round
            assert hardened.accepted == hardened.proposed
            assert hardened.rounds == math.ceil(20 / (gamma + 1))
        assert hardened.rounds >= math.ceil(20 / (gamma + 1))


def test_the_drafts_are_what_the_test_says():
    """The shallow draft is accepted sometimes and not always, the random ones rarely:
    the rollback after a partial acceptance is exercised."""
    target, drafts = target_and_drafts()
    rates = {}
    for name, draft in drafts.items():
        runs = [speculative_generate(target, draft, ids, 20) for ids in prompts()]
        rates[name] = sum(r.accepted for r in runs) / sum(r.proposed for r in runs)
    assert rates["perfect"] == 1.0
    assert 0.0 < rates["shallow"] < 1.0
    assert rates["random"] < rates["shallow"] and rates["gpt2"] < rates["shallow"]


def test_with_an_eos_it_stops_where_generate_stops():
    target, drafts = target_and_drafts()
    ids = prompts()[1]
    free = generate(target, ids, 20)[0, 4:].tolist()
    for eos in (free[0], free[6], free[13]):  # at the first token, mid-way, late
        expected = generate(target, ids, 20, eos_id=eos)
        assert expected[0, -1] == eos
        for name, draft in drafts.items():
            for gamma in (1, 3, 5):
                got = speculative_generate(
                    target, draft, ids, 20, gamma=gamma, eos_id=eos
                )
                assert torch.equal(got.tokens, expected), (name, gamma, eos)
                tokens, *counts = reference(target, draft, ids, 20, gamma, eos_id=eos)
                assert (got.rounds, got.proposed, got.accepted) == tuple(counts)


def fresh_keys(model, tokens):
    """Every layer's keys and values after a plain prefill of `tokens` [1, T]."""
    cache = new_decode_cache(model, batch=1, capacity=tokens.shape[1])
    with torch.no_grad():
        cached_run(model, tokens, cache)
    return [(c.k, c.v) for c in cache.layers]


def test_after_every_round_the_caches_hold_what_a_fresh_prefill_holds():
    target, drafts = target_and_drafts()
    draft = drafts["shallow"]
    ids = prompts()[1]
    end = ids.shape[1] + 16
    caches = {m: new_decode_cache(m, batch=1, capacity=end) for m in (target, draft)}
    partial = 0
    with torch.no_grad():
        while ids.shape[1] < end:
            k = min(3, end - ids.shape[1] - 1)
            proposed = propose(draft, caches[draft], ids, k)
            new = accept(proposed, verify(target, caches[target], ids, proposed))
            partial += 0 < new.shape[1] - 1 < k
            ids = torch.cat((ids, new), dim=1)
            for model, cache in caches.items():
                rollback(cache, ids.shape[1] - 1)
                held = cache.next_pos
                assert held <= ids.shape[1] - 1
                for c, (k_ref, v_ref) in zip(
                    cache.layers, fresh_keys(model, ids[:, :held])
                ):
                    assert (c.k[:, :, :held] - k_ref).abs().max() < 1e-12
                    assert (c.v[:, :, :held] - v_ref).abs().max() < 1e-12
                    assert not c.k[:, :, held:].any()  # truncate zeroes what it forgets
            assert caches[target].next_pos == ids.shape[1] - 1  # all but the last
    assert partial >= 1  # a round kept some proposals and refused one
    assert torch.equal(ids, generate(target, ids[:, :4], 16))


def test_without_the_rollback_a_round_fails_loudly(monkeypatch):
    """A rollback that forgets nothing leaves refused proposals in the caches: they hold
    more tokens than the sequence, and the next round has nothing left to feed (an
    error, not a silent wrong token). A rollback that forgets one token too many costs
    a token re-read, and the output is still the target's."""
    target, drafts = target_and_drafts()
    ids = prompts()[1]
    expected = generate(target, ids, 20)
    real = speculative.rollback
    monkeypatch.setattr(speculative, "rollback", lambda cache, length: None)
    with pytest.raises(ValueError, match=r"ids must have shape \[B, T\]"):
        speculative_generate(target, drafts["shallow"], ids, 20, gamma=3)
    monkeypatch.setattr(
        speculative, "rollback", lambda cache, length: real(cache, length - 1)
    )
    assert torch.equal(
        speculative_generate(target, drafts["shallow"], ids, 20, gamma=3).tokens,
        expected,
    )


# Hugging Face: a tiny LlamaForCausalLM target, a one-layer draft holding the target's
# first layer, and a random one-layer draft of half the width; ours loaded from each.
NO_SPECIAL = {"bos_token_id": None, "eos_token_id": None, "pad_token_id": None}


def hf_config(**shape):
    config = dict(
        vocab_size=40,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        num_hidden_layers=2,
        max_position_embeddings=40,
        rms_norm_eps=1e-5,
        initializer_range=0.2,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
        attn_implementation="sdpa",
        **NO_SPECIAL,
    )
    return transformers.LlamaConfig(**(config | shape))


@lru_cache(maxsize=None)
def hf_models():
    torch.manual_seed(0)
    configs = {
        "target": hf_config(),
        "shallow": hf_config(num_hidden_layers=1),
        "random": hf_config(
            hidden_size=16,
            num_attention_heads=2,
            num_key_value_heads=1,
            intermediate_size=32,
            num_hidden_layers=1,
        ),
    }
    hf = {
        k: transformers.LlamaForCausalLM(c).double().eval() for k, c in configs.items()
    }
    hf["shallow"].load_state_dict(hf["target"].state_dict(), strict=False)
    ours = {
        k: load_hf_llama(
            llama_from_hf_config(configs[k]).double().eval(), m.state_dict(), configs[k]
        )
        for k, m in hf.items()
    }
    return hf, ours


def calls(module):
    """A counter of `module`'s forward calls, and its hook."""
    count = [0]
    hook = module.register_forward_hook(lambda *_: count.__setitem__(0, count[0] + 1))
    return count, hook


def assisted(target, draft, ids, gamma, n, eos=None):
    """HF's assisted generation, greedy, `gamma` candidate tokens every round (the
    constant schedule, no confidence threshold that would stop the draft early) ->
    (tokens, target calls, draft calls)."""
    config = draft.generation_config
    config.num_assistant_tokens = gamma
    config.num_assistant_tokens_schedule = "constant"
    config.assistant_confidence_threshold = 0.0
    target_calls, h1 = calls(target)
    draft_calls, h2 = calls(draft.lm_head)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tokens = target.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                assistant_model=draft,
                do_sample=False,
                max_new_tokens=n,
                eos_token_id=eos,
                pad_token_id=39,  # a token neither prompt holds (see the note below)
            )
    finally:
        h1.remove()
        h2.remove()
    return tokens, target_calls[0], draft_calls[0]


HF_IDS = [torch.tensor([[4, 9, 13, 21, 3]]), torch.tensor([[17, 30, 2]])]


@pytest.mark.parametrize("gamma", [1, 3, 5])
@pytest.mark.parametrize("name", ["shallow", "random"])
def test_equal_to_hugging_face_assisted_generation(name, gamma):
    hf, ours = hf_models()
    for ids in HF_IDS:
        theirs, target_calls, draft_calls = assisted(
            hf["target"], hf[name], ids, gamma, 20
        )
        draft_count, hook = calls(ours[name].lm_head)
        try:
            got = speculative_generate(ours["target"], ours[name], ids, 20, gamma=gamma)
        finally:
            hook.remove()
        assert torch.equal(got.tokens, theirs)
        assert got.rounds == target_calls  # one target call a round, both sides
        assert draft_count[0] == draft_calls == got.proposed  # one per proposal
        free = theirs[0, ids.shape[1] :].tolist()
        eos = free[7]
        theirs, target_calls, _ = assisted(hf["target"], hf[name], ids, gamma, 20, eos)
        got = speculative_generate(
            ours["target"], ours[name], ids, 20, gamma=gamma, eos_id=eos
        )
        assert torch.equal(got.tokens, theirs) and got.tokens[0, -1] == eos
        assert got.rounds == target_calls


def test_hugging_faces_draft_hides_prompt_tokens_equal_to_the_pad_id():
    """The trap the comparison avoids: HF's assistant builds its attention mask from
    `pad_token_id`, so a prompt token equal to it is hidden from the draft (not from
    the target), though `attention_mask` says it is real. The tokens stay the target's;
    the draft's guesses, so the rounds, change."""
    hf, ours = hf_models()
    ids = torch.tensor([[4, 39, 13, 0, 3]])
    seen = []
    hook = hf["random"].register_forward_hook(
        lambda m, a, kw, out: seen.append(kw["attention_mask"][0].tolist()),
        with_kwargs=True,
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tokens = hf["target"].generate(
                ids,
                attention_mask=torch.ones_like(ids),
                assistant_model=hf["random"],
                do_sample=False,
                max_new_tokens=4,
                pad_token_id=0,
            )
    finally:
        hook.remove()
    assert seen[0] == [1, 1, 1, 0, 1]  # the prompt's 0 is hidden from the draft
    got = speculative_generate(ours["target"], ours["random"], ids, 4)
    assert torch.equal(got.tokens, tokens)


def test_one_host_read_per_round():
    target, drafts = target_and_drafts()
    ids = prompts()[1]
    for draft in drafts.values():
        rounds = speculative_generate(target, draft, ids, 12, gamma=3).rounds
        assert host_reads(speculative_generate, target, draft, ids, 12, gamma=3) == (
            1 + rounds
        )


def test_the_training_modes_are_put_back():
    target, drafts = target_and_drafts()
    draft = copy.deepcopy(drafts["random"]).train()
    speculative_generate(target, draft, prompts()[0], 3)
    assert draft.training and not target.training


@pytest.mark.parametrize(
    "change, error, pattern",
    [
        (
            dict(ids=torch.zeros(2, 3, dtype=torch.long)),
            ValueError,
            "^ids must hold one",
        ),
        (dict(gamma=0), ValueError, "gamma"),
        (dict(gamma=True), TypeError, "gamma"),
        (dict(gamma=2.0), TypeError, "gamma"),
        (dict(max_new_tokens=0), ValueError, "max_new_tokens"),
        (dict(max_new_tokens=40), ValueError, "context=32"),
        (dict(eos_id=V), ValueError, "eos_id"),
        (dict(ids=torch.tensor([[1, V]])), ValueError, r"ids\[0, 1\] = 64"),
        (dict(ids=torch.zeros(1, 3)), TypeError, "ids"),
        (dict(draft=torch.nn.Linear(2, 2)), TypeError, "^model must be a decoder"),
        (dict(draft="vocab"), ValueError, "the draft's vocabulary"),
        (dict(draft="context"), ValueError, "the draft has context=8"),
    ],
)
def test_a_bad_call_is_refused_naming_the_argument(change, error, pattern):
    target, drafts = target_and_drafts()
    kwargs = dict(target=target, draft=drafts["random"], ids=prompts()[1])
    kwargs |= dict(max_new_tokens=5, gamma=2, eos_id=None)
    kwargs |= change
    if kwargs["draft"] == "vocab":
        kwargs["draft"] = tiny_llama(3, vocab_size=V + 1)
    elif kwargs["draft"] == "context":
        kwargs["draft"] = tiny_llama(3, context=8)
    with pytest.raises(error, match=pattern):
        speculative_generate(**kwargs)
