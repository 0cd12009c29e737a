"""The latency benchmark's jsonl watcher: the keys (and, for the stream table, the values) of the
lines a growing jsonl file gains.

It runs on the same 2 cores as the connector it measures, so it must cost little. During an
incremental snapshot the file gains ~3.7 kB lines at 60-80k lines/s; read line by line in Python
(find each line, parse its key) this watcher took a third of a core, a fifth of the machine
(measured: 10.3 of 50 CPU-seconds in a 2M-row run). Now:

- the file is read into one reused buffer (`readv`): a fresh 4 MB `bytes` per read, and a
  second one to prepend the previous read's unfinished line, were a third of its time;
- the lines of one table whose keys are all `{"id": N}` (the snapshot's) are recognised
  column-wise with numpy: every line start is checked against the table's constant prefix (the
  topic and the key's schema, learnt from the first such line parsed in full) followed by the
  digits and `}},"value":`, and the ids are read from the digits. Any other line (the stream
  table's, or one that does not match byte for byte) is parsed in full, as before.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson

PAYLOAD = b',"payload":'
ID_PREFIX = b',"payload":{"id":'
AFTER_ID = b'}},"value":'
MAX_DIGITS = 18  # (more digits than int64 always holds: such a line is parsed in full)
READ = 1 << 22
SMALL = 1 << 16  # bytes read below which lines are found one by one


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


class IdLines:
    """Recognises, column-wise, the lines `<prefix><digits>}},"value":...` of one table."""

    def __init__(self) -> None:
        self.prefix: np.ndarray | None = None  # the bytes before the digits, as uint8

    def learn(self, line: bytes) -> None:
        """Take the constant prefix from a line of the table (parsed in full by the caller)."""
        if self.prefix is not None or not line.startswith(b'{"topic":'):
            return
        at = line.find(ID_PREFIX)
        if at < 0:
            return
        end = at + len(ID_PREFIX)
        digits = end
        while digits < len(line) and line[digits : digits + 1].isdigit():
            digits += 1
        if digits > end and line.startswith(AFTER_ID, digits):
            self.prefix = np.frombuffer(line[:end], dtype=np.uint8).copy()

    def match(self, a: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Of the lines [starts, ends) of `a`: which are the table's (a mask) and their ids."""
        none = np.zeros(len(starts), dtype=bool)
        if self.prefix is None or not len(starts):
            return none, np.empty(0, dtype=np.int64)
        p = self.prefix
        width = len(p) + MAX_DIGITS + len(AFTER_ID) + 1
        ok = ends - starts >= width
        cand = starts[ok]
        if not len(cand):
            return none, np.empty(0, dtype=np.int64)
        idx = cand[:, None] + np.arange(width)
        m = a[idx]  # (lines, width): each candidate line's first bytes
        ok_prefix = (m[:, : len(p)] == p).all(axis=1)
        d = m[:, len(p) : len(p) + MAX_DIGITS + 1]
        isdig = (d >= 0x30) & (d <= 0x39)
        n = np.argmin(isdig, axis=1)  # digits before the first non-digit
        after = np.arange(len(AFTER_ID)) + len(p) + n[:, None]
        tail = np.take_along_axis(m, after, axis=1)
        good = ok_prefix & (n > 0) & (tail == np.frombuffer(AFTER_ID, dtype=np.uint8)).all(axis=1)
        # an id from its digits: each digit times its power of ten (digits past the id count 0)
        vals = (d[:, :MAX_DIGITS].astype(np.int64) - 0x30) * (np.arange(MAX_DIGITS) < n[:, None])
        power = n[:, None] - 1 - np.arange(MAX_DIGITS)
        ids = (vals * (10 ** np.clip(power, 0, None))).sum(axis=1)
        mask = none.copy()
        mask[np.flatnonzero(ok)[good]] = True
        return mask, ids[good]


class JsonlTail:
    """Reads what a jsonl file gained since the last `read`."""

    def __init__(self, path: os.PathLike[str] | str, topic: str) -> None:
        self.stream_topic = b'{"topic":' + orjson.dumps(topic) + b","
        self.fd = os.open(path, os.O_RDONLY)
        self.fast = IdLines()
        self.buf = bytearray(2 * READ)
        self.have = 0  # bytes of an unfinished line kept at the buffer's start

    def read(self) -> tuple[float, list[tuple[Any, Any]], list[int]] | None:
        """None: nothing new; else when the bytes were read (before parsing them), the (key,
        value) of the new whole lines parsed in full (the value only for the stream topic's) and
        the ids of those recognised column-wise."""
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
        if size < SMALL:
            # a few lines (the stream's between chunks): numpy's per-call cost would exceed the
            # lines' own
            starts_l, ends_l = [], []
            pos = 0
            while (end := buf.find(b"\n", pos, size)) >= 0:
                starts_l.append(pos)
                ends_l.append(end)
                pos = end + 1
            used = pos
        else:
            a = np.frombuffer(buf, dtype=np.uint8, count=size)
            nl = np.flatnonzero(a == 0x0A)
            starts_l, ends_l, used = [], [], 0
            if len(nl):
                starts = np.concatenate(([0], nl[:-1] + 1))
                mask, fast_ids = self.fast.match(a, starts, nl)
                ids = fast_ids.tolist()
                starts_l, ends_l = starts[~mask].tolist(), nl[~mask].tolist()
                used = int(nl[-1]) + 1
            del a
        found: list[tuple[Any, Any]] = []
        for s, e in zip(starts_l, ends_l, strict=True):
            if e == s:
                continue
            line = bytes(buf[s:e])
            if line.startswith(self.stream_topic):
                r = orjson.loads(line)
                found.append((r.get("key"), r.get("value")))
            else:
                start = line.index(b',"key":') + 7
                found.append((key_of(line[start : line.index(b',"value":', start)]), None))
                self.fast.learn(line)
        buf[: size - used] = buf[used:size]
        self.have = size - used
        return t, found, ids


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
