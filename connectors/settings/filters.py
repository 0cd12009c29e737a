"""Table/column selection and column transforms shared by every connector.

Identifiers are matched the way Debezium matches them: comma-separated regular expressions,
anchored at both ends, case-insensitive; a `\\,` inside a pattern is a literal comma.
PostgreSQL names tables `schema.table` and columns `schema.table.column`; MySQL uses the
database in place of the schema.
"""

from __future__ import annotations

import hashlib
import logging
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from connectors.api import ConfigError
from connectors.settings.catalog import HASH_ALGORITHMS
from connectors.settings.model import MySqlSettings, PostgresSettings, SourceSettings
from connectors.settings.values import compile_regex

log = logging.getLogger(__name__)

Pattern = re.Pattern[str]


def compile_list(patterns: Iterable[str]) -> list[Pattern]:
    """A regex-list property's patterns (already split and checked by the configuration),
    compiled anchored and case-insensitive as Debezium matches them."""
    return [compile_regex(p) for p in patterns]


def _matches(patterns: list[Pattern], name: str) -> bool:
    return any(p.fullmatch(name) for p in patterns)


class NameFilter:
    """Include/exclude pair: with an include list only matches pass, with an exclude list all
    but matches pass, with neither everything passes."""

    def __init__(self, include: list[Pattern], exclude: list[Pattern]) -> None:
        self.include, self.exclude = include, exclude

    def __call__(self, name: str) -> bool:
        if self.include:
            return _matches(self.include, name)
        if self.exclude:
            return not _matches(self.exclude, name)
        return True


PG_SYSTEM_SCHEMAS = frozenset({"pg_catalog", "information_schema", "pg_toast", "pg_internal"})
MYSQL_SYSTEM_DBS = frozenset({"mysql", "sys", "performance_schema", "information_schema"})


@dataclass
class TableFilters:
    """Which tables and columns are captured. `namespace` is the PG schema or the MySQL db."""

    namespace: NameFilter
    table: NameFilter
    column: NameFilter
    system_namespaces: frozenset[str] = frozenset()
    _cache: dict[tuple[str, str], bool] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, s: SourceSettings) -> TableFilters:
        """The filters of a connector's settings: schemas (PostgreSQL) or databases (MySQL),
        tables and columns."""
        if isinstance(s, PostgresSettings):
            namespace = NameFilter(compile_list(s.schema_include_list), compile_list(s.schema_exclude_list))
            system = PG_SYSTEM_SCHEMAS
        else:
            assert isinstance(s, MySqlSettings)
            namespace = NameFilter(
                compile_list(s.database_include_list), compile_list(s.database_exclude_list)
            )
            system = MYSQL_SYSTEM_DBS if s.table_ignore_builtin else frozenset()
        return cls(
            namespace,
            NameFilter(compile_list(s.table_include_list), compile_list(s.table_exclude_list)),
            NameFilter(compile_list(s.column_include_list), compile_list(s.column_exclude_list)),
            system,
        )

    def captures(self, namespace: str, table: str) -> bool:
        key = (namespace, table)
        hit = self._cache.get(key)
        if hit is None:
            hit = (
                namespace not in self.system_namespaces
                and self.namespace(namespace)
                and self.table(f"{namespace}.{table}")
            )
            self._cache[key] = hit
        return hit

    def captures_column(self, namespace: str, table: str, column: str) -> bool:
        return self.column(f"{namespace}.{table}.{column}")


# --------------------------------------------------------------------------- key columns
def parse_key_columns(value: str | None, key: str = "message.key.columns") -> list[tuple[Pattern, list[str]]]:
    """`message.key.columns`: `<table regex>:<col>,<col>;<table regex>:<col>`. `key` names the
    property in errors (config validation passes the full name)."""
    out: list[tuple[Pattern, list[str]]] = []
    for part in (value or "").split(";"):
        part = part.strip()
        if not part:
            continue
        table, sep, cols = part.rpartition(":")
        names = [c.strip() for c in cols.split(",") if c.strip()]
        if not sep or not table or not names:
            raise ConfigError(
                f"{key}: cannot read {part!r}",
                "use <schema>.<table>:<column>[,<column>...] entries separated by ';'",
            )
        try:
            out.append((re.compile(table, re.IGNORECASE), names))
        except re.error as e:
            raise ConfigError(f"{key}: invalid regular expression {table!r}: {e}") from None
    return out


# --------------------------------------------------------------------------- column transforms
ValueFn = Callable[[Any], Any]


