"""The SQL workload shared by the golden samples (tests/golden/postgres) and the conformance test.

Every function takes an open psycopg2 connection; the functions switch it to autocommit (each
statement is its own transaction) unless they say otherwise. Order of use:

    create_schema(conn)            # DDL: extensions, enum, domains, tables (before any slot)
    create_publication(conn, pub)  # FOR ALL TABLES
    create_slot(conn, slot)        # one per consumer, all BEFORE the workload
    run_workload(conn)             # the DML; returns [(step name, [sql, ...]), ...]

All values are literals (no now(), no random()), so two runs give identical data.
"""

from __future__ import annotations

SCHEMA_SQL = [
    "CREATE EXTENSION IF NOT EXISTS hstore",
    "CREATE EXTENSION IF NOT EXISTS ltree",
    "CREATE EXTENSION IF NOT EXISTS citext",
    "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
    "CREATE DOMAIN posint AS integer CHECK (VALUE > 0)",
    "CREATE DOMAIN amount AS numeric(10,2)",
    """CREATE TABLE all_types (
        id serial PRIMARY KEY,
        c_bool boolean,
        c_bit1 bit(1),
        c_bit12 bit(12),
        c_varbit20 varbit(20),
        c_varbit varbit,
        c_int2 smallint,
        c_int4 integer,
        c_int8 bigint,
        c_bigserial bigserial,
        c_real real,
        c_double double precision,
        c_numeric numeric(10,3),
        c_numeric_noscale numeric,
        c_numeric_nan numeric,
        c_money money,
        c_char char(5),
        c_varchar varchar(20),
        c_text text,
        c_timestamptz timestamptz,
        c_timetz timetz,
        c_time0 time(0), c_time1 time(1), c_time2 time(2), c_time3 time(3),
        c_time4 time(4), c_time5 time(5), c_time6 time(6), c_time time,
        c_ts0 timestamp(0), c_ts1 timestamp(1), c_ts2 timestamp(2), c_ts3 timestamp(3),
        c_ts4 timestamp(4), c_ts5 timestamp(5), c_ts6 timestamp(6), c_ts timestamp,
        c_date date,
        c_interval interval,
        c_bytea bytea,
        c_json json,
        c_jsonb jsonb,
        c_xml xml,
        c_uuid uuid,
        c_point point,
        c_ltree ltree,
        c_citext citext,
        c_inet inet,
        c_cidr cidr,
        c_macaddr macaddr,
        c_macaddr8 macaddr8,
        c_int4range int4range,
        c_int8range int8range,
        c_numrange numrange,
        c_tsrange tsrange,
        c_tstzrange tstzrange,
        c_daterange daterange,
        c_enum mood,
        c_hstore hstore,
        c_int_arr integer[],
        c_text_arr text[],
        c_domain posint,
        c_domain_num amount,
        d_int integer NOT NULL DEFAULT 42,
        d_text text DEFAULT 'hello',
        d_varchar varchar(10) NOT NULL DEFAULT 'abc',
        d_bool boolean NOT NULL DEFAULT true,
        d_numeric numeric(5,2) DEFAULT 1.50,
        d_double double precision DEFAULT 2.5,
        d_date date DEFAULT '2020-02-29',
        d_ts timestamp DEFAULT '2020-01-01 12:34:56.789',
        d_tstz timestamptz DEFAULT '2020-01-01 12:34:56+00',
        d_enum mood DEFAULT 'ok',
        d_uuid uuid DEFAULT '00000000-0000-0000-0000-000000000001',
        d_bytea bytea DEFAULT '\\xdeadbeef',
        nn_text text NOT NULL DEFAULT ''
    )""",
    "CREATE TABLE items (id integer PRIMARY KEY, name text NOT NULL, qty integer DEFAULT 0)",
    "CREATE TABLE items_full (id integer PRIMARY KEY, name text, qty integer)",
    "ALTER TABLE items_full REPLICA IDENTITY FULL",
    "CREATE TABLE composite_pk (a integer, b varchar(10), v text, PRIMARY KEY (b, a))",
    "CREATE TABLE nopk (a integer, b text)",
    "ALTER TABLE nopk REPLICA IDENTITY FULL",
    "CREATE TABLE toasty (id integer PRIMARY KEY, small integer, big text)",
    "CREATE TABLE trunc_me (id integer PRIMARY KEY, v text)",
]

