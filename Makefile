# gpudissect: `make reproduce` runs the default pipeline; `make test` runs the whole suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
CORES  ?= 1
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: reproduce test lint bench gpu-test clean help

help:
	@echo "make reproduce   create $(VENV), install pinned deps, run the default pipeline"
	@echo "make test        lint + the whole test suite (incl. snakemake --lint, a tiny pipeline run)"
	@echo "make bench       simulator and pipeline speed benchmarks"
	@echo "make gpu-test    the GPU tests (on a GPU host with pycuda)"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: requirements.lock pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.lock
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $@

reproduce: $(VENV)/.installed
	$(BIN)/snakemake --cores $(CORES)
	@echo
	@echo "Report: $(abspath results/report/report.md)"

lint: $(VENV)/.installed
	$(BIN)/ruff check workflow tests benchmarks
	$(BIN)/ruff format --check workflow tests benchmarks
	$(BIN)/snakefmt --check Snakefile workflow/rules
	$(BIN)/snakemake --lint --cores 1

test: lint
	$(BIN)/python -m pytest -q

gpu-test: $(VENV)/.installed
	$(BIN)/python -m pytest -q -m gpu

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_sim.py
	$(BIN)/python benchmarks/bench_pipeline.py

clean:
	rm -rf results/build results/traces results/analysis results/figures results/report logs .snakemake
