"""The attributes, methods and names that give a construct away to the diff scan's Python
rules once a name is resolved (engine/diffscan/python.py), whatever name reached them. Data
only.

- For the rules of one node: introspection and frame attributes, sensitive names and
  modules, file writes by method or open() mode, the sides' paths, and the calls that
  compile source given as text.
- For the state rules (`module-state`, `input-cache`: engine/diffscan/state.py and
  lifetimes.py; python.py for writes to another module's objects): what changes an object in
  place, what builds a mutable or an immutable one, what hands back part of one, what only a
  tensor has (what computes when a result is read is in state.py, beside the lazy-result
  rule).
"""

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


CONTAINER_MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "update",
        "setdefault",
        "pop",
        "popitem",
        "clear",
        "discard",
        "remove",
        "appendleft",
        "extendleft",
        "move_to_end",
        "__setitem__",
        "__delitem__",
        "__iadd__",
        "__ior__",
    }
)
"""Methods that change a dict, list, set or deque in place and that no tensor or module
function is named after (`torch.add`, `numpy.sort` are not here): called on an object of
another module, or on a caller's argument, they keep state there."""
TENSOR_IN_PLACE = frozenset(
    {
        "zero_",
        "fill_",
        "copy_",
        "add_",
        "sub_",
        "mul_",
        "div_",
        "clamp_",
        "clamp_min_",
        "clamp_max_",
        "set_",
        "random_",
        "bernoulli_",
        "exponential_",
        "masked_fill_",
        "masked_scatter_",
        "index_put_",
        "index_fill_",
        "index_copy_",
        "index_add_",
        "scatter_",
        "scatter_add_",
        "scatter_reduce_",
        "resize_",
        "resize_as_",
        "abs_",
        "neg_",
        "pow_",
        "sqrt_",
        "exp_",
        "fmod_",
        "remainder_",
        "nan_to_num_",
        "round_",
        "floor_",
        "ceil_",
        "trunc_",
        "t_",
        "transpose_",
        "squeeze_",
        "unsqueeze_",
        "as_strided_",
        "detach_",
        "requires_grad_",
        "put_",
        "map_",
        "apply_",
        "lerp_",
        "addcmul_",
        "addcdiv_",
        "addmm_",
        "baddbmm_",
        "copysign_",
        "sign_",
        "reciprocal_",
        "rsqrt_",
    }
)
"""Tensor methods that change the tensor in place (no module function is named after them:
`torch.nn.init.normal_` is left out)."""
OBJECT_MUTATORS = CONTAINER_MUTATORS | TENSOR_IN_PLACE | {"sort", "reverse", "__init__", "__imul__"}
"""Methods that change an object of another module in place (`problem.SIZES.sort()`,
`problem.CFG.__init__(...)`, `problem.REF.zero_()`); a caller's list may be sorted
(`configs.sort()`)."""
MUTATORS = CONTAINER_MUTATORS | {
    "add",
    "put",
    "write",
    "send",
    "rotate",
    "sort",
    "reverse",
    "register_buffer",
    "register_parameter",
    "add_module",
    "register_module",
    "set",
    "__next__",
    "put_nowait",
    "setstate",
    "seed",
}
"""Methods that change the object they are called on: a container's (above), a queue's or a
stream's, an nn.Module's registrations, a random generator's state, an iterator's next."""
MUTATING_FUNCTIONS = frozenset(
    {
        "heapq.heappush",
        "heapq.heappop",
        "heapq.heapify",
        "heapq.heapreplace",
        "heapq.heappushpop",
        "bisect.insort",
        "bisect.insort_left",
        "bisect.insort_right",
        "operator.setitem",
        "operator.delitem",
        "operator.iadd",
        "operator.iconcat",
        "operator.ior",
        "operator.iand",
        "operator.isub",
        "operator.imul",
        "random.shuffle",
        "numpy.copyto",
        "numpy.put",
        "numpy.place",
        "numpy.putmask",
    }
)
"""Functions that change their first argument in place."""
LOOKUPS = frozenset({"get", "setdefault", "pop", "__contains__", "__getitem__", "__setitem__"})
PERSISTENT_LOOKUPS = frozenset({"get", "setdefault", "values", "items", "__getitem__"})
"""Methods that hand back (part of) the object they are called on: `d = _CACHE.get(k)` is _CACHE's."""
MUTABLE_FACTORIES = frozenset(
    {
        "<builtin>.dict",
        "<builtin>.list",
        "<builtin>.set",
        "<builtin>.bytearray",
        "<builtin>.iter",
        "builtins.dict",
        "builtins.list",
        "builtins.set",
        "collections",
        "itertools.count",
        "itertools.cycle",
        "array.array",
        "queue",
        "types.SimpleNamespace",
        "weakref",
        "io.StringIO",
        "io.BytesIO",
    }
)
"""Calls whose result is a mutable container: as a default argument, state shared by every call."""
IMMUTABLE_FACTORIES = frozenset(
    {
        "<builtin>.frozenset",
        "<builtin>.tuple",
        "<builtin>.int",
        "<builtin>.float",
        "<builtin>.str",
        "<builtin>.bytes",
        "<builtin>.complex",
        "<builtin>.bool",
        "<builtin>.range",
        "<builtin>.slice",
        "<builtin>.object",
        "torch.device",
        "torch.dtype",
        "torch.Size",
        "triton.language.constexpr",
        "math",
        "decimal.Decimal",
        "fractions.Fraction",
        "pathlib.Path",
        "pathlib.PurePath",
        "pathlib.PurePosixPath",
    }
)
"""Calls whose result cannot be changed: a plain default argument (`device=torch.device("cuda")`)."""
IMMUTABLE_BASES = frozenset(
    {
        "typing.NamedTuple",
        "enum.Enum",
        "enum.IntEnum",
        "enum.StrEnum",
        "enum.Flag",
        "enum.IntFlag",
        "<builtin>.tuple",
        "<builtin>.frozenset",
        "<builtin>.str",
        "<builtin>.int",
    }
)
"""Base classes whose instances cannot change (with frozen dataclasses)."""
INIT_METHODS = frozenset({"__init__", "__new__", "__post_init__", "__init_subclass__", "__set_name__", "__setstate__"})
"""Methods that build an object: its `self` state is set there, not changed per call."""
CACHE_DECORATORS = frozenset({"functools.cache", "functools.lru_cache"})
TENSOR_ATTRS = frozenset(
    {
        "data_ptr",
        "shape",
        "stride",
        "numel",
        "dtype",
        "device",
        "size",
        "contiguous",
        "is_contiguous",
        "storage",
        "untyped_storage",
        "view",
        "reshape",
        "to",
        "float",
        "half",
        "item",
        "tolist",
        "numpy",
        "cpu",
        "cuda",
        "element_size",
        "nbytes",
        "ndim",
        "dim",
        "sum",
        "mean",
        "clone",
        "detach",
        "copy_",
        "zero_",
        "fill_",
        "matmul",
        "transpose",
        "permute",
        "flatten",
        "unsqueeze",
        "squeeze",
        "expand",
        "is_cuda",
        "requires_grad",
        "grad",
        "data",
        "mT",
        "new_empty",
        "new_zeros",
        "type_as",
        "masked_fill",
        "index_select",
        "narrow",
    }
)
"""Attributes only a tensor (or array) has: a cached function that reads them on a parameter
is keyed on the tensor object (tensors hash by identity)."""
TENSOR_TYPES = frozenset({"torch.Tensor", "numpy.ndarray", "torch.nn.Parameter"})
POINTER_METHODS = frozenset(
    {
        "data_ptr",
        "untyped_storage",
        "storage",
        "_cdata",
        "__array_interface__",
        "__cuda_array_interface__",
        "_typed_storage",
    }
)
