"""The tasks of a connector's DAGs.

- `TidemarkStreamOperator`: `tidemark run` as a child process (see `execute` for why), its
  output in the task log line by line with the connector's name, health to `_state/status`
  every few seconds, SIGTERM to it when Airflow stops the task or the task process dies (it
  finishes the batch in flight and stores the offset; see `_connector_child`).
- `TidemarkSnapshotSubmitOperator`: the initial snapshot job through `SparkSubmitOperator`.
- `TidemarkChunkJobSubmitOperator`: the incremental snapshot chunk job (reader=spark) likewise,
  whenever a snapshot runs, next to the stream task.
- `check_snapshot_request` / `send_snapshot_signal`: the snapshot DAG's form values checked
  against the captured tables, and the `execute-snapshot` signal to the Delta signal channel.
- `TidemarkSnapshotSensor`: defers to `triggers.NotificationTrigger` until the snapshot's
  COMPLETED (or ABORTED: the task fails with the notification's message).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from connectors.api import ConfigError, TidemarkError
from connectors.settings.config import ConnectorConfig
from tidemark_airflow.config import parse_config, runtime_config

REPO = Path(__file__).resolve().parents[2]
SNAPSHOT_JOB = REPO / "spark_jobs" / "snapshot.py"
CHUNK_JOB = REPO / "spark_jobs" / "incremental_chunks.py"

SNAPSHOT_TYPES = ("initial", "incremental", "blocking")
# Aggregate types whose COMPLETED / ABORTED end each kind of snapshot.
AGGREGATE_TYPES = {
    "initial": ["Initial Snapshot"],
    "incremental": ["Incremental Snapshot"],
    "blocking": ["Initial Snapshot"],  # (as Debezium: a blocking snapshot sends these)
}


def _venv_env() -> dict[str, str]:
    """This interpreter's bin directory first on PATH: `spark-submit` (the pyspark wheel's) and
    `tidemark` are found whatever PATH the worker was started with."""
    bindir = str(Path(sys.executable).parent)
    return {"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _prctl() -> Any:
    """libc's prctl, looked up in the parent (no dlopen between fork and exec), or None."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: no parent-death signal, on_kill still stops it
        return None


def _connector_child(parent: int, prctl: Any) -> None:
    """Runs in the connector's process before it execs (Popen's preexec_fn).

    Airflow's task supervisor stops a task (marked from the UI, or its heartbeat refused) with
    SIGTERM to the task's whole process group and SIGKILL to it 5 s later: a connector in that
    group could be killed while it commits its last batch. So the connector gets a process
    group of its own (only the operator's `on_kill` stops it) and the kernel sends it SIGTERM
    when the task process goes away in any way (PR_SET_PDEATHSIG): never an orphan streaming
    next to the retry."""
    os.setpgid(0, 0)
    if prctl is None:
        return
    prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
    if os.getppid() != parent:  # the task process died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"stopped with exit code {code}"


