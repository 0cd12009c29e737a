"""MariaDB initial snapshots end to end: `tidemark run` snapshots (lock-based consistent view, chunks
read by driver threads) and then streams from the view's binlog position; a SIGKILL mid-snapshot
resumes; include.schema.changes emits the schema snapshot's events first; the snapshot.mode
transitions (initial, always, initial_only, when_needed after a purged binlog)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import cdc
import pytest
from mycdc import purge_binlogs, write_config

from connectors.settings.config import load
from spark_jobs import snapshot as job


def test_run_snapshots_then_streams_under_concurrent_writes(
    mariadb: Any, mariadb_database: str, tmp_path: Path
) -> None:
    db = mariadb_database
    connect = partial(mariadb.connect, database=db)
    cdc.create_bench(connect, "mysql", cdc.SNAPSHOT_ROWS)
    out = tmp_path / "out.jsonl"
    cfg = write_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=7401,
        db=db,
        sinks="jsonl,delta",
        jsonl=out,
        snapshot__mode="initial",
        include__schema__changes="true",
        tidemark__snapshot__chunk__rows=max(1000, cdc.SNAPSHOT_ROWS // 8),
    )
    run = cdc.snapshot_under_writes(
        cfg, out, connect, "mysql", rows=cdc.SNAPSHOT_ROWS, seed=11, min_writes=50
    )
    assert "completed" in run.first.stderr
    recs = run.records
    # the schema snapshot's events come first, on the <topic.prefix> topic (Debezium's order:
    # SET character_set_server ..., DROP TABLE ..., ..., CREATE TABLE ...)
    assert recs[0]["topic"] == "tm" and recs[0]["value"]["payload"]["ddl"].startswith(
        "SET character_set_server="
    )
    assert any(r["topic"] == "tm" and r["value"]["payload"]["ddl"].startswith("CREATE TABLE") for r in recs)
    marks = [r["value"]["payload"]["source"]["snapshot"] for r in run.snapshot]
    assert marks.count("first") == 1 and marks.count("last") == 1


def test_sigkill_mid_snapshot_resumes(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    db = mariadb_database
    connect = partial(mariadb.connect, database=db)
    n = max(40_000, cdc.SNAPSHOT_ROWS // 5)
    cdc.create_bench(connect, "mysql", n)
    out = tmp_path / "out.jsonl"
    cfg = write_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=7402,
        db=db,
        sinks="delta,jsonl",
        jsonl=out,
        snapshot__mode="initial",
        snapshot__max__threads=1,
        tidemark__snapshot__chunk__rows=n // 20,
    )
    cdc.sigkill_mid_snapshot_then_resume(
        cfg,
        out,
        tmp_path / "warehouse" / "tm" / "changelog",
        connect,
        n,
        # lands between the two views
        between=lambda: mariadb.execute("UPDATE bench SET qty = 1000 WHERE id = 1", database=db),
    )


def test_recovery_rebuilds_a_lost_history_or_refuses_after_ddl(
    mariadb: Any, mariadb_database: str, tmp_path: Path
) -> None:
    """snapshot.mode=recovery: with the schema history gone, a start rebuilds it from the tables
    at the stored offset and streams on; a schema change after that offset refuses it, naming it."""
    from connectors.sources.mysql.history import DeltaSchemaHistory

    db = mariadb_database
    mariadb.execute("CREATE TABLE bench (id bigint PRIMARY KEY, name varchar(64), qty int)", database=db)
    out = tmp_path / "out.jsonl"
    kw: dict[str, Any] = {"server_id": 7403, "db": db, "sinks": "jsonl", "jsonl": out}
    streaming = write_config(tmp_path / "s.properties", mariadb, **kw)  # snapshot.mode=no_data
    cdc.run_cli("run", "--config", str(streaming), "--until-caught-up")
    mariadb.execute("INSERT INTO bench VALUES (1, 'a', 1)", database=db)
    cdc.run_cli("run", "--config", str(streaming), "--until-caught-up")  # stores an offset
    cfg = load(streaming)
    DeltaSchemaHistory(cfg.warehouse, cfg.name).reset()  # the history is lost
    mariadb.execute("INSERT INTO bench VALUES (2, 'b', 2)", database=db)
    lost = cdc.run_cli("run", "--config", str(streaming), "--until-caught-up", check=False)
    assert lost.returncode == 1 and "start once with snapshot.mode=recovery" in lost.stderr
    recovery = write_config(tmp_path / "r.properties", mariadb, snapshot__mode="recovery", **kw)
    cdc.run_cli("run", "--config", str(recovery), "--until-caught-up")
    assert sorted(cdc.replay(cdc.read_jsonl(out))) == [1, 2]  # nothing lost
    # now a table changes while the history is lost again: recovery must refuse
    DeltaSchemaHistory(cfg.warehouse, cfg.name).reset()
    mariadb.execute("ALTER TABLE bench ADD COLUMN note text", database=db)
    refused = cdc.run_cli("run", "--config", str(recovery), "--until-caught-up", check=False)
    assert refused.returncode == 1 and "the schema changed after the stored position" in refused.stderr
    assert "ALTER TABLE bench ADD COLUMN note text" in refused.stderr and "Traceback" not in refused.stderr


def _mode_config(server: Any, db: str, tmp_path: Path, mode: str, server_id: int, **extra: Any) -> Any:
    return load(
        write_config(
            tmp_path / f"{mode}.properties",
            server,
            server_id=server_id,
            db=db,
            prefix=f"tm_{mode}",  # its own connector name: offsets and snapshot state apart
            sinks="jsonl",
            jsonl=tmp_path / f"{mode}.jsonl",
            snapshot__mode=mode,
            **extra,
        )
    )


def _rows(server: Any, db: str, ids: range) -> None:
    server.execute("INSERT INTO bench VALUES " + ", ".join(f"({i}, 'n{i}', {i})" for i in ids), database=db)


def test_modes_initial_always_initial_only(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    """The issue's mode transitions on MariaDB (the locking method, no Spark): initial does not
    snapshot again once it has, always snapshots at every start, initial_only stops after its
    snapshot, no_data and never read no data."""
    db = mariadb_database
    mariadb.execute("CREATE TABLE bench (id bigint PRIMARY KEY, name varchar(64), qty int)", database=db)
    _rows(mariadb, db, range(1, 31))
    initial = _mode_config(mariadb, db, tmp_path, "initial", 7404)
    assert job.run(initial).rows == 30
    _rows(mariadb, db, range(31, 33))
    assert cdc.stream_until_caught_up(initial) == 2  # from the view's position: the two rows after it, once
    again = job.run(initial)
    assert not again.decision.snapshot and again.decision.stream

    always = _mode_config(mariadb, db, tmp_path, "always", 7405)
    first = job.run(always)
    cdc.stream_until_caught_up(always)
    second = job.run(always)
    assert first.rows == second.rows == 32 and first.snapshot_id != second.snapshot_id

    only = _mode_config(mariadb, db, tmp_path, "initial_only", 7406)
    out = job.run(only)
    assert out.rows == 32 and not out.decision.stream
    assert not job.run(only).decision.snapshot

    for mode, sid in (("no_data", 7407), ("never", 7408)):
        assert not job.run(_mode_config(mariadb, db, tmp_path, mode, sid)).decision.snapshot
    recs = cdc.read_jsonl(tmp_path / "initial.jsonl")
    assert sorted(cdc.replay(recs)) == list(range(1, 33))


def test_when_needed_resnapshots_after_a_purged_binlog(
    mariadb_factory: Any, tmp_path: Path, unique_name: Any
) -> None:
    """when_needed on MariaDB: no new snapshot while the stored binlog position is on the server;
    once its file is purged, a new snapshot with the stale offsets reset, and streaming goes on
    from the new view (no "purged" stop)."""
    server = mariadb_factory()  # its own server: this test purges binlogs
    db = server.create_database(unique_name("db"))
    server.execute("CREATE TABLE bench (id bigint PRIMARY KEY, name varchar(64), qty int)", database=db)
    _rows(server, db, range(1, 21))
    cfg = _mode_config(server, db, tmp_path, "when_needed", unique_name.server_id())
    assert job.run(cfg).rows == 20
    _rows(server, db, range(21, 22))
    assert cdc.stream_until_caught_up(cfg) == 1
    assert not job.run(cfg).decision.snapshot  # the stored position is on the server
    purge_binlogs(server)
    out = job.run(cfg)  # the position is gone: snapshot again, offsets reset
    assert out.decision.snapshot and out.decision.reset_offsets and out.rows == 21
    _rows(server, db, range(22, 23))
    assert cdc.stream_until_caught_up(cfg) == 1  # from the new view's position
    recs = cdc.read_jsonl(tmp_path / "when_needed.jsonl")
    assert sorted(cdc.replay(recs)) == list(range(1, 23))


def test_an_override_the_database_refuses_stops_before_the_lock(
    mariadb: Any, mariadb_database: str, tmp_path: Path
) -> None:
    """A column MariaDB does not know is refused with the property's name before the snapshot
    takes its global read lock or records a plan; the corrected statement then snapshots."""
    from connectors.api import TerminalError
    from connectors.snapshot.progress import SnapshotProgress

    db = mariadb_database
    mariadb.execute("CREATE TABLE bench (id bigint PRIMARY KEY, name varchar(64), qty int)", database=db)
    _rows(mariadb, db, range(1, 31))
    key = f"snapshot.select.statement.overrides.{db}.bench"

    def config(sql: str) -> Any:
        return _mode_config(mariadb, db, tmp_path, "initial_only", 7451, **{key: sql})

    for sql, reason in (
        (f"SELECT id, nme FROM {db}.bench", "Unknown column 'nme' in 'SELECT'"),
        (f"SELECT * FROM {db}.bench WHERE nosuch > 1", "Unknown column 'nosuch' in 'WHERE'"),
    ):
        cfg = config(sql)
        with pytest.raises(TerminalError) as err:
            job.run(cfg)
        assert str(err.value).startswith(f"{key}: the database refused it: {reason}"), err.value
        assert "nothing was started" in str(err.value.hint)
        assert SnapshotProgress(cfg.warehouse, cfg.name).latest() is None
    out = job.run(config(f"SELECT * FROM {db}.bench WHERE qty > 20"))
    assert out.rows == 10


def test_a_table_the_user_may_not_read_is_refused_before_the_lock(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    """A captured table the user may not SELECT is refused, naming it and the GRANT, before the
    global read lock (before, the schema read under the lock stopped on PyMySQL's traceback); so
    is a user who may not read the binlog position, which even initial_only needs, or the binlog,
    which the lock-free method's tasks read.
    A table the user holds no privilege on is hidden from it, so not captured (as for Debezium).
    An uncaptured table whose definition the user may not read names the two ways out."""
    from connectors.api import TerminalError
    from connectors.snapshot.blocking import progress_key
    from connectors.snapshot.progress import SnapshotProgress

    db, user = mariadb_database, unique_name("reader")
    for table in ("bench", "partial", "hidden"):
        mariadb.execute(
            f"CREATE TABLE {table} (id bigint PRIMARY KEY, name varchar(64), qty int)", database=db
        )
    _rows(mariadb, db, range(1, 31))
    mariadb.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'")
    try:
        mariadb.execute(f"GRANT RELOAD, SHOW DATABASES, LOCK TABLES ON *.* TO '{user}'@'%'")
        mariadb.execute(f"GRANT SELECT ON {db}.bench TO '{user}'@'%'")
        mariadb.execute(f"GRANT SELECT (id) ON {db}.partial TO '{user}'@'%'")

        config = partial(
            _mode_config,
            mariadb,
            db,
            tmp_path,
            "initial_only",
            7452,
            database__user=user,
            database__password="pw",
        )

        cfg = config()
        with pytest.raises(TerminalError) as err:
            job.run(cfg)
        assert str(err.value).startswith("database.user may not read the binlog position: Access denied")
        assert "BINLOG MONITOR" in str(err.value.hint)
        mariadb.execute(f"GRANT BINLOG MONITOR ON *.* TO '{user}'@'%'")
        # the lock-free method's tasks read the binlog, even when no stream follows
        with pytest.raises(TerminalError, match="lacks REPLICATION SLAVE"):
            job.run(config(tidemark__snapshot__mysql__method="watermarks"))
        mariadb.execute(f"GRANT REPLICATION SLAVE ON *.* TO '{user}'@'%'")
        with pytest.raises(TerminalError) as err:
            job.run(cfg)
        assert str(err.value).splitlines()[0] == (
            f"database.user '{user}'@'%' may not read a table the snapshot reads: {db}.partial (no SELECT)"
        ), err.value
        assert f"GRANT SELECT ON `{db}`.`partial` TO '{user}'@'%'" in str(err.value.hint)
        assert SnapshotProgress(cfg.warehouse, cfg.name).latest() is None
        # a blocking snapshot's job checks too (a grant revoked after the signal was accepted)
        request = {
            "raw": dict(cfg.origin.raw),
            "snapshot_id": "b1",
            "batch_seq": 7,
            "tables": [f"{db}.partial"],
        }
        with pytest.raises(TerminalError) as err:
            job.run_blocking(request)
        assert str(err.value).splitlines()[0].endswith(f"{db}.partial (no SELECT)"), err.value
        assert "out of the execute-snapshot signal's data-collections" in str(err.value.hint)
        assert SnapshotProgress(cfg.warehouse, progress_key(cfg.name)).latest() is None
        # not captured, but the schema history reads every definition of the database
        with pytest.raises(TerminalError) as err:
            job.run(config(table__include__list=f"{db}.bench"))
        assert f"may not read the definition of {db}.partial (not captured" in str(err.value)
        assert "store.only.captured.tables.ddl=true" in str(err.value.hint)
        out = job.run(
            config(
                table__include__list=f"{db}.bench",
                schema__history__internal__store__only__captured__tables__ddl="true",
            )
        )
        assert out.rows == 30
    finally:
        mariadb.execute(f"DROP USER '{user}'@'%'")


def test_a_stream_needs_a_row_binlog_before_the_snapshot(mariadb_factory: Any, tmp_path: Path) -> None:
    """As Debezium checks before its snapshot when a stream follows: binlog_format=STATEMENT is
    refused before the lock, not found after a whole snapshot. initial_only streams nothing, so it
    snapshots (Debezium does too)."""
    from connectors.api import TerminalError

    server = mariadb_factory(binlog_format="STATEMENT")
    server.execute("CREATE DATABASE stmt")
    server.execute("CREATE TABLE bench (id bigint PRIMARY KEY, name varchar(64), qty int)", database="stmt")
    _rows(server, "stmt", range(1, 6))
    with pytest.raises(TerminalError) as err:
        job.run(_mode_config(server, "stmt", tmp_path, "initial", 7452))
    assert str(err.value).startswith("binlog_format is STATEMENT, the connector needs ROW")
    assert job.run(_mode_config(server, "stmt", tmp_path, "initial_only", 7453)).rows == 5


def test_names_with_spaces_quotes_and_backquotes(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    """A table and columns named with a space, a quote, a backquote and a non-ASCII letter are
    snapshotted and streamed through ALTER and RENAME TABLE, their topic names sanitized as
    Debezium's (invalid characters to `_`). Before, SHOW CREATE TABLE pasted a backquoted name
    into the statement unescaped (PyMySQL's 1103 traceback), and RENAME TABLE of a name with a
    space stopped the stream as unparseable DDL."""
    db, table = mariadb_database, "`Odd ``T`` ü`"
    mariadb.execute(
        f'CREATE TABLE {table} (`Id Col` bigint PRIMARY KEY, `x"y` text, `a``b` int)', database=db
    )
    mariadb.execute(f"INSERT INTO {table} SELECT seq, concat('v', seq), seq FROM seq_1_to_1200", database=db)
    cfg = _mode_config(mariadb, db, tmp_path, "initial", 7461, tidemark__snapshot__chunk__rows=500)
    assert job.run(cfg).rows == 1200
    mariadb.execute(f"ALTER TABLE {table} ADD COLUMN `c``d` int DEFAULT 5", database=db)
    mariadb.execute(f"UPDATE {table} SET `a``b` = 0 WHERE `Id Col` = 7", database=db)
    mariadb.execute(f"RENAME TABLE {table} TO `New ``X```", database=db)
    mariadb.execute("INSERT INTO `New ``X``` VALUES (9001, 'n', 1, 2)", database=db)
    assert cdc.stream_until_caught_up(cfg) == 4  # the ALTER and the RENAME, the two rows
    rows = [r for r in cdc.read_jsonl(tmp_path / "initial.jsonl") if r["value"] is not None]
    ddl = [r["value"]["payload"]["ddl"] for r in rows if r["topic"] == "tm_initial"]
    assert ddl[-1] == f"RENAME TABLE {table} TO `New ``X```"
    by_op: dict[str, list[Any]] = {}
    for r in rows:
        if r["topic"] != "tm_initial":
            by_op.setdefault(r["value"]["payload"]["op"], []).append(r)
    assert len(by_op["r"]) == 1200
    assert {r["topic"] for r in by_op["r"]} == {f"tm_initial.{db}.Odd__T___"}
    assert by_op["r"][0]["value"]["payload"]["source"]["table"] == "Odd `T` ü"
    (update,) = by_op["u"]
    assert update["topic"] == f"tm_initial.{db}.Odd__T___"
    assert update["value"]["payload"]["after"] == {"Id Col": 7, 'x"y': "v7", "a`b": 0, "c`d": 5}
    (insert,) = by_op["c"]
    assert insert["topic"] == f"tm_initial.{db}.New__X_"
    assert insert["value"]["payload"]["after"] == {"Id Col": 9001, 'x"y': "n", "a`b": 1, "c`d": 2}
