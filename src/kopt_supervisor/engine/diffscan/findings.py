"""The diff scan's findings and the text they are read from. Pure.

- The findings: every rule id with what it catches (`RULES`), a finding, the allow-list
  (`parse_allow`), the review reason.
- The text rules: C, C++, CUDA and HIP sources, every other file, and Python that cannot be
  parsed; applied to added lines (`text_rules`).
- A changed Python file read as the interpreter reads it, and git's line numbers mapped onto
  Python's (`read_python`). The diff numbers lines as git does (text between LF bytes, in the
  file's bytes); the interpreter decodes the bytes first (a BOM, or a `# coding:` declaration
  on line 1 or 2) and then ends a line at LF, CRLF or a lone CR. The two disagree on:

  - a lone CR: one git line, two Python lines (`x = 1\\rimport os` runs `import os`);
  - a declared encoding that decodes to line breaks git never sees (utf-7's `+AAo-`,
    unicode_escape's `\\u000a`): the whole tail of a "comment" can be code;
  - characters other readers take for a line break (form feed, VT, \\x1c-\\x1e, \\x85, U+2028,
    U+2029): no break to git or Python, but `str.splitlines` and an editor break there, so a
    reviewer reading the quoted line may not see what follows; and bidi controls, which
    reorder what the reviewer sees of a line (Trojan Source), not what runs.

  `read_python` decodes exactly as the tokenizer does and says, for each git line, which
  Python lines it spans; where that cannot be told line by line (an encoding other than UTF-8
  or a single-byte one), every line of the file counts as the candidate's.
"""

from __future__ import annotations

import ast
import codecs
import fnmatch
import io
import re
import sys
import tokenize
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kopt_supervisor.engine import BadInput

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


PY_SUFFIXES = (".py", ".pyw", ".pyi")
C_SUFFIXES = (
    ".c",
    ".cc",
    ".cpp",
    ".cxx",
    ".c++",
    ".cu",
    ".cuh",
    ".h",
    ".hh",
    ".hpp",
    ".hxx",
    ".hip",
    ".inl",
    ".ipp",
    ".tpp",
    ".cl",
    ".mm",
    ".m",
)
CYTHON_SUFFIXES = (".pyx", ".pxd", ".pxi")
"""Cython: Python that `ast` cannot parse, with C in it: the Python text rules and the C rules."""
DOC_SUFFIXES = (".md", ".rst", ".txt", ".csv", ".json")
"""Prose and data: only the ld-preload rule applies (notes may well mention kopt)."""
SHADOWED = frozenset(sys.stdlib_module_names) | {
    "torch",
    "triton",
    "numpy",
    "harness",
    "pandas",
    "cupy",
    "jax",
    "kopt_supervisor",
    "conftest",
}
"""Module names a new file must not take: the standard library and what benches import."""


TextRule = tuple[str, "re.Pattern[str]"]


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


