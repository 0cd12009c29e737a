"""connectors.settings.config: file formats, shapes, normalisation, validation messages, redaction."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from connectors.api import ConfigError
from connectors.settings import config
from connectors.settings.catalog import (
    CATALOG,
    DEFAULT_ONLY,
    HASH_ALGORITHMS,
    HINTS,
    MYSQL_AVAILABLE_SNAPSHOT_MODES,
    NO_EFFECT,
    NOT_YET,
    POSTGRES_AVAILABLE_SNAPSHOT_MODES,
    Prop,
)
from connectors.settings.config import from_mapping, load
from connectors.settings.files import _scalar_text, parse_properties
from connectors.settings.model import MariaDbSettings, MySqlSettings, PostgresSettings, property_names
from connectors.settings.values import compile_regex

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

PG_SERVER = """\
# Debezium Server style
debezium.sink.type=jsonl
debezium.sink.jsonl.path=-
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.database.hostname=localhost
debezium.source.database.port=5433
debezium.source.database.user=cdc
debezium.source.database.password=hunter2
debezium.source.database.dbname=inventory
debezium.source.topic.prefix=inv
debezium.source.snapshot.mode=no_data
"""

PG_PLAIN = {
    "connector.class": "postgres",
    "database.hostname": "localhost",
    "database.user": "cdc",
    "database.password": "hunter2",
    "database.dbname": "inventory",
    "topic.prefix": "inv",
    "snapshot.mode": "no_data",
    "debezium.sink.type": "jsonl",
    "debezium.sink.jsonl.path": "out.jsonl",
}


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def errors_of(flat: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as ei:
        from_mapping(flat)
    return str(ei.value)


def plain(**kw: str) -> dict[str, str]:
    d = dict(PG_PLAIN)
    for k, v in kw.items():
        key = k.replace("__", ".")
        if v is None:
            d.pop(key, None)
        else:
            d[key] = v
    return d


# --------------------------------------------------------------------------- file encodings
def test_properties_file_latin1_fallback(tmp_path: Path) -> None:
    # Java reads .properties as ISO-8859-1: such a file must load, not crash on UTF-8 decoding.
    path = tmp_path / "pg.properties"
    path.write_bytes(PG_SERVER.encode() + "debezium.source.slot.name=sl\u00f8t\n".encode("latin-1"))
    assert load(path).origin.properties["slot.name"] == "sl\u00f8t"
    path.write_bytes(b"\xef\xbb\xbf" + PG_SERVER.encode() + "debezium.source.slot.name=sl\u00f8t\n".encode())
    assert load(path).origin.properties["slot.name"] == "sl\u00f8t"  # UTF-8 (with a BOM) first


def test_yaml_must_be_utf8(tmp_path: Path) -> None:
    path = tmp_path / "pg.yaml"
    path.write_bytes("debezium:\n  source:\n    slot.name: sl\u00f8t\n".encode("latin-1"))
    with pytest.raises(ConfigError) as ei:
        load(path)
    assert f"{path}: not UTF-8 text" in str(ei.value) and "save the file as UTF-8" in str(ei.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as ei:
        load(tmp_path / "nope.properties")
    assert "cannot read configuration file" in str(ei.value) and "No such file" in str(ei.value)


# --------------------------------------------------------------------------- .properties syntax
def test_properties_syntax() -> None:
    text = (
        "# comment\n"
        "! also a comment\n"
        "   \n"
        "a=1\n"
        "b : two\n"
        "c three\n"
        "d = x\\\n"
        "     y,\\\n"
        "     z\n"
        "e=tab\\there\\u0041\\=\n"
        "f\\=g=h\n"
        "empty=\n"
        "even=ends\\\\\n"
        "next=1\n"
    )
    p = parse_properties(text)
    assert p == {
        "a": "1",
        "b": "two",
        "c": "three",
        "d": "xy,z",
        "e": "tab\thereA=",
        "f=g": "h",
        "empty": "",
        "even": "ends\\",
        "next": "1",
    }


def test_load_properties_server_shape(tmp_path: Path) -> None:
    cfg = load(write(tmp_path, "pg.properties", PG_SERVER))
    assert cfg.connector == "postgres"
    assert cfg.topic_prefix == "inv"
    assert cfg.name == "inv"  # defaults to topic.prefix
    assert cfg.origin.properties["database.port"] == 5433
    assert cfg.origin.properties["database.hostname"] == "localhost"
    assert list(cfg.sink_types) == ["jsonl"]
    assert cfg.sink.jsonl.path == "-"
    assert cfg.sink.kafka.client == "confluent"
    assert cfg.warehouse == Path("./warehouse")
    assert cfg.format.key_schemas_enable is True and cfg.format.value_schemas_enable is True
    assert cfg.origin.raw["debezium.source.database.password"] == "hunter2"
    assert cfg.origin.warnings == ()


def test_defaults_filled_and_typed() -> None:
    cfg = from_mapping(PG_PLAIN)
    s = cfg.source  # the typed, frozen settings the connector reads
    assert isinstance(s, PostgresSettings)
    assert s.plugin_name == "pgoutput"
    assert s.slot_name == "debezium"
    assert s.publication_name == "dbz_publication"
    assert s.database_port == 5432
    assert s.decimal_handling_mode == "precise"
    assert s.time_precision_mode == "adaptive"
    assert s.max_batch_size == 2048 and cfg.origin.properties["max.queue.size"] == 8192
    assert s.tombstones_on_delete is True
    assert s.provide_transaction_metadata is False
    assert s.skipped_operations == ("t",)
    assert s.topic_heartbeat_prefix == "__debezium-heartbeat"
    assert s.unavailable_value_placeholder == "__debezium_unavailable_value"
    assert s.heartbeat_interval_ms == 0
    assert s.table_include_list == ()
    assert cfg.runtime.commit_max_events == 4096 and cfg.runtime.offsets_flush_interval_ms == 1000
    with pytest.raises(ValidationError):  # frozen
        s.slot_name = "other"  # type: ignore[misc]


def test_mysql_defaults_and_random_server_id() -> None:
    flat = {
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "database.hostname": "h",
        "database.user": "u",
        "topic.prefix": "m",
        "snapshot.mode": "no_data",
        "debezium.sink.type": "delta",
    }
    cfg = from_mapping(flat)
    assert cfg.connector == "mysql"
    assert cfg.origin.properties["database.port"] == 3306
    assert cfg.origin.properties["time.precision.mode"] == "adaptive_time_microseconds"
    assert 5400 <= cfg.origin.properties["database.server.id"] < 6400
    assert cfg.origin.properties["snapshot.locking.mode"] == "minimal"
    assert (
        from_mapping({**flat, "database.server.id": "184054"}).origin.properties["database.server.id"]
        == 184054
    )
    maria = from_mapping({**flat, "connector.class": "mariadb"})
    assert maria.connector == "mariadb"
    assert maria.origin.properties["database.ssl.mode"] == "disable"


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        ("io.debezium.connector.postgresql.PostgresConnector", "postgres"),
        ("postgres", "postgres"),
        ("PostgreSQL", "postgres"),
        ("io.debezium.connector.mysql.MySqlConnector", "mysql"),
        ("mysql", "mysql"),
        ("io.debezium.connector.mariadb.MariaDbConnector", "mariadb"),
        ("mariadb", "mariadb"),
    ],
)
def test_connector_class(cls: str, expected: str) -> None:
    flat = plain(connector__class=cls)
    if expected != "postgres":
        flat.pop("database.dbname")
    assert from_mapping(flat).connector == expected


def test_unknown_connector_class() -> None:
    msg = errors_of(plain(connector__class="io.debezium.connector.oracle.OracleConnector"))
    assert "connector.class=io.debezium.connector.oracle.OracleConnector is not supported" in msg
    assert "missing required property 'connector.class'" in errors_of(plain(connector__class=None))


# --------------------------------------------------------------------------- YAML
YAML_SERVER = """\
debezium:
  sink:
    type: [jsonl, kafka]
    jsonl: {path: out.jsonl}
    kafka:
      client: kafka-python
      producer:
        bootstrap.servers: localhost:9092
        linger.ms: 5
  format:
    value.schemas.enable: false
  source:
    connector.class: postgres
    database:
      hostname: db
      port: 5432
      user: cdc
      password: pw
      dbname: inv
    topic.prefix: inv
    snapshot.mode: no_data
    table.include.list:
      - public\\.orders
      - public\\.customers
    tombstones.on.delete: false
