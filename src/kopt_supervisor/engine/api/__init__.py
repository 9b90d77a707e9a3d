"""The engine's one door for its clients: the `kopt` command line and the TUI import the
engine only from here (tests/test_import_contracts.py fails otherwise). Each module below
opens with what it holds; its `__all__` is what this door exports from it:

- `runs`: find, create, start and serve runs (`init_run`, `start_detached`, `doctor`, `kopt
  gpus` and `GpuSampler`, results.md and `kopt export`, `kopt mcp`, `kopt demo`);
- `run_io`: read a run (`status`, the stable JSON of `kopt status --json`; `RunReader`, the
  TUI's cheap read-only view; `trusted_history`; transcripts) and send it a command (`send`);
- `run_summary`: what a run spent and how it ran (agent spending, timings, sandbox, lanes),
  progress per GPU-hour (`progress` -> `Progress`) and the status JSON read back
  (`status_report` -> `StatusReport`);
- `run_meta`, `iteration_record`: typed views of what a run stores (its meta, an iteration's
  record), read by the tolerant rules of `parse`; `run_meta` also builds the review queue
  (`review_queue` -> `PendingReview`s, `headline_interval`);
- besides, from the engine: `fmt` (the one number formatter), and the types and
  errors these take and return.
"""

from __future__ import annotations

from kopt_supervisor.engine import BadInput as BadInput
from kopt_supervisor.engine import KoptError as KoptError
from kopt_supervisor.engine import fmt as fmt
from kopt_supervisor.engine.api.iteration_record import *  # noqa: F403
from kopt_supervisor.engine.api.run_io import *  # noqa: F403
from kopt_supervisor.engine.api.run_meta import *  # noqa: F403
from kopt_supervisor.engine.api.run_summary import *  # noqa: F403
from kopt_supervisor.engine.api.runs import *  # noqa: F403
from kopt_supervisor.engine.config import Config as Config
from kopt_supervisor.engine.config import GpuConfig as GpuConfig
from kopt_supervisor.engine.daemon import engine_alive as engine_alive
from kopt_supervisor.engine.decide import geomean as geomean
from kopt_supervisor.engine.decide import positive_finite as positive_finite
from kopt_supervisor.engine.decide.confirmation import Confirmation as Confirmation
from kopt_supervisor.engine.decide.external_truth import ExternalTruth as ExternalTruth
from kopt_supervisor.engine.diffscan.findings import Finding as Finding
from kopt_supervisor.engine.gpu import Backend as Backend
from kopt_supervisor.engine.gpu.backends import open_backend as open_backend
from kopt_supervisor.engine.propose.proposer import Citation as Citation
from kopt_supervisor.engine.records import AgentRun as AgentRun
from kopt_supervisor.engine.records import Counters as Counters
from kopt_supervisor.engine.records import Iteration as Iteration
from kopt_supervisor.engine.records import Phase as Phase
from kopt_supervisor.engine.records import Status as Status
from kopt_supervisor.engine.records import awaiting_review as awaiting_review
from kopt_supervisor.engine.records import best_commit as best_commit
from kopt_supervisor.engine.records import best_iteration as best_iteration
from kopt_supervisor.engine.records import counters as counters
from kopt_supervisor.engine.records import restart_point_problem as restart_point_problem
from kopt_supervisor.engine.store import Command as Command
from kopt_supervisor.engine.store import Event as Event
from kopt_supervisor.engine.workspace import Workspace as Workspace
from kopt_supervisor.engine.workspace import list_workspaces as list_workspaces
from kopt_supervisor.engine.workspace import resolve_root as resolve_root
