"""Blockchains: JSON-RPC access, head tracking, reorg detection, the chain registry."""
