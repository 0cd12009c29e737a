"""Run Tidemark's CLI for a conformance test and read its records (with their Kafka headers)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TIDEMARK_TIMEOUT = 240.0


def tidemark_cli() -> str:
    exe = Path(sys.executable).with_name("tidemark")
    if exe.exists():
        return str(exe)
    found = shutil.which("tidemark")
    if not found:
        pytest.fail("the `tidemark` CLI is not installed (pip install -e . in the venv)")
    return found


def with_headers(records: list[dict], changelog: Path, skip: int = 0) -> list[dict]:
    """Attach the Kafka headers of each jsonl record, read back from the Delta change log (same
    records, in `(batch_seq, event_index)` order, after the first `skip` rows: an earlier run's),
    as ``[[name, parsed JSON value], ...]``."""
    from deltalake import DeltaTable

    rows = (
        DeltaTable(str(changelog))
        .to_pyarrow_table(columns=["batch_seq", "event_index", "topic", "headers"])
        .to_pylist()
    )
    rows.sort(key=lambda r: (r["batch_seq"], r["event_index"]))
    rows = rows[skip:]
    assert [r["topic"] for r in rows] == [r["topic"] for r in records], (
        "Delta and jsonl hold different records"
    )
    out = []
    for rec, row in zip(records, rows, strict=True):
        hs = json.loads(row["headers"]) if row["headers"] else []
        out.append({**rec, "headers": [[h["key"], json.loads(base64.b64decode(h["value"]))] for h in hs]})
    return out


def run_tidemark(config: Path, log: Path) -> None:
    cmd = [tidemark_cli(), "run", "--config", str(config), "--until-caught-up"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log, "w") as lf:
        try:
            proc = subprocess.run(
                cmd, stdout=lf, stderr=subprocess.STDOUT, cwd=REPO, env=env, timeout=TIDEMARK_TIMEOUT
            )
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"tidemark run did not finish within {TIDEMARK_TIMEOUT}s; log {log}:\n{log.read_text()[-3000:]}"
            )
    if proc.returncode != 0:
        pytest.fail(f"`{' '.join(cmd)}` exited with {proc.returncode}; log {log}:\n{log.read_text()[-3000:]}")
