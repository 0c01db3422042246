#!/usr/bin/env bash
# The real stack, without nodes: the real Kubernetes v1.32 control plane (tools/k8s/controlplane:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler) and the real KubeRay operator,
# driven with the real kubectl. Checks, in order:
#   - kubectl create namespace / configmap work (kubectl sends protobuf for built-in kinds);
#   - the vendored KubeRay CRDs are accepted and become Established;
#   - the RayJob `forge render` prints for examples/hello-cpu.yaml is accepted by the apiserver;
#   - the operator creates its RayCluster and the Ray head pod;
#   - the real scheduler reports the head pod Unschedulable (there are no nodes yet): the pod's
#     PodScheduled=False/Unschedulable condition and a FailedScheduling event;
#   - then a node joins (kubesim-node: kubesim's kubelet against this API server): the scheduler
#     binds the head pod to it, it runs (the Ray emulator), the operator finds the RayCluster
#     ready and creates the submitter Job, which the real Job controller runs on the node.
#   real_kuberay_test.sh BUILD_DIR OPERATOR      # OPERATOR: v1.4 | v1.6 (build/tools/bin/kuberay-operator-…)
# Missing binaries are a failure that says to run scripts/bootstrap, never a skip.
set -euo pipefail
build=$(cd "${1:?usage: real_kuberay_test.sh BUILD_DIR OPERATOR}" && pwd)
operator=${2:?usage: real_kuberay_test.sh BUILD_DIR OPERATOR}
repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/e2e/lib.sh
source "$repo/scripts/e2e/lib.sh"
e2e_init "real_kuberay_$operator"
work=$E2E_WORK
tools="$repo/build/tools/bin"

case "$operator" in
  v1.4) crds="$repo/third_party/kuberay/crds/v1.4.0" ;;
  # The newest operator the Go module proxy serves here is v1.6.2 (v1.7.0 is refused); it runs
  # against the v1.7.0 CRDs StarForge validates against (a superset of its own).
  v1.6 | v1.7) crds="$repo/third_party/kuberay/crds/v1.7.0" ;;
  *) e2e_fail "OPERATOR must be v1.4, v1.6 or v1.7, got '$operator'" ;;
esac
for bin in "$tools/hyperkube" "$tools/kubectl" "$tools/kuberay-operator-$operator" "$build/bin/forge" \
  "$build/bin/kubesim-node"; do
  [[ -x "$bin" ]] || e2e_fail "$bin is missing: run scripts/bootstrap (it builds the real control plane and operators with tools/k8s/build, and StarForge with kubesim-node)"
done

started=$SECONDS
e2e_start_controlplane "$repo" "$tools/hyperkube"
cp_pid=$E2E_CP_PID
e2e_say "control plane ready in $((SECONDS - started))s at $(cat "$work/cp/ready")"

k() { "$tools/kubectl" --kubeconfig "$work/cp/kubeconfig" "$@"; }
k version -o json | grep -q '"gitVersion": "v1.32.' || e2e_fail "the API server is not v1.32: $(k version 2>&1)"

# Built-in kinds: kubectl encodes these requests as protobuf.
k create namespace starforge >/dev/null
k -n starforge create configmap probe --from-literal=greeting=hello >/dev/null
[[ "$(k -n starforge get configmap probe -o jsonpath='{.data.greeting}')" == hello ]] ||
  e2e_fail "the configmap did not read back"

# wait_for WHAT SECONDS COMMAND…: polls until COMMAND prints something.
wait_for() {
  local what=$1 secs=$2 value _
  shift 2
  for _ in $(seq 1 $((secs * 5))); do
    value=$("$@" 2>/dev/null || true)
    if [[ -n "$value" ]]; then
      printf '%s' "$value"
      return 0
    fi
    kill -0 "$cp_pid" 2>/dev/null || { cat "$work/controlplane.log" >&2; e2e_fail "the control plane stopped"; }
    sleep 0.2
  done
  if [[ -s "$work/operator.log" ]]; then
    e2e_say "operator log (tail):"
    tail -n 30 "$work/operator.log" >&2
  fi
  if [[ -n "${head:-}" ]]; then
    e2e_say "head pod $head:"
    k -n starforge get pod "$head" -o jsonpath='{.status}' >&2 || true
    k -n starforge get events --field-selector "involvedObject.name=$head" >&2 || true
  fi
  [[ -s "$work/node.log" ]] && { e2e_say "kubesim-node log (tail):"; tail -n 20 "$work/node.log" >&2; }
  e2e_fail "no $what after ${secs}s"
}

# The CRDs are too big for client-side apply's last-applied annotation: create them. (`kubectl
# wait --for condition=established` right after the create fails with "accessor error: <nil>"
# while the CRD has no status conditions yet, so poll.)
k create -f "$crds" >/dev/null
established() {  # CRD: prints True once the CRD is Established
  [[ "$(k get crd "$1" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}')" == True ]] &&
    echo True
}
for crd in rayjobs rayclusters rayservices; do
  wait_for "Established CRD $crd.ray.io" 60 established "$crd.ray.io" >/dev/null
done

"$tools/kuberay-operator-$operator" --kubeconfig "$work/cp/kubeconfig" \
  --enable-leader-election=false --metrics-addr=0 --health-probe-bind-address=0 \
  >"$work/operator.log" 2>&1 &
e2e_pids+=($!)

