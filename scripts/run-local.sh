#!/usr/bin/env bash
# Runs the daemon on its embedded default: a local anvil chain (a block every second) on
# 127.0.0.1:8545 and the SQLite store finality.db, API on 127.0.0.1:8710.
# Ctrl-C stops both. An anvil already listening on 8545 is reused, not restarted.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh run  # the daemon's packages and anvil, no test tools
ANVIL=.tools/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil
anvil_pid=""
if ! curl -s -o /dev/null -X POST -H 'content-type: application/json' \
        --data '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' http://127.0.0.1:8545; then
    mkdir -p .run
    "$ANVIL" --host 127.0.0.1 --port 8545 --block-time 1 --silent > .run/anvil.log 2>&1 &
    anvil_pid=$!
    trap '[ -n "$anvil_pid" ] && kill "$anvil_pid" 2>/dev/null' EXIT
    for _ in $(seq 50); do
        curl -s -o /dev/null -X POST -H 'content-type: application/json' \
            --data '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' \
            http://127.0.0.1:8545 && break
        sleep 0.1
    done
    echo "anvil: http://127.0.0.1:8545 (a block every second, log in .run/anvil.log)" >&2
fi
echo "finality: API at http://127.0.0.1:8710 (docs at /docs); stop with Ctrl-C" >&2
echo "finality: operator console at http://127.0.0.1:8710/ui/" >&2
.venv/bin/finality run --config config/local.toml
