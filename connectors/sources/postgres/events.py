"""Build Debezium PostgreSQL change records (data, truncate, logical message, transaction BEGIN/END).

Shapes follow records captured from Debezium 3.6 (tests/golden/postgres), including its quirks:
the transaction id is `<xid>:<LSN of the current message>` (so it differs per event, BEGIN uses
the first captured event's LSN and END the commit's end LSN); BEGIN is emitted lazily with the
first captured event, so transactions without captured events get no BEGIN/END; `sequence` is
`[<end LSN of the previous commit>, <lsn>]` with `null` before the first commit seen.
"""

from __future__ import annotations

import time
from time import time_ns
from typing import Any

from connectors.api import Record
from connectors.format import envelope as env
from connectors.format import transaction as txmeta
from connectors.format.schema import Schema, prim, struct
from connectors.format.tableschema import TableSchema, key_change
from connectors.format.temporal import binary_encoder
from connectors.format.transaction import TxCounts
from connectors.sources.postgres import pgoutput as pgo

MESSAGE_KEY = struct(
    "io.debezium.connector.postgresql.MessageKey", [("prefix", prim("string", optional=True))], version=1
)


def message_value_schema(binary_mode: str) -> Schema:
    """MessageValue; `content` follows binary.handling.mode like any bytea column."""
    content = prim("bytes" if binary_mode == "bytes" else "string", optional=True)
    block = struct(
        "io.debezium.connector.postgresql.Message",
        [("prefix", prim("string", optional=True)), ("content", content)],
        version=1,
    )
    return struct(
        "io.debezium.connector.postgresql.MessageValue",
        [
            ("op", prim("string")),
            ("ts_ms", prim("int64", optional=True)),
            ("source", env.PG_SOURCE),
            ("transaction", env.TRANSACTION_BLOCK),
            ("message", block),
        ],
        version=1,
    )


# Debezium counts logical messages in END's data_collections under this (Java object) name.
MESSAGE_COLLECTION = "io.debezium.connector.postgresql.LogicalDecodingMessageMonitor$LogicalDecodingMessageId"

MAX_SUB = (1 << 64) - 1


class Tx:
    """The transaction being decoded: ids, commit position, and its event counts (shared with
    the MySQL source: format.transaction)."""

    __slots__ = ("commit_lsn", "commit_ts", "counts", "prev_commit", "xid")

    def __init__(self, xid: int, commit_lsn: int, commit_ts: int, prev_commit: int | None) -> None:
        self.xid, self.commit_lsn, self.commit_ts, self.prev_commit = xid, commit_lsn, commit_ts, prev_commit
        self.counts = TxCounts()


