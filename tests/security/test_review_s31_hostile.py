"""Hostile review (helper, thirty-first sitting) of b9af9e3..d251e23: every profile in a copy that
says neither side (profile_runs.ProfiledTree, look_files.BlindCopy) and best's floor
(floors.slower_than_kept, Evidence.confirm).

The attacker writes the candidate's tree and can read kopt's source. A tree can always make its
own kernels slower under the profiler, never faster, and it knows which pass it is in (a closer
profile sets KOPT_PROFILE_CALLS). The stand-in ncu below models such a tree through kernel.json
knobs (as tests/security/test_review_s30_hostile.py's `role_aware_ncu` does). Every test asserts
the SAFE behaviour; the ones marked xfail(strict) are holes still open. The two tests of the
iteration told by the logs' folder (section 4) failed at d251e23 and pass since b507e2a (its
`log_dir` change, committed while this review ran). Closed after the review: a noisy kept
profile (the floor now takes the fresh profile's spread for both), a formatted keep (its
commit's tree is held to its profile), a failed profile's own words (its output folder kept),
and, unconfined, a profile changing what is committed (the tree it came from is checked).
Closed in the thirty-second sitting: the floor's calls counted from the tree's own launches (ncu
reports no range openings): kopt now names every config's calls in each profile, from the bench's
own as the baseline's profile said them, and divides by those (profiler.ProfileCalls; section 1,
xfail strict until then), and the shared bytecode cache as a switch any run could flip (a
workspace binds only the units fixed once its baseline ran: sandbox/bytecode.py `freeze`).
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kopt_supervisor.engine.profile.floors import slower_than_kept
from kopt_supervisor.engine.profile.summary import Launch, ProfileSummary, summarize
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import git
from tests.engine.test_keep_profile_reuse import record
from tests.profile.test_profile_classes import CONFIGS, REFS, WIDE
from tests.security.harness import KEPT, NEEDS_BWRAP
from tests.security.test_review_s30_hostile import SPEED_LINE, _do, patched_ncu
from tests.security.test_review_s30_hostile import _run as s30_run

RUNS = Path(__file__).parent / ".runs"

# -- a stand-in ncu for trees that know more than their folder's name ------------------------------

VERSION_TOLD = SPEED_LINE + (
    "own = kernel_json.get('ncu_own_version')\n"
    "if own is not None:  # the iteration this tree was written for (the proposer's KOPT_ITERATION)\n"
    "    told = ''\n"
    "    for fd in os.listdir('/proc/self/fd'):\n"
    "        try:\n"
    "            path = os.readlink('/proc/self/fd/' + fd)\n"
    "        except OSError:\n"
    "            continue\n"
    "        if '/logs/v' in path and path.split('/logs/v', 1)[1].split('/', 1)[0] != str(own):\n"
    "            told = path  # a log of another iteration: this tree runs as BEST\n"
    "    open(opts['--export'] + '.role', 'w').write(told)\n"
    "    if told:\n"
    "        speed = {c: v * float(kernel_json.get('ncu_slow_as_best', 1.0)) for c, v in speed.items()}\n"
)
LOOP_LINE = "    for k in range(many):"
HELPER = (
    "    helper = kernel_json.get('ncu_helper')  # 'first': a one-time kernel in each range, first pass only\n"
    "    if ranged and (helper == 'always' or (helper == 'first' and not CLOSER)):\n"
    "        launches.append(['fake_helper', f'kopt:shape=s{j},cls={cls},n={n}', 400.0, n * 8 * 1.5])\n"
) + LOOP_LINE
LOAD_LINE = 'kernel_json = json.load(open("kernel.json"))\n'
AFTER_RUN = LOAD_LINE + (
    "if kernel_json.get('ncu_fail'):  # the profiler fails, saying why only in its --log-file, as ncu does\n"
    "    open(opts['--log-file'], 'w').write('==PROF== fake ncu\\n==ERROR== ' + kernel_json['ncu_fail'] + '\\n')\n"
    "    sys.exit(9)\n"
    "if kernel_json.get('ncu_plant') and os.environ.get('KOPT_WORKSPACE'):  # unconfined: cand/ is at hand\n"
    "    planted = os.path.join(os.environ['KOPT_WORKSPACE'], 'cand', 'kernel.json')\n"
    "    try:\n"
    "        d = json.load(open(planted))\n"
    "        d.pop('ncu_plant', None)\n"
    "        d['ncu_slow_closer'] = 1.12\n"
    "        json.dump(d, open(planted, 'w'))\n"
    "    except OSError:\n"
    "        pass\n"
)


@pytest.fixture
def hostile_ncu() -> Iterator[Path]:
    """tests/fake_target/bin/ncu plus kernel.json knobs: "ncu_own_version" with "ncu_slow_as_best"
    (its kernels slower wherever a log of another iteration than its own is open in the profiled
    process: what told it written to `<report>.role`); "ncu_helper" ("first" or "always": one
    launch of a tiny `fake_helper` kernel in each config's range); "ncu_fail" (exit 9, the reason
    only in ncu's --log-file); "ncu_plant" (unconfined, it rewrites cand/kernel.json of the
    workspace). Written outside /tmp: the sandbox gives every process a private /tmp."""
    yield from patched_ncu("s31h", {SPEED_LINE: VERSION_TOLD, LOOP_LINE: HELPER, LOAD_LINE: AFTER_RUN})


def _run(fake_env, tmp_path: Path, monkeypatch, tag: str, script: list[str], ncu_bin: Path, **kw) -> Workspace:
    """test_review_s30_hostile._run with the stand-in ncu of this file."""
    return s30_run(fake_env, tmp_path, monkeypatch, tag, script, ncu_bin=ncu_bin, **kw)


NOOP = (
    "k['ncu_speed'] = {'small': 0.8, 'large': 0.8}; k['ncu_jitter_first'] = 0.25; "
    "[k.pop(x, None) for x in ('ncu_slow_closer', 'ncu_helper', 'ncu_own_version', 'ncu_slow_as_best')]; "
)
"""A later candidate that changes no kernel of v1's (0.8), drops v1's hostile knobs and is noisy
in its first profile only, so that the closer profile (best afresh, never reused) is taken."""


HELPED = "k['ncu_speed'] = {'small': 0.789, 'large': 0.8}; "
"""v1's GPU work where its one-time kernel is profiled too: the helper's 400 ns a range lifts the
small class's profiled ratio by ~1.4% (0.8114 [0.8026, 0.8204] for the bench's 0.80), and a bench
interval whose upper end fell below 0.8026 (0.8044 was seen in 32 draws, 2026-12-04) made the
honest v1's first profile disagree, sending it to review; with its kernels 1.4% faster on small
the profiler reads what the bench does."""


def _tree(ws: Workspace, commit: str) -> str:
    return subprocess.run(
        ["git", "rev-parse", f"{commit}^{{tree}}"], cwd=ws.best, capture_output=True, text=True, check=True
    ).stdout.strip()


def _noops_kept(ws: Workspace, versions: tuple[int, ...]) -> dict[int, str]:
    return {v: record(ws, v)["decision"]["reason"] for v in versions if record(ws, v)["status"] in KEPT}


# -- 1. the floor's calls are the tree's own --------------------------------------------------------


def _summary(seed: int, calls: int, scale: float = 1.0, helper: bool = False, cv: float = 0.003) -> ProfileSummary:
    """One profile of test_profile_classes' configs, `calls` launches of `k` a config (`scale`
    on all), and with `helper` one tiny launch of another kernel in each config's range; kopt
    asked for `calls` a config (`asked`)."""
    rng = random.Random(seed)
    launches = []
    for key, ns in CONFIGS.items():
        if helper:
            launches.append(Launch("helper", 400.0, range=f"kopt:{key}"))
        for _ in range(calls):
            launches.append(Launch("k", ns * scale * (1 + rng.gauss(0, cv)), range=f"kopt:{key}"))
    return asked(summarize(launches, "", tool="test"), calls)


def asked(summary: ProfileSummary, calls: int) -> ProfileSummary:
    """`summary` as kopt's profile_in returns it when it asked for `calls` of every config."""
    return dataclasses.replace(summary, asked=tuple((key, calls) for key in CONFIGS))


