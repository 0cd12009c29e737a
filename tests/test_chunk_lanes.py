"""spark_jobs/chunk_lanes.py: which lane runs each chunk while the main lane (Spark) starts.

The lanes run plain functions here: what is under test is the scheduling, so the main lane's
readiness is a Future the test completes, and each run records its thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait

import pytest

from spark_jobs.chunk_lanes import ChunkLanes

Runner = Callable[[int], str]


def _run(lane: str, log: list[tuple[str, int, str]], gate: threading.Event | None = None) -> Runner:
    def run(spec: int) -> str:
        if gate is not None:
            assert gate.wait(10)
        log.append((lane, spec, threading.current_thread().name))
        return f"{lane}:{spec}"

    return run


def test_the_lead_lane_runs_one_chunk_at_a_time_until_the_main_lane_is_ready() -> None:
    log: list[tuple[str, int, str]] = []
    ready: Future[None] = Future()
    opened: list[str] = []
    released: list[str] = []
    gate = threading.Event()

    def open_main() -> tuple[Runner, int]:
        opened.append(threading.current_thread().name)
        return _run("main", log), 2

    lanes = ChunkLanes(
        open_main,
        ready=ready,
        lead=_run("lead", log, gate),
        release=lambda: released.append(threading.current_thread().name),
    )
    assert not lanes.opened and lanes.pending() == {ready}
    first = lanes.submit(0)
    assert first is not None and lanes.submit(1) is None  # one at a time in the lead lane
    gate.set()
    assert first.result(10) == "lead:0"
    lanes.finished(first)
    second = lanes.submit(1)
    assert second is not None and second.result(10) == "lead:1"
    lanes.finished(second)
    ready.set_result(None)
    assert lanes.pending() == set()  # done: the next submit opens the main lane
    third, fourth = lanes.submit(2), lanes.submit(3)
    assert lanes.opened and opened == [threading.current_thread().name]
    assert third is not None and fourth is not None and lanes.submit(4) is None  # width 2
    assert {third.result(10), fourth.result(10)} == {"main:2", "main:3"}
    lanes.finish()
    lanes.close()
    assert [spec for lane, spec, _ in log if lane == "lead"] == [0, 1]  # the lead lane ran exactly those
    lead_threads = {name for lane, _, name in log if lane == "lead"}
    assert len(lead_threads) == 1 and released == list(lead_threads)  # released in that thread
    assert not lead_threads & {name for lane, _, name in log if lane == "main"}


def test_a_chunk_running_in_the_lead_lane_when_the_main_lane_opens_finishes_there() -> None:
    log: list[tuple[str, int, str]] = []
    ready: Future[None] = Future()
    gate = threading.Event()
    lanes = ChunkLanes(lambda: (_run("main", log), 1), ready=ready, lead=_run("lead", log, gate))
    slow = lanes.submit(0)
    ready.set_result(None)
    quick = lanes.submit(1)  # opens the main lane while chunk 0 is still read by the driver
    assert slow is not None and quick is not None
    assert quick.result(10) == "main:1"
    gate.set()
    assert slow.result(10) == "lead:0"
    lanes.close()


def test_without_a_lead_the_main_lane_opens_at_once_and_finish_opens_a_never_opened_one() -> None:
    opened: list[int] = []

    def open_main() -> tuple[Callable[[int], int], int]:
        opened.append(1)
        return (lambda spec: spec * 2), 1

    lanes = ChunkLanes(open_main, ready=Future())  # a ready future without a lead is not waited for
    assert lanes.opened and opened == [1]
    fut = lanes.submit(21)
    assert fut is not None and fut.result(10) == 42
    lanes.close()

    ready: Future[None] = Future()
    lanes = ChunkLanes(open_main, ready=ready, lead=lambda spec: spec)
    done = lanes.submit(5)
    assert done is not None and done.result(10) == 5
    lanes.finished(done)
    lanes.finish()  # every chunk was read by the driver: the main lane still has to start
    assert opened == [1, 1]
    lanes.close()


def test_an_error_opening_the_main_lane_reaches_the_caller() -> None:
    def cannot_start() -> tuple[Callable[[int], int], int]:
        raise RuntimeError("Spark could not start")

    ready: Future[None] = Future()
    lanes = ChunkLanes(cannot_start, ready=ready, lead=lambda spec: spec)
    done = lanes.submit(1)
    assert done is not None
    ready.set_result(None)
    with pytest.raises(RuntimeError, match="could not start"):
        lanes.submit(2)
    with pytest.raises(RuntimeError, match="could not start"):
        lanes.finish()
    lanes.close()
    assert wait({done}, timeout=10, return_when=FIRST_COMPLETED).done == {done}
