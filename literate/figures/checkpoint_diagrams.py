"""Diagrams (issue 26): drawn from the code, light and dark, English and Russian.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

"Run a real model": the bytes of one real `.safetensors` file, written here by hand
(`write_safetensors`, byte for byte what the `safetensors` package writes) and read back
by `literate.minimal.checkpoint.load_safetensors`; and what `python llama.py generate
CHECKPOINT_DIR --prompt ...` does with a checkpoint directory, the model types it loads
read from the era file's own table (`literate.models.checkpoint_loaders`).
"""

# Over 450 lines on purpose: the page's two diagrams, each with its English and Russian
# labels and the file or the table it reads its numbers from.

from __future__ import annotations

import json
import re
import struct
import sys
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from literate.figures.style import BOX_INK, style, text
from literate.minimal.checkpoint import SAFETENSORS_DTYPES, load_safetensors
from literate.models import checkpoint_loaders
from literate.models.checkpoint import load_experts_apart
from literate.tools.era_files import ERAS

WIDTH = 5.2  # inches; every font >= 10 pt, so >= 9.5 px at 358 px wide
MONO = "DejaVu Sans Mono"


def canvas(width: float, height: float):
    """A figure and one axes whose data coordinates are inches from the bottom left."""
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    return fig, ax


def trim(fig, ax, bottom: float) -> None:
    """Cut the canvas at `bottom` (inches): the figure ends below its last drawing."""
    top = ax.get_ylim()[1]
    ax.set_ylim(bottom, top)
    fig.set_size_inches(fig.get_size_inches()[0], top - bottom)


def box(ax, x, y, w, h, *, face, edge, gid=None, rounding=0.05, lw=1.0):
    patch = FancyBboxPatch(
        (x, y),
        w,
        h,
        boxstyle=f"round,pad=0,rounding_size={rounding}",
        facecolor=face,
        edgecolor=edge,
        linewidth=lw,
    )
    if gid:
        patch.set_gid(gid)
    ax.add_patch(patch)
    return patch


def arrow(ax, start, end, colour):
    ax.add_patch(
        FancyArrowPatch(
            start, end, arrowstyle="-|>", mutation_scale=11, color=colour, lw=1.2
        )
    )


# --- safetensors-file ------------------------------------------------------------------

# The file: three tiny tensors of three dtypes.
EXAMPLE = {
    "weight": lambda: torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4,
    "bias": lambda: torch.tensor([1.0, 0.5, -2.0], dtype=torch.bfloat16),
    "ids": lambda: torch.tensor([3, 7], dtype=torch.int64),
}
DTYPE_NAMES = {dtype: name for name, dtype in SAFETENSORS_DTYPES.items()}


def example_tensors() -> dict[str, torch.Tensor]:
    return {name: make() for name, make in EXAMPLE.items()}


def encode_safetensors(tensors: dict[str, torch.Tensor]) -> bytes:
    """`tensors` as the `safetensors` package writes them: the largest items first
    (then by name), the JSON header without spaces, padded with spaces so the data
    starts at a multiple of 8, each tensor's raw little-endian bytes."""
    if sys.byteorder != "little":
        raise ValueError("this writer copies the machine's bytes: little-endian only")
    order = sorted(tensors, key=lambda k: (-tensors[k].element_size(), k))
    header, chunks, begin = {}, [], 0
    for name in order:
        raw = bytes(tensors[name].contiguous().view(torch.uint8).flatten().tolist())
        header[name] = {
            "dtype": DTYPE_NAMES[tensors[name].dtype],
            "shape": list(tensors[name].shape),
            "data_offsets": [begin, begin + len(raw)],
        }
        chunks.append(raw)
        begin += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + b"".join(chunks)


def write_safetensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    path.write_bytes(encode_safetensors(tensors))


@dataclass(frozen=True)
class FileLayout:
    """One .safetensors file as its bytes say: the first 8 bytes, n (what they hold),
    the n bytes of the header (text), the tensors' entries in the header's order
    (name, dtype, shape, data_offsets) and the file's size."""

    length_bytes: bytes
    n: int
    header_text: str
    entries: tuple[tuple[str, str, tuple[int, ...], tuple[int, int]], ...]
    size: int

    @property
    def data_start(self) -> int:
        """Where offsets are counted from: the end of the header, 8 + n."""
        return 8 + self.n

    @property
    def data_length(self) -> int:
        return self.size - self.data_start


