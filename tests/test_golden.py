"""The reference values from the source notebook are the exact bytes it embedded."""

from __future__ import annotations

import pytest

from literate.numbers import golden


def test_reference_loads_and_has_every_section():
    ref = golden.reference()
    assert set(ref) == {
        "attention",
        "layer_norm",
        "next_token_nll",
        "parameter_floor",
        "positional_encoding",
        "scaling_experiment",
        "schema_version",
        "tiny_lm",
    }
    assert ref["scaling_experiment"]["d_k"] == 64
    assert ref["parameter_floor"]["encoder_layer"] == 3_145_728


def test_a_changed_byte_is_refused(monkeypatch):
    raw = golden._raw()
    monkeypatch.setattr(
        golden,
        "_raw",
        lambda: raw.replace(b"0.3302384506733431", b"0.3302384506733432", 1),
    )
    with pytest.raises(
        ValueError,
        match=r"^reference\.json has sha256 [0-9a-f]{64}, expected [0-9a-f]{64}$",
    ):
        golden.reference()
