"""Engine loop ordering: pipelined writes, offsets only after durability, errors, coalescing.

The engine is the unit under test; its collaborators are small in-memory implementations of
the `Source`/`Sink`/`OffsetStore` protocols that record the order of calls.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from connectors.api import Batch, Record, TransientError
from connectors.engine.loop import Engine


def rec(i: int) -> Record:
    return Record("t", {"id": i}, {"id": i}, pos=(i,))


class ListSource:
    """Yields the given batches; `fail_after` raises a TransientError after that many."""

    def __init__(self, batches: list[Batch], log: list[tuple], fail_after: int | None = None) -> None:
        self._batches, self.log, self.fail_after = batches, log, fail_after

    def open(self, start: dict[str, Any] | None) -> None:
        self.log.append(("open", start))

    def batches(self) -> Iterator[Batch]:
        for i, b in enumerate(self._batches):
            if self.fail_after is not None and i == self.fail_after:
                raise TransientError("source dropped")
            self.log.append(("yield", b.offset["n"]))
            yield b

    def acknowledge(self, offset: dict[str, Any]) -> None:
        self.log.append(("ack", offset["n"]))

    def stop(self) -> None:
        pass

    def close(self) -> None:
        self.log.append(("close",))


class LogSink:
    """Records what it holds and when each batch became durable; `fail_seq` fails that batch."""

    name = "slow"

    def __init__(self, log: list[tuple], fail_seq: int | None = None) -> None:
        self.log, self.fail_seq = log, fail_seq
        self.held: list[int] = []

    def write(self, batch: Batch) -> None:
        if batch.seq == self.fail_seq:
            raise TransientError("sink down")
        self.held.extend(r.key["id"] for r in batch.records)
        self.log.append(("durable", batch.offset["n"]))

    def last_offset(self) -> None:
        return None

    def close(self) -> None:
        pass


class MemOffsets:
    def __init__(self, log: list[tuple]) -> None:
        self.log = log
        self.saved: tuple[int, dict[str, Any]] | None = None

    def load(self) -> tuple[int, dict[str, Any]] | None:
        return self.saved

    def save(self, seq: int, offset: dict[str, Any]) -> None:
        self.saved = (seq, offset)
        self.log.append(("save", offset["n"]))

    def reset(self) -> None:
        self.saved = None


def engine(source: ListSource, sink: LogSink, offsets: MemOffsets, **kw: Any) -> Engine:
    return Engine(
        lambda: source,
        [sink],
        offsets,
        offset_key=lambda o: (o["n"],),
        max_retries=0,
        offsets_flush_s=0,
        **kw,
    )


def batch(n: int, ids: list[int], more: bool) -> Batch:
    return Batch([rec(i) for i in ids], {"n": n}, extra={"more": more})


def test_offsets_are_saved_and_acked_only_after_the_write_in_order() -> None:
    log: list[tuple] = []
    src = ListSource([batch(1, [1, 2], True), batch(2, [3], True), batch(3, [4], False)], log)
    sink, offs = LogSink(log), MemOffsets(log)
    # commit_max_events=1: every source batch is its own commit, so the pipeline is exercised.
    engine(src, sink, offs, commit_max_events=1).run()
    assert sink.held == [1, 2, 3, 4]
    # The offset flusher saves the newest durable offset (a newer one supersedes one not yet
    # saved), each save after its batch is durable and before its acknowledgement.
    acks = [e[1] for e in log if e[0] == "ack"]
    assert acks == sorted(acks) and acks[-1] == 3
    for n in acks:
        assert log.index(("durable", n)) < log.index(("save", n)) < log.index(("ack", n))
    assert offs.saved == (3, {"n": 3})


def test_the_source_decodes_the_next_batch_while_the_sinks_write() -> None:
    log: list[tuple] = []

    class WaitsForBatch2(LogSink):
        def write(self, batch: Batch) -> None:
            if batch.seq == 1:  # finishes only once the source has produced batch 2
                wait_for(lambda: ("yield", 2) in log, "the source to yield batch 2 during the write")
            super().write(batch)

    src = ListSource([batch(1, [1], True), batch(2, [2], True), batch(3, [3], False)], log)
    engine(src, WaitsForBatch2(log), MemOffsets(log), commit_max_events=1).run()
    assert log.index(("yield", 2)) < log.index(("durable", 1))


def test_a_batch_the_source_marks_final_is_settled_without_waiting_for_more() -> None:
    log: list[tuple] = []
    src = ListSource([batch(1, [1], False), batch(2, [2], False)], log)
    engine(src, LogSink(log), MemOffsets(log)).run()
    # Not pipelined: batch 1 is durable in the sinks before the source is asked for batch 2.
    assert log.index(("durable", 1)) < log.index(("yield", 2))
    for n in [e[1] for e in log if e[0] == "ack"]:
        assert log.index(("save", n)) < log.index(("ack", n))


def test_sink_failure_is_raised_and_its_batch_never_acknowledged() -> None:
    log: list[tuple] = []
    src = ListSource([batch(1, [1], True), batch(2, [2], True), batch(3, [3], False)], log)
    sink, offs = LogSink(log, fail_seq=2), MemOffsets(log)
    with pytest.raises(TransientError, match="sink down"):
        engine(src, sink, offs, commit_max_events=1).run()
    assert ("ack", 2) not in log and ("save", 2) not in log
    assert offs.saved == (1, {"n": 1})
    assert log[-1] == ("close",)


def test_source_failure_settles_the_write_in_flight_first() -> None:
    log: list[tuple] = []
    src = ListSource([batch(1, [1], True), batch(2, [2], True)], log, fail_after=1)
    sink, offs = LogSink(log), MemOffsets(log)
    with pytest.raises(TransientError, match="source dropped"):
        engine(src, sink, offs, commit_max_events=1).run()
    # Batch 1 was in flight when the source failed: it landed, so its offset is kept.
    assert sink.held == [1] and offs.saved == (1, {"n": 1}) and ("ack", 1) in log


def test_size_cut_batches_are_merged_up_to_the_commit_size() -> None:
    log: list[tuple] = []
    parts = [batch(i, [i], True) for i in range(1, 6)] + [batch(6, [6], False)]
    sink = LogSink(log)
    engine(ListSource(parts, log), sink, MemOffsets(log), commit_max_events=4).run()
    durable = [e[1] for e in log if e[0] == "durable"]
    assert durable == [4, 6]  # commits end at the 4th record, then at the source's final batch
    assert sink.held == [1, 2, 3, 4, 5, 6]


def test_position_only_batches_reach_the_sinks() -> None:
    log: list[tuple] = []
    src = ListSource([Batch([], {"n": 1})], log)
    offs = MemOffsets(log)
    engine(src, LogSink(log), offs).run()
    # the batch has no records, yet the sink gets it and its offset is stored and acknowledged
    assert ("durable", 1) in log and offs.saved == (1, {"n": 1}) and ("ack", 1) in log


def test_a_merged_batch_ends_when_a_piece_does_not_say_more() -> None:
    log: list[tuple] = []
    parts = [batch(1, [1], True), Batch([rec(2)], {"n": 2}), batch(3, [3], False)]
    engine(ListSource(parts, log), LogSink(log), MemOffsets(log), commit_max_events=100).run()
    # Piece 2 has no "more": the commit (pieces 1+2) is written before the source yields piece 3.
    assert log.index(("durable", 2)) < log.index(("yield", 3))


class GatedOffsets(MemOffsets):
    """An offset table whose saves block until `release` is set (a slow Delta commit)."""

    def __init__(self, log: list[tuple]) -> None:
        super().__init__(log)
        self.release = threading.Event()

    def save(self, seq: int, offset: dict[str, Any]) -> None:
        assert self.release.wait(20), "test did not release the offset store"
        super().save(seq, offset)


def wait_for(cond: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def test_a_slow_offset_save_does_not_stall_the_stream() -> None:
    log: list[tuple] = []
    src = ListSource([batch(n, [n], False) for n in range(1, 6)], log)
    offs = GatedOffsets(log)
    eng = Engine(
        lambda: src, [LogSink(log)], offs, offset_key=lambda o: (o["n"],), max_retries=0, offsets_flush_s=0
    )
    t = threading.Thread(target=eng.run)
    t.start()
    try:
        # Every batch reaches the sink while the first save is still blocked.
        wait_for(lambda: ("durable", 5) in log, "all five batches in the sink")
        assert not [e for e in log if e[0] in ("save", "ack")]
    finally:
        offs.release.set()
        t.join(20)
    assert not t.is_alive()
    # Saved and acknowledged afterwards, in order, ending with the newest batch.
    saves = [e[1] for e in log if e[0] == "save"]
    acks = [e[1] for e in log if e[0] == "ack"]
    assert saves == sorted(saves) and saves[-1] == 5 and acks[-1] == 5
    for n in acks:
        assert log.index(("save", n)) < log.index(("ack", n))


class IdleSource(ListSource):
    """Yields its batches, then stays idle (no batch) until `resume` is set."""

    acknowledge_thread_safe = True

    def __init__(self, batches: list[Batch], log: list[tuple]) -> None:
        super().__init__(batches, log)
        self.resume = threading.Event()

    def batches(self) -> Iterator[Batch]:
        yield from super().batches()
        assert self.resume.wait(20), "test did not resume the source"


def test_an_idle_stream_is_acknowledged_while_the_source_waits() -> None:
    log: list[tuple] = []
    src = IdleSource([batch(1, [1], False)], log)
    t = threading.Thread(target=engine(src, LogSink(log), MemOffsets(log), commit_max_events=1).run)
    t.start()
    try:
        # No further batch arrives, yet batch 1 is stored and acknowledged (PostgreSQL: the slot
        # confirms it; a fast shutdown of the server needs that).
        wait_for(lambda: ("ack", 1) in log, "the acknowledgement of batch 1")
        assert log.index(("save", 1)) < log.index(("ack", 1))
    finally:
        src.resume.set()
        t.join(20)
    assert not t.is_alive()


class FlakySource(ListSource):
    """The first three connections each deliver one batch and then drop (TransientError); after
    that the server stays unreachable (open() fails)."""

    def __init__(self, log: list[tuple]) -> None:
        super().__init__([], log)
        self.n = 0

    def open(self, start: dict[str, Any] | None) -> None:
        if self.n >= 3:
            raise TransientError("still down")

    def batches(self) -> Iterator[Batch]:
        self.n += 1
        yield batch(self.n, [self.n], False)
        raise TransientError(f"outage {self.n}")


def test_the_retry_counter_restarts_after_a_working_connection(caplog: pytest.LogCaptureFixture) -> None:
    log: list[tuple] = []
    src = FlakySource(log)
    eng = Engine(
        lambda: src,
        [LogSink(log)],
        MemOffsets(log),
        offset_key=lambda o: (o["n"],),
        max_retries=2,
        backoff_initial=0.001,
        backoff_max=5,
        offsets_flush_s=0,
    )
    with (
        caplog.at_level(logging.WARNING, logger="connectors.engine.loop"),
        pytest.raises(TransientError, match="still"),
    ):
        eng.run()
    attempts = [r.getMessage().rsplit("(", 1)[1] for r in caplog.records if "retrying" in r.getMessage()]
    # Each outage after a working connection is attempt 1 again; the third outage then goes on
    # with failed opens, counted up to max_retries=2, and the engine gives up.
    assert attempts == ["attempt 1)"] * 3 + ["attempt 2)"]


class OwnOffsets(LogSink):
    """A sink that keeps its own offset (as Delta does): logs ("delta", n) per batch."""

    name = "delta"
    keeps_offsets = True

    def write(self, batch: Batch) -> None:
        self.log.append(("delta", batch.offset["n"]))


def test_self_offsetting_sinks_are_written_after_the_others() -> None:
    """Whatever batch a sink that keeps its own offset (Delta) holds, every other sink holds:
    a restart takes the incremental snapshot's state from the newest stored offset."""
    log: list[tuple] = []
    other = LogSink(log)
    src = ListSource([batch(1, [1], True), batch(2, [2], False)], log)
    eng = Engine(
        lambda: src,
        [OwnOffsets(log), other],
        MemOffsets(log),
        offset_key=lambda o: (o["n"],),
        max_retries=0,
        commit_max_events=1,
    )
    eng.run()
    for n in (1, 2):
        assert log.index(("durable", n)) < log.index(("delta", n))


