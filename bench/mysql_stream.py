"""MySQL/MariaDB streaming benchmark: Tidemark vs a bare mysql-replication (BinLogStreamReader) loop.

    .venv/bin/python bench/mysql_stream.py [--events N] [--quick] [--profile]

One private MariaDB (ROW binlog, FULL images and metadata, GTIDs) and one tansu broker. For each
workload shape (N single-row transactions, then N rows in 1,000-row transactions) every Tidemark
consumer is started once *before* the workload with its own fresh warehouse (no offsets: it stores
the current binlog position and stops, `--until-caught-up`); the binlog position (file/pos and
GTID) is recorded, the workload is written while nothing consumes, then each consumer catches up
from its stored position, one at a time, and the bare `BinLogStreamReader` loop reads the same
binlog range from the recorded file/pos. Prints one JSON line per figure on stdout; logs go to
stderr. See README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import (
    ROOT,
    TIDEMARK_CONSUMERS,
    add_common_args,
    bench_session,
    emit,
    log,
    profile_tidemark,
    run_tidemark,
    selection,
    sink_props,
    tidemark_line,
    write_properties,
)

BENCH_NAME = "mysql_stream"
DB = "benchdb"
TABLE = "bench"
RAW = "mysql_replication_raw"
ALL_CONSUMERS = [*TIDEMARK_CONSUMERS, RAW]
SHAPES = ["single_row_tx", "tx_1000_rows"]
PROFILED = ["tidemark_delta", "tidemark_kafka", "tidemark_jsonl"]
TARGET_SHAPE, TARGET = (
    "single_row_tx",
    3.0,
)  # the issue: Tidemark >= 3x the bare loop, single-row transactions
ROWS_PER_TX = 1000

# ~200 bytes a row like the PostgreSQL bench: `note` is 128 chars, `created` a TIMESTAMP(6).
SCHEMA_SQL = [
    f"CREATE TABLE {TABLE} (id BIGINT PRIMARY KEY, name VARCHAR(64), qty INT, price DECIMAL(10,2), "
    "created TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), note TEXT)",
    # autocommit: every INSERT is its own transaction (GTID, TABLE_MAP, WRITE_ROWS, XID)
    f"""CREATE PROCEDURE bench_single_row(IN first BIGINT, IN last BIGINT)
BEGIN
    DECLARE i BIGINT DEFAULT first;
    WHILE i <= last DO
        INSERT INTO {TABLE} VALUES (i, CONCAT('customer-', i), i % 100, (i % 100000) / 100.0, SYSDATE(6),
                                    REPEAT(MD5(i), 4));
        SET i = i + 1;
    END WHILE;
END""",
    # one INSERT ... SELECT per transaction (multi-row WRITE_ROWS events, ~8 kB each)
    f"""CREATE PROCEDURE bench_batched(IN first BIGINT, IN last BIGINT)
BEGIN
    DECLARE s BIGINT DEFAULT first;
    WHILE s <= last DO
        START TRANSACTION;
        INSERT INTO {TABLE}
        SELECT s + seq, CONCAT('customer-', s + seq), (s + seq) % 100, ((s + seq) % 100000) / 100.0, SYSDATE(6),
               REPEAT(MD5(s + seq), 4)
        FROM seq_0_to_{ROWS_PER_TX - 1} WHERE s + seq <= last;
        COMMIT;
        SET s = s + {ROWS_PER_TX};
    END WHILE;
