"""PostgreSQL initial snapshots: the Spark job, its chunks and progress, resume, modes, sinks."""

from __future__ import annotations

import os
import re
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import psycopg2
import pyarrow.compute as pc
import pytest
from cdc import (
    SNAPSHOT_ROWS,
    create_bench,
    read_jsonl,
    replay,
    run_cli,
    sigkill_mid_snapshot_then_resume,
    snapshot_under_writes,
    spark_submit,
    stream_until_caught_up,
)
from pgcdc import write_config

from connectors.settings.config import load
from connectors.snapshot.progress import SnapshotProgress
from spark_jobs import snapshot as job


def _fill(dsn: str, n: int, table: str = "items") -> None:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(
            f"CREATE TABLE {table} (id bigint PRIMARY KEY, name text, price numeric(10,2), ts timestamptz)"
        )
        cur.execute(
            f"INSERT INTO {table} SELECT g, 'n' || g, g / 100.0, timestamptz '2024-01-01' + g * interval '1 s' "
            "FROM generate_series(1, %s) g",
            (n,),
        )


def test_initial_snapshot_to_jsonl_and_delta(pg: Any, pg_database: str, tmp_path: Path, spark: Any) -> None:
    _fill(pg.dsn(dbname=pg_database), 2500)
    out = tmp_path / "out.jsonl"
    cfg_path = write_config(
        tmp_path / "c.properties",
        pg,
        slot="snap1",
        dbname=pg_database,
        sinks="jsonl,delta",
        jsonl=out,
        snapshot__mode="initial",
        tidemark__snapshot__chunk__rows=1000,
    )
    cfg = load(cfg_path)
    res = job.run(cfg, spark=spark)
    assert res.decision.snapshot and res.rows == 2500 and res.chunks >= 2
    recs = read_jsonl(out)
    assert len(recs) == 2500
    ids = sorted(r["key"]["payload"]["id"] for r in recs)
    assert ids == list(range(1, 2501))
    marks = [r["value"]["payload"]["source"]["snapshot"] for r in recs]
    assert marks.count("first") == 1 and marks.count("last") == 1
    assert all(r["value"]["payload"]["op"] == "r" for r in recs)
    from deltalake import DeltaTable

    t = DeltaTable(str(tmp_path / "warehouse" / "tm" / "changelog")).to_pyarrow_table()
    assert t.num_rows == 2500
    state = SnapshotProgress(cfg.warehouse, cfg.name).latest()
    assert state is not None and state.completed and state.rows == 2500
    # initial: a second start does not snapshot again
    again = job.run(cfg, spark=spark)
    assert not again.decision.snapshot


# --------------------------------------------------------------------------- end to end (CLI)
def _delta_events(uri: Path) -> list[dict[str, Any]]:
    """The change log's rows in stream order as {"value": {"payload": ...}} records: snapshot
    rows (batch_seq 0) first, then streamed batches."""
    from deltalake import DeltaTable

    t = DeltaTable(str(uri)).to_pyarrow_table(
        columns=["batch_seq", "event_index", "op", "before", "after", "collection"]
    )
    t = t.filter(pc.equal(t["collection"], "public.bench")).sort_by(
        [("batch_seq", "ascending"), ("event_index", "ascending")]
    )
    out = []
    for row in t.to_pylist():
        out.append(
            {
                "value": {
                    "payload": {
                        "op": row["op"],
                        "before": orjson.loads(row["before"]) if row["before"] else None,
                        "after": orjson.loads(row["after"]) if row["after"] else None,
                    }
                }
            }
        )
    return out


