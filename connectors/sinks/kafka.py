"""Kafka sink: every record of a batch produced, then flushed; returns only when all are acked.

Two clients behind one small `Producer` Protocol: confluent-kafka (librdkafka, default, fast)
and kafka-python (pure Python). Producer settings use the Kafka/librdkafka dotted names
(`debezium.sink.kafka.producer.*`); for kafka-python they are translated to its snake_case kwargs.
"""

from __future__ import annotations

import difflib
import functools
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

from connectors.api import Batch, ConfigError, TerminalError, TransientError
from connectors.settings.config import ConnectorConfig
from connectors.sinks.common import joined, schema_flags, serialized_batch, with_context

log = logging.getLogger(__name__)

Client = Literal["confluent", "kafka-python"]
Headers = Sequence[tuple[str, bytes]]

# Producer settings of snapshot tasks (KafkaSink.from_config(bulk=True)) unless configured.
# The local queue is bounded (128 MB): a full queue makes `send` wait for deliveries.
BULK_PRODUCER = {
    "compression.type": "lz4",
    "linger.ms": "20",
    "batch.size": "1048576",
    "queue.buffering.max.kbytes": "131072",
}

# Throughput and durability: all in-sync replicas ack, idempotent (no duplicates on internal
# retries, order kept), batches of up to 1 MB collected for up to 20 ms.
CONFLUENT_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 20,
    "batch.size": 1_000_000,
    "compression.type": "lz4",
    "delivery.timeout.ms": 120_000,
    # Kafka Connect's (the Java client's) partitioner: a key lands on the partition it does under
    # Debezium (librdkafka's default, consistent_random, hashes with CRC32 instead)
    "partitioner": "murmur2_random",
}
# kafka-python: lz4 needs the extra `lz4` package, gzip is built in (and faster than none there).
KAFKA_PYTHON_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 20,
    "batch.size": 1_000_000,
    "compression.type": "gzip",
    "delivery.timeout.ms": 120_000,
}
# Java client settings with no meaning here: we always send bytes.
_IGNORED = {"key.serializer", "value.serializer"}
# librdkafka / Java names kafka-python spells differently.
_KAFKA_PYTHON_NAMES = {
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "sasl.mechanisms": "sasl_mechanism",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "message.timeout.ms": "delivery_timeout_ms",
    "queue.buffering.max.ms": "linger_ms",
    "message.max.bytes": "max_request_size",
}
_JAAS_RE = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


class Producer(Protocol):
    """The minimum the sink needs from a Kafka client.

    `send` queues one record (value None = tombstone). `flush(timeout)` waits until every queued
    record is acknowledged and raises TransientError / TerminalError if any delivery failed or
    the timeout passed. `ensure_topics` creates missing topics (or refuses, if creation is off).
    """

    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers) -> None: ...

    def send_many(
        self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes | None], headers: Headers
    ) -> None:
        """`send` of every (key, value) pair, all with the same headers."""
        ...

    def flush(self, timeout: float) -> None: ...

    def ensure_topics(self, topics: set[str]) -> None: ...

    def close(self) -> None: ...


