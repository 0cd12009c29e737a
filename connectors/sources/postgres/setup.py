"""Slot and publication management and pre-flight checks for the PostgreSQL source.

Everything here is idempotent (create if missing, log what was done) and every failure is one
`TerminalError` (or `TransientError` for a slot busy elsewhere) whose message says what to
change. Functions take an open psycopg2 connection in autocommit mode unless noted, so the
caller decides how many connections to hold.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import psycopg2
import psycopg2.errorcodes
import psycopg2.extensions
import psycopg2.extras
from psycopg2 import sql
from pydantic import SecretStr
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_fixed

from connectors.api import Lsn, TerminalError, TidemarkError, TransientError
from connectors.settings.model import PostgresSettings
from connectors.settings.values import split_statements

log = logging.getLogger(__name__)

__all__ = [
    "PgConnParams",
    "SlotInfo",
    "PublicationMode",
    "SYSTEM_SCHEMAS",
    "connect",
    "translate_error",
    "check_server",
    "check_replication_connection",
    "slot_info",
    "ensure_slot",
    "drop_slot",
    "attach_with_retry",
    "ensure_publication",
    "check_publication_covers",
    "list_tables",
    "current_wal_lsn",
    "check_resume",
]

PublicationMode = Literal["all_tables", "filtered", "disabled", "no_tables"]
SYSTEM_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast", "pg_internal", "catalog_history")

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


# --------------------------------------------------------------------------- pre-flight
def _q(conn: Any, query: Any, args: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(query, args)
        return cur.fetchall() if cur.description else []


def check_server(conn: Any, params: PgConnParams | None = None) -> None:
    """wal_level=logical, role may replicate, slots and WAL senders available."""
    (wal_level,) = _q(conn, "SHOW wal_level")[0]
    if wal_level != "logical":
        raise TerminalError(
            f"wal_level is {wal_level!r} on the server, but logical decoding needs 'logical'",
            "run ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL",
        )
    rows = _q(conn, "SELECT rolname, rolsuper, rolreplication FROM pg_roles WHERE rolname = current_user")
    name, is_super, can_repl = rows[0]
    if not (is_super or can_repl):
        raise TerminalError(
            f"role {name} has neither the REPLICATION attribute nor superuser",
            f"run ALTER ROLE {name} REPLICATION; as a superuser",
        )
    (slots,) = _q(conn, "SELECT current_setting('max_replication_slots')::int")[0]
    (senders,) = _q(conn, "SELECT current_setting('max_wal_senders')::int")[0]
    if slots < 1 or senders < 1:
        raise TerminalError(
            f"max_replication_slots={slots}, max_wal_senders={senders}: both must be at least 1",
            "ALTER SYSTEM SET max_replication_slots = 10; ALTER SYSTEM SET max_wal_senders = 10; restart",
        )


def check_replication_connection(params: PgConnParams) -> None:
    """Open a replication connection (pg_hba `replication` line, REPLICATION attribute)."""
    conn = connect(params, replication=True)
    try:
        with conn.cursor() as cur:
            cur.execute("IDENTIFY_SYSTEM")
            cur.fetchall()
    except psycopg2.Error as exc:
        raise translate_error(exc, f"replication connection to {params.address}") from exc
    finally:
        conn.close()


# --------------------------------------------------------------------------- slots
@dataclass(frozen=True, slots=True)
class SlotInfo:
    name: str
    plugin: str | None
    slot_type: str
    database: str | None
    active: bool
    active_pid: int | None
    restart_lsn: int | None
    confirmed_flush_lsn: int | None
    wal_status: str | None = None


def _lsn(v: Any) -> int | None:
    return None if v is None else Lsn.parse(str(v)).value


def slot_info(conn: Any, name: str) -> SlotInfo | None:
    rows = _q(
        conn,
        "SELECT slot_name, plugin, slot_type, database, active, active_pid, restart_lsn::text, "
        "confirmed_flush_lsn::text, wal_status FROM pg_replication_slots WHERE slot_name = %s",
        (name,),
    )
    if not rows:
        return None
    n, plugin, typ, db, active, pid, restart, confirmed, wal_status = rows[0]
    return SlotInfo(n, plugin, typ, db, bool(active), pid, _lsn(restart), _lsn(confirmed), wal_status)


def ensure_slot(conn: Any, name: str, plugin: str = "pgoutput", *, check_active: bool = True) -> SlotInfo:
    """Create the logical slot if missing; refuse a slot of another plug-in or database.

    A slot held by another walsender raises TransientError (see `attach_with_retry`).
    """
    if plugin != "pgoutput":
        raise TerminalError(
            f"plugin.name={plugin!r} is not supported: Tidemark decodes pgoutput only",
            "set plugin.name=pgoutput",
        )
    info = slot_info(conn, name)
    if info is None:
        try:
            _q(conn, "SELECT * FROM pg_create_logical_replication_slot(%s, %s)", (name, plugin))
        except psycopg2.errors.DuplicateObject:
            pass  # created concurrently by another process: validate it below
        except psycopg2.Error as exc:
            raise translate_error(exc, f"creating replication slot {name}") from exc
        else:
            log.info("created logical replication slot %s (plugin %s)", name, plugin)
        info = slot_info(conn, name)
        assert info is not None
    if info.slot_type != "logical" or info.plugin != plugin:
        raise TerminalError(
            f"replication slot {name} exists but uses plugin {info.plugin or info.slot_type!r}, not {plugin}",
            f"drop it (SELECT pg_drop_replication_slot('{name}')) or choose another slot.name",
        )
    (db,) = _q(conn, "SELECT current_database()")[0]
    if info.database != db:
        raise TerminalError(
            f"replication slot {name} belongs to database {info.database}, not {db}",
            "slots are per database: choose another slot.name",
        )
    if check_active and info.active:
        raise TransientError(
            f"replication slot {name} is in use by another process (PID {info.active_pid})",
            "stop the other consumer, or wait: attaching is retried per slot.max.retries / slot.retry.delay.ms",
        )
    return info


def drop_slot(conn: Any, name: str) -> bool:
    """Drop the slot if it exists (slot.drop.on.stop). Returns whether a slot was dropped."""
    try:
        rows = _q(
            conn,
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
            (name,),
        )
    except psycopg2.Error as exc:
        raise translate_error(exc, f"dropping replication slot {name}") from exc
    if rows:
        log.info("dropped replication slot %s", name)
    return bool(rows)


T = TypeVar("T")


def attach_with_retry(
    fn: Callable[[], T],
    max_retries: int = 6,
    delay_ms: int = 10000,
    *,
    sleep: Callable[[float], None] | None = None,
) -> T:
    """Call `fn` (e.g. ensure_slot / stream open), retrying TransientError `max_retries` times,
    `delay_ms` apart (slot.max.retries / slot.retry.delay.ms); the last error is re-raised."""
    kw: dict[str, Any] = {}
    if sleep is not None:
        kw["sleep"] = sleep
    retrying = Retrying(
        retry=retry_if_exception_type(TransientError),
        stop=stop_after_attempt(max(1, max_retries)),
        wait=wait_fixed(delay_ms / 1000.0),
        reraise=True,
        before_sleep=lambda rs: log.warning(
            "attempt %d failed (%s); retrying in %.1fs",
            rs.attempt_number,
            rs.outcome.exception() if rs.outcome else None,
            delay_ms / 1000,
        ),
        **kw,
    )
    return retrying(fn)


# --------------------------------------------------------------------------- publications
TableName = tuple[str, str] | str


def _norm(tables: Iterable[TableName]) -> list[tuple[str, str]]:
    out = []
    for t in tables:
        if isinstance(t, str):
            schema, _, name = t.partition(".")
            out.append((schema, name) if name else ("public", schema))
        else:
            out.append((t[0], t[1]))
    return out


def _table_list_sql(tables: list[tuple[str, str]]) -> sql.Composable:
    return sql.SQL(", ").join(sql.Identifier(s, n) for s, n in tables)


def _table_list_text(conn: Any, tables: list[tuple[str, str]]) -> str:
    return _table_list_sql(tables).as_string(conn)


def ensure_publication(
    conn: Any,
    name: str,
    mode: PublicationMode = "all_tables",
    tables: Iterable[TableName] = (),
    *,
    via_root: bool = False,
) -> str:
    """Apply publication.autocreate.mode; returns what was done ('exists', 'created', 'altered').
    `via_root` (publish.via.partition.root) creates it WITH (publish_via_partition_root = true), as
    Debezium does, so partitions' changes come under the partitioned table's name."""
    captured = _norm(tables)
    rows = _q(conn, "SELECT puballtables, pubviaroot FROM pg_publication WHERE pubname = %s", (name,))
    exists = bool(rows)
    pub = sql.Identifier(name)
    if exists and mode != "disabled" and bool(rows[0][1]) != via_root:
        # Debezium leaves an existing publication's options alone too; say what it means.
        log.warning(
            "publication %s exists with publish_via_partition_root=%s, not publish.via.partition.root=%s: "
            "changes of partitions come under %s names (ALTER PUBLICATION %s SET "
            "(publish_via_partition_root = %s) to change it)",
            name,
            str(rows[0][1]).lower(),
            str(via_root).lower(),
            "the partitioned table's" if rows[0][1] else "the partitions'",
            name,
            str(via_root).lower(),
        )
    with_opts = sql.SQL(" WITH (publish_via_partition_root = true)" if via_root else "")
    try:
        if mode == "disabled":
            if not exists:
                raise TerminalError(
                    f"publication {name} does not exist and publication.autocreate.mode is disabled",
                    f"create it (e.g. CREATE PUBLICATION {name} FOR TABLE ...;) or change "
                    "publication.autocreate.mode / publication.name",
                )
            return "exists"
        if mode == "all_tables":
            if exists:
                return "exists"
            _q(conn, sql.SQL("CREATE PUBLICATION {} FOR ALL TABLES{}").format(pub, with_opts))
            log.info("created publication %s FOR ALL TABLES", name)
            return "created"
        if mode == "no_tables":
            if exists:
                return "exists"
            _q(conn, sql.SQL("CREATE PUBLICATION {}{}").format(pub, with_opts))
            log.info("created publication %s with no tables", name)
            return "created"
        if mode == "filtered":
            if not captured:
                raise TerminalError(
                    f"publication.autocreate.mode=filtered but no table matches the filters, so "
                    f"publication {name} would be empty",
                    "check table.include.list / schema.include.list",
                )
            listed = _table_list_sql(captured)
            if not exists:
                _q(conn, sql.SQL("CREATE PUBLICATION {} FOR TABLE {}{}").format(pub, listed, with_opts))
                log.info("created publication %s FOR TABLE %s", name, _table_list_text(conn, captured))
                return "created"
            if rows[0][0]:
                raise TerminalError(
                    f"publication {name} is FOR ALL TABLES, which filtered mode cannot narrow",
                    f"DROP PUBLICATION {name}; (it is re-created filtered) or use publication.autocreate.mode=all_tables",
                )
            current = set(
                _q(
                    conn,
                    "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s",
                    (name,),
                )
            )
            if current == set(captured):
                return "exists"
            # As Debezium: make the publication match the captured tables exactly.
            _q(conn, sql.SQL("ALTER PUBLICATION {} SET TABLE {}").format(pub, listed))
            log.info("altered publication %s to SET TABLE %s", name, _table_list_text(conn, captured))
            return "altered"
    except psycopg2.errors.DuplicateObject:
        return "exists"  # created concurrently
    except psycopg2.errors.InsufficientPrivilege as exc:
        raise TerminalError(
            f"role may not create/alter publication {name}: {str(exc).strip().splitlines()[0]}",
            f"have a superuser or the tables' owner create it (CREATE PUBLICATION {name} ...), then set "
            "publication.autocreate.mode=disabled",
        ) from exc
    except psycopg2.Error as exc:
        raise translate_error(exc, f"setting up publication {name}") from exc
    raise TerminalError(
        f"publication.autocreate.mode={mode!r} is not valid",
        "use one of all_tables, filtered, disabled, no_tables",
    )


def check_publication_covers(conn: Any, publication: str, tables: Iterable[TableName]) -> None:
    """Raise TerminalError naming captured tables the publication does not publish."""
    captured = _norm(tables)
    if not captured:
        return
    if not _q(conn, "SELECT 1 FROM pg_publication WHERE pubname = %s", (publication,)):
        raise TerminalError(
            f"publication {publication} does not exist",
            f"CREATE PUBLICATION {publication} FOR TABLE {_table_list_text(conn, captured)};",
        )
    # A partitioned table counts as covered when it or any of its partitions is published
    # (publish_via_partition_root=false lists leaves instead of the root), a partition when an
    # ancestor is (publish_via_partition_root=true lists only the root).
    rows = _q(
        conn,
        """
        SELECT t.s, t.n FROM unnest(%s::text[], %s::text[]) AS t(s, n)
        WHERE NOT EXISTS (
          SELECT 1 FROM pg_publication_tables pt
          WHERE pt.pubname = %s
            AND ((pt.schemaname = t.s AND pt.tablename = t.n)
                 OR format('%%I.%%I', pt.schemaname, pt.tablename)::regclass IN (
                      SELECT relid FROM pg_partition_tree(to_regclass(format('%%I.%%I', t.s, t.n)))
                      UNION ALL
                      SELECT relid FROM pg_partition_ancestors(to_regclass(format('%%I.%%I', t.s, t.n))))))
        """,
        ([s for s, _ in captured], [n for _, n in captured], publication),
    )
    if rows:
        missing = [(s, n) for s, n in rows]
        names = ", ".join(f"{s}.{n}" for s, n in missing)
        raise TerminalError(
            f"publication {publication} does not include captured table(s) {names}, so their changes "
            "would never be streamed",
            f"ALTER PUBLICATION {publication} ADD TABLE {_table_list_text(conn, missing)}; "
            "(or narrow the table filters)",
        )


# --------------------------------------------------------------------------- discovery / LSNs
def list_tables(conn: Any) -> list[tuple[str, str, str, str, bool]]:
    """(schema, table, relkind, replica_identity, has_pk) for ordinary ('r') and partitioned
    ('p') tables outside system schemas; partitions of a partitioned table are included too."""
    rows = _q(
        conn,
        """
        SELECT n.nspname, c.relname, c.relkind::text, c.relreplident::text,
               EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'p')
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind IN ('r', 'p')
          AND n.nspname <> ALL (%s)
          AND n.nspname NOT LIKE 'pg\\_temp\\_%%' AND n.nspname NOT LIKE 'pg\\_toast\\_temp\\_%%'
        ORDER BY 1, 2
        """,
        (list(SYSTEM_SCHEMAS),),
    )
    return [(s, t, k, ri, bool(pk)) for s, t, k, ri, pk in rows]


FILTER_LISTS = ("schema.include.list", "schema.exclude.list", "table.include.list", "table.exclude.list")
_NAMES_SHOWN = 20  # tables named in a warning; the rest are counted


def _some(names: list[str]) -> str:
    shown = ", ".join(names[:_NAMES_SHOWN])
    return shown + (f" and {len(names) - _NAMES_SHOWN} more" if len(names) > _NAMES_SHOWN else "")


def warn_nothing_captured(s: PostgresSettings, tables: list[tuple[str, str, str, str, bool]]) -> None:
    """The include/exclude lists match no existing table: say so at start, with the lists and the
    tables there are (a run would otherwise stream nothing, silently)."""
    lists = {name: getattr(s, name.replace(".", "_")) for name in FILTER_LISTS}
    given = "; ".join(f"{k}={','.join(v)}" for k, v in lists.items() if v)
    if not given:
        return
    dbname = s.database_dbname
    names = [f"{s}.{t}" for s, t, *_ in tables]
    there = f"the tables there are: {_some(names)}" if names else "it has no tables"
    log.warning(
        "no table in database %s matches %s (the lists are regular expressions matched against the "
        "whole schema name / schema.table); %s. Tables created later that match are captured",
        dbname,
        given,
        there,
    )


def warn_missing_identity(publication: str, tables: list[tuple[str, str, str, str, bool]]) -> None:
    """After CREATE PUBLICATION ... FOR ALL TABLES: every table now publishes updates and
    deletes, and PostgreSQL refuses them on a table with no primary key and no replica identity
    index or FULL — the application's own UPDATE/DELETE fail from now on."""
    bare = [
        f"{s}.{t}"
        for s, t, kind, ident, has_pk in tables
        if kind == "r" and not has_pk and ident in ("d", "n")
    ]
    if bare:
        log.warning(
            "publication %s was created FOR ALL TABLES (publication.autocreate.mode=all_tables), and %d "
            "table(s) have no primary key or replica identity: %s. PostgreSQL now refuses UPDATE and "
            'DELETE on them ("cannot update table ... because it does not have a replica identity and '
            'publishes updates"). Give each a primary key or run ALTER TABLE ... REPLICA IDENTITY FULL; '
            "or use publication.autocreate.mode=filtered with table.include.list (and DROP PUBLICATION %s)",
            publication,
            len(bare),
            _some(bare),
            publication,
        )


