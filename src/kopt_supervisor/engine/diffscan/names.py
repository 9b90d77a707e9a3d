"""The names the diff scan's Python rules know: qualified names per rule, builtins, the
attributes and strings that give a construct away. Data only."""

from __future__ import annotations

import builtins
import re

# Qualified names (exact, or a prefix followed by ".") and the rule each belongs to. Only
# names resolved through an import count: a local variable called `time` is not the module.
QUALIFIED: dict[str, tuple[str, ...]] = {
    "sys-modules": ("sys.modules",),
    "builtins": ("builtins", "__builtin__"),
    "frame-inspection": (
        "__main__", "sys._getframe", "sys._current_frames", "sys._current_exceptions", "sys.settrace", "sys.setprofile",
        "sys.addaudithook", "sys.monitoring", "sys.call_tracing", "inspect.currentframe", "inspect.stack",
        "inspect.getouterframes", "inspect.getinnerframes", "inspect.trace", "inspect.getframeinfo",
        "inspect.getgeneratorlocals", "inspect.getcoroutinelocals", "inspect.getclosurevars", "traceback.extract_stack",
        "traceback.walk_stack", "traceback.print_stack", "traceback.format_stack", "traceback.walk_tb",
        "traceback.StackSummary", "threading.settrace", "threading.setprofile", "threading.settrace_all_threads",
        "threading.setprofile_all_threads", "sys._getframemodulename", "sys.last_traceback", "sys.last_exc",
        "sys.last_value", "logging.currentframe", "logging.Logger.findCaller", "logging.captureWarnings",
        "tracemalloc", "torch.profiler", "torch.autograd.profiler",
        # whether this call is being captured into a CUDA graph: the timed replay, not the checked call
        "torch.cuda.is_current_stream_capturing", "torch.cuda.graphs.is_current_stream_capturing",
        "torch._C._cuda_isCurrentStreamCapturing",
        # every object of the process, the bench's outputs and references included
        "gc", "objgraph", "pympler", "guppy"),
    "process-exit": ("os._exit", "os.abort", "os.kill", "os.killpg", "sys.exit", "atexit", "signal", "faulthandler",
                     "weakref.finalize", "builtins.exit", "builtins.quit"),
    "file-write": (
        "os.write", "os.writev", "os.pwrite", "os.pwritev", "os.remove", "os.unlink", "os.rename", "os.renames",
        "os.replace", "os.rmdir", "os.removedirs", "os.mkdir", "os.makedirs", "os.symlink", "os.link", "os.chmod",
        "os.lchmod", "os.chown", "os.lchown", "os.truncate", "os.ftruncate", "os.utime", "os.mkfifo", "os.mknod",
        "os.dup2", "os.open", "os.sendfile", "os.copy_file_range", "os.splice", "os.posix_fallocate", "os.fchmod",
        "os.fchown", "os.chflags", "os.lchflags", "os.setxattr", "os.removexattr", "os.memfd_create", "shutil",
        "tempfile", "io.FileIO", "fileinput",
        # stores that persist what they are given (a cache between calls, or between runs)
        "shelve", "dbm", "sqlite3", "mmap", "pickle.dump", "pickle.Pickler", "marshal.dump", "dill.dump",
        "cloudpickle.dump", "joblib.dump", "joblib.Memory", "diskcache", "sqlitedict", "h5py.File", "zarr",
        "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt", "numpy.memmap",
        "numpy.lib.format.open_memmap", "numpy.lib.format.write_array", "torch.save", "torch.from_file",
        "torch.UntypedStorage.from_file", "torch.TypedStorage.from_file", "torch.jit.save", "torch.export.save",
        "torch.onnx.export", "safetensors.torch.save_file", "safetensors.numpy.save_file", "logging.FileHandler",
        "logging.handlers"),
    "env-write": ("os.putenv", "os.unsetenv", "os.environ.update", "os.environ.setdefault", "os.environ.pop",
                  "os.environ.popitem", "os.environ.clear", "os.environ.__setitem__", "os.environ.__delitem__",
                  "os.environb"),
    "kopt-probe": ("kopt_supervisor.engine", "kopt_supervisor.kopt_tui"),  # kopt's own rooms, not the harness
    "worktree-probe": ("os.getcwd", "os.getcwdb", "pathlib.Path.cwd", "pathlib.PosixPath.cwd", "sys.argv",
                       "sys.orig_argv", "os.environ.PWD"),
    "thread-process": ("threading", "_thread", "multiprocessing", "subprocess", "concurrent", "asyncio",
                       "torch.jit.fork", "torch.jit._fork", "torch.futures",
                       "torch.multiprocessing", "pty", "os.fork", "os.forkpty", "os.system", "os.popen",
                       "os.posix_spawn", "os.posix_spawnp", "os.register_at_fork", "os.spawnl", "os.spawnle",
                       "os.spawnlp", "os.spawnlpe", "os.spawnv", "os.spawnve", "os.spawnvp", "os.spawnvpe",
                       "os.execl", "os.execle", "os.execlp", "os.execlpe", "os.execv", "os.execve", "os.execvp",
                       "os.execvpe"),
    "input-cache": ("weakref.WeakKeyDictionary", "weakref.WeakValueDictionary", "weakref.WeakSet"),
    "native-access": ("ctypes", "_ctypes", "cffi", "mmap"),
    "import-tricks": ("importlib", "imp", "pkgutil", "runpy", "zipimport", "sys.meta_path", "sys.path_hooks",
                      "sys.path_importer_cache", "site", "builtins.__import__", "pydoc", "pkg_resources", "torch.hub",
                      "_imp", "_frozen_importlib", "_frozen_importlib_external"),
    "exec-eval": ("code", "codeop", "marshal", "pickle", "_pickle", "cPickle", "copyreg", "pickletools", "dill",
                  "cloudpickle", "types.FunctionType", "types.CodeType", "types.LambdaType", "builtins.exec",
                  "builtins.eval", "builtins.compile",
                  # entry points that run what a bytes or text payload names (unpicklers, object loaders)
                  "torch.jit.load", "torch.package", "torch.serialization", "torch._utils", "pandas.read_pickle",
                  "joblib.load", "jsonpickle", "yaml.load", "yaml.load_all", "yaml.unsafe_load", "yaml.unsafe_load_all",
                  "yaml.full_load", "yaml.full_load_all", "yaml.UnsafeLoader", "yaml.FullLoader", "yaml.Loader",
                  "yaml.add_constructor", "logging.config",
                  # decoders of a payload embedded as bytes or text
                  "base64", "binascii", "zlib.decompress", "zlib.decompressobj", "lzma.decompress",
                  "lzma.LZMADecompressor", "bz2.decompress", "bz2.BZ2Decompressor", "gzip.decompress",
                  "codecs.decode", "codecs.encode", "codecs.getdecoder", "codecs.getencoder", "codecs.iterdecode",
                  "codecs.lookup", "quopri", "uu",
                  # debuggers, profilers and test runners that execute a string of code
                  "doctest", "pdb", "bdb", "profile", "cProfile", "trace"),
    "patch-module": ("unittest.mock", "mock.patch"),
    "dynamic-access": ("types.new_class",),
    "stdout-write": ("sys.stdout", "sys.__stdout__"),
    "side-stream": ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream", "torch.cuda.ExternalStream",
                    "torch.cuda.StreamContext", "torch.Stream", "cupy.cuda.Stream"),
    "clock-time": ("time", "timeit", "torch.cuda.Event", "torch.Event", "torch.cuda._sleep", "datetime.datetime.now"),
    "global-setting": (
        "torch.set_float32_matmul_precision", "torch.set_flush_denormal", "torch.set_default_dtype",
        "torch.set_default_device", "torch.set_default_tensor_type", "torch.set_num_threads",
        "torch.set_num_interop_threads", "torch.set_grad_enabled", "torch.autograd.set_grad_enabled",
        "torch.use_deterministic_algorithms", "torch.set_deterministic_debug_mode", "torch.set_printoptions",
        "torch.set_warn_always", "torch.manual_seed", "torch.seed", "torch.set_rng_state", "torch.random",
        "torch.default_generator", "torch.cuda.default_generators", "numpy.random.mtrand", "random._inst",
        "torch.cuda.manual_seed", "torch.cuda.manual_seed_all", "torch.cuda.seed", "torch.cuda.seed_all",
        "torch.cuda.set_rng_state", "torch.cuda.set_rng_state_all", "torch.cuda.set_sync_debug_mode",
        "torch.cuda.set_per_process_memory_fraction", "torch.cuda.memory.set_per_process_memory_fraction",
        "torch._C._set_cublas_allow_tf32", "torch._C._set_cudnn_allow_tf32", "torch._C._set_default_dtype",
        "torch._C._set_float32_matmul_precision", "torch._C._set_deterministic_algorithms",
        "numpy.seterr", "numpy.seterrcall", "numpy.seterrobj", "numpy.set_printoptions", "numpy.random.seed",
        "numpy.random.set_state", "random.seed", "random.setstate", "decimal.setcontext", "locale.setlocale",
        "sys.setrecursionlimit", "sys.setswitchinterval", "sys.set_int_max_str_digits", "sys.setdlopenflags",
        "os.nice", "os.setpriority", "os.sched_setaffinity", "os.sched_setscheduler", "os.sched_setparam",
        "os.umask", "os.chdir", "os.fchdir", "resource.setrlimit", "resource.prlimit"),
    "tensor-subclass": ("torch.overrides", "torch.utils._python_dispatch", "torch.library", "torch._C._TorchDispatchMode",
                        "torch.Tensor._make_subclass", "torch.Tensor._make_wrapper_subclass",
                        "torch.Tensor.__torch_function__", "torch._C.DisableTorchFunction"),
}
BUILTIN_RULES: dict[str, str] = {
    "exec": "exec-eval", "eval": "exec-eval", "compile": "exec-eval", "__import__": "import-tricks",
    "globals": "dynamic-access", "vars": "dynamic-access", "locals": "dynamic-access", "exit": "process-exit",
    "quit": "process-exit", "__builtins__": "builtins", "breakpoint": "exec-eval", "__build_class__": "dynamic-access",
    "__loader__": "import-tricks", "__spec__": "import-tricks",
}
"""Builtin names that are a finding wherever they are used (unless the file binds the name)."""
BUILTIN_NAMES = frozenset(dir(builtins))
BUILTIN = "<builtin>."
"""The prefix a plain builtin name resolves to (`builtins.x` is the module's, a finding by itself)."""
"""Names that, unbound in the file, are builtins: resolved as builtins.<name>, so an alias
(`o = open`, `p = print`, `s = setattr`) is the builtin too."""
INTROSPECTION_ATTRS = frozenset({"__globals__", "__builtins__", "__self__", "__func__", "__subclasses__", "__base__",
                                 "__bases__", "__mro__", "__code__", "__defaults__", "__kwdefaults__",
                                 "__getattribute__", "__reduce__", "__reduce_ex__", "__loader__", "__spec__",
                                 "__subclasshook__", "__init_subclass__", "__objclass__", "__set_name__"})
