"""Copy the snapshot tests' SVGs that docs/user-guide.md shows into docs/img/.

    /work/main/.venv/bin/python -m tests.tui.export_screenshots     # after --snapshot-update

test_docs_screenshots_are_current fails when docs/img/ and the snapshots disagree.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = Path(__file__).parent / "__snapshots__" / "test_snapshots"
IMG = ROOT / "docs" / "img"
SHOWN = {
    "tui-dashboard.svg": "test_dashboard[160x48].svg",
    "tui-dashboard-80x24.svg": "test_dashboard[80x24].svg",
    "tui-dashboard-lanes.svg": "test_dashboard_with_lanes.svg",
    "tui-dashboard-lanes4-80x24.svg": "test_dashboard_four_lanes[80x24].svg",
    "tui-dashboard-lanes4-200x60.svg": "test_dashboard_four_lanes[200x60].svg",
    "tui-review-queue-80x24.svg": "test_review_queue.svg",
    "tui-review.svg": "test_review_modal[160x48].svg",
    "tui-restart.svg": "test_restart_dialog[160x48].svg",
    "tui-detail.svg": "test_iteration_detail[160x48].svg",
    "tui-detail-plan-80x24.svg": "test_iteration_detail_tab[plan-80x24].svg",
    "tui-detail-cost.svg": "test_iteration_detail_tab[cost-160x48].svg",
    "tui-transcript-80x24.svg": "test_transcript.svg",
    "tui-runs.svg": "test_runs_home[160x48].svg",
    "tui-help-80x24.svg": "test_help[80x24].svg",
}


def main() -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    for name, snap in SHOWN.items():
        shutil.copyfile(SNAPSHOTS / snap, IMG / name)
        print(f"docs/img/{name} <- {snap}")


if __name__ == "__main__":
    main()
