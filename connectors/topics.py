"""Topic and schema naming as Debezium's DefaultTopicNamingStrategy and Avro name adjustment do."""

from __future__ import annotations

import logging
import re

log = logging.getLogger(__name__)

_INVALID_TOPIC = re.compile(r"[^A-Za-z0-9._-]")
_AVRO_FIRST = re.compile(r"[A-Za-z_]")
_AVRO_REST = re.compile(r"[^A-Za-z0-9_]")


class TopicNamer:
    """`<prefix><delim><schema-or-db><delim><table>`; invalid topic characters become `_`
    (Debezium replaces them and warns about the possible collisions)."""

    def __init__(self, prefix: str, delimiter: str = ".", transaction: str = "transaction",
                 heartbeat_prefix: str = "__debezium-heartbeat") -> None:
        self.prefix = prefix
        self.delimiter = delimiter
        self._transaction = transaction
        self._heartbeat_prefix = heartbeat_prefix
        self._cache: dict[tuple[str, str], str] = {}
        self._seen: dict[str, tuple[str, str]] = {}

    def data_topic(self, namespace: str, table: str) -> str:
        key = (namespace, table)
        topic = self._cache.get(key)
        if topic is None:
            raw = self.delimiter.join((self.prefix, namespace, table))
            topic = _INVALID_TOPIC.sub("_", raw)
            if topic != raw:
                log.warning("table %s.%s: topic name sanitized to %s", namespace, table, topic)
            other = self._seen.get(topic)
            if other is not None and other != key:
                log.warning("tables %s and %s both map to topic %s", other, key, topic)
            self._seen[topic] = key
            self._cache[key] = topic
        return topic

    @property
    def transaction_topic(self) -> str:
        return f"{self.prefix}{self.delimiter}{self._transaction}"

    @property
    def heartbeat_topic(self) -> str:
        return f"{self._heartbeat_prefix}{self.delimiter}{self.prefix}"

    def message_topic(self) -> str:
        return f"{self.prefix}{self.delimiter}message"

    @property
    def schema_change_topic(self) -> str:
        return self.prefix


def avro_name(name: str) -> str:
    """Debezium's `avro` name adjustment: first char [A-Za-z_], the rest [A-Za-z0-9_]."""
    if not name:
        return name
    first = name[0] if _AVRO_FIRST.match(name[0]) else "_"
    return first + _AVRO_REST.sub("_", name[1:])


def schema_name(prefix: str, namespace: str, table: str, suffix: str) -> str:
    """Connect schema names (`<prefix>.<ns>.<table>.Key`), each segment Avro-adjusted only where
    Debezium would (it adjusts names it cannot use as Connect/Avro names)."""
    return ".".join(_adjust_segment(p) for p in (prefix, namespace, table)) + "." + suffix


def _adjust_segment(seg: str) -> str:
    # Connect schema names allow dots; Debezium's SchemaNameAdjuster (default mode for JSON is
    # `none` since 2.x) leaves names as they are. Keep the hook for `schema.name.adjustment.mode=avro`.
    return seg
