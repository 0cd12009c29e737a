"""The engine loop: source batches → every sink durable → offset stored → source acknowledged.

Exactly-once into Delta and at-least-once into Kafka/jsonl come from the ordering here:
a batch is acknowledged to the source (PostgreSQL flush LSN) only after every sink holds it,
and on restart the engine resumes from the oldest durable position among the sinks, skipping
for each sink the records it already holds (by the records' total-order `pos`).
"""

from __future__ import annotations

import gc
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from connectors.api import Batch, OffsetStore, Sink, Source, TerminalError, TransientError
from connectors.engine.flusher import OffsetFlusher
from connectors.engine.metrics import Metrics

if TYPE_CHECKING:
    from connectors.signals.processor import SignalProcessor
    from connectors.snapshot.blocking import BlockingSnapshots
    from connectors.snapshot.incremental import IncrementalSnapshots

log = logging.getLogger(__name__)

SETTLE_WITHIN_S = 0.5  # a batch held unsettled longer makes an idle source yield its position

# A batch handed to the sinks' thread: its write, which gives the future of its deferred
# durability step (or None when the write made it durable).
Written = Future["Future[None] | None"]


@dataclass
class RunStats:
    batches: int = 0
    records: int = 0
    connections: int = 0  # successful source opens (1 + reconnects): >0 means changes are being captured
    started: float = field(default_factory=time.monotonic)
    last_offset: dict[str, Any] | None = None

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started


