"""The GPU experiment without a GPU: its pure parts, its GPU flow on a simulated device, the
kernel compiled for sm_90 (no GPU needed), and the smoke run (Triton's interpreter)."""

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import decision_h100 as exp
from kopt_supervisor.engine.decide.estimate import Policy

REPO = Path(__file__).resolve().parents[1]


# --- pure parts -------------------------------------------------------------------------------


class ScriptedTimer:
    """A block timer whose readings follow a fixed zig-zag around a per-launch time."""

    def __init__(self, us: float, reps: int = 10) -> None:
        self.reps = reps
        self.us = us
        self.calls = 0

    def block(self) -> float:
        self.calls += 1
        return self.us * (1 + 0.001 * ((self.calls * 7) % 5 - 2))


def test_kopt_decision_judges_the_same_blocks_under_each_policy() -> None:
    tallies = {m: exp.Tally() for m in exp.METHODS}
    logs: list[float] = []
    policies = {"kopt": Policy(), "kopt pooled": Policy(pool_blocks=True)}
    best, cand = ScriptedTimer(10.0), ScriptedTimer(10.3)
    exp.kopt_decision(best, cand, policies, 8, tallies, logs)
    for name in policies:
        d = tallies[name].decisions[0]
        assert d["verdict"] == "regression" and d["ratio"] == pytest.approx(1.03, abs=0.003)
        assert d["gpu_s"] == pytest.approx(d["looks"] * 8 * (10.0 + 10.3) * 10 / 1e6, rel=0.01)
    assert len(logs) == 8 * max(t.looks[0] for t in tallies.values() if t.looks)
    assert best.calls == cand.calls == len(logs) + 1  # one discarded warm-up pair first
    assert exp.pct(sum(logs) / len(logs)) == pytest.approx(3.0, abs=0.1)


def test_naive_rule_and_its_variants() -> None:
    readings = iter([100.0, 99.5, 100.0, 99.0])  # a 0.5% gain, then a 1% gain
    tallies = {m: exp.Tally() for m in exp.METHODS}
    change = exp.naive_decision(lambda: next(readings), lambda: next(readings), tallies)
    assert change == pytest.approx(-0.5)
    assert tallies["do_bench 1%"].decisions[0]["verdict"] == "tie"
    assert tallies["do_bench twice"].decisions[0]["verdict"] == "keep"
    assert tallies["do_bench twice"].decisions[0]["looks"] == 2
    assert tallies["do_bench confirm"].decisions[0]["verdict"] == "tie"
    slower = iter([100.0, 102.0])
    exp.naive_decision(lambda: next(slower), lambda: next(slower), tallies)
    assert {tallies[m].decisions[1]["verdict"] for m in exp.NAIVE} == {"regression"}


def test_clopper_pearson_upper_limit() -> None:
    assert exp.upper_bound(0, 50) == pytest.approx(1 - 0.025 ** (1 / 50), abs=1e-6)  # 7.1%
    assert exp.upper_bound(50, 50) == 1.0
    assert 0.5 < exp.upper_bound(25, 50) < 0.7
    assert math.isnan(exp.upper_bound(0, 0))


def test_batch_interval_covers_the_mean_and_widens_with_noise() -> None:
    rng = random.Random(3)
    quiet = [math.log(1.02) + rng.gauss(0, 0.001) for _ in range(400)]
    loud = [math.log(1.02) + rng.gauss(0, 0.01) for _ in range(400)]
    q, lo = exp.batch_interval(quiet, 20), exp.batch_interval(loud, 20)
    assert q["lo"] < 2.0 < q["hi"] and q["hi"] - q["lo"] < 0.1 and q["pairs"] == 400
    assert lo["hi"] - lo["lo"] > 5 * (q["hi"] - q["lo"])
    steady = exp.batch_interval([math.log(1.005)] * 400, 20)
    assert steady["lo"] == pytest.approx(0.5) and steady["hi"] == pytest.approx(0.5)
    drifting = [0.0] * 200 + [math.log(1.01)] * 200  # the truth moved halfway: the interval says so
    d = exp.batch_interval(drifting, 20)
    assert d["lo"] < 0.5 < d["hi"] and d["hi"] - d["lo"] > 0.5


