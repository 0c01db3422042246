#!/usr/bin/env bash
# StarForge installed by its own chart on a real node: the real control
# plane on a non-loopback address (tools/k8s/controlplane --address), one real node with the real
# kube-proxy (tools/k8s/node/node --proxy), StarForge's image built from deploy/image/Dockerfile
# (deploy/image/build-local --prebuilt) and imported into the node, the vendored KubeRay CRDs, an
# S3 server (tools/s3peer) and hostPath PersistentVolumes for the chart's two claims; then
# `helm install` (the real helm) of deploy/helm/starforge with deploy/helm/values-local.yaml.
# Checks:
#   - forge serve runs as the chart's Deployment from the image, as uid 1000, and turns Ready;
#   - the CLI reaches it the way a user would (`kubectl port-forward svc/forge`), logs in with the
#     admin token the pod printed, and `forge doctor` (run by the server, in-cluster) shows the API
#     server at the `kubernetes` Service's ClusterIP (through kube-proxy), the ServiceAccount
#     `system:serviceaccount:starforge:forge`, every permission of deploy/rbac.yaml, the CRDs, the
#     storage claim Bound and S3 writable;
#   - the store survives the pod (a rollout restart keeps the admin's token valid: the state PVC);
#   - the chart's pod has no service-link variables (enableServiceLinks: false);
#   - with CoreDNS (cluster DNS), the real KubeRay operator v1.4 and the Ray image
#     (deploy/image/build-local --ray) on the node, through the CLI: a CPU job with a Ray task
#     Succeeded (capsule over http: the init container runs in the job's image) and its RayJob
#     deleted; `sys.exit(3)` → AppFailed with Ray's message; a missing image → Pending
#     ImagePullFailed quoting the kubelet's ErrImagePull; cancel → Cancelled, RayJob gone;
#   - with the RayJob CRD deleted, doctor fails and names the fix.
#   - the Succeeded job's logs are archived: forge serve makes jobs/<id>/ before the RayJob, so the
#     kubelet does not create it root-owned for the subPath (forge serve runs as 1000).
# Not yet: the https capsule, GPUs, the playground (docs/real-control-plane.md).
#   real_node_chart_test.sh BUILD_DIR [RELEASE_BUILD_DIR]   (default build/release: its bin/forge
#                                                          goes into the image)
# Needs what tests/e2e/real_node_test.sh needs, plus kube-proxy (tools/k8s/build … kube-proxy),
# helm (scripts/bootstrap), buildah and mmdebstrap (apt), node (tools/s3peer).
set -euo pipefail
build=$(cd "${1:?usage: real_node_chart_test.sh BUILD_DIR [RELEASE_BUILD_DIR]}" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
release=${2:-$repo/build/release}
# shellcheck source=scripts/e2e/lib.sh
source "$repo/scripts/e2e/lib.sh"
e2e_init real_node_chart
work=$E2E_WORK
tools="$repo/build/tools/bin"
name=rc1
index=${REAL_NODE_INDEX:-8}
address=10.248.0.$((200 + index))  # the API server's and S3's address, reachable from the pods

for bin in "$tools/hyperkube" "$tools/kubectl" "$tools/kubelet" "$tools/kube-proxy" "$tools/helm" \
  "$tools/cni-plugins/bridge" "$build/bin/forge" "$release/bin/forge"; do
  [[ -x "$bin" ]] || e2e_fail "$bin is missing: tools/k8s/build build/tools/bin hyperkube kubectl kubelet kube-proxy helm@v3.19.5 cni-plugins@v1.10.0; a Release forge in $release"
done
[[ -x "$tools/coredns" && -x "$tools/kuberay-operator-v1.4" ]] ||
  e2e_fail "coredns or kuberay-operator-v1.4 missing: tools/k8s/build build/tools/bin coredns@v1.15.0 kuberay-operator@v1.4.2"
for tool in containerd runc iptables-save buildah mmdebstrap node; do
  command -v "$tool" >/dev/null || e2e_fail "$tool is missing: apt-get install containerd runc iptables busybox-static buildah mmdebstrap"
done
((EUID == 0)) || e2e_fail "needs root"

started=$SECONDS
t0=$SECONDS
"$repo/deploy/image/build-local" --prebuilt "$release" --out "$work/forge.tar" >"$work/image.log" 2>&1 ||
  { tail -n 20 "$work/image.log" >&2; e2e_fail "the image did not build"; }
e2e_say "image built from deploy/image/Dockerfile in $((SECONDS - t0))s: $(grep 'build-local: starforge' "$work/image.log")"
t0=$SECONDS
"$repo/deploy/image/build-local" --ray >"$work/ray-image.log" 2>&1 ||
  { tail -n 20 "$work/ray-image.log" >&2; e2e_fail "the Ray image did not build"; }
e2e_say "Ray image in $((SECONDS - t0))s: $(grep 'build-local: rayproject' "$work/ray-image.log")"

"$repo/tools/k8s/controlplane" up "$work/cp" --address "$address" 2>"$work/controlplane.log" &
e2e_pids+=($!)
e2e_wait_file "$work/cp/ready" 180 || { cat "$work/controlplane.log" >&2; e2e_fail "the control plane did not start"; }

# Cluster DNS: CoreDNS on the API server's address, the kubernetes plugin reading the cluster.
printf '.:53 {\n  bind %s\n  errors\n  kubernetes cluster.local in-addr.arpa ip6.arpa {\n    kubeconfig %s starforge\n    pods insecure\n    fallthrough in-addr.arpa ip6.arpa\n  }\n  cache 30\n}\n' \
  "$address" "$work/cp/kubeconfig" >"$work/Corefile"
"$tools/coredns" -conf "$work/Corefile" >"$work/coredns.log" 2>&1 &
e2e_pids+=($!)

node_pid=""
stop_node() {
  [[ -n "$node_pid" ]] || return 0
  "$repo/tools/k8s/node/node" down "$work/node" || true
  wait "$node_pid" 2>/dev/null || true
  node_pid=""
}
trap 'stop_node; e2e_cleanup' EXIT
"$repo/tools/k8s/node/node" up "$work/node" --controlplane "$work/cp" --name "$name" --index "$index" \
  --proxy --cluster-dns "$address" --image "$work/forge.tar" --image "$repo/build/tools/node-images/ray.tar" \
  --label starforge/gpu-series=h200 2>"$work/node.log" &
node_pid=$!
for _ in $(seq 1 600); do
  [[ -s "$work/node/ready" ]] && break
  kill -0 "$node_pid" 2>/dev/null || { cat "$work/node.log" >&2; e2e_fail "the node did not start"; }
  sleep 0.2
done
[[ -s "$work/node/ready" ]] || { cat "$work/node.log" >&2; e2e_fail "the node was not Ready after 120 s"; }
e2e_say "control plane at $(cat "$work/cp/ready") and node $name Ready after $((SECONDS - started))s"

export KUBECONFIG=$work/cp/kubeconfig
k() { "$tools/kubectl" "$@"; }
k create -f "$repo/third_party/kuberay/crds/v1.4.0" >/dev/null
# (`kubectl wait --for=condition=Established` fails at once while a new CRD has no conditions.)
for crd in rayjobs rayclusters rayservices; do
  for _ in $(seq 1 300); do
    [[ "$(k get crd "$crd.ray.io" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" == True ]] && break
    sleep 0.2
  done
done
# The operator on the host reaches Ray's dashboard through kube-apiserver's services proxy.
"$tools/kuberay-operator-v1.4" --kubeconfig "$work/cp/kubeconfig" --enable-leader-election=false \
  --metrics-addr=0 --health-probe-bind-address=0 --use-kubernetes-proxy >"$work/operator.log" 2>&1 &
e2e_pids+=($!)
e2e_start_s3peer "$repo" starforge "$address"
mkdir -p "$work/pv/storage" "$work/pv/state"
chown 1000:1000 "$work/pv/storage" "$work/pv/state"
for pv in storage:ReadWriteMany:10Gi state:ReadWriteOnce:1Gi; do
  IFS=: read -r pvname mode size <<<"$pv"
  k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolume
metadata: {name: starforge-$pvname-local}
spec:
  capacity: {storage: $size}
  accessModes: [$mode]
  storageClassName: starforge-local
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: "$work/pv/$pvname", type: Directory}
EOF
done

