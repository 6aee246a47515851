"""Chapter 8's "cache-model", "cache-padding-sides" and "cache-beam-reorder" figures
draw what the code computes: the slots each call writes in every block's cache, the
next token each padded row chooses, and the rows `beam_search` reorders, never typed."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.patches import FancyArrowPatch, Rectangle

from literate.decoding.beam import beam_generate
from literate.decoding.generate import generate
from literate.figures import FIGURES
from literate.figures.cache_diagrams import (
    BEAM_PROMPT,
    BEAM_STEPS,
    BEAMS,
    MODEL_PROMPT,
    MODEL_STEPS,
    SIDES_LENGTHS,
    beam_walk,
    model_walk,
    sides_model,
    sides_walk,
)
from literate.minimal.generate import generate as minimal_generate
from literate.minimal.llama import LlamaModel

CYRILLIC = re.compile("[\u0400-\u04ff]")
PAGE = Path(__file__).parents[1] / "docs" / "decoding" / "kv-cache.md"
NAMES = ("cache-model", "cache-padding-sides", "cache-beam-reorder")


def gids(fig, kind=Rectangle) -> list[str]:
    return [a.get_gid() for a in fig.findobj(kind) if a.get_gid()]


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(match=lambda a: hasattr(a, "get_text"))]


@pytest.fixture(scope="module")
def walks():
    return model_walk(), sides_walk(), beam_walk()


def draw(name: str, language: str = "en"):
    return FIGURES[name].draw(language=language, theme="light")


def test_the_model_walk_is_the_pages_generate(walks):
    """The tokens drawn are what the page's minimal Llama (seed 0) generates."""
    walk = walks[0]
    torch.manual_seed(0)
    model = (
        LlamaModel(
            vocab_size=50, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=64
        )
        .double()
        .eval()
    )
    out = minimal_generate(model, torch.tensor([MODEL_PROMPT]), max_new_tokens=3)
    assert walk.tokens == tuple(out[0].tolist())
    n0 = len(MODEL_PROMPT)
    assert walk.next_pos_after == tuple(range(n0, n0 + MODEL_STEPS + 1))
    expected = (tuple(range(n0)),) + tuple((n0 + i,) for i in range(MODEL_STEPS))
    assert all(layer == expected for layer in walk.wrote)  # every block, in step
    assert walk.n_layers == 2 and walk.shape == (1, 2, 8, 8)


def test_the_model_figure_draws_each_blocks_slots_by_call(walks):
    walk = walks[0]
    fig = draw("cache-model")
    try:
        drawn = {}
        for gid in gids(fig):
            if m := re.fullmatch(r"model-slot-(\d+)-(\d+)-(call-(\d+)|empty)", gid):
                drawn[int(m[1]), int(m[2])] = None if m[4] is None else int(m[4])
        for i, calls in enumerate(walk.wrote):
            for s in range(walk.shape[2]):
                want = [c for c, slots in enumerate(calls) if s in slots]
                assert drawn[i, s] == (want[-1] if want else None)
        tokens = [g for g in gids(fig) if g.startswith(("model-token", "model-chosen"))]
        assert sorted(tokens, key=lambda g: int(g.split("-")[2])) == [
            f"model-{'token' if s < len(walk.tokens) - 1 else 'chosen'}-{s}-{tok}"
            for s, tok in enumerate(walk.tokens)
        ]
        (arrow,) = gids(fig, FancyArrowPatch)
        assert arrow == f"model-next-pos-{walk.next_pos_after[-1]}"
        assert "call 2: token 23, slot 4" in texts(fig)
    finally:
        plt.close(fig)


def test_the_sides_walk_is_what_generate_and_the_claim_compute(walks):
    walk = walks[1]
    model, ids = sides_model()
    t0 = ids.shape[1]
    for r, n in enumerate(SIDES_LENGTHS):
        alone = generate(model, ids[r : r + 1, t0 - n :], 1)[0, -1]
        assert walk.alone_next[r] == int(alone)
        assert list(walk.right_ids[r][:n]) == ids[r, t0 - n :].tolist()
    assert walk.left_next == walk.alone_next  # left padding is right
    valid = torch.tensor(walk.left_valid)
    together = generate(model, torch.tensor(walk.left_ids), 1, valid=valid)[:, -1]
    assert walk.left_next == tuple(together.tolist())
    assert walk.right_next[0] == walk.alone_next[0]  # row 0 is not padded
    assert all(walk.right_next[r] != walk.alone_next[r] for r in (1, 2))


