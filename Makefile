# The two commands of the README. Everything else is in scripts/.
.PHONY: run test lint bench

run:  ## local anvil + the daemon on SQLite, API on 127.0.0.1:8710
	./scripts/run-local.sh

test:  ## install everything, lint, type-check, run the whole test suite
	./scripts/bootstrap.sh
	.venv/bin/ruff check guard chains watcher tests bench
	.venv/bin/ruff format --check guard chains watcher tests bench
	.venv/bin/mypy
	.venv/bin/pytest -q -p no:cacheprovider

bench:  ## the benchmarks (by hand; prints ratios against the naive approach)
	./scripts/bootstrap.sh
	.venv/bin/python -m bench.core
