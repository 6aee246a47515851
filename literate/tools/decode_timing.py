"""What one decoding step costs in time: a preallocated KV cache, a cache grown by
`torch.cat`, and no cache at all (chapter 8); and our greedy `generate` against Hugging
Face's.

    python -m literate.tools.decode_timing            # the timings, one intra-op thread
    python -m literate.tools.decode_timing --quick    # fewer rounds and positions, a smoke run

The deterministic half (bytes written, rows projected, KV bytes per token) is counted in
`literate.numbers.decode_cost`, which the figure and the tests use; this half is
wall-clock, noisy, printed and never asserted: a timing test on a shared 2-core machine
would fail at random. The report prints the counts first, then the timings.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from literate.decoding.generate import cached_run, generate, new_decode_cache
from literate.numbers.decode_cost import (
    MAKE_CACHE,
    SEED,
    STRATEGIES,
    TINY_LLAMA,
    WriteCounter,
    kv_bytes_facts,
    step_traffic,
    tiny_llama,
)
from literate.parts.checks import positive_int

__all__ = [
    "TIMING_POSITIONS",
    "step_times",
    "generate_speed",
    "step_breakdown",
    "main",
]

# ---------------------------------------------------------------------------------------
# Timing (wall-clock: printed, never asserted)

TIMING_POSITIONS = tuple(2**i for i in range(12))  # 1, 2, 4, ..., 2048


def _cached_pass(model: nn.Module, ids: Tensor, strategy: str) -> list[float]:
    """One decode from an empty cache, one token per call: seconds of each step."""
    cache = MAKE_CACHE[strategy](model, 1, ids.shape[1])
    times = []
    with torch.no_grad():
        for t in range(ids.shape[1]):
            start = time.perf_counter()
            cached_run(model, ids[:, t : t + 1], cache, last=True)
            times.append(time.perf_counter() - start)
    return times


def step_times(
    positions: Sequence[int] = TIMING_POSITIONS,
    *,
    rounds: int = 5,
    model: nn.Module | None = None,
    target_s: float = 0.05,
) -> dict[str, dict[int, float]]:
    """Median seconds of one decoding step at each position, per strategy.

    Cached: `rounds` whole decodes from 1 to max(positions), the preallocated and the
    cat cache interleaved (A B, B A, ...), every step timed; the step at t is the
    median over the rounds of the steps t - t // 16 .. t + t // 16 (a window of +-6%,
    one step below 16). No cache: `model.run(ids[:, :t])[:, -1]` timed on its own,
    the median over `rounds` rounds of the mean of n calls (n: about target_s)."""
    model = tiny_llama() if model is None else model
    top = max(positions)
    ids = torch.randint(
        0, model.vocab_size, (1, top), generator=torch.Generator().manual_seed(SEED + 1)
    )
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
                run[i - 1] for run in runs for i in window
            )
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

    from literate.models.llama import llama_from_hf_config, load_hf_llama

    config = LlamaConfig(
        vocab_size=model_settings["vocab_size"],
        hidden_size=model_settings["d_model"],
        num_attention_heads=model_settings["n_heads"],
        num_key_value_heads=model_settings["n_kv_heads"],
        intermediate_size=model_settings["d_ff"],
        num_hidden_layers=model_settings["n_layers"],
        max_position_embeddings=model_settings["context"],
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        attn_implementation="sdpa",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        theirs = LlamaForCausalLM(config).eval()
    ours = load_hf_llama(
        llama_from_hf_config(config).eval(), theirs.state_dict(), config
    )
    return ours, theirs


def generate_speed(
    *,
    prompt: int = 32,
    new_tokens: int = 256,
    rounds: int = 7,
    n_layers: int = TINY_LLAMA["n_layers"],
) -> dict[str, float]:
    """Greedy decoding of `new_tokens` tokens after a `prompt`-token prompt, batch 1:
    our cached `generate` against Hugging Face's `generate(do_sample=False)` (its
    default DynamicCache) on a LlamaForCausalLM with the same weights, timed
    interleaved (`literate.tools.timing.measure`, one call per round). Returns seconds per
    call, tokens per second, the ratio of speeds (ours / theirs) and whether the
    tokens are equal (they must be: `main` raises if not)."""
    from literate.tools.timing import measure

    ours, theirs = _hf_twin(TINY_LLAMA | {"n_layers": n_layers})
    ids = torch.randint(
        0,
        TINY_LLAMA["vocab_size"],
        (1, prompt),
        generator=torch.Generator().manual_seed(SEED + 2),
    )
    mask = torch.ones_like(ids)

    def run_ours() -> Tensor:
        return generate(ours, ids, new_tokens)

    def run_theirs() -> Tensor:
        with torch.no_grad():
            return theirs.generate(
                ids,
                attention_mask=mask,
                do_sample=False,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                pad_token_id=0,
            )

    a, b = run_ours(), run_theirs()
    same = a.shape == b.shape == (1, prompt + new_tokens) and torch.equal(a, b)
    m = measure(run_ours, run_theirs, rounds=rounds, target_s=0.0)
    return {
        "ours_s": m["ours_s"],
        "theirs_s": m["theirs_s"],
        "ours_tok_s": new_tokens / m["ours_s"],
        "theirs_tok_s": new_tokens / m["theirs_s"],
        "speedup": m["theirs_s"] / m["ours_s"],
        "speedup_min": 1 / m["max"],
        "speedup_max": 1 / m["min"],
        "tokens_equal": bool(same),
        "new_tokens": new_tokens,
        "prompt": prompt,
    }


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

    from literate.parts.multi_head import check_call, fused_attention

    ours, theirs = _hf_twin(TINY_LLAMA)
    t = positive_int("position", position)
    ids = torch.randint(
        0,
        TINY_LLAMA["vocab_size"],
        (1, t),
        generator=torch.Generator().manual_seed(SEED + 3),
    )
    out: dict[str, float] = {}
    with torch.no_grad():
        ours.run(ids)  # RoPE tables for every position
        cache = new_decode_cache(ours, 1, t)
        cached_run(ours, ids[:, : t - 1], cache, last=True)
        with WriteCounter() as ours_ops:
            cached_run(ours, ids[:, t - 1 :], cache, last=True)
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
        c, s = cos[t - 1 : t], attn.rope.signed_sin[t - 1 : t]
        half = q.shape[-1] // 2

        def write():
            layer_cache.write(k_new, v_new)
            layer_cache.next_pos -= 1

        pieces = {
            "our block (attention + FFN), 1 token": our_block,
            "  check_call (metadata checks)": lambda: check_call(
                attn,
                x,
                None,
                causal=True,
                key_valid=None,
                cache=layer_cache,
                start_pos=None,
                positions=None,
                empty_row="zero",
                return_weights=False,
            ),
            "  q and k projections (queries, keys_values)": lambda: (
                attn.queries(x),
                attn.keys_values(x),
            ),
            "  RotaryEmbedding.pair on q and k": lambda: attn.rope.pair(
                q, k_new, offset=t - 1
            ),
            "  its arithmetic alone (tables sliced)": lambda: (
                q * c + q.roll(half, dims=-1) * s,
                k_new * c + k_new.roll(half, -1) * s,
            ),
            "  KVCache.write, 1 token": write,
            "  fused_attention (one query: no mask)": lambda: fused_attention(q, k, v),
            "  RMSNorm, 1 token": lambda: block.attn_norm(x),
            "  FFN (SwiGLU), 1 token": lambda: block.ffn(x),
        }
        for name, fn in pieces.items():
            out[name] = _micro(fn, rounds=rounds)
        hf_cache = theirs(ids[:, : t - 1], use_cache=True).cache
        with WriteCounter() as hf_ops:
            theirs(ids[:, t - 1 :], cache=hf_cache, use_cache=True, logits_to_keep=1)
        hf_cache.crop(-1)
        layer = theirs.model.layers[0]
        where = torch.tensor([[t - 1]])
        angles = theirs.model.rotary_emb(x, where)

        def hf_layer():
            layer(
                x,
                position_embeddings=angles,
                cache=hf_cache,
                attention_mask=None,
                position_ids=where,
                use_cache=True,
            )
            hf_cache.crop(-1)

        out["HF LlamaDecoderLayer, 1 token (DynamicCache)"] = _micro(
            hf_layer, rounds=rounds
        )
    out["aten ops per step: ours"] = ours_ops.ops
    out["aten ops per step: HF forward"] = hf_ops.ops
    return out


# ---------------------------------------------------------------------------------------
# The report


def _print_facts() -> None:
    facts = kv_bytes_facts()
    print(
        "KV-cache bytes per token (float32): formula vs .nbytes of a live DecodeCache"
    )
    for name, f in facts["per_token"].items():
        ok = "==" if f["formula"] == f["measured"] else "!="
        print(
            f"  {name:<11} 2 x L={f['n_layers']} x H_kv={f['n_kv_heads']} x "
            f"d_head={f['d_head']} x {f['bytes_per_value']} B = {f['formula']} B "
            f"{ok} {f['nbytes']} B / ({f['batch']} x {f['capacity']} tokens)"
            f" = {f['measured']} B"
        )
        if (
            f["formula"] != f["measured"]
        ):  # an explicit raise: `assert` vanishes under -O
            raise RuntimeError(f"{name}: formula {f['formula']} B != {f['measured']} B")
    mha = facts["heads"]["mha"]["nbytes"]
    print(
        f"  tiny Llama, batch {mha and facts['heads']['mha']['batch']}, capacity "
        f"{facts['heads']['mha']['capacity']}:"
    )
    for name, f in facts["heads"].items():
        print(
            f"    {name.upper():<4} H_kv={f['n_kv_heads']}: {f['nbytes']:>7} B "
            f"({f['measured']} B/token), MHA / this = {mha / f['nbytes']:g}"
        )


def _print_traffic() -> None:
    started = time.perf_counter()
    traffic = step_traffic()
    took = time.perf_counter() - started
    print(
        f"Per-step traffic, counted (deterministic; {took:.2f} s): bytes written "
        "into the cache / token rows through each k_proj / bytes written by every "
        "op"
    )
    print(f"  {'t':>5}  {'prealloc':>24}  {'cat':>24}  {'no cache':>24}")
    for i, t in enumerate(traffic.positions):
        cells = [
            f"{traffic.cache_bytes[s][i]:>8} {traffic.rows_projected[s][i]:>4} "
            f"{traffic.step_bytes[s][i]:>10}"
            for s in STRATEGIES
        ]
        print(f"  {t:>5}  " + "  ".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m literate.tools.decode_timing",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="positions up to 256, 2 rounds, 64 new tokens",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rounds = 2 if args.quick else args.rounds
    positions = TIMING_POSITIONS[:9] if args.quick else TIMING_POSITIONS
    s = TINY_LLAMA
    print(
        f"torch {torch.__version__}, {args.threads} thread(s), float32; tiny Llama: "
        f"vocab {s['vocab_size']}, d_model {s['d_model']}, {s['n_heads']} heads / "
        f"{s['n_kv_heads']} kv heads, {s['n_layers']} layers, d_ff {s['d_ff']}"
    )
    print()
    _print_facts()
    print()
    _print_traffic()
    print()
    started = time.perf_counter()
    times = step_times(positions, rounds=rounds)
    print(
        f"Decode step time against position (median of {rounds} rounds; "
        f"{time.perf_counter() - started:.0f} s)"
    )
    print(f"  {'t':>5}  {'prealloc us':>11}  {'cat us':>9}  {'no cache us':>11}")
    for t in positions:
        print(
            f"  {t:>5}  {times['preallocated'][t] * 1e6:11.0f}  "
            f"{times['cat'][t] * 1e6:9.0f}  {times['none'][t] * 1e6:11.0f}"
        )
    a, b, top = 64, 1024 if 1024 in positions else max(positions), max(positions)
    pre = times["preallocated"]
    print(
        f"  preallocated step({b}) / step({a}) = {pre[b] / pre[a]:.2f}  (target <= 1.4)"
    )
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
        g = generate_speed(
            new_tokens=new_tokens, rounds=3 if args.quick else 7, n_layers=layers
        )
        if not g["tokens_equal"]:
            raise RuntimeError(f"{layers} layers: our greedy tokens differ from HF's")
        print(
            f"generate, {layers} layers, prompt {g['prompt']} + {g['new_tokens']} "
            f"new tokens, greedy, batch 1: ours {g['ours_tok_s']:.0f} tok/s, "
            f"HF {g['theirs_tok_s']:.0f} tok/s, ours / HF = {g['speedup']:.2f}x "
            f"(spread {g['speedup_min']:.2f}-{g['speedup_max']:.2f}"
            + ("; target >= 1.5" if layers == TINY_LLAMA["n_layers"] else "")
            + f"), tokens equal: {g['tokens_equal']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