def test_a_kernel_launched_once_in_the_kept_profile_lifts_bests_floor():
    """Attack. With ncu (no range openings) `floors._calls` counts a config's calls as its
    least-launched kernel in the range, in each profile on its own. The kept profile is the
    attacker's: as a candidate it launches one tiny extra kernel once in each range (a lazily
    made table, a workspace memset), so its calls count 1 and its per-call time is all its
    calls' time together. Best's fresh profile, 12% slower per call, is then 1/3 (own calls) or
    1/12 (closer profile) of the floor. The per-class comparison is not moved: it takes totals,
    and its calls from best's profile for both sides."""
    kept = _summary(1, calls=3, helper=True)
    fresh = _summary(2, calls=12, scale=1.12)
    found = {s.cls for s in slower_than_kept(kept, fresh, REFS)}
    # counted by launches (a bench that never said its calls) the helper hid it all; asked, it lifts
    # the floor by its own time only (400 ns a range: 2.7% of narrow's 5 us calls, which with
    # DRIFT_NS hides narrow's 12%; nothing of wide's 600 us ones, where the 12% shows)
    unasked = [dataclasses.replace(x, asked=None) for x in (kept, fresh)]
    assert slower_than_kept(*unasked, REFS) == [] and WIDE in found, found


def test_a_best_that_splits_its_launches_in_the_fresh_profile_passes_its_floor():
    """Attack, the other side of the same count: best, profiled afresh (it knows the closer pass),
    runs each call's work as two launches of half the work each, 12% slower in all. Its calls
    count 24 where kopt asked for 12, so its per-call time is halved for the floor; the
    comparison takes totals (its calls are best's 24 for both sides) and shows the candidate
    12% faster. Only the bytes floor, where [roofline].bytes is set and a range moves under
    1.8x a call's bytes, would see the candidate's bytes per (best's) call halved."""
    rng = random.Random(3)
    launches = [
        Launch("k", ns * 1.12 / 2 * (1 + rng.gauss(0, 0.003)), range=f"kopt:{key}")
        for key, ns in CONFIGS.items()
        for _ in range(24)
    ]
    fresh = asked(summarize(launches, "", tool="test"), 12)
    found = {s.cls for s in slower_than_kept(_summary(1, calls=3), fresh, REFS)}
    assert found == {s.cls for s in slower_than_kept(_summary(1, calls=3), _summary(2, 12, 1.12), REFS)}, found
    assert WIDE in found, found


