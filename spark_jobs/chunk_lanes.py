"""Where the snapshot driver runs each chunk: the main lane (Spark tasks, or the MySQL driver
threads of a consistent view), and, while Spark is still starting, the driver itself.

A job that reads its chunks in Spark tasks waits ~4 s on this machine for the JVM and the
warmed Python workers, and over that time the CPU is half idle (measured on two cores during a
PostgreSQL snapshot: 52-85 % busy). So until the main lane opens, the driver reads the next
chunk itself, one at a time, with the same task function: a PostgreSQL chunk inside the
exported snapshot (`SET TRANSACTION SNAPSHOT` works from any connection), a lock-free MySQL
chunk between its own watermarks. A chunk is read whole by one lane, so the rows, their markers
and the commit (in plan order, by the caller) do not depend on where it ran. On a cluster this
is the driver working while executors come up; `tidemark.snapshot.read.during.spark.start=false`
leaves every chunk to Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

S = TypeVar("S")  # what a chunk is run from (ChunkSpec)
R = TypeVar("R")  # what a run returns

Runner = Callable[[S], R]


class ChunkLanes(Generic[S, R]):
    """Runs chunks in the main lane, at most `width` at a time once it is open; before that
    (`ready` not done), one at a time in a driver thread (`lead`). `open_main` is called once,
    on the caller's thread, when `ready` is done (at once without `ready`), and returns the main
    lane's runner and width; an error it raises (Spark did not start) goes to the caller.
    `release` runs last in the lead lane's thread: the clients it kept (connections, producer)."""

    def __init__(
        self,
        open_main: Callable[[], tuple[Runner[S, R], int]],
        *,
        ready: Future[None] | None = None,
        lead: Runner[S, R] | None = None,
        release: Callable[[], None] | None = None,
    ) -> None:
        self._open_main, self._ready = open_main, ready if lead is not None else None
        self._lead, self._release = lead, release
        self._main: Runner[S, R] | None = None
        self._width = 0
        self._main_pool: ThreadPoolExecutor | None = None
        self._lead_pool: ThreadPoolExecutor | None = None
        self._busy: dict[Future[R], bool] = {}  # running chunk -> in the lead lane
        self._released = False
        if self._ready is None:
            self._open()

    def _open(self) -> None:
        self._main, self._width = self._open_main()
        self._main_pool = ThreadPoolExecutor(max_workers=self._width, thread_name_prefix="snapshot-chunk")
        self._end_lead(wait=False)

    @property
    def opened(self) -> bool:
        return self._main is not None

    def submit(self, spec: S) -> Future[R] | None:
        """Start `spec` in a lane with room; None when every lane is busy (wait for `pending`)."""
        if self._main is None and (self._ready is None or self._ready.done()):
            self._open()
        if self._main is not None:
            assert self._main_pool is not None
            if sum(1 for lead in self._busy.values() if not lead) >= self._width:
                return None
            fut = self._main_pool.submit(self._main, spec)
            self._busy[fut] = False
            return fut
        if any(self._busy.values()) or self._lead is None:
            return None
        if self._lead_pool is None:
            self._lead_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot-lead")
        fut = self._lead_pool.submit(self._lead, spec)
        self._busy[fut] = True
        return fut

    def pending(self) -> set[Future[None]]:
        """Futures besides the chunks' whose end opens room: the main lane getting ready (once
        it is, the next `submit` opens it)."""
        ready = self._ready
        return {ready} if self._main is None and ready is not None and not ready.done() else set()

    def finished(self, fut: Future[R]) -> None:
        self._busy.pop(fut, None)

    def finish(self) -> None:
        """After the last chunk: the main lane is opened if it never was (its start is part of
        the job: a Spark that cannot start is reported even when the driver read every chunk)."""
        if self._main is None:
            self._open()

    def _end_lead(self, wait: bool) -> None:
        pool = self._lead_pool
        if pool is None:
            return
        if not self._released:
            self._released = True
            if self._release is not None:
                pool.submit(self._release)  # in the lead lane's own thread, after its last chunk
        pool.shutdown(wait=wait)

    def close(self) -> None:
        """Wait for the chunks still running (after an error too) and end both lanes."""
        self._end_lead(wait=True)
        if self._main_pool is not None:
            self._main_pool.shutdown(wait=True)
