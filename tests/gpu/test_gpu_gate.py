"""The idle gate against scripted fake GPUs (docs/design.md §10): every scenario of issue 6.

Each check takes `samples` readings, and each reading takes the next snapshot of the
script, so the scripts below repeat a state once per sample (`each(...)`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gpu_helpers import FakeTime, cfg, gpu, write_script

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.gpu import GpuState, assess, round_flags
from kopt_supervisor.engine.gpu.backends import FakeBackend, NoGpu
from kopt_supervisor.engine.gpu.claims import ClaimRegistry, claim_key
from kopt_supervisor.engine.gpu.gate import Gate, NoIdleGpu

FOREIGN = 4_000_001  # a PID that is not this test's


def each(*states: list[dict], samples: int = 3) -> list[list[dict]]:
    """Repeat every state once per sample of a check."""
    return [s for state in states for s in [state] * samples]


def make_gate(tmp_path: Path, snapshots: list[list[dict]], t: FakeTime, **kw) -> tuple[Gate, list[str]]:
    logs: list[str] = []
    own = kw.pop("own_pids", set)
    backend = FakeBackend(write_script(tmp_path / "gpus.json", snapshots))
    gate = Gate(cfg(**kw), backend, sleep=t.sleep, clock=t.clock, own_pids=own, log=logs.append)
    return gate, logs


def test_an_idle_gpu_is_taken_at_once_and_bound_for_children(tmp_path, fake_time):
    gate, logs = make_gate(tmp_path, [[gpu(0)]], fake_time)
    d = gate.acquire()
    assert d.gpu is not None and d.gpu.index == 0
    assert d.env == {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert d.note == "idle"
    assert fake_time.sleeps == [1.0, 1.0]  # only the pauses between the 3 samples
    assert d.assessments[0].samples == 3
    assert any("using GPU 0" in m for m in logs)


def test_busy_then_idle_waits_wait_s_and_then_acquires(tmp_path, fake_time):
    busy = [gpu(0, util=90, mem=30000, procs=[(FOREIGN, "python", 29000)])]
    gate, logs = make_gate(tmp_path, each(busy) + [[gpu(0)]], fake_time)
    d = gate.acquire()
    assert d.gpu.index == 0
    assert fake_time.sleeps == [1.0, 1.0, 600.0, 1.0, 1.0]
    assert d.waited_s == pytest.approx(604.0)
    waiting = [m for m in logs if m.startswith("no idle GPU")]
    assert len(waiting) == 1
    assert f"{FOREIGN} python" in waiting[0]
    assert "utilization up to 90% > 10%" in waiting[0]
    assert "memory used 30000 MiB > 2048 MiB" in waiting[0]
    assert "next check in 10 min, giving up in 60 min" in waiting[0]
    assert gate.waiting is None


def test_one_of_several_idle_the_most_idle_is_picked(tmp_path, fake_time):
    snap = [
        gpu(0, util=95, procs=[(FOREIGN, "train.py", 40000)]),
        gpu(1, util=6, mem=500),
        gpu(2, util=0, mem=300),
        gpu(3, util=0, mem=100),
    ]
    gate, _ = make_gate(tmp_path, [snap], fake_time)
    d = gate.acquire()
    assert d.gpu.index == 3
    assert d.env["CUDA_VISIBLE_DEVICES"] == "3"
    by_index = {a.gpu.index: a for a in d.assessments}
    assert not by_index[0].idle and by_index[1].idle and by_index[2].idle
    assert by_index[0].reasons[0].startswith(f"1 foreign process(es): {FOREIGN} train.py")


def test_a_preferred_gpu_is_taken_first_when_idle_and_passed_over_when_busy(tmp_path, fake_time):
    # a Ray actor's gate prefers the GPU Ray placed it on (loop/ray_lanes.py), even when another
    # is idler; a foreign process on it, which Ray cannot see, sends the gate to the idlest other
    snap = [gpu(0, util=0, mem=100), gpu(1, util=0, mem=100), gpu(2, util=0, mem=900), gpu(3, util=0, mem=300)]
    backend = FakeBackend(write_script(tmp_path / "gpus.json", [snap]))
    gate = Gate(cfg(), backend, sleep=fake_time.sleep, clock=fake_time.clock, prefer=(2,))
    assert gate.acquire().gpu.index == 2
    busy = [gpu(0, util=0, mem=100), gpu(1, util=0, mem=50), gpu(2, util=90, procs=[(FOREIGN, "train.py", 40000)])]
    backend = FakeBackend(write_script(tmp_path / "busy.json", [busy]))
    gate = Gate(
        cfg(),
        backend,
        sleep=fake_time.sleep,
        clock=fake_time.clock,
        prefer=(2,),
        claims=ClaimRegistry(tmp_path / "c2"),
    )
    assert gate.acquire().gpu.index == 1


def test_the_chosen_gpu_is_kept_while_idle_even_when_another_gets_idler(tmp_path, fake_time):
    first = [gpu(0, util=2), gpu(1, util=5)]
    later = [gpu(0, util=8), gpu(1, util=0)]
    gate, _ = make_gate(tmp_path, each(first, later), fake_time)
    assert gate.acquire().gpu.index == 0
    d = gate.acquire()
    assert d.gpu.index == 0 and d.note == "kept"


def test_a_foreign_process_mid_run_moves_the_run_to_another_idle_gpu(tmp_path, fake_time):
    first = [gpu(0), gpu(1, util=1)]
    intruded = [gpu(0, util=60, mem=9000, procs=[(FOREIGN, "other-job", 8800)]), gpu(1, util=1)]
    gate, logs = make_gate(tmp_path, each(first, intruded), fake_time)
    assert gate.acquire().gpu.index == 0
    d = gate.acquire()
    assert d.gpu.index == 1
    assert d.note == "switched from GPU 0"
    assert any("switching to GPU 1" in m for m in logs)
    # The claim on GPU 0 was given up: another kopt run can take it now.
    other = ClaimRegistry(owner="other run")
    assert other.claim(claim_key(gate.namespace, "GPU-fake-0", 0))
    assert not other.claim(claim_key(gate.namespace, "GPU-fake-1", 1))
    other.release_all()


def test_a_foreign_process_on_the_only_gpu_makes_the_gate_wait_until_it_ends(tmp_path, fake_time):
    idle = [gpu(0)]
    intruded = [gpu(0, util=100, mem=2500, procs=[(FOREIGN, "python", 2400)])]
    gate, logs = make_gate(tmp_path, each(idle, intruded, intruded) + [idle], fake_time, wait_s=60)
    assert gate.acquire().waited_s == pytest.approx(2.0)
    d = gate.acquire()
    assert d.gpu.index == 0 and d.note == "kept"
    assert sum(1 for m in logs if m.startswith("no idle GPU")) == 2
    assert d.waited_s == pytest.approx(2 + 60 + 2 + 60 + 2)


def test_memory_growing_during_the_check_is_busy_even_under_the_limit(tmp_path, fake_time):
    growing = [[gpu(0, mem=100)], [gpu(0, mem=300)], [gpu(0, mem=700)]]
    gate, logs = make_gate(tmp_path, growing + each([gpu(0, mem=700)]), fake_time, wait_s=30)
    d = gate.acquire()
    assert d.waited_s == pytest.approx(2 + 30 + 2)
    assert "memory grew 600 MiB during the check > 64 MiB" in logs[0]
    assert d.assessments[0].mem_growth_mib == 0


def test_own_processes_do_not_count_and_their_memory_is_not_charged(tmp_path, fake_time):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        snap = [gpu(0, util=0, mem=5000, procs=[(child.pid, "bench", 4900), (os.getpid(), "engine", 20)])]
        gate, _ = make_gate(tmp_path, [snap], fake_time)
        d = gate.acquire()  # the child is a descendant of this process: it is ours
        assert d.gpu.index == 0
        assert d.assessments[0].foreign == []
        assert d.assessments[0].mem_used_mib == pytest.approx(5000 - 4900 - 20)
    finally:
        child.kill()
        child.wait()


ORPHAN = """
import os, subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
print(os.getpid(), worker.pid, flush=True)
time.sleep(30)
"""


def test_own_pids_from_the_loop_and_their_descendants_are_ours(tmp_path, fake_time):
    # A process that is not this process's descendant (its launcher exits at once), but that
    # the loop reports as its own; its child is then ours too.
    launcher = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; subprocess.Popen([sys.executable, '-c', sys.argv[1]])", ORPHAN],
        stdout=subprocess.PIPE,
        text=True,
    )
    bench, worker = (int(x) for x in launcher.stdout.readline().split())
    launcher.wait()
    try:
        snap = [gpu(0, procs=[(worker, "bench-worker", 100)])]
        gate, _ = make_gate(tmp_path, [snap], fake_time, own_pids=lambda: {bench})
        assert gate.acquire().assessments[0].foreign == []
        stranger, _ = make_gate(tmp_path, [snap], fake_time, own_pids=set)
        (a,) = stranger.check()
        assert [p.pid for p in a.foreign] == [worker] and not a.idle
    finally:
        for pid in (worker, bench):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


def test_a_gpu_disappearing_between_checks_moves_the_run(tmp_path, fake_time):
    gate, logs = make_gate(tmp_path, each([gpu(0), gpu(1, util=3)], [gpu(1, util=3)]), fake_time)
    assert gate.acquire().gpu.index == 0
    d = gate.acquire()
    assert d.gpu.index == 1 and d.note == "switched from GPU 0"


def test_a_gpu_disappearing_during_a_check_is_not_picked(tmp_path, fake_time):
    snaps = [[gpu(0), gpu(1, util=5)], [gpu(0), gpu(1, util=5)], [gpu(1, util=5)]]
    gate, _ = make_gate(tmp_path, snaps, fake_time)
    d = gate.acquire()
    assert d.gpu.index == 1
    gone = [a for a in d.assessments if a.gpu.index == 0][0]
    assert gone.reasons == ["disappeared during the check"]


def test_all_gpus_disappearing_is_not_a_cpu_run_the_gate_waits_then_stops(tmp_path, fake_time):
    gate, logs = make_gate(tmp_path, each([gpu(0)], []), fake_time, wait_s=5, wait_max_s=12)
    assert gate.acquire().gpu.index == 0
    with pytest.raises(NoIdleGpu, match="^no idle GPU for .*no GPU visible"):
        gate.acquire()
    assert gate.evidence()["missing"] is True


def test_no_gpu_at_all_lets_cpu_targets_run_without_waiting(tmp_path, fake_time):
    gate = Gate(
        cfg(), NoGpu("no GPU found: nvml: NVML Shared Library Not Found"), sleep=fake_time.sleep, clock=fake_time.clock
    )
    d = gate.acquire()
    assert d.gpu is None and d.env == {} and d.assessments == []
    assert "NVML Shared Library Not Found" in d.note
    assert fake_time.sleeps == []
    assert gate.evidence() is None
    # An empty scripted snapshot is "no GPU" too.
    gate2, _ = make_gate(tmp_path, [[]], fake_time)
    assert gate2.acquire().gpu is None


def test_the_time_out_stops_the_run_with_the_reasons(tmp_path, fake_time):
    busy = [gpu(0, util=100, procs=[(FOREIGN, "hog", 70000)], mem=70000)]
    gate, logs = make_gate(tmp_path, [busy], fake_time, wait_s=10, wait_max_s=25, samples=2)
    with pytest.raises(NoIdleGpu) as err:
        gate.acquire()
    msg = str(err.value)
    assert msg.startswith("no idle GPU for ")
    assert "gpu.wait_max_s = 25" in msg and f"{FOREIGN} hog" in msg
    # checks at 0, 11, 22 and a last one at 25 (the wait is cut to the limit), then stop
    assert [s for s in fake_time.sleeps if s != 1.0] == [10.0, 10.0, 2.0]
    assert len([m for m in logs if m.startswith("no idle GPU")]) == 3
    assert fake_time.now >= 25


def test_an_abort_raised_by_the_loops_sleep_ends_the_wait(tmp_path, fake_time):
    class Stop(Exception):
        pass

    def sleep(s: float) -> None:
        if s > 5:
            raise Stop("stop requested")
        fake_time.sleep(s)

    backend = FakeBackend(write_script(tmp_path / "g.json", [[gpu(0, util=99)]]))
    gate = Gate(cfg(), backend, sleep=sleep, clock=fake_time.clock)
    with pytest.raises(Stop):
        gate.acquire()


def test_another_kopt_run_holding_a_gpu_makes_it_busy_until_that_process_dies(tmp_path, fake_time):
    script = write_script(tmp_path / "gpus.json", [[gpu(0), gpu(1, util=4)]])
    ns = FakeBackend(script).claim_namespace
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; sys.path.insert(0, sys.argv[1]);"
            "from kopt_supervisor.engine.gpu.claims import ClaimRegistry;"
            "r = ClaimRegistry(owner='kopt run other-tag'); assert r.claim(sys.argv[2]);"
            "print('held', flush=True); time.sleep(60)",
            str(Path(__file__).resolve().parents[2]),
            claim_key(ns, "GPU-fake-0", 0),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        gate = Gate(cfg(), FakeBackend(script), sleep=fake_time.sleep, clock=fake_time.clock)
        d = gate.acquire()
        assert d.gpu.index == 1
        busy = [a for a in d.assessments if a.gpu.index == 0][0]
        assert busy.reasons[0].startswith("claimed by another kopt run (kopt run other-tag, pid ")
        assert busy.claimed_by["pid"] == holder.pid
        gate.close()
    finally:
        holder.kill()
        holder.wait()
    gate = Gate(cfg(), FakeBackend(script), sleep=fake_time.sleep, clock=fake_time.clock)
    assert gate.acquire().gpu.index == 0  # the kernel dropped the dead process's lock
    gate.close()


def test_two_gates_in_one_process_never_share_a_gpu(tmp_path, fake_time):
    script = write_script(tmp_path / "gpus.json", [[gpu(0), gpu(1, util=4)]])
    a = Gate(cfg(), FakeBackend(script), sleep=fake_time.sleep, clock=fake_time.clock, owner="run a")
    b = Gate(cfg(), FakeBackend(script), sleep=fake_time.sleep, clock=fake_time.clock, owner="run b")
    assert a.acquire().gpu.index == 0
    assert b.acquire().gpu.index == 1
    a.close()
    b.close()
    c = Gate(cfg(), FakeBackend(script), sleep=fake_time.sleep, clock=fake_time.clock)
    assert c.acquire().gpu.index == 0
    c.close()


def test_devices_restrict_the_choice_and_a_missing_device_is_bad_input(tmp_path, fake_time):
    gate, _ = make_gate(tmp_path, [[gpu(0), gpu(1, util=5)]], fake_time, devices=[1])
    assert gate.acquire().gpu.index == 1
    gate, _ = make_gate(tmp_path, [[gpu(0), gpu(1)]], fake_time, devices=[5])
    with pytest.raises(BadInput, match=r"\[gpu\].devices = \[5\]: no such GPU \(found 0, 1\)"):
        gate.acquire()


def test_unreadable_fields_are_notes_unless_nothing_can_be_told(tmp_path, fake_time):
    snap = [gpu(0, procs=None), gpu(1, util=None, procs=None, mem=None)]
    gate, _ = make_gate(tmp_path, [snap], fake_time)
    d = gate.acquire()
    a0, a1 = d.assessments
    assert a0.idle and a0.notes == ["processes not readable: backend cannot list them"]
    assert not a1.idle and a1.reasons == ["cannot tell: neither utilization nor processes readable"]
    assert d.gpu.index == 0


def test_amd_gpus_are_bound_with_hip_visible_devices(tmp_path, fake_time):
    gate, _ = make_gate(tmp_path, [[gpu(0, util=50), gpu(1, vendor="amd")]], fake_time)
    assert gate.acquire().env == {"HIP_VISIBLE_DEVICES": "1"}


def test_a_backend_that_raises_reads_as_nothing(fake_time):
    class Broken:
        name = vendor = "broken"
        status = "broken"

        def read(self) -> list[GpuState]:
            raise RuntimeError("driver exploded")

        def close(self) -> None:
            pass

    logs: list[str] = []
    gate = Gate(cfg(), Broken(), sleep=fake_time.sleep, clock=fake_time.clock, log=logs.append)
    assert gate.acquire().gpu is None
    assert "driver exploded" in logs[0]


def test_evidence_before_and_after_and_round_flags(tmp_path, fake_time):
    quiet = gpu(0, throttle=["gpu_idle"], throttle_counters={"power_ns": 100, "thermal_ns": 0})
    hot = gpu(
        0,
        throttle=["sw_thermal"],
        throttle_counters={"power_ns": 100, "thermal_ns": 5e8},
        procs=[(FOREIGN, "intruder", 900)],
    )
    gate, _ = make_gate(tmp_path, each([quiet]) + [[quiet], [hot], [quiet], [quiet]], fake_time)
    assert gate.evidence() is None  # nothing chosen yet
    gate.acquire()
    before = gate.evidence()
    after = gate.evidence()
    assert before["uuid"] == "GPU-fake-0" and before["foreign_processes"] == []
    assert "time" in before and before["throttle"] == ["gpu_idle"]
    assert after["foreign_processes"][0]["pid"] == FOREIGN
    flags = round_flags(before, after)
    assert flags == sorted(
        ["throttle:sw_thermal", "throttle_counter:thermal_ns+5e+08", f"foreign_process:{FOREIGN}:intruder"]
    )
    calm_before, calm_after = gate.evidence(), gate.evidence()
    assert gate.round_flags(calm_before, calm_after) == []  # gpu_idle is benign


def test_round_flags_for_vanished_and_changed_gpus():
    a = {"uuid": "GPU-a", "throttle": [], "throttle_counters": None, "foreign_processes": []}
    assert round_flags(a, None) == ["gpu_vanished"]
    assert round_flags(a, {"uuid": "GPU-a", "missing": True}) == ["gpu_vanished"]
    assert round_flags(a, {**a, "uuid": "GPU-b"}) == ["gpu_changed"]
    assert round_flags(None, None) == []
    assert round_flags(a, {**a, "throttle_counters": {"power_ns": 5.0}}) == []  # no baseline


def test_close_releases_the_claim_and_shuts_the_backend(tmp_path, fake_time):
    closed = []

    class Tracking(FakeBackend):
        def close(self) -> None:
            closed.append(True)

    backend = Tracking(write_script(tmp_path / "g.json", [[gpu(0)]]))
    gate = Gate(cfg(), backend, sleep=fake_time.sleep, clock=fake_time.clock)
    gate.acquire()
    key = claim_key(backend.claim_namespace, "GPU-fake-0", 0)
    assert ClaimRegistry().probe(key) is not None
    gate.close()
    assert closed == [True]
    assert ClaimRegistry().probe(key) is None


def test_assess_is_pure_and_reports_peak_utilization():
    states = [[GpuState(0, uuid="u", util_pct=u, mem_used_mib=10.0, processes=())] for u in (3, 12, 4)]
    (a,) = assess(states, cfg(), set())
    assert a.util_max_pct == 12 and not a.idle
    assert a.reasons == ["utilization up to 12% > 10%"]


def test_real_time_defaults_sleep_through_time_sleep(tmp_path):
    gate = Gate(cfg(sample_interval_s=0.01), FakeBackend(write_script(tmp_path / "g.json", [[gpu(0)]])))
    t0 = time.monotonic()
    assert gate.acquire().gpu.index == 0
    assert time.monotonic() - t0 >= 0.02
    gate.close()


def test_the_first_samples_utilization_is_not_judged_it_may_be_our_own_last_step():
    def series(*utils: float) -> list[list[GpuState]]:
        return [[GpuState(0, uuid="u", util_pct=u, mem_used_mib=10.0, processes=())] for u in utils]

    (a,) = assess(series(100, 2, 1), cfg(), set())
    assert a.idle and a.util_max_pct == 2
    (a,) = assess(series(100, 100, 100), cfg(), set())
    assert not a.idle
    (a,) = assess(series(100), cfg(samples=1), set())  # a single sample is all there is
    assert not a.idle and a.util_max_pct == 100


def test_the_log_says_when_the_gpu_is_idle_again(tmp_path, fake_time):
    gate, logs = make_gate(tmp_path, each([gpu(0)], [gpu(0, util=80)]) + [[gpu(0)]], fake_time, wait_s=60)
    gate.acquire()
    gate.acquire()
    assert logs[0] == "using GPU 0 (NVIDIA H100 80GB HBM3, GPU-fake-0)"
    assert logs[1].startswith("no idle GPU (GPU 0: utilization up to 80% > 10%)")
    assert logs[2] == "GPU 0 is idle again after waiting 64 s"


def test_family_is_each_pid_and_its_descendants_from_one_table() -> None:
    """gate.family reads the process table once for every PID it is given: the same set as
    psutil's children(recursive=True) per PID (a grandchild in a shell's background, a PID
    that is gone), with this process always in it."""
    import psutil

    from kopt_supervisor.engine.gpu.gate import family

    shells = [subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"]) for _ in range(2)]
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(len(psutil.Process(s.pid).children()) < 2 for s in shells):
            time.sleep(0.02)
        gone = subprocess.Popen(["true"])
        gone.wait()
        pids = [s.pid for s in shells] + [gone.pid]
        expected = {os.getpid(), *pids}
        for pid in {os.getpid(), *pids}:
            try:
                expected.update(c.pid for c in psutil.Process(pid).children(recursive=True))
            except psutil.Error:
                continue
        got = family(pids)
        assert got == expected
        assert all({c.pid for c in psutil.Process(s.pid).children()} <= got for s in shells)
        assert len(got) >= 1 + len(pids) + 4  # two sleeps under each shell
    finally:
        for s in shells:
            for c in psutil.Process(s.pid).children(recursive=True):
                c.kill()
            s.kill()
            s.wait()