t0=$SECONDS
"$tools/helm" install starforge "$repo/deploy/helm/starforge" -f "$repo/deploy/helm/values-local.yaml" \
  --set settings.FORGE_S3_ENDPOINT="$E2E_S3" --set settings.FORGE_K8S_GPU_PASSTHROUGH=0 \
  --set s3.accessKey=S3RVER --set s3.secretKey=S3RVER --set settings.FORGE_KUBERAY_TTL_SECONDS=60 \
  >"$work/helm.log" 2>&1 ||
  e2e_fail "helm install failed: $(cat "$work/helm.log")"
k -n starforge rollout status deploy/forge --timeout=120s >/dev/null ||
  e2e_fail "forge did not become Ready: $(k -n starforge get pods -o wide; k -n starforge get events)"
e2e_say "helm install → forge Ready in $((SECONDS - t0))s"
pod=$(k -n starforge get pod -l app.kubernetes.io/component=control-plane -o jsonpath='{.items[0].metadata.name}')
[[ "$(k -n starforge exec "$pod" -- id -u)" == 1000 ]] || e2e_fail "forge does not run as uid 1000"
k -n starforge exec "$pod" -- env | grep -q '^FORGE_SERVICE_HOST=' && e2e_fail "service-link variables in forge's pod"
token=$(k -n starforge logs "$pod" | sed -n 's/.*store it now): //p')
[[ -n "$token" ]] || e2e_fail "no admin token in forge's log: $(k -n starforge logs "$pod" | tail -n 20)"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
k -n starforge port-forward svc/forge "$port:8080" >"$work/port-forward.log" 2>&1 &
e2e_pids+=($!)
export HOME=$work/home FORGE_SERVER=http://127.0.0.1:$port
mkdir -p "$HOME"
for _ in $(seq 1 50); do curl -fsS "$FORGE_SERVER/healthz" >/dev/null 2>&1 && break; sleep 0.2; done
forge=$build/bin/forge
echo "$token" | "$forge" login --server "$FORGE_SERVER" --token-stdin >/dev/null ||
  e2e_fail "forge login through kubectl port-forward failed"
