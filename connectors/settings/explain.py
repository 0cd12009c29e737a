"""`tidemark config explain`: every effective setting of a loaded configuration, where its value
comes from (the file or the catalog's default), what Tidemark does with it, and what it means.
Secret values are masked."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from connectors.settings.catalog import (
    CATALOG,
    DEFAULT_ONLY,
    IGNORED,
    NO_EFFECT,
    PREFIX_FAMILIES,
    SERVER_PREFIXES,
    SERVER_PROPERTIES,
    describe,
    not_yet_reason,
)
from connectors.settings.config import MASK, ConnectorConfig
from connectors.settings.files import _scalar_text
from connectors.settings.model import SOURCE_SETTINGS, property_names
from connectors.settings.modes import Connector
from connectors.settings.validate import SOURCE_PREFIX

Origin = Literal["file", "default", "unset"]


@dataclass(frozen=True, slots=True)
class Setting:
    key: str  # as the file spells it (debezium.source.<key> in Debezium Server shape)
    value: str  # the effective value as text; secrets masked
    origin: Origin
    status: str  # "used", "default only", "ignored: <why>", "not used yet: <why>"
    description: str


def _status(name: str, connector: Connector) -> str:
    if name in SERVER_PROPERTIES or any(name.startswith(p) for p, _ in SERVER_PREFIXES):
        return "used"
    if name in property_names(SOURCE_SETTINGS[connector]):
        return "used"
    for pattern, reason in NO_EFFECT:
        if pattern.fullmatch(name):
            return f"ignored: {reason}"
    later = not_yet_reason(name, connector)
    if later is not None:
        return f"not used yet: {later}"
    for pattern, reason in IGNORED:
        if pattern.fullmatch(name):
            return f"ignored: {reason}"
    if name in DEFAULT_ONLY:
        return f"default only: {DEFAULT_ONLY[name].missing}"
    for fam in PREFIX_FAMILIES:
        if fam.pattern.fullmatch(name):
            return "refused" if fam.kind == "unsupported" else "used"
    return "used"  # read by the settings layer itself (connector.class, custom.sanitize.pattern, ...)


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(_scalar_text(v) for v in value)
    return _scalar_text(value)


def explain(cfg: ConnectorConfig, *, everything: bool = False) -> list[Setting]:
    """The settings of `cfg`, connector properties first, then sink/format/Tidemark keys. Without
    `everything`: the properties Tidemark acts on and every key the file sets; with it, every
    property the catalog knows for this connector."""
    origin = cfg.origin
    catalog = CATALOG[cfg.connector]
    used = set(property_names(SOURCE_SETTINGS[cfg.connector]))
    rows: list[Setting] = []

    def add(name: str, shown: str, value: Any, where: Origin) -> None:
        text = MASK if origin.is_secret(shown) and value not in (None, "") else _text(value)
        rows.append(Setting(shown, text, where, _status(name, cfg.connector), describe(name, cfg.connector)))

    names: Iterable[str] = (
        sorted(set(catalog) | set(origin.properties))
        if everything
        else sorted(used | set(origin.source_text) | {k for k in origin.properties if _family(k)})
    )
    for name in names:
        set_in_file = name in origin.source_text
        value = origin.properties.get(name)
        where: Origin = "file" if set_in_file else ("default" if value is not None else "unset")
        if where == "unset" and not everything and name not in used:
            continue
        try:
            add(name, origin.full_name(name), value, where)
        except KeyError:  # a key only the settings layer knows (a converter's own settings)
            continue
    raw_server = {k for k in origin.raw if not k.startswith(SOURCE_PREFIX)}
    for key in sorted(set(SERVER_PROPERTIES) | {k for k in origin.server if k not in SERVER_PROPERTIES}):
        value = origin.server.get(key)
        where = "file" if key in raw_server else ("default" if value is not None else "unset")
        if where == "unset" and not everything and key not in ("debezium.sink.jsonl.path",):
            continue
        add(key, key, value, where)
    return rows


def _family(name: str) -> bool:
    return any(f.pattern.fullmatch(name) for f in PREFIX_FAMILIES)


def as_json(rows: list[Setting]) -> list[dict[str, str]]:
    return [
        {"key": r.key, "value": r.value, "origin": r.origin, "status": r.status, "description": r.description}
        for r in rows
    ]


def as_text(rows: list[Setting]) -> str:
    """Two lines per setting: `key = value (origin)`, then what Tidemark does with it and what it
    means."""
    out = []
    for r in rows:
        out.append(f"{r.key} = {r.value}  ({r.origin})")
        out.append(f"    {r.status} — {r.description}")
    return "\n".join(out)
