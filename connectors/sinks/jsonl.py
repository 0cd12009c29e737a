"""JSON-lines sink: one line per Kafka record, `{"topic":..,"key":<JSON|null>,"value":<JSON|null>}`.

The key/value are the very bytes the Kafka sink sends (spliced in, not re-encoded), tombstones
included, so a file is a faithful, diffable copy of the topic stream (and the shape
`shared/tools/debezium-capture` writes for Debezium's own output).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from connectors.api import Batch, ConfigError, Record
from connectors.format.rowblock import CHUNK_ROWS, block_runs
from connectors.settings.config import ConnectorConfig
from connectors.sinks.common import KeyPieces, schema_flags, serialized, serialized_batch
from connectors.state.pagecache import drop_cached
from connectors.state.storage import check_file_writable, storage_error

log = logging.getLogger(__name__)

Buffer = bytes | memoryview  # what a batch is written from (`write_all`)

WHAT = "the jsonl output (debezium.sink.jsonl.path)"


IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024


def write_all(fd: int, parts: list[Buffer], writev: Callable[[int, Sequence[Any]], int] = os.writev) -> None:
    """Write `parts` to `fd` in order with vectored writes, IOV_MAX pieces a call, a short write
    continued where it stopped. Why not one `b"".join(parts)`: a batch of snapshot rows is ~14 MB
    of JSON, and joining it (a fresh 14 MB buffer, page-faulted in while the interpreter lock is
    held) was a fifth of the lock's time in an incremental snapshot (py-spy --gil); writev copies
    the pieces straight into the page cache with the lock released."""
    at = 0
    while at < len(parts):
        group: list[Any] = parts[at : at + IOV_MAX]
        want = sum(map(len, group))
        done = writev(fd, group)
        while done < want:  # a short write: skip what went out, go on with the rest
            i = 0
            while done >= len(group[i]):
                done -= len(group[i])
                want -= len(group[i])
                i += 1
            group = [memoryview(group[i])[done:], *group[i + 1 :]]
            want -= done
            done = writev(fd, group)
        at += IOV_MAX


def _drop_partial_line(out: BinaryIO, path: Path) -> None:
    """Cut a last line without its newline: a write the process did not finish (SIGKILL, power
    loss). That batch was never acknowledged, so the engine writes it again in full; left in
    place, the cut record would glue onto the next one and break line-by-line readers."""
    end = out.seek(0, os.SEEK_END)
    if end == 0:
        return
    pos = end
    chunk = 1 << 16
    with open(path, "rb") as f:
        while pos > 0:
            start = max(0, pos - chunk)
            f.seek(start)
            data = f.read(pos - start)
            if pos == end and data.endswith(b"\n"):
                return  # the common case: the file ends with a whole line
            nl = data.rfind(b"\n")
            if nl >= 0:
                pos = start + nl + 1
                break
            pos = start
    log.warning(
        "%s: removing %d bytes of an unfinished last line (an interrupted write; the engine "
        "writes that batch again)",
        path,
        end - pos,
    )
    out.truncate(pos)
    out.seek(pos)


class JsonLinesSink:
    """Appends each batch to `path` (or stdout for `-`); `write` returns after flush + fsync
    (`stage` + the step it returns, when the engine overlaps them), and synced bytes but the
    newest `CACHED_TAIL` leave the page cache (`connectors.state.pagecache`)."""

    name = "jsonl"
    CACHED_TAIL = 64 << 20  # bytes of the file's end left in the page cache

    def __init__(
        self, path: str | Path, *, key_schemas_enable: bool = True, value_schemas_enable: bool = True
    ) -> None:
        self._ks = key_schemas_enable
        self._vs = value_schemas_enable
        self._stdout = str(path) == "-"
        self._synced = 0
        self._sync_lock = threading.Lock()
        self._out: BinaryIO
        self._path = str(path)
        if self._stdout:
            self._out = sys.stdout.buffer
        else:
            p = Path(path)
            check_file_writable(p, WHAT)
            try:
                self._out = open(p, "ab")  # noqa: SIM115 - lives as long as the sink
                _drop_partial_line(self._out, p)
                self._synced = self._out.tell()  # (where the bytes still cached start)
            except OSError as e:
                raise storage_error(e, p, WHAT) from None
        self._topic_json: dict[str, bytes] = {}

    @classmethod
    def from_config(cls, cfg: ConnectorConfig) -> JsonLinesSink:
        path = cfg.sink.jsonl.path
        if not path:
            raise ConfigError(
                "debezium.sink.jsonl.path is required for the jsonl sink",
                "set it to a file path, or - for standard output",
            )
        ks, vs = schema_flags(cfg)
        return cls(path, key_schemas_enable=ks, value_schemas_enable=vs)

    def write(self, batch: Batch) -> None:
        sync = self.stage(batch)
        if sync is not None:
            sync()

    def stage(self, batch: Batch) -> Callable[[], None] | None:
        """Write `batch` to the file (the page cache) and return the step that makes it durable
        (`StagedSink`): the engine fsyncs batch k while the next one is written."""
        records = batch.records
        if not records:
            return None
        if batch.extra.get(CHUNK_ROWS):
            parts = self._block_parts(records)
        else:
            parts = self._parts(records, serialized_batch(batch, self._ks, self._vs))
        try:
            if self._stdout:
                self._out.write(b"".join(parts))
                self._out.flush()
                return None
            fd = self._out.fileno()
            write_all(fd, parts)
            end = os.lseek(fd, 0, os.SEEK_CUR)  # (O_APPEND: the end of this batch)
        except OSError as e:
            raise storage_error(e, self._path, WHAT) from None
        return lambda: self._sync(fd, end)

    def _sync(self, fd: int, end: int) -> None:
        """fsync `fd` (every byte up to `end` and any written since), then let synced bytes but
        the newest CACHED_TAIL leave the page cache. Locked: a sync the engine deferred may still
        run when the next batch's `write` syncs inline."""
        with self._sync_lock:
            try:
                os.fsync(fd)
                # the newest CACHED_TAIL bytes stay cached for readers tailing the file (measured:
                # dropping them at once had the latency bench's watcher read them from disk, 40 %
                # more of its CPU)
                end -= self.CACHED_TAIL
                if end > self._synced:
                    drop_cached(fd, self._synced, end)
                    self._synced = end
            except OSError as e:
                raise storage_error(e, self._path, WHAT) from None

    def _head(self, topic: str) -> bytes:
        t = self._topic_json.get(topic)
        if t is None:
            t = self._topic_json[topic] = b'{"topic":' + orjson.dumps(topic) + b',"key":'
        return t

    def _parts(self, records: Sequence[Record], serialized: Iterable[KeyPieces]) -> list[bytes]:
        parts: list[bytes] = []
        head = self._head
        null, mid, close = b"null", b',"value":', b"}\n"
        # one extend per record: this runs for every record of a stream
        for r, (k, v) in zip(records, serialized, strict=True):
            if isinstance(v, tuple):  # pieces: a head, a row's `after`, a tail
                parts += (head(r.topic), null if k is None else k, mid, *v, close)
            else:
                parts += (head(r.topic), null if k is None else k, mid, null if v is None else v, close)
        return parts

    def _block_parts(self, records: list[Record]) -> list[Buffer]:
        """A batch holding incremental snapshot chunks (`ChunkRow`): each chunk's lines made at
        once from its columns (`RowBlock.lines`), the other records one by one."""
        parts: list[Buffer] = []
        flags = (self._ks, self._vs)
        for start, end, block, first in block_runs(records):
            lines = (
                None
                if block is None
                else block.lines(first, first + end - start, self._head(block.topic), flags)
            )
            if lines is not None:
                parts += lines
            else:
                some = records[start:end]
                parts += self._parts(some, (serialized(r, self._ks, self._vs) for r in some))
        return parts

    def last_offset(self) -> tuple[int, dict[str, Any]] | None:
        return None

    def close(self) -> None:
        if self._stdout:
            self._out.flush()
        else:
            self._out.close()
