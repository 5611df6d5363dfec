"""Pure core of Finality Watcher: verdicts, receipts, canonical encoding. No I/O."""
