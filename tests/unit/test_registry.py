"""The registry of known chains: unique ids, lookups, and defaults that validate and that
mean final on each chain (no L2 default confirms before L1 finality)."""

import dataclasses
from typing import Any

import pytest

from chains.finality_modes import L1_FINAL_MODES, L2_RISK, NEEDS_FINALIZED, NEEDS_SAFE
from chains.registry import FINALITY_MODES, KNOWN_CHAINS, KnownChain, known_chain
from guard.finality_rule import finality_basis
from guard.types import ChainId
from watcher.config.chains import ChainConfig
from watcher.receipts.attestation import attests_only

EXPECTED_IDS = {
    "local": 31337,
    "ethereum": 1,
    "sepolia": 11155111,
    "base": 8453,
    "base-sepolia": 84532,
    "optimism": 10,
    "op-sepolia": 11155420,
    "arbitrum": 42161,
    "arbitrum-nova": 42170,
    "arbitrum-sepolia": 421614,
    "polygon": 137,
    "gnosis": 100,
    "bsc": 56,
    "linea": 59144,
    "scroll": 534352,
    "avalanche": 43114,
}

L2S = ["base", "base-sepolia", "optimism", "op-sepolia", "arbitrum", "arbitrum-nova"]
L2S += ["arbitrum-sepolia", "linea", "scroll"]


def _config(chain_id: int, **keys: Any) -> ChainConfig:
    values = {"name": "c", "chain_id": chain_id, "rpc": ["http://127.0.0.1:8545"], **keys}
    return ChainConfig.model_validate(values)


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
    # finalized, not depth_or_finalized: depth 64 would confirm during a loss of finality.
    assert (eth.default_confirmations, eth.default_finality) == (64, "finalized")
    assert eth.block_time_s == 12.0
    assert KNOWN_CHAINS["base"].block_time_s == 2.0
    assert KNOWN_CHAINS["optimism"].block_time_s == 2.0
    assert KNOWN_CHAINS["arbitrum"].block_time_s == 0.25
    assert KNOWN_CHAINS["polygon"].block_time_s == 2.0


@pytest.mark.parametrize("name", L2S)
def test_no_l2_default_confirms_before_l1_finality(name: str) -> None:
    chain = KNOWN_CHAINS[name]
    assert chain.is_l2
    assert chain.default_finality in L1_FINAL_MODES
    # The rule as the engine applies it: a block far deeper than N whose batch is not yet
    # L1-final (the finalized tag below it) is not final; once the tag covers it, it is.
    config = _config(chain.chain_id)
    block, deep = 1_000, 10 * chain.default_confirmations
    mode = config.resolved_finality
    assert finality_basis(mode, block, deep, chain.default_confirmations, block - 1) is None
    assert finality_basis(mode, block, deep, chain.default_confirmations, None) is None
    assert finality_basis(mode, block, deep, chain.default_confirmations, block) is not None
    assert config.finality_risk is None  # the default is never warned about


def test_mainnet_does_not_confirm_during_a_loss_of_finality() -> None:
    mode = _config(1).resolved_finality
    # 10,000 blocks deep, the finalized tag stuck 9,000 blocks below (no finality for a day).
    assert finality_basis(mode, 5_000, 10_000, 64, 4_000) is None


@pytest.mark.parametrize("chain", list(KNOWN_CHAINS.values()), ids=lambda c: c.name)
def test_every_default_is_valid(chain: KnownChain) -> None:
    assert chain.default_confirmations >= 1
    assert chain.default_finality in FINALITY_MODES
    if chain.default_finality in NEEDS_FINALIZED:
        assert chain.supports_finalized
    if chain.default_finality in NEEDS_SAFE:
        assert chain.supports_safe
    assert chain.block_time_s > 0 and chain.time_to_final_s > 0
    assert chain.finality_note
    # A config that names only the chain gets these defaults, and they pass validation.
    config = ChainConfig.model_validate(
        {"name": chain.name, "chain_id": chain.chain_id, "rpc": ["http://127.0.0.1:8545"]}
    )
    assert config.resolved_confirmations == chain.default_confirmations
    assert config.resolved_finality == chain.default_finality
    assert config.resolved_poll_interval_s == chain.block_time_s
    assert config.resolved_header_window > chain.default_confirmations


def test_a_chain_whose_headers_do_not_rehash_gets_attestations() -> None:
    avalanche = KNOWN_CHAINS["avalanche"]
    assert not avalanche.headers_rehash
    assert "extDataHash" in avalanche.headers_note
    assert attests_only(avalanche.chain_id) == avalanche.headers_note
    rehashing = [c for c in KNOWN_CHAINS.values() if c.headers_rehash]
    assert all(attests_only(c.chain_id) is None for c in rehashing)
    assert attests_only(999_999_999) is None  # unknown chains: Ethereum's header format


@pytest.mark.parametrize("mode", ["depth", "depth_or_finalized", "safe"])
def test_an_explicit_early_rule_on_an_l2_is_accepted_with_its_risk(mode: str) -> None:
    config = _config(8453, finality=mode)
    assert config.resolved_finality == mode
    risk = config.finality_risk
    assert risk is not None
    assert f"finality = {mode!r} on base" in risk and L2_RISK[mode] in risk


@pytest.mark.parametrize("mode", ["finalized", "depth_and_finalized"])
def test_an_l1_final_rule_on_an_l2_is_not_warned_about(mode: str) -> None:
    assert _config(42161, finality=mode).finality_risk is None


def test_explicit_depth_on_an_l1_or_an_unknown_chain_is_not_an_l2_risk() -> None:
    assert _config(1, finality="depth").finality_risk is None
    assert _config(777_777, confirmations=5, finality="depth").finality_risk is None


def test_safe_on_a_chain_without_the_safe_tag_is_refused() -> None:
    with pytest.raises(ValueError, match="needs the 'safe' tag, which linea does not support"):
        _config(59144, finality="safe")


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
        {"default_finality": "safe", "supports_safe": False},
        {"family": "rollup"},
        {"headers_rehash": False, "headers_note": ""},
        {"block_time_s": 0.0},
        {"chain_id": ChainId(0)},
        {"name": "Local"},
    ],
)
def test_an_impossible_entry_is_refused(change: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        dataclasses.replace(KNOWN_CHAINS["local"], **change)


@pytest.mark.parametrize("mode", ["depth", "depth_or_finalized", "safe"])
def test_an_l2_entry_defaulting_to_an_early_rule_is_refused(mode: str) -> None:
    with pytest.raises(ValueError, match="must default to a rule that waits for L1 finality"):
        dataclasses.replace(KNOWN_CHAINS["base"], default_finality=mode)
