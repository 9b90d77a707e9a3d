"""The third H100 wave (issue "Measure from outside the candidate's reach"): what
`experiments/h100_wave3.sh part1|part2|part3|part4 [--smoke]` runs on the device machine, and
without a GPU in its smoke mode. The summary, the commands with deadlines, the packing and the
device setup are the shared experiments/device_wave.py and device_wave.sh.

    run.py               the four parts (entry point)
    records.py           a run's records as the wave reports them: per iteration the decision's,
                         the confirmation's and the profiler's seconds, the end to end seconds,
                         the external truth, kopt's best speedup at each keep; the "done when" figures
    preflight.py         which pieces of the redesign the checkout holds; the per-tree serve probe
    targets.py           the bundled RMSNorm as a repo of its own and its kopt.toml for scripted runs
    candidates.py        the scripted candidates: comment-only, one class's params, hostile code
    propose_scripted.py  the scripted `command` proposer (standard library only)
    prescan_rms.py       a real ~3% step of RMSNorm found with the harness's kernel alone
"""