tidemark:
  warehouse: /tmp/wh
"""


def test_load_yaml_server_shape(tmp_path: Path) -> None:
    cfg = load(write(tmp_path, "pg.yaml", YAML_SERVER))
    assert cfg.connector == "postgres"
    assert list(cfg.sink_types) == ["jsonl", "kafka"]
    assert cfg.sink.kafka.client == "kafka-python"
    assert cfg.sink.kafka.producer["bootstrap.servers"] == "localhost:9092"
    assert cfg.sink.kafka.producer["linger.ms"] == "5"
    assert cfg.format.value_schemas_enable is False and cfg.format.key_schemas_enable is True
    assert cfg.origin.properties["database.hostname"] == "db"
    assert cfg.origin.properties["tombstones.on.delete"] is False
    assert cfg.origin.properties["table.include.list"] == ["public\\.orders", "public\\.customers"]
    assert cfg.warehouse == Path("/tmp/wh")


def test_load_yaml_plain_shape(tmp_path: Path) -> None:
    text = (
        "connector.class: mysql\n"
        "database.hostname: h\n"
        "database.user: u\n"
        "database.server.id: 5401\n"
        "topic.prefix: shop\n"
        "snapshot.mode: never\n"
        "name: shop-connector\n"
        "debezium.sink.type: delta\n"
        "tidemark.warehouse: wh\n"
    )
    cfg = load(write(tmp_path, "m.yml", text))
    assert cfg.connector == "mysql"
    assert cfg.name == "shop-connector"
    assert cfg.origin.properties["database.server.id"] == 5401
    assert cfg.origin.properties["snapshot.mode"] == "never"
    assert list(cfg.sink_types) == ["delta"]
    assert cfg.warehouse == Path("wh")


def test_overrides(tmp_path: Path) -> None:
    path = write(tmp_path, "pg.properties", PG_SERVER)
    cfg = load(
        path, {"slot.name": "s2", "debezium.sink.type": ["jsonl", "delta"], "tombstones.on.delete": False}
    )
    assert cfg.origin.properties["slot.name"] == "s2"
    assert list(cfg.sink_types) == ["jsonl", "delta"]
    assert cfg.origin.properties["tombstones.on.delete"] is False


# --------------------------------------------------------------------------- aliases
def test_aliases_normalised_with_one_warning_each(caplog: pytest.LogCaptureFixture) -> None:
    flat = plain(
        topic__prefix=None,
        database__server__name="legacy",
        table__whitelist="public\\.a,public\\.b",
        column__blacklist="public.a.secret",
        toasted__value__placeholder="__toast",
        heartbeat__topics__prefix="hb",
        snapshot__mode="schema_only",
    )
    with caplog.at_level(logging.WARNING, logger="connectors.settings.config"):
        cfg = from_mapping(flat)
    assert cfg.topic_prefix == "legacy"
    assert cfg.origin.properties["table.include.list"] == ["public\\.a", "public\\.b"]
    assert cfg.origin.properties["column.exclude.list"] == ["public.a.secret"]
    assert cfg.origin.properties["unavailable.value.placeholder"] == "__toast"
    assert cfg.origin.properties["topic.heartbeat.prefix"] == "hb"
    assert cfg.origin.properties["snapshot.mode"] == "no_data"
    for old in ("database.server.name", "table.whitelist", "column.blacklist", "toasted.value.placeholder"):
        assert sum(f"'{old}' is deprecated" in w for w in cfg.origin.warnings) == 1
    assert any(
        "snapshot.mode=schema_only is deprecated; use snapshot.mode=no_data" in w for w in cfg.origin.warnings
    )
    assert [r.getMessage() for r in caplog.records] == list(cfg.origin.warnings)
    assert "database.server.name" not in cfg.source and "table.whitelist" not in cfg.source


def test_mysql_recovery_alias() -> None:
    flat = {
        "connector.class": "mysql",
        "database.hostname": "h",
        "database.user": "u",
        "topic.prefix": "m",
        "database.whitelist": "inventory",
        "snapshot.mode": "schema_only_recovery",
        "debezium.sink.type": "delta",
    }
    assert from_mapping(flat).source.snapshot_mode == "recovery"  # the 1.x name of recovery
    cfg = from_mapping({**flat, "snapshot.mode": "schema_only"})
    assert cfg.source.snapshot_mode == "no_data"
    assert cfg.origin.properties["database.include.list"] == ["inventory"]


def test_alias_and_current_name_both_set() -> None:
    msg = errors_of(plain(database__server__name="x"))
    assert "both 'database.server.name' and its current name 'topic.prefix' are set" in msg


# --------------------------------------------------------------------------- errors
def test_unknown_property_with_suggestion() -> None:
    msg = errors_of(plain(databse__hostname="x"))
    assert "unknown property 'databse.hostname'; did you mean 'database.hostname'?" in msg


def test_unknown_property_server_shape_suggests_full_name(tmp_path: Path) -> None:
    path = write(
        tmp_path, "pg.properties", PG_SERVER + "debezium.source.slot.nmae=x\ndatabase.hostname=oops\n"
    )
    with pytest.raises(ConfigError) as ei:
        load(path)
    msg = str(ei.value)
    assert "unknown property 'debezium.source.slot.nmae'; did you mean 'debezium.source.slot.name'?" in msg
    assert "unknown property 'database.hostname'; did you mean 'debezium.source.database.hostname'?" in msg
    assert str(path) in msg


def test_unknown_sink_key_and_hint() -> None:
    msg = errors_of(plain(debezium__sink__jsonl__pth="x", tidemark__batch__max__events="10"))
    assert "unknown property 'debezium.sink.jsonl.pth'; did you mean 'debezium.sink.jsonl.path'?" in msg
    hint = HINTS["tidemark.batch.max.events"]
    assert f"unknown property 'tidemark.batch.max.events'; did you mean '{hint}'?" in msg


def test_bad_enum_value() -> None:
    msg = errors_of(plain(decimal__handling__mode="exact"))
    assert "decimal.handling.mode=exact is not one of double, precise, string" in msg


def test_enum_is_case_insensitive() -> None:
    assert (
        from_mapping(plain(decimal__handling__mode="STRING")).origin.properties["decimal.handling.mode"]
        == "string"
    )


def test_bad_int_and_bool() -> None:
    msg = errors_of(plain(database__port="54x", tombstones__on__delete="yes"))
    assert "database.port=54x is not an integer" in msg
    assert "tombstones.on.delete=yes is not a boolean (true or false)" in msg


@pytest.mark.parametrize(
    ("key", "value", "bound"),
    [
        ("snapshot.max.threads", "0", "at least 1"),
        ("snapshot.fetch.size", "-5", "0 or more"),
        ("snapshot.delay.ms", "-1", "0 or more"),
        ("max.batch.size", "0", "at least 1"),
        ("poll.interval.ms", "0", "at least 1"),
        ("status.update.interval.ms", "-10", "at least 1"),
        ("heartbeat.interval.ms", "-1", "0 or more"),
        ("tidemark.snapshot.chunk.rows", "0", "at least 1"),
        ("tidemark.incremental.snapshot.parallelism", "0", "at least 1"),
        ("debezium.sink.delta.compact.files", "-1", "0 or more"),
    ],
)
def test_numbers_out_of_debeziums_range_are_refused(key: str, value: str, bound: str) -> None:
    """The ranges Debezium 3.6's validators accept (isPositiveInteger: 1 and more, isNonNegative*:
    0 and more), and Tidemark's own for its properties: refused before anything starts, never
    clamped or passed on to a reader as a negative fetch size."""
    msg = errors_of(plain(**{key.replace(".", "__"): value}))
    assert f"{key}={value} is out of range: it must be {bound}" in msg


def test_numbers_at_the_bottom_of_the_range_are_accepted() -> None:
    cfg = from_mapping(
        plain(
            snapshot__fetch__size="0",
            incremental__snapshot__chunk__size="0",
            heartbeat__interval__ms="0",
            snapshot__max__threads="1",
            max__batch__size="1",
            max__queue__size="2",
            debezium__sink__delta__compact__files="0",
        )
    )
    assert cfg.source.snapshot_max_threads == 1 and cfg.source.snapshot_fetch_size == 0


def test_the_mysql_server_id_must_be_positive() -> None:
    flat = {**plain(), "connector.class": "mysql", "database.server.id": "0"}
    flat.pop("database.dbname")
    assert "database.server.id=0 is out of range: it must be at least 1" in errors_of(flat)


def test_all_problems_in_one_error() -> None:
    flat = plain(database__hostname=None, database__dbname=None, topic__prefix=None)
    flat.pop("debezium.sink.type")
    flat["decimal.handling.mode"] = "exact"
    flat["databse.user"] = "x"
    msg = errors_of(flat)
    assert "(6 problems)" in msg
    for needle in (
        "missing required property 'database.hostname'",
        "missing required property 'database.dbname'",
        "missing required property 'topic.prefix'",
        "missing required property 'debezium.sink.type'",
        "decimal.handling.mode=exact",
        "unknown property 'databse.user'",
    ):
        assert needle in msg


def test_missing_required_server_shape_uses_full_names(tmp_path: Path) -> None:
    text = PG_SERVER.replace("debezium.source.database.dbname=inventory\n", "")
    with pytest.raises(ConfigError, match=r"missing required property 'debezium\.source\.database\.dbname'"):
        load(write(tmp_path, "pg.properties", text))


def test_sink_requirements() -> None:
    msg = errors_of(plain(debezium__sink__type="jsonl,kafka,s3", debezium__sink__jsonl__path=None))
    assert "debezium.sink.type=jsonl,kafka,s3: s3 is not one of kafka, delta, jsonl" in msg
    # set but invalid: reported once, not also as missing
    msg = errors_of(plain(debezium__sink__type="jsonl,parquet"))
    assert "parquet is not one of kafka, delta, jsonl" in msg and "(1 problem)" in msg, msg
    assert "missing required property 'debezium.sink.type'" not in msg
    msg = errors_of(plain(debezium__sink__type="jsonl,kafka", debezium__sink__jsonl__path=None))
    assert "missing required property 'debezium.sink.jsonl.path'" in msg
    assert "missing required property 'debezium.sink.kafka.producer.bootstrap.servers'" in msg
    msg = errors_of(plain(debezium__sink__kafka__client="librdkafka"))
    assert "debezium.sink.kafka.client=librdkafka is not one of confluent, kafka-python" in msg
    msg = errors_of(plain(debezium__format__value="avro"))
    assert "debezium.format.value=avro is not one of json" in msg


def test_include_and_exclude_both_set() -> None:
    msg = errors_of(plain(table__include__list="public.a", table__exclude__list="public.b"))
    assert "'table.include.list' and 'table.exclude.list' are both set; Debezium refuses this" in msg
    msg = errors_of(plain(schema__whitelist="public", schema__exclude__list="x"))
    assert "'schema.whitelist' and 'schema.exclude.list' are both set" in msg


def test_bad_regex() -> None:
    msg = errors_of(plain(table__include__list="public\\.(orders"))
    assert "table.include.list: invalid regular expression 'public\\\\.(orders'" in msg
    msg = errors_of(plain(column__mask__with__5__chars="a.b.[c"))
    assert "column.mask.with.5.chars: invalid regular expression" in msg


@pytest.mark.parametrize("plugin", ["decoderbufs", "wal2json", "wal2json_rds_streaming", "mine"])
def test_only_pgoutput(plugin: str) -> None:
    msg = errors_of(plain(plugin__name=plugin))
    assert f"plugin.name={plugin} is not supported: Tidemark supports only pgoutput" in msg
    assert "built into PostgreSQL" in msg
    assert from_mapping(plain(plugin__name="pgoutput")).origin.properties["plugin.name"] == "pgoutput"


def test_snapshot_modes() -> None:
    assert set(POSTGRES_AVAILABLE_SNAPSHOT_MODES) == {
        "always", "configuration_based", "initial", "initial_only", "never", "no_data", "when_needed"
    }  # fmt: skip
    assert {"no_data", "never"} <= MYSQL_AVAILABLE_SNAPSHOT_MODES
    for mode in POSTGRES_AVAILABLE_SNAPSHOT_MODES:
        assert from_mapping(plain(snapshot__mode=mode)).source.snapshot_mode == mode
    # 1.x name, now initial
    assert from_mapping(plain(snapshot__mode="exported")).source.snapshot_mode == "initial"
    msg = errors_of(plain(snapshot__mode="custom"))
    assert "snapshot.mode=custom is not supported: it loads a Java Snapshotter class; use initial" in msg
    msg = errors_of(plain(snapshot__mode="sometimes"))
    assert "snapshot.mode=sometimes is not one of always, configuration_based, custom, initial" in msg
    assert from_mapping(plain(snapshot__mode="never")).origin.properties["snapshot.mode"] == "never"


def test_snapshot_mode_unset_is_initial() -> None:
    cfg = from_mapping(plain(snapshot__mode=None))
    assert cfg.source.snapshot_mode == "initial"  # Debezium's default
    assert not any("snapshot.mode" in w for w in cfg.origin.warnings)


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        ("DELETE FROM public.c", "must be a SELECT statement (it starts with 'DELETE')"),
        ("SELECT * FROM public.c; DROP TABLE public.c", "must be one SELECT statement, found 2"),
        ("SELECT * FROM public.d", "must select from public.c only (it reads public.d)"),
        ("SELECT * FROM public.c JOIN public.d ON true", "must select from public.c only"),
        ("SELECT * FROM public.c WHERE id IN (SELECT id FROM c)", "must be a plain SELECT ... FROM public.c"),
        ("SELECT * FROM public.c WHERE (", "not a valid SELECT statement"),
    ],
)
def test_select_override_must_be_one_select_of_its_table(sql: str, problem: str) -> None:
    msg = errors_of(plain(**{"snapshot.select.statement.overrides.public.c": sql}))
    assert f"snapshot.select.statement.overrides.public.c: {problem}" in msg


def test_select_override_accepted() -> None:
    sql = "SELECT * FROM public.c WHERE deleted = false"
    cfg = from_mapping(plain(**{"snapshot.select.statement.overrides.public.c": sql}))
    assert cfg.source.select_overrides == {"public.c": sql}
    assert not any("snapshot" in w for w in cfg.origin.warnings)  # PostgreSQL acts on it


def test_queue_and_batch_sizes() -> None:
    msg = errors_of(plain(max__batch__size="100", max__queue__size="50"))
    assert "max.queue.size=50 must be larger than max.batch.size=100" in msg


def test_topic_prefix_characters() -> None:
    assert "may contain only letters, digits" in errors_of(plain(topic__prefix="bad prefix!"))


def test_unknown_hash_algorithm() -> None:
    msg = errors_of(plain(**{"column.mask.hash.SHA-999.with.salt.x": "a.b.c"}))
    assert "unknown hash algorithm 'SHA-999'" in msg
    # MD2 is a Java MessageDigest name, but the runtime (hashlib) has none: refused at load, with
    # the valid names, not when the first row is masked.
    msg = errors_of(plain(**{"column.mask.hash.v2.MD2.with.salt.x": "a.b.c"}))
    assert (
        "column.mask.hash.v2.MD2.with.salt.x: unknown hash algorithm 'MD2' (Python's hashlib has no MD2)"
        in msg
    )
    assert "use one of " + ", ".join(HASH_ALGORITHMS) in msg and "MD2" not in HASH_ALGORITHMS
    assert from_mapping(plain(**{"column.mask.hash.sha-512/256.with.salt.x": "a.b.c"})).source.column_rules


def test_skipped_operations_values() -> None:
    msg = errors_of(plain(skipped__operations="c,update"))
    assert "skipped.operations=c,update: update is not one of c, u, d, t, r, none" in msg
    msg = errors_of(plain(skipped__operations="none,d"))
    assert "skipped.operations=none,d: 'none' cannot be combined with other operations" in msg
    assert from_mapping(plain(skipped__operations="c, U")).origin.properties["skipped.operations"] == [
        "c",
        "u",
    ]
    assert from_mapping(plain(skipped__operations="none")).origin.properties["skipped.operations"] == ["none"]


@pytest.mark.parametrize(
    "value", ["public.orders", "public.orders:", ":id", "public.orders:id;bad", "public.(orders:id"]
)
def test_message_key_columns_checked_at_load(value: str, tmp_path: Path) -> None:
    path = write(tmp_path, "pg.properties", PG_SERVER + f"debezium.source.message.key.columns={value}\n")
    with pytest.raises(ConfigError) as ei:
        load(path)
    msg = str(ei.value)
    assert "debezium.source.message.key.columns: " in msg
    assert (
        "cannot read" in msg
        and "use <schema>.<table>:<column>[,<column>...] entries separated by ';'" in msg
        or "invalid regular expression" in msg
    )


def test_message_key_columns_valid() -> None:
    cfg = from_mapping(plain(message__key__columns="public.orders:id,sku; (.*).items:item_id"))
    assert cfg.origin.properties["message.key.columns"] == "public.orders:id,sku; (.*).items:item_id"


# --------------------------------------------------------------------------- ignored keys
def test_ignored_keys_one_warning(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    extra = (
        "debezium.source.offset.storage=org.apache.kafka.connect.storage.FileOffsetBackingStore\n"
        "debezium.source.offset.storage.file.filename=/tmp/offsets.dat\n"
        "debezium.source.offset.flush.interval.ms=0\n"
        "debezium.source.schema.history.internal.kafka.topic=h\n"
        "debezium.source.database.history.file.filename=/tmp/h\n"
        "debezium.source.tasks.max=1\n"
        "debezium.source.errors.tolerance=all\n"
        "debezium.source.key.converter=org.apache.kafka.connect.json.JsonConverter\n"
        "debezium.sink.kafka.producer.key.serializer=org.apache.kafka.common.serialization.StringSerializer\n"
        "quarkus.log.console.json=false\n"
    )
    with caplog.at_level(logging.WARNING, logger="connectors.settings.config"):
        cfg = load(write(tmp_path, "pg.properties", PG_SERVER + extra))
    ignored = [w for w in cfg.origin.warnings if w.startswith("ignoring properties")]
    assert len(ignored) == 1 and len(cfg.origin.warnings) == 1
    w = ignored[0]
    for key in (
        "debezium.source.offset.storage",
        "debezium.source.offset.storage.file.filename",
        "debezium.source.offset.flush.interval.ms",
        "debezium.source.schema.history.internal.kafka.topic",
        "debezium.source.database.history.file.filename",
        "debezium.source.tasks.max",
        "debezium.source.errors.tolerance",
        "debezium.source.key.converter",
        "debezium.sink.kafka.producer.key.serializer",
        "quarkus.log.console.json",
    ):
        assert key in w
    assert "Tidemark keeps offsets in Delta" in w
    assert "Tidemark keeps schema history in Delta" in w
    assert "JSON format is built in" in w
    assert len([r for r in caplog.records if r.getMessage().startswith("ignoring")]) == 1
    assert "key.serializer" not in " ".join(cfg.sink.kafka.producer)
    assert "offset.storage" not in cfg.source


def test_non_json_converter_refused() -> None:
    msg = errors_of(plain(value__converter="io.confluent.connect.avro.AvroConverter"))
    assert "value.converter=io.confluent.connect.avro.AvroConverter is not supported" in msg


def test_plain_converter_schemas_enable_honoured() -> None:
    cfg = from_mapping(plain(key__converter__schemas__enable="false"))
    assert cfg.format.key_schemas_enable is False and cfg.format.value_schemas_enable is True
    assert cfg.origin.warnings == ()


def test_errors_max_retries_is_not_ignored() -> None:
    cfg = from_mapping(plain(errors__max__retries="3"))
    assert cfg.origin.properties["errors.max.retries"] == 3 and cfg.origin.warnings == ()


# --------------------------------------------------------------------------- what Tidemark does with each key
# Keys the settings layer consumes itself: the connector class, converter declarations (custom
# Java converters are refused or ignored there), the sanitize pattern (redaction) and
# snapshot.mode (checked against the modes this release implements).
READ_BY_VALIDATION = {"connector.class", "converters", "custom.sanitize.pattern", "snapshot.mode"}


def _read_by_code() -> set[str]:
    """Catalog keys some code reads: a field of a typed settings model, accessed as an attribute
    (`.decimal_handling_mode`) somewhere in connectors/ outside the settings package. The
    include/exclude lists are read by name through `getattr` in the nothing-captured warnings
    and by the filters; they count through the filters' attribute reads."""
    root = Path(__file__).resolve().parent.parent / "connectors"
    text = "\n".join(p.read_text() for p in root.rglob("*.py") if "settings" not in p.parts)
    text += (root / "settings" / "filters.py").read_text()
    out = set()
    for model in (PostgresSettings, MySqlSettings, MariaDbSettings):
        for prop, name in property_names(model).items():
            if f".{name}" in text:
                out.add(prop)
    return out


