"""The "Run a real model" page's diagrams draw what the code reads: `safetensors-file`
the bytes of a real file (n, the header's JSON, each tensor's span, read back by
`load_safetensors`), `checkpoint-run` the model types of the table `llama.py` passes to
`load_checkpoint`. Each check also fails on a figure of other numbers."""

from __future__ import annotations

import json
import re
import struct
from functools import partial

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from literate.figures import FIGURES
from literate.figures import checkpoint_diagrams as cd
from literate.minimal.checkpoint import load_safetensors
from literate.models import checkpoint_loaders
from literate.models.checkpoint import read_safetensors
from literate.tools.era_files import ERAS

NAMES = ("safetensors-file", "checkpoint-run")
CYRILLIC = re.compile("[\u0400-\u04ff]")


def drawn(fig) -> dict[str, str]:
    return {t.get_gid(): t.get_text() for t in fig.findobj(Text) if t.get_gid()}


def spans(fig, prefix: str) -> dict[str, tuple[int, int, Rectangle]]:
    """name -> (begin, end, rectangle) of the rectangles whose gid is
    `{prefix}-{name}-{begin}-{end}`."""
    found = {}
    for patch in fig.findobj(Rectangle):
        if m := re.fullmatch(rf"{prefix}-(\w+)-(\d+)-(\d+)", patch.get_gid() or ""):
            found[m[1]] = (int(m[2]), int(m[3]), patch)
    return found


