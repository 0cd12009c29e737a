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
@pytest.mark.parametrize(("script", "consumers"), [
    ("pg_stream.py", "tidemark_delta,psycopg2_raw"),
    ("mysql_stream.py", "tidemark_jsonl,mysql_replication_raw"),
])
def test_benchmark_quick_run(script: str, consumers: str) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--quick", "--shapes", "single_row_tx",
                           "--consumers", consumers], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    figures = [d for d in lines if "consumer" in d and d["consumer"] != "workload_generation"]
    assert sorted(d["consumer"] for d in figures) == sorted(consumers.split(","))
    for d in figures:
        assert "error" not in d, d
        assert d["events"] == 5000 and d["events_per_s"] > 0, d
    assert any("ratio" in d for d in lines)
