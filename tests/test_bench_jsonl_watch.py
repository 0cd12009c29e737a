"""The latency benchmark's jsonl watcher: ids recognised by their line's prefix equal the ids a
full parse finds, lines that do not match byte for byte are parsed in full, and lines cut by a
read are finished by the next one."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from jsonl_watch import JsonlTail, id_prefix  # noqa: E402

KEY_SCHEMA = {
    "type": "struct",
    "fields": [{"type": "int64", "optional": False, "field": "id"}],
    "optional": False,
    "name": "bench.public.big.Key",
}


def line(topic: str, rid: int | str, *, schema: dict | None = KEY_SCHEMA) -> bytes:
    key = {"id": rid} if schema is None else {"schema": schema, "payload": {"id": rid}}
    value = {"schema": {"type": "struct"}, "payload": {"after": {"id": rid, "note": "x" * 300}, "op": "r"}}
    return orjson.dumps({"topic": topic, "key": key, "value": value}) + b"\n"


def ids_of(found: list, fast: list[int]) -> list:
    out = []
    for k, _ in found:
        out.append(k["payload"]["id"] if isinstance(k, dict) and "payload" in k else k["id"])
    return out + fast


def test_fast_ids_equal_full_parse(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    ids = [0, 7, 10, 99, 123456789, 10**17 + 3, 999_999_999_999_999_999, 10**18, -5]
    data = b"".join(line("bench.public.big", i) for i in ids)
    other = line("bench.public.big", 5, schema={**KEY_SCHEMA, "name": "other.Key"})  # another key schema
    stream = line("bench.public.lat", 42)
    path.write_bytes(line("bench.public.big", 1))
    tail = JsonlTail(path, "bench.public.lat")
    first = tail.read()
    assert first is not None and ids_of(first[1], first[2]) == [1]  # (parsed in full: taught the prefix)
    with path.open("ab") as f:
        f.write(data + other + stream + b"\n")  # (an empty line too)
    got = tail.read()
    assert got is not None
    _, found, fast = got
    assert sorted(ids_of(found, fast), key=str) == sorted([*ids, 5, 42], key=str)
    # by prefix: all but the 19-digit and negative ids, the other key schema and the stream line
    assert sorted(fast) == [0, 7, 10, 99, 123456789, 10**17 + 3, 999_999_999_999_999_999]
    stream_values = [v for _, v in found if v is not None]
    assert len(stream_values) == 1 and stream_values[0]["payload"]["after"]["id"] == 42
    assert tail.read() is None


@pytest.mark.parametrize("cut", [1, 17, 60, 200])
def test_a_line_cut_by_a_read_is_finished_by_the_next(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "out.jsonl"
    lines = [line("bench.public.big", i) for i in range(1, 6)]
    whole = b"".join(lines)
    at = len(b"".join(lines[:3])) + cut  # inside the fourth line
    path.write_bytes(whole[:at])
    tail = JsonlTail(path, "bench.public.lat")
    first = tail.read()
    assert first is not None and ids_of(first[1], first[2]) == [1, 2, 3]
    with path.open("ab") as f:
        f.write(whole[at:])
    second = tail.read()
    assert second is not None and ids_of(second[1], second[2]) == [4, 5]
    assert second[2] == [4, 5]  # (the prefix learnt from the first line)


def test_a_read_without_a_whole_line(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    one = line("bench.public.big", 3)
    path.write_bytes(one[:50])
    tail = JsonlTail(path, "bench.public.lat")
    assert tail.read() is not None and tail.have == 50
    with path.open("ab") as f:
        f.write(one[50:])
    got = tail.read()
    assert got is not None and ids_of(got[1], got[2]) == [3]


def test_the_prefix_is_learnt_only_from_an_integer_id_line() -> None:
    assert id_prefix(line("t", 12)) == line("t", 12).split(b'"payload":{"id":')[0] + b'"payload":{"id":'
    assert id_prefix(line("t", "12")) is None  # (a text id)
    assert id_prefix(line("t", -3)) is None
    assert id_prefix(b'{"topic":"t","key":null,"value":null}') is None
    assert id_prefix(b"not json") is None
