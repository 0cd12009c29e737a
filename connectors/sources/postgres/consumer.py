"""pgoutput messages → Debezium records, one handler per message kind.

`MessageConsumer` holds the state of one stream between messages: the transaction being decoded,
the positions the offsets are made of (see source.py for what they mean), the records not yet
handed out. `handlers()` gives one handler per message kind byte; the read loop
(`PostgresSource.batches`) calls `handlers[payload[0]](lsn, payload)` for every message and cuts a
batch (`cut`) when a handler says the batch is full.

Speed: a one-row transaction is three messages, so the handlers are the hot path. BEGIN and
COMMIT are unpacked in place, without a message object; an INSERT goes through the table
version's fused decoder (fastrow.py) when its tuple allows, and through the general decoder
(pgoutput.py) and the event factory otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from connectors.api import Batch, Lsn, Record, TerminalError, TidemarkError
from connectors.format.tableschema import TableSchema
from connectors.settings.filters import NameFilter
from connectors.sources.postgres import pgoutput as pgo
from connectors.sources.postgres.events import MAX_SUB, PgEventFactory, Tx
from connectors.sources.postgres.fastrow import FusedInsert, compile_insert
from connectors.sources.postgres.tables import TableCache

__all__ = ["Handler", "MessageConsumer"]

# A handler takes (message LSN, payload) and returns whether the batch is full (cut it now).
Handler = Callable[[int, bytes], bool | None]

_BEGIN = pgo.BEGIN.unpack_from
_COMMIT = pgo.COMMIT.unpack_from
_U32 = pgo.U32.unpack_from
_EPOCH_US = pgo.PG_EPOCH_OFFSET_US
_DECODERS = pgo.DISPATCH
_decode = pgo.decode  # raises the PgOutputError that explains a payload the fast decoders refuse


class MessageConsumer:
    """Turns the messages of one replication stream into records and batch offsets."""

    __slots__ = (
        "tables",
        "ev",
        "max_batch",
        "skipped",
        "tombstones",
        "message_filter",
        "message_topic",
        "start_key",
        "fast",
        "insert_paths",
        "start_commit",
        "pending",
        "tx",
        "flush_lsn",
        "order_commit",
        "seq_commit",
        "src_ts",
        "n_tx",
        "n_filtered",
        "more_cut",
        "yielded_flush",
    )

    def __init__(
        self,
        tables: TableCache,
        ev: PgEventFactory,
        *,
        max_batch: int,
        skipped: set[str],
        tombstones: bool,
        message_filter: NameFilter,
        message_topic: str,
        start_key: tuple[int, int, int],
        flush_lsn: int,
        order_commit: int,
        seq_commit: int | None,
    ) -> None:
        self.tables, self.ev, self.max_batch = tables, ev, max_batch
        self.skipped, self.tombstones = skipped, tombstones
        self.message_filter, self.message_topic = message_filter, message_topic
        # Records at or before this position were handed out before a restart (a transaction
        # cut mid-way): they are decoded again, to rebuild the transaction's counters, not emitted.
        self.start_key = start_key
        self.start_commit = start_key[0]  # the cheap first test: later transactions replay nothing
        self.fast: dict[TableSchema, FusedInsert] = {}  # table version -> fused INSERT decoder
        # relation oid -> (table version, its fused decoder): one look-up per INSERT
        self.insert_paths: dict[int, tuple[TableSchema, FusedInsert]] = {}
        self.pending: list[Record] = []
        self.tx: Tx | None = None
        self.flush_lsn = flush_lsn  # end LSN of the last complete transaction (confirmable)
        self.order_commit = order_commit  # commit LSN of the last complete transaction (ordering)
        self.seq_commit = seq_commit  # Debezium's lastCommitLsn for `sequence` (None at start)
        self.src_ts = 0  # commit time (ms) of the last complete transaction
        self.n_tx = 0  # transactions completed in the pending batch
        self.n_filtered = 0  # row changes of relations the filters do not capture (metrics)
        self.more_cut = False  # the last batch was cut for size: more follows at once
        self.yielded_flush = flush_lsn  # lsn_flush of the last batch handed out

    def handlers(self) -> list[Handler]:
        """The handler of each message kind byte (index 0-255)."""
        table: list[Handler] = [self.on_unknown] * 256
        for kind, handler in (
            (b"B", self.on_begin),
            (b"C", self.on_commit),
            (b"R", self.on_relation),
            (b"I", self.on_insert),
            (b"U", self.on_update),
            (b"D", self.on_delete),
            (b"T", self.on_truncate),
            (b"M", self.on_message),
            (b"O", self.on_ignored),  # Origin
            (b"Y", self.on_ignored),  # Type
        ):
            table[kind[0]] = handler
        return table

    # ------------------------------------------------------------------ offsets and batches
    def offset(self, rec: Record | None = None) -> dict[str, Any]:
        """The offset after `rec` (inside the current transaction), or after the last complete one."""
        tx = self.tx
        if rec is None or tx is None:
            return {
                "lsn_flush": self.flush_lsn,
                "lsn_commit": self.order_commit,
                "lsn": self.order_commit,
                "sub": MAX_SUB,
                "seq_commit": self.seq_commit,
                "ts_usec": self.src_ts * 1000,
                "complete": True,
            }
        c, lsn, sub = rec.pos  # type: ignore[misc]  # PostgreSQL positions are (commit, lsn, sub)
        return {
            "lsn_flush": self.flush_lsn,
            "lsn_commit": c,
            "lsn": lsn,
            "sub": sub,
            "txId": tx.xid,
            "seq_commit": tx.prev_commit,
            "ts_usec": tx.commit_ts,
            "complete": False,
        }

    def cut(self, in_tx: bool, more: bool = False) -> Batch:
        """The pending records as a batch (`in_tx`: cut inside the current transaction)."""
        pending = self.pending
        self.more_cut = more
        self.yielded_flush = self.flush_lsn
        b = Batch(
            pending,
            self.offset(pending[-1] if (in_tx and pending) else None),
            extra={
                "transactions": self.n_tx,
                "source_ts_ms": self.src_ts,
                "more": more,
                "filtered": self.n_filtered,
            },
        )
        self.pending, self.n_tx, self.n_filtered = [], 0, 0
        return b

    def position_offset(self) -> dict[str, Any]:
        """The offset of a batch that carries no change (a heartbeat's): it hands out the position."""
        self.yielded_flush = self.flush_lsn
        return self.offset()

    # ------------------------------------------------------------------ transactions
    def on_begin(self, lsn: int, payload: bytes) -> None:
        try:
            final_lsn, begin_ts, xid = _BEGIN(payload)
        except Exception:
            _decode(payload)
            raise
        self.tx = Tx(xid, final_lsn, begin_ts + _EPOCH_US, self.seq_commit)

    def on_commit(self, lsn: int, payload: bytes) -> bool:
        try:
            _, commit_lsn, end_lsn, commit_ts = _COMMIT(payload)
        except Exception:
            _decode(payload)
            raise
        tx = self.tx
        pending = self.pending
        if tx is not None and (
            tx.commit_lsn > self.start_commit or (tx.commit_lsn, MAX_SUB, 0) > self.start_key
        ):
            self.ev.tx_end(pending, tx, lsn)
        if end_lsn > self.flush_lsn:
            self.flush_lsn = end_lsn
        self.order_commit = commit_lsn
        self.seq_commit = lsn
        self.src_ts = (commit_ts + _EPOCH_US) // 1000
        self.n_tx += 1
        self.tx = None
        return len(pending) >= self.max_batch

    # ------------------------------------------------------------------ row changes
    def on_insert(self, lsn: int, payload: bytes) -> bool | None:
        tx = self.tx
        if tx is not None:
            oid = _U32(payload, 1)[0]
            hit = self.insert_paths.get(oid)
            if hit is None:
                hit = self._insert_path(oid)
            if hit is not None:
                ts, fused = hit
                try:
                    got = fused(payload, 6) if payload[5] == 78 else None  # 'N' new tuple
                except Exception:  # the general path raises or handles it (failure mode)
                    got = None
                if got is not None:
                    pos = (tx.commit_lsn, lsn, 0)
                    if tx.commit_lsn <= self.start_commit and pos <= self.start_key:
                        self.ev.insert([], tx, ts, got[0], got[1], lsn, pos, self.skipped)
                        return False
                    pending = self.pending
                    self.ev.insert(pending, tx, ts, got[0], got[1], lsn, pos, self.skipped)
                    return len(pending) >= self.max_batch
        return self._change(lsn, _decoded(payload))

    def _insert_path(self, oid: int) -> tuple[TableSchema, FusedInsert] | None:
        """The table version of `oid` and its fused INSERT decoder (None: not captured)."""
        ts = self.tables.get(oid)
        if ts is None:
            return None
        fused = self.fast.get(ts)
        if fused is None:
            fused = self.fast[ts] = compile_insert(ts)
        self.insert_paths[oid] = (ts, fused)
        return ts, fused

    def on_update(self, lsn: int, payload: bytes) -> bool | None:
        return self._change(lsn, _decoded(payload))

    def on_delete(self, lsn: int, payload: bytes) -> bool | None:
        return self._change(lsn, _decoded(payload))

    def _change(self, lsn: int, m: pgo.Insert | pgo.Update | pgo.Delete) -> bool | None:
        ts = self.tables.get(m.relation_oid)
        tx = self.tx
        if ts is None or tx is None:
            self.n_filtered += ts is None
            return None
        pos = (tx.commit_lsn, lsn, 0)
        if tx.commit_lsn <= self.start_commit and pos <= self.start_key:
            # Replay of a transaction cut mid-way before a restart: rebuild its counters
            # (total_order, BEGIN already sent) and drop the records.
            self.ev.change([], tx, ts, m, lsn, pos, self.skipped, self.tombstones)
            return None
        pending = self.pending
        try:
            self.ev.change(pending, tx, ts, m, lsn, pos, self.skipped, self.tombstones)
        except TidemarkError:
            raise
        except Exception as e:  # a value the converters cannot handle (mode fail)
            # The exception type only: its text may quote the value.
            raise TerminalError(
                f"cannot convert a change of {ts.collection} at LSN {Lsn(lsn)} ({type(e).__name__})",
                "set event.processing.failure.handling.mode=warn to skip such changes "
                "(logged with table and position)",
            ) from None
        return len(pending) >= self.max_batch

    def on_truncate(self, lsn: int, payload: bytes) -> None:
        m = _decoded(payload)
        tx = self.tx
        if tx is None or "t" in self.skipped:
            return
        for i, oid in enumerate(m.relation_oids):
            ts = self.tables.get(oid)
            pos = (tx.commit_lsn, lsn, i)
            if ts is not None and pos > self.start_key:
                self.ev.truncate(self.pending, tx, ts, lsn, pos)

    # ------------------------------------------------------------------ other messages
    def on_relation(self, lsn: int, payload: bytes) -> None:
        rel = _decoded(payload)
        self.tables.relation(rel)
        self.insert_paths.pop(rel.oid, None)  # its table version may change

    def on_message(self, lsn: int, payload: bytes) -> None:
        m = _decoded(payload)
        tx = self.tx
        if m.transactional and tx is not None:
            pos = (tx.commit_lsn, lsn, 0)
            if self.message_filter(m.prefix) and pos > self.start_key:
                self.ev.message(self.pending, self.message_topic, tx, m, lsn, pos, self.seq_commit)
        else:
            # Non-transactional: its own commit, so the positions move past it.
            pos = (lsn, lsn, 0)
            self.seq_commit = lsn
            if self.message_filter(m.prefix) and pos > self.start_key:
                self.ev.message(self.pending, self.message_topic, None, m, lsn, pos, self.seq_commit)
            self.order_commit = max(self.order_commit, lsn)
            self.flush_lsn = max(self.flush_lsn, lsn)

    def on_ignored(self, lsn: int, payload: bytes) -> None:
        """Origin and Type messages need no event (decoded all the same: a corrupt one stops)."""
        _decoded(payload)

    def on_unknown(self, lsn: int, payload: bytes) -> None:
        _decode(payload)  # raises: a kind this decoder does not read, with what to change


def _decoded(payload: bytes) -> Any:
    """The message object of `payload` (its kind's decoder; `pgoutput.decode` explains a failure)."""
    try:
        return _DECODERS[payload[0]](payload)
    except Exception:
        return _decode(payload)
