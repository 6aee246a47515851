"""The lighter pages (literate/site/lighter.py): fewer spans and folded code shipped as
plain text, with the same text and the same colours.

Pages are rendered here as MkDocs renders them (Python-Markdown with the site's
pymdownx.highlight options, folds from pymdownx.details); the stylesheets checked are the
installed Material's and docs/assets/css/site.css.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import markdown
import pytest
import yaml

from literate.site import lighter
from literate.site.docblocks import ROOT

# A page with what the transform must keep apart: a closed fold (with an escaped
# character, a non-BMP one for the UTF-16 lengths, an f-string cut in many spans), a
# nested closed fold, an open fold, a block on the reading line with a highlighted line,
# a block with a code annotation in a closed fold, and an output box.
PAGE = '''# A page

??? proof "A proof"
    Some text.

    ```python
    def f(x: int) -> str:
        """Says x."""
        return f"{x!r:>3} <&> 'a' \\"b\\"" + "é😀"  +  str(None) + "\\t"
    ```

    ??? note "Inside it"
        ```python
        assert f(1) == f(1)  # same   twice
        ```

???+ note "Open"
    ```python
    import torch
    y = torch.ones(3)
    ```

```python hl_lines="2"
import torch
y = torch.ones(3)   # comment
z = {"a": [1, 2.5, 0x1F], "b": lambda t: t ** 2}
```

??? note "Annotated"
    ```python
    y = 1  # (1)!
    ```

    1.  A note on y.

<div class="output highlight" markdown>

```text
tensor([1., 1., 1.])
```

</div>
'''


def _highlight_options() -> dict:
    """The site's pymdownx.highlight options, from mkdocs.yml."""

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader)
    for ext in config["markdown_extensions"]:
        if isinstance(ext, dict) and "pymdownx.highlight" in ext:
            return ext["pymdownx.highlight"] or {}
    return {}


def render(page: str = PAGE) -> str:
    return markdown.markdown(
        page,
        extensions=[
            "admonition",
            "attr_list",
            "md_in_html",
            "pymdownx.details",
            "pymdownx.superfences",
            "pymdownx.highlight",
        ],
        extension_configs={"pymdownx.highlight": _highlight_options()},
    )


@pytest.fixture(scope="module")
def before() -> str:
    return render()


@pytest.fixture(scope="module")
def after(before: str) -> str:
    return lighter.lighten(before)


def _blocks(page: str) -> list[re.Match[str]]:
    return list(lighter.BLOCK.finditer(page))


def colours(inner: str) -> list[str]:
    """The class that colours each character of a block's text ("" for the code's own
    colour; None for a space or tab, which shows no colour)."""
    out: list[str | None] = []
    for kind, cls, text in lighter._parts(inner):
        if kind == "tag":
            continue
        shown = "" if kind == "text" or cls in lighter.PLAIN else cls
        out += [None if ch in " \t" else shown for ch in html.unescape(text)]
    return out


# ---------------------------------------------------------------------------------------
# Same text, same colours


def test_the_text_of_every_block_is_unchanged(before: str, after: str) -> None:
    assert len(_blocks(before)) == len(_blocks(after)) == 6
    assert list(lighter.iter_code_texts(after)) == list(lighter.iter_code_texts(before))


def test_the_page_outside_code_blocks_is_unchanged(before: str, after: str) -> None:
    def outside(page: str) -> str:
        return lighter.BLOCK.sub("", page)

    assert outside(after) == outside(before)


def test_every_character_keeps_its_colour(before: str, after: str) -> None:
    for old, new in zip(_blocks(before), _blocks(after), strict=True):
        shown = new.group("inner")
        runs = re.search(r'data-runs="([^"]*)"', new.group("code"))
        if runs:  # folded: the colours it gets when its fold opens
            pieces = lighter.decode_runs(html.unescape(shown), runs.group(1))
            shown = "".join(
                f'<span class="{c}">{html.escape(t)}</span>' if c else html.escape(t)
                for c, t in pieces
            )
        assert colours(shown) == colours(old.group("inner")), old.group("inner")[:200]


def test_merging_never_joins_two_classes_nor_two_lines() -> None:
    inner = (
        '<span class="p">(</span><span class="p">)</span>'
        '<span class="o">.</span><span class="p">,</span> <span class="p">;</span>\n'
        '<span class="p">)</span><span class="c1"># a</span>  <span class="c1"># b</span>'
    )
    out = lighter.merge_spans(inner)
    assert out == (
        '<span class="p">()</span><span class="o">.</span><span class="p">, ;</span>\n'
        '<span class="p">)</span><span class="c1"># a</span>  <span class="c1"># b</span>'
    )


def test_spans_that_add_no_colour_go_and_their_text_stays() -> None:
    inner = (
        '<span class="kn">import</span><span class="w"> </span><span class="nn">torch</span>'
        '<span class="n">x</span><span class="p"> </span><span class="kc">None</span>'
        '<span class="hll"><span class="n">y</span></span>'
    )
    assert lighter.lighten_code(inner) == (
        '<span class="kn">import</span> <span class="nn">torch</span>x None'
        '<span class="hll">y</span>'
    )


