"""Private, CDC-ready servers in temporary directories on free ports: PostgreSQL (wal_level=logical),
MariaDB (ROW binlog, GTIDs) and the `tansu` Kafka-protocol broker.

Used by `tidemark demo` (the embedded default), the benchmarks and the test suite. They never touch
servers already running on the machine. Importing this package does not import Spark or Airflow.

`server.py` holds the lifecycle they share (`EmbeddedServer`: start with retries on a taken port,
stop, kill, destroy; `launch`); `util.py` the plumbing (free ports, deadlines, process trees,
clean-up at exit, unique names).
"""
