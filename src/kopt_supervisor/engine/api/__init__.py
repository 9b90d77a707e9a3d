"""The engine's one door for its clients: the `kopt` command line and the TUI import the
engine only from here (tests/test_import_contracts.py fails otherwise).

Grouped by what a client does:

- find, create and start runs (`runs`): `open_workspace`, `resolve_root`, `init_run`,
  `check_proposer`, `start_detached`, `run_foreground`, `engine_alive`;
- read a run (`reading`): `status` (the stable JSON of `kopt status --json`), `list_runs`,
  `memory_records`, `memory_record`, `RunReader` (the TUI's cheap read-only view),
  `read_transcript` -> `Transcript` (an agent's transcript, only from the run's logs/), and the
  rules a client shows: `effective_state`, `best_speedup`, `counters`, `best_commit`,
  `best_iteration`, `awaiting_review` (the pending review rule), `restart_point_problem`,
  `trusted_history` -> `TrustedHistory` (the keeps the run's seals vouch for: derive BEST
  and the counters from its `iterations`, show its `tampered`);
- the review queue (`reviews`): `pending_reviews(ws)` and `review_queue(iterations, meta,
  answers, alive=)` -> `PendingReview`s (every lane's candidates awaiting the engineer,
  oldest review first, each with its lane, evidence and the answer already sent),
  `answer_version` (the iteration a command names),
  `headline_interval` -> `Interval` (what a decision hinges on: the lanes' live interval);
- what a run spent and how it ran (`run_summary`): `agent_spending`, `agent_line`,
  `phase_timings`, `timing_rows`, `sandbox_state`, `ran_unsandboxed`, `sandbox_line`,
  `decision_cost`, `profiler_evidence` -> `ProfilerEvidence` of `ProfiledClass`es,
  `lane_states` (what each lane is doing);
- typed views of what a run stores (`run_meta`, `iteration_record`, `status_report`; the
  tolerant reading rules of `parse`: a missing key or a value of the wrong type reads as
  None or a default, never as an error): `run_meta(meta)` -> `RunMeta` (`LiveStep`,
  `GateRecord` of `GpuAssessment`s, `LiveClasses`), `live_step`, `gpu_assessment`,
  `lane_state` -> `LaneState` (`LaneReview`), `decision_estimate` -> `DecisionEstimate`;
  per part of an iteration's record: `recorded_classes` -> `RecordedClass`, `roofline_pct`,
  `regression_summary` -> `RegressionSummary`, `recorded_decision` -> `RecordedDecision`, `recorded_review` -> `RecordedReview`,
  `gpu_ref` -> `GpuRef`, `recorded_gpu` -> `GpuEvidence`, `recorded_reverify` ->
  `RecordedReverify`, `recorded_confirmation` -> `Confirmation`, `recorded_truth` ->
  `ExternalTruth`, `recorded_profile` -> `ProfilerEvidence`, `diff_findings` -> `Finding`,
  `recorded_plan` -> `RecordedPlan` of `Citation`s, `recorded_timings` (`iteration_timings`) ->
  `IterationTimings`,
  `agent_runs` -> `LabelledRun`s of `AgentRun`, `changed_files`, `recorded_origin`;
  `spending` -> `AgentSpending` (`agent_spending` typed); `status_report(status JSON)` ->
  `StatusReport` (`QueuedReview`, `PhaseTimings`);
- progress per GPU-hour (`progress`): `progress(iterations, direction)` -> `Progress`: the
  best speedup against wall time and GPU time (`SpeedupPoint`s) and where each lane's time
  went (`LaneTime`: wait, propose, measure, confirm, review, stale);
- send a run a command (`commands`): `send` -> `Sent`;
- GPUs (`gpus`): `gpus_report`, `format_gpus_report`, `GpuSampler` (the TUI's readings,
  judged by the gate's rules);
- outputs (`outputs`): `write_report` (results.md), `export_branch`, `measure_ceilings`;
- `kopt mcp` (`judge`, `origin`, `candidate`): `serve_mcp`, `mcp_snippet` (a client's config),
  `proposal_origin` -> `ProposalOrigin` (an agent through MCP, `kopt submit`, the `command`
  proposer, tune), `mcp_source`, `candidate_changes` (what cand/ changes against a commit);
- the demo (`engine.demo`): `has_gpu`, `prepare_demo` (the caller hands it the bundled
  kernels), `demo_iterations`, `run_demo_headless`;
- text: `fmt`, the one number formatter (engine.fmt);
- the types and errors these take and return: `Workspace`, `Iteration`, `Status`, `Phase`,
  `Command`, `Event`, `Config`, `GpuConfig`, `Counters`, `Backend`, `KoptError`, `BadInput`.
"""

