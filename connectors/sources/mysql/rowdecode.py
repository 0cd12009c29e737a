"""Row images: per-column value decoders and the row reader generated per table layout.

Rows events are the hot loop of a catch-up, so a table layout (its TABLE_MAP types and metadata,
signedness from the schema model) is compiled once into a `RowReader`:
  * `read_full(buf, off)`: one generated straight-line function for an image with every column
    present — the common types decoded inline (no call, no tuple per value), a branch without
    NULL checks for rows with no NULL; several times faster than a loop over decoder calls;
  * `read(buf, off, present)`: any column subset, through the per-column decoder functions.
`decode_rows` walks a rows event body with it. Values are the raw forms `types.py` converts.
`tests/test_mysql_binlog.py` checks the decoding against mysql-replication's for every type.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from connectors.api import TerminalError
from connectors.sources.mysql import jsonbinary
from connectors.sources.mysql.errors import recovery_hint
from connectors.sources.mysql.model import Table
from connectors.sources.mysql.types import ZERO, BinlogDecimal
from connectors.sources.mysql.wire import (
    DELETE_V1,
    DELETE_V2,
    T_BIT,
    T_BLOB,
    T_DATE,
    T_DATETIME,
    T_DATETIME2,
    T_DOUBLE,
    T_ENUM,
    T_FLOAT,
    T_GEOMETRY,
    T_INT24,
    T_JSON,
    T_LONG,
    T_LONG_BLOB,
    T_LONGLONG,
    T_MEDIUM_BLOB,
    T_NEWDATE,
    T_NEWDECIMAL,
    T_NULL,
    T_SET,
    T_SHORT,
    T_STRING,
    T_TIME,
    T_TIME2,
    T_TIMESTAMP,
    T_TIMESTAMP2,
    T_TINY,
    T_TINY_BLOB,
    T_VAR_STRING,
    T_VARCHAR,
    T_VECTOR,
    T_YEAR,
    WRITE_V1,
    WRITE_V2,
    TableMap,
    lenenc,
)

# A MEDIUM/LONG TEXT/BLOB value this large is a memoryview of the packet, decoded by its
# converter without a copy.
_VIEW_MIN = 1 << 16
_EPOCH = dt.datetime(1970, 1, 1)

Rows = list[tuple[list[Any] | None, list[Any] | None]]  # (before, after) value lists

# --------------------------------------------------------------------------- column decoders
Decoder = Callable[[bytes, int], tuple[Any, int]]


def _fixed(fmt: str) -> Decoder:
    st = struct.Struct(fmt)
    unpack, size = st.unpack_from, st.size

    def dec(buf: bytes, off: int) -> tuple[Any, int]:
        return unpack(buf, off)[0], off + size

    return dec


def _int24(signed: bool) -> Decoder:
    def dec(buf: bytes, off: int) -> tuple[Any, int]:
        return int.from_bytes(buf[off : off + 3], "little", signed=signed), off + 3

    return dec


def _lenbytes(nlen: int, view: bool = False) -> Decoder:
    """Length-prefixed bytes; with `view`, a value of _VIEW_MIN bytes or more (a MEDIUM/LONG
    BLOB or TEXT) is a memoryview of the packet instead of a copy."""
    if nlen == 1:

        def dec1(buf: bytes, off: int) -> tuple[Any, int]:
            n = buf[off]
            off += 1
            return buf[off : off + n], off + n

        return dec1
    if nlen == 2:

        def dec2(buf: bytes, off: int) -> tuple[Any, int]:
            n = buf[off] | buf[off + 1] << 8
            off += 2
            return buf[off : off + n], off + n

        return dec2

    if view:

        def decn_view(buf: bytes, off: int) -> tuple[Any, int]:
            n = int.from_bytes(buf[off : off + nlen], "little")
            off += nlen
            if n >= _VIEW_MIN:  # a large value is not copied out of the packet
                return memoryview(buf)[off : off + n], off + n
            return buf[off : off + n], off + n

        return decn_view

    def decn(buf: bytes, off: int) -> tuple[Any, int]:
        n = int.from_bytes(buf[off : off + nlen], "little")
        off += nlen
        return buf[off : off + n], off + n

    return decn


def _uint_le(size: int) -> Decoder:
    def dec(buf: bytes, off: int) -> tuple[Any, int]:
        return int.from_bytes(buf[off : off + size], "little"), off + size

    return dec


def _fsp_bytes(fsp: int) -> int:
    return (fsp + 1) // 2


def _frac(buf: bytes, off: int, fsp: int) -> int:
    """Fractional seconds (µs) stored big-endian in (fsp+1)/2 bytes."""
    n = (fsp + 1) // 2
    if not n:
        return 0
    v = int.from_bytes(buf[off : off + n], "big")
    return v * (10_000 if n == 1 else 100 if n == 2 else 1)


def _datetime2(fsp: int) -> Decoder:
    size = 5 + _fsp_bytes(fsp)

    def dec(buf: bytes, off: int) -> tuple[Any, int]:
        v = int.from_bytes(buf[off : off + 5], "big") - 0x8000000000
        ymd, hms = v >> 17, v & 0x1FFFF
        ym = ymd >> 5
        y, mo, d = ym // 13, ym % 13, ymd & 31
        if not (y and mo and d):
            return ZERO, off + size
        try:
            val = dt.datetime(y, mo, d, hms >> 12, (hms >> 6) & 63, hms & 63, _frac(buf, off + 5, fsp))
        except ValueError:
            val = ZERO
        return val, off + size

    return dec


def _timestamp2(fsp: int) -> Decoder:
    size = 4 + _fsp_bytes(fsp)

    def dec(buf: bytes, off: int) -> tuple[Any, int]:
        sec = int.from_bytes(buf[off : off + 4], "big")
        us = _frac(buf, off + 4, fsp)
        if not sec and not us:
            return ZERO, off + size
        return _EPOCH + dt.timedelta(0, sec, us), off + size

    return dec


def _time2(fsp: int) -> Decoder:
    nfrac = _fsp_bytes(fsp)
    size = 3 + nfrac

    def dec(buf: bytes, off: int) -> tuple[Any, int]:
        # my_time_packed_from_binary: sign-offset integer part, signed fractional part.
        if nfrac == 3:
            packed = int.from_bytes(buf[off : off + 6], "big") - 0x800000000000
        else:
            ip = int.from_bytes(buf[off : off + 3], "big") - 0x800000
            if nfrac == 0:
                packed = ip << 24
            else:
                frac = int.from_bytes(buf[off + 3 : off + 3 + nfrac], "big")
                if ip < 0 and frac:
                    ip += 1
                    frac -= 0x100 if nfrac == 1 else 0x10000
                packed = (ip << 24) + frac * (10_000 if nfrac == 1 else 100)
        neg = packed < 0
        a = -packed if neg else packed
        ip, us = a >> 24, a % (1 << 24)
        total = (((ip >> 12) & 0x3FF) * 3600 + ((ip >> 6) & 63) * 60 + (ip & 63)) * 1_000_000 + us
        return dt.timedelta(microseconds=-total if neg else total), off + size

    return dec


def _date(buf: bytes, off: int) -> tuple[Any, int]:
    v = buf[off] | buf[off + 1] << 8 | buf[off + 2] << 16
    d, mo, y = v & 31, (v >> 5) & 15, v >> 9
    if not (y and mo and d):
        return ZERO, off + 3
    try:
        return dt.date(y, mo, d), off + 3
    except ValueError:
        return ZERO, off + 3


def _old_time(buf: bytes, off: int) -> tuple[Any, int]:
    v = int.from_bytes(buf[off : off + 3], "little", signed=True)
    neg = v < 0
    v = abs(v)
    td = dt.timedelta(hours=v // 10000, minutes=(v % 10000) // 100, seconds=v % 100)
    return (-td if neg else td), off + 3


def _old_datetime(buf: bytes, off: int) -> tuple[Any, int]:
    v = int.from_bytes(buf[off : off + 8], "little")
    d, t = divmod(v, 1_000_000)
    y, mo, day = d // 10000, (d % 10000) // 100, d % 100
    if not (y and mo and day):
        return ZERO, off + 8
    try:
        return dt.datetime(y, mo, day, t // 10000, (t % 10000) // 100, t % 100), off + 8
    except ValueError:
        return ZERO, off + 8


def _old_timestamp(buf: bytes, off: int) -> tuple[Any, int]:
    sec = int.from_bytes(buf[off : off + 4], "little")
    return (ZERO if not sec else _EPOCH + dt.timedelta(seconds=sec)), off + 4


def _year(buf: bytes, off: int) -> tuple[Any, int]:
    return 1900 + buf[off], off + 1  # as mysql-binlog-connector: YEAR 0000 reads as 1900


def _newdecimal(meta: int) -> Decoder:
    scale = meta & 0xFF
    size, read = jsonbinary.decimal_reader(meta >> 8, scale)

    def dec(buf: bytes, off: int) -> tuple[Any, int]:
        return BinlogDecimal(read(buf, off), scale), off + size

    return dec


def _json(meta: int) -> Decoder:
    raw = _lenbytes(meta)
    render = jsonbinary.render

    def dec(buf: bytes, off: int) -> tuple[Any, int]:
        v, off = raw(buf, off)
        return render(v), off

    return dec


def column_decoder(ftype: int, meta: int, unsigned: bool) -> Decoder:
    if ftype == T_TINY:
        return _fixed("<B" if unsigned else "<b")
    if ftype == T_SHORT:
        return _fixed("<H" if unsigned else "<h")
    if ftype == T_INT24:
        return _int24(not unsigned)
    if ftype == T_LONG:
        return _fixed("<I" if unsigned else "<i")
    if ftype == T_LONGLONG:
        return _fixed("<Q" if unsigned else "<q")
    if ftype == T_FLOAT:
        return _fixed("<f")
    if ftype == T_DOUBLE:
        return _fixed("<d")
    if ftype == T_NEWDECIMAL:
        return _newdecimal(meta)
    if ftype in (T_VARCHAR, T_VAR_STRING):
        return _lenbytes(1 if meta < 256 else 2)
    if ftype == T_STRING:
        real, low = meta >> 8, meta & 0xFF
        if real in (T_ENUM, T_SET):
            return _uint_le(low)
        max_len = (((real >> 4) & 0x3) ^ 0x3) << 8 | low
        return _lenbytes(1 if max_len < 256 else 2)
    if ftype in (T_ENUM, T_SET):
        return _uint_le(meta & 0xFF)
    if ftype in (T_BLOB, T_GEOMETRY, T_TINY_BLOB, T_MEDIUM_BLOB, T_LONG_BLOB, T_VECTOR):
        return _lenbytes(meta or 4, view=True)
    if ftype == T_JSON:
        return _json(meta)
    if ftype == T_BIT:
        nbytes = ((meta & 0xFF) * 8 + (meta >> 8) + 7) // 8

        def bit(buf: bytes, off: int) -> tuple[Any, int]:
            return buf[off : off + nbytes], off + nbytes

        return bit
    if ftype == T_DATETIME2:
        return _datetime2(meta)
    if ftype == T_TIMESTAMP2:
        return _timestamp2(meta)
    if ftype == T_TIME2:
        return _time2(meta)
    if ftype in (T_DATE, T_NEWDATE):
        return _date
    if ftype == T_YEAR:
        return _year
    if ftype == T_TIME:
        return _old_time
    if ftype == T_DATETIME:
        return _old_datetime
    if ftype == T_TIMESTAMP:
        return _old_timestamp
    if ftype == T_NULL:
        return lambda buf, off: (None, off)
    raise TerminalError(f"binlog column type {ftype} is not supported")


@dataclass(slots=True, frozen=True)
class RowReader:
    """How to read the row images of one table layout (see `compile_rows`)."""

    full: tuple[int, ...]  # every column index: the `present` of a full image (compared by identity first)
    read_full: Callable[[bytes, int], tuple[list[Any], int]]  # (buf, off) → (values, off)
    read: Callable[[bytes, int, tuple[int, ...]], tuple[list[Any], int]]  # (buf, off, present) → ...


_STRUCTS = {
    T_SHORT: ("<h", "<H", 2),
    T_LONG: ("<i", "<I", 4),
    T_LONGLONG: ("<q", "<Q", 8),
    T_FLOAT: ("<f", "<f", 4),
    T_DOUBLE: ("<d", "<d", 8),
}


def _inline(i: int, ftype: int, meta: int, unsigned: bool, env: dict[str, Any]) -> list[str]:
    """Statements that set `v{i}` from `buf` at `off` and advance `off`: the common types inline
    (no call, no tuple), any other through its `column_decoder` function."""
    v = f"v{i}"
    if ftype == T_TINY:
        return [f"{v} = buf[off]" if unsigned else f"{v} = buf[off] - ((buf[off] & 0x80) << 1)", "off += 1"]
    if ftype in _STRUCTS:
        signed_fmt, unsigned_fmt, size = _STRUCTS[ftype]
        env[f"u{i}"] = struct.Struct(unsigned_fmt if unsigned else signed_fmt).unpack_from
        return [f"{v} = u{i}(buf, off)[0]", f"off += {size}"]
    nlen = 0
    if ftype in (T_VARCHAR, T_VAR_STRING):
        nlen = 1 if meta < 256 else 2
    elif ftype == T_STRING and (meta >> 8) not in (T_ENUM, T_SET):
        real, low = meta >> 8, meta & 0xFF
        nlen = 1 if ((((real >> 4) & 0x3) ^ 0x3) << 8 | low) < 256 else 2
    elif ftype in (T_BLOB, T_TINY_BLOB, T_MEDIUM_BLOB, T_LONG_BLOB) and (meta or 4) <= 2:
        nlen = meta or 4
    if nlen == 1:
        return ["n = buf[off] + off + 1", f"{v} = buf[off + 1:n]", "off = n"]
    if nlen == 2:
        return ["n = (buf[off] | buf[off + 1] << 8) + off + 2", f"{v} = buf[off + 2:n]", "off = n"]
    if ftype == T_TIMESTAMP2:
        nfrac = _fsp_bytes(meta)
        us = f"frm(buf[off + 4:off + {4 + nfrac}], 'big')" if nfrac else "0"
        if nfrac in (1, 2):
            us += f" * {10_000 if nfrac == 1 else 100}"
        return [
            "sec = frm(buf[off:off + 4], 'big')",
            f"us = {us}",
            f"{v} = EPOCH + TD(0, sec, us) if sec or us else ZERO",
            f"off += {4 + nfrac}",
        ]
    if ftype == T_NEWDECIMAL:
        scale = meta & 0xFF
        size, env[f"r{i}"] = jsonbinary.decimal_reader(meta >> 8, scale)
        return [f"{v} = BinlogDecimal(r{i}(buf, off), {scale})", f"off += {size}"]
    env[f"d{i}"] = column_decoder(ftype, meta, unsigned)
    return [f"{v}, off = d{i}(buf, off)"]


def _full_reader(
    types: bytes, metas: tuple[int, ...], unsigned: list[bool]
) -> Callable[[bytes, int], tuple[list[Any], int]]:
    """`read(buf, off) → (values, off)` for a row image with every column present, generated
    per table layout: one straight-line function (a branch without NULL checks for rows with no
    NULL) is several times faster than a loop over per-column decoder calls."""
    n = len(types)
    nb = (n + 7) // 8
    env: dict[str, Any] = {
        "BinlogDecimal": BinlogDecimal,
        "frm": int.from_bytes,
        "EPOCH": _EPOCH,
        "TD": dt.timedelta,
        "ZERO": ZERO,
    }
    cols = [_inline(i, t, m, u, env) for i, (t, m, u) in enumerate(zip(types, metas, unsigned, strict=True))]
    lines = [
        "def read(buf, off):",
        "    nulls = buf[off]" if nb == 1 else f"    nulls = frm(buf[off:off + {nb}], 'little')",
        f"    off += {nb}",
        "    if not nulls:",
    ]
    lines += [f"        {stmt}" for stmts in cols for stmt in stmts]
    lines.append("    else:")
    for i, stmts in enumerate(cols):
        lines.append(f"        if nulls & {1 << i}:")
        lines.append(f"            v{i} = None")
        lines.append("        else:")
        lines += [f"            {stmt}" for stmt in stmts]
    lines.append(f"    return [{', '.join(f'v{i}' for i in range(n))}], off")
    exec(compile("\n".join(lines), "<binlog row reader>", "exec"), env)  # noqa: S102 - generated from type codes only
    return env["read"]


def compile_rows(tm: TableMap, table: Table | None, config_path: str | None = None) -> RowReader:
    """The row image reader of one table layout. Signedness comes from the table model
    (Debezium's model, not the table map's metadata)."""
    n = len(tm.types)
    if table is not None and len(table.columns) != n:
        raise TerminalError(
            f"table {tm.db}.{tm.table}: the binlog has {n} columns, the schema model {len(table.columns)} (the "
            "schema history does not match the server: a DDL statement was skipped, or ran with sql_log_bin=0)",
            recovery_hint(config_path),
        )
    unsigned = [c.unsigned for c in table.columns] if table is not None else [False] * n
    decs = []
    for i, (t, m, u) in enumerate(zip(tm.types, tm.metas, unsigned, strict=True)):
        try:
            decs.append(column_decoder(t, m, u))
        except TerminalError as e:
            col = table.columns[i] if table is not None else None
            name = f"{col.name} ({col.type_name})" if col is not None else f"#{i + 1}"
            raise TerminalError(
                f"table {tm.db}.{tm.table} column {name}: {e.message}",
                "exclude the table (table.exclude.list); this column type cannot be decoded from the binlog",
            ) from None
    full = tuple(range(n))
    read_full = _full_reader(tm.types, tm.metas, unsigned)

    def read(buf: bytes, off: int, present: tuple[int, ...]) -> tuple[list[Any], int]:
        if present is full or present == full:
            return read_full(buf, off)
        row: list[Any] = [None] * n
        nb = (len(present) + 7) // 8
        nulls = int.from_bytes(buf[off : off + nb], "little")
        off += nb
        for j, i in enumerate(present):
            if not nulls >> j & 1:
                row[i], off = decs[i](buf, off)
        return row, off

    return RowReader(full, read_full, read)


def _present(bitmap: bytes, n: int, full: tuple[int, ...]) -> tuple[int, ...]:
    v = int.from_bytes(bitmap, "little")
    if v == (1 << n) - 1:
        return full
    return tuple(i for i in range(n) if v >> i & 1)


def decode_rows(etype: int, data: bytes, p: int, end: int, reader: RowReader) -> Rows:
    """The rows of a rows event (type `etype`) whose body is data[p:end]."""
    p += 8
    if etype >= WRITE_V2:
        p += data[p] | data[p + 1] << 8  # extra_data_len counts its own two bytes
    n, p = lenenc(data, p)
    nb = (n + 7) // 8
    full = reader.full
    present = _present(data[p : p + nb], n, full)
    p += nb
    out: Rows = []
    if etype in (WRITE_V2, WRITE_V1):
        if present is full:
            read_full = reader.read_full
            while p < end:
                row, p = read_full(data, p)
                out.append((None, row))
        else:
            read = reader.read
            while p < end:
                row, p = read(data, p, present)
                out.append((None, row))
    elif etype in (DELETE_V2, DELETE_V1):
        read = reader.read
        while p < end:
            row, p = read(data, p, present)
            out.append((row, None))
    else:
        present2 = _present(data[p : p + nb], n, full)
        p += nb
        read = reader.read
        while p < end:
            before, p = read(data, p, present)
            after, p = read(data, p, present2)
            out.append((before, after))
    return out


def as_bytes(rows: Rows) -> Rows:
    """Rows decoded from a large packet (a bytearray): its short values are bytearray slices,
    made bytes like every other packet's (large ones stay memoryviews of the packet)."""

    def fix(image: list[Any] | None) -> list[Any] | None:
        if image is None:
            return None
        return [bytes(v) if type(v) is bytearray else v for v in image]

    return [(fix(before), fix(after)) for before, after in rows]
