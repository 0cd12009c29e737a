"""MySQL binary JSON (connectors/sources/mysql/jsonbinary.py) without a server: MariaDB stores JSON as
text, so these byte fixtures are the only exercise of the decoder.

The fixtures are built by a small encoder written from MySQL's format description
(sql-common/json_binary.h): a document is a type byte and a value; objects/arrays come in a small
(16-bit counts and offsets) and a large (32-bit) form — element count, byte size, key entries
(offset, u16 length), value entries (type byte + offset, or the value itself when it fits:
literals and 16-bit ints always, 32-bit ints in the large form), then keys, then values, offsets
counted from the container start; strings and opaque values carry a variable-length size (7 bits
per byte, low first). Every fixture is also decoded by mysql-replication's own decoder
(`pymysqlreplication.json_binary.parse_json`) and the two results compared value by value.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import struct
from typing import Any, NamedTuple

import pytest
from pymysqlreplication.json_binary import parse_json

from connectors.sources.mysql.jsonbinary import decode_decimal, render

SMALL_OBJ, LARGE_OBJ, SMALL_ARR, LARGE_ARR, LITERAL = 0, 1, 2, 3, 4
INT16, UINT16, INT32, UINT32, INT64, UINT64, DOUBLE, STRING, OPAQUE = 5, 6, 7, 8, 9, 10, 11, 12, 15
T_DATE, T_TIME, T_DATETIME, T_TIMESTAMP, T_NEWDECIMAL, T_BLOB = 10, 11, 12, 7, 246, 252


class Typed(NamedTuple):
    """A scalar stored with an explicit JSON binary type."""

    t: int
    v: Any


class Opaque(NamedTuple):
    ftype: int
    data: bytes


class Large(NamedTuple):
    """A container stored in the large (32-bit) form."""

    v: Any


# --------------------------------------------------------------------------- encoder
def _varlen(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


_INT_FMT = {INT16: "<h", UINT16: "<H", INT32: "<i", UINT32: "<I", INT64: "<q", UINT64: "<Q"}


def _encode(v: Any) -> tuple[int, bytes]:
    """(type, value bytes without the type byte)."""
    if isinstance(v, Large):
        return _container(v.v, large=True)
    if isinstance(v, (dict, list)):
        return _container(v, large=False)
    if v is None or isinstance(v, bool):
        return LITERAL, bytes([0 if v is None else 1 if v else 2])
    if isinstance(v, Typed):
        if v.t == DOUBLE:
            return DOUBLE, struct.pack("<d", v.v)
        return v.t, struct.pack(_INT_FMT[v.t], v.v)
    if isinstance(v, int):  # as MySQL picks: the smallest signed type that holds it
        t = INT16 if -(1 << 15) <= v < 1 << 15 else INT32 if -(1 << 31) <= v < 1 << 31 else INT64
        return t, struct.pack(_INT_FMT[t], v)
    if isinstance(v, float):
        return DOUBLE, struct.pack("<d", v)
    if isinstance(v, str):
        raw = v.encode("utf-8")
        return STRING, _varlen(len(raw)) + raw
    if isinstance(v, Opaque):
        return OPAQUE, bytes([v.ftype]) + _varlen(len(v.data)) + v.data
    raise TypeError(v)


def _inlined(t: int, large: bool) -> bool:
    return t in (LITERAL, INT16, UINT16) or (large and t in (INT32, UINT32))


def _container(v: dict[str, Any] | list[Any], large: bool) -> tuple[int, bytes]:
    is_obj = isinstance(v, dict)
    osz = 4 if large else 2
    fmt = "<I" if large else "<H"
    if is_obj:
        # MySQL stores keys sorted by length, then byte order.
        items = sorted(v.items(), key=lambda kv: (len(kv[0].encode()), kv[0].encode()))  # type: ignore[union-attr]
        keys = [k.encode() for k, _ in items]
        values = [x for _, x in items]
    else:
        keys, values = [], list(v)
    n = len(values)
    header = 2 * osz + (n * (osz + 2) if is_obj else 0) + n * (1 + osz)
    key_area = b"".join(keys)
    key_entries = b""
    off = header
    for k in keys:
        key_entries += struct.pack(fmt, off) + struct.pack("<H", len(k))
        off += len(k)
    value_entries = b""
    value_area = b""
    off = header + len(key_area)
    for x in values:
        t, body = _encode(x)
        if _inlined(t, large):
            value_entries += bytes([t]) + body.ljust(osz, b"\0")
        else:
            value_entries += bytes([t]) + struct.pack(fmt, off + len(value_area))
            value_area += body
    size = header + len(key_area) + len(value_area)
    t = (LARGE_OBJ if large else SMALL_OBJ) if is_obj else (LARGE_ARR if large else SMALL_ARR)
    return t, struct.pack(fmt, n) + struct.pack(
        fmt, size
    ) + key_entries + value_entries + key_area + value_area


def doc(v: Any) -> bytes:
    t, body = _encode(v)
    return bytes([t]) + body


def decimal_bin(value: str, precision: int, scale: int) -> bytes:
    """MySQL DECIMAL binary (decimal2bin): 9-digit groups in 4 big-endian bytes, the partial
    leading integer / trailing fraction group in as few bytes as its digits need; the sign bit
    of the first byte flipped; negative values with every byte inverted."""
    dig2bytes = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
    neg = value.startswith("-")
    ip, _, fp = value.lstrip("-").partition(".")
    fp = fp.ljust(scale, "0")
    intg = precision - scale
    ip = ip.rjust(intg, "0")
    out = bytearray()
    lead = intg % 9
    if lead:
        out += int(ip[:lead]).to_bytes(dig2bytes[lead], "big")
    for i in range(lead, intg, 9):
        out += int(ip[i : i + 9]).to_bytes(4, "big")
    full = scale // 9 * 9
    for i in range(0, full, 9):
        out += int(fp[i : i + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(fp[full:scale]).to_bytes(dig2bytes[scale % 9], "big")
    if neg:
        out = bytearray(b ^ 0xFF for b in out)
    out[0] ^= 0x80
    return bytes(out)


def packed_datetime(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0, us: int = 0) -> bytes:
    ymd = ((y * 13 + mo) << 5) | d
    hms = (h << 12) | (mi << 6) | s
    return struct.pack("<q", (((ymd << 17) | hms) << 24) + us)


def packed_time(h: int, mi: int, s: int, us: int = 0, negative: bool = False) -> bytes:
    v = (((h << 12) | (mi << 6) | s) << 24) + us
    return struct.pack("<q", -v if negative else v)


# --------------------------------------------------------------------------- fixtures
NESTED = {"b": [1, 2.5, "x"], "a": 1, "c": None, "d": True, "e": False, "obj": {"k": [], "kk": {}}}
NESTED_TEXT = '{"a": 1, "b": [1, 2.5, "x"], "c": null, "d": true, "e": false, "obj": {"k": [], "kk": {}}}'
INTS = [
    Typed(INT16, -32768),
    Typed(UINT16, 65535),
    Typed(INT32, -2147483648),
    Typed(UINT32, 4294967295),
    Typed(INT64, -9223372036854775808),
    Typed(UINT64, 18446744073709551615),
    0,
    -1,
    70000,
]
INTS_TEXT = (
    "[-32768, 65535, -2147483648, 4294967295, -9223372036854775808, 18446744073709551615, 0, -1, 70000]"
)
DEC = Opaque(T_NEWDECIMAL, bytes([12, 4]) + decimal_bin("-12345678.9012", 12, 4))

FIXTURES: list[tuple[str, Any, str]] = [
    ("small object, nested", NESTED, NESTED_TEXT),
    ("large object, nested", Large({**NESTED, "obj": Large({"k": Large([]), "kk": {}})}), NESTED_TEXT),
    ("small array of int types", INTS, INTS_TEXT),
    ("large array of int types (32-bit inlined)", Large(INTS), INTS_TEXT),
    ("literals", [None, True, False], "[null, true, false]"),
    ("top-level scalars: string", "h\u00e9llo \u4e2d\U0001f600", '"h\u00e9llo \u4e2d\U0001f600"'),
    ("top-level int16", 7, "7"),
    ("top-level uint64", Typed(UINT64, 1 << 63), "9223372036854775808"),
    ("top-level literal", None, "null"),
    ("empty containers", [{}, [], Large({}), Large([])], "[{}, [], {}, []]"),
    ("escapes", ['a"b\\c', "\n\t\r\b\f", "\x01\x1f", "/"], r'["a\"b\\c", "\n\t\r\b\f", "\u0001\u001F", "/"]'),
    ("long string (2-byte length)", "x" * 300, '"' + "x" * 300 + '"'),
    ("long string (3-byte length)", "y" * 20000, '"' + "y" * 20000 + '"'),
    # Java's Double.toString, and BigDecimal(double).toPlainString where that would use an exponent.
    (
        "doubles",
        [0.1, -2.5, 0.001, 9999999.0, 0.0, Typed(DOUBLE, 1.0)],
        "[0.1, -2.5, 0.001, 9999999.0, 0.0, 1.0]",
    ),
    (
        "doubles in exponent range",
        [1e20, 1e7, 0.0005],
        "[100000000000000000000, 10000000, " + format(decimal.Decimal(0.0005), "f") + "]",
    ),
    (
        "opaque DECIMAL keeps its scale",
        [DEC, Opaque(T_NEWDECIMAL, bytes([5, 2]) + decimal_bin("1.50", 5, 2))],
        "[-12345678.9012, 1.50]",
    ),
    ("opaque DATE", Opaque(T_DATE, packed_datetime(2024, 2, 29)), '"2024-02-29"'),
    (
        "opaque DATETIME",
        Opaque(T_DATETIME, packed_datetime(1999, 12, 31, 23, 59, 58, 123456)),
        '"1999-12-31 23:59:58.123456"',
    ),
    (
        "opaque TIMESTAMP",
        Opaque(T_TIMESTAMP, packed_datetime(2038, 1, 19, 3, 14, 7)),
        '"2038-01-19 03:14:07.000000"',
    ),
    (
        "opaque TIME",
        [Opaque(T_TIME, packed_time(1, 2, 3, 500)), Opaque(T_TIME, packed_time(0, 0, 0))],
        '["01:02:03.000500", "00:00:00.000000"]',
    ),
    ("opaque TIME beyond a day", Opaque(T_TIME, packed_time(838, 59, 59)), '"838:59:59.000000"'),
    ("opaque negative TIME", Opaque(T_TIME, packed_time(12, 0, 1, negative=True)), '"-12:00:01.000000"'),
    (
        "other opaque types as base64",
        Opaque(T_BLOB, b"\x00\xffab"),
        '"base64:type252:' + base64.b64encode(b"\x00\xffab").decode() + '"',
    ),
    (
        "object of everything",
        {
            "dt": Opaque(T_DATETIME, packed_datetime(2020, 1, 2, 3, 4, 5)),
            "n": DEC,
            "s": "v",
            "big": Large([Typed(UINT32, 7)]),
            "f": -0.25,
        },
        '{"f": -0.25, "n": -12345678.9012, "s": "v", "dt": "2020-01-02 03:04:05.000000", "big": [7]}',
    ),
]


# Fixtures mysql-replication itself cannot decode (so there is nothing to compare with).
NOT_DECODED_BY_MYSQL_REPLICATION = {
    "opaque TIMESTAMP": "it decodes only DATE/DATETIME/TIME opaque values as temporal (TIMESTAMP as text)",
    "opaque TIME beyond a day": "it builds a datetime.time, which stops at 23:59:59",
}


@pytest.mark.parametrize("name, value, text", FIXTURES, ids=[f[0] for f in FIXTURES])
def test_render(name: str, value: Any, text: str) -> None:
    assert render(doc(value)) == text


def test_empty_document_is_empty_text() -> None:
    assert render(b"") == ""


def test_unknown_type_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown JSON binary type 13"):
        render(bytes([13, 0]))


def test_encoder_matches_mysql_layout() -> None:
    """The fixture encoder itself, against a hand-written MySQL small object: {"a": 1}."""
    assert doc({"a": 1}) == bytes([0, 1, 0, 12, 0, 11, 0, 1, 0, 5, 1, 0]) + b"a"
    assert doc([Typed(INT32, 5)]) == bytes([2, 1, 0, 11, 0, 7, 7, 0]) + struct.pack("<i", 5)  # not inlined
    assert doc(Large([Typed(INT32, 5)])) == bytes([3]) + struct.pack("<IIB", 1, 13, 7) + struct.pack("<i", 5)


@pytest.mark.parametrize(
    "value, precision, scale",
    [
        ("0", 1, 0),
        ("-1", 1, 0),
        ("12.34", 10, 2),
        ("-99999999.99", 10, 2),
        ("123456789012345678.123456789", 30, 9),
        ("-0.0000000001", 30, 10),
        ("99999", 5, 0),
        ("1.5", 65, 30),
    ],
)
def test_decimal_binary(value: str, precision: int, scale: int) -> None:
    got, end = decode_decimal(b"\xaa" + decimal_bin(value, precision, scale) + b"\xbb", 1, precision, scale)
    assert got == decimal.Decimal(value) and got.as_tuple().exponent == -scale  # the column's scale is kept
    assert end == 1 + len(decimal_bin(value, precision, scale))


# --------------------------------------------------------------------------- cross-check
def _same(ours: Any, theirs: Any, path: str = "$") -> None:
    """Our rendered value (parsed back) against mysql-replication's decoded value."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and list(ours) == [k.decode() for k in theirs], path
        for (k, v), mine in zip(theirs.items(), ours.values(), strict=True):
            _same(mine, v, f"{path}.{k.decode()}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            _same(a, b, f"{path}[{i}]")
    elif isinstance(theirs, bytes):
        assert ours == theirs.decode("utf-8"), path
    elif isinstance(theirs, dt.datetime):
        assert ours in (theirs.strftime("%Y-%m-%d %H:%M:%S.%f"), theirs.date().isoformat()), path
    elif isinstance(theirs, dt.time):  # mysql-replication drops the sign of a negative TIME
        assert ours.lstrip("-") == theirs.strftime("%H:%M:%S.%f") or ours.startswith(("838:", "-838:")), path
    elif isinstance(theirs, decimal.Decimal):
        assert decimal.Decimal(str(ours)) == theirs, path
    elif isinstance(theirs, str):  # an opaque value it decoded as text
        assert ours.startswith("base64:type"), path
        assert base64.b64decode(ours.rsplit(":", 1)[1]).decode(errors="ignore") == theirs, path
    elif isinstance(theirs, bool) or theirs is None:
        assert ours is theirs, path
    elif isinstance(theirs, float):  # a double (DECIMAL opaque values came back as Decimal)
        assert isinstance(ours, (decimal.Decimal, int)) and float(ours) == theirs, path
    else:
        assert ours == theirs and type(ours) is type(theirs), path


@pytest.mark.parametrize("name, value, text", FIXTURES, ids=[f[0] for f in FIXTURES])
def test_matches_mysql_replication(name: str, value: Any, text: str) -> None:
    if name in NOT_DECODED_BY_MYSQL_REPLICATION:
        pytest.skip(NOT_DECODED_BY_MYSQL_REPLICATION[name])
    data = doc(value)
    theirs = parse_json(data[0], data[1:])
    _same(json.loads(render(data), parse_float=decimal.Decimal), theirs)
