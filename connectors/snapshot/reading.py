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

_CFG_CACHE: dict[int, ConnectorConfig] = {}


def config_of(raw: Mapping[str, str]) -> ConnectorConfig:
    """The validated configuration of a task's flat properties, built once per worker process."""
    key = hash(tuple(sorted(raw.items())))
    cfg = _CFG_CACHE.get(key)
    if cfg is None:
        cfg = _CFG_CACHE[key] = from_mapping(dict(raw))
    return cfg


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
