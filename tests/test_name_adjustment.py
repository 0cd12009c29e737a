"""schema.name.adjustment.mode / field.name.adjustment.mode: the rules of Debezium's
SchemaNameAdjuster (the PostgreSQL conformance test checks them against Debezium 3.6 itself), the
conflict error, and the MySQL connector using them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cdc import payload, read_jsonl, run_cli
from cfgutil import source as settings_of
from mycdc import write_config

from connectors.api import TerminalError
from connectors.format.topics import NameAdjuster, TopicNamer

CASES = [
    # name, avro field, avro_unicode field, avro schema, avro_unicode schema
    ("1st", "_1st", "_u0031st", "_1st", "_u0031st"),
    ("a-b", "a_b", "a_u002db", "a_b", "a_u002db"),
    ("_u", "_u", "_u005fu", "_u", "_u005fu"),
    ("x.y", "x_y", "x_u002ey", "x.y", "x.y"),
    ("héllo", "h_llo", "h_u00e9llo", "h_llo", "h_u00e9llo"),
    ("Ok_9", "Ok_9", "Ok_u005f9", "Ok_9", "Ok_u005f9"),
    ("😀", "__", "_ud83d_ude00", "__", "_ud83d_ude00"),  # UTF-16 code units, as Java sees them
    ("\x07", "_", "_u007", "_", "_u007"),  # Debezium pads to at least 3 hex digits, "00" + 1 digit
    ("", "", "", "", ""),
]


@pytest.mark.parametrize(("name", "field_avro", "field_unicode", "schema_avro", "schema_unicode"), CASES)
def test_rules(name: str, field_avro: str, field_unicode: str, schema_avro: str, schema_unicode: str) -> None:
    assert NameAdjuster("avro", field=True)(name) == field_avro
    assert NameAdjuster("avro_unicode", field=True)(name) == field_unicode
    assert NameAdjuster("avro", field=False)(name) == schema_avro
    assert NameAdjuster("avro_unicode", field=False)(name) == schema_unicode
    assert NameAdjuster("none", field=True)(name) == name


def test_two_names_becoming_one_stop_the_connector(caplog: pytest.LogCaptureFixture) -> None:
    adjust = NameAdjuster("avro", field=False)
    with caplog.at_level("WARNING", logger="connectors.format.topics"):
        assert adjust("tm.public.a-b.Value") == adjust("tm.public.a-b.Value") == "tm.public.a_b.Value"
    assert caplog.text.count("not a valid Avro name") == 1  # once per name
    assert adjust("tm.public.a_b.Value") == "tm.public.a_b.Value"  # already valid: no conflict
    with pytest.raises(
        TerminalError,
        match=r"schema.name.adjustment.mode=avro: the schema names "
        r"'tm.public.a b.Value' and 'tm.public.a-b.Value' both become",
    ):
        adjust("tm.public.a b.Value")


def test_a_sanitized_topic_name_is_warned_about_once_per_process(caplog: pytest.LogCaptureFixture) -> None:
    """Invalid topic characters become `_` (Debezium's rule), with one warning per table: a
    snapshot builds a namer per chunk, and a thousand chunks gave a thousand identical lines."""
    caplog.set_level("WARNING", logger="connectors.format.topics")
    for _chunk in range(3):
        assert TopicNamer("tm").data_topic("Odd Schema", 'Weird "T" ü') == "tm.Odd_Schema.Weird__T___"
    assert TopicNamer("tm").data_topic("public", "fine-name_1.x") == "tm.public.fine-name_1.x"
    warned = [r.getMessage() for r in caplog.records if "sanitized" in r.getMessage()]
    assert warned == ['table Odd Schema.Weird "T" ü: topic name sanitized to tm.Odd_Schema.Weird__T___']


def test_namer_reads_the_properties() -> None:
    namer = TopicNamer.from_settings(
        settings_of(
            "postgres",
            {
                "topic.prefix": "tm",
                "schema.name.adjustment.mode": "avro_unicode",
                "field.name.adjustment.mode": "avro",
                "topic.delimiter": ".",
            },
        )
    )
    assert (namer.schema_name.mode, namer.field_name.mode) == ("avro_unicode", "avro")
    assert namer.data_topic("db", "odd-name") == "tm.db.odd-name"  # topics are not adjusted


def test_mysql_names_adjusted(mariadb: Any, mariadb_database: str, unique_name: Any, tmp_path: Path) -> None:
    dbn = mariadb_database
    mariadb.execute(f"CREATE TABLE {dbn}.`odd-name` (`1st` INT PRIMARY KEY, `a-b` TEXT, ok TEXT)")
    out = tmp_path / "events.jsonl"
    cfg = write_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=unique_name.server_id(),
        db=dbn,
        jsonl=out,
        prefix="nm",
        **{
            "schema.name.adjustment.mode": "avro",
            "field.name.adjustment.mode": "avro",
            "column.exclude.list": rf"{dbn}\.odd-name\.ok",
            "message.key.columns": f"{dbn}.odd-name:1st,a-b",
        },
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    mariadb.execute(f"INSERT INTO {dbn}.`odd-name` VALUES (1, 'x', 'y')")
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    rec = next(r for r in read_jsonl(out) if r["topic"] == f"nm.{dbn}.odd-name")
    assert payload(rec)["after"] == {"_1st": 1, "a_b": "x"}  # filters and key columns use the real names
    assert payload(rec, "key") == {"_1st": 1, "a_b": "x"}
    assert rec["key"]["schema"]["name"] == f"nm.{dbn}.odd_name.Key"
    assert rec["value"]["schema"]["name"] == f"nm.{dbn}.odd_name.Envelope"
