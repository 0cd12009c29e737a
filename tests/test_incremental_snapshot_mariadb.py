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


# Known bug (open; README "Incremental snapshots", known bug): with Delta and another sink, a kill
# after a chunk reached Delta but before the offsets table stored the snapshot's start makes the
# journal hand the signal over again and the restart snapshots anew (a chunk twice in Delta).
# Timing-dependent: passed in CI 2026-11-24, failed (MariaDB) in a run right after.
@pytest.mark.xfail(
    reason="incremental snapshot is not crash-safe yet with Delta plus another sink", strict=False
)
@pytest.mark.timeout(3 * COMPLETE_S)
def test_sigkill_mid_snapshot(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    s = _setup(mariadb, mariadb_database, tmp_path, 7302, **cases.SIGKILL_SETTINGS)
    cases.sigkill_mid_snapshot(s, tmp_path, trials=TRIALS)


@pytest.mark.timeout(2 * COMPLETE_S)
def test_conditions_stop_pause_keyless(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    s = _setup(mariadb, mariadb_database, tmp_path, 7303, **cases.CONDITIONS_SETTINGS)
    cases.conditions_stop_pause_keyless(s, tmp_path)