def test_next_delay_reaches_a_target_behind_a_threshold() -> None:
    def change(d: int) -> float:  # hidden below 300 units, then 0.01% per unit
        return max(0.0, d - 300) * 0.01

    for target, start in ((1.0, 5), (2.0, 5), (1.0, 100_000)):
        history: list[tuple[int, float]] = []
        d: int | None = start
        while d is not None and len(history) < 12:
            history.append((d, change(d)))
            if abs(history[-1][1] - target) <= 0.15 * target:
                break
            d = exp.next_delay(history, target)
        assert abs(history[-1][1] - target) <= 0.15 * target, history
        assert len(history) <= 8, history


def test_next_delay_stops_when_nothing_is_left_to_try() -> None:
    assert exp.next_delay([(1, 5.0)], 1.0) is None  # 1 unit is already too slow
    assert exp.next_delay([(10, 0.5), (11, 1.5)], 1.0) is None  # adjacent delays bracket it


def test_next_size_interpolates_across_a_cliff() -> None:
    def us(n: int) -> float:  # L2-resident up to 6M values, then HBM-bound
        return 1.3 + n * (8 / 8e6 if n <= 6_000_000 else 8 / 3e6)

    points = [(n, us(n)) for n in (1 << 20, 1 << 21, 1 << 22, 1 << 23, 1 << 24)]
    for target in (5.0, 10.0):
        for _ in range(4):
            nxt = exp.next_size(points, target)
            if nxt is None:
                break
            assert nxt % exp.BLOCK == 0
            points.append((nxt, us(nxt)))
        best = min(points, key=lambda p: abs(math.log(p[1] / target)))
        assert abs(best[1] / target - 1) < 0.1 or target == 10.0  # 10 µs sits on the cliff
    assert exp.next_size([(4096, 3.0)], 1.0) is None  # below the launch floor


# --- the GPU flow on a simulated device -----------------------------------------------------


class SimDevice:
    """A GPU as the experiment sees it: µs per launch from n (a launch floor plus bytes at
    3 TB/s) and the delay (the spin: 1800 units per µs per wave, the first 40 hidden behind
    memory traffic when there is more than one wave; the multiply-adds: 200 units per µs),
    with 0.3% noise per block and 1% per do_bench reading."""

    def __init__(self, spin_compiles: bool = True, fma_slows: bool = True, seed: int = 7) -> None:
        self.smoke = False
        self.spin = False
        self.spin_compiles, self.fma_slows = spin_compiles, fma_slows
        self.rng = random.Random(seed)
        self.released = 0

    def us(self, n: int, delay: int) -> float:
        waves = max(1, math.ceil(math.ceil(n / exp.BLOCK) / (132 * 16)))
        if self.spin:
            added = max(0, delay - (40 if waves > 1 else 0)) / 1800 * waves
        else:
            added = delay / 200 * waves if self.fma_slows else 0.0
        return 1.5 + n * 8 / 3e6 + added

    def use_spin(self, spin: bool) -> None:
        self.spin = spin

    def buffers(self, n: int) -> tuple[int, int]:
        return n, n

    def arm(self, name: str, bufs: tuple[int, int], n: int, delay: int) -> exp.Arm:
        assert n <= bufs[0]
        spin = self.spin

        def run() -> None:
            if spin and not self.spin_compiles:
                raise RuntimeError("PTX assembly aborted due to errors\nptxas fatal: ...")

        return exp.Arm(name, n, delay, run)

    def timer(self, arm: exp.Arm, reps: int) -> ScriptedSimTimer:
        arm.run()
        return ScriptedSimTimer(self, arm, reps)

    def one_launch_us(self, arm: exp.Arm) -> float:
        arm.run()
        return self.us(arm.n, arm.delay) + 3.0

    def per_launch_us(self, arm: exp.Arm, block_us: float, max_reps: int) -> tuple[float, int]:
        return self.us(arm.n, arm.delay), max(1, min(max_reps, round(block_us / self.us(arm.n, arm.delay))))

    def reading(self, arm: exp.Arm) -> float:
        return (self.us(arm.n, arm.delay) + 4.0) * math.exp(self.rng.gauss(0, 0.01))

    def sms(self) -> int:
        return 132

    def release(self) -> None:
        self.released += 1


class ScriptedSimTimer:
    def __init__(self, dev: SimDevice, arm: exp.Arm, reps: int) -> None:
        self.dev, self.arm, self.reps = dev, arm, reps

    def block(self) -> float:
        return self.dev.us(self.arm.n, self.arm.delay) * math.exp(self.dev.rng.gauss(0, 0.003))


