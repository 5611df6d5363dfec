"""The whole configuration of one daemon instance, and the rules across its tables
(unique chain names and ids; source names distinct from each other and from chains)."""

from __future__ import annotations

from pydantic import Field, model_validator

from watcher.config.base import KeyedErrors, Loc, Strict, duplicates
from watcher.config.chains import DEV_CHAIN_IDS, ChainConfig
from watcher.config.errors import UnknownChainName
from watcher.config.sections import (
    AlertChannelConfig,
    ApiConfig,
    DeliveryConfig,
    HandoffConfig,
    PaymentsConfig,
    SigningConfig,
    StoreConfig,
)
from watcher.config.sources import SourceConfig
from watcher.destinations import AllowList, DestinationRefused, Unresolvable, check_url


class Config(Strict):
    """The whole configuration of one daemon instance."""

    store: StoreConfig = Field(default_factory=StoreConfig)
    """The ``[store]`` table."""
    api: ApiConfig = Field(default_factory=ApiConfig)
    """The ``[api]`` table."""
    chains: list[ChainConfig] = Field(min_length=1)
    """The ``[[chains]]`` tables; names unique, chain ids unique."""
    signing: SigningConfig = Field(default_factory=SigningConfig)
    """The ``[signing]`` table."""
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    """The ``[delivery]`` table."""
    alerts: list[AlertChannelConfig] = Field(default_factory=list)
    """The ``[[alerts]]`` tables."""
    handoff: HandoffConfig = Field(default_factory=HandoffConfig)
    """The ``[handoff]`` table."""
    payments: PaymentsConfig = Field(default_factory=PaymentsConfig)
    """The ``[payments]`` table (invoices' extended public key)."""
    sources: list[SourceConfig] = Field(default_factory=list)
    """The ``[[sources]]`` tables (payment processors, job queues); names unique and distinct
    from chain names (a source's name is stored where a chain's name goes)."""

    @model_validator(mode="after")
    def _check_source_names(self) -> Config:
        problems: list[tuple[Loc, str]] = []
        chains = {chain.name for chain in self.chains}
        for i, source in enumerate(self.sources):
            if source.name in chains:
                problems.append(
                    (("sources", i, "name"), f"{source.name!r} is already a chain name")
                )
        clashing = {loc[1] for loc, _ in problems}
        names = [source.name for source in self.sources]
        problems += [
            problem
            for problem in duplicates("sources", "name", "source name", names)
            if problem[0][1] not in clashing
        ]
        problems.sort(key=lambda problem: problem[0][1])
        if problems:
            raise KeyedErrors(problems)
        return self

    @model_validator(mode="after")
    def _check_unique(self) -> Config:
        problems = duplicates("chains", "name", "chain name", [c.name for c in self.chains])
        problems += duplicates("chains", "chain_id", "chain id", [c.chain_id for c in self.chains])
        problems.sort(key=lambda problem: problem[0][1])  # stable: by table index, name first
        if problems:
            raise KeyedErrors(problems)
        return self

    @model_validator(mode="after")
    def _check_alert_urls(self) -> Config:
        # An alert URL is the operator's, but it is still a request sent from inside their
        # network: the same rule as a caller's commit_url (a host that does not resolve
        # yet is checked again at send).
        allow = self.destinations()
        problems: list[tuple[Loc, str]] = []
        for i, channel in enumerate(self.alerts):
            if channel.url is None:
                continue
            try:
                check_url(channel.url, allow)
            except Unresolvable:
                pass
            except DestinationRefused as exc:
                problems.append((("alerts", i, "url"), str(exc)))
        if problems:
            raise KeyedErrors(problems)
        return self

    @property
    def local_dev_only(self) -> bool:
        """Every chain is a local development chain (the dev signing key and loopback
        destinations are allowed only then)."""
        return all(chain.chain_id in DEV_CHAIN_IDS for chain in self.chains)

    def destinations(self) -> AllowList:
        """Where commits and alerts may go besides public addresses (watcher/destinations)."""
        return AllowList(self.delivery.allow_destinations, loopback=self.local_dev_only)

    def chain(self, name: str) -> ChainConfig:
        """The chain configured under ``name``; :class:`UnknownChainName` if there is none."""
        for chain in self.chains:
            if chain.name == name:
                return chain
        raise UnknownChainName(name, [c.name for c in self.chains])
