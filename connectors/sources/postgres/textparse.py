"""Parsers of PostgreSQL's text output forms that pgoutput sends: arrays, hstore, bytea, money,
points, PostGIS EWKB headers; and Java's HashMap order (Debezium emits hstore maps in it)."""

from __future__ import annotations

import base64
import binascii
import struct as _struct
from decimal import Decimal
from typing import Any


def parse_array(text: str, delim: str = ",") -> list[Any]:
    """PostgreSQL array text -> nested lists of element strings (None for unquoted NULL).
    `delim` is the element type's typdelim (',' for all built-ins but box; PostGIS uses ':')."""
    if text.startswith("["):  # explicit bounds decoration: [1:3]={...}
        text = text[text.index("=") + 1 :]
    pos = 0
    n = len(text)

    def parse_level() -> list[Any]:
        nonlocal pos
        out: list[Any] = []
        pos += 1  # '{'
        while pos < n:
            c = text[pos]
            if c == "}":
                pos += 1
                return out
            if c == delim or c == " ":
                pos += 1
                continue
            if c == "{":
                out.append(parse_level())
            elif c == '"':
                pos += 1
                buf = []
                while text[pos] != '"':
                    if text[pos] == "\\":
                        pos += 1
                    buf.append(text[pos])
                    pos += 1
                pos += 1
                out.append("".join(buf))
            else:
                start = pos
                while pos < n and text[pos] != delim and text[pos] != "}":
                    pos += 1
                tok = text[start:pos].strip()
                out.append(None if tok.upper() == "NULL" else tok)
        return out

    return parse_level() if text.startswith("{") else []


def parse_hstore(text: str) -> dict[str, str | None]:
    """hstore text ('"a"=>"1", "b"=>NULL') -> dict in input order."""
    out: dict[str, str | None] = {}
    pos, n = 0, len(text)

    def token() -> tuple[str, bool]:
        nonlocal pos
        while pos < n and text[pos] in " ,":
            pos += 1
        if text[pos] == '"':
            pos += 1
            buf = []
            while text[pos] != '"':
                if text[pos] == "\\":
                    pos += 1
                buf.append(text[pos])
                pos += 1
            pos += 1
            return "".join(buf), True
        start = pos
        while pos < n and text[pos] not in ",=" and not text.startswith("=>", pos):
            pos += 1
        return text[start:pos].strip(), False

    while True:
        while pos < n and text[pos] in " ,":
            pos += 1
        if pos >= n:
            return out
        key, _ = token()
        while text[pos] == " ":
            pos += 1
        pos += 2  # '=>'
        val, quoted = token()
        out[key] = None if (not quoted and val.upper() == "NULL") else val


def _java_string_hash(s: str) -> int:
    h = 0
    for unit in _struct.unpack(f"<{len(s.encode('utf-16-le')) // 2}H", s.encode("utf-16-le")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h


def java_hashmap_order(keys: list[str]) -> list[str]:
    """Iteration order of a java.util.HashMap filled with `keys` in this order (no treeification)."""
    cap = 16
    while len(keys) > cap * 0.75:
        cap *= 2

    def bucket(k: str) -> int:
        h = _java_string_hash(k)
        return (h ^ (h >> 16)) & (cap - 1)

    return [k for _, _, k in sorted((bucket(k), i, k) for i, k in enumerate(keys))]


# Jackson escapes control characters with upper-case \\u00XX (Python's json uses lower case).
_JACKSON_ESCAPES = {i: f"\\u{i:04X}" for i in range(32)}
_JACKSON_ESCAPES.update({8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r", 34: '\\"', 92: "\\\\"})


def json_str(s: str) -> str:
    return '"' + s.translate(_JACKSON_ESCAPES) + '"'


def hstore_json(text: str) -> str:
    m = parse_hstore(text)
    parts = []
    for k in java_hashmap_order(list(m)):
        v = m[k]
        parts.append(f"{json_str(k)}:{'null' if v is None else json_str(v)}")
    return "{" + ",".join(parts) + "}"


def hstore_map(text: str) -> dict[str, str | None]:
    m = parse_hstore(text)
    return {k: m[k] for k in java_hashmap_order(list(m))}


def bytea_from_text(text: str) -> bytes:
    """bytea output text (hex '\\x..' or the old escape format) -> bytes."""
    if text.startswith("\\x"):
        return binascii.unhexlify(text[2:])
    out = bytearray()
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            if text[i + 1] == "\\":
                out.append(92)
                i += 2
            else:
                out.append(int(text[i + 1 : i + 4], 8))
                i += 4
        else:
            out += c.encode("utf-8")
            i += 1
    return bytes(out)


def ewkb_srid(data: bytes) -> int | None:
    """SRID of a PostGIS EWKB value, None without one. Debezium sends the EWKB itself as `wkb`
    (SRID flag and all, checked against Debezium 3.6) and the SRID beside it."""
    if len(data) < 5:
        raise ValueError("EWKB too short")
    order = "<" if data[0] == 1 else ">"
    (gtype,) = _struct.unpack(order + "I", data[1:5])
    if gtype & 0x20000000:
        return _struct.unpack(order + "i", data[5:9])[0]
    return None


def money_decimal(text: str) -> Decimal:
    # pgjdbc/Debezium: "-$1,234.50" -> "($1,234.50)" -> drop parens and the currency symbol, commas.
    neg = text.startswith("-") or text.startswith("(")
    body = text.strip("-()")
    i = 0
    while i < len(body) and not (body[i].isdigit() or body[i] == "."):
        i += 1
    d = Decimal(body[i:].replace(",", ""))
    return -d if neg else d


def point_wkb(x: float, y: float) -> str:
    return base64.b64encode(b"\x01" + _struct.pack("<Idd", 1, x, y)).decode("ascii")


def parse_point(text: str) -> tuple[float, float]:
    xs, ys = text.strip("()").split(",")
    return float(xs), float(ys)
