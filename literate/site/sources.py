"""The test files a page points at, served with the site so the pointer is a link; and
each figure a link to its own full-size SVG (`figures_open_full_size`).

A page that names a test file in inline code (`` `tests/test_cache.py` ``, or a pytest
id `` `tests/test_cache.py::test_name` ``) gets a link to a copy of that file the site
serves at `source/tests/<name>.py` (`on_files` adds them, `on_page_markdown` links
them); code blocks are left as they are.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from literate.site.docblocks import ROOT

__all__ = [
    "TEST_POINTER",
    "SOURCE_DIR",
    "pointed_files",
    "link_test_pointers",
    "figures_open_full_size",
]

SOURCE_DIR = "source"
TEST_POINTER = re.compile(
    r"(?<!\[)`(?P<path>tests/[A-Za-z0-9_/]+\.py)(?P<node>::[^`]*)?`"
)
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def _prose_lines(markdown: str) -> list[tuple[bool, str]]:
    """Each line with whether it is prose (outside fenced code)."""
    lines, fence = [], None
    for line in markdown.split("\n"):
        opened = FENCE.match(line)
        if opened and fence is None:
            fence = opened.group(1)
            lines.append((False, line))
        elif (
            opened
            and opened.group(1).startswith(fence[0])
            and len(opened.group(1)) >= len(fence)
        ):
            fence = None
            lines.append((False, line))
        else:
            lines.append((fence is None, line))
    return lines


def pointed_files(docs: Path = ROOT / "docs") -> dict[str, Path]:
    """Served uri -> file, for every test file a page's prose names."""
    found = {}
    for page in sorted(docs.rglob("*.md")):
        for prose, line in _prose_lines(page.read_text(encoding="utf-8")):
            for match in TEST_POINTER.finditer(line) if prose else ():
                path = ROOT / match.group("path")
                if not path.is_file():
                    raise FileNotFoundError(
                        f"{page.relative_to(docs)} names {match.group('path')}, "
                        "which does not exist"
                    )
                found[f"{SOURCE_DIR}/{match.group('path')}"] = path
    return found


def link_test_pointers(markdown: str, page: str) -> str:
    """The page's inline-code pointers to test files, as links to the served copies."""
    base = posixpath.dirname(page) or "."

    def link(match: re.Match[str]) -> str:
        target = posixpath.relpath(f"{SOURCE_DIR}/{match.group('path')}", base)
        return f"[{match.group(0)}]({target})"

    return "\n".join(
        TEST_POINTER.sub(link, line) if prose else line
        for prose, line in _prose_lines(markdown)
    )


FIGURE_LINE = re.compile(
    r"^(?P<indent>\s*)!\[(?P<alt>[^\]]*)\]\((?P<svg>(?:[^()\s]*/)?figures/[\w-]+-"
    r"(?:light|dark)\.svg)(?P<scheme>#only-(?:light|dark))?\)(?P<attrs>\{[^}\n]*\})?\s*$"
)


def figures_open_full_size(markdown: str) -> str:
    """Each generated figure (an image line of its own, outside code) wrapped in a link
    to its SVG: a click opens it full size, to zoom on a phone."""

    def wrap(line: str) -> str:
        m = FIGURE_LINE.match(line)
        if not m:
            return line
        image = f"![{m['alt']}]({m['svg']}{m['scheme'] or ''}){m['attrs'] or ''}"
        return f"{m['indent']}[{image}]({m['svg']}){{ .figure-link }}"

    return "\n".join(
        wrap(line) if prose else line for prose, line in _prose_lines(markdown)
    )
