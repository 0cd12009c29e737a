"""Build Debezium PostgreSQL change records (data, truncate, logical message, transaction BEGIN/END).

Shapes follow records captured from Debezium 3.6 (tests/golden/postgres).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import orjson

from connectors import envelope as env
from connectors.api import Record
from connectors.filters import b64
from connectors.postgres import pgoutput as pgo
from connectors.schema import prim, struct

if TYPE_CHECKING:
    from connectors.tableschema import TableSchema

MESSAGE_KEY = struct("io.debezium.connector.postgresql.MessageKey", [("prefix", prim("string", optional=True))])
MESSAGE_BLOCK = struct("io.debezium.connector.postgresql.Message", [
    ("prefix", prim("string", optional=True)),
    ("content", prim("bytes", optional=True)),
])
MESSAGE_VALUE = struct("io.debezium.connector.postgresql.MessageValue", [
    ("op", prim("string")),
    ("ts_ms", prim("int64", optional=True)),
    ("ts_us", prim("int64", optional=True)),
    ("ts_ns", prim("int64", optional=True)),
    ("source", env.PG_SOURCE),
    ("message", MESSAGE_BLOCK),
    ("transaction", env.TRANSACTION_BLOCK),
])

NEWKEY = "__debezium.newkey"
OLDKEY = "__debezium.oldkey"


class PgEventFactory:
    def __init__(self, prefix: str, dbname: str) -> None:
        self.prefix, self.db = prefix, dbname

    def _source(self, tx: Any, schema: str, table: str, lsn: int) -> dict[str, Any]:
        us = tx.commit_ts
        return {"version": env.VERSION, "connector": "postgresql", "name": self.prefix, "ts_ms": us // 1000,
                "snapshot": "false", "db": self.db, "sequence": f'["{tx.prev_commit}","{lsn}"]',
                "ts_us": us, "ts_ns": us * 1000, "schema": schema, "table": table, "txId": tx.xid,
                "lsn": lsn, "xmin": None}

    def change(self, out: list[Record], tx: Any, ts: TableSchema, m: Any, lsn: int, pos: tuple[int, int, int],
               skipped: set[str], tombstones: bool, tx_meta: bool) -> None:
        t = type(m)
        if t is pgo.Insert:
            op, before, after = "c", None, ts.row(m.new)
            key = ts.key(m.new)
        elif t is pgo.Update:
            after = ts.row(m.new)
            key = ts.key(m.new)
            before = ts.row(m.old) if m.old is not None else None
            if m.old is not None and ts.key_names:
                old_key = ts.key(m.old)
                if old_key != key:
                    self._key_change(out, tx, ts, m, lsn, pos, old_key, key, before, after, skipped,
                                     tombstones, tx_meta)
                    return
            op = "u"
        else:
            op, before, after = "d", ts.row(m.old), None
            key = ts.key(m.old)
        if op in skipped:
            return
        src = self._source(tx, ts.namespace, ts.table, lsn)
        value = self._value(before, after, src, op, tx, ts.collection, tx_meta)
        out.append(Record(ts.topic, key, value, ts.key_schema, ts.envelope_schema, (), ts.collection, None, pos))
        if op == "d" and tombstones:
            out.append(Record(ts.topic, key, None, ts.key_schema, ts.envelope_schema, (), ts.collection, None,
                              (pos[0], pos[1], 1)))

    def _key_change(self, out: list[Record], tx: Any, ts: TableSchema, m: Any, lsn: int, pos: tuple[int, int, int],
                    old_key: Any, new_key: Any, before: Any, after: Any, skipped: set[str], tombstones: bool,
                    tx_meta: bool) -> None:
        c, l_, _ = pos
        if "d" not in skipped:
            src = self._source(tx, ts.namespace, ts.table, lsn)
            value = self._value(before, None, src, "d", tx, ts.collection, tx_meta)
            out.append(Record(ts.topic, old_key, value, ts.key_schema, ts.envelope_schema,
                              ((NEWKEY, orjson.dumps(new_key)),), ts.collection, None, (c, l_, 0)))
            if tombstones:
                out.append(Record(ts.topic, old_key, None, ts.key_schema, ts.envelope_schema, (), ts.collection,
                                  None, (c, l_, 1)))
        if "c" not in skipped:
            src = self._source(tx, ts.namespace, ts.table, lsn)
            value = self._value(None, after, src, "c", tx, ts.collection, tx_meta)
            out.append(Record(ts.topic, new_key, value, ts.key_schema, ts.envelope_schema,
                              ((OLDKEY, orjson.dumps(old_key)),), ts.collection, None, (c, l_, 2)))

    def _value(self, before: Any, after: Any, src: dict[str, Any], op: str, tx: Any, collection: str,
               tx_meta: bool) -> dict[str, Any]:
        ns = time.time_ns()
        block = None
        if tx_meta:
            total, per = tx.seen(collection, 1)
            block = {"id": tx.id, "total_order": total, "data_collection_order": per}
        else:
            tx.count += 1
        return {"before": before, "after": after, "source": src, "transaction": block, "op": op,
                "ts_ms": ns // 1_000_000, "ts_us": ns // 1000, "ts_ns": ns}

    def truncate(self, tx: Any, ts: TableSchema, lsn: int, pos: tuple[int, int, int], tx_meta: bool) -> Record:
        src = self._source(tx, ts.namespace, ts.table, lsn)
        value = self._value(None, None, src, "t", tx, ts.collection, tx_meta)
        return Record(ts.topic, None, value, None, ts.envelope_schema, (), ts.collection, None, pos)

    def message(self, topic: str, tx: Any, m: Any, lsn: int, pos: tuple[int, int, int], tx_meta: bool) -> Record:
        ns = time.time_ns()
        if tx is not None:
            src = self._source(tx, "", "", lsn)
        else:
            src = {"version": env.VERSION, "connector": "postgresql", "name": self.prefix, "ts_ms": ns // 1_000_000,
                   "snapshot": "false", "db": self.db, "sequence": f'[null,"{lsn}"]', "ts_us": ns // 1000,
                   "ts_ns": ns, "schema": "", "table": "", "txId": None, "lsn": lsn, "xmin": None}
        block = None
        if tx is not None and tx_meta:
            total, per = tx.seen("", 1)
            block = {"id": tx.id, "total_order": total, "data_collection_order": per}
        value = {"op": "m", "ts_ms": ns // 1_000_000, "ts_us": ns // 1000, "ts_ns": ns, "source": src,
                 "message": {"prefix": m.prefix, "content": b64(m.content)}, "transaction": block}
        return Record(topic, {"prefix": m.prefix}, value, MESSAGE_KEY, MESSAGE_VALUE, (), None, None, pos)

    def tx_begin(self, topic: str, tx: Any) -> Record:
        value = {"status": "BEGIN", "id": tx.id, "event_count": None, "data_collections": None,
                 "ts_ms": tx.commit_ts // 1000}
        return Record(topic, {"id": tx.id}, value, env.TX_KEY, env.TX_VALUE, (), None, None, (tx.commit_lsn, 0, 0))

    def tx_end(self, topic: str, tx: Any) -> Record:
        value = {"status": "END", "id": tx.id, "event_count": tx.count,
                 "data_collections": [{"data_collection": k, "event_count": v} for k, v in tx.per_table.items()],
                 "ts_ms": tx.commit_ts // 1000}
        return Record(topic, {"id": tx.id}, value, env.TX_KEY, env.TX_VALUE, (), None, None,
                      (tx.commit_lsn, (1 << 64) - 2, 0))
