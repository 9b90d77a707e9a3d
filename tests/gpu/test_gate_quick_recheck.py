"""The gate's quick recheck: between timed steps on the GPU it holds, one fresh reading instead
of a full check, and only while nothing was seen (docs/gpu-gate.md "The quick recheck").

Each reading takes the next snapshot of the script: a full check takes 3 (2 pauses of 1 s),
evidence() takes 1, a quick recheck takes 1 and sleeps not at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gpu_helpers import FakeTime, cfg, gpu, write_script

from kopt_supervisor.engine.gpu.backends import FakeBackend
from kopt_supervisor.engine.gpu.claims import ClaimRegistry, claim_key
from kopt_supervisor.engine.gpu.gate import Gate, NoIdleGpu

FOREIGN = 4_000_002
IDLE = [gpu(0)]
OWN_STEP = [gpu(0, util=100, mem=3000, procs=[(77, "python", 3000)])]
"""The reading right after this run's own step: its process gone from the list, NVML's
utilization window still full of it."""


def gate_over(tmp_path: Path, snapshots: list[list[dict]], t: FakeTime, **kw) -> Gate:
    own = kw.pop("own_pids", lambda: {77})
    return Gate(
        cfg(**kw),
        FakeBackend(write_script(tmp_path / "gpus.json", snapshots)),
        sleep=t.sleep,
        clock=t.clock,
        own_pids=own,
        claims=ClaimRegistry(tmp_path / "claims"),
    )


def step(gate: Gate) -> None:
    """What the loop does around one timed step: acquire, evidence before, evidence after."""
    gate.acquire()
    gate.evidence()
    gate.evidence()


def test_after_a_clean_step_one_reading_and_no_pause_decide(tmp_path, fake_time):
    gate = gate_over(tmp_path, [IDLE] * 3 + [IDLE, IDLE] + [[gpu(0, util=100)]], fake_time)
    step(gate)
    assert fake_time.sleeps == [1.0, 1.0]
    d = gate.acquire()
    assert fake_time.sleeps == [1.0, 1.0]  # no pause: one reading
    assert d.note == "kept (quick recheck)" and d.gpu is not None and d.gpu.index == 0
    assert d.env["CUDA_VISIBLE_DEVICES"] == "0"
    assert d.assessments[0].samples == 2  # the after-step reading and the fresh one
    # a full utilization window right after the own step is not held against the GPU
    assert any("not judged" in n for n in d.assessments[0].notes)


def test_a_foreign_process_in_the_fresh_reading_falls_back_to_the_full_check(tmp_path, fake_time):
    intruder = [gpu(0, util=0, mem=900, procs=[(FOREIGN, "intruder", 900)])]
    gate = gate_over(tmp_path, [IDLE] * 3 + [IDLE, IDLE] + [intruder] + [intruder] * 3 + [IDLE] * 3, fake_time)
    step(gate)
    d = gate.acquire()
    assert d.note != "kept (quick recheck)"
    # the full check saw the intruder, waited wait_s, and checked again
    assert fake_time.sleeps == [1.0, 1.0, 1.0, 1.0, 600.0, 1.0, 1.0]


def test_a_foreign_process_right_after_the_step_means_a_full_check(tmp_path, fake_time):
    intruder = [gpu(0, procs=[(FOREIGN, "intruder", 10)])]
    gate = gate_over(tmp_path, [IDLE] * 3 + [IDLE, intruder] + [IDLE] * 3, fake_time)
    step(gate)
    d = gate.acquire()
    assert d.note == "kept" and fake_time.sleeps == [1.0, 1.0, 1.0, 1.0]


def test_a_throttle_right_after_the_step_means_a_full_check(tmp_path, fake_time):
    hot = [gpu(0, throttle=["sw_thermal"])]
    gate = gate_over(tmp_path, [IDLE] * 3 + [IDLE, hot] + [IDLE] * 3, fake_time)
    step(gate)
    assert gate.acquire().note == "kept" and len(fake_time.sleeps) == 4


def test_unreadable_processes_never_take_the_quick_path(tmp_path, fake_time):
    blind = [gpu(0, procs=None)]
    gate = gate_over(tmp_path, [blind] * 20, fake_time)
    step(gate)
    assert gate.acquire().note == "kept" and len(fake_time.sleeps) == 4


def test_memory_growing_since_the_step_falls_back(tmp_path, fake_time):
    loading = [gpu(0, mem=500)]
    gate = gate_over(tmp_path, [IDLE] * 3 + [IDLE, IDLE] + [loading] + [IDLE] * 3, fake_time)
    step(gate)
    assert gate.acquire().note == "kept" and len(fake_time.sleeps) == 4


def test_the_full_check_returns_after_quick_recheck_s(tmp_path, fake_time):
    gate = gate_over(tmp_path, [IDLE] * 40, fake_time, quick_recheck_s=30.0)
    step(gate)
    step(gate)
    assert len(fake_time.sleeps) == 2
    fake_time.sleep(31.0)  # a long step
    gate.evidence()
    d = gate.acquire()
    assert d.note == "kept" and fake_time.sleeps[-2:] == [1.0, 1.0]


def test_quick_recheck_s_zero_is_the_full_check_every_time(tmp_path, fake_time):
    gate = gate_over(tmp_path, [IDLE] * 40, fake_time, quick_recheck_s=0.0)
    step(gate)
    step(gate)
    assert fake_time.sleeps == [1.0, 1.0, 1.0, 1.0]


def test_a_claim_taken_by_another_run_is_never_skipped(tmp_path, fake_time):
    gate = gate_over(tmp_path, [IDLE] * 40, fake_time, wait_max_s=0.0)
    step(gate)
    # our claim lost (released by hand) and taken by another kopt run: the quick path must ask
    # the registry, not assume it still holds the GPU
    key = claim_key(gate.namespace, "GPU-fake-0", 0)
    gate.claims.release(key)
    other = ClaimRegistry(tmp_path / "claims", owner="run b")
    assert other.claim(key)
    try:
        with pytest.raises(NoIdleGpu, match="claimed by another kopt run"):
            gate.acquire()
    finally:
        other.release(key)


def test_a_vanished_gpu_falls_back_to_the_full_check(tmp_path, fake_time):
    gate = gate_over(tmp_path, [IDLE] * 3 + [IDLE, IDLE] + [[gpu(1)]] * 3 + [[gpu(1)]] * 3, fake_time)
    step(gate)
    d = gate.acquire()
    assert d.gpu is not None and d.gpu.index == 1 and d.note == "switched from GPU 0"


def test_a_serving_process_of_this_run_closed_since_the_step_is_not_foreign(tmp_path, fake_time):
    # found on the H100: the reading after a decision's last look lists the kept serving
    # process (this run's then); it is closed while the proposer works, so by the next
    # decision's first check it is no longer among this run's PIDs
    own = {77}
    after_step = [gpu(0, mem=5000, procs=[(77, "python", 5000)])]
    gate = gate_over(tmp_path, [IDLE] * 3 + [IDLE, after_step] + [IDLE] * 3, fake_time, own_pids=lambda: set(own))
    step(gate)
    own.clear()  # the server closed
    d = gate.acquire()
    assert d.note == "kept (quick recheck)" and fake_time.sleeps == [1.0, 1.0]


def test_a_process_of_this_run_that_outlives_it_on_the_gpu_is_foreign(tmp_path, fake_time):
    own = {77}
    lingering = [gpu(0, mem=900, procs=[(77, "python", 900)])]
    gate = gate_over(
        tmp_path, [IDLE] * 3 + [IDLE, lingering] + [lingering] * 4 + [IDLE] * 3, fake_time, own_pids=lambda: set(own)
    )
    step(gate)
    own.clear()  # no longer this run's (setsid, reparented), still on the GPU
    d = gate.acquire()
    assert d.note != "kept (quick recheck)" and 600.0 in fake_time.sleeps


def test_a_fresh_reading_that_cannot_list_processes_falls_back(tmp_path, fake_time):
    # the after-step reading was clean, but now the processes cannot be read: memory alone
    # must not clear the GPU
    blind = [gpu(0, procs=None)]
    gate = gate_over(tmp_path, [IDLE] * 3 + [IDLE, IDLE] + [blind] + [IDLE] * 3, fake_time)
    step(gate)
    assert gate.acquire().note == "kept" and len(fake_time.sleeps) == 4
