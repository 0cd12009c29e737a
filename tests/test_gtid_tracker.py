"""GtidTracker (connectors/api.py): the in-place executed GTID set of the binlog translator gives
the same text as GtidSet.add after any sequence of additions."""

from __future__ import annotations

import random

from connectors.api import GtidSet, GtidTracker

U1 = "3E11FA47-71CA-11E1-9E33-C80AA9429562"
U2 = "0c7e6e4b-2d0f-11ee-8000-000000000001"


def _check(start: str, gtids: list[str]) -> None:
    tracker, ref = GtidTracker(start), GtidSet.parse(start)
    assert str(tracker) == str(ref)
    for g in gtids:
        tracker.add(g)
        ref = ref.add(g)
        assert str(tracker) == str(ref), (start, g)
        assert tracker.freeze() == ref
    assert str(tracker) == str(ref)  # cached text stays right


def test_mariadb_domains() -> None:
    _check("", ["0-1-1", "0-1-2", "1-5-7", "0-2-3", "10-1-1", "1-5-1"])
    _check("0-1-100,1-2-5", ["0-1-101", "2-9-1", "1-2-6"])
    rnd = random.Random(3)
    _check("0-1-5", [f"{rnd.randint(0, 3)}-{rnd.randint(1, 3)}-{rnd.randint(1, 50)}" for _ in range(300)])


def test_mysql_intervals() -> None:
    _check("", [f"{U1}:1", f"{U1}:2", f"{U1}:4", f"{U1}:3", f"{U2}:10", f"{U1}:2", f"{U2.upper()}:11"])
    _check(f"{U1}:1-5:7-9,{U2}:1", [f"{U1}:6", f"{U1}:10", f"{U2}:3", f"{U2}:2"])
    rnd = random.Random(5)
    _check(f"{U1}:1-3", [f"{rnd.choice((U1, U2))}:{rnd.randint(1, 60)}" for _ in range(300)])


def test_server_kind_switch() -> None:
    # As GtidSet.add: a GTID of the other kind leaves only that kind.
    _check("0-1-5", [f"{U1}:1", "0-1-6", f"{U1}:2"])
    _check(f"{U1}:1-3", ["0-1-1", f"{U2}:4"])


def test_text_is_rendered_once_per_change() -> None:
    t = GtidTracker("0-1-5")
    t.add("0-1-6")
    first = str(t)
    assert str(t) is first  # cached until the next add
    t.add("0-1-7")
    assert str(t) == "0-1-7"
