"""What is shown can be copied: every name a shown definition uses is shown too.

A reader who copies a function from a page into a project needs every name it uses.
This module reads the code of the pages, in reading order, and reports each name that a
shown definition (a top-level function, class or assignment) uses but that the reader
has not been shown:

* defined by a block earlier on the same page (or in the same block);
* shown on an earlier page, in the order of `nav` in mkdocs.yml, and imported from
  `literate` on this page, which links to that earlier page;
* imported in a visible block from the standard library, torch or numpy;
* a builtin.

Names imported from `literate` that no earlier page shows (data loaders, the references
a proof compares against) may be used by the code that runs checks, never by a shown
definition. No block imports `literate.figures`: plotting code never computes what a
claim proves. The same reading checks an exported era file (`literate.export`): there
every name must be defined above its first use, or imported from the standard library
or torch.
"""

from __future__ import annotations

import ast
import builtins
import re
import sys
import symtable
from dataclasses import dataclass, field
from pathlib import Path

from literate.site.docblocks import ROOT, default_expander, iter_blocks, mkdocs_config

__all__ = ["LIBRARIES", "Problem", "needed_names", "definitions_of", "check_pages", "nav_pages",
           "check_module_source"]

LIBRARIES = {"torch", "numpy", "__future__"}  # besides the standard library
BUILTINS = set(dir(builtins)) | {"__name__", "__file__", "__doc__"}
LINK = re.compile(r"\]\((?P<target>[^)\s#]+)(?:#[^)]*)?\)")


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


def _defined_by(stmt: ast.stmt) -> list[str]:
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
    assigned = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    needed = {s.get_name() for s in top.get_symbols() if s.is_referenced()}
    stack = list(top.get_children())
    while stack:
        table = stack.pop()
        needed |= {s.get_name() for s in table.get_symbols() if s.is_global() and s.is_referenced()}
        stack += table.get_children()
    return needed - assigned - BUILTINS


@dataclass
class Definition:
    names: list[str]
    needs: set[str]
    line: int  # line of the statement within its block
    block_line: int  # line of the block on the page


def definitions_of(source: str, block_line: int = 1, *, assignments: bool = True
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
        names = _defined_by(stmt)
        if not names or (not assignments and not isinstance(
                stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))):
            continue
        start = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
        text = "\n".join(lines[start - 1:stmt.end_lineno])
        definitions.append(Definition(names, needed_names(text), stmt.lineno, block_line))
    return definitions, imports


def nav_pages(config: dict | None = None) -> list[str]:
    """The Markdown pages of the site in reading order (docs-relative paths)."""
    config = mkdocs_config() if config is None else config
    pages: list[str] = []

    def walk(entry: object) -> None:
        if isinstance(entry, str):
            if entry.endswith(".md"):
                pages.append(entry)
        elif isinstance(entry, dict):
            for value in entry.values():
                walk(value)
        elif isinstance(entry, list):
            for value in entry:
                walk(value)

    walk(config["nav"])
    return pages


@dataclass
class PageReport:
    page: str
    shown: set[str] = field(default_factory=set)  # names this page's definitions bind
    problems: list[Problem] = field(default_factory=list)


def _links(text: str, page: str) -> set[str]:
    """Docs-relative paths of the pages `page` links to."""
    here = Path(page).parent
    found = set()
    for match in LINK.finditer(text):
        target = match.group("target")
        if target.endswith(".md") and "://" not in target:
            found.add((here / target).as_posix().replace("/./", "/"))
    return {str(Path(p)).replace("\\", "/") for p in (_normal(f) for f in found)}


def _normal(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def check_page(page: str, text: str, earlier: dict[str, str]) -> PageReport:
    """Check one page's shown code. `earlier` maps each name shown on an earlier page to
    that page (docs-relative)."""
    report = PageReport(page)
    links = _links(text, page)
    available: dict[str, str] = {}  # name -> "page" | "library" | "earlier:<page>" | "hidden"
    expander = default_expander()
    for block in iter_blocks(text):
        if not block.is_python:
            continue
        where = f"{page}:{block.line}"
        try:
            source = expander.expand(block.source) if block.includes_snippet else block.source
        except Exception as error:  # a missing file or section: the build fails on it too
            report.problems.append(Problem(where, "<include>", "", f"does not expand: {error}"))
            continue
        try:
            definitions, imports = definitions_of(source, block.line,
                                                  assignments=block.includes_snippet)
        except SyntaxError as error:
            report.problems.append(Problem(where, "<block>", "", f"does not parse: {error}"))
            continue
        for stmt in imports:
            module = stmt.module or "" if isinstance(stmt, ast.ImportFrom) else ""
            if isinstance(stmt, ast.ImportFrom) and module.startswith("literate.figures") or (
                    isinstance(stmt, ast.Import) and any(a.name.startswith("literate.figures") for a in stmt.names)):
                report.problems.append(Problem(where, "<import>", module or "literate.figures",
                                               "no block imports plotting code"))
            for alias in stmt.names:
                bound = (alias.asname or alias.name).split(".")[0]
                source_module = module if isinstance(stmt, ast.ImportFrom) else alias.name
                if library(source_module):
                    available[bound] = "library"
                elif source_module.startswith("literate") and alias.name in earlier:
                    available[bound] = f"earlier:{earlier[alias.name]}"
                elif source_module.startswith("literate") or block.includes_snippet:
                    available[bound] = "hidden"
                else:  # a visible import of a reference (transformers) for a proof
                    available[bound] = "reference"
        block_names = {n for stmt in ast.parse(source).body for n in _defined_by(stmt)}
        for definition in definitions:
            label = "/".join(definition.names)
            for name in sorted(definition.needs):
                origin = available.get(name)
                if name in block_names or origin in ("page", "library"):
                    continue
                if origin == "reference" and not block.includes_snippet:
                    continue  # proof code may call the reference it compares against
                if origin is not None and origin.startswith("earlier:"):
                    target = origin.removeprefix("earlier:")
                    if target not in links:
                        report.problems.append(Problem(
                            f"{where}+{definition.line - 1}", label, name,
                            f"shown on {target}, which this page must link to"))
                    continue
                why = ("imported from a module no earlier page shows it from" if origin == "hidden"
                       else "not shown on this page or an earlier one")
                report.problems.append(Problem(f"{where}+{definition.line - 1}", label, name, why))
        for definition in definitions:
            for name in definition.names:
                available[name] = "page"
                report.shown.add(name)
        # Plain statements (x = ...) also bind names for later blocks on the same page.
        for stmt in ast.parse(source).body:
            for name in _defined_by(stmt):
                available.setdefault(name, "page")
    return report


def check_pages(docs: Path = ROOT / "docs") -> list[PageReport]:
    """Every Markdown page in reading order, each checked against what came before."""
    earlier: dict[str, str] = {}
    reports = []
    for page in nav_pages():
        report = check_page(page, (docs / page).read_text(encoding="utf-8"), earlier)
        reports.append(report)
        for name in report.shown:
            earlier.setdefault(name, page)
    return reports


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
                problems.append(Problem(f"{where}:{stmt.lineno}", "<import>", origin,
                                        "an exported file imports only the standard library and torch"))
            available.add((alias.asname or alias.name).split(".")[0])
    defined_later = {n for d in definitions for n in d.names}
    seen: set[str] = set()
    for definition in definitions:
        for name in sorted(definition.needs):
            if name in available or name in seen or name in definition.names:
                continue
            why = "defined below its first use" if name in defined_later else "never defined"
            problems.append(Problem(f"{where}:{definition.line}", "/".join(definition.names), name, why))
        seen |= set(definition.names)
    return problems
