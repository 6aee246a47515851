"""One look for every figure: palette, fonts, light and dark variants, reproducible SVG.

Figures are drawn at build time by the MkDocs hook, light and dark (most dark variants
are the light SVG recoloured, `recolour_dark`; see `literate.figures`). A figure function
takes `language` ("en" or "ru": labels come from a small table per figure, as in the
source notebook) and `theme` ("light" or "dark"), and returns a Matplotlib figure.
`svg_bytes` turns it into SVG that is byte-identical from one run to the next.
"""

from __future__ import annotations

import io
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Mapping

import matplotlib

matplotlib.use("Agg")  # figures are files, never windows

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from literate.parts.checks import choice  # noqa: E402

LANGUAGES = ("en", "ru")
THEMES = ("light", "dark")

# The source notebook's palette (Nord), shared by both themes.
BLUE = "#5E81AC"
GREEN = "#A3BE8C"
ORANGE = "#D08770"
PURPLE = "#8055A6"
RED = "#BF616A"
# Labels on a coloured box, the same in both themes (the boxes keep their colours). Darker
# than the light ink, and not a palette colour, so `recolour_dark` leaves it as it is.
BOX_INK = "#242933"


@dataclass(frozen=True)
class Palette:
    ink: str  # titles, labels
    muted: str  # ticks
    border: str  # axes, grid
    empty: str  # "blocked" cells of a mask
    series: tuple[str, ...]


PALETTES = {
    "light": Palette(
        ink="#2E3440",
        muted="#4C566A",
        border="#D8DEE9",
        empty="#ECEFF4",
        series=(BLUE, ORANGE, GREEN, PURPLE, RED),
    ),
    "dark": Palette(
        ink="#ECEFF4",
        muted="#D8DEE9",
        border="#4C566A",
        empty="#3B4252",
        series=("#81A1C1", ORANGE, GREEN, "#B48EAD", RED),
    ),
}


def roles(p: Palette) -> tuple[str, ...]:
    """The palette's colours, role by role."""
    return (p.ink, p.muted, p.border, p.empty, *p.series)


# Light colour -> dark colour, role by role: a figure whose every theme-dependent colour
# is a palette role has, as its dark SVG, its light SVG with these colours swapped.
DARK_OF_LIGHT = {
    light.lower(): dark.lower()
    for light, dark in zip(roles(PALETTES["light"]), roles(PALETTES["dark"]))
    if light.lower() != dark.lower()
}
_LIGHT_COLOUR = re.compile("|".join(DARK_OF_LIGHT), re.IGNORECASE)


def recolour_dark(light_svg: bytes) -> bytes:
    """The dark variant of a figure from its light SVG: every light palette colour
    replaced by its dark one, in one pass (matplotlib writes colours as #rrggbb)."""
    return _LIGHT_COLOUR.sub(
        lambda m: DARK_OF_LIGHT[m.group(0).lower()], light_svg.decode("utf-8")
    ).encode("utf-8")


def palette(theme: str) -> Palette:
    return PALETTES[choice("theme", theme, THEMES)]


def text(labels: Mapping[str, Mapping[str, str]], language: str) -> Mapping[str, str]:
    """The label table of one language, e.g. `text(LABELS, "ru")["title"]`."""
    return labels[choice("language", language, LANGUAGES)]


@contextmanager
def style(theme: str) -> Iterator[Palette]:
    """rcParams for one figure, restored afterwards. The background is transparent so a
    figure sits on the page's own colour in either scheme."""
    p = palette(theme)
    rc = {
        "font.family": "DejaVu Sans",
        "font.size": 12,
        "text.color": p.ink,
        "axes.labelcolor": p.ink,
        "axes.titlecolor": p.ink,
        "axes.titlesize": 14,
        "axes.titleweight": "bold",
        "axes.titlelocation": "left",
        "axes.labelsize": 12,
        "xtick.labelsize": 10,
        "ytick.labelsize": 10,
        "xtick.color": p.muted,
        "ytick.color": p.muted,
        "axes.edgecolor": p.border,
        "axes.linewidth": 0.7,
        "axes.facecolor": "none",
        "figure.facecolor": "none",
        "savefig.facecolor": "none",
        "grid.color": p.border,
        "grid.linewidth": 0.7,
        "axes.axisbelow": True,
        "legend.fontsize": 10,
        "legend.frameon": False,
        "legend.labelcolor": p.ink,
        "xtick.major.size": 0,
        "ytick.major.size": 0,
        "axes.prop_cycle": matplotlib.cycler(color=list(p.series)),
    }
    with plt.rc_context(rc):
        yield p


def svg_bytes(fig: Figure) -> bytes:
    """Serialise and close `fig`. No date and no tool version in the file, so two runs
    of the same code give the same bytes."""
    buffer = io.BytesIO()
    # Fixed element ids, and glyphs as paths (no font needed to view the file).
    with plt.rc_context(
        {"svg.hashsalt": "transformer-blocks-literate", "svg.fonttype": "path"}
    ):
        fig.savefig(
            buffer,
            format="svg",
            facecolor="none",
            metadata={"Date": None, "Creator": None},
        )
    plt.close(fig)
    return buffer.getvalue()
