#!/usr/bin/env bash
# forge doctor and the Helm chart on the real Kubernetes v1.32 control plane (tools/k8s/
# controlplane; no nodes, no operator process): prerequisites missing one at a time, each named
# with its fix, then in place.
#   - no KubeRay CRDs: kuberay-crds fails naming the Helm install; after `kubectl create -f` of the
#     v1.4.0 CRDs it passes;
#   - the chart rendered by `helm template` is accepted by `kubectl apply --dry-run=server`, then
#     applied for real: its ServiceAccount `forge` (a token from the TokenRequest API) passes the
#     permissions check with exactly deploy/'s RBAC, and fails naming the rule once one verb is
#     taken out of Role `forge`;
#   - the storage PVC of the chart is not bound (no provisioner here): storage-pvc fails, naming
#     `kubectl describe pvc`;
#   - no node: gpu-nodes fails naming the label command; without S3, object-storage fails.
#   real_doctor_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: real_doctor_test.sh BUILD_DIR}" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/e2e/lib.sh
source "$repo/scripts/e2e/lib.sh"
e2e_init real_doctor
work=$E2E_WORK
tools="$repo/build/tools/bin"
helm=${HELM:-$tools/helm}
for bin in "$tools/hyperkube" "$tools/kubectl" "$helm" "$build/bin/forge"; do
  [[ -x "$bin" ]] || e2e_fail "$bin is missing: run scripts/bootstrap"
done

"$repo/tools/k8s/controlplane" up "$work/cp" --hyperkube "$tools/hyperkube" 2>"$work/controlplane.log" &
cp_pid=$!
e2e_pids+=("$cp_pid")
for _ in $(seq 1 900); do
  [[ -s "$work/cp/ready" ]] && break
  kill -0 "$cp_pid" 2>/dev/null || { cat "$work/controlplane.log" >&2; e2e_fail "the control plane did not start"; }
  sleep 0.2
done
[[ -s "$work/cp/ready" ]] || e2e_fail "the control plane was not ready after 180s"
k() { "$tools/kubectl" --kubeconfig "$work/cp/kubeconfig" "$@"; }

# doctor AS CHECK: runs `forge doctor --local -o json` with kubeconfig (AS=admin) or the forge
# service account's token (AS=forge); prints "<verdict>\t<detail>\t<fix>" of CHECK.
doctor() {
  local as=$1 check=$2 env=(KUBECONFIG="$work/cp/kubeconfig")
  if [[ $as == forge ]]; then
    env=(FORGE_K8S_API_SERVER="$(k config view --raw -o jsonpath='{.clusters[0].cluster.server}')"
      FORGE_K8S_TOKEN="$(k -n starforge create token forge)"
      FORGE_K8S_CA_FILE="$work/ca.pem" KUBECONFIG=/dev/null)
  fi
  env -i PATH="$PATH" HOME="$work" "${env[@]}" FORGE_K8S_NAMESPACE=starforge \
    FORGE_K8S_STORAGE_PVC=starforge-storage "$build/bin/forge" doctor --local -o json \
    >"$work/doctor.json" 2>"$work/doctor.err" || true
  python3 - "$work/doctor.json" "$check" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = next((c for c in r["checks"] if c["id"] == sys.argv[2]), None)
if c is None:
    sys.exit("no check %s in: %s" % (sys.argv[2], json.dumps(r)))
print("\t".join([c["verdict"], c["detail"].replace("\n", " | "), c.get("fix", "")]))
PY
}
expect() {  # LINE VERDICT TEXT: the check's verdict, and TEXT in its detail or fix
  [[ ${1%%$'\t'*} == "$2" && $1 == *"$3"* ]] || e2e_fail "expected $2 with \"$3\", got: $1"
}
cp "$(k config view --raw -o jsonpath='{.clusters[0].cluster.certificate-authority}')" "$work/ca.pem"

line=$(doctor admin apiserver); expect "$line" pass "Kubernetes v1.32"
line=$(doctor admin kuberay-crds); expect "$line" fail "helm install kuberay-operator"
e2e_say "no CRDs: $line"
k create -f "$repo/third_party/kuberay/crds/v1.4.0" >/dev/null
for _ in $(seq 1 100); do
  line=$(doctor admin kuberay-crds); [[ $line == pass* ]] && break; sleep 0.3
done
expect "$line" pass "rayjobs and rayclusters"
line=$(doctor admin gpu-nodes); expect "$line" fail "kubectl label node"
line=$(doctor admin object-storage); expect "$line" fail "FORGE_S3_ENDPOINT"

# The chart: a server-side dry run, then for real (namespaced objects need their namespace).
"$helm" template starforge "$repo/deploy/helm/starforge" >"$work/chart.yaml"
k create namespace starforge >/dev/null
k apply --dry-run=server -f "$work/chart.yaml" >"$work/dry-run.txt" ||
  e2e_fail "kubectl apply --dry-run=server refused the chart"
e2e_say "server-side dry run: $(wc -l <"$work/dry-run.txt") objects accepted"
k apply -f "$work/chart.yaml" >/dev/null
line=$(doctor forge identity); expect "$line" pass "system:serviceaccount:starforge:forge"
line=$(doctor forge permissions); expect "$line" pass "are granted"
k -n starforge patch role forge --type json \
  -p '[{"op":"replace","path":"/rules/0/verbs","value":["create","get","list","watch"]}]' >/dev/null
for _ in $(seq 1 50); do
  line=$(doctor forge permissions); [[ $line == fail* ]] && break; sleep 0.3
done
expect "$line" fail 'resources: ["rayjobs"], verbs: ["delete"] (Role forge in namespace starforge)'
e2e_say "a missing verb: $line"
line=$(doctor forge storage-pvc); expect "$line" fail "kubectl describe pvc"
e2e_say "PASS"
