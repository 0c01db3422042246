#!/usr/bin/env bash
# A playground on the real stack: the real kube-apiserver v1.32, scheduler and
# controllers (tools/k8s/controlplane), kubesim-node as the GPU node with a network namespace per
# pod (non-loopback pod IPs, so the real EndpointSlice controller gives the Service an endpoint),
# kubesim's vLLM emulator as `vllm serve` in the pod. forge serve runs as the `forge`
# ServiceAccount with exactly deploy/rbac.yaml's rights.
#   start → Ready (the real readiness gate: the pod's probe, the Service's endpoint); a chat,
#   streamed, passes through the REAL kube-apiserver's services/proxy (its audit log shows it, as
#   the forge ServiceAccount); stop deletes the pod and the Service.
#   real_playground_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: real_playground_test.sh BUILD_DIR}" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/e2e/lib.sh
source "$repo/scripts/e2e/lib.sh"
e2e_init real_playground
work=$E2E_WORK
say() { e2e_say "$@"; }
fail() { e2e_fail "$@"; }
tools="$repo/build/tools/bin"
forge="$build/bin/forge"
for bin in "$tools/hyperkube" "$tools/kubectl" "$build/bin/kubesim-node" "$forge"; do
  [[ -x "$bin" ]] || fail "$bin is missing: run scripts/bootstrap"
done
[[ $(id -u) == 0 ]] || fail "needs root: kubesim-node gives every pod a network namespace"
command -v ip >/dev/null || fail "needs iproute2's ip (apt-get install iproute2)"

t0=$SECONDS
e2e_start_controlplane "$repo" "$tools/hyperkube"
cp="$work/cp"
k() { "$tools/kubectl" --kubeconfig "$cp/kubeconfig" "$@"; }
pod_cidr=""
for x in $(seq 244 254); do
  if ! ip -4 route show table all | grep -q "10\.$x\."; then pod_cidr=10.$x.0.0/16; break; fi
done
[[ -n "$pod_cidr" ]] || fail "no free 10.x.0.0/16 (x = 244..254) for the pods' network"
cat >"$work/nodes.yaml" <<'NODES'
- metadata: {name: h200-a, labels: {starforge/gpu-series: h200}}
  status:
    capacity: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "2"}
    allocatable: {cpu: "63", memory: 500Gi, nvidia.com/gpu: "2"}
NODES
printf -- '- "vllm/vllm-openai:v0.11.0"\n' >"$work/images.yaml"
# The emulators' directory of this checkout (bin/vllm: kubesim's vLLM emulator) on the pods' PATH.
"$build/bin/kubesim-node" --kubeconfig "$cp/kubeconfig" --nodes "$work/nodes.yaml" \
  --pod-network netns --pod-cidr "$pod_cidr" --images "$work/images.yaml" \
  --kubelet-backoff-ms 500 --kubelet-probe-max-ms 2000 --kubelet-dir "$work/kubelet" \
  --ray-bin-dir "$repo/tools/kubesim/ray/bin" >"$work/node.log" 2>&1 &
node_pid=$!
e2e_pids+=("$node_pid")
bridge_ip=""
for _ in $(seq 1 150); do
  bridge_ip=$(sed -n 's/.*(bridge address \([0-9.]*\)).*/\1/p' "$work/node.log")
  [[ -n "$bridge_ip" ]] && break
  kill -0 "$node_pid" 2>/dev/null || fail "kubesim-node stopped: $(tail -n 5 "$work/node.log")"
  sleep 0.2
done
[[ -n "$bridge_ip" ]] || fail "kubesim-node made no pod network: $(tail -n 5 "$work/node.log")"
# The kuberay fleet wants object storage for capsules (no job runs here: it is only configured).
node "$repo/tools/s3peer/s3peer.js" --port-file "$work/s3.port" --bucket starforge \
  --address 127.0.0.1 2>"$work/s3.log" &
e2e_pids+=($!)
e2e_wait_file "$work/s3.port" 30 || fail "s3peer did not start; see $work/s3.log"
k create -f "$repo/third_party/kuberay/crds/v1.4.0" >/dev/null
k create namespace starforge >/dev/null
k apply -f "$repo/deploy/rbac.yaml" >/dev/null
token=$(k -n starforge create token forge --duration 1h) || fail "kubectl create token forge failed"
say "real stack up in $((SECONDS - t0)) s (pods in $pod_cidr, bridge $bridge_ip)"