# --------------------------------------------------------------------------- config helpers
def _common_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Drop ignored keys, require bootstrap.servers, turn a Java `sasl.jaas.config` into user/password."""
    out = {str(k): v for k, v in settings.items()}
    for k in _IGNORED & out.keys():
        log.warning("debezium.sink.kafka.producer.%s is ignored: Tidemark always sends bytes", k)
        del out[k]
    if not str(out.get("bootstrap.servers") or "").strip():
        raise ConfigError(
            "debezium.sink.kafka.producer.bootstrap.servers is required for the Kafka sink",
            "set it to the broker list, e.g. debezium.sink.kafka.producer.bootstrap.servers="
            "kafka1:9092,kafka2:9092",
        )
    jaas = out.pop("sasl.jaas.config", None)
    if jaas:
        found = dict(_JAAS_RE.findall(str(jaas)))
        if "username" not in found:
            raise ConfigError(
                "debezium.sink.kafka.producer.sasl.jaas.config: only PLAIN/SCRAM login "
                'modules with username="..." password="..." are understood',
                "use sasl.username / sasl.password instead",
            )
        out.setdefault("sasl.username", found["username"])
        out.setdefault("sasl.password", found.get("password", ""))
    return out


def confluent_config(settings: Mapping[str, Any]) -> dict[str, Any]:
    conf = dict(CONFLUENT_DEFAULTS)
    conf.update(_common_settings(settings))
    # librdkafka spells the timeout message.timeout.ms; delivery.timeout.ms is its alias.
    if "message.timeout.ms" in conf:
        conf.pop("delivery.timeout.ms", None)
    return conf


def kafka_python_config(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted producer settings → kafka-python `KafkaProducer` kwargs, typed from its defaults."""
    from kafka import KafkaProducer

    defaults: dict[str, Any] = KafkaProducer.DEFAULT_CONFIG
    merged = dict(KAFKA_PYTHON_DEFAULTS)
    merged.update(_common_settings(settings))
    out: dict[str, Any] = {}
    for key, value in merged.items():
        name = _KAFKA_PYTHON_NAMES.get(key, key.replace(".", "_"))
        if name not in defaults or name in ("key_serializer", "value_serializer"):
            known = sorted(k.replace("_", ".") for k in defaults)
            close = difflib.get_close_matches(key, known, n=3)
            raise ConfigError(
                f"debezium.sink.kafka.producer.{key} is not supported by the kafka-python client",
                f"did you mean {', '.join(close)}?"
                if close
                else "use debezium.sink.kafka.client=confluent for librdkafka settings",
            )
        out[name] = _typed(name, value, defaults[name], key)
    return out


def as_bool(value: Any, key: str) -> bool:
    """A boolean producer setting given as text (kafka-python takes Python values)."""
    if isinstance(value, bool):
        return value
    s = str(value).strip().lower()
    if s in ("true", "1", "yes", "on"):
        return True
    if s in ("false", "0", "no", "off"):
        return False
    raise ConfigError(f"{key}: expected true or false, got {value!r}")


def _typed(name: str, value: Any, default: Any, key: str) -> Any:
    if name == "bootstrap_servers":
        return [s.strip() for s in value.split(",")] if isinstance(value, str) else list(value)
    if name == "acks":
        s = str(value).strip().lower()
        return "all" if s in ("all", "-1") else int(s)
    if isinstance(default, bool):
        return as_bool(value, f"debezium.sink.kafka.producer.{key}")
    if isinstance(default, int) and not isinstance(value, int):
        try:
            return int(str(value).strip())
        except ValueError:
            raise ConfigError(
                f"debezium.sink.kafka.producer.{key}: expected an integer, got {value!r}"
            ) from None
    return value


# --------------------------------------------------------------------------- topic creation
TopicErrorKind = Literal["exists", "refused", "failed"]


class TopicAdmin(Protocol):
    """The client-specific calls of topic creation; `TopicCreator` holds the logic."""

    errors: tuple[type[BaseException], ...]  # what the client raises when an admin call fails

    def list_topics(self) -> set[str]: ...

    def create_topics(
        self, names: list[str], partitions: int, replication_factor: int
    ) -> Iterable[tuple[str, Callable[[], object]]]:
        """Start creating `names`: one (name, wait) each, `wait()` returning once that topic is
        created or raising one of `errors`."""
        ...

    def kind(self, error: BaseException) -> TopicErrorKind:
        """exists: someone created it first; refused: retrying cannot help (ACLs, policy)."""
        ...

    def describe(self, error: BaseException) -> str: ...

    def close(self) -> None: ...


