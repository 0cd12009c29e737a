"""`tidemark_<name>_maintenance` with `airflow dags test` (SQLite metadata database) after some
streaming, against the suite's PostgreSQL and a private MariaDB: OPTIMIZE / VACUUM / checkpoint
of the change log and the state tables leave the data as it was in fewer files; the log-retention
check passes on a healthy connector and fails the run with the way out when the stored position
is gone (the replication slot dropped, the binary logs purged past it).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import mycdc
import pgcdc
import pytest
from cdc import changelog_count, run_cli
from deltalake import DeltaTable
from harness import wait_until
from test_airflow_e2e import AIRFLOW, airflow_env, dags_test
from test_airflow_e2e import airflow_home as airflow_home  # the fixture: a module-scoped Airflow home

pytestmark = pytest.mark.timeout(600)
EXPIRY_S = 3


def failed_run(env: dict[str, str], dag_id: str) -> str:
    """`airflow dags test DAG`, which must fail; returns its output."""
    p = subprocess.run(
        [AIRFLOW, "dags", "test", dag_id], env=env, capture_output=True, text=True, timeout=300
    )
    out = p.stdout + p.stderr
    assert p.returncode != 0, out[-6000:]
    return out


def stream(config: Path, runs: int, change: Any) -> None:
    """A first bounded run of the connector (it creates the slot / takes the binlog position),
    then `runs` more, each after `change(i)`: a commit (a small file) each."""
    run_cli("run", "--config", str(config), "--until-caught-up", "--status-interval", "1")
    for i in range(runs):
        change(i)
        run_cli("run", "--config", str(config), "--until-caught-up", "--status-interval", "1")


def operations(table: Path) -> list[str]:
    return [h["operation"] for h in DeltaTable(str(table)).history()]


def assert_maintained(table: Path, rows: int) -> None:
    """OPTIMIZE ran, VACUUM (retention 0) left only the files of the current version, the rows
    are those of before and a checkpoint was written."""
    ops = operations(table)
    assert "OPTIMIZE" in ops and "VACUUM END" in ops, ops
    dt = DeltaTable(str(table))
    on_disk = {str(p) for p in table.rglob("*.parquet") if "_delta_log" not in p.parts}
    assert on_disk == set(dt.file_uris()), (on_disk, dt.file_uris())
    assert len(dt.file_uris()) == 1  # compacted
    assert dt.to_pyarrow_table().num_rows == rows
    assert list((table / "_delta_log").glob("*.checkpoint.parquet"))


def test_pg_maintenance_compacts_and_checks_the_slot(
    pg: Any, pg_database: str, unique_name: Any, airflow_home: Path, tmp_path: Path
) -> None:
    conn = pg.connect(dbname=pg_database)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL)")
    connectors, warehouse, slot = tmp_path / "connectors", tmp_path / "warehouse", unique_name("mslot")
    connectors.mkdir()
    config = pgcdc.write_config(
        connectors / "shop.properties",
        pg,
        slot=slot,
        dbname=pg_database,
        prefix="mtpg",
        sinks="delta",
        warehouse=warehouse,
        table__include__list="public.items",
    )

    def change(i: int) -> None:
        with conn.cursor() as cur:
            cur.execute(
                "INSERT INTO items SELECT g, 'x' FROM generate_series(%s, %s) g", (i * 10, i * 10 + 9)
            )

    stream(config, 3, change)
    changelog = warehouse / "mtpg" / "changelog"
    rows = changelog_count(changelog)
    assert rows == 30
    assert len(DeltaTable(str(changelog)).file_uris()) >= 3

    env = airflow_env(airflow_home, connectors, {})
    out = dags_test(env, "tidemark_shop_maintenance", {"retention_hours": 0})
    assert_maintained(changelog, rows)
    # The state table the runs wrote (a Delta-only connector keeps its offsets in the change log).
    assert "OPTIMIZE" in operations(warehouse / "_state" / "status")
    assert f"'slot': '{slot}'" in out and "'wal_status': 'reserved'" in out, out[-4000:]

    # The slot is gone while offsets are stored: the changes since are lost, the check says what to do.
    pg.execute(f"SELECT pg_drop_replication_slot('{slot}')")
    out = failed_run(env, "tidemark_shop_maintenance")
    assert f"replication slot '{slot}' does not exist although offsets are stored" in out, out[-4000:]
    assert "tidemark offsets reset" in out
    conn.close()


def test_mariadb_maintenance_compacts_and_checks_the_binlog(
    mariadb_factory: Any, unique_name: Any, airflow_home: Path, tmp_path: Path
) -> None:
    server = mariadb_factory()  # its own: the binary logs are purged below
    db = server.create_database(unique_name("mdb"))
    server.execute(f"CREATE TABLE {db}.items (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL)")
    connectors, warehouse = tmp_path / "connectors", tmp_path / "warehouse"
    connectors.mkdir()
    config = mycdc.write_config(
        connectors / "mshop.properties",
        server,
        server_id=unique_name.server_id(),
        db=db,
        prefix="mtmy",
        sinks="delta",
        warehouse=warehouse,
    )

    def change(i: int) -> None:
        server.execute(f"INSERT INTO {db}.items SELECT seq, 'x' FROM seq_{i * 10}_to_{i * 10 + 9}")

    stream(config, 3, change)
    changelog = warehouse / "mtmy" / "changelog"
    rows = changelog_count(changelog)
    assert rows == 30

    last_change = time.time()
    env = airflow_env(airflow_home, connectors, {})
    # A short expiry the stored position's events are past: the file being written never expires,
    # so a quiet connector on it is healthy.
    server.execute(f"SET GLOBAL binlog_expire_logs_seconds = {EXPIRY_S}")
    wait_until(lambda: time.time() - last_change > EXPIRY_S, timeout=30, what="the stored events expired")
    out = dags_test(env, "tidemark_mshop_maintenance", {"retention_hours": 0})
    assert_maintained(changelog, rows)
    (stored,) = [r[0] for r in server.query("SHOW BINARY LOGS")]  # the connector's file, being written
    assert f"'stored': '{stored}'" in out and f"'expiry_s': {EXPIRY_S}.0" in out, out[-4000:]

    # Rotated away from (without the expiry, which would purge it at once): the file can expire
    # now, with the stored position in it.
    server.execute("SET GLOBAL binlog_expire_logs_seconds = 0")
    server.execute("FLUSH BINARY LOGS")
    server.execute(f"SET GLOBAL binlog_expire_logs_seconds = {EXPIRY_S}")
    out = failed_run(env, "tidemark_mshop_maintenance")
    assert f"the stored position ({stored}) is " in out and "is the oldest binlog" in out, out[-4000:]
    assert f"the server purges binlogs after {EXPIRY_S} s: start the stream DAG now" in out

    # Purged past the stored position.
    newest = server.query("SHOW BINARY LOGS")[-1][0]

    def purged() -> bool:  # the server keeps a file a (just ended) dump thread still has open
        server.execute(f"PURGE BINARY LOGS TO '{newest}'")
        return bool(server.query("SHOW BINARY LOGS")[0][0] == newest)

    wait_until(purged, timeout=30, what="old binlogs purged")
    out = failed_run(env, "tidemark_mshop_maintenance")
    lost = f"the stored binlog file {stored} is no longer on the server (oldest: {newest})"
    assert lost in out, out[-4000:]
    assert "tidemark offsets reset" in out


def test_pg_maintenance_fails_when_the_slot_retains_more_wal_than_the_server_keeps(
    pg_factory: Any, unique_name: Any, airflow_home: Path, tmp_path: Path
) -> None:
    """The stopped connector's slot holds WAL beyond `max_slot_wal_keep_size` (`unreserved`): the
    next checkpoint removes WAL it needs; the check fails before that happens."""
    server = pg_factory(max_slot_wal_keep_size="32MB")  # its own: a server setting
    db = server.create_database(unique_name("mdb"))
    conn = server.connect(dbname=db)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE items (id int PRIMARY KEY)")
    connectors, slot = tmp_path / "connectors", unique_name("wslot")
    connectors.mkdir()
    pgcdc.write_config(
        connectors / "wal.properties", server, slot=slot, dbname=db, prefix="mtwal", sinks="delta"
    )

    def sql(query: str, *args: Any) -> Any:
        with conn.cursor() as cur:
            cur.execute(query, args)
            return cur.fetchone() if cur.description else None

    stream(connectors / "wal.properties", 1, lambda i: sql("INSERT INTO items VALUES (1)"))

    def unreserved() -> bool:  # a WAL segment (16 MB) a time until the server says so
        sql("INSERT INTO items SELECT max(id) + 1 FROM items")
        sql("SELECT pg_switch_wal()")
        return bool(
            sql("SELECT wal_status FROM pg_replication_slots WHERE slot_name = %s", slot) == ("unreserved",)
        )

    wait_until(unreserved, timeout=60, what="the slot's WAL unreserved", interval=0, max_busy=1)
    out = failed_run(airflow_env(airflow_home, connectors, {}), "tidemark_wal_maintenance")
    assert f"slot '{slot}' retains" in out and "(wal_status=unreserved)" in out, out[-4000:]
    assert "start the stream DAG now or raise max_slot_wal_keep_size" in out
    conn.close()
