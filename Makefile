# gpuslice: `make demo` runs the walkthrough, `make test` runs every check. Both build .venv first: the demo
# only what it runs (requirements/demo.lock), everything else when a target needs it (requirements/dev.lock).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed
PIP := $(BIN)/pip install --quiet --disable-pip-version-check
export PYTHONUNBUFFERED := 1

.PHONY: all venv demo test unit lint typecheck imports bench fuzz reproduce protos device-check runtime-check lock clean

all: test

# requirements/demo.lock is what the demo runs on (the runtime, the demo extra: the mock kubelet's CEL) and
# the build backend (for the editable install); tests/demo holds it to that. `make test` and the rest add
# dev.lock (the same versions: `make lock` writes each lock constrained by the ones before it).
$(DEMO_STAMP): requirements/demo.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) --require-hashes --no-deps -r requirements/demo.lock
	$(PIP) --no-deps --no-build-isolation -e .
	touch $(DEMO_STAMP)

$(STAMP): $(DEMO_STAMP) requirements/dev.lock
	$(PIP) --require-hashes --no-deps -r requirements/dev.lock
	touch $(STAMP)

venv: $(STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/gpuslice demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/ruff format --check src tests benchmarks tools

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports



# Every check at once (each prints when it is done), the test suite on two pytest-xdist workers per CPU (a
# test's files and ports are its own; most tests wait on sockets, processes and backoffs, so two per CPU
# keep the CPUs busy: 99 s against 138-172 s with one per CPU on 2 CPUs). TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= $(shell echo $$(( $$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1) * 2 )))
test: $(STAMP)
	@$(MAKE) --no-print-directory -j4 --output-sync=target lint typecheck imports unit

unit: $(STAMP)
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadgroup

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# The fuzzers of `make test`, with many more random examples each (minutes, not seconds).
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(BIN)/pytest -q -k test_fuzz_ --timeout 1800

reproduce: $(STAMP)
	$(BIN)/gpuslice sim openb --workload default --policies random,dotprod,clustering,packing,best-fit,fgd,fgd-cpu,fgd-cpu-sym --seeds 42-51 -j 2 --json out/openb-default.json
	$(BIN)/gpuslice sim openb-report --json out/openb-default.json --plot out/openb-default.png

# openb in real time (docs/openb.md, "Real-time replay"): the whole cluster as traced, then 5 % of the nodes
# with arrivals 50x denser on four workloads, every policy.
REPLAY_POLICIES := random,dotprod,clustering,packing,best-fit,fgd,fgd-cpu
reproduce-replay: $(STAMP)
	$(BIN)/gpuslice sim openb-replay --workload default --policies $(REPLAY_POLICIES) --markdown --json out/replay-realtime.json
	$(BIN)/gpuslice sim openb-replay --workload default,gpushare40,gpuspec20,cpu050 --policies $(REPLAY_POLICIES) --nodes 0.05 --compress 50 --markdown --json out/replay-contended.json --plot out/openb-replay.png

protos: $(STAMP)
	$(BIN)/python tools/gen_protos.py

# Containers from the plugin's and DRA's CDI specs under a real runtime (podman + runc from Debian's packages,
# installed here when missing; root). Not part of `make test`: .ci/run runs it after.
runtime-check: $(STAMP)
	tools/install_runtime.sh
	$(BIN)/pytest -q -rs -m runtime tests/runtime

device-check: $(STAMP)
	$(BIN)/python tools/device_check.py

# Re-resolve requirements/{runtime,build,dev}.lock from pyproject.toml with the pinned uv, keeping every pin
# that still fits; `make lock UPGRADE=1` moves all pins to the newest allowed releases.
lock: $(STAMP)
	$(BIN)/python tools/lock.py $(if $(UPGRADE),--upgrade)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache out