TABLES = ["all_types", "items", "items_full", "composite_pk", "nopk", "toasty", "trunc_me"]

ROW_FULL = """INSERT INTO all_types (
    c_bool, c_bit1, c_bit12, c_varbit20, c_varbit, c_int2, c_int4, c_int8, c_real, c_double,
    c_numeric, c_numeric_noscale, c_numeric_nan, c_money, c_char, c_varchar, c_text,
    c_timestamptz, c_timetz, c_time0, c_time1, c_time2, c_time3, c_time4, c_time5, c_time6, c_time,
    c_ts0, c_ts1, c_ts2, c_ts3, c_ts4, c_ts5, c_ts6, c_ts, c_date, c_interval, c_bytea,
    c_json, c_jsonb, c_xml, c_uuid, c_point, c_ltree, c_citext, c_inet, c_cidr, c_macaddr, c_macaddr8,
    c_int4range, c_int8range, c_numrange, c_tsrange, c_tstzrange, c_daterange, c_enum, c_hstore,
    c_int_arr, c_text_arr, c_domain, c_domain_num, d_int, d_text
) VALUES (
    true, B'1', B'101000000011', B'10110', B'1100110011', 32767, 2147483647, 9223372036854775807,
    3.14, 2.718281828459045,
    12345.678, 3.14159265358979, 'NaN', 12.34, 'ab', 'varchar', 'text',
    '2018-06-20 15:13:16.945104+02', '15:13:16.945104+02',
    '15:13:16.945104', '15:13:16.945104', '15:13:16.945104', '15:13:16.945104',
    '15:13:16.945104', '15:13:16.945104', '15:13:16.945104', '15:13:16.945104',
    '2018-06-20 15:13:16.945104', '2018-06-20 15:13:16.945104', '2018-06-20 15:13:16.945104',
    '2018-06-20 15:13:16.945104', '2018-06-20 15:13:16.945104', '2018-06-20 15:13:16.945104',
    '2018-06-20 15:13:16.945104', '2018-06-20 15:13:16.945104',
    '2018-06-20', '1 year 2 mons 3 days 04:05:06.78', '\\x0102ff',
    '{"a": 1, "b": [1, 2]}', '{"a": 1, "b": [1, 2]}', '<a><b>1</b></a>',
    'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '(1.5,2.5)', 'Top.Science.Astronomy', 'MixedCase',
    '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05',
    '[1,10)', '[1,100]', '(1.5,2.5]', '[2018-06-20 10:00,2018-06-21 10:00)',
    '[2018-06-20 10:00+00,2018-06-21 10:00+00)', '[2018-06-20,2018-06-25]', 'happy',
    'a=>1, "b c"=>"x y", n=>NULL', '{1,2,3}', '{"a","b c",NULL}', 7, 99.95, 1, 'set'
)"""

ROW_DEFAULTS = "INSERT INTO all_types DEFAULT VALUES"

ROW_EDGE = """INSERT INTO all_types (
    c_bool, c_bit1, c_bit12, c_varbit20, c_varbit, c_int2, c_int4, c_int8, c_real, c_double,
    c_numeric, c_numeric_noscale, c_numeric_nan, c_money, c_char, c_varchar, c_text,
    c_timestamptz, c_timetz, c_time0, c_time3, c_time6, c_time, c_ts0, c_ts3, c_ts6, c_ts,
    c_date, c_interval, c_bytea, c_json, c_jsonb, c_point, c_int4range, c_numrange, c_tsrange,
    c_daterange, c_hstore, c_int_arr, c_text_arr, c_domain_num, nn_text
) VALUES (
    false, B'0', B'000000000000', B'', B'1', -32768, -2147483648, -9223372036854775808,
    'NaN', '-Infinity',
    -0.001, 123456789012345678901234567890.123456789, 0, -1.5, '', 'héllo ✓', E'line1\\nline2 "q" \\\\',
    '1969-12-31 23:59:59.999999+00', '00:00:00+00', '23:59:59', '23:59:59.999', '23:59:59.999999',
    '00:00:00', '1969-12-31 23:59:59', '1969-12-31 23:59:59.999', '1969-12-31 23:59:59.999999',
    '1900-01-01 00:00:00', '1900-01-01', '-1 days -00:00:01.5', '\\x', '"scalar"', '[1, "a", null]',
    '(-1,0)', 'empty', '(,5)', '(,)', '[2020-01-01,2020-01-01]', '', '{}', '{}', -0.01, 'x'
)"""


