"""MySQL/MariaDB column → Kafka Connect schema + value converter, as Debezium's
`BinlogValueConverters`/`MySqlValueConverters`/`JdbcValueConverters` do it.

Raw values a converter accepts (what `rowdecode.py` decodes, and what PyMySQL returns in a
snapshot session with `time_zone='+00:00'`):
  integers → int, BIT → bytes (big-endian, as stored) or int, FLOAT/DOUBLE → float,
  DECIMAL → decimal.Decimal or (binlog) `BinlogDecimal`, CHAR/TEXT → bytes (column charset) or str, BINARY/BLOB → bytes,
  ENUM → 1-based index int or str, SET → bitmask int or str, YEAR → int, DATE → date,
  TIME → timedelta, DATETIME → naive datetime, TIMESTAMP → naive datetime in UTC,
  JSON → str (binlog JSON binary is already rendered by `jsonbinary.py`) or bytes,
  spatial → bytes (MySQL internal form: 4-byte little-endian SRID + WKB), MariaDB UUID/INET4/INET6
  → bytes (16/4/16, the binlog drops trailing 0x00 bytes). A large CHAR/TEXT/BLOB value may come
  as a `memoryview` of the binlog packet (no copy): converters read it through the buffer protocol.
  `ZERO` marks a zero/invalid date (`0000-00-00`): null for nullable columns, else the column
  default or the epoch (Debezium's `convertValue` fallback).

Output values are already in JsonConverter form (bytes base64, Decimal base64 unscaled).

Decimal and binary encoders come from the shared `connectors/format/temporal.py`.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from connectors.format import temporal
from connectors.format.schema import NO_DEFAULT, Schema, prim
from connectors.format.schema import struct as struct_schema
from connectors.format.tableschema import ColumnDef, null_value
from connectors.settings.model import MySqlSettings
from connectors.settings.modes import BigintUnsignedMode, BinaryMode, DecimalMode, MySqlTimePrecision
from connectors.sources.mysql import model
from connectors.sources.mysql.model import Column

_INT64 = range(-(1 << 63), 1 << 63)


class _Zero:
    """A zero or invalid date/datetime/timestamp read from the binlog."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ZERO"


ZERO: Any = _Zero()


class UnknownColumnType(ValueError):
    """A column type the connector cannot convert (a type newer than this release): never
    guessed at, never emitted as garbage."""

    def __init__(self, column: str, type_name: str, table: str | None = None) -> None:
        where = f"{table} column {column}" if table else f"column {column}"
        super().__init__(f"{where} has type {type_name}, which Tidemark cannot convert")
        self.column, self.type_name, self.table = column, type_name, table


class BinlogDecimal:
    """A binlog DECIMAL as MySQL stores it: `unscaled` × 10**-`scale`. The binlog decoder builds
    no `decimal.Decimal`: in `decimal.handling.mode=precise` the unscaled integer is already
    Debezium's payload (its two's-complement bytes), the other modes convert it."""

    __slots__ = ("unscaled", "scale")

    def __init__(self, unscaled: int, scale: int) -> None:
        self.unscaled, self.scale = unscaled, scale

    def to_decimal(self) -> decimal.Decimal:
        return decimal.Decimal(f"{self.unscaled}E-{self.scale}")  # exact: no context rounding

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BinlogDecimal):
            return self.unscaled == other.unscaled and self.scale == other.scale
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable value compared by value: unhashable

    def __repr__(self) -> str:
        return f"BinlogDecimal({self.to_decimal()})"


_EPOCH_ORD = dt.date(1970, 1, 1).toordinal()
_EPOCH_TS = "1970-01-01T00:00:00Z"


@dataclass(frozen=True)
class TypeOptions:
    """The type-related settings the converters need (`from_settings`). The defaults here are
    Debezium's, for tests and tools that build converters by hand; a connector always builds
    them from its settings."""

    decimal_mode: DecimalMode = "precise"
    bigint_unsigned_mode: BigintUnsignedMode = "long"
    time_precision_mode: MySqlTimePrecision = "adaptive_time_microseconds"
    binary_mode: BinaryMode = "bytes"
    time_adjuster: bool = True

    @classmethod
    def from_settings(cls, s: MySqlSettings) -> TypeOptions:
        return cls(
            s.decimal_handling_mode,
            s.bigint_unsigned_handling_mode,
            s.time_precision_mode,
            s.binary_handling_mode,
            s.enable_time_adjuster,
        )


