"""The benchmark commands the README documents keep working: each runs its smallest size with
one Tidemark consumer and its raw baseline, and every figure line is a real measurement."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "consumers"),
    [
        ("pg_stream.py", "tidemark_delta,psycopg2_raw"),
        ("mysql_stream.py", "tidemark_jsonl,mysql_replication_raw"),
    ],
)
def test_benchmark_quick_run(script: str, consumers: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / script),
            "--quick",
            "--shapes",
            "single_row_tx",
            "--consumers",
            consumers,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    figures = [d for d in lines if "consumer" in d and d["consumer"] != "workload_generation"]
    assert sorted(d["consumer"] for d in figures) == sorted(consumers.split(","))
    for d in figures:
        assert "error" not in d, d
        assert d["events"] == 5000 and d["events_per_s"] > 0, d
    assert any("ratio" in d for d in lines)


@pytest.mark.slow
def test_latency_benchmark_small_run() -> None:
    """bench/latency.py at a tiny rate with every kind of consumer: each line is a measurement of
    every row it generated (no row lost on the way to the sink, percentiles present)."""
    consumers = "tidemark_jsonl,tidemark_kafka,tidemark_delta,debezium"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "latency.py"),
            "--rate",
            "50",
            "--seconds",
            "2",
            "--warmup",
            "1",
            "--drain",
            "20",
            "--consumers",
            consumers,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert [d["consumer"] for d in lines] == consumers.split(","), proc.stderr[-3000:]
    for d in lines:
        assert "error" not in d, d
        assert d["events"] == 100 and d["delivered"] == 100 and d["duplicates"] == 0, d
        # Kafka stamps are CreateTime, whole milliseconds, and a record can reach the sink before
        # the generator's COMMIT call returns: a sub-millisecond p50 may come out a little below 0.
        floor = -1.0 if d["sink"] == "kafka" else 0.0
        assert floor < d["p50_ms"] <= d["p99_ms"] <= d["max_ms"], d
        assert d["generator"]["transactions"] == 100 and d["generator"]["achieved_rate"] > 0, d
    assert lines[2]["delta_commits"]["commits"] > 0


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("db", "consumers"), [("postgres", "tidemark_jsonl"), ("mariadb", "tidemark_jsonl,debezium_poll10ms")]
)
def test_latency_during_incremental_snapshot(db: str, consumers: str) -> None:
    """bench/latency.py --incremental-rows: the measured rows stream while an incremental snapshot
    of another table runs, and the line says how many snapshot rows reached the sink meanwhile;
    on MariaDB also Debezium's MySQL connector, and the ratio line."""
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "latency.py"),
            *("--db", db, "--rate", "50", "--seconds", "6", "--warmup", "1", "--drain", "20"),
            *("--consumers", consumers, "--incremental-rows", "20000", "--baseline", "2"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    measured = [d for d in lines if "consumer" in d]
    assert [d["consumer"] for d in measured] == consumers.split(","), proc.stderr[-3000:]
    for d in measured:
        assert "error" not in d, d
        assert d["db"] == db and d["delivered"] == d["events"] == 300 and d["duplicates"] == 0, d
        snap = d["incremental_snapshot"]
        assert snap["rows"] == 20000
        assert 0 < snap["rows_in_sink_during_measurement"] <= snap["rows_in_sink_at_end"], snap
        # the bench waits for the snapshot's last row: its own pace, and the consumer's peak memory
        assert snap["completed"] and snap["rows_in_sink_at_end"] == 20000 and snap["rows_per_s"] > 0, snap
        assert d["peak_rss_mb"] > 50, d
        # the same load measured before the snapshot was asked for
        assert d["without_snapshot"]["delivered"] == 100 and d["without_snapshot"]["p99_ms"] > 0, d
    ratios = [d for d in lines if "ratio" in d]
    if "debezium" in consumers:
        (r,) = ratios
        assert r["ratio"] == "tidemark_jsonl/debezium_poll10ms" and r["value"] > 0 and r["db"] == db, r
    else:
        assert ratios == []


@pytest.mark.parametrize("script", ["pg_snapshot.py", "mysql_snapshot.py", "pg_stream.py", "latency.py"])
def test_benchmark_refuses_a_repeated_consumer(script: str) -> None:
    """A consumer named twice would find the first run's slot, state and output and report a
    figure that measured nothing (seen: a 1.3 s "Kafka snapshot" of 2M rows); it is a usage error
    before any server starts."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--consumers", "debezium,debezium"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "given more than once: ['debezium']" in proc.stderr