from __future__ import annotations

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.api.candidate import candidate_changes
from kopt_supervisor.engine.api.commands import Sent, send
from kopt_supervisor.engine.api.gpus import (
    BackendFactory,
    GpuSampler,
    format_gpus_report,
    gpus_report,
    own_pids,
)
from kopt_supervisor.engine.api.iteration_record import (
    GpuEvidence,
    GpuRef,
    IterationTimings,
    LabelledRun,
    RecordedClass,
    RecordedDecision,
    RecordedPlan,
    RecordedReverify,
    RecordedReview,
    RegressionSummary,
    agent_runs,
    changed_files,
    diff_findings,
    gpu_ref,
    iteration_timings,
    recorded_classes,
    recorded_confirmation,
    recorded_decision,
    recorded_gpu,
    recorded_origin,
    recorded_plan,
    recorded_profile,
    recorded_reverify,
    recorded_review,
    recorded_timings,
    recorded_truth,
    regression_summary,
    roofline_pct,
)
from kopt_supervisor.engine.api.judge import MCP_CLIENTS, Snippet, mcp_snippet, serve_mcp
from kopt_supervisor.engine.api.origin import ProposalOrigin, mcp_source, proposal_origin
from kopt_supervisor.engine.api.outputs import export_branch, measure_ceilings, write_report
from kopt_supervisor.engine.api.progress import LaneTime, Progress, SpeedupPoint, progress
from kopt_supervisor.engine.api.reading import (
    LIVE_STATES,
    RunReader,
    Transcript,
    TrustedHistory,
    best_speedup,
    effective_state,
    heartbeat_age,
    list_runs,
    memory_record,
    memory_records,
    pending_reviews,
    read_transcript,
    status,
    trusted_history,
)
from kopt_supervisor.engine.api.reviews import (
    Answer,
    Interval,
    PendingReview,
    answer_version,
    headline_interval,
    review_queue,
)
from kopt_supervisor.engine.api.run_meta import (
    DecisionEstimate,
    GateRecord,
    GpuAssessment,
    GpuProcess,
    LaneReview,
    LaneState,
    LiveClasses,
    LiveStep,
    RunMeta,
    decision_estimate,
    gpu_assessment,
    lane_state,
    live_step,
    run_meta,
)
from kopt_supervisor.engine.api.run_summary import (
    TIMED_PHASES,
    AgentSpending,
    ProfiledClass,
    ProfilerEvidence,
    agent_line,
    agent_spending,
    decision_cost,
    lane_states,
    phase_timings,
    profiler_evidence,
    ran_unsandboxed,
    sandbox_line,
    sandbox_state,
    spending,
    timing_rows,
)
from kopt_supervisor.engine.api.runs import (
    Created,
    check_proposer,
    check_sandbox,
    doctor,
    format_doctor,
    init_run,
    open_workspace,
    propose_config,
    run_foreground,
    start_detached,
)
from kopt_supervisor.engine.api.status_report import (
    PhaseTimings,
    QueuedReview,
    StatusReport,
    status_report,
)
from kopt_supervisor.engine.bookkeeping import Counters, best_commit, best_iteration, counters
from kopt_supervisor.engine.config import Config, GpuConfig
from kopt_supervisor.engine.daemon import engine_alive
from kopt_supervisor.engine.decide.confirmation import Confirmation
from kopt_supervisor.engine.decide.external_truth import ExternalTruth
from kopt_supervisor.engine.decide.stats import geomean, positive_finite
from kopt_supervisor.engine.demo import (
    CPU_NOTICE,
    Materialize,
    demo_iterations,
    has_gpu,
    prepare_demo,
)
from kopt_supervisor.engine.demo import run_headless as run_demo_headless
from kopt_supervisor.engine.diffscan.findings import Finding
from kopt_supervisor.engine.errors import BadInput, KoptError
from kopt_supervisor.engine.gpu.backends import open_backend
from kopt_supervisor.engine.gpu.state import Backend
from kopt_supervisor.engine.propose.costs import AgentRun
from kopt_supervisor.engine.propose.proposer import Citation
from kopt_supervisor.engine.records import (
    Iteration,
    Phase,
    Status,
    awaiting_review,
    restart_point_problem,
)
from kopt_supervisor.engine.store import Command, Event
from kopt_supervisor.engine.workspace import Workspace, list_workspaces, resolve_root