"""Attributes that lead from an object to what it was made from or lives in (a function's
module namespace, a method's object, the class graph, a module's loader): a read of one is a
way past the names the scan follows (`len.__self__` is the builtins module,
`f.__globals__` the bench's namespace when f is the bench's, `().__class__.__base__.__subclasses__()`
every class of the process)."""
REEXPORTED = frozenset({"sys", "os", "builtins", "__builtins__", "gc", "inspect", "importlib", "ctypes", "subprocess",
                        "signal", "atexit", "marshal", "pickle", "threading", "_thread", "posix", "_imp", "_io",
                        "_frozen_importlib", "_frozen_importlib_external", "__main__", "_ctypes", "_pickle"})
"""Module names that, as an attribute of another module (`typing.sys`, `os.sys`), are that
module: `X.sys.modules` is `sys.modules` whatever X is (`f.__builtins__` the builtins)."""
CONTAINER_MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear",
                                "discard", "remove", "appendleft", "extendleft", "move_to_end", "__setitem__",
                                "__delitem__", "__iadd__", "__ior__"})
"""Methods that change a dict, list, set or deque in place and that no tensor or module
function is named after (`torch.add`, `numpy.sort` are not here): called on an object of
another module, or on a caller's argument, they keep state there."""
TENSOR_IN_PLACE = frozenset({
    "zero_", "fill_", "copy_", "add_", "sub_", "mul_", "div_", "clamp_", "clamp_min_", "clamp_max_", "set_",
    "random_", "bernoulli_", "exponential_", "masked_fill_", "masked_scatter_", "index_put_", "index_fill_",
    "index_copy_", "index_add_", "scatter_", "scatter_add_", "scatter_reduce_", "resize_", "resize_as_", "abs_",
    "neg_", "pow_", "sqrt_", "exp_", "fmod_", "remainder_", "nan_to_num_", "round_", "floor_", "ceil_", "trunc_",
    "t_", "transpose_", "squeeze_", "unsqueeze_", "as_strided_", "detach_", "requires_grad_", "put_", "map_",
    "apply_", "lerp_", "addcmul_", "addcdiv_", "addmm_", "baddbmm_", "copysign_", "sign_", "reciprocal_", "rsqrt_"})