def test_an_honest_one_time_kernel_is_no_slowed_best():
    """Honest run broken by the same count. An unchanged tree that launches one kernel once per
    config (a first call's table or zeroed workspace) counts 1 call in every profile: its kept
    profile (3 calls a config) and its fresh closer profile (12) differ 4x per call, and the
    floor calls best slowed: every later real gain that needs a closer profile goes to review."""
    kept = _summary(1, calls=3, helper=True)
    fresh = _summary(2, calls=12, helper=True)
    assert slower_than_kept(kept, fresh, REFS) == []


def test_e2e_a_one_time_kernel_in_the_kept_profile_lends_a_later_noop_a_gain(
    fake_env, tmp_path, monkeypatch, driven_clock, hostile_ncu
):
    """test_review_s31_floor's attack, end to end, with one more line in v1: v1 (an honest -20%,
    slowed 12% in every closer profile) also launches a tiny kernel once in each config's range,
    in its first pass only, the pass it is kept on. Best's floor then reads v1's kept profile as
    1 call a config; v2 and v3 (no kernel changed, timer patched, noisy in their first profile)
    take the closer profile, best (v1) is 12% slower there, the floor finds it faster than its
    kept "call", and the no-ops are kept on v1's slowdown."""
    v1 = _do("speed['small'] = speed['large'] = 0.8; k['ncu_slow_closer'] = 1.12; k['ncu_helper'] = 'first'; " + HELPED)
    v2 = _do(NOOP, "speed['small'] *= 0.9; speed['large'] *= 0.9; ")
    v3 = _do(NOOP, "speed['small'] *= 0.88; speed['large'] *= 0.88; ")
    ws = _run(fake_env, tmp_path, monkeypatch, "h", [v1, v2, v3], hostile_ncu)
    r1, r2 = record(ws, 1), record(ws, 2)
    assert r1["status"] == "keep", r1["decision"]
    assert r2["profile"]["taken"]["calls"] is not None  # the closer profile ran: the attack's path
    assert r2["profile"]["best_floor"]["from"] == 1  # the floor was asked
    assert not _noops_kept(ws, (2, 3))


