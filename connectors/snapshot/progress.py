"""Per-chunk snapshot progress in Delta: `<warehouse>/_state/snapshots`.

One row per event, appended (never updated), partitioned by `connector`:
  connector, snapshot_id, event ("planned" | "chunk_done" | "completed"), table_name, chunk
  (index in the plan), lower / upper (JSON key tuples; null = open end), rows, position (the
  consistency point as the source's offset JSON), detail (JSON: what else the plan records),
  at (UTC).
The newest "planned" snapshot of a connector is its current one; it is finished once a
"completed" row exists. A chunk is done once a "chunk_done" row exists for it. The Delta sink's
own app transaction per chunk covers the moment between a chunk's data commit and its
"chunk_done" row (see `spark_jobs/snapshot.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from connectors.snapshot.chunks import Chunk
from connectors.state.storage import storage_error

SCHEMA = pa.schema(
    [
        pa.field("connector", pa.string(), nullable=False),
        pa.field("snapshot_id", pa.string(), nullable=False),
        pa.field("event", pa.string(), nullable=False),
        pa.field("table_name", pa.string()),
        pa.field("chunk", pa.int32()),
        pa.field("lower", pa.string()),
        pa.field("upper", pa.string()),
        pa.field("rows", pa.int64()),
        pa.field("position", pa.string()),
        pa.field("detail", pa.string()),
        pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
TABLE_CONFIGURATION = {"delta.logRetentionDuration": "interval 7 days"}


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _json(v: Any) -> str | None:
    return None if v is None else orjson.dumps(v).decode()


def _tuple(text: str | None) -> tuple[Any, ...] | None:
    return None if text is None else tuple(orjson.loads(text))


@dataclass
class SnapshotState:
    """A connector's newest snapshot as the table records it."""

    snapshot_id: str
    position: dict[str, Any]
    detail: dict[str, Any]
    chunks: list[Chunk]
    done: dict[int, int] = field(default_factory=dict)  # chunk index → rows
    # chunk index → the offset a done chunk is consistent at, when it has its own (lock-free MySQL)
    highs: dict[int, dict[str, Any]] = field(default_factory=dict)
    completed: bool = False

    @property
    def pending(self) -> list[Chunk]:
        return [c for c in self.chunks if c.index not in self.done]

    @property
    def rows(self) -> int:
        return sum(self.done.values())


