"""The committed benchmark results, the page that shows them and the figure drawn from them.

No test here times anything: the committed file is checked for its structure and its
values (`check_results`), the page's blocks are run and their table counted, the figure's
plotted numbers are read back, and `--json` is run on made-up rows with a stubbed timer.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.colors import to_rgba
from matplotlib.text import Text

import literate.figures.bench as bench_figures
import literate.tools.bench as bench
import literate.tools.bench.results as bench_results
from literate.figures import FIGURES
from literate.figures.style import PALETTES
from literate.site.docblocks import ROOT
from literate.site.outputs import run_page, with_outputs
from literate.tools import timing
from literate.tools.bench import RESULTS_PATH, ROWS, Row, check_results, load_results

PAGE = "appendix/benchmarks.md"


@pytest.fixture(scope="module")
def committed():
    return json.loads(RESULTS_PATH.read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------------------
# The committed file


def test_the_committed_file_fits_the_schema_and_is_pinned(committed):
    assert check_results(committed) == []
    assert (
        hashlib.sha256(RESULTS_PATH.read_bytes()).hexdigest()
        == bench_results.RESULTS_SHA256
    )
    assert load_results() == committed


def test_the_committed_file_is_a_full_run_of_every_row(committed):
    assert committed["quick"] is False
    assert [
        (row["group"], row["name"], row["reference"]) for row in committed["rows"]
    ] == [(row.group, row.name, row.reference) for row in ROWS]
    for row, spec in zip(committed["rows"], ROWS):
        assert row["rounds"] == max(9, spec.rounds), row[
            "name"
        ]  # the default --rounds 9


def _valid() -> dict:
    row = {
        "group": "g",
        "name": "a",
        "reference": "b",
        "ours_s": 0.002,
        "theirs_s": 0.001,
        "ratio": 2.0,
        "min": 1.5,
        "max": 2.5,
        "rounds": 3,
        "calls": 10,
        "max_abs_diff": 0.0,
    }
    return {
        "machine": {"cpu": "x", "cores": 2, "threads": 1},
        "versions": {"python": "3", "torch": "2", "transformers": "5"},
        "date": "2025-01-31T12:00:00+00:00",
        "commit": None,
        "quick": True,
        "seconds": 1,
        "rows": [row],
    }


def _broken(edit) -> list[str]:
    data = copy.deepcopy(_valid())
    edit(data)
    return check_results(data)


def test_the_checker_names_what_is_wrong():
    assert check_results(_valid()) == []
    assert _broken(lambda d: d["machine"].pop("cpu")) == [
        "results.machine: missing key 'cpu'"
    ]
    assert _broken(lambda d: d.update(extra=1)) == ["results: unexpected key 'extra'"]
    assert _broken(lambda d: d["rows"][0].update(rounds=3.0)) == [
        "results.rows[0].rounds: expected int, got 3.0"
    ]
    assert _broken(lambda d: d["machine"].update(threads=True)) == [
        "results.machine.threads: expected int, got True"
    ]
    assert _broken(lambda d: d["rows"][0].update(max_abs_diff="0")) == [
        "results.rows[0].max_abs_diff: expected float or null, got '0'"
    ]
    assert _broken(lambda d: d.update(rows={})) == [
        "results.rows: expected a list, got dict"
    ]
    assert _broken(lambda d: d["rows"][0].update(min=2.1)) == [
        "results.rows[0]: expected min <= ratio <= max, got 2.1, 2.0, 2.5"
    ]
    assert _broken(
        lambda d: d["rows"][0].update(ours_s=float("inf"), max=float("inf"))
    ) == [
        "results.rows[0].ours_s: expected a finite positive number, got inf",
        "results.rows[0].max: expected a finite positive number, got inf",
    ]
    assert _broken(lambda d: d["rows"][0].update(calls=0)) == [
        "results.rows[0].calls: expected at least 1, got 0"
    ]
    assert _broken(lambda d: d.update(date="2025-01-31T13:00:00+01:00")) == [
        "results.date: expected a UTC date, got '2025-01-31T13:00:00+01:00'"
    ]
    assert _broken(lambda d: d.update(date="yesterday")) == [
        "results.date: expected an ISO 8601 date, got 'yesterday'"
    ]
    assert _broken(lambda d: d.update(commit="abc")) == [
        "results.commit: expected 40 hex digits or null, got 'abc'"
    ]
    assert _broken(lambda d: d["rows"].append(dict(d["rows"][0]))) == [
        "results.rows[1]: ('a', 'b') appears twice"
    ]
    assert _broken(lambda d: d.update(rows=[])) == [
        "results.rows: expected at least one row"
    ]


def test_a_committed_file_whose_digest_is_not_pinned_is_refused(tmp_path, monkeypatch):
    target = tmp_path / "bench.json"
    target.write_text(json.dumps(_valid()), encoding="utf-8")
    assert load_results(target) == _valid()  # an explicit path: no pin
    monkeypatch.setattr(bench_results, "RESULTS_PATH", target)
    with pytest.raises(
        ValueError,
        match=r"^bench\.json has sha256 [0-9a-f]{64}, but RESULTS_SHA256 "
        r"pins [0-9a-f]{64}: regenerate it with `make bench`",
    ):
        load_results()
    target.write_text(json.dumps({**_valid(), "rows": []}), encoding="utf-8")
    with pytest.raises(
        ValueError,
        match=r"is not a results file:\nresults.rows: expected at least one row$",
    ):
        load_results(target)


def test_pin_finds_its_line_in_the_module():
    source = Path(bench_results.__file__).read_text(encoding="utf-8")
    assert re.findall(
        r'^RESULTS_SHA256 = "([0-9a-f]{64})"$', source, flags=re.MULTILINE
    ) == [bench_results.RESULTS_SHA256]


def test_pin_rewrites_the_one_digest_line(tmp_path):
    source = tmp_path / "results.py"
    source.write_text(
        'x = 1\nRESULTS_SHA256 = "' + "0" * 64 + '"  # pinned\n', encoding="utf-8"
    )
    bench_results.pin("ab" * 32, source)
    assert (
        source.read_text(encoding="utf-8")
        == 'x = 1\nRESULTS_SHA256 = "' + "ab" * 32 + '"  # pinned\n'
    )
    source.write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="expected one RESULTS_SHA256 line, found 0"):
        bench_results.pin("ab" * 32, source)


# ---------------------------------------------------------------------------------------
# The page and the figure


def test_the_page_prints_the_run_and_one_table_row_per_result(committed):
    outputs = run_page(PAGE)
    assert len(outputs) == 3
    run, table, slower = outputs
    machine = committed["machine"]
    assert run.splitlines()[:2] == [
        f"measured on {committed['date']} (UTC), commit {committed['commit']}",
        f"CPU {machine['cpu']}, {machine['cores']} logical cores, {machine['threads']} intra-op thread(s)",
    ]
    lines = table.splitlines()
    assert lines[1] == "|---|---|---|--:|--:|--:|:-:|"
    body = lines[2:]
    assert len(body) == len(committed["rows"])
    for line, row in zip(body, committed["rows"]):
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert cells == [
            row["group"],
            row["name"],
            row["reference"],
            f"{row['ours_s'] * 1e3:.3f}",
            f"{row['theirs_s'] * 1e3:.3f}",
            f"{row['ratio']:.2f}",
            f"{row['min']:.2f}-{row['max']:.2f}",
        ]
    above = [row for row in committed["rows"] if row["ratio"] > 1.0]
    assert slower.splitlines()[-1] == f"{len(above)} of {len(committed['rows'])} rows"
    assert len(slower.splitlines()) == len(above) + 1
    # The table goes on the page as Markdown (no Output box); the other two in boxes.
    page = with_outputs((ROOT / "docs" / PAGE).read_text(encoding="utf-8"), outputs)
    assert "\n" + table.rstrip("\n") + "\n" in page
    assert page.count('{ .output title="Output" }') == 2


def _read_back(fig) -> list[dict]:
    """What one chart draws, row by row from the top: its label (lines joined), the
    number at its right, its dot and its bar, with their heights."""
    (ax,) = fig.axes
    (dots,) = [
        c
        for c in ax.collections
        if isinstance(c, PathCollection) and c.get_gid() == "ratio"
    ]
    (bars,) = [
        c
        for c in ax.collections
        if isinstance(c, LineCollection) and c.get_gid() == "spread"
    ]
    labels = [t for t in ax.texts if t.get_gid() == "label"]
    values = [t for t in ax.texts if t.get_gid() == "value"]
    assert (
        len(labels)
        == len(values)
        == len(dots.get_offsets())
        == len(bars.get_segments())
    )
    return [
        {
            "label": label.get_text().replace("\n", " "),
            "label_y": label.get_position()[1],
            "value": value.get_text(),
            "value_y": value.get_position()[1],
            "ratio": float(dot[0]),
            "y": float(dot[1]),
            "bar": segment.tolist(),
        }
        for label, value, dot, segment in zip(
            labels, values, dots.get_offsets(), bars.get_segments()
        )
    ]


def test_the_charts_plot_every_rows_ratio_and_min_max_from_the_file_once(committed):
    """Read back from the charts, each row of the file appears once, in one chart,
    labelled "name vs reference", its median printed and drawn as a dot at its ratio,
    its bar from its min to its max at the dot's height, below its label; in each chart
    the rows keep the file's order, on a log axis with a dashed line at 1.0."""
    by_label = {
        f"{row['name']} vs {row['reference']}": row for row in committed["rows"]
    }
    assert len(by_label) == len(committed["rows"])
    drawn: list[str] = []
    for chart in bench_figures.CHARTS:
        fig = FIGURES[chart.name].draw(theme="dark")
        ax = fig.axes[0]
        rows = _read_back(fig)
        assert rows, chart.name
        for got in rows:
            row = by_label[got["label"]]
            assert (
                got["ratio"] == row["ratio"] and got["value"] == f"{row['ratio']:.2f}"
            )
            assert got["bar"] == [[row["min"], got["y"]], [row["max"], got["y"]]]
            assert (
                got["label_y"] == got["value_y"] < got["y"]
            )  # above, the first on top
            drawn.append(got["label"])
        order = [list(by_label).index(got["label"]) for got in rows]
        assert order == sorted(order), chart.name  # the file's order
        assert [got["y"] for got in rows] == sorted(got["y"] for got in rows)
        low, high = ax.get_ylim()
        assert low > high  # y grows downwards: the first row on top
        (one,) = [c for c in ax.collections if c.get_gid() == "one"]
        assert {x for s in one.get_segments() for x in s[:, 0]} == {1.0}
        assert one.get_linestyle()[0][1] is not None  # dashed
        assert ax.get_xscale() == "log"
        left, right = ax.get_xlim()
        assert left < min(r["bar"][0][0] for r in rows) and right > 1.0
        fig.clear()
    assert sorted(drawn) == sorted(by_label)  # every row, each once


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_charts_read_on_a_phone_and_fit_a_window(language):
    """Each chart is at most 5.2 inches wide; its smallest text renders at 9 px or more
    at a phone's 358 px (f pt in a W-inch figure: f * 358 / (72 * W) px); it is no
    taller than a 900 px window at the 824 px column; no text leaves the figure and no
    label runs into the number at its right."""
    for chart in bench_figures.CHARTS:
        fig = FIGURES[chart.name].draw(language=language, theme="light")
        width, height = fig.get_size_inches()
        assert width <= 5.2 and height * 824 / width <= 900, (chart.name, height)
        fig.draw_without_rendering()  # places the axis label and the ticks
        renderer = fig.canvas.get_renderer()
        texts = [
            t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()
        ]
        assert min(t.get_fontsize() for t in texts) * 358 / (72 * width) >= 9
        box = fig.bbox
        for t in texts:
            extent = t.get_window_extent(renderer)
            assert box.x0 <= extent.x0 and extent.x1 <= box.x1, (chart.name, t)
            assert box.y0 <= extent.y0 and extent.y1 <= box.y1, (chart.name, t)
        ax = fig.axes[0]
        labels = [t for t in ax.texts if t.get_gid() == "label"]
        values = [t for t in ax.texts if t.get_gid() == "value"]
        for label, value in zip(labels, values):
            assert not label.get_window_extent(renderer).overlaps(
                value.get_window_extent(renderer)
            ), (chart.name, label.get_text())
        plt.close(fig)


