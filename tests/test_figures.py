"""Every figure renders in both languages and both themes, reproducibly, and the build hook
draws each one once and then reuses it until the code behind it changes."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from literate.figures import (
    DRAWN_DARK,
    FIGURE_IMAGE,
    FIGURES,
    LANGUAGES,
    render,
    with_alt_text,
)
from literate.figures.style import (
    DARK_OF_LIGHT,
    PALETTES,
    recolour_dark,
    roles,
    svg_bytes,
)
from literate.site import figure_files, hooks

CYRILLIC = re.compile("[\u0400-\u04ff]")


def figure_texts(fig) -> list[str]:
    texts = [t.get_text() for t in fig.findobj(match=lambda a: hasattr(a, "get_text"))]
    return [t for t in texts if t.strip()]


# Figures whose data is a training run are rendered in each language and theme by the
# test file of that run, in the process whose cache already holds it (rendering them here
# too would train them again in another worker).
TESTED_WITH_THEIR_RUNS = {"moe-tokens-per-expert": "test_moe_training.py"}


def test_figures_tested_elsewhere_are_tested_there():
    for name, test_file in TESTED_WITH_THEIR_RUNS.items():
        text = (Path(__file__).parent / test_file).read_text(encoding="utf-8")
        assert name in FIGURES and f'render("{name}"' in text, (name, test_file)
        assert "def test_the_figure_draws_in_each_language_and_theme" in text


@pytest.mark.parametrize("name", sorted(set(FIGURES) - set(TESTED_WITH_THEIR_RUNS)))
@pytest.mark.parametrize("language", LANGUAGES)
def test_figure_renders_small_in_each_language(name, language):
    fig = FIGURES[name].draw(language=language, theme="light")
    fig.set_size_inches(6, 4.5)
    fig.set_dpi(40)
    words = " ".join(figure_texts(fig))
    if language == "ru":
        assert CYRILLIC.search(words), f"{name}: no Russian label in {words!r}"
    else:
        assert not CYRILLIC.search(words), (
            f"{name}: Russian left in the English figure: {words!r}"
        )
    if language != "en":  # the SVG is the same drawing with other words: written once
        plt.close(fig)
        return
    data = svg_bytes(fig)
    root = ET.fromstring(data)
    assert root.tag.endswith("svg")
    assert not plt.get_fignums(), "svg_bytes closes the figure"


def _hexes(value) -> list[str]:
    """The colours in a getter's value (one colour, or rows of them) as #rrggbbaa."""
    from matplotlib.colors import to_hex

    if isinstance(value, str) or (
        len(value) in (3, 4) and all(isinstance(v, (int, float)) for v in value)
    ):
        return [to_hex(value, keep_alpha=True)]
    return [to_hex(row, keep_alpha=True) for row in value]


COLOUR_GETTERS = (
    "get_color",
    "get_facecolor",
    "get_edgecolor",
    "get_markerfacecolor",
    "get_markeredgecolor",
    "get_facecolors",
    "get_edgecolors",
)


def artist_colours(fig) -> list[tuple[str, tuple[str, ...]]]:
    """Every artist of `fig`, in the order of the drawing's tree, with every colour it
    is drawn in."""
    rows = []
    for artist in fig.findobj():
        colours = []
        for getter in COLOUR_GETTERS:
            if hasattr(artist, getter):
                colours += _hexes(getattr(artist, getter)())
        rows.append((type(artist).__name__, tuple(colours)))
    return rows


def as_dark(
    rows: list[tuple[str, tuple[str, ...]]],
) -> list[tuple[str, tuple[str, ...]]]:
    return [
        (kind, tuple(DARK_OF_LIGHT.get(c[:7], c[:7]) + c[7:] for c in colours))
        for kind, colours in rows
    ]