def test_every_catalog_key_is_read_or_classified() -> None:
    """A key accepted silently must be one some code reads; every other key is ignored with a
    warning, limited to its default, or waits for snapshots/signals/notifications."""
    read = _read_by_code() | READ_BY_VALIDATION
    silent = []
    for name in sorted({k for cat in CATALOG.values() for k in cat}):
        classified = (
            name in DEFAULT_ONLY
            or any(p.fullmatch(name) for p, _ in NO_EFFECT)
            or any(p.fullmatch(name) for p, _ in NOT_YET)
        )
        if not classified and name not in read:
            silent.append(name)
    assert silent == []


def _other_value(prop: Prop) -> str:
    if prop.type == "bool":
        return "false" if prop.default else "true"
    if prop.type == "int":
        return str((prop.default or 0) + 7)
    if prop.type == "enum":
        return next(
            c for c in prop.choices if c != prop.default and c not in DEFAULT_ONLY[prop.name].accepted
        )
    return "x.y.Z"


DEFAULT_ONLY_CASES = [
    (name, conn) for name in sorted(DEFAULT_ONLY) for conn in ("postgres", "mysql") if name in CATALOG[conn]
]


def _base(connector: str) -> dict[str, str]:
    if connector == "postgres":
        return dict(PG_PLAIN)
    return {
        "connector.class": "mysql",
        "database.hostname": "h",
        "database.user": "u",
        "topic.prefix": "m",
        "snapshot.mode": "no_data",
        "debezium.sink.type": "delta",
    }


