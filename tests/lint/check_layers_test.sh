#!/usr/bin/env bash
# scripts/check-layers: passes on this repository, and fails, naming the file, the line and the
# folder, on a tree where the Kubernetes client includes KubeRay's constants (the leak it
# guards against) or a folder is missing from its table.
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
check="$here/scripts/check-layers"

"$check"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/kube" "$tmp/src/kuberay" "$tmp/src/include/starforge/kube" "$tmp/src/extra"
cat >"$tmp/src/kube/resource.cc" <<'C'
#include "starforge/kube/resource.h"
#include "starforge/common/names.h"
#include "starforge/kuberay/constants.h"
C
cat >"$tmp/src/include/starforge/kube/client_config.h" <<'H'
#include "starforge/config/config.h"
H
cat >"$tmp/src/kuberay/render.cc" <<'C'
#include "starforge/kube/resource.h"
C
if out="$("$check" --root "$tmp" 2>&1)"; then
  echo "FAIL: check-layers passed a tree where kube includes kuberay and config:"; echo "$out"; exit 1
fi
grep -q '^src/kube/resource.cc:3: kube must not include starforge/kuberay/' <<<"$out" ||
  { echo "FAIL: kube -> kuberay not reported:"; echo "$out"; exit 1; }
grep -q '^src/include/starforge/kube/client_config.h:1: kube must not include starforge/config/' \
  <<<"$out" || { echo "FAIL: kube -> config not reported:"; echo "$out"; exit 1; }
grep -q '^src/extra: not in scripts/check-layers' <<<"$out" ||
  { echo "FAIL: a folder without a row not reported:"; echo "$out"; exit 1; }
[[ "$(wc -l <<<"$out")" == 3 ]] ||
  { echo "FAIL: allowed includes were reported:"; echo "$out"; exit 1; }
echo "ok"
