#!/usr/bin/env bash
# Installs everything the project needs into the work tree: a virtualenv with the pinned
# Python packages (requirements.lock) and the anvil binary from npm. Idempotent and quick
# when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
ANVIL_PKG="@foundry-rs/anvil-linux-amd64@1.7.1"
ANVIL_BIN=".tools/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
stamp=".venv/.installed-$(sha256sum requirements.lock pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    .venv/bin/pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[dev]'
    rm -f .venv/.installed-*
    touch "$stamp"
fi
if [ ! -x "$ANVIL_BIN" ]; then
    mkdir -p .tools
    npm install --silent --no-audit --no-fund --prefix .tools "$ANVIL_PKG" >/dev/null
fi
"$ANVIL_BIN" --version | head -1 >&2
