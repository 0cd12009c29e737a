"""PostgreSQL column type -> Kafka Connect schema + value converter, as Debezium 3.6 does it.

`column_mapping` is called once per column per table version and returns a `ColumnMapping` whose
`convert` is a closure specialised for that column: it takes the pgoutput TEXT form of a non-null
value and returns the JSON-converter-ready payload value. No per-value dispatch on type names.

Debezium facts reproduced here (see tests/golden/postgres for the captured originals):
- length/scale come from pgjdbc's TypeInfoCache rules applied to the pgoutput typmod; arrays
  therefore get length 2147483647 and scale 0 for their elements (timestamp[] elements are
  millisecond `Timestamp`s, timestamptz[] elements use minimal ISO fractions).
- TIMESTAMPTZ text has exactly `scale` fractional digits (6 unless declared), TIMETZ minimal ones.
- NaN in a precise (VariableScaleDecimal or Decimal) numeric becomes null; string mode writes NAN.
- hstore maps come out in Java HashMap iteration order.
- Column defaults follow PostgresDefaultValueConverter (defaults.py).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from connectors.format import temporal as T
from connectors.format.schema import NO_DEFAULT, Schema, prim, struct
from connectors.settings.model import PostgresSettings
from connectors.settings.modes import BinaryMode, DecimalMode, HstoreMode, IntervalMode, PgTimePrecision
from connectors.sources.postgres.catalog import ColumnInfo, TypeInfo, TypeRegistry
from connectors.sources.postgres.defaults import default_value
from connectors.sources.postgres.oids import (
    BIT,
    BOOL,
    BPCHAR,
    BYTEA,
    CHAR,
    CIDR,
    DATE,
    DATERANGE,
    FLOAT4,
    FLOAT8,
    INET,
    INT2,
    INT4,
    INT4RANGE,
    INT8,
    INT8RANGE,
    INTERVAL,
    JSON,
    JSONB,
    MACADDR,
    MACADDR8,
    MONEY,
    NAME,
    NO_TYPMOD,
    NUMERIC,
    NUMRANGE,
    OID,
    POINT,
    TEXT,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    TIMETZ,
    TSRANGE,
    TSTZRANGE,
    TSVECTOR,
    UUID,
    VARBIT,
    VARCHAR,
    XML,
)
from connectors.sources.postgres.textparse import (
    bytea_from_text,
    ewkb_srid,
    hstore_json,
    hstore_map,
    json_str,
    money_decimal,
    parse_array,
    parse_point,
    point_wkb,
)
from connectors.sources.postgres.typmod import (
    UNKNOWN_LENGTH,
    VARIABLE_SCALE_DECIMAL_LENGTH,
    jdbc_length,
    jdbc_scale,
)

_STRING_OIDS = frozenset(
    {
        CHAR,
        NAME,
        TEXT,
        BPCHAR,
        VARCHAR,
        INET,
        CIDR,
        MACADDR,
        MACADDR8,
        INT4RANGE,
        NUMRANGE,
        TSRANGE,
        TSTZRANGE,
        DATERANGE,
        INT8RANGE,
    }
)
# Array types Debezium declares it cannot handle yet (PostgresValueConverter, DBZ-459): dropped.
_UNSUPPORTED_ARRAYS = frozenset({791, 1003, 1187, 1563, 143, 1017, 2201, 1561})
# Element types whose arrays Debezium maps with an *optional* element schema (explicit cases).
_EXPLICIT_ARRAY_ELEMS = frozenset(
    {
        INT2,
        INT4,
        INT8,
        OID,
        CHAR,
        VARCHAR,
        TEXT,
        BPCHAR,
        INET,
        CIDR,
        MACADDR,
        MACADDR8,
        TSRANGE,
        TSTZRANGE,
        DATERANGE,
        INT4RANGE,
        NUMRANGE,
        INT8RANGE,
        NUMERIC,
        FLOAT4,
        FLOAT8,
        BOOL,
        DATE,
        UUID,
        JSONB,
        JSON,
        TIME,
        TIMETZ,
        TIMESTAMP,
        TIMESTAMPTZ,
        BYTEA,
    }
)
_EXT_ARRAY_ELEMS = frozenset({"geometry", "geography", "citext", "hstore", "ltree"})


@dataclass(frozen=True, slots=True)
class TypeModes:
    """The type-related settings the converters need (`from_settings`). The defaults here are
    Debezium's, for tests and tools that build converters by hand; a connector always builds
    them from its settings."""

    decimal: DecimalMode = "precise"
    time_precision: PgTimePrecision = "adaptive"
    hstore: HstoreMode = "json"
    interval: IntervalMode = "numeric"
    binary: BinaryMode = "bytes"
    money_fraction_digits: int = 2
    include_unknown: bool = False
    placeholder: str = "__debezium_unavailable_value"  # unavailable.value.placeholder ("hex:" = bytes)

    @classmethod
    def from_settings(cls, s: PostgresSettings) -> TypeModes:
        return cls(
            decimal=s.decimal_handling_mode,
            time_precision=s.time_precision_mode,
            hstore=s.hstore_handling_mode,
            interval=s.interval_handling_mode,
            binary=s.binary_handling_mode,
            money_fraction_digits=s.money_fraction_digits,
            include_unknown=s.include_unknown_datatypes,
            placeholder=s.unavailable_value_placeholder,
        )

    @property
    def placeholder_bytes(self) -> bytes:
        if self.placeholder.startswith("hex:"):
            return bytes.fromhex(self.placeholder[4:])
        return self.placeholder.encode("utf-8")

    @property
    def placeholder_text(self) -> str:
        return self.placeholder_bytes.decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class ColumnMapping:
    schema: Schema
    convert: Callable[[str], Any]


Converter = Callable[[str], Any]

# --------------------------------------------------------------------------- schemas


def _named(type_: str, name: str) -> Schema:
    return prim(type_, name=name, version=1)


JSON_SCHEMA = _named("string", "io.debezium.data.Json")
XML_SCHEMA = _named("string", "io.debezium.data.Xml")
UUID_SCHEMA = _named("string", "io.debezium.data.Uuid")
LTREE_SCHEMA = _named("string", "io.debezium.data.Ltree")
TSVECTOR_SCHEMA = _named("string", "io.debezium.data.TsVector")
POINT_SCHEMA = struct(
    "io.debezium.data.geometry.Point",
    [
        ("x", prim("double")),
        ("y", prim("double")),
        ("wkb", prim("bytes", True)),
        ("srid", prim("int32", True)),
    ],
    version=1,
    doc="Geometry (POINT)",
)
GEOMETRY_SCHEMA = struct(
    "io.debezium.data.geometry.Geometry",
    [("wkb", prim("bytes")), ("srid", prim("int32", True))],
    version=1,
    doc="Geometry",
)
GEOGRAPHY_SCHEMA = struct(
    "io.debezium.data.geometry.Geography",
    [("wkb", prim("bytes")), ("srid", prim("int32", True))],
    version=1,
    doc="Geography",
)
HSTORE_MAP_SCHEMA = Schema("map", keys=prim("string"), values=prim("string", True))


def enum_schema(labels: tuple[str, ...] | list[str]) -> Schema:
    return prim("string", name="io.debezium.data.Enum", version=1, parameters={"allowed": ",".join(labels)})


def _float(text: str) -> float | str:
    return text if text in ("NaN", "Infinity", "-Infinity") else float(text)


def _bool(text: str) -> bool:
    return text == "t"


# --------------------------------------------------------------------------- the mapping


def _decimal_mapping(length: int, scale: int, modes: TypeModes) -> tuple[Schema, Converter]:
    variable = length in (0, VARIABLE_SCALE_DECIMAL_LENGTH) and scale == 0
    mode = modes.decimal
    if mode == "double":

        def conv_double(s: str) -> Any:
            return "NaN" if s == "NaN" else T.double_json(float(Decimal(s)))

        return prim("double"), conv_double
    if mode == "string":
        if variable:

            def conv_vstr(s: str) -> Any:
                d = T.parse_decimal(s)
                return s.upper() if d is None else T.java_bigdecimal_string(d)

            return prim("string"), conv_vstr

        def conv_str(s: str) -> Any:
            d = T.parse_decimal(s)
            if d is None:
                return s.upper()
            u, sc = T.decimal_parts(d)
            # built from text: scaleb() would round to the context's 28 digits
            return T.java_bigdecimal_string(Decimal(f"{T.set_scale(u, sc, scale)}E-{scale}"))

        return prim("string"), conv_str
    if variable:

        def conv_var(s: str) -> Any:
            d = T.parse_decimal(s)
            return None if d is None else T.variable_scale_decimal(d)

        return T.VARIABLE_SCALE_DECIMAL_SCHEMA, conv_var

    def conv_fixed(s: str, b64: Any = binascii.b2a_base64) -> Any:
        # numeric(p,s) prints exactly `scale` fraction digits: the unscaled value is the digits
        # (one int() instead of Decimal arithmetic; this runs per row and column).
        ip, _, fp = s.partition(".")
        if len(fp) == scale:
            try:
                n = int(ip + fp)
            except ValueError:  # NaN, Infinity
                pass
            else:
                return b64(
                    n.to_bytes(((n + (n < 0)).bit_length() >> 3) + 1, "big", signed=True), newline=False
                ).decode()
        d = T.parse_decimal(s)
        return None if d is None else T.decimal_b64(d, scale)

    return T.decimal_schema(scale, length), conv_fixed


def _money_mapping(modes: TypeModes) -> tuple[Schema, Converter]:
    digits = modes.money_fraction_digits
    if modes.decimal == "double":
        return prim("double"), lambda s: float(money_decimal(s))
    if modes.decimal == "string":
        return prim("string"), lambda s: T.java_plain_string(money_decimal(s))
    return T.decimal_schema(digits), lambda s: T.decimal_b64(money_decimal(s), digits)


def _interval_mapping(modes: TypeModes) -> tuple[Schema, Converter]:
    if modes.interval == "string":
        return T.INTERVAL_SCHEMA, lambda s: T.interval_iso(*T.parse_pg_interval(s))
    return T.MICRO_DURATION_SCHEMA, lambda s: T.interval_micros(*T.parse_pg_interval(s))


def _time_mapping(scale: int, modes: TypeModes) -> tuple[Schema, Converter]:
    schema = T.time_schema(modes.time_precision, scale)
    if schema is T.MICRO_TIME_SCHEMA:
        return schema, T.parse_time_micros
    if schema is T.NANO_TIME_SCHEMA:
        return schema, lambda s: T.parse_time_micros(s) * 1000
    if schema is T.ISO_TIME_SCHEMA:
        return schema, lambda s: T.format_zoned_time(T.parse_time_micros(s))
    # Time (ms) and Connect Time both carry millis of day (truncated, Duration.toMillis).
    return schema, lambda s: T.parse_time_micros(s) // 1000


def _timestamp_mapping(scale: int, modes: TypeModes) -> tuple[Schema, Converter]:
    schema = T.timestamp_schema(modes.time_precision, scale)
    if schema is T.MICRO_TIMESTAMP_SCHEMA:
        return schema, T.pg_timestamp_to_micros
    if schema is T.NANO_TIMESTAMP_SCHEMA:
        return schema, _nano_timestamp
    if schema is T.ISO_TIMESTAMP_SCHEMA:
        return schema, lambda s: T.format_zoned_timestamp(T.pg_timestamp_to_micros(s))
    return schema, lambda s: T.pg_timestamp_to_micros(s) // 1000


def _nano_timestamp(s: str) -> int | None:
    # Nanoseconds since the epoch overflow int64 before 1677 / after 2262: Debezium sends null.
    n = T.pg_timestamp_to_micros(s) * 1000
    return n if -(1 << 63) <= n < (1 << 63) else None


def _date_mapping(modes: TypeModes) -> tuple[Schema, Converter]:
    schema = T.date_schema(modes.time_precision)
    if schema is T.ISO_DATE_SCHEMA:
        return schema, lambda s: T.format_iso_date(T.pg_date_to_days(s))
    return schema, T.pg_date_to_days


def _binary_mapping(modes: TypeModes) -> tuple[Schema, Converter]:
    enc = T.binary_encoder(modes.binary)
    return T.binary_schema(modes.binary), lambda s: enc(bytea_from_text(s))


def _unknown_mapping(modes: TypeModes) -> tuple[Schema, Converter]:
    # include.unknown.datatypes: the value's text, UTF-8 encoded, as opaque binary.
    enc = T.binary_encoder(modes.binary)
    return T.binary_schema(modes.binary), lambda s: enc(s.encode("utf-8"))


def _geo_converter(s: str) -> Any:
    ewkb = binascii.unhexlify(s)
    return {"wkb": base64.b64encode(ewkb).decode("ascii"), "srid": ewkb_srid(ewkb)}


def _type_mapping(
    info: TypeInfo, length: int, scale: int, registry: TypeRegistry, modes: TypeModes, top: bool = True
) -> tuple[Schema, Converter] | None:
    """(schema, converter) for a root (non-domain) type, or None when Debezium drops it."""
    oid = info.oid
    if oid in (BIT, VARBIT):
        if length > 1:
            return T.bits_schema(length), lambda s: base64.b64encode(T.bits_le_bytes(s)).decode("ascii")
        return prim("boolean"), lambda s: int(s, 2) != 0 if s else False
    if oid == BOOL:
        return prim("boolean"), _bool
    if oid == INT2:
        return prim("int16"), int
    if oid == INT4:
        return prim("int32"), int
    if oid in (INT8, OID):
        return prim("int64"), int
    if oid == FLOAT4:
        return prim("float"), _float
    if oid == FLOAT8:
        return prim("double"), _float
    if oid == NUMERIC:
        return _decimal_mapping(length, scale, modes)
    if oid == MONEY:
        return _money_mapping(modes)
    if oid in _STRING_OIDS:
        return prim("string"), str
    if oid in (JSON, JSONB):
        return JSON_SCHEMA, str
    if oid == XML:
        return XML_SCHEMA, str
    if oid == UUID:
        return UUID_SCHEMA, str
    if oid == TSVECTOR:
        return TSVECTOR_SCHEMA, str
    if oid == TIMESTAMPTZ:
        return T.ZONED_TIMESTAMP_SCHEMA, lambda s: T.pg_timestamptz_to_zoned(s, scale)
    if oid == TIMETZ:
        return T.ZONED_TIME_SCHEMA, T.pg_timetz_to_zoned
    if oid == TIME:
        return _time_mapping(scale, modes)
    if oid == TIMESTAMP:
        return _timestamp_mapping(scale, modes)
    if oid == DATE:
        return _date_mapping(modes)
    if oid == INTERVAL:
        return _interval_mapping(modes)
    if oid == BYTEA:
        return _binary_mapping(modes)
    if oid == POINT:

        def conv_point(s: str) -> Any:
            x, y = parse_point(s)
            return {"x": x, "y": y, "wkb": point_wkb(x, y), "srid": None}

        return POINT_SCHEMA, conv_point
    name = info.name if info.namespace != "pg_catalog" else ""
    if name == "geometry":
        return GEOMETRY_SCHEMA, _geo_converter
    if name == "geography":
        return GEOGRAPHY_SCHEMA, _geo_converter
    if name in ("citext", "isbn"):
        return prim("string"), str
    if name == "ltree":
        return LTREE_SCHEMA, str
    if name == "hstore":
        if modes.hstore == "map":
            return HSTORE_MAP_SCHEMA, hstore_map
        return JSON_SCHEMA, hstore_json
    if info.is_enum:
        return enum_schema(info.enum_labels), str
    if info.is_array:
        return _array_mapping(info, registry, modes) if top else None
    if modes.include_unknown:
        return _unknown_mapping(modes)
    return None


def _array_mapping(
    info: TypeInfo, registry: TypeRegistry, modes: TypeModes
) -> tuple[Schema, Converter] | None:
    if info.oid in _UNSUPPORTED_ARRAYS:
        return None
    elem = registry.get(info.elem_oid)
    if elem is None or elem.is_domain:
        # Debezium finds no element schema for domain arrays; it never emits them usefully.
        return None
    ext = elem.name if elem.namespace != "pg_catalog" else ""
    # pgjdbc gives array columns length 2147483647 / scale 0, which the element inherits.
    mapped = _type_mapping(elem, UNKNOWN_LENGTH, 0, registry, modes, top=False)
    if mapped is None:
        return None
    elem_schema, elem_conv = mapped
    explicit = elem.oid in _EXPLICIT_ARRAY_ELEMS or ext in _EXT_ARRAY_ELEMS
    # Explicit cases use optional element schemas; enum and generic element schemas are not.
    items = elem_schema.with_optional(True) if explicit else elem_schema

    delim = elem.delim

    def convert(s: str) -> list[Any]:
        return [
            None if v is None else (None if isinstance(v, list) else elem_conv(v))
            for v in parse_array(s, delim)
        ]

    return Schema("array", items=items), convert


def column_mapping(col: ColumnInfo, registry: TypeRegistry, modes: TypeModes) -> ColumnMapping | None:
    """Schema + converter for one column, or None when Debezium would drop the column."""
    info = registry.get(col.type_oid)
    if info is None:
        return None
    length, scale = debezium_length_scale(info, col.typmod, registry)
    root, _ = registry.root(info)
    mapped = _type_mapping(root, length, scale, registry, modes)
    if mapped is None:
        return None  # the caller warns, once per column (tables.TableCache)
    schema, convert = mapped
    schema = schema.with_optional(not col.not_null)
    default = default_value(col, info, convert)
    if default is not NO_DEFAULT:
        schema = schema.with_default(default)
    return ColumnMapping(schema, convert)


# --------------------------------------------------------------------------- extras


_SERIALS = {"int2": "smallserial", "int4": "serial", "int8": "bigserial"}


def source_type(
    col: ColumnInfo, registry: TypeRegistry, *, snapshot: bool = False
) -> tuple[str, dict[str, str]]:
    """(pg_type name, `__debezium.source.column.*` parameters) as Debezium 3.6's PostgreSQL
    connector sets them for column.propagate.source.type / datatype.propagate.source.type: the
    type's own name (`int4`, `bpchar`, `_int4`, a domain's name) upper-cased, its pgoutput
    length/scale, and the column name.

    `snapshot`: as its snapshot does, from the JDBC column metadata (pgjdbc's getColumns): an
    integer column whose default is `nextval(...)` is `serial` / `bigserial` / `smallserial`, and
    a numeric without precision has length 0 and no scale (checked against Debezium 3.6's output)."""
    info = registry.get(col.type_oid)
    if info is None:
        tname, length, scale = col.type_name.split("(")[0], col.length or 0, col.scale or 0
    else:
        tname = info.name
        length, scale = debezium_length_scale(info, col.typmod, registry)
    params = {
        "__debezium.source.column.type": tname.upper(),
        "__debezium.source.column.length": str(length),
        "__debezium.source.column.scale": str(scale),
        "__debezium.source.column.name": col.name,
    }
    if snapshot:
        if tname in _SERIALS and (col.default_expr or "").startswith("nextval("):
            tname = _SERIALS[tname]
            params["__debezium.source.column.type"] = tname.upper()
        if info is not None and info.oid == NUMERIC and col.typmod == NO_TYPMOD:
            params["__debezium.source.column.length"] = "0"
            del params["__debezium.source.column.scale"]
    return tname, params


def toast_placeholder(schema: Schema, modes: TypeModes, type_name: str = "") -> Any:
    """JSON value Debezium emits for an unchanged TOASTed column of this schema.

    Strings get the placeholder text; BYTES the placeholder bytes (base64); hex binary mode the
    text; text/varchar/json(b) arrays a one-element list; int4/date arrays and int8 arrays the
    placeholder's bytes as numbers; hstore the map {placeholder: placeholder}; PostGIS values null.
    Anything else gets the placeholder text, as Debezium's unknown-data fallback does.
    """
    if schema.name in (GEOMETRY_SCHEMA.name, GEOGRAPHY_SCHEMA.name):
        return None  # Debezium 3.6 sends null for an unchanged TOASTed PostGIS value
    text = modes.placeholder_text
    raw = modes.placeholder_bytes
    base = type_name.split("(")[0]
    if base in ("_text", "_varchar", "_json", "_jsonb", "text[]", "character varying[]"):
        return [text]
    if base in ("_int4", "_date", "integer[]", "date[]", "_int8", "bigint[]"):
        return [b - 256 if b > 127 else b for b in raw]
    if schema.type == "array":
        item = schema.items
        if item is not None and item.type == "string":
            return [text]
        if item is not None and item.type in ("int32", "int64"):
            return [b - 256 if b > 127 else b for b in raw]
        return text
    if base == "hstore" or schema.type == "map":
        if schema.type == "map":
            return {text: text}
        return "{" + json_str(text) + ":" + json_str(text) + "}"
    if schema.type == "bytes" and schema.name is None:
        return base64.b64encode(raw).decode("ascii")
    return text


def debezium_length_scale(info: TypeInfo, typmod: int, registry: TypeRegistry) -> tuple[int, int]:
    """Column length/scale as Debezium's pgoutput ColumnMetaData computes them (an array's are
    its element type's)."""
    if info.is_array:
        info = registry.get(info.elem_oid) or info
    if typmod != NO_TYPMOD:
        return jdbc_length(info.oid, typmod), jdbc_scale(info.oid, typmod)
    # Domains carry their own typmod (typtypmod) applied to the parent type; chains fall back.
    while info.is_domain:
        parent = registry.get(info.base_oid)
        if parent is None:
            break
        if info.base_typmod != NO_TYPMOD:
            return jdbc_length(parent.oid, info.base_typmod), jdbc_scale(parent.oid, info.base_typmod)
        info = parent
    return jdbc_length(info.oid, NO_TYPMOD), jdbc_scale(info.oid, NO_TYPMOD)
