"""The logical replication stream: raw pgoutput payloads in, flush feedback out.

`ReplicationStream` wraps a psycopg2 `LogicalReplicationConnection`. It yields
`(data_start_lsn, payload_bytes)` pairs; decoding is `pgoutput.decode`'s job.

Feedback. The server is told the flush LSN the caller confirmed with `send_feedback` (the end LSN
of the last transaction every sink holds). psycopg2 2.9 adds one rule of its own, inside
`read_message`: when a keepalive arrives and the confirmed LSN is >= the data_start of the last
message read (everything received so far is confirmed), it forwards the flush LSN to the
keepalive's wal_end. That is what this stream relies on, deliberately:

* the walsender of a server shutting down (`pg_ctl stop -m fast`, a restart) sends everything,
  then waits until the client reports exactly its last position; a client that never confirms
  the keepalive position holds the whole shutdown until it disconnects (issue 8 #1). pg_recvlogical
  and pgjdbc (Debezium) confirm it the same way;
* an idle slot, or one whose WAL is all filtered out, keeps moving and does not pin WAL.

It is safe: a keepalive's wal_end is the end of the last WAL record the walsender decoded, and
every change committed before it was sent (and read, and confirmed) before that keepalive; a
transaction still being decoded commits after it, so the server re-sends it after a restart.
The slot can therefore be ahead of the stored offsets only by WAL with nothing for this
publication (`slots.check_resume` logs that), never by a change.

Earlier versions capped the LSN below the last message's data_start to stop that forward, and
wrote a `tidemark.sync` logical message into the WAL at every start so that a data message came
before the first keepalive. Both are gone: the cap is what kept a fast shutdown waiting forever,
and the marker reached every other logical slot and failed on a read-only standby. Nothing is
written to the source now.

Threads: psycopg2/libpq must not be used from two threads at once, and the engine may
acknowledge from another thread. `send_feedback` therefore only records the LSN when called
from another thread; the reading thread sends it with its next read (at most `timeout` later,
at once while the walsender is pinging, as it does during a shutdown).

End of stream: after a shutdown the server ends the COPY and closes the connection; that is a
`TransientError` (the engine reconnects with backoff), never a terminal one.
"""

from __future__ import annotations

import logging
import select
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import psycopg2
import psycopg2.extras

from connectors.api import Lsn, TerminalError, TidemarkError, TransientError
from connectors.sources.postgres.connection import PgConnParams, connect, translate_error
from connectors.sources.postgres.slots import current_wal_lsn

log = logging.getLogger(__name__)

__all__ = ["ReplicationStream"]


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
        self._conn: Any = None
        self._cur: Any = None
        self._aux: Any = None
        self._reader = 0  # thread that opened the stream: the only one that talks to libpq
        self._confirmed = 0  # highest LSN the caller confirmed
        self._reported = 0  # highest LSN handed to psycopg2 (sent with the next status update)
        self._last_feedback = 0.0

    # ------------------------------------------------------------------ lifecycle
    def open(self) -> None:
        """Connect and START_REPLICATION from `start_lsn` (0: the slot's confirmed_flush_lsn)."""
        if self._cur is not None:
            return
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
        self._reader = threading.get_ident()
        self._last_feedback = time.monotonic()
        log.info(
            "streaming slot %s (publication %s) from %s",
            self.slot_name,
            self.publication,
            Lsn(self.start_lsn) if self.start_lsn else "confirmed_flush_lsn",
        )

    def _start_error(self, exc: psycopg2.Error) -> TidemarkError:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if getattr(exc, "pgcode", None) == "42704" or (
            "replication slot" in text and "does not exist" in text
        ):
            return TerminalError(
                f"replication slot {self.slot_name} does not exist on {self.params.address}: {text}",
                "let the connector create it at start-up (slots.ensure_slot) or create it with "
                f"SELECT pg_create_logical_replication_slot('{self.slot_name}', 'pgoutput')",
            )
        return translate_error(exc, f"starting replication on slot {self.slot_name}")

    def close(self) -> None:
        # A position confirmed from another thread (the engine's offset flusher) after the last
        # read has not gone out yet: send it before closing, so the slot is not left behind the
        # stored offset until the next start (when the connection is still usable).
        if (
            self._cur is not None
            and self._confirmed > self._reported
            and threading.get_ident() == self._reader
        ):
            try:
                self._push(True)
            except TidemarkError:
                pass  # the connection is gone: the next start confirms it
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
            # A confirmation recorded by another thread goes out before the next read, so the
            # keepalive that read may answer already sees it.
            self._maybe_feedback(time.monotonic())
            while True:
                msg = read()
                while msg is not None:
                    append((msg.data_start, msg.payload))
                    if len(out) >= max_messages:
                        break
                    msg = read()
                if out:
                    break
                now = time.monotonic()
                if now >= deadline:
                    break
                # Wake up for data, or in time for the next status update.
                wait = min(deadline - now, max(0.0, self._last_feedback + self.status_interval - now))
                select.select([cur], [], [], max(wait, 0.001))
                self._maybe_feedback(time.monotonic())
        except psycopg2.Error as exc:
            raise self._read_error(exc) from exc
        except (OSError, ValueError) as exc:  # select on a closed socket (fd -1 is a ValueError)
            raise self._read_error(psycopg2.OperationalError(str(exc))) from exc
        return out

    def _read_error(self, exc: psycopg2.Error) -> TidemarkError:
        if "no COPY in progress" in str(exc):
            # The walsender ended the COPY (CopyDone) after the server's shutdown handshake.
            return TransientError(
                f"the server ended the replication stream on slot {self.slot_name} "
                "(shutting down or restarting)",
                "the connection will be retried",
            )
        return translate_error(exc, f"reading replication slot {self.slot_name}")

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
        apply). From the reading thread it is sent at once (`force=False`: with the next status
        update); from any other thread it is recorded and sent by the reader's next read."""
        if flush_lsn > self._confirmed:
            self._confirmed = int(flush_lsn)
        if threading.get_ident() == self._reader:
            self._push(force)

    def _push(self, force: bool) -> None:
        cur = self._require()
        value = self._confirmed
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
        # send what was confirmed since the last push.
        if now - self._last_feedback >= self.status_interval or self._confirmed > self._reported:
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
        """The flush LSN handed to psycopg2 (<= confirmed_lsn; psycopg2 may report a keepalive
        position beyond it, see the module docstring)."""
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
