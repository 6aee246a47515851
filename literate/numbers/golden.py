"""Fixed reference values the chapters check what they compute against.

`literate/data/reference.json` holds a 3x3 attention example (weights, outputs, scores),
a sinusoidal table, a LayerNorm example, a next-token NLL, the 2017 parameter floor, the
scaling experiment's settings and the tiny-LM thresholds. Its sha256 is fixed here, so a
changed number cannot slip in unnoticed: the values are a contract, not an output.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from importlib import resources
from typing import Any

REFERENCE_SHA256 = "e608c5bb68921c5a68e040a1e90f1bf1b9565a62a1b24435429707d4f4e31957"


@lru_cache(maxsize=1)
def _raw() -> bytes:
    return resources.files("literate").joinpath("data/reference.json").read_bytes()


def reference() -> dict[str, Any]:
    """The reference values, after checking the file's sha256."""
    raw = _raw()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != REFERENCE_SHA256:
        raise ValueError(f"reference.json has sha256 {digest}, expected {REFERENCE_SHA256}")
    values = json.loads(raw)
    if values.get("schema_version") != 1:
        raise ValueError(f"unknown schema_version {values.get('schema_version')!r}")
    return values
