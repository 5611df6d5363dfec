"""Delivery: the outbox plan written with each verdict, the sender that works it off, body
formats, and one module per alert channel (webhook, slack, log) plus the events tail.

Import the submodules by their full path (``watcher.delivery.sender``...): this file
re-exports nothing, so importing one part never drags in the others.
"""