__all__ = [
    "geomean",
    "positive_finite",
    # runs
    "Created",
    "check_proposer",
    "check_sandbox",
    "doctor",
    "engine_alive",
    "format_doctor",
    "init_run",
    "list_workspaces",
    "open_workspace",
    "propose_config",
    "resolve_root",
    "run_foreground",
    "start_detached",
    # reading
    "LIVE_STATES",
    "RunReader",
    "awaiting_review",
    "best_commit",
    "best_iteration",
    "best_speedup",
    "counters",
    "effective_state",
    "heartbeat_age",
    "list_runs",
    "memory_record",
    "memory_records",
    "restart_point_problem",
    "status",
    "Transcript",
    "read_transcript",
    "TrustedHistory",
    "trusted_history",
    # the review queue
    "Answer",
    "Interval",
    "PendingReview",
    "headline_interval",
    "pending_reviews",
    "review_queue",
    # what a run spent and how it ran
    "TIMED_PHASES",
    "ProfiledClass",
    "ProfilerEvidence",
    "Confirmation",
    "ExternalTruth",
    "agent_line",
    "agent_spending",
    "decision_cost",
    "lane_states",
    "phase_timings",
    "profiler_evidence",
    "ran_unsandboxed",
    "sandbox_line",
    "sandbox_state",
    "timing_rows",
    # typed views of what a run stores: its meta, an iteration's record, the status JSON
    "AgentRun",
    "AgentSpending",
    "Citation",
    "DecisionEstimate",
    "Finding",
    "GateRecord",
    "GpuAssessment",
    "GpuEvidence",
    "GpuProcess",
    "GpuRef",
    "IterationTimings",
    "LabelledRun",
    "LaneReview",
    "LaneState",
    "LiveClasses",
    "LiveStep",
    "PhaseTimings",
    "QueuedReview",
    "RecordedClass",
    "RecordedDecision",
    "RecordedPlan",
    "RecordedReverify",
    "RecordedReview",
    "RunMeta",
    "StatusReport",
    "agent_runs",
    "changed_files",
    "decision_estimate",
    "diff_findings",
    "gpu_assessment",
    "gpu_ref",
    "lane_state",
    "live_step",
    "recorded_classes",
    "recorded_confirmation",
    "recorded_decision",
    "recorded_gpu",
    "recorded_origin",
    "recorded_plan",
    "recorded_profile",
    "recorded_review",
    "recorded_reverify",
    "recorded_timings",
    "recorded_truth",
    "roofline_pct",
    "RegressionSummary",
    "regression_summary",
    "answer_version",
    "iteration_timings",
    "run_meta",
    "spending",
    "status_report",
    # progress per GPU-hour: speedup against time, where each lane's time went
    "LaneTime",
    "Progress",
    "SpeedupPoint",
    "progress",
    # commands
    "Sent",
    "send",
    # GPUs
    "BackendFactory",
    "GpuSampler",
    "format_gpus_report",
    "gpus_report",
    "open_backend",
    "own_pids",
    # outputs
    "export_branch",
    "measure_ceilings",
    "write_report",
    # kopt mcp: the MCP judge, and where a proposal came from
    "MCP_CLIENTS",
    "ProposalOrigin",
    "Snippet",
    "candidate_changes",
    "mcp_snippet",
    "mcp_source",
    "proposal_origin",
    "serve_mcp",
    # the demo
    "CPU_NOTICE",
    "Materialize",
    "demo_iterations",
    "has_gpu",
    "prepare_demo",
    "run_demo_headless",
    # text
    "fmt",
    # types and errors
    "Backend",
    "BadInput",
    "Command",
    "Config",
    "Counters",
    "Event",
    "GpuConfig",
    "Iteration",
    "KoptError",
    "Phase",
    "Status",
    "Workspace",
]