FORGE_K8S_NAMESPACE=starforge "$build/bin/forge" render "$repo/examples/hello-cpu.yaml" \
  --job-id j-real1 --capsule-url https://s3.example.com/starforge/capsules/sha256-00.zip \
  --capsule-sha256 "$(printf '0%.0s' $(seq 64))" >"$work/rayjob.yaml"
rayjob=$(k create -f "$work/rayjob.yaml" -o name)
e2e_say "created $rayjob"

cluster=$(wait_for "RayCluster named in the RayJob's status" 60 \
  k -n starforge get "$rayjob" -o jsonpath='{.status.rayClusterName}')
wait_for "RayCluster $cluster" 30 k -n starforge get raycluster "$cluster" -o name >/dev/null
owner=$(k -n starforge get raycluster "$cluster" -o jsonpath='{.metadata.ownerReferences[0].kind}')
[[ "$owner" == RayJob ]] || e2e_fail "RayCluster $cluster is owned by '$owner', not the RayJob"
head=$(wait_for "head pod of $cluster" 60 k -n starforge get pods \
  -l "ray.io/cluster=$cluster,ray.io/node-type=head" -o jsonpath='{.items[0].metadata.name}')
e2e_say "operator created RayCluster $cluster and head pod $head"

reason=$(wait_for "PodScheduled=False on $head" 60 k -n starforge get pod "$head" \
  -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}')
[[ "$reason" == Unschedulable ]] || e2e_fail "head pod $head: PodScheduled reason '$reason', want Unschedulable"
[[ "$(k -n starforge get pod "$head" -o jsonpath='{.status.phase}')" == Pending ]] ||
  e2e_fail "head pod $head is not Pending"
event=$(wait_for "FailedScheduling event for $head" 30 k -n starforge get events \
  --field-selector "involvedObject.name=$head,reason=FailedScheduling" -o jsonpath='{.items[0].message}')
e2e_say "scheduler: $event"
[[ "$(k -n starforge get "$rayjob" -o jsonpath='{.status.jobDeploymentStatus}')" == Initializing ]] ||
  e2e_fail "RayJob status is not Initializing: $(k -n starforge get "$rayjob" -o jsonpath='{.status}')"

# A node joins: kubesim's kubelet registers it (Ready, with a Lease) and runs what is bound to it.
cat >"$work/nodes.yaml" <<'EOF'
- metadata: {name: node-a}
  status:
    capacity: {cpu: "8", memory: 16Gi}
    allocatable: {cpu: "8", memory: 16Gi}
EOF
"$build/bin/kubesim-node" --kubeconfig "$work/cp/kubeconfig" --nodes "$work/nodes.yaml" \
  --kubelet-backoff-ms 500 --kubelet-probe-max-ms 2000 --kubelet-dir "$work/kubelet" \
  >"$work/node.log" 2>&1 &
node_pid=$!
e2e_pids+=("$node_pid")
running_on() {  # POD: prints the node once the pod is Running
  [[ "$(k -n starforge get pod "$1" -o jsonpath='{.status.phase}')" == Running ]] &&
    k -n starforge get pod "$1" -o jsonpath='{.spec.nodeName}'
}
node=$(wait_for "head pod $head Running on the new node" 150 running_on "$head")
[[ "$node" == node-a ]] || e2e_fail "head pod $head runs on '$node', not node-a"
ready=$(wait_for "RayCluster $cluster ready" 150 k -n starforge get raycluster "$cluster" \
  -o jsonpath='{.status.state}')
[[ "$ready" == ready ]] || e2e_fail "RayCluster $cluster state '$ready'"
submitter=${rayjob#*/}
wait_for "submitter Job $submitter" 60 k -n starforge get job "$submitter" -o name >/dev/null
e2e_say "node-a ran head pod $head; RayCluster $cluster ready; submitter Job $submitter created"
# kubectl logs: kube-apiserver → the node's kubelet API (kubesim-node) → the container's log.
k -n starforge logs "$head" >"$work/head.log" || e2e_fail "kubectl logs $head failed"
grep -q "Ray runtime started" "$work/head.log" ||
  e2e_fail "the head pod's log (kubectl logs) lacks 'Ray runtime started': $(head -c 600 "$work/head.log")"

# What the job's life so far cost the API server, by client (the audit log's Metadata records:
# one per request, at ResponseComplete; watches are counted once).
e2e_say "API requests in namespace starforge, from the audit log (client verb resource count):"
python3 - "$work/cp/audit.log" >&2 <<'PY'
import collections, json, sys
counts = collections.Counter()
for line in open(sys.argv[1]):
    e = json.loads(line)
    ref = e.get("objectRef") or {}
    if e.get("stage") != "ResponseComplete" or ref.get("namespace") != "starforge":
        continue
    sub = "/" + ref["subresource"] if ref.get("subresource") else ""
    agent = e.get("userAgent", "").split("/")[0]  # kubectl, the operator, kube-scheduler, …
    counts[(agent, e["verb"], ref.get("resource", "") + sub)] += 1
for (agent, verb, resource), n in sorted(counts.items()):
    print(f"    {agent:28} {verb:7} {resource:22} {n}")
PY
e2e_say "passed with operator $operator in $((SECONDS - started))s"
# The node goes first, while the API server can still take its last pod status writes.
stopping=$SECONDS
kill -TERM "$node_pid" && wait "$node_pid" || true
e2e_say "kubesim-node stopped in $((SECONDS - stopping))s"