# Drawing every figure twice more is 15-20 s of CPU: with the readers' checks (what a
# reader of the dark scheme sees), which CI runs; the two end-to-end ones below run always.
@pytest.mark.readers
@pytest.mark.parametrize("name", sorted(set(FIGURES) - set(DRAWN_DARK)))
def test_a_recoloured_figure_is_what_drawing_it_dark_gives(name):
    """A figure whose dark SVG is its light one recoloured (`recolour_dark`) draws, in
    the dark theme, the same artists as in the light one, in the same order, each in
    the dark colour of its light colour's palette role and in no other, and holds no
    image (whose pixels a recolouring would not reach). A figure drawing a fixed colour
    that happens to be a light palette colour fails here (and goes to DRAWN_DARK)."""
    light, dark = (FIGURES[name].draw(theme=theme) for theme in ("light", "dark"))
    try:
        assert not light.findobj(match=lambda a: type(a).__name__ == "AxesImage")
        light_rows, dark_rows = artist_colours(light), artist_colours(dark)
        assert (
            len(light_rows) == len(dark_rows)
            and sum(len(c) for _, c in light_rows) > 10
        )
        assert as_dark(light_rows) == dark_rows
    finally:
        plt.close(light)
        plt.close(dark)


def marker_ids_numbered(svg: bytes) -> str:
    """The SVG with its marker ids (hashes of a marker's path and style, so of its
    colours too) numbered by first appearance."""
    ids: dict[str, str] = {}
    return re.sub(
        r"\bm[0-9a-f]{10}\b",
        lambda m: ids.setdefault(m.group(0), f"marker{len(ids)}"),
        svg.decode("utf-8"),
    )


@pytest.mark.parametrize("name", ["kv-cache-memory", "sampling-distributions"])
def test_the_recoloured_svg_is_the_dark_drawing_byte_for_byte_but_marker_ids(name):
    """Two quick figures with markers, text, lines, bars and a legend, end to end:
    recolouring the light SVG gives the SVG of the dark drawing, but for the marker ids
    (hashes)."""
    assert name not in DRAWN_DARK
    light = svg_bytes(FIGURES[name].draw(theme="light"))
    drawn_dark = svg_bytes(FIGURES[name].draw(theme="dark"))
    assert recolour_dark(light) != light and render(
        name, theme="dark"
    ) == recolour_dark(light)
    assert marker_ids_numbered(recolour_dark(light)) == marker_ids_numbered(drawn_dark)


def test_each_light_colour_has_one_dark_colour():
    """The recolouring is a function of the colour: no light colour serves two roles
    whose dark colours differ (the map would keep one of them silently)."""
    for light, dark in zip(roles(PALETTES["light"]), roles(PALETTES["dark"])):
        assert DARK_OF_LIGHT.get(light.lower(), light.lower()) == dark.lower(), light


def test_the_colours_a_recolouring_cannot_see_are_caught():
    """The check above fails for a figure that draws a fixed colour equal to a light
    palette colour (as box labels in the light ink would: they are in BOX_INK)."""

    def boxes(theme: str):
        fig = FIGURES["sampling-distributions"].draw(theme=theme)
        fig.axes[0].text(0, 0, "label on a box", color="#2E3440")  # the same in both
        return fig

    light, dark = boxes("light"), boxes("dark")
    assert as_dark(artist_colours(light)) != artist_colours(dark)
    plt.close(light)
    plt.close(dark)


def test_light_and_dark_differ_and_each_is_byte_reproducible():
    name = "attention-masks"
    light = render(name, theme="light")
    assert light == render(name, theme="light")
    dark = render(name, theme="dark")
    assert dark != light
    assert (
        b"#2e3440" in light.lower() and b"#eceff4" in dark.lower()
    )  # ink colour per theme


def test_unknown_figure_language_or_theme_is_refused():
    with pytest.raises(
        ValueError,
        match=r"^name must be one of \[.*'attention-masks'.*\], got 'no-such-figure'$",
    ):
        render("no-such-figure")
    with pytest.raises(
        ValueError, match=r"^language must be one of \['en', 'ru'\], got 'de'$"
    ):
        FIGURES["attention-masks"].draw(language="de")
    with pytest.raises(
        ValueError, match=r"^theme must be one of \['light', 'dark'\], got 'sepia'$"
    ):
        FIGURES["attention-masks"].draw(theme="sepia")


