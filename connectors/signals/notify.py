"""Notifications: Debezium's notification records on the channels of `notification.enabled.channels`.

A record is `{id, aggregate_type, type, additional_data (string → string), timestamp (epoch ms)}`
(Debezium's `Notification`). Channels:

- `log`: one INFO line, `[Notification Service] {aggregateType='...', type='...', additionalData={...}}`
  as Debezium's LogNotificationChannel writes it;
- `sink`: a record on the Kafka topic `notification.sink.topic.name`, key and value as Debezium's
  SinkNotificationChannel builds them (`io.debezium.connector.common.NotificationKey` /
  `...Notification` schemas, version 1), produced through the Kafka sink's client;
- `delta`: a row of `<warehouse>/_state/notifications` (Tidemark's; the Airflow pages read it).

`Notifier.initial_snapshot`, `.incremental_snapshot` and `.signals` are the calls the snapshot code
and the signal processor make. A notification that cannot be delivered is logged, never raised:
it must not stop a stream or a snapshot.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from connectors.api import Batch, Record
from connectors.format.schema import Schema, prim, struct
from connectors.settings.config import ConnectorConfig
from connectors.signals.settings import notification_settings
from connectors.signals.tables import NOTIFICATIONS_SCHEMA, StateTable, now

log = logging.getLogger(__name__)

INITIAL_SNAPSHOT = "Initial Snapshot"
INCREMENTAL_SNAPSHOT = "Incremental Snapshot"
SIGNAL = "Signal"  # Tidemark's: what became of a signal that could not be carried out
LIST_DELIMITER = ","


@dataclass(frozen=True, slots=True)
class Notification:
    id: str
    aggregate_type: str
    type: str
    additional_data: Mapping[str, str] = field(default_factory=dict)
    timestamp: int = 0  # epoch ms

    def __str__(self) -> str:  # Debezium's Notification.toString (the log channel's text)
        data = ", ".join(f"{k}={v}" for k, v in self.additional_data.items())
        return f"{{aggregateType='{self.aggregate_type}', type='{self.type}', additionalData={{{data}}}}}"


class NotificationChannel(Protocol):
    name: str

    def send(self, notification: Notification) -> None: ...

    def close(self) -> None: ...


class LogChannel:
    name = "log"

    def send(self, notification: Notification) -> None:
        log.info("[Notification Service] %s", notification)

    def close(self) -> None:
        pass


NOTIFICATION_KEY_SCHEMA: Schema = struct(
    "io.debezium.connector.common.NotificationKey", [("id", prim("string"))], version=1
)
NOTIFICATION_VALUE_SCHEMA: Schema = struct(
    "io.debezium.connector.common.Notification",
    [
        ("id", prim("string")),
        ("type", prim("string")),
        ("aggregate_type", prim("string")),
        ("additional_data", Schema("map", True, keys=prim("string"), values=prim("string"))),
        ("timestamp", prim("int64")),
    ],
    version=1,
)


def sink_record(topic: str, n: Notification) -> Record:
    """The Kafka record Debezium's SinkNotificationChannel emits for `n`."""
    return Record(
        topic,
        {"id": n.id},
        {
            "id": n.id,
            "type": n.type,
            "aggregate_type": n.aggregate_type,
            "additional_data": dict(n.additional_data),
            "timestamp": n.timestamp,
        },
        NOTIFICATION_KEY_SCHEMA,
        NOTIFICATION_VALUE_SCHEMA,
    )


class SinkChannel:
    """Notifications to a Kafka topic, through a Kafka sink of their own (the stream's sink
    belongs to the engine's writer thread)."""

    name = "sink"

    def __init__(self, cfg: ConnectorConfig, topic: str) -> None:
        from connectors.sinks.kafka import KafkaSink

        self.topic = topic
        self._sink = KafkaSink.from_config(cfg)

    def send(self, notification: Notification) -> None:
        self._sink.write(Batch([sink_record(self.topic, notification)], {}))

    def close(self) -> None:
        self._sink.close()


