"""The suite's order for parallel workers: the heaviest tests first, spread over the workers.

pytest-xdist's `worksteal` hands each of W workers one contiguous chunk of the collection
(chunk i: what is left // (W - i) tests) and an idle worker then steals the second half of
the longest queue, from its end. In collection order the heaviest tests (the end-to-end runs
of tests/security, tests/served_import, the type checks) fall in the last chunk, where one
started late leaves the other workers idle at the end while it runs alone. `spread` puts the
heavy tests at the front of the W chunks, each to the chunk with the least heavy work so far
(longest first), and the rest after them in collection order: nothing is stolen before it
runs, and the tail is the light tests.

The weights are measured CPU seconds per test (`tests/heavy.txt`, one `SECONDS NODEID` a
line), written from a `KOPT_TEST_CPU` run (tests/cpu_probe.py) by

    python -m tests.schedule FILE.jsonl > tests/heavy.txt

A test missing from the file weighs nothing; a line naming no collected test is ignored. The
order changes only when tests run, never what they check."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

HEAVY = Path(__file__).with_name("heavy.txt")
THRESHOLD_S = 3.0
"""CPU seconds from which a test is listed as heavy."""


def chunk_sizes(n: int, workers: int) -> list[int]:
    """The sizes of worksteal's first chunks of n tests over `workers` idle workers."""
    sizes, left = [], n
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    return sizes


def spread(items: Sequence[T], weight: Mapping[T, float], workers: int, group: Callable[[T], str]) -> list[T]:
    """`items` reordered: each chunk (chunk_sizes) starts with its share of the weighed groups
    (a test module: its tests stay together, so a module-scoped fixture is built once per
    worker), heaviest first, each given to the chunk with the least weight so far that still
    has room; then the other tests in their order."""
    groups: dict[str, list[T]] = {}
    for x in items:
        groups.setdefault(group(x), []).append(x)
    load_of = {g: sum(weight.get(x, 0.0) for x in xs) for g, xs in groups.items()}
    heavy = sorted((g for g, w in load_of.items() if w > 0), key=lambda g: -load_of[g])
    if workers < 2 or not heavy:
        return list(items)
    sizes = chunk_sizes(len(items), workers)
    chunks: list[list[T]] = [[] for _ in sizes]
    load = [0.0] * workers
    for g in heavy:
        room = [i for i in range(workers) if len(chunks[i]) + len(groups[g]) <= sizes[i]]
        i = min(room or range(workers), key=lambda i: load[i])
        chunks[i] += groups[g]
        load[i] += load_of[g]
    light = iter(x for x in items if load_of[group(x)] <= 0)
    out: list[T] = []
    end = 0
    for chunk, size in zip(chunks, sizes, strict=True):  # a chunk over its size pushes the next ones on
        end += size
        out += chunk
        while len(out) < end and (x := next(light, None)) is not None:
            out.append(x)
    return out + list(light)


def module_of(nodeid: str) -> str:
    """A test's module: its node id up to the first `::`."""
    return nodeid.split("::", 1)[0]


def read_weights(path: Path = HEAVY) -> dict[str, float]:
    """nodeid -> CPU seconds from the heavy list (empty when there is none)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        seconds, _, nodeid = line.partition(" ")
        if nodeid and not line.startswith("#"):
            out[nodeid] = float(seconds)
    return out


def heavy_lines(rows: Sequence[Mapping[str, object]]) -> list[str]:
    """The heavy list from a probe's rows: a test's heaviest measurement (`cgroup` where the
    probe had one, else the worker's own and its children's), heaviest first."""
    best: dict[str, float] = {}
    for r in rows:
        cpu = r.get("cgroup")
        if not isinstance(cpu, int | float):
            cpu = float(r["self"]) + float(r["children"])  # type: ignore[arg-type]
        best[str(r["test"])] = max(best.get(str(r["test"]), 0.0), float(cpu))
    return [f"{s:.1f} {t}" for t, s in sorted(best.items(), key=lambda kv: -kv[1]) if s >= THRESHOLD_S]


if __name__ == "__main__":
    rows = [json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines() if line.strip()]
    print("# CPU seconds per test, heaviest first: python -m tests.schedule FILE.jsonl > tests/heavy.txt")
    print("\n".join(heavy_lines(rows)))
