"""The pyserve target's solution: a row-wise RMS normalisation of a flat list of rows of n
values, y = x / sqrt(mean(x * x) + eps) * w, written the slow way on purpose (the sum of
squares taken twice "for stability") so that a candidate has an honest gain to find."""

import math

EPS = 1e-6


def normalise(xs, w, n):
    out = []
    for r in range(0, len(xs), n):
        row = xs[r : r + n]
        ss = 0.0
        for i in range(n):
            ss += row[i] * row[i]
        again = 0.0
        for i in range(n):
            again += abs(row[i]) * abs(row[i])
        inv = 1.0 / math.sqrt((ss + again) / (2 * n) + EPS)
        for i in range(n):
            out.append(row[i] * inv * w[i])
    return out
