"""MySQL/MariaDB lock-free initial snapshots (`tidemark.snapshot.mysql.method=watermarks`), the
way Flink CDC reads: no lock and no shared consistent view; every chunk is consistent on its own.

A chunk (read by a Spark task, so chunks scale out like PostgreSQL's):
1. low watermark: the server's binlog position (`SHOW MASTER STATUS`);
2. the chunk's SELECT (one statement: InnoDB reads it in one read view somewhere after 1);
3. high watermark: the binlog position again;
4. the binlog between the two watermarks, for this table, folded into the chunk: a key of the
   chunk's range that changed in the window is taken out of the SELECT's rows and its last image
   in the window (if it still exists) added. The chunk is then the table's rows of that range as
   of the high watermark.
A window is applied by key, so only tables whose key is all integer columns are chunked and
folded (their keys compare the same in Python and on the server). Any other table (keyless, a
character or temporal key, an override that cannot be chunked) is one chunk read until its
window holds no change of the table (`QUIET_ATTEMPTS` tries; a table written all the time needs
the locking method). A DDL or TRUNCATE of the table inside a window stops the chunk (the next
start resumes it).

The stream then starts at the position the schema snapshot was read at (before every chunk) and
skips a row event when the chunk holding its key was read at a high watermark past the event
(`Cover`): each change lands exactly once, either in a chunk or in the stream. Once the stream
is past the last high watermark, nothing is skipped any more.

The window reader registers as a replica: its server id is `database.server.id` + 1 + (chunk
index mod `SERVER_ID_SLOTS`), so concurrent tasks do not take each other's connection.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pymysql

from connectors.api import TerminalError, TransientError
from connectors.settings.config import ConnectorConfig
from connectors.snapshot.chunks import Chunk
from connectors.snapshot.mysql import METHOD_WATERMARKS as METHOD
from connectors.snapshot.mysql import chunk_query, int_key, key_columns, select_pieces, source_block
from connectors.snapshot.reading import chunk_context, config_of, marked_pieces
from connectors.sources.mysql import setup
from connectors.sources.mysql.connection import current_position
from connectors.sources.mysql.events import RowChange, SchemaChange, Translator, Truncate, file_index
from connectors.sources.mysql.model import Table, Tables
from connectors.sources.mysql.snapshot_read import SESSION_STATEMENTS, SnapshotRows, TextBatch
from connectors.sources.mysql.source import MySqlSource
from connectors.sources.mysql.stream import BinlogStream

log = logging.getLogger(__name__)

QUIET_ATTEMPTS = 5
SERVER_ID_SLOTS = 64
_SEP = "\x1f"  # joins the texts of a composite key's columns


def _int_bound(b: Any) -> tuple[int, ...] | None:
    return None if b is None else tuple(int(v) for v in b)


def _at(pos: tuple[str, int, str]) -> tuple[int, int]:
    return file_index(pos[0]), pos[1]


# --------------------------------------------------------------------------- the task side
_TABLES: dict[tuple[str, str, int], Tables] = {}


def _tables_at(cfg: ConnectorConfig, source: MySqlSource, position: Mapping[str, Any]) -> Tables:
    """The schema model at the snapshot's position, from the schema history (once per worker)."""
    key = (cfg.name, str(position.get("file")), int(position.get("pos", 0)))
    tables = _TABLES.get(key)
    if tables is None:
        tables = _TABLES[key] = source.history.recover(dict(position))
    return tables


