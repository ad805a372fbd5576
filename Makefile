# Two commands on a fresh machine: `make demo` (the product on the bundled sample traces, with
# the runtime only) and `make test` (the whole suite, with the test extras). Everything they
# need is installed by the targets below.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.runtime-installed
STAMP := $(VENV)/.installed
CHROMIUM := /usr/bin/chromium

.PHONY: install demo serve test test-fast lint bench chromium clean

# Every package comes from uv.lock (`uv lock` writes it from pyproject.toml; commit both): a
# fresh clone, a developer's venv and CI get the same versions. uv itself is pinned and brought
# by pip into the venv; there is no pip fallback, because it would install whatever versions
# the registry serves that day, which is what the lock exists to prevent (a machine that cannot
# install uv's wheel from the registry cannot install the stack's wheels either).
# --inexact: uv and pip stay in the venv beside the locked packages (exact would remove them).
# --compile-bytecode: uv, unlike pip, leaves the installed packages without .pyc files, and where
# PYTHONDONTWRITEBYTECODE=1 is set (as on these machines) every process then compiles pandas,
# Streamlit, Plotly and pyarrow from source at each import: 5.5 s against 1.6 s for importing the
# four, paid by every CLI command, server and dashboard the suite starts.
UV_VERSION := 0.13.9
UV_SYNC = UV_PYTHON_DOWNLOADS=never $(BIN)/uv sync --frozen --inexact --compile-bytecode -q
# The project's own modules are installed editable, so --compile-bytecode leaves them out: under
# PYTHONDONTWRITEBYTECODE=1 each process compiled 92 of them again (0.78 -> 0.65 s CPU to import
# the CLI). Compiled before every run that starts processes; a file compiled already is
# skipped (about half a second in all).
COMPILE = $(BIN)/python -m compileall -q -j 0 -x '/build/' budgetscope ingest store queries dashboard bench sdk tests > /dev/null

$(BIN)/uv:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q 'uv==$(UV_VERSION)' || { \
		echo "cannot install uv $(UV_VERSION) into $(VENV); every install goes through it and uv.lock" >&2; exit 1; }

# The runtime alone, what `make demo` and `make serve` need: the test extras (chdb, Playwright,
# the agent frameworks the SDK's adapters are tested against) made a fresh demo's venv 1.6 GB
# and most of its first start.
$(RUNTIME): pyproject.toml uv.lock Makefile | $(BIN)/uv
	$(UV_SYNC) --no-dev
	touch $(RUNTIME)

# Everything the suite needs on top: the test extras, and the budget SDK (sdk/, its own
# distribution, the `dev` group of pyproject.toml) installed editable beside it, so the suite
# tests it.
$(STAMP): $(RUNTIME) sdk/pyproject.toml
	$(UV_SYNC) --extra test
	touch $(STAMP)

install: $(STAMP)

# The dashboard's port: `make demo PORT=8502` when 8501 is taken.
PORT ?= 8501

demo: $(RUNTIME)
	$(COMPILE)
	$(BIN)/budgetscope demo --port $(PORT)

serve: $(RUNTIME)
	$(COMPILE)
	$(BIN)/budgetscope serve

# Browser tests drive Debian's Chromium (never a downloaded browser build).
chromium:
	@test -x $(CHROMIUM) || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "installing Debian's chromium for the browser tests (log: /tmp/budgetscope-apt.log)"; \
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
				>/tmp/budgetscope-apt.log 2>&1 || { tail -20 /tmp/budgetscope-apt.log >&2; exit 1; }; \
		else echo "browser tests need Debian's chromium: sudo apt-get install chromium" >&2; exit 1; fi; }

# The whole suite, what CI runs (.ci/run). Tests marked `root` skip, with the reason, for anyone
# else; tests marked `network` skip when the package registry does not answer. Two pytest runs
# side by side: the browser lane (it mostly waits on Chromium and the dashboard's subprocess),
# and the rest on two workers (pytest-xdist), each given whole files as it frees up, slowest
# files first (tests/conftest.py): fixed shares of files left one worker idle for minutes,
# since a file takes from 0.1 s to 7 minutes. The lane's output follows the rest's (and stays
# in test-artifacts/).
test: $(STAMP) chromium
	$(BIN)/ruff check .
	$(COMPILE)
	mkdir -p test-artifacts
	$(BIN)/python -m pytest -q -m browser > test-artifacts/browser-lane.log 2>&1 & browser=$$!; \
	$(BIN)/python -m pytest -q -m "not browser" -n 2 --dist loadfile --no-loadscope-reorder; \
	rest=$$?; wait $$browser; lane=$$?; \
	echo "---- browser lane (pytest -m browser) ----"; cat test-artifacts/browser-lane.log; \
	test $$rest = 0 && test $$lane = 0

# The inner loop: everything but the four lanes tests/conftest.py describes (browser, slow, root,
# network), in under 3 minutes on 2 cores; no Chromium needed. `make test` before a merge.
FAST_LANE := not browser and not slow and not root and not network
test-fast: $(STAMP)
	$(BIN)/ruff check .
	$(COMPILE)
	$(BIN)/python -m pytest -q -m "$(FAST_LANE)" -n 2 --dist loadfile --no-loadscope-reorder

lint: $(STAMP)
	$(BIN)/ruff check .

# Long (tens of minutes on 2 cores): every benchmark at its default sizes.
bench: $(STAMP)
	$(BIN)/python -m bench.bench_ingest
	$(BIN)/python -m bench.bench_receivers
	$(BIN)/python -m bench.bench_queries
	$(BIN)/python -m bench.bench_dashboard --runs 35000

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache test-artifacts
