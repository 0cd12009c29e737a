"""A snapshot's place in the Delta change log, whose order is `(batch_seq, event_index)`: its rows
take a seq after every batch before it and before the stream after it, so replaying the log in
that order gives the table, also when a later snapshot (when_needed after a lost slot, always)
follows older stream batches."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import cdc
import orjson
import psycopg2
from mycdc import write_config as my_config
from pgcdc import write_config as pg_config

from connectors.settings.config import load
from spark_jobs import snapshot as job


def _log(changelog: Path) -> list[dict[str, Any]]:
    rows = cdc.delta_rows(changelog, ["batch_seq", "event_index", "op", "key", "after", "payload"])
    return sorted(rows, key=lambda r: (r["batch_seq"], r["event_index"]))


def _replay(rows: list[dict[str, Any]]) -> dict[int, str]:
    state: dict[int, str] = {}
    for r in rows:
        if r["op"] in ("r", "c", "u"):
            after = orjson.loads(r["after"])
            state[after["id"]] = after["name"]
        elif r["op"] == "d":
            state.pop(orjson.loads(r["key"])["id"], None)
    return state


def test_a_resnapshot_after_a_lost_slot_comes_after_the_older_stream(
    pg: Any, pg_database: str, tmp_path: Path, spark: Any
) -> None:
    dsn = pg.dsn(dbname=pg_database)

    def sql(statement: str) -> None:
        with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
            cur.execute(statement)

    sql("CREATE TABLE items (id bigint PRIMARY KEY, name text)")
    sql("INSERT INTO items SELECT g, 'n' || g FROM generate_series(1, 20) g")
    cfg = load(
        pg_config(
            tmp_path / "c.properties",
            pg,
            slot="order_when_needed",
            dbname=pg_database,
            sinks="delta",
            snapshot__mode="when_needed",
        )
    )
    first = job.run(cfg, spark=spark)
    assert first.rows == 20
    sql("INSERT INTO items VALUES (21, 'v1')")
    cdc.stream_until_caught_up(cfg)
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT pg_drop_replication_slot('order_when_needed')")
    conn.close()
    sql("UPDATE items SET name = 'v2' WHERE id = 21")  # never streamed: the slot is gone
    again = job.run(cfg, spark=spark)
    assert again.decision.reset_offsets and again.rows == 21
    sql("DELETE FROM items WHERE id = 1")
    cdc.stream_until_caught_up(cfg)

    rows = _log(tmp_path / "warehouse" / "tm" / "changelog")
    seqs = [r["batch_seq"] for r in rows]
    snap_seqs = sorted({r["batch_seq"] for r in rows if r["op"] == "r"})
    assert len(snap_seqs) == 2  # each snapshot its own seq
    inserted = next(r["batch_seq"] for r in rows if r["op"] == "c")
    deleted = next(r["batch_seq"] for r in rows if r["op"] == "d")
    assert snap_seqs[0] < inserted < snap_seqs[1] < deleted, seqs
    # in log order, the lost update is not undone by the older insert
    assert _replay(rows) == {i: f"n{i}" for i in range(2, 21)} | {21: "v2"}


def test_mysql_schema_events_then_snapshot_then_stream(
    mariadb: Any, mariadb_database: str, tmp_path: Path
) -> None:
    db = mariadb_database
    connect = partial(mariadb.connect, database=db)
    mariadb.execute("CREATE TABLE items (id int PRIMARY KEY, name text)", database=db)
    mariadb.execute("INSERT INTO items SELECT seq, concat('n', seq) FROM seq_1_to_30", database=db)
    cfg = my_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=7431,
        db=db,
        sinks="delta",
        snapshot__mode="initial",
        include__schema__changes="true",
    )
    cdc.run_cli("run", "--config", str(cfg), "--until-caught-up")
    conn = connect()
    with conn.cursor() as cur:
        cur.execute("UPDATE items SET name = 'changed' WHERE id = 3")
    conn.close()
    cdc.run_cli("run", "--config", str(cfg), "--until-caught-up")
    rows = _log(tmp_path / "warehouse" / "tm" / "changelog")
    schema = {r["batch_seq"] for r in rows if r["op"] is None and r["payload"] and "ddl" in r["payload"]}
    (snap,) = {r["batch_seq"] for r in rows if r["op"] == "r"}
    (update,) = [r["batch_seq"] for r in rows if r["op"] == "u"]
    assert max(schema) < snap < update
    assert _replay(rows)[3] == "changed"
