"""The Delta tables of signals and notifications under `<warehouse>/_state/`, written with
`deltalake` like the offsets table, all partitioned by connector:

- `signals`: the Delta signal channel's input. Anyone may append a row (`tidemark signal`, the
  Airflow UI, a notebook): id, type, data (JSON text), connector (which connector it is for),
  created_at. Rows are never changed; what was done with them is in the journal.
- `signal_log`: the journal: per connector, one `received` row when a signal is accepted from a
  channel (before the channel forgets it: a file is emptied, a Kafka offset passed, a source
  batch acknowledged) and one `processed` row with its outcome once it has been acted on.
- `notifications`: Debezium's notification records (id, aggregate_type, type, additional_data,
  timestamp), for the Airflow pages and anyone else.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from connectors.state.storage import storage_error

# A short log: these tables take one small commit per signal or notification.
TABLE_CONFIGURATION = {"delta.logRetentionDuration": "interval 7 days"}

SIGNALS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("data", pa.string()),
        pa.field("connector", pa.string(), nullable=False),
        pa.field("created_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
JOURNAL_SCHEMA = pa.schema(
    [
        pa.field("connector", pa.string(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),  # received | processed
        pa.field("channel", pa.string(), nullable=False),
        pa.field("id", pa.string()),
        pa.field("type", pa.string()),
        pa.field("data", pa.string()),
        pa.field("channel_offset", pa.int64()),
        pa.field("outcome", pa.string()),  # processed rows: ok | error
        pa.field("message", pa.string()),
        pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
NOTIFICATIONS_SCHEMA = pa.schema(
    [
        pa.field("connector", pa.string(), nullable=False),
        pa.field("id", pa.string(), nullable=False),
        pa.field("aggregate_type", pa.string(), nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("additional_data", pa.map_(pa.string(), pa.string())),
        pa.field("timestamp", pa.int64(), nullable=False),  # epoch ms, as Debezium's record
        pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


def state_uri(warehouse: str | Path, name: str) -> str:
    return f"{str(warehouse).rstrip('/')}/_state/{name}"


class StateTable:
    """One append-only Delta table of connector rows. Appends from several threads of a process
    are serialized; other processes append concurrently (delta-rs retries blind appends)."""

    def __init__(
        self,
        warehouse: str | Path,
        name: str,
        schema: pa.Schema,
        *,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        self.uri = state_uri(warehouse, name)
        self.name = name
        self.schema = schema
        self._storage = dict(storage_options) if storage_options else None
        self._dt: Any = None
        self._lock = threading.Lock()

    def table(self) -> Any:
        """The DeltaTable at its newest version, or None before the first row."""
        from deltalake import DeltaTable

        if self._dt is None:
            if not DeltaTable.is_deltatable(self.uri, storage_options=self._storage):
                return None
            self._dt = DeltaTable(self.uri, storage_options=self._storage)
        else:
            self._dt.update_incremental()
        return self._dt

    def version(self) -> int | None:
        try:
            dt = self.table()
        except Exception as e:  # noqa: BLE001 - reported as a storage fault
            raise storage_error(e, self.uri, f"the {self.name} table") from None
        return None if dt is None else int(dt.version())

    def append(self, rows: Sequence[Mapping[str, Any]]) -> None:
        from deltalake import write_deltalake
        from deltalake.exceptions import DeltaError

        if not rows:
            return
        data = pa.Table.from_pylist([dict(r) for r in rows], schema=self.schema)
        with self._lock:
            try:
                dt = self.table()
                if dt is None:
                    write_deltalake(
                        self.uri,
                        data,
                        mode="append",
                        partition_by=["connector"],
                        name=f"tidemark {self.name}",
                        storage_options=self._storage,
                        configuration=TABLE_CONFIGURATION,
                    )
                else:
                    write_deltalake(dt, data, mode="append", partition_by=["connector"])
            except (DeltaError, OSError) as e:
                raise storage_error(e, self.uri, f"the {self.name} table") from None

    def rows(self, connector: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
        dt = self.table()
        if dt is None:
            return []
        t = dt.to_pyarrow_table(columns=columns, filters=[("connector", "=", connector)])
        return t.to_pylist()


def now() -> datetime:
    return datetime.now(UTC)


def signals_table(warehouse: str | Path) -> StateTable:
    return StateTable(warehouse, "signals", SIGNALS_SCHEMA)


def send_delta_signal(
    warehouse: str | Path, connector: str, kind: str, data: Mapping[str, Any] | None
) -> str:
    """Append one signal for `connector` to `<warehouse>/_state/signals`; returns its new id."""
    import orjson

    sid = str(uuid.uuid4())
    signals_table(warehouse).append(
        [
            {
                "id": sid,
                "type": kind,
                "data": orjson.dumps(data).decode() if data is not None else None,
                "connector": connector,
                "created_at": now(),
            }
        ]
    )
    return sid