class TopicCreator:
    """Which topics are missing, creating them (or refusing, when creation is off) with the
    configured partitions and replication factor (-1: the broker's default), a topic someone
    else created first tolerated, failures as TerminalError / TransientError. The admin client
    is opened at the first call."""

    def __init__(
        self, open_admin: Callable[[], TopicAdmin], *, create: bool, partitions: int, replication_factor: int
    ) -> None:
        self._open = open_admin
        self._admin: TopicAdmin | None = None
        self._create = create
        self._partitions = partitions
        self._rf = replication_factor

    def ensure(self, topics: set[str]) -> None:
        if self._admin is None:
            self._admin = self._open()
        admin = self._admin
        try:
            existing = admin.list_topics()
        except admin.errors as e:
            raise TransientError(f"Kafka: cannot list topics: {admin.describe(e)}") from None
        missing = sorted(topics - existing)
        if not missing:
            return
        if not self._create:
            raise TerminalError(
                f"Kafka topic(s) {', '.join(missing)} do not exist",
                "create them, or set debezium.sink.kafka.topic.creation.enable=true",
            )
        for name, wait in admin.create_topics(missing, self._partitions, self._rf):
            try:
                wait()
            except admin.errors as e:
                kind = admin.kind(e)
                if kind == "exists":
                    continue
                msg = f"Kafka: cannot create topic {name}: {admin.describe(e)}"
                if kind == "refused":
                    raise TerminalError(msg, "create it yourself or grant CREATE on the cluster") from None
                raise TransientError(msg) from None
            log.info("created Kafka topic %s", name)

    def close(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            admin.close()


# --------------------------------------------------------------------------- confluent-kafka
class ConfluentTopicAdmin:
    """Topic creation through confluent-kafka's AdminClient (one request for all topics)."""

    def __init__(self, conf: Mapping[str, Any], refused: set[int]) -> None:
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient

        self._admin = AdminClient(dict(conf))
        self.errors: tuple[type[BaseException], ...] = (KafkaException,)
        self._exists = KafkaError.TOPIC_ALREADY_EXISTS
        self._refused = refused | {KafkaError.POLICY_VIOLATION}

    def list_topics(self) -> set[str]:
        return set(self._admin.list_topics(timeout=30).topics)

    def create_topics(
        self, names: list[str], partitions: int, replication_factor: int
    ) -> Iterable[tuple[str, Callable[[], object]]]:
        from confluent_kafka.admin import NewTopic

        futures = self._admin.create_topics(
            [NewTopic(t, partitions, replication_factor) for t in names], request_timeout=30
        )
        return [(name, fut.result) for name, fut in futures.items()]

    def kind(self, error: BaseException) -> TopicErrorKind:
        code = error.args[0].code()  # KafkaException carries a KafkaError
        if code == self._exists:
            return "exists"
        return "refused" if code in self._refused else "failed"

    def describe(self, error: BaseException) -> str:
        return str(error.args[0].str())

    def close(self) -> None:
        pass  # AdminClient has no close: dropped with this object


class ConfluentProducer:
    """confluent-kafka (librdkafka). Delivery reports only for failures: successes cost nothing."""

    _TERMINAL_CODES = (
        "TOPIC_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "SASL_AUTHENTICATION_FAILED",
        "_AUTHENTICATION",
        "MSG_SIZE_TOO_LARGE",
        "_MSG_SIZE_TOO_LARGE",
        "RECORD_LIST_TOO_LARGE",
        "TOPIC_EXCEPTION",
        "INVALID_TOPIC_EXCEPTION",
        "_INVALID_ARG",
        "INVALID_CONFIG",
        "_SSL",
    )

    def __init__(
        self,
        settings: Mapping[str, Any],
        *,
        create_topics: bool = True,
        partitions: int = -1,
        replication_factor: int = -1,
    ) -> None:
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka import Producer as _Producer

        self._KafkaException = KafkaException
        self._conf = confluent_config(settings)
        self._create = create_topics
        self._terminal = {getattr(KafkaError, c) for c in self._TERMINAL_CODES if hasattr(KafkaError, c)}
        self._unknown_topic = {KafkaError.UNKNOWN_TOPIC_OR_PART, getattr(KafkaError, "_UNKNOWN_TOPIC", -188)}
        self._errors: list[Any] = []
        self._topics = TopicCreator(
            lambda: ConfluentTopicAdmin(self._conf, self._terminal),
            create=create_topics,
            partitions=partitions,
            replication_factor=replication_factor,
        )
        conf = dict(
            self._conf,
            **{
                "delivery.report.only.error": True,
                "on_delivery": self._on_delivery,
                "error_cb": self._on_error,
            },
        )
        try:
            self._p: Any = _Producer(conf)  # None once closed
        except KafkaException as e:
            raise ConfigError(
                f"invalid Kafka producer setting: {e.args[0].str()}",
                "check the debezium.sink.kafka.producer.* keys",
            ) from None

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._errors.append((err, msg.topic() if msg is not None else None))

    def _on_error(self, err: Any) -> None:
        # Client-wide errors (all brokers down, ...) are retried by librdkafka; surfacing them
        # here only as log lines: the per-record delivery reports decide the outcome.
        log.warning("kafka client error: %s", err.str())
        if err.fatal():
            self._errors.append((err, None))

    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers) -> None:
        while True:
            try:
                self._p.produce(topic, value, key, headers=list(headers) if headers else None)
                return
            except BufferError:
                # Local queue full (queue.buffering.max.messages): let deliveries drain.
                self._p.poll(0.05)
            except self._KafkaException as e:
                # Refused locally (record too large, ...): reported with the batch's outcome.
                self._errors.append((e.args[0], topic))
                return

    def send_many(
        self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes | None], headers: Headers
    ) -> None:
        # `send` in one tight loop: a snapshot chunk is 100,000 records of ~3.5 kB, ~3 us each in
        # librdkafka, so every Python call around them shows. All arguments positional (topic,
        # value, key, partition, on_delivery, callback, timestamp, headers: the C signature of
        # the pinned confluent-kafka): keyword parsing alone costs ~10 % more per record.
        # Partition -1 = the configured partitioner; timestamp 0 = now.
        produce, poll = self._p.produce, self._p.poll
        hdrs: list[tuple[str, str | bytes | None]] | None = list(headers) if headers else None
        i, n = 0, len(values)
        while i < n:
            try:
                while i < n:
                    produce(topic, values[i], keys[i], -1, None, None, 0, hdrs)
                    i += 1
            except BufferError:
                poll(0.05)  # local queue full: let deliveries drain, then retry record i
            except self._KafkaException as e:
                self._errors.append((e.args[0], topic))  # refused locally: skip it, report it
                i += 1

    def flush(self, timeout: float) -> None:
        left = self._p.flush(timeout)
        errors, self._errors = self._errors, []
        if errors:
            self._raise(errors)
        if left:
            raise TransientError(
                f"Kafka: {left} record(s) not acknowledged within {timeout:.0f} s",
                "the broker is slow or unreachable; the batch will be retried",
            )

    def _raise(self, errors: list[Any]) -> None:
        err, topic = errors[0]
        where = f" (topic {topic})" if topic else ""
        msg = f"Kafka delivery failed for {len(errors)} record(s){where}: {err.str()}"
        code = err.code()
        if code in self._unknown_topic and not self._create:
            raise TerminalError(
                msg, "create the topic, or set debezium.sink.kafka.topic.creation.enable=true"
            )
        if err.fatal() or code in self._terminal:
            raise TerminalError(msg, "check the producer credentials, ACLs and message size limits")
        raise TransientError(msg, "the batch will be retried")

    def ensure_topics(self, topics: set[str]) -> None:
        self._topics.ensure(topics)

    def close(self) -> None:
        # Undelivered records are the engine's to retry (its offsets did not advance).
        # The client is dropped, not only flushed: its callbacks are bound to self, a cycle
        # that kept librdkafka's threads (reconnecting to a broker that may be gone) alive
        # until a garbage-collector pass; the last reference going destroys them now.
        p, self._p = self._p, None
        if p is None:
            return
        p.flush(5)
        self._topics.close()


