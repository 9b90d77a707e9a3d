"""The two Triton kernels compile for an H100 (sm_90) without one: bf16 and fp16, the single
pass (a row in registers) and the chunked two-pass loop, at the tuned launch sizes. The
pointers and integer sizes are marked divisible by 16, as Triton specializes a real launch
on the production shapes (every production D and head_dim is a multiple of 16): the single
pass then moves data in 128-bit accesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[2] / "src" / "kopt_supervisor" / "kernels"

CODE = """
import json, sys, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kopt_supervisor.kernels.harness.loader import load_module
ada = load_module(sys.argv[1] + '/adaln/solution/adaln.py', 'ada')._adaln_kernel
rms = load_module(sys.argv[1] + '/rmsnorm/solution/rmsnorm.py', 'rms')._rms_kernel
def sig(dt, names):
    return {n: ('*' + dt if n.endswith('_ptr') else 'fp32' if n == 'eps' else 'i32') for n in names}
def div16(names):
    return {(i,): [['tt.divisibility', 16]] for i, n in enumerate(names) if n != 'eps'}
out = {}
for dt, block, rows, single in (('bf16', 4096, 1, True), ('fp16', 1024, 2, False)):
    names = ['x_ptr', 'scale_ptr', 'shift_ptr', 'y_ptr', 'M', 'N', 'D', 'eps']
    s = sig(dt, names)
    s.update(BLOCK_D='constexpr', ROWS='constexpr', SINGLE='constexpr', SAME_BATCH='constexpr')
    src = ASTSource(ada, signature=s, constexprs={'BLOCK_D': block, 'ROWS': rows, 'SINGLE': single,
                                                  'SAME_BATCH': single},
                    attrs=div16(names))
    out['adaln_' + dt] = triton.compile(src, target=GPUTarget('cuda', 90, 32), options={'num_warps': 8}).asm['ptx']
whole = load_module(sys.argv[1] + '/rmsnorm/solution/rmsnorm.py', 'rms2')._rms_whole_tiles
names = ['x_ptr', 'w_ptr', 'y_ptr', 'eps']
s = sig('bf16', names)
s.update(D='constexpr', ROWS='constexpr')
src = ASTSource(whole, signature=s, constexprs={'D': 128, 'ROWS': 16}, attrs=div16(names))
out['rmsnorm_bf16'] = triton.compile(src, target=GPUTarget('cuda', 90, 32), options={'num_warps': 4}).asm['ptx']
for tag, dt, block, rows, single in (('bf16_masked', 'bf16', 128, 16, True), ('fp16', 'fp16', 32, 32, False)):
    names = ['x_ptr', 'w_ptr', 'y_ptr', 'M', 'D', 'eps']
    s = sig(dt, names)
    s.update(BLOCK_D='constexpr', ROWS='constexpr', SINGLE='constexpr')
    src = ASTSource(rms, signature=s, constexprs={'BLOCK_D': block, 'ROWS': rows, 'SINGLE': single},
                    attrs=div16(names))
    out['rmsnorm_' + tag] = triton.compile(src, target=GPUTarget('cuda', 90, 32), options={'num_warps': 4}).asm['ptx']
print(json.dumps(out))
"""


def test_kernels_compile_for_sm90() -> None:
    pytest.importorskip("triton.backends.nvidia.compiler", reason="triton without its CUDA backend")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    res = subprocess.run(
        [sys.executable, "-c", CODE, str(KERNELS)], capture_output=True, text=True, timeout=180, env=env
    )
    assert res.returncode == 0, res.stderr[-3000:]
    ptx = json.loads(res.stdout.strip().splitlines()[-1])
    assert set(ptx) == {"adaln_bf16", "adaln_fp16", "rmsnorm_bf16", "rmsnorm_bf16_masked", "rmsnorm_fp16"}
    for name, text in ptx.items():
        assert ".target sm_90" in text and "ld.global" in text and "st.global" in text, name
        assert ("bf16" in name) == ("cvt.rn.bf16" in text), name  # one rounding to the output dtype
    for single in ("adaln_bf16", "rmsnorm_bf16", "rmsnorm_bf16_masked"):
        assert "ld.global.v4" in ptx[single] and "st.global.v4" in ptx[single], single
    for name in ("rmsnorm_bf16", "rmsnorm_bf16_masked", "rmsnorm_fp16"):
        assert "rsqrt.approx" in ptx[name] and "sqrt.rn" not in ptx[name], name  # one rsqrt, no sqrt + div
    # whole tiles: no predicated loads or stores; a partial tile predicates them
    assert "@%p" not in "".join(
        line for line in ptx["rmsnorm_bf16"].splitlines() if "ld.global" in line or "st.global" in line
    )
    assert "@%p" in "".join(line for line in ptx["rmsnorm_bf16_masked"].splitlines() if "ld.global" in line)
