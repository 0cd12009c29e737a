"""MySQL/MariaDB set-up checks that need a particular server state: a live replica holding the
connector's server id, and an unreachable server before/after the first connect."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from cfgutil import config
from cfgutil import source as settings_of
from harness import wait_until

from connectors.api import TerminalError, TransientError
from connectors.sources.mysql import setup
from connectors.sources.mysql.source import MySqlSource
from connectors.sources.mysql.stream import BinlogStream


def _cfg(server: Any, warehouse: Path, name: str, server_id: int) -> Any:
    return config(
        "mariadb",
        dict(server.props()),
        name=name,
        topic__prefix="tm",
        database__server__id=server_id,
        database__include__list="none_such",
        connect__timeout__ms=5000,
        tidemark__warehouse=str(warehouse),
    )


def _replica_ids(server: Any) -> set[int]:
    return {int(r[0]) for r in server.query("SHOW SLAVE HOSTS")}


def test_server_id_of_a_live_replica_is_refused(mariadb: Any, tmp_path: Path, unique_name: Any) -> None:
    """Another replica streaming with our database.server.id: starting would make the server drop
    one of the two dump threads, so the connector refuses to start and says which id to change."""
    sid = unique_name.server_id()
    other = BinlogStream(
        setup.connection_settings(settings_of("mariadb", mariadb.props())),
        sid,
        lambda db, table: None,
        heartbeat_s=1.0,
    )
    errors: list[BaseException] = []

    def replicate() -> None:
        try:
            for _ in other.events():
                pass
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    thread = threading.Thread(target=replicate, daemon=True)
    thread.start()
    try:
        wait_until(lambda: sid in _replica_ids(mariadb), timeout=30, what=f"replica {sid} registered")
        src = MySqlSource(_cfg(mariadb, tmp_path, unique_name("conn"), sid))
        with pytest.raises(TerminalError) as err:
            src.open(None)
        src.close()
        assert f"database.server.id={sid} is already used by another replica" in err.value.message
        assert "database.server.id" in (err.value.hint or "")
        assert (
            sid in _replica_ids(mariadb) and thread.is_alive() and not errors
        )  # the other replica is untouched
    finally:
        other.stop()
        thread.join(30)
        other.close()


def test_unreachable_is_terminal_only_before_the_first_connect(
    mariadb_factory: Any, tmp_path: Path, unique_name: Any
) -> None:
    """A server that cannot be reached at the very first start is a set-up error (wrong host or
    port); once the connector has reached it, the same failure is a restart in progress and the
    engine retries it."""
    server = mariadb_factory()
    cfg = _cfg(server, tmp_path, unique_name("conn"), unique_name.server_id())
    src = MySqlSource(cfg, until_caught_up=True)
    src.open(None)
    src.close()
    server.kill()
    with pytest.raises(TransientError, match="cannot reach the database"):
        MySqlSource(cfg, until_caught_up=True).open(None)  # same config: reached before
    fresh = _cfg(server, tmp_path, unique_name("conn"), unique_name.server_id())
    with pytest.raises(TerminalError, match="cannot reach the database") as err:
        MySqlSource(fresh, until_caught_up=True).open(None)
    assert not err.value.transient and "database.hostname/database.port" in (err.value.hint or "")


def test_connection_settings_never_show_the_password() -> None:
    from connectors.sources.mysql.connection import ConnectionSettings

    s = setup.connection_settings(
        settings_of(
            "mysql",
            {
                "database.hostname": "db.example",
                "database.user": "cdc",
                "database.password": "s3cr3t-pw",
                "database.ssl.mode": "required",
            },
        )
    )
    for text in (repr(s), str(s), f"{s}", repr([s]), repr(ConnectionSettings("h", 1, "u", "s3cr3t-pw"))):
        assert "s3cr3t-pw" not in text and "password" not in text, text
    assert "db.example" in repr(s) and "cdc" in repr(s)
    assert s.password == "s3cr3t-pw" and s.pymysql_kwargs()["password"] == "s3cr3t-pw"
