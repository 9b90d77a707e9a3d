"""The diff scan's findings: the rules, a finding, the allow-list, the review reason. Pure."""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

from kopt_supervisor.engine.errors import BadInput

RULES: dict[str, str] = {
    "patch-module": "assigns or deletes attributes of another module or of what it imports (time.perf_counter = f, "
                    "setattr(time, ...), vars(m)[k] = v, f.__code__ = ..., unittest.mock)",
    "sys-modules": "uses sys.modules (replacing or fetching another module)",
    "builtins": "uses builtins or __builtins__",
    "frame-inspection": "reads frames, the stack or the bench's own module (sys._getframe, inspect.currentframe/"
                        "stack, f_back, f_locals, gc.get_referrers, sys.settrace, __main__)",
    "process-exit": "ends or hooks the process (os._exit, sys.exit, exit, os.kill, raise SystemExit, atexit, signal, "
                    "__del__, weakref.finalize)",
    "file-write": "writes, moves or deletes files, or keeps a store on disk (open(..., 'w'/'a'), Path.write_*, "
                  "os.write, os.remove, shutil, tempfile, shelve, dbm, sqlite3, mmap, pickle.dump, numpy.save/memmap, "
                  "torch.save)",
    "env-write": "writes the environment (os.environ[...] = , os.putenv, os.environ.update)",
    "kopt-probe": "reads kopt's names or the process's insides (a 'KOPT...' string, /proc/)",
    "worktree-probe": "tells which tree or side it runs in (os.getcwd, Path.cwd, sys.argv, __file__ or __name__ "
                      "compared, 'best'/'cand' path strings)",
    "thread-process": "starts threads or processes (threading, multiprocessing, subprocess, concurrent.futures, "
                      "asyncio, os.fork, os.system)",
    "input-cache": "caches keyed on inputs or pointers (functools.cache/lru_cache on a function taking tensors "
                   "or called with its caller's data as tuple(xs)/xs.tobytes(), keys from data_ptr()/id(x), weak "
                   "dictionaries)",
    "module-state": "keeps state between calls (global, a module-level container, a mutable default argument, a "
                    "closure variable of an escaping function, a class attribute or a module-level instance's "
                    "attributes, function attributes, a cached function's result changed per call)",
    "lazy-result": "returns results that compute when read, not when timed (a class with __iter__, __array__, "
                   "__float__, __eq__, __getitem__... hooks; a generator; map/filter/zip returned)",
    "native-access": "ctypes, cffi or mmap",
    "import-tricks": "importlib, __import__, sys.meta_path, sys.path changes, runpy, types.ModuleType",
    "exec-eval": "exec, eval, compile, code objects, marshal or pickle loads",
    "dynamic-access": "reaches attributes by computed name or namespace (getattr with a computed or sensitive name, "
                      "globals(), vars(), __dict__, setattr passed around, a sensitive module passed as a value)",
    "stdout-write": "prints to stdout (the bench's CSV may be read from there)",
    "side-stream": "launches work on other CUDA streams (torch.cuda.Stream, torch.cuda.stream)",
    "clock-time": "reads clocks or timing events, or sleeps (time.*, torch.cuda.Event, elapsed_time)",
    "tensor-subclass": "intercepts torch operations (a Tensor subclass, __torch_function__, __torch_dispatch__, "
                       "torch.overrides, dispatch modes)",
    "shadow-module": "a new file named like a module the bench imports (time.py, torch.py)",
    "startup-hook": "a file the interpreter runs at startup (sitecustomize.py, usercustomize.py, *.pth)",
    "binary-file": "a binary file (cannot be read)",
    "diff-truncated": "the diff was cut before its end: what follows was not read",
    "unparsed": "a Python file that does not parse (read by the text rules only)",
    "c-env": "C/C++: getenv, setenv, putenv, environ",
    "c-interpose": "C/C++: dlsym, dlopen, RTLD_NEXT",
    "c-file-write": "C/C++: fopen for writing, ofstream, open with O_WRONLY/O_CREAT, unlink, rename",
    "c-thread": "C/C++: std::thread, std::async, pthread_create, fork, system, popen, exec*",
    "c-exit": "C/C++: exit, _exit, abort, atexit, signal, sigaction, kill",
    "c-timer-interpose": "C/C++: defines (or #defines) clock, gettimeofday, clock_gettime, cudaEventRecord, "
                         "cudaEventElapsedTime, cuLaunchKernel and kin",
    "c-constructor": "C/C++: __attribute__((constructor/destructor)), .init_array",
    "ld-preload": "LD_PRELOAD, DYLD_INSERT_LIBRARIES, -Wl,--wrap=, /etc/ld.so.preload",
    "outside-sources": "a change to a tracked file outside [target].sources (declared): each changed line quoted",
}
"""Every rule id, with what it catches (the ids `[target].allow_constructs` names)."""

TEXT_MAX = 160
"""A finding's line is quoted up to this many characters."""


@dataclass(frozen=True)
class Finding:
    rule: str
    """A key of RULES."""
    path: str
    line: int
    """1-based line of the candidate's new version (0: the file as a whole)."""
    text: str
    """The line, stripped and capped (or what the finding is about)."""


@dataclass(frozen=True)
class Raw:
    """A finding of the Python rules before it is placed: the node it is about (its lines
    decide whether it is the candidate's) and a note appended to the quoted line."""

    rule: str
    node: ast.AST
    note: str = ""


@dataclass(frozen=True)
class Allow:
    rule: str
    """A rule id, or "*" for every rule."""
    glob: str

    def covers(self, f: Finding) -> bool:
        return (self.rule in ("*", f.rule)) and fnmatch.fnmatchcase(f.path, self.glob)


def quote(line: str) -> str:
    s = line.strip()
    return s if len(s) <= TEXT_MAX else s[: TEXT_MAX - 1] + "…"



def parse_allow(entries: Sequence[str], *, where: str = "[target].allow_constructs") -> tuple[Allow, ...]:
    """Entries "rule-id:path-glob" (rule "*" for every rule; the glob is fnmatch's, over the
    path relative to the repository root, `*` crossing "/"). BadInput naming a bad entry."""
    out = []
    for i, entry in enumerate(entries):
        rule, sep, glob = entry.partition(":")
        rule, glob = rule.strip(), glob.strip()
        if not sep or not glob:
            raise BadInput(f'{where}[{i}] must be "rule-id:path-glob", not {entry!r}')
        if rule != "*" and rule not in RULES:
            raise BadInput(f"{where}[{i}] names the unknown rule {rule!r} (rules: {', '.join(sorted(RULES))})")
        out.append(Allow(rule, glob))
    return tuple(out)


def review_reason(findings: Sequence[Finding], *, max_chars: int = 800) -> str:
    """One line for the verdict: the rules, then each finding quoted as path:line `text`,
    capped at max_chars with the count of what was left out."""
    if not findings:
        return ""
    rules = ", ".join(dict.fromkeys(f.rule for f in findings))
    head = f"the diff reaches outside the kernel ({rules}): "
    parts: list[str] = []
    used = len(head)
    for k, f in enumerate(findings):
        where = f"{f.path}:{f.line}" if f.line else (f.path or "the diff")
        part = f"{where} [{f.rule}] `{f.text}`"
        left = len(findings) - k - 1
        tail = f"; (+{left} more)" if left else ""
        if parts and used + len(part) + 2 + len(tail) > max_chars:
            return head + "; ".join(parts) + f"; (+{len(findings) - k} more)"
        parts.append(part)
        used += len(part) + 2
    return head + "; ".join(parts)
