"""MySQL/MariaDB specifics of the end-to-end tests (the rest is in tests/cdc.py): the source
properties a test configuration needs, as a .properties file or as typed settings, and an
in-process `MySqlSource` for tests that read its records directly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cdc


def write_config(
    path: Path,
    server: Any,
    *,
    server_id: int,
    db: str,
    prefix: str = "tm",
    connector: str = "mariadb",
    **kw: Any,
) -> Path:
    """A .properties file capturing database `db` (`kw`: see `cdc.write_config`)."""
    source = {
        **server.props(),
        "connector.class": connector,
        "topic.prefix": prefix,
        "database.server.id": str(server_id),
        "database.include.list": db,
        "poll.interval.ms": "100",
        # Streaming tests: no data snapshot unless a test asks (snapshot tests set the mode).
        "snapshot.mode": "no_data",
    }
    return cdc.write_config(path, source, **kw)


def purge_binlogs(server: Any) -> None:
    """Start a new binlog file and purge every older one (waits until the server lets go of
    them: it keeps a file a just-ended dump thread still has open)."""
    from harness import wait_until

    server.execute("FLUSH BINARY LOGS")
    newest = server.query("SHOW BINARY LOGS")[-1][0]

    def purged() -> bool:
        server.execute(f"PURGE BINARY LOGS TO '{newest}'")
        return bool(server.query("SHOW BINARY LOGS")[0][0] == newest)

    wait_until(purged, timeout=30, what="old binlogs purged")


# --------------------------------------------------------------------------- in-process source
def source_config(server: Any, warehouse: Path, name: str, server_id: int, **extra: Any) -> Any:
    """A typed connector config (what `config.load` gives the source) for `MySqlSource`."""
    from cfgutil import config

    src = dict(
        server.props(),
        **{
            "name": name,
            "topic.prefix": "tm",
            "database.server.id": server_id,
            "max.batch.size": 2048,
            "poll.interval.ms": 100,
            "tombstones.on.delete": True,
            "include.schema.changes": True,
            "skipped.operations": ["t"],
            "tidemark.warehouse": str(warehouse),
        },
    )
    src.update(extra)
    return config("mariadb", src)


def drain(src: Any) -> list[Any]:
    """Every record of a bounded source's batches (its last offset in `src._last`)."""
    out = []
    last = None
    for b in src.batches():
        out.extend(b.records)
        last = b.offset
    src._last = last
    return out


def started_source(server: Any, tmp_path: Path, unique_name: Any, db: str, **extra: Any) -> tuple[Any, Any]:
    """A config capturing `db` and a bounded source opened on it (fresh: schema snapshot now)."""
    from connectors.sources.mysql.source import MySqlSource

    cfg = source_config(
        server,
        tmp_path,
        unique_name("conn"),
        unique_name.server_id(),
        **{"database.include.list": db},
        **extra,
    )
    src = MySqlSource(cfg, until_caught_up=True)
    src.open(None)
    return cfg, src
