#!/usr/bin/env bash
# The wheels `kopt mcp` needs on the device (Python 3.12, x86-64, no index), fetched here into
# .whl/ of the checkout that calls the device (git-ignored; experiments/mcp_device.sh installs
# every .whl/*.whl there with --no-index --no-deps, as experiments/device_wave.sh does):
#
#   bash experiments/mcp_device/fetch_wheels.sh [DEST]        (DEST default: .whl)
#
# The official MCP SDK (mcp 2.3, the [mcp] extra) and what the device image lacks of its
# dependencies (KINDS.md lists the image's packages): mcp-types, httpx2/httpcore2 and truststore,
# pydantic and pydantic-core, PyJWT with cryptography, cffi and pycparser (mcp imports jwt's
# crypto at import: the first H200 try stopped there), opentelemetry-api, python-multipart,
# sse-starlette, starlette, uvicorn. anyio, idna, typing-extensions and h11 are in the image
# but may be older than httpx2 (anyio >= 4.10, idna >= 3.18) and pydantic (typing-extensions
# >= 4.16) ask: carried at the versions the tests run with. Versions pinned (repeatable);
# an older wheel of the same package in DEST is removed first (two versions stop the install).
set -euo pipefail
DEST=${1:-.whl}
PY=${PY:-python3}
[ -x .venv/bin/python ] && PY=.venv/bin/python
mkdir -p "$DEST"
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any)
WANT=(mcp==2.3.0 mcp-types==2.3.0 httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5
      pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
      typing-extensions==4.16.0 PyJWT==2.15.1 cryptography==50.0.2 cffi==2.1.1 pycparser==3.12
      opentelemetry-api==1.45.2 python-multipart==0.0.34 sse-starlette==3.7.0 starlette==1.10.0
      uvicorn==0.54.0 anyio==4.16.0 idna==3.20 h11==0.16.0)
for spec in "${WANT[@]}"; do
  name=${spec%%==*}
  norm=$(echo "$name" | tr '[:upper:]-' '[:lower:]_')
  for old in "$DEST"/*.whl; do
    [ -f "$old" ] || continue
    base=$(basename "$old" | tr '[:upper:]' '[:lower:]')
    if [[ $base == "${norm}"-* && $base != "${norm}-${spec##*==}"-* ]]; then rm -f "$old"; fi
  done
done
"$PY" -m pip download -q --no-deps "${PLAT[@]}" -d "$DEST" "${WANT[@]}"
ls -la "$DEST"
du -sh "$DEST"
