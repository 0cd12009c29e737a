"""PostgreSQL built-in type OIDs (stable across versions) and the typmod "not set" marker."""

from __future__ import annotations

# typmod "not set" marker used by PostgreSQL everywhere (atttypmod, typtypmod, pgoutput Relation).
NO_TYPMOD = -1


# Built-in type OIDs (stable across PostgreSQL versions).
BOOL, BYTEA, CHAR, NAME, INT8, INT2, INT4, TEXT, OID = 16, 17, 18, 19, 20, 21, 23, 25, 26


JSON, XML, POINT, CIDR, FLOAT4, FLOAT8, MACADDR8, MONEY, MACADDR, INET = (
    114,
    142,
    600,
    650,
    700,
    701,
    774,
    790,
    829,
    869,
)


BPCHAR, VARCHAR, DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL, TIMETZ = (
    1042,
    1043,
    1082,
    1083,
    1114,
    1184,
    1186,
    1266,
)


BIT, VARBIT, NUMERIC, UUID, TSVECTOR, JSONB = 1560, 1562, 1700, 2950, 3614, 3802


INT4RANGE, NUMRANGE, TSRANGE, TSTZRANGE, DATERANGE, INT8RANGE = 3904, 3906, 3908, 3910, 3912, 3926


LSEG, PATH, BOX, POLYGON, LINE, CIRCLE = 601, 602, 603, 604, 628, 718
