"""Tidemark's Airflow side: connector discovery and runtime configuration (`config.py`), the
Connection hook (`hooks.py`), operators (`operators.py`), the notification trigger
(`triggers.py`), maintenance checks (`maintenance.py`) and the status page (`status_page.py`).

It lives in the plugins folder, which Airflow puts on `sys.path` for the DAG processor, the
workers, the triggerer and the API server alike; `plugins/.airflowignore` keeps the plugin
manager from importing these modules a second time under their bare file names.
"""