def opener(dev: SimDevice):
    return lambda smoke: (dev, {"device": "simulated H100", "torch": "-", "cuda": "-", "triton": "-"})


def test_gpu_flow_calibrates_true_slowdowns_and_decides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dev = SimDevice()
    out = tmp_path / "sim.json"
    rc = exp.main(["--out", str(out), "--decisions", "3", "--durations-us", "5,700"], opener=opener(dev))
    assert rc == 0
    report = json.loads(out.read_text())
    assert report["delay"] == "%clock64 spin" and report["delay_units_per_us"] == pytest.approx(1800, rel=0.01)
    d5, d700 = report["durations"]["5"], report["durations"]["700"]
    assert abs(d5["per_launch_us"] / 5 - 1) <= 0.1 and abs(d700["per_launch_us"] / 700 - 1) <= 0.1
    assert set(d5["conditions"]) == {"A/A", "+1% delay", "+2% delay"}  # bytes only where bandwidth-bound
    assert set(d700["conditions"]) == {"A/A", "+1% delay", "+2% delay", "+1% bytes", "+2% bytes"}
    for d in (d5, d700):
        assert d["decisions_per_condition"] == 3
        for name, c in d["conditions"].items():
            t = c["truth"]
            assert t["lo"] <= t["pct"] <= t["hi"] and t["pairs"] >= 40
            assert abs(t["pct"] - c["planned_pct"]) <= 0.2 * max(c["planned_pct"], 1.0), (name, t)
            assert {m: s["n"] for m, s in c["methods"].items()} == {m: 3 for m in exp.METHODS}
            assert c["methods"]["kopt"]["counts"]["keep"] == 0
        assert set(c["methods"]["kopt pooled"]["counts"]) >= {"regression"}
        assert d["conditions"]["+2% delay"]["methods"]["kopt pooled"]["counts"]["regression"] == 3
    # the 700 µs delay sat behind a threshold: the first guess was not enough, calibration fixed it
    assert len(d700["conditions"]["+1% delay"]["calibration"]) > 1
    assert report["policy"]["kopt"]["max_rounds"] == 20 and report["policy"]["kopt pooled"]["pool_blocks"]
    printed = capsys.readouterr().out
    assert printed.rstrip().splitlines()[-1].startswith("| ~700 µs | do_bench confirm |")  # tables last
    assert "| ~5 µs | kopt | 0/3" in printed and (tmp_path / "sim.md").read_text() == printed.rstrip("\n") + "\n"


def test_gpu_flow_keeps_its_time_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "late.json"
    rc = exp.main(["--out", str(out), "--durations-us", "5", "--budget-s", "0.001"], opener=opener(SimDevice()))
    assert rc == 0
    report = json.loads(out.read_text())
    assert report["durations"]["5"]["decisions_per_condition"] == 0
    captured = capsys.readouterr()
    assert "stopped at 0 decisions per condition (time budget)" in captured.err
    assert "| ~5 µs | kopt | 0/0" in captured.out


def test_a_spin_that_does_not_compile_falls_back_to_the_multiply_adds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "fma.json"
    assert (
        exp.main(
            ["--out", str(out), "--decisions", "1", "--durations-us", "5"],
            opener=opener(SimDevice(spin_compiles=False)),
        )
        == 0
    )
    assert json.loads(out.read_text())["delay"] == "multiply-add chain"
    assert (
        "note: %clock64 spin: RuntimeError: PTX assembly aborted due to errors; using the multiply-add chain"
        in capsys.readouterr().err
    )


def test_no_working_delay_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "none.json"
    rc = exp.main(["--out", str(out)], opener=opener(SimDevice(spin_compiles=False, fma_slows=False)))
    assert rc == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(
        "decision_h100: failed while checking the in-kernel delay: SetupError: "
        "no in-kernel delay slows the kernel (%clock64 spin: RuntimeError"
    )
    assert json.loads(out.read_text())["failed"].startswith("failed while checking the in-kernel delay")
    assert "Traceback" in (tmp_path / "none.traceback.txt").read_text()


def test_bad_options_are_refused() -> None:
    with pytest.raises(SystemExit):
        exp.parse_args(["--durations-us", "5,x"])
    with pytest.raises(SystemExit):
        exp.parse_args(["--slowdowns", "0"])


# --- the CUDA code paths, on a stand-in for torch.cuda ----------------------------------------


