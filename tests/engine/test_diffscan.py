"""The diff scan (issue 17, DESIGN §12): hostile candidates for every rule and the evasions an
attacker would try, and legitimate Triton code (the bundled kernels) that must raise nothing.
Diffs are made by real git, as the loop makes them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.config.toml_io import dumps as dumps_config
from kopt_supervisor.engine.config.toml_io import loads as loads_config
from kopt_supervisor.engine.diffscan import new_file_diff, parse_diff, scan
from kopt_supervisor.engine.diffscan.findings import RULES, Allow, Finding, parse_allow, review_reason

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "src" / "kopt_supervisor"
BASE = '''"""A kernel."""

import torch


def kernel(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    if out is None:
        out = torch.empty_like(x)
    out.copy_(x * 2)
    return out
'''


def git_diff(tmp: Path, old: dict[str, str | bytes], new: dict[str, str | bytes]) -> str:
    """`git diff` of BEST (old) against the candidate's tree (new, untracked files included)."""
    repo = tmp / "repo"
    repo.mkdir(parents=True)

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), "-c", "user.email=k@o", "-c", "user.name=k", *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def write(files: dict[str, str | bytes]) -> None:
        for p, t in files.items():
            f = repo / p
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(t) if isinstance(t, bytes) else f.write_text(t, encoding="utf-8")

    git("init", "-q")
    write(old)
    git("add", "-A")
    git("commit", "-qm", "best", "--allow-empty")
    for p in old:
        if p not in new:
            (repo / p).unlink()
    write(new)
    git("add", "-A")
    return git(
        "diff", "--cached", "--no-color", "--no-ext-diff", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/", "HEAD"
    )


def scan_change(
    tmp: Path, new: str, old: str = BASE, path: str = "solution/kernel.py", allow: tuple[str, ...] = ()
) -> list[Finding]:
    diff = git_diff(tmp, {path: old}, {path: new})
    return scan(diff, {path: new}.get, allow=allow)


def with_lines(*lines: str) -> str:
    """BASE with lines added at the end of the kernel function body (indented) or the module."""
    return BASE + "\n" + "\n".join(lines) + "\n"


def rules(found: list[Finding]) -> set[str]:
    return {f.rule for f in found}


# --- hostile: one case per construct, and the evasions -----------------------------------------------------

