"""Blocking snapshots (`execute-snapshot` with `"type": "blocking"`), end to end on PostgreSQL and
MariaDB: `tidemark run` with the jsonl and delta sinks streams `bench` under a steady mixed write
load; a blocking snapshot is asked through the source signal table and through the Delta channel
(with an `additional-conditions` query); streaming pauses, the snapshot job writes the rows as
`op: r` with the initial snapshot's markers, streaming resumes where it paused, and replaying the
events reproduces the table. A SIGKILL of the connector mid-snapshot: the restart finishes the
snapshot, writes no chunk twice into the Delta change log, and loses no streamed change.
The helpers are the incremental snapshot tests' (tests/incremental.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cdc
import orjson
import pytest
from harness import wait_until
from incremental import (
    SIGNAL_DDL,
    Setup,
    bench_records,
    config_extra,
    mariadb_setup,
    pg_setup,
    replayed,
    snapshot_keys,
    start,
    stop,
    wait_replay_matches,
    writer,
)

from connectors.signals.notify import read_notifications

ROWS = 4000
INITIAL = "Initial Snapshot"  # Debezium's blocking snapshot sends the initial snapshot's notifications
# Spark on the test machine's two cores, without its UI (a faster start).
SETTINGS = {"tidemark__spark__master": "local[2]", "tidemark__spark__conf__spark__ui__enabled": "false"}


# --------------------------------------------------------------------------- without a database
def test_blocking_config_narrows_to_the_tables_and_their_conditions() -> None:
    from cfgutil import config

    from connectors.signals.conditions import check_filter
    from spark_jobs.snapshot import blocking_config

    for connector, quote in (("postgres", '"'), ("mysql", "`")):
        base = config(
            connector, {"snapshot.select.statement.overrides.s.other": "SELECT * FROM s.other WHERE a > 1"}
        )
        cond = check_filter(
            "s.t1", "SELECT * FROM s.t1 WHERE qty < 10 AND name <> 'x'", connector, allow_select=True
        )
        cfg = blocking_config(base, ["s.t1", "s.t2$"], {"s.t1": cond.sql})
        assert cfg.source.snapshot_include_collection_list == ("s\\.t1", "s\\.t2\\$")
        assert cfg.source.select_overrides["s.t1"] == (
            f"SELECT * FROM {quote}s{quote}.{quote}t1{quote} WHERE qty < 10 AND name <> 'x'"
        )
        assert "s.other" in cfg.source.select_overrides  # the file's own overrides stay
        assert base.source.snapshot_include_collection_list == ()


def test_request_is_recorded_once_and_overlaps_are_refused(tmp_path: Path) -> None:
    from cfgutil import config

    from connectors.signals.model import ExecuteSnapshot, SignalError, SignalRecord
    from connectors.signals.notify import Notifier
    from connectors.snapshot.blocking import BlockingSnapshots

    cfg = config("postgres", tidemark__warehouse=str(tmp_path))
    b = BlockingSnapshots(cfg, Notifier(cfg.topic_prefix))
    paused: list[int] = []
    b.pause_stream = lambda: paused.append(1)
    req = ExecuteSnapshot(("public.a",), ("public.a",), "blocking", (), None)
    sig = SignalRecord("s1", "execute-snapshot", None, "delta", "delta:s1")
    assert "blocking snapshot" in b.request(req, sig)
    # the same delivery again (a crash before the journal's `processed` row): not a second snapshot
    assert b.request(req, sig).startswith("already requested")
    assert len(b.pending()) == 1 and len(paused) == 2
    with pytest.raises(SignalError, match="public.a is already pending"):
        b.request(req, SignalRecord("s2", "execute-snapshot", None, "delta", "delta:s2"))
    b._record(b.pending()[0], "completed")
    assert b.pending() == []
    b.request(req, SignalRecord("s3", "execute-snapshot", None, "delta", "delta:s3"))  # free again
    assert [orjson.loads(r["request"])["tables"] for r in b.pending()] == [["public.a"]]


# --------------------------------------------------------------------------- end to end
def _pg(pg: Any, db: str, tmp_path: Path, slot: str, chunk_rows: int = 2500) -> Setup:
    extra = config_extra(**SETTINGS, tidemark__snapshot__chunk__rows=str(chunk_rows))
    return pg_setup(pg, db, tmp_path, slot, **extra)


def _maria(mariadb: Any, db: str, tmp_path: Path, server_id: int, chunk_rows: int = 1500) -> Setup:
    extra = config_extra(**SETTINGS, tidemark__snapshot__chunk__rows=str(chunk_rows))
    return mariadb_setup(mariadb, db, tmp_path, server_id, **extra)


def _notices(s: Setup, kind: str | None = None) -> list[dict[str, Any]]:
    return [
        n
        for n in read_notifications(s.warehouse, s.name)
        if n["aggregate_type"] == INITIAL and (kind is None or n["type"] == kind)
    ]


def _wait_completed(s: Setup, count: int, log: Path, timeout: float = 120, errors: int = 0) -> None:
    def done() -> bool:
        if len(s.errors()) > errors:
            raise AssertionError(f"a signal was refused: {s.errors()}")
        return len(_notices(s, "COMPLETED")) >= count

    wait_until(done, timeout, f"{count} blocking snapshot(s) completed (log: {log})")


def _snapshots(s: Setup) -> list[list[dict[str, Any]]]:
    """The `op: r` payloads of `bench` in the jsonl output, one list per snapshot (a snapshot's
    first row is marked `first`)."""
    out: list[list[dict[str, Any]]] = []
    for r in bench_records(s.jsonl):
        p = cdc.payload(r) if r["value"] else None
        if p and p["op"] == "r":
            if p["source"]["snapshot"] == "first" or not out:
                out.append([])
            out[-1].append(p)
    return out


def _streamed(s: Setup, row_id: int) -> bool:
    return any(
        r["value"] and (cdc.payload(r).get("after") or {}).get("id") == row_id
        for r in cdc.read_bench_jsonl(s.jsonl, ".bench")  # (polled: the light reader)
    )


def _prepare(s: Setup, tmp_path: Path) -> Path:
    s.sql(SIGNAL_DDL)
    cdc.create_bench(s.connect, s.dialect, ROWS)
    return tmp_path / "connector.log"


def _changelog_snapshots(s: Setup) -> dict[int, list[int]]:
    """The Delta change log's `op: r` keys of `bench` by batch seq (one seq per snapshot)."""
    out: dict[int, list[int]] = {}
    for r in cdc.delta_rows(s.changelog, ["op", "key", "topic", "batch_seq"]):
        if r["op"] == "r" and r["topic"].endswith(".bench"):
            out.setdefault(r["batch_seq"], []).append(orjson.loads(r["key"])["id"])
    return out


