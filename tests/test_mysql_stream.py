"""End-to-end MySQL/MariaDB streaming through the real CLI: sinks, offsets, options, faults."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

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
from harness import free_port, wait_until
from mycdc import purge_binlogs, write_config

TABLES = [
    "CREATE TABLE customers (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(50) NOT NULL, email VARCHAR(50), "
    "secret VARCHAR(20))",
    "CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT NOT NULL, qty INT NOT NULL DEFAULT 1)",
    "CREATE TABLE skipme (id INT PRIMARY KEY, v TEXT)",
]


@pytest.fixture
def db(mariadb: Any, mariadb_database: str) -> Any:
    conn = mariadb.connect(database=mariadb_database)
    with conn.cursor() as cur:
        for sql in TABLES:
            cur.execute(sql)
    yield conn
    conn.close()


def ops(records: list[dict[str, Any]], topic_suffix: str) -> list[str | None]:
    return [
        (payload(r) or {}).get("op") if r["value"] is not None else None
        for r in records
        if r["topic"].endswith(topic_suffix)
    ]


def sql(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for s in statements:
            cur.execute(s)


def test_stream_to_all_sinks(
    mariadb: Any, mariadb_database: str, db: Any, kafka: Any, tmp_path: Path, unique_name: Any
) -> None:
    name = unique_name("my")
    out = tmp_path / "events.jsonl"
    cfg = write_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=unique_name.server_id(),
        db=mariadb_database,
        sinks="kafka,delta,jsonl",
        jsonl=out,
        kafka=kafka,
        prefix=name,
        **{"skipped.operations": "none", "include.query": "true"},
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")  # schema snapshot + start position
    sql(
        db,
        "INSERT INTO customers (name, email) VALUES ('Anne', 'a@x'), ('Bob', 'b@x')",
        "UPDATE customers SET name = 'Anne Marie' WHERE id = 1",
        "DELETE FROM customers WHERE id = 2",
        "UPDATE customers SET id = 10 WHERE id = 1",  # key change
        "INSERT INTO orders VALUES (1, 10, 3)",
        "TRUNCATE TABLE orders",
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")

    recs = read_jsonl(out)
    assert ops(recs, ".customers") == ["c", "c", "u", "d", None, "d", None, "c"]
    assert ops(recs, ".orders") == ["c", "t"]
    cust = [r for r in recs if r["topic"] == f"{name}.{mariadb_database}.customers"]
    upd = payload(cust[2])
    assert upd["after"] == {"id": 1, "name": "Anne Marie", "email": "a@x", "secret": None}
    assert upd["before"]["name"] == "Anne"
    src = upd["source"]
    assert src["connector"] == "mariadb" and src["name"] == name
    assert src["db"] == mariadb_database and src["table"] == "customers" and src["snapshot"] == "false"
    assert src["server_id"] == 1 and src["file"].startswith("mysql-bin.") and src["pos"] > 0
    assert (
        src["gtid"] and src["gtid"].startswith("0-1-") and "thread" in src
    )  # MariaDB logs no BEGIN: no thread
    assert src["query"] == "UPDATE customers SET name = 'Anne Marie' WHERE id = 1"
    second = payload(cust[1])["source"]
    assert second["row"] == 1 and payload(cust[0])["source"]["row"] == 0
    assert payload(cust[0], "key") == {"id": 1}
    assert cust[0]["key"]["schema"]["name"] == f"{name}.{mariadb_database}.customers.Key"
    trunc = next(r for r in recs if r["topic"].endswith(".orders") and payload(r)["op"] == "t")
    assert trunc["key"] is None
    # Schema change topic: the snapshot DDL is not streamed, the TRUNCATE is not a schema change.
    assert not [r for r in recs if r["topic"] == name]

    # Kafka: the same records, tombstones as null values, PK-change headers.
    got = kafka.read_all(f"{name}.{mariadb_database}.customers", min_count=8)
    assert len(got) == 8
    assert [m[1] is None for m in got] == [r["value"] is None for r in cust]
    assert dict(got[5][2]).get("__debezium.newkey") is not None
    assert dict(got[7][2]).get("__debezium.oldkey") is not None

    # Delta: every event once, with typed binlog positions; offsets readable from the CLI.
    rows = delta_rows(
        tmp_path / "warehouse" / name / "changelog", ["collection", "op", "binlog_file", "gtid"]
    )
    assert sorted((r["collection"], r["op"]) for r in rows if r["op"]) == sorted(
        [(f"{mariadb_database}.customers", o) for o in ["c", "c", "u", "d", "d", "c"]]
        + [(f"{mariadb_database}.orders", "c"), (f"{mariadb_database}.orders", "t")]
    )
    assert all(r["binlog_file"] for r in rows if r["op"])
    shown = run_cli("offsets", "show", "--config", str(cfg)).stdout
    assert '"gtids"' in shown and '"sink.delta"' in shown

    # A second bounded run with nothing new writes nothing more.
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    assert len(read_jsonl(out)) == len(recs)


def test_options_filters_masks_keys_tx_metadata(
    mariadb: Any, mariadb_database: str, db: Any, tmp_path: Path, unique_name: Any
) -> None:
    name = unique_name("my")
    dbn = mariadb_database
    out = tmp_path / "events.jsonl"
    cfg = write_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=unique_name.server_id(),
        db=dbn,
        jsonl=out,
        prefix=name,
        **{
            "table.exclude.list": rf"{dbn}\.skipme",
            "column.exclude.list": rf"{dbn}\.customers\.secret",
            "column.mask.with.3.chars": rf"{dbn}\.customers\.email",
            "column.truncate.to.2.chars": rf"{dbn}\.customers\.name",
            "message.key.columns": f"{dbn}.orders:customer_id",
            "skipped.operations": "u",
            "tombstones.on.delete": "false",
            "provide.transaction.metadata": "true",
            "debezium.format.key.schemas.enable": "false",
        },
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    db.begin()
    sql(
        db,
        "INSERT INTO customers (name, email, secret) VALUES ('Anne', 'anne@x', 's3')",
        "INSERT INTO orders VALUES (7, 1, 2)",
    )
    db.commit()
    sql(
        db,
        "INSERT INTO skipme VALUES (1, 'no')",
        "UPDATE orders SET qty = 5 WHERE id = 7",
        "DELETE FROM orders WHERE id = 7",
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    recs = read_jsonl(out)
    assert not any(r["topic"].endswith("skipme") for r in recs)
    cust = next(payload(r) for r in recs if r["topic"].endswith("customers"))
    assert cust["after"] == {"id": 1, "name": "An", "email": "***"}
    orders = [r for r in recs if r["topic"].endswith(".orders")]
    assert [payload(r)["op"] for r in orders] == ["c", "d"]  # update skipped, no tombstone
    assert orders[0]["key"] == {"customer_id": 1}  # key schemas disabled: bare payload
    tx = [payload(r) for r in recs if r["topic"] == f"{name}.transaction"]
    assert [t["status"] for t in tx] == ["BEGIN", "END", "BEGIN", "END"]
    gtid = cust["source"]["gtid"]
    assert tx[0]["id"] == tx[1]["id"] == gtid and gtid.startswith("0-1-")  # MariaDB: domain-server-seq
    assert tx[1]["event_count"] == 2
    assert sorted((d["data_collection"], d["event_count"]) for d in tx[1]["data_collections"]) == [
        (f"{dbn}.customers", 1),
        (f"{dbn}.orders", 1),
    ]
    assert cust["transaction"] == {"id": gtid, "total_order": 1, "data_collection_order": 1}
    assert payload(orders[0])["transaction"]["total_order"] == 2


def test_schema_changes_and_alter_while_down(
    mariadb: Any, mariadb_database: str, db: Any, tmp_path: Path, unique_name: Any
) -> None:
    name = unique_name("my")
    dbn = mariadb_database
    out = tmp_path / "events.jsonl"
    cfg = write_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=unique_name.server_id(),
        db=dbn,
        jsonl=out,
        prefix=name,
        **{"include.schema.changes": "true"},
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    sql(db, "INSERT INTO orders VALUES (1, 1, 1)")
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    # Connector down: the table changes shape, rows before and after the change.
    sql(
        db,
        "INSERT INTO orders VALUES (2, 1, 2)",
        "ALTER TABLE orders ADD COLUMN note VARCHAR(20) DEFAULT 'n' AFTER customer_id, DROP COLUMN qty",
        "INSERT INTO orders VALUES (3, 1, 'hello')",
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    # And once more after a restart, with history recovered from Delta.
    sql(db, "INSERT INTO orders VALUES (4, 2, 'again')")
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    recs = read_jsonl(out)
    after = [payload(r)["after"] for r in recs if r["topic"].endswith(".orders")]
    assert after == [
        {"id": 1, "customer_id": 1, "qty": 1},
        {"id": 2, "customer_id": 1, "qty": 2},
        {"id": 3, "customer_id": 1, "note": "hello"},
        {"id": 4, "customer_id": 2, "note": "again"},
    ]
    sc = [r for r in recs if r["topic"] == name]
    assert len(sc) == 1
    assert payload(sc[0], "key") == {"databaseName": dbn}
    v = payload(sc[0])
    assert v["ddl"].startswith("ALTER TABLE orders") and v["databaseName"] == dbn
    change = v["tableChanges"][0]
    assert change["type"] == "ALTER" and change["id"] == f'"{dbn}"."orders"'
    assert [c["name"] for c in change["table"]["columns"]] == ["id", "customer_id", "note"]
    assert change["table"]["primaryKeyColumnNames"] == ["id"]


def test_sigterm_stops_cleanly_and_resumes(
    mariadb: Any, mariadb_database: str, db: Any, tmp_path: Path, unique_name: Any
) -> None:
    out = tmp_path / "events.jsonl"
    cfg = write_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=unique_name.server_id(),
        db=mariadb_database,
        jsonl=out,
        sinks="jsonl,delta",
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    proc = popen_cli("run", "--config", str(cfg), log=tmp_path / "run.log")
    try:
        for i in range(50):
            sql(db, f"INSERT INTO orders VALUES ({i}, 1, 1)")
        wait_until(lambda: len(read_jsonl(out)) >= 50, timeout=60, what="50 events streamed")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    for i in range(50, 60):
        sql(db, f"INSERT INTO orders VALUES ({i}, 1, 1)")
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    ids = [payload(r)["after"]["id"] for r in read_jsonl(out)]
    assert ids == list(range(60))  # clean stop: nothing lost, nothing repeated
    assert len(delta_rows(tmp_path / "warehouse" / "tm" / "changelog", ["op"])) == 60


def test_max_seconds_heartbeats_and_offsets_reset(
    mariadb: Any, mariadb_database: str, db: Any, tmp_path: Path, unique_name: Any
) -> None:
    name = unique_name("my")
    dbn = mariadb_database
    out = tmp_path / "events.jsonl"
    sql(db, "CREATE TABLE hb (id INT AUTO_INCREMENT PRIMARY KEY, ts TIMESTAMP DEFAULT CURRENT_TIMESTAMP)")
    cfg = write_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=unique_name.server_id(),
        db=dbn,
        jsonl=out,
        prefix=name,
        **{
            "heartbeat.interval.ms": "200",
            "table.include.list": rf"{dbn}\.orders",
            "heartbeat.action.query": f"INSERT INTO {dbn}.hb () VALUES ()",
        },
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    for i in range(20):
        sql(db, f"INSERT INTO skipme VALUES ({i}, REPEAT('x', 1000))")
    before = run_cli("offsets", "show", "--config", str(cfg)).stdout
    run_cli("run", "--config", str(cfg), "--max-seconds", "3")
    shown = run_cli("offsets", "show", "--config", str(cfg)).stdout
    assert shown != before  # only uncaptured changes, but the offset moved on
    hb = [r for r in read_jsonl(out) if r["topic"] == f"__debezium-heartbeat.{name}"]
    assert hb
    assert_debezium_heartbeat(hb[0], name)
    assert mariadb.scalar(f"SELECT count(*) FROM {dbn}.hb") >= 1
    assert not [r for r in read_jsonl(out) if r["topic"].endswith(".orders")]

    run_cli("offsets", "reset", "--config", str(cfg), "--yes")
    assert '"reset": true' in run_cli("offsets", "show", "--config", str(cfg)).stdout


@pytest.mark.slow
def test_sigkill_during_workload_loses_nothing(
    mariadb: Any, mariadb_database: str, db: Any, kafka: Any, tmp_path: Path, unique_name: Any
) -> None:
    """SIGKILL the connector several times during a workload; Delta ends with every change
    exactly once, Kafka with every change at least once."""
    name = unique_name("my")
    cfg = write_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=unique_name.server_id(),
        db=mariadb_database,
        sinks="kafka,delta",
        kafka=kafka,
        prefix=name,
        **{"max.batch.size": "64"},
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    sigkill_during_workload(
        cfg,
        tmp_path / "warehouse" / name / "changelog",
        tmp_path / "run.log",
        lambda: mariadb.connect(database=mariadb_database),
        kafka,
        f"{name}.{mariadb_database}.orders",
        {"binlog_file": "file", "binlog_pos": "pos", "row": "row"},
    )


@pytest.mark.slow
def test_sigkill_inside_100k_row_transaction(
    mariadb: Any, mariadb_database: str, db: Any, kafka: Any, tmp_path: Path, unique_name: Any
) -> None:
    """One transaction of 100,000 rows, cut into batches of 1,000: SIGKILL while it is half
    delivered, restart, and Delta has every row exactly once (Kafka at least once)."""
    name = unique_name("my")
    total = 100_000
    sql(db, "CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(20))")
    cfg = write_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=unique_name.server_id(),
        db=mariadb_database,
        sinks="kafka,delta",
        kafka=kafka,
        prefix=name,
        **{"max.batch.size": "1000"},
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    db.begin()
    sql(db, f"INSERT INTO big SELECT seq, CONCAT('row-', seq) FROM seq_1_to_{total}")
    db.commit()
    changelog = tmp_path / "warehouse" / name / "changelog"
    kill_inside_then_resume(cfg, changelog, tmp_path / "run.log", total)
    rows = delta_rows(changelog, ["op", "key"])
    ids = [int(r["key"].split(":")[1].rstrip("}")) for r in rows]
    assert len(ids) == total and set(ids) == set(range(1, total + 1)), (len(ids), len(set(ids)))
    got = kafka.read_all(f"{name}.{mariadb_database}.big", min_count=total, timeout=120)
    assert len({m[0] for m in got}) == total


def test_server_restart_while_streaming(mariadb_factory: Any, tmp_path: Path, unique_name: Any) -> None:
    server = mariadb_factory()
    dbn = server.create_database(unique_name("db"))
    server.execute(f"CREATE TABLE {dbn}.orders (id INT PRIMARY KEY, qty INT)")
    out = tmp_path / "events.jsonl"
    cfg = write_config(
        tmp_path / "c.properties",
        server,
        server_id=unique_name.server_id(),
        db=dbn,
        jsonl=out,
        sinks="jsonl,delta",
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    proc = popen_cli("run", "--config", str(cfg), log=tmp_path / "run.log")
    try:
        for i in range(20):
            server.execute(f"INSERT INTO {dbn}.orders VALUES ({i}, 1)")
        wait_until(lambda: len(read_jsonl(out)) >= 20, timeout=60, what="first events")
        server.restart()
        for i in range(20, 40):
            server.execute(f"INSERT INTO {dbn}.orders VALUES ({i}, 1)")
        wait_until(
            lambda: len({payload(r)["after"]["id"] for r in read_jsonl(out)}) >= 40,
            timeout=120,
            what="events after the server restart",
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "retrying" in (tmp_path / "run.log").read_text()
    assert len(delta_rows(tmp_path / "warehouse" / "tm" / "changelog", ["op"])) == 40  # exactly once


_SERVER_SETTINGS = {
    "statement_format": {"binlog_format": "STATEMENT"},
    "no_log_bin": {"log_bin": False},
    "minimal_image": {"binlog_row_image": "MINIMAL"},
}


@pytest.mark.parametrize(
    "case, expect",
    [
        ("wrong_password", "access denied"),
        ("statement_format", "binlog_format is STATEMENT"),
        ("no_log_bin", "binary logging is off"),
        ("minimal_image", "binlog_row_image is MINIMAL, the connector needs FULL"),
        ("no_replication_client", "lacks REPLICATION CLIENT\n"),
        ("no_replication_slave", "lacks REPLICATION SLAVE\n"),
        ("unreachable", "cannot reach the database"),
    ],
)
def test_setup_errors_are_one_clear_message(
    mariadb: Any, mariadb_factory: Any, tmp_path: Path, unique_name: Any, case: str, expect: str
) -> None:
    """Each set-up problem stops the first start with one message and a hint — also an
    unreachable server, which is not retried (errors.max.retries=-1) before it was ever reached."""
    extra: dict[str, Any] = {}
    server = mariadb
    if case == "wrong_password":
        extra["database.password"] = "nope"
    elif case == "unreachable":
        extra["database.port"] = free_port()  # nothing listens there
    elif case.startswith("no_replication_"):
        user = unique_name("u")
        grant = "REPLICATION SLAVE" if case == "no_replication_client" else "REPLICATION CLIENT"
        mariadb.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'")
        mariadb.execute(f"GRANT SELECT, RELOAD, SHOW DATABASES, {grant} ON *.* TO '{user}'@'%'")
        extra.update({"database.user": user, "database.password": "pw"})
    else:
        server = mariadb_factory(**_SERVER_SETTINGS[case])
    cfg = write_config(
        tmp_path / "c.properties",
        server,
        server_id=unique_name.server_id(),
        db="x",
        jsonl=tmp_path / "o.jsonl",
        **extra,
    )
    try:
        proc = run_cli("run", "--config", str(cfg), "--until-caught-up", check=False, timeout=60)
    finally:
        if case.startswith("no_replication_"):
            mariadb.execute(f"DROP USER '{extra['database.user']}'@'%'")
    assert proc.returncode == 1
    assert expect in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "nope" not in proc.stderr and "retrying" not in proc.stderr
    assert proc.stderr.count("tidemark: error:") == 1
    assert "\n  hint: " in proc.stderr


def test_purged_binlog_names_the_recovery(mariadb_factory: Any, tmp_path: Path, unique_name: Any) -> None:
    """A purged position stops the connector with the way on (offsets reset, and what is lost);
    following that hint, the next runs capture the new changes."""
    server = mariadb_factory()
    dbn = server.create_database(unique_name("db"))
    server.execute(f"CREATE TABLE {dbn}.orders (id INT PRIMARY KEY)")
    out = tmp_path / "o.jsonl"
    cfg = write_config(
        tmp_path / "c.properties", server, server_id=unique_name.server_id(), db=dbn, jsonl=out
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    server.execute(f"INSERT INTO {dbn}.orders VALUES (1)")
    purge_binlogs(server)
    proc = run_cli("run", "--config", str(cfg), "--until-caught-up", check=False, timeout=60)
    assert proc.returncode == 1
    err = " ".join(proc.stderr.split())
    assert "purged" in err and f"tidemark offsets reset --config {cfg} --yes" in err, proc.stderr
    assert "NOT captured" in err and "snapshot.mode=no_data" in err
    assert "snapshot.mode=when_needed does this by itself" in err and "new snapshot of the data" in err
    assert "Traceback" not in proc.stderr
    # Follow the hint: reset, run (fresh schema snapshot at the current position), then new changes stream.
    run_cli("offsets", "reset", "--config", str(cfg), "--yes")
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    server.execute(f"ALTER TABLE {dbn}.orders ADD COLUMN qty INT")
    server.execute(f"INSERT INTO {dbn}.orders VALUES (2, 5)")
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    rows = [payload(r)["after"] for r in read_jsonl(out) if r["topic"] == f"tm.{dbn}.orders"]
    assert rows == [{"id": 2, "qty": 5}]  # row 1 is the documented gap


def test_rows_of_a_table_hidden_from_the_user_stop_with_the_grant(
    mariadb: Any, mariadb_database: str, tmp_path: Path, unique_name: Any
) -> None:
    """MariaDB hides a table database.user holds no privilege on, so the schema read misses it
    (as Debezium's does). Its rows then stop the stream, as Debezium's default
    inconsistent.schema.handling.mode=fail does, with the GRANT to run first; none is emitted."""
    db, user = mariadb_database, unique_name("u")
    for table in ("seen", "hidden"):
        mariadb.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)", database=db)
    mariadb.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'")
    try:
        mariadb.execute(
            f"GRANT RELOAD, SHOW DATABASES, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{user}'@'%'"
        )
        mariadb.execute(f"GRANT SELECT ON {db}.seen TO '{user}'@'%'")
        cfg = write_config(
            tmp_path / "c.properties",
            mariadb,
            server_id=unique_name.server_id(),
            db=db,
            jsonl=tmp_path / "o.jsonl",
            database__user=user,
            database__password="pw",
        )
        run_cli("run", "--config", str(cfg), "--until-caught-up", timeout=60)  # the offset, the schema
        mariadb.execute("INSERT INTO seen VALUES (1, 'a')", database=db)
        mariadb.execute("INSERT INTO hidden VALUES (1, 'secret')", database=db)
        proc = run_cli("run", "--config", str(cfg), "--until-caught-up", check=False, timeout=60)
    finally:
        mariadb.execute(f"DROP USER '{user}'@'%'")
    assert proc.returncode == 1, proc.stderr
    assert f"rows for {db}.hidden, which is not in the schema model" in proc.stderr, proc.stderr
    assert (
        f"hint: if database.user may not read it, GRANT SELECT ON `{db}`.`hidden` TO it first" in proc.stderr
    )
    assert "Traceback" not in proc.stderr
    assert b"secret" not in (tmp_path / "o.jsonl").read_bytes()
