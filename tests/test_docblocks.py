"""The page is the program: every Python block under docs/ is collected and run, includes are
expanded exactly as the site does, snippet sections are whole definitions, claims are proved,
and chapters end with exercises whose solutions run."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from pymdownx.snippets import SnippetMissingError
from sybil import Sybil

from literate.site.docblocks import (
    ROOT,
    SnippetExpander,
    claim_problems,
    iter_blocks,
    iter_claims,
    mkdocs_config,
    python_block_parser,
    snippet_config,
)

DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
LITERATE = sorted((ROOT / "literate").rglob("*.py"))


def run_page(path: Path, expander: SnippetExpander | None = None) -> dict:
    """Run one Markdown file through the same sybil parser as conftest.py; return its namespace."""
    sybil = Sybil(
        parsers=[python_block_parser(expander)],
        path=str(path.parent),
        patterns=[path.name],
    )
    document = sybil.parse(path)
    for example in document.examples():
        example.evaluate()
    return document.namespace


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, SnippetExpander]:
    module = tmp_path / "module.py"
    module.write_text(
        "# --8<-- [start:double]\n"
        "def double(x):\n"
        "    return 2 * x\n"
        "# --8<-- [end:double]\n",
        encoding="utf-8",
    )
    return tmp_path, SnippetExpander(
        {"base_path": [str(tmp_path)], "check_paths": True}
    )


# ---------------------------------------------------------------------------------------
# The collector


def test_included_code_is_executed_and_visible_to_later_blocks(project):
    root, expander = project
    page = root / "page.md"
    page.write_text(
        "# Page\n\n"
        '```python title="module.py"\n--8<-- "module.py:double"\n```\n\n'
        "```python\nresult = double(21)\n```\n",
        encoding="utf-8",
    )
    namespace = run_page(page, expander)
    assert namespace["result"] == 42
    assert namespace["double"].__code__.co_filename == str(
        root / "module.py"
    )  # tracebacks point at the module


def test_missing_section_fails(project):
    root, expander = project
    page = root / "page.md"
    page.write_text('```python\n--8<-- "module.py:triple"\n```\n', encoding="utf-8")
    with pytest.raises(SnippetMissingError, match="triple"):
        run_page(page, expander)


def test_missing_file_fails(project):
    root, expander = project
    page = root / "page.md"
    page.write_text('```python\n--8<-- "nowhere.py:double"\n```\n', encoding="utf-8")
    with pytest.raises(SnippetMissingError, match="nowhere.py"):
        run_page(page, expander)


def test_fences_with_attributes_indentation_and_tildes_all_run(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nseen = ['plain']\n```\n\n"
        '```python title="x.py" hl_lines="1"\nseen.append("title")\n```\n\n'
        "```py\nseen.append('py')\n```\n\n"
        "~~~python\nseen.append('tilde')\n~~~\n\n"
        '??? success "Solution"\n    ```python\n    seen.append("indented")\n    ```\n\n'
        "````markdown\n```python\nseen.append('NOT RUN: inside a markdown example')\n```\n````\n\n"
        "```text\nnot python\n```\n",
        encoding="utf-8",
    )
    assert run_page(page)["seen"] == ["plain", "title", "py", "tilde", "indented"]


def test_a_failing_block_fails_with_the_page_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Intro\n\n```python\nx = 1\nraise RuntimeError('boom')\n```\n", encoding="utf-8"
    )
    with pytest.raises(RuntimeError, match="boom") as info:
        run_page(page)
    assert info.traceback[-1].lineno + 1 == 5  # pytest line numbers are 0-based


def test_expander_is_configured_exactly_as_mkdocs():
    options = snippet_config()
    assert options["check_paths"] is True
    assert options["base_path"] == [str(ROOT)]
    raw = next(
        e["pymdownx.snippets"]
        for e in mkdocs_config()["markdown_extensions"]
        if isinstance(e, dict) and "pymdownx.snippets" in e
    )
    assert {k: v for k, v in options.items() if k != "base_path"} == {
        k: v for k, v in raw.items() if k != "base_path"
    }


# ---------------------------------------------------------------------------------------
# Every block under docs/ is collected

FENCE_LINE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*(python|py)\b", re.M)


def test_every_python_fence_under_docs_is_collected():
    """An independent count of Python fences equals what the collector yields, page by page."""
    parser = python_block_parser()
    total = 0
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        expected = len(FENCE_LINE.findall(text))

        class Doc:  # the parser only reads .text
            pass

        doc = Doc()
        doc.text = text
        regions = list(parser(doc))
        blocks = [r for r in regions if r.parsed is not None]
        assert len(blocks) == expected, (
            f"{page}: {len(blocks)} collected, {expected} fences"
        )
        # and, on a page with code, one last check that its minimal code still runs
        assert len(regions) - len(blocks) == (1 if blocks else 0), page
        collected = len(blocks)
        total += collected
    assert total >= 30


def test_skips_carry_a_reason():
    for page in PAGES:
        for directive in re.findall(
            r"<!--\s*skip:([^>]*)-->", page.read_text(encoding="utf-8")
        ):
            assert "reason" in directive, (
                f"{page}: a skip without a written reason: {directive!r}"
            )


def test_every_include_on_the_site_expands():
    expander = SnippetExpander()
    count = 0
    for page in PAGES:
        for block in iter_blocks(page.read_text(encoding="utf-8")):
            if block.includes_snippet:
                expanded = expander.expand(block.source)
                assert "--8<--" not in expanded
                ast.parse(expanded)
                count += 1
    assert count >= 5


# ---------------------------------------------------------------------------------------
# Snippet sections in literate/ are whole top-level definitions

MARKER = re.compile(
    r"^(?P<indent>[ \t]*)# --8<-- \[(?P<kind>start|end):(?P<name>[^\]]*)\]\s*$"
)
# What pymdownx would take for a marker anywhere in a line (it drops such a line whole).
TRAILING_MARKER = re.compile(r"--8<-- \[(?:start|end):[a-z][-_0-9a-z]*\]")


def sections(path: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    open_name, open_lines = None, []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = MARKER.match(line)
        if TRAILING_MARKER.search(line) and not match:
            raise AssertionError(
                f"{path}:{number}: malformed or trailing snippet marker: {line!r}"
            )
        if not match:
            if open_name:
                open_lines.append(line)
            continue
        where = f"{path}:{number}"
        assert match.group("indent") == "", f"{where}: markers must start at column 0"
        assert re.fullmatch(r"[a-z][-_0-9a-z]*", match.group("name")), (
            f"{where}: bad section name"
        )
        if match.group("kind") == "start":
            assert open_name is None, f"{where}: section {open_name!r} is still open"
            assert match.group("name") not in found, f"{where}: duplicate section"
            open_name, open_lines = match.group("name"), []
        else:
            assert match.group("name") == open_name, (
                f"{where}: end of {match.group('name')!r}, open is {open_name!r}"
            )
            found[open_name] = "\n".join(open_lines)
            open_name = None
    assert open_name is None, f"{path}: section {open_name!r} never ends"
    return found


@pytest.mark.parametrize("path", LITERATE, ids=lambda p: str(p.relative_to(ROOT)))
def test_sections_are_whole_top_level_definitions(path):
    for name, source in sections(path).items():
        tree = ast.parse(source)  # fails if the section cuts a definition in half
        assert tree.body, f"{path}:{name} is empty"
        for node in tree.body:
            whole = (
                ast.FunctionDef,
                ast.AsyncFunctionDef,
                ast.ClassDef,
                ast.Assign,
                ast.AnnAssign,
            )
            assert isinstance(node, whole), (
                f"{path}:{name}: a section holds whole functions, classes or assignments, "
                f"found {type(node).__name__}"
            )


def test_sections_checker_catches_a_cut_definition(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text(
        "def f():\n# --8<-- [start:half]\n    return 1\n# --8<-- [end:half]\n",
        encoding="utf-8",
    )
    with pytest.raises(SyntaxError):
        ast.parse(sections(broken)["half"])


# ---------------------------------------------------------------------------------------
# Claims and exercises


def test_every_claim_on_the_site_is_proved_and_ids_are_unique():
    ids: dict[str, Path] = {}
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert claim_problems(text, where=str(page)) == []
        for claim in iter_claims(text):
            assert claim.id not in ids, (
                f"claim {claim.id} on {page} and {ids[claim.id]}"
            )
            ids[claim.id] = page
    assert len(ids) >= 8


@pytest.mark.parametrize(
    "text, problem",
    [
        (
            "<!-- claim: a.b -->\nA sentence.\n\nSome prose.\n\n```python\nassert True\n```\n",
            "followed directly",
        ),
        ("<!-- claim: a.b -->\nA sentence.\n\n```python\nx = 1\n```\n", "no assert"),
        (
            "<!-- claim: a.b -->\nA sentence.\n\n```text\nassert\n```\n",
            "followed directly",
        ),
        ("<!-- claim: a.b -->\nA sentence.\n", "followed directly"),
        (
            "<!-- claim: Bad_Id -->\nA sentence.\n\n```python\nassert True\n```\n",
            "lowercase",
        ),
        ("<!-- claim: a.b -->\n\n```python\nassert True\n```\n", "no sentence"),
    ],
)
def test_claim_problems_are_reported(text, problem):
    problems = claim_problems(text)
    assert len(problems) == 1 and problem in problems[0]


def test_a_claim_may_fold_its_proof():
    text = '<!-- claim: a.b -->\nA sentence.\n\n??? proof "Proof"\n    ```python\n    assert 1 + 1 == 2\n    ```\n'
    (claim,) = iter_claims(text)
    assert claim_problems(text) == []
    assert claim.proof.source.strip() == "assert 1 + 1 == 2"
    other = text.replace('??? proof "Proof"', '??? note "Not a proof"')
    assert "followed directly" in claim_problems(other)[0]


def test_a_claim_inside_a_fold_keeps_its_proof_fold_inside_it():
    text = (
        '??? note "A study"\n    Some prose.\n\n    <!-- claim: a.b -->\n    A sentence\n'
        '    on two lines.\n\n    ??? proof "Proof"\n        ```python\n'
        "        assert 1 + 1 == 2\n        ```\n\n    More of the study.\n"
    )
    (claim,) = iter_claims(text)
    assert claim_problems(text) == []
    assert claim.text == "A sentence\non two lines."  # the study's prose is not in it
    assert claim.proof.source.strip() == "assert 1 + 1 == 2"
    assert claim.line == 4


def test_the_old_claim_box_is_refused():
    text = '!!! claim "a.b"\n    A sentence.\n\n```python\nassert True\n```\n'
    (problem,) = claim_problems(text)
    assert "'<!-- claim: some-id -->'" in problem and problem.startswith("<page>:1:")
    quoted = "````markdown\n" + text + "````\n"  # a page may show the old form in code
    assert claim_problems(quoted) == []


def test_a_claim_is_its_paragraph_only():
    text = "<!-- claim: a.b -->\nA sentence.\n\nNext paragraph.\n\n```python\nassert 1\n```\n"
    (claim,) = iter_claims(text)
    assert claim.text == "A sentence." and claim.proof is None  # prose came between


def test_a_good_claim_passes():
    text = "<!-- claim: a.b -->\nA sentence\non two lines.\n\n```python\nassert 1 + 1 == 2\n```\n"
    (claim,) = iter_claims(text)
    assert claim_problems(text) == []
    assert claim.text == "A sentence\non two lines."
    assert claim.proof.source.strip() == "assert 1 + 1 == 2"


def chapter_pages() -> list[Path]:
    return [
        p
        for p in PAGES
        if re.match(
            r"^---\n(?:.*\n)*?chapter: \d+\n(?:.*\n)*?---\n",
            p.read_text(encoding="utf-8"),
        )
    ]


EXERCISE = re.compile(
    r'^\?\?\? exercise "Exercise \d+: [^"]+"\n(?P<body>(?:(?:    .*)?\n)*)', re.M
)


@pytest.mark.parametrize(
    "page", chapter_pages(), ids=lambda p: str(p.relative_to(DOCS))
)
def test_chapters_end_with_three_to_six_exercises_with_runnable_solutions(page):
    """At least three (one of them builds something: issue 29), at most six, each with
    a folded solution that runs."""
    text = page.read_text(encoding="utf-8")
    exercises = list(EXERCISE.finditer(text))
    assert 3 <= len(exercises) <= 6, f"{page}: {len(exercises)} exercises"
    headings = [m.start() for m in re.finditer(r"^## ", text, re.M)]
    assert text.rfind("\n## Exercises\n") == max(headings) - 1, (
        "Exercises must be the last section"
    )
    for exercise in exercises:
        body = exercise.group("body")
        assert '    ??? success "Solution"' in body, (
            "a solution sits in a collapsed block"
        )
        solution = body.split('??? success "Solution"', 1)[1]
        assert any(b.is_python for b in iter_blocks(solution)), (
            "the solution has a Python block that runs"
        )


def test_there_is_at_least_one_chapter():
    assert any(
        p.relative_to(DOCS).as_posix() == "attention/scaled-dot-product.md"
        for p in chapter_pages()
    )


def test_a_minimal_definition_whose_globals_a_later_fold_rebinds_is_found():
    from literate.site.docblocks import _record_minimal, minimal_code_still_runs

    page: dict = {}
    exec("def helper(x):\n    return x + 1\n", page)
    before = dict(page)
    exec(  # a minimal section: reads `helper` as a global, `self.scale` as an attribute
        "class Layer:\n    scale = 2\n    def run(self, x):\n"
        "        return helper(x) * self.scale\n",
        page,
    )
    _record_minimal(page, before)
    assert minimal_code_still_runs(page) == []
    page["scale"] = "an attribute's name rebound: not a global the class reads"
    assert minimal_code_still_runs(page) == []
    exec("def helper(x, *, checked):\n    return x + 1\n", page)  # a hardened fold
    (problem,) = minimal_code_still_runs(page)
    assert problem.startswith(
        "the minimal Layer shown on this page now calls the page's"
    )
    assert "later helper:" in problem
    exec("class Layer:\n    pass\n", page)  # bound again, as the pages do after a fold
    assert minimal_code_still_runs(page) == []