def test_the_charts_colour_faster_and_slower_rows_apart():
    data = _valid()
    data["rows"][0]["group"] = "gpt2"
    data["rows"].append(
        {**data["rows"][0], "name": "c", "ratio": 0.5, "min": 0.25, "max": 0.75}
    )
    fig = FIGURES["bench-gpt2"].draw(theme="light", results=data)
    (dots,) = [c for c in fig.axes[0].collections if c.get_gid() == "ratio"]
    series = PALETTES["light"].series
    assert [tuple(c) for c in dots.get_facecolors()] == [
        to_rgba(series[1]),
        to_rgba(series[0]),
    ]
    values = [t for t in fig.axes[0].texts if t.get_gid() == "value"]
    assert [(t.get_text(), t.get_color()) for t in values] == [
        ("2.00", series[1]),
        ("0.50", series[0]),
    ]
    fig.clear()
    with pytest.raises(ValueError, match="bench-decoding: no row of groups"):
        FIGURES["bench-decoding"].draw(results=data)


def test_the_ticks_are_powers_of_two_over_a_wide_range_else_round_decimals():
    positions, formatter = bench_figures.ticks(0.8, 1.25)
    assert positions == [0.8, 0.9, 1.0, 1.1, 1.2]
    assert [formatter(x) for x in positions] == ["0.8", "0.9", "1", "1.1", "1.2"]
    positions, formatter = bench_figures.ticks(0.012, 1.25)
    assert positions == [2.0**e for e in range(-6, 1)]
    assert [formatter(x) for x in positions[:2]] + [formatter(1.0)] == [
        "1/64",
        "1/32",
        "1",
    ]
    assert bench_figures.ticks(0.5, 1.4)[0] == [0.6, 0.8, 1.0, 1.2, 1.4]


