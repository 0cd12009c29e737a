"""pyspark's Python worker daemon, with a chunk task's modules imported before it forks.

Spark starts one daemon per executor (`spark.python.daemon.module`, default `pyspark.daemon`) and
forks every Python worker from it. Imported here, pyarrow, polars, the database driver and
Tidemark's converters are loaded once and shared by the forked workers (copy on write), instead
of each worker importing them again on its first task: ~1 CPU-s a worker on a 2-core machine
where that CPU competes with the driver's reading. The job sets this module and the list of
modules (`TIDEMARK_WORKER_IMPORTS`, comma-separated, through `spark.executorEnv`).

Fork safety: importing starts no thread a forked worker relies on: jemalloc's background threads
and OpenBLAS's pool have fork handlers, and polars' thread pool is created on first use (in the
worker). A module that fails to import is left to the task, which imports it again and fails with
that error in its own log.
"""

from __future__ import annotations

import os
import sys

IMPORTS_ENV = "TIDEMARK_WORKER_IMPORTS"


def preload(modules: str) -> None:
    from spark_jobs.snapshot_tasks import warm_worker

    try:
        warm_worker(tuple(m for m in modules.split(",") if m), 0)
    except Exception as e:  # noqa: BLE001 - only a head start: the task imports them anyway
        # stderr: the daemon's stdout carries its port to the JVM
        print(f"tidemark worker daemon: preloading {modules}: {e!r}", file=sys.stderr)


if __name__ == "__main__":
    preload(os.environ.get(IMPORTS_ENV, ""))
    from pyspark.daemon import manager

    manager()
