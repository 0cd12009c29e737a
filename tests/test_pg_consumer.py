"""The per-message consumer of the PostgreSQL source (consumer.py) on pgoutput payloads built here:
handlers by kind byte, batch offsets, size cuts inside a transaction, the replay after a restart,
and one clear error for a payload it cannot read. The whole stream, against a real server, is
tests/test_pg_stream.py's and the conformance test's."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from test_fastpaths import _table

from connectors.format.tableschema import TableSchema
from connectors.settings.filters import NameFilter
from connectors.sources.postgres.consumer import MessageConsumer
from connectors.sources.postgres.events import MAX_SUB, PgEventFactory
from connectors.sources.postgres.pgoutput import PG_EPOCH_OFFSET_US, PgOutputError, decode

OID, OTHER_OID = 16384, 16385
XID = 770


class _Tables:
    """The table cache's two calls: one captured relation (test_fastpaths' table: id, name, a
    column left out, ...), every other one filtered out; a Relation message brings the next of
    `later` table versions, as a changed table does."""

    def __init__(self, *later: TableSchema) -> None:
        self.ts = _table()
        self.later = list(later)
        self.relations: list[Any] = []

    def get(self, oid: int) -> TableSchema | None:
        return self.ts if oid == OID else None

    def relation(self, rel: Any) -> None:
        self.relations.append(rel)
        if self.later:
            self.ts = self.later.pop(0)


def _consumer(
    max_batch: int = 100, start_key: tuple[int, int, int] = (0, 0, 0), **kw: Any
) -> MessageConsumer:
    return MessageConsumer(
        kw.pop("tables", None) or _Tables(),
        PgEventFactory("srv", "db", "srv.transaction", kw.pop("tx_meta", True)),
        max_batch=max_batch,
        skipped=set(),
        tombstones=True,
        message_filter=NameFilter([], []),
        message_topic="srv.message",
        start_key=start_key,
        flush_lsn=0,
        order_commit=0,
        seq_commit=None,
    )


def _tuple(*values: str | None) -> bytes:
    out = [struct.pack("!H", len(values))]
    for v in values:
        out.append(b"n" if v is None else b"t" + struct.pack("!I", len(v.encode())) + v.encode())
    return b"".join(out)


def relation(oid: int) -> bytes:
    col = b"\x01id\x00" + struct.pack("!Ii", 23, -1)  # key column, int4, no typmod
    return b"R" + struct.pack("!I", oid) + b"public\x00t\x00d" + struct.pack("!H", 1) + col


def begin(commit_lsn: int) -> bytes:
    return b"B" + struct.pack("!QqI", commit_lsn, 1_000_000, XID)


def commit(commit_lsn: int, end_lsn: int) -> bytes:
    return b"C" + struct.pack("!BQQq", 0, commit_lsn, end_lsn, 2_000_000)


def _row(id_: str, name: str | None) -> bytes:
    return _tuple(id_, name, None, "3", "x", None)


def insert(oid: int, id_: str, name: str | None) -> bytes:
    return b"I" + struct.pack("!I", oid) + b"N" + _row(id_, name)


def update(oid: int, id_: str, name: str | None) -> bytes:
    return b"U" + struct.pack("!I", oid) + b"N" + _row(id_, name)


def _feed(c: MessageConsumer, msgs: list[tuple[int, bytes]]) -> list[bool | None]:
    on = c.handlers()
    return [on[p[0]](lsn, p) for lsn, p in msgs]


def _data(c: MessageConsumer) -> list[tuple[str, Any, Any]]:
    return [(r.value["op"], r.key, r.pos) for r in c.pending if r.value and "op" in r.value]


def test_one_row_transactions_and_their_offset() -> None:
    c = _consumer()
    cuts = _feed(
        c,
        [
            (90, relation(OID)),
            (100, begin(150)),
            (110, insert(OID, "1", "a")),
            (150, commit(150, 160)),
            (170, begin(200)),
            (180, update(OID, "1", "b")),
            (190, insert(OTHER_OID, "9", None)),  # a relation the filters leave out
            (200, commit(200, 210)),
        ],
    )
    assert not any(cuts) and c.tx is None
    assert [(r.oid, r.name, r.columns[0].name) for r in c.tables.relations] == [(OID, "t", "id")]  # type: ignore[attr-defined]
    assert _data(c) == [("c", {"id": 1}, (150, 110, 0)), ("u", {"id": 1}, (200, 180, 0))]
    statuses = [r.value["status"] for r in c.pending if "status" in r.value]
    assert statuses == ["BEGIN", "END", "BEGIN", "END"]  # provide.transaction.metadata
    b = c.cut(False)
    assert b.offset == {
        "lsn_flush": 210,
        "lsn_commit": 200,
        "lsn": 200,
        "sub": MAX_SUB,
        "seq_commit": 200,  # the COMMIT message's LSN: Debezium's lastCommitLsn
        "ts_usec": (2_000_000 + PG_EPOCH_OFFSET_US) // 1000 * 1000,
        "complete": True,
    }
    assert b.extra == {
        "transactions": 2,
        "source_ts_ms": (2_000_000 + PG_EPOCH_OFFSET_US) // 1000,
        "more": False,
        "filtered": 1,
    }
    assert c.pending == [] and c.yielded_flush == 210


def test_fused_insert_equals_the_general_path() -> None:
    fused, general = _consumer(), _consumer()
    payload = insert(OID, "7", "ä" * 40)
    _feed(fused, [(100, begin(150)), (110, payload)])
    _feed(general, [(100, begin(150))])
    general._change(110, decode(payload))
    strip = [{k: v for k, v in r.value.items() if not k.startswith("ts_")} for r in fused.pending]
    assert strip == [{k: v for k, v in r.value.items() if not k.startswith("ts_")} for r in general.pending]
    assert [(r.key, r.pos) for r in fused.pending] == [(r.key, r.pos) for r in general.pending]


def test_a_relation_message_brings_the_new_table_version() -> None:
    by_name = _table(**{"message.key.columns": r"public\.t:name"})
    c = _consumer(tables=_Tables(by_name), tx_meta=False)
    _feed(
        c,
        [
            (100, begin(300)),
            (110, insert(OID, "1", "a")),  # compiles and keeps the fused decoder of the version
            (120, relation(OID)),
            (130, insert(OID, "2", "b")),
            (300, commit(300, 310)),
        ],
    )
    assert [r.key for r in c.pending] == [{"id": 1}, {"name": "b"}]


def test_full_batch_is_cut_inside_the_transaction() -> None:
    c = _consumer(max_batch=2, tx_meta=False)
    on = c.handlers()
    assert not on[66](100, begin(300))
    assert not on[73](110, insert(OID, "1", None))
    assert on[73](120, insert(OID, "2", None))  # full
    b = c.cut(c.tx is not None, more=True)
    assert [r.key for r in b.records] == [{"id": 1}, {"id": 2}]
    assert b.offset["complete"] is False and b.offset["txId"] == XID
    assert (b.offset["lsn_commit"], b.offset["lsn"], b.offset["sub"]) == (300, 120, 0)
    assert b.extra["more"] is True and c.more_cut
    assert not on[73](130, insert(OID, "3", None))
    assert not on[67](300, commit(300, 310))
    assert [r.key for r in c.pending] == [{"id": 3}] and c.flush_lsn == 310


def test_restart_inside_a_transaction_emits_only_what_follows() -> None:
    # The last batch before the restart ended after the first insert: the slot re-sends the whole
    # transaction, the consumer rebuilds its counters and emits from the second insert on.
    c = _consumer(start_key=(300, 110, 0))
    _feed(
        c,
        [
            (100, begin(300)),
            (110, insert(OID, "1", None)),
            (120, insert(OID, "2", None)),
            (300, commit(300, 310)),
        ],
    )
    assert [(op, key) for op, key, _ in _data(c)] == [("c", {"id": 2})]
    end = c.pending[-1].value
    assert end["status"] == "END" and end["event_count"] == 2  # counts the replayed insert too
    assert c.pending[0].value["transaction"]["total_order"] == 2


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"B\x00\x01", "cannot decode 'B' message of 3 bytes"),
        (b"C\x00", "cannot decode 'C' message of 2 bytes"),
        (b"U" + struct.pack("!I", OID) + b"X", "Update without new tuple"),
        (b"S\x00\x00\x00\x01\x01", "Stream Start message, which Tidemark does not request"),
        (b"Z", "unknown message type 'Z'"),
    ],
)
def test_a_payload_it_cannot_read_is_one_clear_error(payload: bytes, expected: str) -> None:
    c = _consumer()
    on = c.handlers()
    on[66](100, begin(150))
    with pytest.raises(PgOutputError, match=expected):
        on[payload[0]](110, payload)
