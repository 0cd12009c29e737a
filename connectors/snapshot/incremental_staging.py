"""The incremental snapshot's staging area: `<warehouse>/_state/incremental_chunks` (one Arrow IPC
file per chunk, `incremental_files.py`) for a local warehouse, else the Delta table
`<warehouse>/_state/incremental_staging` (also where the Spark reader's chunk plans are kept).

The chunk reader writes each chunk here (its rows and one `meta` row saying what the chunk leaves
behind: table, last key, maximum key, tables to go) BEFORE it writes the chunk's close watermark
(the thread reader: before the engine emits it); the streaming engine takes the chunk from here
when it sees that watermark. A chunk is identified by `<snapshot id>-<chunk number>`, so after a crash the same
chunk number finds what was staged before (the replayed stream then emits exactly the rows it
emitted the first time). Partitioned by connector and chunk: a chunk's read touches one file.
A snapshot's rows are deleted when the next snapshot of the connector starts.

The reader and the engine are threads of one process, so the last chunks written are also kept
in memory (`CACHED` chunks, each one chunk of rows): the engine takes them from there and reads
the table only after a restart. The thread reader does not wait for the write (`wait=False`:
a writer thread stages the chunks; into Delta what waits goes in one commit): the engine's
`read` waits for it, so a chunk goes out only once it is staged, or, into a local warehouse's
files, once it is encoded (its file is written right after: `_write_loop`). The thread reader hands over
its rows as read (`ReadRows`): the writer thread encodes them, the chunks waiting together in one
call (at 1,024 rows a chunk, column-wise encoding is mostly per-call cost: measured at 44 % of
the reader's time when each chunk was encoded alone on the reader's thread). A crash before that commit
leaves a close watermark without a staged chunk, which the engine reads again in a new window
(nothing of it went out). `staged_ids` lists what an earlier process staged, so the reader looks
up the table only for those chunks. A read from the table opens only the chunk's own Parquet files
(pruned by partition in the Delta log): building a dataset over every staged file made each
chunk cost more than the one before (measured: 60% of the reader's time at 300 chunks).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import orjson
import pyarrow as pa

from connectors.signals.tables import TABLE_CONFIGURATION, state_uri
from connectors.snapshot.incremental_files import ChunkFiles, local_dir
from connectors.state.storage import storage_error

log = logging.getLogger(__name__)

CACHED = 8  # chunks kept in memory after their write (the reader runs up to 4 chunks ahead)
CHECKPOINT_EVERY = 50  # commits between Delta checkpoints of the staging table

SCHEMA = pa.schema(
    [
        pa.field("connector", pa.string(), nullable=False),
        pa.field("chunk", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # row | meta
        pa.field("ord", pa.int32(), nullable=False),
        pa.field("key", pa.string()),  # the event key's JSON (None: keyless table)
        pa.field("after", pa.string()),  # the `after` image's JSON
        pa.field("dedup", pa.string()),  # what a change event of the row is recognised by (null: its key)
        pa.field("meta", pa.string()),  # kind=meta: the chunk's ChunkMeta as JSON
    ]
)
# a chunk's own columns (a chunk file's; the Delta table adds the partition columns)
ROWS = pa.schema([f for f in SCHEMA if f.name not in ("connector", "chunk")])


@dataclass
class ChunkMeta:
    """What reading a chunk found, applied to the snapshot's progress when it is emitted."""

    table: str | None  # the table the rows are of (None: no rows; every table is done)
    last_key: list[Any] | None  # its chunk key of the last row read
    max_key: list[Any] | None  # its maximum key (read when its first chunk was)
    table_rows: int  # rows of `table` read so far, this chunk included
    completed: list[str]  # tables finished inside this chunk's window (before `table`)
    # read.only=true: the executed GTID sets before and after the read (incremental_gtid.py)
    low: str | None = None
    high: str | None = None
    # A chunk planned ahead (tidemark.incremental.snapshot.reader=spark, `incremental_plan.py`):
    # `rows` is its own row count (the engine adds it up: chunks are read in parallel), `ends`
    # says it is its table's last chunk, `statuses` how the tables in `completed` ended.
    rows: int | None = None
    ends: bool = False
    statuses: dict[str, str] | None = None

    def to_json(self) -> str:
        return orjson.dumps(self.__dict__).decode()

    @classmethod
    def from_json(cls, text: str) -> ChunkMeta:
        return cls(**orjson.loads(text))


