"""Private servers for the test suite: PostgreSQL, MariaDB, a Kafka-protocol broker (all from
`connectors.app.embedded`), and Spark.

Import as ``from harness import start_pg`` (tests/conftest.py puts tests/ on sys.path).
"""

from connectors.app.embedded.kafka import KafkaBroker, find_tansu, start_kafka
from connectors.app.embedded.mariadb import MariaDbServer, start_mariadb
from connectors.app.embedded.postgres import PgServer, contrib_available, find_pg_bindir, start_pg
from connectors.app.embedded.util import (
    HarnessError,
    free_port,
    reap_stale,
    unique_name,
    unique_server_id,
    wait_until,
)

from .spark import build_spark

__all__ = [
    "HarnessError",
    "KafkaBroker",
    "MariaDbServer",
    "PgServer",
    "build_spark",
    "contrib_available",
    "find_pg_bindir",
    "find_tansu",
    "free_port",
    "reap_stale",
    "start_kafka",
    "start_mariadb",
    "start_pg",
    "unique_name",
    "unique_server_id",
    "wait_until",
]
