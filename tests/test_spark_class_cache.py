"""The snapshot job's driver JVM and its class-data archive (`spark_jobs.class_cache`): the first
session writes it as its JVM exits, later sessions read it, a damaged archive is deleted and
Spark starts without it, and nothing is used where the JVM's options are not ours to set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest
from cfgutil import config

from spark_jobs import class_cache

ROOT = Path(__file__).resolve().parents[1]

# One job process's Spark session (the job's own spark_session / stop_session) and a task on it;
# prints the driver JVM's arguments and the archive it was planned with.
_SESSION = textwrap.dedent(
    """
    import json, logging, sys
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    from cfgutil import config
    from spark_jobs import snapshot
    props = dict(arg.split("=", 1) for arg in sys.argv[1:])
    spark = snapshot.spark_session(config("postgres", props))
    planned = snapshot._CLASS_CACHE
    writing = bool(planned and planned.writing)
    args = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    total = spark.sparkContext.parallelize(range(100), 2).map(lambda x: x * 2).sum()
    snapshot.stop_session(spark)
    print(json.dumps({"args": args, "sum": total, "pandas": "pandas" in sys.modules,
                      "writing": writing}))
    """
)


def _run(cache: Path, *props: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TIDEMARK_CACHE_DIR": str(cache), "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    return subprocess.run(
        [sys.executable, "-c", _SESSION, *props],
        cwd=cache,  # the JVM that crashes on a truncated archive writes hs_err_pid*.log here
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _session(cache: Path, *props: str) -> tuple[dict[str, object], str]:
    p = _run(cache, *props)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def _archives(cache: Path) -> list[Path]:
    return sorted((cache / "spark-cds").glob("*.jsa"))


def test_first_job_writes_the_archive_later_jobs_read_it_a_damaged_one_is_replaced(tmp_path: Path) -> None:
    out, _ = _session(tmp_path)
    assert out["sum"] == 9900 and out["writing"]
    assert not out["pandas"]  # a SparkContext's start imports it otherwise (spark_jobs/arrow_probe.py)
    (archive,) = _archives(tmp_path)  # in place once the JVM exited, no temporary file left
    assert archive.stat().st_size > 10_000_000
    assert not list((tmp_path / "spark-cds").glob("*.tmp"))

    out, _ = _session(tmp_path)
    assert out["sum"] == 9900 and not out["writing"]
    assert f"-XX:SharedArchiveFile={archive}" in out["args"]
    assert _archives(tmp_path) == [archive]

    # A truncated archive crashes the JVM (SIGBUS): Spark starts again without it, and it goes.
    with archive.open("r+b") as f:
        f.truncate(100_000)
    out, err = _session(tmp_path)
    assert out["sum"] == 9900
    assert "did not start with the class-data archive" in err
    assert not any(a.startswith("-XX:SharedArchiveFile") for a in out["args"])  # type: ignore[union-attr]
    assert not archive.exists()


def test_own_java_options_or_the_switch_leave_the_jvm_alone(tmp_path: Path) -> None:
    out, _ = _session(tmp_path, "tidemark.spark.class.cache=false")
    assert out["sum"] == 9900 and not out["writing"]
    assert not any("SharedArchive" in a or "ArchiveClasses" in a for a in out["args"])  # type: ignore[union-attr]
    out, _ = _session(tmp_path, "tidemark.spark.conf.spark.driver.extraJavaOptions=-Xss4m")
    assert "-Xss4m" in out["args"]  # type: ignore[operator]
    assert not any("Archive" in a for a in out["args"])  # type: ignore[union-attr]
    assert _archives(tmp_path) == []


def _no_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a job process: no JVM yet (other tests of the session may have started one here)."""
    from pyspark import SparkContext

    monkeypatch.setattr(SparkContext, "_gateway", None)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)


def test_the_archive_is_named_by_what_it_depends_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _no_gateway(monkeypatch)
    a = class_cache.archive_name({})
    assert a is not None and a == class_cache.archive_name({})
    assert class_cache.archive_name({"spark.driver.memory": "8g"}) != a
    monkeypatch.setenv("TIDEMARK_CACHE_DIR", str(tmp_path))
    plan = class_cache.plan({})
    assert plan is not None and plan.writing is not None
    assert plan.archive == tmp_path / "spark-cds" / a
    assert "-XX:ArchiveClassesAtExit=" in plan.java_options()
    plan.archive.write_bytes(b"x")
    plan = class_cache.plan({})
    assert plan is not None and plan.writing is None
    assert plan.java_options().endswith(f"-XX:SharedArchiveFile={plan.archive}")


def test_nowhere_to_keep_it_means_no_archive(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _no_gateway(monkeypatch)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TIDEMARK_CACHE_DIR", str(blocker))
    assert class_cache.plan({}) is None
    monkeypatch.setenv("TIDEMARK_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "12345")  # spark-submit started the JVM already
    assert class_cache.plan({}) is None
    assert config("postgres").runtime.spark_class_cache  # on by default


def test_an_archive_is_kept_when_spark_fails_for_another_reason(tmp_path: Path) -> None:
    """A bad master fails with and without the archive: the archive is not to blame and stays."""
    name = class_cache.archive_name({})
    assert name is not None
    archive = tmp_path / "spark-cds" / name
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"not an archive")
    p = _run(tmp_path, "tidemark.spark.master=nonsense://nowhere")
    assert p.returncode != 0
    assert "Spark could not start (tidemark.spark.master=nonsense://nowhere)" in p.stderr
    # in the JVM's own words, without its stack trace (spark_jobs/jvm_stderr.py)
    assert "the driver JVM exited: org.apache.spark.SparkException: Master must" in p.stderr
    assert "\tat org.apache.spark" not in p.stderr
    assert "did not start with the class-data archive" not in p.stderr
    assert archive.read_bytes() == b"not an archive"


def test_finish_puts_the_archive_in_place_and_drops_only_long_unused_others(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`finish` ends the process behind the gateway (here a Python child that, like PySpark's
    JVM, writes its file once its stdin closes), then renames the file into place; of the other
    archives only one unused for longer than UNUSED_S goes."""
    _no_gateway(monkeypatch)
    monkeypatch.setenv("TIDEMARK_CACHE_DIR", str(tmp_path))
    plan = class_cache.plan({})
    assert plan is not None and plan.writing is not None
    d = plan.archive.parent
    old, recent = d / "spark-0.0-old.jsa", d / "spark-0.0-recent.jsa"
    old.write_bytes(b"old")
    recent.write_bytes(b"recent")
    month_ago = time.time() - 30 * 86400
    os.utime(old, (month_ago, month_ago))
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; sys.stdin.read(); open(sys.argv[1], 'wb').write(b'A' * 4096)",
            str(plan.writing),
        ],
        stdin=subprocess.PIPE,
    )
    plan.finish(types.SimpleNamespace(proc=child, shutdown=lambda: None))
    assert child.returncode == 0
    assert plan.archive.read_bytes() == b"A" * 4096
    assert recent.exists() and not old.exists()
    assert not list(d.glob("*.tmp"))
    # reading it marks it used
    os.utime(plan.archive, (month_ago, month_ago))
    again = class_cache.plan({})
    assert again is not None and again.writing is None
    assert time.time() - plan.archive.stat().st_mtime < 60
