"""Sink contract: one suite, run against every sink (kafka-confluent, kafka-python, delta, jsonl).

Kafka runs against tansu. The broker comes from the shared `kafka` fixture (tests/conftest.py)
when it exists, else from a private tansu started here (memory storage, free port). Topics are
read back by assigning partitions with kafka-python: consumer groups do not work on tansu.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from connectors.api import Batch, ConfigError, Record, TerminalError, TransientError
from connectors.format.schema import prim, struct
from connectors.sinks.common import serialized, serialized_batch

# --------------------------------------------------------------------------- records
KEY_SCHEMA = struct("srv.public.t.Key", [("id", prim("int32"))])
ROW = struct("srv.public.t.Value", [("id", prim("int32")), ("name", prim("string", True))], optional=True)
SOURCE = struct(
    "io.debezium.connector.postgresql.Source",
    [("ts_ms", prim("int64")), ("lsn", prim("int64", True)), ("txId", prim("int64", True))],
)
ENVELOPE = struct(
    "srv.public.t.Envelope",
    [
        ("before", ROW),
        ("after", ROW),
        ("source", SOURCE),
        ("op", prim("string")),
        ("ts_ms", prim("int64", True)),
    ],
    version=2,
)
TXN_SCHEMA = struct(
    "io.debezium.connector.common.TransactionMetadataValue",
    [("status", prim("string")), ("id", prim("string"))],
)


def change(
    topic: str,
    op: str,
    id_: int,
    before: dict | None,
    after: dict | None,
    lsn: int,
    *,
    headers: tuple[tuple[str, bytes], ...] = (),
    keyless: bool = False,
) -> Record:
    value = {
        "before": before,
        "after": after,
        "op": op,
        "ts_ms": 1_700_000_000_000 + lsn,
        "source": {"ts_ms": 1_699_999_999_000 + lsn, "lsn": lsn, "txId": 700 + lsn},
    }
    return Record(
        topic,
        None if keyless else {"id": id_},
        value,
        None if keyless else KEY_SCHEMA,
        ENVELOPE,
        headers,
        "public.t",
        {"lsn": lsn},
    )


def tombstone(topic: str, id_: int) -> Record:
    return Record(topic, {"id": id_}, None, KEY_SCHEMA, None, (), "public.t", None)


def sample_batches(topic: str) -> list[Batch]:
    """Inserts, an update with headers, a delete + tombstone, a keyless record, a txn record."""
    b1 = [
        change(topic, "c", 1, None, {"id": 1, "name": "a"}, 100),
        change(
            topic, "c", 2, None, {"id": 2, "name": "ünï"}, 101, headers=(("h1", b"x"), ("bin", b"\x00\xff"))
        ),
        change(topic, "u", 1, {"id": 1, "name": "a"}, {"id": 1, "name": None}, 102),
    ]
    b2 = [
        change(topic, "d", 2, {"id": 2, "name": "ünï"}, None, 103),
        tombstone(topic, 2),
        change(topic, "c", 9, None, {"id": 9, "name": "nokey"}, 104, keyless=True),
        Record(
            topic, {"id": "tx-1"}, {"status": "END", "id": "tx-1"}, None, TXN_SCHEMA, (), None, {"lsn": 104}
        ),
    ]
    return [Batch(b1, {"lsn": 102, "txId": 702}, seq=1), Batch(b2, {"lsn": 104, "txId": 704}, seq=2)]


@dataclass
class Got:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] | None  # None: the sink does not carry headers


def expected(batches: list[Batch], ks: bool = True, vs: bool = True) -> list[Got]:
    return [Got(r.topic, *serialized(r, ks, vs), r.headers) for b in batches for r in b.records]


# --------------------------------------------------------------------------- kafka broker
@pytest.fixture(scope="session")
def bootstrap(kafka: Any) -> str:
    """The shared tansu broker (tests/conftest.py `kafka`)."""
    return str(kafka.bootstrap)


def read_topic(bootstrap: str, topic: str, expect: int, timeout: float = 20.0) -> list[Got]:
    """Every record of `topic`, partition by partition, by assignment (tansu has no consumer groups).

    confluent-kafka reads every codec; kafka-python cannot decode lz4 (the confluent sink's
    default) without the optional `lz4` package, see test_kafka_python_reads_gzip_sinks.
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused-no-commits",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        out: dict[int, list[Got]] = {p: [] for p in parts}
        at_eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (
            len(at_eof) < len(parts) or sum(map(len, out.values())) < expect
        ):
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    at_eof.add(m.partition())
                    continue
                raise AssertionError(f"read {topic}: {m.error()}")
            at_eof.discard(m.partition())
            out[m.partition()].append(Got(m.topic(), m.key(), m.value(), tuple(m.headers() or ())))
        return [g for p in parts for g in out[p]]
    finally:
        c.close()


