"""What one decoding step costs, three ways: a preallocated KV cache, a cache grown by
`torch.cat`, and no cache at all (chapter 8).

    python -m literate.tools.decode_timing    # the counts, then the timings

Two kinds of measurement, kept apart: the counts live here, the timings in
`literate.tools.decode_timing`:

* **Counts** (deterministic, the same on every machine and every run): `step_traffic`
  runs the real decoding code under a counting dispatch mode (`WriteCounter`, which sees
  every aten op and adds up the bytes each one writes) and forward hooks on every
  layer's `k_proj` (the token rows projected). `kv_bytes_facts` compares the bytes per
  token of `kv_cache_bytes_per_token` with the `.nbytes` of live caches. The figure
  `kv-cache-step-cost` and the tests use these.
* **Timings** (wall-clock, noisy, printed, never asserted): `step_times` and
  `generate_speed`, in `literate.tools.decode_timing`, which prints them. A timing
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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

import torch
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from literate.decoding.generate import cached_run, new_decode_cache
from literate.models.gpt2 import GPTLanguageModel, gpt2_model
from literate.models.llama import LlamaLanguageModel, llama_model
from literate.numbers.params import kv_cache_bytes_per_token
from literate.parts.cache import DecodeCache, KVCache
from literate.parts.checks import float_dtype, non_negative_int, positive_int

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
    "SEED",
    "MAKE_CACHE",
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