def test_hook_draws_once_then_reuses_until_the_code_changes(tmp_path, monkeypatch):
    import literate.figures

    calls = []

    def fake_render(name, *, language, theme):  # the drawing itself is tested above
        calls.append((name, language, theme))
        return f"<svg>{name} {theme}</svg>".encode()

    monkeypatch.setattr(literate.figures, "render", fake_render)
    first = figure_files.ensure_figures(tmp_path)
    # every light variant drawn, dark ones only where recolouring the light one will not do
    assert sorted(calls) == sorted(
        [(n, "en", "light") for n in FIGURES] + [(n, "en", "dark") for n in DRAWN_DARK]
    )
    recoloured = first.paths["figures/sampling-nucleus-dark.svg"].read_bytes()
    assert recoloured == recolour_dark(b"<svg>sampling-nucleus light</svg>")
    assert len(first.drawn) == 2 * len(FIGURES) and not first.reused
    second = figure_files.ensure_figures(tmp_path)
    assert not second.drawn and len(second.reused) == 2 * len(FIGURES)
    assert second.paths == first.paths
    assert set(second.paths) == {
        f"figures/{n}-{t}.svg" for n in FIGURES for t in ("light", "dark")
    }
    monkeypatch.setattr(figure_files, "code_fingerprint", lambda: "edited")
    third = figure_files.ensure_figures(tmp_path)
    assert len(third.drawn) == 2 * len(FIGURES)
    assert (
        third.paths["figures/attention-masks-dark.svg"].read_bytes()
        == b"<svg>attention-masks dark</svg>"
    )


