"""The incremental snapshot's chunk job: `spark-submit spark_jobs/incremental_chunks.py --config
FILE` (or `python -m spark_jobs.incremental_chunks --config FILE`). With
`tidemark.incremental.snapshot.reader=spark` the connector starts it while a snapshot runs
(`connectors/snapshot/incremental_launch.py`); under Airflow the stream DAG's `read_chunks` task
runs it instead. One job reads a connector's snapshots at a time (a lock on the source database).

Driver loop: read the snapshot state the stream stored last (the chunks it emitted), plan the
chunks after it up to 2 × `tidemark.incremental.snapshot.parallelism` (and about AHEAD_ROWS rows)
ahead (`incremental_read.lead`, `incremental_plan.plan_ahead`: how far the snapshot may run ahead of the stream), and keep
up to `parallelism` chunks being read at once (fewer while the stream lags), one Spark task each (`incremental_plan.run_planned`:
open watermark, SELECT of the key range, staged rows, close watermark). The stream emits the
chunks in order at their close watermarks. A paused snapshot reads nothing new; the job ends
once the stored state says no snapshot runs (or none appeared within `--wait` seconds).
"""

from __future__ import annotations

import argparse
import logging
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from connectors.api import TerminalError, TidemarkError
from connectors.settings.config import ConnectorConfig, from_mapping, load

log = logging.getLogger("tidemark.incremental")


