"""The typed settings (connectors/settings/model.py) and the catalog describe the same properties:
every field is a catalog property of that connector with a matching type, an enum field accepts
exactly the values the catalog accepts (a catalog value outside the field's `Literal` must be
refused by validation), the settings are frozen and keep secrets out of their text."""

from __future__ import annotations

import typing
from typing import Any, get_args, get_origin

import pytest
from pydantic import SecretStr, ValidationError

from connectors.api import ConfigError
from connectors.settings.catalog import CATALOG, SERVER_PROPERTIES
from connectors.settings.config import from_mapping
from connectors.settings.model import (
    SOURCE_SETTINGS,
    FormatSettings,
    KafkaSinkSettings,
    RuntimeSettings,
    property_names,
)

BASE = {
    "postgres": {"database.dbname": "d"},
    "mysql": {},
    "mariadb": {},
}


def minimal(connector: str, **props: str) -> dict[str, str]:
    return {
        "connector.class": connector,
        "database.hostname": "h",
        "database.user": "u",
        "topic.prefix": "t",
        "snapshot.mode": "no_data",
        "debezium.sink.type": "delta",
        **BASE[connector],
        **props,
    }


# Without a default but never unset once validated: required, or filled by validation.
FILLED = {"database.hostname", "database.user", "topic.prefix", "database.dbname", "database.server.id"}


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(the type without `| None`, whether None is allowed)."""
    args = get_args(annotation)
    if (
        get_origin(annotation) in (typing.Union, getattr(__import__("types"), "UnionType", None))
        and type(None) in args
    ):
        rest = [a for a in args if a is not type(None)]
        return rest[0], True
    return annotation, False


def _literal_values(tp: Any) -> tuple[str, ...] | None:
    if get_origin(tp) is typing.Literal:
        return get_args(tp)
    if get_origin(tp) is tuple and get_args(tp) and get_origin(get_args(tp)[0]) is typing.Literal:
        return get_args(get_args(tp)[0])
    return None


@pytest.mark.parametrize("connector", sorted(SOURCE_SETTINGS))
def test_every_field_is_a_catalog_property_of_the_same_type(connector: str) -> None:
    model = SOURCE_SETTINGS[connector]  # type: ignore[index]
    catalog = CATALOG[connector]  # type: ignore[index]
    problems = []
    for prop, name in property_names(model).items():
        entry = catalog.get(prop)
        if entry is None:
            problems.append(f"{prop}: not in the {connector} catalog")
            continue
        tp, optional = _unwrap(model.model_fields[name].annotation)
        values = _literal_values(tp)
        expected = {
            "int": int,
            "bool": bool,
            "str": str,
            "password": SecretStr,
        }.get(entry.type)
        if entry.type == "enum":
            if values is None:
                problems.append(f"{prop}: enum in the catalog, {tp} in the model")
            elif not set(values) <= set(entry.choices):
                problems.append(
                    f"{prop}: the model allows {set(values) - set(entry.choices)} the catalog refuses"
                )
        elif entry.type in ("list", "regex-list"):
            if get_origin(tp) is not tuple:
                problems.append(f"{prop}: a list in the catalog, {tp} in the model")
            elif values is not None and set(values) != set(entry.choices):
                problems.append(f"{prop}: choices {entry.choices} vs {values}")
        elif expected is not None and tp is not expected and not (expected is str and tp is SecretStr):
            problems.append(f"{prop}: {entry.type} in the catalog, {tp} in the model")
        if (
            entry.default is None
            and not optional
            and entry.type not in ("list", "regex-list")
            and prop not in FILLED
        ):
            problems.append(f"{prop}: may be unset (no default) but the field is not optional")
    assert problems == []


@pytest.mark.parametrize("connector", sorted(SOURCE_SETTINGS))
def test_catalog_values_outside_the_field_type_are_refused(connector: str) -> None:
    model = SOURCE_SETTINGS[connector]  # type: ignore[index]
    for prop, name in property_names(model).items():
        entry = CATALOG[connector][prop]  # type: ignore[index]
        values = _literal_values(_unwrap(model.model_fields[name].annotation)[0])
        if entry.type != "enum" or values is None:
            continue
        for extra in set(entry.choices) - set(values):
            with pytest.raises(ConfigError, match=prop.replace(".", r"\.")):
                from_mapping(minimal(connector, **{prop: extra}))


def test_server_models_match_their_catalog_keys() -> None:
    for model, prefix in (
        (FormatSettings, "debezium.format."),
        (RuntimeSettings, "tidemark."),
        (KafkaSinkSettings, "debezium.sink.kafka."),
    ):
        keys = {prefix + p for p in property_names(model)} - {"debezium.sink.kafka.producer"}
        assert keys <= set(SERVER_PROPERTIES), keys - set(SERVER_PROPERTIES)
    assert {k for k in SERVER_PROPERTIES if k.startswith("tidemark.")} == {
        "tidemark." + p for p in property_names(RuntimeSettings)
    }


@pytest.mark.parametrize("connector", sorted(SOURCE_SETTINGS))
def test_a_minimal_configuration_builds_every_field(connector: str) -> None:
    cfg = from_mapping(minimal(connector, **{"database.password": "pw-123"}))
    assert type(cfg.source) is SOURCE_SETTINGS[connector]  # type: ignore[index]
    for name in type(cfg.source).model_fields:
        getattr(cfg.source, name)
    with pytest.raises(ValidationError):
        cfg.source.topic_prefix = "other"  # frozen
    assert "pw-123" not in repr(cfg.source) + str(cfg) + repr(cfg.origin)
    assert cfg.source.database_password is not None
    assert cfg.source.database_password.get_secret_value() == "pw-123"
