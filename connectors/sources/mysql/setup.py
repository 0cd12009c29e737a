"""Server set-up checks before streaming: one clear `TerminalError` per problem.

Checked: connection (wrong password → terminal; unreachable → terminal at the first start,
transient once the server has been reached, see `MySqlSource`), binlog on,
binlog_format=ROW, binlog_row_image=FULL, binlog_row_value_options not PARTIAL_JSON (MySQL),
REPLICATION SLAVE + REPLICATION CLIENT grants, `database.server.id` not used by another replica
(SHOW SLAVE HOSTS / SHOW REPLICAS), and that a stored position is still on the server
(purged binlog → say how to go on: `tidemark offsets reset`, and what is lost).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from typing import Any

import pymysql

from connectors.api import GtidSet, TerminalError
from connectors.settings.model import MySqlSettings
from connectors.settings.values import split_statements
from connectors.sources.mysql import tls
from connectors.sources.mysql.connection import ConnectionSettings
from connectors.sources.mysql.errors import connection_error, recovery_hint

log = logging.getLogger(__name__)


def connection_settings(s: MySqlSettings) -> ConnectionSettings:
    """How to reach the server: from the connector's settings."""
    mode = tls.ssl_mode(s)
    return ConnectionSettings(
        s.database_hostname,
        s.database_port,
        s.database_user,
        tls._secret(s.database_password) or "",
        s.connect_timeout_ms / 1000,
        ssl_mode=mode,
        ssl_context=tls.ssl_context(s, mode),
        ssl_mode_name=s.database_ssl_mode,
        initial_statements=tuple(split_statements(tls._secret(s.database_initial_statements))),
    )


def connect(
    s: ConnectionSettings, *, unreachable_is_transient: bool = False
) -> pymysql.connections.Connection:
    """The set-up connection, with `database.initial.statements` run on it. Unreachable is
    terminal unless the caller has reached the server before (see `connection_error`)."""
    try:
        conn = pymysql.connect(**s.pymysql_kwargs())
    except pymysql.err.OperationalError as e:
        raise connection_error(e, s, unreachable_is_transient=unreachable_is_transient) from None
    if s.initial_statements:
        run_initial_statements(conn, s)
    return conn


def run_initial_statements(conn: pymysql.connections.Connection, s: ConnectionSettings) -> None:
    """Neither the statements nor the server's message (it may quote them) are logged or shown:
    only which one failed and the server's error number."""
    total = len(s.initial_statements)
    for i, stmt in enumerate(s.initial_statements, 1):
        try:
            with conn.cursor() as cur:
                cur.execute(stmt)
        except pymysql.err.MySQLError as e:
            conn.close()
            code = e.args[0] if e.args and isinstance(e.args[0], int) else 0
            if isinstance(e, pymysql.err.OperationalError) and code in (2006, 2013):
                raise connection_error(e, s) from None  # the connection dropped: retried
            raise TerminalError(
                f"database.initial.statements: statement {i} of {total} failed on {s.host}:{s.port} "
                f"with server error {code}",
                "run that statement in the mysql client as the connector's user to see the server's message, "
                "then fix it",
            ) from None
    log.info("ran %d database.initial.statements on a new connection to %s:%s", total, s.host, s.port)


def _var(cur: Any, name: str) -> str | None:
    cur.execute("SHOW GLOBAL VARIABLES LIKE %s", (name,))
    row = cur.fetchone()
    return None if row is None else str(row[1])


def check_server(conn: pymysql.connections.Connection, server_id: int | None = None) -> dict[str, Any]:
    """Raise TerminalError for the first set-up problem; return facts (mariadb, gtid mode...)."""
    cur = conn.cursor()
    cur.execute("SELECT VERSION()")
    version = str(cur.fetchone()[0])
    mariadb = "mariadb" in version.lower()
    log_bin = (_var(cur, "log_bin") or "OFF").upper()
    if log_bin not in ("ON", "1"):
        raise TerminalError(
            "binary logging is off on the server (log_bin=OFF)",
            "start the server with log-bin=mysql-bin, binlog_format=ROW, binlog_row_image=FULL",
        )
    fmt = (_var(cur, "binlog_format") or "").upper()
    if fmt != "ROW":
        raise TerminalError(
            f"binlog_format is {fmt}, the connector needs ROW",
            "SET GLOBAL binlog_format='ROW' and set binlog_format=ROW in the server config",
        )
    image = (_var(cur, "binlog_row_image") or "FULL").upper()
    if image != "FULL":
        raise TerminalError(
            f"binlog_row_image is {image}, the connector needs FULL",
            "SET GLOBAL binlog_row_image='FULL' and set it in the server config",
        )
    opts = (_var(cur, "binlog_row_value_options") or "").upper()
    if "PARTIAL_JSON" in opts:
        raise TerminalError(
            "binlog_row_value_options=PARTIAL_JSON: UPDATE events of JSON columns are unreadable",
            "SET GLOBAL binlog_row_value_options='' and set it in the server config",
        )
    check_grants(cur)
    if server_id is not None:
        check_server_id(cur, server_id)
    gtid_mode = "ON" if mariadb else (_var(cur, "gtid_mode") or "OFF").upper()
    cur.close()
    return {"version": version, "mariadb": mariadb, "gtid_mode": gtid_mode}


