#!/usr/bin/env bash
# Here (a machine with pip's registries), once before a device session: download into .whl/
# the wheels that the device image lacks (it has numpy, cupy-cuda13x, torch, aiohttp, msgpack,
# xxhash, prometheus-client, pytest, pytest-timeout, pytest-xdist, setuptools). The versions are
# this checkout's .venv's, for CPython 3.12 on x86-64 (the device's python3). Then:
#   device run: command "bash scripts/gpu_check.sh", carry [".whl"], timeout_s 540
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> "$(git rev-parse --git-path info/exclude)"
PY=${PY:-.venv/bin/python}
rm -rf .whl && mkdir -p .whl
for name in cryptography cffi pycparser blake3 numkong pytest-asyncio; do
  version=$("$PY" -m pip show "$name" | awk '/^Version:/ {print $2}')
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
    -d .whl "$name==$version"
done
ls -1 .whl
du -sh .whl