def test_no_two_adjacent_spans_of_one_class_are_left(after: str) -> None:
    for block in _blocks(after):
        parts = lighter._parts(block.group("inner"))
        for a, b in zip(parts, parts[1:], strict=False):
            assert not (
                a[0] == b[0] == "span" and a[1] == b[1] and a[1] in lighter.COLOUR_ONLY
            ), block.group("inner")[:200]


# ---------------------------------------------------------------------------------------
# Folded code


def _folded(page: str) -> list[bool]:
    return ["data-runs" in m.group("code") for m in _blocks(page)]


def test_only_code_in_closed_folds_is_folded(after: str) -> None:
    # the proof's block, its nested fold's; not the open fold's, the reading line's,
    # the annotated block (Material reads its markup) or the output (no spans)
    assert _folded(after) == [True, True, False, False, False, False]


def test_a_folded_block_is_plain_text_and_its_runs_give_back_its_markup(
    before: str, after: str
) -> None:
    for old, new in zip(_blocks(before), _blocks(after), strict=True):
        runs = re.search(r'data-runs="([^"]*)"', new.group("code"))
        if not runs:
            continue
        assert "<" not in new.group("inner")  # no element: one text node
        markup = lighter.lighten_code(old.group("inner"))
        assert new.group("inner") == lighter.code_text(markup)
        wanted = [
            (cls, html.unescape(text))
            for kind, cls, text in lighter._parts(markup)
            if text
        ]
        pieces = lighter.decode_runs(html.unescape(new.group("inner")), runs.group(1))
        assert pieces == [(c, t) for c, t in wanted]


def test_runs_count_utf16_code_units() -> None:
    inner = (
        '<span class="s2">"😀"</span> <span class="n">x</span><span class="p">)</span>'
    )
    runs = lighter.encode_runs(lighter.lighten_code(inner))
    assert runs == "s2.4 2p.1"  # the emoji is two units in JavaScript
    assert lighter.decode_runs('"😀" x)', runs) == [
        ("s2", '"😀"'),
        ("", " x"),
        ("p", ")"),
    ]


def test_a_block_with_other_markup_than_spans_is_not_folded() -> None:
    page = (
        '<details class="note"><summary>s</summary><div class="highlight"><pre><span>'
        '</span><code><span class="hll"><span class="k">def</span></span>\n</code></pre>'
        "</div></details>"
    )
    assert lighter.lighten(page) == page


def test_notebook_cells_are_left_alone() -> None:
    cell = (
        '<details><summary>s</summary><div class="highlight-ipynb hl-python"><pre><span>'
        '</span><span class="n">x</span><span class="w"> </span></pre></div></details>'
    )
    assert lighter.lighten(cell) == cell


def test_elements_are_counted_as_the_document_holds_them(
    before: str, after: str
) -> None:
    assert (
        lighter.count_elements("<p>a<br>b<img src=x></p><template><b>t</b></template>")
        == 4
    )
    spans = before.count("<span") - after.count("<span")
    assert lighter.count_elements(before) - lighter.count_elements(after) == spans


# ---------------------------------------------------------------------------------------
# The stylesheets: what PLAIN and COLOUR_ONLY assume of them

MATERIAL_CSS = sorted(
    (
        Path(__import__("material").__file__).parent / "templates/assets/stylesheets"
    ).glob("*.min.css")
)
SITE_CSS = ROOT / "docs" / "assets" / "css" / "site.css"


def _rules(css: str) -> list[tuple[list[str], str]]:
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    return [
        ([s.strip() for s in m.group(1).split(",")], m.group(2))
        for m in re.finditer(r"([^{}@;]+)\{([^{}]*)\}", css)
    ]


def _token_rules(cls: str) -> list[str]:
    """The declarations of every rule whose selector names `.cls` as a code token."""
    found = []
    for path in [*MATERIAL_CSS, SITE_CSS]:
        for selectors, body in _rules(path.read_text(encoding="utf-8")):
            if any(re.search(rf"\.highlight .*\.{cls}(?![\w-])", s) for s in selectors):
                found.append(body)
    return found


def test_material_stylesheets_are_found() -> None:
    assert len(MATERIAL_CSS) == 2, MATERIAL_CSS
    assert _token_rules("p"), "no rule for .highlight .p: the selectors changed"


@pytest.mark.parametrize("cls", sorted(lighter.PLAIN))
def test_a_plain_class_shows_the_code_colour(cls: str) -> None:
    for body in _token_rules(cls):
        assert body.strip().rstrip(";") == "color:var(--md-code-hl-name-color)", (
            cls,
            body,
        )


def test_the_name_colour_is_the_code_colour_in_every_scheme() -> None:
    values = set()
    for path in [*MATERIAL_CSS, SITE_CSS]:
        values |= set(
            re.findall(r"--md-code-hl-name-color:\s*([^;}]+)", path.read_text("utf-8"))
        )
    assert values == {"var(--md-code-fg-color)"}


@pytest.mark.parametrize("cls", sorted(lighter.COLOUR_ONLY))
def test_a_colour_only_class_is_styled_by_its_colour_alone(cls: str) -> None:
    for body in _token_rules(cls):
        properties = {d.split(":")[0].strip() for d in body.split(";") if d.strip()}
        assert properties <= {"color"}, (cls, body)
