"""Connections to the PostgreSQL source: settings, connecting, and errors said in one line.

`connect` opens an autocommit connection (or a logical replication one) and turns a failure into
one `TerminalError` saying what to fix, or a `TransientError` for what passes (a server starting
up, or unreachable once it has been reached); `translate_error` does the same for errors on an
open connection. The other set-up modules (`checks`, `slots`, `publications`) take a connection
opened here, so the caller decides how many connections to hold.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg2
import psycopg2.errorcodes
import psycopg2.extensions
import psycopg2.extras
from pydantic import SecretStr

from connectors.api import TerminalError, TidemarkError, TransientError
from connectors.settings.model import PostgresSettings
from connectors.settings.values import split_statements

log = logging.getLogger(__name__)

__all__ = [
    "CONNECT_TIMEOUT_S",
    "PgConnParams",
    "connect",
    "query",
    "run_initial_statements",
    "translate_error",
]

# SQLSTATEs after which a retry can succeed: the server is going away / coming back, or the
# slot is held by another walsender that may exit.
_TRANSIENT_CODES = {
    "57P01",  # admin_shutdown
    "57P02",  # crash_shutdown
    "57P03",  # cannot_connect_now (starting up / shutting down / in recovery)
    "08000",
    "08003",
    "08006",
    "08001",
    "08004",
    "53300",  # too_many_connections
    "55006",  # object_in_use: replication slot is active for another PID
    "40001",
    "40P01",
}
_TRANSIENT_TEXT = (
    "server closed the connection unexpectedly",
    "terminating connection",
    "the database system is shutting down",
    "the database system is starting up",
    "the database system is in recovery mode",
    "connection already closed",
    "no connection to the server",
    "ssl syscall error",
    "eof detected",
    "could not receive data from server",
    "could not send data to server",
    "connection reset",
    "is active for pid",
    "no message from the libpq",  # copy-both stream ended without an error message
    "no copy in progress",  # the walsender ended the stream (server shutting down)
)


# --------------------------------------------------------------------------- connections
# libpq's connect_timeout: Debezium's PostgreSQL connector has no property for it (its JDBC
# driver's default login timeout applies); 10 s keeps a wrong host from hanging a start.
CONNECT_TIMEOUT_S = 10


def _secret(value: SecretStr | None) -> str | None:
    return None if value is None else value.get_secret_value()


@dataclass(frozen=True, slots=True)
class PgConnParams:
    """Connection settings, built from the connector's settings with `from_settings`."""

    host: str
    port: int
    user: str
    password: str | None = field(repr=False)  # secrets never in logs or errors
    dbname: str
    sslmode: str
    tcp_keepalive: bool
    # sslcert, sslkey, sslrootcert, ... and sslpassword, hence no repr either
    extra: Mapping[str, str] = field(repr=False)
    # database.initial.statements, run on every new non-replication connection (as Debezium's
    # JDBC connections do; its replication connection runs none). They may hold secrets.
    initial_statements: tuple[str, ...] = field(repr=False)
    connect_timeout: int = CONNECT_TIMEOUT_S

    @classmethod
    def from_settings(cls, s: PostgresSettings) -> PgConnParams:
        extra = {
            k: v
            for k, v in (
                ("sslcert", s.database_sslcert),
                ("sslkey", s.database_sslkey),
                ("sslrootcert", s.database_sslrootcert),
                ("sslpassword", _secret(s.database_sslpassword)),
            )
            if v
        }
        return cls(
            host=s.database_hostname,
            port=s.database_port,
            user=s.database_user,
            password=_secret(s.database_password),
            dbname=s.database_dbname,
            sslmode=s.database_sslmode,
            tcp_keepalive=s.database_tcp_keep_alive,
            extra=extra,
            initial_statements=tuple(split_statements(_secret(s.database_initial_statements))),
        )

    def kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "dbname": self.dbname,
            "sslmode": self.sslmode,
            "connect_timeout": self.connect_timeout,
            "keepalives": 1 if self.tcp_keepalive else 0,
            "application_name": "tidemark",
            # The value text the converters parse, whatever the server/database/role settings say:
            # timestamptz in UTC (the fast path), ISO dates, postgres-style intervals, floats in
            # full precision (pgjdbc, hence Debezium, forces DateStyle and extra_float_digits too).
            "options": "-c TimeZone=UTC -c DateStyle=ISO -c IntervalStyle=postgres -c extra_float_digits=3",
        }
        if self.password is not None:
            kw["password"] = self.password
        kw.update(self.extra)
        return kw

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def connect(
    params: PgConnParams, *, replication: bool = False, unreachable_is_transient: bool = False
) -> Any:
    """Open an autocommit connection (`replication=True`: a LogicalReplicationConnection).

    Errors become one TidemarkError saying what to fix. An unreachable server is terminal at
    start-up (§7: fail with a hint) but the replication stream passes
    `unreachable_is_transient=True` so a running connector retries through a server restart.
    """
    kw = params.kwargs()
    if replication:
        kw["connection_factory"] = psycopg2.extras.LogicalReplicationConnection
    try:
        conn = psycopg2.connect(**kw)
    except psycopg2.Error as exc:
        raise _connect_error(exc, params, replication, unreachable_is_transient) from exc
    if not replication:
        conn.autocommit = True
        if params.initial_statements:
            run_initial_statements(conn, params)
    return conn


