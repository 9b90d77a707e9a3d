"""Faulty or hostile proposers: time-out, no change, deleting files, editing protected files or
the config, touching `.git`, committing on its own, writing into best/, planting git hooks,
leaving untracked junk, a lying timer (results more than `suspicious_speedup` times faster),
results faster than the roofline floor. Each is rejected or sent to review with its reason,
and BEST_COMMIT, best/ and the frozen config are preserved; the run goes on to a keep."""

from __future__ import annotations

import os

from kopt_supervisor.engine import api
from kopt_supervisor.engine.daemon import run_engine
from tests.conftest import git
from tests.reliability.helpers import FAST, check_invariants, events, init, iterations

GIT_AS_AGENT = "['git', '-c', 'user.name=a', '-c', 'user.email=a@b'"
GAIN = "speed['small'] *= 0.95; speed['large'] *= 0.95; json.dump(k, open('kernel.json', 'w'))"
HOOKS = (
    "d = subprocess.run(['git', 'rev-parse', '--git-common-dir'], capture_output=True, text=True).stdout.strip(); "
    "[(open(f'{d}/hooks/{h}', 'w').write('#!/bin/sh\\ntouch ' + os.environ['KOPT_WORKSPACE'] + '/../HOOK_RAN\\n'), "
    "os.chmod(f'{d}/hooks/{h}', 0o755)) for h in ('post-commit', 'post-checkout', 'pre-commit')]; "
    "subprocess.run(['git', 'config', 'core.fsmonitor', f'{d}/hooks/post-checkout'], check=True); " + GAIN
)

# (proposer action, expected status, expected words in the reason)
FAULTS = [
    ("hang_proposer", "fail_propose", "proposer timed out after 1 s"),
    ("nochange", "fail_propose", "the proposer changed nothing"),
    ("do:os.remove('bench.py')", "fail_protected", "the candidate changes protected file(s): bench.py"),
    ("do:open('kopt.toml', 'a').write('# tuned\\n')", "fail_protected", "protected file(s): kopt.toml"),
    (
        "do:open(os.environ['KOPT_WORKSPACE'] + '/kopt.toml', 'a').write('# looser rules\\n'); sys.exit(1)",
        "fail_protected",
        "the proposer edited the run's frozen config",
    ),
    ("do:os.remove('.git'); " + GAIN, "fail_protected", "the proposer removed or replaced cand/.git"),
    (
        f"do:subprocess.run({GIT_AS_AGENT}, '-C', '../best', 'commit', '-q', '--allow-empty', '-m', 'x'], check=True)",
        "fail_protected",
        "the proposer changed best/ or the run's branch",
    ),
    (
        "do:open('../best/json.py', 'w').write('raise SystemExit(9)'); " + GAIN.replace("0.95", "1.05"),
        "regression",
        "slower",
    ),
    ("commit", "fail_propose", "the proposer made commits of its own"),
    (
        "do:open('junk.tmp', 'w').write('x'); open('json.py', 'w').write('')",
        "fail_protected",
        "modules shadowing importable ones: json (json.py)",
    ),
    # only a new file, but the tune params file: timed; a tie, or (the whole suite loading the
    # machine) a sub-1% "gain" that goes to review and the policy rejects: never kept
    ("do:open('tuned.json', 'w').write('{}')", "tie|rejected", ""),
    ("knob:fast=10", "rejected", "10.0x faster, more than the suspicious_speedup of 3x"),
    ("knob:fast=2", "rejected", "roofline floor"),
    ("do:" + HOOKS, "keep", ""),
]


def test_hostile_proposers_are_caught_and_the_run_survives(fake_env):
    """Unconfined (--no-sandbox), every hostile edit is possible: kopt's checks after the
    proposal catch each one (tests/security/ tries the same under the sandbox, which
    prevents most of them in the first place)."""
    script = [a for a, _, _ in FAULTS]
    repo, root = fake_env(
        script,
        toml_replace={
            **FAST,
            'kind = "command"': 'kind = "command"\nrepair_attempts = 0',
            'proposer.py"\ntimeout_s = 20': 'proposer.py"\ntimeout_s = 1',
            "review_timeout_s = 2": "review_timeout_s = 0.2",
        },
        extra_toml='\n[stop]\nconsecutive_failures = 50\n\n[roofline]\nbytes = "n * 65800"\ngpu = "h100-sxm"\n'
        '\n[propose.tune]\nparams = "tuned.json"\n',
    )
    ws = init(repo, root)
    base = git(repo, "rev-parse", "HEAD")
    frozen = ws.config_path.read_bytes()

    assert run_engine(ws, max_iters=len(script), no_sandbox=True) == 0

    its = iterations(ws)
    assert len(its) == len(script) + 1
    small_gains = 0
    for (action, status, words), it in zip(FAULTS, its[1:], strict=False):
        reason = it.record["decision"]["reason"]
        assert it.status in status.split("|") and words in reason, (action[:40], it.status, reason)
        if "|" in status and it.status == "rejected":
            assert "smaller than 1%" in reason, (action[:40], reason)
            small_gains += 1
        if status != "keep":
            assert it.commit is None and it.best_commit_before == base, action
    keep = its[-1]
    assert keep.best_commit_before == base and git(repo, "rev-parse", "kopt/t") == keep.commit
    assert git(repo, "rev-parse", "kopt/t~1") == base  # the agent's own commits never reached the branch
    # the suspicious candidates went to review first, then the policy rejected them
    assert sum("is borderline" in m for m in events(ws, "review")) == 2 + small_gains
    assert "suspicious_speedup" in its[12].record["decision"]["flags"]
    # the frozen config is back as it was; no planted hook ever ran in kopt's git calls
    assert ws.config_path.read_bytes() == frozen
    hooks = git(repo, "rev-parse", "--absolute-git-dir")
    assert os.access(f"{hooks}/hooks/post-checkout", os.X_OK)  # planted, and live for plain git
    assert git(repo, "config", "core.fsmonitor").endswith("post-checkout")
    assert not (root / "HOOK_RAN").exists()
    # a module planted in best/ (it would shadow the bench's `import json` there) was wiped first
    assert any("removed what the proposer left in best/: json.py" in m for m in events(ws, "tamper"))
    assert "json.py" not in git(ws.best, "status", "--porcelain", "--ignored")
    assert api.status(ws)["keeps"] == 1
    check_invariants(ws, repo)
