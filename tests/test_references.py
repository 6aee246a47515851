"""Citations: every work cited in the prose links to its entry on the references page.

A citation is an author name and a year, "Vaswani et al. (2017, sec. 3.2.1)" or
"Press & Wolf 2017"; in the prose (outside code) it must sit inside a link to
`appendix/references.md#<id>`, and the id must exist there. Code and docstrings cite the
same way without links (they are Python).
"""

from __future__ import annotations

import re

import pytest

from literate.site.copyable import nav_pages
from literate.site.docblocks import ROOT, iter_blocks

REFERENCES = ROOT / "docs" / "appendix" / "references.md"
CITATION = re.compile(
    r"\b(?P<name>[A-Z][a-zA-Z-]+(?: et al\.| (?:&|and) [A-Z][a-zA-Z-]+)?)"
    r"(?: \(| )(?P<year>(?:19|20)\d\d[ab]?)\b"
)
LINK = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]*)\)")
ANCHOR = re.compile(r"\{ #(?P<id>[a-z0-9-]+) \}")
NOT_AUTHORS = {
    "The",
    "In",
    "Since",
    "From",
    "Until",
    "By",
    "Of",
    "At",
    "On",
    "To",
    "GPT",
    "Llama",
    "Qwen",
    "Gemma",
    "December",
    "November",
    "PyTorch",
    "Chapter",
}


def anchors() -> set[str]:
    return set(ANCHOR.findall(REFERENCES.read_text(encoding="utf-8")))


def prose(text: str) -> str:
    """The page without its code blocks, inline code and math."""
    for block in reversed(iter_blocks(text)):
        text = text[: block.start] + text[block.end :]
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.sub(r"\$[^$\n]*\$", "", text)


def unlinked_citations(text: str, known: set[str]) -> list[str]:
    body = prose(text)
    linked = []
    problems = []
    for link in LINK.finditer(body):
        target = link.group("target")
        if "references.md#" in target:
            anchor = target.split("#", 1)[1]
            if anchor not in known:
                problems.append(f"link to an unknown reference #{anchor}")
        linked.append((link.start(), link.end(), "references.md#" in target))
    for match in CITATION.finditer(body):
        if match.group("name").split()[0] in NOT_AUTHORS:
            continue
        inside = [ref for start, end, ref in linked if start <= match.start() < end]
        if not inside or not inside[0]:
            line = body.count("\n", 0, match.start()) + 1
            problems.append(
                f"~line {line}: {match.group(0)!r} is not a link to the references"
            )
    return problems


@pytest.mark.parametrize(
    "page", [p for p in nav_pages() if p != "appendix/references.md"]
)
def test_every_citation_links_to_the_references_page(page):
    problems = unlinked_citations(
        (ROOT / "docs" / page).read_text(encoding="utf-8"), anchors()
    )
    assert not problems, "\n".join(problems)


def test_the_checker_notices_an_unlinked_and_a_dangling_citation():
    known = {"vaswani-2017"}
    good = "As [Vaswani et al. (2017)](../appendix/references.md#vaswani-2017) show."
    assert unlinked_citations(good, known) == []
    assert len(unlinked_citations("As Vaswani et al. (2017, sec. 3) show.", known)) == 1
    dangling = "[Press & Wolf 2017](../appendix/references.md#press-2017)"
    assert unlinked_citations(dangling, known) == [
        "link to an unknown reference #press-2017"
    ]
    assert unlinked_citations("```python\n# Vaswani et al. 2017\n```\n", known) == []