"""Tensor methods that change the tensor in place (no module function is named after them:
`torch.nn.init.normal_` is left out)."""
OBJECT_MUTATORS = CONTAINER_MUTATORS | TENSOR_IN_PLACE | {"sort", "reverse", "__init__", "__imul__"}
"""Methods that change an object of another module in place (`problem.SIZES.sort()`,
`problem.CFG.__init__(...)`, `problem.REF.zero_()`); a caller's list may be sorted
(`configs.sort()`)."""
FRAME_ATTRS = frozenset({"f_back", "f_locals", "f_globals", "f_builtins", "f_code", "f_lasti", "f_trace", "tb_frame",
                         "tb_next", "gi_frame", "cr_frame", "ag_frame", "gi_code", "__closure__", "cell_contents",
                         "f_lineno", "tb_lineno", "tb_lasti", "lineno", "funcName", "findCaller", "stack_info",
                         "gi_yieldframe", "cr_await", "gi_running"})
"""Attributes of frames, tracebacks, generators, warnings and log records: where a call came from."""
WRITE_METHODS = frozenset({"write_text", "write_bytes", "touch", "unlink", "rmdir", "mkdir", "symlink_to",
                           "hardlink_to", "link_to", "chmod", "lchmod", "tofile", "to_csv", "to_pickle", "to_parquet",
                           "to_hdf", "to_feather", "to_excel", "to_sql", "savefig"})
