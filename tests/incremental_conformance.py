"""What the incremental snapshot conformance tests share (tests/test_incremental_conformance_*.py):
Debezium 3.6 and `tidemark run` each stream the same database, read the same `execute-snapshot`
signal and snapshot the same tables in small chunks; their `op: r` records are compared per topic
(keys, values with their schemas, and the order of the rows: both read chunks by primary key).

Masked: the processing times (tests/conformance/normalize.py) and the fields that say where each
side's watermarks landed in the log, which differ by construction (`POSITION`); a field that is
null on one side must be null on the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import cdc
from conformance.debezium import run_debezium
from conformance.normalize import by_topic, diff_records, normalize_record
from harness import wait_until
from incremental import INCREMENTAL

from connectors.signals.notify import read_notifications

CHUNK = 2  # several chunks per table: the chunk boundaries must match too
POSITION = ("lsn", "txId", "sequence", "xmin", "file", "pos", "row", "gtid", "server_id", "thread")


def comparable(rec: dict[str, Any]) -> dict[str, Any]:
    out = normalize_record(rec)
    out.pop("headers")  # the jsonl sink keeps no headers; the streaming conformance checks them
    src = out["value"]["payload"]["source"]
    for k in POSITION:
        if src.get(k) is not None:
            src[k] = f"<{k}>"
    if "gtid" in src:
        # Debezium's MySQL connector does not read MariaDB's GTID events (null on its side of
        # the 5.7-announcing server; tests/test_conformance_mysql.py does the same)
        src["gtid"] = None
    return out


def reads(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        comparable(r)
        for r in records
        if isinstance(r.get("value"), dict) and r["value"].get("payload", {}).get("op") == "r"
    ]


def debezium_reads(props: Mapping[str, object], out: Path, expected: int) -> list[dict[str, Any]]:
    """Debezium streaming with `props` until `expected` rows were snapshotted (then 2 quiet s)."""
    got = reads(
        run_debezium(
            dict(props),
            out,
            until_reads=expected,
            idle=60.0,  # only the fallback: a loaded machine pauses between chunks
            timeout=300.0,
            first_record_timeout=120.0,
            allow_fewer=True,
        )
    )
    assert len(got) == expected, f"Debezium's incremental snapshot emitted {len(got)} rows, not {expected}"
    return got


def tidemark_reads(
    config: Path, name: str, out: Path, warehouse: Path, expected: int
) -> list[dict[str, Any]]:
    """`tidemark run` on `config` until its snapshot sent COMPLETED and `expected` rows are in `out`."""
    log = out.with_suffix(".log")
    proc = cdc.popen_cli("run", "--config", str(config), log=log)
    try:

        def completed() -> bool:
            assert proc.poll() is None, f"tidemark exited {proc.returncode}: {log.read_text()[-3000:]}"
            done = [
                n
                for n in read_notifications(warehouse, name)
                if n["aggregate_type"] == INCREMENTAL and n["type"] == "COMPLETED"
            ]
            return bool(done) and out.exists() and len(reads(cdc.read_jsonl(out))) >= expected

        wait_until(completed, 300, f"Tidemark's incremental snapshot completed (log {log})")
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(90)
    got = reads(cdc.read_jsonl(out))
    assert len(got) == expected
    return got


def assert_reads_conform(
    dbz: list[dict[str, Any]], tm: list[dict[str, Any]], tables: Mapping[str, int]
) -> None:
    assert all(r["value"]["payload"]["source"]["snapshot"] == "incremental" for r in dbz + tm)
    assert len(by_topic(dbz)) == len([t for t, n in tables.items() if n])
    problems = diff_records(dbz, tm)
    assert not problems, "\n".join(problems)
