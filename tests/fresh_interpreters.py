"""Run jobs, each in an interpreter that has imported nothing but torch, for the price of
one import of torch.

    python -I tests/fresh_interpreters.py JOBS.json

JOBS.json is a list of {"name", "code", "argv", "cwd"}. This interpreter imports torch
(the first thing every exported file does, and most of the time it takes to start one;
with it torch.distributed.tensor, which torch's assert_close imports on its first call),
then forks one child per job, all at once, and waits for them. A child is this process
as it was after those imports: nothing of `literate`, of the tests or of another job is
in it. It changes to `cwd`, runs `code` as `python -c code *argv` would (as `__main__`,
`sys.argv[1:] == argv`), writes its standard output and error to `<name>.out` and
`<name>.err` next to JOBS.json, and exits with the code `python -c` would have. This
file imports nothing from `literate` or the tests: `tests/test_export.py` uses it to run
each exported file "alone", six files and two comparisons with Hugging Face in about the
time of two plain interpreter starts.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

import torch  # noqa: F401  (imported once, before the children are forked)

# torch's own: `torch.testing.assert_close`, which every era file's self-check calls,
# imports torch.distributed.tensor the first time it runs (to unwrap DTensors): about a
# second in each child. A part of torch, imported once here like the rest of it.
try:
    import torch.distributed.tensor  # noqa: F401
except ImportError:  # a build of torch without distributed: assert_close skips it too
    pass


def run_child(job: dict, folder: Path) -> int:
    """In the child: run one job with its output in its own files; its exit code."""
    out = open(folder / f"{job['name']}.out", "w", encoding="utf-8")
    err = open(folder / f"{job['name']}.err", "w", encoding="utf-8")
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)
    os.chdir(job["cwd"])
    sys.argv = ["-c", *job["argv"]]
    code = 0
    try:
        exec(compile(job["code"], "<string>", "exec"), {"__name__": "__main__"})
    except SystemExit as stop:
        if stop.code is None:
            code = 0
        elif isinstance(stop.code, int):
            code = stop.code
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def main(jobs_file: str) -> int:
    folder = Path(jobs_file).parent
    jobs = json.loads(Path(jobs_file).read_text(encoding="utf-8"))
    children = {}
    for job in jobs:
        pid = os.fork()
        if pid == 0:  # the child never returns into the loop
            os._exit(run_child(job, folder))
        children[pid] = job["name"]
    codes = {}
    while children:
        pid, status = os.wait()
        codes[children.pop(pid)] = os.waitstatus_to_exitcode(status)
    (folder / "codes.json").write_text(json.dumps(codes), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
