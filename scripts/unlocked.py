"""Print the names of the installed packages (``pip freeze`` lines on stdin) that no lock
file pins at that exact version, one a line, for bootstrap.sh to uninstall.

Names are compared in their PEP 503 normal form: ``pip freeze`` spells a name as the
package's metadata does (``py_arkworks_bls12381``), the locks as PyPI lists it
(``py-arkworks-bls12381``); a plain text comparison would uninstall a locked package.
"""

from __future__ import annotations

import re
import sys


def normal(line: str) -> str:
    """``Name==1.0`` in PEP 503 form (lower case, runs of ``-_.`` as one ``-``)."""
    name, sep, rest = line.strip().partition("==")
    return re.sub(r"[-_.]+", "-", name).lower() + sep + rest


def main(lock_paths: list[str]) -> None:
    locked = set()
    for path in lock_paths:
        with open(path, encoding="utf-8") as lock:
            locked.update(normal(line) for line in lock if "==" in line)
    for line in sys.stdin:
        if line.strip() and normal(line) not in locked:
            print(re.split(r"[=@ ]", line.strip(), maxsplit=1)[0])


if __name__ == "__main__":
    main(sys.argv[1:])
