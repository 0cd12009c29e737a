"""pgoutput decoder on real server bytes, and the replication stream against a real slot."""

from __future__ import annotations

import contextlib
import struct
import time
from typing import Any

import pytest
from cfgutil import source as settings_of
from harness import wait_until

from connectors.api import TerminalError, TransientError
from connectors.sources.postgres import connection, publications, slots
from connectors.sources.postgres.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    Commit,
    Delete,
    Insert,
    LogicalMessage,
    Origin,
    PgOutputError,
    Relation,
    Truncate,
    TypeMsg,
    Update,
    decode,
)
from connectors.sources.postgres.replication import ReplicationStream

PEEK = (
    "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL, "
    "'proto_version', '1', 'publication_names', %s, 'messages', 'true')"
)


@pytest.fixture
def db(pg: Any, pg_database: str) -> Any:
    conn = pg.connect(dbname=pg_database)
    yield conn
    conn.close()


def _params(pg: Any, dbname: str) -> connection.PgConnParams:
    return connection.PgConnParams.from_settings(
        settings_of("postgres", pg.props(**{"database.dbname": dbname}))
    )


def _exec(conn: Any, *stmts: str) -> None:
    with conn.cursor() as cur:
        for s in stmts:
            cur.execute(s)


def _peek(conn: Any, slot: str, pub: str) -> list[Any]:
    with conn.cursor() as cur:
        cur.execute(PEEK, (slot, pub))
        return [decode(bytes(data)) for _, data in cur.fetchall()]


def _rel(msgs: list[Any], name: str) -> Relation:
    return next(m for m in msgs if isinstance(m, Relation) and m.name == name)


# --------------------------------------------------------------------------- decoder, real bytes
def test_decodes_every_message_type_from_a_real_slot(db: Any, unique_name: Any) -> None:
    slot, pub = unique_name("slot"), unique_name("pub")
    _exec(
        db,
        "CREATE TYPE mood AS ENUM ('sad', 'happy')",
        "CREATE TABLE t1 (id int PRIMARY KEY, v text, n int, big text, m mood)",
        "CREATE TABLE t2 (a int, b text)",
        "ALTER TABLE t2 REPLICA IDENTITY FULL",
        f"CREATE PUBLICATION {pub} FOR ALL TABLES",
        f"SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')",
    )
    # An incompressible >2 kB value is stored out of line (TOAST) and not resent when unchanged.
    big = "SELECT string_agg(md5(i::text || random()::text), '') FROM generate_series(1, 400) i"
    with db.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("SELECT txid_current()")
        xid = cur.fetchone()[0]
        cur.execute(f"INSERT INTO t1 VALUES (1, 'héllo wörld ✓', NULL, ({big}), 'happy')")
        cur.execute("COMMIT")
    t_before = time.time()
    _exec(
        db,
        "UPDATE t1 SET v = 'changed' WHERE id = 1",  # big unchanged -> 'u'
        "UPDATE t1 SET id = 2 WHERE id = 1",  # key change -> old key tuple 'K'
        "DELETE FROM t1 WHERE id = 2",  # 'K'
        "INSERT INTO t2 VALUES (1, 'x')",
        "UPDATE t2 SET b = 'y'",  # REPLICA IDENTITY FULL -> 'O'
        "DELETE FROM t2",
        "TRUNCATE t1, t2 RESTART IDENTITY CASCADE",
        # Non-transactional first: it is flushed only by the next commit (peek reads flushed WAL).
        "SELECT pg_logical_emit_message(false, 'nt-prefix', '\\x00ff01'::bytea)",
        "SELECT pg_logical_emit_message(true, 'tx-prefix', 'in a transaction')",
    )
    msgs = _peek(db, slot, pub)

    begin = next(m for m in msgs if isinstance(m, Begin))
    assert begin.xid == xid
    commit = next(m for m in msgs if isinstance(m, Commit))
    assert commit.commit_lsn == begin.final_lsn and commit.end_lsn > commit.commit_lsn
    assert commit.commit_ts == begin.commit_ts
    assert abs(commit.commit_ts / 1e6 - t_before) < 60  # PG epoch converted to Unix µs

    mood = next(m for m in msgs if isinstance(m, TypeMsg))
    assert (mood.namespace, mood.name) == ("public", "mood")
    r1 = _rel(msgs, "t1")
    assert r1.namespace == "public" and r1.replica_identity == "d"
    assert [(c.name, c.is_key, c.type_oid) for c in r1.columns] == [
        ("id", True, 23),
        ("v", False, 25),
        ("n", False, 23),
        ("big", False, 25),
        ("m", False, mood.oid),
    ]
    assert _rel(msgs, "t2").replica_identity == "f"

    ins = [m for m in msgs if isinstance(m, Insert)]
    assert ins[0].relation_oid == r1.oid
    assert ins[0].new[:3] == ["1", "héllo wörld ✓", None] and len(ins[0].new[3]) > 10000
    assert ins[0].new[4] == "happy"

    upd = [m for m in msgs if isinstance(m, Update)]
    assert upd[0].old is None and upd[0].new[:2] == ["1", "changed"]
    assert upd[0].new[3] is UNCHANGED_TOAST
    assert upd[1].old_kind == "K" and upd[1].old[0] == "1" and upd[1].old[1:] == [None] * 4
    assert upd[1].new[0] == "2"
    assert upd[2].old_kind == "O" and upd[2].old == ["1", "x"] and upd[2].new == ["1", "y"]

    dels = [m for m in msgs if isinstance(m, Delete)]
    assert (dels[0].old_kind, dels[0].old[0]) == ("K", "2")
    assert (dels[1].old_kind, dels[1].old) == ("O", ["1", "y"])

    trunc = next(m for m in msgs if isinstance(m, Truncate))
    assert set(trunc.relation_oids) == {r1.oid, _rel(msgs, "t2").oid}
    assert trunc.cascade and trunc.restart_identity

    lm = [m for m in msgs if isinstance(m, LogicalMessage)]
    assert (lm[0].transactional, lm[0].prefix, lm[0].content) == (False, "nt-prefix", b"\x00\xff\x01")
    assert (lm[1].transactional, lm[1].prefix, lm[1].content) == (True, "tx-prefix", b"in a transaction")
    assert lm[0].lsn > 0


