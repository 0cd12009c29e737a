"""Fast paths in the per-event conversion agree with the general code they short-cut."""

from __future__ import annotations

import random
from decimal import Decimal

from connectors import temporal as T
from connectors.postgres.types import TypeModes, _decimal_mapping


def _timestamptz_texts(n: int) -> list[str]:
    rnd = random.Random(7)
    out = []
    for _ in range(n):
        frac = ""
        if rnd.random() < 0.8:
            digits = "".join(rnd.choice("0123456789") for _ in range(rnd.randint(1, 6))).rstrip("0")
            frac = f".{digits}" if digits else ""
        out.append(f"{rnd.randint(1, 9999):04d}-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d} "
                   f"{rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:{rnd.randint(0, 59):02d}{frac}+00")
    return out


def test_utc_timestamptz_fast_path_equals_general_path() -> None:
    for text in _timestamptz_texts(3000) + ["2024-01-01 00:00:00+00", "0001-01-01 00:00:00.000001+00"]:
        for width in (None, 0, 1, 3, 6, 9):
            assert T.pg_timestamptz_to_zoned(text, width) == T.format_zoned_timestamp(
                T.pg_timestamptz_to_micros(text), width), (text, width)
    # Text the fast path does not take (offsets, BC, infinity) still converts.
    assert T.pg_timestamptz_to_zoned("2024-01-01 02:00:00+02", None) == "2024-01-01T00:00:00Z"
    assert T.pg_timestamptz_to_zoned("infinity", None) == "infinity"


def test_fixed_numeric_fast_path_equals_decimal_path() -> None:
    rnd = random.Random(3)
    for scale in (0, 2, 5):
        _, conv = _decimal_mapping(12, scale, TypeModes())
        for _ in range(2000):
            unscaled = rnd.randint(-10**12, 10**12)
            d = Decimal(unscaled).scaleb(-scale)
            text = f"{d:.{scale}f}"
            assert conv(text) == T.decimal_b64(d, scale), text
        assert conv("NaN") is None