@pytest.mark.parametrize(("name", "connector"), DEFAULT_ONLY_CASES)
def test_default_only_keys(name: str, connector: str) -> None:
    prop = CATALOG[connector][name]
    value = _other_value(prop)
    msg = errors_of({**_base(connector), name: value})
    assert f"{name}={value}: not supported yet: {DEFAULT_ONLY[name].missing}; remove it" in msg
    if prop.default is not None:  # Debezium's default, stated explicitly, is accepted silently
        text = ",".join(prop.default) if isinstance(prop.default, list) else _scalar_text(prop.default)
        cfg = from_mapping({**_base(connector), name: text})
        assert cfg.origin.warnings == () and cfg.origin.properties[name] == prop.default


def test_default_only_messages() -> None:
    msg = errors_of(plain(include__schema__comments="true", guardrail__collections__max="3"))
    assert (
        "include.schema.comments=true: not supported yet: column comments in the schemas; remove it or "
        "set false"
    ) in msg
    assert (
        "guardrail.collections.max=3: not supported yet: a limit on the number of captured tables; remove "
        "it or set 0"
    ) in msg
    assert from_mapping(plain(lsn__flush__mode="connector")).origin.warnings == ()


def test_no_effect_keys_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    flat = plain(
        max__queue__size="10000",
        max__queue__size__in__bytes="0",
        database__query__timeout__ms="5",
        statistics__metrics__enabled="false",
        retriable__restart__connector__wait__ms="1",
        lsn__flush__timeout__action="warn",
        streaming__delay__ms="1000",
    )
    with caplog.at_level(logging.WARNING, logger="connectors.settings.config"):
        cfg = from_mapping(flat)
    assert len(cfg.origin.warnings) == 1 and cfg.origin.warnings[0].startswith(
        "ignoring properties Tidemark has no use for: "
    )
    w = cfg.origin.warnings[0]
    assert "max.queue.size, max.queue.size.in.bytes (Tidemark has no change-event queue" in w
    assert "database.query.timeout.ms (JDBC driver settings do not apply" in w
    assert "statistics.metrics.enabled (JMX metrics settings" in w
    assert "retriable.restart.connector.wait.ms (Tidemark reconnects by itself" in w
    assert "lsn.flush.timeout.action (Tidemark confirms the LSN" in w
    assert "streaming.delay.ms (" in w
    assert len([r for r in caplog.records if r.getMessage().startswith("ignoring")]) == 1
    # still type-checked, and Debezium's queue/batch rule still holds
    assert "max.queue.size=lots is not an integer" in errors_of(plain(max__queue__size="lots"))
    my = from_mapping({**_base("mysql"), "connect.keep.alive": "false", "ddl.parser.type": "legacy"})
    assert "connect.keep.alive (Tidemark reconnects by itself" in my.origin.warnings[0]
    assert "ddl.parser.type (Tidemark parses DDL with its own parser" in my.origin.warnings[0]


