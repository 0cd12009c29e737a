"""Publications of the PostgreSQL source: publication.autocreate.mode applied, and a check that
the publication covers every captured table.

Idempotent (create or alter only what differs, log what was done); every failure is one
`TerminalError` saying what to change.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import psycopg2
from psycopg2 import sql

from connectors.api import TerminalError
from connectors.settings.modes import PublicationMode
from connectors.sources.postgres.connection import query, translate_error

log = logging.getLogger(__name__)

__all__ = ["TableName", "check_publication_covers", "ensure_publication"]

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
    rows = query(conn, "SELECT puballtables, pubviaroot FROM pg_publication WHERE pubname = %s", (name,))
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
            query(conn, sql.SQL("CREATE PUBLICATION {} FOR ALL TABLES{}").format(pub, with_opts))
            log.info("created publication %s FOR ALL TABLES", name)
            return "created"
        if mode == "no_tables":
            if exists:
                return "exists"
            query(conn, sql.SQL("CREATE PUBLICATION {}{}").format(pub, with_opts))
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
                query(conn, sql.SQL("CREATE PUBLICATION {} FOR TABLE {}{}").format(pub, listed, with_opts))
                log.info("created publication %s FOR TABLE %s", name, _table_list_text(conn, captured))
                return "created"
            if rows[0][0]:
                raise TerminalError(
                    f"publication {name} is FOR ALL TABLES, which filtered mode cannot narrow",
                    f"DROP PUBLICATION {name}; (it is re-created filtered) or use publication.autocreate.mode=all_tables",
                )
            current = set(
                query(
                    conn,
                    "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s",
                    (name,),
                )
            )
            if current == set(captured):
                return "exists"
            # As Debezium: make the publication match the captured tables exactly.
            query(conn, sql.SQL("ALTER PUBLICATION {} SET TABLE {}").format(pub, listed))
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
    if not query(conn, "SELECT 1 FROM pg_publication WHERE pubname = %s", (publication,)):
        raise TerminalError(
            f"publication {publication} does not exist",
            f"CREATE PUBLICATION {publication} FOR TABLE {_table_list_text(conn, captured)};",
        )
    # A partitioned table counts as covered when it or any of its partitions is published
    # (publish_via_partition_root=false lists leaves instead of the root), a partition when an
    # ancestor is (publish_via_partition_root=true lists only the root).
    rows = query(
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
