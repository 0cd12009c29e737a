"""Process settings of the snapshot job that only change its speed: the driver JVM's JIT
(`session_conf`) and the chunk writers' allocator and GC (`snapshot_tasks.tune_process`)."""

from __future__ import annotations

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


def test_spark_submit_s_local_master_gets_loopback_unless_its_conf_sets_addresses() -> None:
    cfg = config("postgres")
    assert session_conf(cfg, {"spark.master": "local[2]"})["spark.driver.host"] == "127.0.0.1"
    given = session_conf(cfg, {"spark.master": "local[*]", "spark.driver.host": "10.0.0.5"})
    assert "spark.driver.host" not in given  # spark-submit's --conf stands: not overridden here
    assert given["spark.driver.bindAddress"] == "127.0.0.1"
    assert "spark.driver.host" not in session_conf(cfg, {"spark.master": "yarn"})


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
