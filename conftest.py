"""Run every Python block of every page under docs/ with sybil.

Each page is one program: its blocks run top to bottom in one namespace. A block whose
body is a pymdownx.snippets include (`--8<-- "literate/x.py:section"`) is expanded with
pymdownx's own preprocessor, configured as in mkdocs.yml, and the expanded code runs, so
what the site shows is exactly what is tested. The rules live in
`literate/site/docblocks.py`, shared with the site build.
"""

from __future__ import annotations

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
