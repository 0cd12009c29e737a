"""Date/time/decimal/binary helpers shared by the PostgreSQL and MySQL type converters.

Everything here produces Kafka Connect JSON-converter values exactly as Debezium 3.x emits them:
epoch days / millis / micros as ints, zoned values as ISO strings in UTC, decimals as base64 of
the big-endian two's-complement unscaled value (Java `BigInteger.toByteArray`). Python's
`datetime` cannot hold year <= 0 or year > 9999, so calendar math is done on plain integers
(proleptic Gregorian, like java.time).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from connectors.format.schema import Schema, prim, struct

MICROS_PER_SECOND = 1_000_000
MICROS_PER_DAY = 86_400 * MICROS_PER_SECOND
DAYS_PER_MONTH_AVG = 365.25 / 12.0  # Debezium MicroDuration.DAYS_PER_MONTH_AVG

# PostgreSQL infinity as Debezium sends it (pgjdbc PGStatement.DATE_POSITIVE/NEGATIVE_INFINITY as micros).
PG_INFINITY_MICROS = 9223372036825200000
PG_NEG_INFINITY_MICROS = -9223372036832400000
# Debezium maps date 'infinity' / '-infinity' to LocalDate -5877611-06-21 / -5877611-06-22 (sic) and
# emits their epoch days.
PG_INFINITY_DAYS = -2147472693
PG_NEG_INFINITY_DAYS = -2147472692

# --------------------------------------------------------------------------- calendar


def days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (year 0 = 1 BC). H. Hinnant's algorithm."""
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = (z if z >= 0 else z - 146096) // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return y + (m <= 2), m, d


def _frac_to_micros(frac: str) -> int:
    # "945104" -> 945104, "9" -> 900000; more than 6 digits is truncated (PG never sends that).
    return int((frac + "000000")[:6]) if frac else 0


# --------------------------------------------------------------------------- PostgreSQL text parsing


def _split_bc(text: str) -> tuple[str, bool]:
    if text.endswith(" BC"):
        return text[:-3], True
    return text, False


def _date_days(date_part: str, bc: bool) -> int:
    y_s, m_s, d_s = date_part.rsplit("-", 2)
    y = int(y_s)
    if bc:
        y = 1 - y  # 1 BC is proleptic year 0
    return days_from_civil(y, int(m_s), int(d_s))


def pg_date_to_days(text: str) -> int:
    """PostgreSQL DATE text (ISO DateStyle) -> epoch days; infinity as Debezium's wrapped ints."""
    if text == "infinity":
        return PG_INFINITY_DAYS
    if text == "-infinity":
        return PG_NEG_INFINITY_DAYS
    body, bc = _split_bc(text)
    return _date_days(body, bc)


def parse_time_micros(text: str) -> int:
    """'HH:MM:SS[.ffffff]' -> micros of day; allows 24:00:00 (Debezium uses a Duration here)."""
    h, m, rest = text.split(":", 2)
    if "." in rest:
        s, frac = rest.split(".", 1)
    else:
        s, frac = rest, ""
    return ((int(h) * 60 + int(m)) * 60 + int(s)) * MICROS_PER_SECOND + _frac_to_micros(frac)


def pg_timestamp_to_micros(text: str) -> int:
    """TIMESTAMP (without time zone) text read as UTC -> epoch micros."""
    if text == "infinity":
        return PG_INFINITY_MICROS
    if text == "-infinity":
        return PG_NEG_INFINITY_MICROS
    body, bc = _split_bc(text)
    date_part, time_part = body.split(" ", 1)
    return _date_days(date_part, bc) * MICROS_PER_DAY + parse_time_micros(time_part)


def _split_offset(text: str) -> tuple[str, int]:
    """'12:00:00.5+05:30' -> ('12:00:00.5', 19800). Offsets may be +HH, +HH:MM or +HH:MM:SS."""
    i = max(text.rfind("+"), text.rfind("-"))
    if i <= 0:
        raise ValueError(f"no UTC offset in {text!r}")
    off = text[i + 1 :].split(":")
    secs = (
        int(off[0]) * 3600 + (int(off[1]) * 60 if len(off) > 1 else 0) + (int(off[2]) if len(off) > 2 else 0)
    )
    return text[:i], -secs if text[i] == "-" else secs


