"""The harness itself: each private server starts with the settings the rest of the suite relies on."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extras
import pymysql
import pytest
from harness import (
    KafkaBroker,
    MariaDbServer,
    PgServer,
    contrib_available,
    start_kafka,
    start_mariadb,
    start_pg,
)

# --- PostgreSQL -----------------------------------------------------------------------------


def test_pg_cdc_settings(pg: PgServer) -> None:
    assert pg.scalar("SHOW wal_level") == "logical"
    assert int(pg.scalar("SHOW max_wal_senders")) >= 10
    assert int(pg.scalar("SHOW max_replication_slots")) >= 10
    assert pg.scalar("SHOW listen_addresses") == "127.0.0.1"
    assert pg.port != 5432
    assert pg.scalar("SELECT rolsuper AND rolreplication FROM pg_roles WHERE rolname = current_user") is True
    assert pg.scalar("SELECT current_database()") == "tidemark"


def test_pg_marker_applied(pg: PgServer, request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("postgres") is not None


def test_pg_pgoutput_slot(pg: PgServer, pg_database: str, unique_name) -> None:
    slot, pub = unique_name("slot"), unique_name("pub")
    pg.execute("CREATE TABLE t (id int PRIMARY KEY, v text)", dbname=pg_database)
    pg.execute(f"CREATE PUBLICATION {pub} FOR ALL TABLES", dbname=pg_database)
    pg.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,), dbname=pg_database)
    pg.execute("INSERT INTO t VALUES (1, 'a')", dbname=pg_database)
    changes = pg.scalar(
        "SELECT count(*) FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL, "
        "'proto_version', '1', 'publication_names', %s)",
        (slot, pub),
        dbname=pg_database,
    )
    assert changes >= 3  # BEGIN, RELATION, INSERT, COMMIT
    # pg_database's teardown must be able to drop the database despite the slot.


def test_pg_replication_connection(pg: PgServer, pg_database: str, unique_name) -> None:
    """pg_hba allows replication connections from 127.0.0.1 (what a logical-decoding client opens)."""
    slot = unique_name("slot")
    conn = psycopg2.connect(
        pg.dsn(dbname=pg_database), connection_factory=psycopg2.extras.LogicalReplicationConnection
    )
    with contextlib.closing(conn), conn.cursor() as cur:
        cur.create_replication_slot(slot, output_plugin="pgoutput")
        cur.execute("IDENTIFY_SYSTEM")
        assert cur.fetchone()[3] == pg_database
    pg.drop_slot(slot)


def test_pg_wrong_password_rejected(pg: PgServer) -> None:
    with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
        pg.connect(password="wrong")


def test_pg_props_and_dsn(pg: PgServer) -> None:
    props = pg.props()
    assert props == {
        "database.hostname": "127.0.0.1",
        "database.port": str(pg.port),
        "database.user": "tidemark",
        "database.password": "tidemark",
        "database.dbname": "tidemark",
    }
    assert f"port={pg.port}" in pg.dsn()
    assert "dbname='a b'" in pg.dsn(dbname="a b")


@pytest.mark.skipif(not contrib_available(), reason="postgresql-contrib is not installed")
def test_pg_contrib_extensions(pg: PgServer, pg_database: str) -> None:
    for ext in ("hstore", "citext", "ltree"):
        pg.execute(f"CREATE EXTENSION {ext}", dbname=pg_database)
    assert pg.scalar("SELECT 'a=>1'::hstore -> 'a'", dbname=pg_database) == "1"


def test_pg_factory_custom_settings(pg_factory, tmp_path: Path) -> None:
    other = pg_factory(wal_level="replica")
    assert other.scalar("SHOW wal_level") == "replica"
    with pytest.raises(psycopg2.Error, match="wal_level"):
        other.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")


def test_pg_kill_and_restart(pg_factory) -> None:
    server = pg_factory()
    server.execute("CREATE TABLE t (id int)")
    server.execute("INSERT INTO t VALUES (1)")
    server.kill()
    assert not server.is_running()
    with pytest.raises(psycopg2.OperationalError):
        server.connect()
    server.restart()
    assert server.query("SELECT id FROM t") == [(1,)]
    server.stop()
    assert not server.is_running()


# --- MariaDB --------------------------------------------------------------------------------


def test_mariadb_cdc_settings(mariadb: MariaDbServer) -> None:
    expected = {
        "log_bin": 1,
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "binlog_row_metadata": "FULL",
        "gtid_strict_mode": 1,
        "server_id": 1,
        "log_slave_updates": 1,
        "binlog_annotate_row_events": 1,
        "time_zone": "+00:00",
        "bind_address": "127.0.0.1",
    }
    assert {k: mariadb.variable(k) for k in expected} == expected
    assert mariadb.port != 3306


def test_mariadb_marker_applied(mariadb: MariaDbServer, request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("mariadb") is not None


def test_mariadb_binlog_rows_and_gtid(mariadb: MariaDbServer, mariadb_database: str) -> None:
    db = mariadb_database
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))", database=db)
    mariadb.execute("INSERT INTO t VALUES (1, 'a')", database=db)
    gtid = mariadb.variable("gtid_binlog_pos")
    assert gtid.startswith("0-1-")
    log_file = mariadb.query("SHOW MASTER STATUS")[0][0]
    events = [row[2] for row in mariadb.query(f"SHOW BINLOG EVENTS IN '{log_file}'")]
    assert {"Gtid", "Annotate_rows", "Table_map", "Write_rows_v1"} <= set(events)


def test_mariadb_user_and_wrong_password(mariadb: MariaDbServer) -> None:
    grants = " ".join(r[0] for r in mariadb.query("SHOW GRANTS"))
    assert "ALL PRIVILEGES ON *.*" in grants
    with pytest.raises(pymysql.err.OperationalError) as err:
        mariadb.connect(password="wrong")
    assert err.value.args[0] == 1045


def test_mariadb_props(mariadb: MariaDbServer) -> None:
    assert mariadb.props() == {
        "database.hostname": "127.0.0.1",
        "database.port": str(mariadb.port),
        "database.user": "tidemark",
        "database.password": "tidemark",
    }


def test_mariadb_factory_custom_settings(mariadb_factory) -> None:
    other = mariadb_factory(binlog_format="STATEMENT")
    assert other.variable("binlog_format") == "STATEMENT"


def test_mariadb_kill_and_restart(mariadb_factory) -> None:
    server = mariadb_factory()
    server.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    server.execute("INSERT INTO t VALUES (1)")
    before = server.variable("gtid_binlog_pos")
    server.kill()
    assert not server.is_running()
    server.restart()
    assert server.query("SELECT id FROM t") == [(1,)]
    assert server.variable("gtid_binlog_pos") == before


# --- Kafka (tansu) --------------------------------------------------------------------------


def test_kafka_round_trip(kafka: KafkaBroker, unique_name, request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("kafka") is not None
    topic = kafka.create_topic(unique_name("topic"), partitions=2)
    assert topic in kafka.topics()
    kafka.produce(topic, b'{"a":1}', key=b"k1", headers=[("h", b"1")], partition=1)
    kafka.produce(topic, None, key=b"k1", partition=0)  # tombstone
    assert kafka.read_all(topic, min_count=2) == [
        (b"k1", None, []),
        (b"k1", b'{"a":1}', [("h", b"1")]),
    ]


def test_kafka_read_all_missing_topic_is_empty(kafka: KafkaBroker, unique_name) -> None:
    assert kafka.read_all(unique_name("missing"), timeout=1.5) == []


# --- Spark ----------------------------------------------------------------------------------


def test_spark_tiny_job(spark, request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("spark") is not None
    assert spark.sparkContext.master == "local[2]"
    df = spark.createDataFrame([(1, "a"), (2, "b"), (3, "a")], ["id", "k"])
    assert sorted(tuple(r) for r in df.groupBy("k").count().collect()) == [("a", 2), ("b", 1)]


# --- lifecycle shared by the servers (connectors.app.embedded.server) -----------------------


@pytest.mark.parametrize(
    "start",
    [
        pytest.param(start_pg, marks=pytest.mark.postgres, id="postgres"),
        pytest.param(start_mariadb, marks=pytest.mark.mariadb, id="mariadb"),
        pytest.param(start_kafka, marks=pytest.mark.kafka, id="kafka"),
    ],
)
def test_port_taken_before_first_start_is_replaced(
    start: Callable[[Path], Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Another process binds the server's free port before the server does (the window after
    `free_port`): the first start moves to another port instead of failing."""
    from connectors.app.embedded import server as server_module
    from connectors.app.embedded import util

    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))  # bound, not listening: the server's bind fails
        taken = blocker.getsockname()[1]
        handed = iter([taken])
        monkeypatch.setattr(server_module, "free_port", lambda: next(handed, None) or util.free_port())
        server = start(tmp_path)
        try:
            assert server.port != taken
            assert server.is_running()
        finally:
            server.destroy()
        assert not tmp_path.exists() or not any(tmp_path.glob("tidemark-*"))


