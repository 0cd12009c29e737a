"""The Airflow DAG files and plugin without servers: every DAG file imports without errors and
without connecting to anything; a broken connector file is an import error naming file and key
while the other connectors' DAGs load; the Connection hook's properties and their masking.
(End to end with the servers, Spark and `airflow dags test`: tests/test_airflow_e2e.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# Builds the DagBag of dags/ in a fresh interpreter in which any network connection fails.
DAGBAG = f"""
import json, socket, sys
def refuse(self, *a, **k):
    raise AssertionError(f"connected at import time: {{a}}")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
sys.path.insert(0, {str(ROOT / "plugins")!r})
from airflow.dag_processing.dagbag import DagBag
bag = DagBag({str(ROOT / "dags")!r})
print(json.dumps({{"dags": sorted(bag.dags), "errors": bag.import_errors}}))
"""


def dagbag(tmp_path: Path, connectors: Path | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "TIDEMARK_CONNECTORS"))}
    env["AIRFLOW_HOME"] = str(tmp_path / "airflow")
    env["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    if connectors is not None:
        env["TIDEMARK_CONNECTORS_DIR"] = str(connectors)
    p = subprocess.run([sys.executable, "-c", DAGBAG], env=env, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_dag_files_import_without_errors_and_without_connecting(tmp_path: Path) -> None:
    got = dagbag(tmp_path, None)  # the default: dags/connectors/, the demo's connectors
    assert got["errors"] == {}
    for name in ("demo_postgres", "demo_mariadb"):
        for kind in ("stream", "snapshot", "maintenance"):
            assert f"tidemark_{name}_{kind}" in got["dags"]
    assert "tidemark_example_changelog_consumer" in got["dags"]


def test_a_broken_connector_file_is_an_import_error_and_the_others_load(tmp_path: Path) -> None:
    connectors = tmp_path / "connectors"
    connectors.mkdir()
    for f in (ROOT / "dags" / "connectors").glob("*.properties"):
        (connectors / f.name).write_text(f.read_text())
    bad = connectors / "broken.properties"
    bad.write_text(
        (connectors / "demo_postgres.properties")
        .read_text()
        .replace("snapshot.mode=initial", "snapshot.mode=sometimes")
    )
    cron = connectors / "badcron.yaml"
    cron.write_text(
        "debezium:\n  source:\n    connector.class: postgres\n    database.hostname: h\n    database.user: u\n"
        "    database.dbname: d\n    topic.prefix: c\n  sink:\n    type: delta\n"
        "tidemark:\n  airflow.snapshot.schedule: every night\n"
    )
    got = dagbag(tmp_path, connectors)
    assert "tidemark_demo_postgres_stream" in got["dags"] and "tidemark_demo_mariadb_snapshot" in got["dags"]
    assert not [d for d in got["dags"] if d.startswith(("tidemark_broken_", "tidemark_badcron_"))]
    (error,) = got["errors"].values()
    assert str(bad) in error and "debezium.source.snapshot.mode=sometimes" in error
    assert str(cron) in error and "tidemark.airflow.snapshot.schedule='every night'" in error


def test_the_connection_hook_gives_properties_and_masks_the_password(tmp_path: Path) -> None:
    secret = "pw-hook-5e9c1"
    conn = {
        "conn_type": "postgres",
        "host": "db.example",
        "port": 6543,
        "login": "cdc",
        "password": secret,
        "schema": "shop",
    }
    code = f"""
import json, logging, sys
sys.path.insert(0, {str(ROOT / "plugins")!r})
from tidemark_airflow.hooks import TidemarkConnectionHook
from airflow.sdk._shared.secrets_masker import redact
hook = TidemarkConnectionHook("tm_hook")
props = hook.connector_properties("postgres")
wrong = None
try:
    hook.connector_properties("mariadb")
except Exception as e:
    wrong = str(e)
print(json.dumps({{"props": props, "redacted": hook.redacted("postgres"), "repr": repr(hook),
                  "masked": redact("connecting with " + {secret!r}), "wrong": wrong}}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(AIRFLOW_HOME=str(tmp_path), AIRFLOW_CONN_TM_HOOK=json.dumps(conn))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["props"] == {
        "database.hostname": "db.example",
        "database.port": "6543",
        "database.user": "cdc",
        "database.password": secret,
        "database.dbname": "shop",
    }
    assert got["redacted"]["database.password"] == "********"
    assert secret not in got["repr"] and secret not in got["masked"]
    assert "connector.class is mariadb" in got["wrong"]


def test_the_runtime_file_is_private_and_adds_the_airflow_channels(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "plugins"))
    from tidemark_airflow.config import parse_config, runtime_config

    f = tmp_path / "c.properties"
    f.write_text(
        "debezium.source.connector.class=postgres\ndebezium.source.database.hostname=h\n"
        "debezium.source.database.user=u\ndebezium.source.database.password=pw-file-77\n"
        "debezium.source.database.dbname=d\ndebezium.source.topic.prefix=c\ndebezium.sink.type=delta\n"
        "tidemark.warehouse=wh\n"
    )
    assert parse_config(f).warehouse == tmp_path / "wh"  # relative to the file
    with runtime_config(f) as (path, cfg):
        assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
        assert "pw-file-77" not in repr(cfg)
        text = path.read_text()
        assert "signal.enabled.channels: source,delta" in text
        assert "notification.enabled.channels: delta" in text
    assert not path.exists()


def test_a_killed_tasks_private_file_is_removed_by_the_next_task(tmp_path: Path, monkeypatch: Any) -> None:
    """A task SIGKILLed inside `runtime_config` cannot remove its file (it holds the password):
    the next `runtime_config` on the machine does; a live process's directory stays."""
    sys.path.insert(0, str(ROOT / "plugins"))
    from tidemark_airflow.config import runtime_config

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR is read again
    f = tmp_path / "c.properties"
    f.write_text(
        "debezium.source.connector.class=postgres\ndebezium.source.database.hostname=h\n"
        "debezium.source.database.user=u\ndebezium.source.database.password=pw-file-78\n"
        "debezium.source.database.dbname=d\ndebezium.source.topic.prefix=c\ndebezium.sink.type=delta\n"
    )
    script = (
        "import os, sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
        "from pathlib import Path\nfrom tidemark_airflow.config import runtime_config\n"
        "with runtime_config(Path(sys.argv[3])) as (p, _):\n"
        "    print(p, flush=True); os.kill(os.getpid(), 9)\n"
    )
    env = dict(os.environ, TMPDIR=str(tmp_path))
    killed = subprocess.run(
        [sys.executable, "-c", script, str(ROOT), str(ROOT / "plugins"), str(f)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -9, killed.stderr
    left = Path(killed.stdout.strip())
    assert left.exists() and "pw-file-78" in left.read_text()
    with runtime_config(f) as (mine, _):
        assert not left.parent.exists(), "the killed task's private file is still there"
        assert mine.exists()
        with runtime_config(f) as (nested, _):  # a live process's directory stays
            assert mine.exists() and nested.exists()
