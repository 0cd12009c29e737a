"""The deferrable wait for a snapshot's outcome: a trigger that polls the connector's rows of
`<warehouse>/_state/notifications` until the snapshot it waits for completed or was aborted.

The Delta read is a blocking call, so it runs on a worker thread (`asyncio.to_thread`); the
triggerer's event loop only sleeps between polls.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

# Outcomes of the aggregate types a snapshot sends (Debezium's notification types).
DONE = {"COMPLETED": "success", "SKIPPED": "success", "ABORTED": "failed"}


def outcome(rows: Iterable[Mapping[str, Any]], match: Mapping[str, Any]) -> dict[str, Any] | None:
    """The event for the first notification that ends the snapshot `match` describes, or None.

    `match`: `aggregate_types` (list), `since_ms` (only notifications sent at or after it),
    `id` (the correlation id: incremental snapshots send every notification under their
    signal's id), `signal_id` (a Signal ERROR for it means the connector refused the signal)."""
    types = set(match.get("aggregate_types") or ())
    since = int(match.get("since_ms") or 0)
    want_id, signal_id = match.get("id"), match.get("signal_id")
    for r in rows:
        data = dict(r.get("additional_data") or {})
        if signal_id and r["aggregate_type"] == "Signal" and data.get("signal_id") == signal_id:
            return {"status": "failed", "type": r["type"], "message": data.get("message", str(data))}
        if r["aggregate_type"] not in types or r["type"] not in DONE:
            continue
        if (want_id and r["id"] != want_id) or (not want_id and r["timestamp"] < since):
            continue
        details = ", ".join(f"{k}={v}" for k, v in data.items())
        return {
            "status": DONE[r["type"]],
            "type": r["type"],
            "id": r["id"],
            "timestamp": r["timestamp"],
            "message": f"{r['aggregate_type']} {r['type']}" + (f" ({details})" if details else ""),
        }
    return None


class NotificationTrigger(BaseTrigger):
    def __init__(
        self, warehouse: str, connector: str, match: dict[str, Any], poll_interval: float = 2.0
    ) -> None:
        super().__init__()
        self.warehouse = warehouse
        self.connector = connector
        self.match = match
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "tidemark_airflow.triggers.NotificationTrigger",
            {
                "warehouse": self.warehouse,
                "connector": self.connector,
                "match": self.match,
                "poll_interval": self.poll_interval,
            },
        )

    def _read(self) -> list[dict[str, Any]]:
        from connectors.signals.notify import read_notifications

        return read_notifications(self.warehouse, self.connector)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            rows = await asyncio.to_thread(self._read)
            event = outcome(rows, self.match)
            if event is not None:
                yield TriggerEvent(event)
                return
            await asyncio.sleep(self.poll_interval)
