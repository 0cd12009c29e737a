"""The logical replication stream: raw pgoutput payloads in, flush feedback out.

`ReplicationStream` wraps a psycopg2 `LogicalReplicationConnection`. It yields
`(data_start_lsn, payload_bytes)` pairs; decoding is `pgoutput.decode`'s job.

Feedback rule: the server is never told a flush LSN beyond what the caller confirmed with
`send_feedback`. psycopg2 2.9 breaks that rule on its own: when a keepalive arrives and the
caller has confirmed an LSN >= the data_start of the last message read, it silently forwards
its flush LSN to the keepalive's wal_end (verified: an idle stream moved confirmed_flush_lsn
with no feedback call at all). The slot would then run ahead of the stored offsets, and a
restart could not tell "idle" from "changes lost". Two measures keep psycopg2 from doing it:

* the LSN handed to psycopg2 is capped at (data_start of the last message read) - 1. Confirming
  `end_lsn - 1` of a commit is as good as `end_lsn` for the server (it skips a transaction whose
  commit record starts before the confirmed LSN) and stays at or below what the caller confirmed;
* at open, a non-transactional logical message (prefix `tidemark.sync`, filtered out here) is
  written before START_REPLICATION, so a data message arrives before the walsender's first
  "caught up" keepalive (before any data message psycopg2 treats 0 >= 0 as "all confirmed").

Residual: a keepalive that arrives in the middle of a transaction whose Begin LSN is older than
the confirmed LSN can still trigger psycopg2's forward; psycopg2 then reports the start of that
transaction's commit record, which the server still re-sends after a restart (no data loss).
Likewise, once the caller confirms the keepalive position itself (idle, everything stored),
psycopg2 may forward to later keepalive positions until the next data message: only WAL with
nothing for this publication lies in between, so `setup.check_resume` treats a slot ahead of
the offsets as a warning unless `strict=True`.
"""

from __future__ import annotations

import logging
import select
import time
from collections.abc import Iterator, Mapping
from typing import Any

import psycopg2
import psycopg2.extras

from connectors.api import Lsn, TerminalError, TidemarkError
from connectors.postgres.setup import PgConnParams, connect, current_wal_lsn, translate_error

log = logging.getLogger(__name__)

__all__ = ["ReplicationStream", "SYNC_PREFIX"]

SYNC_PREFIX = "tidemark.sync"
_SYNC_MARK = SYNC_PREFIX.encode() + b"\x00"
_SYNC_AT = 10  # 'M' + flags(1) + lsn(8): where the prefix starts in a Message payload