"""Methods that write files whatever object they are called on (Path, ndarray, DataFrame)."""
OPEN_WITH_MODE = frozenset({"io.open", "codecs.open", "os.fdopen", "gzip.open", "gzip.GzipFile", "bz2.open",
                            "bz2.BZ2File", "lzma.open", "lzma.LZMAFile", "tarfile.open", "tarfile.TarFile",
                            "zipfile.ZipFile", "zipfile.PyZipFile"})
"""Functions whose second argument (or mode=) is an open() mode: a file write when it writes."""
SAFE_DUNDERS = frozenset({"__doc__", "__name__", "__qualname__", "__module__", "__wrapped__", "__annotations__"})
SENSITIVE_NAMES = frozenset({
    "_getframe", "f_back", "f_locals", "f_globals", "f_builtins", "tb_frame", "currentframe", "perf_counter",
    "perf_counter_ns", "process_time", "monotonic", "monotonic_ns", "time_ns", "elapsed_time", "_exit", "putenv",
    "environ", "modules", "__builtins__", "__import__", "__globals__", "__code__", "__dict__", "__closure__",
    "import_module", "get_referrers", "settrace", "setprofile", "exec", "eval", "compile", "system", "Event",
    "data_ptr"})
"""A string constant that is exactly one of these names is a getattr/attrgetter in waiting."""
SENSITIVE_MODULES = frozenset({"time", "sys", "os", "builtins", "inspect", "gc", "importlib", "atexit", "signal",
                               "threading", "subprocess", "ctypes", "io", "shutil", "tempfile", "torch.cuda",
                               "harness", "harness.timing", "kopt_supervisor.kernels.harness",
                               "kopt_supervisor.kernels.harness.timing", "functools", "operator", "types", "marshal",
                               "pickle", "codecs", "weakref", "copyreg", "warnings", "contextvars", "__main__", "site",
                               "traceback", "logging", "random", "numpy.random", "torch.random"})