def test_origin_message(db: Any, unique_name: Any) -> None:
    slot, pub, origin = unique_name("slot"), unique_name("pub"), unique_name("origin")
    _exec(
        db,
        "CREATE TABLE t (id int PRIMARY KEY)",
        f"CREATE PUBLICATION {pub} FOR TABLE t",
        f"SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')",
        f"SELECT pg_replication_origin_create('{origin}')",
    )
    try:
        _exec(db, f"SELECT pg_replication_origin_session_setup('{origin}')")
        with db.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("SELECT pg_replication_origin_xact_setup('0/ABCDEF', now())")
            cur.execute("INSERT INTO t VALUES (1)")
            cur.execute("COMMIT")
        _exec(db, "SELECT pg_replication_origin_session_reset()")
        msgs = _peek(db, slot, pub)
        o = next(m for m in msgs if isinstance(m, Origin))
        assert o.name == origin and o.commit_lsn == 0xABCDEF
        assert isinstance(msgs[0], Begin) and isinstance(msgs[1], Origin)
    finally:
        _exec(db, f"SELECT pg_replication_origin_drop('{origin}')")


# --------------------------------------------------------------------------- decoder, synthetic
def _tuple(*vals: Any) -> bytes:
    out = struct.pack("!H", len(vals))
    for v in vals:
        if v is None:
            out += b"n"
        elif v is UNCHANGED_TOAST:
            out += b"u"
        elif isinstance(v, bytes):
            out += b"b" + struct.pack("!I", len(v)) + v
        else:
            b = v.encode()
            out += b"t" + struct.pack("!I", len(b)) + b
    return out


def test_binary_values_and_errors() -> None:
    m = decode(b"I" + struct.pack("!I", 7) + b"N" + _tuple(b"\x00\x01", None, UNCHANGED_TOAST, "x"))
    assert m == Insert(7, [b"\x00\x01", None, UNCHANGED_TOAST, "x"])
    assert decode(memoryview(b"Y" + struct.pack("!I", 9) + b"\x00int4\x00")) == TypeMsg(
        9, "pg_catalog", "int4"
    )
    with pytest.raises(PgOutputError, match="Stream Start"):
        decode(b"S" + b"\x00" * 8)
    with pytest.raises(PgOutputError, match="unknown message type"):
        decode(b"Z")
    with pytest.raises(PgOutputError, match="cannot decode"):
        decode(b"I\x00\x00")
    with pytest.raises(PgOutputError, match="empty"):
        decode(b"")
    assert isinstance(PgOutputError("x"), TerminalError)


def test_decoder_throughput() -> None:
    msg = (
        b"I"
        + struct.pack("!I", 16389)
        + b"N"
        + _tuple("12345", "hello world", None, "2024-01-01 12:00:00+00")
    )
    n = 200_000
    msgs = [msg] * n
    t0 = time.process_time()  # CPU time: another process sharing the cores does not count
    for m in msgs:
        decode(m)
    rate = n / (time.process_time() - t0)
    print(f"pgoutput decode: {rate:,.0f} Insert messages per CPU-second")
    assert rate > 150_000  # target is > 300k/s on an idle core; leave room for loaded CI