def _big_text() -> str:
    # ~12.8 kB of md5 hex: not compressible below the TOAST threshold, so stored out of line
    return "(SELECT string_agg(md5(i::text), '') FROM generate_series(1, 400) AS i)"


# name -> list of statements; a list with "BEGIN" first is run as one transaction
STEPS: list[tuple[str, list[str]]] = [
    ("insert all_types (full row, defaults-only row, edge values)", [ROW_FULL, ROW_DEFAULTS, ROW_EDGE]),
    (
        "update all_types under REPLICA IDENTITY DEFAULT",
        ["UPDATE all_types SET c_text = 'changed', c_int4 = 1 WHERE id = 1"],
    ),
    (
        "switch all_types to REPLICA IDENTITY FULL; update and delete",
        [
            "ALTER TABLE all_types REPLICA IDENTITY FULL",
            "UPDATE all_types SET c_text = 'full', c_jsonb = '{\"z\": true}' WHERE id = 1",
            "DELETE FROM all_types WHERE id = 3",
            "ALTER TABLE all_types REPLICA IDENTITY DEFAULT",
        ],
    ),
    (
        "items: insert, update, delete (tombstone), primary key change",
        [
            "INSERT INTO items (id, name, qty) VALUES (1, 'one', 1), (2, 'two', 2), (3, 'three', 3)",
            "INSERT INTO items (id, name) VALUES (5, 'five default qty')",
            "UPDATE items SET name = 'ONE', qty = 11 WHERE id = 1",
            "DELETE FROM items WHERE id = 2",
            "UPDATE items SET id = 30, name = 'thirty' WHERE id = 3",
        ],
    ),
    (
        "items_full (REPLICA IDENTITY FULL): insert, update, delete, primary key change",
        [
            "INSERT INTO items_full VALUES (1, 'a', 1), (2, 'b', NULL)",
            "UPDATE items_full SET qty = 100 WHERE id = 1",
            "DELETE FROM items_full WHERE id = 2",
            "UPDATE items_full SET id = 10 WHERE id = 1",
        ],
    ),
    (
        "composite primary key: insert, update, delete",
        [
            "INSERT INTO composite_pk VALUES (1, 'x', 'v1'), (2, 'y', 'v2')",
            "UPDATE composite_pk SET v = 'v1b' WHERE a = 1",
            "DELETE FROM composite_pk WHERE a = 2",
        ],
    ),
    (
        "nopk (no primary key, REPLICA IDENTITY FULL): insert, update, delete",
        [
            "INSERT INTO nopk VALUES (1, 'x'), (2, NULL)",
            "UPDATE nopk SET b = 'y' WHERE a = 1",
            "DELETE FROM nopk WHERE a = 2",
        ],
    ),
    (
        "toasty: insert a >8 kB text, update another column (TOAST value unchanged), then update it",
        [
            "INSERT INTO toasty VALUES (1, 1, " + _big_text() + ")",
            "UPDATE toasty SET small = 2 WHERE id = 1",
            "UPDATE toasty SET big = 'short now', small = 3 WHERE id = 1",
        ],
    ),
    (
        "logical decoding messages: transactional and not",
        [
            "SELECT pg_logical_emit_message(false, 'tm-prefix', 'non-transactional content')",
            "BEGIN",
            "SELECT pg_logical_emit_message(true, 'tm-prefix', 'transactional content')",
            "INSERT INTO items (id, name) VALUES (7, 'with message')",
            "COMMIT",
        ],
    ),
    (
        "multi-statement transaction over three tables",
        [
            "BEGIN",
            "INSERT INTO items (id, name, qty) VALUES (40, 'tx a', 1)",
            "UPDATE items SET qty = 2 WHERE id = 40",
            "INSERT INTO items_full VALUES (41, 'tx b', 1)",
            "INSERT INTO composite_pk VALUES (42, 'tx', 'c')",
            "DELETE FROM items WHERE id = 5",
            "COMMIT",
        ],
    ),
    ("truncate", ["INSERT INTO trunc_me VALUES (1, 'x'), (2, 'y')", "TRUNCATE trunc_me"]),
    ("last marker row", ["INSERT INTO items (id, name) VALUES (999, 'end')"]),
]


