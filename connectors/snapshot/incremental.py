"""Incremental snapshots (DBLog, as Debezium 3.6): the controller the engine and the signal
handlers share.

The engine hands every batch to `process` while a snapshot runs (`active`; one attribute check
per batch otherwise). In the batch's records, in stream order, it finds the current chunk's
watermarks (rows of the signal table: `<chunk>-open` inserted, then `<chunk>-close` inserted
— insert_insert — or `<chunk>-open` deleted — insert_delete), collects between them the keys of
every change event of the snapshotted tables, and at the close watermark takes the chunk from the
staging table (written by the reader, `incremental_read.py`, before it wrote the close), drops
the rows whose key changed inside the window and puts the rest into the batch right after the
close watermark, as `op: r` events with `source.snapshot: incremental`.

Progress is kept where Debezium keeps it, in the offsets: every batch's offset carries the
snapshot's state after that batch (`incremental_snapshot_collections`, `_primary_key` (last key
read), `_maximum_key`, `_correlation_id`, and Tidemark's `incremental_snapshot_tidemark`: chunk
number, the open window's keys, paused, and with the Spark reader the windows of later chunks),
and, once a snapshot signal was applied, the keys of the last ones (`incremental_snapshot_signals`).
With the Spark reader (`incremental_plan.py`, `spark_jobs/incremental_chunks.py`) windows overlap:
a chunk closed before the one before it waits, its window still open, and goes out right after it. The state and the rows a close watermark released are
in the same batch, so a sink that stores the batch stores both.

A restart takes the state of the newest offset a sink holds (Delta's, when it is ahead of the
offsets table the other sinks rely on): the engine writes Delta last, so every sink holds that
batch and the rows released up to it. The stream replays from the oldest offset; the replayed
records (up to the newest offset's position) are passed on without being scanned, as their
watermarks are already in that state. A signal the journal hands over again because the crash
came before its `processed` commit is recognised by its key and not applied twice (a snapshot
started again would write its chunks into Delta a second time). A chunk the staging area does not
hold after a crash is read again in a new window (a local chunk goes out once encoded, before its
file is written: jsonl/Kafka may get it twice, Delta never, as its state past the chunk rides in
the commit of its rows).
"""

from __future__ import annotations

import logging
import os
import queue
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import orjson
import pyarrow as pa

from connectors.api import Batch, Record
from connectors.format.rowblock import CHUNK_ROWS, RowBlock, Wire
from connectors.format.serde import PLACEHOLDER, split_at_placeholder
from connectors.format.tableschema import TableSchema
from connectors.settings.config import ConnectorConfig
from connectors.signals.model import (
    EXECUTE_SNAPSHOT,
    PAUSE_SNAPSHOT,
    RESUME_SNAPSHOT,
    STOP_SNAPSHOT,
    ExecuteSnapshot,
    Request,
    SignalError,
    SignalRecord,
    StopSnapshot,
)
from connectors.signals.notify import Notifier
from connectors.signals.processor import Handlers
from connectors.sinks.common import schema_flags
from connectors.snapshot.incremental_gtid import GtidWindows
from connectors.snapshot.incremental_read import (
    WINDOW_CLOSE,
    WINDOW_OPEN,
    ChunkReader,
    ChunkSource,
    chunk_settings,
    lead,
)
from connectors.snapshot.incremental_staging import ChunkMeta, StagedChunk, Staging, dedup_of

log = logging.getLogger(__name__)

PREFIX = "incremental_snapshot_"
HOLD_MAX_S = 5.0  # the longest a chunk waits for a lagging stream (the snapshot never stops)
DURABLE_WAIT_S = 30.0  # how long a snapshot signal waits for its effect to be stored with a batch


def strip(offset: dict[str, Any] | None) -> dict[str, Any] | None:
    """The offset without the incremental snapshot's keys (what the source resumes from)."""
    if not offset or not any(k.startswith(PREFIX) for k in offset):
        return offset
    return {k: v for k, v in offset.items() if not k.startswith(PREFIX)}


