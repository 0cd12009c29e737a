"""Tidemark's Airflow DAG factory: one DAG family per connector file.

For every `<name>.properties` / `<name>.yaml` in the connectors directory (`$TIDEMARK_CONNECTORS_DIR`,
else the Airflow Variable `tidemark_connectors_dir`, else `dags/connectors/`):

- `tidemark_<name>_stream`: the connector, supervised (one active run, restarted with capped
  exponential backoff, SIGTERM → offsets stored); Param `until_caught_up`. With
  `tidemark.incremental.snapshot.reader=spark` a second task, `read_chunks`, runs the
  incremental snapshot chunk job through spark-submit whenever a snapshot runs.
- `tidemark_<name>_snapshot`: Params `type` (initial / incremental / blocking), `tables`,
  `additional_conditions`, `surrogate_key`; scheduled incremental snapshots on
  `tidemark.airflow.snapshot.schedule`.
- `tidemark_<name>_maintenance`: daily Delta OPTIMIZE / VACUUM / checkpoints and the source's log
  retention against the stored position.

Nothing here connects to a database, a Spark master or the warehouse: files are read and
validated only. A file that does not validate builds no DAG; its error (file and key) is an
Airflow import error of this file, and every other connector's DAGs load.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

try:
    import tidemark_airflow  # noqa: F401 - Airflow puts the plugins folder on sys.path
except ImportError:  # e.g. a DagBag built outside Airflow's processes
    sys.path.append(str(Path(__file__).resolve().parents[1] / "plugins"))

from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowFailException
from airflow.task.trigger_rule import TriggerRule
from tidemark_airflow.assets import changelog_asset
from tidemark_airflow.config import ConnectorFile, discover, runtime_config
from tidemark_airflow.operators import (
    SNAPSHOT_TYPES,
    TidemarkChunkJobSubmitOperator,
    TidemarkSnapshotSensor,
    TidemarkSnapshotSubmitOperator,
    TidemarkStreamOperator,
    check_snapshot_request,
    send_snapshot_signal,
    snapshot_request,
)

from connectors.api import ConfigError

# Every DAG of the family: one run at a time, no back-fill of missed intervals.
COMMON: dict[str, Any] = {
    "start_date": datetime(2024, 1, 1, tzinfo=UTC),
    "catchup": False,
    "max_active_runs": 1,
    "tags": ["tidemark"],
}


class BrokenConnectorFiles(DAG):
    """Stands for the connector files that do not validate: bagging it fails with their errors,
    which Airflow records as this file's import error (the other DAGs of the file still load)."""

    tidemark_errors: tuple[str, ...] = ()

    def validate(self) -> None:
        raise ConfigError("\n".join(self.tidemark_errors))


def _cron(cf: ConnectorFile) -> str | None:
    """`tidemark.airflow.snapshot.schedule`, checked as a cron expression (a ConfigError naming file and key)."""
    assert cf.cfg is not None
    expr = cf.cfg.runtime.airflow_snapshot_schedule
    if not expr:
        return None
    from croniter import croniter

    if not croniter.is_valid(expr):
        raise ConfigError(
            f"{cf.path}: tidemark.airflow.snapshot.schedule={expr!r}: not a cron expression",
            "five fields, e.g. 0 3 * * * (every day at 03:00)",
        )
    return expr


def stream_dag(cf: ConnectorFile) -> DAG:
    assert cf.cfg is not None
    asset = changelog_asset(cf.name, cf.cfg)
    with DAG(
        f"tidemark_{cf.name}_stream",
        description=f"Tidemark connector {cf.cfg.name} ({cf.cfg.connector}) from {cf.path}",
        schedule="@continuous",
        **COMMON,
        params={
            "until_caught_up": Param(
                False, type="boolean", description="Stop once caught up with the log position at start"
            )
        },
        doc_md=__doc__,
    ) as dag:
        retry = {
            "retries": 10,
            "retry_delay": timedelta(seconds=15),
            "retry_exponential_backoff": 2.0,
            "max_retry_delay": timedelta(minutes=10),
        }
        TidemarkStreamOperator(
            task_id="stream",
            connector_file=str(cf.path),
            outlets=[asset] if asset is not None else [],
            **retry,
        )
        if cf.cfg.runtime.incremental_snapshot_reader == "spark":
            # the incremental snapshots' chunk job, through spark-submit, while the stream runs
            TidemarkChunkJobSubmitOperator(task_id="read_chunks", connector_file=str(cf.path), **retry)
    return dag


