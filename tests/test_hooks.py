"""The build hook: claims become anchored boxes, the ledger lists them, and any asset from
another host is found."""

from __future__ import annotations

from literate.site import hooks
from literate.site.docblocks import iter_claims

PAGE = '''# A page

!!! claim "demo.sum"
    One and one make two.

```python
assert 1 + 1 == 2
```
'''


def test_claim_becomes_an_anchored_box():
    out = hooks.render_claims(PAGE)
    assert '<div class="admonition claim" id="claim-demo.sum" markdown>' in out
    assert "Claim <code>demo.sum</code>" in out
    assert "One and one make two." in out
    assert "```python\nassert 1 + 1 == 2\n```" in out  # the proof stays a normal block


def test_ledger_links_every_claim_and_names_its_pytest_id():
    claims = [hooks.PageClaim("part/page.md", "A page", c) for c in iter_claims(PAGE)]
    table = hooks.ledger_markdown(claims, on_page="appendix/claims.md")
    assert "**1 claims** on 1 pages." in table
    assert "## [A page](../part/page.md)" in table
    assert "[`demo.sum`](../part/page.md#claim-demo.sum)" in table
    assert "`docs/part/page.md::line:6,column:1` (1 assert)" in table


def test_external_assets_are_found_and_plain_links_are_not(tmp_path):
    (tmp_path / "ok.html").write_text(
        '<a href="https://example.org/paper">a link is not a request</a>'
        '<link rel="canonical" href="https://example.org/">'
        '<script src="assets/local.js"></script><img src="figures/x.svg">',
        encoding="utf-8",
    )
    assert hooks.external_assets(tmp_path) == []
    (tmp_path / "bad.html").write_text(
        '<script src="https://cdn.example/x.js"></script>'
        "<link rel='stylesheet' href='//fonts.example/css'>"
        '<img src="http://img.example/a.png">'
        "<style>@font-face { src: url(https://fonts.example/f.woff2) }</style>",
        encoding="utf-8",
    )
    (tmp_path / "style.css").write_text('@import "https://fonts.example/a.css";', encoding="utf-8")
    found = hooks.external_assets(tmp_path)
    assert len(found) == 5, found
    assert any("cdn.example/x.js" in f for f in found)
    assert any("style.css" in f for f in found)


def test_notebook_cache_key_covers_literate(tmp_path, monkeypatch):
    from mkdocs_jupyter import plugin

    notebook = tmp_path / "nb.py"
    notebook.write_text("# %%\nprint(1)\n", encoding="utf-8")
    config = {k: None for k in ("kernel_name", "theme", "allow_errors", "show_input", "no_input", "no_prompt",
                                "remove_tag_config", "highlight_extra_classes", "include_requirejs",
                                "custom_mathjax_url", "toc_depth")}
    monkeypatch.setattr(plugin, "_compute_cache_key", plugin._compute_cache_key)  # restored after the test
    hooks.cover_notebook_cache_with_code()
    hooks.cover_notebook_cache_with_code()  # idempotent: wraps the original once
    before = plugin._compute_cache_key(str(notebook), config, True)
    assert before == plugin._compute_cache_key(str(notebook), config, True)
    monkeypatch.setattr(hooks, "_code_fingerprint", lambda: "literate/ was edited")
    assert plugin._compute_cache_key(str(notebook), config, True) != before
    assert plugin._compute_cache_key.__wrapped__(str(notebook), config, True) == \
        plugin._compute_cache_key.__wrapped__(str(notebook), config, True)


def test_nav_order_flattens_sections_in_reading_order():
    nav = [{"Home": "index.md"}, {"Part": [{"One": "a/one.md"}, "a/two.md"]}, {"Appendix": [{"L": "z.md"}]}]
    assert hooks.nav_order(nav) == ["index.md", "a/one.md", "a/two.md", "z.md"]