class ReplicationStream:
    """One START_REPLICATION session on a logical slot (pgoutput, protocol 1, messages on).

    Usage::

        with ReplicationStream(params, "slot", "pub", start_lsn=stored) as s:
            for item in s.messages(timeout=1.0):
                if item is None: ...        # idle tick: heartbeats, stop flag
                else: lsn, payload = item
            s.send_feedback(lsn_made_durable)

    Errors are `TransientError` (connection dropped, server restarting, slot busy) or
    `TerminalError` (slot or publication missing, privileges).
    """

    def __init__(
        self,
        params: PgConnParams,
        slot_name: str,
        publication: str | list[str],
        *,
        start_lsn: int = 0,
        status_interval_ms: int = 10000,
        messages: bool = True,
        extra_options: Mapping[str, str] | None = None,
        sync_on_open: bool = True,
    ) -> None:
        self.params = params
        self.slot_name = slot_name
        self.publication = publication if isinstance(publication, str) else ",".join(publication)
        self.start_lsn = int(start_lsn or 0)
        self.status_interval = max(1.0, status_interval_ms / 1000.0)
        self.options: dict[str, str] = {"proto_version": "1", "publication_names": self.publication}
        if messages:
            self.options["messages"] = "true"
        if extra_options:
            self.options.update({k: str(v) for k, v in extra_options.items()})
        self.sync_on_open = sync_on_open
        self._conn: Any = None
        self._cur: Any = None
        self._aux: Any = None
        self._confirmed = 0  # highest LSN the caller confirmed
        self._reported = 0  # highest LSN handed to psycopg2 (what the server is told)
        self._last_data_start = 0  # mirrors psycopg2's last_msg_data_start
        self._last_feedback = 0.0

    # ------------------------------------------------------------------ lifecycle
    def open(self) -> None:
        """Connect and START_REPLICATION from `start_lsn` (0: the slot's confirmed_flush_lsn)."""
        if self._cur is not None:
            return
        if self.sync_on_open:
            self._emit_sync()
        self._conn = connect(self.params, replication=True, unreachable_is_transient=True)
        try:
            self._cur = self._conn.cursor()
            self._cur.start_replication(
                slot_name=self.slot_name,
                decode=False,
                start_lsn=self.start_lsn,
                options=self.options,
                status_interval=self.status_interval,
            )
        except psycopg2.Error as exc:
            err = self._start_error(exc)
            self.close()
            raise err from exc
        self._last_feedback = time.monotonic()
        log.info(
            "streaming slot %s (publication %s) from %s",
            self.slot_name,
            self.publication,
            Lsn(self.start_lsn) if self.start_lsn else "confirmed_flush_lsn",
        )

    def _start_error(self, exc: psycopg2.Error) -> TidemarkError:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if getattr(exc, "pgcode", None) == "42704" or ("replication slot" in text and "does not exist" in text):
            return TerminalError(
                f"replication slot {self.slot_name} does not exist on {self.params.address}: {text}",
                "let the connector create it at start-up (setup.ensure_slot) or create it with "
                f"SELECT pg_create_logical_replication_slot('{self.slot_name}', 'pgoutput')",
            )
        return translate_error(exc, f"starting replication on slot {self.slot_name}")

    def close(self) -> None:
        for obj in (self._cur, self._conn, self._aux):
            if obj is not None:
                try:
                    obj.close()
                except Exception:  # closing a dead connection must not mask the original error
                    pass
        self._cur = self._conn = self._aux = None

    def __enter__(self) -> ReplicationStream:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ reading
    def read_batch(self, max_messages: int = 5000, timeout: float = 1.0) -> list[tuple[int, bytes]]:
        """Drain up to `max_messages` available messages; wait at most `timeout` s if none is
        ready. An empty list means idle (caller: heartbeats, stop flag)."""
        cur = self._require()
        out: list[tuple[int, bytes]] = []
        append = out.append
        read = cur.read_message
        deadline = time.monotonic() + timeout
        try:
            while True:
                msg = read()
                while msg is not None:
                    ds = msg.data_start
                    payload = msg.payload
                    self._last_data_start = ds
                    if payload[0] != 77 or payload[_SYNC_AT : _SYNC_AT + len(_SYNC_MARK)] != _SYNC_MARK:
                        append((ds, payload))
                        if len(out) >= max_messages:
                            break
                    msg = read()
                if out:
                    break
                now = time.monotonic()
                if now >= deadline:
                    break
                self._maybe_feedback(now)
                # Wake up for data, or in time for the next status update.
                wait = min(deadline - now, max(0.0, self._last_feedback + self.status_interval - now))
                select.select([cur], [], [], max(wait, 0.001))
            self._maybe_feedback(time.monotonic())
        except psycopg2.Error as exc:
            raise translate_error(exc, f"reading replication slot {self.slot_name}") from exc
        except OSError as exc:  # select on a closed socket
            raise translate_error(
                psycopg2.OperationalError(str(exc)), f"reading replication slot {self.slot_name}"
            ) from exc
        return out

    def poll(self, timeout: float = 1.0) -> tuple[int, bytes] | None:
        """One message, or None after `timeout` seconds without one."""
        batch = self.read_batch(1, timeout)
        return batch[0] if batch else None

    def messages(self, timeout: float = 1.0, max_batch: int = 5000) -> Iterator[tuple[int, bytes] | None]:
        """Endless iterator of messages; yields None after each idle `timeout` so the caller can
        send heartbeats or stop (break out of the loop)."""
        while True:
            batch = self.read_batch(max_batch, timeout)
            if not batch:
                yield None
            else:
                yield from batch

    # ------------------------------------------------------------------ feedback
    def send_feedback(self, flush_lsn: int, *, force: bool = True) -> None:
        """Confirm that everything up to `flush_lsn` is durable downstream (write = flush =
        apply). `force=False` only records it; it then goes out with the next status update."""
        if flush_lsn > self._confirmed:
            self._confirmed = int(flush_lsn)
        self._push(force)

    def _reportable(self) -> int:
        # Stay below the last message's data_start (module docstring) — except when the caller
        # confirmed the server's keepalive position itself: it does that only when idle with
        # every received change stored, and it is what keeps an idle or filtered slot from
        # pinning WAL (Debezium confirms its last received LSN the same way).
        if self._cur is not None and self._confirmed >= self.wal_end > 0:
            return self._confirmed
        return min(self._confirmed, self._last_data_start - 1)

    def _push(self, force: bool) -> None:
        cur = self._require()
        value = self._reportable()
        try:
            if value > self._reported:
                self._reported = value
                cur.send_feedback(write_lsn=value, flush_lsn=value, apply_lsn=value, force=force)
                if force:
                    self._last_feedback = time.monotonic()
            elif force:
                cur.send_feedback(force=True)  # keep-alive with the unchanged LSNs
                self._last_feedback = time.monotonic()
        except psycopg2.Error as exc:
            raise translate_error(exc, f"sending feedback on slot {self.slot_name}") from exc

    def _maybe_feedback(self, now: float) -> None:
        # Re-send at least every status interval (psycopg2 also does inside read_message), and
        # release LSNs that were capped until a newer message arrived.
        if now - self._last_feedback >= self.status_interval or self._reportable() > self._reported:
            self._push(True)

    def request_status(self) -> None:
        """Ask the walsender for a keepalive now (updates `wal_end` without waiting)."""
        try:
            self._require().send_feedback(reply=True)
        except psycopg2.Error as exc:
            raise translate_error(exc, f"requesting status on slot {self.slot_name}") from exc

    # ------------------------------------------------------------------ information
    @property
    def confirmed_lsn(self) -> int:
        return self._confirmed

    @property
    def reported_lsn(self) -> int:
        """The flush LSN the server has been told (<= confirmed_lsn)."""
        return self._reported

    @property
    def wal_end(self) -> int:
        """Server WAL end as of the last message or keepalive (0 before any)."""
        return int(self._cur.wal_end) if self._cur is not None else 0

    def server_wal_lsn(self) -> int:
        """pg_current_wal_lsn() via a separate, ordinary connection."""
        try:
            return current_wal_lsn(self._aux_conn())
        except psycopg2.Error as exc:
            self._drop_aux()
            raise translate_error(exc, "reading pg_current_wal_lsn()") from exc

    def emit_message(self, prefix: str, content: bytes | str = b"", transactional: bool = True) -> int:
        """pg_logical_emit_message via the ordinary connection (e.g. heartbeats that let an
        idle slot advance). Returns the message LSN."""
        data = content.encode() if isinstance(content, str) else content
        try:
            with self._aux_conn().cursor() as c:
                c.execute(
                    "SELECT pg_logical_emit_message(%s, %s, %s::bytea)::text",
                    (transactional, prefix, psycopg2.Binary(data)),
                )
                return Lsn.parse(c.fetchone()[0]).value
        except psycopg2.Error as exc:
            self._drop_aux()
            raise translate_error(exc, "pg_logical_emit_message") from exc

    # ------------------------------------------------------------------ internals
    def _require(self) -> Any:
        if self._cur is None:
            raise TerminalError("replication stream is not open", "call open() first")
        return self._cur

    def _aux_conn(self) -> Any:
        if self._aux is None or self._aux.closed:
            self._aux = connect(self.params, unreachable_is_transient=True)
        return self._aux

    def _drop_aux(self) -> None:
        if self._aux is not None:
            try:
                self._aux.close()
            except Exception:
                pass
        self._aux = None

    def _emit_sync(self) -> None:
        try:
            with self._aux_conn().cursor() as c:
                # A message without a transaction id is not flushed at once (and the WAL writer
                # may be hibernating); the walsender only sends flushed WAL. txid_current() gives
                # the statement an xid, so its commit flushes the marker too.
                c.execute(
                    "SELECT pg_logical_emit_message(false, %s, ''::bytea)::text, txid_current()",
                    (SYNC_PREFIX,),
                )
                lsn = c.fetchone()[0]
                deadline = time.monotonic() + 5.0
                while time.monotonic() < deadline:
                    c.execute("SELECT pg_current_wal_flush_lsn() > %s::pg_lsn", (lsn,))
                    if c.fetchone()[0]:
                        return
                    time.sleep(0.02)
        except TidemarkError as exc:  # from connect()
            if exc.transient:
                raise
            log.warning("could not write the %s marker (%s); continuing without it", SYNC_PREFIX, exc)
        except psycopg2.Error as exc:
            err = translate_error(exc, f"writing the {SYNC_PREFIX} marker")
            self._drop_aux()
            if err.transient:
                raise err from exc
            # e.g. no privilege for pg_logical_emit_message: stream anyway, with the residual risk.
            log.warning("%s; continuing without it", err.message)