def pg_timestamptz_to_micros(text: str) -> int:
    """TIMESTAMPTZ text (any session time zone) -> epoch micros UTC."""
    body, bc = _split_bc(text)
    date_part, rest = body.split(" ", 1)
    clock, offset = _split_offset(rest)
    return _date_days(date_part, bc) * MICROS_PER_DAY + parse_time_micros(clock) - offset * MICROS_PER_SECOND


# --------------------------------------------------------------------------- ISO formatting (java.time style)


def _iso_year(y: int) -> str:
    # java.time ISO_LOCAL_DATE: 4 digits minimum, '+' above 9999, '-' for negative proleptic years.
    if y > 9999:
        return f"+{y}"
    if y < 0:
        return f"-{-y:04d}"
    return f"{y:04d}"


def _iso_fraction(micros: int, width: int | None) -> str:
    """Fraction of second: exactly `width` digits (1..9), else ISO minimal (none when zero)."""
    if width is not None and 0 < width <= 9:
        return "." + f"{micros:06d}000"[:width]
    if micros == 0:
        return ""
    return "." + f"{micros:06d}".rstrip("0")


def format_zoned_timestamp(epoch_micros: int, fraction_width: int | None = None) -> str:
    """Debezium ZonedTimestamp text in UTC, e.g. '2018-06-20T15:13:16.945104Z'."""
    days, tod = divmod(epoch_micros, MICROS_PER_DAY)
    y, m, d = civil_from_days(days)
    secs, micros = divmod(tod, MICROS_PER_SECOND)
    hh, rem = divmod(secs, 3600)
    mm, ss = divmod(rem, 60)
    return (
        f"{_iso_year(y)}-{m:02d}-{d:02d}T{hh:02d}:{mm:02d}:{ss:02d}{_iso_fraction(micros, fraction_width)}Z"
    )


def format_iso_date(days: int) -> str:
    """Debezium IsoDate text (ISO_OFFSET_DATE at UTC), e.g. '2018-06-20Z'."""
    y, m, d = civil_from_days(days)
    return f"{_iso_year(y)}-{m:02d}-{d:02d}Z"


def format_zoned_time(micros_of_day: int) -> str:
    """Debezium ZonedTime / IsoTime text (ISO_OFFSET_TIME, UTC), e.g. '10:15:30.5Z'."""
    secs, micros = divmod(micros_of_day, MICROS_PER_SECOND)
    hh, rem = divmod(secs, 3600)
    mm, ss = divmod(rem, 60)
    return f"{hh:02d}:{mm:02d}:{ss:02d}{_iso_fraction(micros, None)}Z"


def pg_timetz_to_zoned(text: str) -> str:
    """TIMETZ text -> ZonedTime in UTC ('24:00:00+00' kept as end of day, as Debezium's boundary)."""
    clock, offset = _split_offset(text)
    micros = parse_time_micros(clock)
    if micros == MICROS_PER_DAY and offset == 0:
        return "24:00:00Z"
    return format_zoned_time((micros - offset * MICROS_PER_SECOND) % MICROS_PER_DAY)


# The stream's session runs with TimeZone=UTC, so timestamptz text is already UTC: re-punctuate it.
_TSTZ_UTC = re.compile(r"(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?\+00")


def pg_timestamptz_to_zoned(text: str, fraction_width: int | None) -> str:
    m = _TSTZ_UTC.fullmatch(text)
    if m is not None:
        d, t, f = m.groups()
        if fraction_width is not None and 0 < fraction_width <= 9:
            frac = "." + ((f or "") + "000000000")[:fraction_width]
        else:
            frac = "." + f.rstrip("0") if f and f.rstrip("0") else ""
        return f"{d}T{t}{frac}Z"
    if text == "infinity" or text == "-infinity":
        return text
    return format_zoned_timestamp(pg_timestamptz_to_micros(text), fraction_width)


def micros_to_millis(micros: int) -> int:
    """Floor, like java.time Instant.toEpochMilli."""
    return micros // 1000


# --------------------------------------------------------------------------- intervals


