"""Process settings of the snapshot job that only change its speed: the driver JVM's JIT
(`session_conf`) and the chunk writers' allocator and GC (`snapshot_tasks.tune_process`)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cfgutil import config

from spark_jobs.snapshot import DRIVER_JAVA_OPTIONS, session_conf

ROOT = Path(__file__).resolve().parents[1]


def test_driver_jvm_runs_without_c2_by_default() -> None:
    conf = session_conf(config("postgres"))
    assert conf["spark.driver.extraJavaOptions"] == DRIVER_JAVA_OPTIONS == "-XX:TieredStopAtLevel=1"
    assert conf["spark.driver.host"] == "127.0.0.1"  # local[*] default master


def test_configured_driver_java_options_replace_the_default() -> None:
    cfg = config(
        "postgres",
        {
            "tidemark.spark.conf.spark.driver.extraJavaOptions": "-Xss4m",
            "tidemark.spark.master": "spark://h:7077",
        },
    )
    conf = session_conf(cfg)
    assert conf["spark.driver.extraJavaOptions"] == "-Xss4m"
    assert "spark.driver.host" not in conf  # not local: the cluster's own addresses


# Allocates and frees ~70 MB of 3.5 kB bytes objects (a piece's Kafka values) three times and
# prints the page faults of the last two rounds.
_ROUNDS = textwrap.dedent(
    """
    import gc, resource, sys
    if sys.argv[1] == "tuned":
        from spark_jobs.snapshot_tasks import tune_process
        tune_process()
        tune_process()  # once per process: the second call changes nothing
        print(gc.get_freeze_count() > 0)
    else:
        print(True)

    def one_round():
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        values = [bytes(3500) for _ in range(20000)]
        del values
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    one_round()
    print(one_round() + one_round())
    """
)


def _faults(mode: str) -> tuple[bool, int]:
    out = subprocess.run(
        [sys.executable, "-c", _ROUNDS, mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    return out[0] == "True", int(out[1])


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt"
)
def test_chunk_writers_reuse_freed_memory_instead_of_faulting_it_in_again() -> None:
    """Untuned, glibc returns the freed values to the kernel and the next piece faults ~17k
    pages in again; tuned, the memory is reused."""
    frozen, tuned = _faults("tuned")
    _, plain = _faults("plain")
    assert frozen
    assert plain > 10_000
    assert tuned < plain // 20


def test_python_worker_daemon_preloads_the_chunk_modules_unless_the_file_sets_its_own() -> None:
    conf = session_conf(config("postgres"), ("connectors.snapshot.postgres",))
    assert conf["spark.python.daemon.module"] == "spark_jobs.worker_daemon"
    assert (
        conf["spark.executorEnv.TIDEMARK_WORKER_IMPORTS"]
        == "spark_jobs.snapshot_tasks,connectors.snapshot.postgres"
    )
    assert "spark.python.daemon.module" not in session_conf(config("postgres"))
    own = config("postgres", {"tidemark.spark.conf.spark.python.daemon.module": "mydaemon"})
    assert session_conf(own, ("x",))["spark.python.daemon.module"] == "mydaemon"


# A Spark session whose worker daemon preloads `colorsys` (nothing else imports it); the task
# reports, before importing anything itself, what its worker already holds and who forked it.
_PRELOADED = textwrap.dedent(
    """
    import json, sys
    from cfgutil import config
    from spark_jobs import snapshot
    spark = snapshot.spark_session(config("postgres"), ("colorsys",))

    def probe(_):
        import os, sys
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = f.read().replace(b"\\0", b" ").decode()
        return [m in sys.modules for m in ("colorsys", "wave", "spark_jobs.snapshot_tasks")] + [parent]

    out = spark.sparkContext.parallelize([0], 1).map(probe).collect()[0]
    snapshot.stop_session(spark)
    print(json.dumps(out))
    """
)


@pytest.mark.skipif(platform.system() != "Linux", reason="pyspark's worker daemon (fork) and /proc")
def test_spark_workers_are_forked_with_the_modules_already_imported() -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"}
    p = subprocess.run(
        [sys.executable, "-c", _PRELOADED], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-3000:]
    colorsys, wave, tasks, parent = json.loads(p.stdout.strip().splitlines()[-1])
    assert (colorsys, wave, tasks) == (True, False, True)
    assert "spark_jobs.worker_daemon" in parent
