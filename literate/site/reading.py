"""The reading line: what a reader meets on each page with every fold closed.

    python -m literate.site.reading          # a table, one row per page of the nav
    python -m literate.site.reading --json

A page is read as the site builds it: its `--8<--` includes expanded by the same
pymdownx.snippets configuration (`literate.site.docblocks.SnippetExpander`). Then, line by
line:

* a collapsed block (`??? kind "title"`, not `???+`) hides its indented body: folded;
* `words`: the words of visible text outside code fences (claim sentences included:
  a claim is a paragraph of the text under a `<!-- claim: id -->` line), HTML comments
  and the front matter excluded;
* `code`: the visible lines inside code fences, blank ones included (a reader scrolls
  past them), fence lines excluded; `longest`: the longest visible code block. Counted
  this way the minutes equal those of the shared checker (`shared/tools/reading.py`);
* `proof`: the visible code lines that prove a claim: the fences after a claim's
  paragraph before the next paragraph of prose;
* `minutes`: words / 200 + code / 8 (a careful reader of code reads 8 lines a minute);
* `figures`, and the minutes read before the first one (`first`) and in the longest
  stretch without one (`gap`, the page's end included).

The budgets a test holds (tests/test_reading.py): a chapter <= 45 minutes, the site
<= 8 hours, proof code <= 5% of a chapter's visible lines, no visible code block over
40 lines. The site prints each chapter's minutes where its Markdown says
`<!-- reading-time -->`, and the table of every chapter's where it says
`<!-- reading-times -->` (the home page).
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import asdict, dataclass
from functools import lru_cache

import yaml

from literate.site.docblocks import ROOT, default_expander, mkdocs_config, nav_order

__all__ = [
    "BUDGET",
    "PageReading",
    "measure",
    "read_site",
    "reading_time",
    "reading_times",
    "main",
]

# the budgets tests/test_reading.py holds
BUDGET = {
    "chapter_minutes": 45,
    "site_hours": 8,
    "proof_share": 0.05,
    "block_lines": 40,
}
WORDS_PER_MINUTE, CODE_LINES_PER_MINUTE = 200, 8
READING_TIME = "<!-- reading-time -->"
READING_TIMES = "<!-- reading-times -->"

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})")
FOLD = re.compile(r"^(\s*)\?\?\?(?!\+)")
CLAIM = re.compile(r"^(\s*)<!-- claim: ")
FIGURE = re.compile(r"^\s*!\[")
WORD = re.compile(r"[A-Za-z0-9$\\][^\s]*")
FRONT_MATTER = re.compile(r"\A---[ \t]*\n(?P<yaml>.*?\n)---[ \t]*\n", re.S)


@dataclass(frozen=True)
class PageReading:
    page: str
    chapter: int | None
    needs: tuple[int, ...]  # the chapters to read first (front matter `needs:`)
    title: str
    words: int
    code: int
    proof: int
    visible: int  # visible lines (prose, code, claims), blank lines excluded
    folded: int
    claims: int
    longest: int
    figures: int
    first: float
    gap: float

    @property
    def minutes(self) -> float:
        return self.words / WORDS_PER_MINUTE + self.code / CODE_LINES_PER_MINUTE

    @property
    def proof_share(self) -> float:
        return self.proof / max(1, self.visible)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def measure(markdown: str, *, page: str = "<page>") -> PageReading:
    """The reading line of one page's Markdown, includes already expanded."""
    front = FRONT_MATTER.match(markdown)
    meta = yaml.safe_load(front.group("yaml")) or {} if front else {}
    chapter, needs = meta.get("chapter"), tuple(meta.get("needs") or ())
    if front:
        markdown = markdown[front.end() :]
    title = next(
        (line[2:].strip() for line in markdown.splitlines() if line.startswith("# ")),
        page,
    )
    words = code = proof = visible = folded = claims = longest = 0
    block = 0  # lines of the visible code block being read
    fence: str | None = None  # the open fence's marker
    fold_body: int | None = None  # the indent a collapsed block's body has
    in_claim = False  # reading a claim's paragraph (up to its first blank line)
    after_claim = False  # the fences that follow prove the claim
    marks: list[float] = []  # minutes read at each visible figure

    def minutes() -> float:
        return words / WORDS_PER_MINUTE + code / CODE_LINES_PER_MINUTE

    for line in markdown.splitlines():
        stripped = line.strip()
        outside = fence is None
        if outside and stripped:
            if fold_body is not None and _indent(line) < fold_body:
                fold_body = None
        if outside and not stripped:
            in_claim = False
        if fold_body is not None:
            folded += 1
            opened = FENCE.match(line)
            if opened and fence is None:
                fence = opened.group(2)
            elif (
                opened
                and opened.group(2).startswith(fence[0])
                and (len(opened.group(2)) >= len(fence))
            ):
                fence = None
            continue
        opened = FENCE.match(line)
        if opened:
            if fence is None:
                fence, block = opened.group(2), 0
            elif opened.group(2).startswith(fence[0]) and len(opened.group(2)) >= len(
                fence
            ):
                fence, longest = None, max(longest, block)
            continue
        if fence is not None:
            code, block, visible = code + 1, block + 1, visible + 1
            proof += after_claim
            continue
        if CLAIM.match(line):
            claims, after_claim, in_claim = claims + 1, True, True
            continue
        if not stripped or stripped.startswith("<!--"):
            continue
        if FOLD.match(line):
            fold_body, folded = _indent(line) + 4, folded + 1
            continue
        visible += 1
        if not in_claim and not stripped.startswith(("|", "#")):
            after_claim = False
        if FIGURE.match(line):
            if "#only-dark" not in line and "-dark." not in line:
                marks.append(minutes())
            continue
        words += len(WORD.findall(stripped))
    total = minutes()
    stops = [0.0, *marks, total]
    return PageReading(
        page=page,
        chapter=chapter,
        needs=needs,
        title=title,
        words=words,
        code=code,
        proof=proof,
        visible=visible,
        folded=folded,
        claims=claims,
        longest=longest,
        figures=len(marks),
        first=marks[0] if marks else total,
        gap=max(b - a for a, b in zip(stops, stops[1:])),
    )


