"""Helpers for end-to-end MySQL/MariaDB connector tests (the CLI runners are pgcdc's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pgcdc import delta_rows, payload, popen_cli, read_jsonl, run_cli

__all__ = ["delta_rows", "payload", "popen_cli", "read_jsonl", "run_cli", "write_config"]


def write_config(path: Path, server: Any, *, server_id: int, db: str, prefix: str = "tm", sinks: str = "jsonl",
                 jsonl: Path | None = None, warehouse: Path | None = None, kafka: Any = None,
                 connector: str = "mariadb", **extra: Any) -> Path:
    props = {f"debezium.source.{k}": v for k, v in server.props().items()}
    props.update({
        "debezium.source.connector.class": connector,
        "debezium.source.topic.prefix": prefix,
        "debezium.source.database.server.id": str(server_id),
        "debezium.source.database.include.list": db,
        "debezium.source.poll.interval.ms": "100",
        "debezium.sink.type": sinks,
        "tidemark.warehouse": str(warehouse or path.parent / "warehouse"),
    })
    if jsonl is not None:
        props["debezium.sink.jsonl.path"] = str(jsonl)
    if kafka is not None:
        props["debezium.sink.kafka.producer.bootstrap.servers"] = kafka.bootstrap
        props["debezium.sink.kafka.topic.creation.partitions"] = "1"  # whole-topic order in assertions
    for k, v in extra.items():
        key = k.replace("__", ".")
        props[key if key.startswith(("debezium.", "tidemark.")) else f"debezium.source.{key}"] = str(v)
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path
