# Two commands for a newcomer:  `make serve`  and  `make test`.
# Both set everything up first (a virtualenv in .venv with the CPU build of PyTorch,
# then this project with its site and test extras) and do nothing more when it is there.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch is installed before the project, so that pip never resolves the
# bare `torch>=2.7` requirement to a multi-GB CUDA build. Where your pip does not already
# find a CPU wheel, point it at PyTorch's CPU wheel index, e.g.
#   make test TORCH_PIP_ARGS="--index-url <PyTorch CPU wheel index>"
TORCH ?= torch==2.13.0
TORCH_PIP_ARGS ?=
export NO_MKDOCS_2_WARNING := 1

.PHONY: test-readers setup serve build test bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install $(TORCH_PIP_ARGS) "$(TORCH)"
	$(BIN)/python -m pip install -e ".[site,test]"
	touch $@

serve: setup  ## build and serve the site on http://127.0.0.1:8000, rebuilding on edits
	$(BIN)/mkdocs serve

build: setup  ## build the static site into site/
	$(BIN)/mkdocs build --strict

# Two workers, one file each at a time (`--dist loadfile`): a page's blocks share one
# namespace and run in order, so a file never splits across workers.
test: setup  ## lint, build the site, then run every test and every block on every page
	$(BIN)/ruff check literate tests conftest.py docs/notebooks
	$(BIN)/ruff format --check literate tests conftest.py docs/notebooks
	$(BIN)/mkdocs build --strict
	$(BIN)/pytest -n 2 --dist loadfile -m "not readers"

# The checks of the site as readers use it that take minutes of CPU (axe-core on every
# page in both schemes, every chapter notebook executed in a fresh kernel, every dark
# figure the build recolours drawn dark and compared): CI runs them
# after `make test`, on the site it built.
test-readers: setup  ## run the readers' checks (accessibility, chapter notebooks) on the built site
	$(BIN)/pytest -n 2 --dist loadfile -m readers

# The benchmarks page shows the committed results; this runs every row again (minutes),
# niced, and rewrites them (and pins their digest in literate/tools/bench/results.py).
bench: setup  ## time our layers against the production ones into literate/data/bench.json
	nice $(BIN)/python -m literate.tools.bench --json literate/data/bench.json --pin

clean:
	rm -rf site .cache .pytest_cache
