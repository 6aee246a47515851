"""Tokens per second against batch size, measured on this CPU (chapter 8).

    python -m literate.tools.decode_batch            # measure and print
    python -m literate.tools.decode_batch --write    # and write literate/data/decode_batch.json

A decoding step reads every weight of the model once, however many sequences it
carries, and does 2 FLOPs per weight per sequence (`literate.numbers.decode_traffic`).
This tool measures what that means on the machine it runs on: the cached `generate` of
chapter 8 (`literate.decoding.generate.generate`, greedy) on a small Llama whose
float32 weights (`BATCH_MODEL`, about 45 MB) do not fit in the CPU's caches, for
batches of 1 to 64 prompts, one intra-op thread, interleaved rounds, the median kept.

Time is noisy and depends on the machine, so the site never measures it while it
builds: the chapter and its figure read the committed file `literate/data/decode_batch.json`
(`load_decode_batch`), and two builds give the same bytes. `check_decode_batch` is the
file's structure (`DECODE_BATCH_SCHEMA`) and its values; tests/test_decode_traffic.py
checks the committed file with it, and that what the page claims holds for it.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from literate.decoding.generate import generate
from literate.models.llama import LlamaLanguageModel, llama_model
from literate.parts.checks import positive_int
from literate.tools.bench.results import run_header

__all__ = [
    "DATA_PATH",
    "BATCH_MODEL",
    "BATCHES",
    "PROMPT",
    "NEW_TOKENS",
    "ROUNDS",
    "SEED",
    "DECODE_BATCH_SCHEMA",
    "batch_model",
    "measure",
    "check_decode_batch",
    "load_decode_batch",
    "dump",
    "main",
]

DATA_PATH = Path(__file__).parents[1] / "data" / "decode_batch.json"

# A small Llama (GQA, 4 query heads per key/value head) of 11.3M parameters: 45 MB in
# float32, more than the 32 MiB L3 cache of the CPU that measured the committed file,
# so every step reads its weights from memory. A vocabulary of 256 keeps the head small next to the blocks.
BATCH_MODEL = {
    "vocab_size": 256,
    "context": 64,
    "d_model": 512,
    "n_heads": 8,
    "n_kv_heads": 2,
    "n_layers": 4,
    "d_ff": 1376,
}
BATCHES = (1, 2, 4, 8, 16, 32, 64)
PROMPT = 8  # tokens of each random prompt
NEW_TOKENS = 32  # tokens generated per row
ROUNDS = 7  # interleaved rounds; the median is kept
SEED = 0


# --8<-- [start:measure]
def batch_model(*, seed: int = SEED) -> LlamaLanguageModel:
    """The Llama of BATCH_MODEL, float32, eval mode, its weights from `seed` (the
    global generator is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return llama_model(**BATCH_MODEL).eval()


def measure(
    *,
    batches: Sequence[int] = BATCHES,
    rounds: int = ROUNDS,
    new_tokens: int = NEW_TOKENS,
    prompt: int = PROMPT,
) -> dict:
    """Time `generate(model, ids, new_tokens)` for a batch of random prompts [B, prompt]
    of each size B: `rounds` rounds, each timing every batch once, in an order that
    turns round by round (a slow moment falls on different batches); one intra-op
    thread (restored after). A row per batch: tokens per second, B * new_tokens /
    seconds (the prefill of the prompt included in the seconds), the median over the
    rounds and the slowest and fastest round."""
    batches = [positive_int("batches[i]", b) for b in batches]
    if not batches or len(set(batches)) != len(batches):
        raise ValueError(f"batches must be distinct sizes, at least one, got {batches}")
    rounds = positive_int("rounds", rounds)
    new_tokens, prompt = (
        positive_int("new_tokens", new_tokens),
        positive_int("prompt", prompt),
    )
    if prompt + new_tokens > BATCH_MODEL["context"]:
        raise ValueError(
            f"prompt + new_tokens must fit the context "
            f"{BATCH_MODEL['context']}, got {prompt} + {new_tokens}"
        )
    model = batch_model()
    generator = torch.Generator().manual_seed(SEED)
    prompts = {
        b: torch.randint(0, BATCH_MODEL["vocab_size"], (b, prompt), generator=generator)
        for b in batches
    }
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for b in batches:  # warm-up: allocations and code paths, once per shape
            generate(model, prompts[b], 2)
        seconds: dict[int, list[float]] = {b: [] for b in batches}
        for r in range(rounds):
            shift = r % len(batches)
            order = batches[shift:] + batches[:shift]
            for b in order if r % 2 == 0 else order[::-1]:
                start = time.perf_counter()
                generate(model, prompts[b], new_tokens)
                seconds[b].append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    rows = []
    for b in batches:
        rates = [b * new_tokens / s for s in seconds[b]]
        rows.append(
            {
                "batch": b,
                "tokens_per_s": statistics.median(rates),
                "min": min(rates),
                "max": max(rates),
                "seconds": statistics.median(seconds[b]),
            }
        )
    parameters = sum(p.numel() for p in model.parameters())
    header = run_header(quick=False)
    return {
        "machine": header["machine"] | {"threads": 1},
        "versions": header["versions"],
        "date": header["date"],
        "model": dict(
            BATCH_MODEL,
            parameters=parameters,
            weight_bytes=sum(p.nbytes for p in model.parameters()),
        ),
        "prompt": prompt,
        "new_tokens": new_tokens,
        "rounds": rounds,
        "seed": SEED,
        "rows": rows,
    }


# --8<-- [end:measure]


# ---------------------------------------------------------------------------------------
# The file: structure, check, load, write

ROW_SCHEMA = {
    "batch": int,
    "tokens_per_s": float,
    "min": float,
    "max": float,
    "seconds": float,
}
DECODE_BATCH_SCHEMA: dict = {
    "machine": {"cpu": str, "cores": int, "threads": int},
    "versions": {"python": str, "torch": str, "transformers": str},
    "date": str,  # UTC, ISO 8601
    "model": dict.fromkeys(BATCH_MODEL, int) | {"parameters": int, "weight_bytes": int},
    "prompt": int,
    "new_tokens": int,
    "rounds": int,
    "seed": int,
    "rows": [ROW_SCHEMA],
}


def _structure(value: object, schema: object, where: str) -> list[str]:
    """What in `value` does not have the structure `schema` gives (a dict of keys to
    structures, a list of one item's structure, or a type)."""
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {type(value).__name__}"]
        if set(value) != set(schema):
            return [f"{where}: expected the keys {sorted(schema)}, got {sorted(value)}"]
        return [
            p for k in schema for p in _structure(value[k], schema[k], f"{where}.{k}")
        ]
    if isinstance(schema, list):
        if not isinstance(value, list) or not value:
            return [f"{where}: expected a list of at least one item, got {value!r}"]
        return [
            p
            for i, item in enumerate(value)
            for p in _structure(item, schema[0], f"{where}[{i}]")
        ]
    ok = isinstance(value, schema) and not isinstance(value, bool)
    ok = ok or (schema is float and type(value) is int)  # JSON: 3.0 may read as 3
    return [] if ok else [f"{where}: expected {schema.__name__}, got {value!r}"]


def check_decode_batch(data: object) -> list[str]:
    """What is wrong with a measurement file's content (an empty list: nothing): its
    structure (`DECODE_BATCH_SCHEMA`), then its values: the model of BATCH_MODEL with
    a positive parameter count and 4 bytes per parameter (float32), one thread, rows
    in increasing batch order, finite positive rates with min <= median <= max, and a
    median rate of B * new_tokens / median seconds (to 1e-9: a file whose rates do not
    follow from its times was not written by `measure`)."""
    problems = _structure(data, DECODE_BATCH_SCHEMA, "decode_batch")
    if problems:
        return problems
    model = data["model"]
    if {k: model[k] for k in BATCH_MODEL} != BATCH_MODEL:
        problems.append(f"decode_batch.model: expected {BATCH_MODEL}, got {model}")
    if model["weight_bytes"] != 4 * model["parameters"] or model["parameters"] < 1:
        problems.append(
            "decode_batch.model: expected 4 bytes per parameter, got "
            f"{model['weight_bytes']} for {model['parameters']}"
        )
    if data["machine"]["threads"] != 1:
        problems.append(
            f"decode_batch.machine.threads: expected 1, got "
            f"{data['machine']['threads']}"
        )
    batches = [row["batch"] for row in data["rows"]]
    if batches != sorted(set(batches)) or batches[0] < 1:
        problems.append(
            f"decode_batch.rows: expected increasing batches >= 1, got {batches}"
        )
    for i, row in enumerate(data["rows"]):
        where = f"decode_batch.rows[{i}]"
        values = [row[k] for k in ("tokens_per_s", "min", "max", "seconds")]
        if not all(math.isfinite(v) and v > 0 for v in values):
            problems.append(f"{where}: expected finite positive numbers, got {row}")
            continue
        if not row["min"] <= row["tokens_per_s"] <= row["max"]:
            problems.append(f"{where}: expected min <= tokens_per_s <= max, got {row}")
        rate = row["batch"] * data["new_tokens"] / row["seconds"]
        if not math.isclose(rate, row["tokens_per_s"], rel_tol=1e-9):
            problems.append(
                f"{where}: tokens_per_s {row['tokens_per_s']} is not batch "
                f"x new_tokens / seconds = {rate}"
            )
    return problems


def load_decode_batch(path: str | Path | None = None) -> dict:
    """The measurement file at `path` (default: the committed DATA_PATH), checked by
    `check_decode_batch`; a ValueError lists what is wrong."""
    target = DATA_PATH if path is None else Path(path)
    data = json.loads(target.read_text(encoding="utf-8"))
    problems = check_decode_batch(data)
    if problems:
        raise ValueError(
            f"{target} is not a decode_batch file:\n" + "\n".join(problems)
        )
    return data


def dump(data: dict) -> str:
    """The file's text: checked first, one key order, a newline at the end."""
    problems = check_decode_batch(data)
    if problems:
        raise ValueError("not a decode_batch measurement:\n" + "\n".join(problems))
    return json.dumps(data, indent=1) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m literate.tools.decode_batch",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument(
        "--write", action="store_true", help=f"write the measurement to {DATA_PATH}"
    )
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args(argv)
    data = measure(rounds=args.rounds)
    model = data["model"]
    print(
        f"{model['parameters']:,} parameters, {model['weight_bytes'] / 1e6:.1f} MB "
        f"float32; prompt {data['prompt']}, {data['new_tokens']} new tokens, "
        f"{data['rounds']} rounds, 1 thread"
    )
    one = data["rows"][0]
    for row in data["rows"]:
        print(
            f"batch {row['batch']:>3}: {row['tokens_per_s']:8.0f} tokens/s "
            f"(rounds {row['min']:.0f}..{row['max']:.0f}), "
            f"{row['tokens_per_s'] / one['tokens_per_s']:5.1f} x batch "
            f"{one['batch']}"
        )
    if args.write:
        DATA_PATH.write_text(dump(data), encoding="utf-8")
        print(f"wrote {DATA_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