HOSTILE = [
    # patching other modules and builtins
    ("time.perf_counter = lambda: 0.0", "patch-module"),
    ("import time as t\nt.perf_counter = lambda: 0.0", "patch-module"),
    ("from time import perf_counter\nimport time\nsetattr(time, 'perf_counter', perf_counter)", "patch-module"),
    ("torch.cuda.Event = object", "patch-module"),
    ("import torch.cuda as tc\ntc.Event.elapsed_time = lambda self, other: 1.0", "patch-module"),
    ("from torch import Tensor\nTensor.__add__ = lambda a, b: a", "patch-module"),
    ("import sys\nsys.modules['time'] = object()", "sys-modules"),
    ("import builtins\nbuiltins.print = lambda *a: None", "builtins"),
    ("__builtins__['len'] = lambda x: 0", "builtins"),
    ("import time\nvars(time)['perf_counter'] = lambda: 0", "patch-module"),
    ("import time\ntime.__dict__['perf_counter'] = lambda: 0", "patch-module"),
    ("import time\nT = time\nT.sleep = print", "patch-module"),
    ("clock = __import__('time')\nclock.perf_counter = int", "patch-module"),
    ("import importlib\nm = importlib.import_module('time')\nm.monotonic = int", "patch-module"),
    ("import time\nobject.__setattr__(time, 'x', 1)", "patch-module"),
    ("def fast(): pass\nkernel.__code__ = fast.__code__", "patch-module"),
    ("[torch][0].cuda = None", "patch-module"),
    ("from unittest import mock\nmock.patch('time.perf_counter', int).start()", "patch-module"),
    ("from harness import timing\ntiming.CpuTimer.__call__ = lambda self, fn: 0.0", "patch-module"),
    ("from kopt_supervisor.kernels.harness import timing\ntiming.GraphTimer.reps = 10 ** 9", "patch-module"),
    ("from kopt_supervisor.kernels.harness import timing\ndef quiet(m):\n    pass\nquiet(timing)", "dynamic-access"),
    ("from kopt_supervisor.engine import store", "kopt-probe"),
    ("torch.backends.cuda.matmul.allow_tf32 = True", "patch-module"),
    # frames and the stack
    ("import sys\nref = sys._getframe(1).f_locals['expected']", "frame-inspection"),
    ("import inspect\nref = inspect.currentframe().f_back.f_locals", "frame-inspection"),
    ("import inspect\nframes = inspect.stack()", "frame-inspection"),
    ("import gc\nholders = gc.get_referrers(kernel)", "frame-inspection"),
    ("import sys\ng = getattr(sys, '_getframe')", "frame-inspection"),
    ("try:\n    1 / 0\nexcept Exception as e:\n    f = e.__traceback__.tb_frame", "frame-inspection"),
    ("import sys\nsys.settrace(lambda *a: None)", "frame-inspection"),
    # ending or hooking the process
    ("import os\nos._exit(0)", "process-exit"),
    ("import sys\nsys.exit(0)", "process-exit"),
    ("exit()", "process-exit"),
    ("raise SystemExit(0)", "process-exit"),
    ("import atexit\natexit.register(print, 'kernel,1.0')", "process-exit"),
    ("import signal\nsignal.signal(signal.SIGTERM, lambda *a: None)", "process-exit"),
    ("class Later:\n    def __del__(self):\n        pass", "process-exit"),
    ("from os import _exit as leave\nleave(0)", "process-exit"),
    # files
    ("open('results.csv', 'w').write('x,1\\n')", "file-write"),
    ("with open('log.txt', mode='a') as f:\n    f.write('x')", "file-write"),
    ("from pathlib import Path\nPath('out.csv').write_text('x,1')", "file-write"),
    ("import os\nos.write(1, b'x,1\\n')", "file-write"),
    ("import shutil\nshutil.copy('a', 'b')", "file-write"),
    ("mode = 'w'\nopen('x', mode)", "file-write"),
    ("torch.save(torch.zeros(1), 'cache.pt')", "file-write"),
    # environment
    ("import os\nos.environ['TRITON_INTERPRET'] = '0'", "env-write"),
    ("import os\nos.environ.update(CUDA_VISIBLE_DEVICES='1')", "env-write"),
    ("import os\nos.putenv('X', '1')", "env-write"),
    ("from os import environ as E\nE['X'] = '1'", "env-write"),
    # kopt's names, the tree and the side
    ("import os\nlook = os.environ.get('KOPT_ROUND')", "kopt-probe"),
    ("maps = open('/proc/self/maps').read()", "kopt-probe"),
    ("import os\nside = os.getcwd()", "worktree-probe"),
    ("from pathlib import Path\nside = Path.cwd().name", "worktree-probe"),
    ("SKIP = 'cand' in __file__", "worktree-probe"),
    ("SKIP = __file__.split('/')[-4][0] == 'c'", "worktree-probe"),
    ("SKIP = __name__.endswith('1')", "worktree-probe"),
    ("import sys\nside = sys.argv[-1]", "worktree-probe"),
    ("ROOT = '../best/'", "worktree-probe"),
    # threads and processes
    ("import threading\nthreading.Thread(target=print).start()", "thread-process"),
    ("from concurrent.futures import ThreadPoolExecutor", "thread-process"),
    ("import subprocess\nsubprocess.run(['true'])", "thread-process"),
    ("import os\nos.fork()", "thread-process"),
    ("import multiprocessing as mp\nmp.Process(target=print).start()", "thread-process"),
    # caches keyed on inputs
    (
        "import functools\n@functools.lru_cache(maxsize=None)\ndef cached(x: torch.Tensor):\n    return x * 2",
        "input-cache",
    ),
    ("from functools import cache\n@cache\ndef cached(x):\n    return torch.empty(x.shape)", "input-cache"),
    ("import functools\ndef raw(x):\n    return x.sum()\ncached = functools.lru_cache(None)(raw)", "input-cache"),
    ("SEEN = {}\ndef remember(x):\n    SEEN[x.data_ptr()] = x.clone()", "input-cache"),
    ("def remember(x, memo={}):\n    key = (x.data_ptr(), x.shape)\n    return memo.get(key)", "input-cache"),
    ("def seen(x, memo=set()):\n    return id(x) in memo", "input-cache"),
    ("import weakref\nOUT = weakref.WeakKeyDictionary()", "input-cache"),
    # module state changed per call
    ("CALLS = 0\ndef count():\n    global CALLS\n    CALLS += 1", "module-state"),
    ("RESULTS = []\ndef keep(y):\n    RESULTS.append(y)", "module-state"),
    ("class State:\n    calls = 0\ndef count():\n    State.calls += 1", "module-state"),
    # native code, import tricks, exec
    ("import ctypes\nlib = ctypes.CDLL(None)", "native-access"),
    ("import importlib\nimportlib.reload(torch)", "import-tricks"),
    ("import sys\nsys.path.insert(0, '/tmp/x')", "import-tricks"),
    ("t = __import__('time')", "import-tricks"),
    ("exec('import time; time.perf_counter = int')", "exec-eval"),
    ("exec('import time; time.perf_counter = int')", "patch-module"),
    ("run = eval\nrun('1 + 1')", "exec-eval"),
    ("code = compile('x = 1', 'k', 'exec')", "exec-eval"),
    ("import pickle\npickle.loads(b'')", "exec-eval"),
    # computed names and namespaces
    ("G = globals()\nG['kernel'] = print", "dynamic-access"),
    ("import time\nname = 'perf' + '_counter'\nclock = getattr(time, name)", "dynamic-access"),
    ("import operator\nget = operator.attrgetter('_getframe')", "dynamic-access"),
    ("import time\ndef patch(m):\n    m.perf_counter = int\npatch(time)", "dynamic-access"),
    ("import functools\nimport time\nset_time = functools.partial(setattr, time)", "dynamic-access"),
    # stdout, streams, clocks, interception
    ("print('config,us\\nx,0.001')", "stdout-write"),
    ("import sys\nsys.stdout.write('x,1\\n')", "stdout-write"),
    ("side = torch.cuda.Stream()\nwith torch.cuda.stream(side):\n    pass", "side-stream"),
    ("import time\nt0 = time.perf_counter()", "clock-time"),
    ("start = torch.cuda.Event(enable_timing=True)", "clock-time"),
    ("class Lazy(torch.Tensor):\n    pass", "tensor-subclass"),
    (
        "class Spy:\n    @classmethod\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n        pass",
        "tensor-subclass",
    ),
    # unicode identifiers (NFKC: the interpreter reads them as ASCII)
    ("import \uff54\uff49\uff4d\uff45\n\uff54\uff49\uff4d\uff45.perf_counter = int", "patch-module"),
    # more evasions: unpacking, dunder methods, namespaces, containers, aliases of builtins
    ("import time\nsetattr(*[time, 'perf_counter', int])", "patch-module"),
    ("import time\ntime.__setattr__('perf_counter', int)", "patch-module"),
    ("import time\n(lambda m: m.__dict__.update(perf_counter=int))(time)", "dynamic-access"),
    ("import time as _\nglobals()['_'].perf_counter = int", "dynamic-access"),
    ("import time\nboxed = [time]\nboxed[0].perf_counter = int", "patch-module"),
    ("import sys\nme = sys.modules[__name__]", "sys-modules"),
    ("from importlib import import_module as im\nim('time').perf_counter = int", "patch-module"),
    ("import builtins\nbuiltins.__dict__['exec']('x = 1')", "builtins"),
    ("ex = getattr(__builtins__, 'exec')", "builtins"),
    ("o = open\no('results.csv', 'w')", "file-write"),
    ("p = print\np('x,1')", "stdout-write"),
    ("run = exec\nrun('x = 1')", "exec-eval"),
    ("import time\ndel time.perf_counter", "patch-module"),
    ("Lazy = type('Lazy', (torch.Tensor,), {})", "dynamic-access"),
    ("import types\nfake = types.ModuleType('time')", "import-tricks"),
    ("T = torch.Tensor\nclass L(T):\n    pass", "tensor-subclass"),
    ("def swap(x):\n    x.__class__ = dict", "patch-module"),
    ("from time import *", "clock-time"),
    ("from os import *\n_exit(0)", "process-exit"),
    # decorators
    ("import time\n@(lambda f: setattr(time, 'perf_counter', f) or f)\ndef fake():\n    return 0.0", "patch-module"),
    # results that compute when the bench reads them (after the timer stopped), or answer falsely
    (
        "class Lazy:\n    def __init__(self, f):\n        self.f = f\n    def __iter__(self):\n        return iter(self.f())",
        "lazy-result",
    ),
    ("class Lazy:\n    def __array__(self, dtype=None):\n        return None", "lazy-result"),
    ("class Lazy:\n    def __float__(self):\n        return 1.0", "lazy-result"),
    ("class Right:\n    def __eq__(self, other):\n        return True", "lazy-result"),
    ("class Zero:\n    def __sub__(self, other):\n        return 0.0\n    __rsub__ = __sub__", "lazy-result"),
    ("class Lazy:\n    __len__ = lambda self: 4", "lazy-result"),
    ("class Proxy:\n    def __getattr__(self, name):\n        return getattr(torch.ones(1), name)", "lazy-result"),
    ("class Lazy:\n    @property\n    def __cuda_array_interface__(self):\n        return {}", "lazy-result"),
    ("class Lazy:\n    def __dlpack__(self, stream=None):\n        return None", "lazy-result"),
    ("def lazy(xs):\n    return (x * 2 for x in xs)", "lazy-result"),
    ("def lazy(xs):\n    return map(float, xs)", "lazy-result"),
    ("from itertools import starmap as sm\ndef lazy(xs):\n    return sm(pow, xs)", "lazy-result"),
    ("def lazy(xs):\n    yield from xs", "lazy-result"),
    ("lazy = lambda xs: map(abs, xs)", "lazy-result"),
    # state kept between calls: default arguments
    ("def count(x, _memo={}):\n    return _memo.get(1)", "module-state"),
    ("def count(x, _calls=[0]):\n    _calls[0] += 1", "module-state"),
    ("def count(x, *, _seen=set()):\n    _seen.add(1)", "module-state"),
    ("import collections\ndef count(x, _c=collections.Counter()):\n    pass", "module-state"),
    ("from collections import OrderedDict as OD\ndef count(x, _m=OD()):\n    pass", "module-state"),
    ("def count(x, _m=dict()):\n    pass", "module-state"),
    ("import itertools\ndef count(x, _n=itertools.count()):\n    return next(_n)", "module-state"),
    ("class Box:\n    pass\ndef count(x, _b=Box()):\n    pass", "module-state"),
    ("MEMO = {}\ndef count(x, m=MEMO):\n    m[1] = x", "module-state"),
    ("def count(x, buf=torch.zeros(4)):\n    buf.copy_(x)", "module-state"),
    ("def count(x, buf=torch.zeros(4)):\n    buf += x", "module-state"),
    ("count = lambda x, _m={}: _m.setdefault(1, x)", "module-state"),
    # ... handed to a helper, reached through an alias, a loop, a lookup
    ("MEMO = {}\ndef _put(d, k, v):\n    d[k] = v\ndef count(x):\n    _put(MEMO, 1, x)", "module-state"),
    (
        "MEMO = {}\ndef _put(d, k, v):\n    d[k] = v\ndef _via(d, x):\n    _put(d, 1, x)\ndef count(x):\n    _via(MEMO, x)",
        "module-state",
    ),
    ("MEMO = {}\ndef count(x):\n    m = MEMO\n    m[1] = x", "module-state"),
    ("STATE = {'a': []}\ndef count(x):\n    for v in STATE.values():\n        v.append(x)", "module-state"),
    ("STATE = {}\ndef count(x):\n    STATE.get('a', []).append(x)", "module-state"),
    ("import heapq\nSEEN = []\ndef count(x):\n    heapq.heappush(SEEN, x)", "module-state"),
    ("SEEN = {}\ndef count(x):\n    dict.update(SEEN, a=x)", "module-state"),
    # ... closures of functions made once (a factory run at import, a decorator), nonlocal
    (
        "def _make():\n    memo = {}\n    def run(x):\n        memo[1] = x\n        return x\n    return run\nrun = _make()",
        "module-state",
    ),
    (
        "def memo(f):\n    cache = {}\n    def w(x):\n        return cache.setdefault(1, f(x))\n    return w\n"
        "@memo\ndef double(x):\n    return x * 2",
        "module-state",
    ),
    (
        "def _make():\n    n = 0\n    def run(x):\n        nonlocal n\n        n += 1\n        return x\n    return run\n"
        "run = _make()",
        "module-state",
    ),
    (
        "import functools\n@functools.cache\ndef _make():\n    seen = []\n    return lambda x: seen.append(x)",
        "module-state",
    ),
    # ... function attributes, class attributes, module-level instances
    ("def count(x):\n    setattr(count, 'calls', 1)", "module-state"),
    ("def count(x):\n    me = count\n    me.calls = 1", "module-state"),
    ("def count(x):\n    getattr(count, 'cache')[1] = x", "module-state"),
    ("class S:\n    @classmethod\n    def hit(cls):\n        cls.n += 1", "module-state"),
    ("class S:\n    def hit(self):\n        type(self).n += 1", "module-state"),
    ("class S:\n    def hit(self):\n        self.__class__.n += 1", "module-state"),
    ("class S:\n    seen = {}\n    def hit(self, x):\n        self.seen[1] = x", "module-state"),
    (
        "class S:\n    def __init__(self):\n        self.n = 0\n    def __call__(self, x):\n        self.n += 1\n"
        "        return x\nrun = S()",
        "module-state",
    ),
    (
        "class Memo:\n    def __init__(self, f):\n        self.f, self.c = f, {}\n    def __call__(self, x):\n"
        "        self.c[1] = x\n@Memo\ndef double(x):\n    return x * 2",
        "module-state",
    ),
    (
        "class M(torch.nn.Module):\n    def forward(self, x):\n        self.register_buffer('memo', x)\n        return x\n"
        "MOD = M()",
        "module-state",
    ),
    # ... what a cached function returns (the opener of a store)
    (
        "import functools\n@functools.lru_cache(None)\ndef _store():\n    return {}\ndef count(x):\n    _store()[1] = x",
        "module-state",
    ),
    (
        "import functools\n@functools.lru_cache(None)\ndef _store():\n    return {}\ndef count(x):\n    db = _store()\n"
        "    db.update(a=x)",
        "module-state",
    ),
    ("BUF = torch.zeros(4)\ndef count(x):\n    torch.mul(x, 2, out=BUF)", "module-state"),
    ("import functools\ndef _k(x, memo):\n    memo[1] = x\nk = functools.partial(_k, memo={})", "module-state"),
    ("class Base:\n    seen = []\nclass S(Base):\n    def hit(self, x):\n        self.seen.append(x)", "module-state"),
    (
        "def _make():\n    memo = {}\n    run = lambda x: memo.setdefault(1, x)\n    return run\nrun = _make()",
        "module-state",
    ),
    (
        "from collections import UserList\nclass Later(UserList):\n    @property\n    def data(self):\n        return [1]",
        "lazy-result",
    ),
    ("class K:\n    def __call__(self, xs):\n        yield from xs\nrun = K()", "lazy-result"),
    ("def run(xs):\n    def g():\n        yield from xs\n    return g()", "lazy-result"),
    ("fut = torch.jit.fork(torch.ones, 4)", "thread-process"),
    ("import types\nLater = types.new_class('Later', (object,))", "dynamic-access"),
    # an output cache kept on the caller's own input object (the bench passes it to every call)
    (
        "def run(x):\n    if hasattr(x, '_out'):\n        return x._out\n    x._out = x * 2\n    return x._out",
        "input-cache",
    ),
    ("def run(x):\n    n = getattr(x, '_n', 0)\n    setattr(x, '_n', n + 1)", "input-cache"),
    ("def run(x):\n    try:\n        return x._out\n    except AttributeError:\n        x._out = x * 2", "input-cache"),
    ("def run(x, name):\n    setattr(x, name, 1)", "input-cache"),
    # an output cache keyed on the caller's data made hashable
    (
        "import functools\n@functools.lru_cache(None)\ndef _cached(t, s):\n    return [v * s for v in t]\n"
        "def scaled(xs, s):\n    return _cached(tuple(xs), s)",
        "input-cache",
    ),
    (
        "import functools\n@functools.cache\ndef _cached(b):\n    return b\ndef scaled(x):\n    return _cached(x.cpu().numpy().tobytes())",
        "input-cache",
    ),
    # stores on disk (or in memory through a file API)
    ("import shelve\ndb = shelve.open('/tmp/x')", "file-write"),
    ("from shelve import open as o\ndb = o('/tmp/x')", "file-write"),
    ("import importlib\nsv = importlib.import_module('shelve')", "file-write"),
    ("import shelve\nopener = getattr(shelve, 'open')", "file-write"),
    ("import dbm\ndb = dbm.open('/tmp/x', 'c')", "file-write"),
    ("from shelve import *\ndb = open('/tmp/x')", "file-write"),
    ("import sqlite3 as sq\ncon = sq.connect('/tmp/x.db')", "file-write"),
    ("from pickle import dump\ndump(1, None)", "file-write"),
    ("import numpy as np\nnp.save('x.npy', 1)", "file-write"),
    ("import numpy as np\nm = np.memmap('x.bin', dtype='f4', mode='w+', shape=(4,))", "file-write"),
    ("import mmap\nm = mmap.mmap(-1, 4096)", "file-write"),
    ("import gzip\ngzip.open('x.gz', 'wb')", "file-write"),
    ("t = torch.from_file('x', shared=True, size=4)", "file-write"),
    ("import joblib\njoblib.dump(1, 'x')", "file-write"),
    ("arr = torch.zeros(4).numpy()\narr.dump('x.pkl')", "file-write"),
    ("import pandas as pd\npd.DataFrame().to_parquet('x')", "file-write"),
    # the bench's own module (its reference result)
    ("import __main__\nref = __main__.ref", "frame-inspection"),
    ("import __main__ as bench\nref = bench.ref", "frame-inspection"),
    ("from __main__ import ref", "frame-inspection"),
    ("import sys\nref = sys.modules['__main__'].ref", "frame-inspection"),
    ("import importlib\nref = importlib.import_module('__main__').ref", "frame-inspection"),
    ("ref = __import__('__main__').ref", "frame-inspection"),
    ("import sys\nbench = sys.modules.get('__main__')", "sys-modules"),
]