def test_fingerprint_covers_every_module_of_literate(tmp_path, monkeypatch):
    before = figure_files.code_fingerprint()
    fake_root = tmp_path
    (fake_root / "literate").mkdir()
    for path in (hooks.ROOT / "literate").rglob("*.py"):
        target = fake_root / path.relative_to(hooks.ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    monkeypatch.setattr(figure_files, "ROOT", fake_root)
    assert figure_files.code_fingerprint() == before
    (fake_root / "literate" / "parts" / "attention.py").write_text(
        "# edited\n", encoding="utf-8"
    )
    assert figure_files.code_fingerprint() != before


def test_planning_draws_nothing_and_a_failed_background_drawing_fails_the_build(
    tmp_path,
):
    from concurrent.futures import Future

    report = figure_files.plan_figures(tmp_path)
    assert len(report.jobs) == 2 * len(FIGURES) and not list(tmp_path.glob("*.svg"))
    failed: Future = Future()
    failed.set_exception(RuntimeError("a figure function raised"))
    hooks._drawing = failed
    with pytest.raises(RuntimeError, match=r"^a figure function raised$"):
        hooks.on_env(None, {}, None)
    assert hooks._drawing is None  # the next build starts clean


# ---------------------------------------------------------------------------------------
# What the figures draw is measured in literate.numbers.studies, reproducibly


def test_figures_draw_what_literate_studies_measures():
    """The plotting modules import their measurements from literate.numbers.studies (which the
    chapters' claims call too) and define none of their own."""
    import literate.figures.attention as attention_figures
    import literate.figures.gpt2 as gpt2_figures
    import literate.figures.sampling as sampling_figures
    from literate.numbers import studies

    assert attention_figures.score_statistics is studies.score_statistics
    assert gpt2_figures.gradient_study is studies.gradient_study
    assert sampling_figures.sampling_scenario is studies.sampling_scenario
    assert sampling_figures.nucleus_example is studies.nucleus_example
    for module in (attention_figures, gpt2_figures, sampling_figures):
        for name in studies.__all__:
            assert getattr(module, name, getattr(studies, name)) is getattr(
                studies, name
            ), (module.__name__, name)


def test_studies_are_reproducible():
    import torch

    from literate.numbers import studies

    assert studies.score_statistics(64, 4_000) == studies.score_statistics(64, 4_000)
    assert studies.score_statistics(64, 4_000) != studies.score_statistics(
        64, 4_000, seed=19
    )
    threads = torch.get_num_threads()
    for position in studies.NORM_POSITIONS:
        for init in studies.INITS:
            for input_std in (1.0, studies.GPT2_INPUT_STD):
                once = studies.init_study(position, 3, init=init, input_std=input_std)
                torch.set_num_threads(2)  # the study fixes its own thread count
                try:
                    again = studies.init_study(
                        position, 3, init=init, input_std=input_std
                    )
                finally:
                    torch.set_num_threads(threads)
                assert once == again and len(once.ffn_grad) == len(once.stream_rms) == 3
    assert studies.sampling_scenario() == studies.sampling_scenario()
    std = studies.GPT2_INPUT_STD
    assert studies.gradient_study("gpt2", std) is studies.gradient_study(
        "gpt2", std
    )  # one measurement


def test_the_input_scale_reaches_the_pre_norm_stream_and_not_the_post_norm_one():
    """input_std scales what the blocks read: a pre-norm stream starts (and, under GPT-2's
    init at width 64, stays) at that scale, the final norm dividing it out; a post-norm
    stack normalises it away in its first layer."""
    from literate.numbers import studies

    std = studies.GPT2_INPUT_STD
    assert std == 0.02 * math.sqrt(2)
    small = studies.init_study("pre", 3, init="gpt2", input_std=std)
    unit = studies.init_study("pre", 3, init="gpt2")
    assert all(r < 0.05 for r in small.stream_rms) and all(
        abs(r - 1) < 0.02 for r in unit.stream_rms
    )
    assert small.ffn_grad[-1] > 20 * unit.ffn_grad[-1]  # the final norm's 1 / RMS
    post_small = studies.init_study("post", 3, init="gpt2", input_std=std)
    post_unit = studies.init_study("post", 3, init="gpt2")
    assert all(
        abs(a / b - 1) < 0.02 for a, b in zip(post_small.ffn_grad, post_unit.ffn_grad)
    )


def test_the_gradient_figure_draws_gpt2_at_its_embedding_scale():
    import literate.figures.gpt2 as gpt2_figures
    from literate.numbers import studies

    assert gpt2_figures.GRADIENT_ROWS == (
        ("xavier", "xavier", 1.0),
        ("gpt2", "gpt2", studies.GPT2_INPUT_STD),
    )
    assert gpt2_figures.CONTROL == ("gpt2", 1.0)
    fig = gpt2_figures.gradient_figure(language="en", theme="light")
    words = " ".join(figure_texts(fig))
    assert (
        "input RMS 0.028" in words
        and "next to the input" in words
        and "embeddings)" in words
    )
    plt.close(fig)


def test_sampling_studies_are_next_token_distribution():
    import torch

    from literate.decoding.sampling import next_token_distribution
    from literate.numbers import studies

    scenario = studies.sampling_scenario()
    logits = torch.tensor(studies.SCENARIO_LOGITS, dtype=torch.float64)
    assert scenario["logits"] == [3.0, 2.0, 1.0, 0.0]
    for name, settings in studies.POLICIES.items():
        assert scenario[name] == next_token_distribution(logits, **settings).tolist()
    assert [p > 0 for p in scenario["top_k_2"]] == [True, True, False, False]
    assert [p > 0 for p in scenario["top_p_09"]] == [True, True, True, False]
    nucleus = torch.tensor(studies.NUCLEUS_LOGITS, dtype=torch.float64)
    for t in studies.NUCLEUS_TEMPERATURES:
        example = studies.nucleus_example(t)
        kept = (
            next_token_distribution(nucleus, temperature=t, top_p=studies.NUCLEUS_TOP_P)
            > 0
        )
        assert (
            example["kept"] == int(kept.sum()) and kept[: example["kept"]].all()
        )  # a prefix: sorted logits
        assert (
            example["probs"] == next_token_distribution(nucleus, temperature=t).tolist()
        )


def test_studies_refuse_unknown_settings():
    from literate.numbers import studies

    with pytest.raises(
        ValueError,
        match=r"^norm_position must be one of \['pre', 'post'\], got 'middle'$",
    ):
        studies.init_study("middle", 2)
    with pytest.raises(
        ValueError, match=r"^init must be one of \['xavier', 'gpt2'\], got 'zeros'$"
    ):
        studies.init_study("pre", 2, init="zeros")
    with pytest.raises(ValueError, match=r"^n_layers must be >= 1, got 0$"):
        studies.init_study("pre", 0)
    with pytest.raises(
        ValueError, match=r"^input_std must be finite and > 0, got 0\.0$"
    ):
        studies.init_study("pre", 2, input_std=0.0)


def test_ipython_is_imported_before_the_figure_and_notebook_threads_start():
    """The figures' thread makes matplotlib canvases, which read `IPython.version_info`
    when IPython is in sys.modules; the notebooks' thread imports IPython. A canvas made
    while that import is half done raised AttributeError and failed a build, so the
    hook's on_config (which runs before both threads) imports it. In a fresh
    interpreter, where importing the hooks does not import IPython."""
    import subprocess
    import sys

    code = (
        "import sys\nimport literate.site.hooks as h\n"
        "assert 'IPython' not in sys.modules\n"
        "h.cover_notebook_cache_with_code = lambda: None\n"
        "h.on_config({'theme': {'features': []}})\n"
        "print(sys.modules['IPython'].version_info >= (8,))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=hooks.ROOT,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "True"


# --------------------------------------------------------------------------------------
# Alt text: one description per figure, registered with it, written into the pages


def test_a_page_figure_gets_its_registered_alt_text_and_a_second_one_is_refused():
    masks = FIGURES["attention-masks"].alt
    page = (
        "Masks:\n\n![](../figures/attention-masks-light.svg#only-light){ .figure }\n"
        "![](../../figures/attention-masks-dark.svg#only-dark){ .figure }\n"
        "![a photo](../img/photo.png), `![](figures/x-light.svg)` and\n"
        "```md\n![](../figures/y-light.svg)\n```\nstay\n"
    )
    filled = with_alt_text(page, "p.md")
    assert filled.count(f"![{masks}](") == 2
    assert "![a photo](../img/photo.png)" in filled
    assert filled.replace(f"![{masks}]", "![]").replace("![]", "", 2) == page.replace(
        "![]", "", 2
    )
    with pytest.raises(
        ValueError,
        match=r"p\.md: figure 'attention-masks' has alt text in the Markdown",
    ):
        with_alt_text("![Six masks](../figures/attention-masks-light.svg)", "p.md")
    with pytest.raises(
        ValueError, match=r"p\.md: '../figures/no-such-light.svg' is no figure"
    ):
        with_alt_text("![](../figures/no-such-light.svg)", "p.md")


def test_every_registered_alt_text_is_one_plain_description():
    for name, spec in FIGURES.items():
        assert 10 <= len(spec.alt.split()) <= 200, name
        assert not set(spec.alt) & set("[]\n`\\<>"), (
            f"{name}: Markdown would read its alt text"
        )


def test_every_figure_a_page_shows_leaves_its_brackets_empty():
    shown = set()
    for page in sorted((hooks.ROOT / "docs").rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        with_alt_text(
            text, page.name
        )  # raises on a second description or an unknown figure
        shown |= {m["name"] for m in FIGURE_IMAGE.finditer(text)} - {None}
    assert shown == set(FIGURES)


def test_the_sampling_alt_texts_state_what_the_studies_compute():
    from literate.numbers.studies import (
        NUCLEUS_TEMPERATURES,
        POLICIES,
        nucleus_example,
        sampling_scenario,
    )

    scenario = sampling_scenario()
    alt = FIGURES["sampling-distributions"].alt
    for policy in POLICIES:  # each policy's kept probabilities, in the alt text's order
        kept = ", ".join(f"{p:.2f}" for p in scenario[policy] if p > 0)
        assert (kept if policy != "top_k_2" else kept.replace(", ", " and ")) in alt, (
            policy
        )
    kept = [nucleus_example(t)["kept"] for t in NUCLEUS_TEMPERATURES]
    assert NUCLEUS_TEMPERATURES == (0.7, 1.5) and kept == [4, 6]
    assert "holds 4 of the 10" in FIGURES["sampling-nucleus"].alt
    assert "holds 6" in FIGURES["sampling-nucleus"].alt
