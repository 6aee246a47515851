"""What one decoding step costs, three ways: a preallocated KV cache, a cache grown by
`torch.cat`, and no cache at all (chapter 8).

    python -m literate.decode_cost            # the timings, one intra-op thread
    python -m literate.decode_cost --quick    # fewer rounds and positions, a smoke run

Two kinds of measurement live here, kept apart on purpose:

* **Counts** (deterministic, the same on every machine and every run): `step_traffic`
  runs the real decoding code under a counting dispatch mode (`WriteCounter`, which sees
  every aten op and adds up the bytes each one writes) and forward hooks on every
  layer's `k_proj` (the token rows projected). `kv_bytes_facts` compares the bytes per
  token of `kv_cache_bytes_per_token` with the `.nbytes` of live caches. The figure
  `kv-cache-step-cost` and the tests use these.
* **Timings** (wall-clock, noisy, printed, never asserted): `step_times` and
  `generate_speed`, run by `main`. Speed is measured here and nowhere else: a timing
  test on a shared 2-core machine would fail at random.

The `torch.cat` baseline is `ConcatCache`, a `KVCache` whose `write` grows its two
tensors by `torch.cat` instead of writing into preallocated buffers; everything else
(the layers, `cached_run`, `DecodeCache`) is the same code, so the difference measured
is the cache's storage strategy alone. "No cache" is chapter 5's step: the whole prefix
through the model (`model.run(ids)[:, -1]`), every row projected again.

Positions: "the step at position t" is the step whose attention reads t keys, the new
token being the t-th: the cache held t - 1 tokens before it. So at t the preallocated
cache writes one row per layer, the concatenating one writes t rows (the t - 1 old
ones copied and the new one), and the step without a cache projects t rows.

Shapes: B batch, H_kv stored heads, T tokens, d_head head width, L layers.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

import torch
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from literate.cache import DecodeCache, KVCache
from literate.checks import float_dtype, non_negative_int, positive_int
from literate.decoding import cached_run, generate, new_decode_cache
from literate.llama import LlamaLanguageModel, llama_model
from literate.models import GPTLanguageModel, gpt2_model
from literate.params import kv_cache_bytes_per_token

__all__ = [
    "TINY_LLAMA",
    "TINY_GPT2",
    "tiny_llama",
    "tiny_gpt2",
    "ConcatCache",
    "concat_decode_cache",
    "STRATEGIES",
    "TRAFFIC_POSITIONS",
    "WriteCounter",
    "StepTraffic",
    "step_traffic",
    "kv_bytes_facts",
    "TIMING_POSITIONS",
    "step_times",
    "generate_speed",
    "step_breakdown",
    "main",
]

# The tiny models: d_head = 128 / 4 = 32; the Llama has 2 key/value heads (GQA, G = 2).
TINY_LLAMA = {"vocab_size": 256, "context": 4096, "d_model": 128, "n_heads": 4,
              "n_kv_heads": 2, "n_layers": 2, "d_ff": 344}
TINY_GPT2 = {"vocab_size": 256, "context": 1024, "d_model": 128, "n_heads": 4,
             "n_layers": 2}
SEED = 0


def tiny_llama(n_kv_heads: int = TINY_LLAMA["n_kv_heads"], *, seed: int = SEED,
               dtype: torch.dtype = torch.float32) -> LlamaLanguageModel:
    """The tiny Llama of TINY_LLAMA (with `n_kv_heads` key/value heads), in eval mode,
    its weights from `seed` (the global generator is left as it was)."""
    settings = TINY_LLAMA | {"n_kv_heads": positive_int("n_kv_heads", n_kv_heads)}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = llama_model(**settings)
    return model.to(float_dtype("dtype", dtype)).eval()


def tiny_gpt2(*, seed: int = SEED) -> GPTLanguageModel:
    """The tiny GPT-2 of TINY_GPT2, float32, in eval mode (no dropout)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = gpt2_model(**TINY_GPT2, dropout=0.0)
    return model.eval()


# ---------------------------------------------------------------------------------------
# The baseline: a cache that grows by torch.cat


