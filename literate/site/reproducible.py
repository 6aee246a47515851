"""Two clean builds of the site from the same sources give the same bytes, file by file.

`python -m literate.site.reproducible` copies the sources (the files git tracks, as they
are in the work tree, plus the untracked paths given with `--with`; or the commit given
with `--rev`) into two temporary directories and runs `mkdocs build --strict` in each,
one after the other, each with its own empty `.cache/` (figures, page outputs, executed
notebooks), a different `PYTHONHASHSEED` and the same `SOURCE_DATE_EPOCH` (the commit's
time, as the build hook sets it when it is unset). It then compares the two built sites
and prints every file that is in one only or whose bytes differ, with where the first
difference is. It exits 1 if any file differs.

`--site-url URL` builds both with `SITE_URL=URL` (sitemap with dates, instant
navigation); `--site-url local` picks a free port on 127.0.0.1 for it. `--keep DIR`
builds into `DIR/a` and `DIR/b` and leaves them there (the browser check of instant
navigation, `tests/test_publishing.py`, serves `DIR/a/site`).
"""

from __future__ import annotations

import argparse
import gzip
import io
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from literate.site.docblocks import ROOT

__all__ = [
    "Difference",
    "compare_trees",
    "first_difference",
    "source_date_epoch",
    "main",
]

CONTEXT = 60  # characters of each side shown around a first difference


@dataclass(frozen=True)
class Difference:
    path: str  # relative to the compared directories, with "/"
    what: str  # where and how the two files differ

    def __str__(self) -> str:
        return f"{self.path}: {self.what}"


