"""PostgreSQL source: pgoutput stream → Debezium change records, cut into transaction-aligned batches.

Offsets: `{"lsn_flush", "lsn_commit", "lsn", "sub", "txId", "ts_usec", "complete"}`.
`lsn_flush` is the end LSN of the last *complete* transaction (what is confirmed to the slot and
where streaming restarts); a batch cut inside a large transaction stores `complete: false` and the
last record's position, and a restart skips that transaction's records up to it — the slot
re-sends the whole transaction because its commit was never confirmed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import orjson

from connectors import envelope as env
from connectors.api import Batch, Record, TerminalError
from connectors.config import ConnectorConfig
from connectors.filters import ColumnRules, TableFilters, b64
from connectors.postgres import pgoutput as pgo
from connectors.postgres.events import MESSAGE_KEY, MESSAGE_VALUE, PgEventFactory
from connectors.postgres.tables import TableCache
from connectors.topics import TopicNamer

log = logging.getLogger(__name__)

MAX = (1 << 64) - 1


def offset_key(offset: dict[str, Any] | None) -> tuple[int, int, int]:
    """Total order of PostgreSQL offsets (and of `Record.pos`)."""
    if not offset:
        return (0, 0, 0)
    if offset.get("complete", True):
        return (offset["lsn_commit"], MAX, MAX)
    return (offset["lsn_commit"], offset["lsn"], offset.get("sub", 0))


class PostgresSource:
    def __init__(self, cfg: ConnectorConfig, *, until_caught_up: bool = False,
                 max_seconds: float | None = None) -> None:
        self.cfg = cfg
        src = cfg.source
        self.until_caught_up = until_caught_up
        self.deadline = time.monotonic() + max_seconds if max_seconds else None
        self.max_batch = int(src["max.batch.size"])
        self.poll_s = int(src["poll.interval.ms"]) / 1000
        self.heartbeat_s = int(src["heartbeat.interval.ms"]) / 1000
        self.heartbeat_query = src.get("heartbeat.action.query") or None
        self.skipped = set(src.get("skipped.operations") or [])
        self.tombstones = bool(src["tombstones.on.delete"])
        self.tx_meta = bool(src["provide.transaction.metadata"])
        self.namer = TopicNamer(cfg.topic_prefix, src.get("topic.delimiter", "."),
                                src.get("topic.transaction", "transaction"),
                                src.get("topic.heartbeat.prefix", "__debezium-heartbeat"))
        self.filters = TableFilters.from_source(src, "postgres")
        self.rules = ColumnRules.from_source(src)
        msg_inc = src.get("message.prefix.include.list")
        msg_exc = src.get("message.prefix.exclude.list")
        from connectors.filters import NameFilter, compile_list
        self.message_filter = NameFilter(compile_list(msg_inc), compile_list(msg_exc))
        self._stop = False
        self._stream: Any = None
        self._conn: Any = None
        self._tables: TableCache | None = None
        self._events: PgEventFactory | None = None
        self._start_key = (0, 0, 0)
        self._flushed = 0

    # ------------------------------------------------------------------ lifecycle
    def open(self, start_offset: dict[str, Any] | None) -> None:
        from connectors.postgres import replication, setup

        src = self.cfg.source
        self._conn = setup.connect(src)
        setup.check_server(self._conn, src)
        captured = [(s, t) for s, t, *_ in setup.list_tables(self._conn) if self.filters.captures(s, t)]
        setup.ensure_publication(self._conn, src["publication.name"], src["publication.autocreate.mode"], captured)
        slot = setup.ensure_slot_with_retry(self._conn, src)
        if start_offset:
            err = setup.check_resume(slot, start_offset.get("lsn_flush", 0))
            if err is not None:
                raise err
        self._start_key = offset_key(start_offset)
        start_lsn = int(start_offset.get("lsn_flush", 0)) if start_offset else 0
        self._flushed = start_lsn
        self._last_commit = int(start_offset.get("lsn_commit", 0)) if start_offset else 0
        self._target = setup.current_wal_lsn(self._conn) if self.until_caught_up else None
        self._tables = TableCache(self._conn, self.cfg, self.namer, self.filters, self.rules)
        self._events = PgEventFactory(self.cfg.topic_prefix, src["database.dbname"])
        self._stream = replication.ReplicationStream(src, slot_name=src["slot.name"],
                                                     publication=src["publication.name"],
                                                     start_lsn=start_lsn)
        log.info("streaming from slot %s at %s", src["slot.name"], _fmt(start_lsn))

    def stop(self) -> None:
        self._stop = True

    def acknowledge(self, offset: dict[str, Any]) -> None:
        lsn = int(offset.get("lsn_flush", 0))
        if lsn > self._flushed:
            self._flushed = lsn
        if self._stream is not None:
            self._stream.send_feedback(self._flushed)

    def close(self) -> None:
        from connectors.postgres import setup

        if self._stream is not None:
            self._stream.close()
            self._stream = None
        if self._conn is not None:
            if self._stop and self.cfg.source.get("slot.drop.on.stop"):
                setup.drop_slot(self._conn, self.cfg.source["slot.name"])
            self._conn.close()
            self._conn = None

    offset_key = staticmethod(offset_key)

    # ------------------------------------------------------------------ streaming
    def batches(self) -> Iterator[Batch]:
        assert self._stream is not None and self._tables is not None and self._events is not None
        stream, tables, ev = self._stream, self._tables, self._events
        decode = pgo.decode
        Begin, Commit, Insert, Update, Delete = pgo.Begin, pgo.Commit, pgo.Insert, pgo.Update, pgo.Delete
        pending: list[Record] = []
        tx: _Tx | None = None
        flush_lsn = self._flushed
        last_commit = self._last_commit
        n_tx = 0
        src_ts = 0
        next_hb = time.monotonic() + self.heartbeat_s if self.heartbeat_s else None
        start_key = self._start_key
        skipped = self.skipped
        tx_meta = self.tx_meta

        def offset(complete: bool, rec: Record | None = None) -> dict[str, Any]:
            if complete or rec is None or tx is None:
                return {"lsn_flush": flush_lsn, "lsn_commit": last_commit, "lsn": last_commit, "sub": 0,
                        "txId": tx.xid if tx else None, "ts_usec": src_ts * 1000, "complete": True}
            c, lsn, sub = rec.pos  # type: ignore[misc]
            return {"lsn_flush": flush_lsn, "lsn_commit": c, "lsn": lsn, "sub": sub, "txId": tx.xid,
                    "ts_usec": tx.commit_ts, "complete": False}

        def cut(complete: bool) -> Batch:
            nonlocal pending, n_tx
            b = Batch(pending, offset(complete, pending[-1] if pending else None),
                      extra={"transactions": n_tx, "source_ts_ms": src_ts})
            pending, n_tx = [], 0
            return b

        while True:
            if self._stop or (self.deadline is not None and time.monotonic() > self.deadline):
                if pending:
                    yield cut(tx is None)
                return
            msgs = stream.read_batch(self.max_batch, self.poll_s)
            for lsn, payload in msgs:
                m = decode(payload)
                t = type(m)
                if t is Insert or t is Update or t is Delete:
                    assert tx is not None
                    ts = tables.get(m.relation_oid)
                    if ts is None:
                        continue
                    pos = (tx.commit_lsn, lsn, 0)
                    if pos <= start_key:
                        tx.seen(ts.collection, 0)
                        continue
                    ev.change(pending, tx, ts, m, lsn, pos, skipped, self.tombstones, tx_meta)
                    if len(pending) >= self.max_batch:
                        yield cut(False)
                elif t is Begin:
                    tx = _Tx(m.xid, m.final_lsn, m.commit_ts, last_commit)
                    if tx_meta and (m.final_lsn, 0, 0) > start_key:
                        pending.append(ev.tx_begin(self.namer.transaction_topic, tx))
                elif t is Commit:
                    if tx is not None and tx_meta and tx.count and (tx.commit_lsn, MAX - 1, 0) > start_key:
                        pending.append(ev.tx_end(self.namer.transaction_topic, tx))
                    flush_lsn = max(flush_lsn, m.end_lsn)
                    last_commit = m.commit_lsn
                    src_ts = m.commit_ts // 1000
                    n_tx += 1
                    tx = None
                    if len(pending) >= self.max_batch:
                        yield cut(True)
                elif t is pgo.Relation:
                    tables.relation(m)
                elif t is pgo.Truncate:
                    assert tx is not None
                    pos = (tx.commit_lsn, lsn, 0)
                    if "t" not in skipped and pos > start_key:
                        for i, oid in enumerate(m.relation_oids):
                            ts = tables.get(oid)
                            if ts is not None:
                                pending.append(ev.truncate(tx, ts, lsn, (tx.commit_lsn, lsn, i), tx_meta))
                elif t is pgo.LogicalMessage:
                    if self.message_filter(m.prefix):
                        commit = tx.commit_lsn if (m.transactional and tx) else m.lsn
                        pos = (commit, lsn, 0)
                        if pos > start_key:
                            pending.append(ev.message(self.namer.message_topic(), tx if m.transactional else None,
                                                      m, lsn, pos, tx_meta))
                    if not m.transactional:
                        flush_lsn = max(flush_lsn, m.lsn)
                        last_commit = max(last_commit, m.lsn)
                # Origin and Type messages need no event.
            now = time.monotonic()
            idle = len(msgs) < self.max_batch
            if tx is None and idle:
                # Nothing in flight: the server's keepalive position can be confirmed too, so a
                # quiet or fully filtered database does not pin WAL (Debezium does the same).
                wal_end = stream.wal_end
                if wal_end > flush_lsn:
                    flush_lsn = wal_end
                if pending:
                    yield cut(True)
                if next_hb is not None and now >= next_hb:
                    next_hb = now + self.heartbeat_s
                    yield self._heartbeat(offset(True))
                if self._target is not None and flush_lsn >= self._target and not msgs:
                    return
                if self._target is not None and not msgs:
                    stream.request_status()
            elif next_hb is not None and now >= next_hb and tx is None:
                next_hb = now + self.heartbeat_s
                if pending:
                    yield cut(True)
                yield self._heartbeat(offset(True))

    def _heartbeat(self, off: dict[str, Any]) -> Batch:
        if self.heartbeat_query:
            from connectors.postgres import setup
            setup.run_heartbeat_query(self._conn, self.heartbeat_query)
        now = int(time.time() * 1000)
        rec = Record(self.namer.heartbeat_topic, {"serverName": self.cfg.topic_prefix}, {"ts_ms": now},
                     env.HEARTBEAT_KEY, env.HEARTBEAT_VALUE)
        return Batch([rec], off, extra={"heartbeat": True})


class _Tx:
    """The transaction being decoded: ids, commit position and per-table event counts."""

    __slots__ = ("xid", "commit_lsn", "commit_ts", "prev_commit", "count", "per_table", "id")

    def __init__(self, xid: int, commit_lsn: int, commit_ts: int, prev_commit: int) -> None:
        self.xid, self.commit_lsn, self.commit_ts, self.prev_commit = xid, commit_lsn, commit_ts, prev_commit
        self.count = 0
        self.per_table: dict[str, int] = {}
        self.id = f"{xid}:{commit_lsn}"

    def seen(self, collection: str, _n: int) -> tuple[int, int]:
        """Count one data event; returns (total_order, data_collection_order)."""
        self.count += 1
        n = self.per_table.get(collection, 0) + 1
        self.per_table[collection] = n
        return self.count, n


def _fmt(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


__all__ = ["PostgresSource", "offset_key", "TerminalError", "MESSAGE_KEY", "MESSAGE_VALUE", "b64", "orjson"]
