"""Snapshots: which one a start needs (`decide`), its chunks (`chunks`), its per-chunk progress in
`_state/snapshots` (`progress`), and the change-log rows of a chunk built column-wise (`rows`).

Lean like the rest of `connectors`: no Spark here. The Spark job (`spark_jobs/snapshot.py`)
plans through a connector's snapshot module (`snapshot/postgres.py`), runs one task per
chunk and commits each chunk on its own.
"""
