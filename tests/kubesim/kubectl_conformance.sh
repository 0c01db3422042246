#!/usr/bin/env bash
# kubectl v1.32 against kubesim, over http and over https with a bearer token: apply (client-
# and server-side), get, jsonpath, events with a field selector, nodes, logs, delete (incl.
# waiting for a finalizer), and the 422 of an invalid RayJob; with an RBAC table, `auth can-i`
# and the Forbidden wording.
# Usage: kubectl_conformance.sh KUBESIM_BIN [KUBECTL_BIN]
set -euo pipefail
KUBESIM=${1:?kubesim binary}
KUBECTL=${2:-kubectl}
command -v "$KUBECTL" >/dev/null ||
  { echo "FAIL: kubectl not found ($KUBECTL); every StarForge machine has kubectl v1.32" >&2; exit 1; }
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=$HERE/testdata
WORK=$(mktemp -d)
SIM_PID=""
cleanup() {
  if [[ -n $SIM_PID ]]; then kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
expect_contains() { # haystack needle what
  [[ $1 == *"$2"* ]] || fail "$3: expected to contain [$2], got: $1"
}

start_sim() { # extra args...
  rm -f "$WORK/port"
  "$KUBESIM" --listen 127.0.0.1:0 --port-file "$WORK/port" --nodes "$DATA/nodes.yaml" \
    --controllers none "$@" \
    >"$WORK/kubesim.log" 2>&1 &
  SIM_PID=$!
  for _ in $(seq 600); do [[ -s $WORK/port ]] && break; sleep 0.05; done
  [[ -s $WORK/port ]] || fail "kubesim did not start: $(cat "$WORK/kubesim.log")"
  PORT=$(cat "$WORK/port")
}
stop_sim() { kill "$SIM_PID"; wait "$SIM_PID" 2>/dev/null || true; SIM_PID=""; }

# A fresh HOME (and so a fresh discovery cache) per server.
write_kubeconfig() { # server [ca token]
  export HOME=$WORK/home-$PORT
  mkdir -p "$HOME"
  export KUBECONFIG=$WORK/kubeconfig-$PORT
  {
    echo "apiVersion: v1"
    echo "kind: Config"
    echo "clusters:"
    echo "- name: sim"
    echo "  cluster:"
    echo "    server: $1"
    [[ -n ${2:-} ]] && echo "    certificate-authority: $2"
    echo "users:"
    echo "- name: u"
    echo "  user:"
    if [[ -n ${3:-} ]]; then echo "    token: $3"; else echo "    {}"; fi
    echo "contexts:"
    echo "- name: sim"
    echo "  context: {cluster: sim, user: u, namespace: default}"
    echo "current-context: sim"
  } >"$KUBECONFIG"
}

k() { "$KUBECTL" --request-timeout=20s "$@"; }

suite() { # base-url curl-args...
  local base=$1; shift
  local curl=(curl -sS "$@")
  local out

  out=$(k apply -f "$DATA/ray-job.sample.yaml" 2>&1) || fail "apply: $out"
  expect_contains "$out" "rayjob.ray.io/rayjob-sample created" "client-side apply (create)"
  out=$(k apply -f "$DATA/ray-job.sample.yaml" 2>&1) || fail "re-apply: $out"
  expect_contains "$out" "rayjob.ray.io/rayjob-sample" "client-side apply (again)"
  out=$(k apply --server-side -f "$DATA/ray-job.shutdown.yaml" 2>&1) || fail "ssa: $out"
  expect_contains "$out" "rayjob.ray.io/rayjob-sample-shutdown serverside-applied" "server-side apply"
  out=$(k apply --server-side -f "$DATA/ray-job.shutdown.yaml" 2>&1) || fail "ssa again: $out"

  out=$(k get rayjobs 2>&1) || fail "get rayjobs: $out"
  expect_contains "$out" "rayjob-sample " "get rayjobs"
  expect_contains "$out" "rayjob-sample-shutdown" "get rayjobs"
  out=$(k get rayjobs -o json 2>&1) || fail "get -o json: $out"
  [[ $(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))' <<<"$out") == 2 ]] \
    || fail "get -o json: expected 2 items: $out"
  out=$(k get rayjob rayjob-sample -o jsonpath='{.spec.entrypoint}' 2>&1) || fail "jsonpath: $out"
  [[ $out == "python /home/ray/samples/sample_code.py" ]] || fail "jsonpath: got [$out]"
  out=$(k get rayjob rayjob-sample -o jsonpath='{.spec.submissionMode}' 2>&1)
  [[ $out == "K8sJobMode" ]] || fail "defaulted submissionMode: got [$out]"

  # An event created through the API, found with a field selector.
  "${curl[@]}" -o /dev/null -X POST -H 'Content-Type: application/json' \
    "$base/api/v1/namespaces/default/events" -d '{"apiVersion":"v1","kind":"Event",
      "metadata":{"name":"rayjob-sample.1"},"involvedObject":{"kind":"RayJob","name":"rayjob-sample",
      "namespace":"default","apiVersion":"ray.io/v1"},"reason":"CreatedRayCluster",
      "message":"Created RayCluster default/rayjob-sample-raycluster","type":"Normal",
      "source":{"component":"rayjob-controller"}}'
  "${curl[@]}" -o /dev/null -X POST -H 'Content-Type: application/json' \
    "$base/api/v1/namespaces/default/events" -d '{"apiVersion":"v1","kind":"Event",
      "metadata":{"name":"other.1"},"involvedObject":{"kind":"Pod","name":"other","namespace":"default"},
      "reason":"Unrelated","message":"x","type":"Normal"}'
  out=$(k get events --field-selector involvedObject.name=rayjob-sample 2>&1) || fail "events: $out"
  # (kubectl's default columns come from kubesim's Tables: tests/kubesim/kubectl_table.sh.)
  expect_contains "$out" "CreatedRayCluster   rayjob/rayjob-sample" "get events --field-selector"
  [[ $out != *Unrelated* ]] || fail "field selector not applied: $out"
  out=$(k get events --field-selector involvedObject.name=rayjob-sample -o jsonpath='{.items[*].reason}' 2>&1)
  [[ $out == CreatedRayCluster ]] || fail "events jsonpath: got [$out]"

  out=$(k get nodes 2>&1) || fail "get nodes: $out"
  expect_contains "$out" "gpu-node-1" "get nodes"
  expect_contains "$out" "cpu-node-1" "get nodes"

  # A pod with a log set through the test hook.
  "${curl[@]}" -o /dev/null -X POST -H 'Content-Type: application/json' \
    "$base/api/v1/namespaces/default/pods" -d '{"apiVersion":"v1","kind":"Pod",
      "metadata":{"name":"logger"},"spec":{"containers":[{"name":"main","image":"busybox"}]}}'
  "${curl[@]}" -o /dev/null -X PUT --data-binary $'hello from kubesim\nsecond line\n' \
    "$base/kubesim/logs/default/logger"
  out=$(k logs logger 2>&1) || fail "logs: $out"
  [[ $out == $'hello from kubesim\nsecond line' ]] || fail "logs: got [$out]"

  # An invalid RayJob: kubesim's 422.
  if out=$(k apply -f "$DATA/ray-job.invalid.yaml" 2>&1); then fail "invalid apply succeeded: $out"; fi
  expect_contains "$out" 'The RayJob "rayjob-invalid" is invalid' "invalid apply"
  expect_contains "$out" 'spec.entrypoint: Invalid value: "integer": spec.entrypoint in body must be of type string' "invalid apply"

  # delete returns when the object is gone ...
  out=$(k delete rayjob rayjob-sample-shutdown 2>&1) || fail "delete: $out"
  expect_contains "$out" 'rayjob.ray.io "rayjob-sample-shutdown" deleted' "delete"
  if out=$(k get rayjob rayjob-sample-shutdown 2>&1); then fail "still there: $out"; fi
  expect_contains "$out" 'rayjobs.ray.io "rayjob-sample-shutdown" not found' "get after delete"
  # ... also when a finalizer holds it: kubectl lists+watches until DELETED.
  k patch rayjob rayjob-sample --type=merge -p '{"metadata":{"finalizers":["ray.io/rayjob-finalizer"]}}' >/dev/null
  k delete rayjob rayjob-sample --timeout=20s >"$WORK/delete.out" 2>&1 &
  local del_pid=$!
  sleep 1
  kill -0 "$del_pid" 2>/dev/null || fail "delete returned while a finalizer was pending: $(cat "$WORK/delete.out")"
  "${curl[@]}" -o /dev/null -X PATCH -H 'Content-Type: application/merge-patch+json' \
    "$base/apis/ray.io/v1/namespaces/default/rayjobs/rayjob-sample" -d '{"metadata":{"finalizers":null}}'
  wait "$del_pid" || fail "delete with finalizer: $(cat "$WORK/delete.out")"
  expect_contains "$(cat "$WORK/delete.out")" 'rayjob.ray.io "rayjob-sample" deleted' "delete (finalizer)"
}

