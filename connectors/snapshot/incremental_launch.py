"""Starts the incremental snapshot's chunk job (`spark_jobs/incremental_chunks.py`) while a
snapshot runs, when `tidemark.incremental.snapshot.reader=spark`.

The connector's controller knows when a snapshot runs (a signal started it, or a restart restored
it); the job knows nothing of the connector but what the stream stored. So the connector starts
the job while a snapshot is running and not paused, and again when the job failed (with capped
backoff) or ended while the snapshot still runs; the job ends by itself once the stored state
says the snapshot ended. The job gets the configuration in a file only this user reads (it holds
the passwords) and the connector's pid: it ends when the connector is gone, so a restarted
connector never races an orphaned job on the same chunks.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from connectors.snapshot.jobs import ChildJob, root_level

if TYPE_CHECKING:
    from connectors.snapshot.incremental import IncrementalSnapshots

log = logging.getLogger(__name__)


class JobLauncher:
    def __init__(self, controller: IncrementalSnapshots) -> None:
        self.ctl = controller
        self._thread: threading.Thread | None = None
        self._job = ChildJob()
        self._stopping = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tidemark-incremental-job", daemon=True)
        self._thread.start()

    def stop(self, timeout: float) -> None:
        self._stopping = True
        self._job.stop()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        backoff = 1.0
        while not self._stopping and self.ctl.wait_for_job():
            code, err = self._run_job()
            if self._stopping:
                return
            if code == 0:
                backoff = 1.0
                self.ctl.sleep(1.0)  # (ended while the stored state lagged: started again if needed)
                continue
            log.warning(
                "incremental snapshot: the chunk job failed (exit %s)%s; starting it again in %.0fs",
                code,
                f": {err}" if err else "",
                backoff,
            )
            if not self.ctl.sleep(backoff):
                return
            backoff = min(30.0, backoff * 2)

    def _run_job(self) -> tuple[int, str | None]:
        log.info("incremental snapshot: starting the chunk job")
        raw = dict(self.ctl.cfg.origin.raw)
        return self._job.run("spark_jobs.incremental_chunks", "--raw", raw, root_level())