def check_grants(cur: Any) -> None:
    cur.execute("SHOW GRANTS FOR CURRENT_USER()")
    text = " ".join(str(r[0]) for r in cur.fetchall()).upper()
    if "ALL PRIVILEGES ON *.*" in text:
        return
    missing = []
    for priv, alt in (("REPLICATION SLAVE", "REPLICATION REPLICA"), ("REPLICATION CLIENT", "BINLOG MONITOR")):
        if priv not in text and alt not in text:
            missing.append(priv)
    if missing:
        raise TerminalError(
            f"the connector user lacks {' and '.join(missing)}",
            f"GRANT SELECT, RELOAD, SHOW DATABASES, {', '.join(missing)} ON *.* TO <user>",
        )


def _replica_hosts(cur: Any) -> list[Any]:
    for sql in ("SHOW REPLICAS", "SHOW REPLICA HOSTS", "SHOW SLAVE HOSTS"):
        try:
            cur.execute(sql)
            return list(cur.fetchall())
        except pymysql.err.MySQLError:
            continue
    return []


def check_server_id(cur: Any, server_id: int, grace_s: float = 6.0) -> None:
    """A replica registered with our server id is a clash, unless it goes away within
    `grace_s`: the dump thread of this connector's own previous (killed) process lingers until
    the server's next heartbeat write fails."""
    deadline = time.monotonic() + grace_s
    while True:
        rows = [r for r in _replica_hosts(cur) if int(r[0]) == server_id]
        if not rows or time.monotonic() >= deadline:
            break
        time.sleep(0.25)
    for r in rows:
        if int(r[0]) == server_id:
            raise TerminalError(
                f"database.server.id={server_id} is already used by another replica ({r[1]}:{r[2]})",
                "give database.server.id a value no other replica or connector uses",
            )
    cur.execute("SELECT @@server_id")
    if int(cur.fetchone()[0]) == server_id:
        raise TerminalError(
            f"database.server.id={server_id} equals the server's own server_id",
            "choose another database.server.id",
        )


def check_position(
    conn: pymysql.connections.Connection,
    offset: Mapping[str, Any],
    mariadb: bool,
    config_path: str | None = None,
) -> None:
    """A stored offset must still be readable: its binlog file (or GTIDs) not purged."""
    hint = recovery_hint(config_path)
    cur = conn.cursor()
    cur.execute("SHOW BINARY LOGS")
    files = [str(r[0]) for r in cur.fetchall()]
    file = str(offset.get("file") or "")
    gtids = str(offset.get("gtids") or "")
    if gtids and not mariadb:
        purged = _var(cur, "gtid_purged") or ""
        if purged and not GtidSet.parse(gtids).contains(GtidSet.parse(purged)):
            raise TerminalError(
                f"the stored GTID set {gtids} misses transactions the server purged ({purged})", hint
            )
        return
    if file and file not in files:
        raise TerminalError(
            f"the stored binlog file {file} is no longer on the server (oldest is "
            f"{files[0] if files else 'none'}): it was purged",
            hint,
        )
    if gtids and mariadb:
        try:
            cur.execute("SELECT BINLOG_GTID_POS(%s, 4)", (files[0],))
            first = cur.fetchone()[0] or ""
        except pymysql.err.MySQLError:
            return
        have = {int(p.split("-")[0]): int(p.split("-")[2]) for p in re.findall(r"\d+-\d+-\d+", gtids)}
        for part in re.findall(r"\d+-\d+-\d+", first):
            d, _, n = (int(x) for x in part.split("-"))
            if d in have and have[d] < n:
                raise TerminalError(
                    f"the stored GTID position {gtids} predates the oldest binlog ({files[0]})", hint
                )
