"""The order `make test` hands test files to its workers (tests/conftest.py sorts by it)."""

import re

# The cost tests, a few seconds each, go before all: the ClickHouse parity test
# (tests/clickhouse/test_conventions_parity.py) reads what they recorded as they ran
# (tests/support/cost_recorder.py) instead of running them again.
COST_FILE = re.compile(r"test_cost_\w+\.py")

# The slowest files, each over a minute on 2 loaded cores (`pytest --junitxml`, times summed per
# file), run first. `make test` hands whole files to two workers as they free up (pytest-xdist,
# --dist loadfile); a slow file handed out last keeps one worker busy after the other is done.
# A name missing here costs only balance: every file runs either way.
SLOWEST_FIRST = (
    "test_clickhouse_backend.py", "test_conventions_parity.py", "test_read_only_file.py",
    "test_readme.py", "test_hostile_floods.py", "test_read_api_bounds.py",
    "test_terminal_outputs.py", "test_real_fixtures.py", "test_dashboard_pages.py",
    "test_faults_kill.py", "test_prices_serve.py", "test_fuzz_decoders.py",
    "test_confinement.py", "test_cli_server.py",
)