class PgEventFactory:
    def __init__(
        self, prefix: str, dbname: str, tx_topic: str, tx_meta: bool, binary_mode: str = "bytes"
    ) -> None:
        self.prefix, self.db, self.tx_topic, self.tx_meta = prefix, dbname, tx_topic, tx_meta
        self.message_schema = message_value_schema(binary_mode)
        self.encode_content = binary_encoder(binary_mode)

    def _source(self, tx: Tx, schema: str, table: str, lsn: int) -> dict[str, Any]:
        us = tx.commit_ts
        prev = tx.prev_commit
        return {
            "version": env.VERSION,
            "connector": "postgresql",
            "name": self.prefix,
            "ts_ms": us // 1000,
            "snapshot": "false",
            "db": self.db,
            "sequence": f'[null,"{lsn}"]' if prev is None else f'["{prev}","{lsn}"]',
            "ts_us": us,
            "ts_ns": us * 1000,
            "schema": schema,
            "table": table,
            "txId": tx.xid,
            "lsn": lsn,
            "xmin": None,
            "origin": None,
            "origin_lsn": None,
        }

    def _block(self, out: list[Record], tx: Tx, collection: str, lsn: int) -> dict[str, Any] | None:
        """Count one event; with transaction metadata, emit BEGIN first and return the block."""
        n = tx.counts.count_event(collection)
        if not self.tx_meta:
            return None
        tid = f"{tx.xid}:{lsn}"
        txmeta.begin_once(
            out, tx.counts, self.tx_topic, tid, tx.commit_ts // 1000, None, (tx.commit_lsn, 0, 0)
        )
        return txmeta.block(tid, tx.counts, n)

    def change(
        self,
        out: list[Record],
        tx: Tx,
        ts: TableSchema,
        m: Any,
        lsn: int,
        pos: tuple[int, int, int],
        skipped: set[str],
        tombstones: bool,
    ) -> None:
        t = type(m)
        if t is pgo.Insert:
            self.insert(out, tx, ts, ts.key(m.new), ts.row(m.new), lsn, pos, skipped)
            return
        if t is pgo.Update:
            after = ts.row(m.new)
            key = ts.key(m.new)
            before = ts.row(m.old) if m.old is not None else None
            if m.old is not None and ts.key_names:
                old_key = ts.key(m.old)
                if old_key != key:
                    self._key_change(out, tx, ts, lsn, pos, old_key, key, before, after, skipped, tombstones)
                    return
            op = "u"
        else:
            op, before, after = "d", ts.row(m.old), None
            key = ts.key(m.old)
        if skipped and op in skipped:
            return
        # Without transaction metadata nothing reads the per-transaction counters.
        block = self._block(out, tx, ts.collection, lsn) if self.tx_meta else None
        ns = time_ns()
        # env.change_value inlined: this runs once per row event.
        value = {
            "before": before,
            "after": after,
            "source": self._source(tx, ts.namespace, ts.table, lsn),
            "transaction": block,
            "op": op,
            "ts_ms": ns // 1_000_000,
            "ts_us": ns // 1000,
            "ts_ns": ns,
        }
        out.append(
            Record(ts.topic, key, value, ts.key_schema, ts.envelope_schema, (), ts.collection, None, pos)
        )
        if op == "d" and tombstones:
            out.append(
                Record(
                    ts.topic,
                    key,
                    None,
                    ts.key_schema,
                    ts.envelope_schema,
                    (),
                    ts.collection,
                    None,
                    (pos[0], pos[1], 1),
                )
            )

    def insert(
        self,
        out: list[Record],
        tx: Tx,
        ts: TableSchema,
        key: Any,
        after: dict[str, Any],
        lsn: int,
        pos: tuple[int, int, int],
        skipped: set[str],
    ) -> None:
        """A create event from already converted key and row payloads."""
        if skipped and "c" in skipped:
            return
        block = self._block(out, tx, ts.collection, lsn) if self.tx_meta else None
        ns = time_ns()
        value = {
            "before": None,
            "after": after,
            "source": self._source(tx, ts.namespace, ts.table, lsn),
            "transaction": block,
            "op": "c",
            "ts_ms": ns // 1_000_000,
            "ts_us": ns // 1000,
            "ts_ns": ns,
        }
        out.append(
            Record(ts.topic, key, value, ts.key_schema, ts.envelope_schema, (), ts.collection, None, pos)
        )

    def _key_change(
        self,
        out: list[Record],
        tx: Tx,
        ts: TableSchema,
        lsn: int,
        pos: tuple[int, int, int],
        old_key: Any,
        new_key: Any,
        before: Any,
        after: Any,
        skipped: set[str],
        tombstones: bool,
    ) -> None:
        c, l_, _ = pos
        key_change(
            out,
            ts,
            old_key,
            new_key,
            before,
            after,
            self._source(tx, ts.namespace, ts.table, lsn),
            lambda: self._block(out, tx, ts.collection, lsn),
            skipped=skipped,
            tombstones=tombstones,
            pos=((c, l_, 0), (c, l_, 1), (c, l_, 2)),
        )

    def truncate(
        self, out: list[Record], tx: Tx, ts: TableSchema, lsn: int, pos: tuple[int, int, int]
    ) -> None:
        block = self._block(out, tx, ts.collection, lsn)
        value = env.change_value(None, None, self._source(tx, ts.namespace, ts.table, lsn), "t", block)
        out.append(Record(ts.topic, None, value, None, ts.envelope_schema, (), ts.collection, None, pos))

    def message(
        self,
        out: list[Record],
        topic: str,
        tx: Tx | None,
        m: Any,
        lsn: int,
        pos: tuple[int, int, int],
        prev_commit: int | None,
    ) -> None:
        ns = time.time_ns()
        if tx is not None:
            src = self._source(tx, "", "", lsn)
            block = self._block(out, tx, MESSAGE_COLLECTION, lsn)
        else:
            # Non-transactional: Debezium treats the message as its own commit (sequence [lsn, lsn]).
            src = {
                "version": env.VERSION,
                "connector": "postgresql",
                "name": self.prefix,
                "ts_ms": ns // 1_000_000,
                "snapshot": "false",
                "db": self.db,
                "sequence": f'["{lsn}","{lsn}"]',
                "ts_us": ns // 1000,
                "ts_ns": ns,
                "schema": "",
                "table": "",
                "txId": None,
                "lsn": lsn,
                "xmin": None,
                "origin": None,
                "origin_lsn": None,
            }
            block = None
        value = {
            "op": "m",
            "ts_ms": ns // 1_000_000,
            "source": src,
            "transaction": block,
            "message": {"prefix": m.prefix, "content": self.encode_content(m.content)},
        }
        out.append(
            Record(topic, {"prefix": m.prefix}, value, MESSAGE_KEY, self.message_schema, (), None, None, pos)
        )

    def tx_end(self, out: list[Record], tx: Tx, commit_msg_lsn: int) -> None:
        if not (self.tx_meta and tx.counts.begun):
            return
        tid = f"{tx.xid}:{commit_msg_lsn}"
        out.append(
            txmeta.end_record(
                self.tx_topic, tid, tx.counts, tx.commit_ts // 1000, None, (tx.commit_lsn, MAX_SUB, 0)
            )
        )
