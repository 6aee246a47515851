"""Does a piece of code stand alone? The names each top-level definition needs, and
whether an exported file defines or imports every one of them.

`literate.tools.export` checks each era file with `check_module_source`: every name a
definition uses is defined above its first use, imported from the standard library or
torch, or a builtin. The site's check of the pages (`literate.site.copyable`) reads the
shown definitions with the same `definitions_of`.
"""

from __future__ import annotations

import ast
import builtins
import symtable
import sys
from dataclasses import dataclass

__all__ = [
    "LIBRARIES",
    "library",
    "Problem",
    "defined_by",
    "needed_names",
    "Definition",
    "definitions_of",
    "check_module_source",
]

LIBRARIES = {"torch", "numpy", "__future__"}  # besides the standard library
BUILTINS = set(dir(builtins)) | {"__name__", "__file__", "__doc__"}


def library(module: str) -> bool:
    root = module.split(".")[0]
    return root in LIBRARIES or root in sys.stdlib_module_names


@dataclass(frozen=True)
class Problem:
    where: str  # page:line
    definition: str
    name: str
    why: str

    def __str__(self) -> str:
        return f"{self.where}: {self.definition} uses {self.name!r}: {self.why}"


def defined_by(stmt: ast.stmt) -> list[str]:
    """The names a top-level statement binds (def, class, assignment targets)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    names = []
    for target in targets:
        names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
    return names


def needed_names(source: str) -> set[str]:
    """Global names one top-level statement reads (its decorators, defaults, annotations,
    bases, right-hand side, and every name its body reads from module scope), minus the
    names it binds itself and builtins."""
    top = symtable.symtable(source, "<shown>", "exec")
    assigned = {
        s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()
    }
    needed = {s.get_name() for s in top.get_symbols() if s.is_referenced()}
    stack = list(top.get_children())
    while stack:
        table = stack.pop()
        needed |= {
            s.get_name()
            for s in table.get_symbols()
            if s.is_global() and s.is_referenced()
        }
        stack += table.get_children()
    return needed - assigned - BUILTINS


@dataclass
class Definition:
    names: list[str]
    needs: set[str]
    line: int  # line of the statement within its block
    block_line: int  # line of the block on the page


def definitions_of(
    source: str, block_line: int = 1, *, assignments: bool = True
) -> tuple[list[Definition], list[ast.stmt]]:
    """The definitions of a block (top-level def and class; assignments too, unless
    `assignments=False`: on a page, `x = torch.randn(...)` is usage, not a definition a
    reader copies) and its imports."""
    tree = ast.parse(source)
    lines = source.splitlines()
    definitions, imports = [], []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            imports.append(stmt)
            continue
        names = defined_by(stmt)
        if not names or (
            not assignments
            and not isinstance(
                stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            )
        ):
            continue
        start = min(
            [stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])]
        )
        text = "\n".join(lines[start - 1 : stmt.end_lineno])
        definitions.append(
            Definition(names, needed_names(text), stmt.lineno, block_line)
        )
    return definitions, imports


def check_module_source(source: str, where: str = "<module>") -> list[Problem]:
    """An exported file: every name a definition uses is defined above its first use at
    module level (or in the same statement), imported from the standard library or torch,
    or a builtin; nothing is imported from anywhere else."""
    definitions, imports = definitions_of(source)
    problems, available = [], set()
    for stmt in imports:
        module = stmt.module if isinstance(stmt, ast.ImportFrom) else None
        for alias in stmt.names:
            origin = module or alias.name
            if not library(origin) or origin.split(".")[0] == "numpy":
                problems.append(
                    Problem(
                        f"{where}:{stmt.lineno}",
                        "<import>",
                        origin,
                        "an exported file imports only the standard library and torch",
                    )
                )
            available.add((alias.asname or alias.name).split(".")[0])
    defined_later = {n for d in definitions for n in d.names}
    seen: set[str] = set()
    for definition in definitions:
        for name in sorted(definition.needs):
            if name in available or name in seen or name in definition.names:
                continue
            why = (
                "defined below its first use"
                if name in defined_later
                else "never defined"
            )
            problems.append(
                Problem(
                    f"{where}:{definition.line}", "/".join(definition.names), name, why
                )
            )
        seen |= set(definition.names)
    return problems
