"""Load and validate a connector configuration file.

`load(path, overrides)` reads a Java `.properties` file or a YAML file, in either of two shapes:

* **Debezium Server**: connector properties under `debezium.source.*`, sinks under
  `debezium.sink.*`, the record format under `debezium.format.*`, Tidemark's own keys under
  `tidemark.*` (and `debezium.transforms*` / `debezium.predicates*`).
* **plain connector properties**: connector keys at the top level (as for Kafka Connect), plus the
  same `debezium.sink.*`, `debezium.format.*` and `tidemark.*` keys.

A file is Debezium Server shaped when any key starts with `debezium.source.`.

Everything is validated before anything connects; all problems are collected and reported in one
`connectors.api.ConfigError`. Deprecated names are normalised to the current ones, keys Debezium
knows but Tidemark has no use for are accepted with one warning. Secrets never appear in logs,
`repr()` or `str()`.
"""

from __future__ import annotations

import difflib
import logging
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connectors.api import ConfigError
from connectors.settings.catalog import (
    ALIASES,
    AVAILABLE_SNAPSHOT_MODES,
    CATALOG,
    CONNECTOR_CLASSES,
    DEFAULT_ONLY,
    DEFAULT_SNAPSHOT_MODE,
    HASH_ALGORITHMS,
    HINTS,
    IGNORED,
    INCLUDE_EXCLUDE_PAIRS,
    NO_EFFECT,
    NOT_YET,
    PREFIX_FAMILIES,
    REQUIRED,
    SANITIZE_PATTERN,
    SERVER_PREFIXES,
    SERVER_PROPERTIES,
    SINK_IGNORED,
    SNAPSHOT_MODE_HINT,
    SUPPORTED_CONVERTER_TYPES,
    UNSUPPORTED_PLUGINS,
    VALUE_ALIASES,
    Connector,
    PrefixFamily,
    Prop,
    PropType,
)
from connectors.settings.filters import hash_algorithm, parse_key_columns

log = logging.getLogger(__name__)

__all__ = [
    "ColumnRule",
    "ConfigError",
    "ConnectorConfig",
    "load",
    "parse_properties",
    "flatten_yaml",
    "split_statements",
]

MASK = "********"
SOURCE_PREFIX = "debezium.source."
SINK_PREFIX = "debezium.sink."
_SERVER_TOP = ("debezium.", "tidemark.", "quarkus.")
_JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
_TOPIC_PREFIX_RE = re.compile(r"[A-Za-z0-9._-]+")


# =========================================================================== file formats
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", text[i + 2 : i + 6]):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _trailing_backslashes(line: str) -> int:
    return len(line) - len(line.rstrip("\\"))


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java `.properties` text like `java.util.Properties.load`: `#`/`!` comment lines,
    `key=value`, `key: value` and `key value`, trailing-backslash line continuation, and the
    escapes `\\t \\n \\r \\f \\uXXXX \\<char>`. A repeated key keeps the last value."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _trailing_backslashes(line) % 2 == 1:
            line = line[:-1]
            if i >= len(lines):
                break
            line += lines[i].lstrip(" \t\f")
            i += 1
        # key ends at the first unescaped '=', ':' or whitespace
        j = 0
        while j < len(line):
            ch = line[j]
            if ch == "\\":
                j += 2
                continue
            if ch in "=: \t\f":
                break
            j += 1
        key, rest = line[:j], line[j:]
        rest = rest.lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        out[_unescape(key)] = _unescape(rest)
    return out


def _scalar_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def flatten_yaml(data: Any, prefix: str = "") -> dict[str, str]:
    """Flatten nested mappings to dotted keys; lists become comma-joined text, booleans
    `true`/`false`, null the empty string."""
    out: dict[str, str] = {}
    if not isinstance(data, Mapping):
        if prefix:
            out[prefix] = _scalar_text(data)
            return out
        raise ConfigError("a YAML configuration must be a mapping of property names to values")
    for k, v in data.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            out.update(flatten_yaml(v, key))
        elif isinstance(v, list | tuple):
            out[key] = ",".join(_scalar_text(x) for x in v)
        else:
            out[key] = _scalar_text(v)
    return out


