"""The attributes, methods and strings that give a construct away to the diff scan's Python
rules (engine/diffscan/python.py) whatever name reached them: introspection and frame
attributes, sensitive names and modules, file writes by method or open() mode, the sides'
paths, and the calls that compile source given as text. Data only."""

from __future__ import annotations

import re

INTROSPECTION_ATTRS = frozenset(
    {
        "__globals__",
        "__builtins__",
        "__self__",
        "__func__",
        "__subclasses__",
        "__base__",
        "__bases__",
        "__mro__",
        "__code__",
        "__defaults__",
        "__kwdefaults__",
        "__getattribute__",
        "__reduce__",
        "__reduce_ex__",
        "__loader__",
        "__spec__",
        "__subclasshook__",
        "__init_subclass__",
        "__objclass__",
        "__set_name__",
    }
)
"""Attributes that lead from an object to what it was made from or lives in (a function's
module namespace, a method's object, the class graph, a module's loader): a read of one is a
way past the names the scan follows (`len.__self__` is the builtins module,
`f.__globals__` the bench's namespace when f is the bench's, `().__class__.__base__.__subclasses__()`
every class of the process)."""
FRAME_ATTRS = frozenset(
    {
        "f_back",
        "f_locals",
        "f_globals",
        "f_builtins",
        "f_code",
        "f_lasti",
        "f_trace",
        "tb_frame",
        "tb_next",
        "gi_frame",
        "cr_frame",
        "ag_frame",
        "gi_code",
        "__closure__",
        "cell_contents",
        "f_lineno",
        "tb_lineno",
        "tb_lasti",
        "lineno",
        "funcName",
        "findCaller",
        "stack_info",
        "gi_yieldframe",
        "cr_await",
        "gi_running",
    }
)
"""Attributes of frames, tracebacks, generators, warnings and log records: where a call came from."""
SAFE_DUNDERS = frozenset({"__doc__", "__name__", "__qualname__", "__module__", "__wrapped__", "__annotations__"})
IDENTITY_DUNDERS = frozenset({"__file__", "__name__", "__spec__", "__package__", "__path__", "__loader__"})
SENSITIVE_NAMES = frozenset(
    {
        "_getframe",
        "f_back",
        "f_locals",
        "f_globals",
        "f_builtins",
        "tb_frame",
        "currentframe",
        "perf_counter",
        "perf_counter_ns",
        "process_time",
        "monotonic",
        "monotonic_ns",
        "time_ns",
        "elapsed_time",
        "_exit",
        "putenv",
        "environ",
        "modules",
        "__builtins__",
        "__import__",
        "__globals__",
        "__code__",
        "__dict__",
        "__closure__",
        "import_module",
        "get_referrers",
        "settrace",
        "setprofile",
        "exec",
        "eval",
        "compile",
        "system",
        "Event",
        "data_ptr",
    }
)
"""A string constant that is exactly one of these names is a getattr/attrgetter in waiting."""
SENSITIVE_MODULES = frozenset(
    {
        "time",
        "sys",
        "os",
        "builtins",
        "inspect",
        "gc",
        "importlib",
        "atexit",
        "signal",
        "threading",
        "subprocess",
        "ctypes",
        "io",
        "shutil",
        "tempfile",
        "torch.cuda",
        "harness",
        "harness.timing",
        "kopt_supervisor.kernels.harness",
        "kopt_supervisor.kernels.harness.timing",
        "functools",
        "operator",
        "types",
        "marshal",
        "pickle",
        "codecs",
        "weakref",
        "copyreg",
        "warnings",
        "contextvars",
        "__main__",
        "site",
        "traceback",
        "logging",
        "random",
        "numpy.random",
        "torch.random",
    }
)
"""Modules that must not be handed around as values (`f(time)`, `[sys]`): patching by proxy."""
WRITE_METHODS = frozenset(
    {
        "write_text",
        "write_bytes",
        "touch",
        "unlink",
        "rmdir",
        "mkdir",
        "symlink_to",
        "hardlink_to",
        "link_to",
        "chmod",
        "lchmod",
        "tofile",
        "to_csv",
        "to_pickle",
        "to_parquet",
        "to_hdf",
        "to_feather",
        "to_excel",
        "to_sql",
        "savefig",
    }
)
"""Methods that write files whatever object they are called on (Path, ndarray, DataFrame)."""
OPEN_WITH_MODE = frozenset(
    {
        "io.open",
        "codecs.open",
        "os.fdopen",
        "gzip.open",
        "gzip.GzipFile",
        "bz2.open",
        "bz2.BZ2File",
        "lzma.open",
        "lzma.LZMAFile",
        "tarfile.open",
        "tarfile.TarFile",
        "zipfile.ZipFile",
        "zipfile.PyZipFile",
    }
)
"""Functions whose second argument (or mode=) is an open() mode: a file write when it writes."""
SIDE_PATH = re.compile(r"(?i)(^|[/\\])(best|cand|candidate)([/\\]|$)")
STR_METHODS = frozenset(
    {
        "split",
        "rsplit",
        "find",
        "rfind",
        "index",
        "rindex",
        "startswith",
        "endswith",
        "partition",
        "rpartition",
        "count",
        "replace",
        "lower",
        "upper",
        "__contains__",
        "casefold",
        "strip",
        "encode",
    }
)
SOURCE_COMPILERS = frozenset(
    {
        "torch.utils.cpp_extension.load_inline",
        "cupy.RawKernel",
        "cupy.RawModule",
        "cupy.ElementwiseKernel",
        "cupy.ReductionKernel",
        "pycuda.compiler.SourceModule",
        "cuda.nvrtc.nvrtcCreateProgram",
        "cuda.bindings.nvrtc.nvrtcCreateProgram",
        "numba.cuda.compile_ptx",
        "triton.compile",
    }
)
"""Calls that compile C, C++ or CUDA source given as text: the text must be there to read
(string constants, f-strings of names the file binds to constants); C rules apply to it whole."""
