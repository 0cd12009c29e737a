"""Replication slots of the PostgreSQL source: create, inspect, drop, attach with retries, and
whether a stored offset can resume from a slot.

Idempotent (create if missing, log what was done); a slot held by another walsender is a
`TransientError` (`attach_with_retry` waits per slot.max.retries / slot.retry.delay.ms), anything
else one `TerminalError` saying what to change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg2
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_fixed

from connectors.api import Lsn, TerminalError, TransientError
from connectors.sources.postgres.connection import query, translate_error

log = logging.getLogger(__name__)

__all__ = [
    "SlotInfo",
    "attach_with_retry",
    "check_resume",
    "current_wal_lsn",
    "drop_slot",
    "ensure_slot",
    "slot_info",
]


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
    rows = query(
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
            query(conn, "SELECT * FROM pg_create_logical_replication_slot(%s, %s)", (name, plugin))
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
    (db,) = query(conn, "SELECT current_database()")[0]
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
        rows = query(
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


def current_wal_lsn(conn: Any) -> int:
    (v,) = query(conn, "SELECT pg_current_wal_lsn()::text")[0]
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
    # The way on: forget the offsets; a new initial snapshot recovers the data (when_needed does
    # both by itself). With no_data the changes in between are lost, and the hint says so.
    reset = "run `tidemark offsets reset --config FILE --yes`"
    lost = (
        "with snapshot.mode=initial that next run first takes a new snapshot of the data, so nothing is lost "
        "(snapshot.mode=when_needed does this by itself); with no_data the changes between the stored "
        f"position {Lsn(stored_lsn)} and now are lost to this connector"
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