@dataclass
class WatermarkChunk:
    """One chunk read between watermarks. `rows()` yields the change-log rows; afterwards `high`
    is the high watermark (the source offset the chunk is consistent at)."""

    raw: Mapping[str, str] | ConnectorConfig
    chunk: Chunk
    position: Mapping[str, Any]  # the snapshot's position (its schema)
    headers: tuple[tuple[str, bytes], ...]
    high: dict[str, Any] = field(default_factory=dict)
    folded: int = 0  # keys the window changed

    def rows(self) -> Iterator[pa.Table]:
        cfg = self.raw if isinstance(self.raw, ConnectorConfig) else config_of(self.raw)
        chunk = self.chunk
        db, _, name = chunk.table.partition(".")
        source = MySqlSource(cfg)
        tables = _tables_at(cfg, source, self.position)
        t = tables.get(db, name)
        if t is None:
            log.warning(
                "snapshot: table %s is not in the snapshot's schema; chunk %d skipped",
                chunk.table,
                chunk.index,
            )
            self.high = dict(self.position)
            return
        source.tables = tables
        ts = source._table_schema(db, name, t)
        encoder = SnapshotRows(ts, t.columns, source.types)
        key = list(ts.key_names)
        by_key = int_key(t, key)
        key_idx = [next(i for i, c in enumerate(t.columns) if c.name == k) for k in key] if by_key else []
        fetch = cfg.source.snapshot_fetch_size or 10240
        reader = setup.connect(source.settings)
        marks = setup.connect(source.settings)
        try:
            with reader.cursor() as cur:
                for stmt in SESSION_STATEMENTS:
                    cur.execute(stmt)
            query = chunk_query(cfg, chunk, t, ts, encoder, reader)
            for attempt in range(1, QUIET_ATTEMPTS + 1):
                with marks.cursor() as cur:
                    low = current_position(cur)
                pieces: list[tuple[pa.Array | None, pa.Array, pa.Array | None]] = []
                for batches, encode in select_pieces(reader, query, chunk, encoder, fetch):
                    for b in batches:
                        k, after = encode(b)
                        pieces.append((k, after, _key_texts(b, key_idx) if by_key else None))
                with marks.cursor() as cur:
                    high = current_position(cur)
                changes = [] if high[:2] == low[:2] else _window(cfg, source, tables, t, chunk, low, high)
                if not by_key and changes:
                    if attempt == QUIET_ATTEMPTS:
                        raise TransientError(
                            f"snapshot: {chunk.table} changed during each of {QUIET_ATTEMPTS} reads of its "
                            "lock-free chunk; without an integer key its changes cannot be folded into the chunk",
                            "run the snapshot when the table is quieter (the next start resumes it), give the "
                            "table an integer key (message.key.columns), or use "
                            "tidemark.snapshot.mysql.method=locking",
                        )
                    log.info("snapshot: %s changed while read; reading it again (%d)", chunk.table, attempt)
                    continue
                break
        finally:
            for c in (reader, marks):
                with contextlib.suppress(pymysql.err.MySQLError):
                    c.close()
        final = _fold(changes, key_idx, chunk) if by_key else {}
        self.folded = len(final)
        ts_ms = int(time.time()) * 1000  # whole seconds, as the locking method's rows
        self.high = {
            "file": high[0],
            "pos": high[1],
            "gtids": high[2],
            "event": 0,
            "row": 0,
            "snapshot": True,
        }
        ctx = chunk_context(cfg, chunk, ts, source_block(cfg, db, name, self.high, ts_ms), self.headers)
        yield from marked_pieces(chunk, ctx, _merged(pieces, final, ts), lambda p: p, lambda p: len(p[1]))


def _key_texts(piece: Any, key_idx: list[int]) -> pa.Array:
    """The key of each row as text (integers as the server prints them; composite keys joined)."""
    if isinstance(piece, TextBatch):
        cols = [pc.cast(piece.columns[i].cast(pa.binary()), pa.string()) for i in key_idx]
    else:  # PyMySQL rows
        cols = [pa.array([None if r[i] is None else str(r[i]) for r in piece], pa.string()) for i in key_idx]
    return cols[0] if len(cols) == 1 else pc.binary_join_element_wise(*cols, _SEP)


