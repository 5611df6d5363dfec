"""The registry of known chains: unique ids, lookups, and defaults that validate."""

import dataclasses
from typing import Any

import pytest

from chains.registry import FINALITY_MODES, KNOWN_CHAINS, KnownChain, known_chain
from guard.types import ChainId
from watcher.config import ChainConfig

EXPECTED_IDS = {
    "local": 31337,
    "ethereum": 1,
    "sepolia": 11155111,
    "base": 8453,
    "optimism": 10,
    "arbitrum": 42161,
    "polygon": 137,
}


def test_the_required_chains_are_known_with_their_ids() -> None:
    ids = {name: c.chain_id for name, c in KNOWN_CHAINS.items()}
    assert ids.items() >= EXPECTED_IDS.items()


def test_chain_ids_and_names_are_unique_and_keys_match_names() -> None:
    ids = [c.chain_id for c in KNOWN_CHAINS.values()]
    assert len(ids) == len(set(ids))
    assert all(name == c.name for name, c in KNOWN_CHAINS.items())


@pytest.mark.parametrize("name", sorted(EXPECTED_IDS))
def test_known_chain_finds_each_chain_by_id(name: str) -> None:
    assert known_chain(EXPECTED_IDS[name]) is KNOWN_CHAINS[name]


def test_unknown_chain_id_is_none() -> None:
    assert known_chain(999_999_999) is None
    assert known_chain(0) is None


def test_local_and_ethereum_defaults() -> None:
    local = KNOWN_CHAINS["local"]
    assert (local.default_confirmations, local.default_finality) == (3, "depth")
    assert local.supports_finalized and local.supports_safe
    assert local.block_time_s == 1.0
    eth = KNOWN_CHAINS["ethereum"]
    assert (eth.default_confirmations, eth.default_finality) == (64, "depth_or_finalized")
    assert eth.block_time_s == 12.0
    assert KNOWN_CHAINS["base"].block_time_s == 2.0
    assert KNOWN_CHAINS["optimism"].block_time_s == 2.0
    assert KNOWN_CHAINS["arbitrum"].block_time_s == 0.25
    assert KNOWN_CHAINS["polygon"].block_time_s == 2.0


@pytest.mark.parametrize("chain", list(KNOWN_CHAINS.values()), ids=lambda c: c.name)
def test_every_default_is_valid(chain: KnownChain) -> None:
    assert chain.default_confirmations >= 1
    assert chain.default_finality in FINALITY_MODES
    if chain.default_finality != "depth":
        assert chain.supports_finalized
    assert chain.block_time_s > 0
    # A config that names only the chain gets these defaults, and they pass validation.
    config = ChainConfig.model_validate(
        {"name": chain.name, "chain_id": chain.chain_id, "rpc": ["http://127.0.0.1:8545"]}
    )
    assert config.resolved_confirmations == chain.default_confirmations
    assert config.resolved_finality == chain.default_finality
    assert config.resolved_poll_interval_s == chain.block_time_s
    assert config.resolved_header_window > chain.default_confirmations


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        KNOWN_CHAINS["x"] = KNOWN_CHAINS["local"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        KNOWN_CHAINS["local"].default_confirmations = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    "change",
    [
        {"default_confirmations": 0},
        {"default_finality": "final"},
        {"default_finality": "finalized", "supports_finalized": False},
        {"block_time_s": 0.0},
        {"chain_id": ChainId(0)},
        {"name": "Local"},
    ],
)
def test_an_impossible_entry_is_refused(change: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        dataclasses.replace(KNOWN_CHAINS["local"], **change)
