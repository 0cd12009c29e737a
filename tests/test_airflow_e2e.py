"""The Airflow DAGs end to end with real Airflow 3 (`airflow dags test`, SQLite metadata database),
real Spark (`SparkSubmitOperator` → `spark-submit` of the pyspark wheel, `local[2]`) and the
suite's PostgreSQL and MariaDB: form values → the snapshot job → rows in the Delta change log →
the deferrable sensor completes on the COMPLETED notification; the stream DAG with
`until_caught_up`; the status page's API on the status table the stream wrote.

The database credentials come from Airflow Connections (`AIRFLOW_CONN_*`), named by
`tidemark.airflow.connection.id`; the password must not appear anywhere in Airflow's output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cdc import changelog_count, delta_rows

ROOT = Path(__file__).resolve().parents[1]
AIRFLOW = str(Path(sys.executable).parent / "airflow")
pytestmark = pytest.mark.timeout(900)


def airflow_env(home: Path, connectors: Path, conns: dict[str, dict[str, Any]]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "TIDEMARK_CONNECTORS"))}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags"),
        AIRFLOW__CORE__PLUGINS_FOLDER=str(ROOT / "plugins"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__LOGGING__LOGGING_LEVEL="INFO",
        TIDEMARK_CONNECTORS_DIR=str(connectors),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[2]"}),
    )
    for conn_id, conn in conns.items():
        env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(conn)
    return env


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("airflow")
    env = airflow_env(home, home / "connectors", {})
    subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    return home


def dags_test(env: dict[str, str], dag_id: str, conf: dict[str, Any], timeout: float = 420) -> str:
    """`airflow dags test DAG -c CONF`; returns its output (stdout + stderr); fails on a failed run."""
    p = subprocess.run(
        [AIRFLOW, "dags", "test", dag_id, "-c", json.dumps(conf)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-6000:]
    return out


def run_state(out: str) -> str:
    """The final state `airflow dags test` reports for the run."""
    for line in reversed(out.splitlines()):
        if "Dag run" in line or "dag_run" in line.lower():
            for state in ("success", "failed"):
                if state in line:
                    return state
    return "unknown"


def connector_file(path: Path, conn_id: str, props: dict[str, str]) -> Path:
    lines = {**props, "tidemark.airflow.connection.id": conn_id}
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return path


# --------------------------------------------------------------------------- PostgreSQL
@pytest.fixture(scope="module")
def pg_airflow(
    pg: Any, airflow_home: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    from harness import unique_name

    work = tmp_path_factory.mktemp("af_pg")
    db = pg.create_database(unique_name("afdb"))
    conn = pg.connect(dbname=db)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL)")
        cur.execute("INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 500) g")
        cur.execute("CREATE TABLE other (id int PRIMARY KEY)")
    connectors = work / "connectors"
    connectors.mkdir()
    slot = unique_name("afslot")
    connector_file(
        connectors / "shop.properties",
        "tm_pg",
        {
            "debezium.source.connector.class": "postgres",
            "debezium.source.topic.prefix": "afpg",
            "debezium.source.slot.name": slot,
            "debezium.source.publication.name": slot,
            "debezium.source.poll.interval.ms": "100",
            "debezium.source.snapshot.mode": "initial",
            "debezium.source.table.include.list": "public.items",
            "debezium.sink.type": "delta",
            "tidemark.warehouse": str(work / "warehouse"),
            "tidemark.spark.master": "local[2]",
            "tidemark.spark.conf.spark.ui.enabled": "false",
        },
    )
    # A role of its own with a password that cannot turn up in the output by chance.
    user, secret = unique_name("afuser"), "pw-" + unique_name("secret")
    with conn.cursor() as cur:
        cur.execute(f"CREATE ROLE {user} LOGIN SUPERUSER PASSWORD '{secret}'")
    conns = {
        "tm_pg": {
            "conn_type": "postgres",
            "host": pg.host,
            "port": pg.port,
            "login": user,
            "password": secret,
            "schema": db,
        }
    }
    env = airflow_env(airflow_home, connectors, conns)
    yield {
        "env": env,
        "conn": conn,
        "warehouse": work / "warehouse",
        "db": db,
        "secret": secret,
        "slot": slot,
    }
    conn.close()
    with pg.connect() as c, c.cursor() as cur:
        cur.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
            (slot,),
        )
    pg.drop_database(db)
    pg.execute(f"DROP ROLE {user}")


def test_pg_snapshot_dag_initial_lands_rows_and_the_sensor_completes(pg_airflow: dict[str, Any]) -> None:
    out = dags_test(
        pg_airflow["env"], "tidemark_shop_snapshot", {"type": "initial", "tables": ["public.items"]}
    )
    changelog = pg_airflow["warehouse"] / "afpg" / "changelog"
    rows = delta_rows(changelog, ["collection", "op"])
    assert sum(1 for r in rows if r["op"] == "r" and r["collection"] == "public.items") == 500
    # The sensor deferred and completed on the job's COMPLETED notification.
    assert "Initial Snapshot COMPLETED" in out, out[-4000:]
    assert "spark-submit" in out
    assert pg_airflow["secret"] not in out


def test_pg_snapshot_dag_refuses_a_table_that_is_not_captured(pg_airflow: dict[str, Any]) -> None:
    p = subprocess.run(
        [
            AIRFLOW,
            "dags",
            "test",
            "tidemark_shop_snapshot",
            "-c",
            json.dumps({"type": "initial", "tables": ["public.other"]}),
        ],
        env=pg_airflow["env"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = p.stdout + p.stderr
    assert "refused" in out and "public.other" in out, out[-4000:]
    assert "spark-submit" not in out  # nothing ran


def test_pg_stream_dag_until_caught_up_and_status(pg_airflow: dict[str, Any]) -> None:
    conn = pg_airflow["conn"]
    with conn.cursor() as cur:
        cur.execute("UPDATE items SET name = 'renamed' WHERE id <= 10")
        cur.execute("DELETE FROM items WHERE id = 500")
    out = dags_test(pg_airflow["env"], "tidemark_shop_stream", {"until_caught_up": True})
    assert "[afpg]" in out  # the connector's own log lines, with its name
    changelog = pg_airflow["warehouse"] / "afpg" / "changelog"
    ops = [r["op"] for r in delta_rows(changelog, ["op", "collection"]) if r["collection"] == "public.items"]
    assert ops.count("u") == 10 and ops.count("d") == 1
    assert pg_airflow["secret"] not in out

    from connectors.engine.status import read_status

    status = read_status(pg_airflow["warehouse"], "afpg")
    assert status and status[-1]["state"] == "stopped"
    assert status[-1]["events"] >= 11
    assert json.loads(status[-1]["position"])["lsn_flush"] > 0


def test_status_page_api_lists_the_connector_with_its_lag(pg_airflow: dict[str, Any]) -> None:
    """The FastAPI app of the plugin against the real Delta state tables the runs above wrote."""
    env = pg_airflow["env"]
    code = f"""