# --------------------------------------------------------------------------- kafka-python
class KafkaPythonTopicAdmin:
    """Topic creation through kafka-python's KafkaAdminClient (one request per topic)."""

    def __init__(self, kwargs: Mapping[str, Any], refused: tuple[type[BaseException], ...]) -> None:
        import kafka.errors as kerrors
        from kafka.admin import KafkaAdminClient

        allowed = KafkaAdminClient.DEFAULT_CONFIG
        self._admin = KafkaAdminClient(**{k: v for k, v in kwargs.items() if k in allowed})
        self.errors: tuple[type[BaseException], ...] = (kerrors.KafkaError,)
        self._exists = kerrors.TopicAlreadyExistsError
        self._refused = refused

    def list_topics(self) -> set[str]:
        return set(self._admin.list_topics())

    def create_topics(
        self, names: list[str], partitions: int, replication_factor: int
    ) -> Iterable[tuple[str, Callable[[], object]]]:
        from kafka.admin import NewTopic

        create = self._admin.create_topics
        return [(n, functools.partial(create, [NewTopic(n, partitions, replication_factor)])) for n in names]

    def kind(self, error: BaseException) -> TopicErrorKind:
        if isinstance(error, self._exists):
            return "exists"
        return "refused" if isinstance(error, self._refused) else "failed"

    def describe(self, error: BaseException) -> str:
        return repr(error)

    def close(self) -> None:
        self._admin.close()