def nav_pages() -> list[str]:
    """The Markdown pages of mkdocs.yml's nav, in reading order."""
    return [p for p in nav_order(mkdocs_config()["nav"]) if p.endswith(".md")]


@lru_cache(maxsize=None)
def _read(page: str, text: str) -> PageReading:
    return measure(default_expander().expand(text), page=page)


def read_page(page: str, text: str | None = None) -> PageReading:
    """One page of docs/ (its current text unless `text` is given)."""
    if text is None:
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    return _read(page, text)


def read_site() -> list[PageReading]:
    """Every page of the nav, in reading order."""
    return [read_page(page) for page in nav_pages()]


def reading_time(reading: PageReading) -> str:
    """The sentence a chapter's opening prints."""
    return f"About {max(5, round(reading.minutes / 5) * 5)} minutes."


def reading_times(pages: list[PageReading], *, on_page: str = "index.md") -> str:
    """A Markdown table of the chapters, the chapters each needs first and its minutes
    on the reading line, linked from `on_page`."""
    import posixpath

    base = posixpath.dirname(on_page) or "."
    chapters = {r.chapter: r for r in pages if r.chapter is not None}
    rows = ["| Chapter | Read first | Minutes |", "|---|---|---:|"]
    for number, r in sorted(chapters.items()):
        first = ", ".join(
            f"[{n}]({posixpath.relpath(chapters[n].page, base)})" for n in r.needs
        )
        link = posixpath.relpath(r.page, base)
        rows.append(f"| [{r.title}]({link}) | {first or '-'} | {round(r.minutes)} |")
    total = sum(r.minutes for r in chapters.values())
    rows.append(f"| **All chapters** | | **{total / 60:.1f} h** |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m literate.site.reading", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per page")
    args = parser.parse_args(argv)
    pages = read_site()
    if args.json:
        print(json.dumps([asdict(r) | {"minutes": r.minutes} for r in pages], indent=1))
        return 0
    head = (
        f"{'page':38} {'min':>4} {'words':>6} {'code':>5} {'proof':>5} {'proof%':>6} "
        f"{'longest':>7} {'fold':>5} {'claims':>6} {'figs':>4} {'first':>5} {'gap':>4}"
    )
    print(head)
    for r in pages:
        print(
            f"{r.page:38} {r.minutes:4.0f} {r.words:6d} {r.code:5d} {r.proof:5d} "
            f"{100 * r.proof_share:5.1f}% {r.longest:7d} {r.folded:5d} {r.claims:6d} "
            f"{r.figures:4d} {r.first:5.0f} {r.gap:4.0f}"
        )
    chapters = [r for r in pages if r.chapter is not None]
    print(
        f"site: {sum(r.minutes for r in pages) / 60:.1f} h; chapters: worst "
        f"{max(r.minutes for r in chapters):.0f} min, proof share at most "
        f"{100 * max(r.proof_share for r in chapters):.1f}%, longest visible block "
        f"{max(r.longest for r in pages)} lines"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
