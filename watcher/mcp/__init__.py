"""``finality mcp``: the daemon's settlements as MCP tools for an agent (docs/mcp.md).

The server holds no state of its own: every tool asks a running daemon over its HTTP API
(:mod:`watcher.mcp.mcp_backend`), except ``verify_receipt``, which is offline (guard/).
"""
