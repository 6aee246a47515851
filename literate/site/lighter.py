"""Lighter chapter pages: fewer DOM nodes and bytes, the same look (issue 26, point 8).

A chapter's code is most of its page: pygments gives every token a `<span>`, and most of
the code sits in folded proofs and notes (`<details>`, closed until a reader opens one).
`lighten(html)` rewrites the rendered page (MkDocs' `on_page_content`, after
`search_text.exclude_from_search`):

* Spans that add no colour go, leaving their text (`plain_spans`): whitespace (`w`), and
  the classes Material colours with the code's own colour (`n`, `kc`: its
  `--md-code-hl-name-color` is `var(--md-code-fg-color)`) or not at all (`sa`, `fm`, ...).
* Adjacent spans of one class become one span, across the spaces of a line between them
  (`merge_spans`); whitespace in a span shows no colour, so the look is unchanged. Spans of
  two classes are never joined, nor lines (Material's annotations read one comment each).
* A code block inside a closed `<details>` ships as plain text, one text node, its spans
  written as runs over that text in the code's `data-runs` (`encode_runs`, a few bytes a
  span instead of a `<span class="...">` each); `docs/assets/js/lighter.js` cuts the
  text into those spans when the fold first opens (the `toggle` event: a click, the
  keyboard, a link to an anchor inside it, the browser's find-in-page), and
  `decode_runs` is its Python twin, for the tests. The text is in the document from the
  start: find-in-page, a page without scripts and the copy button read the same text. (A
  `<template>` holding the highlighted markup would keep the nodes out of the document
  too, but ships the text twice and every span in full: about 740 KB for the largest
  chapter instead of 360 KB.) A block with a code annotation (`# (1)!` and its list) keeps its
  markup: Material's script reads it when the page loads.

Material's blocks only (`<div class="... highlight">`): the notebooks' cells
(`highlight-ipynb`) have the JupyterLab colours, where `n` has a colour of its own. Per-line
anchors (`<a id="__codelineno-...">`, one per line, linked to by nothing on the site, a
fifth of a chapter's HTML) are turned off at their source: `anchor_linenums: false` in
mkdocs.yml.

`count_elements(html)` counts a page's elements as its document holds them when served,
for the budgets in tests/test_site_lighter.py.
"""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Iterator
from html.parser import HTMLParser

__all__ = [
    "PLAIN",
    "COLOUR_ONLY",
    "lighten",
    "lighten_code",
    "plain_spans",
    "merge_spans",
    "code_text",
    "encode_runs",
    "decode_runs",
    "count_elements",
    "iter_code_texts",
]

# Classes a span of which shows its text in the code's own colour, in either scheme:
# Material colours `n` and `kc` with `--md-code-hl-name-color`, which is
# `var(--md-code-fg-color)`, and does not style the others (tests/test_lighter.py checks
# both against Material's stylesheets and docs/assets/css/site.css).
PLAIN = frozenset(
    {"w", "n", "kc", "sa", "fm", "dl", "nx", "py", "x", "esc", "g", "h", "err"}
)
# Classes Material styles with a colour alone (no background, border or font change):
# whitespace inside one of them looks like whitespace outside it.
COLOUR_ONLY = frozenset(
    (
        "o ow p cpf l s s1 s2 sb sc si ss cp se sh sr sx il m mb mf mh mi mo k kd kn kp"
        " kr kt bp nb no nc ne nf nn nd ni nl nt c c1 ch cm cs sd na nv vc vg vi go gp"
        " gh gu gt gr"
    ).split()
)
COMMENTS = frozenset({"c", "c1", "ch", "cm", "cs"})

