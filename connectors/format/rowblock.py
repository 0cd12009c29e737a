"""An incremental snapshot chunk's rows as one block: column-wise, with records made on demand.

A chunk of N rows goes out at its close watermark as N records that differ only in their key and
`after` image. Building N `Record`s with their own value dict and wire bytes was the largest
single cost of an incremental snapshot (py-spy: a fifth of the interpreter lock's time, ~5 ms a
1024-row chunk), and the jsonl sink then cut every record back into pieces. Here the chunk is kept
as its two JSON columns (`RowBlock`) and each row is a `ChunkRow`: a `Record` whose fields are read
from the block when a sink asks (Kafka: the wire bytes; Delta: the payloads). A sink that can take
the whole chunk at once (jsonl: `RowBlock.lines`) never makes per-row values at all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import chain, repeat
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from connectors.api import Record

# (key schemas, value schemas) enabled, and the bytes around a row's key and `after` in the
# JsonConverter form for those flags: key head, key tail, value head, value tail
Wire = tuple[tuple[bool, bool], bytes, bytes, bytes, bytes]

CHUNK_ROWS = "chunk_rows"  # a batch's `extra` key: true when it holds `ChunkRow`s
LINES_PER_PIECE = 2048  # rows per byte string `lines` yields: a huge chunk is not copied at once


class RowBlock:
    """A chunk's rows: what they share (topic, table, the close watermark's offset and position,
    schemas, the envelope without `after`) and their event keys' and `after` images' JSON."""

    __slots__ = (
        "topic",
        "collection",
        "offset",
        "pos",
        "key_schema",
        "value_schema",
        "envelope",
        "keys",
        "afters",
        "wire",
        "arrays",
    )

    def __init__(
        self,
        topic: str,
        collection: str,
        offset: Mapping[str, Any] | None,
        pos: tuple[int, ...] | None,
        key_schema: Any,
        value_schema: Any,
        envelope: dict[str, Any],
        keys: Sequence[str | None],
        afters: Sequence[str],
        wire: Wire | None,
        arrays: tuple[pa.Array | None, pa.Array] | None = None,
    ) -> None:
        if len(keys) != len(afters):
            raise ValueError(f"{len(keys)} keys for {len(afters)} rows")
        self.topic, self.collection, self.offset, self.pos = topic, collection, offset, pos
        self.key_schema, self.value_schema, self.envelope = key_schema, value_schema, envelope
        self.keys, self.afters, self.wire = keys, afters, wire
        # the same columns as the encoder's Arrow text arrays (keys None: keyless), when it ran in
        # this process: `lines` joins them in Arrow's kernel, without the interpreter lock
        self.arrays = arrays if arrays is not None and len(arrays[1]) == len(afters) else None

    def __len__(self) -> int:
        return len(self.afters)

    def rows(self) -> list[Record]:
        """One record per row, in order."""
        new = ChunkRow.__new__
        out: list[Record] = []
        for i in range(len(self.afters)):
            r = new(ChunkRow)
            r._at = (self, i)
            out.append(r)
        return out

    def key(self, i: int) -> Any:
        k = self.keys[i]
        return None if k is None else orjson.Fragment(k)

    def value(self, i: int) -> dict[str, Any]:
        return {**self.envelope, "after": orjson.Fragment(self.afters[i])}

    def wire_of(self, i: int) -> tuple[tuple[bool, bool], bytes | None, tuple[bytes, ...]] | None:
        w = self.wire
        if w is None:
            return None
        flags, khead, ktail, vhead, vtail = w
        k = self.keys[i]
        return (
            flags,
            None if k is None else khead + k.encode() + ktail,
            (vhead, self.afters[i].encode(), vtail),
        )

    def lines(
        self, start: int, end: int, head: bytes, flags: tuple[bool, bool]
    ) -> Iterator[bytes | memoryview] | None:
        """Rows `start`..`end` as JSON lines `head` + key + `,"value":` + value + `}\n` (the jsonl
        sink's, `head` its `{"topic":..,"key":`), byte for byte what serializing each record
        gives; None when the block's wire bytes are for other schema flags. Joined by Arrow's
        kernel from the encoder's arrays when the block has them, else as text in one C loop a
        piece: no per-row Python either way."""
        w = self.wire
        if w is None or w[0] != flags:
            return None
        _, khead, ktail, vhead, vtail = w
        arrays = self.arrays
        if (
            arrays is not None
            and not arrays[1].null_count
            and (arrays[0] is None or not arrays[0].null_count)
        ):
            return self._arrow_lines(
                start, end, head.decode(), khead.decode(), ktail.decode(), vhead.decode(), vtail.decode()
            )
        return self._lines(
            start, end, head.decode(), khead.decode(), ktail.decode(), vhead.decode(), vtail.decode()
        )

    def _arrow_lines(
        self, start: int, end: int, head: str, khead: str, ktail: str, vhead: str, vtail: str
    ) -> Iterator[memoryview]:
        assert self.arrays is not None
        keys, afters = self.arrays
        t = pa.large_string()
        mid, close = ',"value":', "}\n"
        if keys is None:  # a keyless table: every key is null
            first, middle = [pa.scalar(f"{head}null{mid}{vhead}", t)], []
        else:
            first, middle = [pa.scalar(head + khead, t)], [pa.scalar(ktail + mid + vhead, t)]
        last = [pa.scalar(vtail + close, t), pa.scalar("", t)]  # (the last: the separator)
        for at in range(start, end, LINES_PER_PIECE):
            n = min(end, at + LINES_PER_PIECE) - at
            cols = [] if keys is None else [keys.slice(at, n).cast(t)]
            joined = pc.binary_join_element_wise(*first, *cols, *middle, afters.slice(at, n).cast(t), *last)
            yield _data(joined)

    def _lines(
        self, start: int, end: int, head: str, khead: str, ktail: str, vhead: str, vtail: str
    ) -> Iterator[bytes]:
        mid, close = ',"value":', "}\n"
        for at in range(start, end, LINES_PER_PIECE):
            upto = min(end, at + LINES_PER_PIECE)
            keys, afters = self.keys[at:upto], self.afters[at:upto]
            if None in keys:  # (a keyless table's rows: every key is null)
                pieces: Any = (
                    f"{head}{'null' if k is None else khead + k + ktail}{mid}{vhead}{a}{vtail}{close}"
                    for k, a in zip(keys, afters, strict=True)
                )
            else:
                pieces = chain.from_iterable(
                    zip(
                        repeat(head + khead), keys, repeat(ktail + mid + vhead), afters, repeat(vtail + close)
                    )
                )
            yield "".join(pieces).encode()


def _data(arr: pa.Array) -> memoryview:
    """The bytes of a large_string array's values, end to end (no copy)."""
    bufs = arr.buffers()
    offsets = memoryview(bufs[1]).cast("q")
    return memoryview(bufs[2])[offsets[arr.offset] : offsets[arr.offset + len(arr)]]


class ChunkRow(Record):
    """Row `i` of a `RowBlock` as a `Record`: its fields are read from the block (made when a
    sink reads them; never stored). Made by `RowBlock.rows` only, not through `Record`'s
    constructor, and never changed."""

    __slots__ = ("_at",)
    _at: tuple[RowBlock, int]

    op = "r"  # (the metrics count chunk rows without making their values)

    @property
    def topic(self) -> str:  # type: ignore[override]
        return self._at[0].topic

    @property
    def key(self) -> Any:
        b, i = self._at
        return b.key(i)

    @property
    def value(self) -> Any:
        b, i = self._at
        return b.value(i)

    @property
    def key_schema(self) -> Any:
        return self._at[0].key_schema

    @property
    def value_schema(self) -> Any:
        return self._at[0].value_schema

    @property
    def headers(self) -> tuple[tuple[str, bytes], ...]:  # type: ignore[override]
        return ()

    @property
    def collection(self) -> str | None:  # type: ignore[override]
        return self._at[0].collection

    @property
    def offset(self) -> Mapping[str, Any] | None:  # type: ignore[override]
        return self._at[0].offset

    @property
    def pos(self) -> tuple[int, ...] | None:  # type: ignore[override]
        return self._at[0].pos

    @property
    def schema_change(self) -> bool:  # type: ignore[override]
        return False

    @property
    def wire(self) -> tuple[tuple[bool, bool], bytes | None, tuple[bytes, ...] | None] | None:  # type: ignore[override]
        b, i = self._at
        return b.wire_of(i)

    @property
    def block(self) -> RowBlock:
        return self._at[0]

    @property
    def index(self) -> int:
        return self._at[1]


def block_runs(records: Sequence[Record]) -> Iterator[tuple[int, int, RowBlock | None, int]]:
    """`records` cut into runs: (start, end, block, the block's row at start) for consecutive rows
    of one block in order, (start, end, None, 0) for other records."""
    n = len(records)
    i = 0
    while i < n:
        r = records[i]
        if type(r) is ChunkRow:
            b, first = r._at
            # A block's rows stay together and in order (the engine keeps or drops a close
            # watermark's rows together), so a whole run is recognised at its two ends.
            end = i + len(b) - first
            if end <= n and type(last := records[end - 1]) is ChunkRow and last._at == (b, len(b) - 1):
                yield i, end, b, first
                i = end
                continue
            j = i + 1
            while j < n and type(nxt := records[j]) is ChunkRow and nxt._at == (b, first + j - i):
                j += 1
            yield i, j, b, first
        else:
            j = i + 1
            while j < n and type(records[j]) is not ChunkRow:
                j += 1
            yield i, j, None, 0
        i = j
