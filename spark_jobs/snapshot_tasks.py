"""What a Spark task does with one snapshot chunk: read it, write it to every configured sink.

Runs in the executors' Python workers: everything it needs travels in the `ChunkSpec` (plain
data, pickled by Spark), and what it reports back is small (`ChunkResult`): the Delta files it
wrote (the driver commits them), the jsonl part it wrote (the driver appends it), row counts.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa

from connectors.api import TerminalError
from connectors.snapshot.chunks import Chunk
from connectors.snapshot.kept import Kept
from connectors.snapshot.rows import jsonl_lines, kafka_bytes
from spark_jobs.arrow_probe import skip_pandas_probe
from spark_jobs.part_files import SHARED_STORAGE_HINT, DeltaPart, WrittenFile, part_files

log = logging.getLogger(__name__)


@dataclass
class ChunkSpec:
    raw: Mapping[str, str]  # the connector's flat configuration (secrets included: never logged)
    chunk: Chunk
    snapshot_id: str
    snapshot_name: str  # the exported snapshot to read in
    position: Mapping[str, Any]
    headers: tuple[tuple[str, bytes], ...]
    sinks: tuple[str, ...]
    delta_uri: str | None = None
    staging: str | None = None  # directory for jsonl parts
    delta_storage: Mapping[str, str] | None = None  # the Delta sink's object-store options (secrets)


@dataclass
class ChunkResult:
    index: int
    rows: int = 0
    seconds: float = 0.0
    delta_files: list[dict[str, Any]] = field(default_factory=list)
    jsonl_part: str | None = None
    pid: int = 0  # the process that wrote it (a Spark Python worker, or the driver)
    host: str = ""  # and its host (the driver checks that it sees what was written there)


@dataclass(frozen=True)
class Refused:
    """A TerminalError a Spark task raised, returned as the task's result instead (`refusing`):
    raised, Spark would run the task again (spark.task.maxFailures: 4 on a cluster) though the
    same chunk fails the same way, and the driver JVM would log every attempt's Python traceback.
    The driver raises it again, hint included."""

    message: str
    hint: str | None


def refusing(task: Callable[[Any], Any], spec: Any) -> Any:
    """`task(spec)`, or its TerminalError as a `Refused` (other errors stay errors: Spark may
    retry them elsewhere)."""
    try:
        return task(spec)
    except TerminalError as e:
        return Refused(e.message, e.hint)


_TUNED = False


def tune_process() -> None:
    """Once per process that writes chunks (a Spark Python worker, or the driver for MySQL):
    - glibc keeps freed memory for reuse: by default it hands the top of its heap back to the
      kernel after ~2 MB free, so every chunk faults in (and zeroes) fresh pages for the same
      short-lived buffers — the ~3.5 kB Kafka values as Python bytes and librdkafka's copies,
      ~10 % of a task's CPU in a 2M-row Kafka snapshot. Memory is kept up to 128 MB above the
      heap top (the producer queue's bound) and buffers up to 32 MB come from the heap.
    - gc.freeze(): the objects alive by now (modules, the worker's own state) are left out of
      later collections, which otherwise walk all of them again and again while chunks run."""
    global _TUNED
    if _TUNED:
        return
    _TUNED = True
    skip_pandas_probe()  # (spark_jobs/arrow_probe.py)
    gc.freeze()
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return  # not glibc (musl, macOS): its own allocator policy stays
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    # M_MMAP_THRESHOLD (-3) first: setting M_TRIM_THRESHOLD (-1) freezes the dynamic mmap threshold.
    mallopt(-3, 32 << 20)
    mallopt(-1, 128 << 20)


# This thread's Kafka producer, kept from chunk to chunk (see connectors.snapshot.kept).
_PRODUCER: Kept[Any] = Kept(lambda sink: sink.close())


def _kafka_sink(raw: Mapping[str, str]) -> Any:
    def make() -> Any:
        from connectors.settings.config import from_mapping
        from connectors.sinks.kafka import KafkaSink

        return KafkaSink.from_config(from_mapping(dict(raw)), bulk=True)

    return _PRODUCER.get(tuple(sorted(raw.items())), make)


def _partition_dir(collection: str) -> str:
    # Readers take the partition value from the add action, not the path: any safe name works.
    return "collection=" + re.sub(r"[^A-Za-z0-9._-]", "_", collection)


def _write_string_data(out: Any, lines: pa.Array) -> None:
    """Write a string array's characters back to back (its lines end in newlines): one write of
    the array's data buffer, no per-row Python."""
    import numpy as np

    if len(lines) == 0:
        return
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset : lines.offset + len(lines) + 1]
    out.write(memoryview(lines.buffers()[2])[int(offsets[0]) : int(offsets[-1])])


def warm_worker(modules: tuple[str, ...], _slot: int) -> int:
    """A warm-up task (snapshot.EarlySession): import what the chunk tasks will, in the Python
    worker Spark then reuses for them, and tune it. Returns the worker's pid."""
    import importlib

    # Before the imports: the ADBC driver imports pyarrow.dataset, whose first conversion would
    # import pandas (0.23 s a worker, measured with -X importtime).
    skip_pandas_probe()
    for m in modules:
        importlib.import_module(m)
    tune_process()  # (gc.freeze: the modules just imported are left out of later collections)
    return os.getpid()


# A chunk whose connection failed (TransientError: the server ended it, the network dropped) is
# read again at once, up to this many times in all, in the same exported snapshot (so with the
# same rows); a local Spark retries no task, and a snapshot should not stop for one dropped
# connection. An exported snapshot that is gone is a TerminalError: not retried.
CHUNK_ATTEMPTS = 3


def run_chunk(spec: ChunkSpec) -> ChunkResult:
    """A Spark task: read one PostgreSQL chunk inside the exported snapshot, write it to the sinks."""
    from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

    from connectors.api import TransientError
    from connectors.snapshot.postgres import read_chunk

    # A failed attempt leaves no trace that counts: its connections and Kafka producer are dropped
    # (read_chunk, write_chunk), its Delta file and jsonl part are deleted, never committed or
    # appended; records it already sent to Kafka arrive twice (at least once, as any resent chunk).
    for attempt in Retrying(
        retry=retry_if_exception_type(TransientError),
        stop=stop_after_attempt(CHUNK_ATTEMPTS),
        wait=wait_exponential(multiplier=0.2, max=2),
        before_sleep=lambda state: _before_retry(spec, state.outcome.exception() if state.outcome else None),
        reraise=True,
    ):
        with attempt:
            return write_chunk(
                spec, read_chunk(spec.raw, spec.chunk, spec.snapshot_name, spec.position, spec.headers)
            )
    raise AssertionError("unreachable: Retrying re-raises the last failure")


def _before_retry(spec: ChunkSpec, error: BaseException | None) -> None:
    log.warning(
        "snapshot: chunk %d of %s failed (%s); reading it again", spec.chunk.index, spec.chunk.table, error
    )
    # Every connection this thread keeps may have gone the same way (a server that ended them
    # all): the next attempt opens new ones rather than finding the next dead one.
    Kept.drop_all()


def write_chunk(spec: ChunkSpec, pieces: Iterable[pa.Table]) -> ChunkResult:
    """Write a chunk's change-log rows to the sinks: Delta files written but not committed (the
    driver commits them), Kafka produced and flushed, jsonl into a part file."""
    t0 = time.monotonic()
    tune_process()
    res = ChunkResult(spec.chunk.index, pid=os.getpid(), host=socket.gethostname())
    delta: DeltaPart | None = None
    written: WrittenFile | None = None
    kafka = None
    jsonl = None
    try:
        if "kafka" in spec.sinks:
            kafka = _kafka_sink(spec.raw)
        if "jsonl" in spec.sinks:
            assert spec.staging is not None
            if not os.path.isdir(spec.staging):  # the driver made it: not this host's file system
                raise TerminalError(
                    f"the jsonl sink's staging directory {spec.staging}, made by the driver, is not there on host {res.host}",
                    SHARED_STORAGE_HINT,
                )
            res.jsonl_part = os.path.join(
                spec.staging, f"{spec.chunk.index:06d}-{uuid.uuid4().hex[:8]}.jsonl"
            )
            jsonl = open(res.jsonl_part, "wb")  # noqa: SIM115 - closed below
        for piece in pieces:
            n = piece.num_rows
            if n == 0:
                continue
            res.rows += n
            if "delta" in spec.sinks:
                if delta is None:
                    assert spec.delta_uri is not None
                    collection = piece["collection"][0].as_py()
                    delta = DeltaPart(
                        part_files(spec.delta_uri, spec.delta_storage),
                        f"{_partition_dir(collection)}/part-{spec.snapshot_id[:8]}-{spec.chunk.index:06d}-{uuid.uuid4().hex[:8]}.zstd.parquet",
                        compression="zstd",
                        compression_level=1,
                        use_dictionary=["topic", "op", "source", "headers", "key_schema", "value_schema"],
                        write_statistics=False,
                    )
                delta.write(piece.drop_columns(["collection"]))
            if kafka is not None or jsonl is not None:
                topic = piece["topic"][0].as_py()
            if kafka is not None:
                for keys, values in kafka_bytes(piece):
                    # one wait for the whole chunk, below
                    kafka.send_serialized(topic, keys, values, spec.headers, wait=False)
            if jsonl is not None:
                for lines in jsonl_lines(topic, piece):
                    _write_string_data(jsonl, lines)
        if delta is not None:
            written = delta.finish()
        if kafka is not None:
            kafka.flush()  # the chunk counts as done only once the broker holds all of it
    except BaseException:
        if kafka is not None:
            _PRODUCER.drop()  # its unsent records and errors go with it
        failed = True
        raise
    else:
        failed = False
    finally:
        if jsonl is not None:
            # No fsync: the part is only read back by the driver (through the page cache) and
            # deleted once appended, and the driver fsyncs the output file it appends to. A lost
            # part (a crash) means a chunk not committed, which is read again.
            jsonl.close()
        if failed:  # never committed nor appended: not left behind (a crash still may)
            if res.jsonl_part:
                with contextlib.suppress(OSError):
                    os.unlink(res.jsonl_part)
            if delta is not None:
                delta.abort()
    if delta is not None and written is not None:
        res.delta_files.append(
            {
                "path": delta.rel,
                "size": written.size,
                "partition_values": {"collection": spec.chunk.table},
                "modification_time": written.modification_time,
                "stats": orjson.dumps({"numRecords": res.rows}).decode(),
            }
        )
    res.seconds = time.monotonic() - t0
    return res
