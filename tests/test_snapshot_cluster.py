"""The snapshot job as production runs it: on a Spark standalone cluster (a master and a worker
started from pyspark's own jars, `tests/harness/spark_cluster.py`), into a Delta change log on an
object store (Azurite) — the same table the stream then writes to."""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pyarrow.compute as pc
import pytest
from cdc import bench_state, create_bench, read_jsonl, run_cli, sigkill_when, spark_submit
from deltalake import DeltaTable
from mycdc import write_config as my_config
from pgcdc import write_config

from connectors.app.embedded.util import unique_server_id
from connectors.settings.config import load
from connectors.snapshot.progress import SnapshotProgress

WRONG_KEY = "d3Jvbmcta2V5LW5vdC10aGUtYWNjb3VudHMtb3duLWtleS1hdC1hbGwtMTIzNDU2Nzg5MA=="


def _lake(azurite: Any, unique_name: Any) -> str:
    return f"az://{azurite.create_container(unique_name('lake').replace('_', '-'))}/tm/changelog"


def _storage(azurite: Any, uri: str, key: str) -> dict[str, str]:
    opts = {f"debezium.sink.delta.storage.{k}": v for k, v in azurite.storage_options(key).items()}
    return {"debezium.sink.delta.table.path": uri, **opts}


def _config(
    tmp_path: Path, pg: Any, db: str, slot: str, uri: str, key: str, azurite: Any, **extra: Any
) -> Path:
    return write_config(
        tmp_path / "c.properties",
        pg,
        slot=slot,
        dbname=db,
        sinks="delta",
        warehouse=tmp_path / "wh",  # state stays with the driver; the change log is in the store
        snapshot__mode="initial",
        **{**_storage(azurite, uri, key), **extra},
    )