# --------------------------------------------------------------------------- shared helpers
def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decimal_unscaled_b64(value: decimal.Decimal, scale: int) -> str:
    """Connect `Decimal` payload: base64 of the big-endian two's-complement unscaled value."""
    return temporal.decimal_b64(value, scale)


_twos = temporal.unscaled_to_bytes
_b2a = binascii.b2a_base64


def _unscaled_b64(u: int) -> str:
    """temporal.unscaled_to_b64 without its call chain (one DECIMAL column per row on the hot path)."""
    return _b2a(u.to_bytes(((u + (u < 0)).bit_length() >> 3) + 1, "big", signed=True), newline=False).decode(
        "ascii"
    )


def _as_decimal(v: Any) -> decimal.Decimal:
    return v.to_decimal() if type(v) is BinlogDecimal else decimal.Decimal(v)


def epoch_days(d: dt.date) -> int:
    return d.toordinal() - _EPOCH_ORD


def datetime_micros(v: dt.datetime) -> int:
    return (
        (v.toordinal() - _EPOCH_ORD) * 86400 + v.hour * 3600 + v.minute * 60 + v.second
    ) * 1_000_000 + v.microsecond


def timedelta_micros(v: dt.timedelta) -> int:
    return (v.days * 86400 + v.seconds) * 1_000_000 + v.microseconds


binary_encoder = temporal.binary_encoder


def _adjust_year(y: int) -> int:
    # Debezium's MySQL temporal adjuster: two-digit years 00-69 → 2000s, 70-99 → 1900s.
    if y < 70:
        return y + 2000
    if y < 100:
        return y + 1900
    return y


def _adjust_date(d: dt.date) -> dt.date:
    return d.replace(year=_adjust_year(d.year)) if d.year < 100 else d


# MySQL charset → Python codec (MySQL's latin1 is Windows-1252).
CHARSETS: dict[str, str] = {
    "utf8mb4": "utf-8",
    "utf8mb3": "utf-8",
    "utf8": "utf-8",
    "latin1": "cp1252",
    "ascii": "ascii",
    "latin2": "iso8859_2",
    "latin5": "iso8859_9",
    "latin7": "iso8859_13",
    "greek": "iso8859_7",
    "hebrew": "iso8859_8",
    "cp1250": "cp1250",
    "cp1251": "cp1251",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "cp850": "cp850",
    "cp852": "cp852",
    "cp866": "cp866",
    "koi8r": "koi8_r",
    "koi8u": "koi8_u",
    "ucs2": "utf-16-be",
    "utf16": "utf-16-be",
    "utf16le": "utf-16-le",
    "utf32": "utf-32-be",
    "gbk": "gbk",
    "gb2312": "gb2312",
    "gb18030": "gb18030",
    "big5": "big5",
    "sjis": "shift_jis",
    "cp932": "cp932",
    "ujis": "euc_jp",
    "eucjpms": "euc_jp",
    "euckr": "euc_kr",
    "tis620": "tis_620",
    "macroman": "mac_roman",
    "macce": "mac_latin2",
    "dec8": "latin-1",
    "hp8": "latin-1",
    "swe7": "latin-1",
    "armscii8": "latin-1",
    "keybcs2": "latin-1",
    "geostd8": "latin-1",
    "binary": "latin-1",
}


def python_codec(charset: str | None) -> str:
    return CHARSETS.get((charset or "utf8mb4").lower(), "utf-8")


def enum_options(col: Column) -> list[str]:
    # Debezium escapes a comma inside an option as "\," in the `allowed` parameter.
    return [v.replace(",", "\\,") for v in col.enum_values]


# --------------------------------------------------------------------------- JSON rendering
def java_double(v: float) -> str:
    """Double.toString as the binlog JSON formatter prints it (plain decimal when Java would
    use an exponent)."""
    if v != v or v in (float("inf"), float("-inf")):
        return str(v)
    a = abs(v)
    if a != 0.0 and (a >= 1e7 or a < 1e-3):
        text = format(decimal.Decimal(v), "f")
        return text
    r = repr(v)
    return r if ("." in r or "e" in r) else r + ".0"


