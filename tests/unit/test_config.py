"""The TOML configuration: shipped examples parse, defaults come from the registry, and every
kind of mistake is a ConfigError that names the file and the key."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from watcher.config.chains import ChainConfig
from watcher.config.errors import ConfigError, UnknownChainName
from watcher.config.loading import load_config, parse_config
from watcher.config.model import Config
from watcher.config.sections import ApiConfig, StoreConfig

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"
CONFIG_FILES = sorted(CONFIG_DIR.glob("*.toml"))
PUBLIC_ENV = {
    "ethereum.toml": "ETH_RPC_URL",
    "base.toml": "BASE_RPC_URL",
    "arbitrum.toml": "ARBITRUM_RPC_URL",
    "optimism.toml": "OPTIMISM_RPC_URL",
}
ALL_ENV = (*PUBLIC_ENV.values(), "FW_TEST_HOST", "FW_TEST_KEY")

CHAIN = '[[chains]]\nname = "local"\nchain_id = 31337\nrpc = ["http://127.0.0.1:8545"]\n'


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test depends on (or leaks into) the variables of the machine it runs on."""
    for name in ALL_ENV:
        monkeypatch.delenv(name, raising=False)


def write(tmp_path: Path, text: str, name: str = "bad.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_error(tmp_path: Path, text: str) -> tuple[str, ConfigError]:
    """Load ``text`` from a file; return the file name and the (expected) ConfigError."""
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return str(path), info.value


# --- the shipped examples ------------------------------------------------------------------


def test_the_shipped_examples_exist() -> None:
    names = {p.name for p in CONFIG_FILES}
    assert {"local.toml", "postgres.example.toml", *PUBLIC_ENV} <= names


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: p.name)
def test_every_shipped_config_parses(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PUBLIC_ENV.values():
        monkeypatch.setenv(name, f"https://{name.lower()}.example.org/v1/key")
    config = load_config(path)
    assert config.chains
    for chain in config.chains:
        assert chain.resolved_confirmations >= 1
        assert chain.resolved_header_window > chain.resolved_confirmations


@pytest.mark.parametrize(("file", "variable"), sorted(PUBLIC_ENV.items()))
def test_public_config_reads_its_rpc_url_from_the_environment(
    file: str, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, "wss://node.example.org/ws")
    config = load_config(CONFIG_DIR / file)
    assert config.chains[0].rpc == ["wss://node.example.org/ws"]


@pytest.mark.parametrize(("file", "variable"), sorted(PUBLIC_ENV.items()))
def test_public_config_without_its_variable_names_it(file: str, variable: str) -> None:
    path = CONFIG_DIR / file
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message == f"{path}: chains[0].rpc[0]: environment variable {variable} is not set"


def test_local_config_is_what_the_design_says() -> None:
    config = load_config(CONFIG_DIR / "local.toml")
    assert config.store.url == "sqlite:///finality.db"
    assert (config.api.host, config.api.port) == ("127.0.0.1", 8710)
    local = config.chain("local")
    assert local.chain_id == 31337
    assert local.rpc == ["http://127.0.0.1:8545"]
    assert local.resolved_confirmations == 3
    assert local.resolved_finality == "depth"
    assert local.resolved_poll_interval_s == 1.0


def test_postgres_example_uses_postgres_store() -> None:
    config = load_config(CONFIG_DIR / "postgres.example.toml")
    assert config.store.url == "postgresql://postgres@127.0.0.1/finality"
    assert config.chains[0].chain_id == 31337


# --- defaults ------------------------------------------------------------------------------


def test_defaults_are_filled_from_the_registry() -> None:
    config = parse_config(
        '[[chains]]\nname = "eth"\nchain_id = 1\nrpc = ["https://a.example"]\n'
        '[[chains]]\nname = "arb"\nchain_id = 42161\nrpc = ["https://b.example"]\n'
    )
    eth, arb = config.chains
    assert eth.confirmations == eth.resolved_confirmations == 64
    assert eth.finality == eth.resolved_finality == "finalized"
    assert eth.poll_interval_s == eth.resolved_poll_interval_s == 12.0
    assert eth.header_window == eth.resolved_header_window == 128  # max(2 * 64, 64 + 64)
    assert arb.resolved_poll_interval_s == 0.25
    assert arb.resolved_header_window == 2 * arb.resolved_confirmations
    assert (eth.timeout_s, eth.max_wait_s, eth.late_watch_s) == (3600.0, 86400.0, 86400.0)
    assert eth.max_blocks_per_poll == 500
    assert config.store == StoreConfig()
    assert config.api == ApiConfig()
    assert (config.api.host, config.api.port) == ("127.0.0.1", 8710)


def test_explicit_values_win_over_the_registry() -> None:
    config = parse_config(
        '[[chains]]\nname = "eth"\nchain_id = 1\nrpc = ["https://a.example"]\n'
        'confirmations = 12\nfinality = "finalized"\npoll_interval_s = 3\nheader_window = 13\n'
    )
    eth = config.chains[0]
    assert eth.resolved_confirmations == 12
    assert eth.resolved_finality == "finalized"
    assert eth.resolved_poll_interval_s == 3.0
    assert eth.resolved_header_window == 13


def test_unknown_chain_with_confirmations_gets_generic_defaults() -> None:
    config = parse_config(
        '[[chains]]\nname = "mine"\nchain_id = 424242\nrpc = ["http://h:1"]\nconfirmations = 5\n'
    )
    chain = config.chains[0]
    assert chain.resolved_finality == "depth"
    assert chain.resolved_poll_interval_s == 1.0
    assert chain.resolved_header_window == 69  # max(10, 5 + 64)


def test_environment_expands_inside_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FW_TEST_HOST", "node.example.org")
    monkeypatch.setenv("FW_TEST_KEY", "s3cr3t")
    config = parse_config(
        '[[chains]]\nname = "eth"\nchain_id = 1\n'
        'rpc = ["https://${FW_TEST_HOST}/v2/${FW_TEST_KEY}", "wss://${FW_TEST_HOST}/ws"]\n'
    )
    assert config.chains[0].rpc == [
        "https://node.example.org/v2/s3cr3t",
        "wss://node.example.org/ws",
    ]


def test_an_error_shows_the_template_not_the_expanded_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FW_TEST_KEY", "ftp://s3cr3t.example.org")
    with pytest.raises(ConfigError) as info:
        parse_config(CHAIN.replace('"http://127.0.0.1:8545"', '"${FW_TEST_KEY}"'), "x.toml")
    assert "x.toml: chains[0].rpc[0]: " in str(info.value)
    assert "${FW_TEST_KEY}" in str(info.value)
    assert "s3cr3t" not in str(info.value)


def test_config_chain_lookup() -> None:
    config = parse_config(CHAIN)
    assert config.chain("local").chain_id == 31337
    with pytest.raises(UnknownChainName) as info:
        config.chain("ethereum")
    assert isinstance(info.value, LookupError)
    assert "'ethereum'" in str(info.value)
    assert "local" in str(info.value)


def test_validated_config_is_frozen() -> None:
    config = parse_config(CHAIN)
    with pytest.raises(ValidationError):
        config.chains[0].confirmations = 1  # type: ignore[misc]


def test_chain_config_built_in_python_is_validated_too() -> None:
    chain = ChainConfig(name="local", chain_id=31337, rpc=["http://127.0.0.1:8545"])
    assert chain.resolved_confirmations == 3
    with pytest.raises(ValidationError, match="confirmations"):
        ChainConfig(name="mine", chain_id=424242, rpc=["http://127.0.0.1:8545"])
    assert Config(chains=[chain]).chain("local") is chain


# --- mistakes ------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.toml"
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: cannot read config file")


def test_bad_toml_syntax_names_file_and_line(tmp_path: Path) -> None:
    name, error = load_error(tmp_path, '[store]\nurl = "sqlite:///x.db"\n[api\n')
    assert str(error).startswith(f"{name}: invalid TOML: ")
    assert "line 3" in str(error)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'[store]\nurl = "sqlite:///caf\xe9.db"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            CHAIN + "confirmation = 3\n",
            "chains[0].confirmation: unknown key (did you mean 'confirmations'?)",
            id="typo-in-chain",
        ),
        pytest.param(
            '[stor]\nurl = "sqlite:///x.db"\n' + CHAIN,
            "stor: unknown key (did you mean 'store'?)",
            id="typo-in-table",
        ),
        pytest.param(
            CHAIN + "confirmations = 0\n",
            "chains[0].confirmations: must be >= 1 (got 0)",
            id="confirmations-0",
        ),
        pytest.param(
            CHAIN + 'confirmations = "3"\n',
            "chains[0].confirmations: must be an integer (got '3')",
            id="confirmations-string",
        ),
        pytest.param(
            CHAIN.replace("http://127.0.0.1:8545", "ftp://127.0.0.1:8545"),
            "chains[0].rpc[0]: must be a URL starting with http://, https://, ws:// or wss://"
            " (got 'ftp://127.0.0.1:8545')",
            id="rpc-scheme",
        ),
        pytest.param(
            CHAIN.replace('["http://127.0.0.1:8545"]', "[]"),
            "chains[0].rpc: must have at least 1 item(s) (got [])",
            id="rpc-empty",
        ),
        pytest.param(
            CHAIN + CHAIN.replace("31337", "1"),
            "chains[1].name: duplicate chain name 'local' (also chains[0].name)",
            id="duplicate-name",
        ),
        pytest.param(
            CHAIN + CHAIN.replace('"local"', '"other"'),
            "chains[1].chain_id: duplicate chain id 31337 (also chains[0].chain_id)",
            id="duplicate-chain-id",
        ),
        pytest.param(
            CHAIN.replace("31337", "424242"),
            "chains[0].confirmations: is required: chain id 424242 is not a known chain,"
            " so it has no default",
            id="unknown-chain-id",
        ),
        pytest.param(
            '[api]\nlisten = "127.0.0.1"\n' + CHAIN,
            'api.listen: must be "HOST:PORT", e.g. "127.0.0.1:8710" (got \'127.0.0.1\')',
            id="listen-no-port",
        ),
        pytest.param(
            '[api]\nlisten = "127.0.0.1:0"\n' + CHAIN,
            "api.listen: port must be an integer in 1..65535 (got '127.0.0.1:0')",
            id="listen-port-0",
        ),
        pytest.param(
            '[store]\nurl = "mysql://user:pw@db/finality"\n' + CHAIN,
            "store.url: must start with sqlite://, postgresql:// or postgresql+psycopg://"
            " (got 'mysql://db/…')",
            id="store-url",
        ),
        pytest.param(
            CHAIN + 'finality = "final"\n',
            "chains[0].finality: must be one of 'depth', 'finalized', 'depth_or_finalized',"
            " 'safe' or 'depth_and_finalized' (got 'final')",
            id="finality",
        ),
        pytest.param(
            CHAIN + "header_window = 3\n",
            "chains[0].header_window: must be > confirmations (3) (got 3)",
            id="header-window",
        ),
        pytest.param(
            CHAIN + "timeout_s = 90000\n",
            "chains[0].timeout_s: must be <= max_wait_s (86400.0) (got 90000.0)",
            id="timeout-over-ceiling",
        ),
        pytest.param(
            CHAIN + "poll_interval_s = inf\n",
            "chains[0].poll_interval_s: must be a finite number (got inf)",
            id="poll-inf",
        ),
        pytest.param(
            CHAIN.replace('"local"', '"Local Chain"'),
            "chains[0].name: must contain only lower-case letters, digits, '_' and '-'"
            " (got 'Local Chain')",
            id="chain-name",
        ),
        pytest.param(
            '[chains]\nname = "local"\n',
            "chains: must be an array of tables: write [[chains]], not [chains]"
            " (got {'name': 'local'})",
            id="chains-not-array",
        ),
        pytest.param('[store]\nurl = "sqlite:///x.db"\n', "chains: is required", id="no-chains"),
        pytest.param(
            CHAIN.replace("http://127.0.0.1:8545", "${FW_TEST_HOST}"),
            "chains[0].rpc[0]: environment variable FW_TEST_HOST is not set",
            id="unset-variable",
        ),
    ],
)
def test_each_mistake_names_the_file_and_the_key(tmp_path: Path, text: str, expected: str) -> None:
    name, error = load_error(tmp_path, text)
    assert f"{name}: {expected}" in str(error).splitlines()
    assert error.source == name