# Conformance-only additions (the golden files were captured without them): replica identities
# NOTHING and USING INDEX, a key-less DEFAULT-identity table, and a relation that changes shape
# mid-stream. Without a replica identity PostgreSQL refuses UPDATE/DELETE on a table whose
# publication publishes them, so NOTHING / no-PK DEFAULT tables get inserts and a truncate.
EXTRA_SCHEMA_SQL = [
    "CREATE TABLE ri_nothing (id integer PRIMARY KEY, v text)",
    "ALTER TABLE ri_nothing REPLICA IDENTITY NOTHING",
    "CREATE TABLE ri_index (id integer PRIMARY KEY, code integer NOT NULL, v text)",
    "CREATE UNIQUE INDEX ri_index_code ON ri_index (code)",
    "ALTER TABLE ri_index REPLICA IDENTITY USING INDEX ri_index_code",
    "CREATE TABLE ri_index_nopk (code integer NOT NULL, name varchar(8) NOT NULL, v text)",
    "CREATE UNIQUE INDEX ri_index_nopk_code ON ri_index_nopk (name, code)",
    "ALTER TABLE ri_index_nopk REPLICA IDENTITY USING INDEX ri_index_nopk_code",
    "CREATE TABLE nopk_default (a integer, b text)",
    "CREATE TABLE evolving (id integer PRIMARY KEY, v text)",
    # required columns without a default: a DEFAULT-identity delete fills them with zero values
    "CREATE TABLE nn_zero (id integer PRIMARY KEY, f float8 NOT NULL, r real NOT NULL, n numeric(6,2) NOT NULL, "
    "b boolean NOT NULL, d date NOT NULL, ts timestamp NOT NULL, by bytea NOT NULL, tz timestamptz NOT NULL, "
    "t time NOT NULL, ttz timetz NOT NULL, nv numeric NOT NULL, iv interval NOT NULL, m money NOT NULL, "
    "u uuid NOT NULL, j jsonb NOT NULL)",
]

ZERO_FILL_STEP = "required columns without defaults, REPLICA IDENTITY DEFAULT: insert, delete"

EXTRA_STEPS: list[tuple[str, list[str]]] = [
    (
        "REPLICA IDENTITY NOTHING: inserts, truncate",
        ["INSERT INTO ri_nothing VALUES (1, 'a'), (2, 'b')", "TRUNCATE ri_nothing"],
    ),
    (
        "REPLICA IDENTITY USING INDEX (with a primary key): insert, update, key-index change, delete",
        [
            "INSERT INTO ri_index VALUES (1, 10, 'a'), (2, 20, 'b')",
            "UPDATE ri_index SET v = 'a2' WHERE id = 1",
            "UPDATE ri_index SET code = 11 WHERE id = 1",
            "UPDATE ri_index SET id = 3 WHERE id = 2",
            "DELETE FROM ri_index WHERE id = 1",
        ],
    ),
    (
        "REPLICA IDENTITY USING INDEX (no primary key): insert, update, index change, delete",
        [
            "INSERT INTO ri_index_nopk VALUES (1, 'x', 'a'), (2, 'y', 'b')",
            "UPDATE ri_index_nopk SET v = 'a2' WHERE code = 1",
            "UPDATE ri_index_nopk SET code = 5 WHERE code = 2",
            "DELETE FROM ri_index_nopk WHERE code = 1",
        ],
    ),
    (
        ZERO_FILL_STEP,
        [
            "INSERT INTO nn_zero VALUES (1, 1.5, 2.5, 3.25, true, '2024-01-02', '2024-01-02 03:04:05', '\\x01', "
            "'2024-01-02 03:04:05+00', '03:04:05', '03:04:05+02', 7.125, '1 day', 12.5, "
            "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{}')",
            "DELETE FROM nn_zero WHERE id = 1",
        ],
    ),
    (
        "no primary key, REPLICA IDENTITY DEFAULT: inserts",
        ["INSERT INTO nopk_default VALUES (1, 'x'), (2, NULL)"],
    ),
    (
        "relation change while streaming: ADD COLUMN, rows, DROP COLUMN, rows",
        [
            "INSERT INTO evolving VALUES (1, 'before')",
            "ALTER TABLE evolving ADD COLUMN extra integer NOT NULL DEFAULT 7, ADD COLUMN note varchar(5)",
            "INSERT INTO evolving VALUES (2, 'added', 8, 'n')",
            "UPDATE evolving SET v = 'upd' WHERE id = 1",
            "ALTER TABLE evolving DROP COLUMN v",
            "INSERT INTO evolving (id, extra) VALUES (3, 9)",
            "DELETE FROM evolving WHERE id = 2",
        ],
    ),
    (
        "temporal values with short fractions, early years, 24:00 (ISO/fixed-precision time modes)",
        [
            "INSERT INTO all_types (c_time3, c_time, c_ts3, c_ts, c_date, c_timestamptz, c_timetz) VALUES "
            "('10:00:00.12', '00:00:00.5', '2020-01-01 00:00:00.5', '0001-01-01 00:00:00.000010', '0001-01-01', "
            "'2020-01-01 00:00:00.25+00', '10:00:00.5+00')"
        ],
    ),
    ("last marker row", ["INSERT INTO items (id, name) VALUES (1000, 'end of extras')"]),
]


