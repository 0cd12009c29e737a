"""The initial-snapshot job: `spark-submit spark_jobs/snapshot.py --config FILE` (or
`python -m spark_jobs.snapshot --config FILE`; `tidemark snapshot` and `tidemark run` start it).

Driver: decide from `snapshot.mode` and what is stored whether to snapshot (or resume an
unfinished snapshot), export one consistent view, plan primary-key chunks (Spark starting
meanwhile, `EarlySession`), record the plan in `_state/snapshots`, then run one Spark task per
chunk (`snapshot_tasks.run_chunk`), up to the parallelism at once, committing every chunk on its
own as it finishes:
- Kafka: the task produced and flushed (at least once, as Debezium);
- jsonl: the task's part is appended to the output file and fsynced (at least once: a crash
  between the append and the Delta commit / progress row repeats the chunk);
- Delta, last: the task's Parquet file is added in one Delta commit carrying the app transaction
  `<connector>:snapshot:<id>:<chunk>`; a chunk whose app transaction is in the log counts as done
  in every sink and is never written again (the crash window between that commit and the
  progress row);
Then the chunk's progress row; after the last chunk, the snapshot's "completed" row.
"""

from __future__ import annotations

import argparse
import glob
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

import orjson

from connectors.api import TerminalError, TidemarkError
from connectors.settings.config import ConnectorConfig, load
from connectors.snapshot.chunks import Chunk
from connectors.snapshot.decide import Decision, decide
from connectors.snapshot.jobs import read_request
from connectors.snapshot.kept import Kept
from connectors.snapshot.progress import SnapshotProgress
from connectors.state.pagecache import drop_cached
from connectors.state.storage import is_local, local_path, storage_error
from spark_jobs import class_cache
from spark_jobs.arrow_probe import skip_pandas_probe, skip_pyspark_pandas_check
from spark_jobs.chunk_lanes import ChunkLanes
from spark_jobs.jvm_stderr import JvmStderr
from spark_jobs.part_files import not_shared
from spark_jobs.snapshot_tasks import (
    ChunkResult,
    ChunkSpec,
    Refused,
    refusing,
    run_chunk,
    warm_worker,
    write_chunk,
)

log = logging.getLogger("tidemark.snapshot")


@dataclass
class Outcome:
    decision: Decision
    snapshot_id: str | None = None
    rows: int = 0
    chunks: int = 0
    seconds: float = 0.0

    def as_json(self) -> bytes:
        d = self.decision
        return orjson.dumps(
            {
                "snapshot": d.snapshot,
                "stream": d.stream,
                "reason": d.reason,
                "snapshot_id": self.snapshot_id,
                "rows": self.rows,
                "chunks": self.chunks,
                "seconds": round(self.seconds, 3),
            }
        )


# --------------------------------------------------------------------------- Spark
# The driver JVM only schedules one task per chunk (the rows never pass through it), but its
# C2 JIT compiler spent ~8 of its ~17 CPU-s on a 2M-row snapshot optimising start-up code that
# never gets hot: C1 only halves the JVM's CPU, which the Python tasks need on a small machine.
# `tidemark.spark.conf.spark.driver.extraJavaOptions` replaces it.
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


def submitted_master(cfg: ConnectorConfig) -> bool:
    """Whether the master is spark-submit's: this process was launched by `spark-submit` (its JVM
    is already running, with `--master`) and the file does not set `tidemark.spark.master`. A
    scheduler's `spark-submit --master yarn` (the Airflow Spark provider's connection) must not
    be replaced by the setting's default, `local[*]`; a master the file sets explicitly still
    wins, as a value set in code wins over spark-submit's flags in Spark itself."""
    return "PYSPARK_GATEWAY_PORT" in os.environ and "tidemark.spark.master" not in cfg.origin.raw


LOOPBACK = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}