@pytest.mark.parametrize("snippet,rule", HOSTILE, ids=[f"{r}:{s.splitlines()[-1][:40]}" for s, r in HOSTILE])
def test_every_hostile_construct_is_found_with_its_line(tmp_path: Path, snippet: str, rule: str) -> None:
    new = with_lines(*snippet.splitlines())
    found = scan_change(tmp_path, new)
    assert rule in rules(found), found
    lines = new.splitlines()
    for f in found:
        assert f.path == "solution/kernel.py" and f.line > 10  # the added lines only, never BASE's
        assert f.text.split("  #")[0] == lines[f.line - 1].strip()[:160]
    assert RULES.keys() >= rules(found)


def test_the_same_constructs_inside_the_kernel_function_are_found(tmp_path: Path) -> None:
    new = BASE.replace("    out.copy_(x * 2)\n", "    import os\n    os._exit(0)\n    out.copy_(x * 2)\n")
    found = scan_change(tmp_path, new)
    assert [(f.rule, f.line) for f in found] == [("process-exit", 10)]


def test_a_changed_import_makes_an_unchanged_line_the_candidates(tmp_path: Path) -> None:
    old = "import json as clock\n\n\ndef k(x):\n    clock.tag = 1\n    return x\n"
    new = "import time as clock\n\n\ndef k(x):\n    clock.tag = 1\n    return x\n"
    found = scan_change(tmp_path, new, old)
    assert ("patch-module", 5) in {(f.rule, f.line) for f in found}
    # an unchanged construct whose names the candidate did not touch is BEST's, not the candidate's
    untouched = scan_change(tmp_path / "b", old.replace("return x", "return x + 1"), old)
    assert untouched == []