class RunningSnapshot:
    """The part of `IncrementalSnapshots` the engine loop calls, with a snapshot running (its
    `progress` not paused) or none (`progress=None`): batches pass unchanged."""

    def __init__(self, running: bool = True) -> None:
        self.progress = type("P", (), {"paused": False})() if running else None
        self.active = True
        self.needs_store = True
        self.settled_seqs: list[int] = []

    def restore(self, start: Any, newest: Any, key: Any) -> Any:
        return start

    def when_stored(self, ack: Any) -> Any:
        return ack

    def process(self, batch: Batch) -> None:
        pass

    def settled(self, batch: Batch) -> None:
        self.settled_seqs.append(batch.seq)


def test_two_batches_at_the_sinks_while_an_incremental_snapshot_runs() -> None:
    """While a snapshot emits chunks the engine takes the next batch (the next close watermark)
    while the sinks still write the one before, even when the source had nothing more waiting;
    offsets stay in order, each saved after its batch is durable."""
    log: list[tuple] = []

    class WaitsForBatch2(LogSink):
        def write(self, batch: Batch) -> None:
            if batch.seq == 1:
                wait_for(lambda: ("yield", 2) in log, "the source to yield batch 2 during the write")
            super().write(batch)

    snap = RunningSnapshot()
    src = ListSource([batch(1, [1], False), batch(2, [2], False), batch(3, [3], False)], log)
    offs = MemOffsets(log)
    engine(src, WaitsForBatch2(log), offs, incremental=snap).run()
    assert log.index(("yield", 2)) < log.index(("durable", 1))
    assert snap.settled_seqs == sorted(snap.settled_seqs) and len(snap.settled_seqs) == 3
    for n in [e[1] for e in log if e[0] == "ack"]:
        assert log.index(("durable", n)) < log.index(("save", n)) < log.index(("ack", n))
    assert offs.saved is not None and offs.saved[1] == {"n": 3}
    # no snapshot running: one deep, as before
    log.clear()
    src = ListSource([batch(1, [1], False), batch(2, [2], False)], log)
    engine(src, LogSink(log), MemOffsets(log), incremental=RunningSnapshot(False)).run()
    assert log.index(("durable", 1)) < log.index(("yield", 2))