@dataclass
class StagedChunk:
    meta: ChunkMeta
    keys: list[str | None]
    afters: list[str]
    # what each row is recognised by in the stream (`dedup_of`); None: its event key, worked out
    # only when a chunk's window saw changes of its table (a keyed table's, staged by the thread reader)
    dedup: list[str] | None
    # the keys' and afters' JSON as the encoder's Arrow text arrays (keys None: keyless), when
    # encoded in this process: the chunk's file is built from them (`_rows_table`), and the jsonl
    # sink its lines (`RowBlock.lines`; kept while the chunk is, `CACHED`: ~2x its rows' memory)
    arrays: tuple[pa.Array | None, pa.Array] | None = None


class EncodedPart(NamedTuple):
    """One chunk's rows encoded: event keys' JSON (None per row: keyless table), `after` images'
    JSON, and optionally the same as Arrow text arrays (keys None: keyless)."""

    keys: list[str | None]
    afters: list[str]
    arrays: tuple[pa.Array | None, pa.Array] | None = None


class RowCodec(Protocol):
    """A table's encoder of rows as its chunk source read them; chunks of equal codecs are
    encoded in one call."""

    def encode_many(self, parts: Sequence[Any]) -> Sequence[EncodedPart | tuple[list[str | None], list[str]]]:
        """Per part (one chunk's rows): its event keys' JSON (None per row: keyless table) and
        its `after` images' JSON (an `EncodedPart` also gives them as Arrow arrays)."""
        ...


@dataclass
class ReadRows:
    """A chunk's rows as the database returned them, encoded by the staging writer."""

    count: int
    last_key: list[Any] | None  # the chunk key of the last row, as the next chunk binds it
    codec: RowCodec
    part: Any  # the codec's own


@dataclass
class _Encoded:
    keys: list[str | None]
    afters: list[str]
    dedup: list[str] | None


@dataclass
class _Unencoded:
    rows: ReadRows
    surrogate: str | None


_Item = tuple[str, ChunkMeta, "_Encoded | _Unencoded", Future[None]]


def _canonical(text: str) -> str:
    return orjson.dumps(orjson.loads(text)).decode()


def dedup_of(keys: Sequence[str | None], afters: Sequence[str], surrogate: str | None) -> list[str]:
    """What each row is recognised by in the stream: its event key (the key Debezium's window is
    keyed by), or for a keyless table the surrogate key column of its image."""
    out = []
    for k, a in zip(keys, afters, strict=True):
        if k is not None:
            out.append(_canonical(k))
        else:
            out.append(orjson.dumps((orjson.loads(a) or {}).get(surrogate or "")).decode())
    return out


def _dedup(keys: list[str | None], afters: list[str], surrogate: str | None) -> list[str] | None:
    """`dedup_of` for a keyless table's rows (their surrogate key); None for a keyed table's
    (their event key: the engine canonicalizes it only for a chunk whose window needs it)."""
    if surrogate is None and all(k is not None for k in keys):
        return None
    return dedup_of(keys, afters, surrogate)


def _encode(items: Sequence[_Item]) -> list[StagedChunk | Exception]:
    """The items' chunks, encoded: consecutive chunks of equal codecs in one call (an error fails
    that call's chunks only)."""
    out: list[StagedChunk | Exception] = []
    i = 0
    while i < len(items):
        _, meta, rows, _ = items[i]
        if isinstance(rows, _Encoded):
            out.append(StagedChunk(meta, rows.keys, rows.afters, rows.dedup))
            i += 1
            continue
        codec, j = rows.rows.codec, i
        group: list[_Unencoded] = []
        while j < len(items) and isinstance(u := items[j][2], _Unencoded) and u.rows.codec == codec:
            group.append(u)
            j += 1
        done: list[StagedChunk | Exception]
        try:
            encoded = codec.encode_many([u.rows.part for u in group])
            done = [
                StagedChunk(m, e[0], e[1], _dedup(e[0], e[1], u.surrogate), e[2] if len(e) > 2 else None)
                for (_, m, _, _), u, e in zip(items[i:j], group, encoded, strict=True)
            ]
        except Exception as e:  # noqa: BLE001 - those chunks are not staged: read again
            done = [e] * len(group)
        out.extend(done)
        i = j
    return out


