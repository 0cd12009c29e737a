"""Source offsets in a Delta table (for connectors whose sinks keep no offsets, e.g. Kafka only).

Table `<warehouse>/_state/offsets`, shared by all connectors, partitioned by `connector`:
columns connector, seq, offset (JSON text), committed_at (UTC). Each `save` appends one row in
one commit that also sets the app transaction `offsets:<connector>` = seq, so the newest saved
seq is readable from the log alone (`last_seq`). `load` returns the row with the highest seq;
`reset` deletes the connector's rows (a partition delete: metadata only).

Saves come once a second from a streaming connector: every `COMPACT_EVERY` saves the
connector's older rows are deleted (a metadata-only delete: one row per file) and files removed
more than an hour ago are vacuumed, so `load` reads a handful of files however long the
connector has run, and the directory does not fill with one file per second. A table this
module creates keeps one day of log (`delta.logRetentionDuration`) instead of Delta's 30.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from connectors.state.storage import storage_error

log = logging.getLogger(__name__)

SCHEMA = pa.schema(
    [
        pa.field("connector", pa.string(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("offset", pa.string(), nullable=False),
        pa.field("committed_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


COMPACT_EVERY = 100
VACUUM_RETENTION_HOURS = 1
TABLE_CONFIGURATION = {"delta.logRetentionDuration": "interval 1 days"}


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


class DeltaOffsetStore:
    """`OffsetStore` on Delta. `warehouse`: local path or object-store URI."""

    def __init__(
        self, warehouse: str | Path, connector_name: str, *, storage_options: Mapping[str, str] | None = None
    ) -> None:
        self.table_uri = f"{str(warehouse).rstrip('/')}/_state/offsets"
        self.connector = connector_name
        self.app_id = f"offsets:{connector_name}"
        self._storage = dict(storage_options) if storage_options else None
        self._dt: Any = None
        self._saves = 0

    def _table(self, refresh: bool = False) -> Any:
        from deltalake import DeltaTable

        if self._dt is None:
            if not DeltaTable.is_deltatable(self.table_uri, storage_options=self._storage):
                return None
            self._dt = DeltaTable(self.table_uri, storage_options=self._storage)
        elif refresh:
            self._dt.update_incremental()
        return self._dt

    def save(self, seq: int, offset: dict[str, Any]) -> None:
        from deltalake import CommitProperties, Transaction, write_deltalake
        from deltalake.exceptions import DeltaError

        row = pa.Table.from_arrays(
            [
                pa.array([self.connector]),
                pa.array([seq], pa.int64()),
                pa.array([orjson.dumps(offset).decode()]),
                pa.array([datetime.now(UTC)], pa.timestamp("us", tz="UTC")),
            ],
            schema=SCHEMA,
        )
        props = CommitProperties(
            app_transactions=[Transaction(self.app_id, seq)],
            custom_metadata={"tidemark.connector": self.connector},
        )
        try:
            dt = self._table()
            if dt is None:
                write_deltalake(
                    self.table_uri,
                    row,
                    mode="append",
                    partition_by=["connector"],
                    name="tidemark offsets",
                    storage_options=self._storage,
                    commit_properties=props,
                    configuration=TABLE_CONFIGURATION,
                )
            else:
                # Other connectors append to the same table: delta-rs retries blind appends.
                write_deltalake(dt, row, mode="append", partition_by=["connector"], commit_properties=props)
            self._saves += 1
            if self._saves % COMPACT_EVERY == 0:
                self._compact(seq)
        except (DeltaError, OSError) as e:
            raise storage_error(e, self.table_uri, "the offset store") from None

    def _compact(self, seq: int) -> None:
        """Drop this connector's rows older than `seq` (just saved) and vacuum old files."""
        dt = self._table(refresh=True)
        dt.delete(f"connector = {_sql_str(self.connector)} AND seq < {int(seq)}")
        dt.vacuum(retention_hours=VACUUM_RETENTION_HOURS, enforce_retention_duration=False, dry_run=False)

    def load(self) -> tuple[int, dict[str, Any]] | None:
        dt = self._table(refresh=True)
        if dt is None:
            return None
        t = dt.to_pyarrow_table(
            columns=["seq", "offset", "committed_at"], filters=[("connector", "=", self.connector)]
        )
        if t.num_rows == 0:
            return None
        # Highest seq wins; among equal seqs (a retried save) the later one.
        idx = pc.sort_indices(t, [("seq", "descending"), ("committed_at", "descending")])[0].as_py()
        return int(t["seq"][idx].as_py()), orjson.loads(t["offset"][idx].as_py())

    def last_seq(self) -> int | None:
        """The seq of the newest save, from the Delta log alone (no data files read)."""
        dt = self._table(refresh=True)
        v = None if dt is None else dt.transaction_version(self.app_id)
        return None if v is None or v < 0 else v

    def reset(self) -> None:
        dt = self._table(refresh=True)
        if dt is None:
            return
        from deltalake import CommitProperties, Transaction

        # The app transaction goes back to -1 ("nothing saved") in the same commit.
        metrics = dt.delete(
            f"connector = {_sql_str(self.connector)}",
            commit_properties=CommitProperties(app_transactions=[Transaction(self.app_id, -1)]),
        )
        log.info(
            "offset store: removed %s row(s) of connector %s", metrics.get("num_deleted_rows"), self.connector
        )