class TidemarkStreamOperator(BaseOperator):
    """Runs the connector until it stops (SIGTERM from Airflow) or, with the Param
    `until_caught_up`, until it has caught up with the server's log position at start.

    A child process rather than the engine in the task's interpreter: the engine tunes the
    garbage collector and installs signal handlers for the whole process, leaves through
    `os._exit` (pyarrow's I/O threads can abort interpreter finalization), and a snapshot it
    starts runs Spark in yet another process; the child keeps all of that out of Airflow's task
    runner, and SIGTERM reaches the engine exactly as it does under any other supervisor."""

    ui_color = "#d4f1f9"

    def __init__(
        self,
        *,
        connector_file: str,
        status_interval: float = 5.0,
        stop_timeout: float = 120.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.connector_file = connector_file
        self.status_interval = status_interval
        self.stop_timeout = stop_timeout
        self._proc: subprocess.Popen[str] | None = None

    def execute(self, context: Any) -> dict[str, Any]:
        until = bool(context["params"].get("until_caught_up", False))
        path = Path(self.connector_file)
        with runtime_config(path) as (cfg_path, cfg):
            cmd = [
                sys.executable,
                "-m",
                "connectors.app.cli",
                "run",
                "--config",
                str(cfg_path),
                "--status-interval",
                str(self.status_interval),
            ]
            if until:
                cmd.append("--until-caught-up")
            self.log.info("connector %s (%s): %s", cfg.name, path, " ".join(cmd[3:]))
            parent, prctl = os.getpid(), _prctl()
            self._proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
                # reader=spark: the stream DAG's read_chunks task runs the chunk job, not the connector
                env={**os.environ, **_venv_env(), "TIDEMARK_INCREMENTAL_JOB": "airflow"},
                preexec_fn=lambda: _connector_child(parent, prctl),
            )
            self.log.info("connector %s: pid %d", cfg.name, self._proc.pid)
            errors: list[str] = []
            assert self._proc.stdout is not None
            for line in self._proc.stdout:
                text = line.rstrip("\n")
                if text.startswith(("tidemark: error:", "  hint:")):
                    errors.append(text)
                self.log.info("[%s] %s", cfg.name, text)
            code = self._proc.wait()
        if code != 0:
            raise AirflowException(
                f"connector {cfg.name} {_exit_text(code)}: "
                + (" ".join(errors) or "see the log above")
                + " (Airflow retries the task with backoff; it resumes from the stored offset)"
            )
        return {"connector": cfg.name, "until_caught_up": until}

    def on_kill(self) -> None:
        """Airflow stops the task: SIGTERM, so the connector finishes its batch and stores the
        offset. No waiting here (this runs in a signal handler): `execute` keeps copying the
        connector's last log lines into the task log until it exits; a watchdog SIGKILLs it if
        it has not stopped within `stop_timeout`."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        self.log.info("stopping the connector (SIGTERM to pid %d)", proc.pid)
        proc.send_signal(signal.SIGTERM)

        def watchdog() -> None:
            try:
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.log.warning("the connector did not stop within %.0fs: SIGKILL", self.stop_timeout)
                proc.kill()

        threading.Thread(target=watchdog, name="tidemark-stop-watchdog", daemon=True).start()


# --------------------------------------------------------------------------- snapshots
def _tables_text(tables: Sequence[str]) -> str:
    return ",".join(tables)


def snapshot_request(params: Mapping[str, Any], run_type: str, cfg: ConnectorConfig) -> dict[str, Any]:
    """The form's values, or for a scheduled run an incremental snapshot of
    `tidemark.airflow.snapshot.tables`."""
    if run_type == "scheduled":
        return {
            "type": "incremental",
            "tables": list(cfg.runtime.airflow_snapshot_tables or ()),
            "additional_conditions": {},
            "surrogate_key": None,
        }
    return {
        "type": params.get("type") or "initial",
        "tables": [str(t).strip() for t in params.get("tables") or [] if str(t).strip()],
        "additional_conditions": dict(params.get("additional_conditions") or {}),
        "surrogate_key": (params.get("surrogate_key") or "").strip() or None,
    }


def check_snapshot_request(cfg: ConnectorConfig, request: Mapping[str, Any]) -> dict[str, Any]:
    """The request with its tables resolved to captured tables (every captured table when none
    are named); AirflowFailException — no retry, nothing runs — when a table is not captured, a
    condition does not parse or names other columns, or the type is unknown."""
    from connectors.signals.catalog import TableCatalog
    from connectors.signals.model import SignalError, SignalRecord, parse

    kind = request["type"]
    if kind not in SNAPSHOT_TYPES:
        raise AirflowFailException(f"type {kind!r}: one of {', '.join(SNAPSHOT_TYPES)}")
    if kind == "initial" and request.get("surrogate_key"):
        raise AirflowFailException("surrogate_key applies to incremental and blocking snapshots only")
    info = TableCatalog(cfg).info()
    tables = list(request["tables"])
    if not tables:
        if info.tables is None:
            raise AirflowFailException(
                f"connector {cfg.name}: the captured tables could not be listed (the database did not answer); "
                "name the tables"
            )
        tables = sorted(info.tables)
    conditions = request.get("additional_conditions") or {}
    unknown = [t for t in conditions if t not in tables]
    if unknown and request["tables"]:
        raise AirflowFailException(f"additional_conditions name tables not in tables: {', '.join(unknown)}")
    data: dict[str, Any] = {
        "data-collections": tables,
        "type": "blocking" if kind == "blocking" else "incremental",
    }
    if conditions:
        data["additional-conditions"] = [{"data-collection": t, "filter": c} for t, c in conditions.items()]
    if request.get("surrogate_key"):
        data["surrogate-key"] = request["surrogate_key"]
    import orjson

    record = SignalRecord("airflow", "execute-snapshot", orjson.dumps(data).decode(), "delta", "airflow")
    try:
        checked = parse(record, cfg.connector, info)
    except SignalError as e:
        raise AirflowFailException(f"snapshot of connector {cfg.name} refused: {e}") from None
    resolved = list(getattr(checked, "tables", ()) or tables)
    return {**request, "tables": resolved, "signal_data": data | {"data-collections": resolved}}


def initial_overrides(request: Mapping[str, Any]) -> dict[str, str]:
    """Connector properties for an initial snapshot now: `always` (a snapshot whatever is
    stored, then the stream resumes from its stored position), of the chosen tables, with the
    conditions as `SELECT * ... WHERE` overrides (still read in chunks)."""
    out = {"snapshot.mode": "always"}
    tables = request.get("tables") or []
    if tables:
        out["snapshot.include.collection.list"] = _tables_text(tables)
    conditions = request.get("additional_conditions") or {}
    if conditions:
        out["snapshot.select.statement.overrides"] = _tables_text(list(conditions))
        for table, cond in conditions.items():
            out[f"snapshot.select.statement.overrides.{table}"] = f"SELECT * FROM {table} WHERE {cond}"
    return out


class _TidemarkSubmit(SparkSubmitOperator):
    """A Tidemark Spark job through the Spark provider's `spark-submit` (connection
    `spark_default`: `local[*]` unless changed), on a private runtime copy of the connector file;
    the checked request comes from the `check` task's XCom."""

    job = SNAPSHOT_JOB

    def __init__(self, *, connector_file: str, request_task_id: str = "check", **kwargs: Any) -> None:
        kwargs.setdefault("conn_id", "spark_default")
        kwargs.setdefault("application", str(self.job))
        super().__init__(**kwargs)
        self.connector_file = connector_file
        self.request_task_id = request_task_id

    def _submit(self, context: Any, cfg_path: Path, cfg: ConnectorConfig, *args: str) -> None:
        self.application_args = ["--config", str(cfg_path), "--log-level", "INFO", *args]
        self.name = f"{self.job.stem.replace('_', '-')}-{cfg.name}"
        self.conf = {
            "spark.log.level": "WARN",  # (Spark's INFO start-up lines would fill the task log)
            **(self.conf or {}),
            "spark.pyspark.python": sys.executable,
            "spark.pyspark.driver.python": sys.executable,
        }
        self.env_vars = {**(self.env_vars or {}), **_venv_env(), "PYTHONPATH": str(REPO)}
        self._hook = None  # built from the values above
        super().execute(context)


