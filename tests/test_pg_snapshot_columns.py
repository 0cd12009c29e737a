"""Snapshot reads (connectors/sources/postgres/snapshot_read.py): the key/after JSON built
column-wise from Arrow batches is byte for byte what streaming emits for the same rows.

The streaming side is `TableSchema.row(raw)` / `.key(raw)` on the values' text as the server's
output functions give it (what pgoutput sends), read here through psycopg2 without type casting,
serialized by orjson as the sinks do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import orjson
import psycopg2
import psycopg2.extensions
import pyarrow as pa
import pytest
from cfgutil import config
from conformance.postgres.workload import EXTRA_SCHEMA_SQL, ROW_DEFAULTS, ROW_EDGE, ROW_FULL, SCHEMA_SQL
from harness import contrib_available

from connectors.api import TerminalError
from connectors.format.topics import TopicNamer
from connectors.settings.filters import ColumnRules, TableFilters
from connectors.sources.postgres import connection, pgoutput
from connectors.sources.postgres.snapshot_read import SnapshotColumns, conninfo, read_batches
from connectors.sources.postgres.tables import TableCache

pytestmark = pytest.mark.skipif(
    not contrib_available(), reason="needs postgresql-contrib (hstore, ltree, citext)"
)

SESSION = "-c TimeZone=UTC -c DateStyle=ISO -c IntervalStyle=postgres -c extra_float_digits=3"

# Edge values beyond the workload's rows, one table per concern.
EDGE_SQL = [
    """CREATE TABLE edge_num (
        id integer PRIMARY KEY, n10_2 numeric(10,2), n18 numeric(18,0), n38_10 numeric(38,10),
        n5_0 numeric(5,0), n12_8 numeric(12,8), nv numeric, f8 float8, f4 real, m money)""",
    """INSERT INTO edge_num VALUES
        (1, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        (2, -0.01, -1, -0.0000000001, -99999, -0.00000001, -0.0000001, -0.0, -0.0, -0.01),
        (3, 99999999.99, 999999999999999999, 9999999999999999999999999999.9999999999, 99999, 9999.99999999,
            123456789012345678901234567890.123456789, 1.7976931348623157e308, 3.4028235e38, 92233720368547758.07),
        (4, -99999999.99, -999999999999999999, -1234567890123456789.0123456789, 128, 0.00000128,
            1e-20, 5e-324, 1.4e-45, -92233720368547758.08),
        (5, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
        (6, 1.5, 127, 0.5, -128, 1, 'NaN', 'NaN', 'NaN', 1),
        (7, -128, -128, -129, 255, -0.5, 'Infinity', 'Infinity', 'Infinity', 2),
        (8, 32768, 32767, 1, -256, 0.1, '-Infinity', '-Infinity', '-Infinity', 3),
        (9, 0.1, 9007199254740993, 0.1, 7, 0.00000001, 100, 1e16, 1e16, 4),
        (10, 0.07, -9007199254740993, 10, 8, 12.5, 100.500, 1e-7, 1e-7, 5),
        (11, 12.30, 1, 12.3, 9, 3.14159265, 0.000001, 123456789.123, 0.1, 6),
        (12, 1, 2, 3, 4, 5, 1e17, 0.1, 16777217, 7)""",
    """CREATE TABLE edge_time (
        id integer PRIMARY KEY, tz timestamptz, tz0 timestamptz(0), tz1 timestamptz(1), tz3 timestamptz(3),
        tz5 timestamptz(5), ts timestamp, ts0 timestamp(0), ts3 timestamp(3), d date, t time, t0 time(0),
        t3 time(3), ttz timetz, iv interval)""",
    """INSERT INTO edge_time VALUES
        (1, '1970-01-01 00:00:00+00', '1970-01-01 00:00:00+00', '1970-01-01 00:00:00.1+00',
            '1970-01-01 00:00:00.123+00', '1970-01-01 00:00:00.12345+00', '1970-01-01 00:00:00',
            '1970-01-01', '1970-01-01 00:00:00.001', '1970-01-01', '00:00:00', '00:00:00', '00:00:00.001',
            '00:00:00+00', '0'),
        (2, '1969-12-31 23:59:59.999999+00', '1969-12-31 23:59:59+00', '1969-12-31 23:59:59.9+00',
            '1969-12-31 23:59:59.999+00', '1969-12-31 23:59:59.99999+00', '1969-12-31 23:59:59.999999',
            '1969-12-31 23:59:59', '1969-12-31 23:59:59.999', '1969-12-31', '23:59:59.999999', '23:59:59',
            '23:59:59.999', '23:59:59.999999-05:30', '-1 days -00:00:01.5'),
        (3, '9999-12-31 23:59:59.999999+00', '9999-12-31 23:59:59+00', '9999-12-31 23:59:59.9+00',
            '9999-12-31 23:59:59.999+00', '9999-12-31 23:59:59.99999+00', '9999-12-31 23:59:59.999999',
            '9999-12-31 23:59:59', '9999-12-31 23:59:59.999', '9999-12-31', '24:00:00', '24:00:00',
            '24:00:00', '24:00:00+00', '10000 years'),
        (4, '1900-06-15 12:00:00.5+00', '0999-01-01 00:00:00+00', '0001-01-01 00:00:00+00',
            '1000-01-01 00:00:00+00', '10000-01-01 00:00:00+00', '0044-03-15 12:00:00 BC',
            '0999-12-31 23:59:59', '1000-01-01 00:00:00', '0044-03-15 BC', '12:34:56.5', '12:34:56',
            '12:34:56.5', '12:34:56.5+02', '1 year 2 mons 3 days 04:05:06.78'),
        (5, 'infinity', '-infinity', NULL, NULL, NULL, 'infinity', '-infinity', NULL, 'infinity', NULL,
            NULL, NULL, NULL, NULL),
        (6, '-infinity', 'infinity', NULL, NULL, NULL, '-infinity', 'infinity', NULL, '-infinity', NULL,
            NULL, NULL, NULL, NULL),
        (7, '2262-04-11 23:47:16.854776+00', '1677-09-21 00:12:43+00', '2018-06-20 15:13:16.9+02', NULL, NULL,
            '2262-04-11 23:47:16.854776', '1677-09-21 00:12:43', '1677-09-21 00:12:43.145', '2000-02-29',
            '15:13:16.945104', '15:13:16', '15:13:16.945', '15:13:16.945104+02', '-3 mons'),
        (8, '2000-01-01 00:00:00.000001+00', '2000-01-01 00:00:01+00', '2000-01-01 00:00:00.5+00',
            '2000-01-01 00:00:00.01+00', '2000-01-01 00:00:00.00001+00', '2000-01-01 00:00:00.000001',
            '2000-01-01 00:00:01', '2000-01-01 00:00:00.01', '4713-01-01 BC', '00:00:00.000001',
            '00:00:01', '00:00:00.01', '00:00:00.000001+14', '1 day'),
        (9, '294276-12-31 23:59:59.999999+00', '294276-01-01 00:00:00+00', '4713-01-01 00:00:00 BC', NULL, NULL,
            '294276-12-31 23:59:59.999999', '294247-01-10 04:00:54', '294247-01-10 04:00:54.776', '5874897-12-31',
            NULL, NULL, NULL, NULL, NULL)""",
    """CREATE TABLE edge_text (
        id integer PRIMARY KEY, t text, v varchar(30), c char(4), b bytea, j jsonb, js json, u uuid,
        e mood, x xml, ci citext, h hstore)""",
    """INSERT INTO edge_text VALUES
        (1, '', '', '', '\\x', '{}', '{}', '00000000-0000-0000-0000-000000000000', 'sad', '', '', ''),
        (2, E'q"uo\\\\te\\ttab\\nnl\\rcr\\bbs\\ffeed', E'\\x01\\x02\\x1f\\x7f', 'a"', '\\x00ff',
            '{"k": "v\\"q", "n": null, "u": "\\u00e9"}', '{"b":1,  "a":[1, 2]}',
            'ffffffff-ffff-ffff-ffff-ffffffffffff', 'happy', '<a>&amp;</a>', 'ÀB', 'k=>"v\\"q", "a b"=>NULL'),
        (3, 'héllo ✓ 😀 \u2028 \u2029 /slash', 'ünïcödé', 'ü', '\\x0102ff80', '[1, "a", null, 1.50]',
            '"scalar"', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'ok', '<r/>', 'MiXeD', 'a=>1'),
        (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
        (5, repeat('x', 10000), 'end', 'abcd', decode(repeat('ab', 1000), 'hex'), '1', 'null',
            '00000000-0000-0000-0000-000000000001', 'sad', 'text', 'z', '"x"=>"y"')""",
    """CREATE TABLE edge_misc (
        id integer PRIMARY KEY, bo boolean, i2 smallint, i8 bigint, ip inet, cidr cidr, pt point,
        ia integer[], ta text[], r int4range, bit1 bit(1), vb varbit, lt ltree, ts tsvector,
        gen integer GENERATED ALWAYS AS (id * 2) STORED, nn_def text NOT NULL DEFAULT 'd')""",
    """INSERT INTO edge_misc (id, bo, i2, i8, ip, cidr, pt, ia, ta, r, bit1, vb, lt, ts) VALUES
        (1, true, -32768, -9223372036854775808, '192.168.0.1', '10.0.0.0/8', '(0,0)', '{}', '{}', 'empty',
            B'0', B'', 'a', ''),
        (2, false, 32767, 9223372036854775807, '192.168.0.1/24', '10.1.0.0/16', '(-1.5,2e10)', '{1,NULL,3}',
            '{"a,b","c\\"d",NULL}', '[1,5)', B'1', B'1010', 'a.b.c', 'a fat cat'),
        (3, NULL, NULL, NULL, '::1', '::/0', NULL, '{{1,2},{3,4}}', '{""}', '(,)', NULL, NULL, NULL, NULL)""",
    "CREATE TABLE edge_nopk (a integer, b text)",
    "INSERT INTO edge_nopk VALUES (1, 'x'), (NULL, NULL)",
    'CREATE TABLE edge_odd ("Odd ""Name" integer PRIMARY KEY, "x.y" text, "héllo" numeric(4,1))',
    "INSERT INTO edge_odd VALUES (1, 'a', 1.5), (2, NULL, -0.5)",
]

# A few thousand pseudo-random rows (fixed seed) across the magnitudes the vectorised paths split on.
RANDOM_SQL = [
    """CREATE TABLE rnd (id integer PRIMARY KEY, n10_2 numeric(10,2), n18_4 numeric(18,4), n30_6 numeric(30,6),
        nv numeric, f8 float8, f4 real, tz timestamptz, ts timestamp(3), d date, t time, s text, b bytea)""",
    "SELECT setseed(0.42)",
    """INSERT INTO rnd SELECT i,
        round(((random() - 0.5) * 10 ^ (random() * 8))::numeric, 2),
        round(((random() - 0.5) * 10 ^ (random() * 14))::numeric, 4),
        round(((random() - 0.5) * 10 ^ (random() * 24))::numeric, 6),
        round(((random() - 0.5) * 10 ^ (random() * 30 - 10))::numeric, (random() * 20)::int),
        (random() - 0.5) * 10 ^ (random() * 600 - 300),
        ((random() - 0.5) * 10 ^ (random() * 70 - 35))::real,
        timestamptz '1970-01-01 00:00:00+00' + (random() - 0.5) * interval '200000 days',
        timestamp '1970-01-01' + (random() - 0.5) * interval '100000 days',
        date '2000-01-01' + ((random() - 0.5) * 300000)::int,
        time '00:00' + random() * interval '24 hours',
        (SELECT string_agg(chr((1 + random() * 160)::int), '') FROM generate_series(1, (random() * 40)::int)
            WHERE i > 0),
        decode(md5(i::text), 'hex')
        FROM generate_series(1, 3000) AS i""",
]

TABLES = [
    "all_types",
    "items",
    "composite_pk",
    "nopk",
    "nn_zero",
    "ri_index_nopk",
    "edge_num",
    "edge_time",
    "edge_text",
    "edge_misc",
    "edge_nopk",
    "edge_odd",
    "rnd",
]

VARIANTS: dict[str, dict[str, str]] = {
    "defaults": {},
    "decimal-double": {"decimal.handling.mode": "double"},
    "decimal-string": {"decimal.handling.mode": "string"},
    "time-adaptive-us": {"time.precision.mode": "adaptive_time_microseconds"},
    "time-connect": {"time.precision.mode": "connect"},
    "time-isostring": {"time.precision.mode": "isostring"},
    "time-micro": {"time.precision.mode": "microseconds"},
    "time-nano": {"time.precision.mode": "nanoseconds"},
    "binary-base64": {"binary.handling.mode": "base64"},
    "binary-urlsafe": {"binary.handling.mode": "base64-url-safe"},
    "binary-hex": {"binary.handling.mode": "hex"},
    "interval-string": {"interval.handling.mode": "string"},
    "hstore-map": {"hstore.handling.mode": "map"},
    "mappers": {
        "column.mask.with.5.chars": r"public\.edge_text\.t,public\.all_types\.c_varchar",
        "column.truncate.to.3.chars": r"public\.edge_text\.v,public\.rnd\.s",
        "column.mask.hash.SHA-256.with.salt.s1": r"public\.edge_text\.ci",
        "message.key.columns": "public.edge_nopk:a",
        "field.name.adjustment.mode": "avro",
        "column.exclude.list": r"public\.all_types\.c_bit12",
    },
}


@pytest.fixture(scope="module")
def db(pg: Any) -> Iterator[str]:
    name = pg.create_database("snapcols")
    with contextlib.closing(pg.connect(dbname=name)) as conn, conn.cursor() as cur:
        for stmt in SCHEMA_SQL + EXTRA_SCHEMA_SQL + [ROW_FULL, ROW_DEFAULTS, ROW_EDGE]:
            cur.execute(stmt)
        cur.execute(
            "INSERT INTO nn_zero VALUES (1, 'NaN', '-Infinity', -0.5, false, '1969-12-31', '1969-12-31 23:59:59.5', "
            "'\\x', '1969-12-31 23:59:59.5+00', '23:59:59.5', '23:59:59.5+01', 'NaN', '-1 mon', -0.01, "
            "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"a\": [1, 2.5e3]}')"
        )
        for stmt in [
            "INSERT INTO items VALUES (1, 'one', 1), (2, 'two', NULL)",
            "INSERT INTO composite_pk VALUES (1, 'x', 'v1'), (2, 'y', NULL)",
            "INSERT INTO nopk VALUES (1, 'x'), (NULL, NULL)",
            "INSERT INTO ri_index_nopk VALUES (1, 'a', 'v'), (2, 'b', NULL)",
            *EDGE_SQL,
            *RANDOM_SQL,
        ]:
            cur.execute(stmt)
    try:
        yield name
    finally:
        if pg.is_running():
            pg.drop_database(name)


def _cfg(pg: Any, db: str, props: dict[str, str]) -> Any:
    return config("postgres", {**pg.props(**{"database.dbname": db}), **props})


@contextlib.contextmanager
def _cache(cfg: Any) -> Iterator[TableCache]:
    src = cfg.source
    conn = connection.connect(connection.PgConnParams.from_settings(src))
    try:
        yield TableCache(
            conn,
            cfg,
            TopicNamer.from_settings(src),
            TableFilters.from_settings(src),
            ColumnRules.from_settings(src),
        )
    finally:
        conn.close()


def _raw_rows(pg: Any, db: str, table: str) -> list[list[Any]]:
    """Every row's values as the server's output functions print them (what pgoutput sends), in
    relation order, without generated columns."""
    with contextlib.closing(pg.connect(dbname=db, options=SESSION)) as conn, conn.cursor() as cur:
        cur.execute("SELECT oid FROM pg_type")
        all_oids = tuple(r[0] for r in cur.fetchall())
        psycopg2.extensions.register_type(psycopg2.extensions.new_type(all_oids, "RAW", lambda v, c: v), conn)
        cur.execute(
            "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = ''",
            (table,),
        )
        cols = cur.fetchone()[0]
        cur.execute(f"SELECT {cols} FROM {table} ORDER BY ctid")
        return [list(r) for r in cur.fetchall()]


def _snapshot_json(
    cfg: Any, cache: TableCache, table: str, fetch_rows: int
) -> tuple[list[Any], list[str], Any]:
    found = cache.for_table_with_columns("public", table)
    assert found is not None
    ts, cols = found
    sc = SnapshotColumns(ts, cols, cache.registry, cache.modes)
    sql = f"SELECT {sc.select_list()} FROM public.{table} ORDER BY ctid"
    keys: list[Any] = []
    afters: list[str] = []
    for batch in read_batches(conninfo(cfg.source), sql, snapshot=None, fetch_rows=fetch_rows):
        assert batch.num_rows <= fetch_rows
        key, after = sc.encode(batch)
        assert after.type == pa.string()
        afters += after.to_pylist()
        keys += key.to_pylist() if key is not None else [None] * batch.num_rows
    return keys, afters, ts


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_snapshot_values_equal_streaming_values(pg: Any, db: str, variant: str) -> None:
    cfg = _cfg(pg, db, VARIANTS[variant])
    with _cache(cfg) as cache:
        for table in TABLES:
            raw = _raw_rows(pg, db, table)
            keys, afters, ts = _snapshot_json(cfg, cache, table, fetch_rows=1000)
            assert len(afters) == len(raw), table
            for i, row in enumerate(raw):
                want_after = ts.row(row)
                want_key = ts.key(row)
                where = f"{variant} {table} row {i + 1}"
                assert orjson.loads(afters[i]) == want_after, where
                # byte for byte: what the sinks write for the streamed row
                assert afters[i] == orjson.dumps(want_after).decode(), where
                if want_key is None:
                    assert keys[i] is None, where
                else:
                    assert keys[i] == orjson.dumps(want_key).decode(), where


def test_fast_paths_cover_the_common_types(pg: Any, db: str) -> None:
    """The benchmark's types (and the other natively read ones) never go value by value."""
    cfg = _cfg(pg, db, {})
    with _cache(cfg) as cache:
        found = cache.for_table_with_columns("public", "rnd")
        assert found is not None
        sc = SnapshotColumns(found[0], found[1], cache.registry, cache.modes)
        assert sc.fallback_columns == []
        found = cache.for_table_with_columns("public", "all_types")
        assert found is not None
        sc = SnapshotColumns(found[0], found[1], cache.registry, cache.modes)
        assert set(sc.fallback_columns) <= {
            "c_bit1",
            "c_bit12",
            "c_varbit20",
            "c_varbit",
            "c_money",
            "c_timetz",
            "c_interval",
            "c_point",
            "c_hstore",
            "c_int_arr",
            "c_text_arr",
        }, sc.fallback_columns


def test_small_fetch_size_streams_batches(pg: Any, db: str) -> None:
    cfg = _cfg(pg, db, {})
    with _cache(cfg) as cache:
        keys, afters, ts = _snapshot_json(cfg, cache, "rnd", fetch_rows=7)
    assert len(afters) == 3000
    assert orjson.loads(keys[0]) == {"id": 1}


def test_exported_snapshot_hides_later_rows(pg: Any, db: str) -> None:
    cfg = _cfg(pg, db, {})
    pg.execute("CREATE TABLE IF NOT EXISTS snap_vis (id integer PRIMARY KEY)", dbname=db)
    pg.execute("TRUNCATE snap_vis", dbname=db)
    pg.execute("INSERT INTO snap_vis VALUES (1)", dbname=db)
    uri = conninfo(cfg.source)
    with contextlib.closing(pg.connect(autocommit=False, dbname=db)) as holder:
        with holder.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("SELECT pg_export_snapshot()")
            snap = cur.fetchone()[0]
        pg.execute("INSERT INTO snap_vis VALUES (2)", dbname=db)

        def ids(snapshot: str | None) -> list[int]:
            out: list[int] = []
            for b in read_batches(
                uri, "SELECT id FROM snap_vis ORDER BY id", snapshot=snapshot, fetch_rows=10
            ):
                out += b.column(0).to_pylist()
            return out

        assert ids(snap) == [1]
        assert ids(None) == [1, 2]
        holder.rollback()  # the exporting transaction ends: its snapshot is gone
    with pytest.raises(TerminalError, match="exported snapshot .* is gone") as err:
        ids(snap)
    assert err.value.hint is not None and "resumes" in err.value.hint


def test_errors_say_what_and_hide_the_password(pg: Any, db: str) -> None:
    cfg = _cfg(pg, db, {"database.password": "wrong-secret-pw"})
    with pytest.raises(TerminalError) as err:
        list(read_batches(conninfo(cfg.source), "SELECT 1", snapshot=None, fetch_rows=10))
    assert "wrong-secret-pw" not in str(err.value)
    good = conninfo(_cfg(pg, db, {}).source)
    with pytest.raises(TerminalError, match="not an exported snapshot id"):
        list(read_batches(good, "SELECT 1", snapshot="x'; DROP TABLE t; --", fetch_rows=10))
    with pytest.raises(TerminalError, match="no_such_table") as err:
        list(read_batches(good, "SELECT * FROM no_such_table", snapshot=None, fetch_rows=10))
    # (the way out for each kind of snapshot: the reader does not know which one reads)
    assert all(kind in (err.value.hint or "") for kind in ("an initial", "an incremental", "a blocking"))


def test_initial_statements_run_first_and_fail_without_quoting(pg: Any, db: str) -> None:
    uri = conninfo(_cfg(pg, db, {}).source)
    batches = list(
        read_batches(
            uri,
            "SELECT current_setting('application_name') AS a",
            snapshot=None,
            fetch_rows=10,
            initial_statements=["SET application_name = 'from-initial'"],
        )
    )
    assert batches[0].column(0).to_pylist() == ["from-initial"]
    with pytest.raises(TerminalError, match="statement 1 of 1 failed") as err:
        list(
            read_batches(
                uri, "SELECT 1", snapshot=None, fetch_rows=10, initial_statements=["SELECT 'pw-xyz'::int"]
            )
        )
    assert "pw-xyz" not in str(err.value)


def test_for_table_builds_the_schema_streaming_builds(pg: Any, pg_database: str) -> None:
    """The Relation messages of a real pgoutput stream and the catalog give the same schemas."""
    tables = [
        "all_types",
        "items",
        "composite_pk",
        "nopk",
        "edge_misc",
        "edge_nopk",
        "edge_odd",
        "ri_index_nopk",
    ]
    with contextlib.closing(pg.connect(dbname=pg_database)) as conn, conn.cursor() as cur:
        for stmt in SCHEMA_SQL + EXTRA_SCHEMA_SQL + [s for s in EDGE_SQL if s.startswith("CREATE")]:
            cur.execute(stmt)
        cur.execute("CREATE PUBLICATION snapcols_pub FOR ALL TABLES")
        cur.execute("SELECT pg_create_logical_replication_slot('snapcols_slot', 'pgoutput')")
        try:
            cur.execute(ROW_FULL)
            for stmt in [
                "INSERT INTO items VALUES (1, 'one', 1)",
                "INSERT INTO composite_pk VALUES (1, 'x', 'v1')",
                "INSERT INTO nopk VALUES (1, 'x')",
                "INSERT INTO edge_misc (id) VALUES (1)",
                "INSERT INTO edge_nopk VALUES (1, 'x')",
                "INSERT INTO edge_odd VALUES (1, 'a', 1.5)",
                "INSERT INTO ri_index_nopk VALUES (1, 'a', 'v')",
            ]:
                cur.execute(stmt)
            cur.execute(
                "SELECT data FROM pg_logical_slot_peek_binary_changes('snapcols_slot', NULL, NULL, "
                "'proto_version', '1', 'publication_names', 'snapcols_pub')"
            )
            relations = [
                m
                for m in (pgoutput.decode(bytes(r[0])) for r in cur.fetchall())
                if isinstance(m, pgoutput.Relation)
            ]
        finally:
            cur.execute("SELECT pg_drop_replication_slot('snapcols_slot')")
    assert sorted(r.name for r in relations) == sorted(tables)
    cfg = _cfg(pg, pg_database, VARIANTS["mappers"])
    with _cache(cfg) as streamed, _cache(cfg) as snap:
        for rel in relations:
            streamed.relation(rel)
            want = streamed.get(rel.oid)
            got = snap.for_table(rel.namespace, rel.name)
            assert want is not None and got is not None
            assert got.topic == want.topic
            assert [c.name for c in got.columns] == [c.name for c in want.columns]
            assert (got.value_cols, got.key_cols) == (want.value_cols, want.key_cols)
            for attr in ("key_schema", "value_schema", "envelope_schema"):
                a, b = getattr(got, attr), getattr(want, attr)
                assert (a.json_text if a else None) == (b.json_text if b else None), (rel.name, attr)
            assert pgoutput_shape(snap, rel) == pgoutput_shape(streamed, rel), rel.name


def pgoutput_shape(cache: TableCache, rel: Any) -> list[tuple[Any, ...]]:
    held = cache._relations[rel.oid]  # noqa: SLF001 - the Relation each cache built its schema from
    return [(c.name, c.type_oid, c.typmod, c.flags) for c in held.columns] + [held.replica_identity]


def test_read_ahead_gives_the_same_batches_and_stops_cleanly(pg: Any, db: str) -> None:
    uri = conninfo(_cfg(pg, db, {}).source)
    sql = "SELECT id FROM rnd ORDER BY id"
    plain = [b.column(0).to_pylist() for b in read_batches(uri, sql, snapshot=None, fetch_rows=100)]
    ahead = [
        b.column(0).to_pylist() for b in read_batches(uri, sql, snapshot=None, fetch_rows=100, read_ahead=2)
    ]
    assert ahead == plain and sum(map(len, plain)) == 3000
    gen = read_batches(uri, sql, snapshot=None, fetch_rows=100, read_ahead=1)
    assert next(gen).num_rows == 100
    gen.close()  # the reading thread is joined and the connection closed
    with pytest.raises(TerminalError, match="no_such_table"):
        list(read_batches(uri, "SELECT * FROM no_such_table", snapshot=None, fetch_rows=10, read_ahead=1))


def test_strings_are_quoted_as_orjson_quotes_them_in_any_slice() -> None:
    """`_quote` skips its per-row regex when one pass over the character buffer finds nothing to
    escape; sliced arrays (a batch's rows) look only at their own characters, and a null slot
    whose bytes hold a quote only sends the array down the exact path."""
    from connectors.sources.postgres.snapshot_read import _may_need_escape, _quote

    values = ["plain", 'a "quote"', "back\\slash", "ctl\x01", "tab\t", "", None, "ünï \u2028", "x\ny"]
    arr = pa.array(values, pa.string())
    expected = [None if v is None else orjson.dumps(v).decode() for v in values]
    for i in range(len(values)):
        for j in range(i, len(values) + 1):
            part = arr.slice(i, j - i)
            assert _quote(part).to_pylist() == expected[i:j], (i, j)
            special = any(v is not None and any(c in '"\\' or ord(c) < 32 for c in v) for v in values[i:j])
            assert _may_need_escape(part) == special, (i, j)
    # a null slot with characters (Arrow allows it): the quick check says "maybe", the result is exact
    offsets = pa.array([0, 2, 3], pa.int32()).buffers()[1]
    odd = pa.Array.from_buffers(
        pa.string(), 2, [pa.array([False, True]).buffers()[1], offsets, pa.py_buffer(b'x"y')]
    )
    assert odd.to_pylist() == [None, "y"] and _may_need_escape(odd)
    assert _quote(odd).to_pylist() == [None, '"y"']
