"""Pre-flight checks, slot and publication management, each failure's message (real servers)."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest
from cfgutil import source as settings_of

from connectors.api import TerminalError, TransientError
from connectors.sources.postgres import catalog, checks, connection, publications, slots
from connectors.sources.postgres.connection import PgConnParams
from connectors.sources.postgres.slots import SlotInfo


@pytest.fixture
def db(pg: Any, pg_database: str) -> Any:
    conn = pg.connect(dbname=pg_database)
    yield conn
    conn.close()


def _params(pg: Any, **props: str) -> PgConnParams:
    return PgConnParams.from_settings(settings_of("postgres", pg.props(**props)))


def _exec(conn: Any, *stmts: str) -> None:
    with conn.cursor() as cur:
        for s in stmts:
            cur.execute(s)


# --------------------------------------------------------------------------- connecting
def test_wrong_password(pg: Any) -> None:
    with pytest.raises(
        TerminalError, match=f"authentication failed for user {pg.user}: check database.password"
    ):
        connection.connect(_params(pg, **{"database.password": "wrong"}))


def test_params_repr_hides_secrets() -> None:
    p = PgConnParams.from_settings(
        settings_of(
            "postgres",
            {
                "database.hostname": "db.example",
                "database.password": "s3cr3t-pw",
                "database.sslpassword": "key-pass-77",
                "database.sslcert": "/c.pem",
            },
        )
    )
    text = repr(p) + str(p)
    assert "db.example" in text
    assert "s3cr3t-pw" not in text and "key-pass-77" not in text
    assert p.kwargs()["password"] == "s3cr3t-pw" and p.kwargs()["sslpassword"] == "key-pass-77"


def test_unreachable_port(pg: Any) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(TerminalError, match=rf"127\.0\.0\.1:{port}: is the server running / reachable\?"):
        connection.connect(_params(pg, **{"database.port": str(port)}))
    with pytest.raises(TransientError, match="is the server running"):
        connection.connect(_params(pg, **{"database.port": str(port)}), unreachable_is_transient=True)


def test_unknown_database(pg: Any) -> None:
    with pytest.raises(TerminalError, match="database nosuchdb does not exist .*check database.dbname"):
        connection.connect(_params(pg, **{"database.dbname": "nosuchdb"}))


def test_good_server_passes(pg: Any, db: Any, pg_database: str) -> None:
    params = _params(pg, **{"database.dbname": pg_database})
    checks.check_server(db, params)
    checks.check_replication_connection(params)


def test_wal_level_replica(pg_factory: Any) -> None:
    server = pg_factory(wal_level="replica")
    with contextlib.closing(server.connect()) as conn, pytest.raises(TerminalError) as err:
        checks.check_server(conn)
    assert "wal_level is 'replica'" in str(err.value)
    assert "ALTER SYSTEM SET wal_level = logical" in str(err.value) and "restart" in str(err.value)


def test_role_without_replication(pg: Any, db: Any, pg_database: str, unique_name: Any) -> None:
    role = unique_name("norepl")
    _exec(
        db, f"CREATE ROLE {role} LOGIN PASSWORD 'pw'", f'GRANT CONNECT ON DATABASE "{pg_database}" TO {role}'
    )
    try:
        params = _params(
            pg, **{"database.user": role, "database.password": "pw", "database.dbname": pg_database}
        )
        with contextlib.closing(connection.connect(params)) as conn, pytest.raises(TerminalError) as err:
            checks.check_server(conn, params)
        assert f"ALTER ROLE {role} REPLICATION" in str(err.value)
        with pytest.raises(TerminalError, match=f"ALTER ROLE {role} REPLICATION"):
            checks.check_replication_connection(params)
    finally:
        _exec(db, f'REVOKE CONNECT ON DATABASE "{pg_database}" FROM {role}', f"DROP ROLE {role}")


def test_pg_hba_refuses_replication(pg_factory: Any) -> None:
    server = pg_factory()
    # TCP only for database postgres: the replication connection to the connector's database is
    # refused (logical replication connections are matched by database name).
    (server.datadir / "pg_hba.conf").write_text(
        "local all all trust\nlocal replication all trust\nhost postgres all 127.0.0.1/32 scram-sha-256\n"
    )
    server.execute("SELECT pg_reload_conf()", dbname="postgres")
    params = PgConnParams.from_settings(settings_of("postgres", server.props()))
    deadline = time.monotonic() + 10  # the postmaster applies the reload asynchronously
    while True:
        try:
            checks.check_replication_connection(params)
        except TerminalError as exc:
            msg = str(exc)
            break
        assert time.monotonic() < deadline, "pg_hba.conf reload never took effect"
        time.sleep(0.1)
    assert f"pg_hba.conf on {params.address} refuses replication connections for user {server.user}" in msg
    assert f"host {server.dbname} {server.user} <client-address>/32" in msg and "pg_reload_conf" in msg


# --------------------------------------------------------------------------- slots
def test_slot_create_idempotent_info_and_drop(db: Any, unique_name: Any) -> None:
    slot = unique_name("slot")
    assert slots.slot_info(db, slot) is None
    info = slots.ensure_slot(db, slot)
    assert info.plugin == "pgoutput" and not info.active and info.confirmed_flush_lsn
    again = slots.ensure_slot(db, slot)
    assert again.confirmed_flush_lsn == info.confirmed_flush_lsn
    assert slots.current_wal_lsn(db) >= info.confirmed_flush_lsn
    assert slots.drop_slot(db, slot) is True
    assert slots.drop_slot(db, slot) is False
    assert slots.slot_info(db, slot) is None


def test_slot_with_other_plugin(db: Any, unique_name: Any) -> None:
    slot = unique_name("slot")
    _exec(db, f"SELECT pg_create_logical_replication_slot('{slot}', 'test_decoding')")
    with pytest.raises(TerminalError) as err:
        slots.ensure_slot(db, slot)
    msg = str(err.value)
    assert f"replication slot {slot} exists but uses plugin 'test_decoding'" in msg
    assert "drop it" in msg and "choose another slot.name" in msg
    with pytest.raises(TerminalError, match="plugin.name='wal2json' is not supported"):
        slots.ensure_slot(db, slot, plugin="wal2json")


def test_attach_with_retry(db: Any) -> None:
    calls: list[int] = []
    sleeps: list[float] = []

    def busy() -> None:
        calls.append(1)
        raise TransientError("replication slot x is in use by another process (PID 1)")

    with pytest.raises(TransientError, match="in use"):
        slots.attach_with_retry(busy, max_retries=3, delay_ms=250, sleep=sleeps.append)
    assert len(calls) == 3 and sleeps == [0.25, 0.25]

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 5:
            raise TransientError("busy")
        return "attached"

    assert slots.attach_with_retry(flaky, max_retries=6, delay_ms=1, sleep=sleeps.append) == "attached"

    def terminal() -> None:
        raise TerminalError("no")

    with pytest.raises(TerminalError):
        slots.attach_with_retry(terminal, sleep=sleeps.append)


def test_check_resume() -> None:
    info = SlotInfo("s", "pgoutput", "logical", "db", False, None, 100, 200)
    assert slots.check_resume(info, None) is None
    assert slots.check_resume(info, 200) is None
    assert slots.check_resume(info, 250) is None
    assert slots.check_resume(info, 150) is None  # only logged: idle keepalives move the slot
    err = slots.check_resume(info, 150, strict=True)
    assert err is not None and "older than slot s's confirmed_flush_lsn 0/C8" in str(err)
    assert "tidemark offsets reset" in str(err)
    gone = slots.check_resume(None, 150, "s")
    assert gone is not None and "replication slot s does not exist" in str(gone)
    for e in (err, gone):
        text = str(e)
        assert "tidemark offsets reset --config FILE --yes" in text and "are lost" in text
        assert "snapshot.mode=initial that next run first takes a new snapshot" in text
        assert "snapshot.mode=when_needed does this by itself" in text
    assert "creates the slot" in str(gone)
    lost = slots.check_resume(
        SlotInfo("s", "pgoutput", "logical", "db", False, None, 100, 200, "lost"), 150, "s"
    )
    assert lost is not None and "pg_drop_replication_slot('s')" in str(lost)


# --------------------------------------------------------------------------- publications
def test_publication_modes(db: Any, unique_name: Any) -> None:
    _exec(
        db, "CREATE TABLE a (id int PRIMARY KEY)", "CREATE TABLE b (id int PRIMARY KEY)", "CREATE SCHEMA s2"
    )
    _exec(db, 'CREATE TABLE s2."Mixed Case" (id int PRIMARY KEY)')

    def published(pub: str) -> set[tuple[str, str]]:
        with db.cursor() as cur:
            cur.execute("SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s", (pub,))
            return set(cur.fetchall())

    all_pub = unique_name("pub")
    assert publications.ensure_publication(db, all_pub, "all_tables") == "created"
    assert publications.ensure_publication(db, all_pub, "all_tables") == "exists"
    publications.check_publication_covers(db, all_pub, ["public.a", ("s2", "Mixed Case")])

    f_pub = unique_name("pub")
    assert publications.ensure_publication(db, f_pub, "filtered", ["public.a"]) == "created"
    assert published(f_pub) == {("public", "a")}
    assert publications.ensure_publication(db, f_pub, "filtered", ["public.a"]) == "exists"
    assert (
        publications.ensure_publication(db, f_pub, "filtered", ["public.b", ("s2", "Mixed Case")])
        == "altered"
    )
    assert published(f_pub) == {("public", "b"), ("s2", "Mixed Case")}

    none_pub = unique_name("pub")
    assert publications.ensure_publication(db, none_pub, "no_tables") == "created"
    assert published(none_pub) == set()

    assert publications.ensure_publication(db, none_pub, "disabled") == "exists"
    missing = unique_name("pub")
    with pytest.raises(TerminalError) as err:
        publications.ensure_publication(db, missing, "disabled")
    assert f"publication {missing} does not exist and publication.autocreate.mode is disabled" in str(
        err.value
    )
    assert f"CREATE PUBLICATION {missing}" in str(err.value)


def test_publication_missing_a_table(db: Any, unique_name: Any) -> None:
    _exec(db, "CREATE TABLE a (id int PRIMARY KEY)", "CREATE TABLE b (id int)", "CREATE TABLE c (id int)")
    pub = unique_name("pub")
    publications.ensure_publication(db, pub, "filtered", ["public.a"])
    with pytest.raises(TerminalError) as err:
        publications.check_publication_covers(db, pub, ["public.a", "public.b", "public.c"])
    msg = str(err.value)
    assert f"publication {pub} does not include captured table(s) public.b, public.c" in msg
    assert f'ALTER PUBLICATION {pub} ADD TABLE "public"."b", "public"."c";' in msg
    with pytest.raises(TerminalError, match="does not exist"):
        publications.check_publication_covers(db, unique_name("nopub"), ["public.a"])


def test_partitioned_table_coverage_and_listing(db: Any, unique_name: Any) -> None:
    _exec(
        db,
        "CREATE TABLE m (id int, k int, PRIMARY KEY (id, k)) PARTITION BY RANGE (k)",
        "CREATE TABLE m1 PARTITION OF m FOR VALUES FROM (0) TO (10)",
        "CREATE TABLE nopk (x int)",
        "ALTER TABLE nopk REPLICA IDENTITY FULL",
        "CREATE VIEW v AS SELECT 1",
    )
    pub = unique_name("pub")
    publications.ensure_publication(db, pub, "filtered", ["public.m"])
    publications.check_publication_covers(db, pub, ["public.m"])  # leaves listed, root captured
    tables = {(s, t): (k, ri, pk) for s, t, k, ri, pk in catalog.list_tables(db)}
    assert tables[("public", "m")] == ("p", "d", True)
    assert tables[("public", "m1")] == ("r", "d", True)
    assert tables[("public", "nopk")] == ("r", "f", False)
    assert ("public", "v") not in tables
    assert not any(s in catalog.SYSTEM_SCHEMAS for s, _ in tables)


def test_publish_via_partition_root(db: Any, unique_name: Any, caplog: pytest.LogCaptureFixture) -> None:
    """publish.via.partition.root: the publication is created WITH (publish_via_partition_root =
    true) in every autocreate mode, as Debezium 3.6 creates it; an existing one is left alone
    with a warning when its setting differs."""
    _exec(
        db,
        "CREATE TABLE m (id int, k int, PRIMARY KEY (id, k)) PARTITION BY RANGE (k)",
        "CREATE TABLE m1 PARTITION OF m FOR VALUES FROM (0) TO (10)",
    )

    def via_root(pub: str) -> bool:
        with db.cursor() as cur:
            cur.execute("SELECT pubviaroot FROM pg_publication WHERE pubname = %s", (pub,))
            return bool(cur.fetchone()[0])

    for mode, tables in (("all_tables", []), ("filtered", ["public.m"]), ("no_tables", [])):
        pub, plain = unique_name("pub"), unique_name("pub")
        assert publications.ensure_publication(db, pub, mode, tables, via_root=True) == "created"
        assert publications.ensure_publication(db, plain, mode, tables) == "created"
        assert via_root(pub) and not via_root(plain), mode
    with caplog.at_level("WARNING", logger="connectors.sources.postgres.publications"):
        assert publications.ensure_publication(db, plain, "no_tables", via_root=True) == "exists"
    assert f"publication {plain} exists with publish_via_partition_root=false" in caplog.text
    assert not via_root(plain)
