#!/usr/bin/env bash
# Playgrounds end to end: forge serve with the kuberay fleet on kubesim, whose pods run
# kubesim's vLLM emulator as `vllm serve`; everything through the CLI, curl and the official
# `openai` Python client (build/tools/openai-venv, scripts/bootstrap).
#   start → Pending → Ready; chat streams (CLI, and openai through forge serve); another user gets
#   404 and cannot serve someone else's checkpoint; the model must exist; more GPUs than a node
#   has / an unknown series → refused with what exists; a missing image → Pending ImagePullFailed;
#   extend moves the end; kill -9 of forge serve → the restarted server adopts the playground and
#   still enforces its TTL; the TTL deletes the pod and service; stop deletes them at once; with
#   forge serve stopped, the pod's activeDeadlineSeconds ends it (kubesim's kubelet, as the real
#   one: Failed/DeadlineExceeded) and the restarted server records the playground Expired.
# Prints the time from start to Ready and the Kubernetes API requests of one playground's life.
#   tests/e2e/playground_test.sh BUILD_DIR
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/e2e/lib.sh
source "$repo/scripts/e2e/lib.sh"
build=$(cd "${1:?usage: playground_test.sh BUILD_DIR}" && pwd)
forge="$build/bin/forge"
kubesim=${KUBESIM:-$build/bin/kubesim}  # KUBESIM: another kubesim binary
say() { e2e_say "$@"; }
fail() { e2e_fail "$@"; }
e2e_init playground
work=$E2E_WORK

cat >"$work/nodes.yaml" <<'NODES'
- metadata: {name: h200-a, labels: {starforge/gpu-series: h200}}
  status:
    capacity: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "2"}
    allocatable: {cpu: "63", memory: 500Gi, nvidia.com/gpu: "2"}
NODES
printf -- '- "python:*"\n- "vllm/vllm-openai:v0.11.0"\n' >"$work/images.yaml"
mkdir -p "$work/pv/starforge/data"
# The emulators' directory of this checkout (bin/vllm: kubesim's vLLM emulator) on the pods' PATH.
e2e_start_kubesim "$kubesim" --nodes "$work/nodes.yaml" --controllers all \
  --pv-root "$work/pv" --images "$work/images.yaml" --kubelet-backoff-ms 500 \
  --ray-bin-dir "$repo/tools/kubesim/ray/bin"
k8s=$E2E_K8S
curl -fsS -X POST -H 'Content-Type: application/json' -d '{"metadata":{"name":"starforge"}}' \
  "$k8s/api/v1/namespaces" >/dev/null
curl -fsS -X POST -H 'Content-Type: application/json' \
  -d '{"metadata":{"name":"data"},"spec":{"accessModes":["ReadWriteMany"],"resources":{"requests":{"storage":"1Gi"}}}}' \
  "$k8s/api/v1/namespaces/starforge/persistentvolumeclaims" >/dev/null
# kubesim has no volume controller and, like kube-scheduler, does not place a pod on an unbound
# claim: mark it Bound as a provisioner would.
curl -fsS -X PATCH -H 'Content-Type: application/merge-patch+json' -d '{"status":{"phase":"Bound"}}' \
  "$k8s/api/v1/namespaces/starforge/persistentvolumeclaims/data/status" >/dev/null
e2e_start_s3peer "$repo" starforge
export FORGE_K8S_API_SERVER=$k8s FORGE_S3_ENDPOINT=$E2E_S3 FORGE_S3_BUCKET=starforge
export FORGE_S3_ACCESS_KEY=S3RVER FORGE_S3_SECRET_KEY=S3RVER
export FORGE_STORAGE_ROOT="$work/pv/starforge/data" FORGE_STATE_DIR="$work/state"
export FORGE_K8S_STORAGE_PVC=data FORGE_K8S_NAMESPACE=starforge FORGE_DEFAULT_FLEET_KIND=kuberay
export FORGE_IMAGE_VLLM=vllm/vllm-openai:v0.11.0
kc() { kubectl --server "$k8s" -n starforge "$@"; }