class SnapshotProgress:
    """The `_state/snapshots` table of one connector. `warehouse`: local path or object-store URI."""

    def __init__(
        self, warehouse: str | Path, connector: str, *, storage_options: Mapping[str, str] | None = None
    ) -> None:
        self.table_uri = f"{str(warehouse).rstrip('/')}/_state/snapshots"
        self.connector = connector
        self._storage = dict(storage_options) if storage_options else None
        self._dt: Any = None  # the table, opened once: appends through it move it to their version

    # ------------------------------------------------------------------ writes
    def _append(self, rows: Sequence[Mapping[str, Any]]) -> None:
        from deltalake import DeltaTable, write_deltalake
        from deltalake.exceptions import DeltaError

        now = datetime.now(UTC)
        cols = {f.name: [r.get(f.name) for r in rows] for f in SCHEMA}
        cols["connector"] = [self.connector] * len(rows)
        cols["at"] = [now] * len(rows)
        table = pa.Table.from_pydict(cols, schema=SCHEMA)
        try:
            if self._dt is None and DeltaTable.is_deltatable(self.table_uri, storage_options=self._storage):
                self._dt = DeltaTable(self.table_uri, storage_options=self._storage)
            if self._dt is not None:
                # Several connectors may share the table: delta-rs retries blind appends. Through
                # the open table an append costs ~6 ms, by its URI ~30 ms (two opens).
                write_deltalake(self._dt, table, mode="append", partition_by=["connector"])
            else:
                write_deltalake(
                    self.table_uri,
                    table,
                    mode="append",
                    partition_by=["connector"],
                    name="tidemark snapshot progress",
                    storage_options=self._storage,
                    configuration=TABLE_CONFIGURATION,
                )
        except (DeltaError, OSError) as e:
            raise storage_error(e, self.table_uri, "the snapshot progress table") from None

    def plan(
        self,
        snapshot_id: str,
        chunks: Sequence[Chunk],
        position: Mapping[str, Any],
        detail: Mapping[str, Any],
    ) -> None:
        """Record a new snapshot's chunks and consistency point (one commit)."""
        rows: list[dict[str, Any]] = [
            {
                "snapshot_id": snapshot_id,
                "event": "planned",
                "table_name": c.table,
                "chunk": c.index,
                "lower": _json(c.lower),
                "upper": _json(c.upper),
                "position": _json(position),
                "detail": _json({**detail, **c.detail}),
            }
            for c in chunks
        ]
        if not rows:  # a snapshot of no table: still a snapshot, with its position
            rows = [
                {
                    "snapshot_id": snapshot_id,
                    "event": "planned",
                    "position": _json(position),
                    "detail": _json(detail),
                }
            ]
        self._append(rows)

    def chunks_done(
        self,
        snapshot_id: str,
        done: Sequence[tuple[Chunk, int]],
        positions: Mapping[int, Mapping[str, Any]] | None = None,
    ) -> None:
        """Record finished chunks with their row counts (one commit for all of them), and the
        position each is consistent at when it has its own (`positions`, by chunk index)."""
        if done:
            self._append(
                [
                    {
                        "snapshot_id": snapshot_id,
                        "event": "chunk_done",
                        "table_name": c.table,
                        "chunk": c.index,
                        "rows": n,
                        "position": _json((positions or {}).get(c.index)),
                    }
                    for c, n in done
                ]
            )

    def complete(self, snapshot_id: str, rows: int, position: Mapping[str, Any]) -> None:
        self._append(
            [{"snapshot_id": snapshot_id, "event": "completed", "rows": rows, "position": _json(position)}]
        )

    # ------------------------------------------------------------------ reads
    def latest(self) -> SnapshotState | None:
        """The connector's newest snapshot (by its first "planned" row), or None."""
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError

        try:
            if not DeltaTable.is_deltatable(self.table_uri, storage_options=self._storage):
                return None
            t = DeltaTable(self.table_uri, storage_options=self._storage).to_pyarrow_table(
                filters=[("connector", "=", self.connector)]
            )
        except (DeltaError, OSError) as e:
            raise storage_error(e, self.table_uri, "the snapshot progress table") from None
        if t.num_rows == 0:
            return None
        planned = t.filter(pc.equal(t["event"], "planned"))
        if planned.num_rows == 0:
            return None
        newest = planned.sort_by([("at", "descending")])["snapshot_id"][0].as_py()
        mine = t.filter(pc.equal(t["snapshot_id"], newest)).to_pylist()
        plan = [r for r in mine if r["event"] == "planned"]
        chunks = sorted(
            (
                Chunk(
                    r["table_name"],
                    r["chunk"],
                    _tuple(r["lower"]),
                    _tuple(r["upper"]),
                    orjson.loads(r["detail"]) if r["detail"] else {},
                )
                for r in plan
                if r["table_name"] is not None
            ),
            key=lambda c: c.index,
        )
        first = plan[0]
        state = SnapshotState(
            newest,
            orjson.loads(first["position"]) if first["position"] else {},
            {
                k: v
                for k, v in (orjson.loads(first["detail"]) if first["detail"] else {}).items()
                if k not in Chunk.DETAIL_KEYS
            },
            chunks,
        )
        for r in mine:
            if r["event"] == "chunk_done":
                state.done[r["chunk"]] = r["rows"] or 0
                if r["position"]:
                    state.highs[r["chunk"]] = orjson.loads(r["position"])
            elif r["event"] == "completed":
                state.completed = True
        return state

    def completed_any(self) -> bool:
        """Whether any snapshot of this connector ever completed."""
        from deltalake import DeltaTable

        if not DeltaTable.is_deltatable(self.table_uri, storage_options=self._storage):
            return False
        t = DeltaTable(self.table_uri, storage_options=self._storage).to_pyarrow_table(
            columns=["event"], filters=[("connector", "=", self.connector), ("event", "=", "completed")]
        )
        return t.num_rows > 0

    def forget(self) -> None:
        """Remove the connector's snapshot history (`tidemark offsets reset` does this too)."""
        from deltalake import DeltaTable

        if DeltaTable.is_deltatable(self.table_uri, storage_options=self._storage):
            DeltaTable(self.table_uri, storage_options=self._storage).delete(
                f"connector = {_sql_str(self.connector)}"
            )
