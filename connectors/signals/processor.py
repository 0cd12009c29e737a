"""The signal processor: channels → journal → checked request → handler → journal, on a thread
of its own.

Polled channels are read every `signal.poll.interval.ms` on the processor's thread, so a slow
broker or object store never holds up a batch, and an idle stream (the engine waiting in the
source) still takes signals. The source channel is fed by the engine (`accept_source`, on its
writer thread, before the batch is written): the signal is journaled before its batch can be
acknowledged, then the processor thread is woken to act on it.

What a signal does is up to the handler registered for its type (`Handlers`). Built in: `log`
logs its message (Debezium's Log action: the first `{}` becomes the current offset). The
snapshot and repositioning signals are checked, journaled and refused with an error
notification saying they are not available yet, unless real handlers are registered
(`Handlers.register`): the engine's wiring registers the incremental snapshot's
(`snapshot/incremental.py`: execute-snapshot, stop-, pause-, resume-snapshot) and, for MySQL/MariaDB,
set-binlog-position (`signals/binlog_position.py`), and the blocking snapshot's
(`snapshot/blocking.py`: execute-snapshot with type blocking).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import orjson

from connectors.api import Batch
from connectors.settings.config import ConnectorConfig
from connectors.signals.channels import (
    DeltaSignalChannel,
    FileSignalChannel,
    KafkaSignalChannel,
    PolledChannel,
    SourceChannel,
)
from connectors.signals.journal import Journal
from connectors.signals.model import (
    EXECUTE_SNAPSHOT,
    LOG,
    PAUSE_SNAPSHOT,
    RESUME_SNAPSHOT,
    SET_BINLOG_POSITION,
    STOP_SNAPSHOT,
    LogMessage,
    Request,
    SignalError,
    SignalRecord,
    TableInfo,
    describe,
    parse,
)
from connectors.signals.notify import Notifier
from connectors.signals.settings import SignalSettings, signal_settings

log = logging.getLogger(__name__)
action_log = logging.getLogger("connectors.signals.actions.log")


class SignalHandler(Protocol):
    """Carries out one kind of signal. `handle` returns a note for the journal (or None) and
    raises `SignalError` to refuse the signal (an error notification says why). It runs on the
    processor thread. After a crash between its return and the journal's `processed` commit it
    is called again with the same `signal.key`: a handler that keeps state must recognise it."""

    def handle(self, request: Request, signal: SignalRecord) -> str | None: ...


class Handlers:
    """Signal type → handler."""

    def __init__(self) -> None:
        self._by_type: dict[str, SignalHandler] = {}

    def register(self, kind: str, handler: SignalHandler) -> None:
        self._by_type[kind] = handler

    def get(self, kind: str) -> SignalHandler | None:
        return self._by_type.get(kind)


class LogHandler:
    def __init__(self, current_offset: Callable[[], Mapping[str, Any] | None]) -> None:
        self.current_offset = current_offset

    def handle(self, request: Request, signal: SignalRecord) -> str | None:
        assert isinstance(request, LogMessage)
        offset = signal.offset if signal.offset is not None else self.current_offset()
        text = request.message.replace("{}", orjson.dumps(offset).decode(), 1)
        action_log.info("%s", text)
        return None


class NotAvailable:
    """The honest answer until the snapshot work registers its handlers."""

    def __init__(self, what: str) -> None:
        self.what = what

    def handle(self, request: Request, signal: SignalRecord) -> str | None:
        raise SignalError(
            f"{describe(request)}: {self.what} not available in Tidemark yet "
            "(the signal was checked and recorded; nothing was run)"
        )


def default_handlers(current_offset: Callable[[], Mapping[str, Any] | None]) -> Handlers:
    h = Handlers()
    h.register(LOG, LogHandler(current_offset))
    snapshots = NotAvailable("ad hoc snapshots are")
    for kind in (EXECUTE_SNAPSHOT, STOP_SNAPSHOT, PAUSE_SNAPSHOT, RESUME_SNAPSHOT):
        h.register(kind, snapshots)
    h.register(SET_BINLOG_POSITION, NotAvailable("repositioning the binlog with a signal is"))
    return h


class SignalProcessor:
    def __init__(
        self,
        cfg: ConnectorConfig,
        settings: SignalSettings,
        notifier: Notifier,
        *,
        handlers: Handlers | None = None,
        tables: Callable[[], TableInfo] | None = None,
    ) -> None:
        self.cfg = cfg
        self.settings = settings
        self.notifier = notifier
        self.current_offset: Callable[[], Mapping[str, Any] | None] = lambda: None
        self.handlers = handlers or default_handlers(lambda: self.current_offset())
        self.tables = tables
        self.journal = Journal(cfg.warehouse, cfg.name)
        self.source = (
            SourceChannel(settings.data_collection)
            if "source" in settings.channels and settings.data_collection
            else None
        )
        self._polled: list[PolledChannel] = []
        self._queue: deque[SignalRecord] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.processed = 0  # signals acted on (or refused) by this process

    @classmethod
    def from_config(cls, cfg: ConnectorConfig, notifier: Notifier | None = None) -> SignalProcessor | None:
        """The processor of a configuration, or None when no channel is enabled."""
        settings = signal_settings(cfg)
        if not settings.enabled:
            return None
        from connectors.signals.catalog import TableCatalog

        catalog = TableCatalog(cfg)
        return cls(cfg, settings, notifier or Notifier.from_config(cfg), tables=catalog.info)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Read the journal (signals left pending are processed first), open the polled
        channels and start the thread. Idempotent."""
        if self._thread is not None:
            return
        pending = self.journal.load()
        with self._lock:
            self._queue.extend(pending)
        s = self.settings
        for name in s.channels:
            if name == "delta":
                self._polled.append(DeltaSignalChannel(self.cfg.warehouse, self.cfg.name, self.journal))
            elif name == "file":
                self._polled.append(FileSignalChannel(s.file))
            elif name == "kafka":
                self._polled.append(KafkaSignalChannel(s, self.cfg.topic_prefix, self.journal))
        log.info(
            "signals: channels %s, every %d ms%s",
            ", ".join(s.channels),
            int(s.poll_interval_s * 1000),
            f" (signal table {s.data_collection})" if self.source else "",
        )
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="tidemark-signals", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the signal in hand, close the channels and the notifier."""
        thread, self._thread = self._thread, None
        self._stop.set()
        self._wake.set()
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                log.warning("signals: the processor did not stop within %.0fs", timeout)
        for ch in self._polled:
            ch.close()
        self._polled = []
        self.notifier.close()

    # ------------------------------------------------------------------ the source channel
    def accept_source(self, batch: Batch) -> None:
        """Journal the signal-table inserts of `batch` (before the batch is written, so before it
        can be acknowledged) and wake the processor. Raises a storage error when the journal
        cannot be written: the batch then fails, and is retried, like any sink failure."""
        if self.source is None:
            return
        found = self.source.signals(batch)
        if not found:
            return
        fresh = self.journal.receive(found)
        if fresh:
            with self._lock:
                self._queue.extend(fresh)
            self._wake.set()

    # ------------------------------------------------------------------ the thread
    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll_once()
            self._wake.wait(self.settings.poll_interval_s)
            self._wake.clear()

    def poll_once(self) -> None:
        """Read every polled channel once, then act on everything queued."""
        for ch in self._polled:
            if self._stop.is_set():
                break
            try:
                fresh = self.journal.receive(ch.poll())
                ch.taken()
            except Exception as e:  # noqa: BLE001 - a channel fault must not stop the stream
                log.warning("signals: reading the %s channel: %s", ch.name, e)
                continue
            with self._lock:
                self._queue.extend(fresh)
        while not self._stop.is_set():
            with self._lock:
                if not self._queue:
                    return
                rec = self._queue[0]
            try:
                self._process(rec)
            except Exception as e:  # noqa: BLE001 - the journal could not be written: retry later
                log.warning("signals: recording signal '%s' as processed: %s; retrying", rec.id, e)
                return
            with self._lock:
                self._queue.popleft()

    def _process(self, rec: SignalRecord) -> None:
        outcome, note = "ok", None
        try:
            info = self.tables() if self.tables is not None and rec.type == EXECUTE_SNAPSHOT else None
            request = parse(rec, self.cfg.connector, info)
            handler = self.handlers.get(rec.type)
            if handler is None:
                raise SignalError(f"no action is registered for signal type {rec.type!r}")
            log.info("signal '%s' (%s, %s channel): %s", rec.id, rec.type, rec.channel, describe(request))
            note = handler.handle(request, rec)
        except Exception as e:  # noqa: BLE001 - a bad signal is reported, streaming goes on
            outcome = "error"
            note = str(e) if isinstance(e, SignalError) else f"failed: {type(e).__name__}: {e}"
            log.warning(
                "signal '%s' (type %r, %s channel) not carried out: %s", rec.id, rec.type, rec.channel, note
            )
            self.notifier.signals.error(rec.id, rec.type, rec.channel, note)
        self.journal.processed(rec, outcome, note)
        self.processed += 1