def test_every_problem_gets_its_own_line(tmp_path: Path) -> None:
    name, error = load_error(
        tmp_path,
        '[api]\nlisten = "nope"\n' + CHAIN + "confirmations = 0\nmax_blocks_per_poll = 0\n",
    )
    lines = str(error).splitlines()
    assert len(lines) == len(error.problems) == 3
    assert all(line.startswith(f"{name}: ") for line in lines)
    keys = {p.split(":", 1)[0] for p in error.problems}
    assert keys == {"api.listen", "chains[0].confirmations", "chains[0].max_blocks_per_poll"}


def test_parse_config_names_its_source() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(CHAIN + "confirmations = 0\n")
    assert str(info.value) == "<string>: chains[0].confirmations: must be >= 1 (got 0)"


@pytest.mark.parametrize("listen", ["127.0.0.1:8710", "localhost:65535", "[::1]:8710"])
def test_good_listen_addresses(listen: str) -> None:
    api = ApiConfig(listen=listen)
    assert 1 <= api.port <= 65535
    assert "[" not in api.host


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///finality.db",
        "sqlite:////var/lib/finality.db",
        "postgresql://postgres@127.0.0.1/finality",
        "postgresql+psycopg://u:p@db:5432/finality",
    ],
)
def test_good_store_urls(url: str) -> None:
    assert StoreConfig(url=url).url == url


