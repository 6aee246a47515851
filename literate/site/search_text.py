"""What the site's search reads: prose, not code, proofs or TeX.

* `exclude_from_search(html, page)`: code blocks, folded proofs, notebook prompts and
  the benchmarks page's tables get Material's `data-search-exclude` (its search plugin
  skips such elements when it indexes the rendered page);
* `plain_tex(text)`: inline and display math as a reader would type it (`\\(\\sqrt{d_k}\\)`
  -> `√d_k`), for the titles and previews of the search index;
* `clean_search_index(path)`: the index written by the search plugin, with every title
  and text in plain words.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = ["exclude_from_search", "plain_tex", "clean_search_index"]

EXCLUDED = re.compile(
    r'<(?P<tag>div|details|pre)(?P<rest> class="(?:highlight|output highlight|proof|'
    r'jp-InputPrompt|jp-OutputPrompt)[" ])'
)
TABLE = re.compile(r"<table(?=[ >])")
MATH = re.compile(r"\\\((?P<inline>.+?)\\\)|\\\[(?P<display>.+?)\\\]", re.S)
SYMBOLS = {
    "sqrt": "√",
    "epsilon": "ε",
    "varepsilon": "ε",
    "theta": "θ",
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "lambda": "λ",
    "sigma": "σ",
    "mu": "μ",
    "pi": "π",
    "infty": "∞",
    "cdot": "·",
    "times": "×",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "approx": "≈",
    "sum": "Σ",
    "to": "→",
    "rightarrow": "→",
    "ne": "≠",
    "neq": "≠",
}
FORMAT = ("mathrm", "mathbf", "operatorname", "text", "textrm", "mathit", "tfrac")


def exclude_from_search(html: str, page: str) -> str:
    """The rendered page with what search should not read marked for exclusion."""
    html = EXCLUDED.sub(r"<\g<tag> data-search-exclude\g<rest>", html)
    if page == "appendix/benchmarks.md":  # a wall of numbers
        html = TABLE.sub("<table data-search-exclude", html)
    return html


def _tex(source: str) -> str:
    def over(m: re.Match[str]) -> str:
        a, b = (f"({x})" if re.search(r"[\s+\-]", x) else x for x in m.groups())
        return f"{a}/{b}"

    text = re.sub(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}", over, source)
    for command in FORMAT:
        text = re.sub(rf"\\{command}\{{([^{{}}]*)\}}", r"\1", text)
    text = re.sub(r"\\([A-Za-z]+)", lambda m: SYMBOLS.get(m.group(1), m.group(1)), text)
    text = text.replace("{", "").replace("}", "").replace("\\", "")
    return re.sub(r"\s+", " ", text).strip()


def plain_tex(text: str) -> str:
    """Every `\\( ... \\)` and `\\[ ... \\]` of `text` in plain symbols."""
    return MATH.sub(lambda m: _tex(m.group("inline") or m.group("display")), text)


def clean_search_index(path: Path) -> None:
    """Rewrite the search plugin's index with plain math in every title and text."""
    if not path.is_file():
        return
    index = json.loads(path.read_text(encoding="utf-8"))
    for doc in index.get("docs", []):
        for key in ("title", "text"):
            if isinstance(doc.get(key), str):
                doc[key] = plain_tex(doc[key])
    path.write_text(
        json.dumps(index, ensure_ascii=False, separators=(",", ":")), encoding="utf-8"
    )
