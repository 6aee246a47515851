"""A plain (not editable) install of the package works on its own: every subpackage of the
layout, the data files (reference values, benchmark results, each checked by its
sha256), the exports that read the sources of the installed modules, a model.

The wheel is built from this checkout with the environment's setuptools (no build
isolation: nothing downloaded), installed into a folder of its own, and used from a
fresh interpreter (`-I`: no user site, no PYTHONPATH, no current directory) whose only
`literate` is the installed one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

USE = """
import sys
sys.path.insert(0, {target!r})
import literate
assert literate.__file__.startswith({target!r}), literate.__file__
from literate.numbers.golden import reference
from literate.tools.bench.results import load_results
from literate.tools.export import assemble
from literate.models.llama import llama_model
print(reference()["schema_version"], len(load_results()["rows"]) > 0,
      "class GPTLanguageModel" in assemble("gpt2"),
      type(llama_model(64, 32, 32, 4, 2, 2, 64)).__name__)
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """setuptools' wheel of this checkout, and the folder it is installed into."""
    wheels, target = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("site")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [
            *pip,
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("*.whl")
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return wheel, target


@pytest.fixture(scope="module")
def installed(built: tuple[Path, Path]) -> Path:
    return built[1]


@pytest.fixture(scope="module")
def setuptools_wheel(built: tuple[Path, Path]) -> Path:
    return built[0]


def test_the_served_wheel_holds_what_setuptools_puts_in_and_is_reproducible(
    setuptools_wheel, tmp_path
):
    """The site's wheel (`literate.site.wheel`, served with the downloads for the
    chapters' notebooks): the same modules and data files as setuptools' wheel of this
    checkout, the same bytes when written twice, a RECORD pip can check."""
    import zipfile

    from literate.site.wheel import wheel_name, write_wheel

    ours = write_wheel(tmp_path / "a")
    assert ours.name == wheel_name() == setuptools_wheel.name
    assert ours.read_bytes() == write_wheel(tmp_path / "b").read_bytes()

    def files(path: Path) -> list[str]:
        with zipfile.ZipFile(path) as z:
            return sorted(n for n in z.namelist() if ".dist-info/" not in n)

    assert files(ours) == files(setuptools_wheel)
    assert len(files(ours)) > 100
    with zipfile.ZipFile(ours) as z:  # what pip reads; pip installs it in the readers'
        info = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = z.read(info).decode()  # suite (tests/test_chapter_notebooks.py)
    assert "Requires-Dist: torch>=2.7" in metadata and "Version: 0.1.0" in metadata


def test_the_installed_package_has_its_layers_and_data(installed):
    packages = {
        p.parent.relative_to(installed).as_posix()
        for p in installed.glob("literate/**/__init__.py")
    }
    assert {
        "literate",
        "literate/parts",
        "literate/decoding",
        "literate/models",
        "literate/numbers",
        "literate/tools",
        "literate/figures",
        "literate/site",
    } <= packages
    assert {p.name for p in (installed / "literate" / "data").glob("*.json")} == {
        "bench.json",
        "decode_batch.json",
        "reference.json",
    }


def test_a_plain_install_works_from_anywhere(installed, tmp_path):
    out = subprocess.run(
        [sys.executable, "-I", "-c", USE.format(target=str(installed))],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "True", "True", "LlamaLanguageModel"]
