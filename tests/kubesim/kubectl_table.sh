#!/usr/bin/env bash
# kubectl v1.32's default output against kubesim's server-side Tables (tools/kubesim/apiserver/table.h):
# `get rayjobs` shows the CRD's printer columns with values, `get pods` READY/STATUS, a cordoned
# node `Ready,SchedulingDisabled`, `-o wide` the priority-1 columns, `get -w` one row per change;
# and -o json / yaml / name / custom-columns / jsonpath still get plain objects, not Tables.
# Statuses are written through /status with curl (no controllers), so every value is known.
# Usage: kubectl_table.sh KUBESIM_BIN [KUBECTL_BIN]
set -euo pipefail
KUBESIM=${1:?kubesim binary}
KUBECTL=${2:-kubectl}
command -v "$KUBECTL" >/dev/null ||
  { echo "FAIL: kubectl not found ($KUBECTL); every StarForge machine has kubectl v1.32" >&2; exit 1; }
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=$HERE/testdata
WORK=$(mktemp -d)
SIM_PID=""
WATCH_PID=""
cleanup() {
  if [[ -n $WATCH_PID ]]; then kill "$WATCH_PID" 2>/dev/null || true; fi
  if [[ -n $SIM_PID ]]; then kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
# shellcheck source=lib.sh
source "$HERE/lib.sh"
expect_contains() { # haystack needle what
  [[ $1 == *"$2"* ]] || fail "$3: expected to contain [$2], got:
$1"
}
# The line of `table` whose first field is `name`, squeezed to single spaces.
row() { # table name
  awk -v n="$2" '$1 == n { $1 = $1; print }' <<<"$1"
}

start_kubesim_http --controllers none
k() { "$KUBECTL" --request-timeout=20s "$@"; }
status_patch() { # path json
  curl -sS -o /dev/null -w '%{http_code}' -X PATCH -H 'Content-Type: application/merge-patch+json' \
    "$BASE$1/status" -d "$2" | grep -q 200 || fail "status patch of $1"
}

# --- RayJob: the CRD's additionalPrinterColumns ----------------------------------------------
k apply -f "$DATA/ray-job.sample.yaml" >/dev/null
out=$(k get rayjobs)
expect_contains "$(head -n1 <<<"$out")" "NAME" "rayjob header"
for col in "JOB STATUS" "DEPLOYMENT STATUS" "RAY CLUSTER NAME" "START TIME" "END TIME" "AGE"; do
  expect_contains "$(head -n1 <<<"$out")" "$col" "rayjob header"
done
status_patch /apis/ray.io/v1/namespaces/default/rayjobs/rayjob-sample \
  '{"status":{"jobStatus":"RUNNING","jobDeploymentStatus":"Running","rayClusterName":"rayjob-sample-raycluster-abcde","startTime":"2026-01-01T00:00:00Z"}}'
out=$(k get rayjobs)
line=$(row "$out" rayjob-sample)
[[ $line =~ ^rayjob-sample\ RUNNING\ Running\ rayjob-sample-raycluster-abcde\ 2026-01-01T00:00:00Z\ [0-9]+[smhdy] ]] ||
  fail "rayjob row: [$line] in:
$out"
out=$(k get rayjob rayjob-sample)  # a single GET is a Table too
expect_contains "$(row "$out" rayjob-sample)" "RUNNING Running" "get rayjob NAME"
# RayCluster: priority-1 columns only with -o wide.
curl -sS -o /dev/null -X POST -H 'Content-Type: application/json' \
  "$BASE/apis/ray.io/v1/namespaces/default/rayclusters" \
  -d '{"apiVersion":"ray.io/v1","kind":"RayCluster","metadata":{"name":"rc"},"spec":{"headGroupSpec":{"rayStartParams":{},"template":{"spec":{"containers":[{"name":"ray-head","image":"rayproject/ray:2.9.0"}]}}}}}'
status_patch /apis/ray.io/v1/namespaces/default/rayclusters/rc \
  '{"status":{"state":"ready","desiredWorkerReplicas":2,"availableWorkerReplicas":1,"desiredCPU":"3","desiredMemory":"6Gi","desiredGPU":"0","desiredTPU":"0","head":{"podIP":"10.244.0.5","serviceIP":"10.96.0.9"}}}'
out=$(k get rayclusters)
[[ $(row "$out" rc) =~ ^rc\ 2\ 1\ 3\ 6Gi\ 0\ ready\ [0-9]+s$ ]] || fail "raycluster row: $out"
[[ $out != *"HEAD POD IP"* ]] || fail "priority-1 column without -o wide: $out"
out=$(k get rayclusters -o wide)
expect_contains "$(head -n1 <<<"$out")" "HEAD POD IP" "raycluster -o wide"
expect_contains "$(row "$out" rc)" "10.244.0.5 10.96.0.9" "raycluster -o wide"

# --- Pods: READY / STATUS / RESTARTS, wide IP and NODE ----------------------------------------
mkpod() { # name [extra spec json]
  curl -sS -o /dev/null -X POST -H 'Content-Type: application/json' \
    "$BASE/api/v1/namespaces/default/pods" -d "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",
      \"metadata\":{\"name\":\"$1\"},\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"busybox\"}]${2:-}}}"
}
mkpod running ',"nodeName":"cpu-node-1"'
status_patch /api/v1/namespaces/default/pods/running '{"status":{"phase":"Running","podIPs":[{"ip":"10.244.1.7"}],"podIP":"10.244.1.7",
  "conditions":[{"type":"Ready","status":"True"}],
  "containerStatuses":[{"name":"main","ready":true,"restartCount":0,"image":"busybox","imageID":"","state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}}}]}}'
mkpod pullerr
status_patch /api/v1/namespaces/default/pods/pullerr '{"status":{"phase":"Pending",
  "containerStatuses":[{"name":"main","ready":false,"restartCount":0,"image":"busybox","imageID":"","state":{"waiting":{"reason":"ImagePullBackOff","message":"Back-off pulling image"}}}]}}'
mkpod "done"
status_patch /api/v1/namespaces/default/pods/done '{"status":{"phase":"Succeeded",
  "containerStatuses":[{"name":"main","ready":false,"restartCount":0,"image":"busybox","imageID":"","state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]}}'
mkpod init ',"initContainers":[{"name":"setup","image":"busybox"}]'
status_patch /api/v1/namespaces/default/pods/init '{"status":{"phase":"Pending",
  "initContainerStatuses":[{"name":"setup","ready":false,"restartCount":0,"image":"busybox","imageID":"","state":{"running":{}}}],
  "containerStatuses":[{"name":"main","ready":false,"restartCount":0,"image":"busybox","imageID":"","state":{"waiting":{"reason":"PodInitializing"}}}]}}'
out=$(k get pods)
expect_contains "$(head -n1 <<<"$out")" "NAME      READY   STATUS" "pods header"
[[ $(row "$out" running) =~ ^running\ 1/1\ Running\ 0\ [0-9]+s$ ]] || fail "running pod: $out"
[[ $(row "$out" pullerr) =~ ^pullerr\ 0/1\ ImagePullBackOff\ 0\ [0-9]+s$ ]] || fail "pullerr pod: $out"
[[ $(row "$out" "done") =~ ^done\ 0/1\ Completed\ 0\ [0-9]+s$ ]] || fail "done pod: $out"
[[ $(row "$out" init) =~ ^init\ 0/1\ Init:0/1\ 0\ [0-9]+s$ ]] || fail "init pod: $out"
out=$(k get pods -o wide)
expect_contains "$(head -n1 <<<"$out")" "IP           NODE         NOMINATED NODE   READINESS GATES" "pods -o wide header"
[[ $(row "$out" running) =~ ^running\ 1/1\ Running\ 0\ [0-9]+s\ 10.244.1.7\ cpu-node-1\ \<none\>\ \<none\>$ ]] ||
  fail "running pod -o wide: $out"
out=$(k get pods -A)  # the NAMESPACE column comes from the rows' PartialObjectMetadata
[[ $(grep ' running ' <<<"$out" | tr -s ' ') == "default running 1/1 Running 0 "* ]] || fail "pods -A: $out"

# --- Nodes: a cordoned node ---------------------------------------------------------------------
k cordon cpu-node-1 >/dev/null
out=$(k get nodes)
expect_contains "$(head -n1 <<<"$out")" "NAME         STATUS                     ROLES    AGE" "nodes header"
[[ $(row "$out" cpu-node-1) == "cpu-node-1 Ready,SchedulingDisabled <none> "* ]] || fail "cordoned: $out"
[[ $(row "$out" gpu-node-1) == "gpu-node-1 Ready <none> "* ]] || fail "gpu node: $out"
k uncordon cpu-node-1 >/dev/null
[[ $(row "$(k get nodes)" cpu-node-1) == "cpu-node-1 Ready <none> "* ]] || fail "uncordoned"

# --- Other built-ins ------------------------------------------------------------------------------
curl -sS -o /dev/null -X POST -H 'Content-Type: application/json' \
  "$BASE/api/v1/namespaces/default/events" -d '{"apiVersion":"v1","kind":"Event",
    "metadata":{"name":"rayjob-sample.1"},"involvedObject":{"kind":"RayJob","name":"rayjob-sample",
    "namespace":"default"},"reason":"CreatedRayCluster","message":"Created RayCluster x","type":"Normal",
    "source":{"component":"rayjob-controller"}}'