import json, os, sys
sys.path.insert(0, {str(ROOT / "plugins")!r})
from fastapi.testclient import TestClient
from airflow.api_fastapi.app import init_auth_manager
from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
from tidemark_airflow.status_page import app
token = init_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
anonymous = TestClient(app).get("/api/connectors").status_code
c = TestClient(app, cookies={{"_token": token}})
print(json.dumps({{"anonymous": anonymous, "list": c.get("/api/connectors").json(),
                  "one": c.get("/api/connectors/shop").json(), "page": c.get("/").text[:400]}}))
"""
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-4000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["anonymous"] in (401, 403)  # the API needs an Airflow login
    (shop,) = [c for c in got["list"] if c["name"] == "shop"]
    assert shop["state"] == "stopped" and shop["lag_ms"] is not None and shop["events"] >= 11
    assert shop["position"]["lsn_flush"] > 0
    one = got["one"]
    assert one["snapshot"]["completed"] and one["snapshot"]["chunks_done"] == one["snapshot"]["chunks_total"]
    assert one["snapshot"]["rows"] == 500
    assert any(n["type"] == "COMPLETED" for n in one["notifications"])
    assert one["history"], "the chart's points"
    assert "Tidemark" in got["page"]
    assert pg_airflow["secret"] not in p.stdout


# --------------------------------------------------------------------------- MariaDB
def test_mariadb_snapshot_dag_initial(
    mariadb: Any, airflow_home: Path, tmp_path: Path, unique_name: Any
) -> None:
    db = mariadb.create_database(unique_name("afmy"))
    try:
        mariadb.execute("CREATE TABLE items (id int PRIMARY KEY, name varchar(32) NOT NULL)", database=db)
        mariadb.execute("INSERT INTO items SELECT seq, concat('item ', seq) FROM seq_1_to_300", database=db)
        connectors = tmp_path / "connectors"
        connectors.mkdir()
        connector_file(
            connectors / "mshop.properties",
            "tm_my",
            {
                "debezium.source.connector.class": "mariadb",
                "debezium.source.topic.prefix": "afmy",
                "debezium.source.database.server.id": str(unique_name.server_id()),
                "debezium.source.database.include.list": db,
                "debezium.source.snapshot.mode": "initial",
                "debezium.sink.type": "delta",
                "tidemark.warehouse": str(tmp_path / "warehouse"),
                "tidemark.spark.master": "local[2]",
                "tidemark.spark.conf.spark.ui.enabled": "false",
            },
        )
        user, secret = unique_name("afu"), "pw-" + unique_name("secret")
        mariadb.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{secret}'")
        mariadb.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{user}'@'%'")
        conns = {
            "tm_my": {
                "conn_type": "mysql",
                "host": mariadb.host,
                "port": mariadb.port,
                "login": user,
                "password": secret,
            }
        }
        env = airflow_env(airflow_home, connectors, conns)
        out = dags_test(env, "tidemark_mshop_snapshot", {"type": "initial"})
        assert "Initial Snapshot COMPLETED" in out, out[-4000:]
        assert changelog_count(tmp_path / "warehouse" / "afmy" / "changelog") >= 300
        ops = delta_rows(tmp_path / "warehouse" / "afmy" / "changelog", ["op", "collection"])
        assert sum(1 for r in ops if r["op"] == "r" and r["collection"] == f"{db}.items") == 300
        assert secret not in out
    finally:
        mariadb.drop_database(db)