def create_schema(conn, *, extra: bool = False) -> None:
    execute_all(conn, SCHEMA_SQL + (EXTRA_SCHEMA_SQL if extra else []))


def execute_all(conn, statements: list[str]) -> None:
    """Each statement in autocommit (DDL of the PostGIS and skip-unchanged additions)."""
    conn.autocommit = True
    with conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)


def create_publication(conn, name: str, *, via_root: bool = False) -> None:
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (name,))
        if not cur.fetchone():
            opts = " WITH (publish_via_partition_root = true)" if via_root else ""
            cur.execute(f'CREATE PUBLICATION "{name}" FOR ALL TABLES{opts}')


def create_slot(conn, name: str) -> str:
    """Create a pgoutput logical slot; returns its consistent-point LSN."""
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT lsn::text FROM pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))
        return cur.fetchone()[0]


def drop_slot(conn, name: str) -> None:
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            "WHERE slot_name = %s AND NOT active",
            (name,),
        )


def run_steps(conn, steps: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    conn.autocommit = True
    with conn.cursor() as cur:
        for _name, stmts in steps:
            for sql in stmts:
                cur.execute(sql)
    return steps


def run_workload(conn, *, extra: bool = False) -> list[tuple[str, list[str]]]:
    """Run every step of STEPS (then EXTRA_STEPS with `extra`); returns them (for logging/README)."""
    return run_steps(conn, STEPS + (EXTRA_STEPS if extra else []))


def workload_sql() -> str:
    """The whole workload as a readable SQL script (schema first)."""
    lines = ["-- schema (run before the slots are created)"]
    lines += [s.strip() + ";" for s in SCHEMA_SQL]
    lines.append("CREATE PUBLICATION dbz_publication FOR ALL TABLES;")
    lines.append("SELECT pg_create_logical_replication_slot('<slot>', 'pgoutput');  -- one per capture")
    for name, stmts in STEPS:
        lines.append(f"\n-- {name}")
        lines += [s.strip() + ";" for s in stmts]
    return "\n".join(lines) + "\n"


# PostGIS (tests skip when the extension is not installed): geometry and geography columns with
# and without a declared type/SRID, arrays, Z coordinates, NULL, an update and a delete.
POSTGIS_SCHEMA_SQL = [
    "CREATE EXTENSION IF NOT EXISTS postgis",
    """CREATE TABLE geo (
        id integer PRIMARY KEY,
        g geometry,
        g_point_4326 geometry(Point, 4326),
        g_line geometry(LineString),
        gg geography,
        gg_poly geography(Polygon, 4326),
        g_arr geometry[],
        note text
    )""",
    "ALTER TABLE geo REPLICA IDENTITY FULL",
    # REPLICA IDENTITY DEFAULT: an update leaves an out-of-line (TOASTed) geometry unchanged
    "CREATE TABLE geo_toast (id integer PRIMARY KEY, shape geometry, n integer)",
]

POSTGIS_STEPS: list[tuple[str, list[str]]] = [
    (
        "geometry/geography: points, linestrings, polygons, with and without SRID, NULL",
        [
            "INSERT INTO geo VALUES (1, 'POINT(1 2)', 'SRID=4326;POINT(13.4 52.5)', 'LINESTRING(0 0, 1 1, 2 1)', "
            "'POINT(-71.06 42.36)', 'POLYGON((0 0, 1 0, 1 1, 0 1, 0 0))', "
            "ARRAY['POINT(1 1)'::geometry, 'SRID=3857;POINT(2 2)'::geometry], 'all set')",
            "INSERT INTO geo VALUES (2, 'SRID=3857;POLYGON((0 0, 10 0, 10 10, 0 10, 0 0), (2 2, 3 2, 3 3, 2 2))', "
            "NULL, NULL, 'SRID=4326;LINESTRING(-122.33 47.61, -122.42 37.77)', NULL, NULL, 'polygon with hole')",
            "INSERT INTO geo VALUES (3, 'POINT Z(1 2 3)', NULL, 'LINESTRING EMPTY', 'MULTIPOINT((0 0), (1 1))', "
            "NULL, '{}', 'z, empty, multi')",
            "INSERT INTO geo (id, note) VALUES (4, 'all null')",
            "INSERT INTO geo VALUES (5, 'GEOMETRYCOLLECTION(POINT(1 1), LINESTRING(0 0, 1 1))', "
            "'SRID=4326;POINT(0 0)', NULL, NULL, NULL, NULL, 'collection')",
            "UPDATE geo SET g = 'SRID=4326;POINT(9 9)', note = 'moved' WHERE id = 1",
            "DELETE FROM geo WHERE id = 2",
        ],
    ),
    (
        "a TOASTed geometry left unchanged by an update",
        [
            "ALTER TABLE geo_toast ALTER COLUMN shape SET STORAGE EXTERNAL",
            "INSERT INTO geo_toast SELECT 1, ST_MakeLine(array_agg(ST_MakePoint(i, i * 2) ORDER BY i)), 1 "
            "FROM generate_series(1, 600) AS i",
            "UPDATE geo_toast SET n = 2 WHERE id = 1",
            "UPDATE geo_toast SET shape = 'POINT(0 0)', n = 3 WHERE id = 1",
        ],
    ),
    ("last marker row", ["INSERT INTO geo (id, note) VALUES (999, 'end')"]),
]


# skip.messages.without.change with column filters, masks and truncation: updates that change only
# excluded columns, no-op updates, changes hidden by a mask or a truncation, a TOASTed column left
# unchanged under REPLICA IDENTITY FULL, and DEFAULT-identity tables (no `before` to compare).
SKIP_SCHEMA_SQL = [
    "CREATE TABLE sk_full (id integer PRIMARY KEY, x text, ign text, m text, tr text, big text)",
    "ALTER TABLE sk_full REPLICA IDENTITY FULL",
    "ALTER TABLE sk_full ALTER COLUMN big SET STORAGE EXTERNAL",
    "CREATE TABLE sk_default (id integer PRIMARY KEY, x text, ign text)",
]

SKIP_PROPS = {
    "column.exclude.list": r"public\.sk_full\.ign,public\.sk_default\.ign",
    "column.mask.with.3.chars": r"public\.sk_full\.m",
    "column.truncate.to.2.chars": r"public\.sk_full\.tr",
}

SKIP_STEPS: list[tuple[str, list[str]]] = [
    (
        "updates that change captured columns, and updates that do not",
        [
            "INSERT INTO sk_full VALUES (1, 'x1', 'i1', 'aaa', 'abc', " + _big_text() + ")",
            "UPDATE sk_full SET ign = 'i2' WHERE id = 1",
            "UPDATE sk_full SET x = 'x2' WHERE id = 1",
            "UPDATE sk_full SET x = x WHERE id = 1",
            "UPDATE sk_full SET m = 'bbb' WHERE id = 1",
            "UPDATE sk_full SET tr = 'abd' WHERE id = 1",
            "UPDATE sk_full SET big = 'small now', ign = 'i3' WHERE id = 1",
            "UPDATE sk_full SET ign = 'i4' WHERE id = 1",
            "INSERT INTO sk_default VALUES (1, 'x', 'i')",
            "UPDATE sk_default SET ign = 'i2' WHERE id = 1",
            "UPDATE sk_default SET x = x WHERE id = 1",
            "UPDATE sk_full SET id = 2, ign = 'i5' WHERE id = 1",
            "DELETE FROM sk_default WHERE id = 1",
        ],
    ),
    ("last marker row", ["INSERT INTO sk_default VALUES (999, 'end', 'end')"]),
]


# Names Avro does not allow (schema.name.adjustment.mode / field.name.adjustment.mode): a table
# and columns with '-', a leading digit, '.', a non-ASCII letter and a leading/inner '_'.
NAMES_SCHEMA_SQL = [
    'CREATE TABLE "odd-name" ("1st" integer PRIMARY KEY, "a-b" text, "_u" text, "x.y" text, "héllo" text, '
    '"Ok_9" text)',
    'CREATE TABLE "9lives" (id integer PRIMARY KEY, "snake_case" text)',
]

NAMES_STEPS: list[tuple[str, list[str]]] = [
    (
        "rows in tables with names Avro does not allow",
        [
            "INSERT INTO \"odd-name\" VALUES (1, 'ab', 'u', 'xy', 'hé', 'ok')",
            'UPDATE "odd-name" SET "a-b" = \'changed\' WHERE "1st" = 1',
            "INSERT INTO \"9lives\" VALUES (1, 's')",
            'DELETE FROM "odd-name" WHERE "1st" = 1',
        ],
    ),
    ("last marker row", ["INSERT INTO \"9lives\" VALUES (999, 'end')"]),
]


# A partitioned table (publish.via.partition.root): rows land in two partitions, one moves
# between them (delete + insert in pgoutput), one is updated in place.
PARTITION_SCHEMA_SQL = [
    "CREATE TABLE meas (id integer, city text, v integer, PRIMARY KEY (id, city)) PARTITION BY LIST (city)",
    "CREATE TABLE meas_a PARTITION OF meas FOR VALUES IN ('a')",
    "CREATE TABLE meas_b PARTITION OF meas FOR VALUES IN ('b')",
    "CREATE TABLE plain (id integer PRIMARY KEY)",
]

PARTITION_STEPS: list[tuple[str, list[str]]] = [
    (
        "rows in two partitions, an update in place, a move between partitions, a delete",
        [
            "INSERT INTO meas VALUES (1, 'a', 10), (2, 'b', 20)",
            "UPDATE meas SET v = 11 WHERE id = 1",
            "UPDATE meas SET city = 'b' WHERE id = 1",
            "DELETE FROM meas WHERE id = 2",
        ],
    ),
    ("last marker row", ["INSERT INTO plain VALUES (999)"]),
]


# Types Debezium has no mapping for (issue 8 #12): a composite type, multiranges (PostgreSQL 14+),
# an array of a composite and a domain over a composite. Debezium leaves such a column out, or
# sends its text as bytes with include.unknown.datatypes=true.
UNKNOWN_SCHEMA_SQL = [
    "CREATE TYPE pair AS (a integer, b text)",
    "CREATE DOMAIN pair_dom AS pair",
    """CREATE TABLE odd_types (
        id integer PRIMARY KEY,
        c_pair pair,
        c_pair_arr pair[],
        c_pair_dom pair_dom,
        c_int4multirange int4multirange,
        c_datemultirange datemultirange,
        c_nummultirange nummultirange,
        c_text text)""",
    "CREATE TABLE plain (id integer PRIMARY KEY)",
]

UNKNOWN_STEPS: list[tuple[str, list[str]]] = [
    (
        "composite and multirange columns: insert, update, delete, nulls",
        [
            "INSERT INTO odd_types VALUES (1, ROW(1, 'x'), ARRAY[ROW(2, 'y')::pair], ROW(3, 'z'), "
            "'{[1,3), [5,7)}', '{[2024-01-01,2024-02-01)}', '{[1.5,2.5]}', 't')",
            "INSERT INTO odd_types (id, c_text) VALUES (2, 'nulls')",
            "UPDATE odd_types SET c_pair = ROW(9, 'q'), c_text = 'u' WHERE id = 1",
            "DELETE FROM odd_types WHERE id = 2",
        ],
    ),
    ("last marker row", ["INSERT INTO plain VALUES (999)"]),
]