# --- new heads over WebSocket --------------------------------------------------------------


def test_heads_default_to_polling() -> None:
    chain = parse_config(CHAIN + "confirmations = 3\n").chains[0]
    assert chain.heads == "poll"
    assert chain.resolved_heads_url is None


def test_heads_ws_uses_the_first_ws_rpc_url_or_heads_url() -> None:
    text = CHAIN.replace(
        '["http://127.0.0.1:8545"]', '["http://127.0.0.1:8545", "ws://127.0.0.1:8546"]'
    )
    chain = parse_config(text + 'heads = "ws"\n').chains[0]
    assert chain.resolved_heads_url == "ws://127.0.0.1:8546"
    chain = parse_config(text + 'heads = "ws"\nheads_url = "wss://heads.example/k"\n').chains[0]
    assert chain.resolved_heads_url == "wss://heads.example/k"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        pytest.param(
            'heads = "ws"\n',
            'chains[0].heads: "ws" needs a WebSocket endpoint: set heads_url, or list a ws:// or '
            "wss:// URL in rpc",
            id="ws-without-url",
        ),
        pytest.param(
            'heads = "ws"\nheads_url = "http://127.0.0.1:8545"\n',
            "chains[0].heads_url: must be a URL starting with ws:// or wss://",
            id="heads-url-http",
        ),
        pytest.param(
            'heads = "push"\n',
            "chains[0].heads: must be one of 'poll' or 'ws' (got 'push')",
            id="heads-unknown",
        ),
    ],
)
def test_heads_mistakes_name_the_key(tmp_path: Path, extra: str, expected: str) -> None:
    name, error = load_error(tmp_path, CHAIN + extra)
    assert f"{name}: {expected}" in str(error).splitlines(), str(error)


