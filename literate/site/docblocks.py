"""How a Markdown page becomes a program: its Python blocks, its snippet includes, its claims.

One module, used by three readers that must agree:

* the root `conftest.py`, which runs every Python block of every page under pytest (sybil);
* the MkDocs hook (`literate/site/hooks.py`), which renders claims and builds the claim ledger;
* the tests in `tests/test_docblocks.py`, which check the two agree with the raw Markdown.

Conventions, all checked:

* A Python block is a fence whose info string starts with `python` or `py`; attributes after
  the language (``title="..."``, ``hl_lines="..."``) are allowed, and fences may be indented
  (inside an admonition or a collapsed solution).
* A block whose body holds a ``--8<--`` include is expanded by pymdownx.snippets' own
  preprocessor, configured exactly as in `mkdocs.yml`, before it runs.
* A claim is a plain paragraph of the text marked by the comment line above it,
  ``<!-- claim: some-id -->``, followed by a Python block that proves it (it must contain an
  ``assert``), either directly or folded in a collapsed ``??? proof "Proof"`` block
  (indented under it). The paragraph is prose, in the Markdown as on the page; the old
  admonition form (``!!! claim "id"``) is refused.
"""

from __future__ import annotations

import dis
import re
import types
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import markdown
import yaml

ROOT = Path(__file__).resolve().parents[2]
MKDOCS_YML = ROOT / "mkdocs.yml"

# An opening or closing fence, with the indentation (prefix) it sits at.
FENCE = re.compile(r"^(?P<prefix>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$", re.M)
PYTHON_INFO = re.compile(r"^(?:python|py)(?:\s|$)")
# A claim at column 0, or inside a fold (indented by a multiple of four): the marker line,
# then its paragraph at the same indentation (the lines up to the first blank one).
CLAIM = re.compile(
    r"^(?P<indent>(?: {4})*)<!-- claim: (?P<id>\S*) -->[ \t]*\n"
    r"(?P<body>(?:(?P=indent)\S.*\n)*)",
    re.M,
)
# The admonition form the site used before: refused, so no claim is missed silently.
OLD_CLAIM = re.compile(r"^\s*!!!\s+claim\b", re.M)


def claim_sentence(match: re.Match[str]) -> str:
    """The sentence(s) of a CLAIM match, dedented."""
    width = len(match.group("indent"))
    return "\n".join(line[width:] for line in match.group("body").split("\n")).strip()


CLAIM_ID = re.compile(r"^[a-z0-9]+(?:[.-][a-z0-9]+)*$")
# A claim's proof may sit in a collapsed block right under it: `??? proof "Proof"`.
PROOF_FOLD = re.compile(r'^\s*\?\?\?\+? proof(?: "[^"\n]*")?[ \t]*\n\s*$')


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    info: (
        str  # the whole info string, e.g. 'python title="literate/parts/attention.py"'
    )
    source: str  # the body, dedented by the fence's indentation
    start: int  # character offset of the opening fence
    end: int  # character offset just after the closing fence
    line: int  # 1-based line of the opening fence

    @property
    def is_python(self) -> bool:
        return bool(PYTHON_INFO.match(self.info.strip()))

    @property
    def includes_snippet(self) -> bool:
        return "--8<--" in self.source


def _dedent(body: str, prefix: str) -> str:
    if not prefix:
        return body
    lines = body.split("\n")
    return "\n".join(
        line[len(prefix) :] if line.startswith(prefix) else line.lstrip()
        for line in lines
    )


def iter_blocks(text: str) -> list[Block]:
    """All fenced code blocks of a Markdown text, in order (CommonMark fence rules, no nesting)."""
    blocks = []
    pos = 0
    while (opening := FENCE.search(text, pos)) is not None:
        fence, prefix = opening.group("fence"), opening.group("prefix")
        closing = None
        for candidate in FENCE.finditer(text, opening.end()):
            if (
                candidate.group("fence")[0] == fence[0]
                and len(candidate.group("fence")) >= len(fence)
                and not candidate.group("info").strip()
            ):
                closing = candidate
                break
        if closing is None:
            raise ValueError(
                f"unclosed code fence at line {text.count(chr(10), 0, opening.start()) + 1}"
            )
        body = text[opening.end() + 1 : closing.start()]
        blocks.append(
            Block(
                info=opening.group("info").strip(),
                source=_dedent(body, prefix),
                start=opening.start(),
                end=closing.end(),
                line=text.count("\n", 0, opening.start()) + 1,
            )
        )
        pos = closing.end()
    return blocks