def file_bytes(path) -> tuple[int, dict, bytes]:
    """n, the header and the raw bytes of a .safetensors file, read here by hand."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return n, json.loads(raw[8 : 8 + n]), raw


@pytest.fixture
def written(tmp_path):
    path = tmp_path / "model.safetensors"
    cd.write_safetensors(path, cd.example_tensors())
    return path


def test_the_file_is_what_the_safetensors_package_writes_and_reads(written):
    st = pytest.importorskip("safetensors.torch")
    tensors = cd.example_tensors()
    assert written.read_bytes() == st.save(tensors)
    for name, tensor in st.load_file(written).items():
        assert tensor.dtype == tensors[name].dtype
        assert torch.equal(tensor, tensors[name])


@pytest.mark.parametrize("reader", [load_safetensors, read_safetensors])
def test_the_pages_readers_give_back_the_tensors_written(written, reader):
    tensors = cd.example_tensors()
    loaded = reader(written)
    assert loaded.keys() == tensors.keys()
    for name, tensor in tensors.items():
        assert loaded[name].dtype == tensor.dtype and torch.equal(loaded[name], tensor)
    # three dtypes, so three item sizes in the data
    assert {t.element_size() for t in tensors.values()} == {2, 4, 8}


def test_the_layout_is_the_files_bytes(written):
    n, header, raw = file_bytes(written)
    layout = cd.safetensors_example()
    assert layout.length_bytes == raw[:8] and layout.n == n
    assert layout.size == len(raw) and layout.data_start == 8 + n
    assert layout.entries == tuple(
        (k, v["dtype"], tuple(v["shape"]), tuple(v["data_offsets"]))
        for k, v in header.items()
    )
    assert "".join(cd.json_lines(layout)) == raw[8 : 8 + n].decode().rstrip(" ")


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_file_figure_prints_n_the_header_and_the_spans(written, language):
    n, header, raw = file_bytes(written)
    fig = FIGURES["safetensors-file"].draw(language=language, theme="light")
    try:
        texts = drawn(fig)
        assert [texts[f"safetensors-byte-{i}"] for i in range(8)] == [
            f"{b:02x}" for b in raw[:8]
        ]
        assert texts["safetensors-n"] == f"= {n}"
        lines = [texts[f"safetensors-json-{k}"] for k in range(2 * len(header))]
        assert "".join(lines) == raw[8 : 8 + n].decode().rstrip(" ")
        pad = n - len(raw[8 : 8 + n].decode().rstrip(" "))
        assert pad > 0 and (8 + n) % 8 == 0
        assert f" {pad} " in texts["safetensors-padding"]
        assert str(len(raw)) in texts["safetensors-title"]
        assert f"= {8 + n}" in texts["safetensors-offsets-note"]
        # the data region: each span where data_offsets put it, to scale
        data = spans(fig, "safetensors-data")["region"]
        assert data[:2] == (0, len(raw) - 8 - n)
        bar, per = data[2], data[2].get_width() / data[1]
        drawn_spans = spans(fig, "safetensors-span")
        assert list(drawn_spans) == list(header)
        for name, entry in header.items():
            begin, end, patch = drawn_spans[name]
            assert [begin, end] == entry["data_offsets"]
            assert patch.get_x() == pytest.approx(bar.get_x() + begin * per)
            assert patch.get_width() == pytest.approx((end - begin) * per)
            assert texts[f"safetensors-name-{name}"] == name
            shape = "[" + ", ".join(map(str, entry["shape"])) + "]"
            assert texts[f"safetensors-kind-{name}"] == f"{entry['dtype']} {shape}"
        offsets = {b for e in header.values() for b in e["data_offsets"]}
        assert {
            int(k.rsplit("-", 1)[1])
            for k in texts
            if k.startswith("safetensors-offset-")
        } == offsets
        for b in offsets:
            assert texts[f"safetensors-offset-{b}"] == str(b)
        # the whole file to scale: n's 8 bytes, the header's n, the data
        whole = spans(fig, "safetensors-whole")
        assert whole["length"][:2] == (0, 8) and whole["header"][:2] == (8, 8 + n)
        ends = sorted(e[:2] for e in whole.values())
        assert ends[0][0] == 0 and ends[-1][1] == len(raw)
        assert all(a[1] == b[0] for a, b in zip(ends, ends[1:]))  # no gap, no overlap
        scale = whole["header"][2].get_width() / n
        for begin, end, patch in whole.values():
            assert patch.get_width() == pytest.approx((end - begin) * scale)
    finally:
        plt.close(fig)


def test_the_file_figure_follows_the_file_it_writes(monkeypatch):
    """Other tensors, other numbers: nothing of the file is typed into the figure."""
    monkeypatch.setattr(
        cd,
        "EXAMPLE",
        {
            "a": lambda: torch.ones(5, dtype=torch.float16),
            "b": lambda: torch.zeros(3, 2, dtype=torch.float64),
            "c": lambda: torch.tensor([True, False]),
        },
    )
    layout = cd.safetensors_example()
    assert [e[0] for e in layout.entries] == ["b", "a", "c"]
    assert [e[3] for e in layout.entries] == [(0, 48), (48, 58), (58, 60)]
    fig = cd.file_figure()
    try:
        texts = drawn(fig)
        assert texts["safetensors-n"] == f"= {layout.n}" and layout.n != 184
        assert texts["safetensors-kind-b"] == "F64 [3, 2]"
        assert {k: v[:2] for k, v in spans(fig, "safetensors-span").items()} == {
            "b": (0, 48),
            "a": (48, 58),
            "c": (58, 60),
        }
    finally:
        plt.close(fig)


def test_a_reader_that_reads_wrong_is_caught(monkeypatch):
    def wrong(path):
        tensors = load_safetensors(path)
        tensors["ids"] = tensors["ids"] + 1
        return tensors

    monkeypatch.setattr(cd, "load_safetensors", wrong)
    with pytest.raises(AssertionError, match="did not read back"):
        cd.safetensors_example()


def test_the_run_is_what_llama_py_runs():
    run = cd.checkpoint_run()
    assert run.file == "llama.py" and run.table == "LLAMA_CHECKPOINTS"
    assert ERAS["llama"].command == (
        "lambda directory: load_checkpoint(directory, LLAMA_CHECKPOINTS)",
        run.decode,
    )
    table = checkpoint_loaders.LLAMA_CHECKPOINTS
    assert [kind for kind, _, _ in run.model_types] == list(table)
    for kind, build, load in run.model_types:
        assert (build, load) == tuple(f.__name__ for f in table[kind])


def test_function_names_go_through_partials():
    table = checkpoint_loaders.LONG_CONTEXT_CHECKPOINTS
    assert cd.function_name(table["mixtral"][1]) == "load_hf_mixtral"
    assert cd.function_name(table["deepseek_v3"][1]) == "load_hf_deepseek_v3"
    gpt2 = checkpoint_loaders.GPT2_CHECKPOINTS["gpt2"][0]
    assert isinstance(gpt2, partial)
    assert cd.function_name(gpt2) == "gpt2_from_hf_config"


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_run_figure_lists_the_tables_model_types(language):
    table = checkpoint_loaders.LLAMA_CHECKPOINTS
    fig = FIGURES["checkpoint-run"].draw(language=language, theme="light")
    try:
        texts = drawn(fig)
        assert texts["run-command"].startswith(
            "python llama.py generate CHECKPOINT_DIR"
        )
        pick = texts["run-detail-pick"]
        assert "LLAMA_CHECKPOINTS" in pick and "llama.py" in pick
        rows = {k: v for k, v in texts.items() if k.startswith("run-type-")}
        assert list(rows) == [f"run-type-{kind}" for kind in table]
        for kind, (build, load) in table.items():
            assert rows[f"run-type-{kind}"] == (
                f"{kind}: ({build.__name__}, {load.__name__})"
            )
        assert texts["run-detail-build"].startswith("build(config)")
        assert texts["run-detail-load"].startswith("load(model, tensors, config); ")
        assert texts["run-detail-generate"].startswith("cached_decode, ")
        for name in (
            "config.json",
            "model.safetensors",
            "tokenizer.json",
            "generation_config.json",
        ):
            assert texts[f"run-file-{name}"] == name
        assert "model.safetensors.index.json" in texts["run-shards"]
        assert "tokenizer.json" in texts["run-title-text"]
        assert "tokenizers" in texts["run-detail-text"]
        steps = [p.get_gid() for p in fig.findobj() if "run-step-" in str(p.get_gid())]
        assert steps == [
            f"run-step-{s}" for s in ("pick", "build", "load", "generate", "text")
        ]
    finally:
        plt.close(fig)


def test_the_run_figure_follows_the_table(monkeypatch):
    """A row more in llama.py's table, a line more in the figure and its alt text."""
    table = checkpoint_loaders.LLAMA_CHECKPOINTS
    extra = {"extra": checkpoint_loaders.LONG_CONTEXT_CHECKPOINTS["mistral"]}
    monkeypatch.setattr(checkpoint_loaders, "LLAMA_CHECKPOINTS", {**table, **extra})
    fig = cd.run_figure()
    try:
        texts = drawn(fig)
        kinds = [k for k in texts if k.startswith("run-type-")]
        assert kinds == [f"run-type-{k}" for k in (*table, "extra")]
        assert texts["run-type-extra"] == (
            "extra: (mistral_from_hf_config, load_hf_mistral)"
        )
        assert "extra (mistral_from_hf_config, load_hf_mistral)" in cd.run_alt()
    finally:
        plt.close(fig)