def _on_cluster(cluster: Any, rows: int) -> dict[str, str]:
    return {
        "tidemark.spark.master": cluster.url,
        # the worker listens on loopback; a cluster on other hosts needs the driver's address
        "tidemark.spark.conf.spark.driver.host": "127.0.0.1",
        "tidemark.snapshot.read.during.spark.start": "false",
        "tidemark.snapshot.chunk.rows": str(rows // 6),
    }


def _snapshot_then_stream(
    cfg: Path,
    uri: str,
    n: int,
    azurite: Any,
    cluster: Any,
    insert: Callable[[str], object],
    state: Any,
    *,
    in_executors: bool = True,
) -> None:
    """`tidemark run` snapshots the `n`-row bench in 6 chunks into the object store, every one
    read in an executor of the cluster (`in_executors`; else on the driver's threads: MySQL's
    locking method); then, after two inserts, streams them into the same table."""
    key = azurite.storage_options()["azure_storage_account_key"]
    first = run_cli("run", "--config", str(cfg), "--until-caught-up", "--log-level", "DEBUG", timeout=300)
    assert key not in first.stderr + first.stdout
    read = re.findall(
        r"snapshot: chunk (\d+) of \S+: \d+ rows in \S+ \(process (\d+)(, the driver)?", first.stderr
    )
    assert len(read) == 6, (read, first.stderr[-3000:], cluster.executor_logs())
    if in_executors:
        assert not any(driver for _, _, driver in read), read
        # The chunks ran in the cluster's application (its executor processes, not this
        # machine's local[*] session): the master lists the job among its finished applications.
        apps = [a["name"] for a in cluster.master.status().get("completedapps", [])]
        assert f"tidemark-snapshot-{load(cfg).name}" in apps, apps

    dt = _changelog(uri, azurite)
    assert sorted(_ids(dt, "r")) == list(range(1, n + 1))  # each row once
    assert all(u.startswith(f"{uri}/") for u in dt.file_uris()), dt.file_uris()[:3]
    chunk_commits = [h for h in dt.history() if "tidemark.chunk" in h]
    assert len(chunk_commits) == 6, [h.get("operation") for h in dt.history()]

    # The stream goes on into the same table, without a second snapshot (snapshot.mode=initial).
    insert(f"INSERT INTO bench (id, name, qty) VALUES ({n + 1}, 'new', 1), ({n + 2}, 'new', 2)")
    second = run_cli("run", "--config", str(cfg), "--until-caught-up", timeout=300)
    assert "snapshotting" not in second.stderr, second.stderr[-3000:]
    dt = _changelog(uri, azurite)
    assert sorted(_ids(dt, "c")) == [n + 1, n + 2]
    assert len(_ids(dt, "r")) == n
    assert set(_ids(dt, "r")) | set(_ids(dt, "c")) == set(state())


def _changelog(uri: str, azurite: Any) -> Any:
    return DeltaTable(uri, storage_options=azurite.storage_options())


def _ids(dt: Any, op: str) -> list[int]:
    t = dt.to_pyarrow_table(columns=["op", "key"])
    keys = t.filter(pc.equal(t["op"], op))["key"].to_pylist()
    return [orjson.loads(k)["id"] for k in keys]


def _slots(pg: Any, db: str) -> list[str]:
    return [r[0] for r in pg.query("SELECT slot_name FROM pg_replication_slots", dbname=db)]


def test_postgres_snapshot_on_a_cluster_into_an_object_store_then_the_stream(
    pg: Any, pg_database: str, unique_name: Any, tmp_path: Path, azurite: Any, spark_cluster: Any
) -> None:
    """`tidemark run` with `tidemark.spark.master=spark://...` and an `az://` change log: every
    chunk is read by a task in the cluster's executors (the driver reads none here), the tasks
    write their Parquet files into the container and the driver commits them, one app
    transaction per chunk; the stream then appends to the same table. Refused credentials stop
    the job before the slot exists, and the key never shows."""
    n = 6_000
    connect = lambda: pg.connect(dbname=pg_database)  # noqa: E731
    create_bench(connect, "postgres", n)
    uri, slot = _lake(azurite, unique_name), unique_name("slot")
    spark = _on_cluster(spark_cluster, n)
    refused = run_cli(
        "run",
        "--config",
        str(_config(tmp_path, pg, pg_database, slot, uri, WRONG_KEY, azurite, **spark)),
        "--until-caught-up",
        check=False,
        timeout=120,
    )
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert f"the Delta change log {uri}" in refused.stderr and "403" in refused.stderr, refused.stderr[-3000:]
    assert WRONG_KEY not in refused.stderr + refused.stdout and "Traceback" not in refused.stderr
    assert slot not in _slots(pg, pg_database)

    key = azurite.storage_options()["azure_storage_account_key"]
    cfg = _config(tmp_path, pg, pg_database, slot, uri, key, azurite, **spark)
    _snapshot_then_stream(
        cfg,
        uri,
        n,
        azurite,
        spark_cluster,
        partial(pg.execute, dbname=pg_database),
        partial(bench_state, connect),
    )


@pytest.mark.parametrize("method", ["watermarks", "locking"])
def test_mariadb_snapshot_on_a_cluster_into_an_object_store_then_the_stream(
    mariadb: Any,
    mariadb_database: str,
    unique_name: Any,
    tmp_path: Path,
    azurite: Any,
    spark_cluster: Any,
    method: str,
) -> None:
    """The same with MariaDB. Lock-free (`tidemark.snapshot.mysql.method=watermarks`): each chunk
    is read between its binlog watermarks by a task in the cluster's executors. Locking: the
    chunks are read on the driver's threads inside the consistent-snapshot transactions opened
    under the lock, and written to the object store from there."""
    n = 6_000
    connect = partial(mariadb.connect, database=mariadb_database)
    create_bench(connect, "mysql", n)
    uri = _lake(azurite, unique_name)
    cfg = my_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=unique_server_id(),
        db=mariadb_database,
        sinks="delta",
        warehouse=tmp_path / "wh",
        snapshot__mode="initial",
        tidemark__snapshot__mysql__method=method,
        **_storage(azurite, uri, azurite.storage_options()["azure_storage_account_key"]),
        **_on_cluster(spark_cluster, n),
    )

    def insert(sql: str) -> None:
        conn = connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
        finally:
            conn.close()

    _snapshot_then_stream(
        cfg,
        uri,
        n,
        azurite,
        spark_cluster,
        insert,
        partial(bench_state, connect),
        in_executors=method == "watermarks",
    )


