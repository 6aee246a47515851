"""One verified file per era, assembled from the sections the pages show.

    python -m literate.tools.export --list
    python -m literate.tools.export gpt2               # to standard output
    python -m literate.tools.export gpt2 -o gpt2.py    # to a file

An era is a list of snippet sections (the `start:name` / `end:name` markers of a
`literate/` module), in dependency order: the very code the chapter pages include, so what a reader downloads
is what the site shows and tests. The file imports only the standard library and torch
(the imports are taken from the source modules, kept if the assembled code uses them),
and ends with a self-check (`literate/tools/selfcheck.py`) that runs under
`if __name__ == "__main__":`. tests/test_export.py runs every file in a fresh interpreter
from an empty directory and compares it with its production reference; the site build
writes them to `downloads/` for each chapter to link.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import textwrap
from pathlib import Path

from literate.tools.era_files import ERAS, Era, checkpoint_model_types
from literate.tools.standalone import check_module_source, library

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["Era", "ERAS", "section_source", "used_sections", "assemble", "main"]


MARKER = "# --8<-- [{kind}:{name}]"


def module_path(module: str) -> Path:
    """literate/parts/attention.py for "parts.attention"."""
    return ROOT / "literate" / (module.replace(".", "/") + ".py")


def section_source(module: str, name: str) -> str:
    """The lines of one snippet section of a `literate` module (dotted, e.g.
    "parts.attention"), markers excluded."""
    if not module_path(module).is_file():
        raise KeyError(f"no module literate.{module}")
    lines = module_path(module).read_text(encoding="utf-8").splitlines()
    try:
        start = lines.index(MARKER.format(kind="start", name=name))
        end = lines.index(MARKER.format(kind="end", name=name))
    except ValueError:
        raise KeyError(
            f"{module_path(module).relative_to(ROOT)} has no section {name!r}"
        ) from None
    return "\n".join(lines[start + 1 : end]).strip("\n")


def _library_imports(module: str) -> list[ast.stmt]:
    tree = ast.parse(module_path(module).read_text(encoding="utf-8"))
    found = []
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module and library(stmt.module):
            found.append(stmt)
        elif isinstance(stmt, ast.Import) and all(library(a.name) for a in stmt.names):
            found.append(stmt)
    return found


def _imports(modules: list[str], code: str) -> list[str]:
    """The standard-library and torch imports of the source modules that `code` uses,
    merged per module, `from __future__` first, then the standard library, then torch."""
    used = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code))
    plain: set[str] = set()
    froms: dict[str, set[str]] = {}
    for module in modules:
        for stmt in _library_imports(module):
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    if bound in used:
                        plain.add(
                            f"import {alias.name}"
                            + (f" as {alias.asname}" if alias.asname else "")
                        )
            elif stmt.module != "__future__":
                for alias in stmt.names:
                    if (alias.asname or alias.name) in used:
                        entry = alias.name + (
                            f" as {alias.asname}" if alias.asname else ""
                        )
                        froms.setdefault(stmt.module, set()).add(entry)
    lines = sorted(plain)
    lines += [
        f"from {m} import {', '.join(sorted(names))}"
        for m, names in sorted(froms.items())
    ]
    stdlib = sorted(s for s in lines if not s.split()[1].startswith("torch"))
    torch_ = sorted(s for s in lines if s.split()[1].startswith("torch"))
    return ["from __future__ import annotations", ""] + stdlib + [""] + torch_


def _top_level_names(stmt: ast.stmt) -> list[str]:
    """The names a top-level def, class or assignment binds."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    targets = (
        stmt.targets
        if isinstance(stmt, ast.Assign)
        else [stmt.target]
        if isinstance(stmt, ast.AnnAssign)
        else []
    )
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def used_sections(era: Era) -> list[tuple[str, str]]:
    """The era's sections and its self-check, with the sections of its library that
    they use (by name, transitively), all in the library's then the era's order."""
    kept = list(era.sections) + [(era.check_module, era.self_check)]
    library = [s for s in era.library if s not in kept]
    defines = {
        s: {
            n
            for stmt in ast.parse(section_source(*s)).body
            for n in _top_level_names(stmt)
        }
        for s in library
    }
    wanted = set(kept)
    todo = [section_source(*s) for s in kept]
    while todo:
        used = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", todo.pop()))
        for s in library:
            if s not in wanted and defines[s] & used:
                wanted.add(s)
                todo.append(section_source(*s))
    return [s for s in library if s in wanted] + kept


