"""The slim install at the oldest versions it declares: a caller pinned to old httpx and
pydantic installs the package, and its client registers, waits, fetches and verifies a real
receipt from the real daemon.

A fresh venv takes the package (built from a copy of the sources, so no ``build/`` is left in
the tree) with ``constraints-min.txt``: pip resolving it at all proves the declared ranges admit
those versions. The venv is built once and reused while constraints-min.txt and pyproject.toml
are unchanged (a stamp, as scripts/bootstrap.sh does); the checks run the work tree's current
code in it (``PYTHONPATH``), so a change to the code never needs a rebuild.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / "constraints-min.txt"
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "guard", "chains", "watcher")
INSTALL_TIMEOUT_S = 600.0


def minimum_versions() -> dict[str, str]:
    """``name → version`` of every ``name==version`` line of constraints-min.txt."""
    lines = CONSTRAINTS.read_text(encoding="utf-8").splitlines()
    pins = (line.split("#")[0].strip() for line in lines)
    return dict(pin.split("==") for pin in pins if pin)


def min_venv(tmp: Path) -> Path:
    """The venv with the package installed at the minimum versions (built once per stamp)."""
    digest = hashlib.sha256(CONSTRAINTS.read_bytes() + (ROOT / "pyproject.toml").read_bytes())
    venv = ROOT / ".venv" / f"min-versions-{digest.hexdigest()[:16]}"
    stamp = venv / ".installed"
    if stamp.exists():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    for stale in (ROOT / ".venv").glob("min-versions-*"):
        shutil.rmtree(stale, ignore_errors=True)
    source = tmp / "source"
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            source.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, source / name)
    # No pip of its own (ensurepip cost 4 s of CPU, 20 s at load): the work tree's pip
    # installs into it (``--python``), and its ``pip list`` holds only what the package brought.
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    pip = [*pip_for(venv), "install", "--quiet", "--prefer-binary"]
    install = subprocess.run(
        [*pip, "-c", str(CONSTRAINTS), str(source)],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    assert install.returncode == 0, f"the minimum versions do not install:\n{install.stderr}"
    stamp.touch()
    return venv


def pip_for(venv: Path) -> list[str]:
    """The work tree's pip, acting on ``venv``'s interpreter and site-packages."""
    python = str(venv / "bin" / "python")
    return [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", python]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield min_venv(tmp_path_factory.mktemp("min-versions"))


def run_in(venv: Path, *args: str, timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
    """``args`` in ``venv`` with the work tree's code first on the path."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, env=env, cwd=venv.parent
    )


@pytest.mark.timeout(INSTALL_TIMEOUT_S + 300)
def canonical(name: str) -> str:
    """A distribution name in PEP 503 form: pip lists some as their metadata spells them
    (``py_arkworks_bls12381``), constraints as PyPI does (``py-arkworks-bls12381``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def test_oldest_allowed_versions_install_and_verify_a_real_receipt(
    venv: Path, module_anvil: Anvil, module_daemon: Daemon
) -> None:
    installed = run_in(venv, *pip_for(venv), "list", "--format=json")
    versions = {canonical(p["name"]): p["version"] for p in json.loads(installed.stdout)}
    for name, minimum in minimum_versions().items():
        assert versions.get(canonical(name)) == minimum, f"{name}: {versions.get(canonical(name))}"
    daemon_only = {"fastapi", "sqlalchemy", "web3", "uvicorn", "alembic"} & set(versions)
    assert not daemon_only, f"the base install brought daemon packages: {daemon_only}"

    tx = module_anvil.send()
    module_anvil.receipt(tx)
    module_anvil.mine(3)
    check = ROOT / "tests" / "support" / "min_client_check.py"
    vectors = ROOT / "tests" / "vectors" / "receipts"
    done = run_in(
        venv, str(venv / "bin" / "python"), str(check), module_daemon.url, CHAIN, tx, str(vectors)
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["versions"] == {
        name: minimum_versions()[name] for name in ("httpx", "pydantic", "coincurve")
    }
    assert result["verdict"] == "FINALITY_CONFIRMED"
    assert result["async_verdict"] == "FINALITY_CONFIRMED"
    assert result["receipt_valid"]
    assert result["vectors"].pop("altered") is False
    assert len(result["vectors"]) >= 10 and all(result["vectors"].values()), result["vectors"]


def test_run_from_the_slim_install_names_the_daemon_extra(venv: Path) -> None:
    done = run_in(venv, str(venv / "bin" / "finality"), "run", "--config", "nowhere.toml")
    assert done.returncode == 78, done.stderr
    assert "pip install 'finality-watcher[daemon]'" in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
