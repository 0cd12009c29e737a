"""Schema history in a Delta table, and Debezium's schema change event.

Table `<warehouse>/_state/schema_history` (delta-rs), one row per recorded DDL:
  connector, seq (order within the connector), file, pos, gtids (executed set before the DDL),
  event (row-event skip count at that point, normally 0), server_id, db, ddl,
  table_changes (JSON: [{type, db, table, old_table, definition}] with full table definitions),
  db_charset (the database default charset after the statement, for CREATE/DROP DATABASE), ts_ms.

`recover(upto)` rebuilds the model from the stored table definitions (not by re-parsing DDL, as
Debezium prefers `tableChanges` when present) for every record strictly before the offset's
binlog position — so rows after a restart are decoded with the schema in force at their
position, even when ALTERs happened while the connector was down (those DDL events follow the
offset and are re-read from the binlog).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from connectors.api import BinlogPosition, GtidSet, TransientError
from connectors.format.envelope import MARIADB_SOURCE, MYSQL_SOURCE
from connectors.format.schema import Schema, prim, struct
from connectors.sources.mysql.ddl import TableChange, ddl_targets
from connectors.sources.mysql.model import Column, Table, Tables

log = logging.getLogger(__name__)

SCHEMA = pa.schema(
    [
        pa.field("connector", pa.string(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("file", pa.string()),
        pa.field("pos", pa.int64()),
        pa.field("gtids", pa.string()),
        pa.field("event", pa.int64()),
        pa.field("server_id", pa.int64()),
        pa.field("db", pa.string()),
        pa.field("ddl", pa.string()),
        pa.field("table_changes", pa.string()),
        pa.field("db_charset", pa.string()),
        pa.field("ts_ms", pa.int64()),
    ]
)


SNAPSHOT_EVENT = -1  # `event` value of records written by a schema snapshot


@dataclass
class HistoryRecord:
    file: str
    pos: int
    gtids: str
    db: str
    ddl: str
    changes: list[TableChange]
    server_id: int = 0
    event: int = 0
    db_charset: str | None = None
    ts_ms: int = 0


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


class DeltaSchemaHistory:
    """Schema history of one connector. `table_filter(db, table)`/`db_filter(db)` say what is
    captured; with `store.only.captured.*.ddl` the others are not recorded."""

    def __init__(
        self,
        warehouse: str | Path,
        connector: str,
        *,
        table_filter: Callable[[str, str], bool] = lambda d, t: True,
        db_filter: Callable[[str], bool] = lambda d: True,
        store_only_captured_tables: bool = False,
        store_only_captured_databases: bool = False,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        self.uri = f"{str(warehouse).rstrip('/')}/_state/schema_history"
        self.connector = connector
        self.table_filter, self.db_filter = table_filter, db_filter
        self.only_tables, self.only_dbs = store_only_captured_tables, store_only_captured_databases
        self.storage_options = dict(storage_options or {})
        self._seq: int | None = None

    # ------------------------------------------------------------------ write
    def should_store(self, rec: HistoryRecord) -> bool:
        if self.only_dbs and rec.db and not self.db_filter(rec.db):
            return False
        if self.only_tables:
            # Debezium's DdlChanges.anyMatch: a table change of a captured table, or a statement on a
            # captured database; a statement that changed nothing counts by the tables it names
            if rec.changes:
                return any(self.table_filter(c.db, c.table) for c in rec.changes)
            targets = ddl_targets(rec.ddl, rec.db or None)
            if targets is not None:
                return any(self.table_filter(d, t) for d, t in targets.tables) or any(
                    self.db_filter(d) for d in targets.databases
                )
        return True

    def record(self, records: list[HistoryRecord]) -> int:
        """Append records (one Delta commit). Returns how many were stored."""
        from deltalake import write_deltalake
        from deltalake.exceptions import DeltaError

        keep = [r for r in records if self.should_store(r)]
        if not keep:
            return 0
        seq = self._next_seq()
        cols: dict[str, list[Any]] = {f.name: [] for f in SCHEMA}
        for r in keep:
            seq += 1
            cols["connector"].append(self.connector)
            cols["seq"].append(seq)
            cols["file"].append(r.file)
            cols["pos"].append(r.pos)
            cols["gtids"].append(r.gtids)
            cols["event"].append(r.event)
            cols["server_id"].append(r.server_id)
            cols["db"].append(r.db)
            cols["ddl"].append(r.ddl)
            cols["table_changes"].append(
                orjson.dumps(
                    [
                        {
                            "type": c.type,
                            "db": c.db,
                            "table": c.table,
                            "old_table": c.old_table,
                            "definition": c.definition.to_dict(),
                        }
                        for c in r.changes
                    ]
                ).decode()
            )
            cols["db_charset"].append(r.db_charset)
            cols["ts_ms"].append(r.ts_ms or int(time.time() * 1000))
        try:
            write_deltalake(
                self.uri,
                pa.table(cols, schema=SCHEMA),
                mode="append",
                partition_by=["connector"],
                storage_options=self.storage_options or None,
            )
        except (DeltaError, OSError) as e:
            raise TransientError(f"cannot write the schema history at {self.uri}: {e}") from None
        self._seq = seq
        return len(keep)

    def _next_seq(self) -> int:
        if self._seq is None:
            rows = self._rows()
            self._seq = max((r["seq"] for r in rows), default=0)
        return self._seq

    # ------------------------------------------------------------------ read
    def _rows(self) -> list[dict[str, Any]]:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            dt = DeltaTable(self.uri, storage_options=self.storage_options or None)
        except TableNotFoundError:
            return []
        tbl = dt.to_pyarrow_table(filters=[("connector", "=", self.connector)])
        return sorted(tbl.to_pylist(), key=lambda r: r["seq"])

    def exists(self) -> bool:
        return bool(self._rows())

    def records(self) -> list[dict[str, Any]]:
        return self._rows()

    def recover(self, upto: Mapping[str, Any] | None = None, server_charset: str = "utf8mb4") -> Tables:
        """The table model as it was at offset `upto` (all records when None)."""
        tables = Tables(server_charset=server_charset)
        stop = BinlogPosition(str(upto["file"]), int(upto["pos"])) if upto and upto.get("file") else None
        # With GTIDs, "at or before the offset" is GTID-set containment (a record's `gtids`
        # include its own statement), so a stale or failed-over file/pos does not matter.
        executed = GtidSet.parse(str(upto["gtids"])) if upto and upto.get("gtids") else None
        for r in self._rows():
            if executed is not None and r["gtids"]:
                if not executed.contains(GtidSet.parse(r["gtids"])):
                    break
            elif stop is not None and r["file"]:
                at = BinlogPosition(r["file"], int(r["pos"] or 0))
                # Snapshot records (event = -1) sit exactly at the offset they start streaming from.
                if at > stop or (at == stop and r["event"] != SNAPSHOT_EVENT):
                    break
            apply_record(tables, r)
        return tables

    def reset(self) -> None:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            DeltaTable(self.uri, storage_options=self.storage_options or None).delete(
                f"connector = {_sql_str(self.connector)}"
            )
        except TableNotFoundError:
            pass
        self._seq = None


def apply_record(tables: Tables, r: Mapping[str, Any]) -> None:
    kind = (r["ddl"] or "").lstrip().split(None, 2)
    words = [w.upper() for w in kind[:2]]
    if words[:1] == ["CREATE"] and len(words) > 1 and words[1] in ("DATABASE", "SCHEMA") and r["db"]:
        tables.db_charsets[r["db"]] = r["db_charset"] or tables.server_charset
    if words[:1] == ["DROP"] and len(words) > 1 and words[1] in ("DATABASE", "SCHEMA") and r["db"]:
        tables.db_charsets.pop(r["db"], None)
    for c in orjson.loads(r["table_changes"] or "[]"):
        if c["type"] == "DROP":
            tables.drop(c["db"], c["table"])
            continue
        if c.get("old_table"):
            tables.drop(c["db"], c["old_table"])
        tables.put(Table.from_dict(c["definition"]))


# --------------------------------------------------------------------------- schema change event
_COLUMN = struct(
    "io.debezium.connector.schema.Column",
    [
        ("name", prim("string")),
        ("jdbcType", prim("int32")),
        ("nativeType", prim("int32", optional=True)),
        ("typeName", prim("string")),
        ("typeExpression", prim("string", optional=True)),
        ("charsetName", prim("string", optional=True)),
        ("length", prim("int32", optional=True)),
        ("scale", prim("int32", optional=True)),
        ("position", prim("int32")),
        ("optional", prim("boolean", optional=True)),
        ("autoIncremented", prim("boolean", optional=True)),
        ("generated", prim("boolean", optional=True)),
        ("comment", prim("string", optional=True)),
        ("defaultValueExpression", prim("string", optional=True)),
        ("enumValues", Schema("array", optional=True, items=prim("string"))),
    ],
    version=1,
)
_TABLE = struct(
    "io.debezium.connector.schema.Table",
    [
        ("defaultCharsetName", prim("string", optional=True)),
        ("primaryKeyColumnNames", Schema("array", optional=True, items=prim("string"))),
        ("columns", Schema("array", items=_COLUMN)),
        ("comment", prim("string", optional=True)),
    ],
    optional=True,
    version=1,
)
_CHANGE = struct(
    "io.debezium.connector.schema.Change",
    [("type", prim("string")), ("id", prim("string")), ("table", _TABLE)],
    version=1,
)


def schema_change_schemas(connector: str = "mysql") -> tuple[Schema, Schema]:
    """(key schema, value schema) of schema change events; `connector` is mysql or mariadb."""
    source = MARIADB_SOURCE if connector == "mariadb" else MYSQL_SOURCE
    key = struct(
        f"io.debezium.connector.{connector}.SchemaChangeKey", [("databaseName", prim("string"))], version=1
    )
    value = struct(
        f"io.debezium.connector.{connector}.SchemaChangeValue",
        [
            ("source", source),
            ("ts_ms", prim("int64")),
            ("databaseName", prim("string", optional=True)),
            ("schemaName", prim("string", optional=True)),
            ("ddl", prim("string", optional=True)),
            ("tableChanges", Schema("array", items=_CHANGE)),
        ],
        version=1,
    )
    return key, value


def column_struct(c: Column) -> dict[str, Any]:
    return {
        "name": c.name,
        "jdbcType": c.jdbc_type,
        "nativeType": None,
        "typeName": c.type_name,
        "typeExpression": c.type_expression or c.type_name,
        "charsetName": c.charset,
        "length": c.length,
        "scale": c.scale,
        "position": c.position,
        "optional": c.optional,
        "autoIncremented": c.auto_increment,
        "generated": c.generated,
        "comment": c.comment,
        "defaultValueExpression": c.default if c.has_default and c.default is not None else None,
        "enumValues": ["'" + v.replace("'", "''") + "'" for v in c.enum_values] or None,
    }


def table_change_struct(ch: TableChange) -> dict[str, Any]:
    t = ch.definition
    return {
        "type": ch.type,
        "id": ch.id,
        "table": {
            "defaultCharsetName": t.default_charset,
            "primaryKeyColumnNames": list(t.primary_key),
            "columns": [column_struct(c) for c in t.columns],
            "comment": t.comment,
        },
    }


def schema_change_value(
    source: dict[str, Any], ts_ms: int, db: str, ddl: str, changes: list[TableChange]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(key payload, value payload) of one schema change event."""
    return {"databaseName": db}, {
        "source": source,
        "ts_ms": ts_ms,
        "databaseName": db,
        "schemaName": None,
        "ddl": ddl,
        "tableChanges": [table_change_struct(c) for c in changes],
    }