def first_difference(a: bytes, b: bytes) -> str:
    """Where two byte strings first differ, said for a reader: the line and the text
    around it for UTF-8 text, the offset and bytes otherwise; a gzip file whose contents
    are equal but whose header differs says so."""
    if a == b:
        return "identical"
    if a[:2] == b[:2] == b"\x1f\x8b":
        try:
            inner_a, inner_b = gzip.decompress(a), gzip.decompress(b)
        except OSError:
            pass
        else:
            if inner_a == inner_b:
                return "gzip contents equal, header differs (mtime or file name)"
            return "gzip contents differ: " + first_difference(inner_a, inner_b)
    n = min(len(a), len(b))
    i = next((k for k in range(n) if a[k] != b[k]), n)
    try:
        text_a, text_b = a.decode("utf-8"), b.decode("utf-8")
    except UnicodeDecodeError:
        return (
            f"byte {i} of {len(a)} vs {len(b)}: {a[i : i + 16].hex()} vs "
            f"{b[i : i + 16].hex()}"
        )
    j = len(a[:i].decode("utf-8", errors="ignore"))  # the character where they part
    line = text_a.count("\n", 0, j) + 1
    column = j - (text_a.rfind("\n", 0, j) + 1) + 1
    start = max(0, j - CONTEXT // 2)
    return (
        f"line {line}, column {column} (sizes {len(a)} vs {len(b)} bytes): "
        f"{text_a[start : j + CONTEXT // 2]!r} vs {text_b[start : j + CONTEXT // 2]!r}"
    )


def _files(root: Path) -> dict[str, Path]:
    return {
        p.relative_to(root).as_posix(): p
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def compare_trees(a: Path, b: Path) -> tuple[int, list[Difference]]:
    """Compare every file of two directory trees byte by byte: (files compared, every
    file that is in one tree only or differs, in path order)."""
    files_a, files_b = _files(a), _files(b)
    differences = []
    for path in sorted(files_a.keys() | files_b.keys()):
        if path not in files_b:
            differences.append(Difference(path, f"only in {a}"))
        elif path not in files_a:
            differences.append(Difference(path, f"only in {b}"))
        else:
            bytes_a, bytes_b = files_a[path].read_bytes(), files_b[path].read_bytes()
            if bytes_a != bytes_b:
                differences.append(Difference(path, first_difference(bytes_a, bytes_b)))
    return len(files_a.keys() & files_b.keys()), differences


def source_date_epoch(root: Path = ROOT, rev: str = "HEAD") -> str | None:
    """The committer time of the commit `rev` of `root` (seconds since the epoch, as
    `SOURCE_DATE_EPOCH` wants it), or None outside a git work tree."""
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%ct", rev, "--"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = out.stdout.strip()
    return value if out.returncode == 0 and value.isdigit() else None


def source_files(root: Path = ROOT, extra: tuple[str, ...] = ()) -> list[str]:
    """The files git tracks that are in the work tree, and the untracked ones in `extra`
    (files, or folders taken whole)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached"], cwd=root, capture_output=True, check=True
    )
    names = [n for n in out.stdout.decode("utf-8").split("\0") if n]
    for name in extra:
        path = root / name
        names += (
            [p.relative_to(root).as_posix() for p in path.rglob("*")]
            if path.is_dir()
            else [name]
        )
    return sorted(
        n for n in set(names) if (root / n).is_file() and "__pycache__" not in n
    )


def copy_sources(
    dest: Path,
    root: Path = ROOT,
    *,
    rev: str | None = None,
    extra: tuple[str, ...] = (),
) -> int:
    """Copy the sources into `dest`: the commit `rev` (`git archive`), or else the work
    tree's tracked files as they are now plus `extra`. No caches, no built site, no .git.
    Returns the number of files."""
    dest.mkdir(parents=True, exist_ok=True)
    if rev is not None:
        archive = subprocess.run(
            ["git", "archive", "--format=tar", rev],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(dest, filter="data")
            return sum(1 for member in tar.getmembers() if member.isfile())
    names = source_files(root, extra)
    for name in names:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    return len(names)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def build(src: Path, site: Path, env: dict[str, str], log_path: Path) -> float:
    """`mkdocs build --strict` of the sources in `src` into `site`, its `literate`
    imported from `src`; the build log goes to `log_path`. Returns the seconds taken."""
    env = {
        **env,
        "PYTHONPATH": os.pathsep.join([str(src), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
        "NO_MKDOCS_2_WARNING": "1",
    }
    check = subprocess.run(
        [sys.executable, "-c", "import literate; print(literate.__file__)"],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    if not Path(check.stdout.strip()).resolve().is_relative_to(src.resolve()):
        raise RuntimeError(
            f"the build in {src} would import literate from {check.stdout.strip()}"
        )
    start = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
            cwd=src,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        tail = log_path.read_text(encoding="utf-8")[-3000:]
        raise RuntimeError(
            f"the build in {src} failed ({proc.returncode}); its log ends:\n{tail}"
        )
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m literate.site.reproducible",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "--site-url",
        help="build both with SITE_URL set; 'local' for "
        "http://127.0.0.1:<a free port>/",
    )
    parser.add_argument(
        "--keep", type=Path, help="build into DIR/a and DIR/b and keep them"
    )
    parser.add_argument(
        "--rev", help="build this commit (git archive) instead of the work tree"
    )
    parser.add_argument(
        "--with",
        dest="extra",
        nargs="+",
        default=[],
        metavar="PATH",
        help="untracked files or folders of the work tree to build with",
    )
    args = parser.parse_args(argv)

    env = dict(os.environ)
    epoch = env.get("SOURCE_DATE_EPOCH") or source_date_epoch(ROOT, args.rev or "HEAD")
    if epoch is None:
        parser.error("not in a git work tree and SOURCE_DATE_EPOCH is not set")
    env["SOURCE_DATE_EPOCH"] = epoch
    if args.site_url == "local":
        env["SITE_URL"] = f"http://127.0.0.1:{free_port()}/"
    elif args.site_url:
        env["SITE_URL"] = args.site_url
    else:
        env.pop("SITE_URL", None)

    if args.keep:
        shutil.rmtree(args.keep, ignore_errors=True)
        args.keep.mkdir(parents=True)
        work = args.keep.resolve()
    else:
        work = Path(tempfile.mkdtemp(prefix="reproducible-"))
    try:
        # Both copies first: an edit made while the first build runs reaches neither.
        count = [
            copy_sources(work / name / "src", rev=args.rev, extra=tuple(args.extra))
            for name in ("a", "b")
        ][0]
        sites = []
        for name, seed in (("a", "1"), ("b", "2")):
            src, site = work / name / "src", work / name / "site"
            seconds = build(
                src, site, env | {"PYTHONHASHSEED": seed}, work / name / "build.log"
            )
            print(
                f"build {name}: {count} source files, {seconds:.0f} s (log: {work / name / 'build.log'})",
                flush=True,
            )
            sites.append(site)
        compared, differences = compare_trees(*sites)
        url = env.get("SITE_URL", "(none)")
        print(
            f"SOURCE_DATE_EPOCH={epoch}, SITE_URL={url}: {compared} files compared, "
            f"{len(differences)} differ"
        )
        for difference in differences:
            print(f"  {difference}")
        return 1 if differences else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