# --------------------------------------------------------------------------- schemas
def column_schema(col: Column, opts: TypeOptions) -> Schema:
    """The Connect schema of a column, without optional/default (see `column_def`)."""
    base = col.base_type
    tmode = opts.time_precision_mode
    prec = col.length if col.length is not None else -1
    if base == "JSON":
        return prim("string", name="io.debezium.data.Json", version=1)
    if base == "POINT":
        return struct_schema(
            "io.debezium.data.geometry.Point",
            [
                ("x", prim("double")),
                ("y", prim("double")),
                ("wkb", prim("bytes", optional=True)),
                ("srid", prim("int32", optional=True)),
            ],
            version=1,
            doc="Geometry (POINT)",
        )
    if base in model.SPATIAL_TYPES:
        return struct_schema(
            "io.debezium.data.geometry.Geometry",
            [("wkb", prim("bytes")), ("srid", prim("int32", optional=True))],
            version=1,
            doc="Geometry",
        )
    if base == "YEAR":
        return prim("int32", name="io.debezium.time.Year", version=1)
    if base == "ENUM":
        return prim(
            "string",
            name="io.debezium.data.Enum",
            version=1,
            parameters={"allowed": ",".join(enum_options(col))},
        )
    if base == "SET":
        return prim(
            "string",
            name="io.debezium.data.EnumSet",
            version=1,
            parameters={"allowed": ",".join(enum_options(col))},
        )
    unsigned = col.unsigned
    if base in ("BOOL", "BOOLEAN"):
        return prim("boolean")
    if base == "BIT":
        n = col.length if col.length is not None else 1
        if n <= 1:
            return prim("boolean")
        return prim("bytes", name="io.debezium.data.Bits", version=1, parameters={"length": str(n)})
    if base in ("TINYINT", "INT1"):
        return prim("int16")
    if base in ("SMALLINT", "INT2"):
        return prim("int32" if unsigned else "int16")
    if base in ("MEDIUMINT", "INT3", "MIDDLEINT"):
        return prim("int32")
    if base in ("INT", "INTEGER", "INT4"):
        return prim("int64" if unsigned else "int32")
    if base in ("BIGINT", "INT8", "SERIAL"):
        if unsigned and opts.bigint_unsigned_mode == "precise":
            return _decimal_schema("precise", 20, 0)
        return prim("int64")
    if base in ("FLOAT", "FLOAT4"):
        return prim("float" if col.scale is None and (col.length is None or col.length <= 24) else "double")
    if base == "REAL":
        return prim("float")
    if base in ("DOUBLE", "FLOAT8"):
        return prim("double")
    if base in ("DECIMAL", "DEC", "FIXED", "NUMERIC"):
        return _decimal_schema(
            opts.decimal_mode, col.length if col.length is not None else 10, col.scale or 0
        )
    # the shared JdbcValueConverters mapping: adaptive_time_microseconds gives TIME in
    # microseconds and DATETIME by precision; the other modes one schema whatever the precision
    if base == "DATE":
        return temporal.date_schema(tmode)
    if base == "TIME":
        return temporal.time_schema(tmode, prec)
    if base == "DATETIME":
        return temporal.timestamp_schema(tmode, prec)
    if base == "TIMESTAMP":
        return prim("string", name="io.debezium.time.ZonedTimestamp", version=1)
    if base in ("BINARY", "VARBINARY", "BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB") or _long_varbinary(col):
        return prim("bytes" if opts.binary_mode == "bytes" else "string")
    if base == "VECTOR":
        return Schema("array", name="io.debezium.data.FloatVector", version=1, items=prim("float"))
    if base == "UUID":
        return UUID_SCHEMA
    return prim("string")  # CHAR, VARCHAR, TEXT family, NCHAR, LONG [VARCHAR], INET4, INET6


# MariaDbValueConverters: UUID columns are io.debezium.data.Uuid strings.
UUID_SCHEMA = prim("string", name="io.debezium.data.Uuid", version=1)


def _long_varbinary(col: Column) -> bool:
    # LONG VARBINARY is a MEDIUMBLOB; LONG and LONG VARCHAR are MEDIUMTEXT
    return col.base_type == "LONG" and "VARBINARY" in col.type_name


def _decimal_schema(mode: str, precision: int, scale: int) -> Schema:
    if mode == "double":
        return prim("double")
    if mode == "string":
        return prim("string")
    params = {"scale": str(scale)}
    if precision > 0:
        params["connect.decimal.precision"] = str(precision)
    return prim("bytes", name="org.apache.kafka.connect.data.Decimal", version=1, parameters=params)