FORGE_K8S_API_SERVER=$(cat "$cp/ready")
export FORGE_K8S_API_SERVER FORGE_K8S_TOKEN=$token
export FORGE_K8S_CA_FILE="$cp/pki/ca.crt" FORGE_K8S_NAMESPACE=starforge
FORGE_S3_ENDPOINT="http://127.0.0.1:$(cat "$work/s3.port")"
export FORGE_S3_ENDPOINT FORGE_S3_BUCKET=starforge
export FORGE_S3_ACCESS_KEY=S3RVER FORGE_S3_SECRET_KEY=S3RVER
export FORGE_STORAGE_ROOT="$work/storage" FORGE_STATE_DIR="$work/state"
export FORGE_DEFAULT_FLEET_KIND=kuberay FORGE_IMAGE_VLLM=vllm/vllm-openai:v0.11.0
alice=$("$forge" token create --user alice 2>/dev/null)
"$forge" serve --listen 127.0.0.1:0 --port-file "$work/forge.port" --resync-ms 500 \
  >"$work/serve.out" 2>"$work/serve.log" &
e2e_pids+=($!)
e2e_wait_file "$work/forge.port" 60 || fail "forge serve did not start: $(tail -n 3 "$work/serve.log")"
FORGE_SERVER="http://127.0.0.1:$(cat "$work/forge.port")"
export FORGE_SERVER FORGE_TOKEN=$alice
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$1)"; }

t1=$SECONDS
pg=$("$forge" playground start --model Qwen/Qwen2.5-0.5B-Instruct --series h200 --gpus 1 \
  --ttl 10m -o json | field '["id"]')
s=""
for _ in $(seq 1 600); do
  s=$(curl -fsS -H "Authorization: Bearer $alice" "$FORGE_SERVER/api/v1/playgrounds/$pg" |
    field '["state"]')
  [[ "$s" == Ready || "$s" == Failed ]] && break
  sleep 0.2
done
[[ "$s" == Ready ]] || { "$forge" playground describe "$pg" >&2 || true; fail "$pg is $s, not Ready"; }
say "start → Ready in $((SECONDS - t1)) s on the real control plane"
ip=$(k -n starforge get pod "sf-$pg" -o jsonpath='{.status.podIP}')
[[ "$ip" != 127.* && -n "$ip" ]] || fail "the pod's IP is '$ip', not a pod-network address"
eps=$(k -n starforge get endpointslices -l "kubernetes.io/service-name=sf-$pg" \
  -o jsonpath='{.items[*].endpoints[*].addresses[*]}')
[[ "$eps" == *"$ip"* ]] || fail "the Service's EndpointSlice has '$eps', not the pod's $ip"

before=$(grep -c '"subresource":"proxy"' "$cp/audit.log" || true)
answer=$("$forge" playground chat "$pg" -m "hello real apiserver")
[[ "$answer" == *"You said: hello real apiserver"* ]] || fail "chat answered: $answer"
venv="$repo/build/tools/openai-venv/bin/python"
if [[ -x "$venv" ]]; then
  "$venv" - "$FORGE_SERVER/api/v1/playgrounds/$pg/openai/v1" "$alice" <<'PY' || fail "openai client"
import sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1], api_key=sys.argv[2])
pieces = [c.choices[0].delta.content for c in client.chat.completions.create(
    model="Qwen2.5-0.5B-Instruct", messages=[{"role": "user", "content": "stream me"}],
    stream=True) if c.choices and c.choices[0].delta.content]
assert len(pieces) > 2 and "".join(pieces) == "You said: stream me", pieces
PY
  say "openai client: a streamed chat through forge serve and kube-apiserver"
fi
# kube-apiserver's own record: forge's ServiceAccount called services/proxy of the playground.
python3 - "$cp/audit.log" "$before" "sf-$pg" <<'PY' || fail "kube-apiserver's audit log shows no proxied chat"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
seen = [json.loads(l) for l in lines if '"subresource":"proxy"' in l][int(sys.argv[2]):]
ok = [e for e in seen if e["objectRef"].get("resource") == "services"
      and e["objectRef"].get("name", "").startswith(sys.argv[3])
      and e["user"]["username"] == "system:serviceaccount:starforge:forge"
      and "/v1/chat/completions" in e["requestURI"] and e["stage"] == "ResponseComplete"
      and e.get("responseStatus", {}).get("code") == 200]
if not ok:
    sys.exit("no services/proxy chat by forge in %d proxy records" % len(seen))
print("audit: %d chat completions proxied by %s" % (len(ok), ok[0]["user"]["username"]),
      file=sys.stderr)
PY

"$forge" playground stop "$pg" | grep -q Stopped || fail "stop did not answer Stopped"
for _ in $(seq 1 150); do
  left=$(k -n starforge get pods,services -l "starforge/playground-id=$pg" -o name)
  [[ -z "$left" ]] && break
  sleep 0.2
done
[[ -z "$left" ]] || fail "stop left $left"
say "PASS"
