"""The latency benchmark's jsonl watcher: the keys (and, for the stream table, the values) of the
lines a growing jsonl file gains.

It runs on the same 2 cores as the connector it measures, so it must cost little. During an
incremental snapshot the file gains ~3.7 kB lines at 60-80k lines/s (~290 MB/s); read line by line
in Python with every snapshot key parsed, this watcher took a third of a core, a fifth of the
machine (measured: 10.3 of 50 CPU-seconds in a 2M-row run). Now:

- the file is read into one reused buffer (`readv`): a fresh 4 MB `bytes` per read, and a
  second one to prepend the previous read's unfinished line, were a third of its time;
- the lines of one table whose keys are all `{"id": N}` (the snapshot's) are recognised in place:
  a line that starts with the table's constant prefix (the topic and the key's schema, learnt
  from the first such line parsed in full) followed by at most 18 digits and `}},"value":` gives
  its id from those digits, without a copy or a parse. Any other line (the stream table's, or one
  that does not match byte for byte) is parsed in full.

Why per line and not column-wise: finding the newlines with numpy (`a == 10` over every byte)
and checking the prefixes as a 2-D gather cost 3.8-4.1 ms per 4 MB read; `bytearray.find`
(memchr) and `startswith` at each line start, 2.0-2.8 ms, same ids (measured 2026-11-28 on a
MariaDB run's file).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import orjson

PAYLOAD = b',"payload":'
ID_PREFIX = b',"payload":{"id":'
AFTER_ID = b'}},"value":'
MAX_DIGITS = 18  # (more digits than int64 always holds: such a line is parsed in full)
READ = 1 << 22


def key_of(text: str | bytes) -> Any:
    """A snapshot row's key as the watchers need it (its id): with the JsonConverter's schema,
    only its payload is parsed (the schema's ~10 objects a row cost the watcher more than the
    parsing itself, in allocations and garbage collection). The jsonl watcher and Debezium's
    handler both take keys so."""
    sep: Any = ',"payload":' if isinstance(text, str) else PAYLOAD
    head: Any = '{"schema":' if isinstance(text, str) else b'{"schema":'
    at = text.rfind(sep)
    if text.startswith(head) and at > 0:
        return orjson.loads(text[at + len(sep) : -1])
    return orjson.loads(text)


def id_prefix(line: bytes) -> bytes | None:
    """The bytes before the id's digits of a line `<prefix><digits>}},"value":...` (a line of a
    table keyed by one integer `id`), None for any other line."""
    if not line.startswith(b'{"topic":'):
        return None
    at = line.find(ID_PREFIX)
    if at < 0:
        return None
    end = at + len(ID_PREFIX)
    digits = end
    while digits < len(line) and line[digits : digits + 1].isdigit():
        digits += 1
    return line[:end] if digits > end and line.startswith(AFTER_ID, digits) else None


class JsonlTail:
    """Reads what a jsonl file gained since the last `read`."""

    def __init__(self, path: os.PathLike[str] | str, topic: str) -> None:
        self.stream_topic = b'{"topic":' + orjson.dumps(topic) + b","
        self.fd = os.open(path, os.O_RDONLY)
        self.prefix: bytes | None = None  # the id lines' constant start (`id_prefix`)
        self.buf = bytearray(2 * READ)
        self.have = 0  # bytes of an unfinished line kept at the buffer's start

    def read(self) -> tuple[float, list[tuple[Any, Any]], list[int]] | None:
        """None: nothing new; else when the bytes were read (before parsing them), the (key,
        value) of the new whole lines parsed in full (the value only for the stream topic's) and
        the ids of those recognised by their prefix."""
        buf = self.buf
        if len(buf) - self.have < READ:  # (a line longer than the buffer: grow it)
            buf.extend(bytes(READ))
        with memoryview(buf) as mv:
            n = os.readv(self.fd, [mv[self.have :]])
        if not n:
            return None
        t = time.time()
        size = self.have + n
        ids: list[int] = []
        found: list[tuple[Any, Any]] = []
        find, starts = buf.find, buf.startswith
        prefix = self.prefix
        skip = len(prefix) if prefix is not None else 0
        pos = 0
        while (end := find(b"\n", pos, size)) >= 0:
            if prefix is not None and starts(prefix, pos, end):
                d = pos + skip
                e = find(AFTER_ID, d, min(end, d + MAX_DIGITS + len(AFTER_ID)))
                if e > d and (digits := buf[d:e]).isdigit():
                    ids.append(int(digits))
                    pos = end + 1
                    continue
            if end > pos:
                self._parse(bytes(buf[pos:end]), found)
            pos = end + 1
        buf[: size - pos] = buf[pos:size]
        self.have = size - pos
        return t, found, ids

    def _parse(self, line: bytes, found: list[tuple[Any, Any]]) -> None:
        if line.startswith(self.stream_topic):
            r = orjson.loads(line)
            found.append((r.get("key"), r.get("value")))
            return
        start = line.index(b',"key":') + 7
        found.append((key_of(line[start : line.index(b',"value":', start)]), None))
        if self.prefix is None:
            self.prefix = id_prefix(line)


def watch_jsonl(path: os.PathLike[str], poll_s: float, topic: str, emit: Callable[..., None]) -> None:
    """Tail `path` forever; per read, `emit(t, keys_values, ids)` (`JsonlTail.read`)."""
    while not os.path.exists(path):
        time.sleep(poll_s)
    tail = JsonlTail(path, topic)
    while True:
        got = tail.read()
        if got is None:
            time.sleep(poll_s)
            continue
        emit(*got)
