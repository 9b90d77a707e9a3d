"""What each flag the engine writes means, in one line for the engineer (pure: no Textual).

`FLAG_HELP` explains every flag a decision can carry (record["decision"]["flags"]: the
verdict's flags, engine/decide/estimate.py FLAGS, and those the loop adds); `PLAN_FLAG_HELP` the
flags of a plan read against the context pack (record["plan"]["flags"]). The review dialog
and the iteration detail show them under the reason; tests/tui checks that every flag the
engine can write has a line here. A flag written by another kopt version is shown as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

FLAG_HELP = {
    "subthreshold_gain": "the candidate is faster with confidence, but by less than [decide].min_effect_pct",
    "undecided_at_max_rounds": "after [decide].max_rounds the interval still straddles the ±min_effect band",
    "suspicious_speedup": "faster than [decide].suspicious_speedup times: check that it still computes the same thing",
    "faster_than_floor": "faster than the roofline floor allows: the bench or the kernel likely changed what it measures",
    "no_samples": "no config could be compared",
    "no_target": "the target class has no samples",
    "profiler_disagrees": "the profiler's GPU time per class does not agree with the benchmark's verdict for some "
    "class (both numbers are in the reason)",
    "profiler_bytes_short": "a config's range moved fewer bytes through L2 than a call reads and writes "
    "([roofline].bytes): work the profiler did not see (switched off from inside the process?)",
    "best_slowed": "best's kernels ran slower per call under the profiler than when its tree was kept (same GPU): "
    "a gain against them is not shown (a kept tree that slows itself as BEST?)",
    "profile_outputs_unconfirmed": "the candidate's outputs under the profiler could not be compared with best's "
    "(best's profile wrote none after an earlier keep compared them, or other configs): the engineer decides",
    "partial_gain": "faster only where the hypothesis did not aim, or in some of the classes a global change aimed at",
    "budget_spent": "[decide].budget_gpu_s ran out before every class was decided",
    "two_in_a_row": "kept by the two_in_a_row policy: a second same-direction sub-threshold gain",
    "futility": "a class still open at the last round was resolved: what would matter is ruled out at "
    "[decide].futility_confidence",
    "gain_ruled_out": "a rejection ended before the last round: the classes still open could no longer be a "
    "gain of [decide].min_effect_pct (at [decide].futility_confidence), so no outcome left could change it",
    "regression_ruled_out": "a class other than the target, still open, was shown within its tolerance "
    "([decide].max_other_regression_pct) at the policy's confidence: it could no longer block the keep",
    "outliers_dropped": "samples far from the rest (a throttling spike, a stray process) were left out",
    "disturbed_rounds": "the GPU gate saw throttling or another process during some rounds; they were left out",
    "profiler_failed": "the profiler could not confirm the benchmark's verdict (its run failed)",
    "likely_regression": "at the last round a class was estimated slower by more than [decide].min_effect_pct, "
    "not proven at the policy's confidence: counted as a regression",
    "repeated_values": "the candidate's values repeat to the last digit across rounds while best's vary: "
    "a forged or cached result?",
    "wall_time_unexplained": "the reported time fell by more than the bench process's wall time did: work "
    "outside the timed region?",
    "diff_constructs": "the candidate's diff reaches outside the kernel (patches, frames, exits, files, "
    "environment, threads, input-keyed caches): read the quoted lines",
    "reverify_disagrees": "the keep, decided again in fresh separate processes of the process-level bench, "
    "did not come out a keep: noise, or candidate code that bent the shared A/B process "
    "(both verdicts are in the reason)",
    "mean_not_faster": "the metric (a median over timed calls) shows a gain the mean over the same calls does not: "
    "a few expensive calls among many cheap ones?",
    "last_block_not_faster": "the metric (a median over timed blocks) shows a gain the last timed block, the one "
    "whose outputs kopt audits, does not: work done only where it is checked?",
    "confirmation_disagrees": "the keep's confirmation in freshly started servers (fresh inputs, emptied caches) did "
    "not show the gain it claims, or found a class slower beyond the margin (both numbers "
    "are in the reason)",
    "external_truth_refutes": "the OS's accounting of the bench processes (CPU and wall time) does not show the "
    "seconds the bench claims to have saved: a patched timer, or work moved outside the "
    "timed calls (not kept)",
    "external_truth_inconclusive": "the OS's accounting of the bench processes (CPU and wall time) could not tell "
    "whether the seconds the bench claims were saved (its clocks' noise, or a claim "
    "under the CPU clock's ticks): no clock outside the candidate's process confirms "
    "the keep",
    "stronger_checks_unavailable": "a keep too good to take on the bench's word, and a stronger check it needs (the "
    "profiler, the OS's accounting, an output audit on fresh inputs) could not run or "
    "could not tell",
    "needs_stronger_checks": "a keep too good to take on the bench's word (suspicious speedup, faster than the "
    "floor, a median the mean does not follow): final only once the profiler and an output "
    "audit on fresh inputs agree",
}

PLAN_FLAG_HELP = {
    "uncited": "the plan names no config class, profiled kernel or metric of the context pack: a guess, "
    "not a change pointed at a bottleneck",
}


def flags_to_explain(reason: str, flags: Sequence[str]) -> list[str]:
    """The flags that get a line of help under the reason: not one the reason already names
    (the engine's "wide is 3.1x faster, more than the suspicious_speedup of 3x" says it)."""
    return [f for f in flags if f not in reason]
