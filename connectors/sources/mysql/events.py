"""Binlog events → neutral change items, with Debezium's MySQL offset semantics.

`Translator.feed(event)` turns `binlog.Event`s into `RowChange` / `SchemaChange` / `TxEnd` /
`Truncate` items. It tracks the transaction (GTID, start position, thread, query text) and keeps
the offset Debezium keeps: `{"file", "pos", "gtids", "event", "row", "server_id", "ts_sec"}`,
where inside a transaction `file`/`pos` is the transaction start, `gtids` the executed set
*before* it, and `event`/`row` the rows events / rows of the current event already emitted.
After a restart from such an offset the translator skips exactly that many rows events and rows,
so a restart mid-transaction neither loses nor repeats a row (Debezium's restart skip counts).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from connectors.api import GtidTracker
from connectors.sources.mysql.ddl import DdlParser, DdlResult, UnparseableDdl
from connectors.sources.mysql.model import Table, Tables
from connectors.sources.mysql.stream import Event

log = logging.getLogger(__name__)

# Statements that never change a table's layout. `CREATE OR REPLACE` counts only for the
# non-table objects (views, routines, triggers, users...): MariaDB's `CREATE OR REPLACE TABLE`,
# `... DATABASE` and `... [UNIQUE] INDEX` go to the DDL parser like their plain forms.
_NON_DDL = re.compile(
    r"(?is)^\s*(begin|commit|rollback|savepoint|release\s+savepoint|xa\s|set\s|flush\s|"
    r"analyze\s|optimize\s|repair\s|grant\s|revoke\s|create\s+(definer|user|role|function|"
    r"procedure|trigger|event|view|or\s+replace\s+(?!\s*(?:(?:temporary\s+)?table|database|schema|"
    r"(?:(?:unique|fulltext|spatial)\s+)?index)\b))|drop\s+(user|role|function|procedure|trigger|"
    r"event|view)|alter\s+(user|event|view|function|procedure)|#|/\*)"
)


@dataclass(slots=True)
class SourceInfo:
    """Fields of Debezium's MySQL `source` block known from the binlog."""

    server_id: int
    gtid: str | None
    file: str
    pos: int
    row: int
    thread: int | None
    query: str | None
    ts_ms: int
    db: str
    table: str | None


@dataclass(slots=True)
class RowChange:
    db: str
    table: str
    op: str  # c, u, d
    before: list[Any] | None
    after: list[Any] | None
    table_model: Table | None
    source: SourceInfo
    txn_id: str
    offset: dict[str, Any]  # resume point just after this row
    pos: tuple[int, ...]  # total order (see offset_key)


@dataclass(slots=True)
class SchemaChange:
    db: str
    ddl: str
    result: DdlResult
    source: SourceInfo
    offset: dict[str, Any]
    pos: tuple[int, ...]
    gtids_before: str = ""


@dataclass(slots=True)
class Truncate:
    db: str
    table: str
    source: SourceInfo
    offset: dict[str, Any]
    pos: tuple[int, ...]


@dataclass(slots=True)
class TxEnd:
    txn_id: str
    offset: dict[str, Any]
    pos: tuple[int, ...]
    ts_ms: int


Item = RowChange | SchemaChange | Truncate | TxEnd


@functools.lru_cache(maxsize=256)
def file_index(name: str) -> int:
    stem, _, idx = name.rpartition(".")
    return int(idx) if idx.isdigit() else 0


def offset_key(offset: dict[str, Any] | None) -> tuple[int, ...]:
    """Total order of MySQL offsets: (file index, transaction start pos, event, row)."""
    if not offset:
        return (0, 0, 0, 0)
    return (
        file_index(str(offset.get("file", ""))),
        int(offset.get("pos", 0)),
        int(offset.get("event", 0)),
        int(offset.get("row", 0)),
    )


class _Tx:
    """The open transaction: where it started, its GTID and the executed set before it."""

    __slots__ = ("gtid", "file", "pos", "thread", "events", "query", "gtids_before", "txid", "fidx")

    def __init__(self, gtid: str | None, file: str, pos: int, thread: int | None, gtids_before: str) -> None:
        self.gtid, self.file, self.pos, self.thread = gtid, file, pos, thread
        self.events = 0  # rows events seen (including skipped tables)
        self.query: str | None = None
        self.gtids_before = gtids_before
        self.txid = gtid or f"file={file},pos={pos}"  # Debezium's transaction id
        self.fidx = file_index(file)


_NOTHING: tuple[()] = ()