def tune_gc() -> None:
    """Make the cyclic garbage collector cheap for a streaming loop.

    A batch keeps tens of thousands of event dicts alive for a moment; with CPython's default
    thresholds (700 allocations) the collector runs constantly and its older generations walk
    every live event each time: measured ~30 % of a catch-up run's CPU. Events are freed by
    reference counting (they hold no cycles), so: freeze what start-up allocated (modules,
    config, schemas) out of the collector's sight and collect young objects 100x less often.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


class Engine:
    def __init__(
        self,
        source_factory: Callable[[], Source],
        sinks: list[Sink],
        offsets: OffsetStore,
        *,
        offset_key: Callable[[dict[str, Any]], tuple],
        max_retries: int = -1,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        commit_max_events: int = 4096,
        offsets_flush_s: float = 1.0,
        metrics: Metrics | None = None,
        signals: SignalProcessor | None = None,
        incremental: IncrementalSnapshots | None = None,
        blocking: BlockingSnapshots | None = None,
    ) -> None:
        self._source_factory = source_factory
        self.sinks = sinks
        self.offsets = offsets
        self.offset_key = offset_key
        self.max_retries = max_retries
        self.backoff_initial, self.backoff_max = backoff_initial, backoff_max
        self.metrics = metrics or Metrics()
        self.commit_max_events = commit_max_events
        self.offsets_flush_s = offsets_flush_s
        # Sinks that keep their own offsets in the same commit as the data (Delta) need no
        # offset-table save; the table is written only when another sink depends on it.
        self._needs_store = not all(getattr(s, "keeps_offsets", False) for s in sinks)
        # Sinks that keep their own offset (Delta) are written after the others: whatever batch
        # a self-offsetting sink holds, every sink holds, so the newest stored offset is one
        # that all sinks have (what the incremental snapshot's restore relies on).
        self._write_order = sorted(
            range(len(sinks)), key=lambda i: bool(getattr(sinks[i], "keeps_offsets", False))
        )
        self._source: Source | None = None
        self._written: deque[tuple[Batch, Written, float]] = deque()  # (`_run_once`)
        self._syncer: ThreadPoolExecutor | None = None  # (`_run_once`: runs deferred sync steps)
        self._failed = False  # a batch's write failed in this `_run_once`: none after it is written
        self._stopping = False
        self.stats = RunStats()
        # Signals: the processor polls its channels on its own thread; the engine hands it each
        # batch (for the signal table's inserts) before the batch is written.
        self.signals = signals
        if signals is not None:
            signals.current_offset = lambda: self.stats.last_offset
        # Incremental snapshots: the engine emits each chunk at its close watermark
        # (snapshot/incremental.py); a chunk reader thread of its own reads them.
        self.incremental = incremental
        # Blocking snapshots: a request closes the source after the batch in hand; the snapshot
        # runs between two `_run_once` (snapshot/blocking.py), then streaming resumes.
        self.blocking = blocking
        self._paused = False
        if blocking is not None:
            blocking.pause_stream = self._pause_for_snapshot

    # ------------------------------------------------------------------ resume point
    def _durable(
        self, quiet: bool = False
    ) -> tuple[int, dict[str, Any] | None, dict[int, tuple], dict[str, Any] | None]:
        """(next batch seq, resume offset, per-sink skip keys, the newest offset any sink holds);
        `quiet`: without the log line per sink that is ahead (a caller that only looks)."""
        stored = self.offsets.load()
        reset_seq = -1
        # A seq taken by something that is not a batch (a snapshot's rows in the Delta change log:
        # `wiring.reserve_seq`) counts even when the stored offset is no resume candidate.
        floor_seq = stored[0] if stored is not None else 0
        if stored is not None and stored[1].get("reset"):
            # `tidemark offsets reset` left a marker: everything stored before it is forgotten.
            reset_seq, stored = stored[0], None
        elif stored is not None and stored[1].get("seq_only"):
            stored = None  # a reserved seq, no offset
        cands: list[tuple[int, dict[str, Any]]] = []
        per_sink: dict[int, tuple[int, dict[str, Any]] | None] = {}
        self_offsetting = []
        for i, s in enumerate(self.sinks):
            own = s.last_offset()
            if own is not None and own[0] <= reset_seq:
                own = None
            per_sink[i] = own
            if own is not None:
                self_offsetting.append(i)
        needs_store = any(per_sink[i] is None for i in range(len(self.sinks)))
        if stored is not None and (needs_store or not self_offsetting):
            cands.append(stored)
        cands.extend(v for v in per_sink.values() if v is not None)
        max_seq = max([c[0] for c in cands] + [reset_seq, floor_seq, 0])
        if not cands:
            return max_seq + 1, None, {}, None
        start = min(cands, key=lambda c: self.offset_key(c[1]))[1]
        newest = max(cands, key=lambda c: self.offset_key(c[1]))[1]
        start_key = self.offset_key(start)
        skips = {}
        for i, own in per_sink.items():
            if own is not None and self.offset_key(own[1]) > start_key:
                skips[i] = self.offset_key(own[1])
                if quiet:
                    continue
                log.info(
                    "sink %s already holds changes up to %s; skipping them on replay",
                    self.sinks[i].name,
                    _strip(own[1]),
                )
        return max_seq + 1, start, skips, newest

    def resume_point(self) -> tuple[int, dict[str, Any] | None]:
        """(the seq the next run gives its first batch, the offset it resumes from: None when
        nothing is stored, or it was reset)."""
        seq, offset, _, _ = self._durable()
        return seq, offset

    # ------------------------------------------------------------------ run
    def stop(self) -> None:
        """Ask the loop to finish the current batch and return (signal-handler safe)."""
        self._stopping = True
        if self._source is not None:
            self._source.stop()
        if self.blocking is not None:
            self.blocking.stop()

    def _pause_for_snapshot(self) -> None:
        """End the current `_run_once` after the batch in hand (a blocking snapshot is due)."""
        self._paused = True
        source = self._source
        if source is not None:
            source.stop()

    def run(self) -> RunStats:
        tune_gc()
        if self.signals is None:
            return self._run_with_retries()
        if self.incremental is not None:
            self.incremental.start()
        self.signals.start()
        try:
            return self._run_with_retries()
        finally:
            self.signals.stop()
            if self.incremental is not None:
                self.incremental.close()

    def _run_with_retries(self) -> RunStats:
        attempt = 0
        while True:
            batches = self.stats.batches
            self._opened_at: float | None = None
            try:
                if self.blocking is not None and not self._stopping:
                    self._paused = False
                    # Between two runs of the source: its stored offset is the pause position.
                    self.blocking.run_pending(lambda: self._durable()[0])
                if self._stopping:
                    return self.stats
                self._run_once()
                if self._paused and not self._stopping:
                    continue  # a blocking snapshot was requested: run it, then stream again
                return self.stats
            except TransientError as e:
                if self._recovered(batches):
                    attempt = 0  # a new outage after a working connection counts from 1 again
                attempt += 1
                if self._stopping or (0 <= self.max_retries < attempt):
                    raise
                delay = min(self.backoff_max, self.backoff_initial * 2 ** (attempt - 1))
                log.warning("%s — retrying in %.1fs (attempt %d)", e, delay, attempt)
                self.metrics.disconnects.inc()
                deadline = time.monotonic() + delay
                while time.monotonic() < deadline and not self._stopping:
                    time.sleep(min(0.1, delay))
                if self._stopping:
                    return self.stats

    def _recovered(self, batches_before: int) -> bool:
        """Whether the attempt that just failed had a working connection: it delivered a batch,
        or stayed connected longer than the longest backoff (an idle stream delivers none)."""
        opened = self._opened_at
        return opened is not None and (
            self.stats.batches > batches_before or time.monotonic() - opened >= self.backoff_max
        )

    def _run_once(self) -> None:
        """Stream until the source ends or stops. While catching up (the source marks a batch
        `extra["more"]`: more is already waiting) this is pipelined one batch deep: the sinks
        write batch k on a worker thread while this thread decodes batch k+1 (Kafka's flush
        wait, the jsonl fsync and the Rust parts of a Delta commit overlap with decoding), and
        two deep while an incremental snapshot emits chunks (`_depth`). Batch k is stored and
        acknowledged only after its write has returned, in order; at most three batches are in
        memory. Other batches are settled as soon as they are written. Two deep, a sink that
        writes in two steps (`StagedSink`: jsonl's write, then its fsync) has batch k's second
        step run on a thread of its own while batch k+1 is written."""
        seq, start, skips, newest = self._durable()
        # The incremental snapshot's state rides in the offsets; the source never sees it. It is
        # taken from the newest offset a sink holds: every sink holds that batch (`_deliver`
        # writes the self-offsetting sinks last), and a snapshot signal whose effect one sink
        # stored before a crash is then known as applied when the journal hands it over again.
        start = (
            self.incremental.restore(start, newest, self.offset_key)
            if self.incremental is not None
            else _strip(start)
        )
        incremental = self.incremental
        source = self._source_factory()
        self._source = source
        self._ack_due: dict[str, Any] | None = None
        # Offsets go to the offset table on the flusher's thread (never stalling the stream) when
        # a sink needs the table; a source whose acknowledge() is thread-safe is acknowledged
        # from there too, so an idle stream still confirms its last batch (PostgreSQL: the slot
        # moves on and a fast shutdown of the server is not held up).
        ack: Callable[[dict[str, Any]], None] = (
            source.acknowledge if getattr(source, "acknowledge_thread_safe", False) else self._defer_ack
        )
        if incremental is not None:
            incremental.needs_store = self._needs_store
            ack = incremental.when_stored(ack)
        flusher = (
            OffsetFlusher(self.offsets, self.offsets_flush_s, ack, on_error=source.stop)
            if self._needs_store
            else None
        )
        self._flusher = flusher
        # Batches handed to the sinks' thread and not settled yet, oldest first (one at a time
        # but while an incremental snapshot runs: see `_depth`)
        written: deque[tuple[Batch, Written, float]] = deque()
        self._written = written
        pool = ThreadPoolExecutor(1, thread_name_prefix="tidemark-sinks")
        self._syncer = ThreadPoolExecutor(1, thread_name_prefix="tidemark-sync")
        self._failed = False
        clean = False
        try:
            source.open(start)
            self._opened_at = time.monotonic()
            self.stats.connections += 1
            self.metrics.connected.set(1)
            self._idle_settles(source)
            if self._stopping or self._paused:
                source.stop()
            try:
                for batch in self._coalesced(source.batches()):
                    batch.seq = seq
                    seq += 1
                    if incremental is not None and incremental.active:
                        incremental.process(batch)
                    depth = self._depth()
                    while written and (len(written) >= depth or _landed(written[0][1])):
                        self._settle(source, *written.popleft()[:2])
                    fut = pool.submit(self._deliver, batch, skips, depth > 1)
                    written.append((batch, fut, time.monotonic()))
                    if not batch.extra.get("more") and (depth == 1 or not batch.records):
                        # The source had nothing more waiting: settle now rather than when the
                        # next change arrives (an idle stream must not hold an unconfirmed batch).
                        while written:
                            self._settle(source, *written.popleft()[:2])
            except BaseException:
                # The source failed (or the process is being stopped) with writes in flight:
                # let them finish first, so a retry never runs two writers on the same sinks, and
                # keep the offsets of those that landed, in order (nothing re-sent needlessly).
                while written:
                    batch, fut, _ = written.popleft()
                    if self._failed or _failure(fut) is not None:
                        written.clear()
                        break
                    self._settle(source, batch, fut)
                raise
            while written:
                self._settle(source, *written.popleft()[:2])
            clean = True
        finally:
            pool.shutdown(wait=True)
            self._syncer.shutdown(wait=True)
            try:
                if flusher is not None:
                    # Store and confirm what the sinks already hold (also after a source error:
                    # fewer records replayed); a save that fails now fails a clean stop only.
                    try:
                        flusher.close(flush=True)
                    except Exception as e:
                        if clean:
                            raise
                        log.warning("storing the last offset: %s", e)
                if self._ack_due is not None:
                    source.acknowledge(self._ack_due)
                    self._ack_due = None
            finally:
                self.metrics.connected.set(0)
                self._source = None
                self._flusher = None
                try:
                    source.close()
                except Exception as e:  # closing must not mask the original error
                    log.warning("closing source: %s", e)

    def _depth(self) -> int:
        """Batches that may be at the sinks unsettled: two while an incremental snapshot emits
        chunks, so the engine takes the next close watermark (and lets the chunk reader read on)
        while the sinks write and fsync the chunk before it (the 2M-row incremental benchmark's
        alternating runs, bench/README: 51.9-67.1k rows/s one deep, 61.4-71.2k two deep). One
        otherwise: an idle stream's batch is confirmed at once."""
        inc = self.incremental
        p = inc.progress if inc is not None else None
        return 2 if p is not None and not p.paused else 1

    def _idle_settles(self, source: Source) -> None:
        """Make a source that can yield a position-only batch when asked (`wants_position`) do
        so when a batch has waited unsettled for SETTLE_WITHIN_S: a batch held back while an
        incremental snapshot runs is settled by the next one, and this bounds its wait when the
        stream goes quiet (a paused snapshot on an idle database)."""
        if not hasattr(source, "wants_position"):
            return
        inner = source.wants_position

        def wants_position() -> bool:
            written = self._written
            if written and time.monotonic() - written[0][2] >= SETTLE_WITHIN_S:
                return True
            return inner is not None and inner()

        source.wants_position = wants_position

    def _defer_ack(self, offset: dict[str, Any]) -> None:
        """Flusher callback for a source that must be acknowledged on the engine's own thread:
        the offset is stored; `_settle` (or the end of the run) acknowledges it."""
        self._ack_due = offset

    def _settle(self, source: Source, batch: Batch, fut: Written) -> None:
        """Wait until every sink holds `batch` (re-raising a sink's error), then acknowledge it
        to the source — after the offset flusher stored it, when an offset table is needed."""
        try:
            synced = fut.result()
            if synced is not None:
                synced.result()
        except BaseException:
            self._failed = True  # the batches after it are not settled (`_run_once`)
            raise
        if self.incremental is not None:
            self.incremental.settled(batch)
        due, self._ack_due = self._ack_due, None
        if due is not None:
            source.acknowledge(due)
        if self._flusher is None:
            source.acknowledge(batch.offset)
        else:
            self._flusher.offer(batch.seq, batch.offset)
        self.stats.batches += 1
        self.stats.records += len(batch.records)
        self.stats.last_offset = batch.offset
        self.metrics.observe_batch(batch)

    def _coalesced(self, batches: Iterator[Batch]) -> Iterator[Batch]:
        """Merge consecutive batches the source cut for size (`extra["more"]`: more is already
        waiting) into one sink commit of up to `commit_max_events` records: fewer, larger Delta
        commits and Kafka flushes while catching up; memory stays bounded by that size."""
        held: Batch | None = None
        since = 0.0
        for b in batches:
            if held is None:
                if not b.records:
                    # Position-only batch (MySQL's start position, a skipped schema change, the
                    # final offset): delivered as is, so every sink's stored offset moves on.
                    yield b
                    continue
                held, since = b, time.monotonic()
            else:
                held.records.extend(b.records)
                held.offset = b.offset
                for k, v in b.extra.items():
                    held.extra[k] = held.extra.get(k, 0) + v if k in ("transactions", "filtered") else v
                # The newest piece decides: a piece that does not say "more" means nothing is waiting.
                held.extra["more"] = bool(b.extra.get("more"))
            if (
                not held.extra.get("more")
                or len(held.records) >= self.commit_max_events
                or self._stopping
                or time.monotonic() - since >= 1.0
            ):
                yield held
                held = None
        if held is not None:
            yield held

    def _deliver(self, batch: Batch, skips: dict[int, tuple], defer: bool) -> Future[None] | None:
        """Write `batch` to every sink in `_write_order`. The durability steps of sinks that
        write in two steps (`StagedSink`) are run before any self-offsetting sink is written
        (what it holds, every sink holds, also after a power loss) and otherwise, when `defer`,
        handed to the syncer thread: the future returned is that step's."""
        if self._failed:
            # A write before this one failed: writing this batch would put it into a sink that
            # keeps its own offset (Delta) past the missing one, and a restart would skip both.
            raise TransientError("not written: the batch before it failed")
        try:
            return self._write(batch, skips, defer)
        except BaseException:
            self._failed = True
            raise

    def _write(self, batch: Batch, skips: dict[int, tuple], defer: bool) -> Future[None] | None:
        if self.signals is not None:
            self.signals.accept_source(batch)
        steps: list[Callable[[], None]] = []
        for i in self._write_order:
            sink = self.sinks[i]
            part = self._part_for(i, batch, skips)
            if part is None:
                continue
            if steps and getattr(sink, "keeps_offsets", False):
                _run_all(steps)
                steps = []
            stage = getattr(sink, "stage", None)
            if stage is None:
                sink.write(part)
            elif (step := stage(part)) is not None:
                steps.append(step)
        if not steps:
            return None
        if not defer or self._syncer is None:
            _run_all(steps)
            return None
        return self._syncer.submit(self._run_deferred, steps)

    def _run_deferred(self, steps: list[Callable[[], None]]) -> None:
        try:
            _run_all(steps)
        except BaseException:
            self._failed = True
            raise

    def _part_for(self, i: int, batch: Batch, skips: dict[int, tuple]) -> Batch | None:
        """What of `batch` sink `i` is to write: all of it, or (on a replay) the records after
        the ones it already holds; None when it holds them all."""
        skip = skips.get(i)
        if skip is None:
            return batch
        kept = [r for r in batch.records if r.pos is None or r.pos > skip]
        if batch.records and batch.records[-1].pos is not None and batch.records[-1].pos > skip:
            del skips[i]
        if len(kept) != len(batch.records):
            log.info(
                "sink %s: skipped %d records it already holds",
                self.sinks[i].name,
                len(batch.records) - len(kept),
            )
        return Batch(kept, batch.offset, batch.seq, batch.extra) if kept else None


def _run_all(steps: list[Callable[[], None]]) -> None:
    for step in steps:
        step()


def _landed(fut: Written) -> bool:
    """The batch's write, and its deferred step if any, have finished (or failed)."""
    if not fut.done():
        return False
    if fut.exception() is not None:
        return True
    synced = fut.result()
    return synced is None or synced.done()


def _failure(fut: Written) -> BaseException | None:
    """Wait for the batch's write and deferred step; the error of either, or None."""
    e = fut.exception()
    if e is None and (synced := fut.result()) is not None:
        e = synced.exception()
    return e


def _strip(offset: dict[str, Any] | None) -> dict[str, Any] | None:
    from connectors.snapshot.incremental import strip

    return strip(offset)


def close_all(sinks: list[Sink]) -> None:
    for s in sinks:
        try:
            s.close()
        except Exception as e:
            log.warning("closing sink %s: %s", s.name, e)


__all__ = ["Engine", "RunStats", "close_all", "TerminalError"]
