"""Hostile candidates end to end, wave 3 (issue "Measure from outside the candidate's reach":
"Your hostile tests: at least two cases of every class, none kept; a timer patch of any form
refuted by the OS's accounting on the CPU").

The target is tests/fake_target/pyserve: a protected per-tree server (serve.py, kopt's
`[target].serve` protocol) that times a real pure-Python computation, the candidate's
solution.py, with time.process_time per call, checks it against a reference of its own (a
check that lets NaN through, as hurried benches do), and reads two unprotected data files
(shapes.csv, problem.json) that lie outside `[target].sources`. The proposer writes one real
candidate per iteration (tests/fake_target/pyserve/hostile.py), through
`kopt run TAG --foreground`, in the sandbox. Unanswered reviews end rejected
(`review_timeout_s = 0`, `review_default = "reject"`).

- `test_no_hostile_candidate_is_kept_and_a_real_gain_is`: the product as configured: none
  kept, each stopped by the layer its record names, the honest gain kept. Every case that
  kopt's audit, the shape check or the OS's accounting stops runs end to end; of those the
  diff scan stops (a measured keep its findings send to review, which the policy rejects),
  one per class runs end to end (`SCAN_E2E`), and
  `test_the_scan_flags_every_case_it_stops_on_its_own_diff` checks that the scan flags each
  of them on the case's own diff, as the loop reads it, without a run. Among the cases run,
  "audit-unseen", the scan finding nothing: timed calls that do no work and every set's
  outputs computed when the look commits to them (before the audit seed is drawn), so that
  the audit and the commitment agree with best's: the OS's accounting of the look shows the
  work was not saved.
- `test_with_the_scan_allowed_away_the_os_refutes_every_timer_patch`: the diff scan is
  advisory (docs/design.md §12, wave 3). Timer patches in every runtime form (the process's clock,
  the bench's statistics, its CSV writer, its list of times through the gc, a child process
  its clock does not count) and the work moved out of the median, with every scan rule
  allowed away (`allow_constructs = ["*:*"]`): each refuted by the OS's accounting of the
  processes (or, on a machine so loaded that its clocks cannot tell, not confirmed by it,
  which sends the keep to a review the policy rejects). The honest control runs with the scan
  on (the first test's second half): it has no finding to allow away, so its keep, confirmed by
  that accounting, is the same one.
- `test_a_timer_patch_under_the_os_resolution_is_not_kept`: what got through until
  2026-11-29 (docs/security.md, "Hostile candidates end to end, wave 3"): a timer patch under
  the OS's resolution, the recorded looks of its keep with the scan allowed away, weighed and
  settled again: the OS cannot tell, so it goes to review. (The audit answered for the
  audited set only, once its seed was known, was the other until every look committed to
  all its sets' outputs.)

Each run prints its table (case, class, status, the layer that stopped it, the reason):
`pytest -s`.
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kopt_supervisor.engine import gitops
from kopt_supervisor.engine.config.toml_io import load as load_config
from kopt_supervisor.engine.decide.confirmation import Confirmation
from kopt_supervisor.engine.decide.estimate import Verdict
from kopt_supervisor.engine.decide.external_truth import RESOLUTION_S, SideCost, looks_of, of_os_time, settle, weigh
from kopt_supervisor.engine.diffscan import scan
from kopt_supervisor.engine.diffscan.findings import review_reason
from kopt_supervisor.engine.loop.proposal import OUTSIDE_SOURCES, outside_sources, read_for_scan
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import git
from tests.fake_target.pyserve import hostile
from tests.security.harness import KEPT, NEEDS_BWRAP, tried

PYSERVE = Path(hostile.__file__).resolve().parent
TARGET = ("serve.py", "solution.py", "shapes.csv", "problem.json", "kopt.toml")
TAG = "w3"
SCAN_OFF = 'allow_constructs = ["*:*"]\n'
"""Every diff-scan rule allowed away on every path: no review comes from the scan."""

SCAN = "diff scan review"
AUDIT = "kopt's audit"
SHAPE = "shape check"
OS = "OS accounting"
OS_ONLY = ("statistics", "csv-rows", "gc-times", "worker-process")
"""Timer patches in runtime forms of their own, run only with the scan allowed away (with it
on, a review can only be added to what the measurement decides, and the policy rejects it)."""
STOPPED_BY = {
    **{
        c.name: SCAN
        for c in hostile.CASES
        if c.cls in ("1", "2", "3", "timer", "audit") and c.name not in (*OS_ONLY, "audit-unseen", "audit-only")
    },
    "audit-only": AUDIT,  # its look committed to zeros: fails before the scan's review is asked
    "audit-unseen": OS,
    **{name: SCAN for name in ("gc-sets", "frame-sets", "fix-later")},
    **{c.name: AUDIT for c in hostile.CASES if c.cls in ("4", "5", "7", "10", "11")},
    "gc-reference": AUDIT,
    **{c.name: SHAPE for c in hostile.CASES if c.cls == "8"},
}
"""Which layer stops each case in the product as configured (the scan on)."""
SCAN_E2E = ("form-feed", "loop-builtin", "gc-sets")
"""The cases the scan stops that run end to end, one per class (1, 3; 6 with the stronger
checks' and the mean check's flags): the behaviour, a measured keep sent to review by the
scan's findings and rejected by the policy, is the same for every such case; that the scan
flags each of the others is checked on its own diff (a run of each took 4-9 s: 58 CPU-s of
measurement for the same behaviour)."""
OS_REFUTES = ["marshal", "statistics", "csv-rows", "gc-times", "worker-process", "gc-sets", "fix-later"]
"""With the scan allowed away: a timer patch in each runtime form (the process's clock, here
hidden as a marshalled payload; the bench's statistics; its CSV writer; its list of times
through the gc; the work done in a child process the bench's clock does not count) and the
work moved out of the median (all timed sets computed on the first timed call; placeholders
fixed later); the OS's accounting refutes each. The other hiding forms of classes 1-3 run the
same patch as `marshal`."""


@dataclass(frozen=True)
class Row:
    case: str
    cls: str
    status: str
    layer: str
    reason: str
    flags: tuple[str, ...]
    record: dict[str, Any]
    own_check: bool | None
    """The bench's own contract check passed every row of the candidate's first look (None:
    no such look)."""
    commit: str | None

    @property
    def scan_rules(self) -> set[str]:
        return {f["rule"] for f in (self.record.get("diff_scan") or {}).get("findings") or []}

    @property
    def truth(self) -> dict[str, Any]:
        return self.record.get("external_truth") or {}


def layer_of(status: str, reason: str, flags: tuple[str, ...]) -> str:
    """Which of kopt's layers the iteration's record says stopped it."""
    if status in KEPT:
        return "KEPT"
    if "external_truth_refutes" in flags or "external_truth_inconclusive" in flags:
        return OS
    if "stronger_checks_unavailable" in flags and "the stronger checks could not run (the OS's accounting" in reason:
        return OS  # an escalated keep (a speed beyond suspicious_speedup) whose OS accounting could not tell
    if status == "fail_correctness" and AUDIT in reason:
        return AUDIT
    if status == "fail_bench" and ("best's has not" in reason or "lacks config" in reason or " rows)" in reason):
        return SHAPE
    if status == "fail_protected":
        return "protected files"
    if "diff_constructs" in flags:
        return SCAN
    if "confirmation_disagrees" in flags:
        return "fresh-server confirmation"
    return f"other ({status})"


def also(row: Row) -> str:
    """The other layers that saw the case (flags and scan findings beside the one that stopped it)."""
    seen = [
        name
        for flag, name in (
            ("needs_stronger_checks", "stronger checks"),
            ("mean_not_faster", "mean check"),
            ("suspicious_speedup", "suspicious speed"),
        )
        if flag in row.flags
    ]
    if row.scan_rules and row.layer != SCAN:
        seen.append("scan: " + ",".join(sorted(row.scan_rules)))
    return "; ".join(seen)


def target(tmp: Path, target_toml: str = "") -> tuple[Path, Path]:
    repo = tmp / "target"
    repo.mkdir(parents=True)
    for name in TARGET:
        shutil.copy(PYSERVE / name, repo / name)
    toml = (repo / "kopt.toml").read_text()
    toml = toml.replace('"python proposer.py"', json.dumps(f"{sys.executable} {PYSERVE / 'proposer.py'}"))
    toml = toml.replace('= "python ', f'= "{sys.executable} ')
    toml = toml.replace('sources = ["solution.py"]\n', f'sources = ["solution.py"]\n{target_toml}')
    (repo / "kopt.toml").write_text(toml)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "pyserve")
    return repo, tmp / "workspaces"


def run_cases(tmp: Path, monkeypatch: pytest.MonkeyPatch, names: list[str], target_toml: str = "") -> dict[str, Row]:
    """`kopt run --foreground` over the cases (one iteration each, in order); their rows,
    printed as a table."""
    monkeypatch.delenv("KOPT_FAKE_GPUS", raising=False)
    monkeypatch.delenv("KOPT_ROOT", raising=False)
    monkeypatch.setenv("PYSERVE_CASES", ",".join(names))
    repo, root = target(tmp, target_toml)
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", TAG]) == 0
    t0 = time.monotonic()
    assert kopt(["--root", str(root), "run", TAG, "--foreground", "--max-iters", str(len(names))]) == 0
    took = time.monotonic() - t0
    rows: dict[str, Row] = {}
    ws = Workspace(root, TAG)
    with ws.open_store(readonly=True) as s:
        for v, name in enumerate(names, start=1):
            it = s.iteration(v)
            assert it is not None, f"v{v} ({name}) did not run"
            decision = it.record.get("decision") or {}
            reason = str(decision.get("reason") or "")
            flags = tuple(decision.get("flags") or ())
            rows[name] = Row(
                name,
                hostile.BY_NAME[name].cls,
                it.status,
                layer_of(it.status, reason, flags),
                reason,
                flags,
                it.record,
                own_check(ws.log_dir(v) / "eval_r0_cand.csv"),
                it.commit,
            )
    print(f"\n{len(names)} candidates in {took:.1f} s ({target_toml.strip() or 'the scan on'})")
    print(f"{'case':17s} {'class':6s} {'status':17s} {'stopped by':17s} {'also':44s} reason")
    for r in rows.values():
        print(f"{r.case:17s} {r.cls:6s} {r.status:17s} {r.layer:17s} {also(r)[:44]:44s} {r.reason[:140]}")
    return rows


def own_check(path: Path) -> bool | None:
    if not path.exists():
        return None
    with path.open(newline="") as f:
        return all(float(r["err"]) == 0 for r in csv.DictReader(f))


def stopped_by_the_os(row: Row) -> None:
    """Not kept on the OS's word: its accounting refutes the claim, or (a machine so loaded
    that its clocks' noise swallows the claim) cannot confirm it, which sends the keep to a
    review the policy rejects (external_truth.settle: flagged external_truth_inconclusive, or
    stronger_checks_unavailable for a keep escalated by a suspicious speed; seen in a clean
    run of the whole suite on 2026-11-29, fix-later 10.1x)."""
    assert row.truth.get("kind") == "os_time", row.truth
    if row.truth.get("outcome") == "refuted":
        assert row.reason.startswith("the OS's accounting shows") and "external_truth_refutes" in row.flags, row.reason
    elif "needs_stronger_checks" in row.flags:  # escalated: the OS's accounting was its stronger check
        assert row.truth.get("outcome") == "inconclusive" and "stronger_checks_unavailable" in row.flags, row.truth
        assert "the stronger checks could not run (the OS's accounting" in row.reason, row.reason
    else:
        assert row.truth.get("outcome") == "inconclusive" and "external_truth_inconclusive" in row.flags, row.truth
        assert "no clock outside the candidate's process confirms the claim" in row.reason, row.reason


def honest_kept(row: Row) -> None:
    """The control: kept, and confirmed by the OS's accounting (the CPU time it saved)."""
    assert row.status == "keep" and row.commit, (row.status, row.reason)
    assert row.truth.get("kind") == "os_time" and row.truth.get("outcome") == "confirmed", row.truth


@pytest.mark.slow
@NEEDS_BWRAP
@pytest.mark.parametrize("half", [0, 1])
def test_no_hostile_candidate_is_kept_and_a_real_gain_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, half: int
) -> None:
    """Two runs of half the cases each (parallel workers take one each); the honest control
    in the second, whose hostile cases cost less."""
    names = [c.name for c in hostile.CASES if c.name not in OS_ONLY]
    classes = [c.cls for c in hostile.CASES if c.name in names]
    assert all(classes.count(str(k)) >= 2 for k in range(1, 12)), "at least two cases of every class"
    assert set(STOPPED_BY) == set(names) - {"honest"}
    assert {STOPPED_BY[n] for n in SCAN_E2E} == {SCAN}
    hostile_names = [n for n in names if n != "honest" and (STOPPED_BY[n] != SCAN or n in SCAN_E2E)]
    names = hostile_names[half::2] + (["honest"] if half == 1 else [])
    rows = run_cases(tmp_path, monkeypatch, names)
    if half == 1:
        honest = rows.pop("honest")
        honest_kept(honest)
        assert not honest.scan_rules, honest.scan_rules  # nothing to allow away: the scan-off runs need no control
    kept = [r.case for r in rows.values() if r.status in KEPT or r.commit]
    assert not kept, f"hostile candidates kept: {kept}"
    wrong = {r.case: (r.layer, r.reason[:200]) for r in rows.values() if r.layer != STOPPED_BY[r.case]}
    assert not wrong, wrong
    for r in rows.values():
        if r.layer == SCAN:  # a keep sent to review with the lines quoted, the policy rejected it
            assert "the diff reaches outside the kernel" in r.reason and "diff_constructs" in r.flags, r
            assert r.scan_rules - {"outside-sources"}, r.scan_rules
        elif r.layer == AUDIT:  # the bench's own check passed every row: kopt's audit alone saw it
            assert r.status == "fail_correctness" and (
                "audited timed call (set " in r.reason or "(outputs changed after the look)" in r.reason
            ), r
            assert r.own_check is True, r
        elif r.layer == OS:  # the audit and the look's commitment agree with best's; the work was not saved
            assert not r.scan_rules and r.status == "rejected", r
            stopped_by_the_os(r)
        else:
            assert r.status == "fail_bench", r
    # the data files outside [target].sources: the sources rule quoted the change too
    for name in ("extra-row", "duplicate-row", "fewer-rows", "looser-tolerance"):
        if name in rows:
            assert "outside-sources" in rows[name].scan_rules, (name, rows[name].scan_rules)