class KafkaPythonProducer:
    """kafka-python. Slower (pure Python) but no native library; failures checked per future."""

    _TERMINAL = (
        "TopicAuthorizationFailedError",
        "ClusterAuthorizationFailedError",
        "SaslAuthenticationFailedError",
        "AuthenticationFailedError",
        "MessageSizeTooLargeError",
        "RecordListTooLargeError",
        "InvalidTopicError",
        "UnsupportedVersionError",
    )

    def __init__(
        self,
        settings: Mapping[str, Any],
        *,
        create_topics: bool = True,
        partitions: int = -1,
        replication_factor: int = -1,
    ) -> None:
        import kafka.errors as kerrors
        from kafka import KafkaProducer

        self._kwargs = kafka_python_config(settings)
        self._create = create_topics
        self._kerrors = kerrors
        self._terminal = tuple(getattr(kerrors, n) for n in self._TERMINAL if hasattr(kerrors, n))
        self._futures: list[Any] = []
        self._send_errors: list[tuple[BaseException, str]] = []
        self._topics = TopicCreator(
            lambda: KafkaPythonTopicAdmin(self._kwargs, self._terminal),
            create=create_topics,
            partitions=partitions,
            replication_factor=replication_factor,
        )
        try:
            self._p = KafkaProducer(**self._kwargs)
        except kerrors.NoBrokersAvailable as e:
            raise TransientError(
                f"Kafka: no broker reachable at {self._kwargs['bootstrap_servers']}: {e}"
            ) from None
        except kerrors.KafkaConfigurationError as e:
            raise ConfigError(f"invalid Kafka producer setting: {e}") from None

    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers) -> None:
        try:
            self._futures.append((self._p.send(topic, value=value, key=key, headers=list(headers)), topic))
        except self._kerrors.KafkaError as e:
            self._send_errors.append((e, topic))

    def send_many(
        self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes | None], headers: Headers
    ) -> None:
        for k, v in zip(keys, values, strict=True):
            self.send(topic, k, v, headers)

    def flush(self, timeout: float) -> None:
        futures, self._futures = self._futures, []
        errors, self._send_errors = self._send_errors, []
        try:
            self._p.flush(timeout)
        except self._kerrors.KafkaTimeoutError:
            raise TransientError(
                f"Kafka: records not acknowledged within {timeout:.0f} s",
                "the broker is slow or unreachable; the batch will be retried",
            ) from None
        errors += [(f.exception, topic) for f, topic in futures if f.failed()]
        if errors:
            e, topic = errors[0]
            msg = f"Kafka delivery failed for {len(errors)} record(s) (topic {topic}): {e!r}"
            if isinstance(e, self._terminal):
                raise TerminalError(msg, "check the producer credentials, ACLs and message size limits")
            if isinstance(e, self._kerrors.UnknownTopicOrPartitionError) and not self._create:
                raise TerminalError(
                    msg, "create the topic, or set debezium.sink.kafka.topic.creation.enable=true"
                )
            raise TransientError(msg, "the batch will be retried")

    def ensure_topics(self, topics: set[str]) -> None:
        self._topics.ensure(topics)

    def close(self) -> None:
        try:
            self._p.close(timeout=5)
        finally:
            self._topics.close()


def make_producer(client: Client, settings: Mapping[str, Any], **kw: Any) -> Producer:
    if client == "confluent":
        return ConfluentProducer(settings, **kw)
    if client == "kafka-python":
        return KafkaPythonProducer(settings, **kw)
    raise ConfigError(
        f"debezium.sink.kafka.client: unknown client {client!r}", "valid values: confluent, kafka-python"
    )


