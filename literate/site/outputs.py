"""What a page's blocks print, shown under them on the site.

The site build runs every page as pytest does (`docblocks`: includes expanded, blocks in
order, one namespace per page, one intra-op thread) in a worker process, captures what
each Python block prints, and the hook shows it in an "Output" box right after the
block. A block that prints nothing gets no box; a block that raises fails the build.
A block preceded by the comment `<!-- output: markdown -->` prints Markdown (a table
read from the objects, say): what it prints goes on the page as Markdown, not in a box.

Outputs are cached in `.cache/outputs/`, keyed by the page's text, the fingerprint of
`literate/` and the library versions, so an unchanged page is not run again.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
from pathlib import Path

from literate.site.docblocks import ROOT, _origin, default_expander, iter_blocks

__all__ = [
    "OUTPUT_CACHE",
    "SKIP",
    "python_blocks",
    "run_page",
    "cache_path",
    "with_outputs",
]

OUTPUT_CACHE = ROOT / ".cache" / "outputs"
SKIP = re.compile(r"<!--\s*skip:\s*next\b[^>]*-->\s*$")
AS_MARKDOWN = re.compile(r"<!--\s*output:\s*markdown\s*-->\s*$")
MAX_LINES = 60  # a longer output is cut, with a note saying how much


def line_before(text: str, block) -> str:
    """The last non-blank line before `block`."""
    return text[: block.start].rstrip().rsplit("\n", 1)[-1]


def python_blocks(text: str):
    """The Python blocks of a page that pytest runs (a `skip: next` comment skips one)."""
    blocks = []
    for block in iter_blocks(text):
        if not block.is_python:
            continue
        if SKIP.search(line_before(text, block)):
            continue
        blocks.append(block)
    return blocks


def run_page(path: str) -> list[str]:
    """Run the page at `path` (docs-relative or absolute) as pytest does; return the
    standard output of each of its Python blocks, in order."""
    import torch

    torch.set_num_threads(1)  # as conftest.py sets it: the same digits as the tests
    page = Path(path) if Path(path).is_absolute() else ROOT / "docs" / path
    text = page.read_text(encoding="utf-8")
    expander = default_expander()
    namespace: dict = {}  # as sybil runs a page (classes get __module__ "builtins")
    outputs = []
    for block in python_blocks(text):
        source = (
            expander.expand(block.source) if block.includes_snippet else block.source
        )
        filename, offset = _origin(block, str(page), expander.options["base_path"])
        captured = io.StringIO()
        with contextlib.redirect_stdout(captured):
            try:
                exec(compile("\n" * offset + source, filename, "exec"), namespace)
            except Exception as error:
                where = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
                raise RuntimeError(
                    f"{where}:{block.line}: the block raised "
                    f"{type(error).__name__}: {error}"
                ) from None
        outputs.append(captured.getvalue())
    return outputs


def cache_path(text: str, fingerprint: str, cache_dir: Path = OUTPUT_CACHE) -> Path:
    key = hashlib.sha256(f"{fingerprint}|{text}".encode()).hexdigest()[:24]
    return cache_dir / f"{key}.json"


def cached_run(path: str, fingerprint: str) -> list[str]:
    """`run_page`, through the cache (runs in the worker process)."""
    page = ROOT / "docs" / path
    target = cache_path(page.read_text(encoding="utf-8"), fingerprint)
    if target.exists():
        return json.loads(target.read_text(encoding="utf-8"))
    outputs = run_page(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(outputs), encoding="utf-8")
    tmp.replace(target)
    return outputs


def _box(output: str, prefix: str) -> str:
    lines = output.rstrip("\n").split("\n")
    if len(lines) > MAX_LINES:
        lines = lines[:MAX_LINES] + [f"... ({len(lines) - MAX_LINES} more lines)"]
    longest = max((len(m) for m in re.findall(r"`+", output)), default=0)
    fence = "`" * max(3, longest + 1)
    body = [f'{prefix}{fence}text {{ .output title="Output" }}']
    body += [f"{prefix}{line}" if line else "" for line in lines]
    body.append(f"{prefix}{fence}")
    return "\n".join(body)


def with_outputs(markdown: str, outputs: list[str]) -> str:
    """`markdown` with an Output box after each Python block that printed something.
    The blocks are matched in order; a page whose blocks changed since `outputs` were
    made is an error (the cache key includes the text, so this means a bug)."""
    blocks = python_blocks(markdown)
    if len(blocks) != len(outputs):
        raise ValueError(
            f"{len(blocks)} Python blocks on the page, {len(outputs)} outputs"
        )
    pieces, last = [], 0
    for block, output in zip(blocks, outputs):
        if not output.strip():
            continue
        line_start = markdown.rfind("\n", 0, block.start) + 1
        prefix = re.match(r"[ \t]*", markdown[line_start:]).group(0)
        pieces.append(markdown[last : block.end])
        if AS_MARKDOWN.search(line_before(markdown, block)):
            lines = output.rstrip("\n").split("\n")
            pieces.append(
                "\n\n" + "\n".join(f"{prefix}{line}" if line else "" for line in lines)
            )
        else:
            pieces.append("\n\n" + _box(output, prefix))
        last = block.end
    pieces.append(markdown[last:])
    return "".join(pieces)
