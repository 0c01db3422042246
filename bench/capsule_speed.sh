#!/usr/bin/env bash
# Capsule speed (issue 17), every figure a ratio to the sha256sum floor measured in the same run:
# the floor, a standard-library replica of Ray's --working-dir packaging, `forge capsule build`
# cold and after one file changed, and `forge submit --code` against a local `forge serve`
# (cold, to "capsule stored"; unchanged resubmit). See bench/README.md.
#
#   bench/capsule_speed.sh [SIZE_MIB [FILES]]     # default 256 MiB in 5000 files
#   BUILD_DIR=build/release bench/capsule_speed.sh 1024 20000
#
# BUILD_DIR (default build/release) is configured as Release with the benchmarks and built
# (forge, capsule_bench) with -j2 unless NO_BUILD=1. WORK (default a new directory under
# $TMPDIR) needs about 4x SIZE_MIB free; it is removed at the end unless KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-256}
files=${2:-5000}
build=${BUILD_DIR:-build/release}
if [[ "${NO_BUILD:-0}" != 1 ]]; then
  if [[ ! -f "$build/build.ninja" ]]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTARFORGE_SANITIZE=OFF \
      -DSTARFORGE_BUILD_BENCH=ON -DSTARFORGE_WERROR=OFF \
      ${CCACHE:+-DCMAKE_CXX_COMPILER_LAUNCHER=ccache} >/dev/null
  fi
  cmake --build "$build" -j2 --target forge capsule_bench >/dev/null
fi
work=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/capsule-speed-XXXXXX")}
# The 1 GiB tree's capsule (~600 MiB) is over the 512 MiB default: measuring speed, not policy.
export FORGE_CAPSULE_MAX_BYTES=${FORGE_CAPSULE_MAX_BYTES:-4294967296}
serve_pid=""
cleanup() {
  [[ -n "$serve_pid" ]] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
  [[ "${KEEP:-0}" == 1 ]] || rm -rf "$work" 2>/dev/null || { sleep 1; rm -rf "$work"; }
}
trap cleanup EXIT
mkdir -p "$work/root"
# A local forge serve (filesystem object store under root/objects) for the submit rows.
HOME="$work/root" FORGE_STORAGE_ROOT="$work/root" "$build/bin/forge" serve --listen 127.0.0.1:0 \
  --port-file "$work/port" >"$work/serve.out" 2>"$work/serve.log" &
serve_pid=$!
for _ in $(seq 100); do [[ -s "$work/port" ]] && break; sleep 0.1; done
[[ -s "$work/port" ]] || { echo "forge serve did not start: $(tail -3 "$work/serve.log")" >&2; exit 1; }
token=$(sed -n 's/.*admin token (shown once, store it now): \(sf_[a-z0-9]*\).*/\1/p' "$work/serve.out")
python3 bench/capsule_speed.py --bin "$build/bin" --size-mib "$size" --files "$files" \
  --work "$work/bench" --server "http://127.0.0.1:$(cat "$work/port")" --token "$token" \
  --objects "$work/root/objects"
