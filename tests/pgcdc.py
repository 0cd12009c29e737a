"""PostgreSQL specifics of the end-to-end tests (the rest is in tests/cdc.py): the source
properties a test configuration needs, as a .properties file or as typed settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cdc
from cfgutil import config

from connectors.settings.config import ConnectorConfig


def source_props(pg: Any, *, slot: str, dbname: str | None = None, prefix: str = "tm") -> dict[str, Any]:
    """Connection, slot and publication (both named `slot`), a short poll interval."""
    props: dict[str, Any] = dict(pg.props())
    if dbname:
        props["database.dbname"] = dbname
    props.update(
        {
            "connector.class": "postgres",
            "topic.prefix": prefix,
            "slot.name": slot,
            "publication.name": slot,
            "poll.interval.ms": "100",
            # Streaming tests: no data snapshot unless a test asks (snapshot tests set the mode).
            "snapshot.mode": "no_data",
        }
    )
    return props


def write_config(
    path: Path, pg: Any, *, slot: str, dbname: str | None = None, prefix: str = "tm", **kw: Any
) -> Path:
    """A .properties file streaming `dbname` through `slot` (`kw`: see `cdc.write_config`)."""
    return cdc.write_config(path, source_props(pg, slot=slot, dbname=dbname, prefix=prefix), **kw)


def source_config(pg: Any, warehouse: Path, *, slot: str, dbname: str, **extra: Any) -> ConnectorConfig:
    """The typed configuration (what `config.load` gives the source) for `PostgresSource`."""
    props = source_props(pg, slot=slot, dbname=dbname)
    props.pop("connector.class")
    return config("postgres", {**props, "tidemark.warehouse": str(warehouse), **extra})
