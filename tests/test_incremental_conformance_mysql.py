"""Conformance: Tidemark's MySQL incremental snapshot emits what Debezium 3.6's MySQL connector emits.

The server is the private MariaDB that announces itself as MySQL 5.7 (Debezium's MySQL connector
refuses MariaDB 10.11; see tests/test_conformance_mysql.py). A new database with the MySQL
conformance tables and rows (tests/conformance/mysql/workload.py) and a signal table; then
Debezium 3.6 (`snapshot.mode=no_data`) and `tidemark run` (`connector.class=mysql`) each start
with an `execute-snapshot` signal waiting in their own signal file (`signal.enabled.channels=
source,file`: the signal is read once streaming runs, whatever the start takes), snapshot every
table with a primary key in chunks of 2 (watermarks in the signal table, read back from the
binlog), and their `op: r` records are compared as tests/incremental_conformance.py says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cdc
import orjson
import pytest
from conformance.mysql import workload
from incremental import SIGNAL_DDL
from incremental_conformance import CHUNK, assert_reads_conform, debezium_reads, tidemark_reads

from connectors.app.embedded.mariadb import MariaDbServer


def _keyed_tables(server: MariaDbServer, db: str) -> dict[str, int]:
    """`<db>.<table>` -> rows, for the base tables with a primary key (but the signal table)."""
    names = [
        str(r[0])
        for r in server.query(
            "SELECT TABLE_NAME FROM information_schema.TABLE_CONSTRAINTS WHERE TABLE_SCHEMA = %s "
            "AND CONSTRAINT_TYPE = 'PRIMARY KEY' AND TABLE_NAME <> 'debezium_signal' ORDER BY 1",
            (db,),
        )
    ]
    return {f"{db}.{n}": int(server.query(f"SELECT COUNT(*) FROM `{db}`.`{n}`")[0][0]) for n in names}


def _signal_file(path: Path, tables: dict[str, int]) -> Path:
    data = {"data-collections": sorted(tables), "type": "incremental"}
    path.write_text(orjson.dumps({"id": "conf-1", "type": "execute-snapshot", "data": data}).decode() + "\n")
    return path


@pytest.mark.debezium
@pytest.mark.mariadb
def test_incremental_snapshot_matches_debezium(
    mysql57: MariaDbServer, unique_name: Any, tmp_path: Path
) -> None:
    db = mysql57.create_database(unique_name("inc"))
    workload.execute(mysql57, db, [workload.SCHEMA_SQL, *workload.STEPS, [SIGNAL_DDL]])
    tables = _keyed_tables(mysql57, db)
    expected = sum(tables.values())
    assert expected > 10, tables
    source = {
        **mysql57.props(),
        "topic.prefix": "dbz",
        "snapshot.mode": "no_data",
        "skipped.operations": "none",
        "database.include.list": db,
        "signal.data.collection": f"{db}.debezium_signal",
        "signal.enabled.channels": "source,file",
        "incremental.snapshot.chunk.size": str(CHUNK),
    }
    dbz = debezium_reads(
        {
            **source,
            "connector.class": "io.debezium.connector.mysql.MySqlConnector",
            "name": "dbz-inc",
            "database.server.id": str(unique_name.server_id()),
            "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
            "schema.history.internal.file.filename": str(tmp_path / "dbz-history.dat"),
            "signal.file": str(_signal_file(tmp_path / "dbz-signals.txt", tables)),
        },
        tmp_path / "debezium.jsonl",
        expected,
    )
    out, warehouse = tmp_path / "tidemark.jsonl", tmp_path / "warehouse"
    config = cdc.write_config(
        tmp_path / "tidemark.properties",
        {
            "connector.class": "mysql",
            "name": "tm-inc",
            **source,
            "database.server.id": str(unique_name.server_id()),
            "signal.file": str(_signal_file(tmp_path / "tm-signals.txt", tables)),
        },
        jsonl=out,
        warehouse=warehouse,
        signal__poll__interval__ms="200",
        notification__enabled__channels="log,delta",
    )
    tm = tidemark_reads(config, "tm-inc", out, warehouse, expected)
    assert_reads_conform(dbz, tm, tables)
