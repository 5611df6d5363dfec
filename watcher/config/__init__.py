"""The daemon's configuration: a TOML file, validated before anything starts.

A config file says where state is stored (``[store]``), where the HTTP API listens
(``[api]``) and which chains are watched (one ``[[chains]]`` table each)::

    [store]
    url = "sqlite:///finality.db"

    [api]
    listen = "127.0.0.1:8710"

    [[chains]]
    name = "ethereum"
    chain_id = 1
    rpc = ["${ETH_RPC_URL}"]      # confirmations, finality, poll_interval_s: from the registry

Rules, so a mistake is an error at start-up and never a silent default:

- Unknown keys are errors (``confirmation = 3`` is reported, with the likely intended key).
- Types are strict: ``confirmations = "3"`` or ``= true`` is an error; an integer is accepted
  where seconds are expected. ``inf`` and ``nan`` are refused everywhere.
- Environment: every ``${NAME}`` inside a string value is replaced by ``os.environ[NAME]``
  (the whole string or a part of it; there is no escape for a literal ``${``). An unset
  variable is an error naming the key and the variable. Error messages show the
  ``${NAME}`` template, not the secret it expanded to.
- Keys a chain may omit are filled from :mod:`chains.registry` by ``chain_id``:
  ``confirmations``, ``finality``, ``poll_interval_s``, then ``header_window``. After
  validation those four fields are never ``None``; read them through the typed properties
  ``resolved_confirmations``, ``resolved_finality``, ``resolved_poll_interval_s`` and
  ``resolved_header_window`` (mypy sees the fields as optional, the properties are not).
- A relative SQLite path is relative to the daemon's current working directory, not to the
  config file (``sqlite:///finality.db``); write ``sqlite:////abs/path.db`` for an absolute one.
- A ``[[sources]]`` table is validated by the settings model its kind's adapter declares
  (:mod:`watcher.config.source_kinds`): built-in kinds and plugins alike, so this package
  names no adapter.

Modules (import them by their full path; this ``__init__`` re-exports nothing):

- :mod:`.loading`: ``load_config``, ``parse_config`` (TOML, ``${NAME}`` substitution);
- :mod:`.errors`: ``ConfigError``, ``UnknownChainName`` and the one-line-per-problem rendering;
- :mod:`.model`: ``Config``, the whole file;
- :mod:`.api`: ``[api]`` (listen, ``[[api.tokens]]``, allowed hosts; open only on loopback);
- :mod:`.sections`: ``[store]``, ``[signing]``, ``[delivery]``, ``[[alerts]]``,
  ``[handoff]``; :mod:`.chains`: ``[[chains]]``; :mod:`.sources`: the keys every
  ``[[sources]]`` table shares; :mod:`.source_kinds`: which kinds exist, and their models;
- :mod:`.secrets`: ``configured_secrets``, the values no output may show;
- :mod:`.base`: the strict model base and the keyed-problem helpers they share.
"""
