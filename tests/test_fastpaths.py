"""Fast paths in the per-event conversion agree with the general code they short-cut."""

from __future__ import annotations

import random
import struct
from decimal import Decimal
from typing import Any

from cfgutil import source as settings_of

from connectors.format import temporal as T
from connectors.format.schema import prim
from connectors.format.tableschema import ColumnDef, build
from connectors.format.topics import TopicNamer
from connectors.settings.filters import ColumnRules, TableFilters
from connectors.sources.postgres.fastrow import compile_insert
from connectors.sources.postgres.pgoutput import BIG_VALUE, UNCHANGED_TOAST, _tuple, big_text
from connectors.sources.postgres.types import TypeModes, _decimal_mapping


def _timestamptz_texts(n: int) -> list[str]:
    rnd = random.Random(7)
    out = []
    for _ in range(n):
        frac = ""
        if rnd.random() < 0.8:
            digits = "".join(rnd.choice("0123456789") for _ in range(rnd.randint(1, 6))).rstrip("0")
            frac = f".{digits}" if digits else ""
        out.append(
            f"{rnd.randint(1, 9999):04d}-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d} "
            f"{rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:{rnd.randint(0, 59):02d}{frac}+00"
        )
    return out


def test_utc_timestamptz_fast_path_equals_general_path() -> None:
    for text in _timestamptz_texts(3000) + ["2024-01-01 00:00:00+00", "0001-01-01 00:00:00.000001+00"]:
        for width in (None, 0, 1, 3, 6, 9):
            assert T.pg_timestamptz_to_zoned(text, width) == T.format_zoned_timestamp(
                T.pg_timestamptz_to_micros(text), width
            ), (text, width)
    # Text the fast path does not take (offsets, BC, infinity) still converts.
    assert T.pg_timestamptz_to_zoned("2024-01-01 02:00:00+02", None) == "2024-01-01T00:00:00Z"
    assert T.pg_timestamptz_to_zoned("infinity", None) == "infinity"


def test_fixed_numeric_fast_path_equals_decimal_path() -> None:
    rnd = random.Random(3)
    for scale in (0, 2, 5):
        _, conv = _decimal_mapping(12, scale, TypeModes())
        for _ in range(2000):
            unscaled = rnd.randint(-(10**12), 10**12)
            d = Decimal(unscaled).scaleb(-scale)
            text = f"{d:.{scale}f}"
            assert conv(text) == T.decimal_b64(d, scale), text
        assert conv("NaN") is None


def _tuple_bytes(values: list[Any]) -> bytes:
    """pgoutput TupleData: text values, None as NULL, UNCHANGED_TOAST as 'u', bytes as binary."""
    out = [struct.pack("!H", len(values))]
    for v in values:
        if v is None:
            out.append(b"n")
        elif v is UNCHANGED_TOAST:
            out.append(b"u")
        elif isinstance(v, bytes):
            out.append(b"b" + struct.pack("!I", len(v)) + v)
        else:
            data = v.encode()
            out.append(b"t" + struct.pack("!I", len(data)) + data)
    return b"".join(out)


def _table(**props: Any) -> Any:
    settings = settings_of("postgres", {"column.exclude.list": r"public\.t\.skipped", **props})
    cols = [
        ColumnDef("id", prim("int32"), int),
        ColumnDef("name", prim("string", optional=True)),
        ColumnDef("skipped", prim("string", optional=True)),
        ColumnDef("qty", prim("int64", optional=True, default=5), int),  # NULL → schema default
        ColumnDef("ünï code", prim("string")),  # required: NULL → ""
        ColumnDef("price", prim("double", optional=True), float),
    ]
    return build(
        "public",
        "t",
        cols,
        ["id"],
        prefix="srv",
        namer=TopicNamer("srv"),
        filters=TableFilters.from_settings(settings),
        rules=ColumnRules.from_settings(settings),
        source_schema=prim("string"),
        unavailable_marker=UNCHANGED_TOAST,
    )


def test_fused_insert_decoder_equals_general_path() -> None:
    rnd = random.Random(5)
    for props in ({}, {"message.key.columns": r"public\.t:name,id"}):
        ts = _table(**props)
        fused = compile_insert(ts)
        for _ in range(500):
            vals = [
                str(rnd.randint(-(10**6), 10**6)),
                rnd.choice([None, "ä" * rnd.randint(0, 300), "x"]),
                rnd.choice([None, "s"]),
                rnd.choice([None, str(rnd.randint(0, 9))]),
                rnd.choice([None, "€", ""]),
                rnd.choice([None, "1.5", "-0.25"]),
            ]
            buf = b"I" + struct.pack("!I", 16384) + b"N" + _tuple_bytes(vals)
            general, _ = _tuple(buf, 6)
            assert fused(buf, 6) == (ts.key(general), ts.row(general))
            assert list(fused(buf, 6)[1]) == list(ts.row(general))  # field order too


def test_fused_insert_decoder_declines_what_it_does_not_handle() -> None:
    ts = _table()
    fused = compile_insert(ts)
    for vals in (
        ["1", "a", None, "2", UNCHANGED_TOAST, None],  # unchanged TOAST → placeholder path
        ["1", b"\x00\x01", None, "2", "c", None],  # binary format value
        ["1", "a", None, "2", "c"],
    ):  # column count differs (relation changed)
        assert fused(_tuple_bytes(vals), 0) is None


def test_large_text_values_decode_in_place_the_same() -> None:
    # Above BIG_VALUE both decoders read from a memoryview instead of a sliced copy (issue 8 #11).
    big = "é€x" * (BIG_VALUE // 2)
    ts = _table()
    buf = b"I" + struct.pack("!I", 16384) + b"N" + _tuple_bytes(["7", big, "s", "1", big[:-1], None])
    general, _ = _tuple(buf, 6)
    assert general[1] == big and general[4] == big[:-1]
    assert compile_insert(ts)(buf, 6) == (ts.key(general), ts.row(general))
    assert big_text(b"..\xc3\xa9..", 2, 2) == "é"
