#!/usr/bin/env bash
# `uv run python scripts/e2e/kuberay_loop.py --kubeconfig PATH` (its real-cluster mode, scenarios
# 1-5) against a
# kubesim set up the way scripts/e2e/setup-kind.sh sets up kind: one node labelled
# starforge/gpu-series=h200 advertising 8 fake GPUs, HTTPS with a CA file, forge serve acting as
# ServiceAccount starforge:forge with exactly the rules of deploy/ (kubesim's RBAC mode with
# deploy/rbac-kubesim.yaml), an RWO storage PVC mounted at /starforge (FORGE_K8S_STORAGE_SHARED=
# false), FORGE_K8S_GPU_PASSTHROUGH=0, the default image rayproject/ray:<FORGE_KUBERAY_RAY_VERSION>,
# and the person running the loop reading the cluster with kubectl as an administrator.
#   kuberay_loop_kubeconfig_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: kuberay_loop_kubeconfig_test.sh BUILD_DIR}" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/e2e/lib.sh
source "$repo/scripts/e2e/lib.sh"
e2e_init kuberay_loop_kubeconfig
work=$E2E_WORK
kubesim="$build/bin/kubesim"
admin_token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

cat >"$work/nodes.yaml" <<'EOF'
- metadata: {name: starforge-control-plane, labels: {starforge/gpu-series: h200}}
  status:
    capacity: {cpu: "8", memory: 16Gi, nvidia.com/gpu: "8"}
    allocatable: {cpu: "8", memory: 16Gi, nvidia.com/gpu: "8"}
EOF
printf -- '- "rayproject/ray:*"\n- "docker.io/rayproject/ray:*"\n' >"$work/images.yaml"
mkdir -p "$work/pv/starforge/starforge-storage"
e2e_start_kubesim "$kubesim" --tls --cert-file "$work/ca.crt" --token "$admin_token" \
  --rbac "$repo/deploy/rbac-kubesim.yaml" --nodes "$work/nodes.yaml" --controllers all \
  --pv-root "$work/pv" --images "$work/images.yaml" --kubelet-backoff-ms 500
e2e_start_s3peer "$repo" starforge

# The administrator's kubeconfig (kind writes one like it), and what setup-kind.sh applies.
e2e_write_kubeconfig "$work/kubeconfig" "$E2E_K8S" "$admin_token" "$work/ca.crt"
k() { kubectl --kubeconfig "$work/kubeconfig" "$@"; }
k apply -f "$repo/deploy/namespace.yaml" >/dev/null
k apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: starforge-storage
  namespace: starforge
spec:
  accessModes: ["ReadWriteOnce"]
  resources:
    requests:
      storage: 10Gi
EOF
k -n starforge patch pvc starforge-storage --subresource=status --type=merge \
  -p '{"status":{"phase":"Bound"}}' >/dev/null

# The settings setup-kind.sh writes (forge serve is ServiceAccount forge, not the administrator).
# uv (scripts/bootstrap) keeps its cache where it is: the loop's dependencies are installed there.
uv="$repo/build/tools/bin/uv"
[[ -x "$uv" ]] || e2e_fail "$uv is missing: run scripts/bootstrap (scripts/uv-requirements.txt)"
uv_cache=${UV_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/uv}
cd "$repo"  # the loop runs from the repository root, as written (uv.toml)
env -i PATH="$PATH" HOME="$work/home" TMPDIR="${TMPDIR:-/tmp}" KEEP="${KEEP:-0}" UV_CACHE_DIR="$uv_cache" \
  ASAN_OPTIONS="${ASAN_OPTIONS:-}" LSAN_OPTIONS="${LSAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
  FORGE_DEFAULT_FLEET_KIND=kuberay \
  FORGE_K8S_API_SERVER="$E2E_K8S" \
  FORGE_K8S_CA_FILE="$work/ca.crt" \
  FORGE_K8S_TOKEN=forge-token \
  FORGE_K8S_NAMESPACE=starforge \
  FORGE_K8S_GPU_NODE_LABEL=starforge/gpu-series \
  FORGE_K8S_GPU_PASSTHROUGH=0 \
  FORGE_K8S_STORAGE_PVC=starforge-storage \
  FORGE_K8S_STORAGE_SHARED=false \
  FORGE_K8S_STORAGE_MOUNT=/starforge \
  FORGE_STORAGE_ROOT="$work/pv/starforge/starforge-storage" \
  FORGE_S3_ENDPOINT="$E2E_S3" \
  FORGE_S3_BUCKET=starforge \
  FORGE_S3_ACCESS_KEY=S3RVER \
  FORGE_S3_SECRET_KEY=S3RVER \
  "$uv" run python scripts/e2e/kuberay_loop.py --kubeconfig "$work/kubeconfig" --build "$build" 2>&1 |
  tee "$work/loop.log" >&2
rc=${PIPESTATUS[0]}
((rc == 0)) || e2e_fail "kuberay_loop.py --kubeconfig exited $rc"
grep -q "real cluster: namespace starforge, series h200, image rayproject/ray:" "$work/loop.log" ||
  e2e_fail "the loop did not find the series and the default image itself"
for s in 1 2 3 4 5 final; do
  grep -Eq "^PASS +$s " "$work/loop.log" || e2e_fail "scenario $s did not pass"
done
! grep -Eq "^(PASS|FAIL|SKIP) +(6|7|8|K) " "$work/loop.log" ||
  e2e_fail "scenarios 6-8 and K (the simulator's) ran on a real cluster"
e2e_say "passed"
