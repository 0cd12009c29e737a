"""Load a connector configuration file into one frozen `ConnectorConfig`.

`load(path, overrides)` reads a Java `.properties` file or a YAML file, in either of two shapes:

* **Debezium Server**: connector properties under `debezium.source.*`, sinks under
  `debezium.sink.*`, the record format under `debezium.format.*`, Tidemark's own keys under
  `tidemark.*` (and `debezium.transforms*` / `debezium.predicates*`).
* **plain connector properties**: connector keys at the top level (as for Kafka Connect), plus the
  same `debezium.sink.*`, `debezium.format.*` and `tidemark.*` keys.

A file is Debezium Server shaped when any key starts with `debezium.source.`.

Everything is validated (`validate`) before anything connects; then the typed settings
(`model`) are built once. Readers take those: `cfg.source.decimal_handling_mode`,
`cfg.sink.kafka.client`, `cfg.runtime.commit_max_events`. Secrets never appear in logs, `repr()`
or `str()`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from connectors.api import ConfigError
from connectors.settings.catalog import PREFIX_FAMILIES, SANITIZE_PATTERN, SERVER_PROPERTIES
from connectors.settings.files import _read, _scalar_text
from connectors.settings.model import (
    ColumnRule,
    DeltaSinkSettings,
    FormatSettings,
    JsonlSinkSettings,
    KafkaSinkSettings,
    RuntimeSettings,
    SinkSettings,
    SourceSettings,
    build_source,
)
from connectors.settings.modes import Connector
from connectors.settings.validate import _SERVER_TOP, SINK_PREFIX, SOURCE_PREFIX, Validated, validate
from connectors.settings.values import compile_regex

__all__ = ["ConfigError", "ConfigOrigin", "ConnectorConfig", "from_mapping", "is_secret", "load"]

MASK = "********"


def is_secret(key: str, pattern: re.Pattern[str] | None = None) -> bool:
    """True when the key's value must never be shown (Debezium's sanitize pattern)."""
    return bool(SANITIZE_PATTERN.fullmatch(key) or (pattern is not None and pattern.fullmatch(key)))


@dataclass(frozen=True, eq=False)
class ConfigOrigin:
    """Where a configuration came from: the file, what it set, the warnings loading gave.
    `raw` holds the text as read, secrets included: show it only through `redacted()`."""

    path: Path | None
    raw: Mapping[str, str] = field(repr=False)
    # every connector property's effective value (validated, defaults filled; secrets in clear)
    properties: Mapping[str, Any] = field(repr=False)
    server: Mapping[str, Any] = field(repr=False)  # the same for debezium.sink/format.* and tidemark.*
    source_text: Mapping[str, str] = field(repr=False)  # connector keys the file set → their text
    full_names: Mapping[str, str]  # connector key → the key as the file spells it
    server_shape: bool
    warnings: tuple[str, ...]
    sanitize: re.Pattern[str] | None = None

    def is_secret(self, key: str) -> bool:
        return is_secret(key, self.sanitize)

    def redacted(self) -> dict[str, str]:
        """The configuration as read (flat key → text) with secret values replaced by `********`."""
        return {k: (MASK if self.is_secret(k) and v != "" else v) for k, v in self.raw.items()}

    def full_name(self, key: str) -> str:
        """A connector key as the file spells it (`debezium.source.<key>` in Debezium Server shape)."""
        return self.full_names.get(key) or (SOURCE_PREFIX + key if self.server_shape else key)


# eq=False: identity equality and hashing (the sources remember per loaded config whether the
# server was ever reached, in a WeakKeyDictionary).
@dataclass(frozen=True, eq=False)
class ConnectorConfig:
    """One connector's settings, validated and typed, frozen. Built by `load` / `from_mapping`."""

    name: str  # `name`, defaulting to `topic.prefix`
    connector: Connector
    source: SourceSettings  # PostgresSettings / MySqlSettings / MariaDbSettings
    sink: SinkSettings
    format: FormatSettings
    runtime: RuntimeSettings
    origin: ConfigOrigin = field(repr=False)

    @property
    def topic_prefix(self) -> str:
        return self.source.topic_prefix

    @property
    def warehouse(self) -> Path:
        return self.runtime.warehouse

    @property
    def sink_types(self) -> tuple[str, ...]:
        return self.sink.type

    def __repr__(self) -> str:
        where = f" from {self.origin.path}" if self.origin.path else ""
        return (
            f"ConnectorConfig(name={self.name!r}, connector={self.connector!r}, topic_prefix={self.topic_prefix!r}, "
            f"sink_types={list(self.sink_types)!r}{where})"
        )

    __str__ = __repr__