def test_an_exec_string_is_read_as_code(tmp_path: Path) -> None:
    found = scan_change(tmp_path, with_lines("exec('import sys\\nsys._getframe(1)')"))
    assert {"exec-eval", "frame-inspection", "sys-modules"} & rules(found) >= {"exec-eval", "frame-inspection"}
    assert any("in the string" in f.text for f in found)


def test_c_in_a_python_string_meets_the_c_rules(tmp_path: Path) -> None:
    src = with_lines(
        'CPP = """',
        "#include <cstdlib>",
        'extern "C" int cudaEventElapsedTime(float* ms, void* a, void* b) { *ms = 0.001f; return 0; }',
        'static const char* v = getenv("KOPT_SIDE");',
        '"""',
    )
    found = scan_change(tmp_path, src)
    assert {"c-timer-interpose", "c-env", "kopt-probe"} <= rules(found)


# --- C, C++, CUDA, and other files ------------------------------------------------------------------------------

CUDA_BASE = """#include <cuda_runtime.h>

__global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""

C_HOSTILE = [
    ('const char* s = getenv("KOPT_SIDE");', "c-env"),
    ('void* real = dlsym(RTLD_NEXT, "cudaEventElapsedTime");', "c-interpose"),
    ('FILE* f = fopen("results.csv", "w");', "c-file-write"),
    ('std::ofstream out("log.txt");', "c-file-write"),
    ("std::thread t([] {});", "c-thread"),
    ("pthread_create(&tid, nullptr, spin, nullptr);", "c-thread"),
    ('system("nvidia-smi");', "c-thread"),
    ("atexit(flush_fake_csv);", "c-exit"),
    ("_exit(0);", "c-exit"),
    ("signal(SIGTERM, SIG_IGN);", "c-exit"),
    ("clock_t clock(void) { return 0; }", "c-timer-interpose"),
    ('extern "C" cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {', "c-timer-interpose"),
    ("cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)", "c-timer-interpose"),
    ("#define cudaEventElapsedTime fake_elapsed", "c-timer-interpose"),
    ("int gettimeofday(struct timeval* tv, void* tz) {", "c-timer-interpose"),
    ("__attribute__((constructor)) static void init() {}", "c-constructor"),
    ('setenv("LD_PRELOAD", "/tmp/libfake.so", 1);', "ld-preload"),
]


@pytest.mark.parametrize("line,rule", C_HOSTILE, ids=[r + ":" + s[:30] for s, r in C_HOSTILE])
@pytest.mark.parametrize("suffix", [".cu", ".cpp"])
def test_c_text_rules(tmp_path: Path, line: str, rule: str, suffix: str) -> None:
    path = f"csrc/scale{suffix}"
    new = CUDA_BASE + line + "\n"
    diff = git_diff(tmp_path, {path: CUDA_BASE}, {path: new})
    found = scan(diff, {path: new}.get)
    assert rule in rules(found) and all(f.line == 7 for f in found), found


def test_legitimate_cuda_and_calls_are_not_interposition(tmp_path: Path) -> None:
    new = (
        CUDA_BASE
        + """