END""",
]


# --------------------------------------------------------------------------- workload
def setup_database(db: Any) -> None:
    db.create_database(DB)
    with contextlib.closing(db.connect(database=DB)) as conn, conn.cursor() as cur:
        for sql in SCHEMA_SQL:
            cur.execute(sql)


def position(db: Any) -> dict[str, Any]:
    from connectors.sources.mysql.connection import current_position

    with contextlib.closing(db.connect(database=DB)) as conn, conn.cursor() as cur:
        file, pos, gtid = current_position(cur)
    return {"file": file, "pos": pos, "gtid": gtid}


def generate(db: Any, shape: str, first: int, n: int) -> float:
    proc = "bench_single_row" if shape == "single_row_tx" else "bench_batched"
    with contextlib.closing(db.connect(database=DB)) as conn, conn.cursor() as cur:
        t0 = time.monotonic()
        cur.execute(f"CALL {proc}(%s, %s)", (first, first + n - 1))
        return time.monotonic() - t0


def binlog_bytes(db: Any, start: dict[str, Any], end: dict[str, Any]) -> int:
    if start["file"] == end["file"]:
        return end["pos"] - start["pos"]
    total = 0
    for name, size, *_ in db.query("SHOW BINARY LOGS"):
        if start["file"] <= name <= end["file"]:
            lo = start["pos"] if name == start["file"] else 0
            total += (end["pos"] if name == end["file"] else size) - lo
    return total


# --------------------------------------------------------------------------- Tidemark
def tidemark_config(path: Path, db: Any, kafka: Any, consumer: str, prefix: str, work: Path) -> Path:
    from connectors.app.embedded.util import unique_server_id

    props = {f"debezium.source.{k}": v for k, v in db.props().items()}
    props.update(
        {
            "debezium.source.connector.class": "mariadb",
            "debezium.source.topic.prefix": prefix,
            "debezium.source.database.server.id": str(unique_server_id()),
            "debezium.source.database.include.list": DB,
            "debezium.source.snapshot.mode": "no_data",
        }
    )
    props.update(sink_props(consumer, work, kafka))
    return write_properties(path, props)


def delivered(consumer: str, prefix: str, work: Path, kafka: Any, expected: int) -> int:
    """Records of the bench table the consumer's sink really holds, counted independently of its log."""
    topic = f"{prefix}.{DB}.{TABLE}"
    sink = TIDEMARK_CONSUMERS[consumer]["debezium.sink.type"]
    if sink == "jsonl":
        path = work / "events.jsonl"
        if not path.exists():
            return 0
        needle = f'"topic": "{topic}"'.encode()
        needle_compact = f'"topic":"{topic}"'.encode()
        with path.open("rb") as f:
            return sum(1 for line in f if needle in line or needle_compact in line)
    if sink == "delta":
        import pyarrow.compute as pc
        from deltalake import DeltaTable

        path = work / "warehouse" / prefix / "changelog"
        if not path.exists():
            return 0
        t = DeltaTable(str(path)).to_pyarrow_table(columns=["topic", "is_tombstone"])
        mask = pc.and_(pc.equal(t["topic"], topic), pc.invert(t["is_tombstone"]))
        return int(pc.sum(pc.cast(mask, "int64")).as_py() or 0)
    # Read the topic back (tansu's high watermark is the last batch's base offset + 1, not the log end).
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap,
            "group.id": f"bench-verify-{prefix}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    offsets: set[int] = set()
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 180
        idle = 0
        while time.monotonic() < deadline:
            msgs = c.consume(10_000, timeout=1.0)
            offsets.update(m.offset() for m in msgs if m.error() is None and m.value() is not None)
            idle = 0 if msgs else idle + 1
            # caught up (the producer has exited), or nothing new for 10 s once reading started
            if idle and (len(offsets) >= expected or (offsets and idle >= 10)):
                break
    finally:
        c.close()
    return len(offsets)


