"""Snapshot planning without a database: markers, boundaries, mode decisions."""

from __future__ import annotations

import pytest

from connectors.snapshot.chunks import Chunk, marker, pick_boundaries, range_condition, table_chunks
from connectors.snapshot.decide import decide
from connectors.snapshot.progress import SnapshotState


def _marks(tables: list[list[int]]) -> list[str]:
    """Markers of every row of a snapshot: `tables` = per table, the rows of each chunk;
    empty tables (no rows at all) do not count as the last table, as the planner decides."""
    filled = [i for i, t in enumerate(tables) if sum(t)]
    out: list[str] = []
    index = 0
    for ti, chunk_rows in enumerate(tables):
        chunks = table_chunks(
            f"s.t{ti}",
            index,
            ti,
            len(tables),
            [(b,) for b in range(len(chunk_rows) - 1)],
            last_table=bool(filled) and ti == filled[-1],
        )
        index += len(chunks)
        for c, n in zip(chunks, chunk_rows, strict=True):
            out += [marker(c, i == 0, i == n - 1) for i in range(n)]
    return out


def test_markers_as_debezium_36() -> None:
    # Observed from Debezium 3.6 (5 rows, 0 rows, 1 row, 3 rows, 2 rows, 0 rows).
    got = _marks([[5], [0], [1], [3], [2], [0]])
    assert got == (
        ["first", "true", "true", "true", "last_in_data_collection"]
        + ["last_in_data_collection"]  # a one-row table: the "last" test wins
        + ["first_in_data_collection", "true", "last_in_data_collection"]
        + ["first_in_data_collection", "last"]  # the last table is empty: `last` moves here
    )


def test_markers_across_chunks_and_single_tables() -> None:
    assert _marks([[2, 2]]) == ["first", "true", "true", "last"]
    assert _marks([[1]]) == ["last"]  # the only row: last wins over first
    assert _marks([[1], [1]]) == ["first", "last"]
    assert _marks([[0], [2]]) == ["first_in_data_collection", "last"]  # no `first`: the first table is empty


def test_boundaries_are_sampled_keys_never_the_largest() -> None:
    keys = [(str(i),) for i in range(1, 101)]
    b = pick_boundaries(keys, 10_000, 2_500, ("100",))
    assert b == [("26",), ("51",), ("76",)]
    assert pick_boundaries(keys, 1_000, 2_500, None) == []  # one chunk
    assert pick_boundaries([("1",), ("2",)], 10_000, 1_000, ("2",)) == [("1",)]


def test_range_condition_composite_and_open_ends() -> None:
    def ident(c: str) -> str:
        return f'"{c}"'

    def lit(v: object) -> str:
        return f"'{v}'"

    assert range_condition(["a", "b"], Chunk("t", 1, ("1", "x"), ("2", "y")), ident, lit) == (
        "(\"a\", \"b\") > ('1', 'x') AND (\"a\", \"b\") <= ('2', 'y')"
    )
    assert range_condition(["id"], Chunk("t", 0, None, ("5",)), ident, lit) == "\"id\" <= '5'"
    assert range_condition(["id"], Chunk("t", 0, None, None), ident, lit) is None
    assert range_condition([], Chunk("t", 0, None, None), ident, lit) is None


def _state(completed: bool) -> SnapshotState:
    return SnapshotState("s", {}, {}, [Chunk("t", 0, None, None)], completed=completed)


@pytest.mark.parametrize(
    ("mode", "has_offset", "resumable", "state", "want"),
    [
        ("initial", False, True, None, (True, False, True, False)),
        ("initial", True, True, None, (False, False, True, False)),
        ("initial", False, True, "done", (False, False, True, False)),
        ("initial", True, True, "unfinished", (True, True, True, False)),
        ("initial_only", False, True, None, (True, False, False, False)),
        ("initial_only", False, True, "done", (False, False, False, False)),
        ("always", True, True, "done", (True, False, True, False)),
        ("always", True, False, "done", (True, False, True, True)),
        ("when_needed", True, True, "done", (False, False, True, False)),
        ("when_needed", True, False, "done", (True, False, True, True)),
        ("when_needed", False, True, None, (True, False, True, False)),
        ("no_data", False, True, "unfinished", (False, False, True, False)),
        ("never", True, False, None, (False, False, True, False)),
    ],
)
def test_decide(
    mode: str, has_offset: bool, resumable: bool, state: str | None, want: tuple[bool, ...]
) -> None:
    st = None if state is None else _state(state == "done")
    d = decide(mode, has_offset=has_offset, resumable=resumable, state=st)
    assert (d.snapshot, d.resume, d.stream, d.reset_offsets) == want, d.reason


def test_decide_configuration_based() -> None:
    d = decide(
        "configuration_based",
        has_offset=True,
        resumable=True,
        state=None,
        configuration_based=(True, False, False),
    )
    assert d.snapshot and not d.stream  # snapshot.data=true: every start, as Debezium's
    d = decide(
        "configuration_based",
        has_offset=True,
        resumable=False,
        state=None,
        configuration_based=(False, True, True),
    )
    assert d.snapshot and d.stream and d.reset_offsets  # snapshot.on.data.error
    d = decide(
        "configuration_based",
        has_offset=True,
        resumable=True,
        state=None,
        configuration_based=(False, True, True),
    )
    assert not d.snapshot
