"""Issue 16, what a proposer plants for later: program-running settings in the target repo's
git config (run by kopt's own git calls, its keep commit included), a `.pth` in the bench
interpreter's site-packages, an output cache in /tmp for the bench to find, code hidden from
git (`.gitignore`, `.git/info/exclude`, a `__pycache__/*.pyc` beside an innocent source), a
module shadowing one the bench imports, links out of the tree.

Confined, the plants outside cand/ fail (the attack records each refusal) and those inside
are found by the tree inspection; unconfined, kopt's checks find what landed: its git runs
every program-running setting neutralized, the whole tree is inspected after the proposal.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.conftest import git
from tests.security import attacks
from tests.security.conftest import Factory
from tests.security.harness import NEEDS_BWRAP, NOT_KEPT, TAG, Hostile, tried

pytestmark = [NEEDS_BWRAP, pytest.mark.slow]

EVIL_SH = """#!/bin/sh
echo "$0 $*" >> {ran}
case "$1" in clean|smudge) exec cat ;; esac
exit 0
"""
HOOKS = (
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "post-checkout",
    "post-index-change",
    "reference-transaction",
    "pre-auto-gc",
    "post-rewrite",
    "post-merge",
)


def git_plant(h: Hostile) -> tuple[str, Path]:
    """Attack code that plants every program-running setting a repo config can carry (and
    hooks, and attributes that name filters and drivers), each pointing at a script that
    records that it ran; and the file it records into."""
    ran = h.proof / "ran"
    evil = h.proof / "evil.sh"
    evil.write_text(EVIL_SH.format(ran=ran))
    evil.chmod(0o755)
    hooks = h.proof / "hooks"
    hooks.mkdir()
    for name in HOOKS:
        (hooks / name).write_text(f"#!/bin/sh\necho hook-{name} >> {ran}\n")
        (hooks / name).chmod(0o755)
    included = h.proof / "included.cfg"
    included.write_text(f"[core]\n\tfsmonitor = {evil}\n[commit]\n\tgpgSign = true\n")
    cfg = textwrap.dedent(f"""
        [commit]
        \tgpgSign = true
        [tag]
        \tgpgSign = true
        [gpg]
        \tprogram = {evil}
        [gpg "ssh"]
        \tprogram = {evil}
        [core]
        \thooksPath = {hooks}
        \tfsmonitor = {evil}
        \teditor = {evil}
        \tpager = {evil}
        \tsshCommand = {evil}
        \taskPass = {evil}
        [sequence]
        \teditor = {evil}
        [diff]
        \texternal = {evil}
        [filter "evil"]
        \tclean = {evil} clean
        \tsmudge = {evil} smudge
        \tprocess = {evil} process
        [diff "evil"]
        \ttextconv = {evil}
        [merge "evil"]
        \tdriver = {evil} %O %A %B
        [credential]
        \thelper = {evil}
        [include]
        \tpath = {included}
    """)
    code = f"""
_common = subprocess.run(['git', 'rev-parse', '--git-common-dir'], capture_output=True, text=True).stdout.strip()
_common = os.path.abspath(_common) if _common else {str(h.repo / ".git")!r}
_steps = {{}}
for _name, _path, _text in [('config', os.path.join({str(h.repo / ".git")!r}, 'config'), {cfg!r}),
                            ('attributes', os.path.join({str(h.repo / ".git")!r}, 'info', 'attributes'),
                             '* filter=evil diff=evil merge=evil\\n'),
                            ('git config', None, None)] + [
        ('hook ' + _h, os.path.join({str(h.repo / ".git")!r}, 'hooks', _h), '#!/bin/sh\\necho hook-{{_h}} >> {ran}\\n')
        for _h in {HOOKS!r}]:
    try:
        if _path is None:
            subprocess.run(['git', 'config', 'core.fsmonitor', {str(evil)!r}], check=True, capture_output=True)
        else:
            os.makedirs(os.path.dirname(_path), exist_ok=True)
            with open(_path, 'a') as _f:
                _f.write(_text)
            os.chmod(_path, 0o755)
        _steps[_name] = 'ok'
    except Exception as _e:
        _steps[_name] = f'{{type(_e).__name__}}: {{_e}}'
with open({str(h.proof / "steps.json")!r}, 'w') as _f:
    json.dump(_steps, _f)
