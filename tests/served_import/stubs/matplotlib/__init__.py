"""A test double of matplotlib for the process-level run of a perf_report bench on a machine
without it: `Mark.run` imports matplotlib.pyplot to draw its plot, which nothing here reads.
Put this folder on PYTHONPATH; the real package, where installed, is not needed."""
