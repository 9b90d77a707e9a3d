"""adaLN modulation bench: kopt's CSV on stdout (see harness/bench.py for the options).

    python bench.py                 # this machine's shapes (GPU: production + regression)
    python bench.py --ab BEST CAND  # kopt's ab_command mode
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# harness/ sits beside this file in a materialized repo, one level up inside kopt
sys.path.insert(0, str(HERE if (HERE / "harness").is_dir() else HERE.parent))

from harness.bench import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(HERE))
