"""OffsetStore contract for the Delta offset store (`<warehouse>/_state/offsets`)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from deltalake import DeltaTable

from connectors.api import OffsetStore
from connectors.state import DeltaOffsetStore


def test_empty_store_loads_none(tmp_path: Path) -> None:
    store = DeltaOffsetStore(tmp_path, "c1")
    assert isinstance(store, OffsetStore)
    assert store.load() is None
    assert store.last_seq() is None
    store.reset()  # no table yet: nothing to do


def test_save_load_newest(tmp_path: Path) -> None:
    store = DeltaOffsetStore(tmp_path, "c1")
    store.save(1, {"lsn": 10, "txId": 5})
    store.save(2, {"lsn": 20, "txId": 6, "lsn_proc": 21})
    assert store.load() == (2, {"lsn": 20, "txId": 6, "lsn_proc": 21})
    # A new instance (restart) reads the same thing from the table.
    assert DeltaOffsetStore(tmp_path, "c1").load() == (2, {"lsn": 20, "txId": 6, "lsn_proc": 21})
    assert store.last_seq() == 2


def test_one_row_and_one_commit_per_save(tmp_path: Path) -> None:
    store = DeltaOffsetStore(tmp_path, "c1")
    for i in range(1, 4):
        store.save(i, {"pos": i})
    dt = DeltaTable(str(tmp_path / "_state" / "offsets"))
    assert dt.version() == 2  # versions 0, 1, 2
    t = dt.to_pyarrow_table()
    assert t.num_rows == 3
    assert t.schema.names == ["connector", "seq", "offset", "committed_at"]
    assert dt.metadata().partition_columns == ["connector"]
    assert dt.transaction_version("offsets:c1") == 3


def test_connectors_are_separate_and_reset_is_per_connector(tmp_path: Path) -> None:
    a, b = DeltaOffsetStore(tmp_path, "a"), DeltaOffsetStore(tmp_path, "b'quote")
    a.save(1, {"file": "mysql-bin.000001", "pos": 4})
    b.save(7, {"lsn": 1})
    a.save(2, {"file": "mysql-bin.000001", "pos": 99})
    assert a.load() == (2, {"file": "mysql-bin.000001", "pos": 99})
    assert b.load() == (7, {"lsn": 1})
    b.reset()
    assert b.load() is None and b.last_seq() is None
    assert a.load() == (2, {"file": "mysql-bin.000001", "pos": 99})
    b.save(1, {"lsn": 2})  # starts over after a reset
    assert b.load() == (1, {"lsn": 2})


def test_save_is_fast(tmp_path: Path) -> None:
    store = DeltaOffsetStore(tmp_path, "c1")
    store.save(0, {"lsn": 0})  # table creation outside the timing
    times = []
    for i in range(1, 151):
        t = time.perf_counter()
        store.save(i, {"lsn": i * 100, "txId": i, "ts_usec": 1_700_000_000_000_000 + i})
        times.append(time.perf_counter() - t)
    med = statistics.median(times) * 1000
    p95 = sorted(times)[int(len(times) * 0.95)] * 1000
    print(f"\noffset save: median {med:.1f} ms, p95 {p95:.1f} ms, max {max(times) * 1000:.1f} ms")
    assert med < 50
    t = time.perf_counter()
    assert store.load() == (150, {"lsn": 15000, "txId": 150, "ts_usec": 1_700_000_000_000_150})
    print(f"offset load after 151 saves: {(time.perf_counter() - t) * 1000:.1f} ms")


def test_a_long_running_connector_keeps_the_table_small(tmp_path: Path) -> None:
    from connectors.state import offsets as mod

    a, b = DeltaOffsetStore(tmp_path, "a"), DeltaOffsetStore(tmp_path, "b")
    b.save(1, {"lsn": 1})
    for i in range(1, 2 * mod.COMPACT_EVERY + 1):
        a.save(i, {"lsn": i})
    dt = DeltaTable(str(tmp_path / "_state" / "offsets"))
    rows = dt.to_pyarrow_table(columns=["connector", "seq"]).to_pylist()
    # a's rows before its last compaction are gone; b's row is untouched
    assert {"connector": "b", "seq": 1} in rows
    assert len([r for r in rows if r["connector"] == "a"]) == 1
    assert a.load() == (2 * mod.COMPACT_EVERY, {"lsn": 2 * mod.COMPACT_EVERY})
    assert b.load() == (1, {"lsn": 1}) and a.last_seq() == 2 * mod.COMPACT_EVERY
    assert dt.metadata().configuration["delta.logRetentionDuration"] == "interval 1 days"
    # vacuum removes files deleted more than VACUUM_RETENTION_HOURS ago: none yet, but the
    # table's live files are one per connector
    assert len(dt.file_uris()) == 2
