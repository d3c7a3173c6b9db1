# Two entry points do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: demo test lint unit live bench bench-full system-deps venv clean record

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[lab,dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

venv: $(STAMP)

# Prometheus, node-exporter and Alertmanager are real components in the end-to-end tests and the demo.
system-deps:
	@command -v prometheus >/dev/null && command -v promtool >/dev/null && command -v prometheus-node-exporter >/dev/null && command -v prometheus-alertmanager >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus prometheus-node-exporter prometheus-alertmanager >/dev/null; }
	@command -v kubectl >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null; }
	@# Nothing is stopped here: the tests start their own Prometheus, node-exporter and
	@# Alertmanager on free loopback ports and stop only those.

lint: venv
	$(BIN)/ruff check daemon tests benchmarks
	$(BIN)/ruff format --check daemon tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: venv
	$(BIN)/pytest -q -m "not live"

live: venv system-deps
	$(BIN)/pytest -q -m live

# The whole test suite: lint, type checks, layer contracts, unit, replay and live end-to-end tests.
# Two workers: the end-to-end runs mostly wait on real Tritons, so two run side by side, or
# one beside the CPU-bound rest of the suite. Tests sharing a wider-scoped fixture (a live
# lab, a module's Triton, the wheel) form one group (tests/conftest.py), so each fixture is set
# up once, on one worker; groups go out in collection order, the live end-to-end ones first.
# The type check and the layer contracts take a core for a minute or two on a fresh clone: they
# run beside the suite at the lowest priority, on the cycles its first tests leave while they
# wait on Tritons (taking little from a live test's timing), and report after it; either
# failing fails the target. The quick benchmarks (`make bench`) run the same way, so a
# benchmark that no longer runs fails CI; their numbers, taken beside the suite, are not
# judged (docs/benchmarks.md is measured on a quiet machine).
test: venv system-deps
	$(BIN)/ruff check daemon tests benchmarks
	$(BIN)/ruff format --check daemon tests benchmarks
	@{ nice -n 19 $(BIN)/mypy && nice -n 19 $(BIN)/lint-imports; } > $(VENV)/type-check.log 2>&1 & checks=$$!; \
	nice -n 19 $(BIN)/python -m benchmarks.run --quick > $(VENV)/bench.log 2>&1 & bench=$$!; \
	$(BIN)/pytest -q --durations=25 -n 2 --dist loadgroup --no-loadscope-reorder; suite=$$?; \
	wait $$checks; checked=$$?; wait $$bench; benched=$$?; \
	echo "--- the tests whose fault is other work on the node, alone on it:"; \
	$(BIN)/pytest -q -n 0 -m node_exclusive -s; alone=$$?; \
	echo "--- mypy and lint-imports:"; cat $(VENV)/type-check.log; \
	echo "--- make bench (beside the suite, so its numbers are not judged):"; cat $(VENV)/bench.log; \
	test $$suite -eq 0 && test $$alone -eq 0 && test $$checked -eq 0 && test $$benched -eq 0

# The main job: a local Triton, the daemon against it, faults injected one after another.
demo: venv system-deps
	$(BIN)/tritonguard demo

# A quick run for CI (under a minute): parser, ingest on the 50-model capture and a 100-pod
# fleet, a 400-target scrape fan-out. `make bench-full` measures everything in docs/benchmarks.md.
bench: venv
	$(BIN)/python -m benchmarks.run --quick

bench-full: venv
	$(BIN)/python -m benchmarks.run

# Re-record the lab's trace fixtures from a real Triton (slow: minutes per scenario).
record: venv
	$(BIN)/python -m tritonguard.lab.record --out tests/fixtures/traces

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
