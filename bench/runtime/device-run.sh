#!/bin/bash
# device-run.sh (copied into the bundle by device-bundle.sh) — on the far
# machine, from the repo root's copy: node, the production node_modules and
# liburing unpacked from the bundle, then bench:runtime with its spill
# directory under the repo (on the machine's disk, not a tmpfs); the bench's
# log and the machine's description go to $OUT. ROUNDS and REPEATS set the
# bench's RUNTIME_BENCH_ROUNDS and RUNTIME_BENCH_REPEATS (3 and 5).
set -o pipefail
BUNDLE=$(cd "$(dirname "$0")" && pwd)
cd "$BUNDLE/.."
OUT=${OUT:-/tmp/devout}; mkdir -p "$OUT" /tmp/tc /tmp/tclib
tar -C /tmp/tc -xJf "$BUNDLE/node.tar.xz" && export PATH=/tmp/tc:$PATH
tar -xJf "$BUNDLE/mods.tar.xz"
cp "$BUNDLE"/liburing.so.2 /tmp/tclib/ && export LD_LIBRARY_PATH=/tmp/tclib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{
  echo "node $(command -v node) $(node --version)"; nproc; free -g | head -2; df -h . | tail -1
  grep "model name" /proc/cpuinfo | head -1; lsblk -d -o NAME,ROTA,SIZE,MODEL 2>/dev/null | head -8
  command -v fio || echo "no fio"; uptime
} 2>&1 | tee "$OUT/machine.txt"
node -e "require('./build/Release/tiercut_native.node'); console.log('addon ok')" 2>&1 | tee -a "$OUT/machine.txt" || exit 3
mkdir -p .spill
RUNTIME_BENCH_DIR=${RUNTIME_BENCH_DIR:-$PWD/.spill} RUNTIME_BENCH_ROUNDS=${ROUNDS:-3} RUNTIME_BENCH_REPEATS=${REPEATS:-5} node bench/runtime/bench-runtime.mjs 2>&1 | tee "$OUT/bench.log"
echo "bench exit $?" | tee -a "$OUT/bench.log"