serve_pid=
start_serve() {
  local listen=127.0.0.1:0
  [[ -s "$work/forge.port" ]] && listen=127.0.0.1:$(cat "$work/forge.port")
  rm -f "$work/forge.port.new"
  "$forge" serve --listen "$listen" --port-file "$work/forge.port.new" --resync-ms 200 \
    >>"$work/serve.out" 2>>"$work/serve.log" &
  serve_pid=$!
  e2e_pids+=("$serve_pid")
  e2e_wait_file "$work/forge.port.new" 30 || fail "forge serve did not start: $(tail -n 3 "$work/serve.log")"
  mv "$work/forge.port.new" "$work/forge.port"
}
alice=$("$forge" token create --user alice 2>/dev/null)
bob=$("$forge" token create --user bob 2>/dev/null)
start_serve
FORGE_SERVER="http://127.0.0.1:$(cat "$work/forge.port")"
export FORGE_SERVER
as_alice() { FORGE_TOKEN=$alice "$forge" "$@"; }
as_bob() { FORGE_TOKEN=$bob "$forge" "$@"; }
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$1)"; }
# GET /api/v1/playgrounds/ID (no events: `describe` also asks the cluster why it is not ready).
pg_get() { curl -fsS -H "Authorization: Bearer ${2:-$alice}" "$FORGE_SERVER/api/v1/playgrounds/$1"; }

