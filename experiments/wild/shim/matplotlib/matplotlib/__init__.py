"""A stand-in for matplotlib where it is not installed (experiments/wild/SHIMS.md): Triton's
`Mark.run` imports `matplotlib.pyplot` before it writes its CSV; this lets the unchanged
layer-norm tutorial reach the CSV. Never on the path where the real matplotlib imports."""

__version__ = "0.0-kopt-wild-shim"
