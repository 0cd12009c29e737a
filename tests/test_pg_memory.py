"""Memory of the PostgreSQL path for one large value (issue 8 #11): a 50 MB text value must cost
a small multiple of its size, not 1.3 GB."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from cdc import payload, peak_rss_kb, popen_cli, read_jsonl, rss_kb
from harness import wait_until
from pgcdc import write_config

SIZE = 50_000_000
# What one such value needs at the same time, above the idle process, with the jsonl sink: libpq's
# input buffer (kept for the connection's life), the str, its JSON text and the sink's joined
# output — 4 copies, measured 190 MB. Before, the decoder's sliced copy and the raw payload kept
# alive while the sinks wrote made it 238 MB.
BOUND_KB = 215 * 1024


def _tail_has(path: Path, needle: bytes) -> bool:
    if not path.exists():
        return False
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - 4096))
        return needle in f.read()


def test_50mb_text_value_in_bounded_memory(
    pg: Any, pg_database: str, tmp_path: Path, unique_name: Any
) -> None:
    conn = pg.connect(dbname=pg_database)
    cur = conn.cursor()
    cur.execute("CREATE TABLE big (id int PRIMARY KEY, v text)")
    out = tmp_path / "events.jsonl"
    slot = unique_name("slot")
    cfg = write_config(tmp_path / "c.properties", pg, slot=slot, jsonl=out, dbname=pg_database)
    log = tmp_path / "run.log"
    proc = popen_cli("run", "--config", str(cfg), log=log)
    try:
        wait_until(
            lambda: (
                pg.scalar(
                    "SELECT count(*) FROM pg_stat_replication WHERE application_name = "
                    "'tidemark' AND reply_time IS NOT NULL"
                )
                >= 1
            ),
            timeout=60,
            what="streaming",
        )
        # One change through the whole path first, until its offset is stored and confirmed:
        # the first offset save loads delta-rs (some 70 MB), which is no part of the value's cost.
        cur.execute("INSERT INTO big VALUES (0, 'warm-up')")
        cur.execute("SELECT pg_current_wal_lsn()")
        warm_lsn = cur.fetchone()[0]
        wait_until(
            lambda: pg.scalar(
                "SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots WHERE slot_name = %s",
                (warm_lsn, slot),
            ),
            timeout=60,
            what="the warm-up row stored and confirmed",
        )
        idle = rss_kb(proc.pid)
        cur.execute("INSERT INTO big SELECT 1, repeat('abcdefghij', %s)", (SIZE // 10,))
        cur.execute("INSERT INTO big VALUES (2, 'after')")
        wait_until(lambda: _tail_has(out, b'"v":"after"'), timeout=180, what="the large value delivered")
        peak = peak_rss_kb(proc.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        conn.close()
        if proc.poll() is None:
            proc.kill()
    values = {payload(r)["after"]["id"]: payload(r)["after"]["v"] for r in read_jsonl(out)}
    assert len(values[1]) == SIZE and values[2] == "after"
    grew = peak - idle
    print(f"50 MB value: peak RSS {peak // 1024} MB, {grew // 1024} MB above idle ({idle // 1024} MB)")
    assert grew < BOUND_KB, (
        f"a 50 MB value took {grew // 1024} MB above idle RSS (bound {BOUND_KB // 1024} MB)"
    )