@dataclass
class Progress:
    snapshot_id: str
    correlation_id: str | None
    collections: list[dict[str, Any]]  # to go, the current first: {"id", "condition", "surrogate_key"}
    max_key: list[Any] | None = None
    last_key: list[Any] | None = None
    table_rows: int = 0
    chunk_seq: int = 0
    window_open: bool = False
    window_keys: list[list[str]] = field(default_factory=list)  # [table, dedup] seen in the window
    paused: bool = False
    # Windows of later chunks, open while this one is (reader=spark reads chunks at once): chunk
    # number → {"keys": [[table, dedup], ...] seen since its open, "closed": its close was seen}.
    # A chunk goes out only after the ones before it, so its window stays open until then.
    ahead: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def chunk_id(self) -> str:
        return f"{self.snapshot_id}-{self.chunk_seq}"

    @property
    def tables(self) -> list[str]:
        return [c["id"] for c in self.collections]

    def advance(self, meta: ChunkMeta) -> None:
        """The progress once chunk `chunk_seq` (`meta`: what reading it found) is emitted."""
        if meta.completed:
            self.collections = [c for c in self.collections if c["id"] not in meta.completed]
        current = meta.table is not None and self.collections and self.collections[0]["id"] == meta.table
        if current and meta.rows is not None:  # planned: chunks counted here, in order
            self.max_key, self.last_key, self.table_rows = (
                meta.max_key,
                meta.last_key,
                self.table_rows + meta.rows,
            )
            if meta.ends:
                self.collections.pop(0)
                self.max_key, self.last_key, self.table_rows = None, None, 0
        elif current:
            self.max_key, self.last_key, self.table_rows = meta.max_key, meta.last_key, meta.table_rows
        else:  # (its table was stopped meanwhile)
            self.max_key, self.last_key, self.table_rows = None, None, 0
        self.chunk_seq += 1
        self.window_open, self.window_keys = False, []

    def copy(self) -> Progress:
        return replace(
            self,
            collections=[dict(c) for c in self.collections],
            window_keys=list(self.window_keys),
            ahead={k: {"keys": list(v["keys"]), "closed": v["closed"]} for k, v in self.ahead.items()},
        )

    def to_offset(self) -> dict[str, Any]:
        def dumps(v: Any) -> str:
            return orjson.dumps(v).decode()

        collections = [
            {
                "incremental_snapshot_collections_id": c["id"],
                "incremental_snapshot_collections_additional_condition": c.get("condition"),
                "incremental_snapshot_collections_surrogate_key": c.get("surrogate_key"),
            }
            for c in self.collections
        ]
        own = {
            "snapshot_id": self.snapshot_id,
            "table_rows": self.table_rows,
            "chunk_seq": self.chunk_seq,
            "window_open": self.window_open,
            "window_keys": self.window_keys,
            "paused": self.paused,
        }
        if self.ahead:
            own["ahead"] = self.ahead
        return {
            f"{PREFIX}collections": dumps(collections),
            f"{PREFIX}primary_key": dumps(self.last_key),
            f"{PREFIX}maximum_key": dumps(self.max_key),
            f"{PREFIX}correlation_id": self.correlation_id,
            f"{PREFIX}tidemark": dumps(own),
        }

    @classmethod
    def from_offset(cls, offset: Mapping[str, Any] | None) -> Progress | None:
        if not offset or f"{PREFIX}tidemark" not in offset:
            return None
        own = orjson.loads(offset[f"{PREFIX}tidemark"])
        collections = [
            {
                "id": c["incremental_snapshot_collections_id"],
                "condition": c.get("incremental_snapshot_collections_additional_condition"),
                "surrogate_key": c.get("incremental_snapshot_collections_surrogate_key"),
            }
            for c in orjson.loads(offset[f"{PREFIX}collections"])
        ]
        return cls(
            own["snapshot_id"],
            offset.get(f"{PREFIX}correlation_id"),
            collections,
            orjson.loads(offset[f"{PREFIX}maximum_key"]),
            orjson.loads(offset[f"{PREFIX}primary_key"]),
            int(own.get("table_rows", 0)),
            int(own["chunk_seq"]),
            bool(own.get("window_open")),
            [list(k) for k in own.get("window_keys", [])],
            bool(own.get("paused")),
            {
                str(k): {"keys": [list(x) for x in v["keys"]], "closed": bool(v["closed"])}
                for k, v in own.get("ahead", {}).items()
            },
        )


@dataclass(slots=True)
class Unbuilt(Record):
    """A released chunk's place in a batch while the controller's lock is held: `process` calls
    `build` for its records after releasing it, so the chunk reader goes on meanwhile (py-spy:
    building them under the lock kept the reader waiting for it 18 % of a snapshot's time)."""

    build: Callable[[], list[Record]] | None = None


def built(records: list[Record]) -> list[Record]:
    """`records` with each `Unbuilt` replaced by the records it builds."""
    out: list[Record] = []
    for r in records:
        if isinstance(r, Unbuilt):
            assert r.build is not None
            out += r.build()
        else:
            out.append(r)
    return out


def applied_signals(offset: Mapping[str, Any] | None) -> list[str]:
    """The keys of the last snapshot signals applied, as `offset` stores them."""
    if not offset:
        return []
    if f"{PREFIX}signals" in offset:
        return list(orjson.loads(offset[f"{PREFIX}signals"]))
    if f"{PREFIX}tidemark" in offset:  # (kept in the progress before they had a key of their own)
        return list(orjson.loads(offset[f"{PREFIX}tidemark"]).get("signals", []))
    return []


def _values(v: Any) -> list[Any] | None:
    return list(v.values()) if isinstance(v, dict) else None


