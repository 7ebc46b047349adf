#!/bin/bash
# bench/runtime/device-bundle.sh [DIR] — packs what `npm run bench:runtime`
# needs on a machine with no Node.js and no network (the device machine of
# this workplace: x86-64, no npm registry) into DIR (default .devrun, which
# .git/info/exclude should ignore): this machine's node binary, the
# production node_modules (npm ls --omit=dev), liburing (the native addon
# links it) and device-run.sh. With the built tree (dist/, build/Release)
# beside it, `bash DIR/device-run.sh` there unpacks them and runs the bench
# (docs/BENCHMARKS.md, "Runtime on the device machine").
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-.devrun}
mkdir -p "$DIR"
tar -C "$(dirname "$(readlink -f "$(command -v node)")")" -cf - "$(basename "$(readlink -f "$(command -v node)")")" | xz -T2 -6 > "$DIR/node.tar.xz"
MODS=$(npm ls --omit=dev --all --parseable 2>/dev/null | sed "s#^$PWD/##" | grep '^node_modules/' | grep -v 'node-addon-api\|@types/node\|undici-types')
tar -cJf "$DIR/mods.tar.xz" $MODS
cp -L "$(ldconfig -p | awk '/liburing.so.2 /{print $NF; exit}')" "$DIR/liburing.so.2"
cp bench/runtime/device-run.sh "$DIR/device-run.sh"
du -sh "$DIR"