def _read(path: Path) -> dict[str, str]:
    is_yaml = path.suffix.lower() in (".yaml", ".yml")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read configuration file {path}: {exc.strerror or exc}",
            "check the path given with --config",
        ) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if is_yaml:
            raise ConfigError(
                f"{path}: not UTF-8 text (byte {exc.start})", "save the file as UTF-8"
            ) from None
        # Java reads .properties files as ISO-8859-1 (Properties.load(InputStream)); UTF-8 is
        # tried first because that is what most editors write today.
        text = data.decode("latin-1")
    if is_yaml:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from None
        return flatten_yaml(data or {})
    return parse_properties(text)


# =========================================================================== value parsing
def split_list(text: str) -> list[str]:
    """Debezium's comma list: items trimmed, empty items dropped, `\\,` is a literal comma."""
    parts = re.split(r"(?<!\\),", text)
    return [p.replace("\\,", ",").strip() for p in parts if p.replace("\\,", ",").strip()]


def split_statements(text: str | None) -> list[str]:
    """`database.initial.statements` as Debezium's JdbcConnection splits it: `;` ends a
    statement, `;;` is a literal semicolon, statements are trimmed and empty ones dropped."""
    out: list[str] = []
    buf: list[str] = []
    i, n = 0, len(text or "")
    while i < n:
        ch = text[i]  # type: ignore[index]
        if ch != ";":
            buf.append(ch)
        elif i + 1 < n and text[i + 1] == ";":  # type: ignore[index]
            buf.append(";")
            i += 1
        else:
            out.append("".join(buf).strip())
            buf = []
        i += 1
    out.append("".join(buf).strip())
    return [s for s in out if s]


def compile_regex(pattern: str) -> re.Pattern[str]:
    """Compile a Debezium filter regex: case-insensitive and anchored at both ends (Debezium
    uses `Matcher.matches()`), so `.match`, `.search` and `.fullmatch` all test the whole name."""
    return re.compile(rf"\A(?:{pattern})\Z", re.IGNORECASE)


def _convert(key: str, prop_type: PropType, choices: tuple[str, ...], text: str, problems: list[str]) -> Any:
    """Typed value of `text`, or None after recording a problem."""
    if prop_type == "int":
        try:
            return int(text.strip())
        except ValueError:
            problems.append(f"{key}={text} is not an integer")
            return None
    if prop_type == "bool":
        low = text.strip().lower()
        if low in ("true", "false"):
            return low == "true"
        problems.append(f"{key}={text} is not a boolean (true or false)")
        return None
    if prop_type == "enum":
        low = text.strip().lower()
        if low in choices:
            return low
        problems.append(f"{key}={text} is not one of {', '.join(choices)}")
        return None
    if prop_type == "list":
        items = split_list(text)
        if choices:
            bad = [x for x in items if x.lower() not in choices]
            if bad:
                problems.append(f"{key}={text}: {', '.join(bad)} is not one of {', '.join(choices)}")
                return None
            return [x.lower() for x in items]
        return items
    if prop_type == "regex-list":
        items = split_list(text)
        ok = True
        for item in items:
            try:
                compile_regex(item)
            except re.error as exc:
                problems.append(f"{key}: invalid regular expression {item!r}: {exc}")
                ok = False
        return items if ok else None
    return text.strip() if prop_type == "str" else text


# =========================================================================== the config object
@dataclass(frozen=True, slots=True)
class ColumnRule:
    """One column transform: `column.mask.with.<length>.chars`, `column.mask.hash[.v2].<alg>.with.salt.<salt>`
    or `column.truncate.to.<length>.chars`. `patterns` match `schema.table.column` / `db.table.column`."""

    kind: str  # "mask" | "hash" | "hash_v2" | "truncate"
    patterns: tuple[re.Pattern[str], ...]
    length: int | None = None
    algorithm: str | None = None  # Java MessageDigest name, e.g. SHA-256
    salt: str | None = None

    @property
    def hashlib_name(self) -> str | None:
        return HASH_ALGORITHMS.get(self.algorithm.upper()) if self.algorithm else None


