"""Private, CDC-ready servers in temporary directories on free ports: PostgreSQL (wal_level=logical),
MariaDB (ROW binlog, GTIDs) and the `tansu` Kafka-protocol broker.

Used by `tidemark demo` (the embedded default), the benchmarks and the test suite. They never touch
servers already running on the machine. Importing this package does not import Spark or Airflow.
"""
