"""Signals: the record a channel delivers, and the checked request each signal type becomes.

Every channel delivers a `SignalRecord` (Debezium's id / type / data, the data as JSON text) with
a `key` that identifies that delivery for good (the log position of a signal-table insert, the
Kafka offset, the Delta row's id, ...): the journal (`journal.py`) records keys, so a signal is
processed once however often a channel delivers it again after a restart.

`parse(record, ...)` checks a signal the way Debezium's actions read it and returns one of the
request types below, or raises `SignalError` with a message for the user.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from connectors.api import GtidSet
from connectors.signals.conditions import Condition, FilterError, check_filter

EXECUTE_SNAPSHOT = "execute-snapshot"
STOP_SNAPSHOT = "stop-snapshot"
PAUSE_SNAPSHOT = "pause-snapshot"
RESUME_SNAPSHOT = "resume-snapshot"
LOG = "log"
SET_BINLOG_POSITION = "set-binlog-position"
TYPES = (EXECUTE_SNAPSHOT, STOP_SNAPSHOT, PAUSE_SNAPSHOT, RESUME_SNAPSHOT, LOG, SET_BINLOG_POSITION)
# Rows the incremental snapshot writes into the signal table around each chunk (its watermarks):
# they belong to the snapshot's window logic, not to the signal processor.
WATERMARK_TYPES = frozenset({"snapshot-window-open", "snapshot-window-close"})


class SignalError(ValueError):
    """A signal that cannot be carried out: `message` says why, for the notification and log."""


@dataclass(frozen=True, slots=True)
class SignalRecord:
    """One signal as a channel delivered it. `data` is JSON text (or None/"" for no data)."""

    id: str
    type: str
    data: str | None
    channel: str
    key: str  # unique per delivery source: what the journal de-duplicates on
    channel_offset: int | None = None  # Kafka: the record's offset (where reading resumes)
    offset: Mapping[str, Any] | None = None  # source channel: the source offset of the insert
    problem: str | None = None  # the delivery is not a readable signal (reported, journaled)


# --------------------------------------------------------------------------- requests
SnapshotType = Literal["incremental", "blocking"]


@dataclass(frozen=True, slots=True)
class ExecuteSnapshot:
    data_collections: tuple[str, ...]  # as sent: names or regular expressions
    tables: tuple[str, ...]  # the captured tables they match (empty when tables are unknown)
    snapshot_type: SnapshotType
    conditions: tuple[Condition, ...]  # one per table at most; `Condition.sql` is the checked text
    surrogate_key: str | None


@dataclass(frozen=True, slots=True)
class StopSnapshot:
    data_collections: tuple[str, ...]  # empty: every table of the running snapshot
    snapshot_type: SnapshotType


@dataclass(frozen=True, slots=True)
class PauseSnapshot:
    pass


@dataclass(frozen=True, slots=True)
class ResumeSnapshot:
    pass


@dataclass(frozen=True, slots=True)
class LogMessage:
    message: str


@dataclass(frozen=True, slots=True)
class SetBinlogPosition:
    binlog_filename: str | None = None
    binlog_position: int | None = None
    gtid_set: str | None = None


Request = ExecuteSnapshot | StopSnapshot | PauseSnapshot | ResumeSnapshot | LogMessage | SetBinlogPosition


@dataclass
class TableInfo:
    """What validation knows about the captured tables: name → column names (None: the tables
    are not known, e.g. the database could not be asked; only syntax is checked then)."""

    tables: Mapping[str, tuple[str, ...]] | None = None
    captures: Callable[[str], bool] | None = field(default=None)  # the include/exclude filters
    # captured tables database.user may not read (PostgreSQL: name -> its GRANT); MySQL hides them
    unreadable: Mapping[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- parsing
def data_of(record: SignalRecord) -> dict[str, Any]:
    """The signal's data as a JSON object ({} for none). SignalError for anything else."""
    text = record.data
    if text is None or (isinstance(text, str) and not text.strip()):
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise SignalError(f"its data is not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise SignalError(f"its data must be a JSON object, not {type(value).__name__}")
    return value


def parse(record: SignalRecord, connector: str, tables: TableInfo | None = None) -> Request:
    """The checked request of a signal. Raises SignalError."""
    if record.problem:
        raise SignalError(record.problem)
    kind = (record.type or "").strip()
    if kind == SET_BINLOG_POSITION and connector == "postgres":
        raise SignalError(
            f"unknown signal type {record.type!r} for a PostgreSQL connector: set-binlog-position is a "
            "MySQL/MariaDB signal (a PostgreSQL connector reads a replication slot, not a binlog)"
        )
    if kind not in TYPES:
        known = [t for t in TYPES if connector != "postgres" or t != SET_BINLOG_POSITION]
        raise SignalError(f"unknown signal type {record.type!r} (known: {', '.join(known)})")
    data = data_of(record)
    if kind == LOG:
        message = data.get("message")
        if not isinstance(message, str) or not message:
            raise SignalError('a log signal needs data {"message": "..."}')
        return LogMessage(message)
    if kind == EXECUTE_SNAPSHOT:
        return _execute(data, connector, tables or TableInfo())
    if kind == STOP_SNAPSHOT:
        colls = _collections(data, required=False)
        if data.get("type") is None:
            raise SignalError('a stop-snapshot signal needs "type": "incremental"')
        st = _snapshot_type(data)
        if st != "incremental":
            raise SignalError('stop-snapshot: only "type": "incremental" can be stopped')
        return StopSnapshot(colls, st)
    if kind == PAUSE_SNAPSHOT:
        return PauseSnapshot()
    if kind == RESUME_SNAPSHOT:
        return ResumeSnapshot()
    return _binlog_position(data)


def _collections(data: Mapping[str, Any], *, required: bool) -> tuple[str, ...]:
    colls = data.get("data-collections")
    if colls is None:
        if required:
            raise SignalError('an execute-snapshot signal needs "data-collections": [<table or regex>, ...]')
        return ()
    if not isinstance(colls, list) or not all(isinstance(c, str) and c.strip() for c in colls):
        raise SignalError('"data-collections" must be a list of table names or regular expressions')
    return tuple(c.strip() for c in colls)


def _snapshot_type(data: Mapping[str, Any]) -> SnapshotType:
    t = data.get("type", "incremental")
    if not isinstance(t, str) or t.lower() not in ("incremental", "blocking"):
        raise SignalError(f'"type" must be incremental or blocking, not {t!r}')
    return "blocking" if t.lower() == "blocking" else "incremental"


def _regex(pattern: str) -> re.Pattern[str]:
    try:
        # Debezium matches data-collections case-sensitively against the whole name.
        return re.compile(pattern)
    except re.error as e:
        raise SignalError(f"data-collection {pattern!r} is not a valid regular expression ({e})") from None


def _plain(name: str) -> str:
    """A data-collection written as a plain name, with Debezium's quoting undone (`db."My.T"`)."""
    return name.replace('\\"', "").replace('"', "")


_PLAIN_NAME = re.compile(r"[\w$]+\.[\w$]+")


def _match_tables(colls: tuple[str, ...], info: TableInfo) -> tuple[str, ...]:
    if info.tables is None:
        for c in colls:
            _regex(c)
            if info.captures is not None and _PLAIN_NAME.fullmatch(c) and not info.captures(c):
                raise SignalError(f"table {c} is not captured by this connector")
        return ()
    out: list[str] = []
    for c in colls:
        pattern = _regex(c)
        hits = [t for t in info.tables if pattern.fullmatch(t) or t == _plain(c)]
        denied = [t for t in info.unreadable if pattern.fullmatch(t) or t == _plain(c)]
        if denied:
            grants = "; ".join(info.unreadable[t] for t in denied)
            raise SignalError(
                f"database.user may not read {', '.join(denied)}, so no snapshot of it: {grants}"
            )
        if not hits:
            raise SignalError(
                f"data-collection {c!r} matches no captured table"
                " (names are case-sensitive: <schema>.<table> / <database>.<table>;"
                " on MySQL a table database.user holds no privilege on is hidden from it)"
            )
        out.extend(h for h in hits if h not in out)
    return tuple(out)


def _execute(data: Mapping[str, Any], connector: str, info: TableInfo) -> ExecuteSnapshot:
    colls = _collections(data, required=True)
    st = _snapshot_type(data)
    tables = _match_tables(colls, info) if colls else ()
    surrogate = data.get("surrogate-key")
    if surrogate is not None:
        if not isinstance(surrogate, str) or not surrogate.strip():
            raise SignalError('"surrogate-key" must be a column name')
        surrogate = surrogate.strip()
        if info.tables is not None:
            for t in tables:
                if surrogate.lower() not in {c.lower() for c in info.tables[t]}:
                    raise SignalError(f"surrogate-key {surrogate!r} is not a column of {t}")
    conds = data.get("additional-conditions") or []
    if not isinstance(conds, list):
        raise SignalError('"additional-conditions" must be a list of {"data-collection", "filter"}')
    checked: list[Condition] = []
    for cond in conds:
        if not isinstance(cond, dict) or not isinstance(cond.get("data-collection"), str):
            raise SignalError('each additional condition needs "data-collection" and "filter"')
        target = cond["data-collection"].strip()
        if not any(_regex(c).fullmatch(target) or _plain(c) == _plain(target) for c in colls):
            raise SignalError(f"additional condition for {target}, which is not in data-collections")
        if info.tables is not None and target not in info.tables and _plain(target) not in info.tables:
            raise SignalError(f"additional condition for {target}, which is not a captured table")
        name = target if info.tables is None or target in info.tables else _plain(target)
        columns = info.tables.get(name) if info.tables is not None else None
        try:
            checked.append(
                check_filter(name, cond.get("filter"), connector, columns, allow_select=st == "blocking")  # type: ignore[arg-type]
            )
        except FilterError as e:
            raise SignalError(f"additional condition for {target}: {e}") from None
    if len({c.table for c in checked}) != len(checked):
        raise SignalError("more than one additional condition for the same table")
    return ExecuteSnapshot(colls, tables, st, tuple(checked), surrogate)


_BINLOG_FILE = re.compile(r"[A-Za-z0-9_.\-]+\.\d+")


def _binlog_position(data: Mapping[str, Any]) -> SetBinlogPosition:
    has_file = "binlog_filename" in data or "binlog_position" in data
    gtid = data.get("gtid_set")
    if has_file and gtid is not None:
        raise SignalError("set-binlog-position: give binlog_filename/binlog_position or gtid_set, not both")
    if gtid is not None:
        if not isinstance(gtid, str) or not gtid.strip():
            raise SignalError("set-binlog-position: gtid_set must be a GTID set text")
        try:
            GtidSet.parse(gtid)
        except ValueError:
            raise SignalError(f"set-binlog-position: {gtid!r} is not a GTID set") from None
        return SetBinlogPosition(gtid_set=gtid.strip())
    name, pos = data.get("binlog_filename"), data.get("binlog_position")
    if not isinstance(name, str) or not _BINLOG_FILE.fullmatch(name):
        raise SignalError(
            f"set-binlog-position: binlog_filename {name!r} is not a binlog file name (e.g. mysql-bin.000003)"
        )
    if isinstance(pos, bool) or not isinstance(pos, int) or pos < 0:
        raise SignalError(f"set-binlog-position: binlog_position must be an integer >= 0, not {pos!r}")
    return SetBinlogPosition(binlog_filename=name, binlog_position=pos)


def describe(request: Request) -> str:
    """One line for logs and notifications."""
    if isinstance(request, ExecuteSnapshot):
        what = ", ".join(request.tables or request.data_collections) or "no tables"
        return f"{request.snapshot_type} snapshot of {what}"
    if isinstance(request, StopSnapshot):
        return f"stop the {request.snapshot_type} snapshot" + (
            f" of {', '.join(request.data_collections)}" if request.data_collections else ""
        )
    if isinstance(request, SetBinlogPosition):
        return "set the binlog position to " + (
            request.gtid_set or f"{request.binlog_filename}:{request.binlog_position}"
        )
    if isinstance(request, LogMessage):
        return "log a message"
    return type(request).__name__.replace("Snapshot", " snapshot").lower()