"$forge" doctor >"$work/doctor.txt" 2>&1 || true
for want in '✓ Kubernetes API server: https://10.96.0.1:443 answers, Kubernetes v1.32' \
  '✓ Credentials: authenticated as system:serviceaccount:starforge:forge' \
  '✓ Permissions (SelfSubjectAccessReview): all' '✓ KubeRay CRDs' '✓ Storage volume' '✓ Object storage'; do
  grep -qF "$want" "$work/doctor.txt" || e2e_fail "doctor lacks '$want':"$'\n'"$(cat "$work/doctor.txt")"
done
e2e_say "forge doctor in-cluster: API via the kubernetes Service, the ServiceAccount, RBAC, CRDs, storage, S3 green"

k -n starforge rollout restart deploy/forge >/dev/null
k -n starforge rollout status deploy/forge --timeout=120s >/dev/null || e2e_fail "the restarted forge did not become Ready"
kill "${e2e_pids[-1]}" 2>/dev/null || true
k -n starforge port-forward svc/forge "$port:8080" >"$work/port-forward.log" 2>&1 &
e2e_pids+=($!)
for _ in $(seq 1 50); do curl -fsS "$FORGE_SERVER/healthz" >/dev/null 2>&1 && break; sleep 0.2; done
"$forge" get jobs >/dev/null 2>"$work/get.err" || e2e_fail "after a restart the token is refused (state PVC): $(cat "$work/get.err")"

# --- jobs in real containers, through the CLI ---------------------------------------------------
mkdir -p "$work/code"
cat >"$work/code/main.py" <<'EOF'
import os, socket, sys, ray
ray.init()
@ray.remote
def where():
    return socket.gethostname(), os.getuid()