def is_secret(key: str, pattern: re.Pattern[str] | None = None) -> bool:
    """True when the key's value must never be shown (Debezium's sanitize pattern)."""
    return bool(SANITIZE_PATTERN.fullmatch(key) or (pattern is not None and pattern.fullmatch(key)))


class ConnectorConfig:
    """A validated connector configuration.

    Attributes:
        source: connector properties by current Debezium name, defaults filled, typed values
            (int/bool/str/list[str]; regex lists are list[str], see `regexes()`).
        source_text: the same keys with their configured text (before typing), without defaults.
        name: connector name (`name`, defaulting to `topic.prefix`).
        connector: "postgres", "mysql" or "mariadb".
        topic_prefix: `topic.prefix`.
        sink_types: list of "kafka", "delta", "jsonl".
        sink: `debezium.sink.*` keys with the prefix stripped (`type` is a list).
        warehouse: `tidemark.warehouse` as a Path.
        key_schemas_enable / value_schemas_enable: JSON converter `schemas.enable`.
        tidemark: all `tidemark.*` keys (prefix stripped, text).
        warnings: warnings already emitted through logging.
        raw: the flat key → text mapping as read (overrides applied); contains secrets.
        path: the file it was loaded from (None when built from a mapping).
    """

    def __init__(
        self,
        *,
        source: dict[str, Any],
        source_text: dict[str, str],
        connector: Connector,
        sink: dict[str, Any],
        warehouse: Path,
        key_schemas_enable: bool,
        value_schemas_enable: bool,
        tidemark: dict[str, str],
        warnings: list[str],
        raw: dict[str, str],
        path: Path | None,
        sanitize: re.Pattern[str] | None = None,
    ) -> None:
        self.source = source
        self.source_text = source_text
        self.connector: Connector = connector
        self.topic_prefix: str = source["topic.prefix"]
        self.name: str = source.get("name") or self.topic_prefix
        self.sink = sink
        self.sink_types: list[str] = list(sink.get("type") or [])
        self.warehouse = warehouse
        self.key_schemas_enable = key_schemas_enable
        self.value_schemas_enable = value_schemas_enable
        self.tidemark = tidemark
        self.warnings = warnings
        self.raw = raw
        self.path = path
        self._sanitize = sanitize
        self._regex_cache: dict[str, list[re.Pattern[str]]] = {}

    # ------------------------------------------------------------------ helpers
    def regexes(self, key: str) -> list[re.Pattern[str]]:
        """Compiled, anchored, case-insensitive patterns of a regex-list property ([] when unset)."""
        if key not in self._regex_cache:
            value = self.source.get(key) or []
            if isinstance(value, str):
                value = split_list(value)
            self._regex_cache[key] = [compile_regex(p) for p in value]
        return self._regex_cache[key]

    def prefix_props(self, prefix: str, *, strip: bool = False) -> dict[str, Any]:
        """Connector properties whose name starts with `prefix` (e.g. `column.mask.with.`)."""
        return {(k[len(prefix) :] if strip else k): v for k, v in self.source.items() if k.startswith(prefix)}

    def column_rules(self) -> list[ColumnRule]:
        """Column masks, hashes and truncations, in configuration order."""
        rules: list[ColumnRule] = []
        for key, value in self.source.items():
            fam = _family(key, self.connector)
            if fam is None or fam.kind not in ("mask", "hash", "hash_v2", "truncate"):
                continue
            m = fam.pattern.fullmatch(key)
            assert m is not None
            pats = tuple(compile_regex(p) for p in value)
            if fam.kind in ("mask", "truncate"):
                rules.append(ColumnRule(fam.kind, pats, length=int(m.group(1))))
            else:
                rules.append(ColumnRule(fam.kind, pats, algorithm=m.group(1), salt=m.group(2)))
        return rules

    def column_masks(self) -> list[ColumnRule]:
        return [r for r in self.column_rules() if r.kind != "truncate"]

    def column_truncations(self) -> list[ColumnRule]:
        return [r for r in self.column_rules() if r.kind == "truncate"]

    def select_overrides(self) -> dict[str, str]:
        """`snapshot.select.statement.overrides.<table>` → SELECT, keyed by `<db|schema>.<table>`."""
        return self.prefix_props("snapshot.select.statement.overrides.", strip=True)

    def is_secret(self, key: str) -> bool:
        return is_secret(key, self._sanitize)

    def redacted(self) -> dict[str, str]:
        """The configuration as read (flat key → text) with secret values replaced by `********`."""
        return {k: (MASK if self.is_secret(k) and v != "" else v) for k, v in self.raw.items()}

    def redacted_source(self) -> dict[str, Any]:
        """`source` with secret values replaced by `********`."""
        return {k: (MASK if self.is_secret(k) and v not in (None, "") else v) for k, v in self.source.items()}

    def __repr__(self) -> str:
        where = f" from {self.path}" if self.path else ""
        return (
            f"ConnectorConfig(name={self.name!r}, connector={self.connector!r}, topic_prefix={self.topic_prefix!r}, "
            f"sink_types={self.sink_types!r}{where})"
        )

    __str__ = __repr__


