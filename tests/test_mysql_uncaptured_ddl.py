"""DDL of tables the filters do not capture never stops the connector (the issue: one INET6 table
anywhere on the server did, at start and when its CREATE TABLE reached the binlog);
schema.history.internal.skip.unparseable.ddl also applies to the start-up schema read;
store.only.captured.{tables,databases}.ddl as Debezium's; filters that match nothing warn.

Debezium parses every DDL statement before it applies the filters, so an unparseable statement
of any table stops it unless skip.unparseable.ddl=true (BinlogDatabaseSchema.parseDdl). Tidemark
skips such a statement with a warning when its head names only tables (or databases) outside the
filters: their rows are never decoded, so their layout is not needed.

The unparseable statements used are real MariaDB DDL the parser does not support (system-
versioned tables); a test checks they still are, so a parser that learns them fails loudly here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from cdc import read_jsonl, run_cli
from mycdc import drain, source_config, started_source, write_config

from connectors.api import TerminalError
from connectors.sources.mysql.ddl import DdlParser, UnparseableDdl
from connectors.sources.mysql.model import Tables
from connectors.sources.mysql.source import MySqlSource

UNPARSEABLE_CREATE = "CREATE TABLE {t} (id INT PRIMARY KEY, x INT) WITH SYSTEM VERSIONING"
UNPARSEABLE_ALTER = "ALTER TABLE {t} ADD SYSTEM VERSIONING"


@pytest.fixture
def other_db(mariadb: Any, unique_name: Any) -> Iterator[str]:
    """A second database on the shared server, outside the test's include list; dropped after."""
    name = mariadb.create_database(unique_name("other"))
    try:
        yield name
    finally:
        if mariadb.is_running():
            mariadb.drop_database(name)


def test_the_fixture_statements_are_still_unparseable() -> None:
    p = DdlParser(Tables())
    p.apply("CREATE TABLE t (id INT PRIMARY KEY)", "d")
    for sql in (UNPARSEABLE_CREATE.format(t="v"), UNPARSEABLE_ALTER.format(t="t")):
        with pytest.raises(UnparseableDdl):
            p.apply(sql, "d")


def test_start_with_uncaptured_inet6_and_unparseable_tables(
    mariadb: Any, mariadb_database: str, other_db: str, tmp_path: Path, unique_name: Any
) -> None:
    """The issue's repro through the CLI: `other.x(id, ip inet6)` and an unparseable table in a
    database outside database.include.list; a fresh `run --until-caught-up` starts and streams."""
    mariadb.execute("CREATE TABLE x (id INT PRIMARY KEY, ip INET6)", database=other_db)
    mariadb.execute(UNPARSEABLE_CREATE.format(t="sv"), database=other_db)
    mariadb.execute("CREATE TABLE items (id INT PRIMARY KEY)", database=mariadb_database)
    out = tmp_path / "out.jsonl"
    cfg = write_config(
        tmp_path / "c.properties", mariadb, server_id=unique_name.server_id(), db=mariadb_database, jsonl=out
    )
    first = run_cli("run", "--config", str(cfg), "--until-caught-up")
    assert "WITH SYSTEM VERSIONING" in first.stderr and f"{other_db}.sv is not captured" in first.stderr, (
        first.stderr
    )
    mariadb.execute("INSERT INTO items VALUES (1)", database=mariadb_database)
    mariadb.execute("INSERT INTO x VALUES (1, '::1')", database=other_db)
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    assert [r["value"]["payload"]["after"] for r in read_jsonl(out) if r["topic"].endswith(".items")] == [
        {"id": 1}
    ]


def test_uncaptured_ddl_mid_stream_is_skipped(
    mariadb: Any, mariadb_database: str, other_db: str, tmp_path: Path, unique_name: Any, caplog: Any
) -> None:
    db = mariadb_database
    mariadb.execute("CREATE TABLE items (id INT PRIMARY KEY)", database=db)
    _, src = started_source(mariadb, tmp_path, unique_name, db)
    mariadb.execute("CREATE TABLE y (id INT PRIMARY KEY, ip INET6, u UUID)", database=other_db)
    mariadb.execute("CREATE TABLE z (id INT PRIMARY KEY)", database=other_db)
    mariadb.execute(UNPARSEABLE_CREATE.format(t="sv"), database=other_db)
    mariadb.execute(UNPARSEABLE_ALTER.format(t="y"), database=other_db)
    mariadb.execute(UNPARSEABLE_ALTER.format(t=f"`{other_db}`.z"), database=db)  # qualified, from another db
    mariadb.execute("INSERT INTO items VALUES (1)", database=db)
    with caplog.at_level(logging.WARNING, logger="connectors"):
        try:
            records = drain(src)
        finally:
            src.close()
    assert [r.value["after"] for r in records if not r.schema_change and r.value] == [{"id": 1}]
    skipped = [m for m in caplog.messages if "changes only tables outside the captured ones" in m]
    assert len(skipped) == 3
    assert src.tables.get(other_db, "y") is not None  # parseable uncaptured DDL is still applied


