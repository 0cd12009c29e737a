"""Tidemark's Airflow plugin: the connector status page (`/tidemark/`, in the navigation bar).

The page and its API are a FastAPI app (plugins/tidemark_airflow/status_page.py) mounted on the
API server; the DAGs' operators, hook and trigger are in the same package (imported by the DAG
factory, the workers and the triggerer from the plugins folder, which Airflow puts on sys.path).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin
from tidemark_airflow.status_page import app


class TidemarkPlugin(AirflowPlugin):
    name = "tidemark"
    fastapi_apps = [{"app": app, "url_prefix": "/tidemark", "name": "Tidemark status"}]
    external_views = [
        {
            "name": "Tidemark connectors",
            "href": "/tidemark/",
            "destination": "nav",
            "category": "browse",
            "url_route": "tidemark",
        }
    ]