def source_channel_under_writes(s: Setup, tmp_path: Path) -> None:
    """A blocking snapshot asked in the source signal table, under writes: the rows arrive as
    `op: r` with the initial snapshot's markers, streaming resumes, the replay gives the table."""
    log = _prepare(s, tmp_path)
    proc = start(s, log)
    try:
        with writer(s, ROWS + 1, seed=3) as done:
            s.source_signal(
                "blk-src", "execute-snapshot", {"data-collections": [f"{s.ns}.bench"], "type": "blocking"}
            )
            _wait_completed(s, 1, log)
            # streaming resumed: a change made now arrives
            s.sql("INSERT INTO bench VALUES (%s, 'after', 1, 'x')", (10**8,))
            wait_until(lambda: _streamed(s, 10**8), 60, "a change streamed after the snapshot")
        assert done[0] > 100, f"only {done[0]} writes overlapped the snapshot"
        wait_replay_matches(s)
    finally:
        stop(proc)
    assert replayed(s.jsonl) == cdc.bench_state(s.connect)
    (one,) = _snapshots(s)
    ids = [p["after"]["id"] for p in one]
    assert len(ids) == len(set(ids)) and len(ids) >= ROWS, len(ids)
    assert [p["source"]["snapshot"] for p in (one[0], one[-1])] == ["first", "last"]
    assert {p["source"]["snapshot"] for p in one[1:-1]} == {"true"}
    assert all(p["before"] is None and p["source"]["table"] == "bench" for p in one)
    # the Delta change log: the snapshot's rows once, under a batch seq of their own
    (keys,) = _changelog_snapshots(s).values()
    assert sorted(keys) == sorted(ids)
    kinds = [n["type"] for n in _notices(s)]
    assert kinds.count("STARTED") == 1 and kinds.count("COMPLETED") == 1, kinds
    assert kinds.count("TABLE_SCAN_COMPLETED") == 1 and "IN_PROGRESS" in kinds
    scan = _notices(s, "TABLE_SCAN_COMPLETED")[0]["additional_data"]
    assert scan["status"] == "SUCCEEDED" and int(scan["total_rows_scanned"]) == len(one)
    assert scan["scanned_collection"] == f"{s.ns}.bench"
    text = log.read_text()
    assert "streaming paused for blocking snapshot" in text and "streaming resumes" in text


