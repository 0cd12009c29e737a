"""Typed settings for tests that drive one piece (a connection, a converter, a sink) without a
configuration file: the same `from_mapping` validation a file goes through, with the keys every
configuration needs filled in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connectors.settings.config import ConnectorConfig, from_mapping


def config(connector: str, props: Mapping[str, Any] | None = None, **extra: Any) -> ConnectorConfig:
    """A validated configuration of `connector` from plain connector properties (`extra` keys
    may be written with `__` for `.`)."""
    flat: dict[str, Any] = {
        "topic.prefix": "t",
        "database.hostname": "localhost",
        "database.user": "u",
        "snapshot.mode": "no_data",
        "debezium.sink.type": "jsonl",
        "debezium.sink.jsonl.path": "-",
    }
    if connector == "postgres":
        flat["database.dbname"] = "postgres"
    flat.update(props or {})
    flat.update({k.replace("__", "."): v for k, v in extra.items()})
    flat["connector.class"] = connector
    return from_mapping(flat)


def source(connector: str, props: Mapping[str, Any] | None = None, **extra: Any) -> Any:
    """The typed source settings of `config(...)`."""
    return config(connector, props, **extra).source
