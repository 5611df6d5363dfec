"""The operator console: a static page at ``/ui/`` that reads the API in the browser.

The page holds no data of its own: every datum comes from ``/v1`` with the operator's
bearer token, so the console sees exactly what that token may see.
"""