def _merged(
    pieces: list[tuple[pa.Array | None, pa.Array, pa.Array | None]],
    final: dict[str, list[Any] | None],
    ts: Any,
) -> Iterator[tuple[pa.Array | None, pa.Array]]:
    """The SELECT's rows without the keys the window changed, then those keys' last images."""
    touched = pa.array(list(final), pa.string()) if final else None
    for k, after, texts in pieces:
        if touched is not None and texts is not None:
            keep = pc.invert(pc.is_in(texts, value_set=touched))
            k, after = (None if k is None else k.filter(keep)), after.filter(keep)
        yield k, after
    images = [raw for raw in final.values() if raw is not None]
    if images:
        dumps = orjson.dumps
        yield (
            pa.array([dumps(ts.key(r)) for r in images], pa.binary()).view(pa.string()),
            pa.array([dumps(ts.row(r)) for r in images], pa.binary()).view(pa.string()),
        )


def _fold(changes: list[RowChange], key_idx: list[int], chunk: Chunk) -> dict[str, list[Any] | None]:
    """key text → the row's image at the high watermark (None: deleted), for the keys of the
    chunk's range that the window changed."""
    lower, upper = _int_bound(chunk.lower), _int_bound(chunk.upper)

    def key(raw: list[Any]) -> tuple[int, ...]:
        return tuple(int(raw[i]) for i in key_idx)

    def inside(k: tuple[int, ...]) -> bool:
        return (lower is None or k > lower) and (upper is None or k <= upper)

    out: dict[str, list[Any] | None] = {}
    for rc in changes:
        for raw, image in ((rc.before, None), (rc.after, rc.after)):
            if raw is None:
                continue
            k = key(raw)
            if inside(k):
                out[_SEP.join(map(str, k))] = image
    return out


def _window(
    cfg: ConnectorConfig,
    source: MySqlSource,
    tables: Tables,
    t: Table,
    chunk: Chunk,
    low: tuple[str, int, str],
    high: tuple[str, int, str],
) -> list[RowChange]:
    """The row changes of table `t` in the binlog from `low` up to `high`."""
    db, name = t.db, t.name
    version = tables.version(db, name)

    def resolve(d: str, n: str) -> tuple[Table, int] | None:
        return (t, version) if (d, n) == (db, name) else None  # other tables' rows are not decoded

    server_id = (source.server_id + 1 + chunk.index % SERVER_ID_SLOTS) % (1 << 32) or 1
    stream = BinlogStream(
        source.settings,
        server_id,
        resolve,
        file=low[0],
        pos=low[1],
        heartbeat_s=0,
        annotate=False,
        blocking=False,
    )
    tr = Translator(tables, {"file": low[0], "pos": low[1]})
    stop = _at(high)
    out: list[RowChange] = []
    try:
        for ev in stream.events():
            for item in tr.feed(ev):
                if type(item) is RowChange and (item.db, item.table) == (db, name):
                    out.append(item)
                elif type(item) in (SchemaChange, Truncate) and _touches(item, db, name):
                    _TABLES.clear()  # the cached model saw the statement: read it again next time
                    raise TerminalError(
                        f"snapshot: {db}.{name} was altered or truncated while its lock-free chunk "
                        f"{chunk.index} was read",
                        "start again: the snapshot resumes with the chunks not yet done, in the new structure",
                    )
            if tr._tx is None and (file_index(tr.file), tr._next_pos) >= stop:
                break
    finally:
        stream.close()
    return out


def _touches(item: Any, db: str, name: str) -> bool:
    if isinstance(item, Truncate):
        return (item.db, item.table) == (db, name)
    res = item.result
    if res.kind in ("drop_database",) and res.database == db:
        return True
    return any((c.db, c.table) == (db, name) or getattr(c, "old_table", None) == name for c in res.changes)