def ensure_start_offset(cfg: Path, start: dict[str, Any]) -> str:
    """'primed' when the first (pre-workload) run stored its start offset (`tidemark offsets show`:
    the offset table's or the Delta sink's own), as the MySQL source's empty first batch should;
    otherwise store the offset that run would have stored — the binlog position of its schema
    snapshot, `start` — and return 'seeded' (the caller logs a WARNING: without it the measured run
    would start at the binlog's end and read nothing)."""
    shown = subprocess.run(
        [sys.executable, "-m", "connectors.app.cli", "offsets", "show", "--config", str(cfg)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    if shown.returncode != 0:
        raise RuntimeError(f"`tidemark offsets show` exited {shown.returncode}: {shown.stderr[-2000:]}")
    out = json.loads(shown.stdout)
    if (out.get("offsets") or {}).get("offset") or out.get("sink.delta"):
        return "primed"
    from connectors.settings.config import load
    from connectors.state.offsets import DeltaOffsetStore

    conf = load(cfg)
    DeltaOffsetStore(conf.warehouse, conf.name).save(
        1,
        {
            "file": start["file"],
            "pos": start["pos"],
            "gtids": start["gtid"],
            "event": 0,
            "row": 0,
            "server_id": 0,
            "ts_sec": 0,
        },
    )
    return "seeded"


# --------------------------------------------------------------------------- bare mysql-replication loop
def run_raw(db: Any, start: dict[str, Any], n: int) -> dict[str, Any]:
    """The issue's baseline: BinLogStreamReader from the recorded file/pos, touching every row's values."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import WriteRowsEvent

    from connectors.app.embedded.util import unique_server_id

    cpu0 = time.process_time()
    t0 = time.monotonic()
    reader = BinLogStreamReader(
        connection_settings={"host": db.host, "port": db.port, "user": db.user, "passwd": db.password},
        server_id=unique_server_id(),
        log_file=start["file"],
        log_pos=start["pos"],
        resume_stream=True,
        blocking=False,
        only_events=[WriteRowsEvent],
    )
    rows = events = values = 0
    first = None
    try:
        for ev in reader:
            if first is None:
                first = time.monotonic()
            events += 1
            for row in ev.rows:
                values += len(row["values"])
                rows += 1
            if rows >= n:
                break
        end = time.monotonic()
        cpu = time.process_time() - cpu0
    finally:
        reader.close()
    if rows != n:
        raise RuntimeError(f"BinLogStreamReader read {rows} rows, expected {n}")
    return {
        "steady_s": end - (first or t0),
        "wall_s": end - t0,
        "cpu_s": cpu,
        "records": rows,
        "rows_events": events,
        "values": values,
    }


# --------------------------------------------------------------------------- main
def bench_round(
    db: Any, kafka: Any, shape: str, first_id: int, n: int, consumers: list[str], base: Path, profile: bool
) -> None:
    common = {"bench": BENCH_NAME, "shape": shape, "events": n}
    # Tidemark consumers (and profiled twins) start once before the workload: no offsets yet, so each
    # stores the current binlog position and stops; the second run, after the workload, is measured.
    runs = [(c, c) for c in consumers if c in TIDEMARK_CONSUMERS]
    runs += [(f"profile_{c}", c) for c in PROFILED if profile and c in consumers]
    cfgs: dict[str, tuple[Path, Path, str]] = {}
    started: dict[str, str] = {}
    before = position(db)
    for key, c in runs:
        work = base / shape / key
        (work / "prime").mkdir(parents=True, exist_ok=True)
        prefix = f"{shape}-{key}".replace("_", "-")
        cfg = tidemark_config(work / "tidemark.properties", db, kafka, c, prefix, work)
        cfgs[key] = (cfg, work, prefix)
        try:
            r = run_tidemark(cfg, work / "prime", 0)
            log(f"{shape}: {key} first run done ({r['records']} records, {r['wall_s']:.1f}s)")
        except Exception as e:  # noqa: BLE001 - that consumer reports the error, the others go on
            log(f"{shape}: {key}: first run FAILED: {e}")
            started[key] = f"error: first run: {e}"[:500]

    start = position(db)
    if start != before:
        log(f"{shape}: WARNING: the binlog moved while the consumers were primed ({before} -> {start})")
    for key, (cfg, _, _) in cfgs.items():
        if key in started:
            continue
        try:
            started[key] = ensure_start_offset(cfg, start)
        except Exception as e:  # noqa: BLE001 - that consumer reports the error, the others go on
            log(f"{shape}: {key}: checking its start offset FAILED: {e}")
            started[key] = f"error: {e}"[:500]
    if "seeded" in started.values():
        log(
            f"{shape}: WARNING: the first run stored no start offset for "
            f"{', '.join(k for k, v in started.items() if v == 'seeded')} (see README); "
            f"seeded the offset store with the snapshot position {start['file']}:{start['pos']} gtid {start['gtid']}"
        )
    log(f"{shape}: binlog at {start['file']}:{start['pos']} gtid {start['gtid']}; generating {n} rows")
    gen_s = generate(db, shape, first_id, n)
    end = position(db)
    size = binlog_bytes(db, start, end)
    log(
        f"{shape}: workload generated in {gen_s:.1f}s ({n / gen_s:.0f} rows/s), {size / 2**20:.1f} MiB of binlog "
        f"({size / n:.0f} bytes/row), now at {end['file']}:{end['pos']} gtid {end['gtid']}"
    )
    emit(
        {
            **common,
            "consumer": "workload_generation",
            "seconds": round(gen_s, 3),
            "events_per_s": round(n / gen_s),
            "binlog_bytes": size,
            "binlog_start": start,
            "binlog_end": end,
        }
    )

    steady: dict[str, float] = {}
    incl: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for c in consumers:
        log(f"{shape}: {c} catching up")
        try:
            if c in TIDEMARK_CONSUMERS:
                if started[c].startswith("error"):
                    raise RuntimeError(f"no start offset: {started[c]}")
                cfg, work, prefix = cfgs[c]
                r = run_tidemark(cfg, work, n)
                got = delivered(c, prefix, work, kafka, n)
                if r["records"] != n or got != n:
                    raise RuntimeError(
                        f"delivered {got} records of {DB}.{TABLE} (stopped line: {r['records']}), "
                        f"expected {n}; log {work / 'tidemark.log'}"
                    )
                steady[c] = tidemark_line(common, c, n, r, delivered=got, start=started[c])
                incl[c], cpu[c] = r["wall_s"], r["cpu_s"]
            else:
                r = run_raw(db, start, n)
                steady[c], incl[c], cpu[c] = r["steady_s"], r["wall_s"], r["cpu_s"]
                emit(
                    {
                        **common,
                        "consumer": c,
                        "seconds": round(r["steady_s"], 3),
                        "events_per_s": round(n / r["steady_s"]),
                        "seconds_incl_startup": round(r["wall_s"], 3),
                        "events_per_s_incl_startup": round(n / r["wall_s"]),
                        "cpu_s": round(r["cpu_s"], 2),
                        "events_per_cpu_s": round(n / r["cpu_s"]),
                        "records": r["records"],
                        "rows_events": r["rows_events"],
                    }
                )
        except Exception as e:  # noqa: BLE001 - report and go on with the other consumers
            log(f"{shape}: {c} FAILED: {e}")
            emit({**common, "consumer": c, "error": str(e)[:500]})
        log(f"{shape}: {c} done")

    if RAW in steady:
        for c in TIDEMARK_CONSUMERS:
            if c not in steady:
                continue
            line = {
                "bench": BENCH_NAME,
                "shape": shape,
                "ratio": f"{c}/{RAW}",
                "value": round(steady[RAW] / steady[c], 3),
                "value_incl_startup": round(incl[RAW] / incl[c], 3),
                "value_cpu": round(cpu[RAW] / cpu[c], 3) if cpu[c] else None,
            }
            if shape == TARGET_SHAPE:
                line.update(target=TARGET, meets_target=line["value"] >= TARGET)
            emit(line)

    for key, c in runs:
        if not key.startswith("profile_") or started[key].startswith("error"):
            continue
        cfg, work, _ = cfgs[key]
        profile_tidemark(f"{shape} {c}", cfg, work, n)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, SHAPES, ALL_CONSUMERS, PROFILED)
    a = ap.parse_args(argv)
    n, shapes, consumers = selection(ap, a, SHAPES, ALL_CONSUMERS)

    from connectors.app.embedded.mariadb import start_mariadb

    use_kafka = any("kafka" in c for c in consumers)
    with bench_session("tidemark-bench-mysql-", n, a.keep or a.profile, use_kafka) as (base, servers, kafka):
        db = start_mariadb(None, innodb_buffer_pool_size="256M", max_binlog_size="1G")
        servers.callback(db.destroy)
        log(f"MariaDB {db.scalar('SELECT VERSION()')} on port {db.port}")
        setup_database(db)
        for i, shape in enumerate(shapes):
            bench_round(db, kafka, shape, 1 + i * n, n, consumers, base, a.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
