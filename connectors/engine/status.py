"""Connector health in Delta: `<warehouse>/_state/status`, one row every few seconds while a
connector runs (`tidemark run --status-interval S`; the Airflow stream DAG runs it so), so the
Airflow status page and sensors read the health without parsing logs.

A row: connector, at (UTC), state (`running`, `stopped`, `failed`), connected, position (the
offset of the last batch every sink holds, JSON), last_event_at (when the last change event was
delivered), lag_ms (Debezium's MilliSecondsBehindSource as of the last batch), events (total
change events of this run), events_per_s (since the previous row), batches, error (the message a
failed run stopped with), pid, started_at.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from connectors.engine.loop import Engine
from connectors.signals.tables import StateTable, now

log = logging.getLogger(__name__)

STATUS_SCHEMA = pa.schema(
    [
        pa.field("connector", pa.string(), nullable=False),
        pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("state", pa.string(), nullable=False),
        pa.field("connected", pa.bool_()),
        pa.field("position", pa.string()),
        pa.field("last_event_at", pa.timestamp("us", tz="UTC")),
        pa.field("lag_ms", pa.int64()),
        pa.field("events", pa.int64()),
        pa.field("events_per_s", pa.float64()),
        pa.field("batches", pa.int64()),
        pa.field("error", pa.string()),
        pa.field("pid", pa.int64()),
        pa.field("started_at", pa.timestamp("us", tz="UTC")),
    ]
)


def status_table(warehouse: str | Path) -> StateTable:
    return StateTable(warehouse, "status", STATUS_SCHEMA)


class StatusReporter:
    """Writes the engine's health every `interval_s` on a daemon thread of its own (the stream
    never waits for it); `close(error)` writes the final row. A write that fails is logged, never
    raised: health reporting must not stop a connector."""

    def __init__(self, warehouse: str | Path, connector: str, engine: Engine, interval_s: float) -> None:
        self.connector = connector
        self.engine = engine
        self.interval_s = interval_s
        self.table = status_table(warehouse)
        self.started_at = now()
        self._last: tuple[float, float] = (time.monotonic(), 0.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tidemark-status", daemon=True)

    def start(self) -> StatusReporter:
        self._thread.start()
        return self

    def _sample(self, name: str) -> float:
        return self.engine.metrics.registry.get_sample_value(name) or 0.0

    def row(self, state: str, error: str | None = None) -> dict[str, Any]:
        events = self._sample("tidemark_total_number_of_events_seen_total")
        t = time.monotonic()
        t0, e0 = self._last
        self._last = (t, events)
        last_event = self._sample("tidemark_last_event_timestamp_seconds")
        offset = self.engine.stats.last_offset
        return {
            "connector": self.connector,
            "at": now(),
            "state": state,
            "connected": bool(self._sample("tidemark_connected")),
            "position": None if offset is None else orjson.dumps(offset, default=str).decode(),
            "last_event_at": datetime.fromtimestamp(last_event, UTC) if last_event else None,
            "lag_ms": int(self._sample("tidemark_milliseconds_behind_source")),
            "events": int(events),
            "events_per_s": (events - e0) / (t - t0) if t > t0 else 0.0,
            "batches": self.engine.stats.batches,
            "error": error,
            "pid": os.getpid(),
            "started_at": self.started_at,
        }

    def _write(self, state: str, error: str | None = None) -> None:
        try:
            self.table.append([self.row(state, error)])
        except Exception as e:  # noqa: BLE001 - see the class docstring
            log.warning("status table %s: %s", self.table.uri, e)

    def _loop(self) -> None:
        self._write("running")
        while not self._stop.wait(self.interval_s):
            self._write("running")

    def close(self, error: BaseException | None = None) -> None:
        """Stop the thread and write the final row: `failed` with the error's message, else `stopped`."""
        self._stop.set()
        self._thread.join(timeout=30)
        message = getattr(error, "message", None) or (str(error) if error is not None else None)
        self._write("failed" if error is not None else "stopped", message)


def read_status(warehouse: str | Path, connector: str, since: datetime | None = None) -> list[dict[str, Any]]:
    """The connector's status rows (newer than `since` when given), oldest first."""
    dt = status_table(warehouse).table()
    if dt is None:
        return []
    filters: list[tuple[str, str, Any]] = [("connector", "=", connector)]
    if since is not None:
        filters.append(("at", ">", since))
    rows: list[dict[str, Any]] = dt.to_pyarrow_table(filters=filters).to_pylist()
    return sorted(rows, key=lambda r: r["at"])
