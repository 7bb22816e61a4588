# precfuzz: every target does its own set-up (.venv with the pinned stack) on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.install-stamp
ZOO_STAMP := $(VENV)/.zoo-stamp
ZOO_OUT ?= results/zoo
OUT ?= results/fuzz
TIME ?= 300
PYTEST_ARGS ?=
# test processes (pytest-xdist): CI has 2 cores; `make test PYTEST_WORKERS=0` runs in one process
PYTEST_WORKERS ?= 2

.PHONY: install install-ray install-zoo fuzz test test-all test-slow smoke bench zoo report clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]' --config-settings editable_mode=compat
	touch $(STAMP)

# a machine of a Ray cluster (`precfuzz run --ray`, README): the pinned stack plus Ray, without the test tools
install-ray:
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[ray]' --config-settings editable_mode=compat

# the audit zoo's libraries (diffusers, transformers, timm, torchvision): the optional extra `zoo`, beside the core
install-zoo: $(ZOO_STAMP)

$(ZOO_STAMP): pyproject.toml $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[zoo]' --config-settings editable_mode=compat
	touch $(ZOO_STAMP)

fuzz: install
	$(BIN)/precfuzz run --out $(OUT) --time $(TIME)

# the suite CI runs at every stop (.ci/run): every test but those marked `slow` (whole campaigns, kill -9 resumes,
# Ray clusters, audits of model blocks: each over ~20 s on 2 cores), in under 12 minutes with the install
test: install
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup --durations=20 -m "not slow" $(PYTEST_ARGS)

# the slow tier alone, and everything (before a release, after a change to the campaign, the audit or the lanes)
test-slow: install
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup --durations=20 -m slow $(PYTEST_ARGS)

test-all: install
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup --durations=30 $(PYTEST_ARGS)

smoke: install
	$(BIN)/precfuzz smoke --junit results/smoke/junit.xml

bench: install
	$(BIN)/python -m bench.run $(if $(BENCH_ZOO),--zoo) $(if $(BENCH_SCALE),--scale)

# every corpus/zoo model audited in its own process: results/zoo/zoo.md (model x policy x backend), zoo.json, ops.md,
# junit.xml; exit 1 while a model does not audit end to end
zoo: $(ZOO_STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/precfuzz zoo --out $(ZOO_OUT)

report: install
	$(BIN)/precfuzz report $(OUT)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
