"""Debezium's transaction metadata, shared by both sources: the per-transaction event counts,
the BEGIN and END records on `<prefix>.transaction`, and the envelope's `transaction` block.

A source counts every emitted change event of a transaction (`TxCounts.count_event`); with
`provide.transaction.metadata` it emits BEGIN just before the first event (`begin_once`), puts
`block(...)` in each envelope, and emits END after the commit (`end_record`) — only for a
transaction that emitted BEGIN, as Debezium does.
"""

from __future__ import annotations

from typing import Any

from connectors.api import Record
from connectors.format.envelope import TX_KEY, TX_VALUE


class TxCounts:
    """Events of one transaction so far: in total, per table, and whether BEGIN went out."""

    __slots__ = ("begun", "count", "per_table")

    def __init__(self) -> None:
        self.count = 0
        self.per_table: dict[str, int] = {}
        self.begun = False

    def count_event(self, collection: str) -> int:
        """Count one event of `collection`; its order within that table (data_collection_order)."""
        self.count += 1
        n = self.per_table.get(collection, 0) + 1
        self.per_table[collection] = n
        return n


def block(tx_id: str, counts: TxCounts, collection_order: int) -> dict[str, Any]:
    """The envelope's `transaction` field for the event just counted."""
    return {"id": tx_id, "total_order": counts.count, "data_collection_order": collection_order}


def begin_once(
    out: list[Record], counts: TxCounts, topic: str, tx_id: str, ts_ms: int, offset: Any, pos: Any
) -> None:
    """Append the BEGIN record before the transaction's first event (once)."""
    if counts.begun:
        return
    counts.begun = True
    value = {"status": "BEGIN", "id": tx_id, "event_count": None, "data_collections": None, "ts_ms": ts_ms}
    out.append(Record(topic, {"id": tx_id}, value, TX_KEY, TX_VALUE, (), None, offset, pos))


def end_record(topic: str, tx_id: str, counts: TxCounts, ts_ms: int, offset: Any, pos: Any) -> Record:
    """The END record: the event count in total and per table."""
    value = {
        "status": "END",
        "id": tx_id,
        "event_count": counts.count,
        "data_collections": [{"data_collection": k, "event_count": v} for k, v in counts.per_table.items()],
        "ts_ms": ts_ms,
    }
    return Record(topic, {"id": tx_id}, value, TX_KEY, TX_VALUE, (), None, offset, pos)