class FakeEvent:
    def __init__(self, gpu: FakeTorch, enable_timing: bool = False) -> None:
        assert enable_timing
        self.gpu, self.t = gpu, math.nan

    def record(self) -> None:
        self.t = self.gpu.now

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: FakeEvent) -> float:
        return end.t - self.t


class FakeGraph:
    def __init__(self, gpu: FakeTorch) -> None:
        self.gpu, self.ops = gpu, []

    def replay(self) -> None:
        self.gpu.replays += 1
        self.gpu.now += sum(self.ops) * (1 + 0.002 * math.sin(self.gpu.replays))


class FakeTensor:
    def __init__(self, gpu: FakeTorch, n: int) -> None:
        self.gpu, self.n = gpu, n

    def zero_(self) -> None:
        self.gpu.now += 0.04
        self.gpu.flushes += 1


class FakeCuda:
    """The torch.cuda calls the experiment makes (each exists in the real torch.cuda: tested)."""

    API = (
        "synchronize",
        "CUDAGraph",
        "graph",
        "Event",
        "get_device_properties",
        "empty_cache",
        "current_stream",
        "set_stream",
        "default_stream",
        "default_generators",
    )

    def __init__(self, gpu: FakeTorch) -> None:
        self.gpu = gpu
        self.default_generators: tuple[object, ...] = ()  # a failed capture resets them: none fails here

    def synchronize(self) -> None:
        pass

    def current_stream(self) -> str:
        return "default"

    def set_stream(self, stream: str) -> None:
        pass

    def default_stream(self) -> str:
        return "default"

    def CUDAGraph(self) -> FakeGraph:  # noqa: N802 (torch's name)
        return FakeGraph(self.gpu)

    def graph(self, g: FakeGraph, pool: object = None, stream: str | None = None):
        gpu = self.gpu

        class Capture:
            def __enter__(self) -> None:
                gpu.capturing = g

            def __exit__(self, *exc: object) -> None:
                gpu.capturing = None

        return Capture()

    def Event(self, enable_timing: bool = False) -> FakeEvent:  # noqa: N802 (torch's name)
        return FakeEvent(self.gpu, enable_timing)

    def get_device_properties(self, index: int):
        return type("Props", (), {"L2_cache_size": 50 << 20, "multi_processor_count": 132})()

    def empty_cache(self) -> None:
        self.gpu.released += 1


class FakeTorch:
    """GPU time in ms: a launch costs the SimDevice's µs per launch (spin units as cycles)."""

    float32, int32 = "float32", "int32"

    def __init__(self) -> None:
        self.now, self.replays, self.flushes, self.released = 0.0, 0, 0, 0
        self.capturing: FakeGraph | None = None
        self.cuda = FakeCuda(self)
        self.model = SimDevice()

    def rand(self, n: int, device: str, dtype: str) -> FakeTensor:
        assert device == "cuda" and dtype == "float32"
        return FakeTensor(self, n)

    def empty(self, n: int, dtype: str, device: str) -> FakeTensor:
        assert device == "cuda"
        return FakeTensor(self, n)

    def empty_like(self, t: FakeTensor) -> FakeTensor:
        return FakeTensor(self, t.n)

    def launcher(self, spin: bool):
        def launch(x: FakeTensor, y: FakeTensor, n: int, delay: int) -> None:
            assert n <= x.n and n <= y.n
            self.model.spin = spin
            ms = self.model.us(n, delay) / 1000
            if self.capturing is not None:
                self.capturing.ops.append(ms)
            else:
                self.now += ms

        return launch


def test_the_cuda_timers_on_a_stand_in_for_torch_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    assert all(hasattr(torch.cuda, name) for name in FakeCuda.API)
    assert all(hasattr(torch.cuda.Event, m) for m in ("record", "synchronize", "elapsed_time"))
    assert hasattr(torch.cuda.CUDAGraph, "replay")
    gpu = FakeTorch()
    monkeypatch.setattr(exp, "launcher", gpu.launcher)
    backend = exp.Backend(gpu, smoke=False)
    assert backend.flush_buffer is not None and backend.flush_buffer.n == (100 << 20) // 4
    arm = backend.arm("A", backend.buffers(1 << 20), 1 << 20, 0)
    us = gpu.model.us(1 << 20, 0)
    assert backend.one_launch_us(arm) == pytest.approx(us)  # the flush before it is not timed
    flushes = gpu.flushes
    timer = backend.timer(arm, 40)
    assert timer.block() == pytest.approx(us, rel=0.003) and gpu.flushes == flushes + 3  # 2 warm-up blocks
    per_launch, reps = backend.per_launch_us(arm, 250.0, 1000)
    assert per_launch == pytest.approx(us, rel=0.003) and reps == round(250 / us)
    assert backend.sms() == 132
    backend.release()
    assert gpu.released == 1


