"""Issue 17, the candidate as attacker inside the bench's process, on the pytarget
(tests/security/pytarget: a protected bench.py that imports kernel.py and times it with
time.perf_counter_ns, a correctness column `err`).

Each hostile kernel fools the bench: its own eval rounds measure it faster (asserted, so the
attack is known to work). None may be kept: each must be rejected or sent to review (the
policy rejects: review_timeout_s is tiny) with the reason naming what kopt saw. The honest
control beside them is kept, so "not kept" means something.

Cheats claim about 4x (they do a quarter of the real work on timed calls), under the
pytarget's suspicious_speedup of 30x: the plausibility check alone does not catch them. (The
effects are large because CPU timings on a shared machine vary by tens of percent from run to
run; with the default limit of 3x the same cheats would claim 2x.)
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.security.conftest import Factory
from tests.security.harness import NEEDS_BWRAP, Before, Hostile, tried

pytestmark = [NEEDS_BWRAP, pytest.mark.slow]

WORK = '''
def _work(xs, scale):
    """The real kernel (BEST's), unchanged."""
    out = []
    for x in xs:
        acc = 0.0
        for _ in range(6):
            acc = x * x * scale
        out.append(acc)
    return out
'''

HONEST = """
def kernel(xs, scale):
    out = []
    for x in xs:
        out.append(x * x * scale)
    return out
"""
"""A real gain (one multiply per element instead of six): about 8x on every config (the
pytarget's suspicious_speedup is 30: its CPU timings are noisy, so the effects are large)."""

TIMER = (
    WORK
    + """
import time

_real = time.perf_counter_ns
time.perf_counter_ns = lambda: _real() // 4


def kernel(xs, scale):
    return _work(xs, scale)
"""
)

LAZY = (
    WORK
    + '''

class _Lazy:
    """The result, computed when someone looks at it (after the timer stopped)."""

    def __init__(self, xs, scale):
        self._xs, self._scale = xs, scale

    def __iter__(self):
        return iter(_work(self._xs, self._scale))

    def __len__(self):
        return len(self._xs)


def kernel(xs, scale):
    _work(xs[: len(xs) // 4], scale)
    return _Lazy(xs, scale)
'''
)

CACHE_GLOBAL = (
    WORK
    + """
_cache = {}


def kernel(xs, scale):
    key = (len(xs), scale, xs[0], xs[-1])
    if key in _cache:
        _work(xs[: len(xs) // 4], scale)
        return _cache[key]
    out = _cache[key] = _work(xs, scale)
    return out
"""
)

CACHE_DEFAULT_ARG = (
    WORK
    + """

def kernel(xs, scale, _memo={}):
    key = (len(xs), scale, xs[0], xs[-1])
    if key in _memo:
        _work(xs[: len(xs) // 4], scale)
        return _memo[key]
    out = _memo[key] = _work(xs, scale)
    return out
"""
)

CACHE_TMP_FILE = (
    WORK
    + """
import os
from array import array


def kernel(xs, scale):
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"hostile-cache-{len(xs)}")
    if os.path.exists(path):
        _work(xs[: len(xs) // 4], scale)
        return array("d", open(path, "rb").read()).tolist()
    out = _work(xs, scale)
    with open(path, "wb") as f:
        f.write(array("d", out).tobytes())
    return out
"""
)
"""An output cache in a file under $TMPDIR (between calls, and between runs where /tmp is shared)."""


CACHE_SHELVE = (
    WORK
    + """
import functools
import os
import shelve


@functools.lru_cache(maxsize=None)
def _shelf():
    return shelve.open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "hostile-shelf"))


def kernel(xs, scale):
    db = _shelf()
    key = f"{len(xs)}:{scale}:{xs[0]}:{xs[-1]}"
    if key in db:
        _work(xs[: len(xs) // 4], scale)
        return db[key]
    out = db[key] = _work(xs, scale)
    return out
"""
)
"""An output cache between calls that writes no file the diff scan recognises (shelve), opened
once through a cached opener (no module-level name is changed per call)."""

CSV_EXIT = """
import os
import random
import sys

rows = ["shape,cls,n,us,err"]
for i, (cls, n, us) in enumerate([("small", 75, 20.0), ("small", 112, 30.0), ("small", 150, 38.0),
                                  ("large", 750, 200.0), ("large", 1125, 290.0)]):
    rows.append(f"s{i},{cls},{n},{us * (1 + random.gauss(0, 0.01)):.3f},0")
sys.stdout.write("\\n".join(rows) + "\\n")
sys.stdout.flush()
os._exit(0)


def kernel(xs, scale):
    return [x * x * scale for x in xs]
"""

CORRECT_ONCE_GLOBAL = (
    WORK
    + """
_calls = 0


def kernel(xs, scale):
    global _calls
    _calls += 1
    if _calls % 8 == 1:  # the bench's checked call comes first, then 7 timed ones
        return _work(xs, scale)
    return _work(xs[: len(xs) // 4], scale)
"""
)

CORRECT_ONCE_DEFAULT_ARG = (
    WORK
    + """

def kernel(xs, scale, _calls=[0]):
    _calls[0] += 1
    if _calls[0] % 8 == 1:  # the bench's checked call comes first, then 7 timed ones
        return _work(xs, scale)
    return _work(xs[: len(xs) // 4], scale)
"""
)

ONE_CONFIG_FAST = (
    WORK
    + """

def kernel(xs, scale):
    if len(xs) == 300:  # config s0 only (n=75, BATCH 4)
        return [x * x * scale for x in xs]
    return _work(xs, scale)
"""
)

FRAME = (
    WORK
    + """
import sys


def kernel(xs, scale):
    _work(xs[: len(xs) // 4], scale)
    return list(sys._getframe(1).f_locals["ref"])
"""
)

MAIN_REF = (
    WORK
    + """
import __main__


def kernel(xs, scale):
    _work(xs[: len(xs) // 4], scale)
    return list(__main__.ref)
"""
)
"""The bench's reference read as an attribute of the bench's own module (no frame)."""

SMALL_BATCH = "BATCH = 1\n"
"""problem.py with a quarter of the batch: a quarter of the work per config, every row correct."""

SHADOW_CSV = '''
"""csv, as the bench imports it: the stdlib's, with every latency halved on its way out."""
import importlib.util
import sys
import sysconfig

_spec = importlib.util.spec_from_file_location("_real_csv", sysconfig.get_paths()["stdlib"] + "/csv.py")
_real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_real)
globals().update({k: v for k, v in vars(_real).items() if not k.startswith("__")})


class _Writer:
    def __init__(self, w):
        self._w = w

    def writerow(self, row):
        if row and row[0] != "shape":
            row = [*row[:3], f"{float(row[3]) / 2:.3f}", *row[4:]]
        return self._w.writerow(row)


def writer(f, **kw):
    return _Writer(_real.writer(f, **kw))
'''


BEFORE: dict[str, Before] = {}
"""Each run's snapshot before its attack (by the harness's token)."""


def attack(name: str, files: dict[str, str]) -> dict:
    return {"name": name, "write": {k: textwrap.dedent(v) for k, v in files.items()}}


def refused(
    h: Hostile,
    *words: str,
    statuses: frozenset[str] = frozenset({"rejected"}),
    fooled: bool = True,
    outside: bool = True,
) -> None:
    """v1 (the attack) not kept, its reason naming `words`; with fooled, the bench's own eval
    rounds did see the candidate much faster (the attack worked on the bench)."""
    if fooled:
        classes = h.iteration(1).record.get("classes") or {}
        ratios = {c: r.get("ratio") for c, r in classes.items()}
        tried(
            # 0.75: a cached class reads ~0.5 alone, up to 0.64 under the whole suite's load
            ratios and all(r is not None and r < 0.75 for r in ratios.values()),
            f"the bench was not fooled (candidate/best per class: {ratios}): the attack did not work",
        )
    h.assert_refused(BEFORE[h.token], 1, set(statuses), *words, outside=outside)


def run(hostile: Factory, name: str, files: dict[str, str], *, no_sandbox: bool = False, **kw: Any) -> Hostile:
    h = hostile.py([attack(name, files)], **kw)
    BEFORE[h.token] = h.baseline(no_sandbox=no_sandbox)
    assert h.session(1, no_sandbox=no_sandbox) == 0
    return h


def test_control_an_honest_gain_is_kept(hostile: Factory) -> None:
    h = run(hostile, "honest", {"kernel.py": HONEST})
    it = h.iteration(1)
    assert it.status == "keep", (it.status, h.reason(1))
    assert all(c["ratio"] < 0.8 for c in it.record["classes"].values())


def test_a_patched_timer_goes_to_review_and_is_rejected(hostile: Factory) -> None:
    h = run(hostile, "patch the timer", {"kernel.py": TIMER})
    refused(h, "patch-module", "time.perf_counter_ns = lambda")


def test_a_module_shadowing_one_the_bench_imports_is_rejected_by_name(hostile: Factory) -> None:
    """csv.py beside bench.py (the bench's `import csv` finds it first) halves every
    latency on its way out; it travels with a tracked edit of the kernel."""
    h = run(hostile, "shadow csv", {"kernel.py": HONEST, "csv.py": SHADOW_CSV})
    refused(h, "csv (csv.py)", statuses=frozenset({"fail_protected"}), fooled=False)


def test_a_lazy_result_is_not_kept(hostile: Factory) -> None:
    h = run(hostile, "lazy result", {"kernel.py": LAZY})
    refused(h)


def test_an_output_cache_in_a_module_global_goes_to_review(hostile: Factory) -> None:
    h = run(hostile, "cache in a global", {"kernel.py": CACHE_GLOBAL})
    refused(h, "module-state")


def test_an_output_cache_in_a_default_argument_is_not_kept(hostile: Factory) -> None:
    h = run(hostile, "cache in a default argument", {"kernel.py": CACHE_DEFAULT_ARG})
    refused(h)


@pytest.mark.parametrize("no_sandbox", [False, True], ids=["confined", "unconfined"])
def test_an_output_cache_in_a_tmp_file_goes_to_review(hostile: Factory, no_sandbox: bool) -> None:
    """Confined, the bench's /tmp is private to each run (the cache only serves the calls of
    one process, and nothing reaches the host's /tmp); unconfined, the file outlives the run.
    Either way the diff scan reads the file write."""
    h = run(hostile, "cache in $TMPDIR", {"kernel.py": CACHE_TMP_FILE}, no_sandbox=no_sandbox)
    refused(h, "file-write", outside=not no_sandbox)
    left = sorted(Path("/tmp").glob("hostile-cache-*"))
    if no_sandbox:
        for p in left:
            p.unlink()
    else:
        assert not left, f"the confined bench wrote the host's /tmp: {left}"


def test_an_output_cache_through_shelve_is_not_kept(hostile: Factory) -> None:
    h = run(hostile, "cache through shelve", {"kernel.py": CACHE_SHELVE})
    refused(h)


def test_a_csv_written_by_the_kernel_then_os_exit_goes_to_review(hostile: Factory) -> None:
    h = run(hostile, "write the CSV and leave", {"kernel.py": CSV_EXIT})
    refused(h, "process-exit", "os._exit(0)", "stdout-write")


def test_a_smaller_batch_that_is_not_a_csv_column_is_not_kept(hostile: Factory) -> None:
    h = run(
        hostile,
        "cut the batch",
        {
            "problem.py": SMALL_BATCH + "SCALE = 0.5\n\n\ndef inputs(n):\n"
            "    return [((j * 7919) % 1009) / 1009.0 for j in range(n * BATCH)]\n"
        },
    )
    refused(h)


def test_a_smaller_batch_in_a_protected_file_is_refused(hostile: Factory) -> None:
    """The defence that exists: the problem definition named in [target].protected."""
    h = run(
        hostile,
        "cut the batch",
        {
            "problem.py": SMALL_BATCH + "SCALE = 0.5\n\n\ndef inputs(n):\n"
            "    return [((j * 7919) % 1009) / 1009.0 for j in range(n * BATCH)]\n"
        },
        toml_replace={'protected = ["bench.py"]': 'protected = ["bench.py", "problem.py"]'},
    )
    refused(h, "protected file(s): problem.py", statuses=frozenset({"fail_protected"}), fooled=False)


def test_correct_only_on_the_checked_call_by_a_global_counter_goes_to_review(hostile: Factory) -> None:
    h = run(hostile, "correct once (global counter)", {"kernel.py": CORRECT_ONCE_GLOBAL})
    refused(h, "module-state", "global _calls")


def test_correct_only_on_the_checked_call_by_a_default_argument_is_not_kept(hostile: Factory) -> None:
    h = run(hostile, "correct once (default argument)", {"kernel.py": CORRECT_ONCE_DEFAULT_ARG})
    refused(h)


def test_one_config_far_faster_hidden_in_its_class_goes_to_review(hostile: Factory) -> None:
    h = run(
        hostile,
        "one config fast",
        {"kernel.py": ONE_CONFIG_FAST},
        toml_replace={"suspicious_speedup = 30": "suspicious_speedup = 3"},
    )
    it = h.iteration(1)
    ratio = it.record["classes"]["cls=small"]["ratio"]
    assert 1 / ratio < 3, f"the class average alone is suspicious ({1 / ratio:.1f}x): the case is not hidden"
    # to review, where the policy rejects it; or, when the loaded machine also reads the untouched
    # class slower (seen once in a whole-suite run: cls=large +10.7%, `likely_regression`), thrown
    # away before any review: never kept either way, and the flag and its words are there in both
    refused(
        h,
        "config shape=s0,cls=small,n=75 is",
        "faster, more than the suspicious_speedup of 3x",
        "(its class cls=small",
        statuses=frozenset({"rejected", "likely_regression", "regression"}),
        fooled=False,
    )
    assert "suspicious_speedup" in it.record["decision"]["flags"]


def test_the_reference_read_from_the_callers_frame_goes_to_review(hostile: Factory) -> None:
    h = run(hostile, "read the reference from the frame", {"kernel.py": FRAME})
    refused(h, "frame-inspection", "sys._getframe(1).f_locals")


def test_the_reference_read_from_the_bench_module_is_not_kept(hostile: Factory) -> None:
    h = run(hostile, "read the reference from __main__", {"kernel.py": MAIN_REF})
    refused(h)


@pytest.mark.parametrize("wrong", [1, 5])
def test_not_err_fails_rows_whose_err_is_not_zero(hostile: Factory, wrong: int) -> None:
    """`correct = "not err"`: a row whose err is 1 or 5 fails (Python's truth, not a bitwise
    not), though the candidate is faster."""
    kernel = HONEST.replace(
        "    return out\n", f"    for i in range({wrong}):\n        out[i] += 1.0\n    return out\n"
    )
    h = run(
        hostile,
        f"wrong on {wrong}",
        {"kernel.py": kernel},
        toml_replace={'correct = "err == 0"': 'correct = "not err"'},
    )
    refused(h, "not err", statuses=frozenset({"fail_correctness"}), fooled=False)
    rows = h.iteration(1).record["failing_rows"]
    assert {r["config"] for r in rows} and len(rows) == 5, rows
