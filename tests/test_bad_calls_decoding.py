"""Bad calls into chapter 8's decode path (`generate`, `cached_run`, `DecodeCache`,
`new_decode_cache`, `beam_search`, `beam_generate`) and chapters 1-6's leftovers of
issue 27 (helpers given an object of the wrong kind, float token ids, a memory mask
reported as `key_valid`).

Each row: a call a reader could make, the exception type, and a regex the message must
match, naming the argument the caller passed. Stateful objects (the cache, the model's
training mode) are compared before and after the refused call. The valid edge cases
(T=1, batch 1, prompt + new tokens == context, one beam == greedy, cached == uncached)
are asserted to keep working.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from literate.decoding.beam import beam_generate, beam_search
from literate.decoding.generate import cached_run, generate, new_decode_cache
from literate.decoding.sampling import greedy
from literate.models.gpt2 import (
    gpt2_init_,
    gpt2_model,
    hf_activation,
    period_windows,
    train_period_lm,
)
from literate.models.llama import llama_model
from literate.models.transformer2017 import EncoderDecoder
from literate.parts.blocks import decoder_layer_2017
from literate.parts.cache import DecodeCache, KVCache

V, CONTEXT = 16, 12
torch.manual_seed(0)
GPT = gpt2_model(
    vocab_size=V, context=CONTEXT, d_model=16, n_heads=2, n_layers=2, dropout=0.0
).eval()
LLAMA = llama_model(
    vocab_size=V,
    context=CONTEXT,
    d_model=16,
    n_heads=2,
    n_kv_heads=1,
    n_layers=2,
    d_ff=32,
).eval()
IDS = torch.randint(0, V, (2, 4), generator=torch.Generator().manual_seed(1))
LOGITS = torch.randn(4, V, generator=torch.Generator().manual_seed(2))  # B=2, beams=2


def cache(model=GPT, batch=2, capacity=10):
    return new_decode_cache(model, batch, capacity)


def step(tokens):
    return torch.zeros(4, V)


def reorder(rows):
    return None


def run(**kw):
    """cached_run on GPT with a fresh cache, the keyword arguments replaced."""
    args = dict(model=GPT, ids=IDS, cache=cache())
    args.update(kw)
    return cached_run(args.pop("model"), args.pop("ids"), args.pop("cache"), **args)


def gen(**kw):
    args = dict(model=GPT, ids=IDS, max_new_tokens=3)
    args.update(kw)
    return generate(
        args.pop("model"), args.pop("ids"), args.pop("max_new_tokens"), **args
    )


def beam(**kw):
    args = dict(logits=LOGITS, step=step, reorder=reorder, beams=2, max_new_tokens=3)
    args.update(kw)
    return beam_search(
        args.pop("logits"), args.pop("step"), args.pop("reorder"), **args
    )


def bgen(**kw):
    args = dict(model=GPT, ids=IDS, beams=2, max_new_tokens=3)
    args.update(kw)
    return beam_generate(
        args.pop("model"),
        args.pop("ids"),
        args.pop("beams"),
        args.pop("max_new_tokens"),
        **args,
    )


ARGMAX = lambda logits: logits.argmax(-1)  # noqa: E731

ROWS = [
    # --- generate: choose -------------------------------------------------------------
    (lambda: gen(choose=1), TypeError, r"^choose must be a function"),
    (lambda: gen(choose=None), TypeError, r"^choose must be a function.*NoneType"),
    (lambda: gen(choose="greedy"), TypeError, r"^choose must be a function.*str"),
    (lambda: gen(choose=greedy(LOGITS)), TypeError, r"^choose must be a function"),
    (
        lambda: gen(choose=lambda x: ARGMAX(x).float()),
        TypeError,
        r"^choose must return token ids as torch\.long, got torch\.float32$",
    ),
    (
        lambda: gen(choose=lambda x: ARGMAX(x).double()),
        TypeError,
        r"^choose must return token ids as torch\.long, got torch\.float64$",
    ),
    (
        lambda: gen(choose=lambda x: ARGMAX(x).int()),
        TypeError,
        r"^choose must return token ids as torch\.long, got torch\.int32$",
    ),
    (
        lambda: gen(choose=lambda x: ARGMAX(x).tolist()),
        TypeError,
        r"^choose must return token ids as torch\.long, got list$",
    ),
    (
        lambda: gen(choose=lambda x: None),
        TypeError,
        r"^choose must return token ids as torch\.long, got NoneType$",
    ),
    (
        lambda: gen(choose=lambda x: 3),
        TypeError,
        r"^choose must return token ids as torch\.long, got int$",
    ),
    (
        lambda: gen(choose=lambda x: x.softmax(-1)),
        TypeError,
        r"^choose must return token ids as torch\.long, got torch\.float32$",
    ),
    (
        lambda: gen(choose=lambda x: x.argmax(-1, keepdim=True)),
        ValueError,
        r"^choose must return ids \[B=2\].*got \(2, 1\)",
    ),
    (
        lambda: gen(choose=lambda x: ARGMAX(x)[:1]),
        ValueError,
        r"^choose must return ids \[B=2\].*got \(1,\)",
    ),
    (
        lambda: gen(choose=lambda x: x.argmax()),
        ValueError,
        r"^choose must return ids \[B=2\].*got \(\)",
    ),
    (
        lambda: gen(choose=lambda x: ARGMAX(x).repeat(2)),
        ValueError,
        r"^choose must return ids \[B=2\].*got \(4,\)",
    ),
    (
        lambda: gen(choose=lambda x: ARGMAX(x)[None]),
        ValueError,
        r"^choose must return ids \[B=2\].*got \(1, 2\)",
    ),
    (
        lambda: gen(choose=lambda x: ARGMAX(x).to("meta")),
        ValueError,
        r"^choose must return ids \[B=2\] on cpu.*on meta$",
    ),
    (
        lambda: gen(choose=lambda x: ARGMAX(x).float(), eos_id=3),
        TypeError,
        r"^choose must return token ids",
    ),
    (
        lambda: gen(choose=lambda x: ARGMAX(x)[:1], return_logits=True),
        ValueError,
        r"^choose must return ids",
    ),
    # --- generate: the other arguments ------------------------------------------------
    (
        lambda: gen(ids=IDS.float()),
        TypeError,
        r"^ids must hold token ids as torch\.long, got torch\.float32$",
    ),
    (
        lambda: gen(ids=IDS.double() + 0.5),
        TypeError,
        r"^ids must hold token ids as torch\.long, got torch\.float64$",
    ),
    (lambda: gen(ids=IDS.int()), TypeError, r"^ids must hold token ids as torch\.long"),
    (lambda: gen(ids=IDS.tolist()), TypeError, r"^ids must hold token ids.*list$"),
    (lambda: gen(ids=IDS[0]), ValueError, r"^ids must have shape \[B, T\]"),
    (lambda: gen(ids=IDS[None]), ValueError, r"^ids must have shape \[B, T\]"),
    (
        lambda: gen(return_logits="no"),
        TypeError,
        r"^return_logits must be a bool, got str$",
    ),
    (
        lambda: gen(return_logits="False"),
        TypeError,
        r"^return_logits must be a bool, got str$",
    ),
    (
        lambda: gen(return_logits=1),
        TypeError,
        r"^return_logits must be a bool, got int$",
    ),
    (
        lambda: gen(return_logits=None),
        TypeError,
        r"^return_logits must be a bool, got NoneType$",
    ),
    (lambda: gen(prefill_chunk=True), TypeError, r"^prefill_chunk must be an int"),
    (lambda: gen(prefill_chunk="2"), TypeError, r"^prefill_chunk must be an int"),
    (lambda: gen(prefill_chunk=0), ValueError, r"^prefill_chunk must be >= 1"),
    (lambda: gen(prefill_chunk=2.0), TypeError, r"^prefill_chunk must be an int"),
    (lambda: gen(max_new_tokens=True), TypeError, r"^max_new_tokens must be an int"),
    (lambda: gen(max_new_tokens=0), ValueError, r"^max_new_tokens must be >= 1"),
    (lambda: gen(max_new_tokens=3.0), TypeError, r"^max_new_tokens must be an int"),
    (lambda: gen(max_new_tokens=9), ValueError, r"max_new_tokens=9.*context=12"),
    (lambda: gen(eos_id=True), TypeError, r"^eos_id must be an int, got bool$"),
    (lambda: gen(eos_id=V), ValueError, r"^eos_id must be < vocabulary size 16"),
    (lambda: gen(eos_id=2.0), TypeError, r"^eos_id must be an int"),
    (lambda: gen(pad_id=1), ValueError, r"pad_id fills .*give an eos_id"),
    (
        lambda: gen(valid=torch.ones(2, 4, dtype=torch.long)),
        TypeError,
        r"^valid must be a bool tensor",
    ),
    (
        lambda: gen(valid=torch.ones(2, 3, dtype=torch.bool)),
        ValueError,
        r"^valid must be \[B, T0\]",
    ),
    (
        lambda: gen(model=nn.Linear(4, 4)),
        TypeError,
        r"^model must be a decoder-only language model.*got Linear$",
    ),
    (lambda: gen(model="gpt2"), TypeError, r"^model must be a decoder-only.*got str$"),
    (lambda: gen(model=None), TypeError, r"^model must be a decoder-only.*NoneType$"),
    (
        lambda: gen(model=GPT.blocks),
        TypeError,
        r"^model must be a decoder-only.*ModuleList",
    ),
    # --- cached_run ---------------------------------------------------------------------
    (
        lambda: run(ids=IDS.float()),
        TypeError,
        r"^ids must hold token ids as torch\.long, got torch\.float32$",
    ),
    (lambda: run(ids=IDS.half()), TypeError, r"^ids must hold token ids.*float16$"),
    (lambda: run(ids=IDS.int()), TypeError, r"^ids must hold token ids.*int32$"),
    (lambda: run(ids=IDS.bool()), TypeError, r"^ids must hold token ids.*torch\.bool$"),
    (lambda: run(ids=IDS[0]), ValueError, r"^ids must have shape \[B, T\]"),
    (lambda: run(ids=IDS[0, 0]), ValueError, r"^ids must have shape \[B, T\]"),
    (lambda: run(ids=IDS[:, :0]), ValueError, r"^ids must have shape \[B, T\]"),
    (lambda: run(ids=IDS.tolist()), TypeError, r"^ids must hold token ids.*list$"),
    (lambda: run(ids=None), TypeError, r"^ids must hold token ids.*NoneType$"),
    (
        lambda: run(ids=IDS[:1]),
        ValueError,
        r"^ids is \[B=1, T\] on cpu, the cache holds 2 rows",
    ),
    (lambda: run(ids=IDS.repeat(2, 1)), ValueError, r"^ids is \[B=4, T\]"),
    (lambda: run(ids=IDS.to("meta")), ValueError, r"^ids is \[B=2, T\] on meta"),
    (
        lambda: run(cache=KVCache(2, 2, 10, 8)),
        TypeError,
        r"^cache must be a DecodeCache .*got KVCache; a KVCache is one layer's$",
    ),
    (
        lambda: run(cache=cache().layers),
        TypeError,
        r"^cache must be a DecodeCache .*got list$",
    ),
    (lambda: run(cache=None), TypeError, r"^cache must be a DecodeCache .*NoneType$"),
    (
        lambda: run(cache=LLAMA.blocks[0].attn.new_cache(2, 10)),
        TypeError,
        r"^cache must be a DecodeCache",
    ),
    (
        lambda: run(cache=DecodeCache(cache().layers[:1])),
        ValueError,
        r"^cache holds 1 layer caches, the model has 2 blocks",
    ),
    (
        lambda: run(cache=DecodeCache(cache().layers * 2)),
        ValueError,
        r"^cache holds 4 layer caches, the model has 2 blocks",
    ),
    (
        lambda: run(cache=DecodeCache([KVCache(2, 2, 10, 8) for _ in range(3)])),
        ValueError,
        r"^cache holds 3 layer caches, the model has 2 blocks",
    ),
    (
        lambda: run(cache=cache(LLAMA)),
        ValueError,
        r"^cache\.layers\[0\] holds \[n_kv_heads, d_head, dtype, device\] = \[1, 8, "
        r".*model\.blocks\[0\] writes \[2, 8",
    ),
    (
        lambda: run(model=LLAMA, cache=cache(GPT)),
        ValueError,
        r"^cache\.layers\[0\] holds .* = \[2, 8, .*model\.blocks\[0\] writes \[1, 8",
    ),
    (
        lambda: run(cache=DecodeCache([KVCache(2, 2, 10, 8, dtype=torch.float64)] * 2)),
        ValueError,
        r"^cache\.layers\[0\] holds .*float64.*writes .*float32",
    ),
    (
        lambda: run(cache=DecodeCache([KVCache(2, 2, 10, 4) for _ in range(2)])),
        ValueError,
        r"^cache\.layers\[0\] holds .* = \[2, 4, ",
    ),
    (lambda: run(cache=cache(batch=3)), ValueError, r"^ids is \[B=2, T\].*3 rows"),
    (lambda: run(cache=cache(batch=1)), ValueError, r"^ids is \[B=2, T\].*1 rows"),
    (
        lambda: run(cache=cache(capacity=3)),
        ValueError,
        r"^appending 4 token\(s\) at next_pos=0 needs capacity >= 4",
    ),
    (lambda: run(last="yes"), TypeError, r"^last must be a bool, got str$"),
    (lambda: run(last="False"), TypeError, r"^last must be a bool, got str$"),
    (lambda: run(last=1), TypeError, r"^last must be a bool, got int$"),
    (lambda: run(last=None), TypeError, r"^last must be a bool, got NoneType$"),
    (
        lambda: run(last=torch.tensor(True)),
        TypeError,
        r"^last must be a bool, got Tensor",
    ),
    (
        lambda: run(valid=torch.ones(2, 4, dtype=torch.long)),
        TypeError,
        r"^valid must be a bool tensor",
    ),
    (lambda: run(valid=torch.ones(2, 4)), TypeError, r"^valid must be a bool tensor"),
    (
        lambda: run(valid=torch.ones(2, 3, dtype=torch.bool)),
        ValueError,
        r"^valid must be \[B=2, T=4\], got \(2, 3\)$",
    ),
    (
        lambda: run(valid=torch.ones(4, dtype=torch.bool)),
        ValueError,
        r"^valid must be \[B=2, T=4\]",
    ),
    (
        lambda: run(model=nn.Linear(4, 4)),
        TypeError,
        r"^model must be a decoder-only language model.*got Linear$",
    ),
    (lambda: run(model="gpt2"), TypeError, r"^model must be a decoder-only.*got str$"),
    (lambda: run(model=GPT.blocks[0]), TypeError, r"^model must be a decoder-only"),
    # --- new_decode_cache and DecodeCache ----------------------------------------------
    (
        lambda: new_decode_cache(nn.Linear(2, 2), 2, 4),
        TypeError,
        r"^model must be a decoder-only.*got Linear$",
    ),
    (
        lambda: new_decode_cache("gpt2", 2, 4),
        TypeError,
        r"^model must be a decoder-only",
    ),
    (
        lambda: new_decode_cache(GPT.blocks, 2, 4),
        TypeError,
        r"^model must be a decoder-only.*ModuleList",
    ),
    (lambda: new_decode_cache(GPT, 0, 4), ValueError, r"^batch must be >= 1, got 0$"),
    (
        lambda: new_decode_cache(GPT, True, 4),
        TypeError,
        r"^batch must be an int, got bool",
    ),
    (lambda: new_decode_cache(GPT, 2, 2.0), TypeError, r"^capacity must be an int"),
    (lambda: new_decode_cache(GPT, 2, 0), ValueError, r"^capacity must be >= 1"),
    (lambda: new_decode_cache(GPT, 2, "8"), TypeError, r"^capacity must be an int"),
    (
        lambda: DecodeCache(None),
        TypeError,
        r"^layers must be a non-empty list of KVCache.*NoneType$",
    ),
    (
        lambda: DecodeCache(KVCache(2, 2, 10, 8)),
        TypeError,
        r"^layers must be a non-empty list of KVCache.*got KVCache$",
    ),
    (lambda: DecodeCache([]), TypeError, r"^layers must be a non-empty list"),
    (
        lambda: DecodeCache(cache()),
        TypeError,
        r"^layers must be a non-empty list.*DecodeCache$",
    ),
    (
        lambda: DecodeCache([KVCache(2, 2, 10, 8), "cache"]),
        TypeError,
        r"^layers must be a non-empty list",
    ),
    (
        lambda: DecodeCache([KVCache(2, 2, 10, 8), KVCache(3, 2, 10, 8)]),
        ValueError,
        r"^the layers' caches must share batch, capacity and device$",
    ),
    (lambda: cache().reorder([0, 1]), ValueError, r"^rows must be torch\.long"),
    (
        lambda: cache().reorder(torch.tensor([0.0, 1.0])),
        ValueError,
        r"^rows must be torch\.long \[batch=2\]",
    ),
    (
        lambda: cache().reorder(torch.tensor([0, 1, 1])),
        ValueError,
        r"^rows must be torch\.long \[batch=2\]",
    ),
    (lambda: cache().advance(0), ValueError, r"^t_new must be >= 1"),
    (lambda: cache().advance(True), TypeError, r"^t_new must be an int"),
    (lambda: cache().advance(11), ValueError, r"needs capacity >= 11"),
    (
        lambda: cache().advance(2, torch.ones(2, 2, dtype=torch.long)),
        TypeError,
        r"^valid must be a bool tensor",
    ),
    # --- beam_search --------------------------------------------------------------------
    (
        lambda: beam(logits=LOGITS[0]),
        ValueError,
        r"^logits must be \[N, V\] \(one row per beam\), got \(16,\)$",
    ),
    (
        lambda: beam(logits=LOGITS[None]),
        ValueError,
        r"^logits must be \[N, V\].*got \(1, 4, 16\)$",
    ),
    (
        lambda: beam(logits=LOGITS.long()),
        TypeError,
        r"^logits must be logits \[N, V\] of a floating dtype, got torch\.int64$",
    ),
    (
        lambda: beam(logits=LOGITS.argmax(-1)),
        TypeError,
        r"^logits must be logits .*torch\.int64$",
    ),
    (
        lambda: beam(logits=LOGITS > 0),
        TypeError,
        r"^logits must be logits .*torch\.bool$",
    ),
    (
        lambda: beam(logits=LOGITS.tolist()),
        TypeError,
        r"^logits must be logits .*list$",
    ),
    (lambda: beam(logits=None), TypeError, r"^logits must be logits .*NoneType$"),
    (lambda: beam(beams=0), ValueError, r"^beams must be >= 1, got 0$"),
    (lambda: beam(beams=-2), ValueError, r"^beams must be >= 1, got -2$"),
    (lambda: beam(beams=True), TypeError, r"^beams must be an int, got bool$"),
    (lambda: beam(beams=False), TypeError, r"^beams must be an int, got bool$"),
    (lambda: beam(beams=2.0), TypeError, r"^beams must be an int, got float$"),
    (lambda: beam(beams="2"), TypeError, r"^beams must be an int, got str$"),
    (
        lambda: beam(beams=3),
        ValueError,
        r"^logits must be \[B \* beams, V\].*for beams=3$",
    ),
    (
        lambda: beam(beams=4, logits=torch.zeros(4, 7)),
        ValueError,
        r"2 \* beams <= V.*for beams=4$",
    ),
    (lambda: beam(max_new_tokens=0), ValueError, r"^max_new_tokens must be >= 1"),
    (lambda: beam(max_new_tokens=True), TypeError, r"^max_new_tokens must be an int"),
    (lambda: beam(step=None), TypeError, r"^step must be a function, got NoneType$"),
    (lambda: beam(step=LOGITS), TypeError, r"^step must be a function, got Tensor$"),
    (lambda: beam(reorder=None), TypeError, r"^reorder must be a function"),
    (
        lambda: beam(reorder=KVCache(4, 1, 4, 2)),
        TypeError,
        r"^reorder must be a function, got KVCache$",
    ),
    (lambda: beam(penalty=1.0), TypeError, r"^penalty must be a function, got float$"),
    (
        lambda: beam(early_stopping="true"),
        ValueError,
        r"^early_stopping must be True, False or 'never', got 'true'$",
    ),
    (lambda: beam(early_stopping="False"), ValueError, r"^early_stopping must be"),
    (lambda: beam(early_stopping=None), ValueError, r"^early_stopping must be"),
    (lambda: beam(eos_id=True), TypeError, r"^eos_id must be an int, got bool$"),
    (lambda: beam(eos_id=V), ValueError, r"^eos_id must be < V=16"),
    (lambda: beam(fill=-1), ValueError, r"^fill must be >= 0"),
    (lambda: beam(fill=1.0), TypeError, r"^fill must be an int"),
    (
        lambda: beam(step=lambda t: torch.zeros(4, V - 1)),
        ValueError,
        r"^step\(tokens\) must be \[N, V\] = \[4, 16\] on cpu like the prefill's, "
        r"got \(4, 15\)",
    ),
    (
        lambda: beam(step=lambda t: torch.zeros(V)),
        ValueError,
        r"^step\(tokens\) must be \[N, V\]",
    ),
    (
        lambda: beam(step=lambda t: torch.zeros(2, V)),
        ValueError,
        r"^step\(tokens\) must be \[N, V\].*got \(2, 16\)",
    ),
    (
        lambda: beam(step=lambda t: torch.zeros(4, V, dtype=torch.long)),
        TypeError,
        r"^step\(tokens\) must be logits .*torch\.int64$",
    ),
    (lambda: beam(step=lambda t: t), TypeError, r"^step\(tokens\) must be logits"),
    (
        lambda: beam(step=lambda t: None),
        TypeError,
        r"^step\(tokens\) must be logits .*NoneType$",
    ),
    # --- beam_generate -------------------------------------------------------------------
    (lambda: bgen(beams=0), ValueError, r"^beams must be >= 1"),
    (lambda: bgen(beams=True), TypeError, r"^beams must be an int, got bool$"),
    (lambda: bgen(beams=2.0), TypeError, r"^beams must be an int, got float$"),
    (
        lambda: bgen(beams=9),
        ValueError,
        r"^beams=9 needs 2 \* beams <= the vocabulary size 16",
    ),
    (
        lambda: bgen(ids=IDS.float()),
        TypeError,
        r"^ids must hold token ids as torch\.long",
    ),
    (lambda: bgen(ids=IDS[0]), ValueError, r"^ids must have shape \[B, T\]"),
    (lambda: bgen(model=nn.Linear(2, 2)), TypeError, r"^model must be a decoder-only"),
    (lambda: bgen(early_stopping="yes"), ValueError, r"^early_stopping must be"),
    (lambda: bgen(length_penalty="1"), TypeError, r"^length_penalty must be a real"),
    (lambda: bgen(max_new_tokens=9), ValueError, r"context=12"),
    # --- chapters 1-6: helpers given an object of the wrong kind, float ids ---------------
    (
        lambda: gpt2_init_(nn.Linear(2, 2)),
        TypeError,
        r"^model must be a GPTLanguageModel \(gpt2_model\), got Linear$",
    ),
    (lambda: gpt2_init_(LLAMA), TypeError, r"^model must be a GPTLanguageModel"),
    (
        lambda: gpt2_init_(None),
        TypeError,
        r"^model must be a GPTLanguageModel.*NoneType",
    ),
    (
        lambda: hf_activation(["gelu"]),
        TypeError,
        r"^activation_function must be a str, one of .*got list$",
    ),
    (lambda: hf_activation(None), TypeError, r"^activation_function must be a str"),
    (
        lambda: hf_activation(torch.nn.functional.gelu),
        TypeError,
        r"^activation_function must be a str",
    ),
    (lambda: hf_activation("relu"), ValueError, r"^activation_function must be one of"),
    (
        lambda: train_period_lm(None),
        TypeError,
        r"^settings must be a dict of \['seed', .*got NoneType$",
    ),
    (lambda: train_period_lm([1, 2]), TypeError, r"^settings must be a dict.*list$"),
    (
        lambda: train_period_lm({"seed": 0}),
        ValueError,
        r"^settings has no \['vocab_size', 'period'",
    ),
    (
        lambda: period_windows([1.5, 2.7, 3.0], 3, 2),
        TypeError,
        r"^period must hold int token ids, got torch\.float32$",
    ),
    (
        lambda: period_windows([0, 1, 2.0], 3, 2),
        TypeError,
        r"^period must hold int token ids, got torch\.float32$",
    ),
    (
        lambda: period_windows([True, False], 3, 2),
        TypeError,
        r"^period must hold int token ids, got torch\.bool$",
    ),
    (
        lambda: period_windows(torch.tensor([0.0, 1.0]), 3, 2),
        TypeError,
        r"^period must hold int token ids",
    ),
]


@pytest.fixture(autouse=True)
def eval_mode():
    GPT.eval()
    LLAMA.eval()


@pytest.mark.parametrize(
    ("call", "error", "pattern"), ROWS, ids=[f"row{i}" for i in range(len(ROWS))]
)
def test_a_bad_call_is_refused_naming_the_argument(call, error, pattern):
    with pytest.raises(error, match=pattern) as caught:
        call()
    assert type(caught.value) is error  # not a subclass from deep inside torch


def test_there_are_at_least_90_rows():
    assert len(ROWS) >= 90


def snapshot(c: DecodeCache):
    return (
        c.next_pos,
        c.padded,
        c.valid.clone(),
        [(x.next_pos, x.owner, x.k.clone(), x.v.clone()) for x in c.layers],
    )


def same(a, b) -> bool:
    return (
        a[:2] == b[:2]
        and torch.equal(a[2], b[2])
        and all(
            p[:2] == q[:2] and torch.equal(p[2], q[2]) and torch.equal(p[3], q[3])
            for p, q in zip(a[3], b[3])
        )
    )


CACHE_CALLS = [
    (lambda m, c: cached_run(m, IDS.float(), c), TypeError, r"^ids must hold"),
    (lambda m, c: cached_run(m, IDS[:1], c), ValueError, r"^ids is \[B=1, T\]"),
    (lambda m, c: cached_run(m, IDS, c, last="no"), TypeError, r"^last must be a bool"),
    (
        lambda m, c: cached_run(m, IDS, c, valid=torch.ones(2, 4, dtype=torch.long)),
        TypeError,
        r"^valid must be a bool tensor",
    ),
    (
        lambda m, c: cached_run(m, IDS, c, valid=torch.ones(2, 3, dtype=torch.bool)),
        ValueError,
        r"^valid must be \[B=2, T=4\]",
    ),
    (
        lambda m, c: cached_run(m, torch.randint(0, V, (2, 9)), c),
        ValueError,
        r"needs capacity >= 11",
    ),
    (  # an id past the vocabulary: read only once the embedding has failed on it
        lambda m, c: cached_run(m, torch.tensor([[1, 2], [3, V]]), c),
        ValueError,
        rf"^ids\[1, 1\] = {V} is outside the vocabulary \[0, {V}\)",
    ),
    (
        lambda m, c: cached_run(m, torch.tensor([[1, -1], [3, 4]]), c),
        ValueError,
        r"^ids\[0, 1\] = -1 is outside the vocabulary",
    ),
    (lambda m, c: c.reorder(torch.tensor([0.0, 1.0])), ValueError, r"^rows must be"),
    (lambda m, c: c.advance(True), TypeError, r"^t_new must be an int"),
]


@pytest.mark.parametrize(("call", "error", "pattern"), CACHE_CALLS)
@pytest.mark.parametrize("model", [GPT, LLAMA], ids=["gpt2", "llama"])
def test_a_refused_call_leaves_a_filled_cache_as_it_was(model, call, error, pattern):
    c = new_decode_cache(model, 2, 10)
    with torch.no_grad():
        cached_run(model, IDS[:, :2], c, valid=torch.tensor([[False, True]] * 2))
    before = snapshot(c)
    with pytest.raises(error, match=pattern):
        call(model, c)
    assert same(before, snapshot(c))


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(choose=lambda x: x.argmax(-1).float()),
        dict(choose=lambda x: x.argmax(-1)[:1]),
        dict(return_logits="yes"),
        dict(choose=None),
    ],
)
def test_a_refused_generate_leaves_the_training_mode(kwargs):
    GPT.train()
    with pytest.raises((TypeError, ValueError), match=r"^(choose|return_logits)"):
        generate(GPT, IDS, 3, **kwargs)
    assert GPT.training
    GPT.eval()
    with pytest.raises((TypeError, ValueError), match=r"^(choose|return_logits)"):
        generate(GPT, IDS, 3, **kwargs)
    assert not GPT.training


def test_a_decoder_layer_names_the_masks_as_the_caller_passed_them():
    layer = decoder_layer_2017(16, 2, 32, dropout=0.0)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 4, 16)
    good_t, good_m = (
        torch.ones(2, 5, dtype=torch.bool),
        torch.ones(2, 4, dtype=torch.bool),
    )
    for kwargs, error, pattern in [
        (
            dict(memory_valid=torch.ones(2, 5, dtype=torch.bool)),
            ValueError,
            r"^memory_valid must be \[B=2, S=4\]",
        ),
        (
            dict(memory_valid=torch.ones(2, 4, dtype=torch.long)),
            TypeError,
            r"^memory_valid must be a bool tensor",
        ),
        (
            dict(target_valid=torch.ones(2, 4, dtype=torch.bool)),
            ValueError,
            r"^target_valid must be \[B=2, T_k=5\]",
        ),
        (
            dict(target_valid=torch.ones(2, 5)),
            TypeError,
            r"^target_valid must be a bool tensor",
        ),
    ]:
        with pytest.raises(error, match=pattern):
            layer(x, memory, **kwargs)
    assert layer(x, memory, target_valid=good_t, memory_valid=good_m).shape == x.shape
    model = EncoderDecoder(13, 16, 2, 32, 1, dropout=0.0, max_length=16).eval()
    with pytest.raises(ValueError, match=r"^source_valid must be \[B=2, S=4\]"):
        model.decode(x, memory, good_t, torch.ones(2, 5, dtype=torch.bool))
    assert model.decode(x, memory, good_t, good_m).shape == x.shape


# --- the valid edge cases keep working ----------------------------------------------------


@pytest.mark.parametrize("model", [GPT, LLAMA], ids=["gpt2", "llama"])
def test_edge_cases_work(model):
    with torch.no_grad():
        one = torch.randint(0, V, (1, 1))  # T = 1, batch 1
        assert generate(model, one, 1).shape == (1, 2)
        full = generate(model, IDS, CONTEXT - IDS.shape[1])  # prompt + new == context
        assert full.shape == (2, CONTEXT)
        assert torch.equal(
            full, model.generate(IDS, CONTEXT - IDS.shape[1])
        )  # uncached
        assert torch.equal(generate(model, IDS, 3, prefill_chunk=1), full[:, :7])
        out, logits = generate(model, IDS, 3, return_logits=True)
        assert torch.equal(out, full[:, :7]) and logits.shape == (2, 3, V)
        seqs, _ = beam_generate(model, IDS, 1, 3)  # one beam == greedy
        assert torch.equal(seqs, full[:, :7])
        c = new_decode_cache(model, 1, 1)
        assert cached_run(model, one, c, last=True).shape == (1, V)
        c = new_decode_cache(model, 2, CONTEXT)  # cached == uncached, step by step
        steps = [cached_run(model, IDS, c)] + [
            cached_run(model, full[:, t : t + 1], c) for t in range(4, CONTEXT)
        ]
        torch.testing.assert_close(torch.cat(steps, dim=1), model(full))


def test_beam_search_over_a_hand_made_step_still_runs():
    best = beam(step=lambda t: LOGITS)
    assert best.tokens.shape[0] == 2
    assert beam(beams=1, logits=LOGITS).tokens.shape[0] == 4


def test_period_windows_still_takes_int_ids():
    assert period_windows([0, 1, 2], 4, 3).shape == (9, 4)
    assert period_windows((0, 1, 2), 4, 3).dtype == torch.long
