"""How fast our layers run next to the production layers they are proven equal to.

    python -m literate.tools.bench            # every row, one intra-op thread
    python -m literate.tools.bench --quick    # fewer rounds, for a smoke run
    python -m literate.tools.bench --only gpt2 --threads 2
    python -m literate.tools.bench --json literate/data/bench.json --pin   # what `make bench` runs

Each row builds our layer and the production layer with the same weights, checks that they
compute the same thing (the largest difference is printed), and then times them
**interleaved** in one run: round after round, each contender runs `n` calls, the order
alternating (A B, B A, ...), so that a noisy, shared machine slows both alike. A round's
ratio is ours / theirs; the table gives the median ratio over the rounds and its spread
(min-max). Below 1.0 ours is faster. Times are wall-clock medians per call.

Speed is measured here, never asserted in tests: a timing test on a shared 2-core machine
would fail at random. Float32 on the CPU throughout, inference rows under `torch.no_grad()`.

`--json PATH` also writes the results as JSON, in the structure `RESULTS_SCHEMA` describes
and `check_results` checks: the machine, the versions, the date and the commit, then one
entry per row. The site's benchmarks page and its figure read the committed file,
`literate/data/bench.json`, through `load_results`, never a live run. The site caches
what its pages print and its figures keyed on the source of `literate/**/*.py`, which
the JSON is not: `--pin` writes the file's SHA-256 into `RESULTS_SHA256` (results.py), so
that new results change that source (and the caches), and `load_results` refuses a
committed file whose digest is not the pinned one.

The rows are in `layers.py` (chapters 1-7 and the MoE layer), `decoding.py` (chapters 6
and 8), `long_context.py` (chapter 10) and `models.py` (one whole model per family of
`literate.models.families`), the table of rows and the command here, the
results file in `results.py`, the interleaved timing in `literate.tools.timing`.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from literate.tools.bench.decoding import (
    llama_decoding,
    sampling_filters,
    window_decode_step,
)
from literate.tools.bench.layers import (
    gpt2_block_backward,
    gpt2_block_forward,
    gqa_rope_forward,
    layer_norm_forward,
    llama_block_pass,
    llama_rms_norm_forward,
    mha_forward,
    mixtral_moe_forward,
    neox_block_forward,
    rms_norm_forward,
)
from literate.tools.bench.long_context import (
    gpt_oss_sliding_forward,
    latent_attention_step,
    mla_decode_step,
    mla_forward,
    sink_attention_step,
    window_block_forward,
)
from literate.tools.bench.models import model_rows
from literate.tools.bench.results import (
    RESULTS_PATH,
    RESULTS_SCHEMA,
    check_results,
    load_results,
    pin,
    run_header,
    sha256,
)
from literate.tools.timing import measure

__all__ = [
    "Row",
    "ROWS",
    "RESULTS_PATH",
    "RESULTS_SCHEMA",
    "check_results",
    "load_results",
    "main",
]


@dataclass
class Row:
    """One comparison: what it is, and a function that builds the two contenders."""

    group: str  # a word to select rows with --only
    name: str
    reference: str
    build: Callable[[], tuple[Callable[[], object], Callable[[], object], float]]
    # build() -> (ours, theirs, max |difference| of their outputs)
    rounds: int = 0  # at least this many rounds (not with --quick): a close race


ROWS: list[Row] = [
    Row(
        "gpt2",
        "GPT-2 block fwd, B=1 T=128 d=768",
        "HF GPT2Block (sdpa)",
        gpt2_block_forward(1, 128),
    ),
    Row(
        "gpt2",
        "GPT-2 block fwd, B=4 T=512 d=768",
        "HF GPT2Block (sdpa)",
        gpt2_block_forward(4, 512),
    ),
    Row(
        "gpt2",
        "GPT-2 block fwd+bwd, B=1 T=128",
        "HF GPT2Block (sdpa)",
        gpt2_block_backward(1, 128),
    ),
    Row(
        "gpt2",
        "GPT-2 block fwd+bwd, B=4 T=512",
        "HF GPT2Block (sdpa)",
        gpt2_block_backward(4, 512),
    ),
    Row(
        "attention",
        "MHA fwd, B=4 T=128 d=512 H=8",
        "nn.MultiheadAttention",
        mha_forward(),
    ),
    Row(
        "attention",
        "GQA+RoPE fwd, B=2 T=256 d=512 H=8/2",
        "HF LlamaAttention (sdpa)",
        gqa_rope_forward(),
    ),
    Row(
        "modern",
        "Llama block fwd, B=2 T=256 d=512 H=8/2",
        "HF LlamaDecoderLayer (sdpa)",
        llama_block_pass(),
    ),
    Row(
        "modern",
        "Llama block fwd+bwd, B=2 T=256 d=512",
        "HF LlamaDecoderLayer (sdpa)",
        llama_block_pass(backward=True),
    ),
    Row(
        "modern",
        "GPT-NeoX parallel block fwd, B=2 T=256 d=512",
        "HF GPTNeoXLayer (sdpa)",
        neox_block_forward(),
    ),
    Row(
        "decoding",
        "Llama generate, greedy, tiny, B=2 32+64",
        "HF generate (DynamicCache)",
        llama_decoding(),
    ),
    Row(
        "decoding",
        "Llama beam search k=4, tiny, B=2 32+64",
        "HF generate(num_beams=4)",
        llama_decoding(beams=4),
    ),
    Row(
        "decoding",
        "Window 64: a step at 512 (rings), tiny",
        "ours, a step at 32",
        window_decode_step("inside"),
    ),
    Row(
        "decoding",
        "Window 64: a step at 512 (rings), tiny",
        "ours, plain caches",
        window_decode_step("full"),
    ),
    Row("norm", "LayerNorm fwd [4, 512, 768]", "nn.LayerNorm", layer_norm_forward()),
    Row("norm", "RMSNorm fwd [4, 512, 768]", "nn.RMSNorm", rms_norm_forward()),
    Row(
        "norm", "RMSNorm fwd [4, 512, 768]", "HF LlamaRMSNorm", llama_rms_norm_forward()
    ),
    Row(
        "sampling",
        "top-k 50, [8, 50257]",
        "HF TopKLogitsWarper",
        sampling_filters(top_k=50),
    ),
    Row(
        "sampling",
        "top-p 0.9, [8, 50257]",
        "HF TopPLogitsWarper",
        sampling_filters(top_p=0.9),
    ),
    Row(
        "sampling",
        "T 0.7, top-k 50, top-p 0.9",
        "HF warpers, same order",
        sampling_filters(temperature=0.7, top_k=50, top_p=0.9),
    ),
    Row(
        "moe",
        "MoE fwd, 64 experts top-6, d=256 I=128 N=512",
        "HF Mixtral block (grouped_mm)",
        mixtral_moe_forward("grouped_mm"),
        rounds=41,
    ),
    Row(
        "moe",
        "MoE fwd, 64 experts top-6, d=256 I=128 N=512",
        "HF Mixtral block (eager)",
        mixtral_moe_forward("eager"),
    ),
    Row(
        "long",
        "gpt-oss sliding attn fwd, W=128 B=2 T=256",
        "HF GptOssAttention (eager)",
        gpt_oss_sliding_forward(),
    ),
    Row(
        "long",
        "MLA fwd (naive), B=2 T=256 d=512 H=8",
        "HF DeepseekV3Attention (sdpa)",
        mla_forward(),
    ),
    Row(
        "long",
        "MLA step at 1024, absorbed, d=512 H=8",
        "HF DeepseekV3 (DynamicCache)",
        mla_decode_step("hf"),
    ),
    Row(
        "long",
        "MLA step at 1024, absorbed, d=512 H=8",
        "ours, naive (absorb=never)",
        mla_decode_step("naive"),
    ),
    Row(
        "long",
        "sink attn step, H=64/8 d=64, 128 keys",
        "ours, sdpa + an extra key",
        sink_attention_step(),
    ),
    Row(
        "long",
        "sink attn step, H=64/8 d=64, B=4 1024 keys",
        "ours, sdpa + an extra key",
        sink_attention_step(batch=4, keys=1024),
    ),
    Row(
        "long",
        "latent attn step, H=16, 2048 keys of 576",
        "sdpa enable_gqa, 1 key head",
        latent_attention_step(),
    ),
    Row(
        "long",
        "Mistral block fwd, W=128 B=2 T=256 d=512",
        "HF MistralDecoderLayer (sdpa)",
        window_block_forward("mistral"),
    ),
    Row(
        "long",
        "Gemma 3 local block fwd, W=128 B=2 T=256",
        "HF Gemma3DecoderLayer (sdpa)",
        window_block_forward("gemma3"),
    ),
    # every family of literate.models.families, its whole model
    *(Row("model", name, ref, build) for name, ref, build in model_rows()),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m literate.tools.bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="intra-op threads (default 1)"
    )
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--quick", action="store_true", help="3 rounds of ~50 ms: a smoke run"
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help=f"run the rows of one group: {sorted({r.group for r in ROWS})}",
    )
    parser.add_argument(
        "--json", metavar="PATH", help="also write the results as JSON to PATH"
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="with --json literate/data/bench.json: pin its SHA-256 in "
        "literate/tools/bench/results.py (RESULTS_SHA256)",
    )
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    groups = {r.group for r in ROWS}
    unknown = sorted(set(args.only) - groups)
    if unknown:
        parser.error(f"--only must be one of {sorted(groups)}, got {unknown}")
    if args.pin and (
        args.json is None or Path(args.json).resolve() != RESULTS_PATH.resolve()
    ):
        parser.error(f"--pin needs --json {RESULTS_PATH}")
    torch.set_num_threads(args.threads)
    rounds, target = (3, 0.05) if args.quick else (args.rounds, 0.15)
    rows = [r for r in ROWS if not args.only or r.group in args.only]
    header = run_header(quick=args.quick)
    print(
        f"torch {torch.__version__}, {args.threads} thread(s), float32, {rounds} interleaved rounds per row"
    )
    line = f"{'row':<44} {'reference':<27} {'ours ms':>8} {'theirs ms':>9} {'ratio':>6}  {'spread':<11} {'max |diff|':>10}"
    print(line)
    print("-" * len(line))
    started = time.perf_counter()
    results = []
    for row in rows:
        ours, theirs, diff = row.build()
        row_rounds = rounds if args.quick else max(rounds, row.rounds)
        m = measure(ours, theirs, rounds=row_rounds, target_s=target)
        more = f"  ({row_rounds} rounds)" if row_rounds != rounds else ""
        print(
            f"{row.name:<44} {row.reference:<27} {m['ours_s'] * 1e3:8.3f} {m['theirs_s'] * 1e3:9.3f} "
            f"{m['ratio']:6.2f}  {m['min']:.2f}-{m['max']:.2f}{'':<2} {diff:10.1e}{more}",
            flush=True,
        )
        results.append(
            {
                "group": row.group,
                "name": row.name,
                "reference": row.reference,
                "ours_s": m["ours_s"],
                "theirs_s": m["theirs_s"],
                "ratio": m["ratio"],
                "min": m["min"],
                "max": m["max"],
                "rounds": row_rounds,
                "calls": m["n"],
                "max_abs_diff": float(diff) if math.isfinite(diff) else None,
            }
        )
    seconds = time.perf_counter() - started
    print(f"({seconds:.0f} s)")
    if args.json is not None:
        data = {**header, "seconds": round(seconds, 1), "rows": results}
        problems = check_results(data)
        if problems:
            raise ValueError(
                "the results do not fit RESULTS_SCHEMA:\n" + "\n".join(problems)
            )
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path}")
        if args.pin:
            pin(sha256(path))
            print("pinned its sha256 in literate/tools/bench/results.py")
    return 0