def test_snapshot_signal_notification_keys_not_yet(tmp_path: Path) -> None:
    extra = (
        "debezium.source.snapshot.fetch.size=100\n"
        "debezium.source.incremental.snapshot.chunk.size=512\n"
        "debezium.source.incremental.snapshot.allow.schema.changes=true\n"
        "debezium.source.snapshot.select.statement.overrides.public.c=SELECT * FROM public.c\n"
        "debezium.source.signal.data.collection=public.signals\n"
        "debezium.source.signal.consumer.security.protocol=SSL\n"
        "debezium.source.notification.enabled.channels=sink\n"
        "debezium.source.tasks.max=1\n"
    )
    cfg = load(write(tmp_path, "pg.properties", PG_SERVER + extra))
    assert len(cfg.origin.warnings) == 2
    ignoring, later = cfg.origin.warnings
    assert (
        ignoring.startswith("ignoring properties") and "tasks.max" in ignoring and "snapshot" not in ignoring
    )
    assert later.startswith("accepted but not used yet: ")
    # PostgreSQL's snapshots read snapshot.fetch.size, the overrides and the incremental chunk size;
    # incremental.snapshot.allow.schema.changes is a MySQL property (binlog DDL): not used here
    assert (
        "debezium.source.incremental.snapshot.allow.schema.changes (Tidemark's snapshots do not act on "
        "them yet)"
    ) in later
    assert "snapshot.fetch.size" not in later and "overrides" not in later and "chunk.size" not in later
    # signals and notifications are read now (connectors/signals/)
    assert "signal." not in later and "notification." not in later
    assert cfg.origin.properties["snapshot.fetch.size"] == 100
    assert "snapshot.fetch.size=many is not an integer" in errors_of(plain(snapshot__fetch__size="many"))
    # snapshot.mode itself is checked, not deferred
    assert from_mapping(plain(snapshot__mode="never")).origin.warnings == ()