def parse_pg_interval(text: str) -> tuple[int, int, int, int, int, float]:
    """PostgreSQL interval text (postgres / postgres_verbose styles) -> pgjdbc PGInterval fields.

    Returns (years, months, days, hours, minutes, seconds) with seconds a float rebuilt the way
    PGInterval does (whole seconds + micros / 1e6), so the double arithmetic matches Debezium.
    """
    verbose = text.startswith("@")
    years = months = days = hours = minutes = 0
    seconds = 0.0
    tokens = text.replace("+", " ").replace("@", " ").split()
    value_token: str | None = None
    for i, tok in enumerate(tokens, 1):
        if i & 1:
            colon = tok.find(":")
            if colon == -1:
                value_token = tok
                continue
            neg = tok.startswith("-")
            off = 1 if neg else 0
            hours = int(tok[off:colon])
            minutes = int(tok[colon + 1 : colon + 3])
            end_min = tok.find(":", colon + 1)
            seconds = float(tok[end_min + 1 :]) if end_min != -1 else 0.0
            if neg:
                hours, minutes, seconds = -hours, -minutes, -seconds
            value_token = None
        else:
            v = value_token or "0"
            if tok.startswith("year"):
                years = int(v)
            elif tok.startswith("mon"):
                months = int(v)
            elif tok.startswith("day"):
                days = int(v)
            elif tok.startswith("hour"):
                hours = int(v)
            elif tok.startswith("min"):
                minutes = int(v)
            elif tok.startswith("sec"):
                seconds = float(v)
    if verbose and text.endswith("ago"):
        years, months, days, hours, minutes, seconds = -years, -months, -days, -hours, -minutes, -seconds
    whole = int(seconds)
    micros = round((seconds - whole) * 1_000_000)
    return years, months, days, hours, minutes, whole + micros / 1_000_000


def interval_micros(years: int, months: int, days: int, hours: int, minutes: int, seconds: float) -> int:
    """Debezium MicroDuration.durationMicros: months as 365.25/12 days, double math, truncated."""
    n_days = (years * 12 + months) * DAYS_PER_MONTH_AVG + days
    n_secs = (((n_days * 24 + hours) * 60) + minutes) * 60 + seconds
    return int(n_secs * 1e6)


def interval_iso(years: int, months: int, days: int, hours: int, minutes: int, seconds: float) -> str:
    """Debezium Interval.toIsoString: 'P1Y2M3DT4H5M6.78S' (seconds at most 6 decimals, no trailing 0s)."""
    sec = Decimal(repr(seconds))  # BigDecimal.valueOf(double) goes through Double.toString
    if -sec.as_tuple().exponent > 6:  # type: ignore[operator]  # finite here: the exponent is an int
        sec = sec.quantize(Decimal("0.000001"), rounding="ROUND_DOWN")
    return f"P{years}Y{months}M{days}DT{hours}H{minutes}M{java_plain_string(sec.normalize())}S"


# --------------------------------------------------------------------------- decimals