out=$(k get events)
expect_contains "$(head -n1 <<<"$out")" "LAST SEEN   TYPE     REASON              OBJECT                 MESSAGE" "events header"
expect_contains "$out" "Normal   CreatedRayCluster   rayjob/rayjob-sample   Created RayCluster x" "events row"
curl -sS -o /dev/null -X POST -H 'Content-Type: application/json' \
  "$BASE/apis/batch/v1/namespaces/default/jobs" -d '{"apiVersion":"batch/v1","kind":"Job",
    "metadata":{"name":"submit"},"spec":{"completions":1,"template":{"spec":{"restartPolicy":"Never",
    "containers":[{"name":"c","image":"busybox"}]}}}}'
out=$(k get jobs)
expect_contains "$(head -n1 <<<"$out")" "NAME     STATUS    COMPLETIONS   DURATION   AGE" "jobs header"
[[ $(row "$out" submit) =~ ^submit\ Running\ 0/1\ [0-9]+s$ ]] || fail "jobs row: $out"
# (created with curl, JSON; `kubectl create configmap|secret` send protobuf: kubectl_defaults.sh)
curl -sS -o /dev/null -X POST -H 'Content-Type: application/json' "$BASE/api/v1/namespaces/default/configmaps" \
  -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg"},"data":{"a":"1","b":"2"}}'