"""
    return "import json, os, subprocess\n" + code, ran


@pytest.mark.parametrize("no_sandbox", [False, True], ids=["confined", "unconfined"])
def test_programs_planted_in_the_repo_config_never_run_in_kopts_git(hostile: Factory, no_sandbox: bool) -> None:
    """A real gain plus the plant: kopt keeps and commits the gain, and none of the planted
    programs (signing, hooks, fsmonitor, filters, drivers, editors, pagers, credential and
    ssh helpers, an include) runs in any of kopt's git calls. Confined, the repo's git dir
    is read-only to the proposer; unconfined, the plant is live (a plain `git commit` in a
    copy of the repo runs it) and kopt's git neutralizes it."""
    h = hostile.fake([])
    code, ran = git_plant(h)
    h.set_script([{"name": "plant git programs", "exec": code + attacks.gain(0.9)}])
    before = h.baseline(no_sandbox=no_sandbox)
    config_before = (h.repo / ".git" / "config").read_bytes()
    assert h.session(1, no_sandbox=no_sandbox) == 0
    steps = json.loads((h.proof / "steps.json").read_text())
    if no_sandbox:
        tried(all(v == "ok" for v in steps.values()), f"the plant did not land: {steps}")
    else:
        assert all(v != "ok" for v in steps.values()), f"the sandbox let these through: {steps}"
        assert (h.repo / ".git" / "config").read_bytes() == config_before
        assert not (h.repo / ".git" / "info" / "attributes").exists()
    it = h.iteration(1)
    assert it.status == "keep", (it.status, h.reason(1))
    assert not ran.exists(), f"a planted program ran in kopt's git: {ran.read_text()}"
    sha = git(h.repo, "rev-parse", f"kopt/{TAG}")
    assert sha == it.commit and git(h.repo, "rev-parse", f"kopt/{TAG}~1") == before.branch
    assert (
        "gpgsig"
        not in subprocess.run(
            ["git", "cat-file", "commit", sha],
            cwd=h.repo,
            capture_output=True,
            text=True,
            env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
        ).stdout
    )
    h.assert_no_survivors()
    if no_sandbox:  # the control: the plant is live for plain git
        copy = h.tmp / "copy"
        shutil.copytree(h.repo, copy, symlinks=True)
        subprocess.run(
            ["git", "-c", "user.name=u", "-c", "user.email=u@u", "commit", "--allow-empty", "-m", "x"],
            cwd=copy,
            capture_output=True,
        )
        assert ran.exists(), "the planted programs do not run under plain git: the control failed"


def test_confined_a_pth_file_in_the_bench_interpreters_site_packages_cannot_be_planted(hostile: Factory) -> None:
    """The proposer tries a `.pth` (and sitecustomize.py, usercustomize.py) in every
    site-packages folder the bench's interpreter reads; each write fails, nothing appears."""
    import site
    import sysconfig

    dirs = sorted(
        {
            sysconfig.get_paths()["purelib"],
            sysconfig.get_paths()["platlib"],
            site.getusersitepackages(),
            sysconfig.get_paths()["stdlib"],
        }
    )
    names = [f"hostile-{os.getpid()}.pth", "sitecustomize.py", "usercustomize.py"]
    targets = [str(Path(d) / n) for d in dirs for n in names]
    preexisting = {t for t in targets if os.path.exists(t)}
    h = hostile.fake([])
    code = f"""
import json, os
_steps = {{}}
for _t in {targets!r}:
    try:
        os.makedirs(os.path.dirname(_t), exist_ok=True)
        with open(_t, 'a') as _f:
            _f.write('import os; os.environ.setdefault("FAKE_SLEEP", "0.05")\\n')
        _steps[_t] = 'ok'
    except Exception as _e:
        _steps[_t] = f'{{type(_e).__name__}}'
json.dump(_steps, open({str(h.proof / "steps.json")!r}, 'w'))
"""
    h.set_script([{"name": "plant a .pth", "exec": code + attacks.touch_kernel()}])
    before = h.baseline()
    try:
        assert h.session(1) == 0
        steps = json.loads((h.proof / "steps.json").read_text())
        assert steps and all(v != "ok" for v in steps.values()), f"the sandbox let these through: {steps}"
    finally:
        planted = [t for t in targets if os.path.exists(t) and t not in preexisting]
        for t in planted:
            os.remove(t)
    assert not planted, f"planted on the host: {planted}"
    h.assert_refused(before, 1, {"tie"})


