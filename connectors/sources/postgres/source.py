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
from collections.abc import Callable, Iterator
from typing import Any

import psycopg2

from connectors.api import Batch, Lsn, TidemarkError
from connectors.format import envelope as env
from connectors.format.tableschema import TableSchema, unchanged_update
from connectors.format.topics import TopicNamer
from connectors.format.variants import with_options
from connectors.settings.config import ConnectorConfig
from connectors.settings.filters import ColumnRules, NameFilter, TableFilters, compile_list
from connectors.settings.model import PostgresSettings
from connectors.sources.memory import RunMemory, memory_for
from connectors.sources.postgres import checks, publications, replication, slots
from connectors.sources.postgres import pgoutput as pgo
from connectors.sources.postgres.catalog import list_tables
from connectors.sources.postgres.connection import PgConnParams, connect, translate_error
from connectors.sources.postgres.consumer import MessageConsumer
from connectors.sources.postgres.events import MAX_SUB, PgEventFactory
from connectors.sources.postgres.tables import TableCache

log = logging.getLogger(__name__)


def offset_key(offset: dict[str, Any] | None) -> tuple[int, int, int]:
    """Total order of PostgreSQL offsets (and of `Record.pos`)."""
    if not offset:
        return (0, 0, 0)
    if offset.get("complete", True):
        return (offset["lsn_commit"], MAX_SUB, MAX_SUB)
    return (offset["lsn_commit"], offset["lsn"], offset.get("sub", 0))