def session_conf(cfg: ConnectorConfig, submitted: Mapping[str, str] | None = None) -> dict[str, str]:
    """The SparkSession settings: Tidemark's defaults, then `tidemark.spark.conf.*` over them.
    `submitted`: spark-submit's settings (`submitted_settings`) when its --master stands."""
    conf = {"spark.ui.showConsoleProgress": "false", "spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS}
    master = cfg.runtime.spark_master if submitted is None else submitted.get("spark.master", "")
    if master.startswith("local"):
        # One machine: loopback, whatever the host name resolves to (no warning about it);
        # an address given to spark-submit with --conf stays.
        conf |= {k: v for k, v in LOOPBACK.items() if submitted is None or k not in submitted}
    conf |= dict(cfg.runtime.spark_conf)
    return conf


def submitted_settings() -> dict[str, str]:
    """The master and driver addresses spark-submit gave its JVM (as system properties, where
    SparkConf reads them), read through the gateway it opened for this process."""
    from pyspark import SparkContext

    SparkContext._ensure_initialized()  # under spark-submit: connects, launches nothing
    system = SparkContext._jvm.java.lang.System  # type: ignore[union-attr]
    found = {k: system.getProperty(k) for k in ("spark.master", *LOOPBACK)}
    return {k: v for k, v in found.items() if v is not None}


def spark_session(cfg: ConnectorConfig) -> Any:
    """The job's SparkSession on `tidemark.spark.master` with `tidemark.spark.conf.*`."""
    try:
        import pyspark.sql  # noqa: F401 - only: is it installed?
    except ImportError:
        raise TerminalError(
            "snapshots run on Spark, and pyspark is not installed",
            "install the spark extra: pip install 'tidemark[spark]' (the README's set-up does)",
        ) from None
    # Executors run this interpreter (its virtualenv holds connectors and the drivers).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    skip_pyspark_pandas_check()  # (spark_jobs/arrow_probe.py)
    try:
        submitted = submitted_settings() if submitted_master(cfg) else None
    except Exception as e:  # spark-submit's JVM gone before the job started
        raise _not_started(cfg, e) from None
    conf = session_conf(cfg, submitted)
    global _CLASS_CACHE
    _CLASS_CACHE = None
    if cfg.runtime.spark_class_cache and conf["spark.driver.extraJavaOptions"] == DRIVER_JAVA_OPTIONS:
        _CLASS_CACHE = class_cache.plan(conf)
        if _CLASS_CACHE is not None and _CLASS_CACHE.writing is None:
            log.info("the driver JVM starts from the class-data archive %s", _CLASS_CACHE.archive)
    try:
        session = _start(cfg, conf)
    except Exception as e:  # the JVM's own errors: Java missing, a bad master URL, ...
        reading = _CLASS_CACHE if _CLASS_CACHE is not None and _CLASS_CACHE.writing is None else None
        _CLASS_CACHE = None
        if reading is None:
            raise _not_started(cfg, e) from None
        try:  # once more without the archive: a damaged one must not stop the snapshot
            session = _start(cfg, conf)
        except Exception as e2:
            raise _not_started(cfg, e2) from None  # not the archive's fault: it stays
        reading.discard()
    session.sparkContext.setLogLevel("WARN")
    log.info(
        "snapshot: Spark master %s%s, driver %s",
        session.sparkContext.master,
        " (spark-submit's --master)" if submitted_master(cfg) else "",
        session.sparkContext.getConf().get("spark.driver.host"),
    )
    return session


# The class-data archive the running session's driver JVM reads or writes (one per process).
_CLASS_CACHE: class_cache.ClassCache | None = None


def _start(cfg: ConnectorConfig, conf: dict[str, str]) -> Any:
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    options = {"spark.app.name": f"tidemark-snapshot-{cfg.name}"}
    if not submitted_master(cfg):
        options["spark.master"] = cfg.runtime.spark_master
    for k, v in conf.items():
        if k == "spark.driver.extraJavaOptions" and _CLASS_CACHE is not None:
            v = f"{v} {_CLASS_CACHE.java_options()}"
        options[k] = v
    if SparkContext._active_spark_context is None:
        # The JVM is launched here, not by SparkContext, so that its stderr comes through a
        # pipe of ours: a failed start is reported in the JVM's own words (jvm_stderr.py).
        spark_conf = SparkConf().setAll(list(options.items()))
        stderr = JvmStderr()
        launching = SparkContext._gateway is None  # else spark-submit (or an earlier try) started it
        try:
            gateway = launch_gateway(spark_conf, stderr.popen_kwargs()) if launching else None
            launching = False
            SparkContext(conf=spark_conf, gateway=gateway)
        except Exception as e:
            raise _JvmFailed(stderr.reason() if launching else None) from e
        finally:
            stderr.started()
    builder = SparkSession.builder
    for k, v in options.items():
        builder = builder.config(k, v)
    return builder.getOrCreate()


class _JvmFailed(Exception):
    """Spark did not start; `reason` is what the JVM said (None: it said nothing we could read)."""

    def __init__(self, reason: str | None) -> None:
        super().__init__(reason)
        self.reason = reason


def _master_text(cfg: ConnectorConfig) -> str:
    return (
        "spark-submit's --master"
        if submitted_master(cfg)
        else f"tidemark.spark.master={cfg.runtime.spark_master}"
    )


def _not_started(cfg: ConnectorConfig, e: Exception) -> TerminalError:
    cause = e.__cause__ if isinstance(e, _JvmFailed) and e.__cause__ is not None else e
    first = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    if isinstance(e, _JvmFailed) and e.reason:  # the JVM's words say more than PySpark's
        first = "the driver JVM exited: " + e.reason.removeprefix('Exception in thread "main" ')
    return TerminalError(
        f"Spark could not start ({_master_text(cfg)}): {first}",
        "check tidemark.spark.master and tidemark.spark.conf.*, and that Java 17 is installed (java -version); "
        "the next start resumes the snapshot",
    )


_JOB_PROCESS = False  # set by job_start: this process ends when the job does


def stop_session(spark: Any) -> None:
    """Stop a session the job started. PySpark's `stop()` stops the JVM side, then shuts its
    accumulator listener down and waits for that thread, which looks for the shutdown once a
    second: a fixed 1.0 s at the end of every job (measured). A job process exits right after
    the job, so there only the JVM side is waited for and the listener closes on a daemon
    thread (or with the process). Anywhere else the whole `stop()` is waited for: a later
    session in the same process must not race the end of this one."""
    global _CLASS_CACHE
    cache, _CLASS_CACHE = _CLASS_CACHE, None
    if cache is not None and cache.writing is not None:
        # This JVM writes the class-data archive as it exits: stop fully, end the JVM, keep the
        # archive (once per machine; the JVM takes a few seconds to write it).
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        spark.stop()
        cache.finish(gateway)
        SparkContext._gateway = SparkContext._jvm = None  # a later session starts a new JVM
        return
    if not _JOB_PROCESS:
        spark.stop()
        return
    spark.sparkContext._jsc.stop()  # executors, shuffle and block files: done when this returns
    threading.Thread(target=spark.stop, name="spark-stop", daemon=True).start()


class EarlySession:
    """The job's SparkSession, started on a thread of its own as soon as the job knows it will
    read chunks, while the driver exports the view and plans: the JVM's start (~4 s here) works
    on the CPU, the export and the plan mostly wait on the database. Once up, one task per slot
    starts a Python worker and imports what a chunk task needs (~0.7 CPU-s a worker on its first
    task otherwise); Spark reuses those workers for the chunks. A warm-up task that ends before
    the next one starts hands it its worker: the second slot's worker then starts with its first
    chunk, while the first slot already reads. (Tried: warm-up tasks that wait for each other
    in a barrier stage. In one 2M-row PostgreSQL run the warm-up then ended 4.6 s after the plan
    instead of 3.4 s, and the chunks read no faster.)

    The session is the reader's once taken (`get`; the reader stops it); `close` stops one never
    taken (a planning error, nothing left to read)."""

    def __init__(self, cfg: ConnectorConfig, warm: tuple[str, ...]) -> None:
        self._cfg, self._warm = cfg, warm
        self._spark: Any = None
        self._error: BaseException | None = None
        self._taken = False
        self._skip_warm_up = False
        self._up = threading.Event()
        self.warm: Future[None] = Future()  # done once the warm-up ended (or the start failed)
        self._thread = threading.Thread(target=self._start, name="spark-start", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        try:
            self._spark = spark_session(self._cfg)
        except BaseException as e:  # noqa: BLE001 - raised again by get(), on the job's thread
            self._error = e
        finally:
            self._up.set()
        try:
            if self._spark is not None and not self._skip_warm_up:
                self._warm_up()
        finally:
            self.warm.set_result(None)

    def _warm_up(self) -> None:
        sc = self._spark.sparkContext
        width = _parallelism(self._cfg, sc)
        sc.setJobGroup("tidemark-warm-up", "start the Python workers")
        try:
            pids = sc.parallelize(range(width), width).map(partial(warm_worker, self._warm)).collect()
        except Exception as e:  # noqa: BLE001 - only a head start: the chunk tasks import anyway
            log.debug("snapshot: warming the Python workers: %s", e)
        else:
            log.debug("snapshot: Python workers %s started while planning", sorted(set(pids)))

    def get(self) -> Any:
        """The session (waits for its start); a Spark that could not start raises here."""
        self._up.wait()
        if self._error is not None:
            raise self._error
        self._taken = True
        return self._spark

    def skip_warm_up(self) -> None:
        """No chunk is left for Spark: the warm-up job is not started if it has not been."""
        self._skip_warm_up = True

    def close(self) -> None:
        """Wait for the start and the warm-up job; stop the session unless it was taken (the
        taker stops it, after this)."""
        self._thread.join()
        if self._taken:
            return
        self._taken = True
        if self._spark is not None:
            stop_session(self._spark)


def _warm_modules(cfg: ConnectorConfig) -> tuple[str, ...]:
    """What a chunk task of this job imports, beyond snapshot_tasks itself."""
    mods: tuple[str, ...] = (
        ("connectors.snapshot.watermarks",)
        if cfg.connector != "postgres"
        else ("connectors.snapshot.postgres", "adbc_driver_postgresql.dbapi")
    )
    if "kafka" in cfg.sink_types:
        mods += ("connectors.sinks.kafka", "confluent_kafka")
    return mods


def _parallelism(cfg: ConnectorConfig, sc: Any) -> int:
    """Chunks read at once: Spark's parallelism, or snapshot.max.threads when the file sets it."""
    cores = int(sc.defaultParallelism)
    if "snapshot.max.threads" in cfg.origin.source_text:
        return max(1, min(cores, cfg.source.snapshot_max_threads))
    return max(1, cores)


# --------------------------------------------------------------------------- sinks on the driver
class Committer:
    """Makes a finished chunk durable in the sinks that need a driver step (Delta, jsonl)."""

    def __init__(self, cfg: ConnectorConfig, snapshot_id: str) -> None:
        self.cfg, self.snapshot_id = cfg, snapshot_id
        self.delta_uri: str | None = None
        self.delta_storage: dict[str, str] | None = None  # object-store options (secrets)
        self._dt: Any = None
        if "delta" in cfg.sink_types:
            d = cfg.sink.delta
            uri = d.table_path or f"{str(cfg.warehouse).rstrip('/')}/{cfg.topic_prefix}/changelog"
            # The stream's table, local or on an object store: the tasks write their files there
            # (spark_jobs/part_files.py) with the sink's own storage options.
            self.delta_storage = {k: v.get_secret_value() for k, v in d.storage.items()} or None
            if is_local(uri):
                self.delta_uri = str(local_path(uri))
                Path(self.delta_uri).mkdir(parents=True, exist_ok=True)
            else:
                self.delta_uri = uri
        self.jsonl_path = cfg.sink.jsonl.path if "jsonl" in cfg.sink_types else None
        if self.jsonl_path:
            from connectors.sinks.jsonl import JsonLinesSink

            # Checks the path, and cuts a last line an interrupted write left unfinished.
            JsonLinesSink(self.jsonl_path).close()

    def jsonl_staging(self) -> str:
        """A new directory for the chunks' jsonl parts, beside the jsonl file: on its file system
        (executors of a cluster write there too), and where the parts a killed job left are found
        and removed (only one connector writes one jsonl file) rather than kept in /tmp forever."""
        assert self.jsonl_path is not None
        out = Path(self.jsonl_path)
        for stale in out.parent.glob(f".{glob.escape(out.name)}.parts-*"):
            shutil.rmtree(stale, ignore_errors=True)
        return tempfile.mkdtemp(prefix=f".{out.name}.parts-{self.snapshot_id[:8]}-", dir=out.parent)

    def app_id(self, chunk: Chunk) -> str:
        return f"{self.cfg.name}:snapshot:{self.snapshot_id}:{chunk.index}"

    def _table(self) -> Any:
        from deltalake import DeltaTable

        if self._dt is None and self.delta_uri:
            try:
                if DeltaTable.is_deltatable(self.delta_uri, storage_options=self.delta_storage):
                    self._dt = DeltaTable(self.delta_uri, storage_options=self.delta_storage)
            except OSError as e:
                raise storage_error(e, self.delta_uri, "the Delta change log") from None
        return self._dt

    def already_committed(self, chunk: Chunk) -> bool:
        dt = self._table()
        return dt is not None and dt.transaction_version(self.app_id(chunk)) is not None

    def commit(self, chunk: Chunk, res: ChunkResult) -> None:
        # jsonl first, Delta last: a chunk found in Delta after a crash counts as done in every
        # sink (`already_committed`), so its jsonl lines must be durable before it is. A crash
        # before the Delta commit reads the chunk again (jsonl: at least once, as documented).
        self._check_visible(chunk, res)
        if self.jsonl_path and res.jsonl_part:
            # Not O_APPEND (sendfile refuses it): one writer, positioned at the end.
            fd = os.open(self.jsonl_path, os.O_WRONLY | os.O_CREAT, 0o644)
            with open(res.jsonl_part, "rb") as src, open(fd, "wb") as out:
                start = out.seek(0, os.SEEK_END)
                # In the kernel (sendfile): with schemas on, a chunk's lines are gigabytes.
                left, at = os.fstat(src.fileno()).st_size, 0
                while left > 0:
                    n = os.sendfile(out.fileno(), src.fileno(), at, min(left, 1 << 30))
                    if n == 0:
                        break
                    at, left = at + n, left - n
                os.fsync(out.fileno())
                drop_cached(out.fileno(), start, start + at)
            os.unlink(res.jsonl_part)
        if self.delta_uri is not None:
            self._commit_delta(chunk, res)

    def _check_visible(self, chunk: Chunk, res: ChunkResult) -> None:
        """The files a task wrote on a local path are here, whole, before anything is committed:
        on a cluster whose hosts do not share that path they are not, and committing them would
        give the change log entries for files it does not have (one stat per file)."""
        if self.jsonl_path and res.jsonl_part and not os.path.exists(res.jsonl_part):
            raise not_shared(f"chunk {chunk.index}'s jsonl part", res.jsonl_part, res.host)
        if self.delta_uri is not None and is_local(self.delta_uri):
            for f in res.delta_files:
                full = os.path.join(self.delta_uri, f["path"])
                try:
                    size = os.stat(full).st_size
                except FileNotFoundError:
                    size = -1
                if size != f["size"]:
                    raise not_shared(f"chunk {chunk.index}'s Delta data file", full, res.host)

    def _commit_delta(self, chunk: Chunk, res: ChunkResult) -> None:
        from deltalake import CommitProperties, Transaction
        from deltalake.exceptions import DeltaError
        from deltalake.transaction import AddAction, create_table_with_add_actions

        from connectors.sinks.delta import SCHEMA

        actions = [
            AddAction(f["path"], f["size"], f["partition_values"], f["modification_time"], True, f["stats"])
            for f in res.delta_files
        ]
        props = CommitProperties(
            app_transactions=[Transaction(self.app_id(chunk), 0)],
            custom_metadata={"tidemark.snapshot": self.snapshot_id, "tidemark.chunk": str(chunk.index)},
        )
        dt = self._table()
        try:
            if dt is None:
                from deltalake import Schema

                create_table_with_add_actions(
                    self.delta_uri,  # type: ignore[arg-type]  # set when Delta is a sink
                    Schema.from_arrow(SCHEMA),
                    actions,
                    mode="append",
                    partition_by=["collection"],
                    name="tidemark change log",
                    storage_options=self.delta_storage,
                    commit_properties=props,
                )
            else:
                dt.create_write_transaction(
                    actions, "append", dt.schema(), ["collection"], commit_properties=props
                )
                # The handle does not move to the version it just wrote: without this every commit
                # checks itself against all commits since the handle was opened (O(chunks²): 400
                # chunks took 26 s of commits here, 5 s with it).
                dt.update_incremental()
        except (OSError, DeltaError) as e:  # as the stream's sink reports them (a resumed job commits it)
            raise storage_error(e, self.delta_uri or "", "the Delta change log") from None


# --------------------------------------------------------------------------- progress display
class Progress:
    """Tables done / total, rows, rows/s and ETA: a rich bar on a terminal; in logs one line per
    finished table and one a minute."""

    def __init__(self, chunks: list[Chunk], done_rows: int) -> None:
        self.total_tables = len({c.table for c in chunks})
        self.left: dict[str, int] = {}
        for c in chunks:
            self.left[c.table] = self.left.get(c.table, 0) + 1
        self.rows = done_rows
        self.tables_done = 0
        self.chunks_total, self.chunks_done = len(chunks), 0
        self.t0 = self.last_log = time.monotonic()
        self._bar: Any = None
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(
                TextColumn("snapshot"),
                BarColumn(),
                TextColumn(
                    "{task.fields[tables]} tables · {task.fields[rows]:,} rows · {task.fields[rate]:,.0f} rows/s"
                ),
                TimeRemainingColumn(),
                console=Console(stderr=True),  # stdout stays for results (e.g. a piped --json)
            )
            self._task = self._bar.add_task("snapshot", total=max(1, len(chunks)), tables="", rows=0, rate=0)
            self._bar.start()
            self._refresh()

    def _rate(self) -> float:
        return self.rows / max(1e-6, time.monotonic() - self.t0)

    def _refresh(self) -> None:
        if self._bar is not None:
            self._bar.update(
                self._task,
                completed=self.chunks_done,
                tables=f"{self.tables_done}/{self.total_tables}",
                rows=self.rows,
                rate=self._rate(),
            )

    def chunk_done(self, chunk: Chunk, rows: int) -> None:
        self.rows += rows
        self.chunks_done += 1
        self.left[chunk.table] -= 1
        if self.left[chunk.table] == 0:
            self.tables_done += 1
            log.info(
                "snapshot: table %s done (%d/%d tables)", chunk.table, self.tables_done, self.total_tables
            )
        now = time.monotonic()
        if now - self.last_log >= 60:
            self.last_log = now
            eta = (self.chunks_total - self.chunks_done) * (now - self.t0) / max(1, self.chunks_done)
            log.info(
                "snapshot: %d/%d tables, %d/%d chunks, %d rows, %.0f rows/s, about %.0fs left",
                self.tables_done,
                self.total_tables,
                self.chunks_done,
                self.chunks_total,
                self.rows,
                self._rate(),
                eta,
            )
        self._refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


# --------------------------------------------------------------------------- the job
def run(cfg: ConnectorConfig, *, spark: Any = None) -> Outcome:
    """Snapshot as `snapshot.mode` says. `spark`: an existing session (tests); else one is built.
    Debezium's "Initial Snapshot" notifications go to notification.enabled.channels."""
    from connectors.signals.notify import Notifier

    if cfg.source.snapshot_mode in ("no_data", "never"):
        return Outcome(decide(cfg.source.snapshot_mode, has_offset=False, resumable=True, state=None))
    notifier = Notifier.from_config(cfg)
    try:
        return _run(cfg, spark, notifier.initial_snapshot)
    finally:
        notifier.close()


def _read_all(
    cfg: ConnectorConfig,
    spark: Any,
    sid: str,
    view: Any,
    pos: Any,
    chunks: Any,
    done_rows: int,
    progress: Any,
    notices: Any,
    mysql: bool,
    watermarks: bool,
) -> int:
    """Read the planned chunks (STARTED ... COMPLETED or ABORTED), close the view, and record the
    snapshot complete; the initial and the blocking snapshot share it. Returns the rows read."""
    from connectors.sinks.common import context_headers_for

    notices.started()
    try:
        rows = _read_chunks(
            cfg,
            spark,
            sid,
            view,
            pos,
            chunks,
            done_rows,
            progress,
            context_headers_for(cfg),
            notices=notices,
            driver_threads=mysql and not watermarks,
            watermarks=watermarks,
        )
    except BaseException:
        notices.aborted()
        raise
    finally:
        view.close()
    progress.complete(sid, rows, pos)
    notices.completed()
    return rows


def _run(cfg: ConnectorConfig, spark: Any, notices: Any) -> Outcome:
    from connectors.engine.wiring import reserve_seq, reset_offsets, resume_point

    mysql = cfg.connector != "postgres"
    # The connector's snapshot module: PgSnapshotter / MySqlSnapshotter, position, read_chunk.
    mod: Any
    if mysql:
        from connectors.snapshot import mysql as mod
    else:
        from connectors.snapshot import postgres as mod
    snapshotter, position = (mod.MySqlSnapshotter if mysql else mod.PgSnapshotter), mod.position
    t0 = time.monotonic()
    src = cfg.source
    mode = src.snapshot_mode
    progress = SnapshotProgress(cfg.warehouse, cfg.name)
    state = progress.latest()
    seq, stored = resume_point(cfg)
    if mode == "recovery":
        from connectors.snapshot.recovery import recover_history

        recover_history(cfg, stored)
        return Outcome(Decision(False, False, True, False, "snapshot.mode=recovery: schema history rebuilt"))
    snap = snapshotter(cfg)
    # MySQL/MariaDB, locking method: one consistent-snapshot connection per reader, opened under
    # the lock. The lock-free method reads every chunk in a Spark task (run_watermark_chunk).
    watermarks = mysql and cfg.runtime.snapshot_mysql_method == "watermarks"
    readers = {"readers": _threads(cfg)} if mysql and not watermarks else {}
    try:
        flags = (
            src.snapshot_mode_configuration_based_snapshot_data,
            src.snapshot_mode_configuration_based_start_stream,
            src.snapshot_mode_configuration_based_snapshot_on_data_error,
        )
        decision = decide(
            mode,
            has_offset=stored is not None,
            resumable=snap.resumable(stored),
            state=state,
            configuration_based=flags,
        )
        log.info("snapshot: %s", decision.reason)
        if not decision.snapshot:
            notices.skipped()
            return Outcome(decision)
        snap.preflight(
            stream=decision.stream
        )  # server settings, grants and overrides, before anything starts
        delay = src.snapshot_delay_ms
        if delay > 0:
            log.info("snapshot: waiting snapshot.delay.ms=%d before starting", delay)
            time.sleep(delay / 1000)
        if spark is None and (not mysql or watermarks):
            spark = EarlySession(cfg, _warm_modules(cfg))
        if decision.resume:
            assert state is not None
            view = snap.fresh_view(**readers)
            sid, pos, chunks = state.snapshot_id, state.position, state.pending
            done_rows = state.rows
            log.info(
                "snapshot %s: resuming %d of %d chunks in a new view (the stream reconciles the rows changed since)",
                sid,
                len(chunks),
                len(state.chunks),
            )
        else:
            if decision.reset_offsets:
                reset_offsets(cfg)
                seq, _ = resume_point(cfg)  # after the reset marker's seq
                log.warning(
                    "snapshot: the stored offsets were reset; streaming starts at this snapshot's position"
                )
            view = snap.export(reset=decision.reset_offsets, stream=decision.stream, **readers)
            sid = uuid.uuid4().hex
            pos = position(view)
            chunks, detail = snap.plan(view, cfg.runtime.snapshot_chunk_rows)
            # The change log's order is (batch_seq, event_index): the snapshot's rows take a seq
            # of their own, after every batch before it and before the stream after it (MySQL's
            # schema change events take the seq before).
            detail["batch_seq"] = data_seq = seq + 1 if mysql else seq
            for c in chunks:
                c.detail["batch_seq"] = data_seq
            if mysql:
                _start_stream_at(cfg, snap, view, seq, data_seq)
            else:
                reserve_seq(cfg, data_seq)
            progress.plan(sid, chunks, pos, detail)
            done_rows = 0
            at = f"binlog {pos['file']}:{pos['pos']}" if mysql else f"LSN {pos['lsn']}"
            log.info(
                "snapshot %s: %d tables in %d chunks, consistent at %s",
                sid,
                detail["tables"],
                len(chunks),
                at,
            )
    except BaseException:
        if "view" in locals():
            view.close()
        if isinstance(spark, EarlySession):
            spark.close()
        raise
    finally:
        snap.close()
    rows = _read_all(cfg, spark, sid, view, pos, chunks, done_rows, progress, notices, mysql, watermarks)
    out = Outcome(decision, sid, rows, len(chunks), time.monotonic() - t0)
    log.info("snapshot %s completed: %d rows in %.1fs", sid, rows, out.seconds)
    return out


# --------------------------------------------------------------------------- blocking snapshots
def blocking_config(cfg: ConnectorConfig, tables: list[str], conditions: dict[str, str]) -> ConnectorConfig:
    """`cfg` reading only `tables` (snapshot.include.collection.list), each condition of the
    signal as the table's SELECT override (as Debezium takes a blocking snapshot's filters). The
    conditions were checked by `signals/conditions.py`; sqlglot renders the override around them."""
    import re

    import sqlglot
    from sqlglot import exp

    from connectors.settings.config import from_mapping

    dialect = "postgres" if cfg.connector == "postgres" else "mysql"
    overrides: dict[str, str] = {"snapshot.include.collection.list": ",".join(re.escape(t) for t in tables)}
    for table, cond in conditions.items():
        ns, _, name = table.partition(".")
        query = (
            exp.select("*")
            .from_(exp.table_(name, db=ns, quoted=True))
            .where(sqlglot.parse_one(cond, read=dialect))
        )
        overrides[f"snapshot.select.statement.overrides.{table}"] = query.sql(dialect=dialect)
    return from_mapping(dict(cfg.origin.raw), overrides)


def run_blocking(request: dict[str, Any], *, spark: Any = None) -> Outcome:
    """A blocking snapshot of `request["tables"]` while the connector's stream is paused (started
    by `connectors/snapshot/blocking.py`): a fresh view of the tables, planned in chunks under
    the batch seq `request["batch_seq"]` (reserved now, so the stream resumes after it), read and
    committed as the initial snapshot's chunks are; its progress goes to `_state/snapshots` under
    the connector's blocking partition. A snapshot planned before a crash resumes its chunks."""
    from connectors.engine.wiring import reserve_seq
    from connectors.settings.config import from_mapping
    from connectors.signals.notify import Notifier
    from connectors.snapshot.blocking import progress_key

    base = from_mapping(request["raw"])
    conditions = dict(request.get("conditions") or {})
    cfg = blocking_config(base, list(request["tables"]), conditions)
    sid = str(request["snapshot_id"])
    mysql = cfg.connector != "postgres"
    mod: Any
    if mysql:
        from connectors.snapshot import mysql as mod
    else:
        from connectors.snapshot import postgres as mod
    t0 = time.monotonic()
    progress = SnapshotProgress(cfg.warehouse, progress_key(cfg.name))
    state = progress.latest()
    decision = Decision(True, False, True, False, f"blocking snapshot of {', '.join(request['tables'])}")
    if state is not None and state.snapshot_id == sid and state.completed:
        return Outcome(decision, sid, state.rows, len(state.chunks))
    watermarks = mysql and cfg.runtime.snapshot_mysql_method == "watermarks"
    readers = {"readers": _threads(cfg)} if mysql and not watermarks else {}
    snap = (mod.MySqlSnapshotter if mysql else mod.PgSnapshotter)(cfg)
    try:
        snap.check_reads(
            {t: f"the execute-snapshot signal's additional-conditions for {t}" for t in conditions},
            "the execute-snapshot signal's data-collections",
        )
    except BaseException:
        snap.close()
        raise
    notifier = Notifier.from_config(cfg)
    notices = notifier.initial_snapshot  # Debezium's blocking snapshot sends the initial snapshot's
    if spark is None and (not mysql or watermarks):
        spark = EarlySession(cfg, _warm_modules(cfg))
    try:
        try:
            view = snap.fresh_view(**readers)
            if state is not None and state.snapshot_id == sid:
                pos, chunks, done_rows = state.position, state.pending, state.rows
                log.info(
                    "blocking snapshot %s: resuming %d of %d chunks", sid, len(chunks), len(state.chunks)
                )
            else:
                pos = mod.position(view)
                chunks, detail = snap.plan(view, cfg.runtime.snapshot_chunk_rows)
                seq = int(request["batch_seq"])
                detail |= {"batch_seq": seq, "kind": "blocking"}
                for c in chunks:
                    c.detail["batch_seq"] = seq
                reserve_seq(base, seq)
                progress.plan(sid, chunks, pos, detail)
                done_rows = 0
                log.info("blocking snapshot %s: %d tables in %d chunks", sid, detail["tables"], len(chunks))
        except BaseException:
            if "view" in locals():
                view.close()
            if isinstance(spark, EarlySession):
                spark.close()
            raise
        finally:
            snap.close()
        rows = _read_all(cfg, spark, sid, view, pos, chunks, done_rows, progress, notices, mysql, watermarks)
    finally:
        notifier.close()
    out = Outcome(decision, sid, rows, len(chunks), time.monotonic() - t0)
    log.info("blocking snapshot %s completed: %d rows in %.1fs", sid, rows, out.seconds)
    return out


def report(e: TidemarkError, error_file: Path | None) -> int:
    """A job's error on stderr (and in `error_file`, for the connector that started it); the exit
    code: 2 for a configuration error, else 1."""
    print(f"error: {e.message}", file=sys.stderr)
    if e.hint:
        print(f"  hint: {e.hint}", file=sys.stderr)
    if error_file:
        error_file.write_text(e.message + (f" ({e.hint})" if e.hint else ""))
    return 2 if e.__class__.__name__ == "ConfigError" else 1


def watch_parent(pid: int, leftover: Path | None = None) -> None:
    """Exit when the connector that started this job is gone (killed): a restarted connector
    resumes the snapshot, and must not race an orphaned job on the same chunks. `leftover`: the
    directory the connector made for this job, which it can no longer remove."""

    def watch() -> None:
        while os.getppid() == pid:
            time.sleep(0.2)
        if leftover is not None:
            shutil.rmtree(leftover, ignore_errors=True)
        os._exit(3)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _threads(cfg: ConnectorConfig) -> int:
    """MySQL/MariaDB readers: snapshot.max.threads when the file sets it, else the cores."""
    if "snapshot.max.threads" in cfg.origin.source_text:
        return max(1, cfg.source.snapshot_max_threads)
    return max(1, os.cpu_count() or 1)


def _start_stream_at(cfg: ConnectorConfig, snap: Any, view: Any, seq: int, data_seq: int) -> None:
    """MySQL/MariaDB: streaming must start at the view's binlog position (PostgreSQL's slot
    does this by itself). The schema-change events of the schema snapshot (include.schema.changes)
    go to the sinks first, as engine batch `seq` whose offset is that position; the position goes
    to the offset table under `data_seq` (the snapshot rows' seq), so the next stream resumes
    there with the seq after the snapshot's."""
    from connectors.api import Batch
    from connectors.engine.loop import close_all
    from connectors.sinks import build_sinks
    from connectors.snapshot.mysql import position, schema_change_events
    from connectors.state.offsets import DeltaOffsetStore

    pos = position(view)
    events = schema_change_events(snap, view)
    if events:
        sinks = build_sinks(cfg)
        try:
            for s in sinks:
                s.write(Batch(events, pos, seq))
        finally:
            close_all(sinks)
    DeltaOffsetStore(cfg.warehouse, cfg.name).save(data_seq, pos)


def _read_chunks(
    cfg: ConnectorConfig,
    spark: Any,
    sid: str,
    view: Any,
    pos: dict[str, Any],
    chunks: list[Chunk],
    done_rows: int,
    progress: SnapshotProgress,
    headers: tuple[tuple[str, bytes], ...],
    *,
    notices: Any = None,
    driver_threads: bool = False,
    watermarks: bool = False,
) -> int:
    early = spark if isinstance(spark, EarlySession) else None
    # A session this job starts (or took from `early`) is this job's to stop.
    own_session = (spark is None or early is not None) and not driver_threads
    session: Any = None if early is not None else spark
    lanes: ChunkLanes[ChunkSpec, ChunkResult] | None = None
    shown: Progress | None = None
    staging: str | None = None
    try:
        committer = Committer(cfg, sid)
        todo = []
        for c in chunks:
            if committer.already_committed(c):
                # Committed to Delta before a crash, its progress row not yet written.
                progress.chunks_done(sid, [(c, 0)])
                continue
            todo.append(c)
        if not todo:
            return done_rows
        snapshot_name = view if isinstance(view, str) else view.name
        staging = committer.jsonl_staging() if committer.jsonl_path else None
        specs = {
            c.index: ChunkSpec(
                dict(cfg.origin.raw),
                c,
                sid,
                snapshot_name,
                pos,
                headers,
                tuple(cfg.sink_types),
                committer.delta_uri,
                staging,
                committer.delta_storage,
            )
            for c in todo
        }
        shown = Progress(todo, done_rows)
        if notices is None:  # no channels: nothing is sent
            from connectors.signals.notify import Notifier

            notices = Notifier(cfg.topic_prefix).initial_snapshot
        tables = TableNotices(notices, todo)
        rows = done_rows
        highs: dict[int, dict[str, Any]] = {}  # lock-free chunks: the position each is consistent at
        task: Any = run_watermark_chunk if watermarks else run_chunk

        def result_of(spec: ChunkSpec, out: Any) -> ChunkResult:
            if not watermarks:
                return cast(ChunkResult, out)
            res, highs[spec.chunk.index] = out
            return cast(ChunkResult, res)

        def open_main() -> tuple[Callable[[ChunkSpec], ChunkResult], int]:
            nonlocal session
            if driver_threads:
                # A MySQL consistent view cannot be shared across connections: its chunks are read
                # by driver threads, one per reader connection of the view (Debezium's parallel
                # snapshot).
                from connectors.snapshot.mysql import read_chunk as mysql_chunk

                def in_view(spec: ChunkSpec) -> ChunkResult:
                    return write_chunk(spec, mysql_chunk(cfg, spec.chunk, view, spec.position, spec.headers))

                return in_view, len(view.readers)
            if session is None:
                session = early.get() if early is not None else spark_session(cfg)
            sc = session.sparkContext

            def in_spark(spec: ChunkSpec) -> ChunkResult:
                sc.setJobGroup(
                    f"tidemark-snapshot-{sid[:8]}", f"chunk {spec.chunk.index} of {spec.chunk.table}"
                )
                (out,) = sc.parallelize([spec], 1).map(partial(refusing, task)).collect()
                if isinstance(out, Refused):
                    raise _chunk_failed(spec.chunk, out.message, out.hint)
                return result_of(spec, out)

            return in_spark, _parallelism(cfg, sc)

        lead = early is not None and cfg.runtime.snapshot_read_during_spark_start
        lanes = ChunkLanes(
            open_main,
            ready=early.warm if early is not None else None,
            lead=(lambda spec: result_of(spec, task(spec))) if lead else None,
            release=Kept.drop_all,
        )
        pending, order = list(todo), list(todo)
        running: dict[Future[ChunkResult], Chunk] = {}
        ready: dict[int, ChunkResult] = {}

        def refill() -> None:
            while pending:
                fut = lanes.submit(specs[pending[0].index])
                if fut is None:
                    return
                c = pending.pop(0)
                tables.reading(c)
                running[fut] = c

        while pending or running:
            refill()
            waited: set[Future[Any]] = set(running) | lanes.pending()
            finished, _ = wait(waited, return_when=FIRST_COMPLETED)
            for fut in finished:
                if fut not in running:
                    continue  # the main lane is ready: refill() opens it
                c = running.pop(fut)
                lanes.finished(fut)
                try:
                    ready[c.index] = _result(fut, c)
                except BaseException:
                    tables.failed(c)
                    raise
            refill()  # the next chunks read while this thread commits (no idle slot)
            # Commit in plan order (table order, then key order): the change log and the jsonl
            # file list the tables as snapshot.tables.order.by.row.count says, and the
            # first/last markers come first/last. Later chunks wait on disk, not in memory.
            while order and order[0].index in ready:
                c = order.pop(0)
                res = ready.pop(c.index)
                log.debug(
                    "snapshot: chunk %d of %s: %d rows in %.2fs (process %d%s)",
                    c.index,
                    c.table,
                    res.rows,
                    res.seconds,
                    res.pid,
                    ", the driver, while Spark started"
                    if res.pid == os.getpid() and not driver_threads
                    else "",
                )
                committer.commit(c, res)
                progress.chunks_done(sid, [(c, res.rows)], highs)
                rows += res.rows
                shown.chunk_done(c, res.rows)
                tables.done(c, res.rows)
        if early is not None:
            early.skip_warm_up()  # every chunk is read: no worker needs warming any more
        lanes.finish()
    finally:
        if lanes is not None:
            lanes.close()
        if shown is not None:
            shown.close()
        if staging:
            shutil.rmtree(staging, ignore_errors=True)
        if early is not None:
            early.close()  # waits for its start; stops the session unless it was taken
        if own_session and session is not None:
            stop_session(session)
    return rows


def run_watermark_chunk(spec: ChunkSpec) -> tuple[ChunkResult, dict[str, Any]]:
    """A Spark task of the lock-free MySQL/MariaDB method: read one chunk between its binlog
    watermarks, write it to the sinks; returns the high watermark it is consistent at."""
    from connectors.snapshot.watermarks import WatermarkChunk

    chunk = WatermarkChunk(spec.raw, spec.chunk, spec.position, spec.headers)
    res = write_chunk(spec, chunk.rows())
    return res, chunk.high


class TableNotices:
    """Debezium's per-table initial snapshot notifications: IN_PROGRESS when a table's first chunk
    is read, TABLE_SCAN_COMPLETED (rows, SUCCEEDED) after its last chunk, SQL_EXCEPTION when a
    chunk fails. `data_collections`: the tables this run reads."""

    def __init__(self, notices: Any, chunks: list[Chunk]) -> None:
        self.notices = notices
        self.names = list(dict.fromkeys(c.table for c in chunks))
        self.left = {t: sum(1 for c in chunks if c.table == t) for t in self.names}
        self.rows = dict.fromkeys(self.names, 0)
        self.started: set[str] = set()

    def reading(self, chunk: Chunk) -> None:
        if chunk.table not in self.started:
            self.started.add(chunk.table)
            self.notices.in_progress(chunk.table, self.names)

    def done(self, chunk: Chunk, rows: int) -> None:
        self.rows[chunk.table] += rows
        self.left[chunk.table] -= 1
        if self.left[chunk.table] == 0:
            self.notices.table_scan_completed(chunk.table, self.rows[chunk.table], "SUCCEEDED", self.names)

    def failed(self, chunk: Chunk) -> None:
        self.notices.table_scan_completed(chunk.table, None, "SQL_EXCEPTION", self.names)


def _result(fut: Future[ChunkResult], chunk: Chunk) -> ChunkResult:
    try:
        return fut.result()
    except TidemarkError:
        raise
    except Exception as e:
        # A task's error arrives wrapped by Spark (Py4J / PythonException): show its last line,
        # which is the Python exception the task raised.
        text = str(e).strip().splitlines()
        tidemark = [ln for ln in text if "TerminalError" in ln or "TransientError" in ln]
        detail = (tidemark or text or [type(e).__name__])[-1]
        detail = re.sub(r"^[\w.]*(?:Terminal|Transient)Error: ", "", detail)  # our own message: no class name
        raise _chunk_failed(chunk, detail) from None


def _chunk_failed(chunk: Chunk, detail: str, hint: str | None = None) -> TerminalError:
    return TerminalError(
        f"snapshot chunk {chunk.index} of {chunk.table} failed: {detail}",
        hint or "fix the cause and start again: finished chunks are kept, the snapshot resumes with the rest",
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="spark_jobs.snapshot", description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, help="connector configuration file")
    p.add_argument("--result", type=Path, help="write the outcome as JSON to this file")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    # A blocking snapshot (connectors/snapshot/blocking.py starts it): the request as JSON, the
    # file its error message goes to, and the connector's pid (the job ends when it is gone).
    p.add_argument("--blocking", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--error-file", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--parent", type=int, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.config is None and a.blocking is None:
        p.error("--config is required")
    job_start(a.log_level, a.parent, a.error_file or a.result)
    try:
        out = run_blocking(read_request(a.blocking)) if a.blocking is not None else run(load(a.config))
    except TidemarkError as e:
        return report(e, a.error_file)
    if a.result:
        a.result.write_bytes(out.as_json())
    return 0


def job_start(log_level: str, parent: int | None, handed: Path | None = None) -> None:
    """A job process's logging (stderr), and with `parent` its end when that process is gone
    (removing the directory of `handed`, a file that process made a directory for)."""
    logging.basicConfig(
        level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines are connection chatter
    skip_pandas_probe()  # 0.2 s less, and not inside the MySQL lock (spark_jobs/arrow_probe.py)
    global _JOB_PROCESS
    _JOB_PROCESS = True
    if parent:
        watch_parent(parent, handed.parent if handed else None)


def job_exit(code: int) -> None:
    """As `tidemark` does (connectors/app/cli.py main): leave without interpreter finalization,
    which can abort on pyarrow's I/O threads after the work is done."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


if __name__ == "__main__":
    job_exit(main())