PLANTED_CACHE = """
import os, sys
sys.path.insert(0, os.getcwd())
import problem
from array import array
for n in (75, 112, 150, 750, 1125):
    xs = problem.inputs(n)
    with open(f"/tmp/hostile-planted-{len(xs)}", "wb") as f:
        f.write(array("d", [x * x * problem.SCALE for x in xs]).tobytes())
"""

READS_PLANTED_CACHE = """
import os
from array import array


def _work(xs, scale):
    out = []
    for x in xs:
        acc = 0.0
        for _ in range(6):
            acc = x * x * scale
        out.append(acc)
    return out


def kernel(xs, scale):
    path = f"/tmp/hostile-planted-{len(xs)}"
    if os.path.exists(path):  # a result the proposer computed and left for the bench
        _work(xs[: len(xs) // 4], scale)
        return array("d", open(path, "rb").read()).tolist()
    return _work(xs, scale)
"""


def test_confined_an_output_cache_planted_in_tmp_never_reaches_the_bench(hostile: Factory) -> None:
    """The proposer computes the bench's outputs into /tmp; the candidate returns them from
    there. The proposer's /tmp and each bench's /tmp are private: nothing reaches the host,
    the bench never finds the file, the candidate measures as what it is (BEST's kernel)."""
    h = hostile.py(
        [{"name": "plant outputs in /tmp", "exec": PLANTED_CACHE, "write": {"kernel.py": READS_PLANTED_CACHE}}]
    )
    before = h.baseline()
    try:
        assert h.session(1) == 0
    finally:
        planted = sorted(Path("/tmp").glob("hostile-planted-*"))
        for p in planted:
            p.unlink()
    assert not planted, f"the proposer wrote the host's /tmp: {planted}"
    it = h.iteration(1)
    ratios = [c["ratio"] for c in it.record["classes"].values()]
    assert all(r > 0.6 for r in ratios), f"the bench found the planted outputs: {ratios}"
    h.assert_refused(before, 1, NOT_KEPT)


SHADOW_RANDOM = '''
"""random, as the fake bench imports it: the stdlib's, with a noise that halves every latency."""
import importlib.util
import sysconfig

_spec = importlib.util.spec_from_file_location("_real_random", sysconfig.get_paths()["stdlib"] + "/random.py")
_real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_real)


class Random(_real.Random):
    def gauss(self, mu=0.0, sigma=1.0):
        return -0.5  # the bench's latency x (1 + noise): half of it
'''


@pytest.mark.parametrize(
    ("hide", "no_sandbox"),
    [("gitignore", False), ("info-exclude", True)],
    ids=["gitignore-confined", "info-exclude-unconfined"],
)
def test_a_module_shadowing_the_benchs_import_is_refused_however_hidden(
    hostile: Factory, hide: str, no_sandbox: bool
) -> None:
    """random.py beside the fake bench (its `import random` finds it first) halves the
    latencies it writes, travelling with a tracked edit; hidden by a .gitignore the candidate
    adds, or by .git/info/exclude (which only an unconfined proposer can write). End to end once per
    sandbox mode; every hiding (and none) is checked on the tree alone by
    tests/engine/test_treecheck.py::test_a_shadowing_module_is_named_however_it_is_hidden."""
    h = hostile.fake([])
    hiding = {
        "gitignore": "open('.gitignore', 'w').write('random.py\\n')\n",
        "info-exclude": (
            "import subprocess\n_p = subprocess.run(['git', 'rev-parse', '--git-path', 'info/exclude'], "
            "capture_output=True, text=True).stdout.strip()\n"
            "try:\n    os.makedirs(os.path.dirname(_p), exist_ok=True)\n"
            "    open(_p, 'a').write('random.py\\n')\nexcept OSError:\n    pass\n"
        ),
        "not hidden": "",
    }[hide]
    h.set_script(
        [
            {
                "name": f"shadow random ({hide})",
                "write": {"random.py": SHADOW_RANDOM},
                "exec": "import os\n" + hiding + attacks.touch_kernel(),
            }
        ]
    )
    before = h.baseline(no_sandbox=no_sandbox)
    assert h.session(1, no_sandbox=no_sandbox) == 0
    h.assert_refused(before, 1, {"fail_protected"}, "random (random.py)", outside=not no_sandbox)


