"""Read-only incremental snapshots for MySQL/MariaDB (`read.only=true`): GTID watermarks, as
Debezium's MySqlReadOnlyIncrementalSnapshotChangeEventSource — nothing is written to the source
database.

The chunk reader (`incremental_read.py`) takes the server's executed GTID set before a chunk's
read (the low watermark L) and after it (the high watermark H) instead of inserting watermark
rows, and stages both with the chunk (`ChunkMeta.low` / `.high`). The engine (`GtidWindows.scan`,
called by `IncrementalSnapshots.process` for every batch) then sees the window in the stream by
the GTIDs of the change events: a transaction in H but not in L is inside the window (the keys it
changes are dropped from the chunk: the stream has their newer state); the chunk's rows go out
right before the first event whose GTID is not in H, or at the end of a batch whose offset's
executed set contains H (the stream passed the window; an idle stream is asked for such a batch
at each server heartbeat, `waiting`).

Why the chunk sees every transaction before its window (DBLog's condition): the read runs in a
START TRANSACTION WITH CONSISTENT SNAPSHOT. MariaDB makes that snapshot consistent with a binlog
position (Binlog_snapshot_file/_position): every transaction starting before it is visible, none
after; that position is the exact low watermark (`parse_low`) — @@gtid_binlog_pos is not, it
holds a transaction as soon as it is binlogged, before its commit is visible. MySQL adds a GTID to
gtid_executed only after the commit, so there the set read before the snapshot is the low
watermark (Debezium's). Transactions between it and the snapshot are visible to the chunk and
also in the window: their keys are dropped, which is safe.

Until the reader hands the engine a chunk's L and H (`arm`), the engine keeps the keys of the
snapshotted tables' changes with their GTIDs; once armed, those before L are forgotten. The
window's keys (with their GTIDs) travel in the offsets like the signal-table variant's, so a
restart replays to the same result.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from connectors.api import Batch, GtidSet, Record

if TYPE_CHECKING:
    from connectors.snapshot.incremental import IncrementalSnapshots, Progress

log = logging.getLogger(__name__)


WAIT_S = 120.0  # how long the engine waits for a chunk's high watermark or its staging


@dataclass
class _Marks:
    low: GtidSet
    high: GtidSet | None = None  # None: being read (the engine waits before deciding)
    staged: bool = False
    # MariaDB: the binlog position the chunk's consistent snapshot corresponds to (file index,
    # position); exact where the GTID set read before the snapshot is not (see `parse_low`)
    low_pos: tuple[int, int] | None = None

    @classmethod
    def of(cls, low: str, high: str | None = None, staged: bool = False) -> _Marks:
        gtids, pos = parse_low(low)
        return cls(GtidSet.parse(gtids), GtidSet.parse(high) if high is not None else None, staged, pos)

    def before(self, gtid: str, pos: tuple[int, ...] | None, has: Callable[[GtidSet, str], bool]) -> bool:
        """Whether the transaction of `gtid` (starting at stream position `pos`) is before the
        window: seen by the chunk's read."""
        if self.low_pos is not None and pos is not None:
            return (pos[0], pos[1]) < self.low_pos
        return has(self.low, gtid)


def parse_low(low: str) -> tuple[str, tuple[int, int] | None]:
    """A low watermark's text: `<executed GTID set>` or, MariaDB, `<set>@<file>:<pos>` with the
    consistent snapshot's binlog position (Binlog_snapshot_file/_position). MariaDB adds a GTID to
    @@gtid_binlog_pos when the transaction is written to the binlog, before its commit is
    visible, so the set read before the snapshot may hold a transaction the read does not see;
    the snapshot's binlog position is exact."""
    gtids, _, at = low.partition("@")
    if not at:
        return gtids, None
    file, _, pos = at.rpartition(":")
    index = file.rpartition(".")[2]  # as sources/mysql/events.file_index (not imported: PostgreSQL)
    return gtids, (int(index) if index.isdigit() else 0, int(pos))


