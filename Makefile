# The two commands of the README. Everything else is in scripts/.
.PHONY: run test test-fast lint bench

run:  ## local anvil + the daemon on SQLite, API on 127.0.0.1:8710
	./scripts/run-local.sh

# The suite runs on TEST_WORKERS pytest-xdist workers, each taking whole files (module-scoped
# anvils and daemons stay shared within a file), handed out in collection order, the longest
# files first (tests/conftest.py), not xdist's most-tests-first. Most tests wait on real
# processes (anvil, daemons, PostgreSQL), so more workers than the 2 cores finish sooner
# (measured in docs/testing.md). `make test TEST_WORKERS=0` runs it in one process.
TEST_WORKERS ?= 4

test:  ## install everything, lint, type-check, run the whole test suite
	./scripts/bootstrap.sh
	.venv/bin/ruff check guard chains watcher tests bench
	.venv/bin/ruff format --check guard chains watcher tests bench
	.venv/bin/mypy
	.venv/bin/pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		--durations=15

# The fast tier a developer runs on every save: tests/unit's pure tests and the engine's
# block step over a store with no node (the `fast` marker, set by tests/conftest.py from
# the path); under 30 s on this machine (docs/testing.md). Lint and the rest: `make test`.
# Bytecode is cached even where the shell says not to (PYTHONDONTWRITEBYTECODE): compiling
# the project and its tests again costs more CPU than the tests themselves. One process, no
# xdist: two workers each import and collect the tier (about 4 s of CPU apiece), so on this
# shared machine `-n 2` took 43 s and 24-27 s of CPU where one process took 20-31 s and 14-16 s.
test-fast:  ## the fast tier: no process, no network, no database server
	env -u PYTHONDONTWRITEBYTECODE .venv/bin/pytest -q -p no:cacheprovider -m fast tests/unit \
		$(wildcard tests/integration/test_apply_block*.py tests/integration/test_fetch_block*.py)

bench:  ## the benchmarks (by hand; prints ratios against the naive approach)
	./scripts/bootstrap.sh
	.venv/bin/python -m bench.core