def unscaled_to_bytes(unscaled: int) -> bytes:
    """Java BigInteger.toByteArray: minimal big-endian two's complement (0 -> b'\\x00')."""
    n = ((unscaled + (unscaled < 0)).bit_length() // 8) + 1
    return unscaled.to_bytes(n, "big", signed=True)


def unscaled_to_b64(unscaled: int) -> str:
    return base64.b64encode(unscaled_to_bytes(unscaled)).decode("ascii")


def decimal_parts(value: Decimal) -> tuple[int, int]:
    """(unscaled, scale) of a finite Decimal, like BigDecimal.unscaledValue()/scale()."""
    sign, digits, exp = value.as_tuple()
    unscaled = int("".join(map(str, digits))) if digits else 0
    if sign:
        unscaled = -unscaled
    return unscaled, -int(exp)


def set_scale(unscaled: int, scale: int, new_scale: int, half_up: bool = True) -> int:
    """Unscaled value rescaled to `new_scale` (rounding HALF_UP when digits are dropped)."""
    if new_scale >= scale:
        return unscaled * 10 ** (new_scale - scale)
    q, r = divmod(abs(unscaled), 10 ** (scale - new_scale))
    if half_up and r * 2 >= 10 ** (scale - new_scale):
        q += 1
    return -q if unscaled < 0 else q


def decimal_b64(value: Decimal, scale: int) -> str:
    """Connect Decimal JSON value of `value` at a fixed `scale`."""
    unscaled, s = decimal_parts(value)
    return unscaled_to_b64(set_scale(unscaled, s, scale))


def variable_scale_decimal(value: Decimal) -> dict[str, Any]:
    """io.debezium.data.VariableScaleDecimal value: trailing zeros stripped, scale never negative."""
    unscaled, scale = decimal_parts(value)
    if unscaled == 0:
        scale = 0
    else:
        while scale > 0 and unscaled % 10 == 0:
            unscaled //= 10
            scale -= 1
        if scale < 0:
            unscaled *= 10 ** (-scale)
            scale = 0
    return {"scale": scale, "value": unscaled_to_b64(unscaled)}


def java_bigdecimal_string(value: Decimal) -> str:
    """Java BigDecimal.toString(): scientific notation when scale < 0 or adjusted exponent < -6."""
    unscaled, scale = decimal_parts(value)
    digits = str(abs(unscaled))
    sign = "-" if unscaled < 0 else ""
    adjusted = -scale + (len(digits) - 1)
    if scale == 0:
        return sign + digits
    if scale > 0 and adjusted >= -6:
        if len(digits) > scale:
            return f"{sign}{digits[:-scale]}.{digits[-scale:]}"
        return f"{sign}0.{'0' * (scale - len(digits))}{digits}"
    mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mant}E{'+' if adjusted >= 0 else ''}{adjusted}"


def java_plain_string(value: Decimal) -> str:
    """Java BigDecimal.toPlainString()."""
    unscaled, scale = decimal_parts(value)
    if scale <= 0:
        return str(unscaled * 10 ** (-scale))
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    return f"{'-' if unscaled < 0 else ''}{digits[:-scale]}.{digits[-scale:]}"


def parse_decimal(text: str) -> Decimal | None:
    """Decimal of a numeric's text, None for NaN/Infinity."""
    try:
        d = Decimal(text)
    except InvalidOperation:
        return None
    return d if d.is_finite() else None


VARIABLE_SCALE_DECIMAL_SCHEMA = struct(
    "io.debezium.data.VariableScaleDecimal",
    [("scale", prim("int32")), ("value", prim("bytes"))],
    version=1,
    doc="Variable scaled decimal",
)


def decimal_schema(scale: int, precision: int | None = None) -> Schema:
    params = {"scale": str(scale)}
    if precision is not None:
        params["connect.decimal.precision"] = str(precision)
    return prim("bytes", name="org.apache.kafka.connect.data.Decimal", version=1, parameters=params)


# --------------------------------------------------------------------------- bits and binary


