"""What is shown can be copied: the rule of `literate.site.copyable`, on every page.

Every name a shown definition uses is shown on that page or an earlier one (imported
from `literate` with a link to the page that shows it), or comes from the standard
library, torch or numpy; no block imports the plotting code; every shown line fits the
content column (88 characters: the site's CSS makes 92 fit at a 1280-pixel viewport,
and the browser test checks that no code block scrolls).
"""

from __future__ import annotations

import pytest

from literate.site.copyable import check_page, check_pages, nav_pages
from literate.site.docblocks import ROOT, default_expander, iter_blocks
from literate.tools.standalone import Problem, check_module_source

MAX_LINE = 88
PAGES = nav_pages()


@pytest.fixture(scope="module")
def reports():
    return {r.page: r for r in check_pages()}


@pytest.mark.parametrize("page", PAGES)
def test_every_name_a_shown_definition_uses_is_shown(page, reports):
    problems = reports[page].problems
    assert not problems, "\n".join(map(str, problems))


@pytest.mark.parametrize("page", PAGES)
def test_shown_code_fits_the_column(page):
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    expander = default_expander()
    long = []
    for block in iter_blocks(text):
        if not block.is_python:
            continue
        source = (
            expander.expand(block.source) if block.includes_snippet else block.source
        )
        for number, line in enumerate(source.splitlines(), 1):
            if len(line) > MAX_LINE:
                long.append(
                    f"{page}:{block.line} (+{number}): {len(line)} chars: {line.strip()[:60]}"
                )
    assert not long, "\n".join(long)


# The checker itself, on small made-up pages: it must notice what it is there to notice.


def _problems(text: str, earlier: dict[str, str] | None = None) -> list[Problem]:
    return check_page("part/page.md", text, earlier or {}).problems


def fence(code: str) -> str:
    return f"```python\n{code}\n```\n"


def test_a_helper_defined_on_the_page_or_imported_from_torch_is_fine():
    text = (
        fence("import torch")
        + fence("def helper(x):\n    return x")
        + fence("def f(x):\n    return helper(torch.relu(x))")
    )
    assert _problems(text) == []


def test_an_unshown_helper_is_reported():
    problems = _problems(fence("def f(x):\n    return helper(x)"))
    assert [(p.definition, p.name) for p in problems] == [("f", "helper")]


def test_a_helper_imported_from_literate_but_never_shown_is_reported():
    text = fence("from literate.parts.checks import positive_int") + fence(
        "def f(n):\n    return positive_int('n', n)"
    )
    assert [p.name for p in _problems(text)] == ["positive_int"]


def test_a_name_shown_earlier_needs_a_link_to_its_page():
    earlier = {"positive_int": "part/first.md"}
    body = fence("from literate.parts.checks import positive_int") + fence(
        "def f(n):\n    return positive_int('n', n)"
    )
    assert [p.name for p in _problems(body, earlier)] == ["positive_int"]
    assert _problems("See [the first page](first.md).\n\n" + body, earlier) == []


def test_annotations_defaults_and_bases_count():
    problems = _problems(
        fence(
            "class A(Base):\n    def f(self, x: Kind = DEFAULT) -> Out:\n        return x"
        )
    )
    assert sorted(p.name for p in problems) == ["Base", "DEFAULT", "Kind", "Out"]


def test_importing_the_plotting_code_is_reported():
    assert [
        p.why for p in _problems(fence("from literate.figures.attention import x"))
    ] == ["no block imports plotting code"]


def test_module_source_wants_definitions_above_their_use_and_no_other_imports():
    good = "import math\n\ndef a():\n    return math.pi\n\ndef b():\n    return a()\n"
    assert check_module_source(good) == []
    later = "def b():\n    return a()\n\ndef a():\n    return 1\n"
    assert [p.why for p in check_module_source(later)] == [
        "defined below its first use"
    ]
    foreign = "from literate.parts.checks import positive_int\n"
    assert [p.name for p in check_module_source(foreign)] == ["literate.parts.checks"]