def test_transforms_refused() -> None:
    msg = errors_of(
        plain(transforms="unwrap", transforms__unwrap__type="io.debezium.transforms.ExtractNewRecordState")
    )
    assert (
        "transforms, transforms.unwrap.type: not supported yet: Kafka Connect single message transforms and "
        "predicates (Java classes)"
    ) in msg
    assert msg.count("not supported yet") == 1


# --------------------------------------------------------------------------- prefix families and helpers
def test_prefix_families_and_column_rules() -> None:
    cfg = from_mapping(
        plain(
            **{
                "column.mask.with.5.chars": "public.c.ssn",
                "column.mask.hash.SHA-256.with.salt.CzQMA0cB5K": "public.c.email,public.c.phone",
                "column.mask.hash.v2.SHA-256.with.salt.s2": "public.c.name",
                "column.truncate.to.10.chars": "public.c.note",
                "snapshot.select.statement.overrides": "public.c",
                "snapshot.select.statement.overrides.public.c": "SELECT * FROM public.c WHERE id > 10",
                "signal.consumer.security.protocol": "SSL",
            }
        )
    )
    masks = {k: v for k, v in cfg.origin.properties.items() if k.startswith("column.mask.with.")}
    assert masks == {"column.mask.with.5.chars": ["public.c.ssn"]}
    rules = cfg.source.column_rules
    kinds = [(r.kind, r.length, r.algorithm, r.salt) for r in rules]
    assert ("mask", 5, None, None) in kinds
    assert ("hash", None, "SHA-256", "CzQMA0cB5K") in kinds
    assert ("hash_v2", None, "SHA-256", "s2") in kinds
    assert ("truncate", 10, None, None) in kinds
    hash_rule = next(r for r in rules if r.kind == "hash")
    assert hash_rule.hashlib_name == "sha256"
    assert [p.pattern for p in hash_rule.patterns] == [r"\A(?:public.c.email)\Z", r"\A(?:public.c.phone)\Z"]
    assert dict(cfg.source.select_overrides) == {"public.c": "SELECT * FROM public.c WHERE id > 10"}
    assert cfg.origin.properties["signal.consumer.security.protocol"] == "SSL"


