"""Example: a DAG scheduled on the change-log Assets of the Tidemark connectors.

Each connector's change log (`<warehouse>/<topic.prefix>/changelog`) is the Asset
`tidemark_<name>_changelog`; the stream task (when a bounded run ends) and the snapshot DAG
(when a snapshot completed) update it. This DAG runs whenever any of them is updated and logs,
per updated table, the Delta version and the operations it holds: replace the task with your own
(a merge into a mirror table, a dbt run, ...).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

try:
    import tidemark_airflow  # noqa: F401 - the plugins folder is on sys.path under Airflow
except ImportError:
    sys.path.append(str(Path(__file__).resolve().parents[1] / "plugins"))

from airflow.sdk import DAG, task
from tidemark_airflow.assets import changelog_asset
from tidemark_airflow.config import discover

_assets = [
    a for cf in discover() if cf.cfg is not None and (a := changelog_asset(cf.name, cf.cfg)) is not None
]

if _assets:
    schedule: Any = _assets[0]
    for _a in _assets[1:]:
        schedule = schedule | _a
    with DAG(
        "tidemark_example_changelog_consumer",
        description="Example: runs when a Tidemark change log was updated",
        schedule=schedule,
        start_date=datetime(2024, 1, 1, tzinfo=UTC),
        catchup=False,
        tags=["tidemark", "example"],
    ) as tidemark_example_changelog_consumer:

        @task
        def summarize(**context: Any) -> dict[str, Any]:
            from deltalake import DeltaTable

            out = {}
            for asset_key in context["triggering_asset_events"]:
                uri = asset_key.uri.removeprefix("file://")
                dt = DeltaTable(uri)
                ops = dt.to_pyarrow_table(columns=["op"]).column("op").value_counts().to_pylist()
                out[asset_key.name] = {
                    "version": dt.version(),
                    "ops": {o["values"]: o["counts"] for o in ops},
                }
                print(f"{asset_key.name}: version {dt.version()}, {out[asset_key.name]['ops']}")
            return out

        summarize()
