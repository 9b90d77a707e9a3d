"""The context pack: what a careful kernel engineer hands over before each change
(docs/design.md §14; the reference program, router and diffusion rules).

KOPT_PROMPT (markdown, for the agent) and the same data as JSON beside it (for tools and
for `assess_plan`), built from what the loop has (`PackInputs`):

- the task and the rules (correctness first, one bottleneck-driven hypothesis, no protected
  files, no commits, the plan's format);
- on a repair, the hypothesis under repair and the failing rows with their errors;
- the target: bench, metric, correctness rule, config columns and classes, the source files
  with their sizes (editable, protected, where dispatch seems to happen);
- hardware specs with their cited sources, and per production config bytes, FLOPs, bound,
  floor, % of peak and the stop target (the best tree's record["roofline"]);
- the best value per class against the baseline;
- the latest profile of the best tree: per kernel time, share, registers, shared memory,
  occupancy, DRAM throughput (and what the profile does not report);
- what was already tried from the current BEST, the recent regressions, what other lanes
  are trying now;
- the per-class history of the unmasked iterations: hypothesis, target class, verdict,
  per-class deltas with their intervals and rounds.

Size: the pack is kept under `[propose].prompt_max_kib`; when it is over, the oldest
history entries are summarised to one line each, then into counts. The rules, the repair,
the current evidence and what was tried from BEST are never cut.

`build_pack(inputs) -> Pack` is pure (data in, text out); `list_sources(worktree, cfg)` is
the edge that reads the worktree for the source list.

Modules: inputs (PackInputs, Pack, list_sources), sections (history entries, profile and
roofline sections from the records), data (the pack as data, the citable terms), markdown
(the pack as text), pack (build_pack: the size budget).
"""

from kopt_supervisor.engine.propose.context.data import (
    MAX_FAILING_ROWS,
    MAX_SOURCES,
    MAX_TRIED,
    METRIC_TERMS,
    PACK_VERSION,
)
from kopt_supervisor.engine.propose.context.inputs import (
    DISPATCH_WORD,
    Pack,
    PackInputs,
    SourceFile,
    list_sources,
)
from kopt_supervisor.engine.propose.context.pack import ONE_LINERS, build_pack
from kopt_supervisor.engine.propose.context.sections import MAX_KERNELS, kernel_short

__all__ = [
    "DISPATCH_WORD",
    "MAX_FAILING_ROWS",
    "MAX_KERNELS",
    "MAX_SOURCES",
    "MAX_TRIED",
    "METRIC_TERMS",
    "ONE_LINERS",
    "PACK_VERSION",
    "build_pack",
    "kernel_short",
    "list_sources",
    "Pack",
    "PackInputs",
    "SourceFile",
]
