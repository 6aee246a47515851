"""The built site works offline: no page or stylesheet loads a script, stylesheet, image,
font or frame from another host (`external_assets`, which fails the build); the links to
other hosts are listed in the build log, never fetched (`log_external_links`).
"""

from __future__ import annotations

import html
import logging
import re
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.literate")


_ASSET_TAG = re.compile(
    r"<(?P<tag>script|img|iframe|source|video|audio|embed|object|link)\b(?P<attrs>[^>]*)>",
    re.I,
)


_ASSET_ATTR = re.compile(
    r"\b(?:src|href|data|srcset)\s*=\s*[\"']?\s*(?P<url>(?:https?:)?//[^\"'\s>]+)", re.I
)


_LINK_REL = re.compile(r"\brel\s*=\s*[\"']?(?P<rel>[^\"'>]+)", re.I)


_CSS_URL = re.compile(
    r"(?:url\(\s*[\"']?|@import\s+[\"'])(?P<url>(?:https?:)?//[^\"')\s]+)", re.I
)


_FETCHING_RELS = {
    "stylesheet",
    "icon",
    "preload",
    "modulepreload",
    "prefetch",
    "manifest",
    "apple-touch-icon",
}


def external_assets(site_dir: Path) -> list[str]:
    """Every asset a built page or stylesheet would fetch from another host."""
    found = []
    for path in sorted(site_dir.rglob("*")):
        if path.suffix == ".html":
            text = path.read_text(encoding="utf-8", errors="replace")
            for tag in _ASSET_TAG.finditer(text):
                attrs = tag.group("attrs")
                if tag.group("tag").lower() == "link":
                    rel = _LINK_REL.search(attrs)
                    if (
                        not rel
                        or not set(rel.group("rel").lower().split()) & _FETCHING_RELS
                    ):
                        continue
                for url in _ASSET_ATTR.finditer(attrs):
                    found.append(
                        f"{path.relative_to(site_dir)}: <{tag.group('tag')}> {url.group('url')}"
                    )
            for url in _CSS_URL.finditer(text):
                found.append(f"{path.relative_to(site_dir)}: css {url.group('url')}")
        elif path.suffix == ".css":
            for url in _CSS_URL.finditer(
                path.read_text(encoding="utf-8", errors="replace")
            ):
                found.append(f"{path.relative_to(site_dir)}: css {url.group('url')}")
    return found


_LINK_HREF = re.compile(
    r"<a\b[^>]*?\bhref\s*=\s*(?P<q>[\"'])(?P<url>https?://[^\"']+)(?P=q)", re.I
)


def external_links(site_dir: Path, site_url: str | None = None) -> dict[str, list[str]]:
    """Every link (`<a href>`) of a built page to another site, read from the files and
    never fetched: url -> the built pages that have it, in path order. Links into the
    site's own `site_url` are not external."""
    links: dict[str, list[str]] = {}
    for path in sorted(site_dir.rglob("*.html")):
        page = path.relative_to(site_dir).as_posix()
        for match in _LINK_HREF.finditer(
            path.read_text(encoding="utf-8", errors="replace")
        ):
            url = html.unescape(match.group("url"))
            if site_url and url.startswith(site_url):
                continue
            pages = links.setdefault(url, [])
            if page not in pages:
                pages.append(page)
    return dict(sorted(links.items()))


def log_external_links(
    site_dir: Path, site_url: str | None = None, *, shown_pages: int = 3
) -> dict[str, list[str]]:
    """Log every external link of the built site once, at INFO, with the pages that have
    it; nothing is fetched (checking that they still resolve is left to a reader)."""
    links = external_links(site_dir, site_url)
    if links:
        lines = []
        for url, pages in links.items():
            more = (
                f", +{len(pages) - shown_pages} more"
                if len(pages) > shown_pages
                else ""
            )
            lines.append(f"  {url}  ({', '.join(pages[:shown_pages])}{more})")
        log.info(
            "external links (listed, not fetched): %d\n%s", len(links), "\n".join(lines)
        )
    return links
