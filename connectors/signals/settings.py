"""The `signal.*` and `notification.*` settings, typed, from a loaded configuration.

The catalog validated and default-filled these properties (`cfg.origin.properties`); this module
only checks what depends on several of them (a kafka channel needs its brokers, a sink channel
its topic) and names the channels.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from connectors.api import ConfigError
from connectors.settings.config import ConnectorConfig

log = logging.getLogger(__name__)

SIGNAL_CHANNELS = ("source", "delta", "file", "kafka")
NOTIFICATION_CHANNELS = ("log", "sink", "delta")
_JMX = "jmx"  # Debezium's JMX channels: no JVM here, accepted with a warning and left out
CONSUMER_PREFIX = "signal.consumer."
FILE_DEFAULT = "file-signals.txt"  # Debezium's default for signal.file


@dataclass(frozen=True, slots=True)
class SignalSettings:
    channels: tuple[str, ...]
    data_collection: str | None  # `schema.table` / `db.table`, as records name their table
    poll_interval_s: float
    file: str
    kafka_topic: str
    kafka_bootstrap: str | None
    kafka_group_id: str
    kafka_poll_timeout_s: float
    kafka_consumer: dict[str, str] = field(repr=False)  # signal.consumer.* (may hold secrets)

    @property
    def enabled(self) -> bool:
        return bool(self.channels)


@dataclass(frozen=True, slots=True)
class NotificationSettings:
    channels: tuple[str, ...]
    sink_topic: str | None


def _channels(cfg: ConnectorConfig, key: str, known: tuple[str, ...]) -> tuple[str, ...]:
    full_name = cfg.origin.full_name(key)
    names = [str(v).strip().lower() for v in (cfg.origin.properties.get(key) or []) if str(v).strip()]
    if _JMX in names:
        log.warning(
            "%s: the jmx channel is not available in Tidemark (there is no JVM); ignoring it", full_name
        )
        names = [n for n in names if n != _JMX]
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ConfigError(
            f"{full_name}: unknown channel(s) {', '.join(unknown)}",
            f"valid values: {', '.join(known)}" + (", jmx (ignored)" if key.startswith("signal") else ""),
        )
    return tuple(dict.fromkeys(names))


def signal_settings(cfg: ConnectorConfig) -> SignalSettings:
    p = cfg.origin.properties
    channels = _channels(cfg, "signal.enabled.channels", SIGNAL_CHANNELS)
    coll = p.get("signal.data.collection") or []
    if len(coll) > 1:
        raise ConfigError(
            f"{cfg.origin.full_name('signal.data.collection')}: one table, not {len(coll)}",
            "name the signal table as <schema>.<table> (PostgreSQL) or <database>.<table> (MySQL)",
        )
    data_collection = str(coll[0]).strip() if coll else None
    if data_collection and cfg.connector == "postgres" and data_collection.count(".") == 2:
        # Debezium's PostgreSQL form <database>.<schema>.<table>: records name schema.table.
        data_collection = data_collection.split(".", 1)[1]
    bootstrap = p.get("signal.kafka.bootstrap.servers")
    if "kafka" in channels and not bootstrap:
        raise ConfigError(
            f"{cfg.origin.full_name('signal.enabled.channels')} includes kafka but "
            f"{cfg.origin.full_name('signal.kafka.bootstrap.servers')} is not set",
            "set the brokers the signal topic lives on",
        )
    if "source" in channels and not data_collection:
        # Debezium's default channel list is `source`: without a table it simply has nothing to read.
        channels = tuple(c for c in channels if c != "source")
    consumer = {k[len(CONSUMER_PREFIX) :]: str(v) for k, v in p.items() if k.startswith(CONSUMER_PREFIX)}
    return SignalSettings(
        channels=channels,
        data_collection=data_collection,
        poll_interval_s=max(0.01, int(p.get("signal.poll.interval.ms") or 5000) / 1000),
        file=str(p.get("signal.file") or FILE_DEFAULT),
        kafka_topic=str(p.get("signal.kafka.topic") or f"{cfg.topic_prefix}-signal"),
        kafka_bootstrap=str(bootstrap) if bootstrap else None,
        kafka_group_id=str(p.get("signal.kafka.groupId") or "kafka-signal"),
        kafka_poll_timeout_s=int(p.get("signal.kafka.poll.timeout.ms") or 0) / 1000,
        kafka_consumer=consumer,
    )


def notification_settings(cfg: ConnectorConfig) -> NotificationSettings:
    p = cfg.origin.properties
    channels = _channels(cfg, "notification.enabled.channels", NOTIFICATION_CHANNELS)
    topic = p.get("notification.sink.topic.name")
    if "sink" in channels:
        if not topic:
            raise ConfigError(
                f"{cfg.origin.full_name('notification.enabled.channels')} includes sink but "
                f"{cfg.origin.full_name('notification.sink.topic.name')} is not set",
                "name the Kafka topic notifications go to",
            )
        if not cfg.sink.kafka.producer.get("bootstrap.servers"):
            raise ConfigError(
                "the sink notification channel writes to Kafka, but "
                "debezium.sink.kafka.producer.bootstrap.servers is not set",
                "configure the Kafka sink's producer (debezium.sink.kafka.producer.*)",
            )
    return NotificationSettings(channels=channels, sink_topic=str(topic) if topic else None)