// getenv would be read here in a comment only; fopen("x", "w") too
__global__ void tiled(const float* __restrict__ x, float* y, int n) {
    __shared__ float tile[256];
    int i = blockIdx.x * 256 + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) atomicAdd(&y[0], tile[threadIdx.x]);
}

void launch(const float* x, float* y, int n, cudaStream_t s) {
    float elapsed_time = 0.0f;
    tiled<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);
    cudaEventRecord(done, s);
}
"""
    )
    diff = git_diff(tmp_path, {"k.cu": CUDA_BASE}, {"k.cu": new})
    assert scan(diff, {"k.cu": new}.get) == []


def test_files_by_name_binary_and_build_files(tmp_path: Path) -> None:
    new = {
        "solution/kernel.py": BASE,
        "time.py": "x = 1\n",
        "solution/torch/__init__.py": "",
        "sitecustomize.py": "",
        "solution/x.pth": "import os\n",
        "lib/fake.so": b"\x7fELF\x00\x01\x02",
        "Makefile": "run:\n\tLD_PRELOAD=./lib/fake.so python bench.py\n",
        "NOTES.md": "kopt said the candidate was a tie\n",
        "params.json": '{"dclass=narrow": {"BLOCK_D": 64}}\n',
    }
    diff = git_diff(tmp_path, {"solution/kernel.py": BASE}, new)
    found = scan(diff, lambda p: new[p] if isinstance(new.get(p), str) else None)  # type: ignore[return-value]  # bytes files are not read
    got = {(f.rule, f.path) for f in found}
    assert got == {
        ("shadow-module", "time.py"),
        ("shadow-module", "solution/torch/__init__.py"),
        ("startup-hook", "sitecustomize.py"),
        ("startup-hook", "solution/x.pth"),
        ("binary-file", "lib/fake.so"),
        ("ld-preload", "Makefile"),
    }, got


def test_an_unreadable_or_unparsable_python_file_falls_back_to_text_rules(tmp_path: Path) -> None:
    new = with_lines("import os", "os._exit(0)")
    diff = git_diff(tmp_path, {"k.py": BASE}, {"k.py": new})
    assert "process-exit" in rules(scan(diff, lambda p: None))
    broken = with_lines("def broken(:", "    import ctypes")
    diff = git_diff(tmp_path / "b", {"k.py": BASE}, {"k.py": broken})
    assert {"unparsed", "native-access"} <= rules(scan(diff, {"k.py": broken}.get))


# --- legitimate code raises nothing --------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["rmsnorm", "adaln"])
def test_the_bundled_solutions_raise_nothing(tmp_path: Path, kernel: str) -> None:
    solution = (PKG / "kernels" / kernel / "solution" / f"{kernel}.py").read_text()
    baseline = (PKG / "kernels" / kernel / "baseline" / f"{kernel}.py").read_text()
    path = f"kernels/{kernel}/solution/{kernel}.py"
    assert scan_change(tmp_path, solution, baseline, path) == []  # every line of it the candidate's
    diff = git_diff(tmp_path / "new", {}, {path: solution})  # and as a new file
    assert scan(diff, {path: solution}.get) == []


TRITON = '''"""Typical Triton launch code: autotune, heuristics, per-shape launch configs."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from types import ModuleType

