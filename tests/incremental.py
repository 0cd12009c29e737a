"""Helpers of the incremental snapshot tests (tests/test_incremental_snapshot_*.py): a connector
streaming `bench` with the signal table captured, signals through each channel, the
notifications, and the checks (replay reproduces the table; no key read twice per snapshot)."""

from __future__ import annotations

import os
import signal as os_signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import cdc
import mycdc
import orjson
import pgcdc
from deltalake.exceptions import TableNotFoundError
from harness import wait_until

from connectors.settings.config import load
from connectors.signals.notify import read_notifications
from connectors.signals.tables import now, signals_table

# The incremental snapshot tests' `bench` rows (the issue's run: 500000).
ROWS = int(os.environ.get("TIDEMARK_INCREMENTAL_TEST_ROWS", "20000"))
SIGNAL_DDL = "CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data text)"
INCREMENTAL = "Incremental Snapshot"
# SIGKILLs per connector in the kill tests (the run: 5).
TRIALS = int(os.environ.get("TIDEMARK_INCREMENTAL_TEST_TRIALS", "3"))
# How long a snapshot of ROWS may take: 300 s, or 200 rows/s for the big runs (a loaded machine)
COMPLETE_S = max(300.0, ROWS / 200)
WRITE_RATE = int(os.environ.get("TIDEMARK_INCREMENTAL_TEST_WRITES", "300"))  # writes/s during the tests


@dataclass
class Setup:
    cfg: Path
    jsonl: Path
    changelog: Path
    connect: Callable[[], Any]  # autocommit DB-API connection to the captured database
    dialect: str  # cdc.BENCH_SQL key
    ns: str  # "public" / the MariaDB database: how data-collections name the tables
    # read.only=true (tests/test_incremental_readonly_mariadb.py): `source_signal` writes its
    # signal to the Delta channel instead (same id), and no watermark row may reach the database
    read_only: bool = False

    @property
    def name(self) -> str:
        return load(self.cfg).name

    @property
    def warehouse(self) -> Path:
        return Path(load(self.cfg).warehouse)

    def sql(self, statement: str, params: Any = None) -> None:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(statement, params)
        finally:
            conn.close()

    def source_signal(self, sid: str, kind: str, data: dict[str, Any]) -> None:
        if self.read_only:
            row = {"id": sid, "type": kind, "data": orjson.dumps(data).decode(), "connector": self.name}
            signals_table(self.warehouse).append([{**row, "created_at": now()}])
            return
        self.sql(
            "INSERT INTO debezium_signal (id, type, data) VALUES (%s, %s, %s)",
            (sid, kind, orjson.dumps(data).decode()),
        )

    def cli_signal(self, *args: str) -> None:
        cdc.run_cli("signal", "--config", str(self.cfg), *args)

    def notifications(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [
            n
            for n in read_notifications(self.warehouse, self.name)
            if n["aggregate_type"] == INCREMENTAL and (kind is None or n["type"] == kind)
        ]

    def errors(self) -> list[dict[str, Any]]:
        return [n for n in read_notifications(self.warehouse, self.name) if n["aggregate_type"] == "Signal"]


def pg_setup(pg: Any, db: str, tmp_path: Path, slot: str, **config: Any) -> Setup:
    """A connector streaming `db` of the private PostgreSQL into jsonl and Delta, signals in
    public.debezium_signal; `config`: more properties (`__` for `.`)."""
    jsonl = tmp_path / "out.jsonl"
    cfg = pgcdc.write_config(
        tmp_path / "pg.properties",
        pg,
        slot=slot,
        dbname=db,
        sinks="jsonl,delta",
        jsonl=jsonl,
        signal__data__collection="public.debezium_signal",
        **config,
    )
    changelog = tmp_path / "warehouse" / "tm" / "changelog"
    return Setup(cfg, jsonl, changelog, partial(pg.connect, dbname=db), "postgres", "public")


def mariadb_setup(
    mariadb: Any, db: str, tmp_path: Path, server_id: int, *, read_only: bool = False, **config: Any
) -> Setup:
    """The same for `db` of the private MariaDB (signals in `<db>.debezium_signal`, or with
    `read_only` none: read.only=true)."""
    jsonl = tmp_path / "out.jsonl"
    signalling = (
        {"read__only": "true"} if read_only else {"signal__data__collection": f"{db}.debezium_signal"}
    )
    cfg = mycdc.write_config(
        tmp_path / "my.properties",
        mariadb,
        server_id=server_id,
        db=db,
        sinks="jsonl,delta",
        jsonl=jsonl,
        **signalling,
        **config,
    )
    changelog = tmp_path / "warehouse" / "tm" / "changelog"
    return Setup(
        cfg, jsonl, changelog, partial(mariadb.connect, database=db), "mysql", db, read_only=read_only
    )


def config_extra(channels: str = "source,delta", **more: Any) -> dict[str, Any]:
    return {
        "signal__enabled__channels": channels,
        "signal__poll__interval__ms": "200",
        "notification__enabled__channels": "log,delta",
        **more,
    }


def topic_records(jsonl: Path, suffix: str) -> list[dict[str, Any]]:
    """The jsonl records of the topics ending with `suffix` (tombstones too)."""
    return [r for r in cdc.read_jsonl(jsonl) if r["topic"].endswith(suffix)]


def bench_records(jsonl: Path) -> list[dict[str, Any]]:
    return topic_records(jsonl, ".bench")


def replayed(jsonl: Path) -> dict[int, tuple[str, int]]:
    return cdc.replay(cdc.read_bench_jsonl(jsonl, ".bench"))  # (polled: the light reader)


def snapshot_keys(changelog: Path, after_seq: int = -1, upto_seq: int | None = None) -> list[int]:
    """The ids of the `bench` rows the Delta change log holds as `op: r` (batches after
    `after_seq`, up to `upto_seq`)."""
    try:
        rows = cdc.delta_rows(changelog, ["op", "key", "topic", "batch_seq"])
    except TableNotFoundError:  # not written yet
        return []
    return [
        orjson.loads(r["key"])["id"]
        for r in rows
        if r["op"] == "r"
        and r["topic"].endswith(".bench")
        and after_seq < r["batch_seq"] <= (upto_seq if upto_seq is not None else r["batch_seq"])
    ]


def last_seq(changelog: Path) -> int:
    try:
        rows = cdc.delta_rows(changelog, ["batch_seq"])
    except TableNotFoundError:
        return -1
    return max((r["batch_seq"] for r in rows), default=-1)


@contextmanager
def writer(s: Setup, first_id: int, seed: int) -> Iterator[list[int]]:
    """`cdc.bench_writer` (paced) in a thread for the duration of the block; yields its counter."""
    stop, done = threading.Event(), [0]

    def paced() -> Any:
        return cdc.Paced(s.connect(), WRITE_RATE)

    t = threading.Thread(target=cdc.bench_writer, args=(paced, s.dialect, stop, first_id, done, seed))
    t.start()
    try:
        yield done
    finally:
        stop.set()
        t.join(60)


def start(s: Setup, log: Path, tmpdir: Path | None = None) -> subprocess.Popen[bytes]:
    """`tidemark run` in the background, once its stream delivers (the slot / binlog position is
    taken at start: a marker row is inserted until one lands). `tmpdir`: its TMPDIR."""
    # Only what this connector writes is looked at (the file grows to hundreds of MB with a
    # big snapshot: reading it all every poll made a restart take longer each time).
    since = s.jsonl.stat().st_size if s.jsonl.exists() else 0
    proc = cdc.popen_cli("run", "--config", str(s.cfg), log=log, tmpdir=tmpdir)
    marks = iter(range(-1, -(10**9), -1))  # below every snapshot key range

    def streaming() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"the connector exited {proc.returncode}: {log.read_text()[-3000:]}")
        s.sql("INSERT INTO bench (id, name, qty, note) VALUES (%s, 'mark', 0, 'mark')", (next(marks),))
        if not s.jsonl.exists():
            return False
        with s.jsonl.open("rb") as f:
            f.seek(since)
            tail = f.read()
        for line in tail.splitlines():
            if b'"op":"c"' not in line:
                continue
            try:
                r = orjson.loads(line)
            except orjson.JSONDecodeError:  # (the line being written)
                continue
            if r["topic"].endswith(".bench") and cdc.payload(r).get("op") == "c":
                return True
        return False

    wait_until(streaming, 90, "the stream is running", interval=0.5)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(os_signal.SIGTERM)
        assert proc.wait(90) == 0


