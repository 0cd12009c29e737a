"""MariaDB initial snapshots end to end: `tidemark run` snapshots (lock-based consistent view, chunks
read by driver threads) and then streams from the view's binlog position; a SIGKILL mid-snapshot
resumes; include.schema.changes emits the schema snapshot's events first."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import orjson
from cdc import replay, run_cli
from harness import wait_until
from mycdc import write_config

from connectors.settings.config import load
from connectors.snapshot.progress import SnapshotProgress

ROOT = Path(__file__).resolve().parents[1]
ROWS = int(os.environ.get("TIDEMARK_SNAPSHOT_TEST_ROWS", "500000"))


def _table(db: Any, name: str, n: int) -> None:
    db.execute(
        "CREATE TABLE bench (id bigint PRIMARY KEY, name varchar(64), qty int, note text)", database=name
    )
    db.execute(
        "INSERT INTO bench SELECT seq, concat('name ', seq), seq % 100, repeat('x', 64) FROM seq_1_to_"
        + str(n),
        database=name,
    )


def _state(db: Any, name: str) -> dict[int, tuple[str, int]]:
    conn = db.connect(database=name)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id, name, qty FROM bench")
            return {int(i): (n, int(q)) for i, n, q in cur.fetchall()}
    finally:
        conn.close()


def _replay(path: Path) -> tuple[dict[int, tuple[str, int]], list[dict[str, Any]]]:
    recs = [orjson.loads(ln) for ln in path.read_bytes().splitlines()]
    return replay(recs), recs


def _writer(db: Any, name: str, stop: threading.Event, first: int, done: list[int]) -> None:
    rnd = random.Random(11)
    conn = db.connect(database=name)
    nxt = first
    try:
        with conn.cursor() as cur:
            while not stop.is_set():
                op = rnd.random()
                if op < 0.4:
                    cur.execute("INSERT INTO bench VALUES (%s, %s, 1, 'new')", (nxt, f"new {nxt}"))
                    nxt += 1
                elif op < 0.8:
                    cur.execute(
                        "UPDATE bench SET qty = qty + 1, name = concat(name, '+') WHERE id = %s",
                        (rnd.randint(1, nxt - 1),),
                    )
                else:
                    cur.execute("DELETE FROM bench WHERE id = %s", (rnd.randint(1, nxt - 1),))
                done[0] += 1
    finally:
        conn.close()


def test_run_snapshots_then_streams_under_concurrent_writes(
    mariadb: Any, mariadb_database: str, tmp_path: Path
) -> None:
    db = mariadb_database
    _table(mariadb, db, ROWS)
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
        tidemark__snapshot__chunk__rows=max(1000, ROWS // 8),
    )
    stop, done = threading.Event(), [0]
    writer = threading.Thread(target=_writer, args=(mariadb, db, stop, ROWS + 1, done), daemon=True)
    writer.start()
    try:
        proc = run_cli("run", "--config", str(cfg), "--until-caught-up", timeout=900)
    finally:
        stop.set()
        writer.join(timeout=30)
    assert done[0] > 50, f"only {done[0]} concurrent writes"
    assert "completed" in proc.stderr
    run_cli("run", "--config", str(cfg), "--until-caught-up", timeout=300)
    state, recs = _replay(out)
    assert state == _state(mariadb, db)
    # the schema snapshot's events come first, on the <topic.prefix> topic (Debezium's order:
    # SET character_set_server ..., DROP TABLE ..., ..., CREATE TABLE ...)
    assert recs[0]["topic"] == "tm" and recs[0]["value"]["payload"]["ddl"].startswith(
        "SET character_set_server="
    )
    assert any(r["topic"] == "tm" and r["value"]["payload"]["ddl"].startswith("CREATE TABLE") for r in recs)
    snap = [r for r in recs if r["value"] and r["value"]["payload"].get("op") == "r"]
    assert len({r["key"]["payload"]["id"] for r in snap}) == len(snap)
    marks = [r["value"]["payload"]["source"]["snapshot"] for r in snap]
    assert marks.count("first") == 1 and marks.count("last") == 1


def test_sigkill_mid_snapshot_resumes(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    db = mariadb_database
    n = max(40_000, ROWS // 5)
    _table(mariadb, db, n)
    out = tmp_path / "out.jsonl"
    cfg_path = write_config(
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
    cfg = load(cfg_path)
    progress = SnapshotProgress(cfg.warehouse, cfg.name)
    log = tmp_path / "first.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "connectors.app.cli", "run", "--config", str(cfg_path)],
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        wait_until(
            lambda: (s := progress.latest()) is not None and len(s.done) >= 2,
            timeout=300,
            what="two chunks done",
        )
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    state = progress.latest()
    assert state is not None and not state.completed, log.read_text()[-3000:]
    mariadb.execute("UPDATE bench SET qty = 1000 WHERE id = 1", database=db)  # lands between the two views
    second = run_cli("run", "--config", str(cfg_path), "--until-caught-up", timeout=600)
    assert "resuming" in second.stderr
    from deltalake import DeltaTable

    t = DeltaTable(str(tmp_path / "warehouse" / "tm" / "changelog")).to_pyarrow_table(columns=["op", "key"])
    keys = [
        orjson.loads(k)["id"]
        for k, op in zip(t["key"].to_pylist(), t["op"].to_pylist(), strict=True)
        if op == "r"
    ]
    assert len(keys) == n and len(set(keys)) == n
    assert _replay(out)[0] == _state(mariadb, db)


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
    run_cli("run", "--config", str(streaming), "--until-caught-up")
    mariadb.execute("INSERT INTO bench VALUES (1, 'a', 1)", database=db)
    run_cli("run", "--config", str(streaming), "--until-caught-up")  # stores an offset
    cfg = load(streaming)
    DeltaSchemaHistory(cfg.warehouse, cfg.name).reset()  # the history is lost
    mariadb.execute("INSERT INTO bench VALUES (2, 'b', 2)", database=db)
    lost = run_cli("run", "--config", str(streaming), "--until-caught-up", check=False)
    assert lost.returncode == 1 and "start once with snapshot.mode=recovery" in lost.stderr
    recovery = write_config(tmp_path / "r.properties", mariadb, snapshot__mode="recovery", **kw)
    run_cli("run", "--config", str(recovery), "--until-caught-up")
    assert sorted(replay([orjson.loads(x) for x in out.read_bytes().splitlines()])) == [1, 2]  # nothing lost
    # now a table changes while the history is lost again: recovery must refuse
    DeltaSchemaHistory(cfg.warehouse, cfg.name).reset()
    mariadb.execute("ALTER TABLE bench ADD COLUMN note text", database=db)
    refused = run_cli("run", "--config", str(recovery), "--until-caught-up", check=False)
    assert refused.returncode == 1 and "the schema changed after the stored position" in refused.stderr
    assert "ALTER TABLE bench ADD COLUMN note text" in refused.stderr and "Traceback" not in refused.stderr