# --------------------------------------------------------------------------- harnesses
def _dump(x: Any) -> bytes | None:
    return None if x is None else orjson.dumps(x)


def _load(b: bytes | None) -> Any:
    return None if b is None else orjson.loads(b)


@dataclass
class Harness:
    make: Callable[[], Any]  # a new sink instance (a "restart")
    read: Callable[[int], list[Got]]  # everything the sink holds, in order
    topic: str


def _kafka_harness(client: str, bootstrap: str, topic: str) -> Harness:
    from connectors.sinks.kafka import KafkaSink

    def make() -> Any:
        return KafkaSink(
            {"bootstrap.servers": bootstrap},
            client=client,  # type: ignore[arg-type]
            topic_partitions=1,
        )

    return Harness(make, lambda n: read_topic(bootstrap, topic, n), topic)


def _delta_harness(tmp: Path, topic: str) -> Harness:
    from deltalake import DeltaTable

    from connectors.sinks.delta import DeltaChangeLogSink, kafka_key, kafka_value

    uri = tmp / "wh" / "srv" / "changelog"

    def read(_: int) -> list[Got]:
        t = (
            DeltaTable(str(uri))
            .to_pyarrow_table()
            .sort_by([("batch_seq", "ascending"), ("event_index", "ascending")])
        )
        out = []
        for row in t.to_pylist():
            hs = tuple((h["key"], base64.b64decode(h["value"])) for h in orjson.loads(row["headers"] or "[]"))
            out.append(Got(row["topic"], kafka_key(row), kafka_value(row), hs))
        return out

    return Harness(lambda: DeltaChangeLogSink(uri, "conn1"), read, topic)


def _jsonl_harness(tmp: Path, topic: str) -> Harness:
    from connectors.sinks.jsonl import JsonLinesSink

    path = tmp / "out" / "events.jsonl"

    def read(_: int) -> list[Got]:
        out = []
        for line in path.read_bytes().splitlines():
            d = orjson.loads(line)
            out.append(Got(d["topic"], _dump(d["key"]), _dump(d["value"]), None))
        return out

    return Harness(lambda: JsonLinesSink(path), read, topic)


SINKS = [
    pytest.param("kafka-confluent", marks=pytest.mark.kafka),
    pytest.param("kafka-python", marks=pytest.mark.kafka),
    "delta",
    "jsonl",
]


@pytest.fixture(params=SINKS)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    topic = f"srv.public.t_{uuid.uuid4().hex[:10]}"
    kind = request.param
    if kind.startswith("kafka"):
        bs = request.getfixturevalue("bootstrap")
        return _kafka_harness("confluent" if kind == "kafka-confluent" else "kafka-python", bs, topic)
    if kind == "delta":
        return _delta_harness(tmp_path, topic)
    return _jsonl_harness(tmp_path, topic)


def _canon(g: Got) -> tuple[Any, ...]:
    # Compare JSON semantically (jsonl re-reads go through a parser), bytes elsewhere stay exact.
    return (g.topic, _load(g.key), _load(g.value))


