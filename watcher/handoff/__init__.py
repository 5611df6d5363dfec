"""Handoff between instances sharing one store: the lease keeper, balancing as a pure plan,
takeovers and their signed receipts, and the manager the pollers ask.

Import the submodules by their full path (``watcher.handoff.manager``...): this file
re-exports nothing.
"""