# 1. http, no auth.
start_sim
write_kubeconfig "http://127.0.0.1:$PORT"
suite "http://127.0.0.1:$PORT"
stop_sim
echo "http: ok"

# 2. https with a bearer token and the generated certificate as CA.
TOKEN=kubesim-test-token
start_sim --tls --token "$TOKEN" --cert-file "$WORK/ca.crt"
write_kubeconfig "https://127.0.0.1:$PORT" "$WORK/ca.crt" "$TOKEN"
out=$("$KUBECTL" --token=wrong get rayjobs 2>&1) && fail "wrong token accepted: $out"
expect_contains "$out" "You must be logged in to the server" "wrong token"
suite "https://127.0.0.1:$PORT" --cacert "$WORK/ca.crt" -H "Authorization: Bearer $TOKEN"
stop_sim
echo "https+token: ok"

# 3. https with an RBAC table: kubectl auth can-i (SelfSubjectAccessReview) and the 403 wording.
cat >"$WORK/rbac.yaml" <<'YAML'
users:
- name: system:serviceaccount:starforge:forge
  token: forge-token
  rules:
  - verbs: [get, list, watch, create]
    apiGroups: [ray.io]
    resources: [rayjobs]
    namespaces: [starforge]
YAML
start_sim --tls --rbac "$WORK/rbac.yaml" --cert-file "$WORK/ca.crt"
write_kubeconfig "https://127.0.0.1:$PORT" "$WORK/ca.crt" forge-token
out=$(k auth can-i create rayjobs -n starforge 2>&1) || fail "auth can-i create: $out"
[[ $out == yes ]] || fail "auth can-i create: got [$out]"
if out=$(k auth can-i delete rayjobs -n starforge 2>&1); then fail "auth can-i delete: $out"; fi
[[ $out == no ]] || fail "auth can-i delete: got [$out]"
if out=$(k get nodes 2>&1); then fail "get nodes allowed: $out"; fi
expect_contains "$out" 'Error from server (Forbidden): nodes is forbidden: User "system:serviceaccount:starforge:forge" cannot list resource "nodes" in API group "" at the cluster scope' "get nodes (RBAC)"
if out=$(k delete rayjob x -n starforge 2>&1); then fail "delete allowed: $out"; fi
expect_contains "$out" 'rayjobs.ray.io "x" is forbidden: User "system:serviceaccount:starforge:forge" cannot delete resource "rayjobs" in API group "ray.io" in the namespace "starforge"' "delete (RBAC)"
stop_sim
echo "https+rbac: ok"
echo "PASS"