# --------------------------------------------------------------------------- replication stream
def _drain(stream: ReplicationStream, seconds: float = 1.5, until: int | None = None) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        out += [(lsn, decode(p)) for lsn, p in stream.read_batch(1000, 0.2)]
        if until is not None and sum(isinstance(m, Commit) for _, m in out) >= until:
            break
    return out


def _slot_confirmed(conn: Any, slot: str) -> int:
    info = slots.slot_info(conn, slot)
    assert info is not None and info.confirmed_flush_lsn is not None
    return info.confirmed_flush_lsn


def test_stream_reads_and_resumes_after_confirmed_lsn(
    pg: Any, db: Any, pg_database: str, unique_name: Any
) -> None:
    slot, pub = unique_name("slot"), unique_name("pub")
    _exec(db, "CREATE TABLE t (id int PRIMARY KEY, v text)", "CREATE TABLE other (x int)")
    publications.ensure_publication(db, pub, "filtered", ["public.t"])
    slots.ensure_slot(db, slot)
    created_at = _slot_confirmed(db, slot)
    params = _params(pg, pg_database)

    stream = ReplicationStream(params, slot, pub, status_interval_ms=1000)
    stream.open()
    try:
        # Idle, with WAL from an unpublished table and nothing unconfirmed: the slot follows the
        # server's keepalive position (it must not pin WAL, and a fast shutdown waits for it).
        for i in range(5):
            _exec(db, f"INSERT INTO other VALUES ({i})")
        wait_until(
            lambda: _drain(stream, 0.3) == [] and _slot_confirmed(db, slot) > created_at,
            timeout=30,
            what="the idle slot following the server",
        )
        assert created_at < _slot_confirmed(db, slot) <= slots.current_wal_lsn(db)

        for i in range(1, 4):
            _exec(db, f"INSERT INTO t VALUES ({i}, 'v{i}')")
        got = _drain(stream, 5, until=3)
        inserts = [m.new for _, m in got if isinstance(m, Insert)]
        assert inserts == [["1", "v1"], ["2", "v2"], ["3", "v3"]]
        commits = [m for _, m in got if isinstance(m, Commit)]
        # Confirm only the first two transactions.
        confirmed = commits[1].end_lsn
        stream.send_feedback(confirmed)
        assert stream.reported_lsn <= confirmed
        # Idle again, with status updates and keepalives going out: the third transaction was
        # received but not confirmed, so the slot must stay at what was confirmed.
        for i in range(5, 10):
            _exec(db, f"INSERT INTO other VALUES ({i})")
        _drain(stream, 2.5)
        slot_lsn = _slot_confirmed(db, slot)
        assert commits[0].end_lsn < slot_lsn <= confirmed
    finally:
        stream.close()

    _exec(db, "INSERT INTO t VALUES (4, 'v4')")
    with ReplicationStream(params, slot, pub, start_lsn=confirmed) as again:
        got = _drain(again, 5, until=2)
    inserts = [m.new for _, m in got if isinstance(m, Insert)]
    assert inserts == [["3", "v3"], ["4", "v4"]]  # nothing lost, nothing repeated
    assert not [m for _, m in got if isinstance(m, LogicalMessage)]  # the stream writes none


def test_stream_errors(pg: Any, db: Any, pg_database: str, unique_name: Any, pg_factory: Any) -> None:
    params = _params(pg, pg_database)
    with pytest.raises(TerminalError, match="does not exist"):
        ReplicationStream(params, unique_name("missing"), "p").open()

    slot = unique_name("slot")
    slots.ensure_slot(db, slot)
    publications.ensure_publication(db, "p_all", "all_tables")
    first = ReplicationStream(params, slot, "p_all")
    first.open()
    try:
        with pytest.raises(TransientError, match="active"):
            ReplicationStream(params, slot, "p_all").open()
        with pytest.raises(TransientError, match="in use by another process"):
            slots.ensure_slot(db, slot)
    finally:
        first.close()

    # Server gone under a running stream -> transient (retry), and so is reconnecting to it.
    server = pg_factory()
    sparams = connection.PgConnParams.from_settings(settings_of("postgres", server.props()))
    with contextlib.closing(server.connect()) as sconn:
        slots.ensure_slot(sconn, "s1")
        publications.ensure_publication(sconn, "p1", "all_tables")
    stream = ReplicationStream(sparams, "s1", "p1")
    stream.open()
    assert stream.server_wal_lsn() > 0
    server.stop("immediate")  # "fast" would wait for the walsender's client
    with pytest.raises(TransientError):
        for _ in range(20):
            stream.read_batch(100, 0.2)
    stream.close()
    with pytest.raises(TransientError, match="is the server running"):
        ReplicationStream(sparams, "s1", "p1").open()