def test_a_batch_held_while_a_snapshot_runs_is_settled_when_the_stream_goes_quiet() -> None:
    """A batch held unsettled (two deep) on a stream that then has nothing more: after
    SETTLE_WITHIN_S the source is asked for its position (`wants_position`), and the
    position-only batch it yields settles the held one."""
    from connectors.engine.loop import SETTLE_WITHIN_S

    log: list[tuple] = []

    class QuietSource(ListSource):
        wants_position: Any = None

        def batches(self) -> Iterator[Batch]:
            yield from super().batches()
            deadline = time.monotonic() + 10 * SETTLE_WITHIN_S + 5
            while not self.wants_position():  # an idle stream's poll loop
                assert time.monotonic() < deadline, "the engine never asked for the position"
                time.sleep(0.01)
            self.log.append(("asked",))
            yield Batch([], {"n": 2}, extra={"more": False})

    src = QuietSource([batch(1, [1], False)], log)
    began = time.monotonic()
    engine(src, LogSink(log), MemOffsets(log), incremental=RunningSnapshot()).run()
    assert time.monotonic() - began >= SETTLE_WITHIN_S
    # Acknowledgements are cumulative: the offset flusher may store batch 1 and the position-only
    # batch together and acknowledge only the newer one, so the first ack after "asked" is 1 or 2.
    acks = [i for i, e in enumerate(log) if e[0] == "ack"]
    assert acks and log.index(("durable", 1)) < log.index(("asked",)) < acks[0]
    assert log[acks[-1]] == ("ack", 2)