def layout_of(raw: bytes) -> FileLayout:
    """The layout of a file's bytes (the header parsed as JSON)."""
    (n,) = struct.unpack("<Q", raw[:8])
    header_text = raw[8 : 8 + n].decode("utf-8")
    header = json.loads(header_text)
    entries = tuple(
        (name, e["dtype"], tuple(e["shape"]), tuple(e["data_offsets"]))
        for name, e in header.items()
        if name != "__metadata__"
    )
    return FileLayout(raw[:8], n, header_text, entries, len(raw))


def read_layout(path: Path) -> FileLayout:
    return layout_of(path.read_bytes())


def safetensors_example() -> FileLayout:
    """Write the example file in a temporary folder, read its layout from the bytes,
    and check that `load_safetensors` gives back the tensors written."""
    written = example_tensors()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.safetensors"
        write_safetensors(path, written)
        layout = read_layout(path)
        loaded = {k: v.clone() for k, v in load_safetensors(path).items()}
    if loaded.keys() != written.keys() or not all(
        loaded[k].dtype == v.dtype and torch.equal(loaded[k], v)
        for k, v in written.items()
    ):
        raise AssertionError("load_safetensors did not read back the tensors written")
    return layout


def json_lines(layout: FileLayout) -> list[str]:
    """The header's text cut into lines, each tensor's entry over two (before and from
    its "data_offsets"), the padding spaces left out: joined, they are the header."""
    body = layout.header_text.rstrip(" ")
    cuts = [m.start() for m in re.finditer(r'"data_offsets"', body)]
    ends = [m.end() for m in re.finditer(r"\]\},?", body)]
    lines, start = [], 0
    for cut, end in zip(cuts, ends):
        lines += [body[start:cut], body[cut:end]]
        start = end
    lines[-1] += body[start:]  # the closing brace
    return lines


def ru_bytes(count: int) -> str:
    """'байт', 'байта' or 'байтов'... as Russian counts: 1 байт, 2 байта, 5 байт."""
    if count % 10 == 1 and count % 100 != 11:
        return "байт"
    if 2 <= count % 10 <= 4 and not 12 <= count % 100 <= 14:
        return "байта"
    return "байт"


FILE_LABELS = {
    "en": {
        "title": "One .safetensors file: {size} bytes",
        "scale": "bars to scale",
        "n": "n",
        "header": "JSON header: n = {n} bytes",
        "data": "data",
        "length": "Bytes 0–7: n, little-endian",
        "equals": "= {n}",
        "json": "Bytes 8–{last}: the header, JSON",
        "padding": "then {pad} spaces: 8 + n is a multiple of 8",
        "region": "Bytes {start}–{last}: the data, {length} bytes",
        "offsets": "data_offsets count from the header's end, byte 8 + n = {start}",
        "unit": "bytes",
    },
    "ru": {
        "title": "Один файл .safetensors: {size} {unit}",
        "scale": "полосы — в масштабе",
        "n": "n",
        "header": "заголовок JSON: n = {n} {unit}",
        "data": "данные",
        "length": "Байты 0–7: n, little-endian",
        "equals": "= {n}",
        "json": "Байты 8–{last}: заголовок, JSON",
        "padding": "затем {pad} пробелов: 8 + n кратно 8",
        "region": "Байты {start}–{last}: данные, {length} {unit}",
        "offsets": "data_offsets — от конца заголовка, байта 8 + n = {start}",
        "unit": "байт",
    },
}


