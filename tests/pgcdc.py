"""Helpers for end-to-end PostgreSQL connector tests: write a config, run the CLI, read results."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
TIDEMARK = [sys.executable, "-m", "connectors.app.cli"]


def write_config(
    path: Path,
    pg: Any,
    *,
    slot: str,
    prefix: str = "tm",
    sinks: str = "jsonl",
    jsonl: Path | None = None,
    warehouse: Path | None = None,
    kafka: Any = None,
    dbname: str | None = None,
    **extra: Any,
) -> Path:
    props = {f"debezium.source.{k}": v for k, v in pg.props().items()}
    if dbname:
        props["debezium.source.database.dbname"] = dbname
    props.update(
        {
            "debezium.source.connector.class": "postgres",
            "debezium.source.topic.prefix": prefix,
            "debezium.source.slot.name": slot,
            "debezium.source.publication.name": slot,
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


def run_cli(*args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [*TIDEMARK, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"tidemark {' '.join(args)} exited {proc.returncode}\n{proc.stderr[-4000:]}")
    return proc


def popen_cli(*args: str, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [*TIDEMARK, *args], stdout=subprocess.DEVNULL, stderr=log.open("ab"), env=env, cwd=ROOT
    )


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def payload(rec: dict[str, Any], part: str = "value") -> Any:
    v = rec[part]
    return v["payload"] if isinstance(v, dict) and "schema" in v and "payload" in v else v


# A heartbeat record's schemas as Debezium 3.6 writes them (captured from its MySQL connector;
# the record has no headers): serverName key, ts_ms value, both version 1.
HEARTBEAT_KEY_SCHEMA = {
    "type": "struct",
    "fields": [{"type": "string", "optional": False, "field": "serverName"}],
    "optional": False,
    "name": "io.debezium.connector.common.ServerNameKey",
    "version": 1,
}
HEARTBEAT_VALUE_SCHEMA = {
    "type": "struct",
    "fields": [{"type": "int64", "optional": False, "field": "ts_ms"}],
    "optional": False,
    "name": "io.debezium.connector.common.Heartbeat",
    "version": 1,
}


def assert_debezium_heartbeat(rec: dict[str, Any], server_name: str) -> None:
    assert rec["key"] == {"schema": HEARTBEAT_KEY_SCHEMA, "payload": {"serverName": server_name}}
    assert rec["value"]["schema"] == HEARTBEAT_VALUE_SCHEMA and set(rec["value"]["payload"]) == {"ts_ms"}


def delta_rows(table: Path, columns: list[str] | None = None) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return DeltaTable(str(table)).to_pyarrow_table(columns=columns).to_pylist()


def changelog_count(changelog: Path) -> int:
    """Rows in a Delta change log (0 before its first commit)."""
    return len(delta_rows(changelog, ["op"])) if changelog.exists() else 0


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def peak_rss_kb(pid: int) -> int:
    """A live process's peak resident set size (VmHWM) in kB."""
    return _status_kb(pid, "VmHWM:")


def rss_kb(pid: int) -> int:
    """A live process's current resident set size (VmRSS) in kB."""
    return _status_kb(pid, "VmRSS:")


def kill_inside_then_resume(
    cfg: Path, changelog: Path, log: Path, total: int, *, first: int = 10_000, max_rss_kb: int = 600_000
) -> None:
    """Run the connector on a pending `total`-row transaction, SIGKILL it once `first` rows are in
    the Delta change log, check it was killed inside the transaction with bounded memory, then
    run it again until caught up. The caller checks the change log's rows."""
    import signal

    from connectors.app.embedded.util import wait_until

    proc = popen_cli("run", "--config", str(cfg), log=log)
    try:
        wait_until(
            lambda: changelog_count(changelog) >= first, timeout=180, what="part of the transaction delivered"
        )
        peak_kb = peak_rss_kb(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    at_kill = changelog_count(changelog)
    assert 0 < at_kill < total, at_kill  # killed inside the transaction
    assert peak_kb < max_rss_kb, f"peak RSS {peak_kb} kB: the transaction is not streamed in bounded memory"
    run_cli("run", "--config", str(cfg), "--until-caught-up", timeout=600)
