"""Open the TUI on one of the frozen runs of tests/tui/data in this terminal, with the
snapshot tests' fixed clock, engine probe and GPUs: what a snapshot shows, in a real
terminal (tmux at 80×24 or 200×60) to look for cut or overlapping text.

    /work/main/.venv/bin/python -m tests.tui.show_run fake-lanes4 [gpus-lanes4.json]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from kopt_supervisor.kopt_tui.app import KoptApp
from tests.tui.fixtures import frozen_services, install_runs


def main() -> None:
    tag = sys.argv[1]
    gpus = sys.argv[2] if len(sys.argv) > 2 else "gpus-lanes.json"
    with tempfile.TemporaryDirectory(prefix="kopt-show-") as tmp:
        root = install_runs(Path(tmp) / "workspaces", (tag,))
        app = KoptApp(
            root, tag, services=frozen_services(root, alive=(tag,), clock=tag, gpus_file=gpus, auto_review=False)
        )
        app.run()


if __name__ == "__main__":
    main()