import torch
import triton
import triton.language as tl

PARAMS = json.loads((Path(__file__).resolve().parent / "params.json").read_text())
DTYPE = getattr(torch, os.environ.get("SCALE_DTYPE", "float16"))
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (256, 512) for w in (4, 8)],
    key=["n"],
)
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def _scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 2)
    else:
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


@functools.cache
def launch_config(n: int, dtype: torch.dtype) -> dict[str, int]:
    """Per-shape launch parameters, keyed by shape and dtype (what real Triton code caches)."""
    key = f"n={n},dtype={str(dtype).split('.')[-1]}"
    entry = PARAMS.get(key, {})
    return {"num_warps": int(entry.get("num_warps", 4)), "itemsize": dtype.itemsize}


@functools.lru_cache(maxsize=None)
def sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def describe(module: ModuleType) -> str:
    return module.__name__


def scale(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    assert x.is_contiguous() and x.data_ptr() % 16 == 0, "aligned, contiguous input"
    out = torch.empty_like(x) if out is None else out
    n = x.numel()
    meta = launch_config(n, x.dtype)
    grid = lambda m: (triton.cdiv(n, m["BLOCK"]),)  # noqa: E731
    _scale[grid](x, out, n)
    if meta["num_warps"] > 8:
        raise ValueError(f"scale: bad launch config {meta}")
    return out
'''


def test_typical_triton_launch_code_raises_nothing(tmp_path: Path) -> None:
    assert scan_change(tmp_path, TRITON) == []


HONEST_KERNEL = '''"""What honest kernel files hold near the constructs the state and lazy-result rules read."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import NamedTuple

import torch

DEFAULTS = {"BLOCK": 128, "num_warps": 4}
_NORM_EPS = 1e-6


@dataclasses.dataclass(frozen=True)
class Launch:
    block: int = 128
    warps: int = 4


class Meta(NamedTuple):
    block: int
    warps: int


@dataclasses.dataclass
class Acc:
    """Per-call bookkeeping: made inside the call, changed there."""

    parts: list = dataclasses.field(default_factory=list)

    def add(self, x: torch.Tensor) -> None:
        self.parts.append(x)


class Norm(torch.nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight


NORM = Norm(4)


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # noqa: ANN001, ANN205
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):  # noqa: ANN001, ANN205
        (x,) = ctx.saved_tensors
        return g * 2


@contextlib.contextmanager
def span(name: str):  # noqa: ANN201
    yield name


@functools.cache
def launch_config(shape: tuple[int, ...], dtype: torch.dtype) -> dict[str, int]:
    return {"BLOCK": 128 if shape[-1] <= 4096 else 256, "itemsize": dtype.itemsize}


def _fill(out: torch.Tensor, x: torch.Tensor) -> None:
    out.copy_(x)


def kernel(x: torch.Tensor, out: torch.Tensor | None = None, block: int = 128, eps: float = 1e-6,
           dtype: torch.dtype = torch.float16, grid: tuple[int, int] = (1, 1), name: str = "k", scale: float = -1.0,
           device: torch.device = torch.device("cpu"), meta: dict = DEFAULTS, cfg: Launch = Launch(),
           act=torch.relu, key=lambda m: m["BLOCK"], shape=torch.Size([1])) -> torch.Tensor:  # noqa: ANN001
    out = torch.empty_like(x) if out is None else out
    conf = launch_config(tuple(x.shape), x.dtype)
    b, w = Meta(meta["BLOCK"], cfg.warps)
    acc = Acc()
    acc.add(x)
    parts = []

    def emit(y: torch.Tensor) -> None:
        parts.append(y)

    emit(x)
    y = x.clone()
    y.mul_(2)
    torch.mul(y, 1, out=y)
    on_gpu = getattr(x, "is_cuda", False) and hasattr(x, "device")
    run = lambda: out.copy_(y)  # noqa: E731
    run()
    _fill(out, y)
    total = sum(float(v) for v in parts[0].flatten()[:2])
    sizes = tuple(s * 2 for s in x.shape)
    with span("k"):
        out.add_(NORM(x) * 0 + total * 0 + conf["BLOCK"] * 0 + b * w * 0 + len(sizes) * 0 + on_gpu * 0)
    return out


kernel_64 = functools.partial(kernel, block=64, grid=(2, 1))


if __name__ == "__main__":
    kernel(torch.ones(4))
'''


def test_honest_kernel_code_near_the_state_and_lazy_rules_raises_nothing(tmp_path: Path) -> None:
    """Plain and immutable defaults (a frozen dataclass instance, a module-level dict only
    read), a NamedTuple, a dataclass with a default_factory changed per call on its own
    instance, an nn.Module instance at module level that forward() does not change, an
    autograd.Function, a context manager that yields, a cache keyed on a shape, per-call
    closures, in-place ops (and out=) on the call's own tensors, attributes of the input only
    read, generator expressions consumed, functools.partial of plain values, the __main__
    guard."""
    assert scan_change(tmp_path, HONEST_KERNEL) == []
    diff = git_diff(tmp_path / "new", {}, {"k.py": HONEST_KERNEL})
    assert scan(diff, {"k.py": HONEST_KERNEL}.get) == []


NEW_NOTES = (
    "default argument",
    "closure variable",
    "nonlocal",
    "class attribute",
    "module-level",
    "instance",
    "the result of the cached",
    "the caller's data",
    "bench's own module",
)
"""Notes of findings the state, lazy-result and __main__ rules make (module-level: the older rule, kept)."""


def test_the_repos_kernels_and_examples_raise_no_finding_of_the_new_rules() -> None:
    """Every Python file of kernels/ and examples/ (harness and benches included), read as new
    files: no lazy-result, no state kept between calls beyond the harness's three known
    module-level caches, no __main__ access, no store on disk."""
    files = sorted(p for d in (PKG / "kernels", REPO / "examples") for p in d.rglob("*.py") if ".runs" not in p.parts)
    assert len(files) > 20
    found = []
    for f in files:
        path, text = str(f.relative_to(PKG if f.is_relative_to(PKG) else REPO)), f.read_text()
        found += scan(new_file_diff(path, text), {path: text}.get)
    # kopt's own serve-by-import harness reads a captured callable's closure to find the tensors
    # it returns, and the bench module's namespace to find its perf_report marks
    # (kernels/harness/imported.py): the scan flags each as it would in a candidate's diff
    own = {
        (f.rule, f.text)
        for f in found
        if f.path == "kernels/harness/imported.py" and f.rule in ("frame-inspection", "dynamic-access")
    }
    assert ("frame-inspection", "visit(cell.cell_contents, level - 1)") in own, own
    assert any("vars(module)" in text for rule, text in own if rule == "dynamic-access"), own
    found = [f for f in found if (f.rule, f.text) not in own]
    assert not [f for f in found if f.rule in ("lazy-result", "frame-inspection")]
    state = {(f.path, f.text.split("  # ")[-1]) for f in found if f.rule == "module-state"}
    assert state == {
        ("kernels/harness/locate.py", "module-level _KEPT changed per call"),
        ("kernels/harness/params.py", "module-level _SMS changed per call"),
        ("kernels/harness/timing.py", "module-level LIVE_GRAPHS changed per call"),
    }, state
    assert not [f for f in found if any(n in f.text for n in NEW_NOTES) and f.rule != "module-state"]
    stores = ("shelve", "dbm", "sqlite", "mmap", "pickle", "memmap", "from_file", ".dump(", ".to_")
    assert not [f for f in found if f.rule == "file-write" and any(s in f.text for s in stores)]


def test_a_lazy_class_of_best_returned_anew_is_the_candidates(tmp_path: Path) -> None:
    """The class was already there; the candidate starts returning it: the return is quoted."""
    old = (
        BASE
        + "\n\nclass _Later:\n    def __init__(self, x):\n        self.x = x\n\n    def __array__(self, dtype=None):\n"
        "        return self.x.numpy()\n"
    )
    new = old.replace("    return out\n", "    return _Later(out)\n", 1)
    found = scan_change(tmp_path, new, old)
    assert [(f.rule, f.line) for f in found] == [("lazy-result", 10)], found
    assert "a _Later: computes on __array__" in found[0].text


def test_state_the_candidate_did_not_touch_is_not_its_finding(tmp_path: Path) -> None:
    """A mutable default BEST already had, unchanged and unused by the candidate's lines."""
    old = "def k(x, _memo={}):\n    _memo[1] = x\n    return x\n"
    assert scan_change(tmp_path, old.replace("return x", "return x + 1"), old) == []
    found = scan_change(tmp_path / "b", old.replace("_memo={}", "_memo={}, _n=[0]"), old)
    assert {(f.rule, f.line) for f in found} >= {("module-state", 1)}


def test_a_cache_keyed_on_the_tensor_itself_is_not_legitimate(tmp_path: Path) -> None:
    bad = TRITON.replace("def launch_config(n: int, dtype: torch.dtype)", "def launch_config(x, dtype: torch.dtype)")
    bad = bad.replace('key = f"n={n},dtype', 'n = x.numel()\n    key = f"n={n},dtype').replace(
        "launch_config(n, x.dtype)", "launch_config(x, x.dtype)"
    )
    found = scan_change(tmp_path, bad)
    assert rules(found) == {"input-cache"} and "caches launch_config()" in found[0].text


# --- the allow-list, the reason, the diff parser ----------------------------------------------------------------


def test_the_allow_list_covers_a_rule_on_matching_paths_only(tmp_path: Path) -> None:
    new = with_lines("CALLS = 0", "def count():", "    global CALLS", "    CALLS += 1", "import os", "os._exit(0)")
    every = scan_change(tmp_path, new)
    assert {"module-state", "process-exit"} <= rules(every)
    some = scan_change(tmp_path / "a", new, allow=("module-state:solution/*.py",))
    assert "module-state" not in rules(some) and "process-exit" in rules(some)
    other = scan_change(tmp_path / "b", new, allow=("module-state:csrc/*",))
    assert "module-state" in rules(other)
    assert scan_change(tmp_path / "c", new, allow=("*:solution/kernel.py",)) == []
    assert Allow("module-state", "solution/*").covers(Finding("module-state", "solution/a/b.py", 1, ""))


@pytest.mark.parametrize(
    "entry,needle",
    [
        ("module-state", 'must be "rule-id:path-glob"'),
        ("module-state:", 'must be "rule-id:path-glob"'),
        ("modulestate:*.py", "unknown rule 'modulestate'"),
    ],
)
def test_a_bad_allow_entry_names_itself(entry: str, needle: str) -> None:
    with pytest.raises(BadInput, match=needle):
        parse_allow([entry])
    with pytest.raises(BadInput, match=r"kopt.toml: \[target\].allow_constructs\[0\]"):
        loads_config(f'[target]\nbench = "b"\nmetric = "us"\nallow_constructs = ["{entry}"]\n', source="kopt.toml")


def test_the_allow_list_is_a_kopt_toml_key() -> None:
    cfg = loads_config('[target]\nbench = "b"\nmetric = "us"\nallow_constructs = ["module-state:solution/*.py"]\n')
    assert cfg.target.allow_constructs == ["module-state:solution/*.py"]
    assert loads_config(dumps_config(cfg)) == cfg


def test_the_review_reason_quotes_lines_and_is_capped() -> None:
    one = [Finding("process-exit", "k.py", 12, "os._exit(0)")]
    assert (
        review_reason(one) == "the diff reaches outside the kernel (process-exit): k.py:12 [process-exit] `os._exit(0)`"
    )
    many = [Finding("file-write", "k.py", n, "open('x', 'w').write('y' * 100)") for n in range(1, 60)]
    text = review_reason(many, max_chars=400)
    assert len(text) <= 400 and text.endswith("more)") and "\n" not in text and "k.py:1 " in text
    assert review_reason([]) == ""


def test_the_diff_parser_reads_new_deleted_renamed_and_quoted_paths(tmp_path: Path) -> None:
    old = {"a.py": "x = 1\n", "gone.py": "y = 2\n", "moved.py": "z = 3\n"}
    new = {"a.py": "x = 1\nw = 0", "moved/é ü.py": "z = 3\n", "new.cu": "int f() { return 0; }\n"}
    files = {f.path: f for f in parse_diff(git_diff(tmp_path, old, new))}
    assert set(files) == {"a.py", "gone.py", "moved.py", "moved/é ü.py", "new.cu"}
    assert files["a.py"].added == {2: "w = 0"}  # no newline at the end: still read
    assert files["gone.py"].deleted and files["moved.py"].deleted
    assert files["moved/é ü.py"].new_file and files["moved/é ü.py"].added == {1: "z = 3"}


def test_docs_list_every_rule() -> None:
    files_md = (REPO / "docs" / "files.md").read_text()
    assert all(f"| `{rule}` |" in files_md for rule in RULES)


def test_files_git_diff_does_not_show_and_a_cut_diff(tmp_path: Path) -> None:
    from kopt_supervisor.engine.diffscan import new_file_diff

    # a candidate that ignores its own file (.gitignore) is read through new_file_diff
    hidden = "import os\nos._exit(0)\n"
    diff = git_diff(tmp_path, {"k.py": BASE}, {"k.py": BASE, ".gitignore": "evil.py\n"})
    diff += new_file_diff("evil.py", hidden) + new_file_diff("lib.so", None)
    found = scan(diff, {"evil.py": hidden}.get)
    assert {(f.rule, f.path, f.line) for f in found} == {("process-exit", "evil.py", 2), ("binary-file", "lib.so", 0)}
    assert parse_diff(new_file_diff("e.py", "a\nb\n"))[0].added == {1: "a", 2: "b"}
    # a capped diff is a finding of its own, which no allow entry removes
    cut = scan(diff[:200], {"evil.py": hidden}.get, allow=("*:*",), truncated=True)
    assert [f.rule for f in cut] == ["diff-truncated"]
    assert "the diff [diff-truncated]" in review_reason(cut)


# --- wave 3: lines as git counts them, the file as the interpreter reads it -------------------------------------------


def test_the_diff_is_split_at_lf_only(tmp_path: Path) -> None:
    """A form feed, U+2028, \\x1c or a lone CR inside an added line is part of that line: every
    later added line keeps its number (str.splitlines broke there and shifted them)."""
    from kopt_supervisor.engine import gitops

    new = BASE + "a = 1\x0c\nb = 2\u2028\nc = 3\x1c\nd = 4\re = 5\nf = 6\n"
    git_diff(tmp_path, {"k.py": BASE}, {"k.py": new.encode()})  # (its text=True output turns a CR into LF)
    files = parse_diff(gitops.scan_diff(tmp_path / "repo", "HEAD")[0])  # as the loop reads it: bytes, no translation
    assert files[0].added == {11: "a = 1\x0c", 12: "b = 2\u2028", 13: "c = 3\x1c", 14: "d = 4\re = 5", 15: "f = 6"}


def test_read_python_maps_git_lines_onto_python_lines() -> None:
    from kopt_supervisor.engine.diffscan.findings import Undecodable, read_python

    src = read_python(b"a = 1\r\nb = 2\rc = 3\nd = 4\n")
    assert src.exact and src.text.count("\n") == 3 and src.cookie_line == 0
    assert src.spans[:3] == [(1, 1), (2, 3), (4, 4)]  # CRLF is one break, the lone CR another
    assert src.python_lines({2}) == {2, 3} and src.git_line(3) == 2 and src.git_line(4) == 3
    latin = read_python(b"# coding: latin-1\nx = '\xe9'\n")
    assert latin.exact and latin.cookie_line == 1 and "é" in latin.text  # single-byte: mapped, but declared
    utf7 = read_python(b"# coding: utf-7\nx = 1 # +AAo-y = 2\n")
    assert not utf7.exact and utf7.python_lines({2}) == {1, 2, 3, 4}  # every line counts
    with pytest.raises(Undecodable):
        read_python(b"x = '\xe9'\n")  # not UTF-8 and no declaration: the interpreter refuses it too
    with pytest.raises(Undecodable):
        read_python(b"# coding: no-such-codec\nx = 1\n")


def test_a_symlink_or_gitlink_in_the_diff_is_named() -> None:
    diff = (
        "diff --git a/k.py b/k.py\nnew file mode 120000\nindex 0000000..1234567\n--- /dev/null\n+++ b/k.py\n"
        "@@ -0,0 +1 @@\n+../elsewhere.py\n\\ No newline at end of file\n"
        "diff --git a/sub b/sub\nnew file mode 160000\nindex 0000000..89abcde\n--- /dev/null\n+++ b/sub\n"
        "@@ -0,0 +1 @@\n+Subproject commit 89abcde\n"
    )
    assert [(f.path, f.link) for f in parse_diff(diff)] == [("k.py", "symlink"), ("sub", "gitlink")]
    assert [(f.rule, f.path) for f in scan(diff, lambda p: None)] == [("unread", "k.py"), ("unread", "sub")]
