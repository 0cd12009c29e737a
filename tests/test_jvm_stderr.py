"""The driver JVM's stderr comes through `spark_jobs.jvm_stderr.JvmStderr`: while Spark starts,
Java stack frames are held back and the reason lines kept for the job's error; once started,
every line passes unchanged. A child process plays the JVM (the real one: test_spark_class_cache)."""

from __future__ import annotations

import io
import subprocess
import sys

from spark_jobs.jvm_stderr import JvmStderr

FAILED_START = (
    'Exception in thread "main" org.apache.spark.SparkException: Master must either be yarn or start with spark\n'
    "\tat org.apache.spark.deploy.SparkSubmit.prepareSubmitEnvironment(SparkSubmit.scala:270)\n"
    "\tat org.apache.spark.deploy.SparkSubmit.main(SparkSubmit.scala)\n"
    "\t... 4 more\n"
    "Error: A fatal exception has occurred. Program will exit.\n"
)


def _child(text: str, stderr: JvmStderr) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.stderr.write({text!r})"], timeout=60, **stderr.popen_kwargs()
    )
    assert proc.returncode == 0


def test_a_failed_start_gives_its_reason_without_the_stack_frames() -> None:
    out = io.BytesIO()
    stderr = JvmStderr(out)
    _child(FAILED_START, stderr)
    reason = stderr.reason()
    assert reason == (
        'Exception in thread "main" org.apache.spark.SparkException: Master must either be yarn or start with spark'
    )
    shown = out.getvalue().decode()
    assert "Master must either be yarn" in shown and "Program will exit" in shown
    assert "\tat " not in shown and "more" not in shown


def test_after_the_start_every_line_passes() -> None:
    out = io.BytesIO()
    stderr2 = JvmStderr(out)
    kwargs = stderr2.popen_kwargs()
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; sys.stdin.readline(); sys.stderr.write('WARN x\\n\\tat a.b(C.java:1)\\n')",
        ],
        stdin=subprocess.PIPE,
        **kwargs,
    )
    stderr2.started()
    child.communicate(b"go\n", timeout=60)
    assert stderr2.reason() is None
    assert out.getvalue() == b"WARN x\n\tat a.b(C.java:1)\n"
