"""The snapshot's numpy path for DECIMAL(p, s) columns (connectors/sources/postgres/decimal_columns.py)
gives, value for value, the JSON the streaming converter gives: random values of every width and
sign, each shape the fast path must leave to the converter (NaN, Infinity, other digit counts),
nulls, sliced arrays, and the int64 extremes."""

from __future__ import annotations

import random

import numpy as np
import orjson
import pyarrow as pa
import pytest

from connectors.format import temporal as T
from connectors.sources.postgres.decimal_columns import fixed_point_ints, quoted_b64_ints
from connectors.sources.postgres.snapshot_read import _decimal_fixed_enc
from connectors.sources.postgres.types import TypeModes, _decimal_mapping

ODD = ["NaN", "Infinity", "-Infinity", "", "-", ".5", "1.", "+1.00", "1e5", "--1", "1.2.3", "１.00"]
ODD += ["12a.00", "-.00", "0-1.00", "1", "12", "-1", "1.0", "1.00", "-0.00", "0.000", " 1.00"]


def _values(scale: int, n: int, rng: random.Random) -> list[str | None]:
    out: list[str | None] = []
    for _ in range(n):
        r = rng.random()
        if r < 0.05:
            out.append(None)
        elif r < 0.09:
            out.append(rng.choice(ODD))
        else:
            digits = rng.randint(1, 20 - scale)  # up to one digit more than an int64 holds
            whole = str(rng.randint(0, 10**digits - 1)).zfill(rng.choice([1, 1, digits]))
            extra = rng.choice([0, 0, 0, 0, 1, -1]) if scale else 0
            frac = "".join(rng.choice("0123456789") for _ in range(scale + extra))
            out.append(("-" if rng.random() < 0.4 else "") + whole + ("." + frac if scale else ""))
    return out


@pytest.mark.parametrize("scale", [0, 1, 2, 4, 8, 10, 16, 17])
def test_fixed_decimals_encode_as_the_streaming_converter(scale: int) -> None:
    _, convert = _decimal_mapping(30, scale, TypeModes())
    enc = _decimal_fixed_enc(scale, convert)
    values = _values(scale, 5000, random.Random(scale))
    arr = pa.array(values, pa.string())
    expected = [None if v is None else orjson.dumps(convert(v)).decode() for v in values]
    fast = 0
    for start, stop in [(0, len(values)), (7, 4000), (3, 3), (4990, 5000)]:
        part = arr.slice(start, stop - start)
        assert enc(part).to_pylist() == expected[start:stop], (scale, start, stop)
        fast += int(fixed_point_ints(part, scale)[0].sum())
    assert fast > 1500  # a good share of the values took the numpy path (9,000 in all)


def test_only_the_server_shape_takes_the_fast_path() -> None:
    ok, unscaled = fixed_point_ints(pa.array(ODD + [None, "-12.34", "0.00"], pa.string()), 2)
    assert [v for v, o in zip(ODD + [None, "-12.34", "0.00"], ok, strict=True) if o] == [
        "1.00",
        "-0.00",
        "-12.34",
        "0.00",
    ]
    assert unscaled[ok].tolist() == [100, 0, -1234, 0]
    for arr in (pa.array([], pa.string()), pa.array([None, None], pa.string()), pa.array(["1"], pa.string())):
        ok, unscaled = fixed_point_ints(arr, 2)
        assert not ok.any() and not unscaled.any()


def test_base64_of_int64_extremes() -> None:
    values = [0, 1, -1, 127, 128, -128, -129, 255, 256, 2**15, -(2**15), 2**23, 2**31 - 1, -(2**31)]
    values += [2**47, -(2**55), 2**62, 2**63 - 1, -(2**63), 10**18 - 1, -(10**18) + 1]
    got = quoted_b64_ints(np.array(values, np.int64)).to_pylist()
    assert got == ['"' + T.unscaled_to_b64(v) + '"' for v in values]
    assert quoted_b64_ints(np.array([], np.int64)).to_pylist() == []