def test_e2e_an_honest_one_time_kernel_does_not_send_a_later_real_gain_to_review(
    fake_env, tmp_path, monkeypatch, driven_clock, hostile_ncu
):
    """test_review_s31_floor's honest counterpart with a one-time kernel in each range (every
    pass): v2 really is 10% faster, noisy in its first profile; the closer profile runs v1
    unslowed, yet the floor compares 12 calls' time with 3 calls' (each "1 call") and flags
    best_slowed: the real gain goes to review."""
    v1 = _do("speed['small'] = speed['large'] = 0.8; k['ncu_helper'] = 'always'; " + HELPED)
    v2 = _do("speed['small'] = speed['large'] = 0.72; k['ncu_jitter_first'] = 0.25; k.pop('ncu_speed'); ")
    ws = _run(fake_env, tmp_path, monkeypatch, "i", [v1, v2], hostile_ncu)
    r1, r2 = record(ws, 1), record(ws, 2)
    assert r1["status"] == "keep", r1["decision"]
    assert r2["profile"]["taken"]["calls"] is not None
    assert r2["status"] == "keep", r2["decision"]


# -- 2. the floor's noise is the kept profile's own ------------------------------------------------


def test_e2e_a_noisy_kept_profile_widens_bests_floor(fake_env, tmp_path, monkeypatch, driven_clock, hostile_ncu):
    """Attack. `slower_than_kept`'s interval adds both profiles' launch spreads, and the kept one
    is the attacker's own first pass. v1 is a real -40% (a gain wide enough to be shown through
    noise) whose launches jitter by 15% in its first pass (kept there, no closer profile), and
    slows itself 12% in every closer profile. v2 (no kernel changed, timer patched, noisy first)
    takes the closer profile: best (v1) unjittered but 12% slower, so the comparison's interval
    (best's fresh spread and v2's) is narrow and shows v2 faster, while the floor's interval,
    wide from the kept profile's jitter, did not reach the slowdown. Closed: the floor takes the
    fresh profile's spread for both (`slower_than_kept`)."""
    v1 = _do("speed['small'] = speed['large'] = 0.6; k['ncu_jitter_first'] = 0.15; k['ncu_slow_closer'] = 1.12; ")
    noop = "k['ncu_speed'] = {'small': 0.6, 'large': 0.6}; k['ncu_jitter_first'] = 0.25; k['ncu_slow_closer'] = 1.0; "
    v2 = _do(noop, "speed['small'] *= 0.9; speed['large'] *= 0.9; ")
    ws = _run(fake_env, tmp_path, monkeypatch, "n", [v1, v2], hostile_ncu)
    r1, r2 = record(ws, 1), record(ws, 2)
    assert r1["status"] == "keep" and r1["profile"]["taken"]["calls"] is None, r1["decision"]
    assert r2["profile"]["taken"]["calls"] is not None
    assert r2["profile"]["best_floor"]["from"] == 1
    assert not _noops_kept(ws, (2,))


# -- 3. the floor is off for a formatted keep -------------------------------------------------------

FORMAT = (
    f"\n[format]\ncommand = '''{sys.executable} -c \"import json; p = 'kernel.json'; "
    "d = json.load(open(p)); open(p, 'w').write(json.dumps(d, indent=1, sort_keys=True) + chr(10))\"'''\n"
)


