"""Attack code for the hostile proposer (tests/security/proposer.py runs it with exec() in
cand/): Python source built from a few pieces, so each test reads as the attack it tries.

- `linger(h, body, how=...)`: start a process that outlives the proposal (`setsid`, a double
  fork, `nohup`) and runs `body` every 20 ms for `seconds`, writing a tick to
  proof/<name> each time (the host side reads when it was alive). Its command line carries
  the harness's token, so the host finds it by PID.
- `canary_writes(h)`: try to create every canary path outside cand/ (errors swallowed).
- `gain(factor)`, `touch_kernel()`: the fake target's kernel.json edits.
"""

from __future__ import annotations

import textwrap

from tests.security.harness import TAG, Hostile


def gain(factor: float, **extra: object) -> str:
    """Edit the fake target's kernel.json: every class `factor` times its latency."""
    more = "".join(f"k[{key!r}] = {value!r}\n" for key, value in extra.items())
    return (
        "import json\nk = json.load(open('kernel.json'))\n"
        f"k['speed'] = {{c: v * {factor!r} for c, v in k['speed'].items()}}\n{more}"
        "json.dump(k, open('kernel.json', 'w'))\n"
    )


def touch_kernel() -> str:
    """A change to kernel.json that changes no speed (a tie when measured honestly)."""
    return (
        "import json\nk = json.load(open('kernel.json'))\nk['note'] = 'tuned'\njson.dump(k, open('kernel.json', 'w'))\n"
    )


def canary_writes(h: Hostile) -> str:
    paths = [str(p) for p in h.canaries()]
    return textwrap.dedent(f"""
        for _p in {paths!r}:
            try:
                open(_p, 'w').write('pwned')
            except OSError:
                pass
    """)


PRELUDE = """
import json, os, signal, subprocess, sys, time
PROOF = {proof!r}
BEST = {best!r}
REPO = {repo!r}
WS = {ws!r}
TAG = {tag!r}
"""


def direct(h: Hostile, *bodies: str, name: str = "direct") -> str:
    """The bodies run by the proposer itself (each guarded), with the names they use."""
    return PRELUDE.format(
        proof=str(h.proof / name), best=str(h.ws.best), repo=str(h.repo), ws=str(h.ws.dir), tag=TAG
    ) + guarded(*bodies)


LINGER = (
    PRELUDE
    + """TOKEN = sys.argv[1]
END = time.time() + {seconds!r}
while time.time() < END:
    try:
        with open(PROOF, 'a') as f:
            f.write(f'{{time.time()}}\\n')
    except OSError:
        pass
{body}
    time.sleep(0.02)
"""
)


def guarded(*bodies: str) -> str:
    """Each body in its own try (a refused step must not skip the next)."""
    return "".join(
        "try:\n" + textwrap.indent(textwrap.dedent(b).strip(), "    ") + "\nexcept Exception:\n    pass\n"
        for b in bodies
    )


def linger(
    h: Hostile,
    *bodies: str,
    how: str = "setsid",
    seconds: float = 8.0,
    name: str = "linger",
    scrub_env: bool = False,
    unmarked: bool = False,
) -> str:
    """Code that starts a process outliving the proposal, and returns once it has ticked (so
    the attack is surely under way before the proposer exits). scrub_env: its environment is
    only PATH; unmarked: kopt's markers (KOPT_WORKSPACE, KOPT_STEP) are dropped from it and
    the rest kept (unconfined, kopt ends every marked process with the step: an attack meant
    to act after the proposal must escape that, as only a process kopt cannot recognise can)."""
    code = LINGER.format(
        seconds=seconds,
        proof=str(h.proof / name),
        best=str(h.ws.best),
        repo=str(h.repo),
        ws=str(h.ws.dir),
        tag=TAG,
        body=textwrap.indent(guarded(*bodies), " " * 4),
    )
    env = (
        "{'PATH': os.environ['PATH']}"
        if scrub_env
        else "{k: v for k, v in os.environ.items() if k not in ('KOPT_WORKSPACE', 'KOPT_STEP')}"
        if unmarked
        else "dict(os.environ)"
    )
    argv = f"[sys.executable, '-c', {code!r}, {h.token!r}]"
    if how == "setsid":
        start = (
            f"subprocess.Popen(['setsid'] + {argv}, env={env}, stdin=subprocess.DEVNULL, "
            "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)"
        )
    elif how == "nohup":
        start = (
            f"subprocess.Popen(['nohup'] + {argv}, env={env}, stdin=subprocess.DEVNULL, "
            "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=os.setpgrp)"
        )
    elif how == "doublefork":
        start = textwrap.dedent(f"""
            _pid = os.fork()
            if _pid == 0:
                os.setsid()
                if os.fork() == 0:
                    _fd = os.open(os.devnull, os.O_RDWR)
                    for _n in (0, 1, 2):
                        os.dup2(_fd, _n)
                    os.execve(sys.executable, {argv}, {env})
                os._exit(0)
            os.waitpid(_pid, 0)
        """)
    else:
        raise ValueError(how)
    wait = (
        f"import time as _t\n_end = _t.time() + 5\n"
        f"while not os.path.exists({str(h.proof / name)!r}) and _t.time() < _end:\n    _t.sleep(0.01)\n"
    )
    return f"import os, subprocess, sys\n{start}\n{wait}"


# -- bodies of lingering processes ------------------------------------------------------------

SLOW_BEST = """
with open(BEST + '/kernel.json', 'w') as f:
    json.dump({'speed': {'small': 1.6, 'large': 1.6}}, f)
"""
"""Make best's kernel 1.6x slower (the candidate then looks 1.6x faster: a fake keep)."""

STOP_BEST_BENCH = """
for _d in os.listdir('/proc'):
    if _d.isdigit() and int(_d) != os.getpid():
        try:
            if os.readlink(f'/proc/{_d}/cwd') == BEST:
                os.kill(int(_d), signal.SIGSTOP)
                time.sleep(0.03)
                os.kill(int(_d), signal.SIGCONT)
        except OSError:
            pass
"""
"""Stop and continue every process running in best/ (its bench looks slower)."""

MOVE_BRANCH = """
_env = {**os.environ, 'GIT_AUTHOR_NAME': 'a', 'GIT_AUTHOR_EMAIL': 'a@b', 'GIT_COMMITTER_NAME': 'a',
        'GIT_COMMITTER_EMAIL': 'a@b'}
_evil = subprocess.run(['git', '-C', REPO, 'commit-tree', f'refs/heads/kopt/{TAG}^{{tree}}', '-p',
                        f'refs/heads/kopt/{TAG}', '-m', 'evil'], capture_output=True, text=True, env=_env).stdout.strip()
if _evil:
    subprocess.run(['git', '-C', REPO, 'update-ref', f'refs/heads/kopt/{TAG}', _evil], capture_output=True)
    with open(PROOF + '.evil', 'w') as f:
        f.write(_evil)
"""
"""Move the run's branch to a commit of the attacker's (a child of BEST: fast-forward-looking)."""

ONCE_AFTER_THE_PROPOSAL = """
_plan = os.environ.get('KOPT_PLAN', '')
if os.path.exists(PROOF + '.done') or not (os.path.exists(_plan) and os.path.getsize(_plan) > 0):
    raise StopIteration  # not yet (the proposer writes its plan last), or done already
time.sleep(0.05)
"""
"""A guard: what follows in the same body runs once, just after the proposer has exited."""

DONE = """
with open(PROOF + '.done', 'w') as f:
    f.write(str(time.time()))
"""