def run_initial_statements(conn: Any, params: PgConnParams) -> None:
    """Run `database.initial.statements` on a new connection. Neither the statements nor the
    server's message (it may quote them) are logged or shown: only which one failed and its
    SQLSTATE."""
    total = len(params.initial_statements)
    for i, stmt in enumerate(params.initial_statements, 1):
        try:
            with conn.cursor() as cur:
                cur.execute(stmt)
        except psycopg2.Error as exc:
            conn.close()
            code = getattr(exc, "pgcode", None)
            if code is None or code in _TRANSIENT_CODES:
                raise translate_error(exc, "running database.initial.statements") from None
            name = psycopg2.errorcodes.lookup(code) or "error"
            raise TerminalError(
                f"database.initial.statements: statement {i} of {total} failed on {params.address} "
                f"with SQLSTATE {code} ({name.lower()})",
                "run that statement in psql as the connector's user to see the server's message, then fix it",
            ) from None
    log.info("ran %d database.initial.statements on a new connection to %s", total, params.address)


def _connect_error(
    exc: psycopg2.Error, p: PgConnParams, replication: bool, unreachable_transient: bool
) -> TidemarkError:
    text = str(exc).strip()
    low = text.lower()
    first = text.splitlines()[0] if text else type(exc).__name__
    if (
        "password authentication failed" in low
        or "no password supplied" in low
        or ("authentication failed" in low)
    ):
        return TerminalError(
            f"authentication failed for user {p.user}: check database.password "
            f"(server {p.address} said: {first})",
            "fix database.user / database.password, or the pg_hba.conf auth method for this client",
        )
    if "no pg_hba.conf entry" in low:
        if replication or "replication connection" in low:
            # Logical replication connections (replication=database) are matched by database
            # name in pg_hba.conf; the `replication` keyword only covers physical replication.
            return TerminalError(
                f"pg_hba.conf on {p.address} refuses replication connections for user {p.user} "
                f"to database {p.dbname}",
                f"add a line such as `host {p.dbname} {p.user} <client-address>/32 scram-sha-256` "
                "to pg_hba.conf (logical replication matches the database name, not the `replication` "
                "keyword) and reload the server (SELECT pg_reload_conf())",
            )
        return TerminalError(
            f"pg_hba.conf on {p.address} refuses connections for user {p.user} to database {p.dbname}",
            f"add a `host {p.dbname} {p.user} <client-address>/32 scram-sha-256` line to pg_hba.conf "
            "and reload the server",
        )
    if "must be superuser or replication role" in low or "permission denied to start wal sender" in low:
        return TerminalError(
            f"role {p.user} lacks the REPLICATION attribute needed for logical replication",
            f"run ALTER ROLE {p.user} REPLICATION; as a superuser",
        )
    if "database" in low and "does not exist" in low:
        return TerminalError(
            f"database {p.dbname} does not exist on {p.address}: check database.dbname",
            "create the database or fix database.dbname",
        )
    if "role" in low and "does not exist" in low:
        return TerminalError(
            f"role {p.user} does not exist on {p.address}: check database.user",
            f"CREATE ROLE {p.user} LOGIN REPLICATION PASSWORD '...';",
        )
    if any(s in low for s in ("starting up", "shutting down", "in recovery mode", "too many clients")):
        return TransientError(f"server {p.address} is not accepting connections right now: {first}")
    if any(
        s in low
        for s in (
            "could not connect",
            "connection refused",
            "timeout expired",
            "could not translate host name",
            "no route to host",
            "network is unreachable",
            "connection to server",
        )
    ):
        msg = f"cannot connect to PostgreSQL at {p.address}: is the server running / reachable? ({first})"
        hint = "check database.hostname / database.port, the server's listen_addresses and firewalls"
        return TransientError(msg, hint) if unreachable_transient else TerminalError(msg, hint)
    return TerminalError(f"cannot connect to PostgreSQL at {p.address}: {first}")


def translate_error(exc: BaseException, context: str) -> TidemarkError:
    """Map a psycopg2 error raised while working on an open connection to Transient/Terminal."""
    if isinstance(exc, TidemarkError):
        return exc
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    code = getattr(exc, "pgcode", None)
    low = text.lower()
    if (
        (code and code in _TRANSIENT_CODES)
        or any(s in low for s in _TRANSIENT_TEXT)
        or (isinstance(exc, psycopg2.InterfaceError))
    ):
        return TransientError(f"{context}: {first}", "the connection will be retried")
    if isinstance(exc, psycopg2.OperationalError) and not code:
        # libpq-level failure without a SQLSTATE: the socket went away.
        return TransientError(f"{context}: {first}", "the connection will be retried")
    if code == "42501":
        return TerminalError(f"{context}: permission denied: {first}", "grant the privilege named above")
    return TerminalError(f"{context}: {first}")


def query(conn: Any, sql: Any, args: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
    """Run one statement on an autocommit connection; its rows (none for a statement without)."""
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall() if cur.description else []