def test_unparseable_ddl_of_a_captured_table_still_stops(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    db = mariadb_database
    mariadb.execute("CREATE TABLE items (id INT PRIMARY KEY)", database=db)
    _, src = started_source(mariadb, tmp_path, unique_name, db)
    mariadb.execute(UNPARSEABLE_ALTER.format(t="items"), database=db)
    try:
        with pytest.raises(TerminalError, match="ADD SYSTEM VERSIONING") as err:
            drain(src)
    finally:
        src.close()
    assert "schema.history.internal.skip.unparseable.ddl=true" in (err.value.hint or "")


def test_skip_unparseable_ddl_applies_to_the_start_up_schema_read(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any, caplog: Any
) -> None:
    db = mariadb_database
    mariadb.execute(UNPARSEABLE_CREATE.format(t="sv"), database=db)
    mariadb.execute("CREATE TABLE items (id INT PRIMARY KEY)", database=db)
    cfg = source_config(
        mariadb, tmp_path / "a", unique_name("conn"), unique_name.server_id(), **{"database.include.list": db}
    )
    src = MySqlSource(cfg, until_caught_up=True)
    try:
        with pytest.raises(TerminalError, match=f"the definition of {db}.sv cannot be parsed") as err:
            src.open(None)
    finally:
        src.close()
    assert "schema.history.internal.skip.unparseable.ddl=true" in (err.value.hint or "")
    with caplog.at_level(logging.WARNING, logger="connectors"):
        _, src = started_source(
            mariadb, tmp_path / "b", unique_name, db, **{"schema.history.internal.skip.unparseable.ddl": True}
        )
    try:
        assert src.tables.get(db, "sv") is None and src.tables.get(db, "items") is not None
        assert any("skip.unparseable.ddl=true" in m and f"{db}.sv" in m for m in caplog.messages)
    finally:
        src.close()


def test_store_only_captured_tables_and_databases(
    mariadb: Any, mariadb_database: str, other_db: str, tmp_path: Path, unique_name: Any
) -> None:
    db = mariadb_database
    mariadb.execute("CREATE TABLE items (id INT PRIMARY KEY)", database=db)
    mariadb.execute("CREATE TABLE skipped (id INT PRIMARY KEY)", database=db)
    mariadb.execute("CREATE TABLE x (id INT PRIMARY KEY)", database=other_db)

    def history(**extra: Any) -> tuple[set[str], set[str], Any]:
        """(tables, databases) the start-up schema read recorded, and the open source."""
        _, src = started_source(
            mariadb,
            tmp_path / unique_name("w"),
            unique_name,
            db,
            **{"table.include.list": f"{db}.items", **extra},
        )
        rows = src.history.records()
        tables = {f"{c['db']}.{c['table']}" for r in rows for c in orjson.loads(r["table_changes"])}
        return tables, {r["db"] for r in rows}, src

    tables, dbs, src = history()
    src.close()
    assert {f"{db}.items", f"{db}.skipped", f"{other_db}.x"} <= tables and {db, other_db} <= dbs
    tables, dbs, src = history(**{"schema.history.internal.store.only.captured.tables.ddl": True})
    try:
        assert tables == {f"{db}.items"}
        assert src.tables.get(other_db, "x") is None  # not even read
        # mid-stream DDL of an uncaptured table is not recorded either
        mariadb.execute("ALTER TABLE skipped ADD COLUMN c INT", database=db)
        mariadb.execute("ALTER TABLE items ADD COLUMN c INT", database=db)
        drain(src)
        later = [r["ddl"] for r in src.history.records() if r["event"] != -1]
        assert later == ["ALTER TABLE items ADD COLUMN c INT"]
    finally:
        src.close()
    tables, dbs, src = history(**{"schema.history.internal.store.only.captured.databases.ddl": True})
    src.close()
    assert f"{db}.skipped" in tables and not any(t.startswith(f"{other_db}.") for t in tables)
    assert other_db not in dbs


def test_filters_matching_no_table_warn_at_start(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any, caplog: Any
) -> None:
    db = mariadb_database
    mariadb.execute("CREATE TABLE items (id INT PRIMARY KEY)", database=db)
    with caplog.at_level(logging.WARNING, logger="connectors"):
        _, src = started_source(
            mariadb, tmp_path / "a", unique_name, "no_such_db", **{"table.include.list": "no_such_db.t.*"}
        )
        src.close()
    warned = [m for m in caplog.messages if m.startswith("no table on the server is captured")]
    assert len(warned) == 1
    assert "database.include.list=no_such_db; table.include.list=no_such_db.t.*" in warned[0]
    assert f"{db}.items" in warned[0] or "more)" in warned[0]  # bounded list of what exists
    assert "Databases on the server: " in warned[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="connectors"):
        _, src = started_source(mariadb, tmp_path / "b", unique_name, db)
        src.close()
    assert not [m for m in caplog.messages if m.startswith("no table on the server is captured")]
