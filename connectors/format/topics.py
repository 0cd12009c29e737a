"""Topic and schema naming as Debezium's DefaultTopicNamingStrategy and Avro name adjustment
(`schema.name.adjustment.mode`, `field.name.adjustment.mode`) do."""

from __future__ import annotations

import logging
import re
import struct
import unicodedata
from typing import Literal

from connectors.api import TerminalError
from connectors.settings.model import SourceSettings

log = logging.getLogger(__name__)

_INVALID_TOPIC = re.compile(r"[^A-Za-z0-9._-]")
# Sanitized names already warned about in this process: a snapshot builds a namer per chunk, and
# one warning per table is enough (Debezium warns once per topic).
_WARNED: set[str] = set()

AdjustmentMode = Literal["none", "avro", "avro_unicode"]


class TopicNamer:
    """`<prefix><delim><schema-or-db><delim><table>`; invalid topic characters become `_`
    (Debezium replaces them and warns about the possible collisions)."""

    def __init__(
        self,
        prefix: str,
        delimiter: str = ".",
        transaction: str = "transaction",
        heartbeat_prefix: str = "__debezium-heartbeat",
        schema_names: AdjustmentMode = "none",
        field_names: AdjustmentMode = "none",
    ) -> None:
        self.prefix = prefix
        self.delimiter = delimiter
        self._transaction = transaction
        self._heartbeat_prefix = heartbeat_prefix
        self._cache: dict[tuple[str, str], str] = {}
        self._seen: dict[str, tuple[str, str]] = {}
        # Connect schema names of the tables' Key/Value/Envelope and their field names.
        self.schema_name = NameAdjuster(schema_names, field=False)
        self.field_name = NameAdjuster(field_names, field=True)

    @classmethod
    def from_settings(cls, s: SourceSettings) -> TopicNamer:
        """From the connector's `topic.*` and `*.name.adjustment.mode` settings."""
        return cls(
            s.topic_prefix,
            s.topic_delimiter,
            s.topic_transaction,
            s.topic_heartbeat_prefix,
            s.schema_name_adjustment_mode,
            s.field_name_adjustment_mode,
        )

    def data_topic(self, namespace: str, table: str) -> str:
        key = (namespace, table)
        topic = self._cache.get(key)
        if topic is None:
            raw = self.delimiter.join((self.prefix, namespace, table))
            topic = _INVALID_TOPIC.sub("_", raw)
            if topic != raw and raw not in _WARNED:
                _WARNED.add(raw)
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


def schema_name(prefix: str, namespace: str, table: str, suffix: str) -> str:
    """Connect schema names before adjustment: `<prefix>.<ns>.<table>.<suffix>`."""
    return f"{prefix}.{namespace}.{table}.{suffix}"


class NameAdjuster:
    """Debezium's SchemaNameAdjuster for one connector: `none` keeps names; `avro` replaces each
    character Avro does not allow with `_` (a leading digit d becomes `_d`); `avro_unicode`
    replaces it with `_uXXXX` (its UTF-16 code in lower-case hex, at least 4 digits; `_` itself
    is escaped). Schema full names keep their dots, field names do not. The first replacement of
    a name is logged; two names adjusted to the same one stop the connector, as in Debezium."""

    def __init__(self, mode: AdjustmentMode, *, field: bool) -> None:
        self.mode = mode
        self.field = field
        self._done: dict[str, str] = {}
        self._by_result: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        if self.mode == "none":
            return name
        done = self._done.get(name)
        if done is not None:
            return done
        out = _adjust(name, self.mode == "avro_unicode", self.field)
        self._done[name] = out
        if out != name:
            other = self._by_result.setdefault(out, name)
            what = "field" if self.field else "schema"
            if other != name:
                setting = "field.name.adjustment.mode" if self.field else "schema.name.adjustment.mode"
                raise TerminalError(
                    f"{setting}={self.mode}: the {what} names '{name}' and '{other}' both become '{out}'",
                    "rename one of them, leave it out with the table/column filters, or use "
                    + ("avro_unicode" if self.mode == "avro" else "none"),
                )
            log.warning("%s name '%s' is not a valid Avro name; using '%s'", what, name, out)
        return out


def _adjust(name: str, unicode: bool, field: bool) -> str:
    if not name:
        return name
    units = struct.unpack(f"<{len(name.encode('utf-16-le')) // 2}H", name.encode("utf-16-le"))
    out: list[str] = []
    for i, u in enumerate(units):
        c = chr(u)
        letter = "a" <= c <= "z" or "A" <= c <= "Z"
        if i == 0:
            valid = letter or (c == "_" and not unicode)
        else:
            valid = letter or "0" <= c <= "9" or (c == "_" and not unicode) or (c == "." and not field)
        if valid:
            out.append(c)
        elif unicode:
            h = f"{u:x}"
            out.append("_u" + ("00" + h if len(h) <= 2 else h))
        else:
            # Java's Character.isDigit: a leading digit is kept after the `_` (avoids collisions).
            out.append("_" + c if i == 0 and unicodedata.category(c) == "Nd" else "_")
    return "".join(out)
