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
    with pytest.raises(ValueError, match="no loader here for a Qwen3MoeConfig"):
        family_of_config("Qwen3MoeConfig")
    with pytest.raises(ValueError, match="no model family 'qwen3'"):
        family("qwen3")
    with pytest.raises(ValueError, match="kind must be one of"):
        family("llama").function("loader")
