"""The build hook: claims become anchored boxes, the ledger lists them, and any asset from
another host is found."""

from __future__ import annotations

import pytest

from literate.site import claims, hooks, notebook_pages, offline
from literate.site.docblocks import iter_claims, nav_order

PAGE = """# A page

<!-- claim: demo.sum -->
One and one make two.

```python
assert 1 + 1 == 2
```
"""


def test_a_claim_becomes_its_sentence_marked_verified_and_linked_to_its_proof():
    out = claims.render_claims(PAGE)
    assert '<div class="claim" id="claim-demo.sum" markdown>' in out
    assert 'One and one make two. <a class="claim-mark" href="#proof-demo.sum"' in out
    assert ">verified</a>" in out
    anchor = out.index('<div class="claim-proof" id="proof-demo.sum"></div>')
    assert anchor < out.index("```python\nassert 1 + 1 == 2\n```")  # then the proof
    assert "<!-- claim" not in out


def test_a_claim_inside_a_fold_renders_inside_it():
    page = '??? note "A study"\n    Prose.\n\n' + "\n".join(
        "    " + line if line else line for line in PAGE.split("\n")[2:]
    )
    out = claims.render_claims(page)
    assert '\n    <div class="claim" id="claim-demo.sum" markdown>\n' in out
    assert "\n    One and one make two. <a" in out
    assert '\n    <div class="claim-proof" id="proof-demo.sum"></div>\n' in out
    assert "<!-- claim" not in out


def test_ledger_links_every_claim_and_names_its_pytest_id():
    found = [claims.PageClaim("part/page.md", "A page", c) for c in iter_claims(PAGE)]
    table = claims.ledger_markdown(found, on_page="appendix/claims.md")
    assert "**1 claims** on 1 pages." in table
    assert "## [A page](../part/page.md)" in table
    assert "[`demo.sum`](../part/page.md#claim-demo.sum)" in table
    assert (
        '<code class="pytest-id">docs/<wbr>part/<wbr>page.md::<wbr>line:6,<wbr>column:1'
        "</code> (1 assert)"
    ) in table


def test_external_assets_are_found_and_plain_links_are_not(tmp_path):
    (tmp_path / "ok.html").write_text(
        '<a href="https://example.org/paper">a link is not a request</a>'
        '<link rel="canonical" href="https://example.org/">'
        '<script src="assets/local.js"></script><img src="figures/x.svg">',
        encoding="utf-8",
    )
    assert offline.external_assets(tmp_path) == []
    (tmp_path / "bad.html").write_text(
        '<script src="https://cdn.example/x.js"></script>'
        "<link rel='stylesheet' href='//fonts.example/css'>"
        '<img src="http://img.example/a.png">'
        "<style>@font-face { src: url(https://fonts.example/f.woff2) }</style>",
        encoding="utf-8",
    )
    (tmp_path / "style.css").write_text(
        '@import "https://fonts.example/a.css";', encoding="utf-8"
    )
    found = offline.external_assets(tmp_path)
    assert len(found) == 5, found
    assert any("cdn.example/x.js" in f for f in found)
    assert any("style.css" in f for f in found)


def test_notebook_cache_key_covers_literate(tmp_path, monkeypatch):
    from mkdocs_jupyter import plugin

    notebook = tmp_path / "nb.py"
    notebook.write_text("# %%\nprint(1)\n", encoding="utf-8")
    config = {
        k: None
        for k in (
            "kernel_name",
            "theme",
            "allow_errors",
            "show_input",
            "no_input",
            "no_prompt",
            "remove_tag_config",
            "highlight_extra_classes",
            "include_requirejs",
            "custom_mathjax_url",
            "toc_depth",
        )
    }
    monkeypatch.setattr(
        plugin, "_compute_cache_key", plugin._compute_cache_key
    )  # restored after the test
    notebook_pages.cover_notebook_cache_with_code()
    notebook_pages.cover_notebook_cache_with_code()  # idempotent: wraps the original once
    before = plugin._compute_cache_key(str(notebook), config, True)
    assert before == plugin._compute_cache_key(str(notebook), config, True)
    monkeypatch.setattr(
        notebook_pages, "code_fingerprint", lambda: "literate/ was edited"
    )
    assert plugin._compute_cache_key(str(notebook), config, True) != before
    assert plugin._compute_cache_key.__wrapped__(
        str(notebook), config, True
    ) == plugin._compute_cache_key.__wrapped__(str(notebook), config, True)