class IncrementalSnapshots:
    """The controller: engine side (`active`, `restore`, `process`, `settled`), reader side
    (`next_work`, `attempted`, `publish`) and the snapshot signals' handlers (`register`)."""

    def __init__(
        self,
        cfg: ConnectorConfig,
        notifier: Notifier,
        factory: Callable[[], ChunkSource],
        signal_table: str | None,
    ) -> None:
        props = cfg.origin.properties
        self.cfg = cfg
        self.notifier = notifier
        self.factory = factory
        self.signal_table = signal_table
        self.staging = Staging(cfg.warehouse, cfg.name)
        self.chunk_size, self.strategy = chunk_settings(cfg)
        self.reader = ChunkReader(
            self, factory, self.staging, chunk_size=self.chunk_size, strategy=self.strategy
        )
        self._cond = threading.Condition()
        self.progress: Progress | None = None
        # Keys of the last snapshot signals applied: stored with every batch once there is one,
        # so a signal the journal hands over again after a crash is not applied twice.
        self.applied: list[str] = []
        self._applied_json: str | None = None
        self._restored = False  # the engine restored the stored state: signals may act on it
        self._replayed: tuple | None = None  # records up to here are a replay already in the state
        self._offset_key: Callable[[dict[str, Any]], tuple] | None = None
        self.active = False  # the engine calls `process` only while this is set
        self._gen = 0  # bumped by every change the stream must store (signals, restores)
        self._committed_gen = 0  # ... and that every sink holds (and the offsets table, if used)
        self.needs_store = False  # a sink keeps no offsets: the offsets table must hold a change too
        self._gen_of: dict[int, tuple[dict[str, Any], int]] = {}  # offered offset → its gen
        self._attempted: tuple[str, int, int] | None = None
        self._closed = False
        self._schemas: dict[str, TableSchema] = {}
        # The schema each chunk was read with (the reader reads one chunk ahead, possibly after
        # a DDL): a chunk's rows go out with their own schema, not the newest published one.
        self._chunk_schemas: dict[str, TableSchema] = {}
        # incremental.snapshot.allow.schema.changes (MySQL/MariaDB, as Debezium): a chunk of a
        # table whose DDL the stream passed since the previous chunk went out is read again.
        self.allow_schema_changes = cfg.connector != "postgres" and bool(
            props.get("incremental.snapshot.allow.schema.changes")
        )  # (validated: a bool)
        self._ddl: list[tuple[str, Any]] = []  # (table, stream position) of DDL the stream passed
        self._stale: set[str] = set()  # tables whose DDL the stream passed: the reader reloads them
        # (snapshot id, gen): a snapshot that ended; its staged chunks are deleted once every sink
        # holds a batch after its end (no restart can replay a close watermark of it any more)
        self._ended: tuple[str, int] | None = None
        self.emitted = 0  # snapshot records emitted by this process
        # (key, value schemas enabled) of the Kafka/jsonl bytes a chunk's rows carry (`Record.wire`);
        # None: no sink writes those bytes (Delta keeps the payloads' columns)
        self.wire_flags = schema_flags(cfg) if {"kafka", "jsonl"} & set(cfg.sink.type) else None
        self._notices: queue.SimpleQueue[Callable[[], Any] | None] = queue.SimpleQueue()
        self._notice_thread: threading.Thread | None = None
        # tidemark.incremental.snapshot.reader=spark: the chunk job reads, started by `launcher`
        self.spark = cfg.runtime.incremental_snapshot_reader == "spark"
        self.launcher: Any = None
        # The stream goes first: a chunk's rows share the engine and the sinks with it, so no new
        # chunk window opens while the stream lags more than this (for at most HOLD_MAX_S a chunk).
        self.max_lag_ms = cfg.runtime.incremental_snapshot_max_stream_lag_ms
        self._lag_ms, self._lag_at = 0.0, 0.0  # the last batch's distance from the source, and when
        self._backlog = False  # whether the source had more waiting after the last batch
        self._unbuilt = False  # a chunk released in the batch `process` scans: its records to build
        self.held_s = 0.0  # how long chunks were held back for the stream (logged at the end)
        # read.only=true (MySQL/MariaDB): GTID watermarks, nothing written to the source database
        self.gtid = (
            GtidWindows(self._cond) if cfg.connector != "postgres" and props.get("read.only") else None
        )
        if self.gtid is not None:
            self.reader.ahead = 1
        # A chunk read again after DDL gets a new number past every chunk read ahead: the thread
        # reader reads `reader.ahead` ahead; the Spark job plans up to `lead` past the last stored.
        parallelism = cfg.runtime.incremental_snapshot_parallelism
        self._reread_skip = 1 + (lead(self.chunk_size, parallelism) if self.spark else self.reader.ahead)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._closed = False
        if not self.spark:
            self.reader.start()
        elif os.environ.get("TIDEMARK_INCREMENTAL_JOB") == "airflow":
            log.info(
                "incremental snapshots: the chunk job is run by Airflow (the stream DAG's read_chunks task)"
            )
        elif self.launcher is None:
            from connectors.snapshot.incremental_launch import JobLauncher

            self.launcher = JobLauncher(self)
            self.launcher.start()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self.launcher is not None:
            self.launcher.stop(30.0)
            self.launcher = None
        else:
            self.reader.join(30.0)
        if self._notice_thread is not None:
            self._notices.put(None)
            self._notice_thread.join(10.0)
            self._notice_thread = None

    def register(self, handlers: Handlers) -> None:
        handlers.register(EXECUTE_SNAPSHOT, _Handler(self.execute))
        handlers.register(STOP_SNAPSHOT, _Handler(self.stop))
        handlers.register(PAUSE_SNAPSHOT, _Handler(self.pause))
        handlers.register(RESUME_SNAPSHOT, _Handler(self.resume))

    # ------------------------------------------------------------------ engine side
    def restore(
        self,
        offset: dict[str, Any] | None,
        newest: dict[str, Any] | None = None,
        offset_key: Callable[[dict[str, Any]], tuple] | None = None,
    ) -> dict[str, Any] | None:
        """Take the snapshot state stored with `newest`, the newest offset a sink holds (default:
        `offset`, the one the stream resumes from); returns `offset` for the source (without that
        state). Records up to `newest`'s position are a replay: passed on unscanned."""
        state = offset
        self._replayed = None
        if (
            newest is not None
            and offset is not None
            and offset_key is not None
            and offset_key(newest) > offset_key(offset)
        ):
            state, self._replayed = newest, offset_key(newest)
        self._offset_key = offset_key
        p = Progress.from_offset(state)
        if self.gtid is not None and p is not None:
            self.gtid.restore(self.staging, p)
        with self._cond:
            self.progress = p
            self._set_applied(applied_signals(state))
            self._gen += 1
            self.active = True  # the first batch says what the state is
            self._restored = True
            self._cond.notify_all()
        if p is not None:
            log.info(
                "incremental snapshot %s in progress: %s to go, next chunk %d%s",
                p.snapshot_id,
                ", ".join(p.tables),
                p.chunk_seq,
                " (paused)" if p.paused else "",
            )
        return strip(offset)

    def process(self, batch: Batch) -> None:
        """Watermarks, window keys and the chunk's rows in `batch`; the state into its offset."""
        src_ts = batch.extra.get("source_ts_ms")
        if src_ts and batch.records:  # (a position-only batch carries its last change's time)
            self._lag_ms, self._lag_at = time.time() * 1000 - src_ts, time.monotonic()
        # the source had more waiting: a busy engine that reads no batch for a while still lags
        self._backlog = bool(batch.extra.get("more"))
        self._settle_staged(batch)
        with self._cond:
            p = self.progress
            if p is not None:
                self._scan_new(batch, p)
            p = self.progress
            batch.offset = {**batch.offset, **p.to_offset()} if p is not None else dict(batch.offset)
            if self._applied_json is not None:
                batch.offset[f"{PREFIX}signals"] = self._applied_json
            batch.extra["incremental_gen"] = self._gen
            if self.spark and p is not None:
                # The chunk job holds new chunks while the stream lags (as the thread reader does).
                batch.offset[f"{PREFIX}stream"] = f'{{"lag_ms":{self._lag_ms:.0f}}}'
            if self.needs_store:
                self._gen_of[id(batch.offset)] = (batch.offset, self._gen)
            # Batches are followed until the last change is stored too: the offsets table stores
            # only the newest offset offered, and one of a batch not followed would never say
            # the change is stored (a signal waited DURABLE_WAIT_S for nothing).
            self.active = p is not None or self._committed_gen < self._gen or bool(self.applied)
        if self._unbuilt:
            self._unbuilt = False
            batch.records = built(batch.records)
            batch.extra[CHUNK_ROWS] = True  # (the jsonl sink takes their blocks whole)

    def _settle_staged(self, batch: Batch) -> None:
        """Wait for the staging commits of the chunks `batch` closes before taking the lock:
        the chunk reader needs the lock to go on reading ahead meanwhile (measured: waiting under
        it kept the reader blocked for half of a snapshot's time)."""
        if self.spark or self.progress is None:
            return  # (the Spark job stages a chunk before its close watermark)
        sig = self.signal_table
        for r in batch.records:
            if r.collection == sig:
                mark = self._watermark(r)
                if mark is not None and mark[0] == "close":
                    self.staging.settle(mark[1])

    def _scan_new(self, batch: Batch, p: Progress) -> None:
        """Scan `batch` for the snapshot, but for its records up to `_replayed` (a replay after a
        restart of what the restored state already holds)."""
        records, until = batch.records, self._replayed
        skip = 0
        if until is not None:
            assert self._offset_key is not None
            if self._offset_key(batch.offset) <= until:
                return  # all of it replayed
            self._replayed = None
            while skip < len(records):
                pos = records[skip].pos
                if pos is None or pos > until:
                    break
                skip += 1
        rest = Batch(records[skip:], batch.offset, batch.seq, batch.extra) if skip else batch
        out = self._scan(rest.records, p) if self.gtid is None else self.gtid.scan(self, rest, p)
        if out is not None:
            batch.records = records[:skip] + out if skip else out

    def _set_applied(self, keys: list[str]) -> None:
        self.applied = keys[-20:]
        self._applied_json = orjson.dumps(self.applied).decode() if self.applied else None

    def settled(self, batch: Batch) -> None:
        """Every sink holds `batch`."""
        gen = batch.extra.get("incremental_gen")
        if gen is not None and not self.needs_store:
            self._stored_gen(gen)

    def when_stored(self, ack: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
        """`ack` (what the offset flusher calls once it stored an offset), also noting which
        changes are now stored in the offsets table."""

        def stored(offset: dict[str, Any]) -> None:
            ack(offset)
            if self._gen_of:
                with self._cond:
                    entry = self._gen_of.get(id(offset))
                    if entry is None or entry[0] is not offset:
                        return
                    gen = entry[1]
                    self._gen_of = {k: v for k, v in self._gen_of.items() if v[1] > gen}
                self._stored_gen(gen)

        return stored

    def _stored_gen(self, gen: int) -> None:
        if gen > self._committed_gen:
            with self._cond:
                self._committed_gen = max(self._committed_gen, gen)
                self._cond.notify_all()
                ended = self._ended
                if ended is None or ended[1] > self._committed_gen:
                    return
                self._ended = None
            # off the caller's thread (the engine's or the offset flusher's): a Delta delete
            threading.Thread(
                target=self._drop_staged, args=(ended[0],), name="tidemark-staging-cleanup", daemon=True
            ).start()

    def _drop_staged(self, snapshot_id: str) -> None:
        try:
            self.staging.drop_snapshot(snapshot_id)
            log.info("incremental snapshot %s: its staged chunks are deleted", snapshot_id)
        except Exception as e:  # noqa: BLE001 - the next snapshot deletes them too
            log.warning("incremental snapshot %s: deleting its staged chunks: %s", snapshot_id, e)

    def _scan(self, records: list[Record], p: Progress) -> list[Record] | None:
        """The batch's records with the chunks released in it (None: unchanged).

        Windows are kept per chunk number (`windows`: keys seen since its open). The thread
        reader opens a chunk's window only after the previous one closed; the Spark job reads
        chunks at once, so windows overlap: a close of a later chunk is noted and the chunk goes
        out once the ones before it did, with the keys seen up to then dropped (its window is
        extended to where it goes out)."""
        sig = self.signal_table
        windows: dict[int, set[tuple[str, str]]] = {
            int(n): {(t, k) for t, k in w["keys"]} for n, w in p.ahead.items()
        }
        closed = {int(n) for n, w in p.ahead.items() if w["closed"]}
        if p.window_open:
            windows[p.chunk_seq] = {(t, k) for t, k in p.window_keys}
        watched, surrogates = self._watched(p)
        out: list[Record] | None = None
        for i, r in enumerate(records):
            c = r.collection
            released: list[Record] | None = None
            if c is None:
                pass
            elif c == sig:
                mark = self._watermark(r)
                n = self._chunk_number(p, mark)
                if n is None or n < p.chunk_seq:
                    pass
                elif mark is not None and mark[0] == "open":
                    windows.setdefault(n, set())
                elif n > p.chunk_seq:  # a later chunk closed: it goes out after this one
                    windows.setdefault(n, set())
                    closed.add(n)
                else:
                    released = self._release(r, p, windows, closed)
                    if self.progress is None:
                        out = out if out is not None else records[:i]
                        out.append(r)
                        out.extend(released)
                        out.extend(records[i + 1 :])
                        return out
                    watched, surrogates = self._watched(p)
            elif windows and c in watched:
                if r.key is not None:
                    seen = (c, orjson.dumps(r.key).decode())
                    for w in windows.values():
                        w.add(seen)
                elif surrogates.get(c):
                    col = surrogates[c]
                    for img in (r.value or {}).get("before"), (r.value or {}).get("after"):
                        if isinstance(img, dict):
                            seen = (c, orjson.dumps(img.get(col)).decode())
                            for w in windows.values():
                                w.add(seen)
            if released:
                out = out if out is not None else records[:i]
                out.append(r)
                out.extend(released)
            elif out is not None:
                out.append(r)
        p.window_open = p.chunk_seq in windows
        p.window_keys = [list(k) for k in windows.get(p.chunk_seq, ())]
        p.ahead = {
            str(n): {"keys": [list(k) for k in w], "closed": n in closed}
            for n, w in windows.items()
            if n > p.chunk_seq
        }
        return out

    @staticmethod
    def _chunk_number(p: Progress, mark: tuple[str, str] | None) -> int | None:
        """The chunk number a watermark of `p`'s snapshot names (None: not one of its chunks)."""
        if mark is None:
            return None
        cid = mark[1][: -len("-open")] if mark[0] == "open" and mark[1].endswith("-open") else mark[1]
        snapshot, _, n = cid.rpartition("-")
        return int(n) if snapshot == p.snapshot_id and n.isdigit() else None

    def _release(
        self, watermark: Record, p: Progress, windows: dict[int, set[tuple[str, str]]], closed: set[int]
    ) -> list[Record]:
        """At the close of chunk `p.chunk_seq`: it goes out, and so do the chunks after it whose
        close was seen before (in chunk order)."""
        out: list[Record] = []
        while True:
            n = p.chunk_seq
            p.window_keys = [list(k) for k in windows.pop(n, ())]
            closed.discard(n)
            out.extend(self._close(watermark, p))
            if self.progress is None:
                return out
            for gone in [m for m in windows if m < p.chunk_seq]:  # (skipped by a re-read)
                windows.pop(gone)
                closed.discard(gone)
            if p.chunk_seq not in closed:
                return out

    @staticmethod
    def _watched(p: Progress) -> tuple[set[str], dict[str, str | None]]:
        return set(p.tables), {c["id"]: c.get("surrogate_key") for c in p.collections}

    def _watermark(self, r: Record) -> tuple[str, str] | None:
        """("open" | "close", chunk id or open id) when `r` is a watermark of the signal table."""
        v = r.value
        if not isinstance(v, dict):
            return None
        op = v.get("op")
        if op == "c":
            vals = _values(v.get("after"))
            if not vals or len(vals) < 2:
                return None
            sid, kind = str(vals[0]), vals[1]
            if kind == WINDOW_OPEN:
                return "open", sid
            if kind == WINDOW_CLOSE and sid.endswith("-close"):
                return "close", sid[: -len("-close")]
        elif op == "d":
            vals = _values(v.get("before"))
            # insert_delete closes the window by deleting the open row
            if vals and isinstance(vals[0], str) and vals[0].endswith("-open"):
                return "close", vals[0][: -len("-open")]
        return None

    def _close(self, watermark: Record, p: Progress) -> list[Record]:
        """The chunk's rows to emit at its close watermark; moves the progress on."""
        staged = self.staging.read(p.chunk_id)
        if staged is None:
            # Closed but not staged (the process that read it died before its staging commit, or
            # that commit failed): nothing of it went out; read the same range again in a new
            # window, past the chunks read ahead (they follow this range).
            log.warning(
                "incremental snapshot: chunk %s was closed but not staged; reading it again", p.chunk_id
            )
            return self._read_again(p)
        meta = staged.meta
        if self._ddl_before(meta.table, watermark.pos):
            # As Debezium's rereadChunk: the rows may have been read before the DDL; read the
            # same key range again in a new window (the chunks read ahead are skipped with it,
            # and the Spark job plans afresh: no plan exists at the new number).
            log.info(
                "incremental snapshot: %s changed its schema while chunk %s was out; reading it again",
                meta.table,
                p.chunk_id,
            )
            return self._read_again(p)
        dropped = {k for t, k in p.window_keys if t == meta.table}
        schema = self._chunk_schemas.pop(p.chunk_id, None)
        rows, build = self._rows(watermark, staged, dropped, schema) if meta.table in p.tables else (0, None)
        before = (p.correlation_id, p.tables, p.table_rows)
        p.advance(meta)
        if meta.rows is not None:
            self._planned_notices(before, meta, done=not p.collections)
        if not p.collections:
            log.info("incremental snapshot %s completed", p.snapshot_id)
            self.progress = None
            self._ended = (p.snapshot_id, self._changed())
        log.debug(
            "incremental snapshot chunk of %s: %d rows, %d changed in the window",
            meta.table,
            rows,
            len(staged.afters) - rows,
        )
        self.emitted += rows
        self._cond.notify_all()
        if build is None:
            return []
        self._unbuilt = True
        return [Unbuilt("", None, None, build=build)]

    def _read_again(self, p: Progress) -> list[Record]:
        """Read chunk `p.chunk_seq`'s key range again in a new window: numbered past every chunk
        read or planned ahead (they follow this range); nothing of it goes out now."""
        self._chunk_schemas.pop(p.chunk_id, None)
        p.chunk_seq += self._reread_skip
        p.window_open, p.window_keys = False, []
        self._cond.notify_all()
        return []

    def _planned_notices(
        self, before: tuple[str | None, list[str], int], meta: ChunkMeta, done: bool
    ) -> None:
        """The notifications of a chunk the Spark job read (the thread reader sends its own): sent
        as it goes out, in chunk order, by a thread of their own (a channel may write a table)."""
        correlation, tables, rows = before
        n = self.notifier.incremental_snapshot
        sends: list[Callable[[], Any]] = []
        for t in meta.completed:
            status = (meta.statuses or {}).get(t, "SUCCEEDED")
            sends.append(partial(n.table_scan_completed, correlation, tables, t, 0, status))
        table = meta.table
        if table is not None and table in tables:
            last = meta.last_key or []
            sends.append(partial(n.in_progress, correlation, tables, table, meta.max_key, last))
            if meta.ends:
                total = rows + (meta.rows or 0)
                log.info("incremental snapshot: table %s done (SUCCEEDED, %d rows)", table, total)
                sends.append(partial(n.table_scan_completed, correlation, tables, table, total, "SUCCEEDED"))
        if done:
            sends.append(partial(n.completed, correlation))
        self._queue_notices(sends)

    def _queue_notices(self, sends: list[Callable[[], Any]]) -> None:
        with self._cond:  # (the engine's and the signal thread: one sender keeps the order)
            for send in sends:
                self._notices.put(send)
            if self._notice_thread is None or not self._notice_thread.is_alive():
                self._notice_thread = threading.Thread(
                    target=self._send_notices, name="tidemark-notices", daemon=True
                )
                self._notice_thread.start()

    def _notify(self, send: Callable[[], Any]) -> None:
        """A notification of a signal: with the Spark reader after those of the chunks that went
        out before it (they are queued), else at once."""
        if self.spark:
            self._queue_notices([send])
        else:
            send()

    def _send_notices(self) -> None:
        while True:
            send = self._notices.get()
            if send is None:
                return
            send()  # (a channel that fails logs it: notify never raises)

    def _ddl_before(self, table: str | None, pos: Any) -> bool:
        """Whether the stream passed DDL of `table` (allow.schema.changes) since the previous chunk
        went out, up to `pos`; forgets what is up to `pos`."""
        if not self._ddl:
            return False
        passed = [pos is None or at is None or at <= pos for _, at in self._ddl]
        hit = any(p and t == table for p, (t, _) in zip(passed, self._ddl, strict=True))
        self._ddl = [d for p, d in zip(passed, self._ddl, strict=True) if not p]
        return hit

    def _rows(
        self, watermark: Record, staged: StagedChunk, dropped: set[str], ts: TableSchema | None = None
    ) -> tuple[int, Callable[[], list[Record]] | None]:
        """The chunk's rows to emit (those whose key changed in the window dropped): how many,
        and what builds their records, which `process` calls once the lock is released."""
        table = staged.meta.table
        assert table is not None
        ts = ts or self._schema(table)
        if ts is None:
            if staged.afters:  # (a table dropped mid-snapshot leaves chunks without rows: nothing lost)
                log.warning(
                    "incremental snapshot: %s is gone (dropped or renamed) since this chunk of it "
                    "was read; its %d rows are not emitted (the stream has passed the DDL)",
                    table,
                    len(staged.afters),
                )
            return 0, None
        keys, afters, arrays = staged.keys, staged.afters, staged.arrays
        if dropped:
            # (what rows are recognised by is worked out only for a chunk whose window saw
            # changes of its table: a key per row, parsed and dumped again)
            dedup = staged.dedup or dedup_of(keys, afters, None)
            kept = [i for i, d in enumerate(dedup) if d not in dropped]
            if len(kept) < len(afters):
                keys, afters, arrays = [keys[i] for i in kept], [afters[i] for i in kept], None
        if arrays is not None and len(arrays[1]) != len(afters):
            arrays = None
        return len(afters), partial(self._records, watermark, table, keys, afters, ts, arrays)

    def _records(
        self,
        watermark: Record,
        table: str,
        keys: list[str | None],
        afters: list[str],
        ts: TableSchema,
        arrays: tuple[pa.Array | None, pa.Array] | None = None,
    ) -> list[Record]:
        base = dict((watermark.value or {}).get("source") or {})
        ns = time.time_ns()
        ns_part, _, name = table.partition(".")
        base.update(
            {
                "ts_ms": ns // 1_000_000,
                "ts_us": ns // 1000,
                "ts_ns": ns,
                "snapshot": "incremental",
                "table": name,
            }
        )
        if "schema" in base:  # PostgreSQL
            base["schema"] = ns_part
            # Debezium 3.6 leaves them out of incremental rows (measured against its output);
            # `sequence` keeps the close watermark's position
            base["lsn"] = base["txId"] = None
        else:
            base["db"] = ns_part
        wire: Wire | None = None
        if self.wire_flags is not None:
            # The Kafka/jsonl bytes around each row's staged key and `after`, built once per
            # chunk (serializing every ~3.5 kB value anew was most of the sink's work per row)
            kflag, vflag = self.wire_flags
            khead, ktail = split_at_placeholder(ts.key_schema, PLACEHOLDER, kflag)
            vhead, vtail = split_at_placeholder(ts.envelope_schema, self._value(base, PLACEHOLDER, ns), vflag)
            wire = (self.wire_flags, khead, ktail, vhead, vtail)
        # The rows stay the staged JSON columns (`RowBlock`): a row's key and `after` are its
        # staged text as `orjson.Fragment`s (the encoders write exactly orjson's bytes:
        # tests/test_pg_snapshot_columns.py, test_snapshot_mysql.py check it byte for byte), its
        # value the chunk's envelope with that `after`, made when a sink reads them.
        block = RowBlock(
            ts.topic,
            table,
            watermark.offset,
            watermark.pos,
            ts.key_schema,
            ts.envelope_schema,
            self._value(base, None, ns),
            keys,
            afters,
            wire,
            arrays,
        )
        return block.rows()

    @staticmethod
    def _value(source: dict[str, Any], after: Any, ns: int) -> dict[str, Any]:
        """A snapshot row's envelope (the shape `_records` builds for each row)."""
        return {
            "before": None,
            "after": after,
            "source": source,
            "transaction": None,
            "op": "r",
            "ts_ms": ns // 1_000_000,
            "ts_us": ns // 1000,
            "ts_ns": ns,
        }

    def _schema(self, table: str) -> TableSchema | None:
        ts = self._schemas.get(table)
        if ts is None:
            # Replaying a close watermark before the reader looked at the table (after a restart).
            src = self.factory()
            try:
                found = src.table(table)
            finally:
                src.close()
            if found is None:
                return None
            ts = self._schemas[table] = found[0]
        return ts

    # ------------------------------------------------------------------ reader side
    def publish(self, table: str, ts: TableSchema, chunk_id: str | None = None) -> None:
        self._schemas[table] = ts
        if chunk_id is not None:
            with self._cond:
                self._chunk_schemas[chunk_id] = ts
                while len(self._chunk_schemas) > 8:  # (chunks of a stopped snapshot)
                    self._chunk_schemas.pop(next(iter(self._chunk_schemas)))

    def schema_changed(self, tables: list[str], pos: Any) -> None:
        """The stream passed DDL that changes `tables` at `pos` (the MySQL source calls this
        while it decodes, on the engine's thread, before the batch reaches `process`): the
        reader reads their next chunks with the new schema (as Debezium reads with the schema
        the binlog's DDL gave it) and, with allow.schema.changes, the chunk that goes out next
        is read again."""
        with self._cond:
            self._stale.update(tables)
            if self.spark:  # (the thread reader publishes the schema each chunk was read with)
                for t in tables:
                    self._schemas.pop(t, None)
            p = self.progress
            if self.allow_schema_changes and p is not None:
                watched = set(p.tables)
                self._ddl.extend((t, pos) for t in tables if t in watched)

    def take_stale(self) -> set[str]:
        """The tables whose schema changed since the reader last asked."""
        with self._cond:
            stale, self._stale = self._stale, set()
            return stale

    def stream_first(self) -> None:
        """Wait while the stream lags more than `max_lag_ms` behind the source, for at most
        HOLD_MAX_S. A lag measured over a second ago is stale (an idle stream does not lag)
        unless the source had more waiting then: the engine is still busy with the backlog."""
        if self.max_lag_ms <= 0:
            return
        began = time.monotonic()
        with self._cond:
            while not self._closed and time.monotonic() - began < HOLD_MAX_S:
                if not self._lags():
                    break
                self._cond.wait(0.05)
        self.held_s += time.monotonic() - began

    def lagging(self) -> bool:
        """Whether `stream_first` would wait now."""
        with self._cond:
            return self.max_lag_ms > 0 and self._lags()

    def _lags(self) -> bool:
        stale = time.monotonic() - self._lag_at > 1.0 and not self._backlog
        return not (self._lag_ms <= self.max_lag_ms or stale)

    def next_work(self) -> tuple[Progress, tuple[str, int, int]] | None:
        """Wait for a chunk to read: (a copy of the progress, its token); None once closed."""
        with self._cond:
            while True:
                if self._closed:
                    return None
                p = self.progress
                if p is not None and not p.paused:
                    token = (p.snapshot_id, p.chunk_seq, self._gen)
                    if token != self._attempted:
                        return p.copy(), token
                self._cond.wait(1.0)

    def wants_position(self) -> bool:
        """Whether an idle stream should yield a position-only batch now (the sources ask): a
        read-only chunk waits for the stream to pass its window, or (reader=spark) a change of
        the snapshot's state waits to be stored, which the chunk job follows."""
        if self.gtid is not None and self.gtid.waiting():
            return True
        return self.spark and self._committed_gen < self._gen

    def wait_for_job(self) -> bool:
        """Until a snapshot runs and is not paused (reader=spark: the chunk job is wanted);
        False once closed."""
        with self._cond:
            self._cond.wait_for(
                lambda: self._closed or (self.progress is not None and not self.progress.paused)
            )
            return not self._closed

    def running(self, snapshot_id: str, table: str) -> bool:
        """Whether snapshot `snapshot_id`, and `table` in it, still runs (not stopped meanwhile)."""
        with self._cond:
            p = self.progress
            return p is not None and p.snapshot_id == snapshot_id and table in p.tables

    def completes(self, snapshot_id: str, tables: set[str]) -> bool:
        """Whether snapshot `snapshot_id` has no tables but `tables` (none was added to it, and
        it was not stopped, meanwhile)."""
        with self._cond:
            p = self.progress
            return p is not None and p.snapshot_id == snapshot_id and set(p.tables) <= tables

    def may_read_ahead(self, token: tuple[str, int, int]) -> bool:
        """Whether the chunk after the one `token` names may be read now: that chunk is still the
        one the engine waits for, nothing changed meanwhile, and the snapshot is not paused."""
        with self._cond:
            p = self.progress
            return (
                p is not None
                and not p.paused
                and not self._closed
                and (p.snapshot_id, p.chunk_seq, self._gen) == token
            )

    def attempted(self, token: tuple[str, int, int]) -> None:
        with self._cond:
            self._attempted = token

    def sleep(self, seconds: float) -> bool:
        """Wait `seconds` (False: closed meanwhile)."""
        with self._cond:
            self._cond.wait_for(lambda: self._closed, seconds)
            return not self._closed

    # ------------------------------------------------------------------ signals
    def _changed(self, signal: SignalRecord | None = None) -> int:
        """Note a change the stream must store (by `signal`, known as applied from now on)."""
        if signal is not None and signal.key not in self.applied:
            self._set_applied([*self.applied, signal.key])
        self._gen += 1
        self.active = True
        self._cond.notify_all()
        return self._gen

    def _applied(self, signal: SignalRecord) -> bool:
        """Whether `signal` was applied before (the journal hands a signal over again when a crash
        came before its `processed` commit). Waits for the engine's restore of the stored state
        first: the answer is in it."""
        with self._cond:
            self._cond.wait_for(lambda: self._restored or self._closed)
            if signal.key not in self.applied:
                return False
        log.info("signal '%s' was applied before the last stop; not applied again", signal.id)
        return True

    def _wait_stored(self, gen: int) -> None:
        """Until a batch carrying the change is held by every sink (a signal is journaled as
        processed only then, so a crash before makes the journal hand it over again)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._committed_gen >= gen or self._closed, DURABLE_WAIT_S):
                log.warning(
                    "incremental snapshot: no batch stored the signal's effect within %.0fs", DURABLE_WAIT_S
                )

    def execute(self, request: Request, signal: SignalRecord) -> str | None:
        assert isinstance(request, ExecuteSnapshot)
        if request.snapshot_type == "blocking":
            # (snapshot/blocking.py takes these when the engine's wiring registered it)
            raise SignalError("blocking snapshots need the streaming engine (nothing was run)")
        if self._applied(signal):
            return "applied before the last stop (already part of the incremental snapshot state)"
        if not self.signal_table and self.gtid is None:
            raise SignalError(
                "an incremental snapshot needs signal.data.collection: its watermarks are written to "
                "that table and read back from the log"
            )
        from connectors.settings.filters import TableFilters

        ns, _, name = (self.signal_table or "").partition(".")
        if self.gtid is None and not TableFilters.from_settings(self.cfg.source).captures(ns, name):
            raise SignalError(
                f"the signal table {self.signal_table} is not captured: the snapshot's watermarks are "
                "read back from the log (add it to the table include list)"
            )
        tables = list(request.tables) or [c.replace('"', "") for c in request.data_collections]
        if not tables:
            return "no data-collections: nothing to snapshot"
        self._check_tables(tables, request.surrogate_key)
        conditions = {c.table: c.sql for c in request.conditions}
        new = [
            {"id": t, "condition": conditions.get(t), "surrogate_key": request.surrogate_key} for t in tables
        ]
        with self._cond:
            p = self.progress
            started = p is None
            if p is None:
                p = Progress(uuid.uuid4().hex[:12], signal.id or None, new)
            else:
                running = sorted(set(p.tables) & set(tables))
                if running:
                    raise SignalError(f"an incremental snapshot of {', '.join(running)} is already running")
                p.collections.extend(new)
            self.progress = p
            gen = self._changed(signal)
            snapshot_id = p.snapshot_id
        if started:
            self.staging.drop_other_snapshots(snapshot_id)
        self.notifier.incremental_snapshot.started(signal.id or None, tables)
        self._wait_stored(gen)
        return f"incremental snapshot {snapshot_id} of {', '.join(tables)}"

    def _check_tables(self, tables: list[str], surrogate: str | None) -> None:
        src = self.factory()
        try:
            for t in tables:
                found = src.table(t)
                if found is None:
                    raise SignalError(f"table {t} does not exist or is not captured")
                if not found[0].key_names and not surrogate:
                    raise SignalError(
                        f"table {t} has no primary key: an incremental snapshot reads it in key order; "
                        'name a unique, ordered column as "surrogate-key" in the signal'
                    )
                if surrogate and surrogate not in src.columns(t):
                    raise SignalError(f"surrogate-key {surrogate!r} is not a column of {t}")
        finally:
            src.close()

    def stop(self, request: Request, signal: SignalRecord) -> str | None:
        assert isinstance(request, StopSnapshot)
        if self._applied(signal):
            return "applied before the last stop"
        with self._cond:
            p = self.progress
            if p is None:
                log.warning("no incremental snapshot is running: stop-snapshot '%s' ignored", signal.id)
                return "no incremental snapshot is running"
            if request.data_collections:
                pats = [c.replace('"', "") for c in request.data_collections]
                gone = [t for t in p.tables if any(t == x or re.fullmatch(x, t) for x in pats)]
                current = p.tables[0]
                p.collections = [c for c in p.collections if c["id"] not in gone]
                if current in gone:
                    p.max_key, p.last_key, p.table_rows = None, None, 0
                if not p.collections:
                    self.progress = None
                correlation = p.correlation_id
            else:
                gone = p.tables
                correlation = p.correlation_id
                self.progress = None
            gen = self._changed(signal)
            if self.progress is None:
                self._ended = (p.snapshot_id, gen)
        log.info("incremental snapshot: stopped %s", ", ".join(gone) or "nothing")
        self._notify(
            partial(
                self.notifier.incremental_snapshot.aborted,
                correlation,
                gone if request.data_collections else None,
            )
        )
        self._wait_stored(gen)
        return f"stopped: {', '.join(gone)}" if gone else "no table of the snapshot matched"

    def pause(self, request: Request, signal: SignalRecord) -> str | None:
        return self._pause(True, signal)

    def resume(self, request: Request, signal: SignalRecord) -> str | None:
        return self._pause(False, signal)

    def _pause(self, paused: bool, signal: SignalRecord) -> str | None:
        if self._applied(signal):
            return "applied before the last stop"
        with self._cond:
            p = self.progress
            if p is None or p.paused == paused:
                return (
                    "no running incremental snapshot"
                    if p is None
                    else f"already {'paused' if paused else 'running'}"
                )
            p.paused = paused
            gen = self._changed(signal)
            correlation, tables = p.correlation_id, p.tables
        n = self.notifier.incremental_snapshot
        self._notify(partial(n.paused if paused else n.resumed, correlation, tables))
        self._wait_stored(gen)
        return "paused" if paused else "resumed"


class _Handler:
    def __init__(self, fn: Callable[[Request, SignalRecord], str | None]) -> None:
        self.fn = fn

    def handle(self, request: Request, signal: SignalRecord) -> str | None:
        return self.fn(request, signal)


def build(cfg: ConnectorConfig, notifier: Notifier, signal_table: str | None) -> IncrementalSnapshots:
    """The controller of `cfg`'s connector."""

    def factory() -> ChunkSource:
        from connectors.snapshot.incremental_plan import chunk_source

        return chunk_source(cfg, signal_table or "")

    return IncrementalSnapshots(cfg, notifier, factory, signal_table)
