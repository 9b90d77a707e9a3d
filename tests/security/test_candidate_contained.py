"""Issues 16 and 17, candidate code as attacker beyond its own process: from inside the bench
it writes a slower kernel into best/, leaves a process behind to SIGSTOP best's bench, edits
its own tracked files after being measured, plants a `.pth` for later runs; and, under the
(fake) profiler, a candidate whose bench lies and whose kernel is renamed so that a regex
over kernel names would lose it.

Each hostile kernel writes what it managed into the proof folder (writable to benches here),
so the host side knows the attack was tried and how far it got.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.security import attacks
from tests.security.conftest import Factory
from tests.security.harness import NCU_BIN, NEEDS_BWRAP, NOT_KEPT, Hostile, tried

pytestmark = [NEEDS_BWRAP, pytest.mark.slow]

WORK = """
def kernel(xs, scale):
    out = []
    for x in xs:
        acc = 0.0
        for _ in range(6):
            acc = x * x * scale
        out.append(acc)
    return out
"""
"""BEST's kernel, unchanged: whatever the attack gains, it gains outside the kernel."""

SLOW = WORK.replace("range(6)", "range(60)")


def hostile_kernel(h: Hostile, name: str, body: str) -> str:
    """kernel.py: BEST's kernel, and at import `body`, its outcome recorded in proof/<name>."""
    return (
        f"""
import json as _json
import os
import textwrap
import signal
import subprocess
import sys
import time

_PROOF = {str(h.proof / name)!r}
_BEST = {str(h.ws.best)!r}
try:
{textwrap.indent(body.strip(), "    ")}
    _got = "ok"
except Exception as _e:
    _got = f"{{type(_e).__name__}}: {{_e}}"
with open(_PROOF, "a") as _f:
    _f.write(_got + "\\n")
"""
        + WORK
    )


def outcomes(h: Hostile, name: str) -> list[str]:
    path = h.proof / name
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("no_sandbox", [False, True], ids=["confined", "unconfined"])
def test_candidate_code_writing_a_slower_kernel_into_best_is_contained_or_found(
    hostile: Factory, no_sandbox: bool
) -> None:
    """Confined, best/ is not in the bench's view at all; unconfined, the write lands and kopt
    finds best/ changed before its next look. Either way no keep."""
    h = hostile.py([], bench_writable=True)
    h.set_script(
        [
            {
                "name": "slow best from the bench",
                "write": {
                    "kernel.py": hostile_kernel(h, "write-best", f"open(_BEST + '/kernel.py', 'w').write({SLOW!r})")
                },
            }
        ]
    )
    before = h.baseline(no_sandbox=no_sandbox)
    assert h.session(1, no_sandbox=no_sandbox) == 0
    got = outcomes(h, "write-best")
    tried(got, "the candidate's code never ran")
    if no_sandbox:
        tried("ok" in got, f"the write into best/ never landed: {got}")
        statuses = {"fail_bench", "rejected"}
    else:
        assert all(g != "ok" for g in got), f"a confined bench wrote into best/: {got}"
        statuses = NOT_KEPT
    it = h.assert_refused(before, 1, statuses, outside=not no_sandbox)
    if no_sandbox and it.status == "fail_bench":
        assert "best/ changed during the decision" in h.reason(1), h.reason(1)
    assert (h.ws.best / "kernel.py").read_text() == (h.repo / "kernel.py").read_text()


def test_confined_a_process_left_by_candidate_code_dies_with_the_bench(hostile: Factory) -> None:
    """A setsid'd process started from kernel code at import, meant to SIGSTOP best's bench
    later: it dies with each bench run's PID namespace; best is never slowed."""
    h = hostile.py([], bench_writable=True)
    linger = attacks.linger(h, attacks.STOP_BEST_BENCH, seconds=10, scrub_env=True)
    h.set_script([{"name": "stop best from the bench", "write": {"kernel.py": hostile_kernel(h, "spawn", linger)}}])
    before = h.baseline()
    assert h.session(1) == 0
    tried("ok" in outcomes(h, "spawn") and h.ticks("linger"), "the lingering process never started")
    ratios = [c["ratio"] for c in h.iteration(1).record["classes"].values()]
    assert all(r > 0.6 for r in ratios), f"best was slowed: candidate/best {ratios}"
    h.assert_refused(before, 1, NOT_KEPT, "thread-process")


def test_candidate_code_editing_its_own_tracked_file_fails_the_bench(hostile: Factory) -> None:
    """The bench's own tree is writable to it (its CSV goes there): kernel code that rewrites
    kernel.py while it is measured (what would be committed is not what was timed) fails the
    run, and the tree is put back."""
    h = hostile.py([], bench_writable=True)
    h.set_script(
        [
            {
                "name": "rewrite myself",
                "write": {
                    "kernel.py": hostile_kernel(
                        h, "rewrite", "open('kernel.py', 'a').write('# rewritten while measured\\n')"
                    )
                },
            }
        ]
    )
    before = h.baseline()
    assert h.session(1) == 0
    tried("ok" in outcomes(h, "rewrite"), "the rewrite never happened")
    h.assert_refused(before, 1, {"fail_bench"}, "the bench modified tracked file(s) in cand/: kernel.py")