class PostgresSource:
    # acknowledge() only records the LSN when called from another thread (the engine's offset
    # flusher); the reading thread sends it (replication.ReplicationStream.send_feedback).
    acknowledge_thread_safe = True

    def __init__(
        self,
        cfg: ConnectorConfig,
        *,
        until_caught_up: bool = False,
        max_seconds: float | None = None,
        memory: RunMemory | None = None,
    ) -> None:
        self.cfg = cfg
        self.memory = memory if memory is not None else memory_for(cfg)
        assert isinstance(cfg.source, PostgresSettings)
        self.src = src = cfg.source
        self.until_caught_up = until_caught_up
        self.deadline = time.monotonic() + max_seconds if max_seconds else None
        self.max_batch = src.max_batch_size
        self.poll_s = src.poll_interval_ms / 1000
        self.heartbeat_s = src.heartbeat_interval_ms / 1000
        # Set by the incremental snapshot (reader=spark): while it returns True an idle stream
        # yields a position-only batch each poll, so a snapshot signal's effect is stored (the
        # chunk job follows the stored state) although nothing changes in the database.
        self.wants_position: Callable[[], bool] | None = None
        self.heartbeat_query = src.heartbeat_action_query
        self.skipped = set[str](src.skipped_operations) - {"none"}
        self.tombstones = src.tombstones_on_delete
        self.tx_meta = src.provide_transaction_metadata
        self.namer = TopicNamer.from_settings(src)
        self.filters = TableFilters.from_settings(src)
        self.rules = ColumnRules.from_settings(src)
        self.message_filter = NameFilter(
            compile_list(src.message_prefix_include_list),
            compile_list(src.message_prefix_exclude_list),
        )
        self._stop = False
        self._stream: Any = None
        self._conn: Any = None
        self._tables: TableCache | None = None
        self._events: PgEventFactory | None = None
        self._start_key = (0, 0, 0)
        self._flushed = 0

    # ------------------------------------------------------------------ lifecycle
    def open(self, start_offset: dict[str, Any] | None) -> None:
        params = PgConnParams.from_settings(self.src)
        self._conn = connect(params, unreachable_is_transient=self.memory.connected)
        self.memory.connected = True
        try:
            self._open(params, start_offset)
        except psycopg2.Error as exc:
            # The server went away during set-up (e.g. a restart): retried like any dropped connection.
            raise translate_error(exc, f"setting up the stream from {params.address}") from exc

    def _open(self, params: PgConnParams, start_offset: dict[str, Any] | None) -> None:
        src = self.src
        checks.check_server(self._conn, params)
        tables = list_tables(self._conn)
        captured = [(s, t) for s, t, *_ in tables if self.filters.captures(s, t)]
        if not captured and self.memory.first_time("nothing captured"):
            checks.warn_nothing_captured(src, tables)
        done = publications.ensure_publication(
            self._conn,
            src.publication_name,
            src.publication_autocreate_mode,
            captured,
            via_root=src.publish_via_partition_root,
        )
        if done == "created" and src.publication_autocreate_mode == "all_tables":
            checks.warn_missing_identity(src.publication_name, tables)
        if src.publication_autocreate_mode != "all_tables":
            publications.check_publication_covers(self._conn, src.publication_name, captured)
        slot_name = src.slot_name
        if start_offset:
            # Before ensure_slot: a slot re-created now would silently skip everything since the offset.
            info = slots.slot_info(self._conn, slot_name)
            if info is None and src.slot_drop_on_stop:
                log.warning(
                    "slot %s was dropped on the last stop (slot.drop.on.stop): changes made while the "
                    "connector was down are not streamed",
                    slot_name,
                )
            else:
                err = slots.check_resume(
                    info,
                    int(start_offset.get("lsn_flush", 0)),
                    slot_name,
                    known_lsn=self.memory.seen_position,
                )
                if err is not None:
                    raise err
        slots.attach_with_retry(
            lambda: slots.ensure_slot(self._conn, slot_name, src.plugin_name),
            src.slot_max_retries,
            src.slot_retry_delay_ms,
        )
        self._start_key = offset_key(start_offset)
        start_lsn = int(start_offset.get("lsn_flush", 0)) if start_offset else 0
        self._flushed = start_lsn
        self._order_commit = int(start_offset.get("lsn_commit", 0)) if start_offset else 0
        self._seq_commit = start_offset.get("seq_commit") if start_offset else None
        self._target = slots.current_wal_lsn(self._conn) if self.until_caught_up else None
        self._tables = TableCache(
            self._conn, self.cfg, self.namer, self.filters, self.rules, warned=self.memory.warned
        )
        self._events = PgEventFactory(
            self.cfg.topic_prefix,
            src.database_dbname,
            self.namer.transaction_topic,
            self.tx_meta,
            src.binary_handling_mode,
        )
        # skip.messages.without.change / event.processing.failure.handling.mode: chosen once here.
        self._events.change = with_options(  # type: ignore[method-assign]  # this instance's variant
            self._events.change, src, unchanged=_unchanged_update, where=_where
        )
        self._stream = replication.ReplicationStream(
            params,
            slot_name,
            src.publication_name,
            start_lsn=start_lsn,
            status_interval_ms=src.status_update_interval_ms,
        )
        stream = self._stream
        slots.attach_with_retry(lambda: stream.open(), src.slot_max_retries, src.slot_retry_delay_ms)

    def stop(self) -> None:
        self._stop = True

    def acknowledge(self, offset: dict[str, Any]) -> None:
        lsn = int(offset.get("lsn_flush", 0))
        if lsn > self._flushed:
            self._flushed = lsn
        stream = self._stream  # read once: close() may clear it on the engine's thread
        if stream is not None:
            try:
                stream.send_feedback(self._flushed)
            except TidemarkError as e:
                # The offset is stored; a dead connection only means the server hears of it
                # from the next one (which starts there). The read path reports the failure.
                log.debug("confirming %s to the server: %s", Lsn(self._flushed), e)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        if self._conn is not None:
            try:
                if self._stop and self.src.slot_drop_on_stop:
                    self._drop_slot()
            finally:
                self._conn.close()
                self._conn = None

    def _drop_slot(self) -> None:
        # The walsender lets go of the slot a moment after the stream closes: wait for that.
        name = self.src.slot_name
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            info = slots.slot_info(self._conn, name)
            if info is None or not info.active:
                break
            time.sleep(0.05)
        if slots.drop_slot(self._conn, name):
            log.info("dropped slot %s (slot.drop.on.stop)", name)

    offset_key = staticmethod(offset_key)

    # ------------------------------------------------------------------ streaming
    def batches(self) -> Iterator[Batch]:
        """Read messages, hand each to its handler (consumer.py), and cut batches: when a handler
        says the batch is full, when the stream goes quiet, before a heartbeat, and at the stop
        (`stop()`, `max_seconds`, or caught up with `until_caught_up`)."""
        assert self._stream is not None and self._tables is not None and self._events is not None
        stream, memory = self._stream, self.memory
        c = MessageConsumer(
            self._tables,
            self._events,
            max_batch=self.max_batch,
            skipped=self.skipped,
            tombstones=self.tombstones,
            message_filter=self.message_filter,
            message_topic=self.namer.message_topic(),
            start_key=self._start_key,
            flush_lsn=self._flushed,
            order_commit=self._order_commit,
            seq_commit=self._seq_commit,
        )
        on = c.handlers()
        next_hb = time.monotonic() + self.heartbeat_s if self.heartbeat_s else None

        while True:
            if self._stop or (self.deadline is not None and time.monotonic() > self.deadline):
                if c.pending or (c.tx is None and c.flush_lsn > c.yielded_flush):
                    # A position-only batch too: the offsets then hold the idle position the
                    # slot already follows, and the next start has no gap to explain.
                    yield c.cut(c.tx is not None)
                return
            msgs = stream.read_batch(self.max_batch, self.poll_s)
            for lsn, payload in msgs:
                if on[payload[0]](lsn, payload):  # the batch is full: cut (mid-transaction or not)
                    yield c.cut(c.tx is not None, more=True)
            # Let go of the raw payloads before yielding: a batch can wait in the sinks for a
            # while, and a 50 MB value must not be held a second time as its pgoutput bytes.
            n_msgs = len(msgs)
            msgs = payload = None
            now = time.monotonic()
            if c.tx is None and n_msgs < self.max_batch:
                # Nothing in flight: the server's keepalive position can be confirmed too, so a
                # quiet or fully filtered database does not pin WAL (Debezium does the same).
                wal_end = stream.wal_end
                if wal_end > c.flush_lsn:
                    c.flush_lsn = wal_end
                if c.flush_lsn > memory.seen_position:
                    memory.seen_position = c.flush_lsn
                if c.pending or c.more_cut or (self.wants_position is not None and self.wants_position()):
                    # Also after a size cut with nothing left: tells the engine to commit now.
                    yield c.cut(False)
                if next_hb is not None and now >= next_hb:
                    next_hb = now + self.heartbeat_s
                    yield self._heartbeat(c.position_offset())
                if self._target is not None:
                    if c.flush_lsn >= self._target:
                        if c.flush_lsn > c.yielded_flush:
                            yield c.cut(False)  # the idle position (see the stop above)
                        return  # caught up: no need to wait out another poll interval first
                    if not n_msgs:
                        stream.request_status()
            elif next_hb is not None and now >= next_hb and c.tx is None:
                next_hb = now + self.heartbeat_s
                if c.pending:
                    yield c.cut(False)
                yield self._heartbeat(c.position_offset())

    def _heartbeat(self, off: dict[str, Any]) -> Batch:
        if self.heartbeat_query:
            try:
                with self._conn.cursor() as cur:
                    cur.execute(self.heartbeat_query)
            except psycopg2.Error as exc:
                raise translate_error(exc, "running heartbeat.action.query") from exc
        return Batch(
            [env.heartbeat(self.namer.heartbeat_topic, self.cfg.topic_prefix)], off, extra={"heartbeat": True}
        )


__all__ = ["PostgresSource", "offset_key"]


def _unchanged_update(out: Any, tx: Any, ts: TableSchema, m: Any, *rest: Any) -> bool:
    """An UPDATE whose old and new rows are equal (needs REPLICA IDENTITY FULL to know)."""
    return type(m) is pgo.Update and unchanged_update(ts, m.old, m.new)


def _where(out: Any, tx: Any, ts: TableSchema, m: Any, lsn: int, *rest: Any) -> str:
    return f"change of {ts.collection} at LSN {Lsn(lsn)}"
