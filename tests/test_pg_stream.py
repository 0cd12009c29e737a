"""End-to-end PostgreSQL streaming through the real CLI: sinks, offsets, options, faults."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import psycopg2
import pytest
from cdc import (
    assert_debezium_heartbeat,
    delta_rows,
    kill_inside_then_resume,
    payload,
    popen_cli,
    read_jsonl,
    run_cli,
    sigkill_during_workload,
)
from harness import wait_until
from pgcdc import write_config

from connectors.format import temporal as T

TABLES = """
CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL, email text, secret text);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, qty int NOT NULL DEFAULT 1);
CREATE TABLE skipme (id int PRIMARY KEY, v text);
"""


@pytest.fixture
def db(pg: Any, pg_database: str) -> Any:
    conn = pg.connect(dbname=pg_database)
    conn.cursor().execute(TABLES)
    yield conn
    conn.close()


def ops(records: list[dict[str, Any]], topic_suffix: str) -> list[str | None]:
    return [
        (payload(r) or {}).get("op") if r["value"] is not None else None
        for r in records
        if r["topic"].endswith(topic_suffix)
    ]


def test_stream_to_all_sinks(
    pg: Any, pg_database: str, db: Any, kafka: Any, tmp_path: Path, unique_name: Any
) -> None:
    slot = unique_name("slot")
    out = tmp_path / "events.jsonl"
    cfg = write_config(
        tmp_path / "c.properties",
        pg,
        slot=slot,
        dbname=pg_database,
        sinks="kafka,delta,jsonl",
        jsonl=out,
        kafka=kafka,
        prefix=slot,
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")  # creates slot + publication
    cur = db.cursor()
    cur.execute("INSERT INTO customers (name, email) VALUES ('Anne', 'a@x'), ('Bob', 'b@x')")
    cur.execute("UPDATE customers SET name = 'Anne Marie' WHERE id = 1")
    cur.execute("DELETE FROM customers WHERE id = 2")
    cur.execute("UPDATE customers SET id = 10 WHERE id = 1")  # key change
    cur.execute("INSERT INTO orders VALUES (1, 10, 3)")
    run_cli("run", "--config", str(cfg), "--until-caught-up")

    recs = read_jsonl(out)
    assert ops(recs, ".public.customers") == ["c", "c", "u", "d", None, "d", None, "c"]
    assert ops(recs, ".public.orders") == ["c"]
    upd = payload(recs[2])
    assert upd["after"] == {"id": 1, "name": "Anne Marie", "email": "a@x", "secret": None}
    assert upd["source"]["table"] == "customers" and upd["source"]["lsn"] > 0 and upd["source"]["txId"] > 0
    assert payload(recs[0], "key") == {"id": 1}
    assert recs[0]["key"]["schema"]["name"] == f"{slot}.public.customers.Key"

    # Kafka: the same records, tombstones as null values, PK-change headers.
    got = kafka.read_all(f"{slot}.public.customers", min_count=8)
    assert len(got) == 8
    assert [m[1] is None for m in got] == [
        r["value"] is None for r in recs if r["topic"].endswith("customers")
    ], [(m[0], m[1] is None) for m in got]
    delete_for_key_change = got[5]
    assert dict(delete_for_key_change[2]).get("__debezium.newkey") is not None

    # Delta: every event once, with typed positions; offsets readable from the CLI.
    rows = delta_rows(tmp_path / "warehouse" / slot / "changelog", ["collection", "op", "lsn"])
    assert sorted((r["collection"], r["op"]) for r in rows if r["op"]) == sorted(
        [("public.customers", o) for o in ["c", "c", "u", "d", "d", "c"]] + [("public.orders", "c")]
    )
    shown = run_cli("offsets", "show", "--config", str(cfg)).stdout
    assert '"lsn_flush"' in shown and '"sink.delta"' in shown

    # A second bounded run with nothing new writes nothing more.
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    assert len(read_jsonl(out)) == len(recs)


def test_options_filters_masks_keys(
    pg: Any, pg_database: str, db: Any, tmp_path: Path, unique_name: Any
) -> None:
    slot = unique_name("slot")
    out = tmp_path / "events.jsonl"
    cfg = write_config(
        tmp_path / "c.properties",
        pg,
        slot=slot,
        dbname=pg_database,
        jsonl=out,
        prefix=slot,
        **{
            "table.exclude.list": r"public\.skipme",
            "column.exclude.list": r"public\.customers\.secret",
            "column.mask.with.3.chars": r"public\.customers\.email",
            "column.truncate.to.2.chars": r"public\.customers\.name",
            "message.key.columns": "public.orders:customer_id",
            "skipped.operations": "u",
            "tombstones.on.delete": "false",
            "provide.transaction.metadata": "true",
            "debezium.format.key.schemas.enable": "false",
        },
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    cur = db.cursor()
    cur.execute("BEGIN")
    cur.execute("INSERT INTO customers (name, email, secret) VALUES ('Anne', 'anne@x', 's3')")
    cur.execute("INSERT INTO orders VALUES (7, 1, 2)")
    cur.execute("COMMIT")
    cur.execute("INSERT INTO skipme VALUES (1, 'no')")
    cur.execute("UPDATE orders SET qty = 5 WHERE id = 7")
    cur.execute("DELETE FROM orders WHERE id = 7")
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    recs = read_jsonl(out)
    topics = [r["topic"] for r in recs]
    assert not any(t.endswith("skipme") for t in topics)
    cust = next(payload(r) for r in recs if r["topic"].endswith("customers"))
    assert cust["after"] == {"id": 1, "name": "An", "email": "***"}
    orders = [r for r in recs if r["topic"].endswith("orders")]
    assert [payload(r)["op"] for r in orders] == ["c", "d"]  # update skipped, no tombstone
    assert orders[0]["key"] == {"customer_id": 1}  # key schemas disabled: bare payload
    tx = [payload(r) for r in recs if r["topic"] == f"{slot}.transaction"]
    assert [t["status"] for t in tx][:2] == ["BEGIN", "END"]
    assert tx[1]["event_count"] == 2
    assert sorted((d["data_collection"], d["event_count"]) for d in tx[1]["data_collections"]) == [
        ("public.customers", 1),
        ("public.orders", 1),
    ]
    assert cust["transaction"]["total_order"] == 1


def test_sigterm_stops_cleanly_and_resumes(
    pg: Any, pg_database: str, db: Any, tmp_path: Path, unique_name: Any
) -> None:
    slot = unique_name("slot")
    out = tmp_path / "events.jsonl"
    cfg = write_config(
        tmp_path / "c.properties", pg, slot=slot, dbname=pg_database, jsonl=out, sinks="jsonl,delta"
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    proc = popen_cli("run", "--config", str(cfg), log=tmp_path / "run.log")
    try:
        cur = db.cursor()
        for i in range(50):
            cur.execute("INSERT INTO orders VALUES (%s, 1, 1)", (i,))
        wait_until(lambda: len(read_jsonl(out)) >= 50, timeout=60, what="50 events streamed")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    for i in range(50, 60):
        db.cursor().execute("INSERT INTO orders VALUES (%s, 1, 1)", (i,))
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    ids = [payload(r)["after"]["id"] for r in read_jsonl(out)]
    assert ids == list(range(60))  # clean stop: nothing lost, nothing repeated


def test_heartbeats_advance_idle_slot(
    pg: Any, pg_database: str, db: Any, tmp_path: Path, unique_name: Any
) -> None:
    slot = unique_name("slot")
    out = tmp_path / "events.jsonl"
    db.cursor().execute("CREATE TABLE hb (id serial PRIMARY KEY, ts timestamptz DEFAULT now())")
    cfg = write_config(
        tmp_path / "c.properties",
        pg,
        slot=slot,
        dbname=pg_database,
        jsonl=out,
        prefix=slot,
        **{
            "heartbeat.interval.ms": "200",
            "table.include.list": r"public\.orders",
            "heartbeat.action.query": "INSERT INTO hb DEFAULT VALUES",
        },
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    before = pg.scalar(
        "SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
        dbname=pg_database,
    )
    # Changes only in an uncaptured table: nothing to emit, but the slot must still move on.
    for i in range(20):
        db.cursor().execute("INSERT INTO skipme VALUES (%s, repeat('x', 1000))", (i,))
    run_cli("run", "--config", str(cfg), "--max-seconds", "3")
    after = pg.scalar(
        "SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
        dbname=pg_database,
    )
    assert after > before
    hb = [r for r in read_jsonl(out) if r["topic"] == f"__debezium-heartbeat.{slot}"]
    assert hb
    assert_debezium_heartbeat(hb[0], slot)
    assert pg.scalar("SELECT count(*) FROM hb", dbname=pg_database) >= 1


def test_dropped_connection_is_retried(
    pg: Any, pg_database: str, db: Any, tmp_path: Path, unique_name: Any
) -> None:
    slot = unique_name("slot")
    out = tmp_path / "events.jsonl"
    cfg = write_config(
        tmp_path / "c.properties", pg, slot=slot, dbname=pg_database, jsonl=out, sinks="jsonl,delta"
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    proc = popen_cli("run", "--config", str(cfg), log=tmp_path / "run.log")
    try:
        cur = db.cursor()
        for i in range(20):
            cur.execute("INSERT INTO orders VALUES (%s, 1, 1)", (i,))
        wait_until(lambda: len(read_jsonl(out)) >= 20, timeout=60, what="first events")
        killed = pg.scalar(
            "SELECT count(pg_terminate_backend(active_pid)) FROM pg_replication_slots "
            "WHERE slot_name = %s AND active_pid IS NOT NULL",
            (slot,),
        )
        assert killed == 1
        for i in range(20, 40):
            cur.execute("INSERT INTO orders VALUES (%s, 1, 1)", (i,))
        wait_until(
            lambda: len({payload(r)["after"]["id"] for r in read_jsonl(out)}) >= 40,
            timeout=90,
            what="events after reconnect",
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "retrying" in (tmp_path / "run.log").read_text()
    rows = delta_rows(tmp_path / "warehouse" / "tm" / "changelog", ["after"])
    assert len(rows) == 40  # Delta: exactly once across the reconnect


def _inserts_through_outages(server: Any, table: str, n: int, done: threading.Event) -> None:
    """Insert ids 0..n-1 one transaction each, reconnecting through a server restart.

    ON CONFLICT makes the retry of a commit whose outcome was lost harmless, so the table ends
    with every id exactly once and is itself the expected set."""
    deadline = time.monotonic() + 240
    conn: Any = None
    i = 0
    try:
        while i < n and time.monotonic() < deadline:
            try:
                if conn is None:
                    conn = server.connect()
                conn.cursor().execute(
                    f"INSERT INTO {table} VALUES (%s, 1, 1) ON CONFLICT (id) DO NOTHING", (i,)
                )
                i += 1
            except psycopg2.Error:
                conn = None
                time.sleep(0.1)  # pacing while the server is down; bounded by the deadline
    finally:
        done.set()


def test_server_restart_while_streaming(pg_factory: Any, tmp_path: Path) -> None:
    """The server restarts under a running connector: "connection refused" while it is down is
    retried (not fatal as at the first start), and every row lands in Delta exactly once."""
    server = pg_factory()
    server.execute("CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, qty int NOT NULL)")
    out = tmp_path / "events.jsonl"
    cfg = write_config(tmp_path / "c.properties", server, slot="restart_slot", jsonl=out, sinks="delta,jsonl")
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    log = tmp_path / "run.log"
    changelog = tmp_path / "warehouse" / "tm" / "changelog"
    proc = popen_cli("run", "--config", str(cfg), log=log)
    done = threading.Event()
    n = 1500
    writer = threading.Thread(target=_inserts_through_outages, args=(server, "orders", n, done))
    try:
        writer.start()
        wait_until(lambda: len(read_jsonl(out)) >= 100, timeout=60, what="events before the restart")
        server.stop()
        # The connector must see the server refuse connections and keep retrying.
        wait_until(
            lambda: "cannot connect to PostgreSQL" in log.read_text(errors="replace"),
            timeout=60,
            what="a refused reconnect attempt",
        )
        assert proc.poll() is None, log.read_text()[-3000:]
        server.start()
        writer.join(300)
        assert done.is_set() and not writer.is_alive()
        expected = sorted(r[0] for r in server.query("SELECT id FROM orders"))
        assert expected == list(range(n))
        wait_until(lambda: len(delta_rows(changelog, ["op"])) >= n, timeout=180, what="every row in Delta")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        done.set()
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert "retrying" in text and "Traceback" not in text
    rows = delta_rows(changelog, ["op", "after"])
    ids = [orjson.loads(r["after"])["id"] for r in rows if r["op"] == "c"]
    assert len(ids) == len(set(ids)), "a row landed twice in Delta"
    assert sorted(ids) == expected and len(rows) == n


@pytest.mark.parametrize("path", ["catalog", "heartbeat"])
def test_second_connection_drop_is_retried(pg_factory: Any, tmp_path: Path, path: str) -> None:
    """The catalog/heartbeat connection (not the replication one) dies: the next catalog read or
    heartbeat.action.query fails on it, and the run reconnects instead of ending."""
    server = pg_factory()
    server.execute("CREATE TABLE hb (id serial PRIMARY KEY)")
    out = tmp_path / "events.jsonl"
    extra = {"heartbeat.interval.ms": "300", "heartbeat.action.query": "INSERT INTO hb DEFAULT VALUES"}
    # hb is not captured: its changes need no catalog read, so each case fails on its own path.
    cfg = write_config(
        tmp_path / "c.properties",
        server,
        slot="aux_slot",
        jsonl=out,
        sinks="delta,jsonl",
        **{"table.include.list": r"public\.late"},
        **(extra if path == "heartbeat" else {}),
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    log = tmp_path / "run.log"
    proc = popen_cli("run", "--config", str(cfg), log=log)
    aux = (
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'tidemark' "
        "AND backend_type = 'client backend'"
    )
    try:
        wait_until(
            lambda: server.scalar("SELECT count(*) FROM pg_replication_slots WHERE active") == 1,
            timeout=60,
            what="connector streaming",
        )
        if path == "heartbeat":
            wait_until(
                lambda: server.scalar("SELECT count(*) FROM hb") >= 1, timeout=60, what="first heartbeat"
            )
        assert server.scalar(aux) >= 1
        if path == "heartbeat":
            wait_until(
                lambda: "heartbeat.action.query" in log.read_text(),
                timeout=60,
                what="the heartbeat query failing on the dead connection",
            )
        server.execute("CREATE TABLE late (id int PRIMARY KEY, customer_id int, qty int)")
        server.execute("INSERT INTO late VALUES (1, 1, 1)")  # its Relation needs a catalog read
        wait_until(
            lambda: any(r["topic"] == "tm.public.late" for r in read_jsonl(out)),
            timeout=90,
            what="the new table's event after the reconnect",
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert "retrying" in text and "tidemark: error" not in text, text[-3000:]
    if path == "catalog":
        assert "reading the catalog for public.late" in text


@pytest.mark.parametrize(
    "case, expect",
    [
        ("wrong_password", "password"),
        ("unreachable", "127.0.0.1:1"),
        ("bad_plugin", "pgoutput"),
        ("snapshot_custom", "snapshot.mode=custom is not supported"),
        ("typo", "did you mean 'debezium.source.database.hostname'"),
    ],
)
def test_bad_input_gives_one_clear_error(pg: Any, tmp_path: Path, case: str, expect: str) -> None:
    extra: dict[str, Any] = {}
    if case == "wrong_password":
        extra["database.password"] = "nope"
    elif case == "unreachable":
        extra["database.port"] = "1"
    elif case == "bad_plugin":
        extra["plugin.name"] = "wal2json"
    elif case == "snapshot_custom":
        extra["snapshot.mode"] = "custom"
    elif case == "typo":
        extra["databse.hostname"] = "x"
    cfg = write_config(
        tmp_path / "c.properties", pg, slot="never_created", jsonl=tmp_path / "o.jsonl", **extra
    )
    proc = run_cli("run", "--config", str(cfg), "--until-caught-up", check=False, timeout=60)
    assert proc.returncode in (1, 2)
    assert expect in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "nope" not in proc.stderr  # secrets never printed


def test_dropped_slot_names_the_working_recovery(
    pg: Any, pg_database: str, db: Any, tmp_path: Path, unique_name: Any
) -> None:
    """A stored offset whose slot is gone stops with the recovery that works today (offsets reset);
    following it, the next run streams again from the server's current position."""
    slot = unique_name("slot")
    out = tmp_path / "events.jsonl"
    cfg = write_config(
        tmp_path / "c.properties", pg, slot=slot, dbname=pg_database, jsonl=out, sinks="jsonl,delta"
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")  # creates the slot
    db.cursor().execute("INSERT INTO orders VALUES (1, 1, 1)")
    run_cli("run", "--config", str(cfg), "--until-caught-up")  # stores an offset
    pg.drop_slot(slot)
    db.cursor().execute("INSERT INTO orders VALUES (2, 1, 1)")  # lost: no slot retains it
    proc = run_cli("run", "--config", str(cfg), "--until-caught-up", check=False, timeout=60)
    assert proc.returncode == 1 and proc.stderr.count("tidemark: error:") == 1, proc.stderr
    assert f"replication slot {slot} does not exist" in proc.stderr
    assert "tidemark offsets reset --config FILE --yes" in proc.stderr and "are lost" in proc.stderr
    assert "snapshot.mode=when_needed does this by itself" in proc.stderr
    run_cli("offsets", "reset", "--config", str(cfg), "--yes")
    run_cli("run", "--config", str(cfg), "--until-caught-up")  # creates the slot at the current position
    db.cursor().execute("INSERT INTO orders VALUES (3, 1, 1)")
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    assert [payload(r)["after"]["id"] for r in read_jsonl(out)] == [1, 3]


def test_wal_level_replica_is_explained(pg_factory: Any, tmp_path: Path) -> None:
    server = pg_factory(wal_level="replica")
    cfg = write_config(tmp_path / "c.properties", server, slot="s1", jsonl=tmp_path / "o.jsonl")
    proc = run_cli("run", "--config", str(cfg), "--until-caught-up", check=False, timeout=60)
    assert proc.returncode == 1
    assert "wal_level" in proc.stderr and "logical" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_sigkill_during_workload_loses_nothing(
    pg: Any, pg_database: str, db: Any, kafka: Any, tmp_path: Path, unique_name: Any
) -> None:
    """SIGKILL the connector several times during a workload; Delta ends with every change
    exactly once, Kafka with every change at least once."""
    slot = unique_name("slot")
    cfg = write_config(
        tmp_path / "c.properties",
        pg,
        slot=slot,
        dbname=pg_database,
        sinks="kafka,delta",
        kafka=kafka,
        prefix=slot,
        **{"max.batch.size": "64"},
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    sigkill_during_workload(
        cfg,
        tmp_path / "warehouse" / slot / "changelog",
        tmp_path / "run.log",
        lambda: pg.connect(dbname=pg_database),
        kafka,
        f"{slot}.public.orders",
        {"lsn": "lsn"},
    )


@pytest.mark.slow
def test_sigkill_inside_100k_row_transaction(
    pg: Any, pg_database: str, db: Any, kafka: Any, tmp_path: Path, unique_name: Any
) -> None:
    """One transaction of 100,000 rows, cut into batches of 1,000: SIGKILL while it is partly in
    Delta, restart, and Delta has every row exactly once (Kafka at least once), in bounded memory."""
    slot = unique_name("slot")
    total = 100_000
    db.cursor().execute("CREATE TABLE big (id int PRIMARY KEY, v text)")
    cfg = write_config(
        tmp_path / "c.properties",
        pg,
        slot=slot,
        dbname=pg_database,
        sinks="kafka,delta",
        kafka=kafka,
        prefix=slot,
        **{
            "max.batch.size": "1000",
            "table.include.list": r"public\.big",
            "tidemark.commit.max.events": "2000",
        },
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    db.cursor().execute(f"INSERT INTO big SELECT g, 'row-' || g FROM generate_series(1, {total}) g")
    changelog = tmp_path / "warehouse" / slot / "changelog"
    kill_inside_then_resume(cfg, changelog, tmp_path / "run.log", total)
    ids = [orjson.loads(r["key"])["id"] for r in delta_rows(changelog, ["key"])]
    assert len(ids) == total and set(ids) == set(range(1, total + 1)), (len(ids), len(set(ids)))
    got = kafka.read_all(f"{slot}.public.big", min_count=total, timeout=120)
    assert {orjson.loads(m[0])["payload"]["id"] for m in got} == set(range(1, total + 1))


def test_offsets_reset_and_slot_drop_on_stop(
    pg: Any, pg_database: str, db: Any, tmp_path: Path, unique_name: Any
) -> None:
    slot = unique_name("slot")
    out = tmp_path / "events.jsonl"
    cfg = write_config(tmp_path / "c.properties", pg, slot=slot, dbname=pg_database, jsonl=out)
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    db.cursor().execute("INSERT INTO orders VALUES (1, 1, 1)")
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    assert '"lsn_flush"' in run_cli("offsets", "show", "--config", str(cfg)).stdout
    run_cli("offsets", "reset", "--config", str(cfg), "--yes")
    assert '"reset": true' in run_cli("offsets", "show", "--config", str(cfg)).stdout

    slot_count = "SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s"
    assert pg.scalar(slot_count, (slot,)) == 1
    dropping = write_config(
        tmp_path / "d.properties",
        pg,
        slot=slot,
        dbname=pg_database,
        jsonl=out,
        **{"slot.drop.on.stop": "true"},
    )
    proc = popen_cli("run", "--config", str(dropping), log=tmp_path / "run.log")
    wait_until(
        lambda: (
            pg.scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s AND active", (slot,))
            == 1
        ),
        timeout=60,
        what="connector attached to the slot",
    )
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    assert pg.scalar(slot_count, (slot,)) == 0
    # The stored offset outlives the dropped slot: with slot.drop.on.stop that is expected, not an error.
    run_cli("run", "--config", str(dropping), "--until-caught-up")


@pytest.mark.parametrize("via_root", [False, True])
def test_publish_via_partition_root(
    via_root: bool, pg: Any, pg_database: str, db: Any, tmp_path: Path, unique_name: Any
) -> None:
    """The autocreated publication publishes partitions under the partitioned table's topic when
    publish.via.partition.root=true (Debezium 3.6's events for such a publication are compared in
    the conformance test), under their own topics otherwise."""
    db.cursor().execute(
        "CREATE TABLE meas (id int, city text, PRIMARY KEY (id, city)) PARTITION BY LIST (city);"
        "CREATE TABLE meas_a PARTITION OF meas FOR VALUES IN ('a');"
        "CREATE TABLE meas_b PARTITION OF meas FOR VALUES IN ('b')"
    )
    slot = unique_name("slot")
    out = tmp_path / "events.jsonl"
    cfg = write_config(
        tmp_path / "c.properties",
        pg,
        slot=slot,
        dbname=pg_database,
        jsonl=out,
        prefix="pr",
        **{
            "publication.autocreate.mode": "filtered",
            "table.include.list": r"public\.meas.*",
            "publish.via.partition.root": str(via_root).lower(),
        },
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    assert (
        pg.scalar("SELECT pubviaroot FROM pg_publication WHERE pubname = %s", (slot,), dbname=pg_database)
        is via_root
    )
    db.cursor().execute("INSERT INTO meas VALUES (1, 'a'), (2, 'b')")
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    topics = [r["topic"] for r in read_jsonl(out)]
    assert topics == (["pr.public.meas"] * 2 if via_root else ["pr.public.meas_a", "pr.public.meas_b"])


def test_server_text_settings_do_not_change_values(
    pg: Any, pg_database: str, db: Any, tmp_path: Path, unique_name: Any
) -> None:
    """A database whose DateStyle, IntervalStyle and extra_float_digits differ from the defaults
    prints values differently; the connector's sessions pin the forms its converters read."""
    for setting in ("DateStyle = 'SQL, DMY'", "IntervalStyle = 'sql_standard'", "extra_float_digits = 0"):
        db.cursor().execute(f'ALTER DATABASE "{pg_database}" SET {setting}')
    db.cursor().execute("CREATE TABLE t (id int PRIMARY KEY, d date, ts timestamp, i interval, f float8)")
    slot = unique_name("slot")
    out = tmp_path / "events.jsonl"
    cfg = write_config(tmp_path / "c.properties", pg, slot=slot, dbname=pg_database, jsonl=out, prefix="st")
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    db.cursor().execute(
        "INSERT INTO t VALUES (1, '2018-06-20', '2018-06-20 15:13:16.5', "
        "'1 year 2 mons 3 days 04:05:06.78', 0.1234567890123456789)"
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    after = payload(read_jsonl(out)[0])["after"]
    assert after["d"] == 17702 and after["ts"] == 1529507596500000
    # what the default IntervalStyle's text gives (the conformance test checks it against Debezium)
    assert after["i"] == T.interval_micros(*T.parse_pg_interval("1 year 2 mons 3 days 04:05:06.78"))
    assert after["f"] == 0.12345678901234568


@pytest.mark.parametrize("mode", ["fail", "warn", "skip", "ignore"])
def test_event_processing_failure_handling_mode(
    mode: str, pg: Any, pg_database: str, db: Any, tmp_path: Path, unique_name: Any
) -> None:
    """A change whose value cannot be converted stops the connector (fail, Debezium's default) or
    is left out with a warning (warn) or silently (skip, and its old name ignore). The trigger is
    real: a user type named `geometry` (not PostGIS) is read as PostGIS hex EWKB, as Debezium
    looks PostGIS types up by name too, and its labels are not hex."""
    db.cursor().execute(
        "CREATE TYPE geometry AS ENUM ('zz', 'yy');CREATE TABLE t (id int PRIMARY KEY, g geometry, n int)"
    )
    slot = unique_name("slot")
    out = tmp_path / "events.jsonl"
    cfg = write_config(
        tmp_path / "c.properties",
        pg,
        slot=slot,
        dbname=pg_database,
        jsonl=out,
        prefix="ev",
        **{"event.processing.failure.handling.mode": mode, "provide.transaction.metadata": "true"},
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    cur = db.cursor()
    cur.execute("INSERT INTO t VALUES (1, NULL, 1), (2, NULL, 2)")
    cur.execute("BEGIN")
    cur.execute("UPDATE t SET n = 10 WHERE id = 1")
    cur.execute("UPDATE t SET g = 'zz' WHERE id = 2")  # cannot be converted
    cur.execute("UPDATE t SET n = 30 WHERE id = 1")
    cur.execute("COMMIT")
    proc = run_cli("run", "--config", str(cfg), "--until-caught-up", check=mode != "fail")
    if mode == "fail":
        assert (
            proc.returncode == 1
            and "tidemark: error: cannot convert a change of public.t at LSN" in proc.stderr
        )
        assert "event.processing.failure.handling.mode=warn" in proc.stderr and "zz" not in proc.stderr
        return
    recs = read_jsonl(out)
    rows = [payload(r) for r in recs if r["topic"] == "ev.public.t"]
    assert [(r["op"], r["after"]["id"], r["after"]["n"]) for r in rows] == [
        ("c", 1, 1),
        ("c", 2, 2),
        ("u", 1, 10),
        ("u", 1, 30),
    ]
    end = [payload(r) for r in recs if r["topic"] == "ev.transaction" and payload(r)["status"] == "END"][-1]
    assert end["event_count"] == 2 and [r["transaction"]["total_order"] for r in rows[2:]] == [1, 2]
    warned = "skipping the change of public.t at LSN" in proc.stderr
    assert warned is (mode == "warn") and "zz" not in proc.stderr


def test_changes_of_a_table_renamed_or_dropped_since_are_streamed(
    pg: Any, pg_database: str, db: Any, tmp_path: Path, unique_name: Any
) -> None:
    """The stream runs behind the catalog: a change logged before its table was renamed or
    dropped is read when the name no longer exists. As Debezium, its columns come from the
    Relation message, each optional, the key from the schema last built for the name, with a
    warning; the events keep the old name. Before, the catalog look-up stopped the connector
    (LookupError) at every start, until the slot was moved past the change. Quoted names with a
    space, a quote and a non-ASCII letter are read the same way."""
    cur = db.cursor()
    cur.execute('CREATE SCHEMA "Odd S"')
    cur.execute('CREATE TABLE "Odd S"."Weird ""T"" ü" ("Id Col" bigint PRIMARY KEY, "x""y" text NOT NULL)')
    cur.execute("CREATE TABLE gone (id int PRIMARY KEY, v text NOT NULL)")
    slot = unique_name("slot")
    out = tmp_path / "events.jsonl"
    cfg = write_config(tmp_path / "c.properties", pg, slot=slot, dbname=pg_database, jsonl=out, prefix="rn")
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    cur.execute('INSERT INTO "Odd S"."Weird ""T"" ü" VALUES (1, \'a\')')
    cur.execute("INSERT INTO gone VALUES (1, 'a')")
    run_cli("run", "--config", str(cfg), "--until-caught-up")  # both schemas built from the catalog
    cur.execute('UPDATE "Odd S"."Weird ""T"" ü" SET "x""y" = \'b\' WHERE "Id Col" = 1')
    cur.execute("INSERT INTO gone VALUES (2, 'b')")
    cur.execute('ALTER TABLE "Odd S"."Weird ""T"" ü" RENAME TO "New"')
    cur.execute("DROP TABLE gone")
    cur.execute('INSERT INTO "Odd S"."New" VALUES (2, \'c\')')
    proc = run_cli("run", "--config", str(cfg), "--until-caught-up")
    assert proc.stderr.count("no longer in the catalog under this name") == 2, proc.stderr[-3000:]
    events = read_jsonl(out)[2:]
    assert [(e["topic"], e["value"]["payload"]["op"]) for e in events] == [
        ("rn.Odd_S.Weird__T___", "u"),
        ("rn.public.gone", "c"),
        ("rn.Odd_S.New", "c"),
    ]
    update, insert, renamed = events
    assert update["key"]["payload"] == {"Id Col": 1} and update["value"]["payload"]["after"] == {
        "Id Col": 1,
        'x"y': "b",
    }
    assert insert["key"]["payload"] == {"id": 2} and insert["value"]["payload"]["after"] == {
        "id": 2,
        "v": "b",
    }
    fields = {f["field"]: f["optional"] for f in insert["value"]["schema"]["fields"][1]["fields"]}
    assert fields == {"id": True, "v": True}  # Debezium's "optionality could not be determined"
    assert renamed["value"]["payload"]["source"]["table"] == "New"