# A Material code block: its <pre> (with the `<span></span>` pygments opens it with) and
# its <code>; the div before it says whether it is Material's (`highlight`) or a notebook's.
BLOCK = re.compile(
    r'(?P<div><div(?: data-search-exclude)? class="(?:[\w-]+ )*highlight">'
    r'(?:<span class="filename">[^<]*</span>)?)'
    r"(?P<pre><pre\b[^>]*>(?:<span></span>)?)(?P<code><code\b[^>]*>)(?P<inner>.*?)"
    r"(?P<end></code></pre>)",
    re.S,
)
DETAILS = re.compile(r"<details\b(?P<attrs>[^>]*)>|</details>")
PART = re.compile(
    r'<span class="(?P<cls>[^" ]+)">(?P<text>[^<]*)</span>|(?P<tag><[^>]*>)|(?P<plain>[^<]+)'
)
# Material's annotation marker in a comment: "# (1)", "# (1)!".
ANNOTATION = re.compile(r"\(\d+\)!?")


# ---------------------------------------------------------------------------------------
# A block's markup


Part = tuple[str, str, str]  # (kind, class, text)


def _parts(inner: str) -> list[Part]:
    """`inner` as (kind, class, text) parts: ("span", cls, text) for a span holding text
    only, ("text", "", text), ("tag", "", markup) for any other tag (kept as it is)."""
    return [
        ("span", cls, text) if cls else ("tag", "", tag) if tag else ("text", "", plain)
        for cls, text, tag, plain in PART.findall(inner)
    ]


def _markup(parts: list[Part]) -> str:
    return "".join(
        f'<span class="{cls}">{text}</span>' if kind == "span" else text
        for kind, cls, text in parts
    )


def _blank(text: str) -> bool:
    """Spaces or tabs only: no newline (a span never spans two lines here)."""
    return text != "" and text.strip(" \t") == ""


def _plain(parts: list[Part]) -> list[Part]:
    return [
        ("text", "", text)
        if kind == "span"
        and (cls in PLAIN or text == "" or (cls in COLOUR_ONLY and _blank(text)))
        else (kind, cls, text)
        for kind, cls, text in parts
    ]


MERGING = COLOUR_ONLY - COMMENTS


def _merged(parts: list[Part]) -> list[Part]:
    out: list[Part] = []
    i, n = 0, len(parts)
    while i < n:
        kind, cls, text = part = parts[i]
        last = out[-1] if out else ("", "", "")
        if (
            kind == "span"
            and cls in COLOUR_ONLY
            and last[0] == "span"
            and last[1] == cls
        ):
            out[-1] = ("span", cls, last[2] + text)
        elif (
            kind == "text"
            and last[0] == "span"
            and last[1] in MERGING
            and i + 1 < n
            and parts[i + 1][0] == "span"
            and parts[i + 1][1] == last[1]
            and _blank(text)
        ):
            out[-1] = ("span", last[1], last[2] + text + parts[i + 1][2])
            i += 1
        elif kind == "text" and last[0] == "text":
            out[-1] = ("text", "", last[2] + text)
        else:
            out.append(part)
        i += 1
    return out


def plain_spans(inner: str) -> str:
    """The code's markup without the spans that add no colour (their text stays), nor
    empty spans, nor spans of colour-only classes holding spaces only."""
    return _markup(_plain(_parts(inner)))


def merge_spans(inner: str) -> str:
    """The code's markup with adjacent spans of one colour-only class made one span;
    spaces between two such spans (not comments: Material's annotations read each
    comment) go inside the merged span. Never joins two classes, nor two lines."""
    return _markup(_merged(_parts(inner)))


def lighten_code(inner: str) -> str:
    """A code block's markup with fewer spans and the same text and colours."""
    return _markup(_merged(_plain(_parts(inner))))


def code_text(inner: str) -> str:
    """The text of a code block's markup, still escaped (as it stands in the HTML)."""
    return re.sub(r"<[^>]*>", "", inner)


def _annotated(parts: list[Part], after: str) -> bool:
    """Whether Material makes annotations of the block: a comment holds a marker and a
    list follows the block (`after`: the page from the end of its `</pre>`)."""
    return re.match(r"\s*</div>\s*<ol\b", after) is not None and any(
        kind == "span" and cls in COMMENTS and ANNOTATION.search(text)
        for kind, cls, text in parts
    )


# ---------------------------------------------------------------------------------------
# A page


