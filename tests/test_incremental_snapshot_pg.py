"""Incremental snapshots on PostgreSQL, end to end: `tidemark run` with the jsonl and delta sinks,
the signal table captured, a steady mixed write load on `bench`, snapshots requested through the
source channel and the Delta channel (`tidemark signal`), SIGKILL mid-snapshot, and the
additional-conditions / stop / pause / resume / keyless cases. The scenarios are shared with
MariaDB (tests/incremental_cases.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import incremental_cases as cases
import pytest
from incremental import COMPLETE_S, TRIALS, Setup, config_extra, pg_setup


def _setup(pg: Any, db: str, tmp_path: Path, slot: str, **extra: Any) -> Setup:
    return pg_setup(pg, db, tmp_path, slot, **config_extra(**extra))


@pytest.mark.timeout(2 * COMPLETE_S)
def test_snapshot_through_source_and_delta_channels(pg: Any, pg_database: str, tmp_path: Path) -> None:
    s = _setup(pg, pg_database, tmp_path, "incpg1")
    cases.both_channels(s, tmp_path)


@pytest.mark.timeout(3 * COMPLETE_S)
def test_sigkill_mid_snapshot(pg: Any, pg_database: str, tmp_path: Path) -> None:
    s = _setup(pg, pg_database, tmp_path, "incpg2", **cases.SIGKILL_SETTINGS)
    cases.sigkill_mid_snapshot(s, tmp_path, trials=TRIALS)


@pytest.mark.timeout(2 * COMPLETE_S)
def test_conditions_stop_pause_keyless(pg: Any, pg_database: str, tmp_path: Path) -> None:
    s = _setup(pg, pg_database, tmp_path, "incpg3", **cases.CONDITIONS_SETTINGS)
    cases.conditions_stop_pause_keyless(s, tmp_path)


@pytest.mark.timeout(2 * COMPLETE_S)
@pytest.mark.parametrize("completed", [False, True], ids=["mid-snapshot", "after-completion"])
def test_crash_before_offsets_stored(pg: Any, pg_database: str, tmp_path: Path, completed: bool) -> None:
    s = _setup(pg, pg_database, tmp_path, f"incpg4{int(completed)}", **cases.SIGKILL_SETTINGS)
    cases.crash_before_offsets_stored(s, tmp_path, completed=completed)


@pytest.mark.timeout(2 * COMPLETE_S)
@pytest.mark.parametrize("kill", [False, True], ids=["steady", "sigkill"])
def test_spark_reader(pg: Any, pg_database: str, tmp_path: Path, kill: bool) -> None:
    s = _setup(pg, pg_database, tmp_path, f"incpg5{int(kill)}", **cases.SPARK_SETTINGS)
    cases.spark_reader(s, tmp_path, kill=kill)


@pytest.mark.timeout(COMPLETE_S)
def test_spark_reader_on_an_idle_database(pg: Any, pg_database: str, tmp_path: Path) -> None:
    s = _setup(pg, pg_database, tmp_path, "incpg6", **cases.SPARK_SETTINGS)
    cases.spark_reader_idle(s, tmp_path)


def test_chunks_encode_together_as_alone(pg: Any, pg_database: str, tmp_path: Path) -> None:
    cases.chunks_encode_together_as_alone(_setup(pg, pg_database, tmp_path, "incpg7"))


def test_drop_races_on_the_real_drivers(pg: Any, pg_database: str, tmp_path: Path) -> None:
    cases.drop_races_on_the_real_drivers(_setup(pg, pg_database, tmp_path, "incpga"), tmp_path)


def test_watermark_rows(pg: Any, pg_database: str, tmp_path: Path) -> None:
    cases.watermark_rows(_setup(pg, pg_database, tmp_path, "incpg8"))


@pytest.mark.timeout(COMPLETE_S)
@pytest.mark.parametrize(
    ("reader", "ddl"),
    [
        ("thread", "DROP TABLE bench"),
        ("spark", "DROP TABLE bench"),
        ("thread", "ALTER TABLE bench RENAME TO bench_old"),
    ],
    ids=["thread", "spark", "thread-renamed"],
)
def test_table_dropped_mid_snapshot(pg: Any, pg_database: str, tmp_path: Path, reader: str, ddl: str) -> None:
    extra = {
        **(cases.SPARK_SETTINGS if reader == "spark" else {}),
        "incremental__snapshot__chunk__size": "200",
    }
    name = f"incpg9{int(reader == 'spark')}{'r' if ddl.startswith('ALTER') else ''}"
    s = _setup(pg, pg_database, tmp_path, name, **extra)
    cases.table_dropped_mid_snapshot(s, tmp_path, ddl)