# =========================================================================== validation
def _family(key: str, connector: str) -> PrefixFamily | None:
    for fam in PREFIX_FAMILIES:
        if connector in fam.connectors and fam.pattern.fullmatch(key):
            return fam
    return None


def _ignored_reason(key: str, patterns: Iterable[tuple[re.Pattern[str], str]]) -> str | None:
    for pat, reason in patterns:
        if pat.fullmatch(key):
            return reason
    return None


def _suggest(key: str, candidates: Iterable[str]) -> str:
    hint = HINTS.get(key)
    if hint:
        return f"; did you mean '{hint}'?"
    names = list(candidates)
    if SOURCE_PREFIX + key in names:  # a connector key at the top of a Debezium Server file
        return f"; did you mean '{SOURCE_PREFIX + key}'?"
    scored = sorted(
        ((difflib.SequenceMatcher(None, key, n).ratio(), n) for n in set(names)), key=lambda x: (-x[0], x[1])
    )
    near = [n for r, n in scored[:3] if r >= 0.75 and r >= scored[0][0] - 0.05]
    if not near:
        return ""
    return "; did you mean " + " or ".join(f"'{n}'" for n in near) + "?"


def _detect_connector(value: str | None, problems: list[str]) -> Connector | None:
    if value is None or not value.strip():
        problems.append(
            "missing required property 'connector.class' (io.debezium.connector.postgresql.PostgresConnector, "
            "io.debezium.connector.mysql.MySqlConnector, io.debezium.connector.mariadb.MariaDbConnector, "
            "or postgres / mysql / mariadb)"
        )
        return None
    conn = CONNECTOR_CLASSES.get(value.strip().lower())
    if conn is None:
        problems.append(
            f"connector.class={value} is not supported; use io.debezium.connector.postgresql.PostgresConnector "
            "(postgres), io.debezium.connector.mysql.MySqlConnector (mysql) or "
            "io.debezium.connector.mariadb.MariaDbConnector (mariadb)"
        )
    return conn


def load(path: str | Path, overrides: Mapping[str, Any] | None = None) -> ConnectorConfig:
    """Read, normalise and validate a configuration file. Raises `ConfigError` listing every problem.

    `overrides` are flat keys applied on top of the file (values may be str/int/bool/list). In a
    Debezium Server shaped file an override key that does not start with `debezium.`, `tidemark.`
    or `quarkus.` is taken as a connector property (`debezium.source.` is prepended).
    """
    p = Path(path)
    flat = _read(p)
    return from_mapping(flat, overrides, path=p)


