#!/usr/bin/env bash
# The server image's runtime stage without a container engine: a Debian bookworm root made by
# mmdebstrap with only deploy/image/runtime-packages.txt, the `forge` binary of BUILD_DIR copied
# to /usr/local/bin as the Dockerfile does, then run in it (chroot, uid 1000 as the image's USER):
# `forge --version`, and `forge serve` answering /healthz. A shared library the runtime stage
# lacks fails here. Needs root (chroot) and mmdebstrap; the root is cached under BUILD_DIR.
#   tests/deploy/image_test.sh BUILD_DIR     (BUILD_DIR: a build without sanitizers, e.g. Release)
set -euo pipefail
build=$(cd "${1:?usage: image_test.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
forge=$build/bin/forge
[[ -x $forge ]] || { echo "no $forge: cmake --build $build --target forge" >&2; exit 1; }
if objdump -p "$forge" | grep -q 'NEEDED.*lib[au][sb]san'; then
  echo "$forge is a sanitizer build: use a Release build (the image's)" >&2; exit 1
fi
[[ $(id -u) == 0 ]] || { echo "needs root (mmdebstrap, chroot)" >&2; exit 77; }
command -v mmdebstrap >/dev/null || { echo "mmdebstrap is not installed: apt-get install mmdebstrap" >&2; exit 1; }
packages=$(grep -v -e '^#' -e '^$' "$src/deploy/image/runtime-packages.txt" | paste -sd, -)
root=$build/image-root
stamp=$root/.starforge-packages
if [[ ! -f $stamp || "$(cat "$stamp")" != "$packages" ]]; then
  rm -rf "$root"
  echo "== mmdebstrap bookworm (minbase + $packages)"
  mmdebstrap --variant=minbase --include="$packages" bookworm "$root" http://deb.debian.org/debian
  echo "$packages" >"$stamp"
fi
install -m 0755 "$forge" "$root/usr/local/bin/forge"
mkdir -p "$root/starforge" "$root/var/lib/starforge"
chown 1000:1000 "$root/starforge" "$root/var/lib/starforge"

echo "== forge --version in the runtime root"
chroot --userspec=1000:1000 "$root" /usr/local/bin/forge --version

echo "== forge serve answers /healthz in the runtime root"
port_file=$root/tmp/forge.port
rm -f "$port_file"
chroot --userspec=1000:1000 "$root" env HOME=/var/lib/starforge FORGE_STORAGE_ROOT=/starforge \
  FORGE_STATE_DIR=/var/lib/starforge /usr/local/bin/forge serve --listen 127.0.0.1:0 \
  --port-file /tmp/forge.port >"$build/image-serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do [[ -s $port_file ]] && break; sleep 0.1; done
[[ -s $port_file ]] || { cat "$build/image-serve.log" >&2; echo "FAIL: forge serve did not start" >&2; exit 1; }
curl -fsS "http://127.0.0.1:$(cat "$port_file")/healthz"
echo "PASS"