def snapshot_dag(cf: ConnectorFile, cron: str | None) -> DAG:
    assert cf.cfg is not None
    path = cf.path
    asset = changelog_asset(cf.name, cf.cfg)
    with DAG(
        f"tidemark_{cf.name}_snapshot",
        description=f"Snapshots of connector {cf.cfg.name}: initial (Spark job) or incremental/blocking (signal)",
        schedule=cron,
        **COMMON,
        params={
            "type": Param(
                "initial", enum=list(SNAPSHOT_TYPES), description="initial, incremental or blocking"
            ),
            "tables": Param(
                [],
                type="array",
                items={"type": "string"},
                description="schema.table (PostgreSQL) or database.table (MySQL) names or regexes; empty = every captured table",
            ),
            "additional_conditions": Param(
                {},
                type="object",
                additionalProperties={"type": "string"},
                description='per table a filter, e.g. {"public.orders": "status = \'open\'"}',
            ),
            "surrogate_key": Param(
                None,
                type=["null", "string"],
                description="column to chunk by instead of the key (incremental)",
            ),
        },
    ) as dag:

        @task(task_id="check")
        def check(**context: Any) -> dict[str, Any]:
            """The form's values against the captured tables: refused here, before anything runs."""
            with runtime_config(path) as (_, cfg):
                req = snapshot_request(context["params"], context["dag_run"].run_type, cfg)
                return check_snapshot_request(cfg, req)

        @task.branch(task_id="choose")
        def choose(request: dict[str, Any]) -> str:
            return "initial_snapshot" if request["type"] == "initial" else "send_signal"

        @task(task_id="send_signal")
        def send_signal(request: dict[str, Any]) -> dict[str, Any]:
            from connectors.engine.status import read_status

            with runtime_config(path) as (_, cfg):
                recent = read_status(cfg.warehouse, cfg.name, datetime.now(UTC) - timedelta(minutes=2))
                if not any(r["state"] == "running" for r in recent):
                    print(
                        f"connector {cfg.name} reported no health in the last 2 minutes: the signal waits "
                        f"until tidemark_{cf.name}_stream runs"
                    )
                return send_snapshot_signal(cfg, request)

        req = check()
        branch = choose(req)
        initial = TidemarkSnapshotSubmitOperator(task_id="initial_snapshot", connector_file=str(path))
        signal = send_signal(req)
        wait = TidemarkSnapshotSensor(
            task_id="wait_for_snapshot",
            connector_file=str(path),
            start_task_ids=["initial_snapshot", "send_signal"],
            trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS,
            outlets=[asset] if asset is not None else [],
            # See TidemarkSnapshotSensor: a retry ends the run Airflow's deferral race failed.
            retries=2,
            retry_delay=timedelta(seconds=5),
        )
        branch >> [initial, signal]
        [initial, signal] >> wait
    return dag


def maintenance_dag(cf: ConnectorFile) -> DAG:
    assert cf.cfg is not None
    path = cf.path
    with DAG(
        f"tidemark_{cf.name}_maintenance",
        description=f"Delta OPTIMIZE/VACUUM and log-retention checks of connector {cf.cfg.name}",
        schedule="@daily",
        **COMMON,
        params={
            "retention_hours": Param(
                168,
                type="integer",
                minimum=0,
                description="VACUUM removes files unreferenced for this long; below 168 only while the "
                "connector and snapshots are stopped (a running writer may still need newer ones)",
            )
        },
    ) as dag:

        @task(task_id="compact_and_vacuum")
        def compact(**context: Any) -> dict[str, Any]:
            from tidemark_airflow.maintenance import compact_and_vacuum

            with runtime_config(path) as (_, cfg):
                return compact_and_vacuum(cfg, int(context["params"]["retention_hours"]))

        @task(task_id="check_log_retention")
        def retention() -> dict[str, Any]:
            from tidemark_airflow.maintenance import RetentionError, check_retention

            with runtime_config(path) as (_, cfg):
                try:
                    return check_retention(cfg)
                except RetentionError as e:
                    raise AirflowFailException(str(e)) from None

        compact()
        retention()
    return dag


def build(cf: ConnectorFile) -> list[DAG]:
    cron = _cron(cf)  # before any DAG exists: a bad schedule builds none of the connector's DAGs
    return [stream_dag(cf), snapshot_dag(cf, cron), maintenance_dag(cf)]


_errors: list[str] = []
for _cf in discover():
    if _cf.cfg is not None:
        try:
            for _dag in build(_cf):
                globals()[_dag.dag_id] = _dag
            continue
        except ConfigError as e:
            _cf = ConnectorFile(
                _cf.name, _cf.path, None, e.message + (f"\n  hint: {e.hint}" if e.hint else "")
            )
    _errors.append(f"connector file {_cf.path} (DAGs tidemark_{_cf.name}_*): {_cf.error}")
if _errors:
    tidemark_broken_connectors = BrokenConnectorFiles("tidemark_broken_connector_files", schedule=None)
    tidemark_broken_connectors.tidemark_errors = tuple(_errors)
