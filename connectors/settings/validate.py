"""Validation of a flat configuration against the catalog: every problem collected into one
`ConfigError`, deprecated names normalised, keys Tidemark has no use for accepted with one
warning, defaults filled. The result is plain typed values; `config` turns them into the frozen
settings objects."""

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
    HINTS,
    IGNORED,
    INCLUDE_EXCLUDE_PAIRS,
    NO_EFFECT,
    PREFIX_FAMILIES,
    REQUIRED,
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
    not_yet_reason,
)
from connectors.settings.files import _scalar_text
from connectors.settings.filters import hash_algorithm, parse_key_columns
from connectors.settings.overrides import OverrideError, parse_override
from connectors.settings.values import _convert, split_list

log = logging.getLogger(__name__)

SOURCE_PREFIX = "debezium.source."


SINK_PREFIX = "debezium.sink."


_SERVER_TOP = ("debezium.", "tidemark.", "quarkus.")


_JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"


_TOPIC_PREFIX_RE = re.compile(r"[A-Za-z0-9._-]+")


# =========================================================================== validation
_OVERRIDE = "snapshot.select.statement.overrides."


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


@dataclass(frozen=True)
class Validated:
    """A configuration that passed validation: typed values by property name, defaults filled."""

    connector: Connector
    source: dict[str, Any]  # connector properties (current names) and parameterised families
    source_text: dict[str, str]  # the connector keys the file set, as written
    server: dict[str, Any]  # debezium.sink.* / debezium.format.* / tidemark.* (full names)
    warnings: tuple[str, ...]
    raw: dict[str, str]  # the flat file as read, overrides applied (contains secrets)
    server_shape: bool
    full_names: dict[str, str]  # connector key → the name to show (`debezium.source.` + key in that shape)
    sanitize: re.Pattern[str] | None


def _read_only_problems(
    connector: str, source: Mapping[str, Any], source_text: Mapping[str, str], full: Any
) -> list[str]:
    """read.only=true: incremental snapshots must not write to the source database."""
    ro = f"{full('read.only')}=true"
    if connector == "postgres":
        return [
            f"{ro} is not available for PostgreSQL in Tidemark (read-only incremental snapshots use "
            "MySQL/MariaDB GTIDs); remove it"
        ]
    out = []
    channels = [str(c).strip().lower() for c in source.get("signal.enabled.channels") or []]
    # Debezium's default channel list is `source`: it only counts when a signal table is named.
    if "source" in channels and (
        "signal.enabled.channels" in source_text or source.get("signal.data.collection")
    ):
        out.append(
            f"{ro} cannot use the source signal channel ({full('signal.enabled.channels')}): reading "
            "signals from the database means writing them there; use delta, file or kafka"
        )
    if source.get("heartbeat.action.query"):
        out.append(
            f"{ro} forbids {full('heartbeat.action.query')}: it runs a statement on the source database"
        )
    return out


def validate(raw: dict[str, str], server_shape: bool, path: Path | None) -> Validated:
    """Validate a flat configuration; raise one `ConfigError` listing every problem."""
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

    connector = _detect_connector(conn_raw.get("connector.class", ("", ""))[1], problems)
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
                alias_vals = VALUE_ALIASES.get(connector or "postgres", {}).get(ck, {})
                low = text.strip().lower()
                if low in alias_vals:
                    value_text = alias_vals[low]
                    warnings.append(f"{orig}={text} is deprecated; use {orig}={value_text} instead")
            value = _at_least(
                orig, prop, _convert(orig, prop.type, prop.choices, value_text, problems), problems
            )
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
            value = _at_least(key, prop, _convert(key, prop.type, prop.choices, text, problems), problems)
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
    if source.get("read.only"):
        problems.extend(_read_only_problems(connector, source, source_text, full))
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
    if mode == "custom":
        problems.append(
            f"{full('snapshot.mode')}=custom is not supported: it loads a Java Snapshotter class; "
            f"{SNAPSHOT_MODE_HINT[connector]}"
        )
    elif mode is not None and mode not in AVAILABLE_SNAPSHOT_MODES[connector]:
        problems.append(
            f"{full('snapshot.mode')}={mode} is not available yet in Tidemark; {SNAPSHOT_MODE_HINT[connector]}"
        )
    if source.get("snapshot.query.mode") == "custom":
        problems.append(
            f"{full('snapshot.query.mode')}=custom is not supported: it loads a Java SnapshotterQuery class; "
            "use select_all (the default), with snapshot.select.statement.overrides.<table> for custom queries"
        )
    locking = source.get("snapshot.locking.mode")
    if locking == "custom" or str(locking).startswith("minimal_percona"):
        what = "a Java SnapshotterLocking class" if locking == "custom" else "Percona Server's backup locks"
        usable = "none or shared" if connector == "postgres" else "minimal, extended or none"
        problems.append(
            f"{full('snapshot.locking.mode')}={locking} is not supported: it needs {what}; use {usable}"
        )
    if server.get("tidemark.incremental.snapshot.reader") == "spark" and source.get("read.only"):
        problems.append(
            f"tidemark.incremental.snapshot.reader=spark cannot be used with {full('read.only')}=true: read-only "
            "snapshots find each chunk's window by GTIDs, one chunk at a time; use reader=thread"
        )
    if connector == "postgres" and server.get("tidemark.snapshot.mysql.method") == "watermarks":
        problems.append(
            "tidemark.snapshot.mysql.method=watermarks applies to MySQL/MariaDB only: a PostgreSQL snapshot reads "
            "in one exported snapshot, without locks; remove the setting"
        )
    # A select override is parsed before anything starts (never pasted into SQL unchecked).
    dialect = "postgres" if connector == "postgres" else "mysql"
    for key, sql in source.items():
        if key.startswith(_OVERRIDE) and len(key) > len(_OVERRIDE):
            try:
                parse_override(key[len(_OVERRIDE) :], str(sql), dialect)
            except OverrideError as e:
                problems.append(f"debezium.source.{e}" if full(key) != key else str(e))
    if connector != "postgres" and source.get("time.precision.mode") == "adaptive":
        # as Debezium 3.6's binlog connectors: a value of the enum, refused by their validation
        problems.append(
            f"{full('time.precision.mode')}=adaptive is no longer supported by the MySQL and MariaDB connectors "
            "(Debezium 3.x); use adaptive_time_microseconds (the default: the same, with TIME always in "
            "microseconds) or connect"
        )
    batch, queue = source.get("max.batch.size"), source.get("max.queue.size")
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
    return Validated(
        connector,
        source,
        source_text,
        server,
        tuple(warnings),
        raw,
        server_shape,
        {ck: full(ck) for ck in source},
        sanitize,
    )


def _at_least(key: str, prop: Prop, value: Any, problems: list[str]) -> Any:
    """`value`, or None after recording a problem when it is below the property's smallest valid
    value (the range Debezium's own validator accepts)."""
    low = prop.at_least
    if low is None or not isinstance(value, int) or isinstance(value, bool) or value >= low:
        return value
    problems.append(
        f"{key}={value} is out of range: it must be {'0 or more' if low == 0 else f'at least {low}'}"
    )
    return None


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
        reason = not_yet_reason(ck, connector)  # type: ignore[arg-type]  # connector: a Connector name here
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