[[ $(row "$(k get configmaps)" cfg) =~ ^cfg\ 2\ [0-9]+s$ ]] || fail "configmaps: $(k get configmaps)"
curl -sS -o /dev/null -X POST -H 'Content-Type: application/json' "$BASE/api/v1/namespaces/default/secrets" \
  -d '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s3"},"data":{"key":"aHVudGVyMg=="}}'
out=$(k get secrets)
[[ $(row "$out" s3) =~ ^s3\ Opaque\ 1\ [0-9]+s$ ]] || fail "secrets: $out"
[[ $out != *hunter2* && $out != *aHVudGVyMg* ]] || fail "secret value printed: $out"
[[ $(row "$(k get namespaces)" default) =~ ^default\ Active\ [0-9]+s$ ]] || fail "namespaces"
curl -sS -o /dev/null -X POST -H 'Content-Type: application/json' \
  "$BASE/api/v1/namespaces/default/services" -d '{"apiVersion":"v1","kind":"Service",
    "metadata":{"name":"head-svc"},"spec":{"clusterIP":"None","selector":{"app":"x"},"ports":[{"name":"dashboard","port":8265}]}}'
out=$(k get services -o wide)
[[ $(row "$out" head-svc) =~ ^head-svc\ ClusterIP\ None\ \<none\>\ 8265/TCP\ [0-9]+s\ app=x$ ]] ||
  fail "services: $out"
out=$(k get persistentvolumeclaims 2>&1)  # the default table (Name, Created At)
expect_contains "$out" "No resources found" "pvcs"

# --- Formats that must not receive Tables ------------------------------------------------------
out=$(k get pods -o json)
[[ $(python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["kind"], len(d["items"]), d["items"][0]["kind"])' <<<"$out") == "List 4 Pod" ]] ||
  fail "-o json: $out"
out=$(k get rayjob rayjob-sample -o yaml)
expect_contains "$out" "kind: RayJob" "-o yaml"
expect_contains "$out" "jobDeploymentStatus: Running" "-o yaml"
out=$(k get pods -o custom-columns=NAME:.metadata.name,PHASE:.status.phase,NODE:.spec.nodeName --sort-by=.metadata.name)
[[ $(row "$out" running) == "running Running cpu-node-1" ]] || fail "custom-columns: $out"
[[ $(k get rayjob rayjob-sample -o jsonpath='{.status.jobStatus}') == RUNNING ]] || fail "jsonpath"
[[ $(k get pods -o name | sort | tr '\n' ' ') == "pod/done pod/init pod/pullerr pod/running " ]] || fail "-o name"
# --sort-by on the default output asks for includeObject=Object.
out=$(k get pods --sort-by=.status.phase)
[[ $(sed -n 2p <<<"$out" | awk '{print $1}') == pullerr || $(sed -n 2p <<<"$out" | awk '{print $1}') == init ]] ||
  fail "--sort-by: $out"

# --- Watch: one row per event, the header once -------------------------------------------------
k get pods -w >"$WORK/watch.out" 2>&1 &
WATCH_PID=$!
for _ in $(seq 100); do grep -q '^running' "$WORK/watch.out" && break; sleep 0.1; done
status_patch /api/v1/namespaces/default/pods/pullerr '{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}],
  "containerStatuses":[{"name":"main","ready":true,"restartCount":1,"image":"busybox","imageID":"","state":{"running":{}}}]}}'
for _ in $(seq 100); do [[ $(grep -c '^pullerr' "$WORK/watch.out") -ge 2 ]] && break; sleep 0.1; done
kill "$WATCH_PID" 2>/dev/null || true
wait "$WATCH_PID" 2>/dev/null || true
WATCH_PID=""
watched=$(cat "$WORK/watch.out")
[[ $(grep -c '^NAME' <<<"$watched") == 1 ]] || fail "watch header count: $watched"
[[ $(grep '^pullerr' <<<"$watched" | tail -n1 | tr -s ' ') =~ ^pullerr\ 1/1\ Running\ 1\ [0-9]+s$ ]] ||
  fail "watch row: $watched"
echo "PASS"