class TidemarkSnapshotSubmitOperator(_TidemarkSubmit):
    """`spark_jobs/snapshot.py`: an initial snapshot of the request's tables now."""

    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]
        request = context["ti"].xcom_pull(task_ids=self.request_task_id)
        since = int(time.time() * 1000)
        with runtime_config(Path(self.connector_file), initial_overrides(request)) as (cfg_path, cfg):
            self._submit(context, cfg_path, cfg)
        return {
            "since_ms": since,
            "aggregate_types": AGGREGATE_TYPES["initial"],
            "id": None,
            "signal_id": None,
        }


class TidemarkChunkJobSubmitOperator(_TidemarkSubmit):
    """Next to the stream task, with `tidemark.incremental.snapshot.reader=spark`: whenever the
    connector's stored state shows an incremental snapshot running (and not paused), however it
    was requested (the snapshot DAG, the status page, a signal row), this task runs
    `spark_jobs/incremental_chunks.py` through `spark-submit` until the snapshot ends (or the
    stream has emitted nothing of it for `job_idle_s`), then waits for the next one. The connector
    under Airflow does not start the job itself. The task ends when the stream task has ended (not
    while Airflow retries it), so the DAG run ends with it; a failed job fails the task, which
    Airflow retries."""

    job = CHUNK_JOB

    def __init__(
        self, *, stream_task_id: str = "stream", poll_s: float = 2.0, job_idle_s: float = 60.0, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.stream_task_id = stream_task_id
        self.poll_s = poll_s
        self.job_idle_s = job_idle_s

    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]
        from connectors.engine.wiring import StoredOffsets
        from connectors.snapshot.incremental import Progress

        jobs = 0
        with runtime_config(Path(self.connector_file)) as (cfg_path, cfg):
            stored = StoredOffsets(cfg)
            try:
                while (state := self._stream_state(context)) not in ENDED:
                    p = Progress.from_offset(stored.newest()) if state == "running" else None
                    if p is not None and not p.paused:
                        self.log.info(
                            "incremental snapshot %s of %s runs: starting the chunk job",
                            p.snapshot_id,
                            ", ".join(p.tables),
                        )
                        self._submit(
                            context, cfg_path, cfg, "--wait", "10", "--idle-exit", str(self.job_idle_s)
                        )
                        jobs += 1
                        continue
                    time.sleep(self.poll_s)
            finally:
                stored.close()
        self.log.info("the stream task ended (%s): so does the chunk job's watch (%d jobs ran)", state, jobs)
        return {"connector": cfg.name, "jobs": jobs}

    def _stream_state(self, context: Any) -> str | None:
        """The stream task's state in this DAG run."""
        ti = context["ti"]
        states = ti.get_task_states(dag_id=ti.dag_id, task_ids=[self.stream_task_id], run_ids=[ti.run_id])
        for by_task in states.values():
            if isinstance(by_task, dict) and self.stream_task_id in by_task:
                return str(by_task[self.stream_task_id])
        return None


