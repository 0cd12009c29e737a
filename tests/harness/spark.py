"""The suite's single local SparkSession (built lazily: starting a JVM costs seconds)."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from connectors.app.embedded.util import HarnessError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "2g",
    # Loopback only: no dependence on the machine's hostname resolving.
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.ansi.enabled": "true",
}


def build_spark(work_dir: Path, extra_conf: dict[str, str] | None = None) -> tuple[SparkSession, float]:
    """Start ``local[2]`` Spark with warehouse/scratch dirs under ``work_dir``; returns (session, seconds)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise HarnessError("Spark needs a JVM: install openjdk-17-jre-headless (or run .ci/setup)")
    from pyspark.sql import SparkSession

    t0 = time.monotonic()
    # Spark must not pick up a developer's cluster settings.
    for var in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "MASTER"):
        os.environ.pop(var, None)
    # Workers must run this venv's interpreter (not a realpath: that would lose the venv).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master("local[2]").appName("tidemark-tests")
    conf = {
        **SPARK_CONF,
        "spark.sql.warehouse.dir": str(work_dir / "spark-warehouse"),
        "spark.local.dir": str(work_dir / "spark-local"),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={work_dir / 'derby'}",
        **(extra_conf or {}),
    }
    for k, v in conf.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session, time.monotonic() - t0