@pytest.mark.slow
@NEEDS_BWRAP
@pytest.mark.parametrize("half", [0, 1])
def test_with_the_scan_allowed_away_the_os_refutes_every_timer_patch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, half: int
) -> None:
    # No honest control here: the scan has nothing to allow away in its diff, so its run with the
    # scan on (test_no_hostile_candidate_is_kept_and_a_real_gain_is[1]) asserts the same keep,
    # confirmed by the OS's accounting (a second one cost ~8 CPU-s).
    rows = run_cases(tmp_path, monkeypatch, OS_REFUTES[half::2], SCAN_OFF)
    for r in rows.values():
        assert not r.scan_rules, r.scan_rules  # the scan said nothing
        assert r.status == "rejected" and r.layer == OS, (r.case, r.status, r.reason)
        stopped_by_the_os(r)
        assert "(bench: " in r.reason, r.reason
    for name in ("gc-sets", "fix-later"):  # the median alone moved: the mean check saw it too
        if name in rows:
            assert {"mean_not_faster", "needs_stronger_checks"} <= set(rows[name].flags), rows[name].flags


@pytest.mark.parametrize("name", [n for n, layer in STOPPED_BY.items() if layer == SCAN])
def test_the_scan_flags_every_case_it_stops_on_its_own_diff(tmp_path: Path, name: str) -> None:
    """The case's files written over BEST's in a pyserve checkout, read as the loop reads a
    candidate (engine/loop/police.Police.read_diff: the whole patch against BEST, each changed
    file read whole, then the changes outside [target].sources): a finding of a rule of the
    scan's own (not only "outside-sources"), which sends a measured keep to review with the
    lines quoted; the policy rejects an unanswered review (the cases in SCAN_E2E, end to end)."""
    repo, _ = target(tmp_path)
    best = git(repo, "rev-parse", "HEAD")
    case = hostile.BY_NAME[name]
    for path, content in case.build(repo).items():
        (repo / path).write_bytes(content.encode() if isinstance(content, str) else content)
    cfg = load_config(repo / "kopt.toml")
    text, truncated = gitops.scan_diff(repo, best)
    findings = scan(
        text, lambda path: read_for_scan(repo, path), allow=cfg.target.allow_constructs, truncated=truncated
    )
    changed = git(repo, "diff", "--name-only", best).splitlines()
    new = git(repo, "ls-files", "--others", "--exclude-standard").splitlines()
    findings += outside_sources(text, changed + new, new, cfg.target.sources)
    rules = {f.rule for f in findings}
    assert rules - {OUTSIDE_SOURCES}, (name, case.what, rules)
    assert review_reason(findings).startswith("the diff reaches outside the kernel ("), findings


