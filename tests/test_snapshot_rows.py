"""A snapshot chunk's Kafka bytes and jsonl lines, spliced column-wise a slice of rows at a time
(`connectors.snapshot.rows`): every slice size gives, row for row, what the change-log table's
reference rebuild (`sinks.delta.kafka_key/kafka_value`) gives, markers on the right rows."""

from __future__ import annotations

import orjson
import pyarrow as pa
import pytest

from connectors.sinks.delta import kafka_key, kafka_value
from connectors.snapshot.chunks import Chunk
from connectors.snapshot.rows import ChunkContext, changelog_rows, jsonl_lines, kafka_bytes

N = 1000


def _rows(keyless: bool) -> pa.Table:
    chunk = Chunk(
        "public.t",
        0,
        None,
        None,
        {"first_chunk": True, "last_chunk": True, "last_table": True, "table_index": 0},
    )
    ctx = ChunkContext(
        "p.public.t",
        "public.t",
        None if keyless else b'{"type":"struct","name":"p.public.t.Key"}',
        b'{"type":"struct","name":"p.public.t.Envelope"}',
        lambda m: {"snapshot": m, "table": "t"},
        (),
    )
    after = pa.array([f'{{"id":{i},"s":"\\u00e9{"x" * (i % 7)}"}}' for i in range(N)])
    key = None if keyless else pa.array([f'{{"id":{i}}}' for i in range(N)])
    return changelog_rows(chunk, ctx, key, after)


@pytest.mark.parametrize("keyless", [False, True])
@pytest.mark.parametrize("slice_rows", [1, 7, 256, N, 5000])
def test_slices_splice_what_the_reference_rebuilds(keyless: bool, slice_rows: int) -> None:
    rows = _rows(keyless)
    want = rows.to_pylist()
    got_keys: list[bytes | None] = []
    got_values: list[bytes] = []
    for keys, values in kafka_bytes(rows, slice_rows):
        assert len(keys) == len(values) <= slice_rows
        got_keys += keys
        got_values += values
    assert got_keys == [kafka_key(r) for r in want]
    assert got_values == [kafka_value(r) for r in want]
    # the markers sit on the chunk's first and last rows whatever the slicing
    snaps = [orjson.loads(v)["payload"]["source"]["snapshot"] for v in got_values]
    assert snaps[0] == "first" and snaps[-1] == "last" and set(snaps[1:-1]) == {"true"}

    text = b""
    for lines in jsonl_lines("p.public.t", rows, slice_rows):
        text += b"".join(lines.cast(pa.binary()).to_pylist())
    parsed = [orjson.loads(line) for line in text.splitlines()]
    assert len(parsed) == N
    assert [p["value"] for p in parsed] == [orjson.loads(v) for v in got_values]
    assert [p["key"] for p in parsed] == [None if k is None else orjson.loads(k) for k in got_keys]
    assert {p["topic"] for p in parsed} == {"p.public.t"}