print("task ran on node", ray.get(where.remote()), flush=True)
sys.exit(int(os.environ.get("EXIT_CODE", "0")))
EOF
submit() {  # NAME IMAGE [EXTRA SPEC LINES]
  printf 'name: %s\nfleet: kuberay\nimage: %s\nentrypoint: python3 main.py\npools:\n  - {name: main, cpusPerMachine: "1", memoryPerMachine: 2Gi}\n%s' \
    "$1" "$2" "${3:-}" >"$work/$1.yaml"
  local id
  id=$("$forge" submit "$work/$1.yaml" --code "$work/code" -o name 2>>"$work/cli.log") ||
    e2e_fail "forge submit $1: $(tail -n 3 "$work/cli.log")"
  echo "${id#job/}"
}
phase_of() { "$forge" get jobs | awk -v j="$1" '$1 == j {print $3 "/" $4}'; }
wait_phase() {  # ID PHASE SECONDS
  local p end=$((SECONDS + $3))
  while ((SECONDS < end)); do
    p=$(phase_of "$1")
    [[ "$p" == "$2"/* ]] && { echo "$p"; return 0; }
    sleep 1
  done
  "$forge" describe job "$1" >&2 || true
  e2e_fail "job $1 is $p, not $2 after $3 s"
}
t0=$SECONDS
ok=$(submit real-cpu rayproject/ray:2.60.0)
bad=$(submit real-exit-3 rayproject/ray:2.60.0 'env: {EXIT_CODE: "3"}
')
noimg=$(submit real-bad-image starforge.local/no-such-image:1)
wait_phase "$ok" Succeeded 600 >/dev/null
e2e_say "a CPU job Succeeded in real containers $((SECONDS - t0))s after submit"
[[ "$(wait_phase "$bad" Failed 600)" == Failed/AppFailed ]] || e2e_fail "job $bad did not fail with AppFailed"
grep -q 'exit code 3' <<<"$("$forge" describe job "$bad")" || e2e_fail "AppFailed without Ray's message: $("$forge" describe job "$bad")"
wait_phase "$noimg" Pending 120 >/dev/null
for _ in $(seq 1 120); do
  grep -q 'ErrImagePull' <<<"$("$forge" describe job "$noimg")" && break
  sleep 1
done
grep -q 'ErrImagePull' <<<"$("$forge" describe job "$noimg")" ||
  e2e_fail "no ErrImagePull in the diagnosis of $noimg: $("$forge" describe job "$noimg")"
"$forge" cancel "$noimg" >/dev/null
wait_phase "$noimg" Cancelled 120 >/dev/null
for _ in $(seq 1 120); do
  [[ -z "$(k -n starforge get rayjobs -o name)" ]] && break
  sleep 1
done
[[ -z "$(k -n starforge get rayjobs -o name)" ]] || e2e_fail "RayJobs left: $(k -n starforge get rayjobs)"
e2e_say "AppFailed with Ray's message, ImagePullFailed with the kubelet's ErrImagePull, cancel; no RayJob left"
# (grep -q reads from a here-string: with pipefail, `cmd | grep -q` fails when cmd gets SIGPIPE.)
if grep -q ray-job.log <<<"$("$forge" logs "$ok" --list 2>/dev/null)"; then
  e2e_say "the job's logs are archived"
else
  e2e_fail "job $ok: logs not archived ($(stat -c '%U:%G %a' "$work/pv/storage/jobs/$ok" 2>/dev/null) jobs/$ok): $("$forge" describe job "$ok" | grep LogCollection | head -n 1)"
fi

k delete crd rayjobs.ray.io >/dev/null
"$forge" doctor >"$work/doctor2.txt" 2>&1 && e2e_fail "doctor passed without the RayJob CRD"
grep -A1 '✗ KubeRay CRDs' "$work/doctor2.txt" | grep -q 'fix: install the KubeRay operator' ||
  e2e_fail "doctor did not name the fix for a missing CRD:"$'\n'"$(cat "$work/doctor2.txt")"
e2e_say "restart keeps the store; without the RayJob CRD doctor names the fix"
"$tools/helm" uninstall starforge >/dev/null
e2e_say "PASS in $((SECONDS - started))s"
