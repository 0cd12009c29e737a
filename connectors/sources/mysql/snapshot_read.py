"""Snapshot reads of MySQL/MariaDB: PyMySQL rows → the key/after JSON texts streaming emits.

Values go through the streaming converters (`ColumnDef.convert` of the table schema the MySQL
source builds, via `TableSchema.row` / `TableSchema.key`), so a snapshot row and a streamed row of
the same data are the same bytes. What PyMySQL hands over differs from what the binlog decoder
passes to those converters in one respect only, adapted here per column (`adapter`):

- a zero or invalid DATE / DATETIME / TIMESTAMP (`0000-00-00`) comes as the server's text, where
  the binlog decoder passes `types.ZERO`;
- YEAR `0000` comes as 0, where the binlog decoder passes 1900 (the binlog stores YEAR as one
  byte, year - 1900, and 0 for 0000; the decoder adds 1900 to it, as Debezium's does).

Everything else already has the binlog decoder's Python type when the session uses
`time_zone='+00:00'` and `utf8mb4` results (see `SESSION_STATEMENTS`): integers (unsigned too) as
int, BIT as big-endian bytes, FLOAT/DOUBLE as float (the server prints the shortest text that
reads back), DECIMAL as `decimal.Decimal`, character types as str (the server converts from the
column charset), binary types and spatial values (SRID + WKB) as bytes, ENUM/SET/JSON/UUID/INET as
their text (the converters accept text for those), YEAR as int, DATE/TIME/DATETIME/TIMESTAMP as
date/timedelta/naive datetime (TIMESTAMP in UTC). `tests/test_snapshot_mysql.py` checks every type
of the streaming conformance workload against the streamed value.

The JSON texts are built per row (`orjson.dumps` of the dicts `TableSchema.row` returns, the same
call the Delta sink makes for streamed records): exact by construction, not column-wise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pyarrow as pa

from connectors.format.tableschema import TableSchema
from connectors.sources.mysql.model import Column
from connectors.sources.mysql.types import ZERO

__all__ = ["SESSION_STATEMENTS", "SnapshotRows", "adapter", "quote_ident"]

# The session the converters expect (TIMESTAMP in UTC, as the binlog holds it); net_write_timeout
# because an unbuffered read waits on its consumer (a slow sink) while the server writes.
SESSION_STATEMENTS = (
    "SET SESSION time_zone = '+00:00'",
    "SET SESSION net_write_timeout = 3600",
    "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
)

_ZERO_TEXT_TYPES = frozenset({"DATE", "DATETIME", "TIMESTAMP"})


def quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _zero_if_text(v: Any) -> Any:
    # PyMySQL returns the server's text for a date it cannot represent (0000-00-00, ...)
    return ZERO if isinstance(v, str) else v


def _year(v: Any) -> Any:
    return 1900 if v == 0 else v


def adapter(col: Column) -> Callable[[Any], Any] | None:
    """What turns PyMySQL's value of `col` into the binlog decoder's (None: already the same)."""
    if col.base_type in _ZERO_TEXT_TYPES:
        return _zero_if_text
    if col.base_type == "YEAR":
        return _year
    return None


class SnapshotRows:
    """One table version's SELECT list and row encoder. `columns`: the table model's columns, in
    table order (what `ts.row` / `ts.key` index)."""

    def __init__(self, ts: TableSchema, columns: Sequence[Column]) -> None:
        self.ts = ts
        self.columns = list(columns)
        self._adapt = [(i, f) for i, c in enumerate(self.columns) if (f := adapter(c)) is not None]

    def select_list(self) -> str:
        return ", ".join(quote_ident(c.name) for c in self.columns)

    def raw(self, row: Sequence[Any]) -> Sequence[Any]:
        if not self._adapt:
            return row
        out = list(row)
        for i, f in self._adapt:
            v = out[i]
            if v is not None:
                out[i] = f(v)
        return out

    def encode(self, rows: Sequence[Sequence[Any]]) -> tuple[pa.Array | None, pa.Array]:
        """(key JSON texts or None for a keyless table, after JSON texts), one per row."""
        dumps, key, value = orjson.dumps, self.ts.key, self.ts.row
        raws = [self.raw(r) for r in rows] if self._adapt else rows
        after = pa.array([dumps(value(r)) for r in raws], pa.binary()).view(pa.string())
        if not self.ts.key_names:
            return None, after
        keys = pa.array([dumps(key(r)) for r in raws], pa.binary()).view(pa.string())
        return keys, after
