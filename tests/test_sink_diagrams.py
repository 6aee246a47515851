"""Chapter 10's StreamingLLM figure draws what a `SinkRingCache` holds: the snapshots are
a fresh cache's state (and the page's place rule), and every number, colour and line of
the drawing is read back and compared with them."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.colors import to_hex
from matplotlib.patches import FancyBboxPatch
from matplotlib.text import Text

from literate.figures import FIGURES, sink_diagrams
from literate.figures.style import GREEN, ORANGE, PALETTES
from literate.parts.sink_cache import SinkRingCache

NAME = "sink-ring-cache"
CYRILLIC = re.compile("[\u0400-\u04ff]")


@pytest.fixture
def drawn():
    figures = {}

    def draw(language: str = "en"):
        fig = FIGURES[NAME].draw(language=language, theme="light")
        figures[language] = fig
        return fig

    yield draw
    for fig in figures.values():
        plt.close(fig)


def gid_texts(fig) -> dict[str, Text]:
    return {t.get_gid(): t for t in fig.findobj(Text) if t.get_gid()}


def fresh_state(token: int, sinks: int = 4, window: int = 8):
    """A cache fed tokens 0 .. token (key = text position), read another way than the
    figure's: kept(), and the ring's own record of which position each slot holds."""
    cache = SinkRingCache(1, 1, 1, window=window, sinks=sinks, dtype=torch.float64)
    for p in range(token + 1):
        x = torch.full((1, 1, 1, 1), float(p), dtype=torch.float64)
        cache.update(x, torch.zeros_like(x))
    ring = [sinks + q for q in cache.ring.positions.tolist() if q >= 0]
    return cache.kept(), ring


def test_the_figure_is_registered_from_this_module():
    assert FIGURES[NAME].draw.__module__ == sink_diagrams.__name__


def test_the_snapshots_are_the_cache_and_the_pages_place_rule():
    snaps = sink_diagrams.sink_snapshots()
    assert [s.token for s in snaps] == list(sink_diagrams.SINK_SHOWN) == [9, 20]
    for snap in snaps:
        s, w, n = snap.sinks, snap.window, snap.token + 1
        assert (s, w) == (4, 8)
        kept, ring = fresh_state(snap.token)
        assert list(snap.kept) == kept == [*range(s), *range(n - (w - s), n)]
        assert list(snap.ring_slots) == ring and snap.sink_slots == tuple(range(s))
        for slot, p in enumerate(snap.ring_slots):
            assert slot == (p - s) % (w - s)  # the ring's rule
        # the page's rule: place(p) = p for a sink, p - (n - W) for the ring
        assert snap.places == {p: p if p < s else p - (n - w) for p in kept}
        assert sorted(snap.places.values()) == list(range(w))
        assert snap.evicted == tuple(range(s, n - (w - s)))
    assert snaps[0].ring_slots == (8, 9, 6, 7)  # wrapped: the paper's example
    assert snaps[1].kept == (0, 1, 2, 3, 17, 18, 19, 20)  # the page's example


def _box_under(fig, text: Text) -> FancyBboxPatch:
    """The box a label is centred on."""
    x, y = text.get_position()
    boxes = [
        b
        for b in fig.findobj(FancyBboxPatch)
        if b.get_x() < x < b.get_x() + b.get_width()
        and b.get_y() < y < b.get_y() + b.get_height()
    ]
    assert len(boxes) == 1, text.get_text()
    return boxes[0]


def test_the_figure_draws_each_token_slot_and_place_the_cache_holds(drawn):
    fig = drawn("en")
    labels = gid_texts(fig)
    blue, empty = PALETTES["light"].series[0], PALETTES["light"].empty
    (ax,) = fig.axes
    lines = [tuple(zip(*line.get_data())) for line in ax.get_lines()]
    for snap in sink_diagrams.sink_snapshots():
        kept, ring = fresh_state(snap.token)
        n = snap.token + 1
        row = {q: labels[f"sink-t{snap.token}-text{q}"] for q in range(n)}
        assert f"sink-t{snap.token}-text{n}" not in labels
        for q, label in row.items():
            assert label.get_text() == str(q)
            face = to_hex(_box_under(fig, label).get_facecolor())
            want = (
                empty
                if q not in kept
                else ORANGE
                if q == snap.token
                else GREEN
                if q < snap.sinks
                else blue
            )
            assert face == want.lower(), (snap.token, q)
        stored = [("sink", j, q) for j, q in enumerate(range(snap.sinks))]
        stored += [("ring", j, q) for j, q in enumerate(ring)]
        assert not {f"sink-t{snap.token}-ring{len(ring)}"} & set(labels)
        for kind, j, q in stored:
            slot = labels[f"sink-t{snap.token}-{kind}{j}"]
            place = labels[f"sink-t{snap.token}-{kind}{j}-place"]
            assert slot.get_text() == str(q)
            assert place.get_text() == str(kept.index(q))  # its index in cache order
            # one line from the token in the text down to this slot
            top, bottom = row[q].get_position(), slot.get_position()
            joined = [
                seg
                for seg in lines
                if abs(seg[0][0] - top[0]) < 1e-9 and abs(seg[1][0] - bottom[0]) < 1e-9
                if top[1] > seg[0][1] > seg[1][1] > bottom[1]
            ]
            assert len(joined) == 1, (snap.token, q)
        step = labels[f"sink-t{snap.token}-step"].get_text()
        gone = snap.evicted
        assert f"token {snap.token}:" in step
        assert f"{gone[0]}–{gone[-1]}" in step or ", ".join(map(str, gone)) in step
    assert len(lines) == 2 * 8  # a line per held token, per panel


def test_the_alt_text_states_what_the_cache_holds():
    alt = FIGURES[NAME].alt
    first, last = sink_diagrams.sink_snapshots()
    for snap in (first, last):
        ring = ", ".join(map(str, snap.ring_slots))
        places = ", ".join(str(snap.places[q]) for q in snap.ring_slots)
        assert f"{ring}" in alt and f"{places}" in alt, (ring, places)
        assert f"Decoding token {snap.token}" in alt
    assert "tokens 4 and 5 are evicted" in alt and first.evicted == (4, 5)
    assert "tokens 4 to 16 are evicted" in alt and last.evicted == tuple(range(4, 17))
    assert f"S = {first.sinks} sinks and W = {first.window} slots" in alt
    assert last.places[last.token] == first.places[first.token] == 7
    assert "both turned at place 7" in alt


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_figure_fits_a_phone_in_each_language(drawn, language):
    fig = drawn(language)
    width, height = fig.get_size_inches()
    assert width <= 5.2 and height <= 5.0
    texts = [t for t in fig.findobj(Text) if t.get_text().strip()]
    assert min(t.get_fontsize() for t in texts) >= 10
    fig.canvas.draw()
    renderer, frame = fig.canvas.get_renderer(), fig.bbox
    for t in texts:  # nothing clipped at the figure's edges
        box = t.get_window_extent(renderer)
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1, t.get_text()
        assert frame.y0 <= box.y0 and box.y1 <= frame.y1, t.get_text()
    words = " ".join(t.get_text() for t in texts)
    assert bool(CYRILLIC.search(words)) == (language == "ru")