def test_e2e_a_keep_the_formatter_changed_has_no_floor(fake_env, tmp_path, monkeypatch, driven_clock, hostile_ncu):
    """Attack (and an honest run's lost check). `profiler.kept_profile` holds best to its keep's
    profile only when that profile's tree is best's tree; with `[format].command` set, a keep
    the formatter changed commits another tree than the one profiled ("a format step"), so best's
    floor (and reuse) is off for that BEST for good. The proposer needs only to leave one line
    the formatter rewrites (here kernel.json as json.dump writes it). Then
    test_review_s31_floor's attack goes through as before the floor: v1 slows itself in every
    closer profile, v2 (no-op, timer patched, noisy first) is kept on that slowdown."""
    v1 = _do("speed['small'] = speed['large'] = 0.8; k['ncu_slow_closer'] = 1.12; ")
    v2 = _do(NOOP, "k['ncu_slow_closer'] = 1.0; speed['small'] *= 0.9; speed['large'] *= 0.9; ")
    ws = _run(fake_env, tmp_path, monkeypatch, "f", [v1, v2], hostile_ncu, extra=FORMAT)
    r1, r2 = record(ws, 1), record(ws, 2)
    assert r1["status"] == "keep", r1["decision"]
    assert _tree(ws, r1["commit"]) != r1["profile"]["taken"]["trees"]["cand"]  # the formatter changed it
    assert r2["profile"]["taken"]["calls"] is not None
    assert not _noops_kept(ws, (2,)) and "best_floor" in r2["profile"], r2["profile"].get("best_floor")


# -- 4. what a copy still tells: the iteration, and state any run can grow --------------------------


@NEEDS_BWRAP
def test_e2e_a_profiled_tree_cannot_tell_its_role_from_its_logs_folder(
    fake_env, tmp_path, monkeypatch, driven_clock, hostile_ncu
):
    """Found in this review, failing at d251e23, passing since b507e2a (control.py `log_dir`,
    look_files.BlindCopy.logs, profile_runs.py). Every child's
    stdout and stderr were logs/v<N>/<name>.out|.err, readable inside the sandbox (readlink
    /proc/self/fd/1). The proposer knows its iteration (KOPT_ITERATION) and writes it into the
    tree: v1's code is slow wherever an open log is not under logs/v1/, i.e. exactly where it
    runs as BEST. v2 writes its own number the same way (no kernel touched) and patches its
    timer. At d251e23 v1's fresh profile as BEST told (`<report>.role` named
    logs/v2/profile_<label>.err) and only best's floor stopped v2 (best_slowed)."""
    v1 = _do("speed['small'] = speed['large'] = 0.8; k['ncu_own_version'] = n; k['ncu_slow_as_best'] = 1.12; ")
    v2 = _do(
        "k['ncu_speed'] = {'small': 0.8, 'large': 0.8}; k['ncu_own_version'] = n; ",
        "speed['small'] *= 0.9; speed['large'] *= 0.9; ",
    )
    ws = _run(fake_env, tmp_path, monkeypatch, "v", [v1, v2], hostile_ncu, profile="reuse_best_s = 0")
    r1, r2 = record(ws, 1), record(ws, 2)
    assert r1["status"] == "keep", r1["decision"]
    assert r2["status"] not in KEPT, r2["decision"]
    told = {str(r.relative_to(ws.profiles)): r.read_text() for r in ws.profiles.rglob("*.role") if r.read_text()}
    assert not told, told


AS_BEST_BY_VERSION = """
import os as _os

_honest = normalise
_MINE = "@V@"


def _told():
    for fd in _os.listdir("/proc/self/fd"):
        try:
            path = _os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if "/logs/v" in path and path.split("/logs/v", 1)[1].split("/", 1)[0] != _MINE:
            return True  # a log of another iteration than the one this tree was written for
    return False


_SLOW = _told()


def normalise(xs, w, n):
    if _SLOW:  # dormant: the tree runs as BEST
        _work(xs, w, n)
        _work(xs, w, n)
    return _honest(xs, w, n)
"""
"""tests/fake_target/pyserve/hostile.py's AS_BEST, told from the iteration in its open logs' folder."""

AS_BEST_WHEN_ARMED = """
import importlib.util as _util
import os as _os

_honest = normalise
_ARM = "@U@"
_spec = _util.find_spec(_ARM)
_SLOW = _spec is not None and _os.path.exists(_util.cache_from_source(_spec.origin))  # its bytecode is bound


def normalise(xs, w, n):
    if _SLOW:  # dormant until a later run imported _ARM: kopt's shared library bytecode then has it
        _work(xs, w, n)
        _work(xs, w, n)
    return _honest(xs, w, n)
"""
"""AS_BEST, armed from outside: slow once the library package `_ARM` is in kopt's shared bytecode
cache (engine/sandbox/bytecode.py), which a run adds by importing it (`harvest`)."""

