"""Ethereum consensus finality, verified offline from a trusted checkpoint.

``verify_finality`` follows the beacon chain as a light client does: from a checkpoint (a
beacon block root the caller trusts), through each sync committee's hand-over to the next,
to a finality update whose finalized header carries an execution block. What it returns is
proven by the signatures of 2/3 of a sync committee, not by whoever served the data.

::

    from guard.consensus import verify_finality, ConsensusProofError
    proven = verify_finality(network="mainnet", checkpoint="0x…", bootstrap=…, updates=[…],
                             finality_update=…)
    proven.execution_block_number, proven.execution_block_hash, proven.finalized_slot
"""

from guard.consensus.errors import CHECKS, ConsensusProofError
from guard.consensus.light_client import ProvenFinality, verify_finality
from guard.consensus.networks import MAINNET, MINIMAL, NETWORKS, Fork, Network

__all__ = [
    "CHECKS",
    "MAINNET",
    "MINIMAL",
    "NETWORKS",
    "ConsensusProofError",
    "Fork",
    "Network",
    "ProvenFinality",
    "verify_finality",
]
