"""An incremental snapshot chunk as one `RowBlock`: its rows read as records field by field, and
the jsonl sink writes a block's lines at once, byte for byte what writing each record gives."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow as pa
import pytest

from connectors.api import Batch, Record
from connectors.engine.metrics import Metrics
from connectors.format import rowblock
from connectors.format.rowblock import CHUNK_ROWS, ChunkRow, RowBlock, block_runs
from connectors.format.schema import Field, Schema
from connectors.format.serde import PLACEHOLDER, split_at_placeholder, to_json_bytes
from connectors.sinks.common import joined, serialized
from connectors.sinks.jsonl import JsonLinesSink

KEY = Schema("struct", name="tm.public.a.Key", fields=(Field("id", Schema("int64")),))
ROW = Schema(
    "struct",
    True,
    "tm.public.a.Value",
    fields=(Field("id", Schema("int64")), Field("s", Schema("string", True))),
)
ENVELOPE = Schema(
    "struct",
    name="tm.public.a.Envelope",
    fields=(Field("before", ROW), Field("after", ROW), Field("op", Schema("string"))),
)
ENV = {"before": None, "after": None, "source": {"table": "a"}, "op": "r", "ts_ms": 7}


def block(
    n: int,
    flags: tuple[bool, bool] | None = (True, True),
    keyless: bool = False,
    topic: str = "tm.public.a",
    arrow: bool = False,
) -> RowBlock:
    keys = [None if keyless else f'{{"id":{i}}}' for i in range(n)]
    afters = [orjson.dumps({"id": i, "s": 'é"x' if i % 2 else None}).decode() for i in range(n)]
    wire = None
    if flags is not None:
        khead, ktail = split_at_placeholder(KEY, PLACEHOLDER, flags[0])
        vhead, vtail = split_at_placeholder(ENVELOPE, {**ENV, "after": PLACEHOLDER}, flags[1])
        wire = (flags, khead, ktail, vhead, vtail)
    # (as the encoder hands them over: slices of one text array)
    arrays = (
        (
            None if keyless else pa.array(["x", *keys], pa.large_string()).slice(1),
            pa.array(afters, pa.string()),
        )
        if arrow
        else None
    )
    return RowBlock(topic, "public.a", {"lsn": 5}, (5,), KEY, ENVELOPE, ENV, keys, afters, wire, arrays)


def plain(r: Record) -> Record:
    """The same record as an ordinary `Record` (what `_records` built before blocks)."""
    return Record(
        r.topic, r.key, r.value, r.key_schema, r.value_schema, r.headers, r.collection, r.offset, r.pos
    )


def test_a_rows_fields_come_from_its_block() -> None:
    b = block(3)
    rows = b.rows()
    assert [type(r) for r in rows] == [ChunkRow] * 3 and len(b) == 3
    r = rows[1]
    assert (r.topic, r.collection, r.offset, r.pos, r.headers, r.schema_change) == (
        "tm.public.a",
        "public.a",
        {"lsn": 5},
        (5,),
        (),
        False,
    )
    assert r.has_context and r.op == "r" and r.block is b and r.index == 1
    assert orjson.dumps(r.key) == b'{"id":1}'
    assert orjson.loads(orjson.dumps(r.value)) == {**ENV, "after": {"id": 1, "s": 'é"x'}}
    for flags in [(True, True), (False, True), (True, False), (False, False)]:
        k, v = serialized(r, *flags)
        assert k == to_json_bytes(KEY, r.key, flags[0])
        assert v == to_json_bytes(ENVELOPE, r.value, flags[1])
    assert block(1, None, keyless=True).rows()[0].key is None


def test_block_runs_cut_a_batch_into_blocks_and_other_records() -> None:
    a, b = block(4), block(3)
    other = Record("t", {"id": 0}, {"op": "c"})
    ra, rb = a.rows(), b.rows()
    got = list(block_runs([other, *ra, *rb, other, other]))
    assert got == [(0, 1, None, 0), (1, 5, a, 0), (5, 8, b, 0), (8, 10, None, 0)]
    # a run that starts inside its block, and one with a gap (rows taken out one by one)
    assert list(block_runs(ra[2:])) == [(0, 2, a, 2)]
    assert list(block_runs([ra[0], ra[2], ra[3]])) == [(0, 1, a, 0), (1, 3, a, 2)]


@pytest.mark.parametrize("flags", [(True, True), (False, True), (True, False), (False, False)])
@pytest.mark.parametrize("keyless", [False, True])
@pytest.mark.parametrize("arrow", [False, True])
def test_the_jsonl_sink_writes_a_block_as_its_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: tuple[bool, bool], keyless: bool, arrow: bool
) -> None:
    """Byte for byte the file the same records give one by one: with stream records around the
    blocks, a block begun mid-way, pieces of a few rows, and blocks built for other schema flags
    than the sink's (written record by record); lines joined as text or by Arrow's kernel."""
    monkeypatch.setattr(rowblock, "LINES_PER_PIECE", 3)
    other_flags = (not flags[0], flags[1])
    blocks = [
        block(7, flags, keyless, arrow=arrow),
        block(2, flags, keyless, "tm.b", arrow=arrow),
        block(4, other_flags, arrow=arrow),
        block(2, None, arrow=arrow),
    ]
    change = Record(
        "tm.public.a", {"id": 1}, {"op": "u", "after": {"id": 1}}, KEY, ENVELOPE, collection="public.a"
    )
    tomb = Record("tm.public.a", {"id": 1}, None, KEY, None, collection="public.a")
    rows: list[Record] = [change, *blocks[0].rows()[1:], tomb, *blocks[1].rows(), *blocks[2].rows(), change]
    rows += blocks[3].rows()
    ks, vs = flags
    got, want = tmp_path / "block.jsonl", tmp_path / "plain.jsonl"
    for path, records, extra in [(got, rows, {CHUNK_ROWS: True}), (want, [plain(r) for r in rows], {})]:
        sink = JsonLinesSink(path, key_schemas_enable=ks, value_schemas_enable=vs)
        sink.write(Batch(records, {"lsn": 5}, 1, extra))
        sink.close()
    assert got.read_bytes() == want.read_bytes()
    lines = [orjson.loads(x) for x in got.read_bytes().splitlines()]
    assert len(lines) == len(rows) and lines[1]["topic"] == "tm.public.a"
    r = rows[1]
    k, v = serialized(r, ks, vs)
    assert lines[1]["key"] == (None if k is None else orjson.loads(k))
    assert lines[1]["value"] == orjson.loads(joined(v) or b"null")


def test_metrics_count_chunk_rows_as_reads() -> None:
    m = Metrics()
    change = Record("t", {"id": 1}, {"op": "u"})
    m.observe_batch(Batch([change, *block(5).rows(), Record("t", {"id": 1}, None)], {}))
    assert m.events_by_op.labels(op="r")._value.get() == 5
    assert m.events_by_op.labels(op="u")._value.get() == 1
    assert m.events._value.get() == 6


def test_arrow_lines_are_used_when_the_block_has_arrays() -> None:
    """The Arrow path gives the text path's bytes, as buffers of the joined array (no copy)."""
    head = b'{"topic":"tm.public.a","key":'
    for keyless in (False, True):
        text = b"".join(block(5, keyless=keyless).lines(1, 5, head, (True, True)) or [])
        pieces = list(block(5, keyless=keyless, arrow=True).lines(1, 5, head, (True, True)) or [])
        assert pieces and all(isinstance(p, memoryview) for p in pieces)
        assert b"".join(pieces) == text and text.count(b"\n") == 4
    # a null among the arrays' values (none is expected): the text path, never a lost line
    b = block(3, arrow=True)
    assert b.arrays is not None
    b.arrays = (pa.array(['{"id":0}', None, '{"id":2}'], pa.string()), b.arrays[1])
    assert all(isinstance(p, bytes) for p in b.lines(0, 3, head, (True, True)) or [b""])
