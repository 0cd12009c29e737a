"""Snapshot conformance helpers: run `tidemark snapshot`, read what it wrote, count source rows.

The Debezium side is `conformance.debezium.run_debezium_snapshot`; the comparison is
`conformance.normalize.assert_snapshot_conform` (a multiset per topic, see there why).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conformance.tidemark import REPO, tidemark_cli

SNAPSHOT_TIMEOUT = 600.0  # Spark start-up is part of the run


def run_tidemark_snapshot(config: Path, log: Path, timeout: float = SNAPSHOT_TIMEOUT) -> None:
    """`tidemark snapshot --config FILE` to its end; fails the test on a non-zero exit."""
    cmd = [tidemark_cli(), "snapshot", "--config", str(config)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log, "w") as lf:
        try:
            proc = subprocess.run(
                cmd, stdout=lf, stderr=subprocess.STDOUT, cwd=REPO, env=env, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"tidemark snapshot did not finish within {timeout}s; log {log}:\n{log.read_text()[-3000:]}"
            )
    if proc.returncode != 0:
        pytest.fail(f"`{' '.join(cmd)}` exited with {proc.returncode}; log {log}:\n{log.read_text()[-3000:]}")


def changelog_records(changelog: Path) -> list[dict[str, Any]]:
    """The Kafka records (topic, key, value, headers) a Delta change log holds, rebuilt byte for
    byte with `sinks.delta.kafka_key` / `kafka_value`, in `(batch_seq, event_index)` order."""
    from deltalake import DeltaTable

    from connectors.sinks.delta import kafka_key, kafka_value

    rows = DeltaTable(str(changelog)).to_pyarrow_table().to_pylist()
    rows.sort(key=lambda r: (r["batch_seq"], r["event_index"]))
    out = []
    for row in rows:
        k, v = kafka_key(row), kafka_value(row)
        hs = json.loads(row["headers"]) if row["headers"] else []
        out.append(
            {
                "topic": row["topic"],
                "key": None if k is None else json.loads(k),
                "value": None if v is None else json.loads(v),
                "headers": [[h["key"], json.loads(base64.b64decode(h["value"]))] for h in hs],
            }
        )
    return out


def table_row_counts(conn: Any, schema: str = "public") -> dict[str, int]:
    """``{"<schema>.<table>": rows}`` for every ordinary and partitioned table of ``schema``: the
    rows a snapshot reads from it (Debezium 3.6 reads a partitioned table and each of its
    partitions, so their rows count under both)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT c.relname, c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'p') ORDER BY 1",
            (schema,),
        )
        names = cur.fetchall()
        counts = {}
        for name, kind in names:
            only = "" if kind == "p" else "ONLY "
            cur.execute(f'SELECT count(*) FROM {only}"{schema}"."{name}"')
            counts[f"{schema}.{name}"] = cur.fetchone()[0]
    return counts


def without_headers(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records with their headers dropped: for a sink that keeps none (jsonl)."""
    return [{k: v for k, v in r.items() if k != "headers"} for r in records]
