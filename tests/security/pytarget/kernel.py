"""The pytarget's kernel: y[i] = x[i] * x[i] * scale, written the slow way on purpose (a
redundant inner loop per element) so that a candidate has an honest gain to find."""


def kernel(xs: list[float], scale: float) -> list[float]:
    out = []
    for x in xs:
        acc = 0.0
        for _ in range(6):
            acc = x * x * scale
        out.append(acc)
    return out