# --------------------------------------------------------------------------- the contract
def test_contract_write_read_back_in_order(harness: Harness) -> None:
    batches = sample_batches(harness.topic)
    sink = harness.make()
    try:
        for b in batches:
            sink.write(b)  # returns only when durable: read back right away
    finally:
        sink.close()
    want = expected(batches)
    got = harness.read(len(want))
    assert [_canon(g) for g in got] == [_canon(w) for w in want]
    for g, w in zip(got, want, strict=True):
        if g.headers is not None:
            assert g.headers == w.headers
        if sink.name != "jsonl":
            assert (g.key, g.value) == (w.key, w.value)  # byte-exact
    assert any(g.value is None for g in got), "tombstone kept"
    assert any(g.key is None for g in got), "keyless record kept"


def test_contract_last_offset(harness: Harness) -> None:
    sink = harness.make()
    try:
        assert sink.last_offset() is None
        for b in sample_batches(harness.topic):
            sink.write(b)
        lo = sink.last_offset()
    finally:
        sink.close()
    if sink.name == "delta":
        assert lo == (2, {"lsn": 104, "txId": 704})
    else:
        assert lo is None  # Kafka/jsonl keep no offsets: the offset store does


def test_contract_empty_batch(harness: Harness) -> None:
    sink = harness.make()
    try:
        sink.write(Batch([], {"lsn": 5}, seq=1))
        if sink.name == "delta":
            assert sink.last_offset() == (1, {"lsn": 5})  # offset advances with no rows
    finally:
        sink.close()


# --------------------------------------------------------------------------- delta specifics
def test_delta_restart_does_not_duplicate(tmp_path: Path) -> None:
    h = _delta_harness(tmp_path, "srv.public.t")
    b1, b2 = sample_batches(h.topic)
    s = h.make()
    s.write(b1)
    s.write(b2)
    s.close()
    s2 = h.make()  # simulated restart
    assert s2.last_offset() == (2, {"lsn": 104, "txId": 704})
    s2.write(b2)  # the engine would skip it; the sink must not duplicate either
    assert len(h.read(0)) == len(b1.records) + len(b2.records)
    b3 = Batch([change(h.topic, "c", 3, None, {"id": 3, "name": "c"}, 105)], {"lsn": 105}, seq=3)
    s2.write(b3)
    assert h.make().last_offset() == (3, {"lsn": 105})
    assert len(h.read(0)) == len(b1.records) + len(b2.records) + 1