def test_run_snapshots_then_streams_under_concurrent_writes(
    pg: Any, pg_database: str, tmp_path: Path
) -> None:
    """The issue's correctness test: a SNAPSHOT_ROWS-row table snapshotted while another process
    inserts, updates and deletes; after catching up, replaying the events reproduces the table
    (jsonl and Delta), and the Delta change log holds each snapshotted row once."""
    connect = partial(pg.connect, dbname=pg_database)
    create_bench(connect, "postgres", SNAPSHOT_ROWS)
    out = tmp_path / "out.jsonl"
    cfg = write_config(
        tmp_path / "c.properties",
        pg,
        slot="snapw",
        dbname=pg_database,
        sinks="jsonl,delta",
        jsonl=out,
        snapshot__mode="initial",
        tidemark__snapshot__chunk__rows=max(1000, SNAPSHOT_ROWS // 8),
    )
    run = snapshot_under_writes(cfg, out, connect, "postgres", rows=SNAPSHOT_ROWS, seed=7, min_writes=100)
    assert "snapshot" in run.first.stderr and "completed" in run.first.stderr
    delta = _delta_events(tmp_path / "warehouse" / "tm" / "changelog")
    assert sum(1 for e in delta if e["value"]["payload"]["op"] == "r") == len(run.snapshot)
    assert replay(delta) == run.state


def test_sigkill_mid_snapshot_resumes_without_rewriting_chunks(
    pg: Any, pg_database: str, tmp_path: Path
) -> None:
    connect = partial(pg.connect, dbname=pg_database)
    n = max(50_000, SNAPSHOT_ROWS // 5)
    create_bench(connect, "postgres", n)
    out = tmp_path / "out.jsonl"
    cfg = write_config(
        tmp_path / "c.properties",
        pg,
        slot="snapk",
        dbname=pg_database,
        sinks="delta,jsonl",
        jsonl=out,
        snapshot__mode="initial",
        snapshot__max__threads=1,  # one chunk at a time: the kill lands between chunks' commits
        tidemark__snapshot__chunk__rows=n // 20,
    )
    sigkill_mid_snapshot_then_resume(cfg, out, tmp_path / "warehouse" / "tm" / "changelog", connect, n)


# --------------------------------------------------------------------------- snapshot.mode
def _mode_config(pg: Any, db: str, tmp_path: Path, mode: str, **extra: Any) -> Any:
    return load(
        write_config(
            tmp_path / f"{mode}.properties",
            pg,
            slot=f"m_{mode}"[:40],
            dbname=db,
            prefix=f"tm_{mode}",  # its own connector name: offsets and snapshot state apart
            sinks="jsonl",
            jsonl=tmp_path / f"{mode}.jsonl",
            snapshot__mode=mode,
            **extra,
        )
    )


def test_modes_initial_always_initial_only(pg: Any, pg_database: str, tmp_path: Path, spark: Any) -> None:
    _fill(pg.dsn(dbname=pg_database), 30)
    initial = _mode_config(pg, pg_database, tmp_path, "initial")
    assert job.run(initial, spark=spark).rows == 30
    stream_until_caught_up(initial)
    assert not job.run(initial, spark=spark).decision.snapshot  # offsets or a completed snapshot exist

    always = _mode_config(pg, pg_database, tmp_path, "always")
    first = job.run(always, spark=spark)
    stream_until_caught_up(always)
    second = job.run(always, spark=spark)
    assert first.rows == second.rows == 30 and first.snapshot_id != second.snapshot_id

    only = _mode_config(pg, pg_database, tmp_path, "initial_only")
    out = job.run(only, spark=spark)
    assert out.rows == 30 and not out.decision.stream
    assert not job.run(only, spark=spark).decision.snapshot

    for mode in ("no_data", "never"):
        assert not job.run(_mode_config(pg, pg_database, tmp_path, mode), spark=spark).decision.snapshot


def test_when_needed_resnapshots_after_a_lost_slot(
    pg: Any, pg_database: str, tmp_path: Path, spark: Any
) -> None:
    dsn = pg.dsn(dbname=pg_database)
    _fill(dsn, 20)
    cfg = _mode_config(pg, pg_database, tmp_path, "when_needed")
    assert job.run(cfg, spark=spark).rows == 20
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO items VALUES (21, 'n21', 0.21, now())")
    assert stream_until_caught_up(cfg) == 1
    assert not job.run(cfg, spark=spark).decision.snapshot  # the stored position is on the slot
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT pg_drop_replication_slot('m_when_needed')")
    conn.close()
    out = job.run(cfg, spark=spark)  # the position is gone: snapshot again, offsets reset
    assert out.decision.snapshot and out.decision.reset_offsets and out.rows == 21
    stream_until_caught_up(cfg)  # streams from the new slot, no "slot does not exist" error


def test_configuration_based(pg: Any, pg_database: str, tmp_path: Path, spark: Any) -> None:
    _fill(pg.dsn(dbname=pg_database), 10)
    cfg = _mode_config(
        pg,
        pg_database,
        tmp_path,
        "configuration_based",
        snapshot__mode__configuration__based__snapshot__data="true",
        snapshot__mode__configuration__based__start__stream="false",
    )
    a, b = job.run(cfg, spark=spark), job.run(cfg, spark=spark)
    assert a.rows == b.rows == 10 and not a.decision.stream  # data every start, as Debezium's


def test_include_list_override_and_order(pg: Any, pg_database: str, tmp_path: Path, spark: Any) -> None:
    dsn = pg.dsn(dbname=pg_database)
    _fill(dsn, 50, "items")
    _fill(dsn, 5, "small")
    _fill(dsn, 7, "skipped")
    cfg = _mode_config(
        pg,
        pg_database,
        tmp_path,
        "initial",
        snapshot__include__collection__list="public.items,public.small",
        snapshot__tables__order__by__row__count="ascending",
        **{"snapshot.select.statement.overrides.public.items": "SELECT * FROM public.items WHERE id > 40"},
    )
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("ANALYZE")
    assert job.run(cfg, spark=spark).rows == 15
    recs = read_jsonl(tmp_path / "initial.jsonl")
    tables = [r["value"]["payload"]["source"]["table"] for r in recs]
    assert tables == ["small"] * 5 + ["items"] * 10  # ascending row count; overridden rows only
    assert recs[0]["value"]["payload"]["source"]["snapshot"] == "first"
    assert recs[4]["value"]["payload"]["source"]["snapshot"] == "last_in_data_collection"
    assert recs[5]["value"]["payload"]["source"]["snapshot"] == "first_in_data_collection"
    assert recs[-1]["value"]["payload"]["source"]["snapshot"] == "last"


def test_bad_inputs_stop_with_a_clear_message(pg: Any, pg_database: str, tmp_path: Path, spark: Any) -> None:
    from connectors.api import TerminalError

    _fill(pg.dsn(dbname=pg_database), 3)
    cfg = _mode_config(
        pg, pg_database, tmp_path, "initial", snapshot__include__collection__list="public.nope"
    )
    with pytest.raises(TerminalError) as err:
        job.run(cfg, spark=spark)
    assert "snapshot.include.collection.list: 'public.nope' matches no captured table" in str(err.value)
    assert "public.items" in str(err.value.hint)
    bad = write_config(
        tmp_path / "bad.properties",
        pg,
        slot="badmaster",
        dbname=pg_database,
        prefix="bad",
        sinks="jsonl",
        jsonl=tmp_path / "bad.jsonl",
        snapshot__mode="initial_only",
        tidemark__spark__master="nowhere://x",
    )
    proc = run_cli("snapshot", "--config", str(bad), check=False)
    assert proc.returncode == 1, proc.stderr
    assert "error: Spark could not start (tidemark.spark.master=nowhere://x)" in proc.stderr
    assert "Traceback" not in proc.stderr
    # the plan was recorded before Spark started: the next start resumes it
    state = SnapshotProgress(tmp_path / "warehouse", "bad").latest()
    assert state is not None and not state.completed


def test_an_override_the_database_refuses_stops_before_anything_starts(
    pg: Any, pg_database: str, tmp_path: Path, spark: Any
) -> None:
    """sqlglot checks an override's shape at load; its columns and types only the server knows.
    A misspelt column is refused with the property's name before the slot exists (no WAL held
    for a snapshot that never ran); an error only reading the rows can raise names the table
    and the override; the corrected statement then snapshots."""
    from connectors.api import TerminalError

    _fill(pg.dsn(dbname=pg_database), 3000)
    key = "snapshot.select.statement.overrides.public.items"

    def attempt(sql: str) -> Any:
        cfg = _mode_config(
            pg, pg_database, tmp_path, "initial", tidemark__snapshot__chunk__rows=1000, **{key: sql}
        )
        return cfg, job.run(cfg, spark=spark)

    for sql, reason in (
        ("SELECT id, nme FROM public.items", 'column "nme" does not exist'),
        ("SELECT * FROM public.items WHERE price > 'cheap'", "invalid input syntax for type numeric"),
    ):
        with pytest.raises(TerminalError) as err:
            attempt(sql)
        assert str(err.value).startswith(f"{key}: the database refused it: {reason}"), err.value
        assert "nothing was started" in str(err.value.hint)
        assert pg.scalar("SELECT count(*) FROM pg_replication_slots") == 0
    cfg = _mode_config(pg, pg_database, tmp_path, "initial")
    assert SnapshotProgress(cfg.warehouse, cfg.name).latest() is None
    # valid to the planner, refused by a row (the 2,000th): the read's error names the override
    with pytest.raises(TerminalError) as err:
        attempt("SELECT * FROM public.items WHERE id > 1 / (id - 2000)")
    assert f"of public.items failed: snapshot read of public.items ({key}): division by zero" in str(
        err.value
    )
    # corrected, the snapshot resumes: whichever chunks were read before the failure are kept,
    # the rest read through the new statement, no row twice (the failed chunk held id 2000)
    _, out = attempt("SELECT * FROM public.items WHERE id <> 2000")
    assert out.decision.resume and out.rows == 2999
    ids = sorted(r["key"]["payload"]["id"] for r in read_jsonl(tmp_path / "initial.jsonl"))
    assert ids == [i for i in range(1, 3001) if i != 2000]


def test_a_table_the_user_may_not_read_is_refused_before_anything_starts(
    pg: Any, pg_database: str, tmp_path: Path, spark: Any, unique_name: Any
) -> None:
    """A snapshot reads every captured table: a user without SELECT on one (or on a captured
    column of one, or USAGE on its schema) is refused, naming each such table and the GRANTs,
    before the slot exists.
    Before, the plan stopped on psycopg2's traceback with the slot and Spark already started. A
    column-level grant is enough when it covers the columns the snapshot reads."""
    from connectors.api import TerminalError
    from connectors.snapshot.blocking import progress_key

    dsn = pg.dsn(dbname=pg_database)
    _fill(dsn, 40)
    _fill(dsn, 7, "other")
    role, slot = unique_name("reader"), unique_name("grants")
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE ROLE {role} LOGIN REPLICATION PASSWORD 'pw'")
        cur.execute("CREATE SCHEMA priv")
        cur.execute("CREATE TABLE priv.kept (id int PRIMARY KEY)")
        cur.execute("INSERT INTO priv.kept VALUES (1), (2)")
        cur.execute(
            f"CREATE PUBLICATION {slot} FOR TABLE items, other, priv.kept"
        )  # the user may not create it
        cur.execute(f"GRANT SELECT (id, name) ON other TO {role}")
        cur.execute(f"GRANT SELECT ON priv.kept TO {role}")  # but not USAGE on the schema

    def config(**extra: Any) -> Any:
        return load(
            write_config(
                tmp_path / "g.properties",
                pg,
                slot=slot,
                dbname=pg_database,
                prefix="grants",
                sinks="jsonl",
                jsonl=tmp_path / "g.jsonl",
                snapshot__mode="initial_only",
                database__user=role,
                database__password="pw",
                publication__autocreate__mode="disabled",
                **extra,
            )
        )

    try:
        cfg = config()
        with pytest.raises(TerminalError) as err:
            job.run(cfg, spark=spark)
        assert str(err.value).startswith(
            f"database.user {role} may not read 3 tables the snapshot reads: priv.kept (no USAGE on "
            "schema priv); public.items (no SELECT); public.other (no SELECT on price, ts)"
        ), err.value
        assert (
            f'GRANT USAGE ON SCHEMA "priv" TO "{role}"; GRANT SELECT ON "public"."items", "public"."other" TO "{role}"'
            in str(err.value.hint)
        )
        assert "nothing was started" in str(err.value.hint)
        assert pg.scalar("SELECT count(*) FROM pg_replication_slots") == 0
        assert SnapshotProgress(cfg.warehouse, cfg.name).latest() is None
        # a blocking snapshot's job checks too (a grant revoked after the signal was accepted):
        # refused before its view or plan, the way out named by what chose the table
        request = {
            "raw": dict(cfg.origin.raw),
            "snapshot_id": "b1",
            "batch_seq": 7,
            "tables": ["public.items"],
        }
        with pytest.raises(TerminalError) as err:
            job.run_blocking(request, spark=spark)
        assert str(err.value).splitlines()[0] == (
            f"database.user {role} may not read a table the snapshot reads: public.items (no SELECT)"
        )
        assert err.value.hint == (
            f'grant it (GRANT SELECT ON "public"."items" TO "{role}"), or leave the table out of the '
            "execute-snapshot signal's data-collections; nothing was started (no slot, lock or Spark job)"
        )
        assert SnapshotProgress(cfg.warehouse, progress_key(cfg.name)).latest() is None
        # items granted; other's columns beyond the grant not captured: the snapshot runs
        pg.execute(f"GRANT SELECT ON items TO {role}", dbname=pg_database)
        pg.execute(f"GRANT USAGE ON SCHEMA priv TO {role}", dbname=pg_database)
        out = job.run(config(column__exclude__list=r"public\.other\.(price|ts)"), spark=spark)
        assert out.rows == 49
        rows = [r["value"]["payload"] for r in read_jsonl(tmp_path / "g.jsonl")]
        other = [v["after"] for v in rows if v["source"]["table"] == "other"]
        assert len(other) == 7 and {"id": 3, "name": "n3"} in other
    finally:
        with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
            cur.execute(f"DROP PUBLICATION {slot}")
            cur.execute("DROP SCHEMA priv CASCADE")
            cur.execute(f"DROP OWNED BY {role}")
            cur.execute(f"DROP ROLE {role}")


def test_a_server_without_logical_decoding_is_refused_before_anything_starts(
    pg_factory: Any, tmp_path: Path
) -> None:
    """The snapshot's slot needs what streaming needs: the streaming source's check, with its
    hint, before Spark or a publication is started (not the slot command's bare error)."""
    from connectors.api import TerminalError

    server = pg_factory(wal_level="replica")
    server.execute("CREATE DATABASE plain")
    _fill(server.dsn(dbname="plain"), 5)
    for mode in ("initial", "initial_only"):
        with pytest.raises(TerminalError) as err:
            job.run(_mode_config(server, "plain", tmp_path, mode))
        assert str(err.value).startswith("wal_level is 'replica' on the server, but logical decoding needs")
        assert err.value.hint == "run ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL"
    assert server.scalar("SELECT count(*) FROM pg_publication", dbname="plain") == 0


def _snapshot_in_chunks(pg: Any, db: str, tmp_path: Path, **extra: Any) -> Any:
    """`tidemark snapshot` (DEBUG log) of 2,000 rows in chunks of 250, two at a time."""
    _fill(pg.dsn(dbname=db), 2000)
    cfg = _mode_config(
        pg,
        db,
        tmp_path,
        "initial_only",
        tidemark__snapshot__chunk__rows=250,
        snapshot__max__threads=2,
        **extra,
    )
    return run_cli("snapshot", "--config", str(cfg.origin.path), "--log-level", "DEBUG")


def test_spark_starts_while_planning_and_chunks_run_in_warmed_workers(
    pg: Any, pg_database: str, tmp_path: Path
) -> None:
    """The job starts Spark on a thread of its own while it exports and plans, then warm-up
    tasks (one per slot) start Python workers and import the chunk task's modules: the chunk
    tasks run in those workers (Spark reuses them). When the warm-up tasks do not overlap (one
    ends before the next starts), they share one worker and a slot's second worker starts with
    its first chunk: never more workers than slots. (Here the driver leaves every chunk to Spark.)"""
    proc = _snapshot_in_chunks(
        pg, pg_database, tmp_path, tidemark__snapshot__read__during__spark__start="false"
    )
    warmed = re.search(r"Python workers \[([\d, ]+)\] started while planning", proc.stderr)
    assert warmed, proc.stderr[-3000:]
    workers = {int(p) for p in warmed.group(1).split(",")}
    slots = min(2, os.cpu_count() or 1)
    ran_in = [
        int(p)
        for p in re.findall(r"snapshot: chunk \d+ of \S+: \d+ rows in \S+ \(process (\d+)\)", proc.stderr)
    ]
    planned = re.search(r"1 tables in (\d+) chunks", proc.stderr)
    assert planned and int(planned.group(1)) >= 4
    assert len(ran_in) == int(planned.group(1)), ran_in
    # (a warmed worker may get no chunk: on a loaded machine a slot's tasks can end before the
    # next one is given out, and the idle worker is reused; that once failed `workers <= ran_in`)
    assert workers & set(ran_in) and len(workers | set(ran_in)) <= slots, (ran_in, workers)
    assert len(read_jsonl(tmp_path / "initial_only.jsonl")) == 2000


def test_the_driver_reads_chunks_while_spark_starts(pg: Any, pg_database: str, tmp_path: Path) -> None:
    """By default the driver reads chunks itself, one at a time and in plan order, until the
    Spark workers are warm; then Spark tasks take the rest. Spark takes seconds to start and
    these chunks milliseconds, so the first chunk is always the driver's; how many more it reads
    depends on the machine, so only what must hold is checked: the driver's chunks are the
    plan's first ones, every row arrives once, the markers are where Debezium puts them, and
    Spark was started and stopped (a Spark that cannot start is reported: test above)."""
    proc = _snapshot_in_chunks(pg, pg_database, tmp_path)
    read = re.findall(
        r"snapshot: chunk (\d+) of \S+: \d+ rows in \S+ \(process (\d+)(, the driver)?", proc.stderr
    )
    planned = re.search(r"1 tables in (\d+) chunks", proc.stderr)
    assert planned and len(read) == int(planned.group(1)) >= 4, proc.stderr[-3000:]
    by_driver = [int(i) for i, _, driver in read if driver]
    assert by_driver and by_driver == list(range(len(by_driver))), read
    assert len({pid for _, pid, driver in read if driver}) == 1
    recs = read_jsonl(tmp_path / "initial_only.jsonl")
    ids = [r["value"]["payload"]["after"]["id"] for r in recs]
    assert sorted(ids) == list(range(1, 2001))
    marks = [r["value"]["payload"]["source"]["snapshot"] for r in recs]
    assert marks[0] == "first" and marks[-1] == "last" and set(marks[1:-1]) == {"true"}


def test_a_planning_error_stops_the_early_session_cleanly(pg: Any, pg_database: str, tmp_path: Path) -> None:
    """Spark is already starting when the plan fails: the job waits for the start and the
    warm-up, stops the session, and ends with the plan's error alone."""
    _fill(pg.dsn(dbname=pg_database), 3)
    cfg = _mode_config(
        pg, pg_database, tmp_path, "initial_only", snapshot__include__collection__list="public.nope"
    )
    proc = run_cli("snapshot", "--config", str(cfg.origin.path), "--log-level", "DEBUG", check=False)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "'public.nope' matches no captured table" in proc.stderr
    assert "started while planning" in proc.stderr  # the warm-up ran to its end, not cancelled
    assert "Traceback" not in proc.stderr and "warming the Python workers" not in proc.stderr


def test_integer_key_chunks_come_from_the_key_range(pg: Any, pg_database: str, tmp_path: Path) -> None:
    """A one-column integer primary key is split by its range (snapshot/int_bounds.py) instead of
    sampled pages: a dense key gets chunks of exactly chunk_rows rows (more than 256 boundaries
    too: several round trips); a smallint key with negative values and a hole gets chunks of at
    most chunk_rows rows, every boundary an existing key, none empty."""
    from connectors.snapshot.postgres import PgSnapshotter

    dsn = pg.dsn(dbname=pg_database)
    _fill(dsn, 20_000)
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE small_keys (id smallint PRIMARY KEY, v int)")
        cur.execute(
            "INSERT INTO small_keys SELECT g, g FROM generate_series(-3000, 2999) g WHERE g NOT BETWEEN 100 AND 1999"
        )
    cfg = _mode_config(pg, pg_database, tmp_path, "initial")
    snap = PgSnapshotter(cfg)
    view = snap.export(reset=False)
    try:
        chunks, _ = snap.plan(view, 1000)
        fine, _ = snap.plan(view, 50)
    finally:
        snap.close()
        view.close()
    items = [c.upper for c in chunks if c.table == "public.items"]
    assert items == [(str(i * 1000),) for i in range(1, 20)] + [None]
    assert [c.upper for c in fine if c.table == "public.items"] == [(str(i * 50),) for i in range(1, 400)] + [
        None
    ]
    small = [c for c in chunks if c.table == "public.small_keys"]
    # candidates -2001, -1001, -1, 999, 1999; the last two both move down to 99 (the hole)
    assert [c.upper for c in small] == [("-2001",), ("-1001",), ("-1",), ("99",), None]
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        sizes = []
        for c in small:
            lo = int(c.lower[0]) if c.lower else -(1 << 15)
            hi = int(c.upper[0]) if c.upper else 1 << 15
            cur.execute("SELECT count(*) FROM small_keys WHERE id > %s AND id <= %s", (lo, hi))
            sizes.append(cur.fetchone()[0])
    assert sizes == [1000, 1000, 1000, 100, 1000]


def test_a_table_dropped_before_its_chunk_is_skipped(
    pg: Any, pg_database: str, tmp_path: Path, spark: Any
) -> None:
    """The plan names a table that is gone by the time its chunk runs (a resumed snapshot reads
    in a fresh view): the chunk is skipped with a warning, the snapshot completes."""
    from connectors.snapshot.postgres import PgSnapshotter, position
    from spark_jobs.snapshot import _read_chunks

    dsn = pg.dsn(dbname=pg_database)
    _fill(dsn, 10, "kept")
    _fill(dsn, 10, "gone")
    cfg = _mode_config(pg, pg_database, tmp_path, "initial")
    snap = PgSnapshotter(cfg)
    view = snap.export(reset=False)
    chunks, _ = snap.plan(view, 1000)
    snap.close()
    view.close()
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE gone")
    fresh = PgSnapshotter(cfg).fresh_view()
    progress = SnapshotProgress(cfg.warehouse, cfg.name)
    rows = _read_chunks(cfg, spark, "s1", fresh.name, position(fresh), chunks, 0, progress, ())
    fresh.close()
    assert rows == 10


def test_snapshot_to_kafka_matches_jsonl(
    pg: Any, pg_database: str, tmp_path: Path, spark: Any, kafka: Any
) -> None:
    """Tasks produce to Kafka with the configured client: the same bytes the jsonl sink writes,
    with the __debezium.context.* headers."""
    _fill(pg.dsn(dbname=pg_database), 1200)
    cfg = load(
        write_config(
            tmp_path / "k.properties",
            pg,
            slot="snapkafka",
            dbname=pg_database,
            prefix="snapk",
            sinks="kafka,jsonl",
            jsonl=tmp_path / "k.jsonl",
            kafka=kafka,
            snapshot__mode="initial_only",
            tidemark__snapshot__chunk__rows=500,
        )
    )
    assert job.run(cfg, spark=spark).rows == 1200
    got = kafka.read_all("snapk.public.items", min_count=1200, timeout=60)
    assert len(got) == 1200
    lines = [ln for ln in (tmp_path / "k.jsonl").read_bytes().splitlines()]
    want = sorted(orjson.dumps(orjson.loads(ln)["value"]) for ln in lines)
    assert sorted(orjson.dumps(orjson.loads(v)) for _k, v, _h in got) == want
    headers = dict(got[0][2])
    assert set(headers) >= {"__debezium.context.connectorLogicalName", "__debezium.context.runId"}


def test_shared_locking_waits_at_most_the_lock_timeout(pg: Any, pg_database: str, tmp_path: Path) -> None:
    """snapshot.locking.mode=shared takes ACCESS SHARE locks while planning, waiting at most
    snapshot.lock.timeout.ms for a session holding an exclusive lock (DDL in progress). The lock
    is taken after the export: an exclusive lock assigns a transaction id, and creating a slot
    waits for every such transaction to end (as it does for Debezium)."""
    from connectors.api import TerminalError
    from connectors.snapshot.postgres import PgSnapshotter

    dsn = pg.dsn(dbname=pg_database)
    _fill(dsn, 5)
    cfg = _mode_config(
        pg,
        pg_database,
        tmp_path,
        "initial",
        snapshot__locking__mode="shared",
        snapshot__lock__timeout__ms=300,
    )
    snap = PgSnapshotter(cfg)
    view = snap.export(reset=False)
    holder = psycopg2.connect(dsn)
    try:
        with holder.cursor() as cur:
            cur.execute("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(TerminalError) as err:
            snap.plan(view, 1000)
        assert "could not be locked within snapshot.lock.timeout.ms=300" in str(err.value)
        holder.rollback()
        chunks, _ = snap.plan(view, 1000)  # the lock gone: planning goes through
        assert [c.table for c in chunks] == ["public.items"]
    finally:
        holder.close()
        view.close()
        snap.close()


def test_spark_submit_runs_the_job(pg: Any, pg_database: str, tmp_path: Path) -> None:
    """`spark-submit spark_jobs/snapshot.py --config FILE`, as a scheduler runs it (the
    virtualenv's bin first on PATH, as after `source .venv/bin/activate`)."""
    _fill(pg.dsn(dbname=pg_database), 100)
    cfg = _mode_config(pg, pg_database, tmp_path, "initial_only")
    result = tmp_path / "outcome.json"
    proc = spark_submit(
        "spark_jobs/snapshot.py",
        "--config",
        str(cfg.origin.path),
        "--result",
        str(result),
        "--log-level",
        "INFO",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # spark-submit's default master is local[*]: loopback, as for `tidemark snapshot`
    said = "Spark master local[*] (spark-submit's --master), driver 127.0.0.1"
    assert said in proc.stdout, proc.stdout[-3000:]  # (spark-submit passes on the job's stderr there)
    assert orjson.loads(result.read_bytes())["rows"] == 100
    assert len(read_jsonl(tmp_path / "initial_only.jsonl")) == 100
