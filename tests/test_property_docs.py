"""Every property Tidemark knows has a short one-line description: the catalog's entries carry
it (`Prop.description`, texts in connectors/settings/descriptions.py), `catalog.describe` also
covers the parameterised families."""

from __future__ import annotations

import pytest

from connectors.settings.catalog import CATALOG, PREFIX_FAMILIES, SERVER_PREFIXES, SERVER_PROPERTIES, describe
from connectors.settings.descriptions import CONNECTOR_DESCRIPTIONS, DESCRIPTIONS

MAX_LEN = 200
CONNECTORS = sorted(CATALOG)
FAMILY_KEYS = [family.pattern.pattern for family in PREFIX_FAMILIES]
PREFIX_KEYS = [prefix for prefix, _type in SERVER_PREFIXES]


def _problem(text: object) -> str | None:
    """Why `text` is not a usable one-line description, or None."""
    if not isinstance(text, str) or not text.strip():
        return "empty"
    if "\n" in text or "\r" in text:
        return "more than one line"
    if len(text) > MAX_LEN:
        return f"{len(text)} characters (max {MAX_LEN})"
    return None


def _describe_problems(names: list[str], connector: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in names:
        try:
            problem = _problem(describe(name, connector))
        except KeyError:
            problem = "no description"
        if problem:
            out[name] = problem
    return out


@pytest.mark.parametrize("connector", CONNECTORS)
def test_every_catalog_key_is_described(connector: str) -> None:
    assert _describe_problems(sorted(CATALOG[connector]), connector) == {}
    # the catalog entries themselves carry it
    assert {n: p for n, prop in CATALOG[connector].items() if (p := _problem(prop.description))} == {}


@pytest.mark.parametrize("connector", CONNECTORS)
def test_every_server_key_is_described(connector: str) -> None:
    assert _describe_problems(sorted(SERVER_PROPERTIES), connector) == {}


def test_every_family_and_prefix_is_described() -> None:
    problems = {key: _problem(DESCRIPTIONS.get(key)) for key in FAMILY_KEYS + PREFIX_KEYS}
    assert {k: v for k, v in problems.items() if v} == {}


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("column.mask.with.5.chars", r"column\.mask\.with\.(\d+)\.chars"),
        (
            "column.mask.hash.v2.SHA-256.with.salt.pepper",
            r"column\.mask\.hash\.v2\.([^.]+)\.with\.salt\.(.+)",
        ),
        ("column.mask.hash.SHA-256.with.salt.pepper", r"column\.mask\.hash\.([^.]+)\.with\.salt\.(.+)"),
        ("column.truncate.to.20.chars", r"column\.truncate\.to\.(\d+)\.chars"),
        (
            "snapshot.select.statement.overrides.public.orders",
            r"snapshot\.select\.statement\.overrides\.(.+)",
        ),
        ("signal.consumer.security.protocol", r"signal\.consumer\..+"),
        ("transforms.unwrap.type", r"(?:transforms|predicates)(?:\..+)?"),
        ("debezium.sink.kafka.producer.acks", "debezium.sink.kafka.producer."),
        ("debezium.sink.delta.storage.AWS_REGION", "debezium.sink.delta.storage."),
    ],
)
def test_parameterised_keys_get_their_family_text(name: str, family: str) -> None:
    for connector in CONNECTORS:
        assert describe(name, connector) == DESCRIPTIONS[family]


def test_connector_overrides_win() -> None:
    assert describe("database.port", "postgres") != describe("database.port", "mysql")
    assert describe("snapshot.mode", "mysql") == CONNECTOR_DESCRIPTIONS[("mysql", "snapshot.mode")]
    # a name without an override falls back to the plain text
    assert describe("decimal.handling.mode", "mariadb") == DESCRIPTIONS["decimal.handling.mode"]


@pytest.mark.parametrize(
    ("name", "connector"),
    [
        ("no.such.property", "postgres"),
        ("slot.name", "mysql"),  # a PostgreSQL property asked for as MySQL's
        ("database.server.id", "postgres"),
        ("table.include.list", "oracle"),  # unknown connector
    ],
)
def test_unknown_names_raise_key_error(name: str, connector: str) -> None:
    with pytest.raises(KeyError):
        describe(name, connector)


def test_no_stale_or_overlong_descriptions() -> None:
    known = set(SERVER_PROPERTIES) | set(FAMILY_KEYS) | set(PREFIX_KEYS)
    for props in CATALOG.values():
        known |= set(props)
    assert sorted(set(DESCRIPTIONS) - known) == []
    assert sorted(k for k in CONNECTOR_DESCRIPTIONS if k[0] not in CATALOG or k[1] not in CATALOG[k[0]]) == []
    texts = {**DESCRIPTIONS, **{f"{c}:{n}": t for (c, n), t in CONNECTOR_DESCRIPTIONS.items()}}
    assert {k: p for k, t in texts.items() if (p := _problem(t))} == {}
