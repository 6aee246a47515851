"""Wall-clock timing on a shared machine: `measure` times two contenders interleaved
(the benchmarks, `literate.tools.bench`, and the decoding timings,
`literate.tools.decode_timing`); `time_decode_steps` times a decoding step of one
attention layer (chapter 10's latent attention, naive against absorbed). Speed is
measured and printed, never asserted in a test.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from literate.parts.checks import positive_int
from literate.parts.mla import MultiHeadLatentAttention

__all__ = [
    "time_calls",
    "measure",
    "time_decode_steps",
    "summary",
]


# --8<-- [start:time_decode_steps]
@torch.no_grad()
def time_decode_steps(layer: MultiHeadLatentAttention, context: int, *, batch: int = 1,
                      repeats: int = 7, seed: int = 0) -> dict[str, list[float]]:
    """Seconds of one decoding step of `layer` (one new token per row, `context` tokens
    already cached), naive and absorbed, interleaved (naive, absorbed, naive, ...) on
    the same cache, `repeats` times each after one untimed round. Returns
    {"naive": [...], "absorbed": [...]}: report medians and ranges, never one number
    (shared machines are noisy)."""
    context, batch = positive_int("context", context), positive_int("batch", batch)
    repeats = positive_int("repeats", repeats)
    w = layer.kv_a_proj_with_mqa.weight
    g = torch.Generator(device=w.device).manual_seed(seed)
    prompt = torch.randn(batch, context, layer.d_model, generator=g, dtype=w.dtype,
                         device=w.device)
    x = torch.randn(batch, 1, layer.d_model, generator=g, dtype=w.dtype,
                    device=w.device)
    cache = layer.new_cache(batch, context + 1)
    mode = layer.absorb
    times: dict[str, list[float]] = {"never": [], "always": []}
    try:
        layer.absorb = "never"
        layer(prompt, causal=True, cache=cache)  # the prefill, once
        for round_ in range(repeats + 1):  # round 0 warms up, untimed
            for name, seconds in times.items():
                layer.absorb = name
                begin = time.perf_counter()
                layer(x, causal=True, cache=cache)
                elapsed = time.perf_counter() - begin
                cache.truncate(context)
                if round_:
                    seconds.append(elapsed)
    finally:
        layer.absorb = mode
    return {"naive": times["never"], "absorbed": times["always"]}


def summary(seconds: list[float]) -> str:
    """'median (min-max) ms' of a list of seconds."""
    ms = [s * 1e3 for s in seconds]
    return f"{statistics.median(ms):.2f} ({min(ms):.2f}-{max(ms):.2f}) ms"
# --8<-- [end:time_decode_steps]


def time_calls(fn: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def measure(ours: Callable[[], object], theirs: Callable[[], object], *, rounds: int = 9,
            target_s: float = 0.15) -> dict[str, float]:
    """Interleaved timing: `rounds` rounds, each timing `n` calls of both, the order
    alternating. Returns the median ratio ours/theirs, its min and max, and the median
    seconds per call of each."""
    for _ in range(2):  # warm-up: allocator, lazy init, caches
        ours(), theirs()
    once = max(time_calls(ours, 1), time_calls(theirs, 1), 1e-6)
    n = max(1, int(target_s / once))
    ratios, t_ours, t_theirs = [], [], []
    for r in range(rounds):
        if r % 2 == 0:
            a, b = time_calls(ours, n), time_calls(theirs, n)
        else:
            b, a = time_calls(theirs, n), time_calls(ours, n)
        ratios.append(a / b)
        t_ours.append(a)
        t_theirs.append(b)
    return {"ratio": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "ours_s": statistics.median(t_ours), "theirs_s": statistics.median(t_theirs), "n": n}