def test_the_sides_figure_draws_the_pads_and_the_choices(walks):
    walk = walks[1]
    fig = draw("cache-padding-sides")
    try:
        got = set(gids(fig))
        for side, ids, chosen in (
            ("left", walk.left_ids, walk.left_next),
            ("right", walk.right_ids, walk.right_next),
        ):
            for r, n in enumerate(SIDES_LENGTHS):
                t0 = len(ids[r])
                real = range(t0 - n, t0) if side == "left" else range(n)
                for s in range(t0):
                    kind = "real" if s in real else "pad"
                    assert f"sides-{side}-{r}-{s}-{kind}" in got
                assert f"sides-{side}-{r}-new-{chosen[r]}" in got
        labels = texts(fig)
        for tok in walk.alone_next:
            assert f"alone: {tok}" in labels
    finally:
        plt.close(fig)


def test_the_beam_walk_returns_beam_generates_best(walks):
    walk = walks[2]
    model, ids = sides_model()
    prompt = ids[:1, :BEAM_PROMPT]
    sequences, _ = beam_generate(model, prompt, BEAMS, BEAM_STEPS)
    assert walk.best == tuple(sequences[0, BEAM_PROMPT:].tolist())
    assert walk.prompt == tuple(prompt[0].tolist())
    # the best hypothesis's tokens, read along the rows it ran in
    along = [walk.tokens[t][r] for t, r in enumerate(walk.best_rows)]
    assert tuple(along) == walk.best[:-1]
    for t in range(1, len(walk.best_rows)):
        assert walk.rows[t - 1][walk.best_rows[t]] == walk.best_rows[t - 1]
    assert any(rows != tuple(range(BEAMS)) for rows in walk.rows)  # a real reorder
    greedy = generate(model, prompt, 1)[0, -1]
    assert walk.tokens[0][0] == int(greedy) != walk.best[0]


def test_the_beam_figure_draws_every_reorder(walks):
    walk = walks[2]
    fig = draw("cache-beam-reorder")
    try:
        arrows = {g for g in gids(fig, FancyArrowPatch) if g.startswith("beam-arrow")}
        want = {
            f"beam-arrow-{c + 1}-{rows[i]}-{i}"
            for c, rows in enumerate(walk.rows)
            for i in range(BEAMS)
        }
        assert arrows == want
        cells = set(gids(fig))
        for c, tokens in enumerate(walk.tokens):
            rows = walk.rows[c - 1] if c else tuple(range(BEAMS))
            for i, tok in enumerate(tokens):
                assert f"beam-{c}-{i}-{tok}-from-{rows[i]}" in cells
        assert f"beam-last-{walk.best[-1]}" in cells
        for rows in walk.rows:
            assert "[" + ", ".join(map(str, rows)) + "]" in texts(fig)
    finally:
        plt.close(fig)


@pytest.mark.parametrize("name", NAMES)
def test_labels_are_russian_in_russian_only(name):
    for language in ("en", "ru"):
        fig = draw(name, language)
        try:
            joined = " ".join(texts(fig))
            assert bool(CYRILLIC.search(joined)) == (language == "ru")
            assert fig.get_size_inches()[0] <= 5.2
            sizes = [
                t.get_fontsize()
                for t in fig.findobj(match=lambda a: hasattr(a, "get_fontsize"))
            ]
            assert min(sizes) >= 10
        finally:
            plt.close(fig)


@pytest.mark.parametrize("name", NAMES)
def test_the_page_shows_the_figure_once_outside_any_fold(name):
    lines = PAGE.read_text().splitlines()
    where = [i for i, line in enumerate(lines) if f"figures/{name}-light.svg" in line]
    assert len(where) == 1
    assert lines[where[0]].startswith("![](")  # column 0, not in a fold
    assert f"figures/{name}-dark.svg" in lines[where[0] + 1]
