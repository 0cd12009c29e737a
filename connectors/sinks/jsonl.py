"""JSON-lines sink: one line per Kafka record, `{"topic":..,"key":<JSON|null>,"value":<JSON|null>}`.

The key/value are the very bytes the Kafka sink sends (spliced in, not re-encoded), tombstones
included, so a file is a faithful, diffable copy of the topic stream (and the shape
`shared/tools/debezium-capture` writes for Debezium's own output).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from connectors.api import Batch, ConfigError
from connectors.sinks import schema_flags, serialized_batch


class JsonLinesSink:
    """Appends each batch to `path` (or stdout for `-`); `write` returns after flush + fsync."""

    name = "jsonl"

    def __init__(self, path: str | Path, *, key_schemas_enable: bool = True,
                 value_schemas_enable: bool = True) -> None:
        self._ks = key_schemas_enable
        self._vs = value_schemas_enable
        self._stdout = str(path) == "-"
        self._out: BinaryIO
        if self._stdout:
            self._out = sys.stdout.buffer
        else:
            p = Path(path)
            p.parent.mkdir(parents=True, exist_ok=True)
            self._out = open(p, "ab")  # noqa: SIM115 - lives as long as the sink
        self._topic_json: dict[str, bytes] = {}

    @classmethod
    def from_config(cls, cfg: Any) -> JsonLinesSink:
        s = getattr(cfg, "sink", {}) or {}
        path = s.get("jsonl.path")
        if not path:
            raise ConfigError("debezium.sink.jsonl.path is required for the jsonl sink",
                              "set it to a file path, or - for standard output")
        ks, vs = schema_flags(cfg)
        return cls(path, key_schemas_enable=ks, value_schemas_enable=vs)

    def write(self, batch: Batch) -> None:
        if not batch.records:
            return
        tj = self._topic_json
        parts: list[bytes] = []
        for r, (k, v) in zip(batch.records, serialized_batch(batch, self._ks, self._vs), strict=True):
            t = tj.get(r.topic)
            if t is None:
                t = tj[r.topic] = b'{"topic":' + orjson.dumps(r.topic) + b',"key":'
            parts += (t, b"null" if k is None else k, b',"value":', b"null" if v is None else v, b"}\n")
        self._out.write(b"".join(parts))
        self._out.flush()
        if not self._stdout:
            os.fsync(self._out.fileno())

    def last_offset(self) -> tuple[int, dict[str, Any]] | None:
        return None

    def close(self) -> None:
        if self._stdout:
            self._out.flush()
        else:
            self._out.close()
