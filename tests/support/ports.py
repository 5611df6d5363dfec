"""Loopback ports for the test servers, safe when several test processes run at once.

Binding port 0, reading the number and closing the socket (the usual trick) leaves a window
in which the port is free for anybody: under pytest-xdist another worker's server, or any
outgoing connection (the kernel hands out the same ephemeral range for those), can take it
before our server binds it, and the test fails with "address in use" on a busy machine.

So a port is chosen *below* the kernel's ephemeral range (no outgoing connection ever gets
one there), and claimed with an exclusive ``flock`` on a file named after it in a directory
every test process shares. The claim is held until the process exits, so a daemon restarted
on its port keeps it, and no other worker, suite or benchmark on the machine is handed the
same number meanwhile. A port somebody else already listens on is skipped.
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import socket
import tempfile
from pathlib import Path

LOCK_DIR = Path(tempfile.gettempdir()) / "finality-test-ports"
"""One lock file per port claimed by a test process (shared by all of them)."""

_DEFAULT_RANGE = (20_000, 32_000)
_held: dict[int, int] = {}
"""Ports this process claimed → the open lock file descriptor that holds the claim."""
_rng = random.Random()  # seeded from the OS; never the tests' seeded global random


def port_range() -> tuple[int, int]:
    """Ports to choose from: ``[low, high)``, ending below the ephemeral range
    (``FINALITY_TEST_PORTS=LOW-HIGH`` sets it, e.g. where that range is taken)."""
    wanted = os.environ.get("FINALITY_TEST_PORTS")
    if wanted:
        low_text, _, high_text = wanted.partition("-")
        return int(low_text), int(high_text)
    low, high = _DEFAULT_RANGE
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return low, high
    high = min(high, ephemeral_low)
    return (min(low, high - 2_000), high)


def _bindable(port: int) -> bool:
    """Nobody listens on ``port`` right now (as a server would bind it: SO_REUSEADDR)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _claim(port: int) -> bool:
    """Take the machine-wide claim on ``port`` for this process, if nobody holds it."""
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCK_DIR / str(port), os.O_CREAT | os.O_RDWR, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    _held[port] = fd
    return True


def free_port() -> int:
    """A loopback TCP port claimed for this process: free now, and handed to no other test
    process until this one exits."""
    low, high = port_range()
    for _ in range(1_000):
        port = _rng.randrange(low, high)
        if port in _held or not _claim(port):
            continue
        if _bindable(port):
            return port
        release(port)
    raise RuntimeError(f"no free loopback port in [{low}, {high})")


def release(port: int) -> None:
    """Give up the claim on ``port`` early (normally claims last as long as the process)."""
    fd = _held.pop(port, None)
    if fd is not None:
        os.close(fd)
