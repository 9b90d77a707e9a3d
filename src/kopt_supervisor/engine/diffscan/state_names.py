"""The names the diff scan's state rules know (`module-state`, `input-cache`, `lazy-result`:
engine/diffscan/state.py, lifetimes.py, caches.py; python.py for writes to another module's
objects): what changes an object in place, what builds a mutable or an immutable one, what
hands back part of one, what only a tensor has (what computes when a result is read is in
state.py, beside the lazy-result rule). Data only."""

from __future__ import annotations

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