def test_nav_order_flattens_sections_in_reading_order():
    nav = [
        {"Home": "index.md"},
        {"Part": [{"One": "a/one.md"}, "a/two.md"]},
        {"Appendix": [{"L": "z.md"}]},
    ]
    assert nav_order(nav) == ["index.md", "a/one.md", "a/two.md", "z.md"]


@pytest.mark.parametrize("forked", [True, False], ids=["linux", "elsewhere"])
def test_notebooks_execute_ahead_once_and_the_page_render_takes_that_result(
    tmp_path, monkeypatch, forked
):
    """`execute_notebooks_ahead` starts every notebook without a cached result in the
    background; the plugin's own nb2html call then returns that result (no second run),
    a call with other options runs anew, and a cached notebook is not started."""
    import threading

    from mkdocs.config import load_config
    from mkdocs.structure.files import get_files
    from mkdocs_jupyter import convert, plugin

    ran, release, served = [], threading.Event(), []

    def fake_nb2html(nb_path, **kwargs):
        release.wait(10)  # the page render must wait for the background run
        ran.append((nb_path, threading.current_thread().name, kwargs["kernel_name"]))
        return f"<html of {nb_path}>"

    class FakeServer:  # what notebook_pages.warm_kernels returns: something to close
        def close(self):
            served.append(("closed", sum(t.startswith("notebooks") for _, t, _ in ran)))

    def fake_warm_kernels(notebooks):
        served.append(("started", list(notebooks)))
        return FakeServer()

    monkeypatch.setattr(convert, "nb2html", fake_nb2html)
    monkeypatch.setattr(notebook_pages, "warm_kernels", fake_warm_kernels)
    monkeypatch.setattr(notebook_pages, "FORK_KERNELS", forked)
    monkeypatch.setattr(notebook_pages, "_ahead", {})
    config = load_config(str(hooks.ROOT / "mkdocs.yml"))
    jupyter = config["plugins"]["mkdocs-jupyter"]
    cache_dir = tmp_path / "nb-cache"
    monkeypatch.setitem(jupyter.config, "cache_dir", str(cache_dir))
    files = jupyter.on_files(get_files(config), config)
    notebooks = [f.abs_src_path for f in files if isinstance(f, plugin.NotebookFile)]
    assert len(notebooks) >= 3
    cached = notebooks[0]  # one with a result in the cache already
    key = plugin._compute_cache_key(cached, jupyter.config, True)
    plugin._get_cache_path(str(cache_dir), key).parent.mkdir(parents=True)
    plugin._get_cache_path(str(cache_dir), key).write_text("{}", encoding="utf-8")
    try:
        started = notebook_pages.execute_notebooks_ahead(config, files)
        assert started == notebooks[1:]
        options = {n: jupyter.config[n] for n in notebook_pages.NB2HTML_OPTIONS}
        release.set()
        assert (
            convert.nb2html(started[0], execute=True, **options)
            == f"<html of {started[0]}>"
        )
        assert (
            convert.nb2html(started[1], execute=False, **options)
            == f"<html of {started[1]}>"
        )
        for path in started[2:]:
            convert.nb2html(path, execute=True, **options)
        by_thread = [(path, name.startswith("notebooks")) for path, name, _ in ran]
        assert sorted(p for p, ahead in by_thread if ahead) == sorted(
            started
        )  # once each
        assert [p for p, ahead in by_thread if not ahead] == [
            started[1]
        ]  # other options
        # ahead, each in a kernel forked by one server, closed after the last notebook
        # (the plugin's own call keeps the configured kernel)
        kernels = {(path, name.startswith("notebooks")): k for path, name, k in ran}
        ahead_kernel = (
            notebook_pages.WarmKernels.NAME if forked else jupyter.config["kernel_name"]
        )
        assert all(kernels[p, True] == ahead_kernel for p in started)
        assert kernels[started[1], False] == jupyter.config["kernel_name"]
        for _ in range(100):
            if len(served) == 2 or not forked:
                break
            threading.Event().wait(0.05)
        assert served == (
            [("started", started), ("closed", len(started))] if forked else []
        )
    finally:
        release.set()
        convert.nb2html = getattr(convert.nb2html, "__wrapped__", convert.nb2html)


