"""Every figure of the site, by name. The MkDocs hook draws each one in both themes.

A figure is a function `draw(*, language="en", theme="light") -> Figure`. Add one by
writing the function in the module of its chapter and registering it here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from matplotlib.figure import Figure

from literate.figures import attention
from literate.figures.style import LANGUAGES, THEMES, svg_bytes


@dataclass(frozen=True)
class FigureSpec:
    name: str
    draw: Callable[..., Figure]
    alt: str  # what the figure shows, for readers who cannot see it


FIGURES: dict[str, FigureSpec] = {
    spec.name: spec
    for spec in [
        FigureSpec(
            "attention-scaling",
            attention.scaling_figure,
            "Unscaled score variance grows like d_k while the scaled variance stays near 1; "
            "unscaled softmax rows concentrate on one key as d_k grows.",
        ),
        FigureSpec(
            "attention-masks",
            attention.masks_figure,
            "Six boolean masks: padding, causal, both, cross-attention with a padded source, "
            "cached decode with the right query offset, and with the offset forgotten.",
        ),
    ]
}


def render(name: str, *, language: str = "en", theme: str = "light") -> bytes:
    """The SVG bytes of one figure."""
    if name not in FIGURES:
        raise ValueError(f"name must be one of {sorted(FIGURES)}, got {name!r}")
    return svg_bytes(FIGURES[name].draw(language=language, theme=theme))


__all__ = ["FIGURES", "FigureSpec", "LANGUAGES", "THEMES", "render"]
