"""MySQL/MariaDB initial snapshot (connectors/snapshot/mysql.py): values equal the streamed ones
for every type of the streaming conformance workload, the locking modes, the view's position,
chunking, markers and the schema change events."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pymysql
import pytest
from conformance.mysql import workload
from mycdc import drain, source_config, started_source

from connectors.api import TerminalError
from connectors.snapshot.mysql import MySqlSnapshotter, View, position, read_chunk
from connectors.sources.mysql.source import MySqlSource

pytestmark = pytest.mark.mariadb

MARIADB_TYPES = (
    "CREATE TABLE net (id INT PRIMARY KEY, u UUID, i4 INET4, i6 INET6, "
    "u2 UUID NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001')"
)
MARIADB_ROWS = [
    "INSERT INTO net (id, u, i4, i6) VALUES (1, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '10.0.0.1', '2001:db8::1')",
    "INSERT INTO net (id, u, i4, i6) VALUES (2, '00000000-0000-0000-0000-000000000000', '0.0.0.0', '::ffff:1.2.3.4')",
    "INSERT INTO net (id) VALUES (3)",
]
KEYS = (
    "CREATE TABLE keys_mix (a BIGINT UNSIGNED NOT NULL, b VARCHAR(10) NOT NULL, c VARBINARY(4) NOT NULL, "
    "v INT, PRIMARY KEY (a, b, c))"
)


def _snap_cfg(mariadb: Any, tmp_path: Path, unique_name: Any, db: str, **extra: Any) -> Any:
    return source_config(
        mariadb,
        tmp_path / unique_name("wh"),
        unique_name("snap"),
        unique_name.server_id(),
        **{"database.include.list": db},
        **extra,
    )


def _read_all(
    cfg: Any, snap: MySqlSnapshotter, view: View, chunk_rows: int = 100_000
) -> list[dict[str, Any]]:
    chunks, _ = snap.plan(view, chunk_rows)
    rows: list[dict[str, Any]] = []
    for c in chunks:
        for piece in read_chunk(cfg, c, view, position(view), ()):
            rows.extend(piece.to_pylist())
    return rows


def _snapshot(cfg: Any, **kw: Any) -> tuple[list[dict[str, Any]], MySqlSnapshotter, View]:
    snap = MySqlSnapshotter(cfg)
    view = snap.export(**kw)
    try:
        return _read_all(cfg, snap, view), snap, view
    finally:
        view.close()
        snap.close()


def _run(mariadb: Any, db: str, statements: list[str]) -> None:
    conn = mariadb.connect(database=db)
    try:
        with conn.cursor() as cur:
            for s in statements:
                cur.execute(s)
    finally:
        conn.close()


def _snapshot_year(after: dict[str, Any]) -> dict[str, Any]:
    """The one value Debezium's snapshot and its stream disagree on, and Tidemark with them:
    YEAR 0000 is 1900 streamed (binlog: year - 1900) and 2000 snapshotted (JDBC year 0, then the
    two-digit-year rule). tests/test_snapshot_conformance_mysql.py checks the snapshot side."""
    return {k: 2000 if k == "c_year" and v == 1900 else v for k, v in after.items()}


def test_values_equal_streaming(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    """Every column type of the conformance workload (and MariaDB's UUID/INET4/INET6), in the
    default modes and the non-default ones: the snapshot's key and after are the streamed bytes."""
    db = mariadb_database
    _run(mariadb, db, [*workload.SCHEMA_SQL, MARIADB_TYPES])
    variants: list[dict[str, Any]] = [
        {},
        {
            "decimal.handling.mode": "string",
            "bigint.unsigned.handling.mode": "precise",
            "time.precision.mode": "connect",
            "binary.handling.mode": "hex",
        },
        {"time.precision.mode": "isostring"},
        {"time.precision.mode": "nanoseconds", "enable.time.adjuster": False},
        {
            "decimal.handling.mode": "double",
            "binary.handling.mode": "base64-url-safe",
            "column.mask.with.4.chars": r".*\.all_types\.c_varchar",
            "column.truncate.to.3.chars": r".*\.all_types\.c_text",
            "message.key.columns": r".*\.nokey:code",
        },
    ]
    sources = [
        started_source(mariadb, tmp_path / f"s{i}", unique_name, db, **v) for i, v in enumerate(variants)
    ]
    _run(mariadb, db, [s for step in workload.STEPS[:3] for s in step] + MARIADB_ROWS)
    _run(
        mariadb,
        db,
        ["INSERT INTO orders (customer, qty) VALUES ('anne', 1)", "INSERT INTO nokey VALUES ('k', 'x')"],
    )
    for i, ((_, src), variant) in enumerate(zip(sources, variants, strict=True)):
        try:
            streamed = [r for r in drain(src) if not r.schema_change and r.value is not None]
        finally:
            src.close()
        want = {
            (
                r.topic,
                None if r.key is None else orjson.dumps(r.key),
                orjson.dumps(_snapshot_year(r.value["after"])),
            )
            for r in streamed
            if r.value["op"] == "c"
        }
        cfg = _snap_cfg(mariadb, tmp_path, unique_name, db, **variant)
        rows, _, _ = _snapshot(cfg)
        got = {
            (r["topic"], None if r["key"] is None else r["key"].encode(), r["after"].encode()) for r in rows
        }
        topics = {t for t, _, _ in want}
        got = {g for g in got if g[0] in topics}  # the marker table is not streamed here
        assert len(want) == 5 + 3 + 2 + 1, f"variant {i}: {len(want)} streamed rows"
        assert got == want, (
            f"variant {i} {variant}: {sorted(got - want, key=str)[:2]} vs {sorted(want - got, key=str)[:2]}"
        )


def test_source_block_markers_and_key_chunks(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    """Composite keys (unsigned BIGINT past 2**63, varchar, varbinary) split into chunks that
    cover every row once; markers first..last; the source block is the view's position."""
    db = mariadb_database
    rows_sql = ", ".join(
        f"({(1 << 63) + i * 7919 if i % 2 else i}, 'k{i % 13}', X'{i % 256:02x}ff', {i})" for i in range(1000)
    )
    _run(
        mariadb,
        db,
        [KEYS, f"INSERT INTO keys_mix VALUES {rows_sql}", "CREATE TABLE z_empty (id INT PRIMARY KEY)"],
    )
    cfg = _snap_cfg(mariadb, tmp_path, unique_name, db, **{"snapshot.fetch.size": 64})
    snap = MySqlSnapshotter(cfg)
    view = snap.export()
    try:
        chunks, detail = snap.plan(view, 100)
        assert detail["tables"] == 2
        data = [c for c in chunks if c.table.endswith("keys_mix")]
        # boundaries walked along the key: 1,000 rows in exactly ten chunks of 100, none empty
        assert len(data) == 10, [(c.lower, c.upper) for c in data]
        rows: list[dict[str, Any]] = []
        sizes = []
        started = int(time.time())
        for c in chunks:
            pieces = list(read_chunk(cfg, c, view, position(view), ()))
            assert all(p.num_rows <= 64 for p in pieces)
            rows.extend(r for p in pieces for r in p.to_pylist())
            if c in data:
                sizes.append(sum(p.num_rows for p in pieces))
        assert sizes == [100] * 10
    finally:
        view.close()
        snap.close()
    vs = sorted(orjson.loads(r["after"])["v"] for r in rows)
    assert vs == list(range(1000))
    marks = [orjson.loads(r["source"])["snapshot"] for r in rows]
    assert marks[0] == "first" and marks[-1] == "last"  # z_empty, the last table, is empty
    assert marks.count("first") == 1 and marks.count("last") == 1 and set(marks) == {"first", "true", "last"}
    src = orjson.loads(rows[5]["source"])
    assert (src["file"], src["pos"], src["row"], src["server_id"]) == (view.file, view.pos, 0, 0)
    assert (
        src["connector"] == "mariadb"
        and src["gtid"] is None
        and src["thread"] is None
        and src["query"] is None
    )
    assert {r["op"] for r in rows} == {"r"} and {r["before"] for r in rows} == {None}
    # source.ts_ms: when the table's read started, in whole seconds (Debezium: the server's
    # CURRENT_TIMESTAMP then), the same for every chunk of the table
    (ts,) = {orjson.loads(r["source"])["ts_ms"] for r in rows}
    assert ts % 1000 == 0 and started * 1000 <= ts <= time.time() * 1000


def test_text_key_boundaries_keep_quotes_and_percent_signs(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    """Boundary keys holding quotes, backslashes and %s are bound back as literals (never as
    driver parameters); 250 rows in chunks of 100: three chunks, the last one not empty."""
    db = mariadb_database
    names = [f"k%s'{i:03d}\\x" if i % 3 else f"k%{i:03d}" for i in range(250)]
    quoted = [n.replace("\\", "\\\\").replace("'", "''") for n in names]
    values = ", ".join(f"('{q}', {i})" for i, q in enumerate(quoted))
    _run(
        mariadb,
        db,
        [
            "CREATE TABLE odd_keys (name VARCHAR(32) PRIMARY KEY, v INT)",
            f"INSERT INTO odd_keys VALUES {values}",
        ],
    )
    cfg = _snap_cfg(mariadb, tmp_path, unique_name, db)
    snap = MySqlSnapshotter(cfg)
    view = snap.export()
    try:
        chunks, _ = snap.plan(view, 100)
        sizes = [sum(p.num_rows for p in read_chunk(cfg, c, view, position(view), ())) for c in chunks]
        rows = _read_all(cfg, snap, view, chunk_rows=100)
    finally:
        view.close()
        snap.close()
    assert sizes == [100, 100, 50]
    assert sorted(orjson.loads(r["after"])["v"] for r in rows) == list(range(250))
    assert sorted(orjson.loads(r["after"])["name"] for r in rows) == sorted(names)


def _index_reads(mariadb: Any) -> int:
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Handler_read_next'")
            return int(cur.fetchone()[1])
    finally:
        conn.close()


def test_composite_key_chunks_read_the_index_once(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    """Planning and reading a composite-key table reads each index entry about once: MariaDB
    starts no index range at a `(a, b) > (x, y)` row comparison, so written that way every
    boundary and every chunk would scan from the table's first row (210,000 reads here)."""
    db = mariadb_database
    _run(
        mariadb,
        db,
        [
            "CREATE TABLE pairs (a INT, b VARCHAR(8), v INT, PRIMARY KEY (a, b))",
            "INSERT INTO pairs SELECT seq DIV 10, CONCAT('k', seq MOD 10), seq FROM seq_1_to_20000",
        ],
    )
    cfg = _snap_cfg(mariadb, tmp_path, unique_name, db)
    snap = MySqlSnapshotter(cfg)
    view = snap.export()
    try:
        before = _index_reads(mariadb)
        chunks, _ = snap.plan(view, 1000)
        sizes = [sum(p.num_rows for p in read_chunk(cfg, c, view, position(view), ())) for c in chunks]
        reads = _index_reads(mariadb) - before
    finally:
        view.close()
        snap.close()
    assert sizes == [1000] * 20
    assert reads < 3 * 20_000, reads  # the walk once, the chunks once (row comparisons: 210,000)


def _plan_sizes(mariadb: Any, cfg: Any, chunk_rows: int) -> tuple[list[Any], list[int], int]:
    """The table's chunks, the rows each holds, and the index entries read while planning."""
    snap = MySqlSnapshotter(cfg)
    view = snap.export()
    try:
        before = _index_reads(mariadb)
        chunks, _ = snap.plan(view, chunk_rows)
        reads = _index_reads(mariadb) - before
        sizes = [sum(p.num_rows for p in read_chunk(cfg, c, view, position(view), ())) for c in chunks]
    finally:
        view.close()
        snap.close()
    return chunks, sizes, reads


def test_integer_key_chunks_come_from_the_key_range(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    """A one-column integer primary key is split by its range (snapshot/int_bounds.py), not
    by a walk along the key: planning reads a few index entries, not the table. A dense key gets
    the walk's exact chunks; a key with a hole gets chunks of at most chunk_rows rows, none empty
    (every boundary an existing key); a key spread far wider than its row count is walked."""
    db = mariadb_database
    _run(
        mariadb,
        db,
        [
            "CREATE TABLE dense (id BIGINT PRIMARY KEY, v INT)",
            "INSERT INTO dense SELECT seq, seq FROM seq_1_to_20000",
            "ANALYZE TABLE dense",
        ],
    )
    cfg = _snap_cfg(mariadb, tmp_path, unique_name, db)
    chunks, sizes, reads = _plan_sizes(mariadb, cfg, 1000)
    assert sizes == [1000] * 20
    assert [c.upper for c in chunks] == [(str(i * 1000),) for i in range(1, 20)] + [None]
    assert reads < 100, reads  # the walk: 20,000 (test_composite_key_chunks_read_the_index_once)
    snap = MySqlSnapshotter(cfg)
    view = snap.export()
    try:  # 399 boundaries: candidates moved to keys in several round trips (256 a query)
        fine, _ = snap.plan(view, 50)
    finally:
        view.close()
        snap.close()
    assert [c.upper for c in fine] == [(str(i * 50),) for i in range(1, 400)] + [None]

    # a hole of 4,500 keys (ids 5,001..9,500) and a lone key far past the rest
    _run(
        mariadb,
        db,
        ["DELETE FROM dense WHERE id BETWEEN 5001 AND 9500", "UPDATE dense SET id = 23456 WHERE id = 20000"],
    )
    chunks, sizes, _ = _plan_sizes(mariadb, cfg, 1000)
    assert sum(sizes) == 15_500 and 0 not in sizes and max(sizes) <= 1000, sizes
    uppers = [int(c.upper[0]) for c in chunks[:-1]]
    assert uppers == sorted(set(uppers)) and not any(5000 < u <= 9500 for u in uppers)

    _run(
        mariadb,
        db,
        [
            "CREATE TABLE sparse (id INT UNSIGNED PRIMARY KEY, v INT)",
            "INSERT INTO sparse SELECT seq * 100000, seq FROM seq_1_to_2000",
            "ANALYZE TABLE sparse",
        ],
    )
    cfg = _snap_cfg(mariadb, tmp_path, unique_name, db, **{"table.include.list": f"{db}.sparse"})
    chunks, sizes, reads = _plan_sizes(mariadb, cfg, 100)
    assert sizes == [100] * 20  # walked: 200,000,000 wide, 2,000 rows
    assert reads >= 1900, reads


def test_a_nullable_key_column_is_one_chunk(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    """message.key.columns naming a nullable column: rows with a NULL key are in no key range,
    so the table is read whole, never in ranges that would leave them out."""
    db = mariadb_database
    _run(
        mariadb,
        db,
        [
            "CREATE TABLE loose (id INT PRIMARY KEY, code INT NULL)",
            "INSERT INTO loose SELECT seq, IF(seq MOD 4 = 0, NULL, seq) FROM seq_1_to_300",
        ],
    )
    cfg = _snap_cfg(mariadb, tmp_path, unique_name, db, **{"message.key.columns": f"{db}.loose:code"})
    snap = MySqlSnapshotter(cfg)
    view = snap.export()
    try:
        chunks, _ = snap.plan(view, 50)
        rows = _read_all(cfg, snap, view, chunk_rows=50)
    finally:
        view.close()
        snap.close()
    assert len([c for c in chunks if c.table.endswith(".loose")]) == 1
    assert sorted(orjson.loads(r["after"])["id"] for r in rows) == list(range(1, 301))


def test_position_is_the_view(mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any) -> None:
    """A row inserted after export is not in the snapshot and is streamed from its position; a
    row inserted before is in the snapshot and not streamed."""
    db = mariadb_database
    _run(
        mariadb,
        db,
        ["CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))", "INSERT INTO t VALUES (1, 'before')"],
    )
    cfg = _snap_cfg(mariadb, tmp_path, unique_name, db)
    snap = MySqlSnapshotter(cfg)
    view = snap.export(readers=2)
    try:
        _run(mariadb, db, ["INSERT INTO t VALUES (2, 'after')", "UPDATE t SET v = 'changed' WHERE id = 1"])
        rows = _read_all(cfg, snap, view)
    finally:
        view.close()
        snap.close()
    assert [orjson.loads(r["after"]) for r in rows] == [{"id": 1, "v": "before"}]
    src = MySqlSource(cfg, until_caught_up=True)
    src.open(position(view))
    try:
        streamed = [r for r in drain(src) if not r.schema_change and r.value is not None]
    finally:
        src.close()
    assert [(r.value["op"], r.value["after"]) for r in streamed] == [
        ("c", {"id": 2, "v": "after"}),
        ("u", {"id": 1, "v": "changed"}),
    ]


def _insert_with_timeout(mariadb: Any, db: str, value: int, timeout_s: int = 1) -> None:
    conn = mariadb.connect(database=db)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION lock_wait_timeout = {timeout_s}")
            cur.execute("INSERT INTO t VALUES (%s)", (value,))
    finally:
        conn.close()


@pytest.mark.parametrize("mode", ["minimal", "extended", "none"])
def test_locking_modes(
    mode: str, mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    """minimal and none: a concurrent INSERT is not blocked while the data is read; extended: it
    waits for the lock (and times out here); every mode reads the view's rows only."""
    db = mariadb_database
    _run(
        mariadb,
        db,
        [
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES " + ", ".join(f"({i})" for i in range(50)),
        ],
    )
    cfg = _snap_cfg(
        mariadb, tmp_path, unique_name, db, **{"snapshot.locking.mode": mode, "snapshot.fetch.size": 10}
    )
    snap = MySqlSnapshotter(cfg)
    view = snap.export(readers=2)
    try:
        (chunk,), _ = snap.plan(view, 100_000)
        pieces = read_chunk(cfg, chunk, view, position(view), ())
        first = next(pieces)  # mid-read: the reader's unbuffered result is open
        if mode == "extended":
            with pytest.raises(pymysql.err.OperationalError) as e:
                _insert_with_timeout(mariadb, db, 1000)
            assert e.value.args[0] == 1205  # Lock wait timeout exceeded
        else:
            _insert_with_timeout(mariadb, db, 1000)
        rest = [p for p in pieces]
    finally:
        view.close()
        snap.close()
    ids = [orjson.loads(r["after"])["id"] for p in [first, *rest] for r in p.to_pylist()]
    assert sorted(ids) == list(range(50))
    _insert_with_timeout(mariadb, db, 1001)  # the lock is gone with the view


def test_lock_timeout(mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any) -> None:
    """snapshot.lock.timeout.ms bounds the wait for the read lock: one clear error."""
    db = mariadb_database
    _run(mariadb, db, ["CREATE TABLE t (id INT PRIMARY KEY)"])
    holder = mariadb.connect(database=db)
    try:
        with holder.cursor() as cur:
            cur.execute("LOCK TABLES t WRITE")
        cfg = _snap_cfg(mariadb, tmp_path, unique_name, db, **{"snapshot.lock.timeout.ms": 1000})
        snap = MySqlSnapshotter(cfg)
        try:
            with pytest.raises(TerminalError, match="snapshot.lock.timeout.ms"):
                snap.export()
        finally:
            snap.close()
    finally:
        holder.close()


def test_schema_change_events_and_history(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    """The schema snapshot is recorded at the view's position (what streaming recovers), and with
    include.schema.changes its events come as Debezium 3.6's snapshot emits them (SET, DROP TABLE,
    DROP/CREATE DATABASE, USE, CREATE TABLE; tests/test_snapshot_conformance_mysql.py compares
    them with Debezium's), at the view."""
    db = mariadb_database
    _run(mariadb, db, ["CREATE TABLE a (id INT PRIMARY KEY)", "CREATE TABLE b (id INT PRIMARY KEY, v TEXT)"])
    cfg = _snap_cfg(mariadb, tmp_path, unique_name, db)
    snap = MySqlSnapshotter(cfg)
    view = snap.export()
    try:
        events = snap.schema_change_records(view)
    finally:
        view.close()
        snap.close()
    assert events[0][0] == {"databaseName": ""}
    assert events[0][1]["ddl"].startswith("SET character_set_server=")
    # the shared server holds other tests' databases too: this one's events, in order
    mine = [v for k, v in events if k["databaseName"] == db]
    ddls = [v["ddl"].split("(")[0].strip() for v in mine]
    assert ddls[:3] == [
        f"DROP TABLE IF EXISTS `{db}`.`a`",
        f"DROP TABLE IF EXISTS `{db}`.`b`",
        f"DROP DATABASE IF EXISTS `{db}`",
    ]
    assert ddls[3].startswith(f"CREATE DATABASE `{db}` CHARSET ")
    assert ddls[4:] == [f"USE `{db}`", "CREATE TABLE `a`", "CREATE TABLE `b`"]
    for v in mine:
        s = v["source"]
        assert (s["snapshot"], s["file"], s["pos"], s["db"]) == ("true", view.file, view.pos, db)
    assert mine[1]["tableChanges"] == [{"type": "DROP", "id": f'"{db}"."b"', "table": None}]
    assert [c["id"] for c in mine[-1]["tableChanges"]] == [f'"{db}"."b"']
    history = [r for r in snap.source.history.records() if r["event"] == -1]
    assert {(r["file"], r["pos"], r["gtids"]) for r in history} == {(view.file, view.pos, view.gtids)}


def test_include_list_and_order(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    db = mariadb_database
    _run(
        mariadb,
        db,
        [
            "CREATE TABLE a (id INT PRIMARY KEY)",
            "CREATE TABLE b (id INT PRIMARY KEY)",
            "CREATE TABLE c (id INT PRIMARY KEY)",
            "INSERT INTO a VALUES (1)",
            "INSERT INTO c VALUES (1), (2)",
            "ANALYZE TABLE a, c",
        ],
    )
    cfg = _snap_cfg(
        mariadb,
        tmp_path,
        unique_name,
        db,
        **{
            "snapshot.include.collection.list": f"{db}\\.(a|c)",
            "snapshot.tables.order.by.row.count": "descending",
        },
    )
    snap = MySqlSnapshotter(cfg)
    view = snap.export()
    try:
        chunks, _ = snap.plan(view, 100)
    finally:
        view.close()
        snap.close()
    assert [c.table for c in chunks] == [f"{db}.c", f"{db}.a"]
    bad = _snap_cfg(
        mariadb, tmp_path, unique_name, db, **{"snapshot.include.collection.list": f"{db}\\.nope"}
    )
    snap = MySqlSnapshotter(bad)
    view = snap.export()
    try:
        with pytest.raises(TerminalError, match="matches no captured table"):
            snap.plan(view, 100)
    finally:
        view.close()
        snap.close()


def test_select_override(mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any) -> None:
    db = mariadb_database
    _run(
        mariadb,
        db,
        ["CREATE TABLE t (id INT PRIMARY KEY, v INT)"]
        + ["INSERT INTO t VALUES " + ", ".join(f"({i}, {i % 3})" for i in range(300))],
    )
    cfg = _snap_cfg(
        mariadb,
        tmp_path,
        unique_name,
        db,
        **{
            "snapshot.select.statement.overrides": f"{db}.t",
            f"snapshot.select.statement.overrides.{db}.t": f"SELECT * FROM {db}.t WHERE v = 0",
        },
    )
    snap = MySqlSnapshotter(cfg)
    view = snap.export()
    try:
        rows = _read_all(cfg, snap, view, chunk_rows=50)
    finally:
        view.close()
        snap.close()
    assert sorted(orjson.loads(r["after"])["id"] for r in rows) == list(range(0, 300, 3))


def test_concurrent_chunk_reads(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    """Chunks read by N driver threads, each on its own reader of the view, see the same data."""
    db = mariadb_database
    _run(
        mariadb,
        db,
        [
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES " + ", ".join(f"({i})" for i in range(400)),
        ],
    )
    cfg = _snap_cfg(mariadb, tmp_path, unique_name, db)
    snap = MySqlSnapshotter(cfg)
    view = snap.export(readers=3)
    try:
        chunks, _ = snap.plan(view, 50)
        _run(mariadb, db, ["DELETE FROM t WHERE id % 2 = 0"])  # after the view: not seen
        out: dict[int, list[int]] = {}

        def read(c: Any) -> None:
            out[c.index] = [
                orjson.loads(r["after"])["id"]
                for p in read_chunk(cfg, c, view, position(view), ())
                for r in p.to_pylist()
            ]

        threads = [threading.Thread(target=read, args=(c,)) for c in chunks]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
    finally:
        view.close()
        snap.close()
    assert len(chunks) >= 6
    assert sorted(i for ids in out.values() for i in ids) == list(range(400))


def test_adapters() -> None:
    """The PyMySQL → binlog-decoder adaptations (connectors/sources/mysql/snapshot_read.py)."""
    import datetime as dt

    from connectors.sources.mysql.model import Column
    from connectors.sources.mysql.snapshot_read import adapter
    from connectors.sources.mysql.types import ZERO

    def col(t: str) -> Column:
        return Column(name="c", type_name=t, position=1)

    for t in ("DATE", "DATETIME", "TIMESTAMP"):
        f = adapter(col(t))
        assert f is not None and f("0000-00-00") is ZERO and f(dt.date(2024, 1, 2)) == dt.date(2024, 1, 2)
    assert adapter(col("YEAR")) is None  # YEAR 0000 stays 0: 2000, as Debezium's snapshot (not 1900)
    assert adapter(col("INT")) is None and adapter(col("VARCHAR")) is None