# ---------------------------------------------------------------------------------------
# Snippet includes, expanded by pymdownx's own preprocessor with mkdocs.yml's settings.


class _TolerantLoader(yaml.SafeLoader):
    """Reads mkdocs.yml without importing what its `!!python/name:` tags point at."""


def _ignore_tag(loader: yaml.Loader, suffix: str, node: yaml.Node) -> Any:
    return None


_TolerantLoader.add_multi_constructor("tag:yaml.org,2002:python/", _ignore_tag)
_TolerantLoader.add_multi_constructor("!", _ignore_tag)


def mkdocs_config(path: Path = MKDOCS_YML) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=_TolerantLoader)


def snippet_config(path: Path = MKDOCS_YML) -> dict[str, Any]:
    """The `pymdownx.snippets` options from mkdocs.yml, with base paths made absolute."""
    for entry in mkdocs_config(path).get("markdown_extensions", []):
        if isinstance(entry, dict) and "pymdownx.snippets" in entry:
            options = dict(entry["pymdownx.snippets"] or {})
            break
    else:
        raise ValueError(f"{path} does not configure pymdownx.snippets")
    base = options.get("base_path", ["."])
    base = [base] if isinstance(base, str) else base
    options["base_path"] = [str((path.parent / b).resolve()) for b in base]
    return options


class SnippetExpander:
    """Expands `--8<--` lines exactly as the site build does."""

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = snippet_config() if options is None else options

    def expand(self, source: str) -> str:
        # A fresh Markdown instance per call: the preprocessor remembers what it has
        # already included and would otherwise refuse to include a section twice.
        md = markdown.Markdown(
            extensions=["pymdownx.snippets"],
            extension_configs={"pymdownx.snippets": self.options},
        )
        return "\n".join(md.preprocessors["snippet"].run(source.split("\n")))


@lru_cache(maxsize=1)
def default_expander() -> SnippetExpander:
    return SnippetExpander()


# ---------------------------------------------------------------------------------------
# Claims.


@dataclass(frozen=True)
class Claim:
    id: str
    text: str  # the claim's sentence(s), dedented
    line: int  # 1-based line of the `<!-- claim: id -->` marker
    proof: Block | None  # the Python block right after it


class ClaimError(ValueError):
    """A claim without a valid id or without a proving block."""


def iter_claims(text: str, *, where: str = "<page>") -> list[Claim]:
    """The claims of a page, each with the Python block that immediately follows it."""
    blocks = iter_blocks(text)
    claims = []
    for match in CLAIM.finditer(text):
        body = claim_sentence(match)
        line = text.count("\n", 0, match.start()) + 1
        proof = next((b for b in blocks if b.start >= match.end()), None)
        between = text[match.end() : proof.start] if proof else ""
        folded = bool(PROOF_FOLD.match(between))
        if proof is not None and (
            (between.strip() and not folded) or not proof.is_python
        ):
            proof = None
        claims.append(Claim(id=match.group("id"), text=body, line=line, proof=proof))
    return claims


def claim_problems(text: str, *, where: str = "<page>") -> list[str]:
    """Everything wrong with a page's claims, as readable sentences (empty if all is well)."""
    blocks = iter_blocks(text)
    problems = [
        f"{where}:{text.count(chr(10), 0, m.start()) + 1}: write a claim as its paragraph "
        "under a '<!-- claim: some-id -->' line, not as a '!!! claim' box"
        for m in OLD_CLAIM.finditer(text)
        if not any(b.start <= m.start() < b.end for b in blocks)  # code may quote it
    ]
    for claim in iter_claims(text, where=where):
        label = f"{where}:{claim.line}: claim {claim.id!r}"
        if not CLAIM_ID.match(claim.id):
            problems.append(f"{label}: id must be lowercase words joined by '-' or '.'")
        if not claim.text:
            problems.append(f"{label}: has no sentence")
        if claim.proof is None:
            problems.append(
                f"{label}: must be followed directly by a Python block that proves it"
            )
        elif "assert" not in claim.proof.source:
            problems.append(f"{label}: its proving block contains no assert")
    return problems


# ---------------------------------------------------------------------------------------
# The sybil parser: one example per Python block, snippets expanded before running.


INCLUDE = re.compile(r'^--8<-- "(?P<path>[^":]+):(?P<section>[a-z][-_0-9a-z]*)"$')


