"""The operator console's files: ``static/`` holds its HTML, JavaScript and CSS.

No code here: :mod:`watcher.api.console` serves the files at ``/ui/``, and the page holds no
data of its own (every datum comes from ``/v1`` with the operator's bearer token).
"""