# --------------------------------------------------------------------------- converters
def converter(col: Column, opts: TypeOptions, schema: Schema | None = None) -> Callable[[Any], Any]:
    """raw (never None) → JSON-ready payload value. `schema` carries the default used when a
    required column receives a zero date."""
    base = col.base_type
    tmode = opts.time_precision_mode
    prec = col.length if col.length is not None else -1
    adjust = opts.time_adjuster
    # Zero dates in a required column: the schema default, else the epoch (convertValue fallback).
    default = schema.default if schema is not None and schema.default is not NO_DEFAULT else None

    if base == "JSON":

        def conv_json(v: Any) -> Any:
            if not isinstance(v, str):
                v = str(v, "utf-8")
            if v == "" and col.optional:
                return None
            return v or "{}"

        return conv_json
    if base == "POINT" or base in model.SPATIAL_TYPES:
        is_point = base == "POINT"

        def conv_geo(v: Any) -> Any:
            b = bytes(v)
            # Debezium's BinlogGeometry: SRID 0 means unset and is emitted as null
            srid = (struct.unpack_from("<i", b, 0)[0] if len(b) >= 4 else 0) or None
            wkb = b[4:]
            if is_point:
                # WKB point: byte order, uint32 type, two doubles.
                bo = "<" if wkb[0] == 1 else ">"
                x, y = struct.unpack_from(bo + "dd", wkb, 5)
                return {"x": x, "y": y, "wkb": b64(wkb), "srid": srid}
            return {"wkb": b64(wkb), "srid": srid}

        return conv_geo
    if base == "YEAR":
        # Always adjusted: Debezium's convertYearToInt calls the static adjustTemporal whatever
        # enable.time.adjuster says (that setting only reaches DATE/DATETIME/TIMESTAMP). Binlog
        # YEAR values are 1901..2155 already; a snapshot read of YEAR(2) gives 0..99.
        def conv_year(v: Any) -> Any:
            return _adjust_year(v.year if isinstance(v, dt.date) else int(v))

        return conv_year
    if base in ("ENUM", "SET"):
        options = list(col.enum_values)
        if base == "ENUM":

            def conv_enum(v: Any) -> Any:
                if isinstance(v, int):
                    return options[v - 1] if 0 < v <= len(options) else ("" if v == 0 else None)
                return str(v, "utf-8") if isinstance(v, (bytes, bytearray)) else v

            return conv_enum

        def conv_set(v: Any) -> Any:
            if isinstance(v, int):
                return ",".join(o for i, o in enumerate(options) if v >> i & 1)
            if isinstance(v, (set, frozenset)):
                return ",".join(o for o in options if o in v)
            return str(v, "utf-8") if isinstance(v, (bytes, bytearray)) else v

        return conv_set
    if base in ("BOOL", "BOOLEAN"):
        return lambda v: bool(int(v) if not isinstance(v, bytes) else int.from_bytes(v, "big"))
    if base == "BIT":
        n = col.length if col.length is not None else 1
        nbytes = (n + 7) // 8
        if n <= 1:
            return lambda v: bool(int.from_bytes(v, "big") if isinstance(v, (bytes, bytearray)) else v)

        def conv_bits(v: Any) -> Any:
            i = int.from_bytes(v, "big") if isinstance(v, (bytes, bytearray)) else int(v)
            return b64(i.to_bytes(nbytes, "little"))

        return conv_bits
    if base in ("BIGINT", "INT8", "SERIAL") and col.unsigned:
        if opts.bigint_unsigned_mode == "precise":
            return lambda v: b64(_twos(int(v)))
        return lambda v: int(v) - (1 << 64) if int(v) >= 1 << 63 else int(v)  # Java long wrap-around
    if base in (
        "TINYINT",
        "INT1",
        "SMALLINT",
        "INT2",
        "MEDIUMINT",
        "INT3",
        "MIDDLEINT",
        "INT",
        "INTEGER",
        "INT4",
        "BIGINT",
        "INT8",
    ):
        return _int
    if base in ("FLOAT", "FLOAT4", "REAL") and column_schema(col, opts).type == "float":
        return _float32
    if base in ("FLOAT", "FLOAT4", "REAL", "DOUBLE", "FLOAT8"):
        return _float
    if base in ("DECIMAL", "DEC", "FIXED", "NUMERIC"):
        scale = col.scale or 0
        if opts.decimal_mode == "double":
            return lambda v: float(_as_decimal(v))
        if opts.decimal_mode == "string":
            return lambda v: format(_as_decimal(v), "f")

        def conv_decimal(v: Any) -> Any:
            if type(v) is BinlogDecimal and v.scale == scale:
                return _unscaled_b64(v.unscaled)
            return decimal_unscaled_b64(_as_decimal(v), scale)

        return conv_decimal
    iso = tmode == "isostring"
    if base in ("DATE", "TIME", "DATETIME"):
        # a required column's fallback: its default, else the type's zero (the epoch, 00:00)
        zero = null_value(column_schema(col, opts))
        zero_or_default = zero if default is None else default
    if base == "DATE":

        def conv_date(v: Any) -> Any:
            if v is ZERO or isinstance(v, str):
                return None if col.optional else zero_or_default
            if isinstance(v, dt.datetime):
                v = v.date()
            if adjust and v.year < 100:
                v = _adjust_date(v)
            return temporal.format_iso_date(epoch_days(v)) if iso else epoch_days(v)

        return conv_date
    if base == "TIME":
        if tmode == "connect" or iso:
            # Kafka Connect's Time and IsoTime are times of day: Debezium delivers nothing for a
            # MySQL TIME outside [00:00, 24:00) (negative or up to 838:59:59), so the field falls
            # back to null (the zero when required)
            out_of_day = None if col.optional else zero
            of_day: Callable[[int], Any] = temporal.format_zoned_time if iso else _millis

            def conv_time_of_day(v: Any) -> Any:
                us = timedelta_micros(v)
                return of_day(us) if 0 <= us < 86_400_000_000 else out_of_day

            return conv_time_of_day
        if tmode == "nanoseconds":
            return lambda v: timedelta_micros(v) * 1000
        return timedelta_micros
    if base == "DATETIME":
        as_millis = tmode == "connect" or (tmode == "adaptive_time_microseconds" and prec <= 3)
        nanos = tmode == "nanoseconds"

        def conv_dt(v: Any) -> Any:
            if v is ZERO or isinstance(v, str):
                return None if col.optional else zero_or_default
            if adjust and v.year < 100:
                v = v.replace(year=_adjust_year(v.year))
            us = datetime_micros(v)
            if iso:
                return temporal.format_zoned_timestamp(us)
            if nanos:  # NanoTimestamp: null beyond int64 nanoseconds (before 1677, after 2262)
                return us * 1000 if us * 1000 in _INT64 else None
            return us // 1000 if as_millis else us

        return conv_dt
    if base == "TIMESTAMP":
        width = prec

        def conv_ts(v: Any) -> Any:
            if v is ZERO or isinstance(v, str):
                return None if col.optional else (_EPOCH_TS if default is None else default)
            return zoned_timestamp(v, width)

        return conv_ts
    if base in ("BINARY", "VARBINARY", "BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB") or _long_varbinary(col):
        enc = binary_encoder(opts.binary_mode)
        if base == "BINARY" and col.length:
            size = col.length
            return lambda v: enc(bytes(v).ljust(size, b"\0"))  # DBZ-254: binlog drops BINARY's 0x00 padding
        # the encoders read any buffer: a large value's memoryview is not copied first
        return lambda v: enc(v if not isinstance(v, str) else v.encode("utf-8"))
    if base == "VECTOR":
        return lambda v: list(struct.unpack(f"<{len(v) // 4}f", v))
    if base == "UUID":
        return _uuid_text
    if base == "INET4":
        return _inet4_text
    if base == "INET6":
        return _inet6_text
    codec = python_codec(col.charset)

    def conv_str(v: Any) -> Any:
        if isinstance(v, str):
            return v
        if isinstance(v, (bytes, bytearray, memoryview)):
            return str(v, codec, "replace")  # decodes straight from the buffer (no bytes copy first)
        return str(v)

    return conv_str


