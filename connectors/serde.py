"""Kafka Connect JsonConverter output: `{"schema": ..., "payload": ...}` or the bare payload."""

from __future__ import annotations

from typing import Any

import orjson

from connectors.schema import Schema


def to_json_bytes(schema: Schema | None, payload: Any, schemas_enable: bool) -> bytes | None:
    """Serialize one key or value as the JsonConverter does. A `None` payload (tombstone value,
    keyless table) stays None: Kafka carries a null, not the JSON text `null`."""
    if payload is None:
        return None
    if not schemas_enable or schema is None:
        return orjson.dumps(payload)
    # The schema text is cached on the (shared, immutable) Schema object: spliced in as a Fragment,
    # not re-encoded, and written into the one output buffer (no second copy of a large payload).
    return orjson.dumps({"schema": orjson.Fragment(schema.json_text), "payload": payload})