def _rows_table(staged: StagedChunk) -> pa.Table:
    n = len(staged.afters)
    meta = pa.array([staged.meta.to_json()], pa.string())
    arrays = staged.arrays
    if arrays is not None and len(arrays[1]) == n:
        # from the encoder's arrays (building them again from the lists was a quarter of the
        # staging writer's share of the interpreter lock: py-spy --gil)
        k, a = arrays
        none = pa.nulls(1, pa.string())
        keys = (
            pa.concat_arrays([k.cast(pa.string()), none]) if k is not None else pa.nulls(n + 1, pa.string())
        )
        afters = pa.concat_arrays([a.cast(pa.string()), none])
    else:
        keys = pa.array([*staged.keys, None], pa.string())
        afters = pa.array([*staged.afters, None], pa.string())
    return pa.table(
        {
            "kind": pa.concat_arrays([pa.repeat(pa.scalar("row", pa.string()), n), pa.array(["meta"])]),
            "ord": pa.array(range(n + 1), pa.int32()),
            "key": keys,
            "after": afters,
            "dedup": pa.array([*staged.dedup, None], pa.string())
            if staged.dedup is not None
            else pa.nulls(n + 1, pa.string()),
            "meta": pa.concat_arrays([pa.nulls(n, pa.string()), meta]),
        },
        schema=ROWS,
    )


