"""The package's layout shows its architecture: layers by role, imports only downward.

    minimal < parts < decoding < models < numbers < tools < figures < site

A part (what the chapters teach as building blocks) never imports a model; a model never
imports a number, a tool, a figure or the site; nothing outside `site/` imports `site/`.
And no module imports itself back through others (no cycle), counting the imports
inside functions too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "literate"
LAYERS = (
    "minimal",
    "parts",
    "decoding",
    "models",
    "numbers",
    "tools",
    "figures",
    "site",
)


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The `literate` modules that `path` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if name in modules:
                found.add(name)
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    paths = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    modules = set(paths)
    return {name: imports_of(path, modules) - {name} for name, path in paths.items()}


def layer(module: str) -> int | None:
    """The rank of a module's folder in LAYERS; None for the package's root."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{a} imports {b}"
        for a, targets in graph.items()
        for b in targets
        if layer(a) is not None and layer(b) is not None and layer(b) > layer(a)
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_sits_in_a_layer():
    loose = [m for m in import_graph() if layer(m) is None and m != "literate"]
    assert loose == [], f"modules outside {LAYERS}: {loose}"


def test_no_module_imports_a_higher_layer():
    assert upward_imports(import_graph()) == []


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_minimal_blocks_import_only_torch_the_standard_library_and_each_other():
    """What a reader pastes stands alone: `literate.minimal` imports no other part of
    the package, and nothing but torch and the standard library from outside it."""
    import sys

    graph = import_graph()
    for name, targets in graph.items():
        if name.startswith("literate.minimal"):
            assert all(t.startswith("literate.minimal") for t in targets), (
                name,
                targets,
            )
    for path in sorted((PACKAGE / "minimal").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = {node.module.split(".")[0]}
            else:
                continue
            outside = roots - {"torch", "literate", "__future__"}
            assert outside <= set(sys.stdlib_module_names), (path.name, outside)


def test_nothing_outside_site_imports_site():
    graph = import_graph()
    assert (
        sorted(
            a
            for a, bs in graph.items()
            if layer(a) != LAYERS.index("site")
            and any(layer(b) == LAYERS.index("site") for b in bs)
        )
        == []
    )


@pytest.mark.parametrize(
    "source, problem",
    [
        (
            {"parts/a.py": "from literate.models.b import x", "models/b.py": ""},
            "literate.parts.a imports literate.models.b",
        ),
        (
            {"models/a.py": "def f():\n    import literate.tools.b", "tools/b.py": ""},
            "literate.models.a imports literate.tools.b",
        ),
    ],
)
def test_the_walk_sees_an_upward_import(tmp_path, source, problem):
    package = tmp_path / "literate"
    for name, text in source.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    assert upward_imports(import_graph(package)) == [problem]


def test_the_walk_sees_a_cycle(tmp_path):
    package = tmp_path / "literate" / "parts"
    package.mkdir(parents=True)
    (package / "a.py").write_text("from literate.parts.b import x\n")
    (package / "b.py").write_text("def f():\n    from literate.parts import a\n")
    (package / "c.py").write_text("import literate.parts.a\n")
    assert cycles(import_graph(package.parent)) == [
        ["literate.parts.a", "literate.parts.b"]
    ]


LONG_MODULE = 450  # lines; a longer module says at its top why it is one module


def long_modules_without_a_reason(package: Path) -> list[str]:
    """The modules of `package` over LONG_MODULE lines whose first 80 lines do not say
    why ("Over 450 lines on purpose: ...")."""
    found = []
    for path in sorted(package.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        head = "\n".join(lines[:80])
        if len(lines) > LONG_MODULE and "Over 450 lines on purpose:" not in head:
            found.append(f"{path.relative_to(package)} ({len(lines)} lines)")
    return found


def test_every_long_module_says_why_it_is_one_module():
    assert long_modules_without_a_reason(PACKAGE) == []


def test_a_long_module_without_a_reason_is_found(tmp_path):
    (tmp_path / "short.py").write_text("x = 1\n" * 10)
    (tmp_path / "long.py").write_text("x = 1\n" * (LONG_MODULE + 1))
    (tmp_path / "said.py").write_text(
        "# Over 450 lines on purpose: a reason.\n" + "x = 1\n" * LONG_MODULE
    )
    assert long_modules_without_a_reason(tmp_path) == [
        f"long.py ({LONG_MODULE + 1} lines)"
    ]