def _figure_notebook(path, metadata: dict, output_metadata: dict | None = None):
    import nbformat

    cell = nbformat.v4.new_code_cell(
        "fig, ax = plt.subplots()\nplt.show()", metadata=metadata
    )
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"},
            metadata=output_metadata or {},
        )
    ]
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"), cell]), path
    )
    return str(path)


def _image_alts(page: str) -> list[str]:
    import html
    import re

    return [
        html.unescape(m.group(2)) for m in re.finditer(r"<img alt=(['\"])(.*?)\1", page)
    ]


def test_notebook_figures_get_their_cells_alt_text_and_none_goes_without(
    monkeypatch, tmp_path
):
    from mkdocs_jupyter import nbconvert2

    described = _figure_notebook(
        tmp_path / "a.ipynb", {"alt": 'Loss falls "fast" & <flat>'}
    )
    by_output = _figure_notebook(
        tmp_path / "b.ipynb", {}, {"image/png": {"alt": "From the output"}}
    )
    bare = _figure_notebook(tmp_path / "c.ipynb", {})
    monkeypatch.setattr(
        nbconvert2, "HTMLExporter", nbconvert2.HTMLExporter
    )  # restored after
    placeholder = "No description has been provided for this image"  # nbconvert's own
    assert _image_alts(nbconvert2.nb2html(described, execute=False)) == [placeholder]
    notebook_pages.notebook_exporter()
    assert _image_alts(nbconvert2.nb2html(described, execute=False)) == [
        'Loss falls "fast" & <flat>'
    ]
    assert _image_alts(nbconvert2.nb2html(by_output, execute=False)) == [
        "From the output"
    ]
    with pytest.raises(
        notebook_pages.PluginError,
        match=r"cell 1 \('fig, ax = plt.subplots\(\)'\) shows a figure without alt",
    ):
        nbconvert2.nb2html(bare, execute=False)


def test_every_figure_cell_of_the_notebook_pages_has_alt_text():
    """What the build would refuse, found without running the notebooks: a cell that
    shows a figure and has no alt text."""
    import jupytext

    notebooks = sorted((hooks.ROOT / "docs" / "notebooks").glob("*.py"))
    assert len(notebooks) == 3
    for path in notebooks:
        for cell in jupytext.read(path).cells:
            # a figure is shown by plt.show(), or drawn light and dark by the
            # notebook's `show` (its first cell)
            if "plt.show()" in cell.source or "\nshow(draw)" in cell.source:
                alt = cell.metadata.get("alt", "")
                assert len(alt.split()) >= 15, (
                    f"{path.name}: a figure cell's alt text is {alt!r}"
                )


