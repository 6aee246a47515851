"""Every figure renders in both languages and both themes, reproducibly, and the build hook
draws each one once and then reuses it until the code behind it changes."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import matplotlib.pyplot as plt
import pytest

from literate.figures import FIGURES, LANGUAGES, render
from literate.figures.style import svg_bytes
from literate.site import hooks

CYRILLIC = re.compile("[\u0400-\u04ff]")


def figure_texts(fig) -> list[str]:
    texts = [t.get_text() for t in fig.findobj(match=lambda a: hasattr(a, "get_text"))]
    return [t for t in texts if t.strip()]


@pytest.mark.parametrize("name", sorted(FIGURES))
@pytest.mark.parametrize("language", LANGUAGES)
def test_figure_renders_small_in_each_language(name, language):
    fig = FIGURES[name].draw(language=language, theme="light")
    fig.set_size_inches(6, 4.5)
    fig.set_dpi(40)
    words = " ".join(figure_texts(fig))
    if language == "ru":
        assert CYRILLIC.search(words), f"{name}: no Russian label in {words!r}"
    else:
        assert not CYRILLIC.search(words), f"{name}: Russian left in the English figure: {words!r}"
    data = svg_bytes(fig)
    root = ET.fromstring(data)
    assert root.tag.endswith("svg")
    assert not plt.get_fignums(), "svg_bytes closes the figure"


def test_light_and_dark_differ_and_each_is_byte_reproducible():
    name = "attention-masks"
    light = render(name, theme="light")
    assert light == render(name, theme="light")
    dark = render(name, theme="dark")
    assert dark != light
    assert b"#2e3440" in light.lower() and b"#eceff4" in dark.lower()  # ink colour per theme


def test_unknown_figure_language_or_theme_is_refused():
    with pytest.raises(ValueError, match="name"):
        render("no-such-figure")
    with pytest.raises(ValueError, match="language"):
        FIGURES["attention-masks"].draw(language="de")
    with pytest.raises(ValueError, match="theme"):
        FIGURES["attention-masks"].draw(theme="sepia")


def test_hook_draws_once_then_reuses_until_the_code_changes(tmp_path, monkeypatch):
    import literate.figures

    calls = []

    def fake_render(name, *, language, theme):  # the drawing itself is tested above
        calls.append((name, language, theme))
        return f"<svg>{name} {theme}</svg>".encode()

    monkeypatch.setattr(literate.figures, "render", fake_render)
    first = hooks.ensure_figures(tmp_path)
    assert sorted(calls) == sorted((n, "en", t) for n in FIGURES for t in ("light", "dark"))
    assert len(first.drawn) == 2 * len(FIGURES) and not first.reused
    second = hooks.ensure_figures(tmp_path)
    assert not second.drawn and len(second.reused) == 2 * len(FIGURES)
    assert second.paths == first.paths
    assert set(second.paths) == {f"figures/{n}-{t}.svg" for n in FIGURES for t in ("light", "dark")}
    monkeypatch.setattr(hooks, "_code_fingerprint", lambda: "edited")
    third = hooks.ensure_figures(tmp_path)
    assert len(third.drawn) == 2 * len(FIGURES)
    assert third.paths["figures/attention-masks-dark.svg"].read_bytes() == b"<svg>attention-masks dark</svg>"


def test_fingerprint_covers_every_module_of_literate(tmp_path, monkeypatch):
    before = hooks._code_fingerprint()
    fake_root = tmp_path
    (fake_root / "literate").mkdir()
    for path in (hooks.ROOT / "literate").rglob("*.py"):
        target = fake_root / path.relative_to(hooks.ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    monkeypatch.setattr(hooks, "ROOT", fake_root)
    assert hooks._code_fingerprint() == before
    (fake_root / "literate" / "attention.py").write_text("# edited\n", encoding="utf-8")
    assert hooks._code_fingerprint() != before


def test_planning_draws_nothing_and_a_failed_background_drawing_fails_the_build(tmp_path):
    from concurrent.futures import Future

    report = hooks.plan_figures(tmp_path)
    assert len(report.jobs) == 2 * len(FIGURES) and not list(tmp_path.glob("*.svg"))
    failed: Future = Future()
    failed.set_exception(RuntimeError("a figure function raised"))
    hooks._drawing = failed
    with pytest.raises(RuntimeError, match="a figure function raised"):
        hooks.on_env(None, {}, None)
    assert hooks._drawing is None  # the next build starts clean