@dataclass
class ColumnRules:
    """Column masking/truncation/hashing and key overrides, parsed once from the config."""

    truncate: list[tuple[int, list[Pattern]]]
    mask: list[tuple[int, list[Pattern]]]
    hash: list[tuple[str, bytes, bool, list[Pattern]]]  # (algorithm, salt, v2, patterns)
    key_columns: list[tuple[Pattern, list[str]]]
    propagate_columns: list[Pattern]
    propagate_types: list[Pattern]

    @classmethod
    def from_settings(cls, s: SourceSettings) -> ColumnRules:
        trunc, mask, hashes = [], [], []
        for rule in s.column_rules:
            pats = list(rule.patterns)
            if rule.kind == "truncate":
                trunc.append((rule.length or 0, pats))
            elif rule.kind == "mask":
                mask.append((rule.length or 0, pats))
            else:
                alg = hash_algorithm(rule.algorithm or "", f"column.mask.hash.{rule.algorithm}")
                hashes.append((alg, (rule.salt or "").encode(), rule.kind == "hash_v2", pats))
        return cls(
            trunc,
            mask,
            hashes,
            parse_key_columns(s.message_key_columns),
            compile_list(s.column_propagate_source_type),
            compile_list(s.datatype_propagate_source_type),
        )

    def key_override(self, table_id: str) -> list[str] | None:
        for pattern, cols in self.key_columns:
            if pattern.fullmatch(table_id):
                return cols
        return None

    def first_mapper(self, column_id: str, type_name: str) -> tuple[Any, ...] | None:
        """The one column mapper that applies to a column, as Debezium's ColumnMappers.mapperFor:
        the first matching rule in its registration order — truncate, mask, column then datatype
        source-type propagation, hash v1, hash v2 — and no other. `("truncate", n)`,
        `("mask", n)`, `("propagate",)` or `("hash", algorithm, salt, v2)`."""
        for n, pats in self.truncate:
            if _matches(pats, column_id):
                return ("truncate", n)
        for n, pats in self.mask:
            if _matches(pats, column_id):
                return ("mask", n)
        if self.propagates(column_id, type_name):
            return ("propagate",)
        for v2 in (False, True):
            for alg, salt, is_v2, pats in self.hash:
                if is_v2 is v2 and _matches(pats, column_id):
                    return ("hash", alg, salt, v2)
        return None

    def mapper_transform(self, mapper: tuple[Any, ...], length: int | None) -> ValueFn | None:
        """The value function of a `first_mapper` result (None for propagation)."""
        kind = mapper[0]
        if kind == "truncate":
            n = mapper[1]
            return lambda v: v[:n] if isinstance(v, str) else v
        if kind == "mask":
            stars = "*" * mapper[1]
            return lambda v: stars
        if kind == "hash":
            return _hasher(mapper[1], mapper[2], mapper[3], length)
        return None

    def propagates(self, column_id: str, type_name: str) -> bool:
        return _matches(self.propagate_columns, column_id) or _matches(self.propagate_types, type_name)


def hash_algorithm(name: str, key: str) -> str:
    """The hashlib name of a Java MessageDigest name in `column.mask.hash.<name>.with.salt.<salt>`."""
    alg = HASH_ALGORITHMS.get(name.upper())
    if alg is None:
        why = "Python's hashlib has no MD2" if name.upper() == "MD2" else "not a known MessageDigest name"
        raise ConfigError(
            f"{key}: unknown hash algorithm '{name}' ({why})", "use one of " + ", ".join(HASH_ALGORITHMS)
        )
    return alg


def _java_serialized_string(s: str) -> bytes:
    # Debezium's v1 hashing digests Java's ObjectOutputStream form of the value; for a String
    # that is the stream header, TC_STRING and the modified-UTF-8 text (reproduced here).
    data = s.encode("utf-8", "surrogatepass").replace(b"\x00", b"\xc0\x80")
    return b"\xac\xed\x00\x05\x74" + struct.pack(">H", len(data)) + data


def _hasher(alg: str, salt: bytes, v2: bool, length: int | None) -> ValueFn:
    def fn(v: Any) -> Any:
        if v is None:
            return None
        text = v if isinstance(v, str) else str(v)
        h = hashlib.new(alg)
        h.update(salt)
        h.update(text.encode() if v2 else _java_serialized_string(text))
        out = h.hexdigest()
        return out[:length] if length and length < len(out) else out

    return fn
