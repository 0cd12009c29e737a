"""PySpark entry points, runnable with `spark-submit spark_jobs/<job>.py --config FILE` or
`python -m spark_jobs.<job> --config FILE`. They reuse `connectors` for everything but Spark."""