def test_a_snapshot_into_an_object_store_killed_mid_way_resumes_without_rewriting_chunks(
    pg: Any, pg_database: str, unique_name: Any, tmp_path: Path, azurite: Any
) -> None:
    """SIGKILL the job (local Spark) once two chunks are committed to the object-store change log,
    run it again: it resumes, and the table holds each row's snapshot record once — the committed
    chunks are found by their app transactions in the store."""
    n = 20_000
    connect = lambda: pg.connect(dbname=pg_database)  # noqa: E731
    create_bench(connect, "postgres", n)
    uri, slot = _lake(azurite, unique_name), unique_name("slot")
    key = azurite.storage_options()["azure_storage_account_key"]
    cfg = _config(
        tmp_path,
        pg,
        pg_database,
        slot,
        uri,
        key,
        azurite,
        **{"snapshot.max.threads": "1", "tidemark.snapshot.chunk.rows": str(n // 20)},
    )
    loaded = load(cfg)
    progress = SnapshotProgress(loaded.warehouse, loaded.name)
    sigkill_when(
        cfg,
        tmp_path / "first.log",
        lambda: (s := progress.latest()) is not None and len(s.done) >= 2,
        timeout=300,
        what="two snapshot chunks done",
        group=True,  # the Spark JVM and workers die with it
    )
    state = progress.latest()
    assert state is not None and not state.completed and 2 <= len(state.done) < len(state.chunks)
    second = run_cli("run", "--config", str(cfg), "--until-caught-up", timeout=300)
    assert "resuming" in second.stderr, second.stderr[-3000:]
    state = progress.latest()
    assert state is not None and state.completed
    ids = _ids(_changelog(uri, azurite), "r")
    assert len(ids) == n and sorted(ids) == list(range(1, n + 1))  # no chunk written twice


@pytest.mark.parametrize("sink", ["delta", "jsonl"])
def test_a_worker_host_without_the_local_sink_files_stops_the_job_and_the_next_start_resumes(
    pg: Any, pg_database: str, tmp_path: Path, sink: str
) -> None:
    """A cluster whose worker is another host (its own host name, and its own empty file system
    where the driver keeps the warehouse and the jsonl file: `OtherHost`), with the sink's files
    on the driver's local disk. Delta: the executors' Parquet files land on the worker's disk, so
    the driver refuses to commit the first one. jsonl: the task does not find the staging
    directory the driver made. Either way the job stops naming the hosts and what storage a
    cluster needs — no traceback, no chunk done — and the snapshot then resumes locally."""
    from harness.spark_cluster import OtherHost, start_spark_cluster

    n = 3_000
    connect = lambda: pg.connect(dbname=pg_database)  # noqa: E731
    create_bench(connect, "postgres", n)
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    common = dict(
        slot="other_host",
        dbname=pg_database,
        sinks=sink,
        jsonl=warehouse / "out.jsonl",
        warehouse=warehouse,
        snapshot__mode="initial",
    )
    cluster = start_spark_cluster(cores=1, memory="1g", host=OtherHost("tidemark-other-host", warehouse))
    try:
        cfg = write_config(tmp_path / "c.properties", pg, **common, **_on_cluster(cluster, n))
        refused = run_cli("snapshot", "--config", str(cfg), check=False, timeout=300)
    finally:
        cluster.destroy()
    said = refused.stderr
    assert refused.returncode == 1, (said[-3000:], cluster.executor_logs())
    here = re.escape(socket.gethostname())
    expected = {
        "delta": rf"chunk \d+'s Delta data file \S+, written on host tidemark-other-host, is not there on the driver's host {here}",
        "jsonl": r"the jsonl sink's staging directory \S+, made by the driver, is not there on host tidemark-other-host",
    }[sink]
    assert re.search(expected, said), said[-3000:]
    assert "mounted at the same path on every host" in said and "Traceback" not in said, said[-3000:]
    assert "Lost task" not in said, said[-3000:]  # a refused chunk is not run again by Spark
    loaded = load(cfg)
    state = SnapshotProgress(loaded.warehouse, loaded.name).latest()
    assert state is not None and not state.completed and not state.done, state

    local = write_config(tmp_path / "local.properties", pg, **common, tidemark__spark__master="local[2]")
    again = run_cli("snapshot", "--config", str(local), timeout=300)
    assert "resuming" in again.stderr, again.stderr[-3000:]
    if sink == "delta":
        ids = _ids(DeltaTable(str(warehouse / loaded.name / "changelog")), "r")
    else:
        recs = read_jsonl(warehouse / "out.jsonl")
        ids = [r["key"]["payload"]["id"] for r in recs if r["value"]["payload"]["op"] == "r"]
    assert sorted(ids) == list(range(1, n + 1))  # each row once: nothing from the other host


def test_files_a_task_wrote_where_the_driver_cannot_see_them_stop_the_job(tmp_path: Path) -> None:
    """On a cluster whose hosts do not share the change log's local path (or the jsonl file's
    directory), a task's files are not on the driver's host: the driver refuses to commit them
    (a Delta log entry for a file the table does not have) and says what storage a cluster needs.
    The files here are where a host that does see them would have them — then the commit goes on."""
    from cfgutil import config

    from connectors.api import TerminalError
    from connectors.snapshot.chunks import Chunk
    from spark_jobs.snapshot import Committer
    from spark_jobs.snapshot_tasks import ChunkResult

    out = tmp_path / "out.jsonl"
    cfg = config(
        "postgres",
        {
            "debezium.sink.type": "delta,jsonl",
            "debezium.sink.jsonl.path": str(out),
            "tidemark.warehouse": str(tmp_path),
        },
    )
    committer = Committer(cfg, "0123456789abcdef")
    chunk = Chunk("public.t", 3, None, None)
    part = tmp_path / ".out.jsonl.parts-x" / "000003-a.jsonl"
    data = "collection=public.t/part-01234567-000003-a.zstd.parquet"
    res = ChunkResult(3, rows=1, host="executor-7", jsonl_part=str(part))
    res.delta_files.append(
        {
            "path": data,
            "size": 5,
            "partition_values": {"collection": "public.t"},
            "modification_time": 0,
            "stats": "{}",
        }
    )

    with pytest.raises(TerminalError) as refused:
        committer.commit(chunk, res)
    assert f"chunk 3's jsonl part {part}, written on host executor-7, is not there" in str(refused.value)
    assert (
        refused.value.hint
        and "object store" in refused.value.hint
        and "mounted at the same path on every host" in refused.value.hint
    )

    part.parent.mkdir()
    part.write_bytes(b"{}\n")
    with pytest.raises(TerminalError) as refused:
        committer.commit(chunk, res)
    assert f"chunk 3's Delta data file {committer.delta_uri}/{data}, written on host executor-7" in str(
        refused.value
    )
    assert not out.exists() or out.read_bytes() == b""  # nothing appended before the check

    (Path(committer.delta_uri or "") / data).parent.mkdir(parents=True)
    (Path(committer.delta_uri or "") / data).write_bytes(b"short")  # 5 bytes: as the task said
    committer._check_visible(chunk, res)  # seen whole: no error


def test_a_task_that_cannot_see_the_jsonl_staging_directory_says_so(tmp_path: Path) -> None:
    """The driver makes the jsonl staging directory beside the jsonl file; a task on a host that
    does not share that directory stops with what a cluster needs, not a bare FileNotFoundError."""
    from connectors.api import TerminalError
    from connectors.snapshot.chunks import Chunk
    from spark_jobs.snapshot_tasks import ChunkSpec, write_chunk

    missing = tmp_path / ".out.jsonl.parts-x"
    spec = ChunkSpec(
        {}, Chunk("public.t", 0, None, None), "sid", "snap", {}, (), ("jsonl",), None, str(missing)
    )
    with pytest.raises(TerminalError) as refused:
        write_chunk(spec, iter(()))
    assert f"the jsonl sink's staging directory {missing}, made by the driver, is not there on host" in str(
        refused.value
    )
    assert refused.value.hint and "mounted at the same path on every host" in refused.value.hint


def test_spark_submit_s_master_is_used_unless_the_file_sets_one(
    pg: Any, pg_database: str, tmp_path: Path, spark_cluster: Any
) -> None:
    """`spark-submit --master spark://...` (how a scheduler, e.g. the Airflow Spark provider's
    connection, picks the cluster) runs the job there when the connector file leaves
    `tidemark.spark.master` unset: its default, `local[*]`, must not replace the submitted master.
    A master the file sets wins (as a value set in code wins over spark-submit's flags in Spark)."""
    create_bench(lambda: pg.connect(dbname=pg_database), "postgres", 3000)

    def submit(name: str, **extra: str) -> tuple[str, list[str]]:
        cfg = write_config(
            tmp_path / f"{name}.properties",
            pg,
            slot=f"sub_{name}",
            dbname=pg_database,
            prefix=name,
            sinks="delta",
            snapshot__mode="initial_only",
            tidemark__snapshot__read__during__spark__start="false",
            tidemark__snapshot__chunk__rows="1000",
            **extra,
        )
        proc = spark_submit(
            *("--master", spark_cluster.url, "--conf", "spark.driver.host=127.0.0.1"),
            *("spark_jobs/snapshot.py", "--config", str(cfg), "--log-level", "DEBUG"),
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert sorted(_ids(DeltaTable(str(tmp_path / "warehouse" / name / "changelog")), "r")) == list(
            range(1, 3001)
        )
        return proc.stdout + proc.stderr, [
            a["name"] for a in spark_cluster.master.status().get("completedapps", [])
        ]

    log, apps = submit("submitted")
    assert f"Spark master {spark_cluster.url} (spark-submit's --master)" in log, [
        ln for ln in log.splitlines() if "tidemark" in ln
    ]
    assert "tidemark-snapshot-submitted" in apps, apps
    log, apps = submit("own", tidemark__spark__master="local[2]")
    assert "Spark master local[2]" in log and "tidemark-snapshot-own" not in apps, (apps, log[-3000:])


def test_incremental_spark_reader_on_a_worker_host_without_the_local_warehouse_says_so(
    pg: Any, pg_database: str, tmp_path: Path
) -> None:
    """The incremental snapshot's Spark reader on a cluster whose worker is another host
    (`OtherHost`) with the warehouse on the connector's local disk: the chunk tasks would stage
    their chunks where the stream cannot take them. The chunk job probes the staging directory
    from the executors before reading anything and stops, naming both hosts and the options
    (object store, shared mount, the thread reader); the connector reports it and streams on.
    Restarted with `tidemark.incremental.snapshot.reader=thread`, the snapshot completes."""
    from harness import wait_until
    from harness.spark_cluster import OtherHost, start_spark_cluster
    from incremental import SIGNAL_DDL, config_extra, pg_setup, snapshot_keys, start, stop

    warehouse = tmp_path / "warehouse"  # (pg_setup's)
    warehouse.mkdir()
    cluster = start_spark_cluster(cores=1, memory="1g", host=OtherHost("tidemark-other-host", warehouse))
    try:
        spark = {
            "tidemark__incremental__snapshot__reader": "spark",
            "tidemark__spark__master": cluster.url,
            "tidemark__spark__conf__spark__driver__host": "127.0.0.1",
        }
        s = pg_setup(pg, pg_database, tmp_path, "inc_other_host", **config_extra(**spark))
        s.sql(SIGNAL_DDL)
        create_bench(s.connect, "postgres", 3000)
        log = tmp_path / "connector.log"
        proc = start(s, log)
        try:
            s.source_signal("inc-other-host", "execute-snapshot", {"data-collections": ["public.bench"]})
            wait_until(
                lambda: "the chunk job failed" in log.read_text(), 180, f"the chunk job's failure ({log})"
            )
        finally:
            stop(proc)
    finally:
        cluster.destroy()
    said = log.read_text()
    assert re.search(
        r"the chunk job failed \(exit 1\): the incremental snapshot's staging probe \S+, written on host "
        rf"tidemark-other-host, is not there on the driver's host {re.escape(socket.gethostname())}",
        said,
    ), said[-3000:]
    assert "tidemark.incremental.snapshot.reader=thread" in said and "Traceback" not in said, said[-3000:]
    assert not s.notifications("COMPLETED") and not [k for k in snapshot_keys(s.changelog) if k > 0]

    s = pg_setup(pg, pg_database, tmp_path, "inc_other_host", **config_extra())  # the thread reader
    proc = start(s, log)
    try:
        wait_until(lambda: s.notifications("COMPLETED"), 180, f"the snapshot completed ({log})")
    finally:
        stop(proc)
    assert sorted(k for k in snapshot_keys(s.changelog) if k > 0) == list(range(1, 3001))
