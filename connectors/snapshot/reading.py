"""What every connector's chunk reader shares: the configuration a task rebuilds once per
worker, and the one-piece look-ahead that finds a chunk's last row."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import pyarrow as pa

from connectors.settings.config import ConnectorConfig, from_mapping
from connectors.snapshot.chunks import Chunk
from connectors.snapshot.rows import ChunkContext, changelog_rows

T = TypeVar("T")


def chunk_context(
    cfg: ConnectorConfig,
    chunk: Chunk,
    ts: Any,
    source: Callable[[str], dict[str, Any]],
    headers: tuple[tuple[str, bytes], ...],
) -> ChunkContext:
    """What the rows of a chunk of the table `ts` (the streaming table schema) share; the change
    log's `batch_seq` is the one the snapshot took (its plan's "batch_seq")."""
    return ChunkContext(
        ts.topic,
        ts.collection,
        ts.key_schema.json_text if ts.key_schema is not None else None,
        ts.envelope_schema.json_text,
        source,
        headers,
        cfg.format.key_schemas_enable,
        cfg.format.value_schemas_enable,
        int(chunk.detail.get("batch_seq", 0)),
    )


_CFG_CACHE: dict[int, ConnectorConfig] = {}


def config_of(raw: Mapping[str, str]) -> ConnectorConfig:
    """The validated configuration of a task's flat properties, built once per worker process."""
    key = hash(tuple(sorted(raw.items())))
    cfg = _CFG_CACHE.get(key)
    if cfg is None:
        cfg = _CFG_CACHE[key] = from_mapping(dict(raw))
    return cfg


def select_text(
    table: str, source_sql: str, select_list: str, cond: list[str], override: str | None, dialect: str
) -> str:
    """A chunk's SELECT: its columns from `source_sql` under the conditions `cond` (its key range),
    with the table's snapshot.select.statement.overrides text, parsed (never pasted unchecked):
    a chunkable override adds its WHERE, another one becomes the source."""
    cond = list(cond)
    if override is not None:
        from connectors.settings.overrides import parse_override

        ov = parse_override(table, override, dialect)
        if ov.chunkable:
            cond += [f"({ov.where})"] if ov.where else []
        else:
            source_sql = f"({ov.sql}) AS snapshot_override"
    return f"SELECT {select_list} FROM {source_sql}" + (f" WHERE {' AND '.join(cond)}" if cond else "")


def marked_pieces(
    chunk: Chunk,
    ctx: ChunkContext,
    pieces: Iterable[T],
    encode: Callable[[T], tuple[pa.Array | None, pa.Array]],
    size: Callable[[T], int],
) -> Iterator[pa.Table]:
    """The chunk's change-log rows, piece by piece. One piece of look-ahead: only the chunk's
    last piece holds its last row (the `last…` markers), and only the first its first."""
    held: Any = None
    base, first = 0, True
    for piece in pieces:
        if size(piece) == 0:
            continue
        if held is not None:
            key, after = encode(held)
            yield changelog_rows(chunk, ctx, key, after, base, first=first, last=False)
            base += size(held)
            first = False
        held = piece
    if held is not None:
        key, after = encode(held)
        yield changelog_rows(chunk, ctx, key, after, base, first=first, last=True)
