"""The tests' port allocator (tests/support/ports.py): parallel test processes on one machine
never get the same port, and no port it hands out is one an outgoing connection can take."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.ports import free_port, port_range, release

ROOT = Path(__file__).resolve().parents[2]


def _ephemeral() -> tuple[int, int]:
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(low), int(high)


def test_ports_come_from_below_the_ephemeral_range() -> None:
    """A port from the kernel's ephemeral range can be taken by any outgoing connection
    between the choice and the server's bind; these never are."""
    low, _ = _ephemeral()
    ports = [free_port() for _ in range(20)]
    try:
        assert len(set(ports)) == len(ports)
        assert all(port < low for port in ports), ports
        assert port_range()[1] <= low
    finally:
        for port in ports:
            release(port)


def test_a_port_held_by_one_process_is_not_handed_to_another() -> None:
    """Two xdist workers asking for a port at once: the second never gets the first's,
    even while the first has not bound it yet (here: only one port to choose from)."""
    port = free_port()
    try:
        only = {**os.environ, "FINALITY_TEST_PORTS": f"{port}-{port + 1}"}
        other = subprocess.run(
            [sys.executable, "-c", "from tests.support.ports import free_port; free_port()"],
            cwd=ROOT,
            env=only,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert other.returncode != 0, "the other process was handed the same port"
        assert "no free loopback port" in other.stderr
    finally:
        release(port)
    freed = subprocess.run(
        [sys.executable, "-c", "from tests.support.ports import free_port; print(free_port())"],
        cwd=ROOT,
        env={**os.environ, "FINALITY_TEST_PORTS": f"{port}-{port + 1}"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert freed.stdout.strip() == str(port), freed.stderr  # released: anybody's again
