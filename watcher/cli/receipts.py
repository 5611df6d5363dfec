"""``finality verify RECEIPT.json``: check a signed receipt offline, as anyone can.

Exit codes: 0 valid; 1 invalid, with the precise reason on one line (``finality: invalid:
header 812: parentHash does not match block 811``), whatever the file holds (a duplicate
key, a float, a nest too deep are reasons too); 3 ``--rpc`` names a node of another chain
(nothing was checked there: not a verdict on the receipt); 64 an unreadable file (not
UTF-8, not JSON) or bad arguments (a ``--signer`` that is no address, or a mixed-case one
with a wrong EIP-55 checksum); 69 ``--rpc`` given but the node could not be asked.

Options: ``--signer 0x…`` (repeatable) accepts only those signers; ``--rpc URL`` also asks a
node whether the receipt's highest block (the confirming head, or the head at the deadline)
is still canonical there, and whether it serves the receipt's chain; ``--checkpoint 0x…`` (a
beacon block root the reader trusts) checks the receipt's ``consensus`` section, its
finality proven by Ethereum's sync committees with no trust in the signer's key; ``--dependent-state
FILE`` checks that the receipt binds exactly that state (its canonical JSON digest).

Everything but ``--rpc`` is :func:`guard.verify.verify_receipt`: no network, no daemon.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watcher.cli.common import EX_FAILED, EX_OK, EX_UNAVAILABLE, EX_USAGE, CliError, Commands, Query

EX_OTHER_CHAIN = 3
"""``--rpc`` names a node of another chain: its answer says nothing about the receipt."""

if TYPE_CHECKING:
    from guard.verify import VerifiedReceipt


def add_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: Commands,
    query: Query,
) -> None:
    """Register ``verify``."""
    verify = sub.add_parser(
        "verify",
        help="check a signed receipt offline: exit 0 valid, 1 invalid, 64 unreadable, "
        "3 --rpc node of another chain",
    )
    verify.add_argument("receipt", metavar="RECEIPT.json", help="the receipt ('-' for stdin)")
    verify.add_argument(
        "--signer",
        action="append",
        metavar="0xADDRESS",
        help="accept only this signer (repeat for several; see GET /v1/signers)",
    )
    verify.add_argument("--rpc", metavar="URL", help="also check the head is canonical there")
    verify.add_argument(
        "--dependent-state", metavar="FILE", help="check the receipt binds this JSON state"
    )
    verify.add_argument(
        "--checkpoint",
        metavar="0xROOT",
        help="a beacon block root you trust: check the receipt's finality by Ethereum consensus",
    )
    verify.add_argument(
        "--workflow", metavar="ID", help="check the receipt is one of this workflow's four"
    )
    verify.add_argument("--json", action="store_true", help="machine-readable output")
    commands["verify"] = cmd_verify


def _read_text(name: str, what: str) -> str:
    try:
        return sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise CliError(f"verify: cannot read {what} {name}: {reason}", EX_USAGE) from None


def _read_receipt(name: str) -> Mapping[str, Any]:
    """The receipt document in file ``name``: exit 64 when it cannot be read or is not JSON,
    ``invalid:`` (exit 1) when it is JSON but no receipt can be made of it."""
    from guard.errors import ReceiptInvalid, ReceiptUnreadable
    from guard.receipt_json import parse_receipt

    try:
        return parse_receipt(_read_text(name, "receipt"), f"receipt {name}")
    except ReceiptUnreadable as exc:
        raise CliError(f"verify: {exc.reason}", EX_USAGE) from None
    except ReceiptInvalid as exc:
        raise CliError(f"invalid: {exc.reason}", EX_FAILED) from None


def _state_digest(name: str) -> str:
    """The canonical digest of the dependent state in file ``name`` (exit 64 if none)."""
    from guard.canonical import CanonicalError, digest

    text = _read_text(name, "dependent state")
    try:
        return digest(json.loads(text))
    except RecursionError:
        raise CliError(f"verify: dependent state {name} is nested too deep", EX_USAGE) from None
    except CanonicalError as exc:
        raise CliError(f"verify: dependent state has no canonical form: {exc}") from None
    except ValueError as exc:
        raise CliError(f"verify: dependent state {name} is not JSON: {exc}", EX_USAGE) from None


def _signers(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    from guard.errors import InvalidAddress
    from guard.hexes import parse_checked_address

    try:
        return [str(parse_checked_address(v, "--signer")) for v in values]
    except InvalidAddress as exc:
        raise CliError(str(exc), EX_USAGE) from None


def cmd_verify(args: argparse.Namespace) -> int:
    from guard.errors import ReceiptInvalid
    from guard.verify import verify_receipt
    from guard.workflow_receipts import verify_workflow_receipt

    trusted = _signers(args.signer)
    receipt = _read_receipt(args.receipt)
    state_digest = _state_digest(args.dependent_state) if args.dependent_state else None
    try:
        if args.workflow:
            verified = verify_workflow_receipt(receipt, args.workflow, trusted)
        else:
            verified = verify_receipt(receipt, trusted_signers=trusted)
    except ReceiptInvalid as exc:
        raise CliError(f"invalid: {exc.reason}", EX_FAILED) from None
    lines = [f"valid: {verified.summary()}"]
    trust = (
        "one of the trusted --signer addresses"
        if trusted
        else "not checked against a trusted list: pass --signer, see GET /v1/signers"
    )
    lines.append(f"signer: {verified.signer} ({trust})")
    lines += _payment_lines(receipt)
    if state_digest is not None:
        bound = verified.facts.dependent_state_digest
        if bound != state_digest:
            raise CliError(
                f"invalid: dependent state: the file's digest {state_digest} is not the "
                f"receipt's {bound}",
                EX_FAILED,
            )
        lines.append(f"dependent state: matches {bound}")
    claims = list(verified.claims)
    if args.checkpoint is not None:
        lines += _check_consensus(receipt, args.checkpoint)
        claims = [claim for claim in claims if not claim.startswith("consensus:")]
    if args.rpc:
        lines.append(_check_canonical(args.rpc, verified.chain_id, verified.anchor))
    lines += [f"claim: {claim}" for claim in claims]
    if args.json:
        print(json.dumps(_verified_json(verified, lines[1:], receipt), indent=2, sort_keys=True))
    else:
        print("\n".join(lines))
    return EX_OK


def _verified_json(
    verified: VerifiedReceipt, checks: list[str], receipt: Mapping[str, Any]
) -> dict[str, Any]:
    """``finality verify --json``: what the receipt says, the checks passed, and for a
    payment its checked ``payment`` section."""
    return {
        "valid": True,
        **verified.identity(),
        "summary": verified.facts.summary,
        "claims": list(verified.claims),
        "checks": checks,
        **({"payment": receipt["payment"]} if "payment" in receipt else {}),
    }


def _payment_lines(receipt: Mapping[str, Any]) -> list[str]:
    """What a verified payment receipt shows (its ``payment`` section checked): the terms,
    then one line per transfer, proven (its proof carried) or stated (a timeout's claim)."""
    pay = receipt.get("payment")
    if not isinstance(pay, Mapping):
        return []
    carried = isinstance(receipt.get("proof"), Mapping) and "transfers" in receipt["proof"]
    proven = "proven" if carried else "stated"
    asset = "wei" if pay["asset"] == "native" else f"of token {pay['asset']}"
    sender = f" from {pay['from']}" if pay.get("from") else ""
    lines = [
        f"payment: {pay['amount']} {asset} to {pay['to']}{sender}: paid {pay['paid']}, "
        f"remaining {pay['remaining']}"
    ]
    for t in pay["transfers"]:
        log = "" if t["log_index"] is None else f", log {t['log_index']}"
        lines.append(
            f"transfer ({proven}): {t['value']} from {t['from']} in tx {t['tx_hash']} "
            f"(block {t['block_number']}{log})"
        )
    return lines


def _check_consensus(receipt: Mapping[str, Any], checkpoint: str) -> list[str]:
    """The receipt's finality checked by Ethereum consensus from ``checkpoint``: one line (and
    one naming the network when it is not mainnet), or CliError (64 for a checkpoint that is
    not a root, 1 for a receipt it does not prove)."""
    from guard.errors import InvalidHash, ReceiptInvalid
    from guard.hexes import parse_block_hash
    from guard.receipts import body_of
    from guard.verify_consensus import verify_consensus

    try:
        root = str(parse_block_hash(checkpoint, "--checkpoint"))
    except InvalidHash as exc:
        raise CliError(str(exc), EX_USAGE) from None
    try:
        proven = verify_consensus(body_of(receipt), root)
    except ReceiptInvalid as exc:
        raise CliError(f"invalid: {exc.reason}", EX_FAILED) from None
    if proven.network == "mainnet":
        return [proven.summary()]
    return [proven.summary(), f"consensus network: {proven.network} (not Ethereum mainnet)"]


def _check_canonical(url: str, chain_id: int, anchor: tuple[int, str] | None) -> str:
    """Ask the node at ``url`` whether ``anchor`` is canonical; one line, or CliError."""
    from chains.errors import ChainError
    from chains.rpc import connect

    try:
        client = connect(url, timeout_s=10.0)
        actual = client.chain_id()
        header = client.header(anchor[0]) if anchor is not None else None
    except (ChainError, ValueError) as exc:
        raise CliError(f"verify: cannot check with {url}: {exc}", EX_UNAVAILABLE) from None
    if actual != chain_id:
        raise CliError(
            f"verify: rpc: {url} serves chain id {actual}, the receipt is for chain id "
            f"{chain_id}: nothing was checked there (give a node of chain {chain_id})",
            EX_OTHER_CHAIN,
        )
    if anchor is None:
        return f"rpc: chain id {actual} matches; the receipt names no block to check"
    number, block_hash = anchor
    if header is None:
        raise CliError(
            f"invalid: rpc: the node has no block {number} (it is behind, or on another chain)",
            EX_FAILED,
        )
    if header.hash != block_hash:
        raise CliError(
            f"invalid: rpc: block {number} is {header.hash} on the node, not {block_hash}: "
            "the receipt's head was reorganised away",
            EX_FAILED,
        )
    return f"rpc: block {number} ({block_hash}) is canonical on {url}"