# --------------------------------------------------------------------------- MariaDB UUID / INET
# The binlog carries these as fixed binary strings with their trailing 0x00 bytes dropped (as for
# BINARY(n), DBZ-254), so the value is padded back to its size first. Text (a default, a snapshot
# read) is already in the server's form.
def _fixed(v: Any, size: int) -> bytes:
    b = bytes(v)
    return b if len(b) == size else b.ljust(size, b"\0")


def _uuid_text(v: Any) -> str:
    """MariaDbValueConverters.convertUuid: the 16 bytes, big-endian, as java.util.UUID prints them
    (lower-case 8-4-4-4-12). Debezium 3.6 reads the bytes unpadded, which shifts a UUID ending
    in 00 bytes; the padded value is the one the server stores."""
    if isinstance(v, str):
        return v.lower()
    h = _fixed(v, 16).hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _inet4_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    return ".".join(map(str, _fixed(v, 4)))


def _inet6_text(v: Any) -> str:
    """INET6 as MariaDB prints it (Inet6::to_string, MySQL's INET6_NTOA): lower-case hex words
    without leading zeros; the longest run of zero words, even a single one (the first of equal
    runs), is `::`; IPv4-compatible (::a.b.c.d) and IPv4-mapped (::ffff:a.b.c.d) addresses end in
    dotted decimal."""
    if isinstance(v, str):
        return v
    b = _fixed(v, 16)
    words = struct.unpack(">8H", b)
    gap_pos, gap_len, run_pos, run_len = -1, 0, -1, 0
    for i, w in enumerate(words):
        if w:
            run_pos = -1
            continue
        if run_pos < 0:
            run_pos, run_len = i, 0
        run_len += 1
        if run_len > gap_len:
            gap_pos, gap_len = run_pos, run_len
    if gap_pos == 0 and (gap_len == 6 or (gap_len == 5 and words[5] == 0xFFFF)):
        return ("::" if gap_len == 6 else "::ffff:") + ".".join(map(str, b[12:]))
    if gap_pos < 0:
        return ":".join(f"{w:x}" for w in words)
    head = ":".join(f"{w:x}" for w in words[:gap_pos])
    tail = ":".join(f"{w:x}" for w in words[gap_pos + gap_len :])
    return f"{head}::{tail}"