# --------------------------------------------------------------------------- the stream side
@dataclass
class Cover:
    """What the chunks of a lock-free snapshot already hold: per table, the chunks' upper
    bounds and high watermarks. The stream skips a row event that a chunk holds."""

    until: tuple[int, int]  # the last high watermark: past it, nothing is covered
    # (db, table) → (upper bounds of all chunks but the last, high watermark per chunk, key names
    # — empty for a table read as one chunk)
    tables: dict[tuple[str, str], tuple[list[tuple[int, ...]], list[tuple[int, int]], tuple[str, ...]]]
    _idx: dict[int, list[int]] = field(default_factory=dict)

    def skips(self, rc: RowChange) -> bool:
        entry = self.tables.get((rc.db, rc.table))
        if entry is None:
            return False
        at = rc.pos[:2]
        # every key the event touches must be held (else the event is needed: a delete of an
        # absent key, or an upsert of a present one, leaves the same end state)
        return all(raw is None or self._held(entry, rc, raw, at) for raw in (rc.before, rc.after))

    def _held(self, entry: Any, rc: RowChange, raw: list[Any], at: tuple[int, ...]) -> bool:
        uppers, highs, names = entry
        i = 0
        if names:
            # the key's place in the row: by name, in the event's own table version
            model = rc.table_model
            idx = self._idx.get(id(model))
            if idx is None:
                cols = [c.name for c in model.columns] if model is not None else []
                idx = self._idx[id(model)] = [cols.index(n) for n in names]
            # chunk i holds (uppers[i-1], uppers[i]]; the last chunk has no upper bound
            i = bisect.bisect_left(uppers, tuple(int(raw[j]) for j in idx))
        return at < highs[min(i, len(highs) - 1)]

    def truncate(self, db: str, table: str, at: tuple[int, ...]) -> bool:
        """Whether to skip a TRUNCATE: when every chunk of the table was read after it. One
        between the chunks is emitted, and the table is no longer covered (its later rows
        stream again: the chunks read before it are emptied by it, those after refilled)."""
        entry = self.tables.get((db, table))
        if entry is None:
            return False
        if at[:2] < min(entry[1]):
            return True
        del self.tables[(db, table)]
        return False


def cover_for(state: Any, tables: Tables, key_of: Any) -> Cover | None:
    """The cover of a finished lock-free snapshot (`SnapshotProgress.latest()`), or None.
    `key_of(db, table)`: the key column names the snapshot chunked on."""
    if state is None or state.detail.get("method") != METHOD or not state.highs:
        return None
    per: dict[tuple[str, str], list[tuple[Chunk, tuple[int, int]]]] = {}
    for c in state.chunks:
        # A chunk whose watermark was not recorded (committed just before a crash) covers
        # nothing: its keys' events stream again (at least once; the end state is the same).
        hw = state.highs.get(c.index)
        at = (file_index(str(hw["file"])), int(hw["pos"])) if hw else (0, 0)
        db, _, name = c.table.partition(".")
        per.setdefault((db, name), []).append((c, at))
    out: dict[tuple[str, str], Any] = {}
    for (db, name), chunks in per.items():
        chunks.sort(key=lambda ch: ch[0].index)
        t = tables.get(db, name)
        key = key_of(db, name) if t is not None else []
        names = tuple(key) if t is not None and len(chunks) > 1 and int_key(t, key) else ()
        uppers = [_int_bound(c.upper) for c, _ in chunks if c.upper is not None] if names else []
        out[(db, name)] = (uppers, [hw for _, hw in chunks], names)
    if not out:
        return None
    until = max(hw for v in out.values() for hw in v[1])
    return Cover(until, out)


def load_cover(cfg: ConnectorConfig, source: MySqlSource) -> Cover | None:
    """The cover of the connector's newest snapshot, if it is a lock-free one (the streaming
    source calls this once it knows its table model)."""
    from connectors.snapshot.progress import SnapshotProgress

    state = SnapshotProgress(cfg.warehouse, cfg.name).latest()
    return cover_for(state, source.tables, lambda d, n: key_columns(source, source.tables, d, n))