def _server_refused(s: Setup) -> list[tuple[str, dict[str, str]]]:
    """A condition the signal check passes (its columns and functions are the table's and
    allowed) that the server refuses: PostgreSQL types the literal. The snapshot job asks the
    database before it reads (no Spark started), fails with the condition named, and streaming
    goes on. (MariaDB compares an integer with any text, so it has no such case.)"""
    return [("blk-type", {"filter": "qty < 'many'"})] if s.dialect == "postgres" else []


def conditions_and_bad_input(s: Setup, tmp_path: Path) -> None:
    """Through the Delta channel (`tidemark signal`), with a whole SELECT as the filter
    (Debezium's blocking form): only the matching rows are read, and streaming goes on after.
    Bad requests are refused with an error notification. (No replay check: the stream starts
    without an initial snapshot and this one reads a part of the table.)"""
    log = _prepare(s, tmp_path)
    proc = start(s, log)
    try:
        with writer(s, ROWS + 1, seed=5):
            for sid, data in (
                ("blk-inject", {"filter": "qty < 10; DROP TABLE bench"}),
                (
                    "blk-sub",
                    {"filter": f"SELECT * FROM {s.ns}.bench WHERE id IN (SELECT id FROM debezium_signal)"},
                ),
                *_server_refused(s),
            ):
                s.source_signal(
                    sid,
                    "execute-snapshot",
                    {
                        "type": "blocking",
                        "data-collections": [f"{s.ns}.bench"],
                        "additional-conditions": [{"data-collection": f"{s.ns}.bench", **data}],
                    },
                )
            s.source_signal(
                "blk-nothere",
                "execute-snapshot",
                {"type": "blocking", "data-collections": [f"{s.ns}.nothere"]},
            )
            bad = 3 + len(_server_refused(s))
            wait_until(lambda: len(s.errors()) >= bad, 60, "the bad blocking signals refused")
            s.cli_signal(
                "execute-snapshot",
                "--type",
                "blocking",
                "--tables",
                f"{s.ns}.bench",
                "--filter",
                f"{s.ns}.bench=SELECT * FROM {s.ns}.bench WHERE qty < 10",
            )
            _wait_completed(s, 1, log, errors=bad)
            s.sql("INSERT INTO bench VALUES (%s, 'after', 1, 'x')", (10**8,))
            wait_until(lambda: _streamed(s, 10**8), 60, "a change streamed after the snapshot")
    finally:
        stop(proc)
    errors = {e["additional_data"]["signal_id"]: e["additional_data"]["message"] for e in s.errors()}
    assert "must be one condition" in errors["blk-inject"], errors
    assert "only (it reads debezium_signal)" in errors["blk-sub"], errors
    assert "matches no captured table" in errors["blk-nothere"], errors
    if _server_refused(s):
        refused = errors["blk-type"]
        assert refused.startswith(f"the execute-snapshot signal's additional-conditions for {s.ns}.bench: ")
        assert "the database refused it: invalid input syntax for type integer" in refused, refused
    (two,) = _snapshots(s)
    assert all(p["after"]["qty"] < 10 for p in two)  # additional-conditions honoured
    assert len(two) >= ROWS // 20, len(two)  # bench's fill gives a tenth of the rows qty < 10
    assert len(two) == len({p["after"]["id"] for p in two})