class Staging:
    def __init__(self, warehouse: str | Path, connector: str) -> None:
        self.uri = state_uri(warehouse, "incremental_staging")
        self.connector = connector
        # a local warehouse stages chunks as files (incremental_files.py); plans stay in Delta
        root = local_dir(state_uri(warehouse, "incremental_chunks"))
        self.files = ChunkFiles(root, connector) if root is not None else None
        self._dt: Any = None
        self._lock = threading.RLock()  # the in-memory chunks
        self._dt_lock = threading.RLock()  # the DeltaTable object (its log state is not thread-safe)
        self._recent: OrderedDict[str, StagedChunk] = OrderedDict()
        self._pending: dict[str, Future[None]] = {}  # chunk → its commit (write(wait=False))
        # chunk → set once it is encoded and kept in memory (a local warehouse: the engine may
        # emit it from then on, its file is written right after; see `_write_loop`)
        self._ready: dict[str, Future[None]] = {}
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        # A local warehouse's chunk files, written by a thread of their own (not fsynced: see
        # incremental_files.py): behind the encoder, the file's fsync held the next chunk's
        # encoding, which the engine waits for
        # (py-spy: the engine waited in `settle` 16 % of a snapshot's time, the writer was in
        # fsync 18 %). Bounded: the encoder waits when CACHED chunks wait for their files.
        self._files_queue: queue.Queue[tuple[_Item, StagedChunk, pa.Table]] = queue.Queue(CACHED)

    def _table(self) -> Any:
        from deltalake import DeltaTable

        if self._dt is None:
            if not DeltaTable.is_deltatable(self.uri):
                return None
            self._dt = DeltaTable(self.uri)
        else:
            self._dt.update_incremental()
        return self._dt

    def write(
        self,
        chunk: str,
        meta: ChunkMeta,
        keys: Sequence[str | None],
        afters: Sequence[str],
        dedup: Sequence[str] | None,
        *,
        wait: bool = True,
    ) -> None:
        """Stage `chunk`; `wait=False`: committed by the writer thread, `read` waits for it.
        `dedup` None: the rows are recognised by their keys (`StagedChunk.dedup`)."""
        self._put(
            chunk, meta, _Encoded(list(keys), list(afters), None if dedup is None else list(dedup)), wait
        )

    def write_read(
        self, chunk: str, meta: ChunkMeta, rows: ReadRows, surrogate: str | None, *, wait: bool = True
    ) -> None:
        """Stage `chunk` with its rows as read (encoded by the writer thread when `wait=False`);
        `surrogate`: a keyless table's surrogate key column."""
        self._put(chunk, meta, _Unencoded(rows, surrogate), wait)

    def _put(self, chunk: str, meta: ChunkMeta, rows: _Encoded | _Unencoded, wait: bool) -> None:
        meta = ChunkMeta.from_json(meta.to_json())  # a copy: the caller goes on with its own
        if wait:
            done: Future[None] = Future()
            staged = _encode([(chunk, meta, rows, done)])[0]
            if isinstance(staged, Exception):
                raise staged
            self._store(chunk, _rows_table(staged))
            self._keep(chunk, staged)
            return
        with self._lock:
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_loop, name="tidemark-staging", daemon=True)
                self._writer.start()
                if self.files is not None:
                    threading.Thread(
                        target=self._files_loop, name="tidemark-staging-files", daemon=True
                    ).start()
            done = Future()
            self._pending[chunk] = done
            if self.files is not None:
                self._ready[chunk] = Future()
            self._queue.put((chunk, meta, rows, done))

    def _keep(self, chunk: str, staged: StagedChunk) -> None:
        """From now on the chunk may be read (once committed), from memory while it is recent."""
        with self._lock:
            self._recent[chunk] = staged
            while len(self._recent) > CACHED:
                self._recent.popitem(last=False)

    def _store(self, chunk: str, data: pa.Table) -> None:
        if self.files is not None:
            self.files.write(chunk, data)
        else:
            self._append(self._partitioned(chunk, data))

    def _partitioned(self, chunk: str, data: pa.Table) -> pa.Table:
        """`data` with the Delta table's partition columns (a chunk file has none)."""
        n = data.num_rows
        parts = {
            "connector": pa.array([self.connector] * n, pa.string()),
            "chunk": pa.array([chunk] * n, pa.string()),
        }
        return pa.table({**parts, **{name: data[name] for name in data.column_names}}, schema=SCHEMA)

    def _write_loop(self) -> None:
        """The writer thread: encodes and stages the chunks as they come, those waiting when it
        is free together (one encoding call; into Delta, one commit: a Delta commit costs about
        as much for one chunk as for several). A chunk's future is set once it is stored; a local
        warehouse's chunk is ready (`_ready`) before that, once encoded into its Arrow table:
        the engine emits it from memory while its file is written by `_files_loop` (measured:
        waiting for the file too held each chunk's turn ~6 % longer, the writer being the
        stream's next wait).
        The file only serves a restart, and a crash before it exists makes the replay read the
        chunk again in a new window, as when the crash came before the chunk was read."""
        while True:
            batch = [self._queue.get()]
            while len(batch) < CACHED:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            encoded: list[StagedChunk | Exception]
            try:
                encoded = _encode(batch)
            except Exception as e:  # noqa: BLE001 - (a bug) the writer goes on; these are read again
                encoded = [e] * len(batch)
            tables: list[tuple[_Item, StagedChunk, pa.Table]] = []
            for item, staged in zip(batch, encoded, strict=True):
                table: pa.Table | Exception
                try:
                    table = staged if isinstance(staged, Exception) else _rows_table(staged)
                except Exception as e:  # noqa: BLE001 - not storable (a bug): read again
                    table = e
                ready = self._ready_of(item[0])
                if isinstance(staged, Exception) or isinstance(table, Exception):
                    err = table if isinstance(table, Exception) else staged
                    assert isinstance(err, Exception)
                    item[3].set_exception(err)
                    if ready is not None:
                        ready.set_exception(err)
                    continue
                if ready is not None:
                    self._keep(item[0], staged)
                    ready.set_result(None)
                tables.append((item, staged, table))
            if self.files is not None:
                for one in tables:
                    self._files_queue.put(one)  # a file each
            elif tables:
                self._finish(tables)

    def _files_loop(self) -> None:
        """The chunk files' thread (a local warehouse): each file written and fsynced in turn."""
        while True:
            self._finish([self._files_queue.get()])

    def _finish(self, items: list[tuple[_Item, StagedChunk, pa.Table]]) -> None:
        """Store the items' chunks (a file each; into Delta, one commit), then settle each item's
        future with the outcome (never raises: the writer thread must go on)."""
        try:
            if self.files is not None:
                for item, _, table in items:
                    # (not fsynced: the engine emits the chunk from memory, never waiting for
                    # its file; a SIGKILL leaves the page cache, see incremental_files.py)
                    self.files.write(item[0], table, durable=False)
            else:
                self._append(pa.concat_tables([self._partitioned(i[0], t) for i, _, t in items]))
        except BaseException as e:  # noqa: BLE001 - each waiting chunk gets the error
            for item, _, _ in items:
                if self.files is not None:
                    # (read from memory already, or about to be: see `_write_loop`)
                    log.warning("incremental snapshot: writing chunk %s's file failed: %s", item[0], e)
                    with self._lock:
                        self._ready.pop(item[0], None)
                item[3].set_exception(e)
            return
        for item, staged, _ in items:
            item[3].set_result(None)
            with self._lock:
                if self.files is None:
                    self._keep(item[0], staged)
                    continue
                # stored: `read` finds it in memory or in its file
                self._ready.pop(item[0], None)
                if self._pending.get(item[0]) is item[3]:
                    del self._pending[item[0]]

    def _ready_of(self, chunk: str) -> Future[None] | None:
        with self._lock:
            return self._ready.get(chunk)

    def settle(self, chunk: str) -> None:
        """Wait until `chunk` may be read if it is pending (its outcome is `read`'s to report)."""
        with self._lock:
            fut = self._ready.get(chunk) or self._pending.get(chunk)
        if fut is not None:
            wait([fut])

    def drain(self) -> None:
        """Wait until every chunk handed over is stored (or failed)."""
        with self._lock:
            futs = list(self._pending.values())
        wait(futs)

    def _committed(self, chunk: str) -> bool:
        """Wait for `chunk`'s commit if it is pending; False when that commit failed (the chunk
        is not staged: the engine reads it again)."""
        with self._lock:
            fut = self._pending.get(chunk)
        if fut is None:
            return True
        try:
            fut.result()
            return True
        except Exception as e:  # noqa: BLE001 - reported; the chunk is read again
            log.warning("incremental snapshot: staging chunk %s failed: %s", chunk, e)
            with self._lock:
                self._recent.pop(chunk, None)
            return False
        finally:
            with self._lock:
                self._pending.pop(chunk, None)

    def staged_ids(self, snapshot_id: str) -> set[str]:
        """The staged chunk ids of `snapshot_id`: files, and the table's (from the Delta log's
        partition values)."""
        from deltalake.exceptions import DeltaError

        prefix = snapshot_id + "-"
        found = self.files.ids(prefix) if self.files is not None else set()
        with self._dt_lock:
            try:
                dt = self._table()
                if dt is None:
                    return found
                adds = (
                    pa.table(dt.get_add_actions(flatten=True))
                    .select(["partition.connector", "partition.chunk"])
                    .to_pydict()
                )
            except (DeltaError, OSError) as e:
                raise storage_error(e, self.uri, "the incremental snapshot staging table") from None
        return found | {
            c
            for conn, c in zip(adds["partition.connector"], adds["partition.chunk"], strict=True)
            if conn == self.connector and str(c).startswith(prefix)
        }

    def read(self, chunk: str) -> StagedChunk | None:
        """The staged chunk, or None when nothing was staged under that id."""
        with self._lock:
            ready = self._ready.get(chunk)
        if ready is not None:
            # handed over by this process: in memory once encoded (its file may still be on its way)
            try:
                ready.result()
            except Exception as e:  # noqa: BLE001 - reported; the chunk is read again
                log.warning("incremental snapshot: staging chunk %s failed: %s", chunk, e)
                with self._lock:
                    self._ready.pop(chunk, None)
                    self._pending.pop(chunk, None)
                return None
            with self._lock:
                cached = self._recent.get(chunk)
        if ready is None or cached is None:
            if not self._committed(chunk):
                return None
            with self._lock:
                cached = self._recent.get(chunk)
        if cached is not None:  # a copy: the reader and the engine each advance their own
            return StagedChunk(
                ChunkMeta.from_json(cached.meta.to_json()),
                list(cached.keys),
                list(cached.afters),
                None if cached.dedup is None else list(cached.dedup),
                cached.arrays,  # (immutable: shared)
            )
        columns = ["kind", "ord", "key", "after", "dedup", "meta"]
        t = self._load_file(chunk, columns)
        if t is None:
            t = self._load_delta(chunk, columns)
        if t is None or t.num_rows == 0:
            return None
        rows = sorted(t.to_pylist(), key=lambda r: r["ord"])
        metas = [r for r in rows if r["kind"] == "meta"]
        data = [r for r in rows if r["kind"] == "row"]
        dedup = [r["dedup"] for r in data]
        return StagedChunk(
            ChunkMeta.from_json(metas[0]["meta"]),
            [r["key"] for r in data],
            [r["after"] for r in data],
            None if None in dedup else dedup,  # (staged without: the keys')
        )

    def _load_file(self, chunk: str, columns: list[str]) -> pa.Table | None:
        return self.files.load(chunk, columns) if self.files is not None else None

    def _load_delta(self, chunk: str, columns: list[str]) -> pa.Table | None:
        with self._dt_lock:
            try:
                dt = self._table()
                if dt is None:
                    return None
                # files pruned in the Delta log first (`to_pyarrow_table(filters=...)` would
                # build a dataset over every staged file and filter it)
                where = [("connector", "=", self.connector), ("chunk", "=", chunk)]
                return dt.to_pyarrow_dataset(file_pruning_predicate=where).to_table(columns=columns)
            except OSError as e:
                raise storage_error(e, self.uri, "the incremental snapshot staging table") from None

    # ------------------------------------------------------------------ plans (reader=spark)
    def plans(self, snapshot_id: str) -> dict[int, dict[str, Any]]:
        """The chunk plans of `snapshot_id` (chunk number → plan), as `write_plans` stored them."""
        with self._dt_lock:
            try:
                dt = self._table()
                if dt is None:
                    return {}
                where = [("connector", "=", self.connector), ("chunk", "=", f"{snapshot_id}-plan")]
                t = dt.to_pyarrow_dataset(file_pruning_predicate=where).to_table(columns=["ord", "meta"])
            except OSError as e:
                raise storage_error(e, self.uri, "the incremental snapshot staging table") from None
        return {
            int(o): orjson.loads(m) for o, m in zip(t["ord"].to_pylist(), t["meta"].to_pylist(), strict=True)
        }

    def write_plans(self, snapshot_id: str, plans: Sequence[tuple[int, dict[str, Any]]]) -> None:
        """Store chunk plans (chunk number, plan) in one commit, before any of them is read: a
        restarted job reads the same key ranges, so no row falls between two plans."""

        n = len(plans)
        data = pa.table(
            {
                "connector": pa.array([self.connector] * n, pa.string()),
                "chunk": pa.array([f"{snapshot_id}-plan"] * n, pa.string()),
                "kind": pa.array(["plan"] * n, pa.string()),
                "ord": pa.array([s for s, _ in plans], pa.int32()),
                "key": pa.nulls(n, pa.string()),
                "after": pa.nulls(n, pa.string()),
                "dedup": pa.nulls(n, pa.string()),
                "meta": pa.array([orjson.dumps(p).decode() for _, p in plans], pa.string()),
            },
            schema=SCHEMA,
        )
        self._append(data)

    def _append(self, data: pa.Table) -> None:
        from deltalake.exceptions import CommitFailedError, DeltaError
        from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random

        with self._dt_lock:
            try:
                # The stream deletes an ended snapshot's chunks while the job may still append one
                # of it (a stop mid-chunk): delta-rs fails such an append; on the newer version it
                # commits. (Appends among themselves are retried by delta-rs itself.)
                for attempt in Retrying(
                    retry=retry_if_exception_type(CommitFailedError),
                    stop=stop_after_attempt(5),
                    wait=wait_random(0.05, 0.5),
                    reraise=True,
                ):
                    with attempt:
                        self._commit(data)
            except (DeltaError, OSError) as e:
                raise storage_error(e, self.uri, "the incremental snapshot staging table") from None

    def _commit(self, data: pa.Table) -> None:
        from deltalake import CommitProperties, write_deltalake

        dt = self._table()
        if dt is None:
            write_deltalake(
                self.uri,
                data,
                mode="append",
                partition_by=["connector", "chunk"],
                name="tidemark incremental_staging",
                configuration=TABLE_CONFIGURATION,
            )
            return
        # Spark tasks of the chunk job append at once: appends never conflict, a lost race is
        # committed again on the newer version.
        write_deltalake(
            dt,
            data,
            mode="append",
            partition_by=["connector", "chunk"],
            commit_properties=CommitProperties(max_commit_retries=100),
        )
        if dt.version() % CHECKPOINT_EVERY == 0:
            # a commit a chunk: without checkpoints each commit replays a longer log
            dt.create_checkpoint()

    def drop_other_snapshots(self, keep: str) -> None:
        """Delete the connector's staged chunks of snapshots other than `keep` (a snapshot id)."""
        self._drop(keep, keep=True)

    def drop_snapshot(self, snapshot_id: str) -> None:
        """Delete the connector's staged chunks of snapshot `snapshot_id` (it ended)."""
        self._drop(snapshot_id, keep=False)

    def _drop(self, snapshot_id: str, *, keep: bool) -> None:
        from deltalake.exceptions import DeltaError

        if self.files is not None:
            self.drain()  # (a file still on its way would be written after the drop)
            self.files.drop(snapshot_id + "-", keep=keep)
        with self._lock:
            for c in [c for c in self._recent if c.startswith(snapshot_id + "-") != keep]:
                del self._recent[c]
        with self._dt_lock:
            try:
                dt = self._table()
                if dt is None:
                    return
                conn = self.connector.replace("'", "''")
                prefix = snapshot_id.replace("'", "''")
                mine = f"starts_with(chunk, '{prefix}-')"
                dt.delete(f"connector = '{conn}' AND {'NOT ' if keep else ''}{mine}")
            except (DeltaError, OSError) as e:
                raise storage_error(e, self.uri, "the incremental snapshot staging table") from None
