"""The suite's order for parallel workers (tests/schedule.py)."""

from __future__ import annotations

from tests import schedule


def test_chunks_are_worksteals_first_split():
    assert schedule.chunk_sizes(10, 4) == [2, 2, 3, 3]
    assert schedule.chunk_sizes(3, 4) == [0, 1, 1, 1]
    assert sum(schedule.chunk_sizes(2412, 4)) == 2412


def test_heavy_modules_lead_every_chunk_longest_first_to_the_least_loaded_and_stay_whole():
    items = [f"m{i // 2}::t{i}" for i in range(24)]  # 12 modules of 2 tests
    weight = {"m11::t23": 30.0, "m10::t20": 25.0, "m9::t18": 20.0, "m8::t16": 10.0, "m7::t15": 9.0, "m1::t3": 1.0}
    got = schedule.spread(items, weight, 4, schedule.module_of)
    assert sorted(got) == sorted(items)  # a permutation: no test lost or doubled
    chunks, start = [], 0
    for size in schedule.chunk_sizes(24, 4):
        chunks.append(got[start : start + size])
        start += size
    # one heavy module leads each chunk, both its tests together (a module fixture built once)
    assert [c[:2] for c in chunks] == [
        ["m11::t22", "m11::t23"],
        ["m10::t20", "m10::t21"],
        ["m9::t18", "m9::t19"],
        ["m8::t16", "m8::t17"],
    ]
    assert chunks[3][2:6] == ["m7::t14", "m7::t15", "m1::t2", "m1::t3"]  # the least loaded takes the next ones
    heavy = {schedule.module_of(t) for t in weight}
    light = [x for x in got if schedule.module_of(x) not in heavy]
    assert light == [x for x in items if schedule.module_of(x) not in heavy]  # the others keep their order


def test_without_weights_or_workers_the_order_is_the_collection():
    items = ["a::1", "b::1", "c::1"]
    assert schedule.spread(items, {}, 4, schedule.module_of) == items
    assert schedule.spread(items, {"c::1": 5.0}, 1, schedule.module_of) == items


def test_the_heavy_list_from_a_probe_run(tmp_path):
    rows = [
        {"test": "a", "self": 1.0, "children": 3.0},
        {"test": "b", "self": 0.1, "children": 0.1, "cgroup": 9.0},
        {"test": "a", "self": 0.1, "children": 0.1, "cgroup": 2.0},  # a rerun: the heaviest counts
        {"test": "c", "self": 0.1, "children": 0.1, "cgroup": 0.5},
    ]
    lines = schedule.heavy_lines(rows)
    assert lines == ["9.0 b", "4.0 a"]
    path = tmp_path / "heavy.txt"
    path.write_text("# comment\n" + "\n".join(lines) + "\n")
    assert schedule.read_weights(path) == {"b": 9.0, "a": 4.0}
    assert schedule.read_weights(tmp_path / "none.txt") == {}
