"""Chunk boundaries of a table keyed by one integer primary-key column, from the key's range
instead of a walk along it (MySQL/MariaDB) or a sample of it (PostgreSQL).

The general planners find boundaries among the rows: MySQL walks the key index (`LIMIT 2 OFFSET
n-1` after each boundary: exact chunk sizes, but InnoDB's primary key is the clustered index, so
the walk reads the whole table, 0.55-0.65 s for 2M rows, before the first chunk can start);
PostgreSQL samples pages (`TABLESAMPLE SYSTEM`: cheap, but its chunks of a 2M-row table held
22k-161k rows for a target of 100k). For an integer primary key the range says almost as much: a
unique integer key holds at most `chunk_rows` values in any `chunk_rows`-wide range, so
candidates `min - 1 + i * chunk_rows` give chunks of at most `chunk_rows` rows. Each candidate is
then moved down to the largest key at or below it in the snapshot's view (`MAX(k) WHERE k <= c`:
one index dive), so every boundary is an existing key, every chunk `(b_i-1, b_i]` holds at least
the row `b_i`, and no chunk is empty, as the markers need. On a dense key (AUTO_INCREMENT,
SERIAL / IDENTITY with few deletions) the chunks hold exactly `chunk_rows` rows.

A sparse key would make too many candidates (most of them folding into the same key), so the
range is used only while it is within `MAX_SPREAD` times the table's estimated row count
(MySQL: information_schema.TABLES.TABLE_ROWS; PostgreSQL: pg_class.reltuples); otherwise, or
without an estimate, the caller plans as before. This is Flink CDC's "evenly sized chunks" split
with its distribution-factor check, kept exact by the move to existing keys.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MAX_SPREAD = 4  # key range / estimated rows above which the other plan is cheaper
_PER_QUERY = 256  # candidates snapped per round trip (bounded statement size)


def range_boundaries(
    cur: Any, from_sql: str, column: str, chunk_rows: int, estimate: int, text: Callable[[str], str]
) -> list[tuple[str]] | None:
    """Inner boundaries (as `(text,)` tuples, as the other planners return them) of the table
    `from_sql` (quoted) split on the quoted integer primary-key `column`; None when its key range
    is too sparse for this plan (the caller plans otherwise). `text` makes an expression's text
    in the server's dialect. The table has rows."""
    step = max(1, int(chunk_rows))
    cur.execute(f"SELECT {text(f'MIN({column})')}, {text(f'MAX({column})')} FROM {from_sql}")
    lo_text, hi_text = cur.fetchone()
    if lo_text is None:
        return []
    lo, hi = int(lo_text), int(hi_text)
    candidates = (hi - lo) // step  # lo - 1 + i*step for i = 1.., below hi: the last chunk keeps hi
    if candidates <= 0:
        return []
    if candidates > MAX_SPREAD * (max(0, estimate) // step) + 16:
        return None
    bounds: list[tuple[str]] = []
    last = lo - 1
    for first in range(1, candidates + 1, _PER_QUERY):
        upto = range(first, min(candidates, first + _PER_QUERY - 1) + 1)
        parts = [
            f"(SELECT {text(f'MAX({column})')} FROM {from_sql} WHERE {column} <= {lo - 1 + i * step})"
            for i in upto
        ]
        cur.execute("SELECT " + ", ".join(parts))
        for found in cur.fetchone():
            # Candidates increase, so their snapped keys never decrease: keep each once. All are
            # below the largest key (every candidate is), so the last, open chunk is not empty.
            if found is not None and int(found) > last:
                last = int(found)
                bounds.append((str(found),))
    return bounds