def run(
    cfg: ConnectorConfig,
    *,
    spark: Any = None,
    wait_s: float = 60.0,
    idle_exit_s: float = 0.0,
    poll_s: float = 0.5,
) -> int:
    """Read the running incremental snapshot's chunks until it ends (or, with `idle_exit_s`,
    until the stream has emitted none of them for that long: it does not run); the chunks read."""
    from connectors.engine.wiring import StoredOffsets
    from connectors.snapshot.incremental import Progress
    from connectors.snapshot.incremental_plan import Plan, chunk_source, plan_ahead, run_planned
    from connectors.snapshot.incremental_read import chunk_settings, lead
    from connectors.snapshot.incremental_staging import Staging
    from spark_jobs.snapshot import spark_session, stop_session
    from spark_jobs.snapshot_tasks import Refused, refusing

    chunk_size, strategy = chunk_settings(cfg)
    width = max(1, cfg.runtime.incremental_snapshot_parallelism)
    ahead_n = lead(chunk_size, width)  # how far the snapshot may run ahead of the stream
    raw = dict(cfg.origin.raw)
    stored = StoredOffsets(cfg)
    staging = Staging(cfg.warehouse, cfg.name)
    src = chunk_source(cfg)
    began = time.monotonic()
    # One job reads a connector's snapshots at a time (the connector's own, or one Airflow or a
    # user started): a lock of the planner's session on the source database, released when the
    # job ends or dies. A second job waits as a stand-in and takes over if the first one dies.
    lock, waiting = f"tidemark-incremental-{cfg.name}", False
    while not src.try_lock(lock):
        if not waiting:
            log.info("another chunk job reads connector %s's snapshots; waiting until it ends", cfg.name)
            waiting = True
        if Progress.from_offset(stored.newest()) is None and time.monotonic() - began > wait_s:
            src.close()
            stored.close()
            return 0
        time.sleep(2.0)
    own = spark is None
    session: list[Any] = [] if own else [spark]  # started with the first chunk to read

    def one(spec: tuple[dict[str, str], str, Plan, str, bool]) -> int:
        sc = session[0].sparkContext
        sc.setJobGroup(f"tidemark-incremental-{spec[1]}", f"chunk {spec[1]} of {spec[2]['table']}")
        (rows,) = sc.parallelize([spec], 1).map(partial(refusing, run_planned)).collect()
        if isinstance(rows, Refused):  # (spark_jobs/snapshot_tasks.py)
            raise TerminalError(f"incremental snapshot chunk {spec[1]} failed: {rows.message}", rows.hint)
        return int(rows)

    plans: dict[str, dict[int, Plan]] = {}
    done: set[tuple[str, int]] = set()
    running: dict[Future[int], tuple[str, int]] = {}
    max_lag_ms = cfg.runtime.incremental_snapshot_max_stream_lag_ms
    held_since: float | None = None  # new chunks held for a lagging stream since
    seen, chunks, rows = False, 0, 0
    emitted, moved = -1, time.monotonic()  # the stored chunk number, and when it last moved
    try:
        with ThreadPoolExecutor(max_workers=width, thread_name_prefix="incremental-chunk") as pool:
            while True:
                newest = stored.newest()
                p = Progress.from_offset(newest)
                if p is None:
                    if not running and (seen or time.monotonic() - began > wait_s):
                        break
                elif p.paused or p.chunk_seq != emitted:
                    emitted, moved = p.chunk_seq, time.monotonic()  # (a pause is no stall)
                if p is not None and not p.paused:
                    if idle_exit_s and not running and time.monotonic() - moved > idle_exit_s:
                        log.warning(
                            "incremental snapshot %s: the stream emitted no chunk for %.0fs; the job ends",
                            p.snapshot_id,
                            idle_exit_s,
                        )
                        break
                    if not seen:
                        log.info("incremental snapshot %s: reading %s", p.snapshot_id, ", ".join(p.tables))
                    seen = True
                    mine = plans.get(p.snapshot_id)
                    if mine is None:
                        mine = plans[p.snapshot_id] = staging.plans(p.snapshot_id)
                    ahead, new = plan_ahead(p, mine, src, chunk_size, ahead_n)
                    if new:
                        staging.write_plans(p.snapshot_id, new)
                        mine.update(new)
                    busy = set(running.values())
                    was_held = held_since
                    budget, held_since = _budget(_lagging(newest, max_lag_ms), width, held_since)
                    if held_since is not None and was_held is None:
                        log.info("the stream lags more than %d ms: new chunks are held back", max_lag_ms)
                    for n in sorted(ahead):
                        if len(running) >= width or budget <= 0:
                            break
                        key = (p.snapshot_id, n)
                        if key in done or key in busy:
                            continue
                        plan = ahead[n]
                        skip = plan["table"] is not None and plan["table"] not in p.tables
                        spec = (raw, f"{p.snapshot_id}-{n}", plan, strategy, skip)
                        if not session:
                            session.append(spark_session(cfg))
                            staging_shared(cfg, session[0].sparkContext)
                        running[pool.submit(one, spec)] = key
                        budget -= 1
                if running:
                    finished, _ = wait(running, timeout=poll_s, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        key = running.pop(fut)
                        rows += fut.result()  # a failed chunk fails the job: it is started again
                        done.add(key)
                        chunks += 1
                else:
                    time.sleep(poll_s)  # (the stream stores its state about once a second)
    finally:
        src.close()
        stored.close()
        if own and session:
            stop_session(session[0])
    log.info("incremental snapshot: %d chunks read (%d rows)", chunks, rows)
    return chunks


def _lagging(offset: dict[str, Any] | None, max_lag_ms: int) -> bool:
    """Whether the stream lagged more than `tidemark.incremental.snapshot.max.stream.lag.ms` at
    the last batch with changes it stored. However long ago: a stream that caught up stored a
    small lag last, and one busy with a long batch is no idle one."""
    from connectors.snapshot.incremental import PREFIX

    if max_lag_ms <= 0 or not offset or f"{PREFIX}stream" not in offset:
        return False
    stream = orjson.loads(offset[f"{PREFIX}stream"])
    return bool(stream["lag_ms"] > max_lag_ms)


def _budget(lagging: bool, width: int, held_since: float | None) -> tuple[int, float | None]:
    """(chunks that may start now, when the hold began). The stream goes first, as with the
    thread reader: while it lags, one chunk every HOLD_MAX_S, so a snapshot slows down under
    load but never stops."""
    from connectors.snapshot.incremental import HOLD_MAX_S

    if not lagging:
        return width, None
    now = time.monotonic()
    if held_since is None:
        return 0, now
    if now - held_since > HOLD_MAX_S:
        return 1, now
    return 0, held_since


# What the Spark reader needs of the warehouse on a cluster, in the error that finds it missing.
SHARED_WAREHOUSE_HINT = (
    "on a cluster (tidemark.spark.master other than local[...]) the chunk tasks stage what they read "
    "under tidemark.warehouse for the stream: put the warehouse on an object store (s3://..., az://..., "
    "gs://...) or on a file system mounted at the same path on every host, or read the chunks in the "
    "connector (tidemark.incremental.snapshot.reader=thread); nothing of the snapshot was read yet"
)


def staging_shared(cfg: ConnectorConfig, sc: Any) -> None:
    """On a cluster with a local warehouse, the executors' hosts must see the staging directory
    as the stream's host does, before any task reads a chunk (and writes its close watermark):
    the stream takes each chunk from there once its window closes."""
    from connectors.signals.tables import state_uri
    from connectors.snapshot.incremental_files import local_dir
    from spark_jobs.part_files import check_shared_dir

    root = local_dir(state_uri(cfg.warehouse, "incremental_chunks"))
    if root is None or str(sc.master).startswith("local"):
        return
    check_shared_dir(sc, str(root), "the incremental snapshot's staging probe", SHARED_WAREHOUSE_HINT)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="spark_jobs.incremental_chunks", description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, help="connector configuration file")
    p.add_argument("--wait", type=float, default=60.0, help="seconds to wait for a snapshot to start")
    p.add_argument(
        "--idle-exit",
        type=float,
        default=0.0,
        help="end when the stream emitted no chunk for this long (0: never)",
    )
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    # Started by the connector: the configuration as JSON, the file its error goes to, its pid.
    p.add_argument("--raw", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--error-file", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--parent", type=int, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.config is None and a.raw is None:
        p.error("--config is required")
    from connectors.snapshot.jobs import read_request
    from spark_jobs.snapshot import job_start, report

    job_start(a.log_level, a.parent, a.error_file)
    try:
        cfg = from_mapping(read_request(a.raw)) if a.raw is not None else load(a.config)
        run(cfg, wait_s=a.wait, idle_exit_s=a.idle_exit)
    except TidemarkError as e:
        return report(e, a.error_file)
    return 0


if __name__ == "__main__":
    from spark_jobs.snapshot import job_exit

    job_exit(main())
