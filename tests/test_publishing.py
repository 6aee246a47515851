"""Publishing: `SITE_URL` sets site_url, which turns on instant navigation and fills the
sitemap; the Pages workflow runs the README's build command with it; the 404 page links
the home page.

The browser check of instant navigation needs a site built with a site_url, a second full
build: `.ci/run` makes it (`python -m literate.site.reproducible --site-url local --keep
DIR`, whose first build it is) and runs the `published` tests with
`PUBLISHED_SITE=DIR/a/site`; without that variable they skip.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import threading
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from mkdocs.utils import yaml_load

from literate.site import hooks
from literate.site.copyable import nav_pages
from literate.site.docblocks import ROOT

from test_site import (
    BUILT_SITE,
    CHROMIUM,
    CHROMIUM_ARGS,
    _QuietHandler,
    _QuietServer,
    site_is_fresh,
)

WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"
CONFIG_SCRIPT = re.compile(
    r'<script id="__config" type="application/json">(?P<json>.*?)</script>', re.S
)


def _mkdocs_yml(monkeypatch, site_url: str | None) -> dict:
    if site_url is None:
        monkeypatch.delenv("SITE_URL", raising=False)
    else:
        monkeypatch.setenv("SITE_URL", site_url)
    with open(ROOT / "mkdocs.yml", "rb") as f:
        return yaml_load(f)


def _material_config(html: str) -> dict:
    return json.loads(CONFIG_SCRIPT.search(html).group("json"))


def test_site_url_comes_from_the_environment(monkeypatch):
    assert _mkdocs_yml(monkeypatch, None)["site_url"] is None
    assert (
        _mkdocs_yml(monkeypatch, "https://example.org/blocks/")["site_url"]
        == "https://example.org/blocks/"
    )


def test_instant_navigation_is_on_only_with_a_site_url(monkeypatch):
    declared = _mkdocs_yml(monkeypatch, None)["theme"]["features"]
    assert "navigation.instant" not in declared  # mkdocs.yml leaves it to the hook
    without = {"site_url": None, "theme": {"features": list(declared)}}
    assert hooks.publishing_features(without) == declared
    with_url = {
        "site_url": "http://127.0.0.1:8000/",
        "theme": {"features": list(declared)},
    }
    assert hooks.publishing_features(with_url) == [*declared, "navigation.instant"]
    assert hooks.publishing_features(with_url) == [
        *declared,
        "navigation.instant",
    ]  # once


def test_the_pages_workflow_runs_the_readme_build_command_with_a_site_url():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "`make build`" in readme
    assert re.search(
        r"^build: setup.*\n\t\$\(BIN\)/mkdocs build --strict$", makefile, re.M
    )
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert workflow[True]["push"]["branches"] == [
        "main"
    ]  # YAML 1.1 reads the key `on` as True
    assert workflow["permissions"] == {
        "contents": "read",
        "pages": "write",
        "id-token": "write",
    }
    build, deploy = workflow["jobs"]["build"], workflow["jobs"]["deploy"]
    steps = {
        step.get("id") or step.get("name") or step["uses"]: step
        for step in build["steps"]
    }
    assert steps["pages"]["uses"].startswith("actions/configure-pages@")
    assert steps["make build"]["run"] == "make build"
    assert (
        steps["make build"]["env"]["SITE_URL"] == "${{ steps.pages.outputs.base_url }}"
    )
    upload = [
        s
        for s in build["steps"]
        if s.get("uses", "").startswith("actions/upload-pages-artifact@")
    ]
    assert [s["with"]["path"] for s in upload] == ["site/"]
    assert list(steps).index("make build") < build["steps"].index(upload[0])
    assert deploy["needs"] == "build"
    assert deploy["steps"][0]["uses"].startswith("actions/deploy-pages@")


@pytest.fixture(scope="module")
def built_site() -> Path:
    """`site/` as `make test` builds it (no SITE_URL), when it is newer than its sources."""
    if not site_is_fresh(BUILT_SITE):
        if os.environ.get("CI") == "true":
            pytest.fail(
                "site/ is missing or older than its sources (CI builds it before pytest)"
            )
        pytest.skip(
            "site/ is missing or older than its sources: `mkdocs build --strict` first"
        )
    return BUILT_SITE


def test_the_404_page_links_the_home_page(built_site):
    page = (built_site / "404.html").read_text(encoding="utf-8")
    assert '<h1 id="not-found">Page not found</h1>' in page
    home = re.findall(r'<a href="(?P<href>[^"]*)"[^>]*data-home>', page)
    # Served at any missing address, its links start from the root ("/" without a site_url).
    assert home == ["/."]
    assert (built_site / "index.html").is_file()


def test_without_a_site_url_no_instant_navigation_and_an_empty_sitemap(built_site):
    assert (
        "navigation.instant"
        not in _material_config(
            (built_site / "index.html").read_text(encoding="utf-8")
        )["features"]
    )
    assert "<url>" not in (built_site / "sitemap.xml").read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------
# A site built with SITE_URL (CI: `.ci/run`)


@pytest.fixture(scope="module")
def published_site() -> tuple[Path, str]:
    site = os.environ.get("PUBLISHED_SITE")
    if not site:
        pytest.skip(
            "PUBLISHED_SITE is not set: .ci/run builds a site with SITE_URL for this test"
        )
    site_dir = Path(site)
    canonical = re.search(
        r'<link rel="canonical" href="(?P<url>[^"]+)"',
        (site_dir / "index.html").read_text(encoding="utf-8"),
    )
    assert canonical, f"{site_dir} was built without a site_url"
    return site_dir, canonical.group("url")


def test_published_sitemap_lists_every_page_dated_by_the_last_commit(published_site):
    site_dir, site_url = published_site
    sitemap = (site_dir / "sitemap.xml").read_text(encoding="utf-8")
    locs = re.findall(r"<loc>(?P<loc>[^<]+)</loc>", sitemap)
    pages = [
        site_url + ("" if p == "index.md" else p.removesuffix(".md") + "/")
        for p in nav_pages()
    ]
    assert set(pages) <= set(locs), sorted(set(pages) - set(locs))
    epoch = subprocess.run(
        ["git", "log", "-1", "--format=%ct"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    date = datetime.fromtimestamp(int(epoch), timezone.utc).strftime("%Y-%m-%d")
    assert set(re.findall(r"<lastmod>([^<]+)</lastmod>", sitemap)) == {date}
    assert (
        "navigation.instant"
        in _material_config((site_dir / "index.html").read_text(encoding="utf-8"))[
            "features"
        ]
    )


def test_published_instant_navigation_keeps_the_page_alive(published_site):
    """A click on a nav link loads the next page without a full reload: a variable set on
    the first page is still there on the second."""
    from playwright.sync_api import sync_playwright

    site_dir, site_url = published_site
    parts = urlsplit(site_url)
    server = _QuietServer(
        (parts.hostname, parts.port),
        functools.partial(_QuietHandler, directory=str(site_dir)),
    )
    thread = threading.Thread(
        target=server.serve_forever, name="published-site", daemon=True
    )
    thread.start()
    pw = sync_playwright().start()
    try:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.route(
            re.compile(r"^(?!https?://127\.0\.0\.1(?::\d+)?/)"),
            lambda route: route.abort(),
        )
        loads = []
        page.on("load", lambda: loads.append(page.url))
        page.goto(site_url, wait_until="load")
        page.evaluate("window.__kept = 42")
        target = "attention/scaled-dot-product/"
        page.click(f'nav.md-nav--primary a.md-nav__link[href$="{target}"]')
        page.wait_for_url(site_url + target)
        page.wait_for_function(
            "document.querySelector('.md-content h1')?.textContent.includes('attention')"
        )
        assert page.evaluate("window.__kept") == 42
        assert loads == [site_url]  # one full load, the first
        browser.close()
    finally:
        pw.stop()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
