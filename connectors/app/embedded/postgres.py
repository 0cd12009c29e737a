"""A private PostgreSQL server for tests: own data dir, free port, logical decoding enabled.

Never touches the machine's own PostgreSQL (5432): the server listens on 127.0.0.1:<free port>
with its unix socket inside its own directory.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import signal
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extensions

from .server import EmbeddedServer, launch
from .util import HarnessError, is_root, make_server_dir, pid_alive, run, wait_until

# CDC settings the suite relies on; start_pg(**settings) overrides any of them.
DEFAULT_SETTINGS: dict[str, Any] = {
    "listen_addresses": "127.0.0.1",
    "wal_level": "logical",
    "max_wal_senders": 10,
    "max_replication_slots": 10,
    "fsync": False,  # tests only: durability across OS crashes does not matter
    "timezone": "UTC",
    "log_timezone": "UTC",
    "max_connections": 100,
    "shared_buffers": "64MB",
    "wal_sender_timeout": "60s",
}

PG_HBA = """\
# Written by the Tidemark test harness.
# The unix socket (only inside the server dir) is trusted for the bootstrap superuser;
# TCP needs a password so wrong-password tests mean something.
local   all          all                    trust
local   replication  all                    trust
host    all          all    127.0.0.1/32    scram-sha-256
host    replication  all    127.0.0.1/32    scram-sha-256
"""

# pg_ctl's shutdown modes: the signal the postmaster takes for each
STOP_SIGNALS = {"smart": signal.SIGTERM, "fast": signal.SIGINT, "immediate": signal.SIGQUIT}


def find_pg_bindir() -> Path:
    """The newest Debian PostgreSQL server binaries (or $TIDEMARK_PG_BINDIR)."""
    env = os.environ.get("TIDEMARK_PG_BINDIR")
    if env:
        return Path(env)
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
        key=lambda p: [int(x) for x in re.findall(r"\d+", p.split("/")[4])] or [0],
    )
    if not found:
        raise HarnessError(
            "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin; "
            "install them with `apt-get install -y postgresql postgresql-contrib` (or run .ci/setup)"
        )
    return Path(found[-1]).parent


def _conf_value(v: Any) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, int | float):
        return str(v)
    return "'" + str(v).replace("'", "''") + "'"


def _dsn_value(v: Any) -> str:
    s = str(v)
    if s == "" or re.search(r"[\s'\\]", s):
        return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return s


class PgServer(EmbeddedServer):
    """A running private PostgreSQL server. Use :func:`start_pg` to create one.

    The postmaster runs as our child (through runuser when root) rather than daemonized by
    ``pg_ctl start``: an orphaned postmaster killed with SIGKILL stays a zombie until init
    reaps it, and until then the next start refuses to run ("lock file already exists").
    `kill()` takes the backends too (the postmaster's process tree): a surviving backend keeps
    the shared memory attached, and the next start would refuse to run.
    """

    label = "PostgreSQL"
    process_name = "postgres"

    host = "127.0.0.1"
    user = "tidemark"
    password = "tidemark"
    dbname = "tidemark"
    bootstrap_user = "postgres"  # initdb superuser; reachable only over the private unix socket

    def __init__(self, base_dir: Path, settings: dict[str, Any], bindir: Path | None = None) -> None:
        super().__init__(base_dir, base_dir / "postgres.log")
        self.bindir = bindir or find_pg_bindir()
        self.datadir = base_dir / "data"
        self.socket_dir = base_dir
        self.settings = {**DEFAULT_SETTINGS, **settings}

    # --- process control -------------------------------------------------------------------

    def _as_pg(self, *cmd: str) -> list[str]:
        # PostgreSQL refuses to run as root; CI runs as root.
        return ["runuser", "-u", "postgres", "--", *cmd] if is_root() else list(cmd)

    def _chown(self, path: Path) -> None:
        if is_root():
            pw = pwd.getpwnam("postgres")
            for p in [path, *path.rglob("*")]:
                os.lchown(p, pw.pw_uid, pw.pw_gid)

    def init(self) -> None:
        self._chown(self.base_dir)
        run(
            self._as_pg(
                str(self.bindir / "initdb"),
                "-D", str(self.datadir),
                "-U", self.bootstrap_user,
                "-A", "trust",
                "-E", "UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ),
            cwd=self.base_dir,
        )  # fmt: skip
        (self.datadir / "pg_hba.conf").write_text(PG_HBA)
        lines = [f"{k} = {_conf_value(v)}" for k, v in self.settings.items()]
        lines.append(f"unix_socket_directories = {_conf_value(str(self.socket_dir))}")
        with open(self.datadir / "postgresql.conf", "a") as fh:
            fh.write("\n# --- Tidemark test harness ---\n" + "\n".join(lines) + "\n")

    def _command(self) -> list[str]:
        return self._as_pg(str(self.bindir / "postgres"), "-D", str(self.datadir), "-p", str(self.port))

    def _probe(self) -> bool:
        # The private socket as the bootstrap superuser: works before the tidemark role exists.
        with contextlib.closing(self._socket_conn()):
            return True

    def provision(self) -> None:
        with contextlib.closing(self._socket_conn()) as conn, conn.cursor() as cur:
            cur.execute(
                f"CREATE ROLE {self.user} WITH SUPERUSER LOGIN REPLICATION PASSWORD %s", (self.password,)
            )
            cur.execute(f"CREATE DATABASE {self.dbname} OWNER {self.user}")

    def _socket_conn(self, dbname: str = "postgres") -> psycopg2.extensions.connection:
        conn = psycopg2.connect(
            host=str(self.socket_dir),
            port=self.port,
            user=self.bootstrap_user,
            dbname=dbname,
            connect_timeout=5,
        )
        conn.autocommit = True
        return conn

    @property
    def pid(self) -> int | None:
        """The postmaster's pid (not runuser's), or None when not running."""
        try:
            pid = int((self.datadir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if pid_alive(pid) else None

    def stop(self, mode: str = "fast", timeout: float = 60) -> bool:
        """Clean shutdown (``mode``: smart|fast|immediate), SIGKILL if it takes over `timeout`
        seconds. Returns False when it had to be killed."""
        return self._terminate(STOP_SIGNALS[mode], timeout)

    def _halt(self) -> None:
        self.stop("immediate")

    # --- clients ---------------------------------------------------------------------------

    def conn_params(self, **overrides: Any) -> dict[str, Any]:
        params: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "dbname": self.dbname,
        }
        params.update(overrides)
        return params

    def dsn(self, **overrides: Any) -> str:
        """A libpq connection string, e.g. ``pg.dsn(dbname="other", replication="database")``."""
        return " ".join(f"{k}={_dsn_value(v)}" for k, v in self.conn_params(**overrides).items())

    def props(self, **overrides: Any) -> dict[str, str]:
        """Debezium connection properties (as strings, like a .properties file)."""
        p = {
            "database.hostname": self.host,
            "database.port": str(self.port),
            "database.user": self.user,
            "database.password": self.password,
            "database.dbname": self.dbname,
        }
        p.update({k: str(v) for k, v in overrides.items()})
        return p

    def connect(self, autocommit: bool = True, **overrides: Any) -> psycopg2.extensions.connection:
        conn = psycopg2.connect(**self.conn_params(**overrides))
        conn.autocommit = autocommit
        return conn

    def execute(self, sql: str, params: Any = None, dbname: str | None = None) -> int:
        """Run one statement (autocommit) and return its rowcount."""
        with contextlib.closing(self.connect(dbname=dbname or self.dbname)) as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.rowcount

    def query(self, sql: str, params: Any = None, dbname: str | None = None) -> list[tuple]:
        with contextlib.closing(self.connect(dbname=dbname or self.dbname)) as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall())

    def scalar(self, sql: str, params: Any = None, dbname: str | None = None) -> Any:
        rows = self.query(sql, params, dbname)
        return rows[0][0] if rows else None

    def create_database(self, name: str) -> str:
        """Create (or re-create) database ``name`` owned by ``tidemark``; returns the name."""
        self.drop_database(name)
        self.execute(f'CREATE DATABASE "{name}" OWNER {self.user}', dbname="postgres")
        return name

    def drop_database(self, name: str) -> None:
        """Drop a database, first dropping its replication slots and ending its sessions."""
        for slot, active_pid in self.query(
            "SELECT slot_name, active_pid FROM pg_replication_slots WHERE database = %s",
            (name,),
            dbname="postgres",
        ):
            if active_pid:
                self.execute("SELECT pg_terminate_backend(%s)", (active_pid,), dbname="postgres")
            self.drop_slot(slot)
        self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', dbname="postgres")

    def drop_slot(self, slot: str, timeout: float = 10) -> None:
        """Drop a replication slot if it exists, waiting for its walsender to let go."""

        def attempt() -> bool:
            rows = self.query(
                "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s", (slot,), dbname="postgres"
            )
            if not rows:
                return True
            if rows[0][0]:
                self.execute("SELECT pg_terminate_backend(%s)", (rows[0][0],), dbname="postgres")
                return False
            self.execute("SELECT pg_drop_replication_slot(%s)", (slot,), dbname="postgres")
            return True

        wait_until(attempt, timeout, f"replication slot {slot} to be dropped")

    def __repr__(self) -> str:
        return f"PgServer(port={self.port}, dir={self.base_dir})"


def start_pg(tmp_path: Path | None = None, **settings: Any) -> PgServer:
    """Initialise and start a private PostgreSQL server; the caller must ``destroy()`` it.

    ``settings`` are postgresql.conf parameters overriding :data:`DEFAULT_SETTINGS`, e.g.
    ``start_pg(tmp_path, wal_level="replica")``. The server is also destroyed at interpreter exit.
    """
    bindir = find_pg_bindir()
    pg_uid = pwd.getpwnam("postgres").pw_uid if is_root() else None
    return launch(PgServer(make_server_dir("pg", tmp_path, traversable_by=pg_uid), settings, bindir))


def contrib_available(bindir: Path | None = None) -> bool:
    """Whether postgresql-contrib's extensions (hstore, citext, ltree) are installed."""
    bindir = bindir or find_pg_bindir()
    share = Path("/usr/share/postgresql") / bindir.parent.name  # Debian layout: .../<major>/bin
    return all((share / "extension" / f"{e}.control").exists() for e in ("hstore", "citext", "ltree"))


def postgis_available(bindir: Path | None = None) -> bool:
    """Whether PostGIS is installed for this server (Debian `postgresql-<major>-postgis-3`);
    False without any server (safe to call at test collection)."""
    try:
        bindir = bindir or find_pg_bindir()
    except HarnessError:
        return False
    share = Path("/usr/share/postgresql") / bindir.parent.name
    return (share / "extension" / "postgis.control").exists()