# --- RPC budget and rate limits -----------------------------------------------------------

TWO_RPC = (
    '[[chains]]\nname = "local"\nchain_id = 31337\n'
    'rpc = ["http://127.0.0.1:8545", "http://127.0.0.1:8546"]\n'
)


@pytest.mark.parametrize(
    ("line", "key", "words"),
    [
        ("rpc_rate_limits = [2.0]", "rpc_rate_limits", "one limit per rpc endpoint (2) (got 1)"),
        ("rpc_rate_limits = [2.0, 0]", "rpc_rate_limits[1]", "must be > 0.0 (got 0)"),
        ("rpc_rate_limits = [2.0, -1.5]", "rpc_rate_limits[1]", "must be > 0.0 (got -1.5)"),
        ("calls_per_minute = 0", "calls_per_minute", "must be >= 1 (got 0)"),
        ('calls_per_minute = "lots"', "calls_per_minute", "integer"),
    ],
)
def test_budget_and_rate_limit_mistakes_name_the_key(
    tmp_path: Path, line: str, key: str, words: str
) -> None:
    name, error = load_error(tmp_path, TWO_RPC + line + "\n")
    text = str(error)
    assert name in text and key in text and words in text, text


def test_budget_and_rate_limits_load() -> None:
    config = parse_config(
        TWO_RPC + "calls_per_minute = 600\nrpc_rate_limits = [10, 2.5]\n", "<test>"
    )
    chain = config.chains[0]
    assert chain.calls_per_minute == 600
    assert chain.rpc_rate_limits == [10.0, 2.5]


# --- sharing chains between instances -----------------------------------------------------


