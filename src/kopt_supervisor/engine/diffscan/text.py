"""The diff scan's text rules: C, C++, CUDA and HIP sources, every other file, and Python
that cannot be parsed. Applied to added lines. Pure."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable

from kopt_supervisor.engine.diffscan.findings import Finding, quote

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
TEXT_MAX = 160
"""A finding's line is quoted up to this many characters."""


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
