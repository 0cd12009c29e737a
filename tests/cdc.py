"""Helpers for end-to-end connector tests, whichever the connector: write a configuration file,
run the CLI, read what landed, SIGKILL the connector and check nothing was lost or repeated.

The connector-specific parts (which source properties a test configuration needs) are in
tests/pgcdc.py (PostgreSQL) and tests/mycdc.py (MySQL/MariaDB); they call `write_config` here.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import mmap
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from harness import wait_until

ROOT = Path(__file__).resolve().parents[1]
TIDEMARK = [sys.executable, "-m", "connectors.app.cli"]


# --------------------------------------------------------------------------- configuration
def write_config(
    path: Path,
    source: Mapping[str, Any],
    *,
    sinks: str = "jsonl",
    jsonl: Path | None = None,
    warehouse: Path | None = None,
    kafka: Any = None,
    **extra: Any,
) -> Path:
    """A server-shape .properties file: `source` as `debezium.source.*` (connector.class
    included), the sinks, the warehouse (default: `warehouse/` beside the file). `extra` keys
    may be written with `__` for `.`; a key without a `debezium.`/`tidemark.` prefix is a source
    property, and overrides the same key of `source`."""
    props = {f"debezium.source.{k}": str(v) for k, v in source.items()}
    props["debezium.sink.type"] = sinks
    props["tidemark.warehouse"] = str(warehouse or path.parent / "warehouse")
    if jsonl is not None:
        props["debezium.sink.jsonl.path"] = str(jsonl)
    if kafka is not None:
        props["debezium.sink.kafka.producer.bootstrap.servers"] = kafka.bootstrap
        props["debezium.sink.kafka.topic.creation.partitions"] = "1"  # whole-topic order in assertions
    for k, v in extra.items():
        key = k.replace("__", ".")
        props[key if key.startswith(("debezium.", "tidemark.")) else f"debezium.source.{key}"] = str(v)
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


# --------------------------------------------------------------------------- the CLI
def run_cli(*args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [*TIDEMARK, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"tidemark {' '.join(args)} exited {proc.returncode}\n{proc.stderr[-4000:]}")
    return proc


def spark_submit(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The virtualenv's `spark-submit` with `args`, from the repository, as a scheduler runs it
    (the virtualenv's bin first on PATH, as after `source .venv/bin/activate`)."""
    bindir = Path(sys.executable).parent
    env = dict(
        os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", PYSPARK_PYTHON=sys.executable
    )
    return subprocess.run(
        [str(bindir / "spark-submit"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def popen_cli(
    *args: str, log: Path, new_session: bool = False, tmpdir: Path | None = None
) -> subprocess.Popen[bytes]:
    """`tidemark <args>` started in the background, stderr appended to `log`. `new_session`: in a
    process group of its own, so `_sigkill(proc, group=True)` takes its children (a snapshot's
    Spark JVM and workers) with it. `tmpdir`: its TMPDIR (to see what it leaves there)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), **({"TMPDIR": str(tmpdir)} if tmpdir else {}))
    return subprocess.Popen(
        [*TIDEMARK, *args],
        stdout=subprocess.DEVNULL,
        stderr=log.open("ab"),
        env=env,
        cwd=ROOT,
        start_new_session=new_session,
    )


_PEAK_WRAPPER = (
    "import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
    "sys.exit(p.returncode)"
)


def run_cli_peak_rss(*args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess[str], int]:
    """`tidemark <args>` run to its end under a wrapper process whose only child it is, so the
    child's peak RSS (kB) is exact: (the completed process, peak kB)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK_WRAPPER, *TIDEMARK, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        raise AssertionError(f"tidemark {' '.join(args)} exited {proc.returncode}\n{proc.stderr[-4000:]}")
    return proc, int(proc.stderr.strip().splitlines()[-1])


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def peak_rss_kb(pid: int) -> int:
    """A live process's peak resident set size (VmHWM) in kB."""
    return _status_kb(pid, "VmHWM:")


def rss_kb(pid: int) -> int:
    """A live process's current resident set size (VmRSS) in kB."""
    return _status_kb(pid, "VmRSS:")


# --------------------------------------------------------------------------- what landed
@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Build many objects with the cyclic GC off, then freeze them: parsed JSON and fetched rows
    hold no cycles, and the collector would scan all of them again in every collection while
    they are built, and in the next few after (a 500,000-record jsonl file read and replayed:
    79 s with it, ~40 s without). Frozen objects are still freed when unreferenced; conftest's
    `_gc_unfreeze` returns what is left to the collector after each test."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with gc_paused():
        return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


@functools.cache
def _bench_jsonl_schema() -> Any:
    import pyarrow as pa

    row = pa.struct([("id", pa.int64()), ("name", pa.string()), ("qty", pa.int64())])
    source = pa.struct([(f, pa.string()) for f in ("snapshot", "table", "file", "gtid")])
    source = pa.struct([*source, ("pos", pa.int64()), ("lsn", pa.int64())])
    payload = pa.struct(
        [("op", pa.string()), ("before", row), ("after", row), ("ddl", pa.string()), ("source", source)]
    )
    return pa.schema(
        [
            ("topic", pa.string()),
            ("key", pa.struct([("payload", pa.struct([("id", pa.int64())]))])),
            ("value", pa.struct([("payload", payload)])),
        ]
    )


def read_bench_jsonl(path: Path, topic_suffix: str | None = None) -> list[dict[str, Any]]:
    """The jsonl sink's records as `read_jsonl` gives them, with only what the `bench` checks
    read: the topic, the key's id, and op, before/after (id, name, qty), ddl and some source
    fields of the value; the schemas are None (not read). Arrow's JSON reader skips the rest in
    C++: a 500,000-row snapshot's 1.7 GB file takes ~4 s and 2 GB of memory, against ~28 s and
    12 GB as whole dicts (the Python objects of every record's schema). A last line still being
    written is left out. `topic_suffix`: only the records of topics ending with it, chosen before
    parsing (other tables' ids need not be integers: the signal table's are text)."""
    import pyarrow as pa
    import pyarrow.json as pj

    if not path.exists() or path.stat().st_size == 0:
        return []
    # mapped, not copied into this process: the file can be GBs (the map is released with the
    # last buffer that points into it, which may be an exception's traceback)
    with path.open("rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    end = mm.rfind(b"\n") + 1  # (a line being written is left for the next read)
    data: Any = pa.py_buffer(mm)[:end]
    if topic_suffix is not None:
        suffix = topic_suffix.encode()
        lines = data.to_pybytes().splitlines(keepends=True)
        data = b"".join(line for line in lines if _topic_ends_with(line, suffix))
    if len(data) == 0:
        return []
    opts = pj.ParseOptions(explicit_schema=_bench_jsonl_schema(), unexpected_field_behavior="ignore")
    block = pj.ReadOptions(block_size=16 << 20)
    table = pj.read_json(pa.BufferReader(data), read_options=block, parse_options=opts)
    del data, mm
    with gc_paused():
        records = table.to_pylist()
        for r in records:
            for part in ("key", "value"):
                if r[part] is not None:
                    r[part]["schema"] = None
            payload = (r["value"] or {}).get("payload")
            for absent in ("op", "ddl"):  # (a change event has no ddl, a schema change no op)
                if payload is not None and payload[absent] is None:
                    del payload[absent]
    return records


_TOPIC = b'{"topic":"'


def _topic_ends_with(line: bytes, suffix: bytes) -> bool:
    if not line.startswith(_TOPIC):  # (not the sink's layout: kept, and parsed)
        return bool(line.strip())
    end = line.find(b'"', len(_TOPIC))
    return line[len(_TOPIC) : end].endswith(suffix)


def payload(rec: dict[str, Any], part: str = "value") -> Any:
    v = rec[part]
    return v["payload"] if isinstance(v, dict) and "schema" in v and "payload" in v else v


def delta_rows(table: Path, columns: list[str] | None = None) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return DeltaTable(str(table)).to_pyarrow_table(columns=columns).to_pylist()


def changelog_count(changelog: Path) -> int:
    """Rows in a Delta change log (0 before its first commit)."""
    return len(delta_rows(changelog, ["op"])) if changelog.exists() else 0


# A heartbeat record's schemas as Debezium 3.6 writes them (captured from its MySQL connector;
# the record has no headers): serverName key, ts_ms value, both version 1.
HEARTBEAT_KEY_SCHEMA = {
    "type": "struct",
    "fields": [{"type": "string", "optional": False, "field": "serverName"}],
    "optional": False,
    "name": "io.debezium.connector.common.ServerNameKey",
    "version": 1,
}
HEARTBEAT_VALUE_SCHEMA = {
    "type": "struct",
    "fields": [{"type": "int64", "optional": False, "field": "ts_ms"}],
    "optional": False,
    "name": "io.debezium.connector.common.Heartbeat",
    "version": 1,
}


def assert_debezium_heartbeat(rec: dict[str, Any], server_name: str) -> None:
    assert rec["key"] == {"schema": HEARTBEAT_KEY_SCHEMA, "payload": {"serverName": server_name}}
    assert rec["value"]["schema"] == HEARTBEAT_VALUE_SCHEMA and set(rec["value"]["payload"]) == {"ts_ms"}


# --------------------------------------------------------------------------- SIGKILL
def _kill(proc: subprocess.Popen[bytes], group: bool = False) -> None:
    if group:
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        proc.send_signal(signal.SIGKILL)


def _sigkill(proc: subprocess.Popen[bytes], group: bool = False) -> None:
    _kill(proc, group)
    proc.wait(timeout=30)


def sigkill_when(
    cfg: Path, log: Path, ready: Callable[[], bool], *, what: str, timeout: float = 180, group: bool = False
) -> int:
    """Start `tidemark run --config cfg`, SIGKILL it once `ready()` holds (polled up to `timeout`
    s) and return its peak RSS (kB) just before the kill. `group`: run it in a session of its own
    and kill the whole process group (see `popen_cli`)."""
    proc = popen_cli("run", "--config", str(cfg), log=log, new_session=group)
    try:
        wait_until(ready, timeout=timeout, what=what)
        peak_kb = peak_rss_kb(proc.pid)
        _sigkill(proc, group)
    finally:
        if proc.poll() is None:
            _kill(proc, group)
    return peak_kb


def kill_inside_then_resume(
    cfg: Path, changelog: Path, log: Path, total: int, *, first: int = 10_000, max_rss_kb: int = 600_000
) -> None:
    """Run the connector on a pending `total`-row transaction, SIGKILL it once `first` rows are in
    the Delta change log, check it was killed inside the transaction with bounded memory, then
    run it again until caught up. The caller checks the change log's rows."""
    peak_kb = sigkill_when(
        cfg, log, lambda: changelog_count(changelog) >= first, what="part of the transaction delivered"
    )
    at_kill = changelog_count(changelog)
    assert 0 < at_kill < total, at_kill  # killed inside the transaction
    assert peak_kb < max_rss_kb, f"peak RSS {peak_kb} kB: the transaction is not streamed in bounded memory"
    run_cli("run", "--config", str(cfg), "--until-caught-up", timeout=600)


def orders_workload(connect: Callable[[], Any], lo: int, hi: int, stop: threading.Event) -> None:
    """Rows `lo`..`hi - 1` of the SIGKILL workload on `orders (id, customer_id, qty)`, each in its own transaction, an
    update of every third, and before every tenth a 50-row transaction. `connect()` returns an
    autocommit DB-API connection (psycopg2 or PyMySQL: both take `%s` parameters)."""
    conn = connect()
    try:
        cur = conn.cursor()
        for i in range(lo, hi):
            if stop.is_set():
                break
            if i % 10 == 0:
                cur.execute("BEGIN")
                for j in range(50):  # a bigger transaction now and then
                    cur.execute("INSERT INTO orders VALUES (%s, 2, %s)", (100_000 + i * 100 + j, j))
                cur.execute("COMMIT")
            cur.execute("INSERT INTO orders VALUES (%s, 1, 1)", (i,))
            if i % 3 == 0:
                cur.execute("UPDATE orders SET qty = qty + 1 WHERE id = %s", (i,))
    finally:
        conn.close()


def orders_changes(n: int) -> set[tuple[str, int]]:
    """The changes of `orders_workload` over rows 0..n-1 as (op, id)."""
    expected = {("c", i) for i in range(n)} | {("u", i) for i in range(0, n, 3)}
    return expected | {("c", 100_000 + i * 100 + j) for i in range(0, n, 10) for j in range(50)}


def sigkill_during_workload(
    cfg: Path,
    changelog: Path,
    log: Path,
    connect: Callable[[], Any],
    kafka: Any,
    topic: str,
    position: Mapping[str, str],
    *,
    n: int = 600,
    rounds: int = 4,
) -> None:
    """SIGKILL the connector (configured with kafka and delta sinks, its start position already
    stored) once per round while `orders_workload` writes that round's part, then let it catch
    up: Delta must hold every change exactly once, Kafka `topic` every change at least once.

    `position` maps the change log's position columns to the `source` fields they come from
    (PostgreSQL `{"lsn": "lsn"}`): a change is (op, id, position), so a replayed record counts
    once in Kafka (its envelope ts_ms differs, so comparing value bytes would hide a lost one)."""
    stop = threading.Event()
    kills = 0
    for r in range(rounds):
        # One part of the workload per connector life, so each life has changes to deliver (a
        # connector that commits while it catches up could otherwise finish the whole workload
        # before a later kill).
        writer = threading.Thread(
            target=orders_workload, args=(connect, r * n // rounds, (r + 1) * n // rounds, stop)
        )
        start = changelog_count(changelog)
        proc = popen_cli("run", "--config", str(cfg), log=log)
        try:
            writer.start()
            wait_until(
                lambda s=start: changelog_count(changelog) > s + 50,
                timeout=90,
                what="progress before the kill",
            )
            _sigkill(proc)
            kills += 1
        except BaseException:
            stop.set()  # a failed round: the writer stops too
            raise
        finally:
            if proc.poll() is None:
                proc.kill()
            if writer.ident is not None:
                writer.join(300)
    assert kills == rounds
    run_cli("run", "--config", str(cfg), "--until-caught-up", timeout=300)

    expected = orders_changes(n)
    rows = delta_rows(changelog, ["op", "key", *position])
    landed = [(r["op"], orjson.loads(r["key"])["id"], *(r[c] for c in position)) for r in rows]
    assert len(landed) == len(set(landed)), "a change landed twice in Delta"
    assert {(op, k) for op, k, *_ in landed} == expected and len(landed) == len(expected)
    got = kafka.read_all(topic, min_count=len(expected), timeout=60)
    in_kafka = set()
    for key, value, _headers in got:
        if value is None:
            continue
        p = orjson.loads(value)["payload"]
        src = p["source"]
        in_kafka.add((p["op"], orjson.loads(key)["payload"]["id"], *(src[f] for f in position.values())))
    assert in_kafka == set(landed), (len(in_kafka), len(landed))


# --------------------------------------------------------------------------- replaying a change stream
def replay(records: list[dict[str, Any]]) -> dict[int, tuple[str, int]]:
    """Apply change events in order to `{id: (name, qty)}` (the snapshot tests' `bench` table):
    r/c/u upsert the `after` image, d deletes the key; tombstones and records without an `op`
    (schema changes) are skipped."""
    state: dict[int, tuple[str, int]] = {}
    for r in records:
        v = r["value"]
        if v is None or "op" not in v["payload"]:
            continue
        p = v["payload"]
        if p["op"] in ("r", "c", "u"):
            state[p["after"]["id"]] = (p["after"]["name"], p["after"]["qty"])
        elif p["op"] == "d":
            state.pop(p["before"]["id"], None)
    return state


def stream_until_caught_up(cfg: Any) -> int:
    """Run the connector of `cfg` in-process until it has caught up; how many records came."""
    from connectors.engine.loop import close_all
    from connectors.engine.wiring import build_engine

    engine = build_engine(cfg, until_caught_up=True)
    try:
        return engine.run().records
    finally:
        close_all(engine.sinks)


# --------------------------------------------------------------------------- snapshots of `bench`
# The rows of the large-table snapshot tests' `bench` (tests/test_snapshot_pg.py,
# tests/test_snapshot_mysql_e2e.py): smaller for quicker iteration.
SNAPSHOT_ROWS = int(os.environ.get("TIDEMARK_SNAPSHOT_TEST_ROWS", "500000"))


@dataclass(frozen=True)
class BenchSql:
    """The `bench (id, name, qty, note)` statements in one SQL dialect."""

    create: str
    fill: str  # rows 1..{n}, `name` 'name <id>', `qty` id % 100
    after_fill: tuple[str, ...]
    name_plus: str  # `name` with '+' appended


BENCH_SQL: dict[str, BenchSql] = {
    "postgres": BenchSql(
        create="CREATE TABLE bench (id bigint PRIMARY KEY, name text, qty int, note text)",
        fill="INSERT INTO bench SELECT g, 'name ' || g, g % 100, repeat('x', 64) FROM generate_series(1, {n}) g",
        after_fill=("ANALYZE bench",),  # row estimates for the chunk plan
        name_plus="name || '+'",
    ),
    "mysql": BenchSql(
        create="CREATE TABLE bench (id bigint PRIMARY KEY, name varchar(64), qty int, note text)",
        fill="INSERT INTO bench SELECT seq, concat('name ', seq), seq % 100, repeat('x', 64) FROM seq_1_to_{n}",
        after_fill=(),
        name_plus="concat(name, '+')",
    ),
}


def create_bench(connect: Callable[[], Any], dialect: str, n: int) -> None:
    """Create `bench` with rows 1..`n`. `connect()` returns an autocommit DB-API connection
    (psycopg2 or PyMySQL); `dialect` is a key of `BENCH_SQL`."""
    sql = BENCH_SQL[dialect]
    conn = connect()
    try:
        with conn.cursor() as cur:
            for statement in (sql.create, sql.fill.format(n=n), *sql.after_fill):
                cur.execute(statement)  # no parameters: `%` is taken literally
    finally:
        conn.close()


def bench_state(connect: Callable[[], Any]) -> dict[int, tuple[str, int]]:
    """`bench` as `{id: (name, qty)}`, what `replay` of its change events must give."""
    conn = connect()
    try:
        with conn.cursor() as cur, gc_paused():
            cur.execute("SELECT id, name, qty FROM bench")
            return {int(i): (n, int(q)) for i, n, q in cur.fetchall()}
    finally:
        conn.close()


# Writes a second of `snapshot_under_writes`'s load. Unpaced, a quiet machine wrote ~20,000 a
# second and the run chased them for a minute: 1.3M records, and the test's own replay of them
# ran out of 24 GB.
SNAPSHOT_WRITE_RATE = int(os.environ.get("TIDEMARK_SNAPSHOT_TEST_WRITES", "2000"))


class Paced:
    """A DB-API connection whose statements are paced at `rate` per second overall, so
    `bench_writer`'s mixed load is steady and bounded whatever the machine's speed."""

    def __init__(self, conn: Any, rate: float) -> None:
        self.conn, self.rate, self.began, self.done = conn, rate, time.monotonic(), 0

    def cursor(self) -> Paced:
        self.cur = self.conn.cursor()
        return self

    def __enter__(self) -> Paced:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cur.close()

    def execute(self, *args: Any) -> Any:
        self.done += 1
        ahead = self.done / self.rate - (time.monotonic() - self.began)
        if ahead > 0:
            time.sleep(ahead)  # pacing a load generator, not waiting for a result
        return self.cur.execute(*args)

    def close(self) -> None:
        self.conn.close()


def bench_writer(
    connect: Callable[[], Any], dialect: str, stop: threading.Event, first_id: int, done: list[int], seed: int
) -> None:
    """Inserts (ids from `first_id` on), updates and deletes on `bench`, each its own autocommit
    transaction, until `stop`; `done[0]` counts them."""
    rnd = random.Random(seed)
    update = f"UPDATE bench SET qty = qty + 1, name = {BENCH_SQL[dialect].name_plus} WHERE id = %s"
    conn = connect()
    nxt = first_id
    try:
        with conn.cursor() as cur:
            while not stop.is_set():
                op = rnd.random()
                if op < 0.4:
                    cur.execute("INSERT INTO bench VALUES (%s, %s, 1, 'new')", (nxt, f"new {nxt}"))
                    nxt += 1
                elif op < 0.8:
                    cur.execute(update, (rnd.randint(1, nxt - 1),))
                else:
                    cur.execute("DELETE FROM bench WHERE id = %s", (rnd.randint(1, nxt - 1),))
                done[0] += 1
    finally:
        conn.close()


@dataclass(frozen=True)
class SnapshotUnderWrites:
    first: subprocess.CompletedProcess[str]  # the run during the writes
    records: list[dict[str, Any]]  # the jsonl sink's records once caught up
    snapshot: list[dict[str, Any]]  # those of them with op "r"
    state: dict[int, tuple[str, int]]  # `bench` at the end


def snapshot_under_writes(
    cfg: Path, jsonl: Path, connect: Callable[[], Any], dialect: str, *, rows: int, seed: int, min_writes: int
) -> SnapshotUnderWrites:
    """`tidemark run --until-caught-up` (configured to snapshot the `rows`-row `bench` into the
    jsonl sink `jsonl`) while `bench_writer` writes, then once more for the writes after that run.
    Checks that more than `min_writes` writes overlapped the run, that replaying the records
    reproduces the table and that the snapshot read each row once."""
    stop, done = threading.Event(), [0]

    def paced() -> Paced:
        return Paced(connect(), SNAPSHOT_WRITE_RATE)

    writer = threading.Thread(
        target=bench_writer, args=(paced, dialect, stop, rows + 1, done, seed), daemon=True
    )
    writer.start()
    try:
        first = run_cli("run", "--config", str(cfg), "--until-caught-up", timeout=900)
    finally:
        stop.set()
        writer.join(timeout=30)
    assert done[0] > min_writes, f"only {done[0]} concurrent writes: the test did not overlap the snapshot"
    run_cli("run", "--config", str(cfg), "--until-caught-up", timeout=300)  # the writes after the first run
    state = bench_state(connect)
    records = read_bench_jsonl(jsonl)
    assert replay(records) == state
    snapshot = [r for r in records if r["value"] and r["value"]["payload"].get("op") == "r"]
    assert len({r["key"]["payload"]["id"] for r in snapshot}) == len(snapshot)  # each row read once
    return SnapshotUnderWrites(first, records, snapshot, state)


def sigkill_mid_snapshot_then_resume(
    cfg: Path,
    jsonl: Path,
    changelog: Path,
    connect: Callable[[], Any],
    rows: int,
    *,
    between: Callable[[], object] | None = None,
) -> None:
    """SIGKILL `tidemark run` (configured with the delta and jsonl sinks and one snapshot thread
    to snapshot the `rows`-row `bench` in many chunks) once two chunks are done, run `between()`
    (changes between the killed snapshot's view and the resumed one's), then run it until caught
    up: it must resume the snapshot, the Delta change log must hold each row's snapshot record
    once (no chunk written twice) and the jsonl records (at least once) must replay to the table."""
    from connectors.settings.config import load
    from connectors.snapshot.progress import SnapshotProgress

    loaded = load(cfg)
    progress = SnapshotProgress(loaded.warehouse, loaded.name)
    log = cfg.with_name("first.log")
    sigkill_when(
        cfg,
        log,
        lambda: (s := progress.latest()) is not None and len(s.done) >= 2,
        timeout=300,
        what="two snapshot chunks done",
        group=True,  # the Spark JVM and workers die with it
    )
    state = progress.latest()
    assert state is not None and not state.completed and 2 <= len(state.done) < len(state.chunks), (
        log.read_text()[-3000:]
    )
    # The killed job's jsonl parts wait beside the jsonl file (not in /tmp, where nothing would
    # ever remove them); the next snapshot job removes them.
    left = list(jsonl.parent.glob(f".{jsonl.name}.parts-*"))
    assert left, "the killed snapshot job staged no jsonl parts beside the jsonl file"
    if between is not None:
        between()
    second = run_cli("run", "--config", str(cfg), "--until-caught-up", timeout=600)
    assert "resuming" in second.stderr
    assert not any(p.exists() for p in left), "the killed job's jsonl parts were not removed"
    state = progress.latest()
    assert state is not None and state.completed
    keys = [orjson.loads(r["key"])["id"] for r in delta_rows(changelog, ["op", "key"]) if r["op"] == "r"]
    assert len(keys) == rows and len(set(keys)) == rows  # every row once: no chunk written twice
    # jsonl is at least once, and replays right
    assert replay(read_bench_jsonl(jsonl)) == bench_state(connect)