"""Modules that must not be handed around as values (`f(time)`, `[sys]`): patching by proxy."""
TENSOR_ATTRS = frozenset({"data_ptr", "shape", "stride", "numel", "dtype", "device", "size", "contiguous",
                          "is_contiguous", "storage", "untyped_storage", "view", "reshape", "to", "float", "half",
                          "item", "tolist", "numpy", "cpu", "cuda", "element_size", "nbytes", "ndim", "dim", "sum",
                          "mean", "clone", "detach", "copy_", "zero_", "fill_", "matmul", "transpose", "permute",
                          "flatten", "unsqueeze", "squeeze", "expand", "is_cuda", "requires_grad", "grad", "data",
                          "mT", "new_empty", "new_zeros", "type_as", "masked_fill", "index_select", "narrow"})
"""Attributes only a tensor (or array) has: a cached function that reads them on a parameter
is keyed on the tensor object (tensors hash by identity)."""
TENSOR_TYPES = frozenset({"torch.Tensor", "numpy.ndarray", "torch.nn.Parameter"})
POINTER_METHODS = frozenset({"data_ptr", "untyped_storage", "storage", "_cdata", "__array_interface__",
                             "__cuda_array_interface__", "_typed_storage"})
MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear", "add",
                      "discard", "remove", "__setitem__", "__delitem__", "appendleft", "put", "write", "send",
                      "extendleft", "rotate", "sort", "reverse", "move_to_end", "__iadd__", "__ior__", "register_buffer",
                      "register_parameter", "add_module", "register_module", "set", "__next__", "put_nowait",
                      "setstate", "seed"})
LOOKUPS = frozenset({"get", "setdefault", "pop", "__contains__", "__getitem__", "__setitem__"})
CACHE_DECORATORS = frozenset({"functools.cache", "functools.lru_cache"})
SIDE_PATH = re.compile(r"(?i)(^|[/\\])(best|cand|candidate)([/\\]|$)")
IDENTITY_DUNDERS = frozenset({"__file__", "__name__", "__spec__", "__package__", "__path__", "__loader__"})
STR_METHODS = frozenset({"split", "rsplit", "find", "rfind", "index", "rindex", "startswith", "endswith",
                         "partition", "rpartition", "count", "replace", "lower", "upper", "__contains__",
                         "casefold", "strip", "encode"})
MUTABLE_FACTORIES = frozenset({"<builtin>.dict", "<builtin>.list", "<builtin>.set", "<builtin>.bytearray",
                               "<builtin>.iter", "builtins.dict", "builtins.list", "builtins.set", "collections",
                               "itertools.count", "itertools.cycle", "array.array", "queue", "types.SimpleNamespace",
                               "weakref", "io.StringIO", "io.BytesIO"})
"""Calls whose result is a mutable container: as a default argument, state shared by every call."""
IMMUTABLE_FACTORIES = frozenset({"<builtin>.frozenset", "<builtin>.tuple", "<builtin>.int", "<builtin>.float",
                                 "<builtin>.str", "<builtin>.bytes", "<builtin>.complex", "<builtin>.bool",
                                 "<builtin>.range", "<builtin>.slice", "<builtin>.object", "torch.device",
                                 "torch.dtype", "torch.Size", "triton.language.constexpr", "math", "decimal.Decimal",
                                 "fractions.Fraction", "pathlib.Path", "pathlib.PurePath", "pathlib.PurePosixPath"})
