"""ERC-20 ``Transfer`` logs to watched recipients: one ``eth_getLogs`` for a range of blocks.

The engine watches (token, recipient) pairs; asking per pair would cost a call per pair and
block. :func:`transfer_logs` asks once for the whole range and every pair: the token
contracts as the ``address`` list, topic0 ``Transfer``, topic2 the padded recipients (an OR
list). Above :data:`MAX_TOPIC_RECIPIENTS` recipients the topic2 filter is left off (nodes
cap filter sizes) and recipients are filtered here: still one call.

What comes back is checked and parsed (:class:`TransferLog`); a log marked ``removed``, one
that is not a 3-topic ERC-20 ``Transfer`` (ERC-721 has 4 topics) or has no 32-byte value is
left out. Which block hash a log must belong to is the engine's check.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from chains.errors import RpcMalformedResponse
from chains.rpc import RpcClient
from chains.rpc_parse import hex_int, hex_str

TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
"""keccak("Transfer(address,address,uint256)")."""

MAX_TOPIC_RECIPIENTS = 1000
"""Most recipients put in the topic filter; above, all transfers of the tokens are fetched
and filtered here (one call either way)."""

METHOD = "eth_getLogs"


@dataclass(frozen=True, slots=True)
class TransferLog:
    """One ERC-20 ``Transfer`` log."""

    token: str
    """The contract that emitted it (lower-case 0x)."""
    sender: str
    """``from``."""
    to: str
    """``to``."""
    value: int
    """Token base units."""
    block_number: int
    """Its block."""
    block_hash: str
    """That block's hash (the engine keeps only logs of blocks it processed)."""
    tx_hash: str
    """The tx that emitted it."""
    tx_index: int
    """That tx's position in the block."""
    log_index: int
    """The log's index in the block."""


def padded(address: str) -> str:
    """An address as a 32-byte topic."""
    return "0x" + "0" * 24 + address[2:].lower()


def transfer_logs(
    client: RpcClient,
    first: int,
    last: int,
    tokens: Collection[str],
    recipients: Collection[str],
) -> list[TransferLog]:
    """``Transfer`` logs of ``tokens`` to ``recipients`` in blocks ``first``..``last``, in
    one ``eth_getLogs`` call (none when there is nothing to ask for). ``recipients`` are
    lower-case 0x addresses (as the watch indexes hold them); a set is used as it is, not
    copied (100,000 watched addresses lowered and copied took 100 ms of every poll)."""
    if not tokens or not recipients or last < first:
        return []
    wanted = recipients if isinstance(recipients, AbstractSet) else set(recipients)
    topics: list[Any] = [TRANSFER_TOPIC, None]
    if len(wanted) <= MAX_TOPIC_RECIPIENTS:
        topics.append(sorted(padded(r) for r in wanted))
    query = {
        "fromBlock": hex(first),
        "toBlock": hex(last),
        "address": sorted(t.lower() for t in tokens),
        "topics": topics,
    }
    raw = client.call(METHOD, [query])
    if not isinstance(raw, list):
        raise RpcMalformedResponse(client.endpoint, METHOD, f"not a list: {raw!r:.200}")
    token_set = {t.lower() for t in tokens}
    out = []
    for item in raw:
        log = parse_transfer_log(item, client.endpoint)
        if log is not None and log.to in wanted and log.token in token_set:
            out.append(log)
    return out


def parse_transfer_log(raw: Any, endpoint: str) -> TransferLog | None:
    """A log object as a :class:`TransferLog`, or None when it is not a live ERC-20
    ``Transfer`` (removed, another event, another shape)."""
    if not isinstance(raw, Mapping):
        raise RpcMalformedResponse(endpoint, METHOD, f"log is not an object: {raw!r:.200}")
    topics = raw.get("topics")
    if raw.get("removed") is True or not isinstance(topics, list) or len(topics) != 3:
        return None
    if str(topics[0]).lower() != TRANSFER_TOPIC:
        return None
    data = raw.get("data")
    if not isinstance(data, str) or len(data) != 66 or not data.startswith("0x"):
        return None
    try:
        value = int(data, 16)
    except ValueError:
        return None
    ep = endpoint
    return TransferLog(
        token=hex_str(raw.get("address"), ep, METHOD, "address", 20),
        sender="0x" + hex_str(topics[1], ep, METHOD, "topic1", 32)[26:],
        to="0x" + hex_str(topics[2], ep, METHOD, "topic2", 32)[26:],
        value=value,
        block_number=hex_int(raw.get("blockNumber"), ep, METHOD, "blockNumber"),
        block_hash=hex_str(raw.get("blockHash"), ep, METHOD, "blockHash", 32),
        tx_hash=hex_str(raw.get("transactionHash"), ep, METHOD, "transactionHash", 32),
        tx_index=hex_int(raw.get("transactionIndex"), ep, METHOD, "transactionIndex"),
        log_index=hex_int(raw.get("logIndex"), ep, METHOD, "logIndex"),
    )