@pytest.mark.parametrize("no_sandbox", [False, True], ids=["confined", "unconfined"])
def test_a_planted_pyc_beside_an_innocent_source_is_refused(hostile: Factory, no_sandbox: bool) -> None:
    """An unchecked-hash __pycache__/kernel.*.pyc compiled from a cheating kernel (Python
    loads it whatever kernel.py says), beside an innocent tracked edit of kernel.py."""
    fast = "def kernel(xs, scale):\n    return [x * x * scale for x in xs[:1]] * len(xs)\n"
    code = f"""
import os, py_compile, sys
src = 'fast_kernel_src.py'
open(src, 'w').write({fast!r})
os.makedirs('__pycache__', exist_ok=True)
# the path by hand: a confined proposer's own PYTHONPYCACHEPREFIX would send cache_from_source elsewhere
py_compile.compile(src, cfile=f'__pycache__/kernel.{{sys.implementation.cache_tag}}.pyc',
                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH, doraise=True)
os.remove(src)
with open('kernel.py', 'a') as f:
    f.write('# tidied\\n')
"""
    h = hostile.py([{"name": "plant a pyc", "exec": code}])
    before = h.baseline(no_sandbox=no_sandbox)
    assert h.session(1, no_sandbox=no_sandbox) == 0
    h.assert_refused(before, 1, {"fail_protected"}, "__pycache__/kernel.", outside=not no_sandbox)


@pytest.mark.parametrize("no_sandbox", [False, True], ids=["confined", "unconfined"])
def test_a_kernel_file_turned_into_a_link_out_of_the_tree_is_refused(hostile: Factory, no_sandbox: bool) -> None:
    """kernel.json replaced by a symbolic link to a file the attacker keeps changing outside
    the tree (what is measured is not what would be committed)."""
    h = hostile.fake([])
    outside = h.proof / "kernel.json"
    h.set_script(
        [
            {
                "name": "link out",
                "exec": f"""
import json, os
json.dump({{'speed': {{'small': 0.5, 'large': 0.5}}}}, open({str(outside)!r}, 'w'))
os.remove('kernel.json')
os.symlink({str(outside)!r}, 'kernel.json')
""",
            }
        ]
    )
    before = h.baseline(no_sandbox=no_sandbox)
    assert h.session(1, no_sandbox=no_sandbox) == 0
    h.assert_refused(before, 1, {"fail_protected"}, "kernel.json", outside=not no_sandbox)


def test_unconfined_a_hard_link_into_best_is_refused(hostile: Factory) -> None:
    """--no-sandbox: cand/kernel.json replaced by a hard link to best/kernel.json, then a
    faster kernel written through it: both trees change at once."""
    h = hostile.fake([])
    h.set_script(
        [
            {
                "name": "hard link",
                "exec": attacks.direct(
                    h,
                    """
os.remove('kernel.json')
os.link(BEST + '/kernel.json', 'kernel.json')
""",
                )
                + attacks.gain(0.5),
            }
        ]
    )
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    assert "hard links: kernel.json" in h.reason(1), h.reason(1)
    # the write through the link into best/ was put back by kopt with the failure
    assert git(h.ws.best, "status", "--porcelain") == ""
    h.assert_refused(before, 1, {"fail_protected"}, "the proposer changed best/", outside=False)


@pytest.mark.parametrize("no_sandbox", [False, True], ids=["confined", "unconfined"])
def test_a_gitattributes_file_added_by_the_candidate_is_refused(hostile: Factory, no_sandbox: bool) -> None:
    """A .gitattributes in cand/ that sends kernel.json through a filter (what git would
    store is not what the bench reads) or hides it from diffs: refused by name."""
    h = hostile.fake([])
    h.set_script(
        [
            {
                "name": "gitattributes",
                "write": {".gitattributes": "kernel.json filter=evil -diff\n"},
                "exec": attacks.gain(0.8),
            }
        ]
    )
    before = h.baseline(no_sandbox=no_sandbox)
    assert h.session(1, no_sandbox=no_sandbox) == 0
    h.assert_refused(before, 1, {"fail_protected"}, ".gitattributes", outside=not no_sandbox)