_NO = object()


def _int(v: Any) -> int:
    return int(v)


def _float(v: Any) -> Any:
    f = float(v)
    if f != f:
        return "NaN"
    if f in (float("inf"), float("-inf")):
        return "Infinity" if f > 0 else "-Infinity"
    return f


_F32 = struct.Struct("<f")


def _float32(v: Any) -> Any:
    """A FLOAT column value as Java's float prints it: the shortest decimal that reads back as the
    same float32 (1.1f → 1.1, not the widened double 1.100000023841858)."""
    try:
        f = _F32.unpack(_F32.pack(float(v)))[0] if isinstance(v, float) else float(v)
    except OverflowError:  # beyond float32 (a REAL column holds doubles): Java's narrowing gives ±Infinity
        return "Infinity" if float(v) > 0 else "-Infinity"
    if f != f or f in (float("inf"), float("-inf")):
        return _float(f)
    for digits in range(6, 10):
        short = float(f"{f:.{digits}g}")
        if _F32.unpack(_F32.pack(short))[0] == f:
            return short
    return f


def zoned_timestamp(v: dt.datetime, width: int) -> str:
    """ISO-8601 UTC text as `ZonedTimestamp.toIsoString`: exactly `width` fraction digits when the
    column has a precision, otherwise ISO_OFFSET_DATE_TIME (fraction only when non-zero, trimmed)."""
    if (width == 6 or width == 3) and v.tzinfo is None:  # datetime's C formatter prints exactly that
        return v.isoformat(timespec="microseconds" if width == 6 else "milliseconds") + "Z"
    base = f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:{v.second:02d}"
    us = v.microsecond
    if 0 < width <= 9:
        frac = f"{us:06d}{'0' * 3}"[:width]
        return f"{base}.{frac}Z"
    if us:
        frac = f"{us:06d}"
        # Java prints fractions in groups of 3 digits (millis, micros).
        frac = frac[:3] if frac.endswith("000") else frac
        return f"{base}.{frac}Z"
    return base + "Z"


# --------------------------------------------------------------------------- default values
_CURRENT_TS = re.compile(r"^(current_timestamp|now|localtime|localtimestamp)\s*(\(\s*\d*\s*\))?$", re.I)