class DeltaChannel:
    name = "delta"

    def __init__(self, warehouse: Any, connector: str) -> None:
        self.connector = connector
        self.table = StateTable(warehouse, "notifications", NOTIFICATIONS_SCHEMA)

    def send(self, notification: Notification) -> None:
        n = notification
        self.table.append(
            [
                {
                    "connector": self.connector,
                    "id": n.id,
                    "aggregate_type": n.aggregate_type,
                    "type": n.type,
                    "additional_data": list(n.additional_data.items()),
                    "timestamp": n.timestamp,
                    "at": now(),
                }
            ]
        )

    def close(self) -> None:
        pass


def read_notifications(warehouse: Any, connector: str) -> list[dict[str, Any]]:
    """The connector's rows of `<warehouse>/_state/notifications`, oldest first, with
    `additional_data` as a dict."""
    rows = StateTable(warehouse, "notifications", NOTIFICATIONS_SCHEMA).rows(connector)
    for r in rows:
        r["additional_data"] = dict(r["additional_data"] or [])
    return sorted(rows, key=lambda r: (r["timestamp"], r["at"]))


class Notifier:
    """Sends notifications to every enabled channel. `connector_name` is Debezium's
    `connector_name` entry (the logical name, `topic.prefix`)."""

    def __init__(self, connector_name: str, channels: Sequence[NotificationChannel] = ()) -> None:
        self.connector_name = connector_name
        self.channels = list(channels)
        self.initial_snapshot = InitialSnapshotNotifications(self)
        self.incremental_snapshot = IncrementalSnapshotNotifications(self)
        self.signals = SignalNotifications(self)

    @classmethod
    def from_config(cls, cfg: ConnectorConfig) -> Notifier:
        s = notification_settings(cfg)
        channels: list[NotificationChannel] = []
        for name in s.channels:
            if name == "log":
                channels.append(LogChannel())
            elif name == "sink":
                assert s.sink_topic is not None  # notification_settings checked it
                channels.append(SinkChannel(cfg, s.sink_topic))
            else:
                channels.append(DeltaChannel(cfg.warehouse, cfg.name))
        return cls(cfg.topic_prefix, channels)

    @property
    def enabled(self) -> bool:
        return bool(self.channels)

    def notify(
        self, aggregate_type: str, kind: str, data: Mapping[str, str] | None = None, *, id: str | None = None
    ) -> Notification:
        full = {**(data or {}), "connector_name": self.connector_name}
        n = Notification(id or str(uuid.uuid4()), aggregate_type, kind, full, int(time.time() * 1000))
        for ch in self.channels:
            try:
                ch.send(n)
            except Exception as e:  # noqa: BLE001 - a notification never stops the work it reports on
                log.warning("notification channel %s: could not send %s: %s", ch.name, n, e)
        return n

    def close(self) -> None:
        for ch in self.channels:
            try:
                ch.close()
            except Exception as e:  # noqa: BLE001
                log.warning("closing notification channel %s: %s", ch.name, e)


def _joined(tables: Iterable[str] | None) -> dict[str, str]:
    return {} if tables is None else {"data_collections": LIST_DELIMITER.join(tables)}


class InitialSnapshotNotifications:
    """Debezium's InitialSnapshotNotificationService: aggregate type "Initial Snapshot"."""

    def __init__(self, notifier: Notifier) -> None:
        self._n = notifier

    def started(self) -> Notification:
        return self._n.notify(INITIAL_SNAPSHOT, "STARTED")

    def in_progress(
        self, current_collection: str, data_collections: Iterable[str] | None = None
    ) -> Notification:
        data = {"current_collection_in_progress": current_collection, **_joined(data_collections)}
        return self._n.notify(INITIAL_SNAPSHOT, "IN_PROGRESS", data)

    def table_scan_completed(
        self,
        table: str,
        rows: int | None = None,
        status: str = "SUCCEEDED",
        data_collections: Iterable[str] | None = None,
    ) -> Notification:
        """`status`: SUCCEEDED, or SQL_EXCEPTION for a table whose read failed."""
        data = {"scanned_collection": table, **_joined(data_collections)}
        if rows is not None:
            data["total_rows_scanned"] = str(rows)
        data["status"] = status
        return self._n.notify(INITIAL_SNAPSHOT, "TABLE_SCAN_COMPLETED", data)

    def completed(self) -> Notification:
        return self._n.notify(INITIAL_SNAPSHOT, "COMPLETED")

    def aborted(self) -> Notification:
        return self._n.notify(INITIAL_SNAPSHOT, "ABORTED")

    def skipped(self) -> Notification:
        return self._n.notify(INITIAL_SNAPSHOT, "SKIPPED")