def load(path: str | Path, overrides: Mapping[str, Any] | None = None) -> ConnectorConfig:
    """Read, normalise and validate a configuration file. Raises `ConfigError` listing every problem.

    `overrides` are flat keys applied on top of the file (values may be str/int/bool/list). In a
    Debezium Server shaped file an override key that does not start with `debezium.`, `tidemark.`
    or `quarkus.` is taken as a connector property (`debezium.source.` is prepended).
    """
    p = Path(path)
    return from_mapping(_read(p), overrides, path=p)


def from_mapping(
    flat: Mapping[str, Any], overrides: Mapping[str, Any] | None = None, *, path: Path | None = None
) -> ConnectorConfig:
    """Validate an already-flat mapping (the same rules as `load`)."""

    def text(v: Any) -> str:
        return ",".join(_scalar_text(x) for x in v) if isinstance(v, list | tuple) else _scalar_text(v)

    raw = {str(k).strip(): text(v) for k, v in flat.items()}
    server_shape = any(k.startswith(SOURCE_PREFIX) for k in raw)
    for k, v in (overrides or {}).items():
        key = str(k).strip()
        if server_shape and not key.startswith(_SERVER_TOP):
            key = SOURCE_PREFIX + key
        raw[key] = text(v)
    return build(validate(raw, server_shape, path), path)


def build(v: Validated, path: Path | None) -> ConnectorConfig:
    """The frozen settings of a validated configuration."""
    source = build_source(
        v.connector,
        v.source,
        column_rules=column_rules(v.source, v.connector),
        select_overrides=_strip_prefix(v.source, "snapshot.select.statement.overrides."),
    )
    server = v.server
    sink = _strip_prefix(server, SINK_PREFIX)
    kafka = _strip_prefix(sink, "kafka.")
    sinks = SinkSettings(
        type=tuple(server.get("debezium.sink.type") or ()),
        kafka=KafkaSinkSettings(
            client=kafka["client"],
            producer={k: str(x) for k, x in _strip_prefix(kafka, "producer.").items()},
            topic_creation_enable=kafka["topic.creation.enable"],
            topic_creation_partitions=kafka["topic.creation.partitions"],
            topic_creation_replication_factor=kafka["topic.creation.replication.factor"],
            flush_timeout_ms=kafka.get("flush.timeout.ms"),
        ),
        delta=DeltaSinkSettings(
            table_path=sink.get("delta.table.path"),
            compact_files=sink["delta.compact.files"],
            storage={k: SecretStr(str(x)) for k, x in _strip_prefix(sink, "delta.storage.").items()},
        ),
        jsonl=JsonlSinkSettings(path=sink.get("jsonl.path")),
    )
    fmt = FormatSettings.model_validate(_strip_prefix(server, "debezium.format."))
    # A `tidemark.*` key without a default (the Airflow ones) is None when the file does not set it.
    tidemark = dict.fromkeys(_TIDEMARK_KEYS) | _strip_prefix(server, "tidemark.")
    runtime = RuntimeSettings.model_validate(
        {k: x for k, x in tidemark.items() if not k.startswith("spark.conf.")}
        | {"spark_conf": {k: str(x) for k, x in _strip_prefix(tidemark, "spark.conf.").items()}}
    )
    origin = ConfigOrigin(
        path, v.raw, v.source, v.server, v.source_text, v.full_names, v.server_shape, v.warnings, v.sanitize
    )
    return ConnectorConfig(
        source.name or source.topic_prefix, v.connector, source, sinks, fmt, runtime, origin
    )


_TIDEMARK_KEYS = tuple(k.removeprefix("tidemark.") for k in SERVER_PROPERTIES if k.startswith("tidemark."))


def _strip_prefix(values: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix) :]: x for k, x in values.items() if k.startswith(prefix) and len(k) > len(prefix)}


def column_rules(source: Mapping[str, Any], connector: str) -> tuple[ColumnRule, ...]:
    """Column masks, hashes and truncations (the `column.mask.*` / `column.truncate.*` families),
    in configuration order."""
    rules: list[ColumnRule] = []
    for key, value in source.items():
        fam = next(
            (f for f in PREFIX_FAMILIES if connector in f.connectors and f.pattern.fullmatch(key)), None
        )
        if fam is None or fam.kind not in ("mask", "hash", "hash_v2", "truncate"):
            continue
        m = fam.pattern.fullmatch(key)
        assert m is not None
        pats = tuple(compile_regex(p) for p in value)
        if fam.kind in ("mask", "truncate"):
            rules.append(ColumnRule(fam.kind, pats, length=int(m.group(1))))
        else:
            rules.append(ColumnRule(fam.kind, pats, algorithm=m.group(1), salt=m.group(2)))
    return tuple(rules)