# A job of alice's, and the checkpoint directory it wrote (made here: what it holds does not matter
# to the vLLM emulator, only that the directory exists and is mounted).
mkdir -p "$work/code"
echo 'print("trained")' >"$work/code/main.py"
cat >"$work/job.yaml" <<'JOB'
name: tiny
fleet: kuberay
image: python:3.12
entrypoint: python3 main.py
pools: [{name: main}]
JOB
job=$(as_alice submit "$work/job.yaml" --code "$work/code" -o name) || fail "submit failed"
job=${job#job/}
mkdir -p "$FORGE_STORAGE_ROOT/jobs/$job/ckpt/final"
model="jobs/$job/ckpt/final"

wait_state() {  # ID STATE SECONDS [TOKEN]
  local s=""
  for _ in $(seq 1 $(($3 * 5))); do
    s=$(pg_get "$1" "${4:-$alice}" | field '["state"]')
    [[ "$s" == "$2" ]] && return 0
    sleep 0.2
  done
  FORGE_TOKEN=${4:-$alice} "$forge" playground describe "$1" >&2 || true
  fail "playground $1: state $s, expected $2"
}
gone() {  # ID: no pod or service of it is left
  local out
  for _ in $(seq 1 150); do
    out=$(kc get pods,services -l "starforge/playground-id=$1" -o name 2>/dev/null) || out=x
    [[ -z "$out" ]] && return 0
    sleep 0.2
  done
  fail "playground $1 left objects: $out"
}

# --- refusals at start -----------------------------------------------------------------------
expect_refused() {  # TEXT ARGS...
  local text=$1 out
  shift
  if out=$(as_alice playground start "$@" 2>&1); then fail "start $* was accepted"; fi
  [[ "$out" == *"$text"* ]] || fail "start $*: expected \"$text\", got: $out"
}
expect_refused "GPUs" --model "$model" --series h200 --gpus 4   # a node has 2
expect_refused "a100" --model "$model" --series a100            # no such series
expect_refused "does not exist" --model "jobs/$job/nope" --series h200
out=$(as_bob playground start --model "$model" --series h200 2>&1) && fail "bob served alice's job"
[[ "$out" == *"no job $job of yours"* ]] || fail "bob's start: $out"
say "refusals: too many GPUs, unknown series, missing model, someone else's job"

# --- start → Ready, counting the requests of its life ------------------------------------------
curl -fsS -X DELETE "$k8s/kubesim/requests" >/dev/null
t0=$(date +%s%N)
pg=$(as_alice playground start --model "$model" --series h200 --gpus 1 --ttl 5m -o json |
  field '["id"]')
seen=""
for _ in $(seq 1 600); do
  s=$(pg_get "$pg" | field '["state"]')
  [[ "$seen" == *"$s"* ]] || seen="$seen $s"
  [[ "$s" == Ready ]] && break
  sleep 0.1
done
t1=$(date +%s%N)
[[ "$s" == Ready ]] || fail "playground $pg never Ready (seen:$seen)"
ready_ms=$(((t1 - t0) / 1000000))
say "start → Ready in $ready_ms ms (states seen:$seen)"
[[ "$seen" == *Pending* ]] || fail "no Pending state was seen before Ready:$seen"
pod=$(kc get pods -l "starforge/playground-id=$pg" -o json)
python3 - "$pod" "$job" <<'PY' || fail "the pod is not what the issue asks"
import json, sys
pod = json.loads(sys.argv[1])["items"][0]
c = pod["spec"]["containers"][0]
assert c["command"][:2] == ["vllm", "serve"], c["command"]
assert pod["spec"]["nodeSelector"] == {"starforge/gpu-series": "h200"}
assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"
mounts = {m["name"]: m for m in c["volumeMounts"]}
assert mounts["starforge-storage"]["readOnly"] is True
assert mounts["starforge-storage"]["subPath"] == "jobs/" + sys.argv[2]
assert "activeDeadlineSeconds" in pod["spec"]
PY

# --- chat: the CLI streams; the official openai client through forge serve -----------------------
answer=$(as_alice playground chat "$pg" -m "hello playground")
[[ "$answer" == *"You said: hello playground"* ]] || fail "chat answered: $answer"
venv="$repo/build/tools/openai-venv/bin/python"
if [[ -x "$venv" ]]; then
  "$venv" - "$FORGE_SERVER/api/v1/playgrounds/$pg/openai/v1" "$alice" <<'PY' || fail "openai client"
import sys
from openai import OpenAI, NotFoundError
client = OpenAI(base_url=sys.argv[1], api_key=sys.argv[2])
models = [m.id for m in client.models.list()]
assert models == ["final"], models
pieces = []
for chunk in client.chat.completions.create(
        model="final", messages=[{"role": "user", "content": "stream me"}], stream=True):
    if chunk.choices and chunk.choices[0].delta.content:
        pieces.append(chunk.choices[0].delta.content)
assert len(pieces) > 2 and "".join(pieces) == "You said: stream me", pieces
done = client.chat.completions.create(
    model="final", messages=[{"role": "user", "content": "once"}])
assert done.choices[0].message.content == "You said: once"
c = client.completions.create(model="final", prompt="go", max_tokens=1)
assert c.choices[0].finish_reason == "length"
try:
    client.chat.completions.create(model="other", messages=[{"role": "user", "content": "x"}])
    raise SystemExit("an unknown model was answered")
except NotFoundError as e:
    assert "does not exist" in str(e), e
PY
  say "openai client: models, streamed and plain chat, completions, NotFoundError"
else
  say "no $venv (scripts/bootstrap installs it): the openai client check is skipped"
fi

# --- another user sees nothing ----------------------------------------------------------------
if as_bob playground describe "$pg" >/dev/null 2>&1; then fail "bob sees alice's playground"; fi
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $bob" \
  -H 'Content-Type: application/json' -d '{"model":"final","messages":[]}' \
  "$FORGE_SERVER/api/v1/playgrounds/$pg/openai/v1/chat/completions")
[[ "$code" == 404 ]] || fail "bob's chat: HTTP $code, expected 404"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $alice" \
  "$FORGE_SERVER/api/v1/playgrounds/$pg/openai/v1/embeddings")
[[ "$code" == 404 ]] || fail "a path outside the forwarded ones: HTTP $code"
say "another user: 404; only the OpenAI paths are forwarded"

# --- extend ------------------------------------------------------------------------------------
before=$(pg_get "$pg" | field '["ttlRemainingSeconds"]')
as_alice playground extend "$pg" --by 10m >/dev/null
after=$(pg_get "$pg" | field '["ttlRemainingSeconds"]')
((after >= before + 590)) || fail "extend: $before s left before, $after s after"
say "extend: $before s → $after s left"

# --- a missing image: Pending with the jobs' diagnosis --------------------------------------------
bad=$(as_alice playground start --model "$model" --series h200 --image vllm/vllm-openai:missing \
  --ttl 5m -o json | field '["id"]')
for _ in $(seq 1 300); do
  r=$(pg_get "$bad" | field '["reason"]')
  [[ "$r" == ImagePullFailed ]] && break
  sleep 0.2
done
[[ "$r" == ImagePullFailed ]] || fail "missing image: reason $r"
as_alice playground describe "$bad" | grep -q "vllm/vllm-openai:missing" ||
  fail "describe does not name the image"
as_alice playground stop "$bad" >/dev/null
gone "$bad"
say "missing image → Pending/ImagePullFailed; stop deleted its pod"

# --- a short TTL, across a kill -9 of forge serve ---------------------------------------------------
short=$(as_alice playground start --model "$model" --series h200 --ttl 60s -o json | field '["id"]')
wait_state "$short" Ready 60
kill -9 "$serve_pid"
wait "$serve_pid" 2>/dev/null || true
start_serve
wait_state "$pg" Ready 30  # adopted
as_alice playground chat "$pg" -m "still there" | grep -q "You said: still there" ||
  fail "no answer after the restart"
wait_state "$short" Expired 120
gone "$short"
as_alice playground describe "$short" | grep -q TTLExpired || fail "no TTLExpired reason"
say "restart: adopted; the TTL ended $short and deleted its pod and service"

# --- stop ------------------------------------------------------------------------------------------
as_alice playground stop "$pg" | grep -q Stopped || fail "stop did not answer Stopped"
gone "$pg"

# --- the requests one playground's life costs: start, Ready, one chat, stop (nothing else runs;
# kubectl is not used in between, so kubesim counts forge serve's requests only) ------------------
curl -fsS -X DELETE "$k8s/kubesim/requests" >/dev/null
one=$(as_alice playground start --model "$model" --series h200 --ttl 5m -o json | field '["id"]')
wait_state "$one" Ready 60
as_alice playground chat "$one" -m "count me" >/dev/null
as_alice playground stop "$one" >/dev/null
curl -fsS "$k8s/kubesim/requests" >"$work/requests.json"
gone "$one"
as_alice playground list >&2
say "Kubernetes API requests of one playground's life (start → Ready → one chat → stop):"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); [print('  ', k, v) for k, v in sorted(d['requests'].items())]; print('   total', d['total'])" "$work/requests.json" >&2