class StagedSink(LogSink):
    """Writes in two steps (`StagedSink`): `stage` logs ("staged", n) and returns the step that
    logs ("synced", n); `on_sync(n)` runs inside that step, `fail_sync` makes it raise."""

    name = "staged"

    def __init__(self, log: list[tuple], fail_sync: int | None = None) -> None:
        super().__init__(log)
        self.fail_sync = fail_sync
        self.sync_threads: list[str] = []
        self.on_sync: Any = lambda n: None

    def stage(self, batch: Batch) -> Any:
        n = batch.offset["n"]
        self.log.append(("staged", n))

        def sync() -> None:
            self.sync_threads.append(threading.current_thread().name)
            self.on_sync(n)
            if n == self.fail_sync:
                raise TransientError("fsync failed")
            self.log.append(("synced", n))

        return sync


def test_a_staged_sinks_sync_runs_while_the_next_batch_is_written() -> None:
    """Two deep (a snapshot running): batch 1's durability step waits until batch 2 has been
    staged, which only a step run off the sinks' thread allows; each batch is stored and
    acknowledged only after its own step returned."""
    log: list[tuple] = []
    sink = StagedSink(log)
    sink.on_sync = lambda n: (
        n == 1 and wait_for(lambda: ("staged", 2) in log, "batch 2 staged during the sync")
    )
    src = ListSource([batch(1, [1], False), batch(2, [2], False), batch(3, [3], False)], log)
    offs = MemOffsets(log)
    engine(src, sink, offs, incremental=RunningSnapshot()).run()
    assert log.index(("staged", 2)) < log.index(("synced", 1))
    assert all(t.startswith("tidemark-sync") for t in sink.sync_threads)
    acks = [e[1] for e in log if e[0] == "ack"]
    assert acks and acks == sorted(acks) and acks[-1] == 3
    for n in acks:
        assert log.index(("synced", n)) < log.index(("save", n)) < log.index(("ack", n))
    assert offs.saved is not None and offs.saved[1] == {"n": 3}


