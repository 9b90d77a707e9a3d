"""Hostile `command` proposers, each run the way the loop runs one (runner.command.run in cand/ with
the KOPT_* environment and sandbox.for_proposer), under real bubblewrap. Each ends with kopt's
state unchanged: run.db, kopt.toml, memory/, best/, the branch, packed-refs."""

from __future__ import annotations

import sysconfig
import time
from pathlib import Path

import psutil

from kopt_supervisor.engine.runner import process_tree

from .conftest import NEEDS_BWRAP, TAG, Run, git

pytestmark = NEEDS_BWRAP


def _gone(pids: set[int]) -> list[int]:
    """The pids still alive (zombies count as gone: they run nothing)."""
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def test_setsid_nohup_and_double_fork_die_with_the_proposal(run_layout: Run):
    r = run_layout
    before, branch = r.snapshot(), r.branch_sha()
    late = r.out / "late"  # writable to the proposer: a survivor would write here
    script = f"""
setsid nohup sh -c 'sleep 1.5; echo pwned > {r.best}/bench.py; echo alive > {late}' >/dev/null 2>&1 &
( ( sleep 1.5; echo alive2 >> {late} ) & ) &
nohup sleep 30 >/dev/null 2>&1 &
echo hypothesis > "$KOPT_PLAN"
sleep 0.8
exit 0
"""
    seen: set[int] = set()
    pgid: list[int] = []

    def watch() -> None:  # what the loop's poll sees while the proposal runs
        if pgid:
            seen.update(p.pid for p in process_tree(pgid[0]))

    res = r.run(script, r.proposer(), name="proposer", poll=watch, poll_interval_s=0.1, on_start=pgid.append)
    assert res.ok, res.why()
    assert len(seen) >= 5, f"the poll should have seen the setsid'd and forked processes: {seen}"
    assert _gone(seen) == [], "processes outlived the proposal"
    time.sleep(2.0)  # past the survivors' sleep
    assert not late.exists()
    assert r.snapshot() == before and r.branch_sha() == branch
    assert r.plan.read_text().strip() == "hypothesis"


def test_workspace_is_invisible_except_cand_prompt_plan_and_output(run_layout: Run):
    r = run_layout
    before = r.snapshot()
    script = r.py(f"""
import os, json
ws = os.environ["KOPT_WORKSPACE"]
seen = {{}}
for name in ("run.db", "kopt.toml", "memory/v0.json", "plans/v0_plan.md", "best/bench.py", "logs/v0"):
    seen[name] = os.path.exists(os.path.join(ws, name))
listing = sorted(os.listdir(ws))
tries = {{}}
for name in ("run.db", "kopt.toml", "memory/v1.json", "best/bench.py", "engine.lock"):
    try:
        with open(os.path.join(ws, name), "w") as f:
            f.write("forged")
        tries[name] = "written"
    except OSError as e:
        tries[name] = e.strerror
prompt = open(os.environ["KOPT_PROMPT"]).read()
open(os.environ["KOPT_PLAN"], "w").write("my hypothesis\\ntarget_class: a\\n")
open("{r.out}/transcript.txt", "w").write("agent talk")
json.dump({{"seen": seen, "listing": listing, "tries": tries, "prompt": prompt}}, open("{r.out}/report.json", "w"))
""")
    res = r.run(script, r.proposer(), name="proposer")
    assert res.ok, res.why() + res.tail()
    import json

    report = json.loads((r.out / "report.json").read_text())
    assert not any(report["seen"].values()), report["seen"]
    assert report["listing"] == ["cand", "logs", "plans", "prompts"]
    assert all(v != "written" for v in report["tries"].values()), report["tries"]
    assert report["prompt"] == "# the rules\n"
    assert r.plan.read_text().startswith("my hypothesis")
    assert (r.out / "transcript.txt").read_text() == "agent talk"
    assert r.snapshot() == before
    assert not (r.ws / "memory" / "v1.json").exists()