ENDED = {"success", "failed", "upstream_failed", "skipped", "removed"}  # (not up_for_retry)


def send_snapshot_signal(cfg: ConnectorConfig, request: Mapping[str, Any]) -> dict[str, Any]:
    """Append the `execute-snapshot` signal to `<warehouse>/_state/signals`; returns what the
    sensor matches: the signal's id (the snapshot's correlation id)."""
    from connectors.signals.tables import send_delta_signal

    since = int(time.time() * 1000)
    sid = send_delta_signal(cfg.warehouse, cfg.name, "execute-snapshot", request["signal_data"])
    return {
        "since_ms": since,
        "aggregate_types": AGGREGATE_TYPES[request["type"]],
        # An incremental snapshot's notifications carry the signal's id; a blocking one sends
        # the initial snapshot's, each with an id of its own (as Debezium): the first to end it
        # after the signal was sent.
        "id": sid if request["type"] == "incremental" else None,
        "signal_id": sid,
    }


class TidemarkSnapshotSensor(BaseOperator):
    """Defers until the snapshot that the upstream task started has ended (see the trigger).

    Give it a retry or two: Airflow 3.3 can fail a deferred task whose trigger fires before the
    scheduler has taken in the deferral (a stale "success" of the deferring attempt is taken
    for a state change from outside; apache/airflow#67287, #72716). The retry finds the
    notification at once and succeeds without deferring."""

    ui_color = "#f0e4ec"

    def __init__(
        self,
        *,
        connector_file: str,
        start_task_ids: Sequence[str],
        timeout: timedelta = timedelta(hours=24),
        poll_interval: float = 2.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.connector_file = connector_file
        self.start_task_ids = list(start_task_ids)
        self.wait_timeout = timeout
        self.poll_interval = poll_interval

    def execute(self, context: Any) -> dict[str, Any]:
        from tidemark_airflow.triggers import NotificationTrigger, outcome

        pulled = context["ti"].xcom_pull(task_ids=self.start_task_ids)
        starts = [x for x in (pulled if isinstance(pulled, list) else [pulled]) if x]
        if not starts:
            raise AirflowException(f"none of {self.start_task_ids} started a snapshot")
        cfg = parse_config(Path(self.connector_file))
        trigger = NotificationTrigger(str(cfg.warehouse), cfg.name, dict(starts[0]), self.poll_interval)
        # Already ended (a retry of this task, or a snapshot quicker than the hand-over): no deferral.
        event = outcome(trigger._read(), trigger.match)
        if event is not None:
            return self.execute_complete(context, event)
        self.defer(
            trigger=trigger,
            method_name="execute_complete",
            timeout=self.wait_timeout,
        )

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") != "success":
            raise AirflowException(f"snapshot failed: {event.get('message')}")
        self.log.info("snapshot ended: %s", event.get("message"))
        return event


def config_or_fail(connector_file: str) -> ConnectorConfig:
    try:
        return parse_config(Path(connector_file))
    except (ConfigError, TidemarkError) as e:
        raise AirflowFailException(e.message) from None
