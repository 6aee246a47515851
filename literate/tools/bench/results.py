"""The results file of the benchmarks (`literate/data/bench.json`): its structure
(`RESULTS_SCHEMA`), its check (`check_results`), the pinned digest that ties the
committed file to this source (`RESULTS_SHA256`, written by `pin`), and `load_results`,
which the benchmarks page and its figure read."""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import platform
import re
import subprocess
from pathlib import Path

import torch

RESULTS_PATH = Path(__file__).parents[2] / "data" / "bench.json"
# The committed file's digest, written by `--pin`.
RESULTS_SHA256 = "c04719a2aac05082e700e1be1a5d26e9198048d79740aaea2af46b12bc5c53b2"


# The structure of a results file: a dict maps each key to the type of its value (a
# nested dict, a list of one item's structure, or a tuple of the types allowed). Times
# are seconds per call; ratios are ours / theirs; "rounds" is the number of interleaved
# rounds a row was timed in (its repeats) and "calls" the calls per round.
ROW_SCHEMA: dict = {
    "group": str,
    "name": str,
    "reference": str,
    "ours_s": float,  # median over the rounds
    "theirs_s": float,  # median over the rounds
    "ratio": float,  # median over the rounds of (ours / theirs in that round)
    "min": float,  # the smallest round's ratio
    "max": float,  # the largest round's ratio
    "rounds": int,
    "calls": int,
    "max_abs_diff": (float, type(None)),  # null where the outputs differ (not a number)
}
RESULTS_SCHEMA: dict = {
    "machine": {"cpu": str, "cores": int, "threads": int},  # threads: torch's intra-op
    "versions": {"python": str, "torch": str, "transformers": str},
    "date": str,  # UTC, ISO 8601, e.g. "2025-01-31T12:00:00+00:00"
    "commit": (str, type(None)),  # `git rev-parse HEAD` of the tree that ran, if any
    "quick": bool,  # a --quick smoke run
    "seconds": float,  # wall-clock time of the whole run
    "rows": [ROW_SCHEMA],
}


def _structure_problems(value: object, schema: object, where: str) -> list[str]:
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {type(value).__name__}"]
        problems = [
            f"{where}: missing key {key!r}" for key in schema if key not in value
        ]
        problems += [
            f"{where}: unexpected key {key!r}" for key in value if key not in schema
        ]
        for key in schema:
            if key in value:
                problems += _structure_problems(
                    value[key], schema[key], f"{where}.{key}"
                )
        return problems
    if isinstance(schema, list):
        if not isinstance(value, list):
            return [f"{where}: expected a list, got {type(value).__name__}"]
        return [
            p
            for i, item in enumerate(value)
            for p in _structure_problems(item, schema[0], f"{where}[{i}]")
        ]
    allowed = schema if isinstance(schema, tuple) else (schema,)
    # JSON has one kind of number: a float field may hold an integer, but a bool is no number.
    ok = any(
        isinstance(value, t) and not (isinstance(value, bool) and t is not bool)
        for t in allowed
    )
    ok = ok or (float in allowed and type(value) is int)
    if not ok:
        names = " or ".join("null" if t is type(None) else t.__name__ for t in allowed)
        return [f"{where}: expected {names}, got {value!r}"]
    return []


def check_results(data: object) -> list[str]:
    """What is wrong with a results file's content (an empty list: nothing): its structure
    against `RESULTS_SCHEMA`, then the values: finite positive times and ratios with
    min <= ratio <= max, at least one round and one call, at least one thread and core,
    a UTC ISO date, a commit of 40 hex digits, at least one row, and no (name, reference)
    twice."""
    problems = _structure_problems(data, RESULTS_SCHEMA, "results")
    if problems:
        return problems
    machine = data["machine"]
    for key in ("cores", "threads"):
        if machine[key] < 1:
            problems.append(
                f"results.machine.{key}: expected at least 1, got {machine[key]}"
            )
    try:
        date = datetime.datetime.fromisoformat(data["date"])
    except ValueError:
        problems.append(
            f"results.date: expected an ISO 8601 date, got {data['date']!r}"
        )
    else:
        if date.utcoffset() != datetime.timedelta(0):
            problems.append(f"results.date: expected a UTC date, got {data['date']!r}")
    if data["commit"] is not None and not re.fullmatch(r"[0-9a-f]{40}", data["commit"]):
        problems.append(
            f"results.commit: expected 40 hex digits or null, got {data['commit']!r}"
        )
    if not data["rows"]:
        problems.append("results.rows: expected at least one row")
    seen = set()
    for i, row in enumerate(data["rows"]):
        where = f"results.rows[{i}]"
        for key in ("ours_s", "theirs_s", "ratio", "min", "max"):
            if not (math.isfinite(row[key]) and row[key] > 0):
                problems.append(
                    f"{where}.{key}: expected a finite positive number, got {row[key]!r}"
                )
        if not row["min"] <= row["ratio"] <= row["max"]:
            problems.append(
                f"{where}: expected min <= ratio <= max, got "
                f"{row['min']!r}, {row['ratio']!r}, {row['max']!r}"
            )
        for key in ("rounds", "calls"):
            if row[key] < 1:
                problems.append(f"{where}.{key}: expected at least 1, got {row[key]}")
        if (row["name"], row["reference"]) in seen:
            problems.append(
                f"{where}: ({row['name']!r}, {row['reference']!r}) appears twice"
            )
        seen.add((row["name"], row["reference"]))
    return problems


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_results(path: str | Path | None = None) -> dict:
    """The results file at `path` (default: the committed `RESULTS_PATH`, whose SHA-256
    must be the pinned `RESULTS_SHA256`), checked by `check_results`."""
    target = RESULTS_PATH if path is None else Path(path)
    if path is None and sha256(target) != RESULTS_SHA256:
        raise ValueError(
            f"{target.name} has sha256 {sha256(target)}, but RESULTS_SHA256 pins "
            f"{RESULTS_SHA256}: regenerate it with `make bench` (which pins it)"
        )
    data = json.loads(target.read_text(encoding="utf-8"))
    problems = check_results(data)
    if problems:
        raise ValueError(f"{target} is not a results file:\n" + "\n".join(problems))
    return data


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return (
        commit
        if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", commit)
        else None
    )


def run_header(*, quick: bool) -> dict:
    """The top of a results file, read from this process and machine: the CPU model
    (/proc/cpuinfo), the logical cores, torch's intra-op threads, the versions, the UTC
    date now and the git commit."""
    import transformers

    return {
        "machine": {
            "cpu": _cpu_model(),
            "cores": os.cpu_count() or 1,
            "threads": torch.get_num_threads(),
        },
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
        "date": datetime.datetime.now(datetime.timezone.utc)
        .replace(microsecond=0)
        .isoformat(),
        "commit": _git_commit(),
        "quick": quick,
    }


def pin(digest: str, source: Path = Path(__file__)) -> None:
    """Write `digest` into the `RESULTS_SHA256 = "..."` line of this module's source."""
    text = source.read_text(encoding="utf-8")
    new, count = re.subn(
        r'^RESULTS_SHA256 = "[0-9a-f]{64}"',
        f'RESULTS_SHA256 = "{digest}"',
        text,
        flags=re.MULTILINE,
    )
    if count != 1:
        raise ValueError(f"{source}: expected one RESULTS_SHA256 line, found {count}")
    source.write_text(new, encoding="utf-8")
