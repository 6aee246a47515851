"""The table of model families (literate/models/families.py) is complete and true: every
family module of literate/models has its row, every row names functions, classes and a
proving test that exist, and the readers of the table (published models, the era table,
the exports) get each family from it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import transformers

from literate.models.families import FAMILIES, family, family_of_config
from literate.numbers.eras import ERA_ROWS
from literate.numbers.published import PUBLISHED_CONFIGS
from literate.tools.bench import ROWS
from literate.tools.bench.models import SHAPE, family_model_forward, reference, row_name
from literate.tools.export import ERAS

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "literate" / "models"


def loader_modules() -> set[str]:
    """The modules of literate/models that define `<name>_from_hf_config` and
    `load_hf_<name>` for their own name: a whole model that loads from a checkpoint."""
    found = set()
    for path in MODELS.glob("*.py"):
        names = {
            node.name
            for node in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(node, ast.FunctionDef)
        }
        if {f"{path.stem}_from_hf_config", f"load_hf_{path.stem}"} <= names:
            found.add(path.stem)
    return found


def test_every_family_module_has_its_row():
    assert loader_modules() == {row.name for row in FAMILIES}


@pytest.mark.parametrize("row", FAMILIES, ids=[f.name for f in FAMILIES])
def test_a_row_names_what_exists(row):
    for kind in ("from_hf_config", "check", "load"):
        assert callable(row.function(kind)), (row.name, kind)
    assert hasattr(transformers, row.hf_config) and hasattr(transformers, row.hf_model)
    path, test = row.proof.split("::")
    source = (ROOT / path).read_text(encoding="utf-8")
    assert re.search(rf"^def {re.escape(test)}\(", source, re.MULTILINE), row.proof
    assert (ROOT / "docs" / row.page).is_file(), row.page
    assert row.name in (ROOT / "docs" / row.page).read_text(encoding="utf-8")


def test_the_readers_take_each_family_from_the_table():
    loaded = {config for config, _ in PUBLISHED_CONFIGS.values()}
    assert {row.hf_config for row in FAMILIES} <= loaded  # each is a published model
    rows = {row.name: row for row in ERA_ROWS}
    assert rows["Mixtral 8x7B"].proof == family("mixtral").proof
    assert "transformers.MixtralForCausalLM" in ERAS["mixtral"].equals
    assert family_of_config("Qwen3MoeConfig") is family("qwen3_moe")
    with pytest.raises(ValueError, match="no loader here for a FalconConfig"):
        family_of_config("FalconConfig")
    with pytest.raises(ValueError, match="no model family 'falcon'"):
        family("falcon")
    with pytest.raises(ValueError, match="kind must be one of"):
        family("llama").function("loader")


def test_the_benchmarks_time_every_family_of_the_table_and_nothing_else():
    models = [(r.name, r.reference) for r in ROWS if r.group == "model"]
    assert models == [(row_name(f), reference(f)) for f in FAMILIES]
    assert all(f.title for f in FAMILIES)
    assert len({f.title for f in FAMILIES}) == len(FAMILIES)
    # the two whole-model rows that were written out before the table keep their names
    assert "GPT-2 model fwd, 4 layers d=256 T=128 B=4" in dict(models)
    assert dict(models)["Llama model fwd, 4 layers d=256 T=128 B=4"] == (
        "HF LlamaForCausalLM (sdpa)"
    )


def test_a_family_row_benchmarks_its_model_loaded_with_hf_weights():
    # the smallest family's row: ours and HF's from one configuration, HF's weights
    # loaded into ours by the table's loader, the logits equal in float32
    mistral = family("mistral")
    ours, theirs, diff = family_model_forward(mistral, batch=1, length=8)()
    assert ours().shape == theirs().shape == (1, 8, SHAPE["vocab_size"])
    assert diff < 1e-5