def test_a_staged_sink_syncs_inline_one_deep() -> None:
    """No snapshot running: the step runs on the sinks' thread, before the next batch."""
    log: list[tuple] = []
    sink = StagedSink(log)
    src = ListSource([batch(1, [1], False), batch(2, [2], False)], log)
    engine(src, sink, MemOffsets(log)).run()
    assert log.index(("synced", 1)) < log.index(("yield", 2))
    assert sink.sync_threads and all(t.startswith("tidemark-sinks") for t in sink.sync_threads)


def test_a_staged_sink_is_durable_before_a_self_offsetting_sink_is_written() -> None:
    log: list[tuple] = []
    src = ListSource([batch(1, [1], False), batch(2, [2], False), batch(3, [3], False)], log)
    Engine(
        lambda: src,
        [OwnOffsets(log), StagedSink(log)],
        MemOffsets(log),
        offset_key=lambda o: (o["n"],),
        max_retries=0,
        incremental=RunningSnapshot(),
    ).run()
    for n in (1, 2, 3):
        assert log.index(("staged", n)) < log.index(("synced", n)) < log.index(("delta", n))


def test_a_failed_deferred_sync_is_never_acknowledged() -> None:
    log: list[tuple] = []
    src = ListSource([batch(n, [n], False) for n in range(1, 6)], log)
    with pytest.raises(TransientError, match="fsync failed"):
        engine(src, StagedSink(log, fail_sync=2), MemOffsets(log), incremental=RunningSnapshot()).run()
    acks = [e[1] for e in log if e[0] == "ack"]
    assert all(n < 2 for n in acks), repr(log)
    assert ("save", 2) not in log and ("save", 3) not in log


def test_no_batch_is_written_after_one_that_failed_two_deep() -> None:
    """Batch 2's write fails while batch 3 is queued behind it: batch 3 is never written (a
    self-offsetting sink holding 3 without 2 would skip 2 on the restart) and nothing from 2 on
    is stored or acknowledged."""
    log: list[tuple] = []
    sink = LogSink(log, fail_seq=2)
    src = ListSource([batch(n, [n], False) for n in range(1, 6)], log)
    with pytest.raises(TransientError):
        engine(src, sink, MemOffsets(log), incremental=RunningSnapshot()).run()
    assert sink.held == [1]
    assert all(e[1] < 2 for e in log if e[0] in ("ack", "save"))