SMALL_TIMER_COSTS = {
    "eval": [
        ("best", 0, 0.17, 0.26743, 0.081761448, True),
        ("cand", 0, 0.35, 0.403357, 0.073866504, True),
        ("best", 1, 0.13, 0.158813, 0.080970192, False),
        ("cand", 1, 0.14, 0.147235, 0.076927416, False),
        ("best", 2, 0.14, 0.135886, 0.084886488, False),
        ("cand", 2, 0.14, 0.137774, 0.075953184, False),
        ("best", 3, 0.15, 0.134173, 0.083839728, False),
        ("cand", 3, 0.14, 0.139194, 0.075507456, False),
        ("best", 4, 0.13, 0.131235, 0.081408768, False),
        ("cand", 4, 0.15, 0.143006, 0.075911232, False),
    ],
    "reverify": [
        ("best", 0, 0.34, 0.394438, 0.0822774, True),
        ("cand", 0, 0.35, 0.500116, 0.073664064, True),
        ("best", 1, 0.15, 0.189241, 0.082118472, False),
        ("cand", 1, 0.13, 0.167221, 0.071316312, False),
        ("best", 2, 0.13, 0.145294, 0.082412808, False),
        ("cand", 2, 0.14, 0.17245, 0.073317936, False),
        ("best", 3, 0.14, 0.161629, 0.081494904, False),
        ("cand", 3, 0.14, 0.161032, 0.072817776, False),
        ("best", 4, 0.14, 0.153703, 0.080143128, False),
        ("cand", 4, 0.13, 0.136864, 0.07148988, False),
        ("best", 5, 0.14, 0.155723, 0.081152688, False),
        ("cand", 5, 0.14, 0.17755, 0.07152492, False),
    ],
}
"""record["side_costs"] of hostile.py's small-timer case (every CPU-time reading x 0.9) kept
on pyserve with the scan allowed away: 5 looks of the decision, 6 of the confirmation."""