def file_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """The example file top to bottom: the whole file to scale, its 8 length bytes and
    n, the header's JSON as the file holds it, and the data region to scale, each
    tensor's span [begin, end) where its data_offsets put it."""
    t = text(FILE_LABELS, language)
    layout = safetensors_example()
    lines = json_lines(layout)
    pad = len(layout.header_text) - len(layout.header_text.rstrip(" "))
    with style(theme) as p:
        tensor_colours = (p.series[1], p.series[2], p.series[4])
        colour = dict(zip((e[0] for e in layout.entries), tensor_colours))
        ru = language == "ru"

        def unit(count: int) -> str:
            return ru_bytes(count) if ru else t["unit"]

        left, right = 0.18, WIDTH - 0.18
        span = right - left
        line_h = 0.175
        height = 8.0  # cut to the drawing at the end
        fig, ax = canvas(WIDTH, height)
        y = height - 0.24
        ax.text(
            left,
            y,
            t["title"].format(size=layout.size, unit=unit(layout.size)),
            fontsize=12,
            fontweight="bold",
            va="center",
            color=p.ink,
        ).set_gid("safetensors-title")

        # The whole file, to scale: n, the header, the data split by tensor
        bar_h, per_byte = 0.28, span / layout.size
        y -= 0.44 + bar_h
        parts = [
            ("length", 0, 8, p.series[3], ""),
            (
                "header",
                8,
                layout.data_start,
                p.series[0],
                t["header"].format(n=layout.n, unit=unit(layout.n)),
            ),
        ]
        parts += [
            (name, layout.data_start + b, layout.data_start + e, colour[name], "")
            for name, _, _, (b, e) in layout.entries
        ]
        for name, begin, end, face, label in parts:
            ax.add_patch(
                Rectangle(
                    (left + begin * per_byte, y),
                    (end - begin) * per_byte,
                    bar_h,
                    facecolor=face,
                    edgecolor="none",
                    gid=f"safetensors-whole-{name}-{begin}-{end}",
                )
            )
            if label:
                ax.text(
                    left + (begin + end) / 2 * per_byte,
                    y + bar_h / 2,
                    label,
                    fontsize=10,
                    ha="center",
                    va="center",
                    color=BOX_INK,
                )
        data_mid = (layout.data_start + layout.size) / 2 * per_byte
        ax.text(
            left + data_mid,
            y + bar_h + 0.12,
            t["data"],
            fontsize=10,
            ha="center",
            va="center",
            color=p.ink,
        )
        ax.text(
            left + 4 * per_byte,
            y + bar_h + 0.12,
            t["n"],
            fontsize=10,
            ha="center",
            va="center",
            color=p.ink,
            style="italic",
        )
        for i, byte in enumerate((0, layout.data_start, layout.size)):
            ax.text(
                left + byte * per_byte,
                y - 0.13,
                str(byte),
                fontsize=10,
                ha=("left", "center", "right")[i],
                va="center",
                color=p.muted,
                gid=f"safetensors-whole-tick-{byte}",
            )

        ax.text(
            left + layout.data_start / 2 * per_byte,
            y - 0.13,
            t["scale"],
            fontsize=10,
            ha="center",
            va="center",
            color=p.muted,
        )

        # Bytes 0-7: the header's length
        y -= 0.44
        ax.text(
            left, y, t["length"], fontsize=10.5, fontweight="bold", va="center"
        ).set_color(p.ink)
        y -= 0.18 + 0.3
        cell = 0.43
        for i, byte in enumerate(layout.length_bytes):
            box(
                ax,
                left + i * cell + 0.02,
                y,
                cell - 0.04,
                0.3,
                face=p.empty,
                edge=p.series[3],
            )
            ax.text(
                left + (i + 0.5) * cell,
                y + 0.15,
                f"{byte:02x}",
                fontsize=10.5,
                family=MONO,
                ha="center",
                va="center",
                color=p.ink,
                gid=f"safetensors-byte-{i}",
            )
        ax.text(
            left + 8 * cell + 0.12,
            y + 0.15,
            t["equals"].format(n=layout.n),
            fontsize=11,
            fontweight="bold",
            va="center",
            color=p.ink,
            gid="safetensors-n",
        )

        # Bytes 8 .. 8 + n - 1: the header's JSON, as the file holds it
        y -= 0.28
        ax.text(
            left,
            y,
            t["json"].format(last=layout.data_start - 1),
            fontsize=10.5,
            fontweight="bold",
            va="center",
            color=p.ink,
        )
        y -= 0.1
        top = y
        y -= 0.04
        for k, line in enumerate(lines):
            y -= line_h
            entry = k // 2
            indent = 0.0 if k % 2 == 0 else 0.3
            ax.text(
                left + 0.22 + indent,
                y + line_h / 2,
                line,
                fontsize=10,
                family=MONO,
                va="center",
                color=p.ink,
                gid=f"safetensors-json-{k}",
            )
            if k % 2 == 0 and entry < len(layout.entries):
                ax.add_patch(
                    Rectangle(
                        (left + 0.04, y - line_h + 0.04),
                        0.1,
                        2 * line_h - 0.08,
                        facecolor=colour[layout.entries[entry][0]],
                        edgecolor="none",
                    )
                )
        y -= line_h
        ax.text(
            left + 0.22,
            y + line_h / 2,
            t["padding"].format(pad=pad),
            fontsize=10,
            va="center",
            color=p.muted,
            gid="safetensors-padding",
        )
        ax.add_patch(
            Rectangle(
                (left, y - 0.04),
                span,
                top - y + 0.04,
                facecolor="none",
                edgecolor=p.series[0],
                linewidth=1.0,
            )
        )

        # The data: each tensor's bytes [begin, end), to scale, from the header's end
        y -= 0.32
        ax.text(
            left,
            y,
            t["region"].format(
                start=layout.data_start,
                last=layout.size - 1,
                length=layout.data_length,
                unit=unit(layout.data_length),
            ),
            fontsize=10.5,
            fontweight="bold",
            va="center",
            color=p.ink,
        )
        per = span / layout.data_length
        label_y = y - 0.33
        y = label_y - 0.28 - bar_h
        ax.add_patch(
            Rectangle(
                (left, y),
                span,
                bar_h,
                facecolor="none",
                edgecolor=p.border,
                gid=f"safetensors-data-region-0-{layout.data_length}",
            )
        )
        last = len(layout.entries) - 1
        for i, (name, dtype, shape, (begin, end)) in enumerate(layout.entries):
            x0, x1 = left + begin * per, left + end * per
            ax.add_patch(
                Rectangle(
                    (x0, y),
                    x1 - x0,
                    bar_h,
                    facecolor=colour[name],
                    edgecolor="none",
                    gid=f"safetensors-span-{name}-{begin}-{end}",
                )
            )
            item = SAFETENSORS_DTYPES[dtype].itemsize
            for b in range(begin + item, end, item):  # one line between two items
                ax.plot(
                    [left + b * per] * 2,
                    [y + 0.04, y + bar_h - 0.04],
                    color=BOX_INK,
                    lw=0.6,
                )
            shown = "[" + ", ".join(str(s) for s in shape) + "]"
            where, ha = (
                (x0, "left") if i == 0 else (x1, "right") if i == last else (0, "")
            )
            if not ha:
                where, ha = (x0 + x1) / 2, "center"
            ax.text(
                where,
                label_y + 0.07,
                name,
                fontsize=10.5,
                fontweight="bold",
                ha=ha,
                va="center",
                color=p.ink,
                gid=f"safetensors-name-{name}",
            )
            ax.text(
                where,
                label_y - 0.12,
                f"{dtype} {shown}",
                fontsize=10,
                family=MONO,
                ha=ha,
                va="center",
                color=p.ink,
                gid=f"safetensors-kind-{name}",
            )
        cuts = sorted({b for *_, (b, e) in layout.entries} | {layout.data_length})
        for i, byte in enumerate(cuts):
            ha = (
                "left"
                if i == 0
                else "right"
                if byte == layout.data_length
                else "center"
            )
            ax.text(
                left + byte * per,
                y - 0.14,
                str(byte),
                fontsize=10,
                ha=ha,
                va="center",
                color=p.ink,
                gid=f"safetensors-offset-{byte}",
            )
        ax.text(
            left,
            y - 0.36,
            t["offsets"].format(start=layout.data_start),
            fontsize=10,
            va="center",
            color=p.muted,
            gid="safetensors-offsets-note",
        )
        trim(fig, ax, y - 0.5)
    return fig