def assemble(name: str) -> str:
    """The standalone file of era `name`, as text."""
    if name not in ERAS:
        raise KeyError(f"no era {name!r}; eras: {sorted(ERAS)}")
    era = ERAS[name]
    chosen = used_sections(era)
    parts, modules = [], []
    for module, section in chosen:
        parts.append(section_source(module, section))
        modules.append(module)
    body = "\n\n\n".join(parts)
    header = (
        f'"""{era.title}.\n\n'
        f"The code of {era.chapters} of Transformer Blocks, literate, as one file: the\n"
        "very sections the pages show and test, in dependency order, written by\n"
        f"`python -m literate.tools.export {name}`. It needs only Python >= 3.11 and\n"
        f"torch >= 2.7. `python {name}.py` runs its self-check ({era.self_check}).\n"
        + (
            textwrap.fill(
                f"`python {name}.py generate CHECKPOINT_DIR --prompt TEXT` continues "
                "a prompt with a Hugging Face checkpoint directory (config.json and "
                "safetensors) whose model_type is one of: "
                f"{', '.join(checkpoint_model_types(era))} (text in and out needs "
                "`pip install tokenizers`; without it, give token ids with --ids).",
                width=80,
            )
            + "\n"
            if era.command is not None
            else ""
        )
        + '"""'
    )
    main = '\n\n\nif __name__ == "__main__":\n'
    if era.command is not None:
        load, decode = era.command
        main += (
            "    if len(sys.argv) > 1:  # e.g. generate CHECKPOINT_DIR --prompt TEXT\n"
            "        sys.exit(checkpoint_command(\n"
            f'            sys.argv[1:], prog="{name}.py",\n'
            f"            load={load},\n"
            f"            decode={decode}))\n"
        )
    main += f'    {era.self_check}()\n    print("{name}.py: self-check passed")\n'
    text = (
        "\n".join([header, ""] + _imports(list(dict.fromkeys(modules)), body + main))
        + "\n\n\n"
        + body
        + main
    )
    defined = [n for stmt in ast.parse(body).body for n in _top_level_names(stmt)]
    twice = sorted({n for n in defined if defined.count(n) > 1})
    if twice:  # a later section would silently replace an earlier one's definition
        raise ValueError(f"{name}.py defines {twice} more than once")
    problems = check_module_source(text, where=f"{name}.py")
    if problems:
        raise ValueError(
            "the era does not stand alone:\n  " + "\n  ".join(map(str, problems))
        )
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m literate.tools.export", description=__doc__.splitlines()[0]
    )
    parser.add_argument("name", nargs="?", help=f"one of {sorted(ERAS)}")
    parser.add_argument(
        "-o", "--output", type=Path, help="write here instead of standard output"
    )
    parser.add_argument("--list", action="store_true", help="list the eras and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, era in ERAS.items():
            title = era.title.replace("\n", " ")
            print(
                f"{name:16} {era.chapters:13} {len(era.sections):3} sections  {title}"
            )
            loads = checkpoint_model_types(era)
            if loads:
                print(f"{'':30} generate CHECKPOINT_DIR loads: {', '.join(loads)}")
        return 0
    if args.name is None:
        parser.error("name an era, or pass --list")
    if args.output is not None:  # refused before the era is assembled
        if args.output.is_dir():
            parser.error(f"-o {args.output} is a directory: name the file to write")
        if not args.output.parent.is_dir():
            parser.error(
                f"-o {args.output}: no directory {args.output.parent} to write into"
            )
    try:
        text = assemble(args.name)
    except KeyError as error:
        parser.error(str(error.args[0]))
    if args.output is None:
        sys.stdout.write(text)
    else:
        try:
            args.output.write_text(text, encoding="utf-8")
        except OSError as error:  # e.g. a directory without write permission
            parser.error(f"-o {args.output}: {error.strerror or error}")
        print(f"wrote {args.output} ({len(text.splitlines())} lines)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