# --8<-- [start:concat_cache]
class ConcatCache(KVCache):
    """The cache people write first: keys and values [B, H_kv, T, d_head] grown by
    `torch.cat` at every step. A KVCache in every other respect (the same checks, the
    same views returned), so the layers take it unchanged; `capacity` is only a limit
    here, nothing is allocated ahead. Each append copies every stored row into a new
    tensor: step t writes t rows, a whole decode of T tokens T (T + 1) / 2."""

    def __init__(self, batch: int, n_kv_heads: int, capacity: int, d_head: int, *,
                 dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None) -> None:
        shape = (positive_int("batch", batch), positive_int("n_kv_heads", n_kv_heads),
                 0, positive_int("d_head", d_head))  # nothing stored yet
        self.k = torch.zeros(shape, dtype=float_dtype("dtype", dtype), device=device)
        self.v = torch.zeros_like(self.k)
        self.batch, self.n_kv_heads, self.d_head = batch, n_kv_heads, d_head
        self.capacity = positive_int("capacity", capacity)
        self.dtype, self.device = dtype, self.k.device
        self.next_pos, self.owner = 0, None

    def write(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """Store keys and values [B, H_kv, T, d_head] by concatenation; return all.
        (`append`, inherited, checks and then calls this.)"""
        self.k = torch.cat((self.k, k_new), dim=2)  # a new tensor: the prefix copied
        self.v = torch.cat((self.v, v_new), dim=2)
        self.next_pos += k_new.shape[2]
        return self.k, self.v

    def truncate(self, length: int) -> None:
        if non_negative_int("length", length) > self.next_pos:
            raise ValueError(f"length must be <= next_pos={self.next_pos}, "
                             f"got {length}")
        self.k, self.v = self.k[:, :, :length], self.v[:, :, :length]
        self.next_pos = length

    def reset(self) -> None:
        self.truncate(0)
        self.owner = None
# --8<-- [end:concat_cache]


def concat_decode_cache(model: nn.Module, batch: int, capacity: int) -> DecodeCache:
    """`new_decode_cache` with a ConcatCache per layer."""
    return DecodeCache([
        ConcatCache(batch, b.attn.n_kv_heads, capacity, b.attn.d_head,
                    dtype=b.attn.k_proj.weight.dtype,
                    device=b.attn.k_proj.weight.device) for b in model.blocks])


STRATEGIES = ("preallocated", "cat", "none")
MAKE_CACHE: dict[str, Callable[[nn.Module, int, int], DecodeCache]] = {
    "preallocated": new_decode_cache, "cat": concat_decode_cache}


# ---------------------------------------------------------------------------------------
# Counting (deterministic)


def _written_bytes(func, args: tuple, kwargs: dict, out: object) -> int:
    """Bytes one aten op writes: its mutated arguments if it has any (copy_,
    index_put_, out=...), else its outputs that are new memory (a view, or an output
    in an input's storage such as `_unsafe_view`'s, writes nothing)."""
    schema = func._schema.arguments
    mutated = [i for i, arg in enumerate(schema)
               if arg.alias_info is not None and arg.alias_info.is_write]
    if mutated:
        values = [args[i] if i < len(args) else kwargs.get(schema[i].name)
                  for i in mutated]
        return sum(t.nbytes for t in tree_leaves(values) if isinstance(t, Tensor))
    inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs))
              if isinstance(t, Tensor)}
    return sum(t.nbytes for t in tree_leaves(out) if isinstance(t, Tensor)
               and t.untyped_storage().data_ptr() not in inputs)


