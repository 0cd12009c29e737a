"""`snapshot.select.statement.overrides.<table>`: parsed with sqlglot, never pasted into SQL blindly.

An override must be one SELECT reading only its own table. Tidemark reads such a table in
primary-key chunks when the override is `SELECT * FROM <table> [WHERE <condition>]` (the condition
is added to every chunk's query); any other single-table SELECT (a column list, ORDER BY, LIMIT,
GROUP BY) is read whole, as one chunk, from `(<override>) AS snapshot_override`.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError


@dataclass(frozen=True, slots=True)
class SelectOverride:
    table: str  # the key's table name, e.g. "public.orders"
    sql: str  # the override as written
    where: str | None  # the WHERE condition (SQL text) when the override can be chunked
    chunkable: bool


class OverrideError(ValueError):
    """Why an override is refused (the message names the key)."""


def _names(table: exp.Table) -> tuple[str, ...]:
    return tuple(p.name.lower() for p in (table.args.get("catalog"), table.args.get("db"), table.this) if p)


def parse_override(table: str, sql: str, dialect: str) -> SelectOverride:
    """Check one override; `table` is the key's `<schema>.<table>` (PostgreSQL) or
    `<database>.<table>` (MySQL). Raises OverrideError saying what is wrong."""
    key = f"snapshot.select.statement.overrides.{table}"
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except ParseError as e:
        first = str(e).splitlines()[0]
        raise OverrideError(f"{key}: not a valid SELECT statement ({first})") from None
    if len(statements) != 1:
        raise OverrideError(f"{key}: must be one SELECT statement, found {len(statements)} statements")
    stmt = statements[0]
    if not isinstance(stmt, exp.Select):
        word = sql.split(maxsplit=1)[0] if sql.strip() else ""
        raise OverrideError(f"{key}: must be a SELECT statement (it starts with {word!r})")
    tables = list(stmt.find_all(exp.Table))
    want = tuple(p.lower() for p in table.split("."))
    # an unqualified name may stand for the table (the search path / the current database)
    others = sorted({".".join(n) for t in tables if (n := _names(t)) and want[-len(n) :] != n})
    if not tables or others:
        read = f" (it reads {', '.join(others)})" if others else ""
        raise OverrideError(f"{key}: must select from {table} only{read}")
    if any(isinstance(n, exp.Subquery | exp.With | exp.Join) for n in stmt.walk()) or len(tables) != 1:
        raise OverrideError(f"{key}: must be a plain SELECT ... FROM {table} (no joins, sub-queries or CTEs)")
    plain = (
        len(stmt.expressions) == 1
        and isinstance(stmt.expressions[0], exp.Star)
        and not any(stmt.args.get(k) for k in ("group", "having", "order", "limit", "offset", "distinct"))
    )
    where = stmt.args.get("where")
    cond = where.this.sql(dialect=dialect) if where is not None else None
    return SelectOverride(table, sql, cond, plain)
