"""``python -m watcher.cli ARGS``: the ``finality`` command."""

import sys

from watcher.cli.main import main

sys.exit(main())