_marks = iter(range(-(10**9), -(2 * 10**9), -1))


def wait_completed(s: Setup, count: int, log: Path, timeout: float = COMPLETE_S) -> None:
    """Until `count` snapshots sent COMPLETED, and the stream is past that point (COMPLETED is
    sent once the last close watermark is in the log: a row inserted now lands after the
    snapshot's last rows, in both sinks)."""
    wait_until(
        lambda: len(s.notifications("COMPLETED")) >= count,
        timeout,
        f"{count} incremental snapshot(s) completed (log: {log})",
    )
    mark = next(_marks)
    s.sql("INSERT INTO bench (id, name, qty, note) VALUES (%s, 'mark', 0, 'mark')", (mark,))

    def landed() -> bool:
        in_jsonl = any(
            r["value"] and (cdc.payload(r).get("after") or {}).get("id") == mark
            for r in cdc.read_bench_jsonl(s.jsonl, ".bench")
        )
        return in_jsonl and mark in delta_ids(s.changelog)

    wait_until(landed, 120, "the stream past the snapshot's end")


def delta_ids(changelog: Path) -> set[int]:
    try:
        rows = cdc.delta_rows(changelog, ["key", "topic"])
    except TableNotFoundError:
        return set()
    return {orjson.loads(r["key"])["id"] for r in rows if r["topic"].endswith(".bench") and r["key"]}


def wait_replay_matches(s: Setup, timeout: float = 120) -> None:
    """The writes are over: the stream catches up and replaying the jsonl records gives the table."""
    state = cdc.bench_state(s.connect)
    wait_until(lambda: replayed(s.jsonl) == state, timeout, "the replayed events equal the table")
