"""Read-only incremental snapshots on MariaDB (`read.only=true`, GTID watermarks,
connectors/snapshot/incremental_gtid.py): the scenarios of tests/incremental_cases.py with the
signals through the Delta channel (`Setup.read_only`: the cases' "source" signals go there too)
— under a steady write load replaying the events reproduces the table, SIGKILLs mid-snapshot
emit no chunk twice — and no watermark row reaches the source database (the signal table stays
empty and no change event of it is streamed). The configuration checks refuse the source
channel and `heartbeat.action.query` with read.only=true, and read.only on PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import incremental_cases as cases
import pytest
from incremental import TRIALS, Setup, config_extra, mariadb_setup

from connectors.api import ConfigError
from connectors.settings.config import load


def _setup(mariadb: Any, db: str, tmp_path: Path, server_id: int, **extra: Any) -> Setup:
    extra = config_extra(channels="delta,file", signal__file=str(tmp_path / "signals.txt"), **extra)
    return mariadb_setup(mariadb, db, tmp_path, server_id, read_only=True, **extra)


@pytest.mark.timeout(600)
def test_readonly_snapshots_under_writes(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    s = _setup(mariadb, mariadb_database, tmp_path, 7501)
    cases.both_channels(s, tmp_path)


@pytest.mark.timeout(900)
def test_readonly_sigkill_mid_snapshot(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    s = _setup(mariadb, mariadb_database, tmp_path, 7502, **cases.SIGKILL_SETTINGS)
    cases.sigkill_mid_snapshot(s, tmp_path, trials=TRIALS)


@pytest.mark.parametrize(
    ("connector", "extra", "message"),
    [
        (
            "mariadb",
            {"signal.enabled.channels": "source,delta", "signal.data.collection": "db.debezium_signal"},
            "read.only=true cannot use the source signal channel",
        ),
        ("mariadb", {"signal.data.collection": "db.debezium_signal"}, "cannot use the source signal channel"),
        (
            "mysql",
            {
                "signal.enabled.channels": "kafka",
                "signal.kafka.bootstrap.servers": "k:9092",
                "heartbeat.action.query": "INSERT INTO hb VALUES (1)",
            },
            "forbids debezium.source.heartbeat.action.query",
        ),
        ("postgres", {"signal.enabled.channels": "delta"}, "not available for PostgreSQL"),
    ],
)
def test_readonly_config_refuses_writes(
    tmp_path: Path, connector: str, extra: dict[str, str], message: str
) -> None:
    props = {
        "debezium.source.connector.class": connector,
        "debezium.source.topic.prefix": "tm",
        "debezium.source.database.hostname": "localhost",
        "debezium.source.database.user": "u",
        "debezium.source.database.password": "p",
        "debezium.source.read.only": "true",
        "debezium.sink.type": "jsonl",
        "debezium.sink.jsonl.path": str(tmp_path / "out.jsonl"),
        "tidemark.warehouse": str(tmp_path / "wh"),
        **{f"debezium.source.{k}": v for k, v in extra.items()},
    }
    if connector == "postgres":
        props["debezium.source.database.dbname"] = "db"
    else:
        props["debezium.source.database.server.id"] = "7"
    path = tmp_path / "c.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    with pytest.raises(ConfigError, match=message):
        load(path)
    # the same without read.only loads
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items() if k != "debezium.source.read.only"))
    load(path)


@pytest.mark.timeout(600)
def test_readonly_crash_before_offsets_stored(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    s = _setup(mariadb, mariadb_database, tmp_path, 7503, **cases.SIGKILL_SETTINGS)
    cases.crash_before_offsets_stored(s, tmp_path, completed=False)