# --- checkpoint-run --------------------------------------------------------------------

ERA = "llama"  # the file the page runs: python llama.py generate ...


def function_name(function) -> str:
    """The name of a loader table's function: through a partial to what it wraps, and
    through `load_experts_apart` to the family's own loader."""
    while isinstance(function, partial):
        function = (
            function.args[0] if function.func is load_experts_apart else function.func
        )
    return function.__name__


@dataclass(frozen=True)
class CheckpointRun:
    """What the era file's `generate` command runs, read from the era's own entry:
    its file, the table of loaders it passes to `load_checkpoint` and the decoder."""

    file: str
    table: str
    model_types: tuple[tuple[str, str, str], ...]  # (model_type, build, load)
    decode: str


def checkpoint_run(era: str = ERA) -> CheckpointRun:
    load, decode = ERAS[era].command
    (table,) = re.findall(r"load_checkpoint\(directory, (\w+)\)", load)
    loaders = getattr(checkpoint_loaders, table)
    return CheckpointRun(
        f"{era}.py",
        table,
        tuple(
            (kind, function_name(build), function_name(loader))
            for kind, (build, loader) in loaders.items()
        ),
        decode,
    )


RUN_LABELS = {
    "en": {
        "command": "python {file} generate CHECKPOINT_DIR --prompt …",
        "shards": "or shards, listed in model.safetensors.index.json",
        "pick": "config.json's model_type picks the family",
        "table": "from {file}'s {table}, model_type: (build, load)",
        "build": "Build the model from config.json",
        "built": "build(config): float32, whatever the files store",
        "load": "Load the tensors by name",
        "mapped": "load(model, tensors, config); mmap: one copy in memory",
        "generate": "Generate with the KV cache",
        "decode": "{decode}, cut at the first eos_token_id",
        "text": "Token ids → text through tokenizer.json",
        "ids": "no tokenizers package: --ids in, token ids out",
    },
    "ru": {
        "command": "python {file} generate CHECKPOINT_DIR --prompt …",
        "shards": "или шарды из списка model.safetensors.index.json",
        "pick": "model_type из config.json выбирает семейство",
        "table": "из {table} в {file}, model_type: (build, load)",
        "build": "Модель строится по config.json",
        "built": "build(config): float32, в чём бы ни были веса",
        "load": "Тензоры загружаются по именам",
        "mapped": "load(model, tensors, config); mmap: в памяти одна копия",
        "generate": "Генерация с KV-кешем",
        "decode": "{decode}, обрезка на первом eos_token_id",
        "text": "id токенов → текст через tokenizer.json",
        "ids": "без пакета tokenizers: --ids на входе, id на выходе",
    },
}