def test_the_whole_gpu_run_on_a_stand_in_for_torch_cuda(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeTorch()
    monkeypatch.setattr(exp, "launcher", gpu.launcher)
    monkeypatch.setattr(exp.Backend, "reading", lambda self, arm: gpu.model.us(arm.n, arm.delay) + 4.0)
    out = tmp_path / "fake.json"
    info = {"device": "stand-in", "torch": "-", "cuda": "-", "triton": "-"}
    rc = exp.main(
        ["--out", str(out), "--decisions", "2", "--durations-us", "5,700", "--truth-s", "0.2"],
        opener=lambda smoke: (exp.Backend(gpu, smoke), info),
    )
    assert rc == 0, out.with_suffix(".traceback.txt").read_text() if out.with_suffix(".traceback.txt").exists() else ""
    report = json.loads(out.read_text())
    assert report["delay"] == "%clock64 spin"
    for key, target in (("5", 5.0), ("700", 700.0)):
        d = report["durations"][key]
        assert abs(d["per_launch_us"] / target - 1) <= 0.1 and d["decisions_per_condition"] == 2
        for c in d["conditions"].values():
            assert abs(c["truth"]["pct"] - c["planned_pct"]) <= 0.2 * max(c["planned_pct"], 1.0)
    assert gpu.released >= 3


# --- the real kernel, compiled for an H100 without one ---------------------------------------


def test_the_kernel_compiles_for_sm90_with_the_spin_inside_its_loop() -> None:
    pytest.importorskip("triton.backends.nvidia.compiler", reason="triton without its CUDA backend")
    code = (
        "import json, triton\n"
        "from triton.backends.compiler import GPUTarget\n"
        "from triton.compiler import ASTSource\n"
        "from experiments.decision_h100 import stream_kernel\n"
        "sig = {'x_ptr': '*fp32', 'y_ptr': '*fp32', 'n': 'i32', 'delay': 'i32', 'zero': 'fp32',\n"
        "       'BLOCK': 'constexpr', 'SPIN': 'constexpr'}\n"
        "out = {}\n"
        "for spin in (True, False):\n"
        "    src = ASTSource(stream_kernel(), signature=sig, constexprs={'BLOCK': 1024, 'SPIN': spin})\n"
        "    out[str(spin)] = triton.compile(src, target=GPUTarget('cuda', 90, 32)).asm['ptx']\n"
        "print(json.dumps(out))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    ptx = json.loads(res.stdout.strip().splitlines()[-1])

    def loop_bodies(text: str) -> list[str]:
        """The text of every backward branch's loop (label ... bra label)."""
        bodies = []
        for m in re.finditer(r"bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", text):
            start = text.find(m.group(1) + ":")
            if 0 <= start < m.start():
                bodies.append(text[start : m.start()])
        return bodies

    spin = ptx["True"]
    assert spin.count("%clock64") == 2
    assert any("%clock64" in body for body in loop_bodies(spin))
    assert spin.index("%clock64") < spin.index("ld.global")  # the spin comes before the work
    fma = ptx["False"]
    assert "%clock64" not in fma and any(".f32" in body for body in loop_bodies(fma))


# --- the smoke run ----------------------------------------------------------------------------


@pytest.mark.slow
def test_smoke_run_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "smoke.json"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.decision_h100",
            "--smoke",
            "--decisions",
            "1",
            "--durations-us",
            "5",
            "--slowdowns",
            "2",
            "--bytes-slowdowns",
            "2",
            "--bytes-min-us",
            "1",
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["delay"] == "multiply-add chain"
    conds = report["durations"]["5"]["conditions"]
    assert set(conds) == {"A/A", "+2% delay", "+2% bytes"}
    assert conds["+2% delay"]["delay"] >= 1 and conds["+2% bytes"]["n_cand"] > conds["A/A"]["n_cand"]
    assert all(m["n"] == 1 for c in conds.values() for m in c["methods"].values())
    assert res.stdout.rstrip().splitlines()[-1].startswith("| ~5 µs | do_bench confirm |")
    assert (tmp_path / "smoke.md").exists()