def test_branch_refs_packed_refs_config_and_hooks_stay_read_only(run_layout: Run):
    r = run_layout
    before, branch = r.snapshot(), r.branch_sha()
    common = r.repo / ".git"
    script = f"""
export GIT_AUTHOR_NAME=evil GIT_AUTHOR_EMAIL=evil@x GIT_COMMITTER_NAME=evil GIT_COMMITTER_EMAIL=evil@x
other=$(git commit-tree -m evil "$(git write-tree)")
git update-ref refs/heads/kopt/{TAG} "$other" && echo MOVED-VIA-GIT
git branch -f kopt/{TAG} "$other" && echo MOVED-VIA-BRANCH
mkdir -p {common}/refs/heads/kopt && echo "$other" > {common}/refs/heads/kopt/{TAG} && echo WROTE-LOOSE-REF
echo "$other refs/heads/kopt/{TAG}" >> {common}/packed-refs && echo WROTE-PACKED-REFS
seen=$(git rev-parse --git-common-dir)
echo "$other refs/heads/kopt/{TAG}" >> "$seen/packed-refs" && echo PRIVATE-PACKED-REFS
printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> {common}/config && echo WROTE-CONFIG
echo 'touch /tmp/pwned' > {common}/hooks/post-checkout && echo WROTE-HOOK
echo "gitdir: /tmp/elsewhere" > .git && echo REPOINTED-DOTGIT
rm -f .git && echo REMOVED-DOTGIT
exit 0
"""
    res = r.run(script, r.proposer(), name="proposer")
    assert res.ok, res.why()
    out = res.stdout_path.read_text()
    # git, and a write through the path git names, work on the sandbox's private copy of the refs...
    assert "MOVED-VIA-GIT" in out and "PRIVATE-PACKED-REFS" in out
    for marker in ("WROTE", "REPOINTED", "REMOVED"):  # ...the real files are read-only
        assert marker not in out, out
    assert r.branch_sha() == branch
    assert r.snapshot() == before
    assert not (common / "hooks" / "post-checkout").exists()
    assert (r.cand / ".git").read_text().startswith("gitdir: ")


def test_git_status_diff_add_and_commit_work_in_cand_and_touch_nothing_of_the_repo(run_layout: Run):
    r = run_layout
    head, branch = git(r.cand, "rev-parse", "HEAD"), r.branch_sha()
    objects_before = sorted(p.name for p in (r.repo / ".git" / "objects").rglob("*") if p.is_file())
    script = f"""
set -e
echo '    return x * 2' >> kernel.py
echo 'NEW = 1' > helper.py
git status --short > {r.out}/status.txt
git diff > {r.out}/diff.txt
git add -A
git diff --cached --stat > {r.out}/cached.txt
git -c user.name=agent -c user.email=a@a commit -qm "agent's own commit"
git log --oneline -1 > {r.out}/log.txt
git status --short > {r.out}/status_after.txt
echo '# try' >> kernel.py
git stash -q && git stash list > {r.out}/stash.txt && git stash pop -q
git checkout -q -b agent-branch && git branch --show-current > {r.out}/branch.txt
"""
    res = r.run(script, r.proposer(), name="proposer")
    assert res.ok, res.why() + res.tail()
    assert "M kernel.py" in (r.out / "status.txt").read_text()
    assert "?? helper.py" in (r.out / "status.txt").read_text()
    assert "+    return x * 2" in (r.out / "diff.txt").read_text()
    assert "2 files changed" in (r.out / "cached.txt").read_text()
    assert "agent's own commit" in (r.out / "log.txt").read_text()
    assert (r.out / "status_after.txt").read_text() == ""
    assert "stash@{0}" in (r.out / "stash.txt").read_text()
    assert (r.out / "branch.txt").read_text().strip() == "agent-branch"
    # outside: the candidate is the worktree's content; HEAD, index, branch and objects untouched
    assert git(r.cand, "rev-parse", "HEAD") == head
    assert r.branch_sha() == branch
    assert git(r.cand, "diff", "--name-only") == "kernel.py"  # changed in the worktree
    assert git(r.cand, "diff", "--cached", "--name-only") == ""  # kopt's index: as kopt left it
    assert git(r.cand, "ls-files", "--others", "--exclude-standard") == "helper.py"
    assert sorted(p.name for p in (r.repo / ".git" / "objects").rglob("*") if p.is_file()) == objects_before
    assert git(r.repo, "for-each-ref", "--format=%(refname)") == f"refs/heads/kopt/{TAG}\nrefs/heads/main"
    git(r.cand, "add", "-A")  # kopt's own staging still works (its objects are its own)
    assert git(r.cand, "write-tree")


