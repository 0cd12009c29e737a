"""Airflow standalone with Tidemark's DAGs, plugin and the demo connectors, in one command:

    .venv/bin/python -m connectors.app.airflow_demo

Starts the demo's private PostgreSQL and MariaDB (as `tidemark demo` does, with the shop database
and some rows), provides them to Airflow as the Connections `tidemark_demo_postgres` and
`tidemark_demo_mariadb` (the connector files in `dags/connectors/` name them), points Airflow at
the project's `dags/` and `plugins/` (metadata in SQLite under `<workdir>/airflow`; the demo
connector files put their Delta tables under `airflow-demo/warehouse` of the repository) and runs `airflow standalone` until Ctrl-C; then the
servers are destroyed. Log in as `admin`: the password is printed by Airflow and kept in
`airflow-demo/airflow/simple_auth_manager_passwords.json.generated`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    from connectors.app.demo import _server, workload

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--workdir", type=Path, default=ROOT / "airflow-demo", help="servers, Airflow home, warehouse"
    )
    p.add_argument("--port", type=int, default=8080, help="Airflow's web port")
    p.add_argument(
        "--rows", type=int, default=200, help="rows of the shop workload written before Airflow starts"
    )
    a = p.parse_args(argv)
    work = a.workdir.resolve()
    (work / "servers").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(
        AIRFLOW_HOME=str(work / "airflow"),
        AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags"),
        AIRFLOW__CORE__PLUGINS_FOLDER=str(ROOT / "plugins"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__API__PORT=str(a.port),
        # The workers reach the task execution API on the same server.
        AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://localhost:{a.port}/execution/",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[*]"}),
    )
    with contextlib.ExitStack() as stack:
        for name, conn_type in (("postgres", "postgres"), ("mariadb", "mysql")):
            props, connect, dialect, label = stack.enter_context(_server(name, work / "servers"))
            conn = connect()
            try:
                workload(conn, a.rows, random.Random(7), dialect)
            finally:
                conn.close()
            env[f"AIRFLOW_CONN_TIDEMARK_DEMO_{name.upper()}"] = json.dumps(
                {
                    "conn_type": conn_type,
                    "host": props["database.hostname"],
                    "port": int(props["database.port"]),
                    "login": props["database.user"],
                    "password": props.get("database.password", ""),
                    "schema": props.get("database.dbname", ""),
                }
            )
            print(f"{label}: Airflow Connection tidemark_demo_{name}", flush=True)
        print(
            f"Airflow on http://localhost:{a.port}/ (user admin; the password follows), Ctrl-C stops",
            flush=True,
        )
        proc = subprocess.Popen([str(Path(sys.executable).parent / "airflow"), "standalone"], env=env)
        try:
            return proc.wait()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
