"""Helpers for end-to-end MySQL/MariaDB connector tests (the CLI runners are pgcdc's)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pgcdc import ROOT, TIDEMARK, delta_rows, payload, popen_cli, read_jsonl, run_cli

__all__ = [
    "delta_rows",
    "drain",
    "payload",
    "popen_cli",
    "read_jsonl",
    "run_cli",
    "run_cli_peak_rss",
    "source_config",
    "started_source",
    "write_config",
]


def write_config(
    path: Path,
    server: Any,
    *,
    server_id: int,
    db: str,
    prefix: str = "tm",
    sinks: str = "jsonl",
    jsonl: Path | None = None,
    warehouse: Path | None = None,
    kafka: Any = None,
    connector: str = "mariadb",
    **extra: Any,
) -> Path:
    props = {f"debezium.source.{k}": v for k, v in server.props().items()}
    props.update(
        {
            "debezium.source.connector.class": connector,
            "debezium.source.topic.prefix": prefix,
            "debezium.source.database.server.id": str(server_id),
            "debezium.source.database.include.list": db,
            "debezium.source.poll.interval.ms": "100",
            "debezium.sink.type": sinks,
            "tidemark.warehouse": str(warehouse or path.parent / "warehouse"),
        }
    )
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


# --------------------------------------------------------------------------- in-process source
def source_config(server: Any, warehouse: Path, name: str, server_id: int, **extra: Any) -> Any:
    """A typed connector config (what `config.load` gives the source) for `MySqlSource`."""
    from cfgutil import config

    src = dict(
        server.props(),
        **{
            "name": name,
            "topic.prefix": "tm",
            "database.server.id": server_id,
            "max.batch.size": 2048,
            "poll.interval.ms": 100,
            "tombstones.on.delete": True,
            "include.schema.changes": True,
            "skipped.operations": ["t"],
            "tidemark.warehouse": str(warehouse),
        },
    )
    src.update(extra)
    return config("mariadb", src)


def drain(src: Any) -> list[Any]:
    """Every record of a bounded source's batches (its last offset in `src._last`)."""
    out = []
    last = None
    for b in src.batches():
        out.extend(b.records)
        last = b.offset
    src._last = last
    return out


def started_source(server: Any, tmp_path: Path, unique_name: Any, db: str, **extra: Any) -> tuple[Any, Any]:
    """A config capturing `db` and a bounded source opened on it (fresh: schema snapshot now)."""
    from connectors.sources.mysql.source import MySqlSource

    cfg = source_config(
        server,
        tmp_path,
        unique_name("conn"),
        unique_name.server_id(),
        **{"database.include.list": db},
        **extra,
    )
    src = MySqlSource(cfg, until_caught_up=True)
    src.open(None)
    return cfg, src


# --------------------------------------------------------------------------- memory
_PEAK_WRAPPER = (
    "import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
    "sys.exit(p.returncode)"
)


def run_cli_peak_rss(*args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess[str], int]:
    """`tidemark <args>` run to its end under a wrapper process whose only child it is, so the
    child's peak RSS (kB) is exact: (the completed process, peak kB)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK_WRAPPER, *TIDEMARK, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        raise AssertionError(f"tidemark {' '.join(args)} exited {proc.returncode}\n{proc.stderr[-4000:]}")
    return proc, int(proc.stderr.strip().splitlines()[-1])