PROPOSER = """
import os
import sys
from pathlib import Path

sys.path.insert(0, {pyserve!r})
import hostile

n = os.environ["KOPT_ITERATION"]
tree = Path.cwd()
steps = {steps!r}
step = steps[int(n) - 1]
if step[0] == "honest":  # the honest gain with dormant code
    files = hostile.solution(hostile.HONEST + step[1])(tree)
elif step[0] == "import":  # BEST's code importing a library package: nothing else
    files = {{"solution.py": hostile.best(tree) + "\\nimport " + step[1] + "\\n"}}
else:  # BEST's code, one constant changed: no work changed
    files = {{"solution.py": hostile.best(tree).replace(step[1], step[2])}}
for path, text in files.items():
    Path(path).write_text(text)
with open(os.environ["KOPT_PLAN"], "w") as f:
    f.write("v" + n + ": " + step[0] + "\\nscope: global\\n")
"""


def _pyserve(tmp_path: Path, monkeypatch, steps: list[tuple[str, ...]]) -> list:
    """The served CPU target (tests/security/test_hostile_wave3_e2e.py, the scan allowed away, as
    test_hostile_role_e2e's every-name case), a proposer writing `steps` (one an iteration), run
    in the sandbox; the iterations."""
    from tests.fake_target.pyserve import hostile
    from tests.security.test_hostile_wave3_e2e import SCAN_OFF, TAG, target

    monkeypatch.delenv("KOPT_FAKE_GPUS", raising=False)
    monkeypatch.delenv("KOPT_ROOT", raising=False)
    folder = RUNS / f"s31h-proposer-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    try:
        proposer = folder / "proposer.py"
        pyserve = str(Path(hostile.__file__).resolve().parent)
        proposer.write_text(PROPOSER.format(pyserve=pyserve, steps=steps))
        repo, root = target(tmp_path, SCAN_OFF)
        toml = (repo / "kopt.toml").read_text()
        old = json.dumps(f"{sys.executable} {Path(pyserve) / 'proposer.py'}")
        assert old in toml
        (repo / "kopt.toml").write_text(toml.replace(old, json.dumps(f"{sys.executable} {proposer}")))
        git(repo, "commit", "-qam", "this review's proposer")
        assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", TAG]) == 0
        assert kopt(["--root", str(root), "run", TAG, "--foreground", "--max-iters", str(len(steps))]) == 0
        with Workspace(root, TAG).open_store(readonly=True) as s:
            its = [s.iteration(v) for v in range(1, len(steps) + 1)]
        assert all(it is not None for it in its)
        return its
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _why(it) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    return it.status, str((it.record.get("decision") or {}).get("reason"))[:600]


@pytest.mark.slow
@NEEDS_BWRAP
def test_e2e_a_kept_tree_cannot_tell_its_role_from_the_iteration(tmp_path, monkeypatch):
    """Found in this review, failing at d251e23 (v2 kept at -81%, its confirmation in fresh
    copies and the OS's accounting agreeing), passing since b507e2a (`log_dir`).
    tests/security/test_hostile_role_e2e.py told by the iteration instead of a name: v1, the
    honest ~1.9x, does BEST's old work twice more per call wherever its server's log is not
    under logs/v1/ (v2's decision and v2's confirmation copies); v2 changes one constant ("1" to
    "2"), no work."""
    code = AS_BEST_BY_VERSION.replace("@V@", "1")
    v1, v2 = _pyserve(tmp_path, monkeypatch, [("honest", code), ("constant", '_MINE = "1"', '_MINE = "2"')])
    assert v1.status == "keep", _why(v1)
    assert v2.status not in KEPT, _why(v2)


