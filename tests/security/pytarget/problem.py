"""The pytarget's problem definition, as KernelBench-style targets keep it beside the kernel:
each config's input holds n * BATCH values. (Not a CSV column, and not protected: a
candidate can edit it.)"""

BATCH = 4
SCALE = 0.5


def inputs(n: int) -> list[float]:
    return [((j * 7919) % 1009) / 1009.0 for j in range(n * BATCH)]
