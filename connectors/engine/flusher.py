"""Offset-table saves off the stream's hot path.

A Delta commit of `_state/offsets` takes tens of milliseconds, and several hundred when delta-rs
writes a checkpoint; done inline it stalled every event behind it (commit→sink p99 538 ms at
1,000 txn/s). `OffsetFlusher` saves on its own thread instead: the engine offers each batch's
offset once every sink holds the batch, the flusher saves the newest offered one at most every
`interval` seconds, and only after that save acknowledges it to the source. So the stored offset
and the source's confirmed position never run ahead of what every sink holds, and the stream
never waits for the offset table.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from connectors.api import OffsetStore

log = logging.getLogger(__name__)

Offset = dict[str, Any]


class OffsetFlusher:
    """Saves the newest offered `(seq, offset)` at most every `interval` s on a daemon thread,
    then calls `acknowledge(offset)` from that thread. A failed save is kept and re-raised by the
    next `offer` or by `close`, on the caller's thread (the engine's retry loop handles it);
    `on_error` is called at once from the flusher's thread so that an idle stream, which offers
    nothing more, stops and gets to `close` (the engine asks its source to stop)."""

    def __init__(
        self,
        store: OffsetStore,
        interval: float,
        acknowledge: Callable[[Offset], None],
        on_error: Callable[[], None] = lambda: None,
    ) -> None:
        self._store = store
        self._interval = interval
        self._acknowledge = acknowledge
        self._on_error = on_error
        self._cond = threading.Condition()
        self._pending: tuple[int, Offset] | None = None
        self._error: BaseException | None = None
        self._closing = False
        self._last_save = 0.0  # monotonic time of the last save started (0: save the first at once)
        self._thread = threading.Thread(target=self._loop, name="tidemark-offsets", daemon=True)
        self._thread.start()

    def offer(self, seq: int, offset: Offset) -> None:
        """`offset` (batch `seq`) is durable in every sink: save it when the interval allows."""
        with self._cond:
            self._raise_error()
            self._pending = (seq, offset)
            self._cond.notify()

    def close(self, *, flush: bool) -> None:
        """Stop the thread; with `flush`, save and acknowledge what is still pending first
        (a clean stop). Re-raises a failed save."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()
        with self._cond:
            self._raise_error()
            item, self._pending = self._pending, None
        if flush and item is not None:
            self._save(*item)

    def _raise_error(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closing:
                    wait = self._last_save + self._interval - time.monotonic()
                    if self._pending is not None and wait <= 0:
                        break
                    self._cond.wait(wait if self._pending is not None else None)
                if self._closing:
                    return  # close() saves what is left on the caller's thread
                item, self._pending = self._pending, None
                self._last_save = time.monotonic()
            assert item is not None
            try:
                self._save(*item)
            except BaseException as e:  # handed to the engine's thread
                with self._cond:
                    self._error = e
                    self._pending = self._pending or item  # not saved: keep it for close(flush=True)
                self._on_error()
                return

    def _save(self, seq: int, offset: Offset) -> None:
        self._store.save(seq, offset)
        self._acknowledge(offset)