def test_confined_candidate_code_cannot_plant_startup_hooks_for_later_runs(hostile: Factory) -> None:
    """Kernel code tries a `.pth` and sitecustomize.py in every site-packages folder, and
    files in $HOME, /tmp and the workspace: each write fails, nothing reaches the host."""
    import site
    import sysconfig

    dirs = sorted({sysconfig.get_paths()["purelib"], site.getusersitepackages(), sysconfig.get_paths()["stdlib"]})
    targets = [str(Path(d) / n) for d in dirs for n in (f"hostile-{os.getpid()}.pth", "sitecustomize.py")]
    preexisting = {t for t in targets if os.path.exists(t)}
    h = hostile.py([], bench_writable=True)
    canaries = [str(p) for p in h.canaries()]
    body = f"""
_ok = []
for _t in {targets + canaries!r}:
    try:
        open(_t, 'a').write('import os\\n')
        _ok.append(_t)
    except OSError:
        pass
if [_t for _t in _ok if not _t.startswith('/tmp/')]:  # the bench's own /tmp is its private scratch
    raise RuntimeError(f"wrote {{_ok}}")
"""
    h.set_script([{"name": "plant hooks from the bench", "write": {"kernel.py": hostile_kernel(h, "plant", body)}}])
    before = h.baseline()
    try:
        assert h.session(1) == 0
    finally:
        planted = [t for t in targets if os.path.exists(t) and t not in preexisting]
        for t in planted:
            os.remove(t)
    got = outcomes(h, "plant")
    tried(got, "the candidate's code never ran")
    assert all(g == "ok" for g in got), f"a confined bench wrote outside its tree: {got}"
    assert not planted, f"planted on the host: {planted}"
    h.assert_refused(before, 1, NOT_KEPT)


GPU = {
    "index": 0,
    "name": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-fake-0",
    "util_pct": 0,
    "mem_used_mib": 10,
    "mem_total_mib": 81559,
    "processes": [],
}
FAST_GATE = {'vendor = "none"': 'vendor = "auto"\nsamples = 1\nsample_interval_s = 0\nwait_s = 0.2\nwait_max_s = 2'}


def profiled(hostile: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Hostile, Any]:
    """The fake target under a fake NVIDIA GPU and the fake ncu (tests/security/bin/ncu,
    launches timed at the kernel's real speed inside each config's NVTX range). v1, an
    honest 20% gain, is confirmed by the profiler; v2's bench claims 2x (a lying timer, under
    suspicious_speedup) while its kernel is no faster and, renamed, no longer matches
    `[profile].kernel`."""
    fake = tmp_path / "gpus.json"
    fake.write_text(json.dumps([[GPU]]))
    h = hostile.fake(
        [
            {"name": "honest", "exec": attacks.gain(0.8)},
            {"name": "lying bench, renamed kernel", "exec": attacks.gain(1.0, fast=2, kernel_name="renamed_kernel")},
        ],
        toml_replace=FAST_GATE,
        extra_toml='\n[profile]\nkind = "ncu"\nkernel = "fake_kernel"\n',
    )
    monkeypatch.setenv("KOPT_FAKE_GPUS", str(fake))
    monkeypatch.setenv("KOPT_GPU_CLAIMS_DIR", str(tmp_path / "claims"))
    monkeypatch.setenv("PATH", f"{NCU_BIN}:{os.environ['PATH']}")
    before = h.baseline(iters=1)
    assert h.iteration(1).status == "keep" and "profiler:" in h.reason(1), (h.iteration(1).status, h.reason(1))
    assert h.session(1) == 0
    tried(all(c["ratio"] < 0.6 for c in h.iteration(2).record["classes"].values()), "the bench was not fooled")
    return h, before


def test_a_lying_bench_with_a_renamed_kernel_is_refuted_by_the_profiler_which_still_counts_it_in_its_configs_range(
    hostile: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The profiler attributes every launch inside a config's range to it, whatever its
    name: the renamed kernel's time is the candidate's, per class (no change), and the kernel
    that appeared and the one that disappeared are named; the bench's 2x claim is refuted.
    (Two tests of the same `profiled` run until 2026-11-30.)"""
    h, before = profiled(hostile, tmp_path, monkeypatch)
    cmp = h.iteration(2).record["profile"]["comparison"]
    assert cmp["per_class"] and cmp["kernel_regex"] == "fake_kernel"
    for c in cmp["classes"]:
        assert c["ratio"] == pytest.approx(1.0, abs=0.002) and c["cand_ns"] > 0, c
        assert c["appeared"] == ["renamed_kernel"] and c["disappeared"] == [f"fake_kernel_{c['cls'][4:]}"], c
    h.assert_no_survivors()
    h.assert_refused(before, 2, {"rejected"}, "profiler")
    assert "profiler_disagrees" in h.iteration(2).record["decision"]["flags"]
