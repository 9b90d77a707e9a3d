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
        "sys._getframe", "sys._current_frames", "sys._current_exceptions", "sys.settrace", "sys.setprofile",
        "sys.addaudithook", "sys.monitoring", "sys.call_tracing", "inspect.currentframe", "inspect.stack",
        "inspect.getouterframes", "inspect.getinnerframes", "inspect.trace", "inspect.getframeinfo",
        "inspect.getgeneratorlocals", "inspect.getcoroutinelocals", "inspect.getclosurevars", "traceback.extract_stack",
        "traceback.walk_stack", "traceback.print_stack", "traceback.format_stack", "traceback.walk_tb",
        "gc.get_referrers", "gc.get_referents", "gc.get_objects", "threading.settrace", "threading.setprofile",
        "threading.settrace_all_threads", "threading.setprofile_all_threads"),
    "process-exit": ("os._exit", "os.abort", "os.kill", "os.killpg", "sys.exit", "atexit", "signal", "faulthandler",
                     "weakref.finalize", "builtins.exit", "builtins.quit"),
    "file-write": (
        "os.write", "os.writev", "os.pwrite", "os.pwritev", "os.remove", "os.unlink", "os.rename", "os.renames",
        "os.replace", "os.rmdir", "os.removedirs", "os.mkdir", "os.makedirs", "os.symlink", "os.link", "os.chmod",
        "os.lchmod", "os.chown", "os.lchown", "os.truncate", "os.ftruncate", "os.utime", "os.mkfifo", "os.mknod",
        "os.dup2", "os.open", "os.sendfile", "os.copy_file_range", "os.splice", "shutil", "tempfile", "torch.save",
        "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt", "pickle.dump", "marshal.dump",
        "io.FileIO"),
    "env-write": ("os.putenv", "os.unsetenv", "os.environ.update", "os.environ.setdefault", "os.environ.pop",
                  "os.environ.popitem", "os.environ.clear", "os.environ.__setitem__", "os.environ.__delitem__",
                  "os.environb"),
    "kopt-probe": ("kopt_supervisor.engine", "kopt_supervisor.kopt_tui"),  # kopt's own rooms, not the harness
    "worktree-probe": ("os.getcwd", "os.getcwdb", "pathlib.Path.cwd", "pathlib.PosixPath.cwd", "sys.argv",
                       "sys.orig_argv", "os.environ.PWD"),
    "thread-process": ("threading", "_thread", "multiprocessing", "subprocess", "concurrent", "asyncio",
                       "torch.multiprocessing", "pty", "os.fork", "os.forkpty", "os.system", "os.popen",
                       "os.posix_spawn", "os.posix_spawnp", "os.register_at_fork", "os.spawnl", "os.spawnle",
                       "os.spawnlp", "os.spawnlpe", "os.spawnv", "os.spawnve", "os.spawnvp", "os.spawnvpe",
                       "os.execl", "os.execle", "os.execlp", "os.execlpe", "os.execv", "os.execve", "os.execvp",
                       "os.execvpe"),
    "input-cache": ("weakref.WeakKeyDictionary", "weakref.WeakValueDictionary", "weakref.WeakSet"),
    "native-access": ("ctypes", "_ctypes", "cffi", "mmap"),
    "import-tricks": ("importlib", "imp", "pkgutil", "runpy", "zipimport", "sys.meta_path", "sys.path_hooks",
                      "sys.path_importer_cache", "site", "builtins.__import__"),
    "exec-eval": ("code", "codeop", "marshal.loads", "marshal.load", "pickle.loads", "pickle.load", "dill",
                  "cloudpickle", "types.FunctionType", "types.CodeType", "types.LambdaType", "builtins.exec",
                  "builtins.eval", "builtins.compile"),
    "patch-module": ("unittest.mock", "mock.patch"),
    "stdout-write": ("sys.stdout", "sys.__stdout__"),
    "side-stream": ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream", "torch.cuda.ExternalStream",
                    "torch.cuda.StreamContext", "torch.Stream", "cupy.cuda.Stream"),
    "clock-time": ("time", "timeit", "torch.cuda.Event", "torch.Event", "torch.cuda._sleep", "datetime.datetime.now"),
    "tensor-subclass": ("torch.overrides", "torch.utils._python_dispatch", "torch.library", "torch._C._TorchDispatchMode",
                        "torch.Tensor._make_subclass", "torch.Tensor._make_wrapper_subclass",
                        "torch.Tensor.__torch_function__", "torch._C.DisableTorchFunction"),
}
BUILTIN_RULES: dict[str, str] = {
    "exec": "exec-eval", "eval": "exec-eval", "compile": "exec-eval", "__import__": "import-tricks",
    "globals": "dynamic-access", "vars": "dynamic-access", "locals": "dynamic-access", "exit": "process-exit",
    "quit": "process-exit", "__builtins__": "builtins", "breakpoint": "exec-eval",
}
"""Builtin names that are a finding wherever they are used (unless the file binds the name)."""
BUILTIN_NAMES = frozenset(dir(builtins))
BUILTIN = "<builtin>."
"""The prefix a plain builtin name resolves to (`builtins.x` is the module's, a finding by itself)."""
"""Names that, unbound in the file, are builtins: resolved as builtins.<name>, so an alias
(`o = open`, `p = print`, `s = setattr`) is the builtin too."""
FRAME_ATTRS = frozenset({"f_back", "f_locals", "f_globals", "f_builtins", "f_code", "f_lasti", "f_trace", "tb_frame",
                         "tb_next", "gi_frame", "cr_frame", "ag_frame", "gi_code", "__closure__", "cell_contents"})
WRITE_METHODS = frozenset({"write_text", "write_bytes", "touch", "unlink", "rmdir", "mkdir", "symlink_to",
                           "hardlink_to", "link_to", "chmod", "lchmod", "tofile"})
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
                               "kopt_supervisor.kernels.harness.timing"})
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
                      "discard", "remove", "__setitem__", "__delitem__", "appendleft", "put", "write"})
LOOKUPS = frozenset({"get", "setdefault", "pop", "__contains__", "__getitem__", "__setitem__"})
CACHE_DECORATORS = frozenset({"functools.cache", "functools.lru_cache"})
SIDE_PATH = re.compile(r"(?i)(^|[/\\])(best|cand|candidate)([/\\]|$)")
IDENTITY_DUNDERS = frozenset({"__file__", "__name__", "__spec__", "__package__", "__path__", "__loader__"})
STR_METHODS = frozenset({"split", "rsplit", "find", "rfind", "index", "rindex", "startswith", "endswith",
                         "partition", "rpartition", "count", "replace", "lower", "upper", "__contains__",
                         "casefold", "strip", "encode"})