def run_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """The directory's files, then the command's steps top to bottom, each box edged
    in the colour of the file it reads: model_type picks the loaders from the era
    file's table, the model is built from config.json, its tensors loaded by name,
    decoded with the KV cache and turned into text."""
    t = text(RUN_LABELS, language)
    run = checkpoint_run()
    with style(theme) as p:
        file_colour = {
            "config.json": p.series[0],
            "model.safetensors": p.series[2],
            "generation_config.json": p.series[1],
            "tokenizer.json": p.series[3],
        }
        steps = [
            (
                "pick",
                "config.json",
                t["pick"],
                t["table"].format(file=run.file, table=run.table),
            ),
            ("build", "config.json", t["build"], t["built"]),
            ("load", "model.safetensors", t["load"], t["mapped"]),
            (
                "generate",
                "generation_config.json",
                t["generate"],
                t["decode"].format(decode=run.decode),
            ),
            ("text", "tokenizer.json", t["text"], t["ids"]),
        ]
        left, right = 0.12, WIDTH - 0.12
        line_h, step_h, gap, row_h = 0.2, 0.46, 0.13, 0.17
        rows = len(run.model_types)  # the table's lines, under the first step
        files = (  # two columns, then where shards are listed
            ("config.json", "tokenizer.json"),
            ("model.safetensors", "generation_config.json"),
        )
        folder_h = 0.36 + (len(files) + 1) * line_h
        height = 0.45 + folder_h + len(steps) * (step_h + gap) + rows * row_h + 0.07
        fig, ax = canvas(WIDTH, height)
        y = height - 0.22
        ax.text(
            left,
            y,
            t["command"].format(file=run.file),
            fontsize=10.5,
            fontweight="bold",
            family=MONO,
            va="center",
            color=p.ink,
            gid="run-command",
        )
        # The directory and its files
        y -= 0.23 + folder_h
        box(ax, left, y, right - left, folder_h, face="none", edge=p.muted)
        row = y + folder_h - 0.2
        ax.text(
            left + 0.12,
            row,
            "CHECKPOINT_DIR/",
            fontsize=10.5,
            fontweight="bold",
            family=MONO,
            va="center",
            color=p.ink,
        )
        for pair in files:
            row -= line_h
            for column, name in zip((left + 0.14, left + 2.45), pair):
                ax.add_patch(
                    Rectangle(
                        (column, row - 0.06),
                        0.12,
                        0.12,
                        facecolor=file_colour[name],
                        edgecolor="none",
                    )
                )
                ax.text(
                    column + 0.2,
                    row,
                    name,
                    fontsize=10,
                    family=MONO,
                    va="center",
                    color=p.ink,
                    gid=f"run-file-{name}",
                )
        ax.text(
            left + 0.34,
            row - line_h,
            t["shards"],
            fontsize=10,
            va="center",
            color=p.muted,
            gid="run-shards",
        )
        # The steps
        for name, reads, title, detail in steps:
            lines = rows if name == "pick" else 0
            h = step_h + lines * row_h
            arrow(ax, (left + 0.5, y - 0.02), (left + 0.5, y - gap + 0.02), p.muted)
            y -= gap + h
            box(
                ax,
                left,
                y,
                right - left,
                h,
                face=p.empty,
                edge=file_colour[reads],
                lw=1.6,
                gid=f"run-step-{name}",
            )
            ax.add_patch(
                Rectangle(
                    (left + 0.01, y + 0.04),
                    0.09,
                    h - 0.08,
                    facecolor=file_colour[reads],
                    edgecolor="none",
                )
            )
            ax.text(
                left + 0.2,
                y + h - 0.16,
                title,
                fontsize=10.5,
                fontweight="bold",
                va="center",
                color=p.ink,
                gid=f"run-title-{name}",
            )
            ax.text(
                left + 0.2,
                y + h - 0.35,
                detail,
                fontsize=10,
                va="center",
                color=p.ink,
                gid=f"run-detail-{name}",
            )
            for k in range(lines):
                kind, build, load = run.model_types[k]
                ax.text(
                    left + 0.36,
                    y + h - 0.54 - k * row_h,
                    f"{kind}: ({build}, {load})",
                    fontsize=10,
                    family=MONO,
                    va="center",
                    color=p.ink,
                    gid=f"run-type-{kind}",
                )
    return fig


