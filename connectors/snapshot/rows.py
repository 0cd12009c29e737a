"""A chunk's change-log rows, built column-wise from its encoded key and `after` JSON arrays.

Everything but the key, the row image and the marker is the same for every row of a chunk
(topic, source block, schemas, headers, times), so those columns are dictionary arrays of one
value: a 100,000-row chunk holds one copy of its ~3 KB schema text, not 100,000. The Kafka key
and value bytes (Kafka and jsonl sinks) are spliced from the same pieces with Arrow's
`binary_join_element_wise`, byte for byte what `sinks.delta.kafka_key/kafka_value` rebuild.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from connectors.sinks.delta import META_PARTITION, SCHEMA, _headers_json
from connectors.snapshot.chunks import Chunk, marker

MARKERS = ("true", "first", "first_in_data_collection", "last_in_data_collection", "last")


@dataclass(frozen=True)
class ChunkContext:
    """What a chunk's rows share."""

    topic: str
    collection: str
    key_schema: bytes | None  # Connect schema JSON (None: keyless table)
    value_schema: bytes  # the Envelope schema JSON
    source: Callable[[str], dict[str, Any]]  # marker → the source block
    headers: tuple[tuple[str, bytes], ...]  # __debezium.context.* headers
    key_schemas: bool = True
    value_schemas: bool = True
    batch_seq: int = 0


def _const(value: Any, n: int, type_: pa.DataType = pa.string()) -> pa.Array:
    """`n` copies of `value` as a dictionary array of one entry (null → a null array)."""
    if value is None:
        return pa.nulls(n, type_)
    if isinstance(value, bytes | str):
        return pa.DictionaryArray.from_arrays(
            pa.repeat(pa.scalar(0, pa.int32()), n), pa.array([value], pa.binary()).view(pa.string())
        )
    return pa.repeat(pa.scalar(value, type_), n)


def _markers(chunk: Chunk, n: int, texts: Mapping[str, bytes], first: bool, last: bool) -> pa.Array:
    """The source JSON per row: one of (up to) three texts, by the row's place in the chunk
    (`first` / `last`: this piece holds the chunk's first / last row)."""
    idx = np.zeros(n, np.int32)  # numpy: Arrow takes it as is (a list: 0.36 ms per 10,240 rows)
    dictionary = [texts["true"]]
    if n:
        for pos, is_first, is_last in ((0, first, last and n == 1), (n - 1, first and n == 1, last)):
            m = marker(chunk, is_first, is_last)
            if m != "true":
                dictionary.append(texts[m])
                idx[pos] = len(dictionary) - 1
    return pa.DictionaryArray.from_arrays(pa.array(idx), pa.array(dictionary, pa.binary()).view(pa.string()))


