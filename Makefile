# gpudissect: `make reproduce` runs the default pipeline; `make test` runs the whole suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
CORES  ?= 1
# processes of `make test` (pytest-xdist)
TEST_WORKERS ?= 2
export PATH := $(abspath $(BIN)):$(PATH)

# the Slurm executor plugin of the `slurm` extra, pinned there
SLURM_PLUGIN = $(shell sed -n 's/^slurm = \["\(.*\)"\]$$/\1/p' pyproject.toml)

.PHONY: reproduce test test-suite lint bench bench-ci gpu-test test-modern reference artifact wheel-cache clean help

help:
	@echo "make reproduce   create $(VENV), install pinned deps, run the default pipeline"
	@echo "make test        lint + the whole test suite in TEST_WORKERS=$(TEST_WORKERS) processes (incl. snakemake --lint, a tiny pipeline run)"
	@echo "make test-suite  the test suite alone (no lint)"
	@echo "make bench       simulator and pipeline speed benchmarks"
	@echo "make bench-ci    CI=true .ci/run on a fresh clone, timed by phase (goal: 10 minutes)"
	@echo "make gpu-test    the GPU tests (on a GPU host with pycuda)"
	@echo "make test-modern the A100, L40S and B200 twins through the GPU experiment set"
	@echo "make reference GPU=NAME  (GPU host) the config/gpu.yaml run + twin -> results/reference/NAME/"
	@echo "make artifact    dist/gpudissect-artifact-<version>.tar.gz (see ARTIFACT.md; WHEELS=1 adds the wheelhouse)"

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
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check Snakefile workflow/rules
	$(BIN)/snakemake --lint --cores 1

# The Slurm test (tests/test_slurm_profile.py) submits through the executor plugin.
$(VENV)/.slurm: $(VENV)/.installed
	$(BIN)/python -m pip install -q -c requirements.lock "$(SLURM_PLUGIN)"
	touch $@

# The suite in TEST_WORKERS processes (pytest-xdist), each module whole in one of them, the
# end-to-end modules first (tests/conftest.py); TEST_WORKERS=0 runs it in this process alone.
# The twenty slowest tests are listed at the end, where the suite's time goes.
test: lint test-suite

test-suite: $(VENV)/.slurm
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder \
		--durations=20

gpu-test: $(VENV)/.installed
	$(BIN)/python -m pytest -q -m gpu

# the A100, L40S and B200 twins of config/modern.yaml through config/gpu.yaml and their own twins
# through it again (about 17 minutes)
test-modern: $(VENV)/.installed
	$(BIN)/python -m pytest -q -m modern tests/test_modern_twins.py

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_sim.py
	$(BIN)/python benchmarks/bench_pipeline.py --readme README.md

# `CI=true bash .ci/run` on a fresh clone of this checkout, timed by phase (the goal: 10 minutes)
bench-ci:
	$(PYTHON) benchmarks/bench_ci.py --readme README.md

# One GPU's reference results (results/reference/<GPU>/, README.md "Reference results"): the
# whole config/gpu.yaml run of CUDA device 0 with its twin, then the fleet report.
GPU ?=
reference:
	@test -n "$(GPU)" || { echo "make reference: give GPU=<folder name>, e.g. GPU=h100"; exit 2; }
	$(MAKE) $(VENV)/.installed
	$(BIN)/python -m gpudissect reference --gpu $(GPU) --cores $(CORES)

# --- the artifact-evaluation bundle (ARTIFACT.md) ---------------------------------------------
VERSION  = $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
ARTIFACT = gpudissect-artifact-$(VERSION)
STAGE    = build/artifact/$(ARTIFACT)
# Wheels are downloaded here once and reused by later builds; the bundle's wheelhouse is then
# resolved from this folder alone (--no-index), which shows that it installs offline.
WHEEL_CACHE ?= $(HOME)/.cache/gpudissect/wheelhouse
# The `cuda` extra (pure wheels, cuda-python's bindings for this Python, pycuda's source archive
# and what building it needs) and the `slurm` extra, beside the pinned lock.
CUDA_REQS = "pycuda>=2024.1" "nvidia-ml-py>=12" "cuda-python>=12"
WHEEL_ARGS = -r requirements.lock "setuptools>=69" wheel $(CUDA_REQS) "$(SLURM_PLUGIN)" \
	--no-binary pycuda -c requirements.lock

# WHEELS=1 adds the wheelhouse (every pinned wheel, the `cuda` and `slurm` extras: about 230 MB)
# for an offline install; the default bundle leaves it out and installs from the package index
# (ARTIFACT.md A.4 says why and gives both sizes).
WHEELS ?= 0
ifeq ($(WHEELS),1)
WHEEL_DEPS = wheel-cache
else ifeq ($(WHEELS),0)
WHEEL_DEPS =
else
$(error WHEELS=$(WHEELS): allowed are 0 (the bundle without the wheelhouse, the default) and 1 (with it, for an offline install))
endif

artifact: dist/$(ARTIFACT).tar.gz

# The bundle's report: the default pipeline's (`make reproduce` renders it; this runs it when
# absent). ARTIFACT_RUN adds arguments to that run (the bundle test renders a tiny config).
ARTIFACT_RUN ?=
results/report/report.md: | $(VENV)/.installed
	$(BIN)/snakemake --cores $(CORES) $(ARTIFACT_RUN)

# The wheels into WHEEL_CACHE (pip keeps what is there), a target of its own: `make -j2
# artifact` downloads them while the report's run works
wheel-cache: | $(VENV)/.installed
	mkdir -p $(WHEEL_CACHE)
	$(BIN)/python -m pip download -q -d $(WHEEL_CACHE) $(WHEEL_ARGS)

# a stamp per WHEELS value: switching it makes the bundle again
dist/.wheels-$(WHEELS):
	mkdir -p dist && rm -f dist/.wheels-* && touch $@

dist/$(ARTIFACT).tar.gz: results/report/report.md dist/.wheels-$(WHEELS) $(WHEEL_DEPS) \
		$(VENV)/.installed
	rm -rf build/artifact && mkdir -p $(STAGE) dist
	git ls-files -z | xargs -0 tar -cf - | tar -xf - -C $(STAGE)
	PYTHONPATH=workflow $(BIN)/python -c \
		"from gpudissect.provenance import git_commit; print(git_commit('.'))" > $(STAGE)/COMMIT
	cp -r results/report results/analysis results/figures $(STAGE)/results/
	$(if $(filter 1,$(WHEELS)),$(BIN)/python -m pip download -q --no-index \
		--find-links $(WHEEL_CACHE) -d $(STAGE)/wheelhouse $(WHEEL_ARGS))
	tar -czf $@.tmp -C build/artifact $(ARTIFACT)
	mv $@.tmp $@
	rm -rf build/artifact
	@echo "Artifact: $(abspath $@)"

clean:
	rm -rf build/artifact results/build results/traces results/analysis results/figures results/report logs .snakemake
