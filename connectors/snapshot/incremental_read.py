"""The incremental snapshot's chunk reader: one background thread of the streaming process (not
the engine's: the stream never waits for a read) that reads chunks one after the other, each in
its own watermark window, a few chunks ahead of the engine.

Per chunk (`<snapshot id>-<chunk number>`):
1. if the staging area already holds the chunk (read before a crash or a reconnect), only make
   sure its close watermark is in the log;
2. else insert the open watermark into the signal table (unless the chunk before's close opened
   it, step 4); find the current table's maximum key (first chunk of a table); SELECT the next
   `incremental.snapshot.chunk.size` rows by key after the last key read, up to the maximum key,
   with the table's additional condition; a table with no rows left is done
   (TABLE_SCAN_COMPLETED) and the next table is tried in the same window;
3. hand the rows as read and what the chunk leaves behind (`ChunkMeta`) to staging, whose writer
   thread encodes and stores them (the engine emits the chunk only once it is encoded, and
   stored unless its file is local: `incremental_staging._write_loop`);
4. close the window: insert the close watermark (`insert_insert`) or delete the open one
   (`insert_delete`); when the reader goes straight on to the next chunk, that chunk's open
   watermark is written in the same transaction;
5. read the next chunks the same way while the engine waits for this close watermark (each
   window opens after the one before closed, so the engine meets them in order), up to `ahead`
   chunks past the one the engine waits for. Nothing is read ahead while the snapshot is paused
   or when a signal changed it meanwhile.

With read.only=true (MySQL/MariaDB) nothing is written to the source database: steps 2 and 4 read
the executed GTID set instead (before the chunk's transaction and after it), staged with the
chunk; the engine finds the window by the events' GTIDs (`incremental_gtid.py`).

The reader writes to the source database (the watermarks) and to staging, never to the sinks:
what is emitted, and where in the stream, is decided by the engine alone (`incremental.py`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, cast

import orjson
import pyarrow as pa

from connectors.api import TidemarkError
from connectors.format.tableschema import TableSchema
from connectors.snapshot.incremental_staging import ChunkMeta, EncodedPart, ReadRows, Staging, dedup_of

if TYPE_CHECKING:
    from connectors.settings.config import ConnectorConfig
    from connectors.snapshot.incremental import IncrementalSnapshots, Progress

log = logging.getLogger(__name__)

WINDOW_OPEN = "snapshot-window-open"
WINDOW_CLOSE = "snapshot-window-close"


@dataclass
class ChunkRows:
    keys: list[str | None]  # the event keys' JSON, row by row (None: keyless table)
    afters: list[str]  # the `after` images' JSON
    last_key: list[Any] | None  # the chunk key of the last row, as the next chunk binds it


@dataclass(frozen=True)
class ChunkQuery:
    table: str
    key: Sequence[str]  # the chunk key: primary key columns, or the surrogate key
    after: Sequence[Any] | None  # the last key read (None: the table's first chunk)
    upto: Sequence[Any]  # the table's maximum key
    condition: str | None  # additional-conditions, as sqlglot rendered it
    limit: int
    fetch: int | None = None  # rows per fetch (default: limit); a planned chunk has no real limit


class SignalRows:
    """Watermark rows in the signal table, on a DB-API connection (`conn`, `_signal`: the quoted
    table name); both drivers take `%s` parameters."""

    conn: Any
    _signal: str

    def insert_signal(self, sid: str, kind: str, data: str) -> None:
        with self.conn.cursor() as cur:
            cur.execute(*self._insert((sid, kind, data)))

    def delete_signal(self, sid: str) -> int:
        with self.conn.cursor() as cur:
            cur.execute(*self._delete(sid))
            return int(cur.rowcount)

    def insert_signal_once(self, sid: str, kind: str, data: str) -> None:
        """Insert the row unless one with its id is there (an attempt before a crash inserted
        it): tried, and a duplicate key tolerated, not looked up first (a round trip per window
        saved). A signal table without a key on `id` takes the second row, which the engine
        reads as the same open watermark."""
        try:
            self.insert_signal(sid, kind, data)
        except Exception as e:
            if not _duplicate_key(e):
                raise

    def signal_exists(self, sid: str) -> bool:
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT 1 FROM {self._signal} WHERE id = %s", (sid,))
            return cur.fetchone() is not None

    def close_and_open(self, close: tuple[str, str, str] | str, open_: tuple[str, str, str]) -> None:
        """Close one window and open the next in one transaction (one commit, so one log flush,
        instead of two): `close` is the close watermark row (id, type, data), or with
        insert_delete the id of the open watermark row to delete; `open_` the next open row.
        With insert_insert both rows go in as one INSERT, atomic in autocommit and one round
        trip on either driver (MySQL's BEGIN, two INSERTs and COMMIT were four)."""
        if isinstance(close, str):
            self._transaction([self._delete(close), self._insert(open_)])
        else:
            with self.conn.cursor() as cur:
                cur.execute(*self._insert(close, open_))

    def _transaction(self, statements: Sequence[tuple[str, tuple[str, ...]]]) -> None:
        with self.conn.cursor() as cur:
            cur.execute("BEGIN")
            try:
                for q, args in statements:
                    cur.execute(q, args)
                cur.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(Exception):
                    cur.execute("ROLLBACK")
                raise

    def _insert(self, *rows: tuple[str, str, str]) -> tuple[str, tuple[str, ...]]:
        """One INSERT of `rows` (id, type, data), in their order."""
        values = ", ".join(["(%s, %s, %s)"] * len(rows))
        return f"INSERT INTO {self._signal} VALUES {values}", tuple(v for row in rows for v in row)

    def _delete(self, sid: str) -> tuple[str, tuple[str, ...]]:
        return f"DELETE FROM {self._signal} WHERE id = %s", (sid,)


def _duplicate_key(e: Exception) -> bool:
    """Whether `e` is a unique-key violation: PostgreSQL's SQLSTATE 23505 (psycopg2), MySQL's
    error 1062 (PyMySQL; both drivers raise IntegrityError)."""
    if type(e).__name__ not in ("IntegrityError", "UniqueViolation"):
        return False
    return getattr(e, "pgcode", None) == "23505" or (bool(e.args) and e.args[0] == 1062)


class GtidWindowSource(Protocol):
    """read.only=true (MySQL/MariaDB): the chunk's watermarks are executed GTID sets."""

    def begin_window(self) -> str: ...

    def end_window(self) -> str: ...


class ChunkSource(Protocol):
    """One connector's database side (a connection of the reader's own)."""

    dialect: str

    def table(self, table: str) -> tuple[TableSchema, Any] | None: ...

    def forget(self, table: str) -> None: ...

    def refresh(self, table: str) -> None:
        """Forget `table`'s schema if its definition changed since it was read, or the table is
        gone (the Spark job's planner and workers do not see the stream's DDL, which makes the
        thread reader call `forget`; PostgreSQL notices only a table gone)."""

    def columns(self, table: str) -> list[str]: ...

    def max_key(self, table: str, key: Sequence[str], condition: str | None) -> list[Any] | None: ...

    def read(self, q: ChunkQuery) -> ReadRows:
        """The chunk's rows, not yet encoded (`encoded`; the staging writer encodes them)."""

    def boundaries(self, q: ChunkQuery, every: int) -> list[list[Any]]: ...

    def try_lock(self, name: str) -> bool: ...

    def insert_signal(self, sid: str, kind: str, data: str) -> None: ...

    def delete_signal(self, sid: str) -> int: ...

    def insert_signal_once(self, sid: str, kind: str, data: str) -> None: ...

    def signal_exists(self, sid: str) -> bool: ...

    def close_and_open(self, close: tuple[str, str, str] | str, open_: tuple[str, str, str]) -> None: ...

    def close(self) -> None: ...


AHEAD_ROWS = 16384  # about how many rows a reader may read ahead of the stream


def lead(chunk_size: int, parallelism: int) -> int:
    """How far a reader may run ahead of the stream: chunks past the last one it emitted and
    stored, 2 x parallelism and no more than about AHEAD_ROWS rows (the stream emits them in a
    burst when their windows close), but never fewer than the parallelism. The Spark job plans
    no chunk at or past `emitted + lead` (the engine skips past them when it reads one again)."""
    width = max(1, parallelism)
    return max(width, min(2 * width, -(-AHEAD_ROWS // max(1, chunk_size))))


def chunk_settings(cfg: ConnectorConfig) -> tuple[int, str]:
    """(incremental.snapshot.chunk.size, incremental.snapshot.watermarking.strategy) of `cfg`."""
    props = cfg.origin.properties
    size = int(props.get("incremental.snapshot.chunk.size") or 1024)
    return size, str(props.get("incremental.snapshot.watermarking.strategy") or "insert_insert").lower()


def texts_of(arr: pa.Array | pa.ChunkedArray) -> list[str]:
    """The JSON texts of an encoded column (UTF-8 text, or binary holding it) as str."""
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = arr.cast(pa.large_string())  # (validates the UTF-8, as decoding each value did)
    return arr.to_pylist()


def _joined(arrays: list[pa.Array | pa.ChunkedArray]) -> pa.Array:
    """Encoded columns (UTF-8 text, or binary holding it) as one text array (the cast validates
    the UTF-8; one type: the chunk file's column is built from slices)."""
    flat = [
        c.cast(pa.large_string())
        for a in arrays
        for c in (a.chunks if isinstance(a, pa.ChunkedArray) else [a])
    ]
    return pa.concat_arrays(flat) if flat else pa.array([], pa.large_string())


def cut(encoded: Iterable[tuple[pa.Array | None, pa.Array]], counts: Sequence[int]) -> list[EncodedPart]:
    """Encoded pieces in order (event keys' JSON or None for a keyless table, `after` images'
    JSON) cut into chunks of `counts` rows: each as lists of str, and as the Arrow slices the
    staging writer stores (its chunk file is built from them, not from the lists again)."""
    keys_in: list[pa.Array | None] = []
    afters_in: list[pa.Array | pa.ChunkedArray] = []
    for k, a in encoded:
        afters_in.append(a)
        keys_in.append(k)
    afters_arr = _joined(afters_in)
    afters: list[str] = afters_arr.to_pylist()
    keys_arr: pa.Array | None = None
    keys: list[str | None]
    if keys_in and all(k is not None for k in keys_in):
        keys_arr = _joined(cast(list[pa.Array | pa.ChunkedArray], keys_in))
        keys = keys_arr.to_pylist()
    else:  # keyless (a surrogate key): no event keys
        keys = []
        for k, a in zip(keys_in, afters_in, strict=True):
            if k is not None:
                keys.extend(texts_of(k))
            else:
                keys.extend([None] * len(a))
    out: list[EncodedPart] = []
    at = 0
    for n in counts:
        arrays = (None if keys_arr is None else keys_arr.slice(at, n), afters_arr.slice(at, n))
        out.append(EncodedPart(keys[at : at + n], afters[at : at + n], arrays))
        at += n
    return out


def _after(cols: Sequence[str], lits: Sequence[str]) -> str:
    """Debezium's lower bound: `(k1 > v1) OR (k1 = v1 AND k2 > v2) OR ...` (lexicographic, and
    usable by the key index on both databases)."""
    parts = []
    for i in range(len(cols)):
        terms = [f"{cols[j]} = {lits[j]}" for j in range(i)] + [f"{cols[i]} > {lits[i]}"]
        parts.append("(" + " AND ".join(terms) + ")")
    return "(" + " OR ".join(parts) + ")"


def dropped_meanwhile(src: ChunkSource, table: str) -> bool:
    """After a query of `table` failed: whether the table is gone (dropped or renamed between the
    look-up of its schema and the query), which ends it UNKNOWN_SCHEMA as Debezium does instead
    of failing the chunk. Any other failure (and one of this look-up) is the caller's to raise."""
    try:
        src.refresh(table)
        return src.table(table) is None
    except Exception:  # noqa: BLE001 - the connection broke too: the first error is the one to see
        log.debug("looking up %s after a failed query failed", table, exc_info=True)
        return False


def read_unless_dropped(src: ChunkSource, q: ChunkQuery) -> ReadRows | None:
    """`src.read(q)`, or None when the read failed because the table is gone (`dropped_meanwhile`:
    PostgreSQL's read raises then; MySQL's finds no rows and marks the table gone itself)."""
    try:
        return src.read(q)
    except Exception:
        if not dropped_meanwhile(src, q.table):
            raise
        log.warning("incremental snapshot: table %s was dropped as a chunk of it was read", q.table)
        return None


def table_start(
    src: ChunkSource, collection: dict[str, Any], max_key: list[Any] | None
) -> tuple[TableSchema | None, list[str], list[Any] | None, str | None]:
    """A table's chunk key and maximum key (read now when `max_key` is None: its first chunk):
    (schema, key, maximum key, None), or with the TABLE_SCAN_COMPLETED status of a table there is
    nothing to read of (UNKNOWN_SCHEMA, NO_PRIMARY_KEY, EMPTY)."""
    table, surrogate = collection["id"], collection.get("surrogate_key")
    found = src.table(table)
    if found is None:
        log.warning("incremental snapshot: table %s does not exist (or is not captured); skipped", table)
        return None, [], None, "UNKNOWN_SCHEMA"
    key = [surrogate] if surrogate else list(found[0].key_names)
    if not key:
        return found[0], key, None, "NO_PRIMARY_KEY"
    if max_key is None:
        try:
            max_key = src.max_key(table, key, collection.get("condition"))
        except Exception:
            if not dropped_meanwhile(src, table):
                raise
            log.warning("incremental snapshot: table %s was dropped as its snapshot began; skipped", table)
            return None, [], None, "UNKNOWN_SCHEMA"
        if max_key is None:
            return found[0], key, None, "EMPTY"
        log.info("incremental snapshot of %s will end at key %s", table, max_key)
    return found[0], key, max_key, None


def chunk_select(
    q: ChunkQuery, select_list: str, table: str, cols: Sequence[str], literal: Callable[[int, Any], str]
) -> str:
    """The chunk's SELECT: the rows after the last key read, not past the maximum key, with the
    additional condition (the checked filter as sqlglot rendered it), by key, at most `limit`.
    `table` and `cols` come quoted by the caller; `literal(i, value)` quotes a value of key
    column i (the driver's quoting: never pasted)."""

    def lits(values: Sequence[Any]) -> list[str]:
        return [literal(i, v) for i, v in enumerate(values)]

    where = [_after(cols, lits(q.after))] if q.after is not None else []
    where.append("NOT " + _after(cols, lits(q.upto)))
    if q.condition:
        where.append(f"({q.condition})")
    order = ", ".join(cols)
    return (
        f"SELECT {select_list} FROM {table} WHERE {' AND '.join(where)} ORDER BY {order} LIMIT {int(q.limit)}"
    )


def boundary_select(
    q: ChunkQuery,
    key_texts: str,
    table: str,
    cols: Sequence[str],
    literal: Callable[[int, Any], str],
    every: int,
) -> str:
    """The keys that end the next chunks of `every` rows (the every-th, 2·every-th, ... key of
    `q`'s rows, at most `q.limit` rows looked at): chunk bounds planned ahead, so chunks can be
    read at once. Only key columns are read (the key index serves it); `key_texts` selects them
    as text, aliased `_k0`, `_k1`, ...; the rows are limited before they are numbered (MariaDB
    numbers every row a window function sees)."""
    order = ", ".join(cols)
    inner = chunk_select(q, f"{order}, {key_texts}", table, cols, literal)
    names = ", ".join(f"_k{i}" for i in range(len(cols)))
    numbered = f"SELECT {names}, row_number() OVER (ORDER BY {order}) AS _rn FROM ({inner}) AS _a"
    return f"SELECT {names} FROM ({numbered}) AS _b WHERE MOD(_rn, {int(every)}) = 0 ORDER BY _rn"


def instant() -> str:
    # java.time.Instant's text, as Debezium's SignalMetadata writes it
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def dedup_values(rows: ChunkRows, surrogate: str | None) -> list[str]:
    """What each row is recognised by in the stream (`dedup_of`)."""
    return dedup_of(rows.keys, rows.afters, surrogate)


def encoded(rows: ReadRows) -> ChunkRows:
    """`rows` encoded now, on the caller's thread."""
    keys, afters = rows.codec.encode_many([rows.part])[0][:2]
    return ChunkRows(keys, afters, rows.last_key)


class ChunkReader:
    """The reader thread. `factory()` opens the connector's `ChunkSource`."""

    def __init__(
        self,
        controller: IncrementalSnapshots,
        factory: Callable[[], ChunkSource],
        staging: Staging,
        *,
        chunk_size: int,
        strategy: str,
    ) -> None:
        self.controller = controller
        self.factory = factory
        self.staging = staging
        self.chunk_size = max(1, chunk_size)
        self.strategy = strategy
        self._thread: threading.Thread | None = None
        self._source: ChunkSource | None = None
        self.chunks_read = 0
        # Chunks read past the one the engine waits for (their windows follow each other in the
        # log): the reader does not wait for each chunk's round trip through the stream (up to 4
        # at 1,024 rows; 8 gave no more rows/s and twice the stream's latency during a snapshot).
        # read.only: one (the controller sets it; its GTID windows are decided one at a time).
        self.ahead = lead(self.chunk_size, 2)
        self._read_to: tuple[str, int, Progress] | None = None  # (snapshot, gen, after the last read)
        self._staged: tuple[str, set[str]] = ("", set())  # (snapshot, its chunks staged, as known)
        self._finished: tuple[str, set[str]] = ("", set())  # (snapshot, tables it read to the end)
        self._opened: tuple[str, str] | None = None  # (chunk, open timestamp): opened by a close

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="tidemark-incremental", daemon=True)
            self._thread.start()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("incremental snapshot: the chunk reader did not stop within %.0fs", timeout)
            self._thread = None

    # ------------------------------------------------------------------ the loop
    def _run(self) -> None:
        ctl = self.controller
        backoff = 1.0
        try:
            while True:
                work = ctl.next_work()
                if work is None:
                    return  # closed
                progress, token = work
                try:
                    if self._source is None:
                        self._source = self.factory()
                    if self._read_past(progress, token):
                        # read ahead by this reader: staged, its window closed; go on from there
                        ctl.attempted(token)
                        self._read_ahead(self._source, progress, None, token)
                    else:
                        after = partial(self._next, progress, progress.chunk_seq + self.ahead, token)
                        meta = self._chunk(self._source, progress, after)
                        ctl.attempted(token)
                        self._read_ahead(self._source, progress, meta, token)
                    backoff = 1.0
                except Exception as e:  # noqa: BLE001 - a failed read is retried, the stream goes on
                    log.warning(
                        "incremental snapshot: reading chunk %s failed: %s; retrying in %.0fs",
                        progress.chunk_id,
                        e,
                        backoff,
                        # (our own errors say what happened: a traceback only for the others)
                        exc_info=not isinstance(e, TidemarkError | OSError | ConnectionError),
                    )
                    self._drop_source()
                    if not ctl.sleep(backoff):
                        return
                    backoff = min(30.0, backoff * 2)
        finally:
            self._drop_source()

    def _maybe_staged(self, snapshot_id: str, cid: str) -> bool:
        """Whether chunk `cid` may be staged: by this reader, or by a process before it (the
        table is listed once per snapshot; a lookup of a new chunk in it cost a third of the
        reader's time)."""
        if self._staged[0] != snapshot_id:
            self._staged = (snapshot_id, self.staging.staged_ids(snapshot_id))
        return cid in self._staged[1]

    def _read_past(self, p: Progress, token: tuple[str, int, int]) -> bool:
        """Whether this reader read chunk `p.chunk_seq` ahead already (same snapshot and state)."""
        done = self._read_to
        return done is not None and done[:2] == (token[0], token[2]) and done[2].chunk_seq > p.chunk_seq

    def _read_ahead(
        self, src: ChunkSource, p: Progress, meta: ChunkMeta | None, token: tuple[str, int, int]
    ) -> None:
        """Read the chunks after `p`'s (which gave `meta`; None: read ahead before) while the
        engine waits for its close watermark, up to `ahead` past it; chunks read ahead before
        are not read again (nor looked up: waiting for their staging commit and checking their
        close watermark cost the reader a quarter of its time)."""
        limit = p.chunk_seq + self.ahead
        if meta is not None:
            p.advance(meta)
        done = self._read_to
        if self._read_past(p, token):
            assert done is not None
            p = done[2].copy()
        while (
            p.collections
            and p.chunk_seq <= limit
            and (self._open(p) or self.controller.may_read_ahead(token))
        ):
            meta = self._chunk(src, p, partial(self._next, p, limit, token))
            p.advance(meta)
            self._read_to = (token[0], token[2], p.copy())

    def _open(self, p: Progress) -> bool:
        """Whether `p`'s chunk window was opened by the close before: it is read now whatever
        happened since (as a chunk a pause finds mid-read), so no window stays open through a
        pause."""
        return self._opened is not None and self._opened[0] == p.chunk_id

    def _next(self, p: Progress, limit: int, token: tuple[str, int, int], meta: ChunkMeta) -> str | None:
        """The chunk read right after `p`'s (which found `meta`) by `_read_ahead`: not past
        `limit`, not staged before, while the engine still waits for `token`'s chunk and the
        stream does not lag (None: the reader may stop or wait there)."""
        q = p.copy()
        q.advance(meta)
        if not q.collections or q.chunk_seq > limit or self._maybe_staged(q.snapshot_id, q.chunk_id):
            return None
        ok = self.controller.may_read_ahead(token) and not self.controller.lagging()
        return q.chunk_id if ok else None

    def _drop_source(self) -> None:
        src, self._source = self._source, None
        if src is not None:
            try:
                src.close()
            except Exception as e:  # noqa: BLE001 - closing must not mask the error
                log.debug("closing the chunk reader's connection: %s", e)

    # ------------------------------------------------------------------ one chunk
    def _chunk(
        self, src: ChunkSource, p: Progress, then: Callable[[ChunkMeta], str | None] | None = None
    ) -> ChunkMeta:
        """Read (or find staged) chunk `p.chunk_id` and close its window; what it found.
        `then(meta)`: the chunk the reader goes on to right away, if any: its window opens in
        the close's transaction."""
        cid = p.chunk_id
        for table in self.controller.take_stale():
            src.forget(table)  # its DDL was in the stream: read its schema again
        if self._finished[0] != p.snapshot_id:
            self._finished = (p.snapshot_id, set())
        staged = self.staging.read(cid) if self._maybe_staged(p.snapshot_id, cid) else None
        if staged is not None:
            # Read before (a crash, a reconnect, or read ahead): the same rows go out at its close.
            if staged.meta.table is not None:
                self._publish(src, staged.meta.table, cid)
            self._finished[1].update(staged.meta.completed)
            self._close(src, cid, None, staged.meta)
            return staged.meta
        notify = self.controller.notifier.incremental_snapshot
        joined, self._opened = self._opened, None
        if joined is not None and joined[0] == cid:
            opened = joined[1]  # its window opened with the chunk before's close
        else:
            joined = None
            self.controller.stream_first()  # (a window held open meanwhile would only grow)
            opened = instant()
        gtid = self.controller.gtid
        low: str | None = None
        if gtid is not None:  # read.only: the executed GTID set is the open watermark
            low = cast(GtidWindowSource, src).begin_window()
        elif joined is None:
            # (one that an attempt before a crash inserted opened the window earlier: still sound)
            data = orjson.dumps({"openWindowTimestamp": opened}).decode()
            src.insert_signal_once(f"{cid}-open", WINDOW_OPEN, data)
        collections = [dict(c) for c in p.collections]
        done: list[str] = []
        max_key, last_key, table_rows = p.max_key, p.last_key, p.table_rows
        rows: ReadRows | None = None
        surrogate: str | None = None
        while collections:
            cur = collections[0]
            table, condition, surrogate = cur["id"], cur.get("condition"), cur.get("surrogate_key")
            ts, key, max_key, found = table_start(src, cur, max_key)
            if ts is not None:
                self.controller.publish(table, ts, cid)
            status = found or "SUCCEEDED"
            if found is None:
                q = ChunkQuery(table, key, last_key, max_key or [], condition, self.chunk_size)
                rows = read_unless_dropped(src, q)
                if rows is not None and rows.count:
                    last_key = rows.last_key
                    table_rows += rows.count
                    break
                rows = None
                if src.table(table) is None:  # the read found it dropped (as Debezium: no schema)
                    status = "UNKNOWN_SCHEMA"
            log.info("incremental snapshot: table %s done (%s, %d rows)", table, status, table_rows)
            if self.controller.running(p.snapshot_id, table):  # (not stopped meanwhile)
                notify.table_scan_completed(
                    p.correlation_id, [c["id"] for c in collections], table, table_rows, status
                )
            done.append(table)
            collections.pop(0)
            max_key, last_key, table_rows = None, None, 0
        high: str | None = None
        if gtid is not None and low is not None:
            # From here until the high watermark is known the engine holds back its decision on
            # events after `low` (incremental_gtid.py).
            gtid.closing(cid, low)
            try:
                high = cast(GtidWindowSource, src).end_window()
            except BaseException:
                gtid.abandon(cid)
                raise
            gtid.arm(cid, low, high)
        meta = ChunkMeta(
            collections[0]["id"] if rows is not None else None,
            last_key,
            max_key,
            table_rows,
            done,
            low,
            high,
        )
        if rows is not None and self.controller.running(p.snapshot_id, collections[0]["id"]):
            notify.in_progress(
                p.correlation_id,
                [c["id"] for c in collections],
                collections[0]["id"],
                max_key,
                last_key or [],
            )
        try:
            # encoded and committed by the staging's writer thread while this one closes the
            # window and reads on (read.only: now); the engine waits for the commit before the
            # chunk goes out
            wait = gtid is not None
            if rows is not None:
                self.staging.write_read(cid, meta, rows, surrogate, wait=wait)
            else:
                self.staging.write(cid, meta, [], [], [], wait=wait)
            self._staged[1].add(cid)
        except BaseException:
            if gtid is not None:
                gtid.abandon(cid)  # read again, in a new window
            raise
        self.chunks_read += 1
        # Decided before the close watermark (once it is written the engine may end the snapshot),
        # sent after it: every row of the snapshot is before that watermark in the log.
        self._finished[1].update(done)
        complete = not collections and self.controller.completes(p.snapshot_id, self._finished[1])
        nxt = then(meta) if then is not None and not complete and gtid is None else None
        opened_next = self._close(src, cid, opened, then=nxt)
        if nxt is not None and opened_next is not None:
            self._opened = (nxt, opened_next)
        if complete:
            log.info(
                "incremental snapshot %s: every table read (chunks held %.1fs in all for a lagging stream)",
                p.snapshot_id,
                self.controller.held_s,
            )
            notify.completed(p.correlation_id)
        return meta

    def _publish(self, src: ChunkSource, table: str, chunk_id: str) -> None:
        found = src.table(table)
        if found is not None:
            self.controller.publish(table, found[0], chunk_id)

    def _close(
        self,
        src: ChunkSource,
        cid: str,
        opened: str | None,
        meta: ChunkMeta | None = None,
        *,
        then: str | None = None,
    ) -> str | None:
        """Close the chunk's window (again, after a restart: only if it is not closed yet); with
        `then`, open that chunk's window in the same transaction (its open timestamp)."""
        gtid = self.controller.gtid
        if gtid is not None:  # read.only: no row to write; the engine may emit the chunk now
            if opened is None and meta is not None and meta.low is not None and meta.high is not None:
                gtid.arm(cid, meta.low, meta.high, staged=True)
            else:
                gtid.staged(cid)
            return None
        return close_window(src, cid, self.strategy, opened, then=then)


def close_window(
    src: ChunkSource, chunk_id: str, strategy: str, opened: str | None, *, then: str | None = None
) -> str | None:
    """Close the chunk's window (again, after a restart: only when it is not closed yet).
    `then` (a fresh close only): the next chunk's id, whose window opens in the same transaction:
    one commit instead of two (each waits for a log flush; the reader spent a fifth of its time
    on the watermark rows), and nothing can commit between the two in the log. Returns the next
    window's open timestamp when it opened."""
    if then is not None and opened is not None:
        at = instant()
        nxt = (f"{then}-open", WINDOW_OPEN, orjson.dumps({"openWindowTimestamp": at}).decode())
        if strategy == "insert_delete":
            src.close_and_open(f"{chunk_id}-open", nxt)
        else:
            data = {"openWindowTimestamp": opened, "closeWindowTimestamp": at}
            src.close_and_open((f"{chunk_id}-close", WINDOW_CLOSE, orjson.dumps(data).decode()), nxt)
        return at
    if strategy == "insert_delete":
        src.delete_signal(f"{chunk_id}-open")  # 0 rows: deleted before, the delete is in the log
        return None
    if opened is None and src.signal_exists(f"{chunk_id}-close"):
        return None
    data = {"openWindowTimestamp": opened or instant(), "closeWindowTimestamp": instant()}
    src.insert_signal(f"{chunk_id}-close", WINDOW_CLOSE, orjson.dumps(data).decode())
    return None
