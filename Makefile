# `make demo` installs and runs the main job; `make test` installs and runs every check CI runs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-timing test-fast check check-timing fuzz install install-test browser prometheus faketime clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install --quiet -e .

install-test: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test,ray]'

# The HTML report test renders the page in Debian's chromium; install it when it is missing (needs root).
browser:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The exporter and Pushgateway tests run Debian's real Prometheus and Pushgateway on loopback.
prometheus:
	@command -v prometheus >/dev/null 2>&1 && command -v prometheus-pushgateway >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus prometheus-pushgateway >/dev/null; }

# A shard by hand with its clock 300 ms off is run under Debian's libfaketime.
faketime:
	@command -v faketime >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime >/dev/null; }

demo: install
	$(BIN)/harness run

# ruff and mypy, then every test that judges no time: the unit tests, real HTTP on loopback, real processes, a
# real Prometheus — three at once (they wait on sockets and children more than they compute); mypy beside them.
check:
	$(BIN)/ruff check harness tests bench
	$(BIN)/mypy harness bench & types=$$!; \
	$(BIN)/pytest -q -n 3 --durations=10 -m "not timing" tests/unit tests/integration tests/e2e; tests=$$?; \
	wait $$types && exit $$tests

# The tests whose verdict is a time measured on this machine (docs/testing.md lists what each proves): the long
# ones whose bounds hold beside another two at once, the rest alone, on a quiet machine. CI runs them after
# `make test`.
check-timing:
	$(BIN)/pytest -q -n 2 --dist loadfile --durations=5 -m "timing and pairs" tests/integration tests/e2e
	$(BIN)/pytest -q --durations=10 -m "timing and not pairs" tests/integration tests/e2e

test: install-test browser prometheus faketime check

test-timing: install-test browser prometheus faketime check-timing

# Unit tests only (no network, no subprocess): about 20 s.
test-fast: install-test
	$(BIN)/ruff check harness tests bench
	$(BIN)/pytest -q tests/unit

# Every reader of outside input fuzzed long and unseeded (`make test` runs them short and seeded): the run ends
# with how many inputs each reader took. HARNESS_FUZZ_EXAMPLES=… to change the budget (per reader).
fuzz: install-test
	HARNESS_FUZZ_EXAMPLES=$${HARNESS_FUZZ_EXAMPLES:-20000} $(BIN)/pytest -q -n 2 tests/unit/test_fuzz_readers.py tests/unit/test_doors.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
