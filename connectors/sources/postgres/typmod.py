"""Typmod decoding: the declared length/scale a typmod encodes, and the column length/scale
Debezium reports (pgjdbc's TypeInfoCache rules: display size, precision, scale)."""

from __future__ import annotations

from connectors.sources.postgres.oids import (
    BIT,
    BOOL,
    BPCHAR,
    CHAR,
    DATE,
    FLOAT4,
    FLOAT8,
    INT2,
    INT4,
    INT8,
    INTERVAL,
    NUMERIC,
    OID,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    TIMETZ,
    VARBIT,
    VARCHAR,
)

UNKNOWN_LENGTH = 2147483647  # pgjdbc's default "unknownLength"


VARIABLE_SCALE_DECIMAL_LENGTH = 131089  # pgjdbc display size of an unconstrained numeric


def _display_size(oid: int, typmod: int) -> int:
    if oid in (TIME, TIMETZ, TIMESTAMP, TIMESTAMPTZ):
        # pgjdbc: a fraction of 1 digit displays as 2 ("0:0:0.1"::time(1) returns .10).
        sec = 7 if typmod == -1 else 0 if typmod <= 0 else 3 if typmod == 1 else typmod + 1
        return {TIME: 8, TIMETZ: 14, TIMESTAMP: 22, TIMESTAMPTZ: 28}[oid] + sec
    fixed = {
        INT2: 6,
        INT4: 11,
        OID: 10,
        INT8: 20,
        FLOAT4: 15,
        FLOAT8: 25,
        CHAR: 1,
        BOOL: 1,
        DATE: 13,
        INTERVAL: 49,
    }
    if oid in fixed:
        return fixed[oid]
    if oid in (VARCHAR, BPCHAR):
        return UNKNOWN_LENGTH if typmod == -1 else typmod - 4
    if oid == NUMERIC:
        if typmod == -1:
            return VARIABLE_SCALE_DECIMAL_LENGTH
        p, s = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
        return 1 + p + (1 if s != 0 else 0)
    if oid == BIT:
        return typmod
    if oid == VARBIT:
        return UNKNOWN_LENGTH if typmod == -1 else typmod
    return UNKNOWN_LENGTH


def _precision(oid: int, typmod: int) -> int:
    fixed = {INT2: 5, OID: 10, INT4: 10, INT8: 19, FLOAT4: 8, FLOAT8: 17, CHAR: 1, BOOL: 1}
    if oid in fixed:
        return fixed[oid]
    if oid == NUMERIC:
        return 0 if typmod == -1 else ((typmod - 4) >> 16) & 0xFFFF
    if oid in (BPCHAR, VARCHAR):
        return UNKNOWN_LENGTH if typmod == -1 else typmod - 4
    if oid in (DATE, TIME, TIMETZ, INTERVAL, TIMESTAMP, TIMESTAMPTZ):
        return _display_size(oid, typmod)
    if oid == BIT:
        return typmod
    if oid == VARBIT:
        return UNKNOWN_LENGTH if typmod == -1 else typmod
    return UNKNOWN_LENGTH


def jdbc_scale(oid: int, typmod: int) -> int:
    if oid == FLOAT4:
        return 8
    if oid == FLOAT8:
        return 17
    if oid == NUMERIC:
        return 0 if typmod == -1 else (typmod - 4) & 0xFFFF
    if oid in (TIME, TIMETZ, TIMESTAMP, TIMESTAMPTZ):
        return 6 if typmod == -1 else typmod
    if oid == INTERVAL:
        return 6 if typmod == -1 else typmod & 0xFFFF
    return 0


def jdbc_length(oid: int, typmod: int) -> int:
    size = _precision(oid, typmod)
    return _display_size(oid, typmod) if size == 0 else size


def typmod_length_scale(type_oid: int, typmod: int) -> tuple[int | None, int | None]:
    """Declared (length, scale) encoded in a typmod, for the built-in types that use one."""
    if typmod < 0:
        return None, None
    if type_oid == NUMERIC:  # ((p << 16) | s) + 4
        t = typmod - 4
        return (t >> 16) & 0xFFFF, t & 0xFFFF
    if type_oid in (BPCHAR, VARCHAR):  # n + 4
        return typmod - 4, None
    if type_oid in (BIT, VARBIT):  # n
        return typmod, None
    if type_oid in (TIME, TIMETZ, TIMESTAMP, TIMESTAMPTZ):  # p
        return None, typmod
    if type_oid == INTERVAL:  # precision in the low 16 bits (0xFFFF = unspecified)
        p = typmod & 0xFFFF
        return None, (None if p == 0xFFFF else p)
    return None, None