class GtidWindows:
    """The engine side of the read-only variant. The reader reports each chunk's steps
    (`closing`, `arm`, `staged`, `abandon`); the engine's `scan` decides with them. All state is
    guarded by the controller's condition (`cond`), which the engine holds in `scan` and
    releases while it waits for the reader."""

    def __init__(self, cond: threading.Condition) -> None:
        self._cond = cond
        self._marks: dict[str, _Marks] = {}
        self._looked: set[str] = set()  # chunks the engine looked for in staging
        self.current: str | None = None  # the chunk the engine waits for

    # ------------------------------------------------------------------ reader side
    def closing(self, chunk_id: str, low: str) -> None:
        """The chunk was read after executed set `low`; its high watermark is read next: the
        engine waits for it before it decides on an event outside `low`."""
        with self._cond:
            self._marks[chunk_id] = _Marks.of(low)
            self._trim()

    def arm(self, chunk_id: str, low: str, high: str, *, staged: bool = False) -> None:
        with self._cond:
            self._marks[chunk_id] = _Marks.of(low, high, staged)
            self._trim()
            self._cond.notify_all()

    def staged(self, chunk_id: str) -> None:
        with self._cond:
            m = self._marks.get(chunk_id)
            if m is not None:
                m.staged = True
            self._cond.notify_all()

    def abandon(self, chunk_id: str) -> None:
        """The chunk's read failed after `closing`: it will be read again, in a new window."""
        with self._cond:
            self._marks.pop(chunk_id, None)
            self._cond.notify_all()

    def restore(self, staging: Any, p: Progress) -> None:
        """After a restart: arm the current chunk and the one after it from staging, before the
        engine replays the stream (the reader finds them later)."""
        for seq in (p.chunk_seq, p.chunk_seq + 1):
            cid = f"{p.snapshot_id}-{seq}"
            found = staging.read(cid)
            if found is not None and found.meta.low is not None and found.meta.high is not None:
                self.arm(cid, found.meta.low, found.meta.high, staged=True)

    def _ensure(self, staging: Any, chunk_id: str) -> None:
        """Once per chunk, when the engine starts waiting for it: a chunk staged before (a
        restart replays the stream, and the offsets it resumes from may be older than the last
        chunk emitted) is armed from staging now — the reader finds it only later, and the
        engine must not let an event after its window pass meanwhile."""
        self.current = chunk_id
        if chunk_id in self._marks or chunk_id in self._looked:
            return
        self._looked.add(chunk_id)
        if len(self._looked) > 64:
            self._looked = {chunk_id}
        found = staging.read(chunk_id)
        if found is not None and found.meta.low is not None and found.meta.high is not None:
            self._marks[chunk_id] = _Marks.of(found.meta.low, found.meta.high, True)
            self._trim()

    def _trim(self) -> None:
        while len(self._marks) > 8:  # only the current chunk and the one read ahead matter
            self._marks.pop(next(iter(self._marks)))

    def waiting(self) -> bool:
        """Whether the current chunk is read and waits for the stream to pass its window (the
        MySQL source then turns an idle server heartbeat into an empty batch)."""
        cur = self.current
        m = self._marks.get(cur) if cur is not None else None
        return m is not None and m.high is not None

    # ------------------------------------------------------------------ engine side
    def _decided(self, chunk_id: str, needs: str) -> _Marks | None:
        """The chunk's marks once `needs` ("high": the high watermark, "staged": the rows too)
        is there — waiting for the reader, the lock released meanwhile; None: not read, or
        abandoned."""

        def ready() -> bool:
            m = self._marks.get(chunk_id)
            return m is None or (m.high is not None and (needs == "high" or m.staged))

        if not self._cond.wait_for(ready, WAIT_S):
            log.error(
                "incremental snapshot (read-only): chunk %s: the reader did not finish in %.0fs",
                chunk_id,
                WAIT_S,
            )
            return None
        return self._marks.get(chunk_id)

    def scan(self, ctl: IncrementalSnapshots, batch: Batch, p: Progress) -> list[Record] | None:
        """`batch`'s records with the chunks released in it (None: unchanged). Called with the
        controller's condition held."""
        records = batch.records
        watched = set(p.tables)
        surrogates = {c["id"]: c.get("surrogate_key") for c in p.collections}
        pending: list[list[Any]] = [list(k) for k in p.window_keys]  # [table, dedup, gtid, pos]
        self._ensure(ctl.staging, p.chunk_id)
        memo: dict[tuple[int, str], bool] = {}

        def has(s: GtidSet, g: str) -> bool:
            hit = memo.get((id(s), g))
            if hit is None:
                hit = memo[(id(s), g)] = s.contains(GtidSet.parse(g))
            return hit

        out: list[Record] | None = None
        for i, r in enumerate(records):
            v = r.value
            src = v.get("source") if isinstance(v, dict) else None
            g = src.get("gtid") if isinstance(src, dict) else None
            if g:
                while True:
                    m = self._marks.get(p.chunk_id)
                    if m is None or m.before(g, r.pos, has):
                        break
                    if m.high is None:  # its high watermark is being read: wait for it
                        m = self._decided(p.chunk_id, "high")
                        if m is None:
                            break
                    assert m.high is not None
                    if has(m.high, g):
                        break
                    # the first event after the window: the chunk goes out before it
                    m = self._decided(p.chunk_id, "staged")
                    if m is None:
                        break
                    out = out if out is not None else list(records[:i])
                    out.extend(self._release(ctl, p, _at(r), pending, m))
                    if ctl.progress is None:
                        out.extend(records[i:])
                        return out
                    pending = []
                    watched = set(p.tables)
                    surrogates = {c["id"]: c.get("surrogate_key") for c in p.collections}
                    self._ensure(ctl.staging, p.chunk_id)
                m = self._marks.get(p.chunk_id)
                if r.collection in watched and (m is None or not m.before(g, r.pos, has)):
                    tx_at = list(r.pos[:2]) if r.pos else None
                    for k in _dedup(r, surrogates.get(r.collection or "")):
                        pending.append([r.collection, k, g, tx_at])
            if out is not None:
                out.append(r)
        executed = str(batch.offset.get("gtids") or "")
        done = GtidSet.parse(executed) if executed else None
        while done is not None:
            # the stream passed the whole window, with no event after it in this batch
            m = self._marks.get(p.chunk_id)
            if m is None or m.high is None or not done.contains(m.high):
                break
            m = self._decided(p.chunk_id, "staged")
            if m is None:
                break
            at = _at(records[-1]) if records else _position_record(ctl, batch.offset)
            out = out if out is not None else list(records)
            out.extend(self._release(ctl, p, at, pending, m))
            pending = []
            if ctl.progress is None:
                return out
            self._ensure(ctl.staging, p.chunk_id)
        m = self._marks.get(p.chunk_id)
        if m is not None:
            pending = [k for k in pending if not m.before(k[2], k[3], has)]
        p.window_keys = pending
        p.window_open = bool(pending)
        return out

    def _release(
        self, ctl: IncrementalSnapshots, p: Progress, at: Record, pending: list[list[Any]], m: _Marks
    ) -> list[Record]:
        """The chunk's rows (its keys changed in the window dropped), placed at `at`."""

        def has(s: GtidSet, g: str) -> bool:
            return s.contains(GtidSet.parse(g))

        p.window_keys = [[t, k] for t, k, g, at in pending if not m.before(g, at, has)]
        self._marks.pop(p.chunk_id, None)
        self.current = None
        return ctl._close(at, p)


