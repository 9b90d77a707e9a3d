"""softmax on kopt's public harness: checked and timed in every mode kopt uses.

    python kopt_bench.py                         # this tree: kopt's CSV on stdout
    python kopt_bench.py --serve                 # this tree's looks on request (kopt's [target].serve)
"""

from kopt_supervisor.kernels import harness


def make_inputs(torch, dims, dtype, device, gen):
    x = torch.randn(dims["M"], dims["N"], generator=gen, device=device) * 4
    return (x.to(dtype),), {}


def reference(torch, args, kwargs):
    return torch.softmax(args[0].double(), dim=-1)


SPEC = harness.Spec(
    name="softmax",
    function="softmax.kernel:softmax",  # the module in each tree (best/, cand/)
    shapes=[harness.production("attn-4k", M=16384, N=4096), harness.production("attn-1k", M=65536, N=1024),
            harness.regression("odd", M=333, N=1000), harness.regression("one-row", M=1, N=8192),
            harness.small("cpu-64", M=4, N=64), harness.small("cpu-100", M=3, N=100),
            harness.small("cpu-256", M=2, N=256)],
    tolerance={"float16": (1e-5, 1e-3), "bfloat16": (1e-4, 8e-3)},
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=lambda M, N, esize, **_: 2 * M * N * esize,
    class_by=["dtype"],
)

if __name__ == "__main__":
    raise SystemExit(harness.main(SPEC))
