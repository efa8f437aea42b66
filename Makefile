# The study's two commands: `make book` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# On a machine with an NVIDIA driver the venv also gets CuPy and cuDNN (CUDA 12 wheels run on
# CUDA 12 and 13 drivers); override with `make book CUDA_EXTRA=,cuda13`.
CUDA_EXTRA ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo ,cuda12)
DEVICE ?= auto

.PHONY: book test lint venv clean repository

venv: $(BIN)/.installed

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev$(CUDA_EXTRA)]"
	touch $@

book: venv
	$(if $(filter recorded,$(DEVICE)),,$(BIN)/convkit prebuild)
	$(BIN)/convkit book --device $(DEVICE)

test: venv
	$(BIN)/python -m pytest

lint: venv
	$(BIN)/ruff check convkit tests
	$(BIN)/ruff format --check convkit tests

clean:
	rm -rf book/_build book/notebooks

# A fork's address (and branch), named once: book/_config.yml's repository.url and .branch, every notebook's
# repo_url and repo_ref (what Colab clones).
repository: venv
	@test -n "$(URL)" || { echo "usage: make repository URL=https://github.com/<owner>/<name> [BRANCH=main]"; exit 2; }
	$(BIN)/python -c "import sys; from convkit.book.reproduce import set_repository; \
	[print('set in', p) for p in set_repository(sys.argv[1], branch=sys.argv[2] or None)]" "$(URL)" "$(BRANCH)"
