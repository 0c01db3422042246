#!/usr/bin/env bash
# On a kubesim with a small node inventory and all its controllers
# (operator, Job controller, scheduler, kubelet, the Ray emulator in the pods), `kubectl apply -f`
# of KubeRay's own ray-job.sample.yaml walks the real state sequence and ends Failed/AppFailed with
# `ModuleNotFoundError: No module named 'ray'` in the driver log (no machine here has the ray
# library, and none is faked); the same RayJob with `python3 -c 'print(42)'` ends
# Complete/SUCCEEDED with 42 in its logs. Every step is read back with kubectl: get rayjob, get
# pods, get events, logs; then delete leaves nothing behind.
# Usage: kubectl_sample.sh KUBESIM_BIN [KUBECTL_BIN]
set -euo pipefail
KUBESIM=${1:?kubesim binary}
KUBECTL=${2:-kubectl}
command -v "$KUBECTL" >/dev/null || { echo "FAIL: kubectl not found ($KUBECTL)" >&2; exit 1; }
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=$HERE/testdata
WORK=$(mktemp -d)
SIM_PID=""
cleanup() {
  if [[ -n $SIM_PID ]]; then kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  echo "--- kubesim log (tail):" >&2
  tail -n 30 "$WORK/kubesim.log" >&2 || true
  exit 1
}

"$KUBESIM" --listen 127.0.0.1:0 --port-file "$WORK/port" --nodes "$DATA/nodes.yaml" \
  --controllers all --resync-ms 500 --kubelet-dir "$WORK/kubelet" >"$WORK/kubesim.log" 2>&1 &
SIM_PID=$!
for _ in $(seq 600); do [[ -s $WORK/port ]] && break; sleep 0.05; done
[[ -s $WORK/port ]] || fail "kubesim did not start"
export HOME=$WORK/home KUBECONFIG=$WORK/kubeconfig
mkdir -p "$HOME"
cat >"$KUBECONFIG" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: sim, cluster: {server: "http://127.0.0.1:$(cat "$WORK/port")"}}]
users: [{name: me, user: {}}]
contexts: [{name: sim, context: {cluster: sim, user: me, namespace: default}}]
current-context: sim
EOF
k() { "$KUBECTL" "$@"; }

# Waits for a terminal jobDeploymentStatus, recording every distinct state `kubectl get rayjob`
# showed on the way.
run_to_end() { # name
  local name=$1 seen="" last="" jds=""
  for _ in $(seq 1 900); do
    jds=$(k get rayjob "$name" -o jsonpath='{.status.jobDeploymentStatus}/{.status.jobStatus}')
    if [[ $jds != "$last" ]]; then seen+="$jds "; last=$jds; fi
    case ${jds%%/*} in Complete | Failed | ValidationFailed) break ;; esac
    sleep 0.2
  done
  echo "$seen"
}

# --- the sample as KubeRay ships it -----------------------------------------------------------
# One `kubectl apply -f` of the file, in its own order: the RayJob before its ConfigMap, so the head
# pod may be synced before the ConfigMap exists; the kubelet then waits (FailedMount) and mounts
# it once it is created, as a real kubelet does.
out=$(k apply -f "$DATA/ray-job.sample.yaml")
[[ $out == *"rayjob.ray.io/rayjob-sample created"* ]] || fail "apply: $out"
seen=$(run_to_end rayjob-sample)
echo "rayjob-sample went through: $seen"
[[ $seen == *"Initializing/"* && $seen == *"Running/"* ]] || fail "states seen: $seen"
final=$(k get rayjob rayjob-sample -o jsonpath='{.status.jobDeploymentStatus}/{.status.reason}/{.status.jobStatus}')
[[ $final == "Failed/AppFailed/FAILED" ]] || fail "sample ended $final (states: $seen)"
# kubectl's default output is kubesim's server-side Table: the CRD's printer columns.
table=$(k get rayjob rayjob-sample)
[[ $table == *"JOB STATUS"*"DEPLOYMENT STATUS"* && $table == *"rayjob-sample"*" FAILED "*" Failed "* ]] ||
  fail "get rayjob: $table"
cluster=$(k get rayjob rayjob-sample -o jsonpath='{.status.rayClusterName}')
pods=$(k get pods -l "ray.io/cluster=$cluster" -o name)
[[ $pods == *"$cluster-head-"* && $pods == *"$cluster-small-group-worker-"* ]] ||
  fail "cluster pods: $pods"
k get pods -o wide
phases=$(k get pods -l batch.kubernetes.io/job-name=rayjob-sample -o jsonpath='{.items[*].status.phase}')
[[ $phases == *Succeeded* ]] || fail "submitter pod phases: $phases"
submitter=$(k get pods -l batch.kubernetes.io/job-name=rayjob-sample)
[[ $submitter == *" Completed "* ]] || fail "submitter pod STATUS: $submitter"
events=$(k get events)
echo "$events" | head -n 12
for reason in CreatedRayCluster CreatedRayJobSubmitter CreatedHeadPod Scheduled Started; do
  [[ $events == *"$reason"* ]] || fail "no $reason event in: $events"
done
logs=$(k logs -l batch.kubernetes.io/job-name=rayjob-sample --tail=-1)
[[ $logs == *"ModuleNotFoundError: No module named 'ray'"* ]] || fail "submitter log: $logs"

# --- the same RayJob with a program this machine can run --------------------------------------
sed -e 's/name: rayjob-sample$/name: rayjob-print42/' \
  -e "s|entrypoint: python /home/ray/samples/sample_code.py|entrypoint: python3 -c 'print(42)'|" \
  "$DATA/ray-job.sample.yaml" >"$WORK/print42.yaml"
grep -q "print(42)" "$WORK/print42.yaml" || fail "sed did not change the entrypoint"
k apply -f "$WORK/print42.yaml" >/dev/null
seen=$(run_to_end rayjob-print42)
echo "rayjob-print42 went through: $seen"
final=$(k get rayjob rayjob-print42 -o jsonpath='{.status.jobDeploymentStatus}/{.status.jobStatus}')
[[ $final == "Complete/SUCCEEDED" ]] || fail "print42 ended $final (states: $seen)"
logs=$(k logs -l batch.kubernetes.io/job-name=rayjob-print42 --tail=-1)
[[ $logs == *$'\n42'* || $logs == 42* ]] || fail "print42 log: $logs"

# --- delete: the finalizer runs, children are garbage-collected --------------------------------
k delete rayjob rayjob-sample rayjob-print42 --wait=true --timeout=60s >/dev/null
for _ in $(seq 1 300); do
  left=$(k get pods -o name)
  [[ -z $left ]] && break
  sleep 0.2
done
[[ -z $left ]] || fail "pods left after delete: $left"
[[ -z $(k get rayclusters -o name) ]] || fail "rayclusters left: $(k get rayclusters -o name)"
echo "ok: sample Failed/AppFailed (ModuleNotFoundError), print42 Complete/SUCCEEDED, cleaned up"
