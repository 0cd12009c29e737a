"""The change-log tables as Airflow Assets: the stream task (when a bounded run ends) and the
snapshot DAG (when a snapshot completed) update them, so downstream DAGs can be scheduled on them."""

from __future__ import annotations

from airflow.sdk import Asset

from connectors.settings.config import ConnectorConfig
from tidemark_airflow.maintenance import changelog_uri


def changelog_asset(name: str, cfg: ConnectorConfig) -> Asset | None:
    """`tidemark_<name>_changelog`, at the table's URI (a local path as file://); None without a Delta sink."""
    uri = changelog_uri(cfg)
    if uri is None:
        return None
    if "://" not in uri:
        uri = "file://" + uri
    return Asset(name=f"tidemark_{name}_changelog", uri=uri, group="tidemark")