def _origin(block: Block, page: str, base_paths: list[str]) -> tuple[str, int]:
    """(file name, line offset) to compile a block with, so tracebacks point at real lines.

    A block that is exactly one section include is attributed to the included file, at the
    section's own lines; any other block to the page, at the block's lines.
    """
    match = INCLUDE.match(block.source.strip())
    if match:
        marker = f"# --8<-- [start:{match.group('section')}]"
        for base in base_paths:
            path = Path(base) / match.group("path")
            if path.is_file():
                for number, line in enumerate(
                    path.read_text(encoding="utf-8").splitlines(), 1
                ):
                    if line.strip() == marker:
                        return str(path), number
    return page, block.line


# A page's minimal code (sections of `literate/minimal/`) and its hardened code share
# one namespace, and a hardened fold may bind a name the minimal code calls
# (`split_heads`, `MultiHeadAttention`): a reader who reuses the minimal class after
# the fold would get the hardened part. So the page records what each minimal block
# defined and the globals its code reads, and its last check
# (`minimal_code_still_runs`) refuses a page where a minimal definition still bound at
# the end reads a global that was rebound after it.
MINIMAL_DEFINITIONS = "__minimal_definitions__"
_MISSING = object()


def _global_names(value: object) -> set[str]:
    """The global names a function's code, or a class's methods', read."""
    names: set[str] = set()

    def walk(code: types.CodeType) -> None:
        names.update(
            i.argval
            for i in dis.get_instructions(code)
            if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")  # not attributes: `self.ffn`
        )
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                walk(const)

    functions = [value] if isinstance(value, types.FunctionType) else []
    if isinstance(value, type):
        for member in vars(value).values():
            member = member.fget if isinstance(member, property) else member
            functions.append(getattr(member, "__func__", member))
    for function in functions:
        if isinstance(function, types.FunctionType):
            walk(function.__code__)
    return names


def _record_minimal(namespace: dict[str, Any], before: dict[str, Any]) -> None:
    records = namespace.setdefault(MINIMAL_DEFINITIONS, [])
    for name, value in namespace.items():
        if before.get(name, _MISSING) is value:
            continue
        if isinstance(value, type | types.FunctionType):
            reads = {g: namespace[g] for g in _global_names(value) if g in namespace}
            records.append((name, value, reads))


def minimal_code_still_runs(namespace: dict[str, Any]) -> list[str]:
    """Each minimal definition still bound under its name at the page's end whose code
    reads a global that now means something else, as a sentence (empty: none)."""
    problems = []
    for name, value, reads in namespace.get(MINIMAL_DEFINITIONS, []):
        if namespace.get(name, _MISSING) is not value:
            continue  # the name was given to something else, in the open
        changed = sorted(
            g for g, v in reads.items() if namespace.get(g, _MISSING) is not v
        )
        if changed:
            problems.append(
                f"the minimal {name} shown on this page now calls the page's later "
                f"{', '.join(changed)}: bind {name} again after the fold that replaced "
                f"them (from literate.minimal.<module> import {name})"
            )
    return problems


def block_runner(expander: SnippetExpander | None = None):
    """A sybil evaluator: expand includes, then exec in the page's namespace."""

    def run_block(example: Any) -> None:
        block: Block = example.parsed
        snippets = expander or default_expander()
        source = (
            snippets.expand(block.source) if block.includes_snippet else block.source
        )
        filename, offset = _origin(
            block, str(example.path), snippets.options["base_path"]
        )
        namespace = example.namespace
        minimal = block.includes_snippet and "literate/minimal/" in block.source
        before = dict(namespace) if minimal else {}
        exec(compile("\n" * offset + source, filename, "exec"), namespace)
        if minimal:
            _record_minimal(namespace, before)

    return run_block


def _check_minimal(example: Any) -> None:
    problems = minimal_code_still_runs(example.namespace)
    if problems:
        raise AssertionError("; ".join(problems))


def python_block_parser(expander: SnippetExpander | None = None):
    """A sybil parser yielding one region per Python fence (indented or titled ones
    too), and a last one per page that checks its minimal code still runs.

    `expander` defaults to the one configured from mkdocs.yml; tests pass their own.
    """
    from sybil import Region

    evaluator = block_runner(expander)

    def parse(document: Any):
        blocks = [b for b in iter_blocks(document.text) if b.is_python]
        for block in blocks:
            yield Region(block.start, block.end, parsed=block, evaluator=evaluator)
        if blocks:  # the page's last check: its minimal code still runs as shown
            end = len(document.text)
            yield Region(end, end, parsed=None, evaluator=_check_minimal)

    return parse


def nav_order(nav: object) -> list[str]:
    """The page paths of mkdocs.yml's `nav`, in reading order."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in nav_order(value)]
    if isinstance(nav, list):
        return [p for item in nav for p in nav_order(item)]
    return []
