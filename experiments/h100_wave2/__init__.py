"""The second H100 wave (issues: verification on the H100, bring-your-own kernel, lanes over
Ray): what `experiments/h100_wave2.sh part1|part2|part3 [--smoke]` runs on the device machine,
and on a machine without a GPU in its smoke mode.

    common.py            the summary written as it goes, the machine's description, commands run
                         with a deadline (a kopt run is asked to stop first, killed after), packing
    records.py           a run's records read back from run.db: per iteration the verdict, the
                         profiler's per-class word, the kernels in every config range, the timings
    softmax_target.py    examples/softmax as a git repo of its own, onboarded as `kopt init --bench`
                         does, and the kopt.toml of each mode (served A/B, process-level, Ray)
    propose_softmax.py   the scripted `command` proposer: applies the change listed for its iteration
    prescan.py           times real launch changes of the softmax kernel to find one ~3% away
    run.py               the three parts (entry point)
    fetch_wheels.sh      run once on the machine that calls the device: the wheels that must travel
"""
