"""Run every Python block of every page under docs/ with sybil.

Each page is one program: its blocks run top to bottom in one namespace. A block whose
body is a pymdownx.snippets include (`--8<-- "literate/x.py:section"`) is expanded with
pymdownx's own preprocessor, configured as in mkdocs.yml, and the expanded code runs, so
what the site shows is exactly what is tested. The rules live in
`literate/site/docblocks.py`, shared with the site build.
"""

from __future__ import annotations

import pytest
import torch
from sybil import Sybil
from sybil.parsers.markdown import SkipParser

from literate.site.docblocks import python_block_parser

# One intra-op thread for the whole run. The tensors here are small; on the 2-core shared
# machines, waking OpenMP threads for each tiny operation made some tests 100x slower.
# Results do not depend on it (every comparison states its tolerance).
torch.set_num_threads(1)

pytest_collect_file = Sybil(
    parsers=[python_block_parser(), SkipParser()],
    patterns=["*.md"],
    path="docs",
).pytest()


# Under `--dist loadfile` (make test), a page and the test files that call the same
# cached measurement (an lru_cache lives in its process) go to one worker together, so
# the measurement runs once in the suite rather than once in each worker.
SHARED_WORKER = {
    "docs/eras/gpt2.md": "gradient_study",  # chapter 5's figures and claims
    "tests/test_figures.py": "gradient_study",
    "docs/moe/mixture-of-experts.md": "train_tiny_moe",  # chapter 9's training runs
    "tests/test_moe_training.py": "train_tiny_moe",
    "docs/eras/side-by-side.md": "built_published_model",  # the eleven published models
    "tests/test_published.py": "built_published_model",
    "docs/cheatsheet.md": "built_published_model",
}


# optionalhook: without xdist (`-p no:xdist`, or not installed) pytest would refuse an
# unknown hook
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None  # xdist's own scheduler
    from xdist.scheduler import LoadFileScheduling

    class SharedMeasurements(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return SHARED_WORKER.get(path, path)

    return SharedMeasurements(config, log)
