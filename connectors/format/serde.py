"""Kafka Connect JsonConverter output: `{"schema": ..., "payload": ...}` or the bare payload."""

from __future__ import annotations

from typing import Any

import orjson

from connectors.format.schema import Schema

_KEEP_BUFFER = 1 << 20  # records this large keep orjson's buffer as it is


def to_json_bytes(schema: Schema | None, payload: Any, schemas_enable: bool) -> bytes | None:
    """Serialize one key or value as the JsonConverter does. A `None` payload (tombstone value,
    keyless table) stays None: Kafka carries a null, not the JSON text `null`."""
    if payload is None:
        return None
    if not schemas_enable or schema is None:
        return orjson.dumps(payload)
    # The schema text is cached on the (shared, immutable) Schema object: spliced in as a Fragment,
    # not re-encoded, so a large payload is written once (not dumped, then copied into the envelope).
    out = orjson.dumps({"schema": orjson.Fragment(schema.json_text), "payload": payload})
    # orjson's buffer keeps the slack of its last growth: thousands of small records held in a batch
    # would take ~60% more memory, so a small one is copied to its exact size
    return out if len(out) >= _KEEP_BUFFER else bytes(memoryview(out))


# A placeholder spliced into a template payload: orjson escapes NUL inside strings, so the bytes
# can appear in its output only where a Fragment put them.
_MARK = b"\x00tidemark-payload\x00"
PLACEHOLDER = orjson.Fragment(_MARK)


def split_at_placeholder(schema: Schema | None, payload: Any, schemas_enable: bool) -> tuple[bytes, bytes]:
    """`to_json_bytes` of a payload holding `PLACEHOLDER` once, as the bytes before and after it:
    records that differ only there serialize as `before + <their part> + after`, which equals
    `to_json_bytes` of each (orjson writes a nested value the same wherever it sits)."""
    text = to_json_bytes(schema, payload, schemas_enable)
    assert text is not None
    head, mark, tail = text.partition(_MARK)
    if not mark:
        raise ValueError("the payload does not hold PLACEHOLDER")
    return head, tail