@dataclass
class Translator:
    """Stateful binlog → item translation. `tables`/`parser` are the live schema model; DDL is
    applied to it here (so later rows decode with the new layout) and reported as SchemaChange.
    `feed` returns the items of one event (a list, or an empty tuple)."""

    tables: Tables
    start: dict[str, Any] | None = None
    include_query: bool = False
    skip_unparseable: bool = False
    on_ddl_applied: Callable[[], None] | None = None
    # (statement, default db) → True when it changes only tables/databases the filters do not
    # capture: such a statement, unparseable, is skipped with a warning instead of stopping
    outside_filters: Callable[[str, str | None], bool] | None = None
    file: str = ""
    # The executed set, updated in place per transaction; its text is rendered once per change.
    gtids: GtidTracker = field(default_factory=GtidTracker)
    _tx: _Tx | None = None
    _skip_events: int = 0
    _skip_rows: int = 0

    def __post_init__(self) -> None:
        self.parser = DdlParser(self.tables)
        if self.start:
            self.file = str(self.start.get("file", ""))
            self.gtids = GtidTracker(str(self.start.get("gtids") or ""))
            self._skip_events = int(self.start.get("event", 0))
            self._skip_rows = int(self.start.get("row", 0))
        self._pending_query: str | None = None
        self._pending_gtid: str | None = None
        self._pending_gtid_pos: int | None = None
        self._standalone = False
        # Debezium's source.thread comes from BEGIN query events only and is never cleared, so a
        # DDL or TRUNCATE (no BEGIN of its own) shows the last BEGIN's thread, null before any
        # (always on MariaDB, which writes no BEGIN events in row format)
        self._begin_thread: int | None = None
        self._next_pos = int(self.start.get("pos", 4)) if self.start else 4
        self._server_id = int(self.start.get("server_id", 0)) if self.start else 0
        self._ts = int(self.start.get("ts_sec", 0)) if self.start else 0

    # ------------------------------------------------------------------ offsets
    def offset(self) -> dict[str, Any]:
        """Resume point between transactions (or inside one, with skip counts)."""
        tx = self._tx
        if tx is None:
            return {
                "file": self.file,
                "pos": self._next_pos,
                "gtids": str(self.gtids),
                "event": 0,
                "row": 0,
                "server_id": self._server_id,
                "ts_sec": self._ts,
            }
        return {
            "file": tx.file,
            "pos": tx.pos,
            "gtids": tx.gtids_before,
            "event": tx.events,
            "row": 0,
            "server_id": self._server_id,
            "ts_sec": self._ts,
        }

    # ------------------------------------------------------------------ translation
    def feed(self, ev: Event) -> list[Item] | tuple[()]:
        kind = ev.kind
        if kind == "rows":
            return self._rows(ev)
        if ev.server_id:
            self._server_id = ev.server_id
        if ev.ts:
            self._ts = ev.ts
        if kind == "xid":
            return self._commit(ev)
        if kind == "gtid":
            self._pending_gtid, self._pending_gtid_pos, self._standalone = ev.gtid, ev.pos, ev.standalone
            if not ev.standalone and "-" in ev.gtid and ":" not in ev.gtid:
                # MariaDB writes no BEGIN query: a non-standalone GTID event opens the transaction.
                self._tx = _Tx(ev.gtid, self.file, ev.pos, None, str(self.gtids))
                self._pending_gtid_pos = None
            return _NOTHING
        if kind == "query":
            q = ev.query.strip()
            up = q[:10].upper()
            if up.startswith("BEGIN") or up.startswith("XA START"):
                self._begin_thread = ev.thread
                if self._tx is not None and not self._tx.events:
                    self._tx.thread = ev.thread
                    return _NOTHING
                start = self._pending_gtid_pos if self._pending_gtid_pos is not None else ev.pos
                self._tx = _Tx(self._pending_gtid, self.file, start, ev.thread, str(self.gtids))
                self._pending_gtid_pos = None
                return _NOTHING
            if up.startswith("COMMIT") or up.startswith("XA COMMIT") or up.startswith("ROLLBACK"):
                return self._commit(ev)
            return list(self._ddl(ev, q))
        if kind == "annotate":
            if self._tx is not None:
                self._tx.query = ev.query
            return _NOTHING
        if kind == "rotate":
            # A GTID-started dump opens with a fake rotate to position 4 of the file it reads:
            # the resume position must not move back inside the same file.
            same = ev.file == self.file
            self.file = ev.file
            self._next_pos = max(self._next_pos, ev.next_pos) if same else ev.next_pos
            return _NOTHING
        if kind == "heartbeat" and self._tx is None:
            self._next_pos = max(self._next_pos, ev.next_pos) if ev.file == self.file else ev.next_pos
        return _NOTHING

    def _commit(self, ev: Event) -> list[Item] | tuple[()]:
        tx = self._tx
        self._tx = None
        next_pos = self._next_pos = ev.next_pos
        self._skip_events = self._skip_rows = 0
        if tx is None:
            return _NOTHING
        if tx.gtid:
            self.gtids.add(tx.gtid)
        file = self.file
        off = {
            "file": file,
            "pos": next_pos,
            "gtids": str(self.gtids),
            "event": 0,
            "row": 0,
            "server_id": self._server_id,
            "ts_sec": self._ts,
        }  # == self.offset() outside a transaction
        return [TxEnd(tx.txid, off, (file_index(file), next_pos, 0, 0), ev.ts * 1000)]

    def _rows(self, ev: Event) -> list[Item] | tuple[()]:
        tx = self._tx
        if tx is None:  # rows outside BEGIN (should not happen with ROW format): own transaction
            tx = self._tx = _Tx(self._pending_gtid, self.file, ev.pos, None, str(self.gtids))
        tx.events += 1
        n_ev = tx.events
        if self._skip_events >= n_ev:
            return _NOTHING  # emitted before the restart
        if ev.skipped:
            return _NOTHING
        skip_rows = self._skip_rows if self._skip_events == n_ev - 1 else 0
        rows = ev.rows
        last = len(rows) - 1
        file, pos, gtids, server_id, ts_sec = tx.file, tx.pos, tx.gtids_before, ev.server_id, ev.ts
        ev_pos = ev.pos  # source.pos is the rows event's own position (Debezium's setEventPosition)
        fidx, txid, db, table, op, model = tx.fidx, tx.txid, ev.db, ev.table, ev.op, ev.table_model
        gtid, thread, ts_ms = tx.gtid, tx.thread, ev.ts * 1000
        query = tx.query if self.include_query else None
        out: list[Item] = []
        for i, (before, after) in enumerate(rows):
            if i < skip_rows:
                continue
            # The resume point just after this row: the next row of this event, or the next event.
            event, row = (n_ev, 0) if i == last else (n_ev - 1, i + 1)
            off = {
                "file": file,
                "pos": pos,
                "gtids": gtids,
                "server_id": server_id,
                "ts_sec": ts_sec,
                "event": event,
                "row": row,
            }
            # pos == offset_key(off): a sink holding everything up to an offset holds exactly the
            # rows whose pos is not above it.
            out.append(
                RowChange(
                    db,
                    table,
                    op,
                    before,
                    after,
                    model,
                    SourceInfo(server_id, gtid, file, ev_pos, i, thread, query, ts_ms, db, table),
                    txid,
                    off,
                    (fidx, pos, event, row),
                )
            )
        return out

    def _ddl(self, ev: Event, q: str) -> Iterator[Item]:
        if _NON_DDL.match(q):
            if self._pending_gtid is not None and self._standalone:
                self.gtids.add(self._pending_gtid)
            self._next_pos = ev.next_pos
            return
        gtid_pos = self._pending_gtid_pos if self._pending_gtid_pos is not None else ev.pos
        gtids_before = str(self.gtids)
        if self._pending_gtid is not None:
            self.gtids.add(self._pending_gtid)
        self._pending_gtid_pos = None
        self._next_pos = ev.next_pos
        try:
            result = self.parser.apply(q, ev.db or None)
        except UnparseableDdl as e:
            if self.outside_filters is not None and self.outside_filters(q, ev.db or None):
                log.warning("%s (skipped: it changes only tables outside the captured ones)", e)
                return
            if not self.skip_unparseable:
                raise UnparseableDdlError(str(e)) from None
            log.warning("%s (skipped: schema.history.internal.skip.unparseable.ddl=true)", e)
            return
        if result.kind == "ignored":
            return
        if self.on_ddl_applied is not None:
            self.on_ddl_applied()
        off = self.offset()
        # source.pos: the statement's own event, as Debezium sets it for every event it handles
        tables = ",".join(dict.fromkeys(c.table for c in result.changes)) or None  # Debezium's tableEvent
        src = SourceInfo(
            ev.server_id,
            self._pending_gtid,
            self.file,
            ev.pos,
            0,
            self._begin_thread,
            None,
            ev.ts * 1000,
            result.database or ev.db,
            tables,
        )
        # Above the offset before this statement (fidx, gtid_pos, 0, 0), not above the one after it.
        key = (file_index(self.file), gtid_pos, 0, 1)
        if result.kind == "truncate":
            for i, (db, table) in enumerate(result.truncated or []):
                yield Truncate(db, table, src, off, key[:3] + (1 + i,))
            return
        yield SchemaChange(result.database or ev.db, q, result, src, off, key, gtids_before)


class UnparseableDdlError(Exception):
    pass


def tables_at(tables: Tables, db: str, table: str) -> Table | None:
    return tables.get(db, table)
