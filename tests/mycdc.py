"""Helpers for end-to-end MySQL/MariaDB connector tests (the CLI runners are pgcdc's)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from pgcdc import delta_rows, payload, popen_cli, read_jsonl
from pgcdc import run_cli as _run_cli

__all__ = ["delta_rows", "payload", "popen_cli", "read_jsonl", "run_cli", "write_config"]


NATIVE_ABORT = "terminate called without an active exception"


def run_cli(*args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess[str]:
    """pgcdc.run_cli, retried when the process died of the native abort deltalake/pyarrow
    sometimes hit at interpreter exit (SIGABRT after the command's work was done; reported
    separately, not a connector fault)."""
    for _ in range(3):
        proc = _run_cli(*args, timeout=timeout, check=False)
        if not (proc.returncode == -6 and NATIVE_ABORT in proc.stderr):
            break
    if check and proc.returncode != 0:
        raise AssertionError(f"tidemark {' '.join(args)} exited {proc.returncode}\n{proc.stderr[-4000:]}")
    return proc


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