# --- helpers --------------------------------------------------------------------------------


def test_unique_name_and_warehouse(unique_name, warehouse: Path) -> None:
    a, b = unique_name("My-Slot"), unique_name("My-Slot")
    assert a != b and a.startswith("my_slot_") and a.replace("_", "").isalnum()
    assert unique_name.server_id() != 1
    assert warehouse.is_dir() and not any(warehouse.iterdir())


# --- polling --------------------------------------------------------------------------------


class _Clock:
    """time.monotonic/time.sleep of connectors.app.embedded.util, on a fake clock."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(round(s, 6))
        self.now += s


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    from connectors.app.embedded import util

    c = _Clock()
    monkeypatch.setattr(util.time, "monotonic", c.monotonic)
    monkeypatch.setattr(util.time, "sleep", c.sleep)
    return c


def _probe(clock: _Clock, cost: float, ready_at: int) -> Callable[[], bool]:
    calls = [0]

    def probe() -> bool:
        clock.now += cost
        calls[0] += 1
        return calls[0] >= ready_at

    return probe


def test_wait_until_spaces_out_a_slow_probe(clock: _Clock) -> None:
    from connectors.app.embedded.util import wait_until

    # a 0.1 s probe takes at most a quarter of the time: 0.3 s between calls, not 0.05
    assert wait_until(_probe(clock, 0.1, 4), 10, "it", interval=0.05)
    assert clock.sleeps == [0.3, 0.3, 0.3]
    # a cheap probe keeps the interval; a very slow one waits at most MAX_PROBE_PAUSE_S more
    clock.sleeps.clear()
    wait_until(_probe(clock, 0.001, 3), 10, "it", interval=0.05)
    assert clock.sleeps == [0.05, 0.05]
    clock.sleeps.clear()
    wait_until(_probe(clock, 2.0, 2), 60, "it", interval=0.05)
    assert clock.sleeps == [1.0]
    # max_busy=1 polls back to back
    clock.sleeps.clear()
    wait_until(_probe(clock, 0.1, 3), 10, "it", interval=0, max_busy=1)
    assert clock.sleeps == [0, 0]


def test_wait_until_probes_last_at_the_deadline(clock: _Clock) -> None:
    from connectors.app.embedded.util import HarnessError, wait_until

    probe = _probe(clock, 0.1, 10**6)
    with pytest.raises(HarnessError, match=r"timed out after 1s waiting for it"):
        wait_until(probe, 1, "it", interval=0.05)
    # calls at 0, 0.4 and 0.8 (0.1 s each, then 0.3 s apart); the last pause is cut to reach
    # the deadline (1.0) exactly, where the final call is made
    assert clock.sleeps == [0.3, 0.3, 0.1]
    assert clock.now == pytest.approx(1.1)


# --- reading the sinks' output ----------------------------------------------------------------


def test_read_bench_jsonl_reads_what_the_checks_need(tmp_path: Path) -> None:
    import orjson
    from cdc import read_bench_jsonl

    def rec(topic: str, key: Any, after: Any, op: str = "c") -> bytes:
        schema = {"type": "struct", "fields": [{"type": "int64", "field": "id"}]}
        value = {
            "schema": schema,
            "payload": {"op": op, "before": None, "after": after, "source": {"snapshot": "false"}},
        }
        return (
            orjson.dumps({"topic": topic, "key": {"schema": schema, "payload": key}, "value": value}) + b"\n"
        )

    out = tmp_path / "out.jsonl"
    out.write_bytes(
        rec("tm.public.bench", {"id": 1}, {"id": 1, "name": "a", "qty": 2, "note": "n"}, op="r")
        + rec("tm.public.debezium_signal", {"id": "sig-1"}, {"id": "sig-1", "type": "x", "data": None})
        + orjson.dumps({"topic": "tm.public.bench", "key": {"payload": {"id": 1}}, "value": None})
        + b"\n"
        + rec("tm.public.bench", {"id": 2}, {"id": 2, "name": "b", "qty": 3})[:40]  # being written
    )
    got = read_bench_jsonl(out, ".bench")
    assert [r["topic"] for r in got] == ["tm.public.bench", "tm.public.bench"]  # no signal, no partial line
    first = got[0]["value"]["payload"]
    assert first["op"] == "r" and first["after"] == {"id": 1, "name": "a", "qty": 2}
    assert first["source"]["snapshot"] == "false" and got[1]["value"] is None
    assert read_bench_jsonl(tmp_path / "none.jsonl") == []
    # unfiltered, every id must be an integer: the signal table's text ids are refused, not misread
    with pytest.raises(Exception, match="changed from number to string"):
        read_bench_jsonl(out)
    # a schema change has a ddl and no op; a change event an op and no ddl (as read_jsonl's)
    ddl = {"topic": "tm", "key": {"payload": {"databaseName": "d"}}, "value": {"payload": {"ddl": "CREATE"}}}
    out.write_bytes(
        orjson.dumps(ddl) + b"\n" + rec("tm.d.bench", {"id": 5}, {"id": 5, "name": "e", "qty": 1})
    )
    schema_change, change = (r["value"]["payload"] for r in read_bench_jsonl(out))
    assert "op" not in schema_change and schema_change["ddl"] == "CREATE"
    assert "ddl" not in change and change["op"] == "c"