def sigkill_mid_snapshot(s: Setup, tmp_path: Path) -> None:
    """SIGKILL of the connector once a chunk is in the Delta change log: the restart resumes the
    snapshot before streaming on, no chunk is written twice, no streamed change is lost."""
    log = _prepare(s, tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with writer(s, ROWS + 1, seed=4) as done:
        proc = start(s, log, tmpdir=tmp)
        try:
            s.source_signal(
                "blk-kill", "execute-snapshot", {"data-collections": [f"{s.ns}.bench"], "type": "blocking"}
            )
            wait_until(lambda: len(snapshot_keys(s.changelog)) >= 400, 120, "a chunk snapshotted")
            assert not _notices(s, "COMPLETED"), "the snapshot ended before the kill"
            jobs = list(tmp.glob("tidemark-job-*"))
            assert jobs, "no directory of the running snapshot job"
            # The request (the configuration, passwords included) went over the job's stdin.
            assert not [p for d in jobs for p in d.iterdir()], "the job's request is in a file"
            cdc._sigkill(proc)  # the connector only: its snapshot job must end by itself
            # ... and remove the directory the connector made for it
            wait_until(lambda: not any(d.exists() for d in jobs), 30, "the killed connector's job gone")
            proc = start(s, log)
            _wait_completed(s, 1, log)
            s.sql("INSERT INTO bench VALUES (%s, 'after kill', 1, 'x')", (10**8,))
            wait_until(lambda: _streamed(s, 10**8), 60, "a change streamed after the snapshot")
        except BaseException:
            if proc.poll() is None:
                stop(proc)
            raise
        assert done[0] > 100
    try:
        wait_replay_matches(s)
    finally:
        stop(proc)
    keys = snapshot_keys(s.changelog)
    assert len(keys) == len(set(keys)), "a chunk was written twice into the Delta change log"
    assert len(keys) >= ROWS
    assert len(_notices(s, "COMPLETED")) == 1
    assert "resuming" in log.read_text()


@pytest.mark.timeout(240)
def test_pg_blocking_snapshot_under_writes(pg: Any, pg_database: str, tmp_path: Path) -> None:
    source_channel_under_writes(_pg(pg, pg_database, tmp_path, "blkpg1"), tmp_path)


@pytest.mark.timeout(240)
def test_pg_blocking_conditions_and_bad_input(pg: Any, pg_database: str, tmp_path: Path) -> None:
    conditions_and_bad_input(_pg(pg, pg_database, tmp_path, "blkpg2"), tmp_path)


@pytest.mark.timeout(300)
def test_pg_sigkill_mid_blocking_snapshot(pg: Any, pg_database: str, tmp_path: Path) -> None:
    sigkill_mid_snapshot(_pg(pg, pg_database, tmp_path, "blkpg3", chunk_rows=400), tmp_path)


@pytest.mark.timeout(240)
def test_mariadb_blocking_snapshot_under_writes(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    source_channel_under_writes(_maria(mariadb, mariadb_database, tmp_path, 7401), tmp_path)


@pytest.mark.timeout(240)
def test_mariadb_blocking_conditions_and_bad_input(
    mariadb: Any, mariadb_database: str, tmp_path: Path
) -> None:
    conditions_and_bad_input(_maria(mariadb, mariadb_database, tmp_path, 7402), tmp_path)


@pytest.mark.timeout(300)
def test_mariadb_sigkill_mid_blocking_snapshot(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    sigkill_mid_snapshot(_maria(mariadb, mariadb_database, tmp_path, 7403, chunk_rows=150), tmp_path)
