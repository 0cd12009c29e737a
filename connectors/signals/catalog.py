"""The captured tables and their columns, asked of the source database when a signal names
tables (`execute-snapshot`): which names a data-collection regex matches, whether a table is
captured, which columns a filter or surrogate key may use."""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from connectors.settings.config import ConnectorConfig
from connectors.settings.filters import TableFilters
from connectors.signals.model import TableInfo

log = logging.getLogger(__name__)

# The catalog, not information_schema.columns, which hides what the user may not read: a table
# it may not SELECT, or in a schema it may not use, is then named as such, not as "not captured".
# Relation kinds as in information_schema.columns (tables, views, foreign and partitioned tables).
_PG_COLUMNS = """
SELECT n.nspname, c.relname, a.attname,
       has_column_privilege(c.oid, a.attnum, 'SELECT'),  -- true too for a table-level grant
       has_schema_privilege(n.oid, 'USAGE')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relkind IN ('r', 'v', 'f', 'p')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%%'
ORDER BY 1, 2, a.attnum
"""
_MY_COLUMNS = """
SELECT table_schema, table_name, column_name, 1, 1 FROM information_schema.columns
WHERE table_schema NOT IN ('mysql', 'sys', 'performance_schema', 'information_schema')
ORDER BY table_schema, table_name, ordinal_position
"""


def _ident(name: str) -> str:
    """A PostgreSQL identifier as a GRANT the DBA pastes needs it (quoted unless plain)."""
    return name if re.fullmatch(r"[a-z_][a-z0-9_$]*", name) else '"' + name.replace('"', '""') + '"'


class TableCatalog:
    """`info()` → TableInfo of the captured tables; asked again at most every `ttl_s` seconds.
    When the database cannot be asked, the tables are unknown (only syntax is checked) and the
    include/exclude filters still decide whether a plainly named table is captured."""

    def __init__(self, cfg: ConnectorConfig, ttl_s: float = 10.0) -> None:
        self.cfg = cfg
        self.filters = TableFilters.from_settings(cfg.source)
        self.ttl_s = ttl_s
        self._cached: tuple[float, TableInfo] | None = None

    def _captures(self, name: str) -> bool:
        ns, _, table = name.rpartition(".")
        return self.filters.captures(ns, table)

    def info(self) -> TableInfo:
        if self._cached is not None and time.monotonic() - self._cached[0] < self.ttl_s:
            return self._cached[1]
        try:
            rows = self._columns()
        except Exception as e:  # noqa: BLE001 - validation goes on with what the settings say
            log.warning("signals: could not list the captured tables (%s); checking names only", e)
            return TableInfo(None, self._captures)
        tables: dict[str, list[str]] = {}
        no_usage: set[str] = set()  # in a schema the user may not use
        no_select: set[str] = set()  # a captured column the user may not SELECT
        for schema, table, column, readable, usage in rows:
            if not self.filters.captures(schema, table):
                continue
            name = f"{schema}.{table}"
            tables.setdefault(name, [])
            if not usage:
                no_usage.add(name)
            if readable:
                tables[name].append(column)
            elif self.filters.captures_column(schema, table, column):
                no_select.add(name)
        user = _ident(self.cfg.source.database_user)
        unreadable: dict[str, str] = {}
        for name in sorted(no_usage | no_select):
            schema, _, table = name.partition(".")
            grants = [f"GRANT USAGE ON SCHEMA {_ident(schema)} TO {user}"] if name in no_usage else []
            if name in no_select:
                grants.append(f"GRANT SELECT ON {_ident(schema)}.{_ident(table)} TO {user}")
            unreadable[name] = "; ".join(grants)
        info = TableInfo(
            {k: tuple(v) for k, v in tables.items() if k not in unreadable}, self._captures, unreadable
        )
        self._cached = (time.monotonic(), info)
        return info

    def _columns(self) -> list[tuple[Any, ...]]:
        if self.cfg.connector == "postgres":
            from connectors.settings.model import PostgresSettings
            from connectors.sources.postgres.connection import PgConnParams, connect

            assert isinstance(self.cfg.source, PostgresSettings)
            conn = connect(PgConnParams.from_settings(self.cfg.source))
            try:
                with conn.cursor() as cur:
                    cur.execute(_PG_COLUMNS)
                    return list(cur.fetchall())
            finally:
                conn.close()
        from connectors.settings.model import MySqlSettings
        from connectors.sources.mysql.setup import connect as my_connect
        from connectors.sources.mysql.setup import connection_settings

        assert isinstance(self.cfg.source, MySqlSettings)
        myconn = my_connect(connection_settings(self.cfg.source))
        try:
            with myconn.cursor() as cur:
                cur.execute(_MY_COLUMNS)
                return [tuple(r) for r in cur.fetchall()]
        finally:
            myconn.close()
