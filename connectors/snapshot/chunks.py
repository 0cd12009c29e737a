"""Primary-key chunks and the `source.snapshot` markers of their rows.

A table is read in key ranges `(lower, upper]` (a tuple per bound for composite keys; None for an
open end), with boundaries taken from the key's own distribution (sampled keys), so skewed keys
still give even chunks. A keyless table, or one whose SELECT override cannot be chunked, is one
chunk with both ends open.

Markers follow Debezium 3.6 (`SnapshotMarkerResolver`), checked in this order: the last row of
the last table is `last`, the first row of the first table `first`, the last row of any other
table `last_in_data_collection` (so a one-row table's row), the first row of any other table
`first_in_data_collection`, every other row `true`. "Last table" is the last table with rows:
Debezium rewrites its final record to `last` when the tables after it are empty; the planner
sees which tables are empty in the snapshot's view. A chunk knows whether it is its table's
first or last chunk; the planner makes sure no chunk is empty in the view (see
`pick_boundaries`), so the marked rows exist.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

Key = tuple[Any, ...]


@dataclass(frozen=True)
class Chunk:
    table: str  # "<schema>.<table>" (PostgreSQL) / "<database>.<table>" (MySQL)
    index: int  # position in the snapshot's plan (commit and resume unit)
    lower: Key | None  # exclusive; None = from the first row
    upper: Key | None  # inclusive; None = to the last row
    detail: dict[str, Any] = field(default_factory=dict, compare=False)

    DETAIL_KEYS: ClassVar[frozenset[str]] = frozenset(
        {"table_index", "first_chunk", "last_chunk", "tables", "last_table"}
    )

    @property
    def first_chunk(self) -> bool:
        return bool(self.detail.get("first_chunk", True))

    @property
    def last_chunk(self) -> bool:
        return bool(self.detail.get("last_chunk", True))

    @property
    def first_table(self) -> bool:
        return self.detail.get("table_index", 0) == 0

    @property
    def last_table(self) -> bool:
        """The last table with rows (the planner's "last_table"; by default the last one)."""
        if "last_table" in self.detail:
            return bool(self.detail["last_table"])
        return self.detail.get("table_index", 0) == self.detail.get("tables", 1) - 1


def table_chunks(
    table: str, first_index: int, table_index: int, tables: int, bounds: Sequence[Key], *, last_table: bool
) -> list[Chunk]:
    """The chunks of one table from its sorted inner boundaries: (-∞, b0], (b0, b1], ..., (bn, +∞)."""
    edges: list[Key | None] = [None, *bounds, None]
    n = len(edges) - 1
    return [
        Chunk(
            table,
            first_index + i,
            edges[i],
            edges[i + 1],
            {
                "table_index": table_index,
                "tables": tables,
                "first_chunk": i == 0,
                "last_chunk": i == n - 1,
                "last_table": last_table,
            },
        )
        for i in range(n)
    ]


def pick_boundaries(sorted_keys: Sequence[Key], rows: int, chunk_rows: int, max_key: Key | None) -> list[Key]:
    """Inner boundaries from a sample of keys sorted by the server (in the key's own order; the
    values may be text, so they are never compared here): about `rows / chunk_rows` chunks, each
    boundary an existing key, none equal to the largest key (so the last, open-ended chunk is
    never empty)."""
    want = max(1, -(-rows // max(1, chunk_rows)))  # ceil
    if want <= 1 or not sorted_keys:
        return []
    step = len(sorted_keys) / want
    picked = sorted({min(len(sorted_keys) - 1, int(i * step)) for i in range(1, want)})
    return [sorted_keys[i] for i in picked if max_key is None or sorted_keys[i] != max_key]


def marker(chunk: Chunk, first_row: bool, last_row: bool) -> str:
    """The `source.snapshot` value of a row of `chunk` (first_row / last_row: the row is the
    chunk's first / last)."""
    first = first_row and chunk.first_chunk
    last = last_row and chunk.last_chunk
    if last and chunk.last_table:
        return "last"
    if first and chunk.first_table:
        return "first"
    if last:
        return "last_in_data_collection"
    if first:
        return "first_in_data_collection"
    return "true"


def range_condition(
    columns: Sequence[str], chunk: Chunk, ident: Callable[[str], str], literal: Callable[[Any], str]
) -> str | None:
    """`(k1, k2) > (lo1, lo2) AND (k1, k2) <= (hi1, hi2)` for the chunk (row comparison, so
    composite keys order lexicographically, as the key index does); None for a whole table.
    `ident` quotes a column name, `literal` a value (the driver's own quoting: never pasted)."""
    if not columns:
        return None
    cols = ", ".join(ident(c) for c in columns)
    lhs = f"({cols})" if len(columns) > 1 else cols

    def bound(key: Key) -> str:
        vals = ", ".join(literal(v) for v in key)
        return f"({vals})" if len(columns) > 1 else vals

    parts = []
    if chunk.lower is not None:
        parts.append(f"{lhs} > {bound(chunk.lower)}")
    if chunk.upper is not None:
        parts.append(f"{lhs} <= {bound(chunk.upper)}")
    return " AND ".join(parts) or None
