"""The test files a page points at, served with the site so the pointer is a link.

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

__all__ = ["TEST_POINTER", "SOURCE_DIR", "pointed_files", "link_test_pointers"]

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
