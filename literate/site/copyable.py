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
claim proves. The same reading checks an exported era file (`literate.tools.export`): there
every name must be defined above its first use, or imported from the standard library
or torch.

The minimal blocks (`literate/minimal/`) and the hardened ones share names on purpose
(`RMSNorm`, `KVCache`): a name shown from `literate/minimal/` is kept apart from the same
name shown from the rest of the package, and an import is looked up among the names of
its own kind.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from literate.site.docblocks import ROOT, default_expander, iter_blocks, mkdocs_config
from literate.tools.standalone import (
    Problem,
    defined_by,
    definitions_of,
    library,
)

__all__ = ["PageReport", "check_page", "check_pages", "nav_pages"]

LINK = re.compile(r"\]\((?P<target>[^)\s#]+)(?:#[^)]*)?\)")
MINIMAL_INCLUDE = re.compile(r'--8<--\s+"literate/minimal/')


def shown_key(name: str, *, minimal: bool) -> str:
    """How a shown name is recorded: a minimal block's apart from the hardened one's."""
    return f"minimal:{name}" if minimal else name


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
    available: dict[
        str, str
    ] = {}  # name -> "page" | "library" | "earlier:<page>" | "hidden"
    expander = default_expander()
    for block in iter_blocks(text):
        if not block.is_python:
            continue
        where = f"{page}:{block.line}"
        try:
            source = (
                expander.expand(block.source)
                if block.includes_snippet
                else block.source
            )
        except (
            Exception
        ) as error:  # a missing file or section: the build fails on it too
            report.problems.append(
                Problem(where, "<include>", "", f"does not expand: {error}")
            )
            continue
        try:
            definitions, imports = definitions_of(
                source, block.line, assignments=block.includes_snippet
            )
        except SyntaxError as error:
            report.problems.append(
                Problem(where, "<block>", "", f"does not parse: {error}")
            )
            continue
        for stmt in imports:
            module = stmt.module or "" if isinstance(stmt, ast.ImportFrom) else ""
            if (
                isinstance(stmt, ast.ImportFrom)
                and module.startswith("literate.figures")
                or (
                    isinstance(stmt, ast.Import)
                    and any(a.name.startswith("literate.figures") for a in stmt.names)
                )
            ):
                report.problems.append(
                    Problem(
                        where,
                        "<import>",
                        module or "literate.figures",
                        "no block imports plotting code",
                    )
                )
            for alias in stmt.names:
                bound = (alias.asname or alias.name).split(".")[0]
                source_module = (
                    module if isinstance(stmt, ast.ImportFrom) else alias.name
                )
                if library(source_module):
                    available[bound] = "library"
                elif (
                    source_module.startswith("literate")
                    and (
                        key := shown_key(
                            alias.name,
                            minimal=source_module.startswith("literate.minimal"),
                        )
                    )
                    in earlier
                ):
                    available[bound] = f"earlier:{earlier[key]}"
                elif source_module.startswith("literate") or block.includes_snippet:
                    available[bound] = "hidden"
                else:  # a visible import of a reference (transformers) for a proof
                    available[bound] = "reference"
        block_names = {n for stmt in ast.parse(source).body for n in defined_by(stmt)}
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
                        report.problems.append(
                            Problem(
                                f"{where}+{definition.line - 1}",
                                label,
                                name,
                                f"shown on {target}, which this page must link to",
                            )
                        )
                    continue
                why = (
                    "imported from a module no earlier page shows it from"
                    if origin == "hidden"
                    else "not shown on this page or an earlier one"
                )
                report.problems.append(
                    Problem(f"{where}+{definition.line - 1}", label, name, why)
                )
        minimal = bool(MINIMAL_INCLUDE.search(block.source))
        for definition in definitions:
            for name in definition.names:
                available[name] = "page"
                report.shown.add(shown_key(name, minimal=minimal))
        # Plain statements (x = ...) also bind names for later blocks on the same page.
        for stmt in ast.parse(source).body:
            for name in defined_by(stmt):
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