def file_alt(layout: FileLayout) -> str:
    """The file figure's alt text, every number read from the layout."""
    data = layout.data_length
    pad = len(layout.header_text) - len(layout.header_text.rstrip(" "))
    listed, spans = [], []
    for name, dtype, shape, (begin, end) in layout.entries:
        item = SAFETENSORS_DTYPES[dtype].itemsize
        dims = " by ".join(map(str, shape))
        listed.append(
            f"{name}, dtype {dtype}, shape {dims}, data_offsets {begin} and {end}"
        )
        spans.append(
            f"{name} in bytes {begin} to {end}, {(end - begin) // item} items of {item}"
        )
    return (
        f"One .safetensors file of {layout.size} bytes, written by hand and read back "
        "by load_safetensors, drawn top to bottom. The whole file to scale: 8 bytes of "
        f"length, a JSON header of n = {layout.n} bytes, then {data} bytes of data "
        f"from byte {layout.data_start}. Bytes 0 to 7 are "
        f"{layout.length_bytes.hex(' ')}, n = {layout.n} little-endian. The header "
        f"lists {'; '.join(listed)}; then {pad} spaces so that 8 + n is a multiple of "
        "8. The data region to scale, offsets counted from the end of the header: "
        f"{'; '.join(spans)}."
    )


def run_alt(run: CheckpointRun | None = None) -> str:
    """The run figure's alt text, the model types and functions read from the table
    (as the figure reads them)."""
    run = run or checkpoint_run()
    types = " and ".join(f"{k} ({b}, {ld})" for k, b, ld in run.model_types)
    return (
        f"What python {run.file} generate CHECKPOINT_DIR --prompt does, top to bottom. "
        "The directory holds config.json, model.safetensors or shards listed in "
        "model.safetensors.index.json, tokenizer.json and generation_config.json. "
        f"Then: config.json's model_type picks the family from {run.file}'s "
        f"{run.table}, which maps each model type to its build and load functions: "
        f"{types}; build(config) builds the model from config.json in float32; "
        "load(model, tensors, config) loads the tensors by name, memory-mapped, so one "
        f"copy is in memory; {run.decode} generates with the KV cache, the output cut "
        "at the first eos_token_id; tokenizer.json turns the token ids into text, or "
        "without the tokenizers package the command takes --ids and prints token ids."
    )


SPECS: list[tuple] = [
    (
        "safetensors-file",
        file_figure,
        file_alt(layout_of(encode_safetensors(example_tensors()))),
    ),
    (
        "checkpoint-run",
        run_figure,
        run_alt(),
    ),
]