"""Calls whose result cannot be changed: a plain default argument (`device=torch.device("cuda")`)."""
MUTATING_FUNCTIONS = frozenset({"heapq.heappush", "heapq.heappop", "heapq.heapify", "heapq.heapreplace",
                                "heapq.heappushpop", "bisect.insort", "bisect.insort_left", "bisect.insort_right",
                                "operator.setitem", "operator.delitem", "operator.iadd", "operator.iconcat",
                                "operator.ior", "operator.iand", "operator.isub", "operator.imul", "random.shuffle",
                                "numpy.copyto", "numpy.put", "numpy.place", "numpy.putmask"})
"""Functions that change their first argument in place."""
SOURCE_COMPILERS = frozenset({"torch.utils.cpp_extension.load_inline", "cupy.RawKernel", "cupy.RawModule",
                              "cupy.ElementwiseKernel", "cupy.ReductionKernel", "pycuda.compiler.SourceModule",
                              "cuda.nvrtc.nvrtcCreateProgram", "cuda.bindings.nvrtc.nvrtcCreateProgram",
                              "numba.cuda.compile_ptx", "triton.compile"})
"""Calls that compile C, C++ or CUDA source given as text: the text must be there to read
(string constants, f-strings of names the file binds to constants); C rules apply to it whole."""
PERSISTENT_LOOKUPS = frozenset({"get", "setdefault", "values", "items", "__getitem__"})
"""Methods that hand back (part of) the object they are called on: `d = _CACHE.get(k)` is _CACHE's."""
INIT_METHODS = frozenset({"__init__", "__new__", "__post_init__", "__init_subclass__", "__set_name__",
                          "__setstate__"})
"""Methods that build an object: its `self` state is set there, not changed per call."""
LAZY_DUNDERS = frozenset({
    # container and iteration: list(out), len(out), out[i], x in out
    "__iter__", "__next__", "__aiter__", "__anext__", "__len__", "__length_hint__", "__getitem__", "__contains__",
    "__reversed__", "__missing__",
    # conversion: float(out), numpy/torch/dlpack views, formatting, truth
    "__array__", "__array_interface__", "__array_struct__", "__array_ufunc__", "__array_function__",
    "__array_priority__", "__cuda_array_interface__", "__dlpack__", "__dlpack_device__", "__buffer__", "__float__",
    "__int__", "__index__", "__complex__", "__bool__", "__round__", "__trunc__", "__floor__", "__ceil__",
    "__format__", "__bytes__", "__fspath__",
    # comparison and arithmetic: out == ref, out - ref, abs(out - ref)
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__add__", "__radd__", "__sub__", "__rsub__",
    "__mul__", "__rmul__", "__matmul__", "__rmatmul__", "__truediv__", "__rtruediv__", "__floordiv__",
    "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__", "__neg__", "__pos__", "__abs__", "__invert__",
    "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__",
    # every attribute read: out.shape, out.cpu(), out.tolist()
    "__getattr__", "__getattribute__",
})
"""Hooks a result object runs when the bench reads it (after the timer stopped): a class with
any of them can do its work there, or answer a comparison falsely."""
LAZY_BASES = frozenset({"collections.UserList", "collections.UserDict", "collections.UserString", "collections.abc",
                        "typing.Sequence", "typing.MutableSequence", "typing.Mapping", "typing.Iterable",
                        "typing.Iterator", "typing.Collection", "numpy.lib.mixins"})
"""Bases whose hooks read what a subclass computes (UserList's data as a property): a result of
such a class can compute when read, without a hook of its own."""
LAZY_RETURNS = frozenset({"map", "filter", "zip", "iter", "reversed", "enumerate", "aiter"})
"""Builtins that return a lazy iterator: returned from a kernel, the work runs when iterated."""
IMMUTABLE_BASES = frozenset({"typing.NamedTuple", "enum.Enum", "enum.IntEnum", "enum.StrEnum", "enum.Flag",
                             "enum.IntFlag", "<builtin>.tuple", "<builtin>.frozenset", "<builtin>.str", "<builtin>.int"})
"""Base classes whose instances cannot change (with frozen dataclasses)."""
