"""The examples the documentation gives are the ones that work: the payment ``curl`` of
docs/api.md is pasted (its JSON body sent as written) to a real daemon, and docs/mcp.md's
tool table lists every tool the MCP server registers."""

from __future__ import annotations

import json
import re

from tests.support.anvil import ROOT
from tests.support.daemon import Daemon

DOCS = ROOT / "docs"


def curl_bodies(text: str) -> list[str]:
    """The ``-d '…'`` bodies of the page's ``curl`` commands, as a shell would pass them."""
    return re.findall(r"-d '([^']*)'", text)


def test_the_payment_curl_of_the_api_page_pastes_as_written(module_daemon: Daemon) -> None:
    [body] = [b for b in curl_bodies((DOCS / "api.md").read_text()) if "evm_payment" in b]
    payment = json.loads(body)  # a comment inside the JSON would make this fail
    answer = module_daemon.post("/v1/settlements", payment)
    assert answer.status_code == 201, answer.text
    assert answer.json()["kind"] == "evm_payment" and answer.json()["reference"] == "order-812"


def test_the_mcp_page_lists_every_tool() -> None:
    import anyio

    from watcher.mcp.mcp_tools import build_server

    async def names() -> set[str]:
        return {tool.name for tool in await build_server("http://127.0.0.1:9").list_tools()}

    table = re.findall(r"^\| `(\w+)` \|", (DOCS / "mcp.md").read_text(), flags=re.MULTILINE)
    assert set(table) == anyio.run(names)