def test_handoff_balance_defaults_on_and_can_be_switched_off() -> None:
    assert parse_config(CHAIN, "<test>").handoff.balance is True
    pinned = parse_config(CHAIN + "[handoff]\nbalance = false\n", "<test>")
    assert pinned.handoff.balance is False


def test_handoff_balance_mistake_names_the_key(tmp_path: Path) -> None:
    name, error = load_error(tmp_path, CHAIN + '[handoff]\nbalance = "sometimes"\n')
    text = str(error)
    assert name in text and "handoff.balance" in text, text


def test_handoff_renewal_at_most_a_third_of_the_lease() -> None:
    ok = parse_config(CHAIN + "[handoff]\nlease_s = 1.5\nrenew_s = 0.5\n", "<test>")
    assert (ok.handoff.lease_s, ok.handoff.renew_s) == (1.5, 0.5)
    default = parse_config(CHAIN, "<test>").handoff
    assert default.renew_s <= default.lease_s / 3


def test_handoff_renewal_too_rare_names_the_key_and_the_limit(tmp_path: Path) -> None:
    name, error = load_error(tmp_path, CHAIN + "[handoff]\nlease_s = 2.0\nrenew_s = 1.0\n")
    text = str(error)
    assert name in text and "handoff.renew_s" in text and "lease_s / 3" in text, text


# --- Ethereum consensus finality in the receipt ----------------------------------------------

ETH = '[[chains]]\nname = "eth"\nchain_id = 1\nrpc = ["https://a.example"]\n'
ROOT = "0x" + "ab" * 32


def test_beacon_api_with_a_checkpoint_is_read() -> None:
    config = parse_config(
        ETH + f'beacon_api = ["https://beacon.example/"]\nconsensus_checkpoint = "{ROOT}"\n'
    )
    eth = config.chains[0]
    assert eth.beacon_api == ["https://beacon.example"]
    assert (eth.consensus_checkpoint, eth.consensus_network) == (ROOT, "mainnet")


@pytest.mark.parametrize(
    ("extra", "key", "says"),
    [
        (
            'beacon_api = ["https://b.example"]\n',
            "consensus_checkpoint",
            "is required with beacon_api",
        ),
        (
            f'beacon_api = ["ftp://b.example"]\nconsensus_checkpoint = "{ROOT}"\n',
            "beacon_api",
            "http://",
        ),
        (
            'beacon_api = ["https://b.example"]\nconsensus_checkpoint = "0x12"\n',
            "consensus_checkpoint",
            "pattern",
        ),
        (
            f'beacon_api = ["https://b.example"]\nconsensus_checkpoint = "{ROOT}"\nconsensus_network = "kiln"\n',
            "consensus_network",
            "must be one of",
        ),
        (
            f'beacon_api = ["https://b.example"]\nconsensus_checkpoint = "{ROOT}"\nfinality = "depth"\n',
            "beacon_api",
            "'finalized' block",
        ),
    ],
)
def test_consensus_keys_are_checked(tmp_path: Path, extra: str, key: str, says: str) -> None:
    _, error = load_error(tmp_path, ETH + extra)
    assert key in str(error) and says in str(error), str(error)


def test_mainnet_consensus_proves_only_chain_id_1(tmp_path: Path) -> None:
    text = ETH.replace("chain_id = 1", "chain_id = 10") + (
        f'beacon_api = ["https://b.example"]\nconsensus_checkpoint = "{ROOT}"\nfinality = "finalized"\n'
    )
    _, error = load_error(tmp_path, text)
    assert "consensus_network" in str(error) and "finalizes chain id 1, not 10" in str(error)


def test_a_whsec_delivery_secret_must_be_base64_and_is_never_echoed(tmp_path: Path) -> None:
    name, error = load_error(tmp_path, CHAIN + '\n[delivery]\nsecret = "whsec_not*base64!"\n')
    assert str(error).splitlines() == [
        f"{name}: delivery.secret: a whsec_ secret must be base64 after the prefix"
        " (value not shown)"
    ]
    assert "not*base64" not in str(error)
    good = parse_config(CHAIN + '\n[delivery]\nsecret = "whsec_c2VjcmV0LWtleS1ieXRlcw=="\n')
    assert good.delivery.secret == "whsec_c2VjcmV0LWtleS1ieXRlcw=="
