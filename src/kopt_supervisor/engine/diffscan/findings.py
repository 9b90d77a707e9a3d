"""The diff scan's findings: the rules, a finding, the allow-list, the review reason. Pure."""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

from kopt_supervisor.engine.errors import BadInput

RULES: dict[str, str] = {
    "patch-module": "assigns or deletes attributes of another module or of what it imports (time.perf_counter = f, "
    "setattr(time, ...), vars(m)[k] = v, f.__code__ = ..., unittest.mock), or changes an object "
    "another module holds (mod.TABLE[k] = v, mod.LIST.append(x), mod.REF.zero_(), out=mod.REF), also "
    "through a loop variable, a parameter or default, a return value or an attribute the file sets "
    "to the module",
    "sys-modules": "uses sys.modules (replacing or fetching another module)",
    "builtins": "uses builtins or __builtins__",
    "frame-inspection": "reads frames, the stack, the process's objects or the bench's own module (sys._getframe, "
    "inspect.currentframe/stack, traceback.extract_stack, f_back, f_locals, gc.*, sys.settrace, "
    "logging.currentframe, warnings recorded with their caller's line, tracemalloc, "
    "torch.profiler, whether the call is being captured into a CUDA graph, __main__)",
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
    "dictionaries), or kept in the caller's own arguments (cfg.setdefault(k, v), out.append(y), "
    "an attribute set on a parameter after probing for it)",
    "module-state": "keeps state between calls (global, a module-level container, a mutable default argument, a "
    "closure variable of an escaping function, a class attribute or a module-level instance's "
    "attributes, function attributes, a cached function's result changed per call, an iterator "
    "made at import and read per call)",
    "lazy-result": "returns results that compute when read, not when timed (a class with __iter__, __array__, "
    "__float__, __eq__, __getitem__... hooks; a generator; map/filter/zip returned)",
    "native-access": "ctypes, cffi or mmap",
    "import-tricks": "importlib, __import__, sys.meta_path, sys.path changes, runpy, types.ModuleType",
    "exec-eval": "exec, eval, compile, code objects, or a payload run through a loader: marshal, pickle (and "
    "copyreg, a class's __reduce__), torch.load without weights_only=True, numpy.load with "
    "allow_pickle, yaml.load, joblib, jsonpickle, logging.config, pdb/profile/doctest/trace runs), "
    "a payload decoder (base64, binascii, zlib/lzma/bz2 decompress, codecs.decode, bytes.fromhex), "
    "or C/CUDA source compiled from text the file does not hold (load_inline, cupy.RawKernel)",
    "dynamic-access": "reaches attributes by computed name or namespace (getattr with a computed or sensitive name, "
    "operator.attrgetter/methodcaller with a computed one, globals(), vars(), __dict__, "
    "__globals__, __self__, __subclasses__ and other introspection attributes, setattr passed "
    "around, a sensitive module passed as a value, a module-level __getattr__)",
    "global-setting": "changes a process-wide setting that the bench's reference and inputs share "
    "(torch.set_float32_matmul_precision, torch.set_flush_denormal, torch.manual_seed, "
    "torch.set_default_dtype, numpy.seterr, random.seed, locale.setlocale, os.chdir, os.nice)",
    "stdout-write": "prints to stdout (the bench's CSV may be read from there)",
    "side-stream": "launches work on other CUDA streams (torch.cuda.Stream, torch.cuda.stream)",
    "clock-time": "reads clocks or timing events, or sleeps (time.*, torch.cuda.Event, elapsed_time)",
    "tensor-subclass": "intercepts torch operations (a Tensor subclass, __torch_function__, __torch_dispatch__, "
    "torch.overrides, dispatch modes)",
    "shadow-module": "a new file named like a module the bench imports (time.py, torch.py)",
    "startup-hook": "a file the interpreter runs at startup (sitecustomize.py, usercustomize.py, *.pth)",
    "binary-file": "a binary file (cannot be read)",
    "diff-truncated": "the diff was cut before its end: what follows was not read",
    "unparsed": "a Python file that does not parse or decode (read by the text rules only)",
    "unread": "a changed file the scan could not read as the diff shows it (gone, a symlink or gitlink, over the "
    "read limit, cut or changed after the diff): its added lines met the text rules only",
    "source-encoding": "a Python file that declares an encoding other than UTF-8 (utf-7 and unicode_escape decode "
    "to line breaks git does not show): every line of it counts as the candidate's",
    "hidden-text": "an added line that reads differently than it runs: a lone CR (a line break to Python, not to "
    "git), a form feed, VT, \\x1c-\\x1e, \\x85, U+2028 or U+2029 (a break to editors and "
    "str.splitlines, not to Python), a bidi control (reorders what a reviewer sees); quoted with "
    "them escaped",
    "c-env": "C/C++: getenv, setenv, putenv, environ",
    "c-interpose": "C/C++: dlsym, dlopen, RTLD_NEXT",
    "c-file-write": "C/C++: fopen for writing, ofstream, open with O_WRONLY/O_CREAT, unlink, rename",
    "c-thread": "C/C++: std::thread, std::async, pthread_create, fork, system, popen, exec*",
    "c-exit": "C/C++: exit, _exit, abort, atexit, signal, sigaction, kill",
    "c-timer-interpose": "C/C++: defines (or #defines) clock, gettimeofday, clock_gettime, cudaEventRecord, "
    "cudaEventElapsedTime, cuLaunchKernel and kin",
    "c-constructor": "C/C++: __attribute__((constructor/destructor)), .init_array",
    "c-state": "C/C++/CUDA: a static, thread_local, __device__ or __managed__ variable that is not const: state "
    "kept between calls (a cached result, a call counter)",
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