def test_regexes_are_anchored_and_case_insensitive() -> None:
    cfg = from_mapping(plain(table__include__list="public\\.orders,inv\\.a\\,b,public\\.cust.*"))
    assert cfg.origin.properties["table.include.list"] == ["public\\.orders", "inv\\.a,b", "public\\.cust.*"]
    assert cfg.origin.source_text["table.include.list"] == "public\\.orders,inv\\.a\\,b,public\\.cust.*"
    pats = [compile_regex(p) for p in cfg.source.table_include_list]
    assert all(isinstance(p, re.Pattern) for p in pats)
    assert pats[0].match("PUBLIC.ORDERS")
    assert not pats[0].match("public.orders_archive")
    assert not pats[0].search("x.public.orders")
    assert pats[2].match("public.customers")
    assert cfg.source.schema_include_list == ()


def test_driver_keys_ignored() -> None:
    cfg = from_mapping(plain(driver__connectTimeout="10"))
    assert "driver.connectTimeout" in cfg.origin.warnings[0]


# --------------------------------------------------------------------------- secrets
def test_redaction_and_repr(caplog: pytest.LogCaptureFixture) -> None:
    flat = plain(
        database__sslpassword="keypw",
        debezium__sink__type="kafka",
        **{
            "debezium.sink.kafka.producer.bootstrap.servers": "b:9092",
            "debezium.sink.kafka.producer.sasl.jaas.config": "org.apache...PlainLoginModule required password='x';",
            "debezium.sink.kafka.producer.ssl.key.password": "sslkeypw",
            "debezium.sink.kafka.producer.basic.auth.user.info": "u:p",
            "debezium.sink.kafka.producer.client.secret": "cs",
        },
    )
    with caplog.at_level(logging.DEBUG):
        cfg = from_mapping(flat)
    red = cfg.origin.redacted()
    assert red["database.password"] == "********"
    assert red["database.sslpassword"] == "********"
    assert red["debezium.sink.kafka.producer.sasl.jaas.config"] == "********"
    assert red["debezium.sink.kafka.producer.ssl.key.password"] == "********"
    assert red["debezium.sink.kafka.producer.basic.auth.user.info"] == "********"
    assert red["debezium.sink.kafka.producer.client.secret"] == "********"
    assert red["database.hostname"] == "localhost"
    assert "hunter2" not in repr(cfg) + repr(cfg.source) + str(cfg.source)
    assert cfg.source.database_password.get_secret_value() == "hunter2"  # still usable
    for secret in ("hunter2", "keypw", "sslkeypw", "u:p"):
        assert secret not in repr(cfg) and secret not in str(cfg)
        assert secret not in caplog.text