# ---------------------------------------------------------------------------------------
# --json, on made-up rows with a stubbed timer


def test_json_writes_a_file_that_fits_the_schema(tmp_path, monkeypatch, capsys):
    def pair(ours_times, theirs_times, diff):
        def ours():
            return None

        def theirs():
            return None

        times = {ours: iter(ours_times), theirs: iter(theirs_times)}
        return (lambda: (ours, theirs, diff)), times

    build_a, times_a = pair(
        [0.012, 0.25, 0.375, 0.5], [0.012, 0.125, 0.125, 0.125], 0.0
    )
    build_b, times_b = pair(
        [0.04, 0.125, 0.125, 0.125], [0.04, 0.25, 0.25, 0.25], float("nan")
    )
    times = {**times_a, **times_b}
    monkeypatch.setattr(
        bench,
        "ROWS",
        [
            Row("tiny", "A", "ref A", build_a),
            Row("tiny", "B", "ref B", build_b, rounds=41),
            Row("other", "C", "ref C", build_a),
        ],
    )
    monkeypatch.setattr(timing, "time_calls", lambda fn, n: next(times[fn]))
    threads = torch.get_num_threads()
    target = tmp_path / "out" / "bench.json"
    try:
        assert bench.main(["--quick", "--only", "tiny", "--json", str(target)]) == 0
    finally:
        torch.set_num_threads(threads)
    assert f"wrote {target}" in capsys.readouterr().out
    data = json.loads(target.read_text(encoding="utf-8"))
    assert check_results(data) == []
    assert data["quick"] is True and data["machine"]["threads"] == 1
    assert data["versions"]["torch"] == torch.__version__
    # Rounds alternate ours-first and theirs-first; each fn takes its next time in turn.
    # --quick: 3 rounds of ~50 ms (a row's own minimum of rounds is not applied).
    assert data["rows"] == [
        {
            "group": "tiny",
            "name": "A",
            "reference": "ref A",
            "ours_s": 0.375,
            "theirs_s": 0.125,
            "ratio": 3.0,
            "min": 2.0,
            "max": 4.0,
            "rounds": 3,
            "calls": 4,
            "max_abs_diff": 0.0,
        },
        {
            "group": "tiny",
            "name": "B",
            "reference": "ref B",
            "ours_s": 0.125,
            "theirs_s": 0.25,
            "ratio": 0.5,
            "min": 0.5,
            "max": 0.5,
            "rounds": 3,
            "calls": 1,
            "max_abs_diff": None,
        },
    ]


def test_bad_arguments_are_refused(capsys):
    for argv, message in [
        (["--only", "nope"], "--only must be one of"),
        (["--json", "/tmp/elsewhere.json", "--pin"], "--pin needs --json"),
        (["--threads", "0"], "--threads must be at least 1, got 0"),
    ]:
        with pytest.raises(SystemExit) as exit:
            bench.main(argv)
        assert exit.value.code == 2
        assert message in capsys.readouterr().err