def test_the_alt_texts_state_the_numbers(written):
    n, header, raw = file_bytes(written)
    alt = FIGURES["safetensors-file"].alt
    assert alt == cd.file_alt(cd.safetensors_example())
    assert f"of {len(raw)} bytes" in alt and f"n = {n} bytes" in alt
    assert f"{len(raw) - 8 - n} bytes of data from byte {8 + n}" in alt
    assert " ".join(f"{b:02x}" for b in raw[:8]) in alt
    for name, e in header.items():
        shape = " by ".join(map(str, e["shape"]))
        begin, end = e["data_offsets"]
        said = (
            f"{name}, dtype {e['dtype']}, shape {shape}, data_offsets {begin} and {end}"
        )
        assert said in alt, said
        item = cd.SAFETENSORS_DTYPES[e["dtype"]].itemsize
        said = (
            f"{name} in bytes {begin} to {end}, {(end - begin) // item} items of {item}"
        )
        assert said in alt, said
    pad = n - len(raw[8 : 8 + n].decode().rstrip(" "))
    assert f"then {pad} spaces" in alt
    alt = FIGURES["checkpoint-run"].alt
    run = cd.checkpoint_run()
    assert alt == cd.run_alt(run)
    assert f"{run.file}'s {run.table}, which maps" in alt
    for kind, (build, load) in checkpoint_loaders.LLAMA_CHECKPOINTS.items():
        assert f"{kind} ({build.__name__}, {load.__name__})" in alt
    assert run.decode in alt
    for name in NAMES:  # one plain description: no Markdown
        assert not set(FIGURES[name].alt) & set("[]\n`\\<>"), name


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_figures_are_legible_and_nothing_overlaps(name, language):
    """<= 5.2 inches wide and 5.3 tall, every font >= 10 pt (>= 9.5 px at 358 px wide),
    Russian only in the Russian figure, every text inside the figure and no two texts
    overlapping."""
    fig = FIGURES[name].draw(language=language, theme="light")
    try:
        width, height = fig.get_size_inches()
        assert width <= 5.2 and height <= 5.3
        texts = [t for t in fig.findobj(Text) if t.get_text().strip()]
        assert min(t.get_fontsize() for t in texts) * 358 / (72 * width) >= 9.5
        words = " ".join(t.get_text() for t in texts)
        assert bool(CYRILLIC.search(words)) == (language == "ru")
        renderer = fig.canvas.get_renderer()
        frame = fig.bbox
        boxes = [t.get_window_extent(renderer) for t in texts]
        inside = frame.x1 - 0.16 * fig.dpi  # the boxes' right edges, inside margins
        for t, b in zip(texts, boxes):
            assert frame.x0 <= b.x0 and b.x1 <= inside, t.get_text()
            assert frame.y0 <= b.y0 and b.y1 <= frame.y1, t.get_text()
        for i, a in enumerate(boxes):
            for j in range(i + 1, len(boxes)):
                assert not a.overlaps(boxes[j]), (
                    texts[i].get_text(),
                    texts[j].get_text(),
                )
    finally:
        plt.close(fig)
