"""Incremental snapshots on MariaDB, end to end: the scenarios of tests/incremental_cases.py
(source and Delta channels under writes, SIGKILL mid-snapshot, additional-conditions / stop /
pause / resume / keyless) with the binlog connector."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import incremental_cases as cases
import pytest
from incremental import COMPLETE_S, TRIALS, Setup, config_extra, mariadb_setup


def _setup(mariadb: Any, db: str, tmp_path: Path, server_id: int, **extra: Any) -> Setup:
    return mariadb_setup(mariadb, db, tmp_path, server_id, **config_extra(**extra))


@pytest.mark.timeout(2 * COMPLETE_S)
def test_snapshot_through_source_and_delta_channels(
    mariadb: Any, mariadb_database: str, tmp_path: Path
) -> None:
    s = _setup(mariadb, mariadb_database, tmp_path, 7301)
    cases.both_channels(s, tmp_path)


@pytest.mark.timeout(3 * COMPLETE_S)
def test_sigkill_mid_snapshot(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    s = _setup(mariadb, mariadb_database, tmp_path, 7302, **cases.SIGKILL_SETTINGS)
    cases.sigkill_mid_snapshot(s, tmp_path, trials=TRIALS)


@pytest.mark.timeout(2 * COMPLETE_S)
def test_conditions_stop_pause_keyless(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    s = _setup(mariadb, mariadb_database, tmp_path, 7303, **cases.CONDITIONS_SETTINGS)
    cases.conditions_stop_pause_keyless(s, tmp_path)


@pytest.mark.timeout(2 * COMPLETE_S)
def test_crash_before_offsets_stored(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    s = _setup(mariadb, mariadb_database, tmp_path, 7304, **cases.SIGKILL_SETTINGS)
    cases.crash_before_offsets_stored(s, tmp_path, completed=False)


@pytest.mark.timeout(2 * COMPLETE_S)
@pytest.mark.parametrize("reader", ["thread", "spark"])
def test_schema_change_mid_snapshot(mariadb: Any, mariadb_database: str, tmp_path: Path, reader: str) -> None:
    extra = {
        **(cases.SPARK_SETTINGS if reader == "spark" else {}),
        **cases.SIGKILL_SETTINGS,  # (small chunks: the DDL comes while many are left)
        "incremental__snapshot__allow__schema__changes": "true",
    }
    s = _setup(mariadb, mariadb_database, tmp_path, 7305 + 8 * (reader == "spark"), **extra)
    cases.schema_change_mid_snapshot(s, tmp_path)


@pytest.mark.timeout(2 * COMPLETE_S)
@pytest.mark.parametrize("kill", [False, True], ids=["steady", "sigkill"])
def test_spark_reader(mariadb: Any, mariadb_database: str, tmp_path: Path, kill: bool) -> None:
    s = _setup(mariadb, mariadb_database, tmp_path, 7310 + int(kill), **cases.SPARK_SETTINGS)
    cases.spark_reader(s, tmp_path, kill=kill)


@pytest.mark.timeout(COMPLETE_S)
def test_spark_reader_on_an_idle_database(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    s = _setup(mariadb, mariadb_database, tmp_path, 7312, **cases.SPARK_SETTINGS)
    cases.spark_reader_idle(s, tmp_path)


def test_chunks_encode_together_as_alone(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    cases.chunks_encode_together_as_alone(_setup(mariadb, mariadb_database, tmp_path, 7314))


def test_drop_races_on_the_real_drivers(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    cases.drop_races_on_the_real_drivers(_setup(mariadb, mariadb_database, tmp_path, 7316), tmp_path)


def test_watermark_rows(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    cases.watermark_rows(_setup(mariadb, mariadb_database, tmp_path, 7315))


@pytest.mark.timeout(COMPLETE_S)
@pytest.mark.parametrize(
    ("reader", "ddl"),
    [
        ("thread", "DROP TABLE bench"),
        ("spark", "DROP TABLE bench"),
        ("thread", "RENAME TABLE bench TO bench_old"),
    ],
    ids=["thread", "spark", "thread-renamed"],
)
def test_table_dropped_mid_snapshot(
    mariadb: Any, mariadb_database: str, tmp_path: Path, reader: str, ddl: str
) -> None:
    extra = {
        **(cases.SPARK_SETTINGS if reader == "spark" else {}),
        "incremental__snapshot__chunk__size": "200",
    }
    server_id = 7320 + int(reader == "spark") + 2 * int(ddl.startswith("RENAME"))
    s = _setup(mariadb, mariadb_database, tmp_path, server_id, **extra)
    cases.table_dropped_mid_snapshot(s, tmp_path, ddl)