# --- forge serve down: the pod's own deadline (activeDeadlineSeconds = FORGE_PLAYGROUND_MAX_TTL_S)
# reclaims it; the restarted server records the end and removes what is left ---------------------
kill -TERM "$serve_pid"
wait "$serve_pid" 2>/dev/null || true
export FORGE_PLAYGROUND_MAX_TTL_S=60  # the pods' activeDeadlineSeconds
start_serve
unset FORGE_PLAYGROUND_MAX_TTL_S
orphan=$(as_alice playground start --model "$model" --series h200 --ttl 60s -o json | field '["id"]')
wait_state "$orphan" Ready 60
kill -TERM "$serve_pid"
wait "$serve_pid" 2>/dev/null || true
opod=$(kc get pods -l "starforge/playground-id=$orphan" -o jsonpath='{.items[0].metadata.name}')
[[ -n "$opod" ]] || fail "no pod for $orphan"
for _ in $(seq 1 450); do
  reason=$(kc get pod "$opod" -o jsonpath='{.status.phase}/{.status.reason}' 2>/dev/null || true)
  [[ "$reason" == Failed/DeadlineExceeded ]] && break
  sleep 0.2
done
[[ "$reason" == Failed/DeadlineExceeded ]] || fail "with forge serve down, the pod is $reason"
kc get pod "$opod" -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}' |
  grep -qE '^[0-9]+$' || fail "the pod's vLLM container was not killed"
say "forge serve down: the kubelet failed $opod at its deadline (DeadlineExceeded)"
start_serve
wait_state "$orphan" Expired 60
gone "$orphan"
as_alice playground describe "$orphan" | grep -q TTLExpired || fail "no clear end reason for $orphan"
say "restarted: $orphan recorded Expired (TTLExpired), its pod and service removed"
say "PASS (start → Ready: $ready_ms ms)"