def test_a_pointer_to_a_test_file_becomes_a_link_to_the_served_copy():
    from literate.site.sources import link_test_pointers, pointed_files

    page = (
        "Proved in `tests/test_cache.py::test_x`.\n"
        "```python\n# `tests/test_cache.py` stays code\n```\n"
        "[`tests/test_cache.py`](elsewhere)\n"
    )
    out = link_test_pointers(page, "attention/multi-head.md")
    assert (
        "[`tests/test_cache.py::test_x`](../source/tests/test_cache.py)"
        in out.split("\n")[0]
    )
    assert "# `tests/test_cache.py` stays code" in out  # code blocks untouched
    assert out.endswith("[`tests/test_cache.py`](elsewhere)\n")  # a link already
    served = pointed_files()
    assert served and all(uri.startswith("source/tests/") for uri in served)
    assert all(path.is_file() for path in served.values())


def test_every_pointer_to_a_test_file_is_one_the_build_links():
    """A page names a test file only in inline code in its prose (which the build turns
    into a link to the served copy), never as bare text or in a code comment, where a
    reader could not open it."""
    import re

    from literate.site.docblocks import ROOT
    from literate.site.sources import _prose_lines

    bare = re.compile(r"tests/[A-Za-z0-9_/]+\.py")
    found = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for number, (prose, line) in enumerate(
            _prose_lines(page.read_text(encoding="utf-8")), 1
        ):
            if prose:
                linked = re.sub(r"`tests/[^`]*`", "", line)
            else:  # in code only a comment points; a string is the program's own
                linked = line.split("#", 1)[1] if "#" in line else ""
            if bare.search(linked):
                found.append(f"{page.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == [], "\n".join(found)


def test_search_reads_prose_and_plain_math():
    from literate.site.search_text import (
        exclude_from_search,
        plain_tex,
    )

    assert plain_tex(r"Why divide by \(\sqrt{d_k}\)") == "Why divide by √d_k"
    assert (
        plain_tex(r"\(\frac{8}{3} d\) and \(\frac{a + b}{2}\)") == "8/3 d and (a + b)/2"
    )
    assert plain_tex(r"stored as \(1 + w\), \[\mathrm{softmax}(z)_j\]") == (
        "stored as 1 + w, softmax(z)_j"
    )
    html = (
        '<div class="highlight"><pre>x</pre></div><div class="output highlight">'
        '<details class="proof"><details class="note"><table>'
    )
    out = exclude_from_search(html, "attention/multi-head.md")
    assert out.count("data-search-exclude") == 3  # code, output, proof; notes stay
    assert "<table>" in out
    bench = exclude_from_search(html, "appendix/benchmarks.md")
    assert "<table data-search-exclude>" in bench


def test_the_search_index_is_rewritten_in_plain_words(tmp_path):
    import json

    from literate.site.search_text import clean_search_index

    path = tmp_path / "search_index.json"
    index = {
        "config": {},
        "docs": [
            {
                "location": "a/",
                "title": r"A ring of \(W\) slots",
                "text": r"<p>\(\epsilon\) sits</p>",
            }
        ],
    }
    path.write_text(json.dumps(index), encoding="utf-8")
    clean_search_index(path)
    docs = json.loads(path.read_text(encoding="utf-8"))["docs"]
    assert docs == [
        {"location": "a/", "title": "A ring of W slots", "text": "<p>ε sits</p>"}
    ]
    clean_search_index(tmp_path / "missing.json")  # no index (search off): nothing


def test_a_figure_opens_full_size_and_code_is_left_alone():
    from literate.site.sources import figures_open_full_size

    page = (
        "![Alt.](../figures/x-light.svg#only-light){ .figure }\n"
        "    ![](../figures/x-dark.svg#only-dark){ .figure }\n"
        "```markdown\n![](../figures/x-light.svg#only-light)\n```\n"
    )
    out = figures_open_full_size(page).split("\n")
    assert out[0] == (
        "[![Alt.](../figures/x-light.svg#only-light){ .figure }]"
        "(../figures/x-light.svg){ .figure-link }"
    )
    assert out[1].startswith("    [![](../figures/x-dark.svg#only-dark)")  # in a fold
    assert out[3] == "![](../figures/x-light.svg#only-light)"  # code stays code
