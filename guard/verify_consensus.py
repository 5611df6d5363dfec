"""A finality receipt's ``consensus`` section: its finality proven by Ethereum itself.

Without this section a finality receipt is as good as its signer's key: its header chain
shows that the tx's block B lies under a later block, but anyone can fabricate linked
headers. The section carries what an Ethereum light client checks (guard.consensus): a
bootstrap at a checkpoint, the sync committees' hand-overs up to the signing period, a
finality update whose finalized execution block F is at or above B, and the ``link`` from
the receipt's headers up to F (the headers in between, each the parent of the next). Once
checked from a checkpoint the *reader* trusts, B is an ancestor of a block finalized by 2/3
of a sync committee: no trust in our key is left.

::

    "consensus": {
      "network": "mainnet",                 # guard.consensus.NETWORKS
      "checkpoint": "0x…",                  # the root the bootstrap starts from (our word)
      "bootstrap": {"version", "data"},     # Beacon API answers, as served (JSON)
      "updates": [{"version", "data"}, …],  # may be empty (the checkpoint's own period)
      "finality_update": {"version", "data"},
      "link": {"kind": "headers", "headers": [header, …]}   # above the proof's headers, up to F
    }

:func:`check_section_shape` runs in every verification (the section's fields are present and
of their types); :func:`verify_consensus` is the full check, given a trusted checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from guard.consensus import NETWORKS, ConsensusProofError, ProvenFinality, verify_finality
from guard.errors import ReceiptInvalid
from guard.fields import array, child, hash32, keys, text
from guard.verify_chain import proof_headers, verify_headers

SECTION = "consensus"
FIELDS = ("network", "checkpoint", "bootstrap", "updates", "finality_update", "link")
LINK_KINDS = ("headers",)

UNCHECKED_CLAIM = (
    "consensus: the section is not checked without a checkpoint you trust "
    "(finality verify --checkpoint 0x…); it starts from {checkpoint}, the signer's word"
)
"""What a verification without a checkpoint says of a receipt's consensus section."""


@dataclass(frozen=True)
class ConsensusFinality:
    """A receipt's block shown finalized by Ethereum consensus."""

    proven: ProvenFinality
    """What the light-client data proved (finalized slot and execution block, signatures)."""
    block_number: int
    """The receipt's block (the tx's), an ancestor of the finalized execution block."""
    network: str
    """The beacon network whose committees signed (``mainnet``, ``sepolia``, ``minimal``)."""

    def summary(self) -> str:
        """The one line ``finality verify --checkpoint`` prints."""
        p = self.proven
        return (
            f"finalized by Ethereum consensus: {p.participation}/{p.committee_size} sync committee "
            f"signatures, finalized slot {p.finalized_slot}, execution block "
            f"{p.execution_block_number} ({p.execution_block_hash})"
        )


def check_section_shape(body: Mapping[str, Any]) -> str:
    """The section's stated checkpoint, once its fields are present and of their kinds."""
    section = child(body, SECTION, "")
    keys(section, FIELDS, SECTION)
    network = text(section, "network", SECTION)
    if network not in NETWORKS:
        raise ReceiptInvalid(f"consensus.network: {network!r} is not one of {sorted(NETWORKS)}")
    checkpoint = hash32(section, "checkpoint", SECTION)
    child(section, "bootstrap", SECTION)
    array(section, "updates", SECTION)
    child(section, "finality_update", SECTION)
    link = child(section, "link", SECTION)
    keys(link, ("kind", "headers"), "consensus.link")
    if text(link, "kind", "consensus.link") not in LINK_KINDS:
        raise ReceiptInvalid(f"consensus.link.kind: must be one of {list(LINK_KINDS)}")
    array(link, "headers", "consensus.link")
    return checkpoint


def verify_consensus(body: Mapping[str, Any], checkpoint: str) -> ConsensusFinality:
    """Check the receipt's consensus section from ``checkpoint`` (a beacon block root the
    caller trusts) and that the receipt's block is an ancestor of the finalized execution
    block; :class:`ReceiptInvalid` (``consensus: …``) naming the failed check. The rest of
    the receipt is checked by :func:`guard.verify.verify_receipt` first."""
    if SECTION not in body:
        raise ReceiptInvalid("consensus: the receipt has no consensus section")
    check_section_shape(body)
    section = body[SECTION]
    try:
        proven = verify_finality(
            network=section["network"],
            checkpoint=checkpoint,
            bootstrap=section["bootstrap"],
            updates=section["updates"],
            finality_update=section["finality_update"],
        )
    except ConsensusProofError as exc:
        raise ReceiptInvalid(f"consensus: {exc}") from exc
    expected = NETWORKS[section["network"]].execution_chain_id
    if expected is not None and body.get("chain_id") != expected:
        raise ReceiptInvalid(
            f"consensus: {section['network']} finalizes chain id {expected}, "
            f"the receipt is for chain id {body.get('chain_id')}"
        )
    chain = proof_headers(child(body, "proof", ""))
    linked = section["link"]["headers"]
    if linked:
        chain += verify_headers([chain[-1][2], *linked], "consensus.link.headers")[1:]
    block = chain[0][0]
    number, block_hash = proven.execution_block_number, proven.execution_block_hash
    if number < block:
        raise ReceiptInvalid(
            f"consensus: the finalized execution block {number} is below the tx's block {block}"
        )
    found = next((h for n, h, _ in chain if n == number), None)
    if found is None:
        raise ReceiptInvalid(
            f"consensus: the finalized execution block {number} is not among the receipt's "
            f"headers (blocks {block}..{chain[-1][0]}): no link from it to block {block}"
        )
    if found != block_hash:
        raise ReceiptInvalid(
            f"consensus: block {number} is {block_hash} by consensus, {found} in the receipt's "
            "headers: the receipt's chain is not the finalized one"
        )
    return ConsensusFinality(proven=proven, block_number=block, network=section["network"])