def from_mapping(
    flat: Mapping[str, Any], overrides: Mapping[str, Any] | None = None, *, path: Path | None = None
) -> ConnectorConfig:
    """Validate an already-flat mapping (the same rules as `load`)."""
    raw: dict[str, str] = {}
    for k, v in flat.items():
        raw[str(k).strip()] = (
            ",".join(_scalar_text(x) for x in v) if isinstance(v, list | tuple) else _scalar_text(v)
        )
    server_shape = any(k.startswith(SOURCE_PREFIX) for k in raw)
    for k, v in (overrides or {}).items():
        key = str(k).strip()
        if server_shape and not key.startswith(_SERVER_TOP):
            key = SOURCE_PREFIX + key
        raw[key] = ",".join(_scalar_text(x) for x in v) if isinstance(v, list | tuple) else _scalar_text(v)
    return _build(raw, server_shape, path)


def _build(raw: dict[str, str], server_shape: bool, path: Path | None) -> ConnectorConfig:
    problems: list[str] = []
    warnings: list[str] = []
    where = f" in {path}" if path else ""

    # ---- split the flat keys into connector / server / tidemark keys
    conn_raw: dict[str, tuple[str, str]] = {}  # connector key → (original full key, text)
    server_raw: dict[str, str] = {}
    unknown_top: list[str] = []
    for key, text in raw.items():
        if server_shape:
            if key.startswith(SOURCE_PREFIX):
                conn_raw[key[len(SOURCE_PREFIX) :]] = (key, text)
            elif key.startswith(("debezium.transforms", "debezium.predicates")):
                conn_raw[key[len("debezium.") :]] = (key, text)
            elif key.startswith(("debezium.", "tidemark.", "quarkus.")):
                server_raw[key] = text
            else:
                unknown_top.append(key)
        elif key.startswith(("debezium.sink.", "debezium.format.", "tidemark.")):
            server_raw[key] = text
        else:
            conn_raw[key] = (key, text)

    def full(ck: str) -> str:
        return conn_raw[ck][0] if ck in conn_raw else (SOURCE_PREFIX + ck if server_shape else ck)

    connector = _detect_connector(conn_raw.get("connector.class", ("", None))[1], problems)  # type: ignore[arg-type]
    catalog: dict[str, Prop] = CATALOG[connector] if connector else {}
    conn_name: str = connector or "postgres"

    # ---- aliases
    alias_used: dict[str, str] = {}
    for old in [k for k in conn_raw if k in ALIASES]:
        new = ALIASES[old]
        if new not in catalog and connector is not None:
            continue  # e.g. database.whitelist on PostgreSQL: reported as unknown below
        if new in conn_raw:
            problems.append(
                f"both '{full(old)}' and its current name '{full(new)}' are set; keep only '{full(new)}'"
            )
            del conn_raw[old]
            continue
        orig, text = conn_raw.pop(old)
        conn_raw[new] = (orig, text)
        alias_used[orig] = SOURCE_PREFIX + new if server_shape else new
    for orig, new in alias_used.items():
        warnings.append(f"property '{orig}' is deprecated; use '{new}' instead")

    # ---- classify every connector key
    source: dict[str, Any] = {}
    source_text: dict[str, str] = {}
    ignored: dict[str, list[str]] = {}
    converter_names = set(split_list(conn_raw["converters"][1])) if "converters" in conn_raw else set()
    unsupported_converters = {
        n
        for n in converter_names
        if conn_raw.get(f"{n}.type", ("", ""))[1].strip() not in SUPPORTED_CONVERTER_TYPES
    }
    all_names = list(catalog) + list(ALIASES)
    if server_shape:
        candidates = [SOURCE_PREFIX + n for n in all_names] + list(SERVER_PROPERTIES)
    else:
        candidates = all_names + list(SERVER_PROPERTIES)

    for ck, (orig, text) in conn_raw.items():
        prop = catalog.get(ck)
        if ck == "converters" and unsupported_converters == converter_names and converter_names:
            ignored.setdefault(
                "custom converters are Java classes; Tidemark implements none of the configured ones", []
            ).append(orig)
            continue
        if prop is None and ck.split(".", 1)[0] in converter_names and "." in ck:
            if ck.split(".", 1)[0] in unsupported_converters:
                ignored.setdefault(
                    "custom converters are Java classes; Tidemark implements none of the configured ones", []
                ).append(orig)
            else:
                source[ck] = text
                source_text[ck] = text
            continue
        if prop is not None:
            if text.strip() == "" and prop.type != "password":
                continue  # empty means unset, as in Kafka Connect
            value_text = text
            if ck == "plugin.name" and text.strip().lower() != "pgoutput":
                problems.append(
                    f"{orig}={text} is not supported: Tidemark supports only pgoutput, the logical decoding "
                    "plug-in built into PostgreSQL 10+"
                    + (
                        " (decoderbufs and wal2json need server extensions)"
                        if text.strip().lower() in UNSUPPORTED_PLUGINS
                        else ""
                    )
                )
                continue
            if prop.type == "enum":
                alias_vals = VALUE_ALIASES.get(ck, {})
                low = text.strip().lower()
                if low in alias_vals:
                    value_text = alias_vals[low]
                    warnings.append(f"{orig}={text} is deprecated; use {orig}={value_text} instead")
            value = _convert(orig, prop.type, prop.choices, value_text, problems)
            if value is not None:
                source[ck] = value
                source_text[ck] = text
            continue
        fam = _family(ck, conn_name)
        if fam is not None:
            value = _convert(orig, fam.type, (), text, problems)
            if value is not None:
                source[ck] = value
                source_text[ck] = text
            continue
        reason = _ignored_reason(ck, IGNORED)
        if reason is not None:
            ignored.setdefault(reason, []).append(orig)
            if re.fullmatch(r"(key|value)\.converter", ck) and text.strip() not in ("", _JSON_CONVERTER):
                problems.append(
                    f"{orig}={text} is not supported; Tidemark writes the Kafka Connect JSON format "
                    f"({_JSON_CONVERTER}) only"
                )
            continue
        if connector is None:
            continue  # cannot judge keys without knowing the connector
        problems.append(f"unknown property '{orig}'{_suggest(orig, candidates)}")

    for key in unknown_top:
        problems.append(f"unknown property '{key}'{_suggest(key, candidates)}")

    not_yet = _support(source, source_text, catalog, conn_name, full, ignored, problems)

    # ---- server / sink / format / tidemark keys
    server: dict[str, Any] = {}
    for key, text in server_raw.items():
        prop = SERVER_PROPERTIES.get(key)
        if prop is not None:
            if text.strip() == "":
                continue
            value = _convert(key, prop.type, prop.choices, text, problems)
            if value is not None:
                server[key] = value
            continue
        reason = _ignored_reason(key, SINK_IGNORED) or _ignored_reason(key, IGNORED)
        if reason is None and key.startswith(("quarkus.", "debezium.api.", "debezium.server.")):
            reason = "Debezium Server runtime settings do not apply"
        if reason is not None:
            ignored.setdefault(reason, []).append(key)
            continue
        pfx = next((pt for pfx, pt in SERVER_PREFIXES if key.startswith(pfx) and len(key) > len(pfx)), None)
        if pfx is not None:
            server[key] = text
            continue
        problems.append(f"unknown property '{key}'{_suggest(key, candidates)}")

    # key/value.converter.schemas.enable in plain shape mean the same as debezium.format.*.schemas.enable
    for side in ("key", "value"):
        ck = f"{side}.converter.schemas.enable"
        fk = f"debezium.format.{side}.schemas.enable"
        if ck in conn_raw and fk not in server:
            orig, text = conn_raw[ck]
            val = _convert(orig, "bool", (), text, problems)
            if val is not None:
                server[fk] = val
            ignored_list = next((v for v in ignored.values() if orig in v), None)
            if ignored_list is not None:
                ignored_list.remove(orig)
    ignored = {r: ks for r, ks in ignored.items() if ks}

    if connector is None:
        raise ConfigError(_format(problems, where))

    # ---- defaults
    for name, prop in catalog.items():
        if name not in source and prop.default is not None:
            source[name] = list(prop.default) if isinstance(prop.default, list) else prop.default
    if "database.server.id" in catalog and "database.server.id" not in source:
        source["database.server.id"] = 5400 + random.randrange(1000)  # as Debezium's randomServerId()
    for key, prop in SERVER_PROPERTIES.items():
        if key not in server and prop.default is not None:
            server[key] = prop.default

    # ---- required keys
    for name in REQUIRED[connector]:
        if source.get(name) in (None, ""):
            problems.append(f"missing required property '{full(name)}'")
    if not server.get("debezium.sink.type") and not server_raw.get("debezium.sink.type", "").strip():
        # (set but invalid: already reported with the valid values)
        problems.append(
            f"missing required property 'debezium.sink.type' (a comma list of {', '.join(('kafka', 'delta', 'jsonl'))})"
        )
    sink_types: list[str] = list(server.get("debezium.sink.type") or [])
    if "jsonl" in sink_types and not server.get("debezium.sink.jsonl.path"):
        problems.append(
            "missing required property 'debezium.sink.jsonl.path' (a file, or - for stdout) for the jsonl sink"
        )
    if "kafka" in sink_types and not server.get("debezium.sink.kafka.producer.bootstrap.servers"):
        problems.append(
            "missing required property 'debezium.sink.kafka.producer.bootstrap.servers' for the kafka sink"
        )

    # ---- cross-property rules
    for inc, exc in INCLUDE_EXCLUDE_PAIRS:
        if source.get(inc) and source.get(exc):
            problems.append(
                f"'{full(inc)}' and '{full(exc)}' are both set; Debezium refuses this, use one of them"
            )
    topic_prefix = source.get("topic.prefix")
    if topic_prefix and not _TOPIC_PREFIX_RE.fullmatch(topic_prefix):
        problems.append(
            f"{full('topic.prefix')}={topic_prefix} may contain only letters, digits, '.', '_' and '-'"
        )
    mode = source.get("snapshot.mode")
    if "snapshot.mode" not in source_text and mode not in AVAILABLE_SNAPSHOT_MODES[connector]:
        fallback = DEFAULT_SNAPSHOT_MODE[connector]
        warnings.append(
            f"{full('snapshot.mode')} is not set and Debezium's default ({mode}) is not available yet in "
            f"Tidemark; using {fallback}"
        )
        source["snapshot.mode"] = mode = fallback
    if mode is not None and mode not in AVAILABLE_SNAPSHOT_MODES[connector]:
        problems.append(
            f"{full('snapshot.mode')}={mode} is not available yet in Tidemark; {SNAPSHOT_MODE_HINT[connector]}"
        )
    batch, queue = source.get("max.batch.size"), source.get("max.queue.size")
    if isinstance(batch, int) and batch <= 0:
        problems.append(f"{full('max.batch.size')}={batch} must be a positive integer")
    if isinstance(batch, int) and isinstance(queue, int) and queue <= batch:
        problems.append(
            f"{full('max.queue.size')}={queue} must be larger than {full('max.batch.size')}={batch}"
        )
    port = source.get("database.port")
    if isinstance(port, int) and not 0 < port < 65536:
        problems.append(f"{full('database.port')}={port} is not a TCP port (1-65535)")
    for key in list(source):
        fam = _family(key, connector)
        m = fam.pattern.fullmatch(key) if fam is not None else None
        if fam is not None and m and fam.kind in ("hash", "hash_v2"):
            _check(problems, hash_algorithm, m.group(1), full(key))
    ops = source.get("skipped.operations") or []
    if "none" in ops and len(ops) > 1:
        problems.append(
            f"{full('skipped.operations')}={source_text['skipped.operations']}: 'none' cannot be combined "
            "with other operations"
        )
    if source.get("message.key.columns"):
        _check(problems, parse_key_columns, source["message.key.columns"], full("message.key.columns"))

    if problems:
        raise ConfigError(_format(problems, where))

    # ---- warnings: one for all ignored keys, one for the keys of features still to come
    if ignored:
        parts = [f"{', '.join(sorted(keys))} ({reason})" for reason, keys in ignored.items()]
        warnings.append("ignoring properties Tidemark has no use for: " + "; ".join(parts))
    if not_yet:
        parts = [f"{', '.join(sorted(keys))} ({reason})" for reason, keys in not_yet.items()]
        warnings.append("accepted but not used yet: " + "; ".join(parts))
    for w in warnings:
        log.warning("%s", w)

    sanitize: re.Pattern[str] | None = None
    custom = source.get("custom.sanitize.pattern")
    if isinstance(custom, str) and custom:
        try:
            sanitize = re.compile(custom, re.IGNORECASE)
        except re.error:
            sanitize = None
    sink = {k[len(SINK_PREFIX) :]: v for k, v in server.items() if k.startswith(SINK_PREFIX)}
    tidemark = {k[len("tidemark.") :]: str(v) for k, v in server.items() if k.startswith("tidemark.")}
    return ConnectorConfig(
        source=source,
        source_text=source_text,
        connector=connector,
        sink=sink,
        warehouse=Path(str(server["tidemark.warehouse"])),
        key_schemas_enable=bool(server["debezium.format.key.schemas.enable"]),
        value_schemas_enable=bool(server["debezium.format.value.schemas.enable"]),
        tidemark=tidemark,
        warnings=warnings,
        raw=raw,
        path=path,
        sanitize=sanitize,
    )