def current_wal_lsn(conn: Any) -> int:
    (v,) = _q(conn, "SELECT pg_current_wal_lsn()::text")[0]
    return Lsn.parse(v).value


def check_resume(
    info: SlotInfo | None,
    stored_lsn: int | None,
    slot_name: str = "",
    *,
    strict: bool = False,
    known_lsn: int = 0,
) -> TerminalError | None:
    """Whether streaming can resume from a stored offset. Returns the error to raise, or None.

    `stored_lsn` is the LSN the engine last acknowledged (what it would confirm to the slot).
    A missing slot or lost WAL is always an error. A slot whose confirmed_flush_lsn is ahead of
    `stored_lsn` is an error only with `strict=True`: the streaming source confirms idle
    keepalive positions, so there a slot ahead of the offsets is normal and only logged: as a
    warning, unless the slot is no further than `known_lsn` (a position the server reported to
    this process, e.g. before a restart of the server: the slot followed it, nothing was skipped).
    """
    if stored_lsn is None:
        return None
    name = slot_name or (info.name if info else "?")
    # Snapshots come with a later release; until then an offsets reset is the way on (the next
    # run streams from the slot's / server's current position with snapshot.mode=no_data).
    reset = "run `tidemark offsets reset --config FILE --yes`"
    lost = (
        f"the changes between the stored position {Lsn(stored_lsn)} and now are lost to this connector; "
        "a data snapshot will recover them once snapshots are available in Tidemark"
    )
    recovery = f"{reset}: the next run streams from the slot's current position. {lost}"
    if info is None:
        return TerminalError(
            f"replication slot {name} does not exist but an offset at LSN {Lsn(stored_lsn)} is stored: "
            "the WAL since that offset is no longer retained for this connector",
            f"{reset}: the next run creates the slot and streams from the server's current position. {lost}",
        )
    if info.wal_status == "lost":
        return TerminalError(
            f"replication slot {name} has lost required WAL (wal_status=lost, max_slot_wal_keep_size exceeded)",
            f"drop the slot (SELECT pg_drop_replication_slot('{name}')) and {reset}: the next run re-creates it "
            f"and streams from the server's current position. {lost}",
        )
    if info.confirmed_flush_lsn is not None and stored_lsn < info.confirmed_flush_lsn:
        if strict:
            return TerminalError(
                f"stored offset LSN {Lsn(stored_lsn)} is older than slot {name}'s confirmed_flush_lsn "
                f"{Lsn(info.confirmed_flush_lsn)}: the changes in between are no longer available",
                recovery,
            )
        # The slot only moves past what the connector confirmed (after storing it) or past idle
        # WAL with nothing for this publication; PostgreSQL streams from the slot's position, as
        # Debezium does. Say so, because a slot re-created or advanced by hand looks the same.
        if info.confirmed_flush_lsn <= known_lsn:
            log.info(
                "slot %s is at %s, past the stored offset %s by WAL with nothing for this connector "
                "(it follows the server's position while idle)",
                name,
                Lsn(info.confirmed_flush_lsn),
                Lsn(stored_lsn),
            )
            return None
        log.warning(
            "stored offset LSN %s is older than slot %s's confirmed_flush_lsn %s; streaming "
            "resumes at the slot's position (if the slot was re-created or advanced by hand, "
            "changes in between were skipped: %s)",
            Lsn(stored_lsn),
            name,
            Lsn(info.confirmed_flush_lsn),
            recovery,
        )
    return None
