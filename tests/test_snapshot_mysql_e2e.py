"""MariaDB initial snapshots end to end: `tidemark run` snapshots (lock-based consistent view, chunks
read by driver threads) and then streams from the view's binlog position; a SIGKILL mid-snapshot
resumes; include.schema.changes emits the schema snapshot's events first."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import cdc
from mycdc import write_config

from connectors.settings.config import load


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
