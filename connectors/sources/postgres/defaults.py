"""Column default values as schema defaults, as Debezium 3.6's PostgresDefaultValueConverter
derives them from the default expression (pg_attrdef): only for some types, keyed by the
column's own type name (a domain's default is dropped); a function call becomes the type's
placeholder (so serial ids default to 0); the text is converted by the column's own converter;
structs (VariableScaleDecimal, Point) never become defaults. Unparsable defaults are dropped, as
Debezium logs and drops them.
"""

from __future__ import annotations

import re
import uuid as _uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from connectors.format.schema import NO_DEFAULT
from connectors.sources.postgres.catalog import ColumnInfo, TypeInfo

__all__ = ["default_value"]

_LITERAL = re.compile(r"'(.*?)'")
_FUNCTION = re.compile(r"^[(]?[A-Za-z0-9_.]+\((?:.+(?:, ?.+)*)?\)")
_CURRENT = {"current_timestamp", "current_time", "current_date", "localtime", "localtimestamp"}
_TRIM = {
    "bit",
    "varbit",
    "bool",
    "numeric",
    "float4",
    "float8",
    "int2",
    "int4",
    "serial",
    "int8",
    "bigserial",
    "smallserial",
    "uuid",
    "date",
    "time",
    "timestamp",
    "timestamptz",
    "interval",
}


def _extract(expr: str, generated: str | None = None) -> str | None:
    if generated is not None and (_FUNCTION.search(expr) or expr.lower() in _CURRENT):
        return generated
    if "'" not in expr:
        return None if expr.startswith("NULL::") else expr
    m = _LITERAL.search(expr)
    return m.group(1) if m else None


def default_value(col: ColumnInfo, info: TypeInfo, convert: Callable[[str], Any]) -> Any:
    """The schema default Debezium's PostgresDefaultValueConverter derives, or NO_DEFAULT."""
    expr = col.default_expr
    if expr is None:
        return NO_DEFAULT
    tname = info.name  # Debezium keys mappers by the column's own type name (domains have none)
    if tname in _TRIM:
        expr = expr.strip()
    try:
        value = _default_text(tname, info, expr)
    except Exception:  # noqa: BLE001 - Debezium logs and drops unparsable defaults
        return NO_DEFAULT
    if value is NO_DEFAULT or value is None:
        return NO_DEFAULT
    if isinstance(value, bool):
        return value
    try:
        out = convert(value)
    except Exception:  # noqa: BLE001
        return NO_DEFAULT
    if out is None or isinstance(out, dict):  # structs (VariableScaleDecimal, Point) never become defaults
        return NO_DEFAULT
    return out


def _default_text(tname: str, info: TypeInfo, expr: str) -> Any:
    """Default expression -> text the column converter understands (or a bool), like Debezium's mappers."""
    if expr.startswith("NULL::") and tname in ("bool", "numeric", "float4", "float8", "int2", "int4", "int8"):
        return None
    if tname == "bit":
        v = _extract(expr, "00")
        if v is not None and len(v) == 1:
            return v == "1"
        return v
    if tname == "varbit":
        return _extract(expr, "0")
    if tname == "bool":
        return (_extract(expr, "false") or "").lower() == "true"
    if tname in ("bpchar", "varchar", "text", "xml"):
        return _extract(expr, "")
    if tname in ("json", "jsonb"):
        return _extract(expr, "{}")
    if tname == "numeric":
        v = _extract(expr, "0.0")
        return None if v is None else str(Decimal(v))
    if tname in ("float4", "float8"):
        v = _extract(expr, "0.0")
        return None if v is None else repr(float(v))
    if tname in ("int2", "int4", "int8"):
        v = _extract(expr, "0")
        return None if v is None else str(int(v))
    if tname == "uuid":
        v = _extract(expr, "00000000-0000-0000-0000-000000000000")
        return None if v is None else str(_uuid.UUID(v))
    if tname == "date":
        v = _extract(expr, "1970-01-01")
        return None if v is None else v.split(" ")[0]
    if tname == "time":
        v = _extract(expr, "00:00")
        if v is None:
            return None
        return v if v.count(":") >= 2 else v + ":00"
    if tname == "timestamp":
        v = _extract(expr, "1970-01-01")
        if v is None:
            return None
        return v if " " in v else v + " 00:00:00"
    if tname == "timestamptz":
        v = _extract(expr, "1970-01-01")
        if v is None:
            return None
        if " " not in v:
            v += " 00:00:00"
        if not re.search(r"[+-]\d\d(:\d\d)*$", v.split(" ", 1)[1]):
            v += "+00"  # no offset: pgjdbc reads it as UTC
        return v
    if tname == "interval":
        v = _extract(expr, "epoch")
        return None if v is None else ("00:00:00" if v == "epoch" else v)
    if info.is_enum:
        suffix = "::" + tname
        if expr.endswith(suffix):
            body = expr[: -len(suffix)]
            if len(body) >= 2 and body.startswith("'") and body.endswith("'"):
                return body[1:-1]
        return None
    return NO_DEFAULT