@pytest.mark.slow
@NEEDS_BWRAP
def test_e2e_a_kept_tree_armed_through_the_shared_bytecode_cache_buys_no_keep(tmp_path, monkeypatch):
    """Attack (open with or without the log fix). Every confined run gets kopt's shared library
    bytecode bound read-only over its bytecode prefix, one bind per complete unit (a
    site-packages package), and a unit becomes complete when any run imported it (`harvest`
    takes the names a run compiled). So it is state that persists across runs, that candidates
    grow at will, and that every later process sees, in the copies too: a switch. v1 (the honest
    gain) is slow once package `iniconfig`'s bytecode is bound; v2 (thrown away: a tie) only
    imports iniconfig, which arms it; v3 changes one constant (its switch is now `mdurl`), no
    work: in v3's decision, in its confirmation's fresh copies and in the OS's accounting, v1 as
    BEST is slow and v3 is kept. The switch could be flipped as well by any run at all between
    v1's keep and v3 (a failed candidate, a repair)."""
    monkeypatch.setenv("KOPT_BYTECODE_CACHE", str(tmp_path / "bytecode"))  # none of the session's units
    code = AS_BEST_WHEN_ARMED.replace("@U@", "iniconfig")
    steps = [("honest", code), ("import", "iniconfig"), ("constant", '_ARM = "iniconfig"', '_ARM = "mdurl"')]
    v1, v2, v3 = _pyserve(tmp_path, monkeypatch, steps)
    assert v1.status == "keep", _why(v1)
    assert v3.status not in KEPT, (_why(v2), _why(v3))


# -- 5. what the copies cost an honest run ---------------------------------------------------------


def test_a_failed_profile_keeps_the_profilers_own_words(fake_env, tmp_path, monkeypatch, driven_clock, hostile_ncu):
    """Honest run (a regression of b9af9e3). ncu writes its messages (==ERROR==, "No kernels
    were profiled") into its --log-file, in the profile's output folder. Before the copies that
    folder was profiles/vN/<side>/ and stayed after a failure; now it is the copy's `out`, moved
    there only by `ProfiledTree.finish` on success and removed with the copy otherwise: the
    record's reason says "exit code 9" and the one line that says why is gone."""
    v1 = _do("speed['small'] = speed['large'] = 0.8; k['ncu_fail'] = 'ERR_NVGPUCTRPERM: no permission (s31h)'; ")
    ws = _run(fake_env, tmp_path, monkeypatch, "e", [v1], hostile_ncu)
    r1 = record(ws, 1)
    assert "profiler_failed" in r1["decision"]["flags"], r1["decision"]
    needle = "==ERROR== ERR_NVGPUCTRPERM"
    said = "ERR_NVGPUCTRPERM: no permission" in json.dumps(r1["profile"])
    kept = [p for p in (*ws.profiles.rglob("*"), *ws.logs.rglob("*")) if p.is_file() and needle in p.read_text()]
    assert said or kept, (r1["profile"], sorted(str(p.relative_to(ws.dir)) for p in ws.profiles.rglob("*")))


def test_unconfined_a_profile_cannot_change_what_is_committed(
    fake_env, tmp_path, monkeypatch, driven_clock, hostile_ncu
):
    """Attack, unconfined (--no-sandbox). Before the copies each profile ran in cand/ and
    `check_after_run` put back (and failed) a changed tracked file. A profile now runs in a copy
    and nothing looks at cand/ after it; unconfined, the profiled process finds cand/ through
    KOPT_WORKSPACE and rewrites a tracked file. When the profile pair confirms the keep (best is
    the baseline's tree: no looks follow) the commit stages cand/ as it now is: code no decision,
    profile or scan saw (here: v1's slowdown in every closer profile, planted after its keep was
    measured) lands in BEST. Now the tree a profile came from is checked after it when unconfined
    (`ProfiledTree.after`): the change is put back and the profile fails (the keep goes to review,
    refused by the default policy)."""
    v1 = _do("speed['small'] = speed['large'] = 0.8; k['ncu_plant'] = True; ")
    ws = _run(fake_env, tmp_path, monkeypatch, "u", [v1], hostile_ncu, no_sandbox=True)
    r1 = record(ws, 1)
    if r1["status"] != "keep":  # the profile's change to cand/ caught: put back, and the keep refused
        assert "modified tracked file(s) in cand/" in r1["decision"]["reason"], r1["decision"]
        return
    committed = json.loads(
        subprocess.run(
            ["git", "show", f"{r1['commit']}:kernel.json"], cwd=ws.best, capture_output=True, text=True, check=True
        ).stdout
    )
    assert "ncu_slow_closer" not in committed, committed
    assert _tree(ws, r1["commit"]) == r1["profile"]["taken"]["trees"]["cand"]