def default_raw(col: Column) -> Any:
    """The DDL default as a raw value (as the converter accepts), `_NO` for no schema default."""
    if not col.has_default or col.default is None:
        return _NO
    text = col.default
    base = col.base_type
    if col.default_is_expr:
        if base in ("TIMESTAMP", "DATETIME") and _CURRENT_TS.match(text.strip()):
            return dt.datetime(1970, 1, 1)
        return _NO
    try:
        if base in ("BOOL", "BOOLEAN"):
            return (
                1
                if text.lower() in ("1", "true")
                else 0
                if text.lower() in ("0", "false")
                else int(float(text))
            )
        if base == "BIT":
            return _bit_literal(text)
        if base in (
            "TINYINT",
            "INT1",
            "SMALLINT",
            "INT2",
            "MEDIUMINT",
            "INT3",
            "MIDDLEINT",
            "INT",
            "INTEGER",
            "INT4",
            "BIGINT",
            "INT8",
            "SERIAL",
            "YEAR",
        ):
            return int(decimal.Decimal(text).to_integral_value(rounding=decimal.ROUND_HALF_UP))
        if base in ("FLOAT", "FLOAT4", "REAL", "DOUBLE", "FLOAT8"):
            return float(text)
        if base in ("DECIMAL", "DEC", "FIXED", "NUMERIC"):
            return decimal.Decimal(text)
        if base == "DATE":
            return _parse_date(text)
        if base in ("DATETIME", "TIMESTAMP"):
            return _parse_datetime(text)
        if base == "TIME":
            return _parse_time(text)
        if base == "ENUM":
            return text
        if base == "SET":
            return text
        # UUID: Debezium's convertUuid takes no text, so its schema carries no default (INET alike)
        if base in model.SPATIAL_TYPES or base in ("JSON", "VECTOR", "UUID", "INET4", "INET6"):
            return _NO
        if base in ("BINARY", "VARBINARY", "BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB"):
            return text.encode("utf-8")
        return text
    except (ValueError, ArithmeticError):
        return _NO


def _bit_literal(text: str) -> int:
    t = text.strip()
    m = re.fullmatch(r"[bB]'([01]*)'", t)
    if m:
        return int(m.group(1) or "0", 2)
    m = re.fullmatch(r"0b([01]+)", t)
    if m:
        return int(m.group(1), 2)
    return int(t)


def _parse_date(text: str) -> Any:
    m = re.match(r"^\s*(\d{1,4})-(\d{1,2})-(\d{1,2})", text)
    if not m:
        raise ValueError(text)
    y, mo, d = (int(x) for x in m.groups())
    if y == 0 or mo == 0 or d == 0:
        return ZERO
    return dt.date(y, mo, d)


def _parse_datetime(text: str) -> Any:
    m = re.match(
        r"^\s*(\d{1,4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,6}))?)?)?", text
    )
    if not m:
        raise ValueError(text)
    y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if y == 0 or mo == 0 or d == 0:
        return ZERO
    h, mi, s = int(m.group(4) or 0), int(m.group(5) or 0), int(m.group(6) or 0)
    us = int((m.group(7) or "0").ljust(6, "0"))
    return dt.datetime(y, mo, d, h, mi, s, us)


def _parse_time(text: str) -> dt.timedelta:
    m = re.match(r"^\s*(-)?(\d+):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,6}))?)?", text)
    if not m:
        raise ValueError(text)
    sign = -1 if m.group(1) else 1
    us = ((int(m.group(2)) * 60 + int(m.group(3))) * 60 + int(m.group(4) or 0)) * 1_000_000 + int(
        (m.group(5) or "0").ljust(6, "0")
    )
    return dt.timedelta(microseconds=sign * us)


def _millis(us: int) -> int:
    return us // 1000


def column_def(col: Column, opts: TypeOptions) -> ColumnDef:
    """Schema (with `optional` and Debezium's schema default) plus converter for one column.
    Raises `UnknownColumnType` for a type this release does not know."""
    if col.base_type not in model.KNOWN_TYPES:
        raise UnknownColumnType(col.name, col.type_name)
    schema = column_schema(col, opts).with_optional(col.optional)
    raw = default_raw(col)
    if raw is not _NO:
        if raw is ZERO:
            # A zero date default: null for nullable columns, else the epoch (MySqlDefaultValueConverter).
            raw = (
                None
                if col.optional
                else (dt.datetime(1970, 1, 1) if col.base_type != "DATE" else dt.date(1970, 1, 1))
            )
        if raw is not None:
            try:
                value = converter(col, opts)(raw)
            except (ValueError, TypeError, ArithmeticError, struct.error):
                value = None
            if value is not None:
                schema = schema.with_default(value)
    conv = converter(col, opts, schema)
    return ColumnDef(col.name, schema, conv, col.type_name, col.length, col.scale)
