# Airflow 3 with the Spark provider and Tidemark (DAG factory, plugin, spark_jobs) installed.
# Build from the repository root: docker build -f docker/airflow.Dockerfile .
FROM apache/airflow:3.3.2-python3.11

USER root
# spark-submit (client mode) runs the Spark driver here: it needs a JVM.
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
USER airflow

COPY --chown=airflow:root pyproject.toml README.md /opt/tidemark/
COPY --chown=airflow:root connectors /opt/tidemark/connectors
COPY --chown=airflow:root spark_jobs /opt/tidemark/spark_jobs
COPY --chown=airflow:root plugins /opt/tidemark/plugins
# Pin apache-airflow in the same command so pip never swaps the image's Airflow; then the same
# pyspark fix-up as .ci/setup (pyspark-client overwrites pyspark's files).
RUN pip install --no-cache-dir "apache-airflow==3.3.2" /opt/tidemark \
 && pip install --no-cache-dir --no-deps --force-reinstall "pyspark==4.3.0"