def test_a_pth_file_cannot_be_planted_in_site_packages(run_layout: Run):
    r = run_layout
    purelib = Path(sysconfig.get_paths()["purelib"])
    target = purelib / "kopt_evil.pth"
    script = (
        f'echo \'import os; os.environ["PWNED"]="1"\' > {target} && echo PLANTED; '
        f"echo x > {purelib}/sitecustomize.py && echo PLANTED2; exit 0"
    )
    for confine in (r.proposer(), r.bench(), r.proposer(writable=[str(purelib.parent)])):
        res = r.run(script, confine)
        assert res.ok
        assert "PLANTED" not in res.stdout_path.read_text()
        assert not target.exists() and not (purelib / "sitecustomize.py").exists()


def test_the_proposer_sees_no_process_outside_and_cannot_signal_kopt(run_layout: Run):
    import os
    import subprocess

    r = run_layout
    outside = subprocess.Popen(["sleep", "30"])
    try:
        script = f"""
kill -STOP {outside.pid} 2>/dev/null && echo STOPPED-BY-PID
kill -STOP {os.getpid()} 2>/dev/null && echo STOPPED-KOPT
[ -e /proc/{outside.pid}/cmdline ] && grep -q sleep /proc/{outside.pid}/cmdline && echo SEES-OUTSIDE
ps -e -o pid= | wc -l > {r.out}/count
exit 0
"""
        res = r.run(script, r.proposer())
        assert res.ok
        out = res.stdout_path.read_text()
        assert "STOPPED" not in out and "SEES-OUTSIDE" not in out
        assert psutil.Process(outside.pid).status() != psutil.STATUS_STOPPED
        assert psutil.Process(os.getpid()).status() != psutil.STATUS_STOPPED
        assert int((r.out / "count").read_text()) <= 6  # bwrap's init, sh, ps, wc: nothing of the host
    finally:
        outside.kill()
        outside.wait()


def test_a_writable_path_inside_the_workspace_or_git_dir_is_refused(run_layout: Run):
    import pytest

    from kopt_supervisor.engine import BadInput

    r = run_layout
    for bad in (r.ws / "run.db", r.ws, r.best, r.repo / ".git" / "refs", "relative/path", "/", "/tmp"):
        with pytest.raises(BadInput, match=r"\[propose\]\.writable"):
            r.proposer(writable=[str(bad)])
    link = r.tmp / "innocent"
    link.symlink_to(r.ws)
    with pytest.raises(BadInput, match="inside"):
        r.proposer(writable=[str(link)])


def test_the_agents_own_folders_are_writable_and_created(run_layout: Run):
    r = run_layout
    agent_home = r.tmp / "agent" / ".claude"  # what a preset names; missing: created
    res = r.run(
        f"echo session > {agent_home}/state.json && echo x > {r.tmp}/elsewhere",
        r.proposer(writable=[str(agent_home)], readable=[r.tmp]),
        name="proposer",
    )
    assert not res.ok  # the second write is outside: refused
    assert (agent_home / "state.json").read_text() == "session\n"
    assert not (r.tmp / "elsewhere").exists()
    assert "[propose].writable" in res.why()
