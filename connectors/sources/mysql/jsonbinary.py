"""MySQL binary JSON (binlog `JSON` column values) → the JSON text Debezium emits.

Debezium renders these with `DatabaseJsonStringFormatter` (mysql-binlog-connector's `JsonBinary`
plus the server's spacing): `{"a": 1, "b": [1, 2]}`, keys in stored order, doubles as Java's
`Double.toString` (plain decimal instead of an exponent), DECIMAL with its scale, temporal
scalars with six fraction digits, other opaque scalars as `base64:typeNN:<b64>`.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable

from connectors.sources.mysql.types import java_double

_ESC = {0x22: '\\"', 0x5C: "\\\\", 0x08: "\\b", 0x09: "\\t", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r"}
_ESCAPES = {i: f"\\u{i:04X}" for i in range(32)}
_ESCAPES.update(_ESC)
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def _quote(s: str) -> str:
    return '"' + s.translate(_ESCAPES) + '"'


def render(data: bytes) -> str:
    """Binary JSON document → text. Empty input (a JSON NULL stored as empty) → ""."""
    if not data:
        return ""
    out: list[str] = []
    _value(data, data[0], 1, out, False)
    return "".join(out)


def _varlen(buf: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n, pos
        shift += 7


def _value(buf: bytes, t: int, pos: int, out: list[str], _large: bool) -> None:
    if t in (0, 1, 2, 3):
        _container(buf, t, pos, out)
    elif t == 4:
        lit = buf[pos]
        out.append("null" if lit == 0 else "true" if lit == 1 else "false")
    elif t == 5:
        out.append(str(struct.unpack_from("<h", buf, pos)[0]))
    elif t == 6:
        out.append(str(struct.unpack_from("<H", buf, pos)[0]))
    elif t == 7:
        out.append(str(struct.unpack_from("<i", buf, pos)[0]))
    elif t == 8:
        out.append(str(struct.unpack_from("<I", buf, pos)[0]))
    elif t == 9:
        out.append(str(struct.unpack_from("<q", buf, pos)[0]))
    elif t == 10:
        out.append(str(struct.unpack_from("<Q", buf, pos)[0]))
    elif t == 11:
        out.append(java_double(struct.unpack_from("<d", buf, pos)[0]))
    elif t == 12:
        n, p = _varlen(buf, pos)
        out.append(_quote(buf[p : p + n].decode("utf-8", "replace")))
    elif t == 15:
        ftype = buf[pos]
        n, p = _varlen(buf, pos + 1)
        out.append(_opaque(ftype, buf[p : p + n]))
    else:
        raise ValueError(f"unknown JSON binary type {t}")


def _container(buf: bytes, t: int, pos: int, out: list[str]) -> None:
    large = t in (1, 3)
    is_obj = t in (0, 1)
    fmt, osz = ("<I", 4) if large else ("<H", 2)
    count = struct.unpack_from(fmt, buf, pos)[0]
    base = pos
    p = pos + 2 * osz
    keys: list[str] = []
    if is_obj:
        for _ in range(count):
            koff = struct.unpack_from(fmt, buf, p)[0]
            klen = struct.unpack_from("<H", buf, p + osz)[0]
            keys.append(buf[base + koff : base + koff + klen].decode("utf-8", "replace"))
            p += osz + 2
    out.append("{" if is_obj else "[")
    for i in range(count):
        if i:
            out.append(", ")
        if is_obj:
            out.append(_quote(keys[i]) + ": ")
        vt = buf[p]
        inlined = vt in (4, 5, 6) or (large and vt in (7, 8))
        if inlined:
            _value(buf, vt, p + 1, out, large)
        else:
            off = struct.unpack_from(fmt, buf, p + 1)[0]
            _value(buf, vt, base + off, out, large)
        p += 1 + osz
    out.append("}" if is_obj else "]")


def _opaque(ftype: int, data: bytes) -> str:
    if ftype == 246 and len(data) >= 2:  # DECIMAL: precision, scale, then MySQL decimal binary
        return format(decode_decimal(data, 2, data[0], data[1])[0], "f")
    if ftype in (10, 14) and len(data) >= 8:  # DATE
        y, mo, d, *_ = _packed_datetime(struct.unpack_from("<q", data, 0)[0])
        return f'"{y:04d}-{mo:02d}-{d:02d}"'
    if ftype in (7, 12, 17, 18) and len(data) >= 8:  # TIMESTAMP / DATETIME
        y, mo, d, h, mi, s, us = _packed_datetime(struct.unpack_from("<q", data, 0)[0])
        return f'"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}.{us:06d}"'
    if ftype in (11, 19) and len(data) >= 8:  # TIME
        v = struct.unpack_from("<q", data, 0)[0]
        neg = v < 0
        v = -v if neg else v
        ip, us = v >> 24, v % (1 << 24)
        h, mi, s = (ip >> 12) % (1 << 10), (ip >> 6) % 64, ip % 64
        return f'"{"-" if neg else ""}{h:02d}:{mi:02d}:{s:02d}.{us:06d}"'
    return '"base64:type' + str(ftype) + ":" + base64.b64encode(data).decode("ascii") + '"'


def _packed_datetime(v: int) -> tuple[int, int, int, int, int, int, int]:
    v = abs(v)
    ip, us = v >> 24, v % (1 << 24)
    ymd, hms = ip >> 17, ip % (1 << 17)
    ym = ymd >> 5
    return ym // 13, ym % 13, ymd % 32, hms >> 12, (hms >> 6) % 64, hms % 64, us


def decimal_reader(precision: int, scale: int) -> tuple[int, Callable[[bytes, int], int]]:
    """(size, read) for MySQL's binary DECIMAL(precision, scale): `read(buf, off)` → the signed
    unscaled integer (value × 10**scale) of the `size` bytes at `off`, without a Decimal.

    The format (decimal2bin): big-endian groups of 9 digits in 4 bytes, a shorter leading
    integer group and trailing fraction group; the first bit is flipped and a negative value
    has every byte inverted. As one big-endian integer each group is a bit field."""
    intg0, intg0x = divmod(precision - scale, 9)
    frac0, frac0x = divmod(scale, 9)
    widths = (
        ([(_DIG2BYTES[intg0x], intg0x)] if intg0x else [])
        + [(4, 9)] * (intg0 + frac0)
        + ([(_DIG2BYTES[frac0x], frac0x)] if frac0x else [])
    )
    size = sum(b for b, _ in widths)
    top, full = 1 << (size * 8 - 1), (1 << (size * 8)) - 1
    groups: list[tuple[int, int, int]] = []  # (bit shift, mask, decimal weight), least significant first
    shift = digits = 0
    for nbytes, ndig in reversed(widths):
        groups.append((shift, (1 << (nbytes * 8)) - 1, 10**digits))
        shift += nbytes * 8
        digits += ndig
    frm = int.from_bytes

    if len(groups) == 1:
        (_, m0, _) = groups[0]

        def read1(buf: bytes, off: int) -> int:
            v = frm(buf[off : off + size], "big")
            if v & top:
                return (v ^ top) & m0
            return -((v ^ top ^ full) & m0)

        return size, read1

    if len(groups) == 2:
        (_, m0, _), (s1, m1, w1) = groups

        def read2(buf: bytes, off: int) -> int:
            v = frm(buf[off : off + size], "big")
            if v & top:
                v ^= top
                return (v >> s1 & m1) * w1 + (v & m0)
            v ^= top ^ full
            return -((v >> s1 & m1) * w1 + (v & m0))

        return size, read2

    def readn(buf: bytes, off: int) -> int:
        v = frm(buf[off : off + size], "big")
        neg = not v & top
        v ^= (top ^ full) if neg else top
        u = 0
        for s, m, w in groups:
            u += (v >> s & m) * w
        return -u if neg else u

    return size, readn


def decode_decimal(buf: bytes, off: int, precision: int, scale: int) -> tuple[object, int]:
    """MySQL DECIMAL binary → (decimal.Decimal, next offset)."""
    import decimal

    intg = precision - scale
    intg0, intg0x = divmod(intg, 9)
    frac0, frac0x = divmod(scale, 9)
    size = intg0 * 4 + _DIG2BYTES[intg0x] + frac0 * 4 + _DIG2BYTES[frac0x]
    raw = bytearray(buf[off : off + size])
    positive = bool(raw[0] & 0x80)
    raw[0] ^= 0x80
    if not positive:
        raw = bytearray(b ^ 0xFF for b in raw)
    p = 0
    value = 0
    n = _DIG2BYTES[intg0x]
    if n:
        value = int.from_bytes(raw[p : p + n], "big")
        p += n
    for _ in range(intg0):
        value = value * 1_000_000_000 + int.from_bytes(raw[p : p + 4], "big")
        p += 4
    for _ in range(frac0):
        value = value * 1_000_000_000 + int.from_bytes(raw[p : p + 4], "big")
        p += 4
    n = _DIG2BYTES[frac0x]
    if n:
        value = value * 10**frac0x + int.from_bytes(raw[p : p + n], "big")
    digits = tuple(int(c) for c in str(value))
    return decimal.Decimal((0 if positive else 1, digits, -scale)), off + size
