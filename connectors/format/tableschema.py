"""One captured table's event shape: Key/Value/Envelope schemas and a compiled row converter.

Both connectors describe a table as a list of `ColumnDef` (source column → Connect schema and
converter) plus its key columns; this module applies the shared column rules (filters, masks,
truncation, hashing, `message.key.columns`, source-type propagation) and compiles one row
function per table version, so the per-event path is a single call.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from connectors.api import Record
from connectors.format.envelope import NEWKEY, OLDKEY, change_value, envelope_schema, key_header
from connectors.format.schema import NO_DEFAULT, Schema, struct
from connectors.format.topics import TopicNamer, schema_name
from connectors.settings.filters import ColumnRules, TableFilters
from connectors.settings.model import SourceSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ColumnDef:
    """A source column. `convert` maps the connector's raw value (never None) to the JSON-ready
    payload value; None means the raw value is already that. `unavailable` is the payload used
    when the source says the value was not sent (PostgreSQL unchanged TOAST)."""

    name: str
    schema: Schema
    convert: Callable[[Any], Any] | None = None
    type_name: str = ""
    length: int | None = None
    scale: int | None = None
    unavailable: Any = None
    emitted: bool = True  # False: an unknown type Debezium drops (the raw value is still positional)
    null: Any = NO_DEFAULT  # payload of a NULL when a column mapper decides it (a mask masks NULL too)


def column_null(col: ColumnDef) -> Any:
    """The payload a NULL of this column becomes."""
    if col.null is not NO_DEFAULT:
        return col.null
    schema = col.schema
    if (
        not schema.optional
        and schema.type == "string"
        and schema.name is None
        and schema.default is NO_DEFAULT
        and col.type_name.lower().split("(")[0] in _DECIMAL_TYPES
    ):
        # decimal.handling.mode=string: BigDecimal.ZERO at the column's scale ("0.00")
        scale = col.scale if col.scale is not None else (2 if col.type_name.lower() == "money" else 0)
        return "0." + "0" * scale if scale > 0 else "0"
    return null_value(schema)


_DECIMAL_TYPES = frozenset({"numeric", "decimal", "money", "dec", "fixed"})


def null_value(schema: Schema) -> Any:
    """What Debezium emits for a NULL: Kafka's JsonConverter writes a field's schema default in
    place of null (`replace.null.with.default`, on by default), and Debezium fills a required
    column without one with the type's zero value (e.g. the non-key columns of a DEFAULT-identity
    delete)."""
    if schema.default is not NO_DEFAULT and schema.default is not None:
        return schema.default
    if schema.optional:
        return None
    if schema.name in _ZERO_BY_NAME:
        return _ZERO_BY_NAME[schema.name]
    return _ZERO.get(schema.type)


_ZERO: dict[str, Any] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "float": 0.0,
    "double": 0.0,
    "boolean": False,
    "string": "",
    "bytes": "",
    "array": [],
}
# Logical types whose zero is not the plain type's (checked against Debezium 3.6: the value its
# converters produce for zero / the epoch).
_ZERO_BY_NAME: dict[str, Any] = {
    "org.apache.kafka.connect.data.Decimal": "AA==",  # BigDecimal.ZERO's unscaled byte 0x00
    "io.debezium.data.VariableScaleDecimal": {"scale": 0, "value": "AA=="},
    "io.debezium.time.ZonedTimestamp": "1970-01-01T00:00:00Z",
    "io.debezium.time.IsoTimestamp": "1970-01-01T00:00:00Z",
    "io.debezium.time.ZonedTime": "00:00:00Z",
    "io.debezium.time.IsoTime": "00:00:00Z",
    "io.debezium.time.IsoDate": "1970-01-01Z",
    "io.debezium.time.Interval": "P0Y0M0DT0H0M0S",
}


class TableSchema:
    """Event shape of one table version. `row(raw)` → Value payload dict, `key(raw)` → Key
    payload dict (None for keyless tables); `raw` is a sequence aligned with `columns`."""

    def __init__(
        self,
        namespace: str,
        table: str,
        topic: str,
        columns: list[ColumnDef],
        value_cols: list[int],
        key_cols: list[int],
        key_schema: Schema | None,
        value_schema: Schema,
        env_schema: Schema,
        unavailable_marker: Any,
    ) -> None:
        self.namespace, self.table, self.topic = namespace, table, topic
        self.collection = f"{namespace}.{table}"
        self.columns = columns
        self.key_schema, self.value_schema, self.envelope_schema = key_schema, value_schema, env_schema
        self.key_names = [columns[i].name for i in key_cols]
        self.value_cols, self.key_cols = value_cols, key_cols  # raw positions (fused decoders)
        self.row: Callable[[Sequence[Any]], dict[str, Any]] = _compile(
            columns, value_cols, unavailable_marker
        )
        self.key: Callable[[Sequence[Any]], dict[str, Any] | None] = (
            _compile(columns, key_cols, unavailable_marker) if key_cols else _no_key
        )


def unchanged_update(ts: TableSchema, old_raw: Sequence[Any] | None, new_raw: Sequence[Any]) -> bool:
    """skip.messages.without.change: Debezium drops an update whose `before` and `after` value
    structs are equal — captured columns only, after masks and truncation. Without an old row
    (PostgreSQL REPLICA IDENTITY DEFAULT) there is nothing to compare and the update is kept."""
    return old_raw is not None and ts.row(old_raw) == ts.row(new_raw)


def failure_mode(s: SourceSettings) -> str:
    """event.processing.failure.handling.mode: fail, warn or skip (`ignore` is skip's old name)."""
    mode = s.event_processing_failure_handling_mode
    return "skip" if mode == "ignore" else mode


def skipped_failed_event(mode: str, exc: Exception, what: str) -> None:
    """Log a change left out under event.processing.failure.handling.mode warn/skip. The values
    are not logged (the error message may quote them), only the error's type and position."""
    if mode == "warn":
        log.warning(
            "skipping the %s: a value could not be converted (%s; event.processing.failure.handling.mode"
            "=warn)",
            what,
            type(exc).__name__,
        )
    else:
        log.debug("skipping the %s: %s", what, type(exc).__name__, exc_info=exc)


def _no_key(_raw: Sequence[Any]) -> None:
    return None


def _compile(
    columns: list[ColumnDef], indices: list[int], marker: Any
) -> Callable[[Sequence[Any]], dict[str, Any]]:
    """Generate `lambda r: {"a": conv(r[0]) ..., ...}`: one dict literal per row is several
    times faster than a loop over column descriptors (measured in bench/)."""
    env: dict[str, Any] = {"_M": marker}
    items = []
    for n, i in enumerate(indices):
        col = columns[i]
        env[f"_c{n}"] = col.convert
        env[f"_u{n}"] = col.unavailable
        env[f"_n{n}"] = column_null(col)
        conv = f"_c{n}(v)" if col.convert is not None else "v"
        if marker is None:
            expr = f"(_n{n} if (v := r[{i}]) is None else {conv})"
        else:
            expr = f"(_n{n} if (v := r[{i}]) is None else _u{n} if v is _M else {conv})"
        items.append(f"{col.name!r}: {expr}")
    src = "def _row(r):\n    return {" + ", ".join(items) + "}\n"
    exec(compile(src, "<tableschema>", "exec"), env)  # noqa: S102 - generated from our own column list
    return env["_row"]


# (column) -> (type name that datatype.propagate.source.type matches, schema parameters): how a
# connector spells a column's source type; each connector's Debezium value converters differ.
SourceTypeHook = Callable[[ColumnDef], tuple[str, dict[str, str]]]


def _then(first: Callable[[Any], Any], second: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: second(first(v))


def build(
    namespace: str,
    table: str,
    columns: list[ColumnDef],
    primary_key: list[str],
    *,
    prefix: str,
    namer: TopicNamer,
    filters: TableFilters,
    rules: ColumnRules,
    source_schema: Schema,
    unavailable_marker: Any = None,
    source_type: SourceTypeHook | None = None,
) -> TableSchema:
    """Apply column filters/transforms and build the schemas of one table version."""
    table_id = f"{namespace}.{table}"
    propagating = bool(rules.propagate_columns or rules.propagate_types)
    spell = source_type or _propagated
    cols: list[ColumnDef] = []
    for col in columns:
        cid = f"{table_id}.{col.name}"
        schema, convert = col.schema, col.convert
        null: Any = NO_DEFAULT
        type_name, params = spell(col) if propagating else (col.type_name, {})
        # One mapper per column, the first that matches (Debezium's ColumnMappers.mapperFor).
        mapper = rules.first_mapper(cid, type_name)
        if mapper is not None:
            if mapper[0] == "propagate":
                schema = schema.with_parameters(params)
            else:
                if schema.type == "string":
                    fn = rules.mapper_transform(mapper, col.length)
                    if fn is not None:
                        convert = fn if convert is None else _then(convert, fn)
                        if mapper[0] == "mask":
                            null = fn(None)  # Debezium's MaskStrings replaces NULL as well
                mapped = _mapper_parameters(mapper, col.length)
                if mapped:
                    schema = schema.with_parameters(mapped)
        cols.append(
            ColumnDef(
                col.name,
                schema,
                convert,
                col.type_name,
                col.length,
                col.scale,
                col.unavailable,
                col.emitted,
                null,
            )
        )

    value_idx = [
        i for i, c in enumerate(cols) if c.emitted and filters.captures_column(namespace, table, c.name)
    ]
    key_names = rules.key_override(table_id) or primary_key
    by_name = {c.name: i for i, c in enumerate(cols) if c.emitted}
    missing = [k for k in key_names if k not in by_name]
    if missing:
        log.warning("table %s: key column(s) %s not found; the table's key is used", table_id, missing)
        key_names = [k for k in primary_key if k in by_name]
    key_idx = [by_name[k] for k in key_names]

    base = namer.schema_name(schema_name(prefix, namespace, table, "")[:-1])
    if namer.field_name.mode != "none":
        # field.name.adjustment.mode renames fields only: filters and key columns use the real names.
        cols = [dataclasses.replace(c, name=namer.field_name(c.name)) for c in cols]
    value_schema = struct(f"{base}.Value", [(cols[i].name, cols[i].schema) for i in value_idx], optional=True)
    # Key fields carry no column-mapper parameters (Debezium's TableSchemaBuilder maps value fields only).
    key_schema = (
        struct(f"{base}.Key", [(cols[i].name, columns[i].schema) for i in key_idx]) if key_idx else None
    )
    env = envelope_schema(base, value_schema, source_schema)
    return TableSchema(
        namespace,
        table,
        namer.data_topic(namespace, table),
        cols,
        value_idx,
        key_idx,
        key_schema,
        value_schema,
        env,
        unavailable_marker,
    )


def _any(patterns: Sequence[Any], name: str) -> bool:
    return any(p.fullmatch(name) for p in patterns)


def _mapper_parameters(mapper: tuple[Any, ...], length: int | None) -> dict[str, str]:
    """Schema parameters of Debezium's column mappers: `truncateLength` when the truncation can
    shorten the column (its length is unknown or longer), `masked` for a mask or hash — set on
    every matched column, whatever its type (TableSchemaBuilder calls alterFieldSchema for all)."""
    if mapper[0] == "truncate":
        n = mapper[1]
        return {"truncateLength": str(n)} if length is None or length < 0 or length > n else {}
    return {"masked": "true"}


def _propagated(col: ColumnDef) -> tuple[str, dict[str, str]]:
    """The default spelling (MySQL's): the declared type upper-cased, length/scale when known,
    the column name."""
    params = {"__debezium.source.column.type": col.type_name.upper()}
    if col.length is not None:
        params["__debezium.source.column.length"] = str(col.length)
    if col.scale is not None:
        params["__debezium.source.column.scale"] = str(col.scale)
    params["__debezium.source.column.name"] = col.name
    return col.type_name, params


def key_change(
    out: list[Record],
    ts: TableSchema,
    old_key: Any,
    new_key: Any,
    before: Any,
    after: Any,
    source: dict[str, Any],
    block: Callable[[], Any],
    *,
    skipped: set[str] | frozenset[str],
    tombstones: bool,
    offset: Any = None,
    pos: Sequence[Any] = (None, None, None),
) -> None:
    """An update that changed the primary key, as Debezium emits it for every connector: DELETE
    under the old key with header `__debezium.newkey`, its tombstone (same header), then CREATE
    under the new key with header `__debezium.oldkey`. `block()` is called once per emitted
    change event, in order (transaction counters); `pos` gives the delete/tombstone/create
    record positions."""
    if "d" not in skipped:
        newkey = ((NEWKEY, key_header(ts.key_schema, new_key)),)
        value = change_value(before, None, source, "d", block())
        out.append(
            Record(
                ts.topic,
                old_key,
                value,
                ts.key_schema,
                ts.envelope_schema,
                newkey,
                ts.collection,
                offset,
                pos[0],
            )
        )
        if tombstones:
            out.append(
                Record(
                    ts.topic,
                    old_key,
                    None,
                    ts.key_schema,
                    ts.envelope_schema,
                    newkey,
                    ts.collection,
                    offset,
                    pos[1],
                )
            )
    if "c" not in skipped:
        value = change_value(None, after, source, "c", block())
        out.append(
            Record(
                ts.topic,
                new_key,
                value,
                ts.key_schema,
                ts.envelope_schema,
                ((OLDKEY, key_header(ts.key_schema, old_key)),),
                ts.collection,
                offset,
                pos[2],
            )
        )