def test_delta_columns(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    from connectors.sinks.delta import SCHEMA

    h = _delta_harness(tmp_path, "srv.public.t")
    s = h.make()
    for b in sample_batches(h.topic):
        s.write(b)
    dt = DeltaTable(str(tmp_path / "wh" / "srv" / "changelog"))
    assert dt.metadata().partition_columns == ["collection"]
    assert dt.history(1)[0]["tidemark.batch_seq"] == "2"
    t = dt.to_pyarrow_table().sort_by([("batch_seq", "ascending"), ("event_index", "ascending")])
    assert t.schema.names == SCHEMA.names
    rows = t.to_pylist()
    upd = rows[2]
    assert upd["op"] == "u" and upd["lsn"] == 102 and upd["tx_id"] == 802 and upd["binlog_file"] is None
    assert upd["source_ts_ms"] == 1_699_999_999_102 and upd["ts_ms"] == 1_700_000_000_102
    assert orjson.loads(upd["before"]) == {"id": 1, "name": "a"}
    assert orjson.loads(upd["after"]) == {"id": 1, "name": None}
    assert orjson.loads(upd["key"]) == {"id": 1}
    assert orjson.loads(upd["value_schema"])["name"] == "srv.public.t.Envelope"
    assert orjson.loads(upd["key_schema"])["name"] == "srv.public.t.Key"
    tomb = rows[4]
    assert tomb["is_tombstone"] and tomb["value_schema"] is None and tomb["op"] is None
    assert rows[5]["key"] is None and rows[5]["key_schema"] is None
    assert orjson.loads(rows[6]["payload"]) == {"status": "END", "id": "tx-1"}
    assert rows[6]["collection"] == "__meta" and rows[6]["op"] is None
    assert [r["event_index"] for r in rows] == [0, 1, 2, 0, 1, 2, 3]


@pytest.mark.parametrize("schemas", [(True, True), (False, False), (True, False)])
def test_delta_rebuilds_kafka_records_byte_exact(tmp_path: Path, schemas: tuple[bool, bool]) -> None:
    """Change events are stored as columns (no payload copy) and schemas once per batch; the
    Kafka key/value rebuilt from a row equals what the Kafka sink sends, byte for byte."""
    from deltalake import DeltaTable

    from connectors.format.envelope import change_value
    from connectors.sinks.delta import DeltaChangeLogSink, kafka_key, kafka_value

    ks, vs = schemas
    src = {"ts_ms": 1, "lsn": 7, "txId": 3}
    recs = [
        Record(
            "srv.public.t",
            {"id": i},
            change_value(
                None,
                {"id": i, "name": f"n{i}"},
                src,
                "c",
                {"id": "3:7", "total_order": i, "data_collection_order": i},
            ),
            KEY_SCHEMA,
            ENVELOPE,
            (),
            "public.t",
            None,
        )
        for i in range(3)
    ]
    recs.append(
        Record(
            "srv.public.t",
            {"id": 0},
            change_value({"id": 0, "name": "n0"}, None, src, "d", None),
            KEY_SCHEMA,
            ENVELOPE,
            (),
            "public.t",
            None,
        )
    )
    recs.append(tombstone("srv.public.t", 0))
    sink = DeltaChangeLogSink(tmp_path / "cl", "c", key_schemas_enable=ks, value_schemas_enable=vs)
    sink.write(Batch(recs, {"lsn": 7}, seq=1))
    rows = DeltaTable(str(tmp_path / "cl")).to_pyarrow_table().sort_by("event_index").to_pylist()
    assert all(r["payload"] is None for r in rows)  # envelopes live in their columns only
    assert [(kafka_key(r), kafka_value(r)) for r in rows] == [serialized(r, ks, vs) for r in recs]


def test_delta_mysql_positions(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    h = _delta_harness(tmp_path, "db.inv.t")
    src = {"ts_ms": 5, "file": "mysql-bin.000003", "pos": 154, "row": 1, "gtid": "0-1-100", "server_id": 1}
    r = Record(
        "db.inv.t",
        {"id": 1},
        {"before": None, "after": {"id": 1}, "source": src, "op": "c", "ts_ms": 6},
        KEY_SCHEMA,
        None,
        (),
        "inv.t",
        None,
    )
    h.make().write(Batch([r], {"file": "mysql-bin.000003", "pos": 154}, seq=1))
    row = DeltaTable(str(tmp_path / "wh" / "srv" / "changelog")).to_pyarrow_table().to_pylist()[0]
    assert (row["binlog_file"], row["binlog_pos"], row["row"], row["gtid"], row["lsn"]) == (
        "mysql-bin.000003",
        154,
        1,
        "0-1-100",
        None,
    )


# --------------------------------------------------------------------------- kafka specifics
@pytest.mark.kafka
def test_jsonl_equals_kafka(bootstrap: str, tmp_path: Path) -> None:
    from connectors.sinks.jsonl import JsonLinesSink
    from connectors.sinks.kafka import KafkaSink

    topic = f"srv.public.t_{uuid.uuid4().hex[:10]}"
    k = KafkaSink({"bootstrap.servers": bootstrap}, topic_partitions=1, key_schemas_enable=False)
    j = JsonLinesSink(tmp_path / "x.jsonl", key_schemas_enable=False)
    batches = sample_batches(topic)
    for b in batches:
        k.write(b)
        j.write(b)
    k.close()
    j.close()
    got = read_topic(bootstrap, topic, 7)
    lines = (tmp_path / "x.jsonl").read_bytes().splitlines()
    assert len(lines) == len(got) == 7
    for line, g in zip(lines, got, strict=True):
        # The line is the Kafka bytes spliced in, byte for byte.
        assert line == (
            b'{"topic":'
            + orjson.dumps(g.topic)
            + b',"key":'
            + (g.key or b"null")
            + b',"value":'
            + (g.value or b"null")
            + b"}"
        )


def test_serialize_once_per_batch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import connectors.sinks.common as sinks
    from connectors.sinks.delta import DeltaChangeLogSink
    from connectors.sinks.jsonl import JsonLinesSink

    calls = {"n": 0}
    real = sinks.to_json_bytes

    def counting(*a: Any) -> bytes | None:
        calls["n"] += 1
        return real(*a)

    monkeypatch.setattr(sinks, "to_json_bytes", counting)
    b = sample_batches("t")[0]
    JsonLinesSink(tmp_path / "a.jsonl").write(b)
    DeltaChangeLogSink(tmp_path / "d", "c").write(b)
    assert calls["n"] == 2 * len(b.records)
    assert serialized_batch(b) is serialized_batch(b)
    assert serialized_batch(b, False, True) is not serialized_batch(b)


def test_kafka_config_errors() -> None:
    from connectors.sinks.kafka import KafkaSink, kafka_python_config

    with pytest.raises(ConfigError, match="bootstrap.servers"):
        KafkaSink({})
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        KafkaSink({"linger.ms": 5}, client="kafka-python")
    with pytest.raises(ConfigError, match="kafka.client"):
        KafkaSink({"bootstrap.servers": "x:1"}, client="nope")  # type: ignore[arg-type]
    kw = kafka_python_config(
        {
            "bootstrap.servers": "a:1,b:2",
            "linger.ms": "5",
            "acks": "-1",
            "enable.idempotence": "false",
            "key.serializer": "org.x.ByteArraySerializer",
            "sasl.jaas.config": 'org.x.PlainLoginModule required username="u" password="p";',
        }
    )
    assert kw["bootstrap_servers"] == ["a:1", "b:2"] and kw["linger_ms"] == 5 and kw["acks"] == "all"
    assert kw["enable_idempotence"] is False and kw["compression_type"] == "gzip"
    assert (kw["sasl_plain_username"], kw["sasl_plain_password"]) == ("u", "p")
    with pytest.raises(ConfigError, match="not supported"):
        kafka_python_config({"bootstrap.servers": "a:1", "linger.mss": 1})


def test_build_sinks_from_config(tmp_path: Path) -> None:
    from cfgutil import config

    from connectors.sinks import build_sinks

    cfg = config(
        "postgres",
        {"topic.prefix": "srv", "name": "c1", "tidemark.warehouse": str(tmp_path)},
        debezium__sink__type="delta,jsonl",
        debezium__sink__jsonl__path=str(tmp_path / "o.jsonl"),
        debezium__format__value__schemas__enable="false",
    )
    sinks = build_sinks(cfg)
    assert [s.name for s in sinks] == ["delta", "jsonl"]
    assert sinks[0].table_uri == f"{tmp_path}/srv/changelog"
    assert (sinks[1]._ks, sinks[1]._vs) == (True, False)


@pytest.mark.kafka
@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_kafka_missing_topic_without_creation_is_terminal(bootstrap: str, client: str) -> None:
    from connectors.sinks.kafka import KafkaSink

    sink = KafkaSink({"bootstrap.servers": bootstrap}, client=client, topic_creation=False)  # type: ignore[arg-type]
    try:
        with pytest.raises(TerminalError, match="do not exist"):
            sink.write(sample_batches(f"missing_{uuid.uuid4().hex[:8]}")[0])
    finally:
        sink.close()


@pytest.mark.kafka
@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_kafka_topic_created_by_another_client_first_is_tolerated(
    kafka: Any, bootstrap: str, client: str
) -> None:
    """Another client creates the topic between the sink's listing and its create request: the
    broker's TOPIC_ALREADY_EXISTS is no error (the shared TopicCreator, with either client's
    admin), and the batch is delivered."""
    from connectors.sinks.kafka import KafkaSink, TopicCreator

    topic = kafka.create_topic(f"raced_{uuid.uuid4().hex[:8]}")
    sink = KafkaSink({"bootstrap.servers": bootstrap}, client=client)  # type: ignore[arg-type]
    creator = sink._producer._topics  # type: ignore[attr-defined]
    assert isinstance(creator, TopicCreator)
    real = creator._open()

    class StaleListing:  # the real admin, listing the topics as they were before the other client
        errors = real.errors

        def list_topics(self) -> set[str]:
            return set()

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    creator._admin = StaleListing()  # type: ignore[assignment]
    try:
        sink.write(sample_batches(topic)[0])
    finally:
        sink.close()
    assert len(kafka.read_all(topic, min_count=3)) == 3


@pytest.mark.kafka
@pytest.mark.parametrize(
    ("client", "limit"), [("confluent", "message.max.bytes"), ("kafka-python", "max.request.size")]
)
def test_kafka_record_too_large_is_terminal(bootstrap: str, client: str, limit: str) -> None:
    from connectors.sinks.kafka import KafkaSink

    topic = f"big_{uuid.uuid4().hex[:8]}"
    sink = KafkaSink({"bootstrap.servers": bootstrap, limit: 2000}, client=client)  # type: ignore[arg-type]
    big = change(topic, "c", 1, None, {"id": 1, "name": "x" * 5000}, 1)
    try:
        with pytest.raises(TerminalError, match="(?i)too large|larger than"):
            sink.write(Batch([big], {"lsn": 1}, seq=1))
    finally:
        sink.close()


@pytest.mark.kafka
def test_kafka_unreachable_broker_is_transient() -> None:
    from connectors.sinks.kafka import KafkaSink

    sink = KafkaSink({"bootstrap.servers": "127.0.0.1:9", "message.timeout.ms": 1000})
    sink._producer.ensure_topics = lambda topics: None  # type: ignore[method-assign]
    try:
        with pytest.raises(TransientError, match="not acknowledged|delivery failed"):
            sink.write(sample_batches("t")[0])
    finally:
        sink.close()


def test_confluent_producer_close_stops_the_client_threads() -> None:
    """close() ends librdkafka's threads at once, not at some later garbage collection: a
    closed producer must not go on reconnecting to a broker that is gone (it did, through the
    cycle its callbacks bound to the producer make)."""
    import gc
    import os

    from connectors.sinks.kafka import ConfluentProducer

    def rdkafka_threads() -> set[str]:
        """The process's librdkafka threads ("rdk:main", "rdk:broker-1", ...), native threads
        that `threading` misses. Only these: other threads of the test process come and go (a
        count of all of them once read one more after close than before)."""
        found = set()
        for tid in os.listdir("/proc/self/task"):
            try:
                name = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
            except FileNotFoundError:  # a thread that ended while we listed
                continue
            if name.startswith("rdk:"):
                found.add(tid)
        return found

    gc.disable()  # no collector pass may hide a cycle
    try:
        before = rdkafka_threads()
        producer = ConfluentProducer({"bootstrap.servers": "127.0.0.1:9"})
        started = rdkafka_threads() - before
        assert started  # librdkafka started its threads
        producer.close()
        assert not (rdkafka_threads() & started)
        producer.close()  # a second close is harmless
    finally:
        gc.enable()


# --------------------------------------------------------------------------- throughput
def _bench_batches(topic: str, n: int, per_batch: int) -> Iterator[Batch]:
    """Batches built one at a time, as the engine hands them over (one batch alive)."""
    pad = "x" * 330  # ~500-byte Kafka values with schemas off
    for seq, start in enumerate(range(0, n, per_batch), 1):
        recs = [
            change(topic, "c", i, None, {"id": i, "name": pad}, i) for i in range(start, start + per_batch)
        ]
        yield Batch(recs, {"lsn": start + per_batch}, seq=seq)


def _timed_writes(sink: Any, batches: Iterator[Batch]) -> float:
    spent = 0.0
    for b in batches:
        t = time.perf_counter()
        sink.write(b)  # includes serialization: that is part of the sink's cost
        spent += time.perf_counter() - t
    return spent


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_bench_kafka(bootstrap: str, client: str) -> None:
    from connectors.sinks.kafka import KafkaSink

    topic = f"bench_{client}_{uuid.uuid4().hex[:6]}"
    first = next(_bench_batches(topic, 1, 1))
    size = len(serialized(first.records[0], False, False)[1] or b"")
    sink = KafkaSink(
        {"bootstrap.servers": bootstrap},
        client=client,  # type: ignore[arg-type]
        key_schemas_enable=False,
        value_schemas_enable=False,
        topic_partitions=1,
    )
    sink.write(first)  # topic creation + connection outside the timing
    dt = _timed_writes(sink, _bench_batches(topic, 100_000, 10_000))
    sink.close()
    print(f"\nkafka {client}: 100000 records of {size} B in {dt:.2f} s = {100_000 / dt:,.0f} records/s")


@pytest.mark.slow
def test_bench_delta(tmp_path: Path) -> None:
    from connectors.sinks.delta import DeltaChangeLogSink

    sink = DeltaChangeLogSink(tmp_path / "changelog", "bench")  # schemas on: the `value` column is big
    dt = _timed_writes(sink, _bench_batches("srv.public.t", 100_000, 1000))
    print(f"\ndelta: 100000 records in 100 commits in {dt:.2f} s = {100_000 / dt:,.0f} records/s")
    assert sink.last_offset() == (100, {"lsn": 100_000})


@pytest.mark.kafka
def test_kafka_python_reads_gzip_sinks(kafka: Any) -> None:
    """kafka-python consumers (the shared harness reader) read what both clients produce with gzip."""
    from connectors.sinks.kafka import KafkaSink

    for client, extra in (("kafka-python", {}), ("confluent", {"compression.type": "gzip"})):
        topic = f"srv.public.t_{uuid.uuid4().hex[:10]}"
        sink = KafkaSink(
            {"bootstrap.servers": kafka.bootstrap, **extra},
            client=client,  # type: ignore[arg-type]
            topic_partitions=1,
        )
        batches = sample_batches(topic)
        for b in batches:
            sink.write(b)
        sink.close()
        got = kafka.read_all(topic, min_count=7)
        want = expected(batches)
        assert [(k, v, list(h)) for k, v, h in got] == [(w.key, w.value, list(w.headers or ())) for w in want]


def test_context_headers_on_data_change_records(tmp_path: Path, bootstrap: str) -> None:
    """extended.headers.enabled: the four __debezium.context.* headers follow a record's own
    headers on data-change records (tombstones included), not on transaction records; Kafka and
    the Delta change log carry the same ones, and runId is one UUIDv7 per connector start."""
    from deltalake import DeltaTable

    from connectors.format.envelope import context_headers
    from connectors.sinks.delta import DeltaChangeLogSink
    from connectors.sinks.kafka import KafkaSink

    ctx = context_headers("srv", "postgres")
    names = [h[0] for h in ctx]
    assert names == [
        "__debezium.context.connectorLogicalName",
        "__debezium.context.taskId",
        "__debezium.context.connectorName",
        "__debezium.context.runId",
    ]
    values = [orjson.loads(h[1]) for h in ctx]
    assert values[:3] == [
        {"schema": {"type": "string", "optional": False}, "payload": p} for p in ("srv", "0", "postgresql")
    ]
    assert uuid.UUID(values[3]["payload"]).version == 7
    assert context_headers("srv", "postgres")[3] != ctx[3]  # a new run, a new runId

    topic = f"srv.public.t_{uuid.uuid4().hex[:10]}"
    batches = sample_batches(topic)
    want = [r.headers + ctx if r.collection is not None else r.headers for b in batches for r in b.records]
    kafka = KafkaSink({"bootstrap.servers": bootstrap}, topic_partitions=1, context=ctx)
    delta = DeltaChangeLogSink(tmp_path / "cl", "c", context=ctx)
    for b in batches:
        kafka.write(b)
        delta.write(b)
    kafka.close()
    got = read_topic(bootstrap, topic, len(want))
    assert [g.headers for g in got] == want
    rows = (
        DeltaTable(str(tmp_path / "cl"))
        .to_pyarrow_table()
        .sort_by([("batch_seq", "ascending"), ("event_index", "ascending")])
    )
    assert [
        tuple((h["key"], base64.b64decode(h["value"])) for h in orjson.loads(r or "[]"))
        for r in rows["headers"].to_pylist()
    ] == want


@pytest.mark.kafka
@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_keys_land_on_the_java_clients_partition(bootstrap: str, client: str) -> None:
    """A keyed record goes to the partition Kafka Connect's producer (Debezium) sends it to:
    murmur2 of the key bytes, made positive, modulo the partition count."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    from kafka.partitioner.default import murmur2

    from connectors.sinks.kafka import KafkaSink

    topic = f"srv.public.p_{uuid.uuid4().hex[:10]}"
    sink = KafkaSink({"bootstrap.servers": bootstrap}, client=client, topic_partitions=4)  # type: ignore[arg-type]
    sink.write(
        Batch([change(topic, "c", i, None, {"id": i, "name": "x"}, 100 + i) for i in range(40)], {}, seq=1)
    )
    sink.close()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(4)])
        got: dict[bytes, int] = {}
        eof: set[int] = set()
        deadline = time.monotonic() + 20
        while (len(got) < 40 or len(eof) < 4) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                eof.add(m.partition())
                continue
            got[m.key()] = m.partition()
    finally:
        c.close()
    assert len(got) == 40
    assert {k: (murmur2(k) & 0x7FFFFFFF) % 4 for k in got} == got
    assert len(set(got.values())) == 4  # spread over every partition


def test_delta_change_log_compacts_its_small_files(tmp_path: Path) -> None:
    """Every `compact_files` added files the sink compacts the change log: the live file count
    stays bounded, the rows (and their order keys) are unchanged, and a restarted sink still
    finds its offset and skips batches already committed."""
    from deltalake import DeltaTable

    from connectors.sinks.delta import DeltaChangeLogSink

    uri = tmp_path / "changelog"
    sink = DeltaChangeLogSink(uri, "conn1", compact_files=6)
    written = []
    for seq in range(1, 13):  # two tables a batch: two files a commit
        recs = [
            change(f"srv.public.t{t}", "c", seq * 10 + t, None, {"id": seq * 10 + t}, seq) for t in (1, 2)
        ]
        sink.write(Batch(recs, {"lsn": seq}, seq=seq))
        written += [r.key for r in recs]
    dt = DeltaTable(str(uri))
    assert len(dt.file_uris()) <= 6 + 2  # compacted at 6 added files: never more than 6 small ones + 2
    assert any(h.get("operation") == "OPTIMIZE" for h in dt.history())
    rows = sorted(dt.to_pyarrow_table().to_pylist(), key=lambda r: (r["batch_seq"], r["event_index"]))
    assert [orjson.loads(r["key"]) for r in rows] == written
    again = DeltaChangeLogSink(uri, "conn1", compact_files=6)
    assert again.last_offset() == (12, {"lsn": 12})
    again.write(Batch([change("srv.public.t1", "c", 999, None, {"id": 999}, 99)], {"lsn": 99}, seq=12))
    assert DeltaTable(str(uri)).to_pyarrow_table().num_rows == 24  # seq 12 again: skipped


def test_jsonl_write_all_goes_on_after_short_writes(tmp_path: Path) -> None:
    """The jsonl sink writes a batch's pieces with writev, IOV_MAX pieces a call; a short write
    (a signal, a full pipe) goes on where it stopped. Here every call writes at most 7 bytes of
    what it is given, to a real file."""
    import os

    from connectors.sinks.jsonl import IOV_MAX, write_all

    parts = [f"piece-{i};".encode() for i in range(IOV_MAX * 2 + 5)] + [b"", b"end\n"]
    calls: list[int] = []

    def short_writev(fd: int, buffers: Any) -> int:
        calls.append(len(buffers))
        assert len(buffers) <= IOV_MAX
        return os.write(fd, b"".join(bytes(b) for b in buffers)[:7])

    path = tmp_path / "out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        write_all(fd, parts, short_writev)
        write_all(fd, [b"x" * 100, b"y"])  # the real os.writev
    finally:
        os.close(fd)
    assert path.read_bytes() == b"".join(parts) + b"x" * 100 + b"y"
    assert len(calls) > 3 and max(calls) == IOV_MAX
