"""kernels/harness: statistics, rotation arithmetic, params resolution, the contract checks."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kopt_supervisor.engine.metrics import format_value, key_of
from kopt_supervisor.kernels.harness import params, timing
from kopt_supervisor.kernels.harness.check import check_call, error_ratio


def test_summarize_matches_numpy() -> None:
    np = pytest.importorskip("numpy")
    xs = [5.0, 1.0, 4.0, 2.0, 3.0, 10.0, 7.5]
    s = timing.summarize(xs)
    assert s["median"] == np.median(xs) and s["min"] == 1.0 and s["n"] == 7
    assert s["p10"] == pytest.approx(np.percentile(xs, 10)) and s["p90"] == pytest.approx(np.percentile(xs, 90))
    assert s["mean"] == pytest.approx(np.mean(xs)) and s["std"] == pytest.approx(np.std(xs, ddof=1))
    assert timing.summarize([3.0])["std"] == 0.0


def test_rotation_and_reps() -> None:
    assert timing.rotation_sets(10 << 20, 50 << 20, 100) == 10  # 10 sets x 10 MiB = 2 x L2
    assert timing.rotation_sets(10 << 20, 50 << 20, 4) == 4  # never more sets than launches
    assert timing.rotation_sets(1 << 30, 50 << 20, 100) == 1
    assert timing.reps_for(5.0, 300.0, 1000) == 60 and timing.reps_for(1e4, 300.0, 1000) == 1
    calls = []
    c = timing.cycle([lambda: calls.append(0), lambda: calls.append(1), lambda: calls.append(2)])
    for _ in range(5):
        c()
    assert calls == [0, 1, 2, 0, 1]


def test_class_keys_are_kopts() -> None:
    row = {"dclass": "wide", "hd": 128.0}
    assert params.class_key(dclass="wide", hd=128.0) == key_of(row, ["dclass", "hd"])
    for v in (1.0, 2.5, "x", 7):
        assert params.format_value(v) == format_value(v)


def test_params_resolution_and_errors(tmp_path: Path) -> None:
    p = tmp_path / "params.json"
    p.write_text(json.dumps({"*": {"A": 1, "B": 2}, "dclass=wide": {"B": 3}}))
    got = params.load(p)
    assert params.resolve(got, "dclass=wide") == {"A": 1, "B": 3}
    assert params.resolve(got, "dclass=narrow") == {"A": 1, "B": 2}
    p.write_text(json.dumps({"dclass=wide": {}}))
    with pytest.raises(ValueError, match='params.json.*"\\*"'):
        params.load(p)
    p.write_text(json.dumps({"*": {}, "dclass=wide": 3}))
    with pytest.raises(ValueError, match="'dclass=wide'"):
        params.load(p)


def _scale(x, out=None):  # noqa: ANN001, ANN202 - a toy kernel under the contract
    import torch

    return torch.mul(x, 2.0, out=out)


def test_check_call_passes_a_correct_function_and_catches_nan() -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 8).to(torch.bfloat16)
    ref = x.double() * 2
    assert check_call(torch, _scale, (x,), {}, ref, 1e-2, 1e-2).ok

    def nan_kernel(x, out=None):  # noqa: ANN001, ANN202
        y = _scale(x, out=out)
        y[0, 0] = math.nan
        return y

    res = check_call(torch, nan_kernel, (x,), {}, ref, 1e-2, 1e-2)
    assert not res.ok and res.err == math.inf and res.nonfinite == 2  # both runs

    def in_place(x, out=None):  # noqa: ANN001, ANN202
        x.mul_(1.5)
        return _scale(x, out=out)

    assert "modified an input" in check_call(torch, in_place, (x.clone(),), {}, ref, 1.0, 1.0).reason

    def ignores_out(x, out=None):  # noqa: ANN001, ANN202
        return _scale(x)

    assert "not the out buffer" in check_call(torch, ignores_out, (x,), {}, ref, 1e-2, 1e-2).reason


def test_poisoning_is_what_catches_an_unwritten_element() -> None:
    """A kernel that skips the last row passes when the out buffer still holds a correct
    result from an earlier run; the NaN poison makes it fail."""
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 8).to(torch.float16)
    ref = x.double() * 2
    stale = _scale(x)

    def skips_last_row(x, out=None):  # noqa: ANN001, ANN202
        out = stale.clone() if out is None else out  # the allocator hands back an old block
        out[:-1] = x[:-1] * 2.0
        return out

    unpoisoned = torch.empty_like(stale).copy_(stale)
    got = skips_last_row(x, out=unpoisoned)
    assert error_ratio(torch, got, ref, 1e-2, 1e-2) == (0.0, 0)  # looks right without poison
    res = check_call(torch, skips_last_row, (x,), {}, ref, 1e-2, 1e-2)
    assert not res.ok and res.nonfinite == x.shape[1]


def test_launch_meta() -> None:
    p = {
        "*": {"BLOCK_D": 0, "ROWS_PER_PROG": 2, "num_warps": 4, "num_stages": 1},
        "dclass=wide": {"BLOCK_D": 1024, "num_warps": 8},
    }
    assert params.launch_meta(p, "dclass=narrow", 1152) == {
        "BLOCK_D": 2048,
        "ROWS": 2,
        "SINGLE": True,
        "num_warps": 4,
        "num_stages": 1,
    }
    wide = params.launch_meta(p, "dclass=wide", 3072)
    assert wide["BLOCK_D"] == 1024 and not wide["SINGLE"] and wide["num_warps"] == 8
    assert params.launch_meta(p, "dclass=narrow", 65536)["BLOCK_D"] == 8192  # the cap: chunked
    assert params.launch_meta(p, "dclass=wide", 100)["BLOCK_D"] == 128  # never past the row
    odd = {"*": {"BLOCK_D": 96, "ROWS_PER_PROG": 3, "num_warps": 4, "num_stages": 1}}
    assert params.launch_meta(odd, "k", 1000)["BLOCK_D"] == 128 and params.launch_meta(odd, "k", 1000)["ROWS"] == 4
    assert [params.next_power_of_2(n) for n in (1, 2, 3, 96, 128, 129)] == [1, 2, 4, 128, 128, 256]


def test_launch_meta_keeps_small_calls_spread_over_the_gpu() -> None:
    p = {"*": {"BLOCK_D": 0, "ROWS_PER_PROG": 16, "num_warps": 4, "num_stages": 1}}
    rows = [params.launch_meta(p, "k", 128, rows=m, min_programs=528)["ROWS"] for m in (1, 4, 462, 1665, 8192, 110592)]
    assert rows == [1, 1, 1, 2, 8, 16]  # production-sized calls keep ROWS_PER_PROG
    assert params.launch_meta(p, "k", 128, rows=4)["ROWS"] == 16  # no GPU to fill: as asked


def test_min_programs_reads_the_multiprocessors_once() -> None:
    class Props:
        multi_processor_count = 132

    class Cuda:
        calls = 0

        def get_device_properties(self, index: int) -> Props:
            Cuda.calls += 1
            return Props()

        def current_device(self) -> int:
            return 0

    class Torch:
        cuda = Cuda()

    class Dev:
        def __init__(self, type_: str, index: int | None) -> None:
            self.type, self.index = type_, index

    params._SMS.clear()
    assert params.min_programs(Torch, Dev("cuda", None)) == 4 * 132
    assert params.min_programs(Torch, Dev("cuda", 0)) == 4 * 132 and Cuda.calls == 1
    assert params.min_programs(Torch, Dev("cpu", None)) == 0
    params._SMS.clear()


def test_self_allocating_calls_keep_one_output_per_input_set() -> None:
    """torch.compile allocates its output: each call's result lives until its input set comes
    round again, and is freed just before (so a graph's launches write as many distinct
    outputs as they read input sets, never one buffer over and over)."""
    from kopt_supervisor.kernels.harness.bench import kept_outputs

    live: set[int] = set()
    seen: list[tuple[str, int, frozenset[int]]] = []

    class Output:
        count = 0

        def __init__(self) -> None:
            Output.count += 1
            self.id = Output.count
            live.add(self.id)

        def __del__(self) -> None:
            live.discard(self.id)

    def fn(x: str, *, eps: float) -> Output:
        assert eps == 0.5
        seen.append((x, len(live), frozenset(live)))
        return Output()

    calls = kept_outputs(fn, [("a",), ("b",), ("c",)], {"eps": 0.5})
    for _ in range(3):
        for call in calls:
            call()
    assert [x for x, _, _ in seen] == list("abcabcabc")
    assert [n for _, n, _ in seen] == [0, 1, 2, 2, 2, 2, 2, 2, 2]  # never 3: the set's own freed first
    assert seen[3][2] == frozenset({2, 3})  # a's first output (1) was freed before a ran again
    assert len(live) == 3