def changelog_rows(
    chunk: Chunk,
    ctx: ChunkContext,
    key: pa.Array | None,
    after: pa.Array,
    event_base: int = 0,
    *,
    first: bool = True,
    last: bool = True,
) -> pa.Table:
    """The chunk's rows in the change-log table's schema (`sinks.delta.SCHEMA`)."""
    n = len(after)
    ns = time.time_ns()
    sources = {m: orjson.dumps(ctx.source(m)) for m in MARKERS}
    src0 = ctx.source("true")
    cols: dict[str, pa.Array] = {
        "topic": _const(ctx.topic, n),
        "collection": _const(ctx.collection or META_PARTITION, n),
        "op": _const("r", n),
        "key": key if key is not None else pa.nulls(n, pa.string()),
        "before": pa.nulls(n, pa.string()),
        "after": after,
        "source": _markers(chunk, n, sources, first, last),
        "transaction": pa.nulls(n, pa.string()),
        "source_ts_ms": _const(src0.get("ts_ms"), n, pa.int64()),
        "ts_ms": _const(ns // 1_000_000, n, pa.int64()),
        "ts_us": _const(ns // 1000, n, pa.int64()),
        "ts_ns": _const(ns, n, pa.int64()),
        "lsn": _const(src0.get("lsn"), n, pa.int64()),
        "tx_id": _const(src0.get("txId"), n, pa.int64()),
        "binlog_file": _const(src0.get("file"), n),
        "binlog_pos": _const(src0.get("pos"), n, pa.int64()),
        "gtid": _const(src0.get("gtid"), n),
        "row": _const(src0.get("row"), n, pa.int32()),
        "headers": _const(_headers_json(ctx.headers), n),
        "batch_seq": pa.repeat(pa.scalar(ctx.batch_seq, pa.int64()), n),
        # numpy, not range(): Arrow converted a range value by value, 2.3 ms per 10,240 rows.
        "event_index": pa.array(np.arange(event_base, event_base + n, dtype=np.int32)),
        "payload": pa.nulls(n, pa.string()),
        "key_schema": _const(ctx.key_schema if ctx.key_schemas and key is not None else None, n),
        "value_schema": _const(ctx.value_schema if ctx.value_schemas else None, n),
        "is_tombstone": pa.repeat(pa.scalar(False), n),
    }
    return pa.Table.from_arrays([cols[f.name] for f in SCHEMA], names=SCHEMA.names)


def _plain(a: pa.Array) -> pa.Array:
    return a.dictionary_decode() if pa.types.is_dictionary(a.type) else a


def _value_or_column(a: pa.Array) -> Any:
    """A column that holds one value on every row (a chunk's schema text) as that one scalar, so
    the splice broadcasts it instead of first copying it to every row; else the plain column."""
    if pa.types.is_dictionary(a.type) and len(a.dictionary) == 1 and a.null_count == 0:
        return a.dictionary[0]
    return _plain(a)


def _kafka_parts(rows: pa.Table) -> tuple[list[Any], list[Any]]:
    """The pieces whose element-wise concatenation is each row's Kafka key / value bytes
    (JsonConverter form, as `sinks.delta.kafka_key/kafka_value` rebuild them): scalars for what
    every row shares, columns for the rest. Spliced in one pass each, no intermediate copies
    (the value is ~3.5 kB a row with its schema: every pass over it costs)."""
    key = rows["key"].combine_chunks()
    ks_col, vs_col = rows["key_schema"].combine_chunks(), rows["value_schema"].combine_chunks()
    ks, vs = _value_or_column(ks_col), _value_or_column(vs_col)
    if key.null_count == len(key) or ks_col.null_count == len(ks_col):
        key_parts: list[Any] = [key]
    else:
        key_parts = ['{"schema":', ks, ',"payload":', key, "}"]
    first = rows.slice(0, 1).to_pylist()[0] if rows.num_rows else {}
    tail = (
        f',"transaction":null,"op":"r","ts_ms":{first.get("ts_ms")},"ts_us":{first.get("ts_us")},'
        f'"ts_ns":{first.get("ts_ns")}}}'
    )
    body = [
        '{"before":null,"after":',
        rows["after"].combine_chunks(),
        ',"source":',
        _plain(rows["source"].combine_chunks()),
        tail,
    ]
    if vs_col.null_count == len(vs_col):
        return key_parts, body
    return key_parts, ['{"schema":', vs, ',"payload":', *body, "}"]


def _splice(parts: list[Any]) -> pa.Array:
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, "")


# Rows spliced at a time. A value is ~3.5 kB with its schema: a whole 100,000-row piece spliced
# at once is a fresh ~350 MB buffer (mmap'd: every page faulted in and zeroed), read back cold by
# the next step. 4,096-row slices (~14 MB) come from the heap and are reused, and stay warm in
# cache for the next step: the Kafka bytes went from ~2.8 to ~0.9 us a row, jsonl from ~0.76 to
# ~0.45 (bench/README, "Spliced in slices").
SLICE_ROWS = 4096


def _sliced(parts: list[Any], start: int, length: int) -> list[Any]:
    return [p.slice(start, length) if isinstance(p, pa.Array) else p for p in parts]


def kafka_bytes(rows: pa.Table, slice_rows: int = SLICE_ROWS) -> Iterator[tuple[list[Any], list[Any]]]:
    """(key bytes, value bytes) of a snapshot chunk's change-log rows, as the Kafka sink sends
    them (JsonConverter form): the same splice as `sinks.delta.kafka_key/kafka_value`. Yielded
    as Python lists (what the client takes) `slice_rows` rows at a time; a null key is None."""
    key_parts, value_parts = _kafka_parts(rows)
    for start in range(0, rows.num_rows, slice_rows):
        keys = _splice(_sliced(key_parts, start, slice_rows))
        values = _splice(_sliced(value_parts, start, slice_rows))
        yield keys.cast(pa.binary()).to_pylist(), values.cast(pa.binary()).to_pylist()


def jsonl_lines(topic: str, rows: pa.Table, slice_rows: int = SLICE_ROWS) -> Iterator[pa.Array]:
    """The jsonl sink's lines (`{"topic":..,"key":..,"value":..}` + newline) of a chunk's
    change-log rows, spliced from the same pieces as `kafka_bytes` (a keyless table's null key
    is written `null`), `slice_rows` rows at a time."""
    key_parts, value_parts = _kafka_parts(rows)
    head = '{"topic":' + orjson.dumps(topic).decode() + ',"key":'
    for start in range(0, rows.num_rows, slice_rows):
        yield pc.binary_join_element_wise(
            head,
            *_sliced(key_parts, start, slice_rows),
            ',"value":',
            *_sliced(value_parts, start, slice_rows),
            "}\n",
            "",
            null_handling="replace",
            null_replacement="null",
        )
