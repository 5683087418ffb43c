#!/usr/bin/env bash
# On the device machine, in one call (see scripts/gpu_wheels.sh for the wheels to carry):
#   1. installs the carried wheels and swarmnode itself into /tmp/site (no network there);
#   2. the GPU tests: `pytest -m gpu` (cupy kernels against their numpy twins, the int8 and
#      compression parity, Krum/aggregation on the GPU, the torch adapter on CUDA);
#   3. training throughput of one peer, CPU against CUDA, in the same run
#      (scripts/bench/compute/train.py);
#   4. a two-peer swarm on the GPU for a few hundred steps (start, join, exchange, summary).
# Everything it prints goes to $OUT too (gpu-*.txt), to be quoted in docs/benchmarks.md "GPU".
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
{ nvidia-smi -L; python3 -c 'import cupy, numpy, torch; print("cupy", cupy.__version__, "numpy", numpy.__version__, "torch", torch.__version__)'; } 2>&1 | tee "$OUT/gpu-device.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
# swarmnode as installed (pyproject.toml's package-dir): swarmnode/ with the rooms linked in
# (no build there: its setuptools may be older than pyproject.toml's; the int8 C kernel then
# falls back to numpy, which the GPU checks do not time)
rm -rf /tmp/site/swarmnode && cp -r swarmnode /tmp/site/swarmnode
for room in kernels gossip node fault; do ln -s "$PWD/$room" "/tmp/site/swarmnode/$room"; done
export PYTHONPATH=/tmp/site
python3 -c 'import swarmnode; print("swarmnode", swarmnode.__version__)' || exit 1
# the tests import swarmnode from /tmp/site: the checkout's folders are not the package
timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tee "$OUT/gpu-pytest.txt"
timeout 120 python3 scripts/bench/compute/train.py --device cpu --seconds 3 2>&1 | tee "$OUT/gpu-train-cpu.txt"
timeout 120 python3 scripts/bench/compute/train.py --device cuda --seconds 3 2>&1 | tee "$OUT/gpu-train-cuda.txt"
work=$(mktemp -d)
timeout 90 python3 -m swarmnode start --device cuda --listen 127.0.0.1:17180 --steps 600 --shard 0/2 \
  --summary-json "$work/a.json" > "$work/a.log" 2>&1 &
sleep 3
timeout 90 python3 -m swarmnode start --device cuda --listen 127.0.0.1:17181 --join 127.0.0.1:17180 \
  --steps 600 --shard 1/2 --summary-json "$work/b.json" > "$work/b.log" 2>&1
wait
{ tail -n 4 "$work/a.log" "$work/b.log"; cat "$work/a.json" "$work/b.json"; } 2>&1 | tee "$OUT/gpu-swarm.txt"
