"""Beam search (literate/decoding/beam.py) against Hugging Face's and against itself.

- `beam_generate` == HF `generate(num_beams=k, do_sample=False, length_penalty, early_stopping)`
  for GPT-2 and Llama with copied weights, left-padded batches and an EOS the models produce:
  sequences exactly, `sequences_scores` to float32 rounding (HF computes every score in float32,
  whatever the model's dtype; ours stay in float64). Settings cover the three early_stopping
  rules and length penalties below, at and above 1.
- The score returned is the sum of the returned tokens' log-probabilities under an uncached
  forward of the returned sequence, divided by the penalty: a cache that is not reordered (or
  reordered wrongly) gives scores that disagree, and the test shows it does.
- beams=1 is greedy; the GNMT penalty is Wu et al.'s formula; bad arguments are refused.
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import pytest
import torch

from literate.decoding.beam import (
    beam_generate,
    beam_search,
    gnmt_length_penalty,
    hf_length_penalty,
)
from literate.decoding.generate import generate
from literate.models.gpt2 import copy_hf_gpt2, gpt2_from_hf_config
from literate.models.llama import llama_from_hf_config, load_hf_llama
from literate.parts.cache import DecodeCache
from literate.tools.syncs import host_reads

transformers = pytest.importorskip("transformers")
F32_UNIT = 2.0**-23

IDS = torch.tensor([[5, 9, 17, 33, 3, 4], [0, 0, 20, 2, 11, 7], [0, 0, 0, 0, 8, 30]])
MASK = torch.tensor([[1] * 6, [0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 1, 1]])
VALID = MASK.bool()


def hf_and_ours(family: str):
    """A tiny float64 HF model with varied continuations (larger weights) and ours, loaded from it."""
    torch.manual_seed(0)
    quiet = {"bos_token_id": None, "eos_token_id": None, "pad_token_id": None}
    if family == "gpt2":
        config = transformers.GPT2Config(
            n_embd=32,
            n_head=4,
            n_layer=2,
            n_positions=32,
            vocab_size=40,
            initializer_range=0.3,
            attn_implementation="eager",
            **quiet,
        )
        hf = transformers.GPT2LMHeadModel(config).double().eval()
        return hf, copy_hf_gpt2(
            gpt2_from_hf_config(config, inference=True).double(), hf
        ).eval()
    config = transformers.LlamaConfig(
        vocab_size=40,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        num_hidden_layers=2,
        max_position_embeddings=32,
        rms_norm_eps=1e-5,
        initializer_range=0.2,
        attn_implementation="sdpa",
        rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
        **quiet,
    )
    hf = transformers.LlamaForCausalLM(config).double().eval()
    ours = llama_from_hf_config(config).double().eval()
    return hf, load_hf_llama(ours, hf.state_dict(), config)


FAMILIES = ("gpt2", "llama")


@lru_cache(maxsize=None)
def models(family: str):
    """`hf_and_ours(family)`, built once, when a test first needs it (not at collection,
    which every worker does)."""
    return hf_and_ours(family)


def liked_eos(hf, rank: int = 0) -> int:
    """The token the model likes `rank`-th most along its greedy continuations: EOS then ends beams mid-way."""
    with torch.no_grad():
        greedy = hf.generate(
            IDS, attention_mask=MASK, max_new_tokens=8, do_sample=False, pad_token_id=0
        )
        liked = torch.softmax(hf(greedy).logits[:, 5:], -1).mean((0, 1))
        return int(liked.topk(rank + 1).indices[rank])


# Each (beams, length_penalty) pair runs with the three stopping rules, 20 new tokens: with fewer, HF's
# outputs hardly depend on the rule, and a broken rule would pass. The EOS (GPT-2: its second most liked
# token) is one for which "never" and False lead HF to different outputs; the test asserts they do.
PAIRS = [(2, 1.0), (4, 2.0)]
RULES = (False, True, "never")
NEW = 20
EOS_RANK = {"gpt2": 1, "llama": 0}


@pytest.mark.parametrize("family", FAMILIES)
def test_beam_generate_equals_hugging_face(family):
    hf, ours = models(family)
    eos = liked_eos(hf, EOS_RANK[family])
    ended_early, differ = 0, set()
    for beams, lp in PAIRS:
        outputs = {}
        for stopping in RULES:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                theirs = hf.generate(
                    IDS,
                    attention_mask=MASK,
                    num_beams=beams,
                    do_sample=False,
                    length_penalty=lp,
                    early_stopping=stopping,
                    max_new_tokens=NEW,
                    eos_token_id=eos,
                    pad_token_id=1,
                    output_scores=True,
                    return_dict_in_generate=True,
                )
            # pad 1, not 0: HF fills with `pad_token_id or eos`, so a pad id of 0 gives the EOS
            sequences, scores = beam_generate(
                ours,
                IDS,
                beams,
                NEW,
                valid=VALID,
                eos_id=eos,
                pad_id=1,
                length_penalty=lp,
                early_stopping=stopping,
            )
            assert torch.equal(sequences, theirs.sequences), (beams, lp, stopping)
            # HF: float32 log_softmax and sums of <= 20 terms; 16 float32 units of the score is a wide margin
            bound = 16 * F32_UNIT * theirs.sequences_scores.abs().max()
            assert (scores - theirs.sequences_scores).abs().max() < bound, (
                beams,
                lp,
                stopping,
            )
            assert (
                scores - theirs.sequences_scores
            ).abs().max() > 1e-12  # HF really is in float32
            ended_early += int((sequences[:, 6:-1] == eos).any())
            outputs[stopping] = theirs.sequences
        differ |= {
            rule for rule in RULES[1:] if not torch.equal(outputs[False], outputs[rule])
        }
    assert ended_early >= 2  # EOS ended hypotheses before the last step
    assert differ == (
        {True, "never"} if family == "gpt2" else {True}
    )  # the rules are exercised


def recomputed_scores(model, sequences, prompt_valid, eos, penalty):
    """sum of log p(token) over the generated tokens (through the first EOS), by an uncached forward of each
    returned sequence alone (its padding cut off), divided by penalty(length)."""
    out = []
    for row, seq in enumerate(sequences):
        real = torch.cat((seq[:6][prompt_valid[row]], seq[6:]))
        t0 = int(prompt_valid[row].sum())
        generated = real[t0:].tolist()
        length = generated.index(eos) + 1 if eos in generated else len(generated)
        with torch.no_grad():
            logp = torch.log_softmax(model(real[None, : t0 + length - 1])[0], -1)
        picked = logp[t0 - 1 :].gather(1, real[t0 : t0 + length, None]).sum()
        out.append(picked / penalty(length))
    return torch.stack(out)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_score_is_the_returned_sequences_own_and_a_missing_reorder_breaks_it(
    family, monkeypatch
):
    hf, ours = models(family)
    eos = liked_eos(hf)
    sequences, scores = beam_generate(
        ours, IDS, 4, 8, valid=VALID, eos_id=eos, length_penalty=0.6
    )
    expected = recomputed_scores(ours, sequences, VALID, eos, hf_length_penalty(0.6))
    assert (scores - expected).abs().max() < 1e-12
    monkeypatch.setattr(
        DecodeCache, "reorder", lambda self, rows: None
    )  # the bug every tutorial has
    sequences, scores = beam_generate(
        ours, IDS, 4, 8, valid=VALID, eos_id=eos, length_penalty=0.6
    )
    wrong = recomputed_scores(ours, sequences, VALID, eos, hf_length_penalty(0.6))
    assert (scores - wrong).abs().max() > 1e-3


@pytest.mark.parametrize("family", FAMILIES)
def test_one_beam_is_greedy(family):
    _, ours = models(family)
    for lp in (0.6, 1.0, 2.0):
        sequences, scores = beam_generate(
            ours, IDS, 1, 8, valid=VALID, length_penalty=lp
        )
        tokens, logits = generate(ours, IDS, 8, valid=VALID, return_logits=True)
        assert torch.equal(sequences, tokens)
        logp = torch.log_softmax(logits, -1).gather(2, tokens[:, 6:, None]).sum((1, 2))
        assert (scores - logp / 8**lp).abs().max() < 1e-12


def test_host_reads_one_per_step():
    _, ours = models("llama")
    # the prompt's check, one "all done?" per step but the last, and the final length
    assert host_reads(beam_generate, ours, IDS, 3, 8, valid=VALID) == 1 + 7 + 1


def test_length_penalties():
    assert gnmt_length_penalty(0.6)(1) == 1.0
    assert gnmt_length_penalty(0.6)(7) == pytest.approx((12 / 6) ** 0.6, rel=1e-15)
    assert gnmt_length_penalty(0.0)(30) == 1.0
    assert hf_length_penalty(2.0)(3) == 9.0
    with pytest.raises(ValueError, match=r"^alpha must be >= 0, got -0.1$"):
        gnmt_length_penalty(-0.1)
    with pytest.raises(
        TypeError, match=r"^length_penalty must be a real number, got str$"
    ):
        hf_length_penalty("1")
    with pytest.raises(ValueError, match=r"^length_penalty must be finite, got nan$"):
        hf_length_penalty(float("nan"))
    _, ours = models("gpt2")
    with pytest.raises(
        TypeError, match=r"^length_penalty must be a real number, got str$"
    ):
        beam_generate(ours, IDS, 2, 4, length_penalty="a")
    with pytest.raises(
        ValueError, match=r"^early_stopping must be True, False or 'never', got 0.0$"
    ):
        beam_generate(ours, IDS, 2, 4, early_stopping=0.0)


def test_bad_arguments_are_refused():
    _, ours = models("gpt2")
    logits = torch.zeros(6, 40)
    step, reorder = (lambda tokens: logits), (lambda rows: None)
    cases = [
        (
            dict(beams=4),
            r"^logits must be \[B \* beams, V\] with 2 \* beams <= V, got \(6, 40\) for beams=4$",
        ),
        (dict(beams=3, eos_id=40), r"^eos_id must be < V=40, got 40$"),
        (
            dict(beams=3, early_stopping="sometimes"),
            r"^early_stopping must be True, False or 'never', got 'sometimes'$",
        ),
        (
            dict(beams=3, early_stopping=1),
            r"^early_stopping must be True, False or 'never', got 1$",
        ),
        (dict(beams=3, fill=40), r"^fill must be < V=40, got 40$"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            beam_search(logits, step, reorder, max_new_tokens=4, **kwargs)
    with pytest.raises(
        ValueError,
        match=r"^logits must be \[B \* beams, V\] with 2 \* beams <= V, got \(6, 5\)",
    ):
        beam_search(torch.zeros(6, 5), step, reorder, beams=3, max_new_tokens=4)
    with pytest.raises(ValueError, match=r"context=32"):
        beam_generate(ours, IDS, 2, 27)
    with pytest.raises(ValueError, match=r"^valid row 1 is not left-padded"):
        beam_generate(ours, IDS, 2, 4, valid=VALID.flip(1))


@pytest.mark.parametrize("family", FAMILIES)
def test_a_negative_length_penalty_under_never_stops_as_hf_does(family):
    """With lp <= 0 a longer hypothesis is never better, and HF's "never" bounds the running beam at the
    current length, as False does; ours must too (a "never" that always used the longest length would not)."""
    hf, ours = models(family)
    eos = liked_eos(hf, EOS_RANK[family])
    for stopping in ("never", False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = hf.generate(
                IDS,
                attention_mask=MASK,
                num_beams=2,
                do_sample=False,
                length_penalty=-1.0,
                early_stopping=stopping,
                max_new_tokens=NEW,
                eos_token_id=eos,
                pad_token_id=1,
            )
        sequences, _ = beam_generate(
            ours,
            IDS,
            2,
            NEW,
            valid=VALID,
            eos_id=eos,
            pad_id=1,
            length_penalty=-1.0,
            early_stopping=stopping,
        )
        assert torch.equal(sequences, theirs), stopping
