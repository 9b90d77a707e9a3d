"""kopt: supervise autonomous GPU-kernel optimization runs.

The product card's folders: `engine` (the loop and its rooms), `kopt_tui` (the `kopt` command
and the terminal UI), `kernels` (the bundled targets and their harness), and `gpu_wiki` (the
GPU spec pages the roofline cites, data read with importlib.resources).
"""