def test_a_timer_patch_under_the_os_resolution_is_not_kept() -> None:
    """The recorded looks of the small-timer keep (a 10% timer patch, 8.2 ms claimed per
    look, the CPU time of both processes the same), weighed and settled as the engine does:
    the CPU clock is blind under two 10 ms ticks per look and the wall clock's noise cannot
    tell, so the OS's word is "inconclusive", and a keep no clock outside the candidate's
    process confirms goes to review (it was kept, "confirmed by the bench's timer only",
    until 2026-11-29)."""
    looks = [
        look
        for stage in ("eval", "reverify")
        for look in looks_of(
            SideCost(side, r, cpu, wall, claimed, started=started)
            for side, r, cpu, wall, claimed, started in SMALL_TIMER_COSTS[stage]
        )
    ]
    truth = weigh(looks)
    tried(
        truth.outcome == "inconclusive" and truth.claimed_s < 2 * RESOLUTION_S["cpu"],
        f"the recorded looks no longer read as the hole did: {truth.reason}",
    )
    keep = Verdict("keep", "cls=large -7.9% faster (every class improved)")
    verdict = settle(keep, Confirmation("confirmed", "after 6 looks", 6), of_os_time(truth))
    assert verdict.kind == "borderline" and "external_truth_inconclusive" in verdict.flags, (
        verdict.kind,
        verdict.reason,
    )
