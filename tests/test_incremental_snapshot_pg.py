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


# Known bug (open; README "Incremental snapshots", known bug): with Delta and another sink, a kill
# after a chunk reached Delta but before the offsets table stored the snapshot's start makes the
# journal hand the signal over again and the restart snapshots anew (a chunk twice in Delta).
# Timing-dependent: passed in CI 2026-11-24, failed (MariaDB) in a run right after.
@pytest.mark.xfail(
    reason="incremental snapshot is not crash-safe yet with Delta plus another sink", strict=False
)
@pytest.mark.timeout(3 * COMPLETE_S)
def test_sigkill_mid_snapshot(pg: Any, pg_database: str, tmp_path: Path) -> None:
    s = _setup(pg, pg_database, tmp_path, "incpg2", **cases.SIGKILL_SETTINGS)
    cases.sigkill_mid_snapshot(s, tmp_path, trials=TRIALS)


@pytest.mark.timeout(2 * COMPLETE_S)
def test_conditions_stop_pause_keyless(pg: Any, pg_database: str, tmp_path: Path) -> None:
    s = _setup(pg, pg_database, tmp_path, "incpg3", **cases.CONDITIONS_SETTINGS)
    cases.conditions_stop_pause_keyless(s, tmp_path)
