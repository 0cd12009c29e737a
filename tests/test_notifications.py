"""Notifications on every channel: the Kafka record Debezium's SinkNotificationChannel emits (on
the tansu broker, through the Kafka sink's client), the Delta notifications table and the log
line, for the initial- and incremental-snapshot calls the snapshot code makes."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import orjson
import pytest
from cfgutil import config

from connectors.signals.notify import Notifier, read_notifications

KEY_SCHEMA = {
    "type": "struct",
    "fields": [{"type": "string", "optional": False, "field": "id"}],
    "optional": False,
    "name": "io.debezium.connector.common.NotificationKey",
    "version": 1,
}
VALUE_SCHEMA = {
    "type": "struct",
    "fields": [
        {"type": "string", "optional": False, "field": "id"},
        {"type": "string", "optional": False, "field": "type"},
        {"type": "string", "optional": False, "field": "aggregate_type"},
        {
            "type": "map",
            "keys": {"type": "string", "optional": False},
            "values": {"type": "string", "optional": False},
            "optional": True,
            "field": "additional_data",
        },
        {"type": "int64", "optional": False, "field": "timestamp"},
    ],
    "optional": False,
    "name": "io.debezium.connector.common.Notification",
    "version": 1,
}


def test_notifications_on_every_channel(
    kafka: Any, unique_name: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    topic = unique_name("notifications")
    cfg = config(
        "postgres",
        {
            "topic.prefix": "shop",
            "debezium.sink.kafka.producer.bootstrap.servers": kafka.bootstrap,
            "debezium.sink.kafka.topic.creation.partitions": "1",  # whole-topic order
            "notification.enabled.channels": "log,sink,delta",
            "notification.sink.topic.name": topic,
            "tidemark.warehouse": str(tmp_path),
        },
    )
    caplog.set_level(logging.INFO, logger="connectors.signals.notify")
    n = Notifier.from_config(cfg)
    try:
        tables = ["public.a", "public.b"]
        sent = [
            n.initial_snapshot.started(),
            n.initial_snapshot.in_progress("public.a", tables),
            n.initial_snapshot.table_scan_completed("public.a", 10, data_collections=tables),
            n.initial_snapshot.completed(),
            n.incremental_snapshot.in_progress("sig-1", tables, "public.b", None, [5, None]),
            n.incremental_snapshot.table_scan_completed("sig-1", tables, "public.b", 0, "EMPTY"),
        ]
    finally:
        n.close()
    assert sent[4].id == sent[5].id == "sig-1"  # an incremental snapshot's correlation id
    assert sent[4].additional_data == {
        "data_collections": "public.a,public.b",
        "current_collection_in_progress": "public.b",
        "maximum_key": '"<null>"',
        "last_processed_key": "5,<null>",
        "connector_name": "shop",
    }

    records = kafka.read_records(topic, min_count=len(sent))
    assert len(records) == len(sent)
    for rec, note in zip(records, sent, strict=True):
        assert orjson.loads(rec.key) == {"schema": KEY_SCHEMA, "payload": {"id": note.id}}
        value = orjson.loads(rec.value)
        assert value["schema"] == VALUE_SCHEMA
        assert value["payload"] == {
            "id": note.id,
            "type": note.type,
            "aggregate_type": note.aggregate_type,
            "additional_data": dict(note.additional_data),
            "timestamp": note.timestamp,
        }
    assert [orjson.loads(r.value)["payload"]["type"] for r in records[:4]] == [
        "STARTED",
        "IN_PROGRESS",
        "TABLE_SCAN_COMPLETED",
        "COMPLETED",
    ]
    assert orjson.loads(records[2].value)["payload"]["additional_data"] == {
        "scanned_collection": "public.a",
        "data_collections": "public.a,public.b",
        "total_rows_scanned": "10",
        "status": "SUCCEEDED",
        "connector_name": "shop",
    }

    rows = read_notifications(tmp_path, "shop")
    assert [
        (r["id"], r["aggregate_type"], r["type"], r["additional_data"], r["timestamp"]) for r in rows
    ] == [(s.id, s.aggregate_type, s.type, dict(s.additional_data), s.timestamp) for s in sent]
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == (
        "[Notification Service] {aggregateType='Initial Snapshot', type='STARTED', additionalData={connector_name=shop}}"
    )
    assert len(lines) == len(sent)


def test_a_broken_channel_never_raises(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "_state").write_text("not a directory")  # the warehouse cannot hold tables
    cfg = config("postgres", notification__enabled__channels="delta", tidemark__warehouse=str(tmp_path))
    n = Notifier.from_config(cfg)
    n.initial_snapshot.aborted()
    assert any("could not send" in r.getMessage() for r in caplog.records)