# --------------------------------------------------------------------------- the sink
class KafkaSink:
    """Produces every record of a batch and returns once all are acknowledged (acks=all).

    Keys/values are the JsonConverter bytes (`serialized_batch`, shared with the other sinks);
    a record with value None is a tombstone. Missing topics are created through the admin
    client before the first record goes to them. Offsets are not kept here (`last_offset` None).
    """

    name = "kafka"

    def __init__(
        self,
        producer_settings: Mapping[str, Any],
        *,
        client: Client = "confluent",
        key_schemas_enable: bool = True,
        value_schemas_enable: bool = True,
        topic_creation: bool = True,
        topic_partitions: int = -1,
        topic_replication_factor: int = -1,
        flush_timeout_s: float | None = None,
        producer: Producer | None = None,
        context: tuple[tuple[str, bytes], ...] = (),
    ) -> None:
        self._ctx = context  # __debezium.context.* headers for data-change records
        self._ks = key_schemas_enable
        self._vs = value_schemas_enable
        if flush_timeout_s is None:
            dt = producer_settings.get(
                "delivery.timeout.ms", producer_settings.get("message.timeout.ms", 120_000)
            )
            flush_timeout_s = int(dt) / 1000 + 10
        self._timeout = float(flush_timeout_s)
        self._known: set[str] = set()
        self._producer = producer or make_producer(
            client,
            producer_settings,
            create_topics=topic_creation,
            partitions=topic_partitions,
            replication_factor=topic_replication_factor,
        )

    @classmethod
    def from_config(
        cls, cfg: ConnectorConfig, *, context: tuple[tuple[str, bytes], ...] = (), bulk: bool = False
    ) -> KafkaSink:
        """`bulk`: a snapshot task's producer: unless the file sets them, lz4 compression (every
        record repeats its table's schema text: ~10x fewer bytes to the brokers), a 20 ms linger
        and 1 MB batches. The records are the same; consumers decompress transparently."""
        k = cfg.sink.kafka
        ks, vs = schema_flags(cfg)
        producer = dict(k.producer)
        if bulk and k.client == "confluent":
            for key, value in BULK_PRODUCER.items():
                producer.setdefault(key, value)
        return cls(
            producer,
            client=k.client,
            key_schemas_enable=ks,
            value_schemas_enable=vs,
            topic_creation=k.topic_creation_enable,
            topic_partitions=k.topic_creation_partitions,
            topic_replication_factor=k.topic_creation_replication_factor,
            flush_timeout_s=k.flush_timeout_ms / 1000 if k.flush_timeout_ms is not None else None,
            context=context,
        )

    def write(self, batch: Batch) -> None:
        records = batch.records
        if not records:
            return
        topics = {r.topic for r in records}
        if not topics <= self._known:
            self._producer.ensure_topics(topics - self._known)
            self._known |= topics
        send, ctx = self._producer.send, self._ctx
        for r, (k, v) in zip(records, serialized_batch(batch, self._ks, self._vs), strict=True):
            # (a value in pieces is joined: the client takes one buffer per record)
            send(r.topic, k, joined(v), with_context(r, ctx) if ctx else r.headers)
        self._producer.flush(self._timeout)

    def send_serialized(
        self,
        topic: str,
        keys: Iterable[bytes | None],
        values: Iterable[bytes | None],
        headers: Headers,
        *,
        wait: bool = True,
    ) -> int:
        """Send already-serialized records (a snapshot chunk's, built column-wise) to one topic;
        with `wait`, return once the broker holds them all (else call `flush()` later). Returns
        how many were sent."""
        if topic not in self._known:
            self._producer.ensure_topics({topic})
            self._known.add(topic)
        keys = keys if isinstance(keys, list) else list(keys)
        values = values if isinstance(values, list) else list(values)
        if len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys for {len(values)} values")
        self._producer.send_many(topic, keys, values, headers)
        n = len(values)
        if wait:
            self._producer.flush(self._timeout)
        return n

    def flush(self) -> None:
        """Wait until the broker acknowledged everything sent (raises on delivery errors)."""
        self._producer.flush(self._timeout)

    def last_offset(self) -> tuple[int, dict[str, Any]] | None:
        return None

    def close(self) -> None:
        self._producer.close()


def wait_for_broker(bootstrap: str, timeout: float = 10.0) -> None:
    """Block until a broker answers metadata requests (used by tests and the CLI's checks)."""
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout
    admin = AdminClient({"bootstrap.servers": bootstrap})
    while True:
        try:
            admin.list_topics(timeout=1)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise TransientError(f"Kafka: no broker answers at {bootstrap}") from None
            time.sleep(0.1)
