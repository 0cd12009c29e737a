"""Chunk boundaries of a MySQL/MariaDB table keyed by one integer primary-key column, from the
key's range instead of a walk along it.

The general planner (`MySqlSnapshotter._boundaries`) walks the key index, `LIMIT 2 OFFSET n-1`
after each boundary: exact chunk sizes for any key, but InnoDB's primary key is the clustered
index, so the walk reads the whole table once (2M rows, ~400 MiB: 0.55-0.65 s, before the first
chunk can start). For an integer primary key the range says almost as much: a unique integer key
holds at most `chunk_rows` values in any `chunk_rows`-wide range, so candidates
`min - 1 + i * chunk_rows` give chunks of at most `chunk_rows` rows. Each candidate is then moved
down to the largest key at or below it in the view (`MAX(k) WHERE k <= c`: one index dive,
"select tables optimized away"), so every boundary is an existing key, every chunk `(b_i-1, b_i]`
holds at least the row `b_i`, and no chunk is empty — as the walk guarantees, and as the markers
need. On a dense key (AUTO_INCREMENT with few deletions) the chunks are exactly the walk's.

A sparse key would make too many candidates (most of them folding into the same key), so the
range is used only while it is within `MAX_SPREAD` times the table's estimated row count
(information_schema.TABLES.TABLE_ROWS, InnoDB's sampled estimate); otherwise, or without an
estimate, the caller walks. This is Flink CDC's "evenly sized chunks" split with its
distribution-factor check, kept exact by the snap to existing keys.
"""

from __future__ import annotations

from typing import Any

MAX_SPREAD = 4  # key range / estimated rows above which the walk is cheaper than the candidates
_PER_QUERY = 256  # candidates snapped per round trip (bounded statement size)


def range_boundaries(
    cur: Any, from_sql: str, column: str, chunk_rows: int, estimate: int
) -> list[tuple[str]] | None:
    """Inner boundaries (as `(text,)` tuples, what the walk returns) of the table `from_sql`
    (quoted `db`.`table`) split on the quoted integer primary-key `column`; None when its key
    range is too sparse for this plan (the caller walks the key instead). The table has rows."""
    step = max(1, int(chunk_rows))
    cur.execute(f"SELECT CAST(MIN({column}) AS CHAR), CAST(MAX({column}) AS CHAR) FROM {from_sql}")
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
    for first in range(1, candidates + 1, _PER_QUERY):
        upto = range(first, min(candidates, first + _PER_QUERY - 1) + 1)
        parts = [
            f"(SELECT CAST(MAX({column}) AS CHAR) FROM {from_sql} WHERE {column} <= {lo - 1 + i * step})"
            for i in upto
        ]
        cur.execute("SELECT " + ", ".join(parts))
        for text in cur.fetchone():
            # Candidates increase, so their snapped keys never decrease: keep each once. All are
            # below the largest key (every candidate is), so the last, open chunk is not empty.
            if text is not None and (not bounds or int(text) > int(bounds[-1][0])):
                bounds.append((str(text),))
    return bounds
