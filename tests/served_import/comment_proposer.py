"""A scripted `command` proposer for the A/A test: a comment appended to the bench's file (the
kernel's module: the bench and the kernel share it), and the plan kopt asks for. Nothing that
runs changes, so a decision must not keep it."""

import os
from pathlib import Path

script = Path("05-layer-norm.py")
n = os.environ.get("KOPT_ITERATION", "?")
script.write_text(script.read_text() + f"# a comment, nothing else (v{n})\n")
Path(os.environ["KOPT_PLAN"]).write_text("a comment only: an A/A comparison\nscope: global\n")
