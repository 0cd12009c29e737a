"""How to reach the server (`ConnectionSettings`, as PyMySQL takes them) and where its binlog is
now (`current_position`: MySQL 8.4+, older MySQL and MariaDB alike)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import Any

import pymysql

from connectors.api import TerminalError


@dataclass
class ConnectionSettings:
    """How to reach the server. `ssl_mode` is one of tls.MODES; `ssl_context` is built by
    `tls.ssl_context` for the modes that need one (required and the verifying modes)."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)  # never in logs or error text that prints the settings
    connect_timeout: float = 30.0
    read_timeout: float | None = None
    ssl_mode: str = "preferred"
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False, compare=False)
    ssl_mode_name: str = ""  # database.ssl.mode as configured (MariaDB's `trust` for `required`...)
    # database.initial.statements: run on the set-up connection, never on the binlog stream's
    # (Debezium runs them on its JDBC connections only). They may hold secrets.
    initial_statements: tuple[str, ...] = field(default=(), repr=False)

    def pymysql_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "connect_timeout": self.connect_timeout,
            "autocommit": True,
            "charset": "utf8mb4",
        }
        if self.read_timeout:
            kw["read_timeout"] = self.read_timeout
        if self.ssl_mode == "disabled":
            kw["ssl_disabled"] = True
        elif self.ssl_context is not None:
            kw["ssl"] = self.ssl_context  # PyMySQL then requires TLS (error 2026 when the server has none)
        # preferred: PyMySQL's default — TLS when the server offers it, certificate not checked
        return kw


def current_position(cur: Any) -> tuple[str, int, str]:
    """(file, pos, executed GTID set) of the server, MySQL 8.4 and older/MariaDB alike."""
    row = None
    for sql in ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"):
        try:
            cur.execute(sql)
            row = cur.fetchone()
            break
        except pymysql.err.ProgrammingError:
            continue
        except pymysql.err.OperationalError as e:
            if not e.args or e.args[0] not in (1227, 1045):  # a privilege is needed
                raise
            raise TerminalError(
                f"database.user may not read the binlog position: {e.args[1]}",
                "GRANT REPLICATION CLIENT ON *.* TO the user (MariaDB: BINLOG MONITOR), as Debezium needs",
            ) from None
    if not row:
        raise TerminalError(
            "binary logging is disabled on the server (SHOW MASTER STATUS is empty)",
            "start the server with log_bin (e.g. log-bin=mysql-bin) and binlog_format=ROW",
        )
    gtids = str(row[4]) if len(row) > 4 and row[4] else ""
    try:
        cur.execute("SELECT @@global.gtid_binlog_pos")  # MariaDB
        r = cur.fetchone()
        if r and r[0]:
            gtids = str(r[0])
    except pymysql.err.MySQLError:
        pass
    return str(row[0]), int(row[1]), gtids.replace("\n", "")
