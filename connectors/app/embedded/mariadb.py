"""A private MariaDB server for tests: own data dir, free port, row-based binlog with GTIDs.

Never touches the machine's own MariaDB (3306): ``--no-defaults`` keeps /etc/mysql out, the server
listens on 127.0.0.1:<free port> and its socket lives in its own directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pymysql
import pymysql.connections

from .server import EmbeddedServer, launch
from .util import HarnessError, make_server_dir, run

# CDC settings the suite relies on; start_mariadb(**settings) overrides any of them.
# A value of False/None turns an option off with --skip-<name>; True passes the bare flag.
DEFAULT_SETTINGS: dict[str, Any] = {
    "server_id": 1,
    "log_bin": "mysql-bin",  # relative: binlogs live in the data dir
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
    "binlog_row_metadata": "FULL",
    "gtid_strict_mode": "ON",
    "log_slave_updates": True,
    "binlog_annotate_row_events": "ON",  # the SQL text behind row events (include.query)
    "default_time_zone": "+00:00",  # tz tables are not loaded, so an offset rather than 'UTC'
    "character_set_server": "utf8mb4",
    "collation_server": "utf8mb4_general_ci",
    "skip_name_resolve": True,
    # tests only: no fsync per commit
    "sync_binlog": 0,
    "innodb_flush_log_at_trx_commit": 2,
    "innodb_buffer_pool_size": "64M",
    "max_connections": 200,
}


def _find(name: str, *fallbacks: str) -> str:
    for cand in (name, *fallbacks):
        path = shutil.which(cand) or next(
            (p for p in (f"/usr/sbin/{cand}", f"/usr/bin/{cand}") if os.path.exists(p)), None
        )
        if path:
            return path
    raise HarnessError(
        f"{name} not found; install MariaDB with `apt-get install -y mariadb-server` (or run .ci/setup)"
    )


def _option(key: str, value: Any) -> str | None:
    name = key.replace("_", "-")
    if value is None or value is False:
        return f"--skip-{name}"
    if value is True:
        return f"--{name}"
    return f"--{name}={value}"


class MariaDbServer(EmbeddedServer):
    """A running private MariaDB server. Use :func:`start_mariadb` to create one."""

    label = "MariaDB"
    process_name = "mariadbd"

    host = "127.0.0.1"
    user = "tidemark"
    password = "tidemark"
    dbname = "tidemark"

    def __init__(self, base_dir: Path, settings: dict[str, Any]) -> None:
        super().__init__(base_dir, base_dir / "error.log", output=base_dir / "mariadbd.out")
        self.datadir = base_dir / "data"
        self.socket = base_dir / "mysqld.sock"
        self.pidfile = base_dir / "mysqld.pid"
        self.settings = {**DEFAULT_SETTINGS, **settings}
        self.mariadbd = _find("mariadbd", "mysqld")

    # --- process control -------------------------------------------------------------------

    def init(self) -> None:
        run(
            [
                _find("mariadb-install-db", "mysql_install_db"),
                "--no-defaults",
                f"--datadir={self.datadir}",
                "--user=root",
                "--auth-root-authentication-method=normal",  # root@localhost, no password, no unix_socket plugin
                "--skip-test-db",
            ],
            cwd=self.base_dir,
        )

    def _command(self) -> list[str]:
        cmd = [
            self.mariadbd,
            "--no-defaults",  # must come first: never read /etc/mysql (the system server's config)
            f"--datadir={self.datadir}",
            f"--socket={self.socket}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--pid-file={self.pidfile}",
            f"--log-error={self.logfile}",
            "--user=root",
        ]
        cmd += [o for k, v in self.settings.items() if (o := _option(k, v))]
        return cmd

    def _env(self) -> dict[str, str]:
        return {**os.environ, "TZ": "UTC"}

    def _probe(self) -> bool:
        with contextlib.closing(self._root_conn()):
            return True

    def _root_conn(self) -> pymysql.connections.Connection:
        return pymysql.connect(unix_socket=str(self.socket), user="root", autocommit=True, connect_timeout=5)

    def provision(self) -> None:
        with contextlib.closing(self._root_conn()) as conn, conn.cursor() as cur:
            # Keep set-up out of the binlog: tests reading "from the beginning" see only their own work.
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("SELECT user, host FROM mysql.user WHERE user = ''")
            for user, host in cur.fetchall():  # anonymous users would shadow tidemark@'%' on localhost
                cur.execute("DROP USER %s@%s", (user, host))
            cur.execute(f"CREATE USER '{self.user}'@'%%' IDENTIFIED BY %s", (self.password,))
            cur.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{self.user}'@'%' WITH GRANT OPTION")
            cur.execute(f"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{self.user}'@'%'")
            cur.execute(f"CREATE DATABASE `{self.dbname}`")

    def stop(self, timeout: float = 60) -> bool:
        """Clean shutdown (SIGTERM), falling back to SIGKILL after ``timeout``. False when it
        had to be killed."""
        return self._terminate(signal.SIGTERM, timeout)

    # --- clients ---------------------------------------------------------------------------

    def conn_params(self, **overrides: Any) -> dict[str, Any]:
        params: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "database": self.dbname,
        }
        params.update(overrides)
        return params

    def props(self, **overrides: Any) -> dict[str, str]:
        """Debezium connection properties (as strings, like a .properties file).

        No ``database.dbname``: the MySQL/MariaDB connectors have no such property.
        """
        p = {
            "database.hostname": self.host,
            "database.port": str(self.port),
            "database.user": self.user,
            "database.password": self.password,
        }
        p.update({k: str(v) for k, v in overrides.items()})
        return p

    def connect(self, autocommit: bool = True, **overrides: Any) -> pymysql.connections.Connection:
        params = self.conn_params(**overrides)
        params.setdefault("charset", "utf8mb4")
        return pymysql.connect(autocommit=autocommit, **params)

    def execute(self, sql: str, params: Any = None, database: str | None = None) -> int:
        """Run one statement (autocommit) and return its rowcount."""
        with contextlib.closing(self.connect(database=database or self.dbname)) as conn, conn.cursor() as cur:
            return cur.execute(sql, params)

    def query(self, sql: str, params: Any = None, database: str | None = None) -> list[tuple]:
        with contextlib.closing(self.connect(database=database or self.dbname)) as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall())

    def scalar(self, sql: str, params: Any = None, database: str | None = None) -> Any:
        rows = self.query(sql, params, database)
        return rows[0][0] if rows else None

    def variable(self, name: str) -> Any:
        """A global system variable, e.g. ``mariadb.variable("binlog_format")``."""
        return self.scalar(f"SELECT @@GLOBAL.{name}")

    def create_database(self, name: str) -> str:
        """Create (or re-create) database ``name``; returns the name."""
        self.drop_database(name)
        self.execute(f"CREATE DATABASE `{name}`")
        return name

    def drop_database(self, name: str) -> None:
        self.execute(f"DROP DATABASE IF EXISTS `{name}`")

    def __repr__(self) -> str:
        return f"MariaDbServer(port={self.port}, dir={self.base_dir})"


def start_mariadb(tmp_path: Path | None = None, **settings: Any) -> MariaDbServer:
    """Initialise and start a private MariaDB server; the caller must ``destroy()`` it.

    ``settings`` are mariadbd options overriding :data:`DEFAULT_SETTINGS`, e.g.
    ``start_mariadb(tmp_path, binlog_format="STATEMENT")`` or ``log_bin=False``.
    The server is also destroyed at interpreter exit.
    """
    return launch(MariaDbServer(make_server_dir("mariadb", tmp_path), settings))
