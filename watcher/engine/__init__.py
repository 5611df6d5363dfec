"""The engine: following each chain and deciding its settlements.

``chain_watcher`` (the per-chain poll loop) drives the rest: ``matching`` finds watched txs
and same-nonce replacements in a block (a pure function), ``reorgs`` undoes what a reorg
removed and returns what it decided, ``probes``/``lookups`` ask the node about txs by hash,
``deadlines`` applies time-only changes, ``settle`` decides one settlement, ``observe`` turns
stored facts into the guard's observation, ``decisions`` stores a decision with its events,
``health`` raises and clears node alerts, ``endpoint_alerts``/``disagreement`` record
per-endpoint and quorum events, ``heads`` wakes polls on websocket heads, ``live`` answers an
unregistered tx hash. Import the submodules by their full path (this file imports nothing).
"""
