"""What the snapshot job tells while it runs: on a terminal, a bar with tables done/total, rows and
rows/s on stderr (stdout untouched); Debezium's "Initial Snapshot" notifications on the enabled
notification channels."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path
from typing import Any

import cdc
from mycdc import write_config


def _run_with_tty_stderr(args: list[str], timeout: float = 240) -> tuple[int, str, bytes]:
    """Run with stderr on a pseudo-terminal (stdout a pipe): (exit code, terminal text, stdout)."""
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(cdc.ROOT))
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=env, cwd=cdc.ROOT
    )
    os.close(slave)
    seen = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the terminal closed: the process ended
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        out = proc.stdout.read() if proc.stdout else b""
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return code, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode(errors="replace")), out


def test_terminal_progress_bar(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    db = mariadb_database
    for t in ("a", "b"):
        mariadb.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)", database=db)
        mariadb.execute(f"INSERT INTO {t} SELECT seq, 'x' FROM seq_1_to_3000", database=db)
    cfg = write_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=7421,
        db=db,
        sinks="jsonl",
        jsonl=tmp_path / "out.jsonl",
        snapshot__mode="initial_only",
        tidemark__snapshot__chunk__rows=1000,
    )
    code, text, out = _run_with_tty_stderr([*cdc.TIDEMARK, "snapshot", "--config", str(cfg)])
    assert code == 0, text[-3000:]
    assert "snapshot" in text and "2/2 tables" in text and "6,000 rows" in text and "rows/s" in text, text[
        -3000:
    ]
    assert b"tables" not in out  # the bar is on stderr only


def test_initial_snapshot_notifications(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    from connectors.signals.notify import read_notifications

    db = mariadb_database
    for t, n in (("a", 2500), ("b", 10)):
        mariadb.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)", database=db)
        mariadb.execute(f"INSERT INTO {t} SELECT seq, 'x' FROM seq_1_to_{n}", database=db)
    cfg = write_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=7422,
        db=db,
        sinks="jsonl",
        jsonl=tmp_path / "out.jsonl",
        snapshot__mode="initial",
        notification__enabled__channels="delta,log",
        tidemark__snapshot__chunk__rows=1000,
    )
    first = cdc.run_cli("snapshot", "--config", str(cfg))
    cdc.run_cli("snapshot", "--config", str(cfg))  # a snapshot completed: skipped
    rows = read_notifications(tmp_path / "warehouse", "tm")
    kinds = [(r["aggregate_type"], r["type"]) for r in rows]
    assert {a for a, _ in kinds} == {"Initial Snapshot"}
    assert [k for _, k in kinds] == [
        "STARTED",
        "IN_PROGRESS",
        "IN_PROGRESS",
        "TABLE_SCAN_COMPLETED",
        "TABLE_SCAN_COMPLETED",
        "COMPLETED",
        "SKIPPED",
    ] or [k for _, k in kinds] == [
        "STARTED",
        "IN_PROGRESS",
        "TABLE_SCAN_COMPLETED",
        "IN_PROGRESS",
        "TABLE_SCAN_COMPLETED",
        "COMPLETED",
        "SKIPPED",
    ], kinds
    scans = {
        r["additional_data"]["scanned_collection"]: r["additional_data"]
        for r in rows
        if r["type"] == "TABLE_SCAN_COMPLETED"
    }
    assert {t: d["total_rows_scanned"] for t, d in scans.items()} == {f"{db}.a": "2500", f"{db}.b": "10"}
    assert all(d["status"] == "SUCCEEDED" and d["connector_name"] == "tm" for d in scans.values())
    progress = next(r for r in rows if r["type"] == "IN_PROGRESS")["additional_data"]
    assert (
        progress["data_collections"] == f"{db}.a,{db}.b"
        and progress["current_collection_in_progress"] == f"{db}.a"
    )
    assert "Initial Snapshot" in first.stderr  # the log channel