def _closed_spans(html: str) -> list[tuple[int, int]]:
    """The (start, end) offsets of every closed `<details>` of the page, outermost and
    nested alike."""
    spans, stack = [], []
    for m in DETAILS.finditer(html):
        if m.group(0) == "</details>":
            if stack:
                start, closed = stack.pop()
                if closed:
                    spans.append((start, m.end()))
        else:
            closed = re.search(r"\bopen\b", m.group("attrs")) is None
            stack.append((m.start(), closed))
    return spans


def _units(text: str) -> int:
    """The length of `text` as JavaScript counts it (UTF-16 code units)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


def encode_runs(inner: str) -> str | None:
    """The spans of a code block's markup as runs over its text, for `lighter.js`:
    one item per span, "<gap><class>.<length>", the gap (the unstyled text before the
    span, omitted when none) and the length in UTF-16 code units of the unescaped text,
    items separated by spaces. None if the markup holds anything but spans of one class
    and text."""
    return _runs(_parts(inner))


CLASS = re.compile(r"[a-z][a-z0-9]*")


def _runs(parts: list[Part]) -> str | None:
    items, gap = [], 0
    for kind, cls, text in parts:
        if kind == "tag" or (cls and not CLASS.fullmatch(cls)):
            return None
        units = _units(html_lib.unescape(text) if "&" in text else text)
        if kind == "text":
            gap += units
        else:
            items.append(f"{gap or ''}{cls}.{units}")
            gap = 0
    return " ".join(items)


RUN = re.compile(r"(\d*)([a-z][a-z0-9]*)\.(\d+)")


def decode_runs(text: str, runs: str) -> list[tuple[str, str]]:
    """What `lighter.js` makes of a block: its (unescaped) text cut by `runs` into
    (class, text) pieces, "" the class of unstyled text. Python's twin of the script,
    for the tests."""
    units = text.encode("utf-16-le")
    pieces, at = [], 0

    def take(n: int) -> str:
        nonlocal at
        piece = units[2 * at : 2 * (at + n)].decode("utf-16-le")
        at += n
        return piece

    for gap, cls, length in RUN.findall(runs):
        if gap:
            pieces.append(("", take(int(gap))))
        pieces.append((cls, take(int(length))))
    if 2 * at < len(units):
        pieces.append(("", take(len(units) // 2 - at)))
    return pieces


def lighten(html: str) -> str:
    """The page with every Material code block lightened (`lighten_code`), and those
    inside a closed `<details>` shipped as plain text with their spans as runs
    (`encode_runs`) in the code's `data-runs`."""
    closed = _closed_spans(html)

    def block(m: re.Match[str]) -> str:
        code, parts = m.group("code"), _merged(_plain(_parts(m.group("inner"))))
        inner = _markup(parts)
        folded = any(start < m.start() < end for start, end in closed)
        after = html[m.end() : m.end() + 40]
        if folded and "<" in inner and not _annotated(parts, after):
            runs = _runs(parts)
            if runs is not None:
                code = code[:-1] + f' data-runs="{runs}">'
                inner = "".join(text for kind, _, text in parts if kind != "tag")
        return m.group("div") + m.group("pre") + code + inner + m.group("end")

    return BLOCK.sub(block, html)


# ---------------------------------------------------------------------------------------
# Measuring

VOID = frozenset(
    "area base br col embed hr img input link meta source track wbr param".split()
)


class _Counter(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements = 0
        self.open: list[str] = []  # the open elements, innermost last

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if "template" not in self.open:
            self.elements += 1
        if tag not in VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        if "template" not in self.open:
            self.elements += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self.open:
            while self.open.pop() != tag:
                pass


def count_elements(html: str) -> int:
    """How many elements the page's document holds as served (before its scripts run),
    not counting a template's content, which is not in the document."""
    counter = _Counter()
    counter.feed(html)
    counter.close()
    return counter.elements


def iter_code_texts(html: str) -> Iterator[str]:
    """The unescaped text of every Material code block of the page, in order."""
    for m in BLOCK.finditer(html):
        yield html_lib.unescape(code_text(m.group("inner")))