_TIMER_NAMES = (
    r"clock|clock_gettime|gettimeofday|time|timespec_get|cudaEventRecord|cudaEventElapsedTime|"
    r"cudaEventSynchronize|cudaEventQuery|cudaEventCreate\w*|cudaEventDestroy|cuEventRecord|"
    r"cuEventElapsedTime|cuEventSynchronize|hipEventRecord|hipEventElapsedTime|hipEventSynchronize|"
    r"cudaLaunchKernel|cuLaunchKernel|hipLaunchKernel|cudaDeviceSynchronize|cudaStreamSynchronize|"
    r"nvtxRangePush\w*|nvtxRangePop|roctxRangePush\w*|roctxRangePop|dlsym|__libc_start_main"
)
C_RULES: list[TextRule] = [
    ("c-env", _rx(r"\b(secure_getenv|getenv|setenv|putenv|unsetenv|clearenv)\s*\(|\benviron\b")),
    ("c-interpose", _rx(r"\bdl(sym|vsym|open|mopen)\s*\(|\bRTLD_NEXT\b")),
    (
        "c-file-write",
        _rx(
            r"\bf(re)?open(64)?\s*\([^)]*\"[^\"]*[wa+][^\"]*\"|\b(std::)?(o|)fstream\b|"
            r"\bO_(WRONLY|RDWR|CREAT|APPEND|TRUNC)\b|\b(unlink|unlinkat|rename|renameat|mkdir|rmdir|"
            r"symlink|truncate|ftruncate|creat)\s*\(|\bwrite\s*\(\s*[0-9]"
        ),
    ),
    (
        "c-thread",
        _rx(
            r"\bstd::(thread|jthread|async)\b|\bpthread_create\s*\(|\b(v?fork|system|popen|clone|"
            r"posix_spawnp?|exec[lv]p?e?)\s*\("
        ),
    ),
    ("c-exit", _rx(r"\b(_exit|_Exit|exit|abort|quick_exit|atexit|at_quick_exit|signal|sigaction|kill|raise)\s*\(")),
    (
        "c-timer-interpose",
        _rx(
            r"^\s*#\s*define\s+(" + _TIMER_NAMES + r")\b|"
            # a definition: type tokens, the name, then a parameter list that ends the
            # line or opens a body (a call ends with ";", an assignment has "=")
            r"^\s*(extern\s+\"C\"\s+)?([A-Za-z_][\w:<>]*[\s\*&]+)+\**\s*("
            + _TIMER_NAMES
            + r")\s*\(([^;{]*\)\s*(const\s*)?(noexcept\s*)?(\{.*)?|[^)]*)$|"
            r"^\s*(" + _TIMER_NAMES + r")\s*\([^;]*(\)|\{|,)\s*$"
        ),
    ),
    # a variable (no "(" before its "=", ";", "[" or "{") that outlives the call: static,
    # thread_local, or a __device__/__managed__ global; const ones are plain values
    (
        "c-state",
        _rx(
            r"^\s*(static|thread_local|__device__|__managed__)\b(?!.*\b(const|constexpr|constinit|"
            r"__constant__)\b)[^=;(\[{]*[\w>\]*&]\s*(=|;|\[|\{)"
        ),
    ),
    (
        "c-constructor",
        _rx(
            r"__attribute__\s*\(\(\s*(constructor|destructor)|\.init_array|\.fini_array|"
            r"#\s*pragma\s+(init|fini)\b"
        ),
    ),
]
"""Text rules for C, C++, CUDA and HIP sources (applied to added lines, // comments removed)."""
GENERIC_RULES: list[TextRule] = [
    ("ld-preload", _rx(r"LD_PRELOAD|DYLD_INSERT_LIBRARIES|--wrap[=,]|ld\.so\.preload")),
    ("kopt-probe", _rx(r"(?i)\bkopt|/proc/")),
]
"""Text rules for every file that is not Python (prose and data: the first only)."""
PY_TEXT_RULES: list[TextRule] = [
    ("patch-module", _rx(r"\bsetattr\s*\(|\bdelattr\s*\(|__dict__|__code__|unittest\.mock|\bmock\.patch")),
    ("sys-modules", _rx(r"\bsys\s*\.\s*modules\b")),
    ("builtins", _rx(r"\b__builtins__\b|\bbuiltins\b")),
    (
        "frame-inspection",
        _rx(
            r"_getframe|currentframe|inspect\.stack|\bf_back\b|\bf_locals\b|\bf_globals\b|"
            r"get_referrers|settrace|setprofile"
        ),
    ),
    ("process-exit", _rx(r"\bos\.\s*_exit|\bsys\.\s*exit|\batexit\b|\bsignal\.|\bSystemExit\b")),
    ("env-write", _rx(r"environ\s*\[[^\]]*\]\s*=|putenv|environ\.(update|setdefault|pop|clear)")),
    (
        "thread-process",
        _rx(
            r"\b(threading|multiprocessing|subprocess|concurrent|asyncio)\b|\bos\.\s*(fork|system|"
            r"popen|spawn)"
        ),
    ),
    ("exec-eval", _rx(r"\b(exec|eval|compile)\s*\(")),
    ("import-tricks", _rx(r"\bimportlib\b|__import__")),
    ("native-access", _rx(r"\bctypes\b|\bcffi\b")),
    ("worktree-probe", _rx(r"getcwd|\bcwd\s*\(|sys\.argv")),
]
"""Text rules for Python when its new version cannot be read."""


def text_rules(
    path: str, added: dict[int, str], rules: Iterable[TextRule], *, strip_comments: bool = False
) -> list[Finding]:
    """Findings of the text rules on the added lines (of a source, or of a Python string)."""
    out = []
    for n, line in sorted(added.items()):
        # a // comment ends at a lone CR, VT or form feed too (a C preprocessor's line end): not
        # at the end of the git line, or `// x\rexit(0);` hides the call from the rules
        body = (
            "\n".join(re.sub(r"//.*$", "", seg) for seg in re.split(r"\r(?!$)|[\x0b\x0c]", line))
            if strip_comments
            else line
        )
        for rule, rx in rules:
            if rx.search(body):
                out.append(Finding(rule, path, n, quote(line)))
    return out


