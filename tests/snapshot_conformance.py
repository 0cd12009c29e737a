"""The steps the snapshot conformance tests share (tests/test_snapshot_conformance_postgres.py,
tests/test_snapshot_conformance_mysql.py): Debezium 3.6's initial snapshot, checked on its own;
then `tidemark snapshot` with the same source properties, compared with it per topic as
multisets (tests/conformance/normalize.py, "snapshots").

The two snapshots run at once (Debezium's on a thread, `debezium_in_background`): they read
the same unchanging tables, each in its own view, and Debezium's JVM start overlaps Spark's.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cdc import write_config
from conformance.debezium import read_jsonl, run_debezium_snapshot
from conformance.normalize import assert_snapshot_conform, mark_counts, snapshot_problems
from conformance.snapshot import changelog_records, run_tidemark_snapshot, without_headers


def debezium_snapshot(
    tmp_path: Path,
    variant: str,
    connector_class: str,
    source: Mapping[str, str],
    *,
    counts: Mapping[str, int],
    prefix: str,
    is_row: Callable[[dict[str, Any]], bool],
    expected: int | None = None,
) -> list[dict[str, Any]]:
    """Debezium's snapshot (its own JVM in a subprocess) of the tables `source` captures, into
    `tmp_path/debezium.jsonl`. Checks that the records `is_row` selects hold every row of
    `counts` (`{"<schema>.<table>": rows}`) once, on topic `<prefix>.<schema>.<table>`, and that
    its marks and consistency point are coherent. `expected`: stop once that many records came."""
    out = tmp_path / "debezium.jsonl"
    records = run_debezium_snapshot(
        {"connector.class": connector_class, "name": f"dbz-snap-{variant}", **source}, out, expected=expected
    )
    rows = [r for r in records if is_row(r)]
    assert Counter(r["topic"] for r in rows) == {f"{prefix}.{t}": n for t, n in counts.items() if n}, (
        f"Debezium's snapshot does not hold every row once; rows {counts}; log {out}.log"
    )
    assert len(rows) == sum(counts.values())
    assert snapshot_problems(records, "Debezium") == []
    return records


def debezium_in_background(*args: Any, **kwargs: Any) -> Callable[[], list[dict[str, Any]]]:
    """`debezium_snapshot(*args, **kwargs)` started on a thread now; the returned callable waits
    for its records (raising what it raised)."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="debezium-snapshot")
    future = pool.submit(debezium_snapshot, *args, **kwargs)
    pool.shutdown(wait=False)  # the thread ends with its one task
    return future.result


def tidemark_snapshot_conforms(
    tmp_path: Path,
    variant: str,
    connector_class: str,
    source: Mapping[str, str],
    debezium_records: Callable[[], list[dict[str, Any]]],
    *,
    sink: str,
    prefix: str,
    counts: Mapping[str, int],
) -> None:
    """`tidemark snapshot` with `source` into `sink` ("jsonl": keys and values, the file keeps
    no headers; "delta": the change log rebuilt into Kafka records, headers too), compared with
    Debezium's records (`debezium_records()`, waited for once Tidemark's run ends). Both sides'
    sizes and marks go to `tmp_path/summary.json` for inspection when the comparison fails."""
    tm_out = tmp_path / "tidemark.jsonl"
    warehouse = tmp_path / "warehouse"
    log = tmp_path / "tidemark.log"
    config = write_config(
        tmp_path / "tidemark.properties",
        {"connector.class": connector_class, "name": f"tm-snap-{variant}", **source},
        sinks=sink,
        jsonl=tm_out if sink == "jsonl" else None,
        warehouse=warehouse,
    )
    try:
        run_tidemark_snapshot(config, log)
    except BaseException:
        with contextlib.suppress(Exception):  # Tidemark's failure is the one reported
            debezium_records()  # its JVM ends before the test does
        raise
    debezium = debezium_records()
    if sink == "jsonl":
        assert tm_out.exists(), f"tidemark wrote no {tm_out}; log {log}"
        tidemark, expected_side = read_jsonl(tm_out), without_headers(debezium)
    else:
        tidemark = changelog_records(warehouse / prefix / "changelog")
        expected_side = debezium
    (tmp_path / "summary.json").write_text(
        json.dumps(
            {
                "variant": variant,
                "sink": sink,
                "rows": counts,
                "debezium": len(debezium),
                "tidemark": len(tidemark),
                "debezium_file": str(tmp_path / "debezium.jsonl"),
                "tidemark_file": str(tm_out),
                "debezium_marks": mark_counts(debezium),
                "tidemark_marks": mark_counts(tidemark),
            },
            indent=1,
        )
    )
    # the change log holds no emission order across chunks (each chunk its own commit, its
    # `event_index` from 0), so there only the number of `first`/`last` marks is checked
    assert_snapshot_conform(expected_side, tidemark, tidemark_ordered=sink == "jsonl")
