"""Incremental snapshot chunks planned ahead and read at once (`tidemark.incremental.snapshot.reader=spark`).

The thread reader (`incremental_read.py`) finds each chunk's end by reading it; to read several
chunks at once their key ranges must be known first. The planner (the Spark job's driver) takes
the snapshot's state the stream stored last (the chunks it emitted) and plans the chunks after it,
up to `ahead` chunks past the last one emitted (how far the snapshot may run ahead of the
stream): a range `(lower, upper]` of `incremental.snapshot.chunk.size` rows by key, its upper
bound the key the server numbers as that row (`ChunkSource.boundaries`); a table's last chunk
ends at its maximum key (read when its first chunk is planned, as Debezium reads it). Plans are
stored in the staging table before any of them is read, so a restarted job reads the same ranges
(no row falls between two plans, none is in two).

A chunk (`read_planned`, one Spark task) is read as the thread reader reads one: open watermark,
SELECT of its range, rows and `ChunkMeta` staged in one commit, close watermark; a chunk found
staged only gets its close watermark again. Each chunk has its own window; the engine emits
them in chunk order (`IncrementalSnapshots._scan`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

from connectors.snapshot.incremental_read import (
    WINDOW_OPEN,
    ChunkQuery,
    ChunkRows,
    ChunkSource,
    close_window,
    dedup_values,
    dropped_meanwhile,
    encoded,
    instant,
    read_unless_dropped,
    table_start,
)
from connectors.snapshot.incremental_staging import ChunkMeta, Staging

if TYPE_CHECKING:
    from connectors.settings.config import ConnectorConfig
    from connectors.snapshot.incremental import Progress

log = logging.getLogger(__name__)

# table, key, lower, upper, max_key, condition, surrogate_key, completed, statuses, ends
Plan = dict[str, Any]


def plan_meta(plan: Plan, rows: int = 0) -> ChunkMeta:
    """What the chunk leaves behind once emitted (`Progress.advance` takes it)."""
    return ChunkMeta(
        plan["table"],
        plan["upper"],
        plan["max_key"],
        0,
        list(plan["completed"]),
        rows=rows,
        ends=bool(plan["ends"]),
        statuses=dict(plan["statuses"]) or None,
    )


def plan_ahead(
    p: Progress, stored: Mapping[int, Plan], src: ChunkSource, chunk_size: int, ahead: int
) -> tuple[dict[int, Plan], list[tuple[int, Plan]]]:
    """The plans of chunks `p.chunk_seq` up to `p.chunk_seq + ahead` (fewer when the snapshot
    ends before): stored ones as they are, the rest planned now from where the one before ends.
    Returns (every plan by chunk number, the new ones to store)."""
    cursor = p.copy()
    plans: dict[int, Plan] = {}
    new: list[tuple[int, Plan]] = []
    n, upto = p.chunk_seq, p.chunk_seq + ahead
    while n < upto:
        if n in stored:
            fresh = [stored[n]]
        elif cursor.collections:
            fresh = _plan_next(cursor, src, chunk_size, upto - n)
        else:
            break
        for plan in fresh:
            plans[n] = plan
            if n not in stored:
                new.append((n, plan))
            cursor.advance(plan_meta(plan))
            n += 1
    return plans, new


def _plan_next(cursor: Progress, src: ChunkSource, chunk_size: int, slots: int) -> list[Plan]:
    """Up to `slots` chunks from `cursor` on, all of one table (the tables that turn out to have
    nothing to read are listed in the first one's `completed`)."""
    collections = [dict(c) for c in cursor.collections]
    completed: list[str] = []
    statuses: dict[str, str] = {}
    max_key, last_key = cursor.max_key, cursor.last_key
    while collections:
        cur = collections[0]
        table, condition, surrogate = cur["id"], cur.get("condition"), cur.get("surrogate_key")
        src.refresh(table)  # (a table dropped mid-snapshot: `table_start` finds it gone)
        _ts, key, max_key, status = table_start(src, cur, max_key)
        bounds: list[list[Any]] = []
        if status is None:
            assert max_key is not None
            q = ChunkQuery(table, key, last_key, max_key, condition, chunk_size * slots)
            try:
                bounds = src.boundaries(q, chunk_size)
            except Exception:
                if not dropped_meanwhile(src, table):
                    raise
                log.warning("incremental snapshot: table %s was dropped while its chunks were planned", table)
                status = "UNKNOWN_SCHEMA"
        if status is not None:
            completed.append(table)
            statuses[table] = status
            collections.pop(0)
            max_key, last_key = None, None
            continue
        assert max_key is not None
        if len(bounds) < slots and (not bounds or bounds[-1] != max_key):
            bounds.append(max_key)  # the rows after the last full chunk, up to the maximum key
        out: list[Plan] = []
        lower = last_key
        for upper in bounds:
            out.append(
                {
                    "table": table,
                    "key": key,
                    "lower": lower,
                    "upper": upper,
                    "max_key": max_key,
                    "condition": condition,
                    "surrogate_key": surrogate,
                    "completed": completed if not out else [],
                    "statuses": statuses if not out else {},
                    "ends": upper == max_key,
                }
            )
            lower = upper
            if upper == max_key:
                break
        return out
    # every table left is done: a chunk without rows says so
    return [
        {
            "table": None,
            "key": [],
            "lower": None,
            "upper": None,
            "max_key": None,
            "condition": None,
            "surrogate_key": None,
            "completed": completed,
            "statuses": statuses,
            "ends": False,
        }
    ]


def read_planned(
    src: ChunkSource, staging: Staging, chunk_id: str, plan: Plan, strategy: str, *, skip: bool = False
) -> int:
    """Read chunk `chunk_id` of `plan` in its own window and stage it (`skip`: its table was
    stopped: staged without rows, so the stream moves past it); the rows it holds. The close
    watermark is written last, once the rows are staged (a chunk staged before only gets it
    again)."""
    staged = staging.read(chunk_id)
    if staged is not None:
        close_window(src, chunk_id, strategy, None)
        return staged.meta.rows or 0
    opened = instant()
    src.insert_signal_once(
        f"{chunk_id}-open", WINDOW_OPEN, orjson.dumps({"openWindowTimestamp": opened}).decode()
    )
    table = plan["table"]
    rows = ChunkRows([], [], None)
    if table is not None and not skip:
        src.refresh(table)  # (a DDL the stream passed: the chunk is read with the new schema)
        if src.table(table) is None:
            log.warning("incremental snapshot: table %s is gone; chunk %s has no rows", table, chunk_id)
        else:
            q = ChunkQuery(
                table, plan["key"], plan["lower"], plan["upper"], plan["condition"], 1 << 62, fetch=10_000
            )
            got = read_unless_dropped(src, q)
            if got is not None:
                rows = encoded(got)
    meta = plan_meta(plan, len(rows.afters))
    staging.write(chunk_id, meta, rows.keys, rows.afters, dedup_values(rows, plan["surrogate_key"]))
    close_window(src, chunk_id, strategy, opened)
    return len(rows.afters)


def chunk_source(cfg: ConnectorConfig, signal_table: str | None = None) -> ChunkSource:
    """The connector's chunk source (a connection of its own); `signal_table`: the one named by
    signal.data.collection (default: read from `cfg`; none with read.only)."""
    if signal_table is None:
        from connectors.signals.settings import signal_settings

        signal_table = signal_settings(cfg).data_collection
    if cfg.connector == "postgres":
        assert signal_table is not None
        from connectors.snapshot.incremental_pg import PgChunkSource

        return PgChunkSource(cfg, signal_table)
    from connectors.snapshot.incremental_mysql import MySqlChunkSource

    return MySqlChunkSource(cfg, signal_table or "")  # read.only: no signal table written


# --------------------------------------------------------------------------- one Spark task
_SOURCES: dict[bytes, tuple[ChunkSource, Staging]] = {}  # per worker process, by configuration


def run_planned(spec: tuple[dict[str, str], str, Plan, str, bool]) -> int:
    """A Spark task: `read_planned` for (raw configuration, chunk id, plan, strategy, skip). A
    Python worker keeps its connection for the next chunks (workers are reused)."""
    raw, chunk_id, plan, strategy, skip = spec
    ident = orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)
    cached = _SOURCES.get(ident)
    if cached is None:
        from connectors.settings.config import from_mapping

        cfg = from_mapping(raw)
        cached = _SOURCES[ident] = (chunk_source(cfg), Staging(cfg.warehouse, cfg.name))
    src, staging = cached
    try:
        return read_planned(src, staging, chunk_id, plan, strategy, skip=skip)
    except BaseException:
        _SOURCES.pop(ident, None)  # (a broken connection is not used again)
        try:
            src.close()
        except Exception as e:  # noqa: BLE001 - closing must not mask the error
            log.debug("closing a chunk source: %s", e)
        raise