def test_delta_sink_keys(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from connectors.sinks.delta import DeltaChangeLogSink

    table = tmp_path / "cl"
    flat = plain(
        debezium__sink__type="delta",
        **{
            "debezium.sink.delta.table.path": str(table),
            "debezium.sink.delta.storage.AWS_SECRET_ACCESS_KEY": "s3cr3tkey",
            "debezium.sink.delta.storage.azure_storage_sas_token": "sv=2024&sig=abc",
            "debezium.sink.delta.storage.allow_http": "true",
        },
    )
    with caplog.at_level(logging.DEBUG):
        cfg = from_mapping(flat)
    assert cfg.origin.warnings == ()
    assert cfg.sink.delta.table_path == str(table)
    assert cfg.sink.delta.storage["AWS_SECRET_ACCESS_KEY"].get_secret_value() == "s3cr3tkey"
    red = cfg.origin.redacted()
    for key in ("AWS_SECRET_ACCESS_KEY", "azure_storage_sas_token", "allow_http"):
        assert red[f"debezium.sink.delta.storage.{key}"] == "********"
    assert red["debezium.sink.delta.table.path"] == str(table)
    for secret in ("s3cr3tkey", "sig=abc"):
        assert secret not in repr(cfg) and secret not in caplog.text
    # the Delta sink reads both: the table location and its storage options
    sink = DeltaChangeLogSink.from_config(cfg)
    assert sink.table_uri == str(table)
    assert sink._storage == {
        "AWS_SECRET_ACCESS_KEY": "s3cr3tkey",
        "azure_storage_sas_token": "sv=2024&sig=abc",
        "allow_http": "true",
    }
    # a storage option next to an invalid key: the error names keys, never storage values
    msg = errors_of({**flat, "debezium.sink.delta.tabel.path": "x"})
    assert "did you mean 'debezium.sink.delta.table.path'" in msg and "s3cr3tkey" not in msg


def test_password_not_in_error_message() -> None:
    msg = errors_of(plain(databse__password="hunter2x"))
    assert "hunter2" not in msg


def test_custom_sanitize_pattern_extends() -> None:
    cfg = from_mapping(plain(custom__sanitize__pattern=".*hostname$"))
    assert cfg.origin.redacted()["database.hostname"] == "********"
    assert cfg.origin.redacted()["database.password"] == "********"


# --------------------------------------------------------------------------- catalog and examples
def test_catalog_has_both_connectors_properties() -> None:
    pg, my = CATALOG["postgres"], CATALOG["mysql"]
    for name in (
        "slot.name",
        "publication.autocreate.mode",
        "hstore.handling.mode",
        "interval.handling.mode",
    ):
        assert name in pg and name not in my
    for name in (
        "database.server.id",
        "bigint.unsigned.handling.mode",
        "gtid.source.includes",
        "include.query",
    ):
        assert name in my and name not in pg
    assert pg["publication.autocreate.mode"].choices == ("all_tables", "disabled", "filtered", "no_tables")
    assert pg["database.password"].type == "password"
    assert my["table.include.list"].type == "regex-list"


@pytest.mark.parametrize(
    "name", ["postgres.properties", "postgres.yaml", "mysql.properties", "mariadb.properties"]
)
def test_examples_load(name: str) -> None:
    cfg = load(EXAMPLES / name)
    assert cfg.connector in ("postgres", "mysql", "mariadb")
    assert cfg.sink_types
    if name.startswith("postgres"):
        assert list(cfg.sink_types) == ["kafka", "delta", "jsonl"]
        assert cfg.connector == "postgres"
    assert not [w for w in cfg.origin.warnings if "deprecated" in w]


def test_postgres_examples_agree() -> None:
    a, b = load(EXAMPLES / "postgres.properties"), load(EXAMPLES / "postgres.yaml")
    assert a.source == b.source
    assert a.sink == b.sink
    assert a.warehouse == b.warehouse


def test_module_exports() -> None:
    assert config.ConfigError is ConfigError