def bits_le_bytes(bits: str) -> bytes:
    """Bit string '1011' -> little-endian bytes sized by content, as Debezium's BitSet path (0 -> b'')."""
    n = int(bits, 2) if bits else 0
    return n.to_bytes((n.bit_length() + 7) // 8, "little")


def bits_schema(length: int) -> Schema:
    return prim("bytes", name="io.debezium.data.Bits", version=1, parameters={"length": str(length)})


BinaryMode = Literal["bytes", "base64", "base64-url-safe", "hex"]


def binary_encoder(mode: str) -> Callable[[bytes], str]:
    """bytes -> JSON value for binary.handling.mode (BYTES go out base64 through the JsonConverter)."""
    if mode in ("bytes", "base64"):
        return lambda b: base64.b64encode(b).decode("ascii")
    if mode == "base64-url-safe":
        return lambda b: base64.urlsafe_b64encode(b).decode("ascii")
    if mode == "hex":
        return lambda b: binascii.hexlify(b).decode("ascii")
    raise ValueError(f"binary.handling.mode {mode!r}: expected bytes, base64, base64-url-safe or hex")


def binary_schema(mode: str) -> Schema:
    return prim("bytes") if mode == "bytes" else prim("string")


# --------------------------------------------------------------------------- schemas of time types

DATE_SCHEMA = prim("int32", name="io.debezium.time.Date", version=1)
CONNECT_DATE_SCHEMA = prim("int32", name="org.apache.kafka.connect.data.Date", version=1)
TIME_SCHEMA = prim("int32", name="io.debezium.time.Time", version=1)
MICRO_TIME_SCHEMA = prim("int64", name="io.debezium.time.MicroTime", version=1)
NANO_TIME_SCHEMA = prim("int64", name="io.debezium.time.NanoTime", version=1)
CONNECT_TIME_SCHEMA = prim("int32", name="org.apache.kafka.connect.data.Time", version=1)
TIMESTAMP_SCHEMA = prim("int64", name="io.debezium.time.Timestamp", version=1)
MICRO_TIMESTAMP_SCHEMA = prim("int64", name="io.debezium.time.MicroTimestamp", version=1)
NANO_TIMESTAMP_SCHEMA = prim("int64", name="io.debezium.time.NanoTimestamp", version=1)
CONNECT_TIMESTAMP_SCHEMA = prim("int64", name="org.apache.kafka.connect.data.Timestamp", version=1)
ZONED_TIMESTAMP_SCHEMA = prim("string", name="io.debezium.time.ZonedTimestamp", version=1)
ZONED_TIME_SCHEMA = prim("string", name="io.debezium.time.ZonedTime", version=1)
MICRO_DURATION_SCHEMA = prim("int64", name="io.debezium.time.MicroDuration", version=1)
INTERVAL_SCHEMA = prim("string", name="io.debezium.time.Interval", version=1)
ISO_DATE_SCHEMA = prim("string", name="io.debezium.time.IsoDate", version=1)
ISO_TIME_SCHEMA = prim("string", name="io.debezium.time.IsoTime", version=1)
ISO_TIMESTAMP_SCHEMA = prim("string", name="io.debezium.time.IsoTimestamp", version=1)

# time.precision.mode values with one schema whatever the column's precision (TemporalPrecisionMode).
_FIXED_TIME = {
    "isostring": ISO_TIME_SCHEMA,
    "microseconds": MICRO_TIME_SCHEMA,
    "nanoseconds": NANO_TIME_SCHEMA,
    "adaptive_time_microseconds": MICRO_TIME_SCHEMA,
    "connect": CONNECT_TIME_SCHEMA,
}
_FIXED_TIMESTAMP = {
    "isostring": ISO_TIMESTAMP_SCHEMA,
    "microseconds": MICRO_TIMESTAMP_SCHEMA,
    "nanoseconds": NANO_TIMESTAMP_SCHEMA,
    "connect": CONNECT_TIMESTAMP_SCHEMA,
}
_DATE = {"isostring": ISO_DATE_SCHEMA, "connect": CONNECT_DATE_SCHEMA}


def _adaptive(fixed: Schema | None, precision: int, milli: Schema, micro: Schema, nano: Schema) -> Schema:
    if fixed is not None:
        return fixed
    if precision <= 3:
        return milli
    return micro if precision <= 6 else nano


def time_schema(mode: str, precision: int) -> Schema:
    """TIME schema by time.precision.mode and fractional-second precision (JdbcValueConverters)."""
    return _adaptive(_FIXED_TIME.get(mode), precision, TIME_SCHEMA, MICRO_TIME_SCHEMA, NANO_TIME_SCHEMA)


def timestamp_schema(mode: str, precision: int) -> Schema:
    return _adaptive(
        _FIXED_TIMESTAMP.get(mode), precision, TIMESTAMP_SCHEMA, MICRO_TIMESTAMP_SCHEMA, NANO_TIMESTAMP_SCHEMA
    )


def date_schema(mode: str) -> Schema:
    """io.debezium.time.Date in every mode but isostring and connect."""
    return _DATE.get(mode, DATE_SCHEMA)


def float_or_special(text: str) -> float | str:
    """Float text -> float; NaN/Infinity stay strings, as Jackson writes them (quoted)."""
    if text in ("NaN", "Infinity", "-Infinity"):
        return text
    return float(text)


def double_json(value: float) -> float | str:
    """A double as the JsonConverter writes it: NaN/Infinity become strings."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value
