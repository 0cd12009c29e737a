"""The `set-binlog-position` signal (MySQL/MariaDB): move the running stream to another binlog
position, as Debezium 3.6's SetBinlogPositionSignal does, without its restart by hand.

Debezium writes the new position into the offsets (a heartbeat commits it) and stops the
connector; it takes effect when the connector is started again. Tidemark does the equivalent in
place: the handler (`SetBinlogPositionHandler`, on the signal processor's thread) checks the
position against the server and resolves it into a complete offset (`resolve`), then hands it to
the live `MySqlSource`, which ends its binlog dump at the next event, emits what it has, emits an
empty batch carrying the new offset (every sink stores it: a restart continues from there) and
re-opens the dump at the new position with the schema history replayed up to it.

Exactly once: every offset the source stores after a reposition carries the signal's key
(`MARK`). When the process dies after the new offset was stored but before the journal recorded
the signal as processed, the journal hands the signal over again at the next start; the handler
sees its key in the resumed source's offset and does not move the stream a second time.

What the server is asked:
  * file/position: the file must be listed by SHOW BINARY LOGS (not purged) and the position an
    event boundary in it (SHOW BINLOG EVENTS ... FROM pos) or its end, outside a transaction;
    the GTID set at that point (MariaDB BINLOG_GTID_POS, MySQL the file's Previous_gtids plus
    its GTID events up to the position) goes into the offset, because restarts resume by GTIDs;
  * GTID set: MariaDB — every GTID must be in @@gtid_binlog_state and every replication domain
    of the server named (a missing domain would replay that domain from its start); MySQL — a
    subset of @@gtid_executed containing @@gtid_purged. Then a non-blocking dump from the set
    (the server's own check: purged or unknown GTIDs are refused) gives the file/position of the
    first transaction after it.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pymysql

from connectors.api import GtidSet, TidemarkError
from connectors.signals.model import Request, SetBinlogPosition, SignalError, SignalRecord
from connectors.sources.mysql.connection import ConnectionSettings, current_position
from connectors.sources.mysql.reposition import MARK, RepositionTicket
from connectors.sources.mysql.stream import BinlogStream

if TYPE_CHECKING:
    from connectors.sources.mysql.source import MySqlSource

log = logging.getLogger(__name__)

# Events a stream may start at: outside any transaction (MySQL and MariaDB names).
_BOUNDARY_EVENTS = frozenset(
    {
        "Format_desc",
        "Gtid_list",
        "Binlog_checkpoint",
        "Gtid",
        "Anonymous_Gtid",
        "Previous_gtids",
        "Rotate",
        "Stop",
    }
)
_PROBE_TRIES = 5


def _fail(text: str) -> SignalError:
    return SignalError(f"set-binlog-position: {text}")


# --------------------------------------------------------------------------- resolving a position
def resolve(settings: ConnectionSettings, request: SetBinlogPosition) -> dict[str, Any]:
    """The complete offset (`file`, `pos`, `gtids`, `event`, `row`, `server_id`, `ts_sec`) of the
    requested position, checked against the server. Raises SignalError saying what is wrong."""
    try:
        conn = pymysql.connect(**settings.pymysql_kwargs())
    except pymysql.err.MySQLError as e:
        raise _fail(f"cannot connect to the server to check the position: {e}") from None
    try:
        cur = conn.cursor()
        cur.execute("SELECT VERSION()")
        mariadb = "mariadb" in str(cur.fetchone()[0]).lower()
        if request.gtid_set is not None:
            file, pos, gtids = _from_gtids(cur, settings, request.gtid_set, mariadb)
        else:
            assert request.binlog_filename is not None and request.binlog_position is not None
            file, pos, gtids = _from_file(cur, request.binlog_filename, request.binlog_position, mariadb)
    except pymysql.err.MySQLError as e:
        raise _fail(f"the server could not check the position: {e}") from None
    finally:
        conn.close()
    return {"file": file, "pos": pos, "gtids": gtids, "event": 0, "row": 0, "server_id": 0, "ts_sec": 0}


def _from_file(cur: Any, file: str, pos: int, mariadb: bool) -> tuple[str, int, str]:
    cur.execute("SHOW BINARY LOGS")
    sizes = {str(r[0]): int(r[1]) for r in cur.fetchall()}
    if file not in sizes:
        names = sorted(sizes)
        have = f"{names[0]} .. {names[-1]}" if names else "none"
        raise _fail(f"binlog file {file} is not on the server (purged or never written; it has {have})")
    pos = max(pos, 4)  # 0..4: the start of the file (its first event is at 4)
    size = sizes[file]
    if pos > size:
        raise _fail(f"position {pos} is beyond the end of {file} ({size} bytes)")
    if pos < size:
        try:
            cur.execute(f"SHOW BINLOG EVENTS IN {_literal(file)} FROM {pos} LIMIT 1")
            row = cur.fetchone()
        except pymysql.err.MySQLError:
            row = None
        if row is None:
            raise _fail(f"position {pos} of {file} is not the start of an event (see SHOW BINLOG EVENTS)")
        kind, info = str(row[2]), str(row[5] or "")
        if kind not in _BOUNDARY_EVENTS and not (kind == "Query" and _standalone_query(info)):
            raise _fail(
                f"position {pos} of {file} is inside a transaction (a {kind} event); give the position "
                "of a transaction's first event (Gtid, or Query BEGIN without GTIDs)"
            )
    return file, pos, _gtids_at(cur, file, pos, mariadb)


def _standalone_query(info: str) -> bool:
    """A Query event that opens a transaction or is a statement of its own (no GTIDs)."""
    return not info.upper().startswith(("COMMIT", "ROLLBACK"))


def _gtids_at(cur: Any, file: str, pos: int, mariadb: bool) -> str:
    """The executed GTID set at `file`:`pos` ('' without GTIDs)."""
    if mariadb:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
        got = cur.fetchone()[0]
        if got is None:
            raise _fail(f"the server knows no GTID position at {file}:{pos}")
        return str(got)
    cur.execute("SELECT @@global.gtid_mode")
    if str(cur.fetchone()[0]).upper() != "ON":
        return ""
    # MySQL: the file's Previous_gtids plus the GTIDs of its transactions before `pos`.
    cur.execute(f"SHOW BINLOG EVENTS IN {_literal(file)}")
    executed = GtidSet()
    for _f, at, kind, _sid, _end, info in cur.fetchall():
        if int(at) >= pos:
            break
        if kind == "Previous_gtids":
            executed = GtidSet.parse(str(info or ""))
        elif kind == "Gtid" and "'" in str(info):
            executed = executed.add(str(info).split("'")[1])
    return str(executed)


def _literal(text: str) -> str:
    # the file name was checked against SHOW BINARY LOGS; quoted all the same
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def _mariadb_state(text: str) -> dict[tuple[int, int], int]:
    out: dict[tuple[int, int], int] = {}
    for part in (p.strip() for p in text.split(",")):
        if part:
            d, s, n = (int(x) for x in part.split("-"))
            out[(d, s)] = max(out.get((d, s), 0), n)
    return out


def _from_gtids(cur: Any, settings: ConnectionSettings, text: str, mariadb: bool) -> tuple[str, int, str]:
    wanted = GtidSet.parse(text)
    if mariadb:
        if not wanted.mariadb:
            raise _fail(f"{text!r} is a MySQL GTID set; this server is MariaDB (GTIDs look like 0-1-100)")
        cur.execute("SELECT @@global.gtid_binlog_state, @@global.gtid_binlog_pos")
        state_text, pos_text = (str(x or "") for x in cur.fetchone())
        state = _mariadb_state(state_text)
        for d, s, n in wanted.mariadb:
            if state.get((d, s), -1) < n:
                raise _fail(
                    f"the server has no GTID {d}-{s}-{n} in its binlog (its binlog state is {state_text or 'empty'})"
                )
        missing = sorted({d for d, _ in state} - {d for d, _, _ in wanted.mariadb})
        if missing:
            raise _fail(
                f"gtid_set names no position in replication domain(s) {', '.join(map(str, missing))} of the "
                f"server; give one GTID per domain (the server is at {pos_text})"
            )
    else:
        if not wanted.mysql:
            raise _fail(f"{text!r} is a MariaDB GTID; this server is MySQL (GTID sets look like uuid:1-100)")
        cur.execute("SELECT @@global.gtid_mode, @@global.gtid_executed, @@global.gtid_purged")
        mode, executed, purged = (str(x or "") for x in cur.fetchone())
        if mode.upper() != "ON":
            raise _fail("the server runs with gtid_mode OFF; give binlog_filename and binlog_position")
        if not GtidSet.parse(executed).contains(wanted):
            raise _fail(f"the server has not executed all of {text} (gtid_executed is {executed})")
        if purged and not wanted.contains(GtidSet.parse(purged)):
            raise _fail(
                f"{text} misses transactions whose binlogs the server purged (gtid_purged is {purged})"
            )
    canonical = str(wanted)
    for _ in range(_PROBE_TRIES):
        found = _first_after(settings, canonical)
        if found is not None:
            return found[0], found[1], canonical
        # Nothing after the set: it is the server's end, unless a write raced the probe.
        file, pos, _ = current_position(cur)
        if GtidSet.parse(_gtids_at(cur, file, pos, mariadb)).contains(wanted) and wanted.contains(
            GtidSet.parse(_gtids_at(cur, file, pos, mariadb))
        ):
            return file, pos, canonical
    raise _fail(f"could not find where {text} ends in the binlog (the server kept writing); send it again")


def _first_after(settings: ConnectionSettings, gtids: str) -> tuple[str, int] | None:
    """(file, pos) of the first transaction after `gtids`, from a non-blocking dump the server
    starts at that GTID set; None when there is none yet."""
    stream = BinlogStream(
        settings,
        random.randint(1 << 20, 1 << 30),
        lambda _db, _t: None,
        gtid_set=gtids,
        blocking=False,
        heartbeat_s=0,
    )
    try:
        for ev in stream.events():
            if ev.kind == "gtid":
                return ev.file, ev.pos
        return None
    except TidemarkError as e:
        raise _fail(f"the server cannot stream from {gtids}: {e}") from None
    finally:
        stream.close()


# --------------------------------------------------------------------------- the live source
class LiveSource:
    """The engine's current MySqlSource (the wiring sets it each time the engine makes one)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._source: MySqlSource | None = None

    def set(self, source: MySqlSource) -> None:
        with self._cond:
            self._source = source
            self._cond.notify_all()

    def get(self) -> MySqlSource | None:
        return self._source

    def wait_streaming(self, timeout: float) -> MySqlSource | None:
        """The current source once it streams (opened), or None after `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            src = self._source
            if src is not None and src.streaming:
                return src
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            with self._cond:
                self._cond.wait(min(left, 0.2))


class SetBinlogPositionHandler:
    """The set-binlog-position action. `stored` gives the offset of the newest batch every sink
    holds (the engine's); the handler returns once the new offset is among them."""

    def __init__(
        self,
        settings: ConnectionSettings,
        live: LiveSource,
        stored: Callable[[], Mapping[str, Any] | None],
        *,
        timeout: float = 300.0,
    ) -> None:
        self.settings, self.live, self.stored, self.timeout = settings, live, stored, timeout

    def handle(self, request: Request, signal: SignalRecord) -> str | None:
        assert isinstance(request, SetBinlogPosition)
        src = self.live.wait_streaming(self.timeout)
        if src is None:
            raise _fail(f"the connector did not stream within {self.timeout:.0f}s; nothing was changed")
        if src.repositioned_by == signal.key:
            return "the position was set before a restart (found in the stored offset); not set again"
        offset = resolve(self.settings, request)
        where = f"{offset['file']}:{offset['pos']}" + (
            f" (GTIDs {offset['gtids']})" if offset["gtids"] else ""
        )
        log.info("set-binlog-position '%s': moving the stream to %s", signal.id, where)
        done = f"the stream continues from {where}"
        while True:
            ticket = src.reposition(offset, signal.key)
            outcome = self._await(src, ticket, signal.key)
            if outcome == "stored":
                return done
            if outcome == "timeout":
                raise _fail(f"the stream did not reach a point to move at within {self.timeout:.0f}s")
            # The source was replaced (a reconnect): the new one resumed from the stored offset,
            # which has the new position only if the move was stored.
            nxt = self.live.wait_streaming(self.timeout)
            if nxt is None:
                raise _fail("the connector stopped streaming before the position was set")
            src = nxt
            if src.repositioned_by == signal.key:
                return done

    def _await(self, src: MySqlSource, ticket: RepositionTicket, key: str) -> str:
        """ "stored" once the new offset is stored, "replaced" when the source was replaced,
        "timeout" when the source never took the ticket (then withdrawn)."""
        deadline = time.monotonic() + self.timeout
        while True:
            current = self.stored()
            if current is not None and current.get(MARK) == key:
                return "stored"
            if self.live.get() is not src:
                src.cancel_reposition(ticket)
                return "replaced"
            if time.monotonic() > deadline and src.cancel_reposition(ticket):
                return "timeout"  # taken tickets are waited for: the move is under way
            time.sleep(0.05)


def register(cfg: Any, handlers: Any, stored: Callable[[], Mapping[str, Any] | None]) -> LiveSource:
    """Register the set-binlog-position action for a MySQL/MariaDB connector; returns the holder
    the engine's source factory must fill."""
    from connectors.signals.model import SET_BINLOG_POSITION
    from connectors.sources.mysql.setup import connection_settings

    live = LiveSource()
    handlers.register(
        SET_BINLOG_POSITION, SetBinlogPositionHandler(connection_settings(cfg.source), live, stored)
    )
    return live