class WriteCounter(TorchDispatchMode):
    """Counts the bytes every aten op run under it writes (`bytes`), and the ops
    (`ops`). Shapes decide both, so the counts are the same on every run."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0
        self.ops = 0

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """Never run under torch.compile: no dynamo guard around __torch_dispatch__
        (installing one imports torch._dynamo, a second or more on first use)."""
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.bytes += _written_bytes(func, args, kwargs, out)
        self.ops += 1
        return out


def _count_appends(cache: DecodeCache) -> WriteCounter:
    """Wrap every layer cache's `write` (what the layer calls to store its keys and
    values; on the instance, the class is untouched) so that the bytes it writes are
    counted, whatever the storage does inside."""
    counter = WriteCounter()
    for layer in cache.layers:
        def write(k_new, v_new, _inner=layer.write):
            with counter:
                return _inner(k_new, v_new)
        layer.write = write
    return counter


class _RowHooks:
    """Forward hooks on every block's k_proj: the token rows each layer projects."""

    def __init__(self, model: nn.Module) -> None:
        self.rows: list[int] = []
        self.handles = [b.attn.k_proj.register_forward_hook(self._hook)
                        for b in model.blocks]

    def _hook(self, module: nn.Module, inputs: tuple, output: Tensor) -> None:
        self.rows.append(inputs[0].numel() // module.in_features)

    def take(self) -> int:
        """The rows one layer projected since the last take (every layer alike)."""
        rows, self.rows = self.rows, []
        if len(set(rows)) != 1:
            raise RuntimeError(f"the layers projected different rows: {rows}")
        return rows[0]

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


TRAFFIC_POSITIONS = tuple(2 ** i for i in range(10))  # 1, 2, 4, ..., 512


@dataclass(frozen=True)
class StepTraffic:
    """What one decoding step does at each position, for each strategy (read-only
    mappings keyed by STRATEGIES, each a tuple aligned with `positions`). Batch 1."""

    positions: tuple[int, ...]
    n_layers: int
    row_bytes: int  # bytes of one token's keys and values in one layer, 2 H_kv d_head 4
    cache_bytes: Mapping[str, tuple[int, ...]]  # into cache storage, all layers
    rows_projected: Mapping[str, tuple[int, ...]]  # token rows through each k_proj
    step_bytes: Mapping[str, tuple[int, ...]]  # written by every op of the step


def step_traffic(positions: Sequence[int] = TRAFFIC_POSITIONS) -> StepTraffic:
    """Run the tiny Llama's decoding step at each position three ways, and count, at
    that one step only: the bytes written into the cache's storage (every layer's
    `write`, under a WriteCounter), the token rows each layer's `k_proj` projected
    (forward hooks), and the bytes every op of the step wrote. The tokens before the
    step are prefilled in one call, outside the counting. float32, batch 1, no grad,
    one intra-op thread (restored after). Counted once per set of positions (the
    result is read-only), so the figure's two themes share one run."""
    return _traffic(tuple(positive_int("position", p) for p in positions))


@lru_cache(maxsize=4)
def _traffic(positions: tuple[int, ...]) -> StepTraffic:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _count_traffic(positions)
    finally:
        torch.set_num_threads(threads)


def _count_traffic(positions: tuple[int, ...]) -> StepTraffic:
    model = tiny_llama()
    ids = torch.randint(0, TINY_LLAMA["vocab_size"], (1, max(positions)),
                        generator=torch.Generator().manual_seed(SEED))
    attn = model.blocks[0].attn
    row_bytes = 2 * attn.n_kv_heads * attn.d_head * attn.k_proj.weight.element_size()
    cache_bytes = {s: [] for s in STRATEGIES}
    rows = {s: [] for s in STRATEGIES}
    step_bytes = {s: [] for s in STRATEGIES}
    hooks = _RowHooks(model)
    try:
        with torch.no_grad():
            model.run(ids)  # RoPE tables for every position: no step rebuilds them
            hooks.rows.clear()
            for t in positions:
                for strategy in ("preallocated", "cat"):
                    cache = MAKE_CACHE[strategy](model, 1, t)
                    if t > 1:  # the t - 1 tokens before, uncounted
                        cached_run(model, ids[:, :t - 1], cache, last=True)
                    hooks.rows.clear()  # the prefill's rows
                    appended = _count_appends(cache)
                    with WriteCounter() as everything:
                        cached_run(model, ids[:, t - 1:t], cache, last=True)
                    cache_bytes[strategy].append(appended.bytes)
                    rows[strategy].append(hooks.take())
                    step_bytes[strategy].append(everything.bytes)
                with WriteCounter() as everything:
                    model.run(ids[:, :t])[:, -1]  # chapter 5's step: no cache
                cache_bytes["none"].append(0)  # nothing is stored
                rows["none"].append(hooks.take())
                step_bytes["none"].append(everything.bytes)
    finally:
        hooks.remove()

    def frozen(counts: dict[str, list[int]]) -> Mapping[str, tuple[int, ...]]:
        return MappingProxyType({s: tuple(v) for s, v in counts.items()})

    return StepTraffic(positions=positions, n_layers=len(model.blocks),
                       row_bytes=row_bytes, cache_bytes=frozen(cache_bytes),
                       rows_projected=frozen(rows), step_bytes=frozen(step_bytes))


def kv_bytes_facts(*, batch: int = 2, capacity: int = 48,
                   prompt: int = 5) -> dict[str, dict[str, dict[str, int]]]:
    """Bytes per token by formula against the bytes of live caches.

    "per_token": for the tiny GPT-2 and the tiny Llama, float32: `formula` is
    kv_cache_bytes_per_token(L, H_kv, d_head, 4), `nbytes` the `.nbytes` of a
    DecodeCache(batch, capacity) after a prompt of `prompt` tokens went through it
    (preallocated: filling does not change it), `measured` = nbytes / (batch *
    capacity), and the shape numbers the formula took.
    "heads": the tiny Llama with 4 (MHA), 2 (GQA) and 1 (MQA) key/value heads: each
    one's n_kv_heads, cache nbytes and formula bytes per token.
    """
    batch, capacity = positive_int("batch", batch), positive_int("capacity", capacity)
    if not 1 <= positive_int("prompt", prompt) <= capacity:
        raise ValueError(f"prompt must be in [1, capacity={capacity}], got {prompt}")
    ids = torch.randint(0, 256, (batch, prompt),
                        generator=torch.Generator().manual_seed(SEED))

    def live(model: nn.Module) -> dict[str, int]:
        attn = model.blocks[0].attn
        cache = new_decode_cache(model, batch, capacity)
        with torch.no_grad():
            cached_run(model, ids, cache, last=True)
        value_bytes = attn.k_proj.weight.element_size()
        formula = kv_cache_bytes_per_token(len(model.blocks), attn.n_kv_heads,
                                           attn.d_head, value_bytes)
        if cache.nbytes % (batch * capacity):
            raise RuntimeError(f"{cache.nbytes} bytes do not split into "
                               f"{batch} x {capacity} tokens")
        return {"n_layers": len(model.blocks), "n_heads": attn.n_heads,
                "n_kv_heads": attn.n_kv_heads, "d_head": attn.d_head,
                "bytes_per_value": value_bytes, "batch": batch, "capacity": capacity,
                "filled": cache.next_pos, "formula": formula, "nbytes": cache.nbytes,
                "measured": cache.nbytes // (batch * capacity)}

    heads = TINY_LLAMA["n_heads"]
    return {
        "per_token": {"gpt2-tiny": live(tiny_gpt2()), "llama-tiny": live(tiny_llama())},
        "heads": {name: live(tiny_llama(h_kv)) for name, h_kv in
                  (("mha", heads), ("gqa", heads // 2), ("mqa", 1))},
    }


# ---------------------------------------------------------------------------------------
# Timing (wall-clock: printed, never asserted)

TIMING_POSITIONS = tuple(2 ** i for i in range(12))  # 1, 2, 4, ..., 2048


def _cached_pass(model: nn.Module, ids: Tensor, strategy: str) -> list[float]:
    """One decode from an empty cache, one token per call: seconds of each step."""
    cache = MAKE_CACHE[strategy](model, 1, ids.shape[1])
    times = []
    with torch.no_grad():
        for t in range(ids.shape[1]):
            start = time.perf_counter()
            cached_run(model, ids[:, t:t + 1], cache, last=True)
            times.append(time.perf_counter() - start)
    return times


def step_times(positions: Sequence[int] = TIMING_POSITIONS, *, rounds: int = 5,
               model: nn.Module | None = None,
               target_s: float = 0.05) -> dict[str, dict[int, float]]:
    """Median seconds of one decoding step at each position, per strategy.

    Cached: `rounds` whole decodes from 1 to max(positions), the preallocated and the
    cat cache interleaved (A B, B A, ...), every step timed; the step at t is the
    median over the rounds of the steps t - t // 16 .. t + t // 16 (a window of +-6%,
    one step below 16). No cache: `model.run(ids[:, :t])[:, -1]` timed on its own,
    the median over `rounds` rounds of the mean of n calls (n: about target_s)."""
    model = tiny_llama() if model is None else model
    top = max(positions)
    ids = torch.randint(0, model.vocab_size, (1, top),
                        generator=torch.Generator().manual_seed(SEED + 1))
    with torch.no_grad():
        model.run(ids)  # RoPE tables at full length: no step rebuilds them
        for strategy in ("preallocated", "cat"):  # warm-up
            _cached_pass(model, ids[:, :64], strategy)
    passes: dict[str, list[list[float]]] = {"preallocated": [], "cat": []}
    for r in range(rounds):
        order = ("preallocated", "cat") if r % 2 == 0 else ("cat", "preallocated")
        for strategy in order:
            passes[strategy].append(_cached_pass(model, ids, strategy))
    result: dict[str, dict[int, float]] = {s: {} for s in STRATEGIES}
    for strategy, runs in passes.items():
        for t in positions:
            h = t // 16
            window = range(max(1, t - h), min(top, t + h) + 1)  # positions, 1-based
            result[strategy][t] = statistics.median(
                run[i - 1] for run in runs for i in window)
    with torch.no_grad():
        for t in positions:
            prefix = ids[:, :t]

            def step(prefix: Tensor = prefix) -> Tensor:
                return model.run(prefix)[:, -1]

            step()
            start = time.perf_counter()
            step()
            n = max(1, int(target_s / max(time.perf_counter() - start, 1e-6)))
            samples = []
            for _ in range(rounds):
                start = time.perf_counter()
                for _ in range(n):
                    step()
                samples.append((time.perf_counter() - start) / n)
            result["none"][t] = statistics.median(samples)
    return result


def _hf_twin(model_settings: dict[str, int]):
    """A LlamaForCausalLM of the tiny Llama's shape, and ours with its weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from literate.llama import llama_from_hf_config, load_hf_llama

    config = LlamaConfig(
        vocab_size=model_settings["vocab_size"], hidden_size=model_settings["d_model"],
        num_attention_heads=model_settings["n_heads"],
        num_key_value_heads=model_settings["n_kv_heads"],
        intermediate_size=model_settings["d_ff"],
        num_hidden_layers=model_settings["n_layers"],
        max_position_embeddings=model_settings["context"], rms_norm_eps=1e-5,
        tie_word_embeddings=False, bos_token_id=None, eos_token_id=None,
        pad_token_id=None, attn_implementation="sdpa")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        theirs = LlamaForCausalLM(config).eval()
    ours = load_hf_llama(llama_from_hf_config(config).eval(), theirs.state_dict(),
                         config)
    return ours, theirs


def generate_speed(*, prompt: int = 32, new_tokens: int = 256, rounds: int = 7,
                   n_layers: int = TINY_LLAMA["n_layers"]) -> dict[str, float]:
    """Greedy decoding of `new_tokens` tokens after a `prompt`-token prompt, batch 1:
    our cached `generate` against Hugging Face's `generate(do_sample=False)` (its
    default DynamicCache) on a LlamaForCausalLM with the same weights, timed
    interleaved (`literate.bench.measure`, one call per round). Returns seconds per
    call, tokens per second, the ratio of speeds (ours / theirs) and whether the
    tokens are equal (they must be: `main` raises if not)."""
    from literate.bench import measure

    ours, theirs = _hf_twin(TINY_LLAMA | {"n_layers": n_layers})
    ids = torch.randint(0, TINY_LLAMA["vocab_size"], (1, prompt),
                        generator=torch.Generator().manual_seed(SEED + 2))
    mask = torch.ones_like(ids)

    def run_ours() -> Tensor:
        return generate(ours, ids, new_tokens)

    def run_theirs() -> Tensor:
        with torch.no_grad():
            return theirs.generate(ids, attention_mask=mask, do_sample=False,
                                   max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                   pad_token_id=0)

    a, b = run_ours(), run_theirs()
    same = a.shape == b.shape == (1, prompt + new_tokens) and torch.equal(a, b)
    m = measure(run_ours, run_theirs, rounds=rounds, target_s=0.0)
    return {"ours_s": m["ours_s"], "theirs_s": m["theirs_s"],
            "ours_tok_s": new_tokens / m["ours_s"],
            "theirs_tok_s": new_tokens / m["theirs_s"],
            "speedup": m["theirs_s"] / m["ours_s"],
            "speedup_min": 1 / m["max"], "speedup_max": 1 / m["min"],
            "tokens_equal": bool(same), "new_tokens": new_tokens, "prompt": prompt}


def _micro(fn: Callable[[], object], *, n: int = 300, rounds: int = 7) -> float:
    """Median seconds of one call of `fn` over `rounds` rounds of n calls."""
    for _ in range(20):  # warm: the first calls allocate and fill caches
        fn()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - start) / n)
    return statistics.median(samples)


def step_breakdown(position: int = 512, *, rounds: int = 7) -> dict[str, float]:
    """Where one decoding step's time goes, ours against Hugging Face's, at `position`
    keys: seconds of each piece, timed alone (a block call is undone by moving the
    cache's next_pos back, an HF layer's by DynamicCache.crop(-1)), and the aten ops
    of one whole step (counted, not timed)."""

    from literate.heads import check_call, fused_attention

    ours, theirs = _hf_twin(TINY_LLAMA)
    t = positive_int("position", position)
    ids = torch.randint(0, TINY_LLAMA["vocab_size"], (1, t),
                        generator=torch.Generator().manual_seed(SEED + 3))
    out: dict[str, float] = {}
    with torch.no_grad():
        ours.run(ids)  # RoPE tables for every position
        cache = new_decode_cache(ours, 1, t)
        cached_run(ours, ids[:, :t - 1], cache, last=True)
        with WriteCounter() as ours_ops:
            cached_run(ours, ids[:, t - 1:], cache, last=True)
        block, layer_cache = ours.blocks[0], cache.layers[0]
        attn, x = block.attn, torch.randn(1, 1, TINY_LLAMA["d_model"])
        layer_cache.next_pos = t - 1

        def our_block():
            block(x, cache=layer_cache, empty_row="zero")
            layer_cache.next_pos -= 1

        q = attn.queries(x)
        k, v = layer_cache.k[:, :, :t], layer_cache.v[:, :, :t]
        k_new, v_new = attn.keys_values(x)
        cos, _ = attn.rope.tables(t)
        c, s = cos[t - 1:t], attn.rope.signed_sin[t - 1:t]
        half = q.shape[-1] // 2

        def write():
            layer_cache.write(k_new, v_new)
            layer_cache.next_pos -= 1

        pieces = {
            "our block (attention + FFN), 1 token": our_block,
            "  check_call (metadata checks)": lambda: check_call(
                attn, x, None, causal=True, key_valid=None, cache=layer_cache,
                start_pos=None, positions=None, empty_row="zero",
                return_weights=False),
            "  q and k projections (queries, keys_values)": lambda: (
                attn.queries(x), attn.keys_values(x)),
            "  RotaryEmbedding.pair on q and k": lambda: attn.rope.pair(
                q, k_new, offset=t - 1),
            "  its arithmetic alone (tables sliced)": lambda: (
                q * c + q.roll(half, dims=-1) * s, k_new * c + k_new.roll(half, -1) * s),
            "  KVCache.write, 1 token": write,
            "  fused_attention (one query: no mask)": lambda: fused_attention(q, k, v),
            "  RMSNorm, 1 token": lambda: block.norm1(x),
            "  FFN (SwiGLU), 1 token": lambda: block.ffn(x),
        }
        for name, fn in pieces.items():
            out[name] = _micro(fn, rounds=rounds)
        hf_cache = theirs(ids[:, :t - 1], use_cache=True).cache
        with WriteCounter() as hf_ops:
            theirs(ids[:, t - 1:], cache=hf_cache, use_cache=True, logits_to_keep=1)
        hf_cache.crop(-1)
        layer = theirs.model.layers[0]
        where = torch.tensor([[t - 1]])
        angles = theirs.model.rotary_emb(x, where)

        def hf_layer():
            layer(x, position_embeddings=angles, cache=hf_cache, attention_mask=None,
                  position_ids=where, use_cache=True)
            hf_cache.crop(-1)

        out["HF LlamaDecoderLayer, 1 token (DynamicCache)"] = _micro(hf_layer,
                                                                     rounds=rounds)
    out["aten ops per step: ours"] = ours_ops.ops
    out["aten ops per step: HF forward"] = hf_ops.ops
    return out


# ---------------------------------------------------------------------------------------
# The report


def _print_facts() -> None:
    facts = kv_bytes_facts()
    print("KV-cache bytes per token (float32): formula vs .nbytes of a live "
          "DecodeCache")
    for name, f in facts["per_token"].items():
        ok = "==" if f["formula"] == f["measured"] else "!="
        print(f"  {name:<11} 2 x L={f['n_layers']} x H_kv={f['n_kv_heads']} x "
              f"d_head={f['d_head']} x {f['bytes_per_value']} B = {f['formula']} B "
              f"{ok} {f['nbytes']} B / ({f['batch']} x {f['capacity']} tokens)"
              f" = {f['measured']} B")
        if f["formula"] != f["measured"]:  # an explicit raise: `assert` vanishes under -O
            raise RuntimeError(f"{name}: formula {f['formula']} B != {f['measured']} B")
    mha = facts["heads"]["mha"]["nbytes"]
    print(f"  tiny Llama, batch {mha and facts['heads']['mha']['batch']}, capacity "
          f"{facts['heads']['mha']['capacity']}:")
    for name, f in facts["heads"].items():
        print(f"    {name.upper():<4} H_kv={f['n_kv_heads']}: {f['nbytes']:>7} B "
              f"({f['measured']} B/token), MHA / this = {mha / f['nbytes']:g}")


def _print_traffic() -> None:
    started = time.perf_counter()
    traffic = step_traffic()
    took = time.perf_counter() - started
    print(f"Per-step traffic, counted (deterministic; {took:.2f} s): bytes written "
          "into the cache / token rows through each k_proj / bytes written by every "
          "op")
    print(f"  {'t':>5}  {'prealloc':>24}  {'cat':>24}  {'no cache':>24}")
    for i, t in enumerate(traffic.positions):
        cells = [f"{traffic.cache_bytes[s][i]:>8} {traffic.rows_projected[s][i]:>4} "
                 f"{traffic.step_bytes[s][i]:>10}" for s in STRATEGIES]
        print(f"  {t:>5}  " + "  ".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m literate.decode_cost",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true",
                        help="positions up to 256, 2 rounds, 64 new tokens")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rounds = 2 if args.quick else args.rounds
    positions = TIMING_POSITIONS[:9] if args.quick else TIMING_POSITIONS
    s = TINY_LLAMA
    print(f"torch {torch.__version__}, {args.threads} thread(s), float32; tiny Llama: "
          f"vocab {s['vocab_size']}, d_model {s['d_model']}, {s['n_heads']} heads / "
          f"{s['n_kv_heads']} kv heads, {s['n_layers']} layers, d_ff {s['d_ff']}")
    print()
    _print_facts()
    print()
    _print_traffic()
    print()
    started = time.perf_counter()
    times = step_times(positions, rounds=rounds)
    print(f"Decode step time against position (median of {rounds} rounds; "
          f"{time.perf_counter() - started:.0f} s)")
    print(f"  {'t':>5}  {'prealloc us':>11}  {'cat us':>9}  {'no cache us':>11}")
    for t in positions:
        print(f"  {t:>5}  {times['preallocated'][t] * 1e6:11.0f}  "
              f"{times['cat'][t] * 1e6:9.0f}  {times['none'][t] * 1e6:11.0f}")
    a, b, top = 64, 1024 if 1024 in positions else max(positions), max(positions)
    pre = times["preallocated"]
    print(f"  preallocated step({b}) / step({a}) = {pre[b] / pre[a]:.2f}  "
          "(target <= 1.4)")
    print(f"  cat / preallocated at {top} = {times['cat'][top] / pre[top]:.2f}")
    print(f"  no cache / preallocated at {top} = {times['none'][top] / pre[top]:.1f}")
    print()
    breakdown = step_breakdown(rounds=3 if args.quick else 7)
    print("Where a step goes, at t = 512 (each piece timed alone, median):")
    for name, value in breakdown.items():
        if name.startswith("aten ops"):
            print(f"  {value:>8}     {name}")
        else:
            print(f"  {value * 1e6:8.1f} us  {name}")
    print()
    new_tokens = 64 if args.quick else 256
    for layers in (TINY_LLAMA["n_layers"], 4):
        g = generate_speed(new_tokens=new_tokens, rounds=3 if args.quick else 7,
                           n_layers=layers)
        if not g["tokens_equal"]:
            raise RuntimeError(f"{layers} layers: our greedy tokens differ from HF's")
        print(f"generate, {layers} layers, prompt {g['prompt']} + {g['new_tokens']} "
              f"new tokens, greedy, batch 1: ours {g['ours_tok_s']:.0f} tok/s, "
              f"HF {g['theirs_tok_s']:.0f} tok/s, ours / HF = {g['speedup']:.2f}x "
              f"(spread {g['speedup_min']:.2f}-{g['speedup_max']:.2f}"
              + ("; target >= 1.5" if layers == TINY_LLAMA["n_layers"] else "")
              + f"), tokens equal: {g['tokens_equal']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