def _check(problems: list[str], parse: Any, *args: Any) -> None:
    """Run one of the connectors' own parsers now, so that its ConfigError is reported at load."""
    try:
        parse(*args)
    except ConfigError as e:
        problems.append(str(e).replace("\n  hint: ", "; "))


def _support(
    source: dict[str, Any],
    source_text: dict[str, str],
    catalog: Mapping[str, Prop],
    connector: str,
    full: Any,
    ignored: dict[str, list[str]],
    problems: list[str],
) -> dict[str, list[str]]:
    """Sort the connector keys the user set by what Tidemark does with them: keys without effect
    join `ignored`, non-default values of default-only keys are problems; returns the keys of
    features still to come (snapshots, signals, notifications) by reason."""
    not_yet: dict[str, list[str]] = {}
    smt: list[str] = []
    for ck, text in source_text.items():
        fam = _family(ck, connector)
        if fam is not None and fam.kind == "unsupported":
            smt.append(full(ck))
            continue
        reason = _ignored_reason(ck, NO_EFFECT) if ck in catalog else None
        if reason is not None:
            ignored.setdefault(reason, []).append(full(ck))
            continue
        rule = DEFAULT_ONLY.get(ck)
        if rule is not None and ck in catalog:
            default = catalog[ck].default
            if source[ck] != default and source[ck] not in rule.accepted:
                keep = "remove it" if default is None else f"remove it or set {_scalar_text(default)}"
                problems.append(f"{full(ck)}={text.strip()}: not supported yet: {rule.missing}; {keep}")
            continue
        reason = _ignored_reason(ck, NOT_YET)
        if reason is not None and (ck in catalog or fam is not None):
            not_yet.setdefault(reason, []).append(full(ck))
    if smt:
        problems.append(
            f"{', '.join(smt)}: not supported yet: Kafka Connect single message transforms and predicates "
            "(Java classes); remove these keys and transform the records downstream"
        )
    return not_yet


def _format(problems: list[str], where: str) -> str:
    seen: list[str] = []
    for p in problems:
        if p not in seen:
            seen.append(p)
    noun = "problem" if len(seen) == 1 else "problems"
    return f"invalid configuration{where} ({len(seen)} {noun}):\n" + "\n".join(f"  - {p}" for p in seen)
