"""The MySQL/MariaDB conformance workload (tests/test_conformance_mysql.py): the tables, then the
steps of statements run after both Debezium and Tidemark have taken their start position.

A new case: its table in SCHEMA_SQL, its statements in a step of STEPS (each step runs in
autocommit, one transaction per statement unless the step opens one with BEGIN). All values are
literals, so two runs give identical data.
"""

from __future__ import annotations

from typing import Any

SCHEMA_SQL = [
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
    "CREATE TABLE marker (id INT PRIMARY KEY)",  # see _debezium_start in the test
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


def execute(server: Any, db: str, steps: list[list[str]]) -> None:
    """Run every statement of `steps` in order on `db` (autocommit)."""
    conn = server.connect(database=db)
    try:
        with conn.cursor() as cur:
            for step in steps:
                for stmt in step:
                    cur.execute(stmt)
    finally:
        conn.close()
