"""The claims of the site, rendered and listed: a claim (its paragraph under a
`<!-- claim: id -->` line) becomes its sentence marked "verified", linked to its proof (`render_claims`), and the page holding `<!-- claim-ledger -->` gets
the table of every claim, its statement and the pytest id of its proof
(`ledger_markdown`). A claim without a proving block, or an id used twice, fails the
build (`collect_claims`). How a claim and its proof are read from a page:
`literate.site.docblocks`.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files

from literate.site.docblocks import (
    CLAIM,
    Claim,
    claim_problems,
    claim_sentence,
    iter_claims,
)

LEDGER_MARKER = "<!-- claim-ledger -->"


@dataclass(frozen=True)
class PageClaim:
    page: str  # docs-relative path of the page
    title: str  # the page's first heading
    claim: Claim


def collect_claims(files: Files, order: list[str]) -> list[PageClaim]:
    """Every claim of every page, pages in reading order (then any page not in the nav)."""
    found: list[PageClaim] = []
    seen: dict[str, str] = {}
    problems: list[str] = []
    rank = {path: i for i, path in enumerate(order)}
    pages = sorted(
        files.documentation_pages(),
        key=lambda f: (rank.get(f.src_uri, len(rank)), f.src_uri),
    )
    for f in pages:
        if not f.abs_src_path or not f.src_uri.endswith(".md"):
            continue
        text = Path(f.abs_src_path).read_text(encoding="utf-8")
        problems += claim_problems(text, where=f.src_uri)
        heading = re.search(r"^# (.+)$", text, re.M)
        title = heading.group(1).strip() if heading else f.src_uri
        for claim in iter_claims(text):
            if claim.id in seen:
                problems.append(
                    f"{f.src_uri}:{claim.line}: claim id {claim.id!r} already used in {seen[claim.id]}"
                )
            seen[claim.id] = f.src_uri
            found.append(PageClaim(f.src_uri, title, claim))
    if problems:
        raise PluginError("claims without a valid proof:\n  " + "\n  ".join(problems))
    return found


def render_claims(markdown: str) -> str:
    """`<!-- claim: id -->` + its paragraph -> the sentence on the reading line, marked
    "verified" with a link to its proof (the block or fold right after it, anchored
    `proof-<id>`); the claim itself is anchored `claim-<id>` for the ledger."""

    def box(match: re.Match[str]) -> str:
        cid = html.escape(match.group("id"))
        body = claim_sentence(match)
        mark = (
            f'<a class="claim-mark" href="#proof-{cid}" title="Claim {cid}: the code '
            f'below proves it (open its proof)">verified</a>'
        )
        out = (
            f'<div class="claim" id="claim-{cid}" markdown>\n\n{body} {mark}\n\n</div>\n'
            f'<div class="claim-proof" id="proof-{cid}"></div>\n\n'
        )
        indent = match.group("indent")  # a claim inside a fold stays inside it
        return "".join(
            indent + line if line.strip() else line
            for line in out.splitlines(keepends=True)
        )

    return CLAIM.sub(box, markdown)


def _relative(from_page: str, to_page: str) -> str:
    import posixpath

    return posixpath.relpath(to_page, posixpath.dirname(from_page) or ".")


def pytest_id_html(node: str) -> str:
    """A pytest id as code that may break after "/", "::" and ",", never in a word."""
    text = html.escape(node)
    for sep in ("/", "::", ","):
        text = text.replace(sep, sep + "<wbr>")
    return f'<code class="pytest-id">{text}</code>'


def ledger_markdown(claims: list[PageClaim], *, on_page: str) -> str:
    """One section per page, in reading order: each claim, its statement, its pytest id."""
    pages = list(dict.fromkeys(c.page for c in claims))
    lines = [f"**{len(claims)} claims** on {len(pages)} pages.", ""]
    for page in pages:
        items = [c for c in claims if c.page == page]
        link = _relative(on_page, page)
        lines += [
            f"## [{items[0].title}]({link})",
            "",
            "| Claim | Statement | Proved by (pytest id) |",
            "|---|---|---|",
        ]
        for item in items:
            c = item.claim
            statement = " ".join(c.text.split()).replace("|", "\\|")
            proof = c.proof
            node = (
                f"docs/{item.page}::line:{proof.line},column:1" if proof else "(none)"
            )
            asserts = proof.source.count("assert") if proof else 0
            lines.append(
                f"| [`{c.id}`]({link}#claim-{c.id}) | {statement} "
                f"| {pytest_id_html(node)} ({asserts} assert{'s' if asserts != 1 else ''}) |"
            )
        lines.append("")
    return "\n".join(lines)
