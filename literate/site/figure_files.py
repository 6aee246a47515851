"""The figures as files of the build: each figure of `literate.figures.FIGURES` in a light
and a dark variant, cached in `.cache/figures/` under a key that hashes everything it
depends on (`code_fingerprint`: all of `literate/` and the plotting and tensor library
versions; and its name, theme and language), so an unchanged figure is reused and any
edit to the code that draws or feeds it redraws it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from literate.site.docblocks import ROOT

FIGURE_CACHE = ROOT / ".cache" / "figures"


def code_fingerprint() -> str:
    """Hash of every source file under literate/ plus the versions that shape the output."""
    import matplotlib
    import torch

    h = hashlib.sha256()
    for path in sorted((ROOT / "literate").rglob("*.py")):
        h.update(path.relative_to(ROOT).as_posix().encode())
        h.update(path.read_bytes())
    h.update(f"matplotlib={matplotlib.__version__} torch={torch.__version__}".encode())
    return h.hexdigest()


@dataclass
class FigureReport:
    paths: dict[str, Path]  # served uri -> cached file
    drawn: list[str]  # file names drawn (or to be drawn, see `plan_figures`)
    reused: list[str]
    jobs: list[tuple[str, str, Path]]  # (name, theme, path) still to draw


def plan_figures(
    cache_dir: Path = FIGURE_CACHE, *, language: str = "en"
) -> FigureReport:
    """Where every figure will be, and which ones are not in the cache yet (nothing drawn)."""
    from literate.figures import FIGURES, THEMES

    fingerprint = code_fingerprint()
    cache_dir.mkdir(parents=True, exist_ok=True)
    report = FigureReport(paths={}, drawn=[], reused=[], jobs=[])
    for name in FIGURES:
        for theme in THEMES:
            key = hashlib.sha256(
                f"{fingerprint}|{name}|{theme}|{language}".encode()
            ).hexdigest()[:20]
            path = cache_dir / f"{name}-{theme}-{key}.svg"
            if path.exists():
                report.reused.append(path.name)
            else:
                report.jobs.append((name, theme, path))
                report.drawn.append(path.name)
            report.paths[f"figures/{name}-{theme}.svg"] = path
    return report


def draw_figures(jobs: list[tuple[str, str, Path]], *, language: str = "en") -> None:
    """Draw the planned figures; each file appears whole or not at all."""
    import literate.figures

    literate.figures.draw_files(jobs, language=language)


def ensure_figures(
    cache_dir: Path = FIGURE_CACHE, *, language: str = "en"
) -> FigureReport:
    """Draw every figure that is not in the cache yet; return where each one is."""
    report = plan_figures(cache_dir, language=language)
    draw_figures(report.jobs, language=language)
    report.jobs = []
    return report