class IncrementalSnapshotNotifications:
    """Debezium's IncrementalSnapshotNotificationService: aggregate type "Incremental Snapshot";
    every notification of one snapshot carries its correlation id (the signal's id) as its id."""

    def __init__(self, notifier: Notifier) -> None:
        self._n = notifier

    def _send(self, kind: str, correlation_id: str | None, data: Mapping[str, str]) -> Notification:
        return self._n.notify(INCREMENTAL_SNAPSHOT, kind, data, id=correlation_id)

    def started(self, correlation_id: str | None, data_collections: Iterable[str]) -> Notification:
        return self._send("STARTED", correlation_id, _joined(data_collections))

    def paused(self, correlation_id: str | None, data_collections: Iterable[str]) -> Notification:
        return self._send("PAUSED", correlation_id, _joined(data_collections))

    def resumed(self, correlation_id: str | None, data_collections: Iterable[str]) -> Notification:
        return self._send("RESUMED", correlation_id, _joined(data_collections))

    def in_progress(
        self,
        correlation_id: str | None,
        data_collections: Iterable[str],
        current_collection: str,
        maximum_key: Sequence[Any] | None,
        last_processed_key: Sequence[Any],
    ) -> Notification:
        data = {
            **_joined(data_collections),
            "current_collection_in_progress": current_collection,
            # Debezium's texts: key parts joined by ",", a missing maximum key as "<null>" in quotes
            "maximum_key": _key_text(maximum_key) if maximum_key is not None else '"<null>"',
            "last_processed_key": _key_text(last_processed_key),
        }
        return self._send("IN_PROGRESS", correlation_id, data)

    def table_scan_completed(
        self,
        correlation_id: str | None,
        data_collections: Iterable[str],
        scanned_collection: str,
        total_rows_scanned: int,
        status: str = "SUCCEEDED",
    ) -> Notification:
        """`status`: EMPTY, NO_PRIMARY_KEY, SKIPPED, SQL_EXCEPTION, SUCCEEDED or UNKNOWN_SCHEMA."""
        data = {
            **_joined(data_collections),
            "scanned_collection": scanned_collection,
            "total_rows_scanned": str(total_rows_scanned),
            "status": status,
        }
        return self._send("TABLE_SCAN_COMPLETED", correlation_id, data)

    def completed(self, correlation_id: str | None) -> Notification:
        return self._send("COMPLETED", correlation_id, {})

    def aborted(
        self, correlation_id: str | None, data_collections: Iterable[str] | None = None
    ) -> Notification:
        return self._send("ABORTED", correlation_id, _joined(data_collections))


def _key_text(key: Sequence[Any]) -> str:
    return ",".join("<null>" if k is None else str(k) for k in key)


class SignalNotifications:
    """Tidemark's own aggregate type "Signal": a signal that was refused or failed (Debezium only
    logs those). additional_data: signal_id, signal_type, channel, message."""

    def __init__(self, notifier: Notifier) -> None:
        self._n = notifier

    def error(self, signal_id: str, signal_type: str, channel: str, message: str) -> Notification:
        data = {"signal_id": signal_id, "signal_type": signal_type, "channel": channel, "message": message}
        return self._n.notify(SIGNAL, "ERROR", data)