PY_BREAK = re.compile(r"\r\n|\r|\n")
"""Where Python ends a line (universal newlines)."""
ODD_CHARACTERS = re.compile(
    "\r(?!$)|[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
"""In a git line (no LF): a CR that is not the CR of a CRLF, a character `str.splitlines`
and editors break at, or a bidi control."""
PLAIN_ENCODINGS = frozenset({"utf-8", "ascii"})
"""Declared encodings that need no review (their names as `codecs.lookup` gives them)."""


@dataclass(frozen=True)
class PySource:
    """A Python file as the interpreter reads it."""

    text: str
    """Decoded as the tokenizer decodes (BOM removed)."""
    encoding: str
    """codecs' name of the encoding it was decoded with."""
    cookie_line: int
    """The line of an encoding declaration (0: none, or one naming UTF-8)."""
    git_lines: list[str]
    """The file's lines as git counts them (LF-separated, decoded as git's output is)."""
    spans: list[tuple[int, int]] = field(default_factory=list)
    """Per git line (index 0 is line 1), the first and last Python line it spans; empty when
    the encoding does not map line by line (`exact` False)."""

    @property
    def exact(self) -> bool:
        return bool(self.spans)

    @property
    def lines(self) -> list[str]:
        """Python's lines (for quoting a finding at its ast line)."""
        return PY_BREAK.split(self.text)

    def git_line(self, python_line: int) -> int:
        """The git line a Python line lies on (itself when not `exact`)."""
        if not self.exact:
            return python_line
        lo, hi = 0, len(self.spans) - 1
        while lo < hi:  # the last git line starting at or before it
            mid = (lo + hi + 1) // 2
            if self.spans[mid][0] <= python_line:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def python_lines(self, git_lines: set[int]) -> set[int]:
        """The Python lines the given git lines span (every line when not `exact`)."""
        if not self.exact:
            return set(range(1, len(self.lines) + 1))
        out: set[int] = set()
        for n in git_lines:
            if 0 < n <= len(self.spans):
                lo, hi = self.spans[n - 1]
                out.update(range(lo, hi + 1))
        return out


class Undecodable(ValueError):
    """The interpreter would refuse the file's bytes (an unknown or failing encoding)."""

    def __init__(self, message: str, line: int = 0) -> None:
        super().__init__(message)
        self.line = line


def read_python(raw: bytes) -> PySource:
    """The file decoded as the tokenizer decodes it, with git's lines mapped onto Python's.
    Undecodable when the interpreter would refuse it too (its SyntaxError names the same)."""
    try:
        encoding, first = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        raise Undecodable(str(exc), getattr(exc, "lineno", 0) or 0) from None
    try:
        name = codecs.lookup(encoding).name
        body = raw[len(codecs.BOM_UTF8) :] if encoding == "utf-8-sig" and raw.startswith(codecs.BOM_UTF8) else raw
        text = body.decode("utf-8" if encoding == "utf-8-sig" else encoding)
    except (LookupError, UnicodeError, TypeError) as exc:  # TypeError: a bytes-to-bytes codec named
        raise Undecodable(f"the declared encoding {encoding!r} fails: {exc}", 1) from None
    cookie = 0
    if name not in PLAIN_ENCODINGS and not encoding.startswith("utf-8"):
        cookie = next((i + 1 for i, line in enumerate(first) if b"coding" in line), 1)
    git_lines = [b.decode("utf-8", "surrogateescape") for b in raw.split(b"\n")]
    return PySource(text, name, cookie, git_lines, _spans(body, encoding, text))


def _spans(body: bytes, encoding: str, text: str) -> list[tuple[int, int]]:
    """Per git line, the Python lines it spans; [] when decoding git line by git line does not
    give the text (the encoding makes or hides line breaks of its own)."""
    codec = "utf-8" if encoding == "utf-8-sig" else encoding
    pieces: list[str] = []
    for b in body.split(b"\n"):
        try:
            piece = b.decode(codec)
        except (UnicodeError, LookupError, TypeError):
            return []
        if "\n" in piece:
            return []
        pieces.append(piece)
    if "\n".join(pieces) != text:
        return []
    spans = []
    at = 1
    for k, piece in enumerate(pieces):
        last = k == len(pieces) - 1
        inner = piece.count("\r") - (1 if piece.endswith("\r") and not last else 0)
        spans.append((at, at + inner))
        at += inner + 1
    return spans


def odd_characters(line: str) -> list[str]:
    """The characters of a git line that are a line break to Python but not to git, or to other
    readers but not to Python, or a bidi control (escaped: `\\r`, `\\x0c`, `\\u202e`)."""
    return sorted({m.group(0).encode("unicode_escape").decode("ascii") for m in ODD_CHARACTERS.finditer(line)})


def shown(line: str) -> str:
    """A line as a reviewer should see it quoted: odd characters escaped, so the quote is one line."""
    return ODD_CHARACTERS.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), line)
