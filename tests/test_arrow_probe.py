"""spark_jobs/arrow_probe.py: pyarrow's first Python-object conversion imports pandas (~0.2 s),
once inside the MySQL snapshot's global read lock; after the probe it does not, and pandas stays
usable when it is really asked for. Each case runs in a fresh interpreter (pandas loaded by
another test would hide the import)."""

from __future__ import annotations

import subprocess
import sys


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


CONVERSIONS = "pa.array([1, None]); pa.scalar(1, pa.int64()); pa.table({'a': ['x']})\n"


def test_without_the_probe_pyarrow_imports_pandas() -> None:
    """The premise: if a pyarrow release stops doing this, the probe can go."""
    out = _python("import sys, pyarrow as pa\n" + CONVERSIONS + "print('pandas' in sys.modules)")
    assert out == "True"


def test_after_the_probe_conversions_leave_pandas_alone_and_to_pandas_works() -> None:
    out = _python(
        "import sys, pyarrow as pa\n"
        "from spark_jobs.arrow_probe import skip_pandas_probe\n"
        "skip_pandas_probe()\n" + CONVERSIONS + "print('pandas' in sys.modules)\n"
        "print(type(pa.table({'a': [1]}).to_pandas()).__name__)\n"
        "print(sys.meta_path[0].__class__.__name__ != '_NoPandas')"
    )
    assert out.split() == ["False", "DataFrame", "True"]


def test_the_snapshot_job_reaches_its_work_without_pandas() -> None:
    """Importing the job (before job_start runs the probe) makes no Arrow conversion, and after
    job_start neither the modules the job loads later nor conversions import pandas."""
    out = _python(
        "import sys\n"
        "import spark_jobs.snapshot as job\n"
        "job.job_start('WARNING', None)\n"
        "import connectors.snapshot.mysql, connectors.snapshot.postgres, spark_jobs.snapshot_tasks\n"
        "import connectors.sources.mysql.history, connectors.sinks.delta\n"
        "import pyarrow as pa\n" + CONVERSIONS + "print('pandas' in sys.modules)"
    )
    assert out == "False"


def test_pyspark_test_helpers_import_pandas_unless_imported_with_it_hidden() -> None:
    """A SparkContext's start imports pyspark.testing.utils (py4j's NumPy input converter), which
    imports pandas; imported first through skip_pyspark_pandas_check it does not, and pandas
    still imports when asked for."""
    assert _python("import sys, pyspark.testing.utils\nprint('pandas' in sys.modules)") == "True"
    out = _python(
        "import sys\n"
        "from spark_jobs.arrow_probe import skip_pyspark_pandas_check\n"
        "skip_pyspark_pandas_check()\n"
        "import pyspark.testing.utils as u\n"
        "print('pandas' in sys.modules, u.have_numpy)\n"
        "import pandas\n"
        "print(not any(type(f).__name__ == '_NoPandas' for f in sys.meta_path))"
    )
    assert out.split() == ["False", "True", "True"]