def _at(r: Record) -> Record:
    """`r` as the place chunk rows go: its source without the query text (Debezium's
    read-only snapshot clears it for the snapshot rows)."""
    v = r.value if isinstance(r.value, dict) else {}
    source = dict(v.get("source") or {})
    source["query"] = None
    return Record(r.topic, None, {"source": source}, None, None, (), None, r.offset, r.pos)


def _dedup(r: Record, surrogate: str | None) -> list[str]:
    if r.key is not None:
        return [orjson.dumps(r.key).decode()]
    if not surrogate:
        return []
    out = []
    v = r.value or {}
    for img in (v.get("before"), v.get("after")):
        if isinstance(img, dict):
            out.append(orjson.dumps(img.get(surrogate)).decode())
    return out


def _position_record(ctl: IncrementalSnapshots, offset: dict[str, Any]) -> Record:
    """A stand-in event at `offset` for chunk rows released by an empty batch (an idle stream):
    their `source` names that binlog position."""
    from connectors.format.envelope import VERSION
    from connectors.sources.mysql.events import offset_key

    ms = int(time.time() * 1000)
    source = {
        "version": VERSION,
        "connector": "mariadb" if ctl.cfg.connector == "mariadb" else "mysql",
        "name": ctl.cfg.topic_prefix,
        "ts_ms": ms,
        "snapshot": "false",
        "db": "",
        "sequence": None,
        "ts_us": ms * 1000,
        "ts_ns": ms * 1_000_000,
        "table": None,
        "server_id": int(offset.get("server_id") or 0),
        "gtid": None,
        "file": str(offset.get("file") or ""),
        "pos": int(offset.get("pos") or 0),
        "row": 0,
        "thread": None,
        "query": None,
    }
    return Record("", None, {"source": source}, None, None, (), None, offset, offset_key(offset))
