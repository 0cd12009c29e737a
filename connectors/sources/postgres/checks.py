"""Start-up checks of the PostgreSQL source: what the server must allow, and what to warn about.

The checks raise one `TerminalError` naming the setting to change; the warnings are logged once
per run (the source calls them on its first start, not on every reconnect).
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg2

from connectors.api import TerminalError
from connectors.settings.model import PostgresSettings
from connectors.sources.postgres.catalog import TableRow
from connectors.sources.postgres.connection import PgConnParams, connect, query, translate_error

log = logging.getLogger(__name__)

__all__ = ["check_replication_connection", "check_server", "warn_missing_identity", "warn_nothing_captured"]


def check_server(conn: Any, params: PgConnParams | None = None) -> None:
    """wal_level=logical, role may replicate, slots and WAL senders available."""
    (wal_level,) = query(conn, "SHOW wal_level")[0]
    if wal_level != "logical":
        raise TerminalError(
            f"wal_level is {wal_level!r} on the server, but logical decoding needs 'logical'",
            "run ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL",
        )
    rows = query(conn, "SELECT rolname, rolsuper, rolreplication FROM pg_roles WHERE rolname = current_user")
    name, is_super, can_repl = rows[0]
    if not (is_super or can_repl):
        raise TerminalError(
            f"role {name} has neither the REPLICATION attribute nor superuser",
            f"run ALTER ROLE {name} REPLICATION; as a superuser",
        )
    (slots,) = query(conn, "SELECT current_setting('max_replication_slots')::int")[0]
    (senders,) = query(conn, "SELECT current_setting('max_wal_senders')::int")[0]
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


FILTER_LISTS = ("schema.include.list", "schema.exclude.list", "table.include.list", "table.exclude.list")
_NAMES_SHOWN = 20  # tables named in a warning; the rest are counted


def _some(names: list[str]) -> str:
    shown = ", ".join(names[:_NAMES_SHOWN])
    return shown + (f" and {len(names) - _NAMES_SHOWN} more" if len(names) > _NAMES_SHOWN else "")


def warn_nothing_captured(s: PostgresSettings, tables: list[TableRow]) -> None:
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


def warn_missing_identity(publication: str, tables: list[TableRow]) -> None:
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
