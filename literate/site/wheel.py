"""The package as a wheel the site serves (`downloads/<name>.whl`), so that a chapter's
notebook runs where the repository is not: `pip install` the wheel, then the notebook.

What goes in is what setuptools puts in the project's wheel (pyproject.toml: the
packages `literate*`, their modules, and the package data `literate/data/*.json`;
`tests/test_packaging.py` compares the two lists), and the metadata says what pip needs:
the name, the version, the Python and the dependencies of `[project]`. The bytes depend
on the files' contents only (sorted entries, fixed times and modes), so two builds serve
the same wheel.
"""

from __future__ import annotations

import base64
import hashlib
import tomllib
import zipfile
from pathlib import Path

from literate.site.docblocks import ROOT

__all__ = ["wheel_name", "wheel_files", "write_wheel"]

_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can hold


def _project() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def _distribution(project: dict) -> str:
    return project["name"].replace("-", "_")


def wheel_name() -> str:
    """The wheel's file name, as pip expects it: name-version-py3-none-any.whl."""
    project = _project()
    return f"{_distribution(project)}-{project['version']}-py3-none-any.whl"


def wheel_files(root: Path = ROOT) -> dict[str, Path]:
    """Archive name -> file: every module of the `literate` packages (a folder with an
    `__init__.py`), and the package data `literate/data/*.json`."""
    files: dict[str, Path] = {}
    for init in sorted((root / "literate").rglob("__init__.py")):
        if "__pycache__" in init.parts:
            continue
        for module in sorted(init.parent.glob("*.py")):
            files[module.relative_to(root).as_posix()] = module
    for data in sorted((root / "literate" / "data").glob("*.json")):
        files[data.relative_to(root).as_posix()] = data
    return dict(sorted(files.items()))


def _metadata(project: dict) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
        f"License-Expression: {project['license']}",
        *(f"Requires-Dist: {d}" for d in project["dependencies"]),
    ]
    return "\n".join(lines) + "\n"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"{name},sha256={digest.decode()},{len(data)}"


def write_wheel(out_dir: Path, root: Path = ROOT) -> Path:
    """Write the wheel into `out_dir` (rewritten only if its bytes changed); its path."""
    project = _project()
    info = f"{_distribution(project)}-{project['version']}.dist-info"
    entries = [(name, path.read_bytes()) for name, path in wheel_files(root).items()]
    entries += [
        (f"{info}/METADATA", _metadata(project).encode()),
        (
            f"{info}/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: literate.site.wheel\n"
            b"Root-Is-Purelib: true\nTag: py3-none-any\n",
        ),
    ]
    record = [_record_line(name, data) for name, data in entries]
    record.append(f"{info}/RECORD,,")
    entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / wheel_name()
    partial = path.with_suffix(".part")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in entries:
            entry = zipfile.ZipInfo(name, date_time=_EPOCH)
            entry.external_attr = 0o644 << 16  # a regular file, rw-r--r--
            entry.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(entry, data)
    if path.exists() and path.read_bytes() == partial.read_bytes():
        partial.unlink()  # unchanged: the served file (and its time) stays
    else:
        partial.replace(path)
    return path
