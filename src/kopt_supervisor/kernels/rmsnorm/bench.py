"""RMSNorm (QK-norm) bench on kopt's public harness: kopt's CSV on stdout.

    python bench.py                 # this machine's shapes (GPU: production + regression)
    python bench.py --serve         # kopt's [target].serve: this tree's looks, one per request

contract.py and roofline.py beside this file declare the kernel (read into a
kopt_supervisor.kernels.harness.Spec); `python bench.py --help` lists the options.
"""

import sys
from pathlib import Path

from kopt_supervisor.kernels import harness

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    sys.exit(harness.main(HERE))
