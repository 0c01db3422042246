#!/usr/bin/env bash
# Scale check of kubesim with every controller: N small RayJobs (a head pod, no workers, K8sJobMode
# submitter, entrypoint `python3 -c 'print(1)'`) created at once; prints how long until all are
# Complete, how many failed, and kubesim's peak resident memory. Slow on purpose: a benchmark,
# not part of ctest.
#   bench/kubesim_scale.sh build/debug/bin/kubesim [N=200]
set -euo pipefail
KUBESIM=${1:?kubesim binary}
N=${2:-200}
WORK=$(mktemp -d)
SIM_PID=""
cleanup() {
  [[ -n $SIM_PID ]] && kill "$SIM_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

cat >"$WORK/nodes.yaml" <<'EOF'
- metadata: {name: big-1}
  status:
    capacity: {cpu: "2000", memory: 8Ti}
    allocatable: {cpu: "2000", memory: 8Ti}
- metadata: {name: big-2}
  status:
    capacity: {cpu: "2000", memory: 8Ti}
    allocatable: {cpu: "2000", memory: 8Ti}
EOF
"$KUBESIM" --listen 127.0.0.1:0 --port-file "$WORK/port" --nodes "$WORK/nodes.yaml" \
  --controllers all --kubelet-dir "$WORK/kubelet" >"$WORK/kubesim.log" 2>&1 &
SIM_PID=$!
for _ in $(seq 600); do [[ -s $WORK/port ]] && break; sleep 0.05; done
API="http://127.0.0.1:$(cat "$WORK/port")"

rayjob() { # name
  cat <<EOF
{"apiVersion":"ray.io/v1","kind":"RayJob","metadata":{"name":"$1","namespace":"default"},
 "spec":{"entrypoint":"python3 -c 'print(1)'","shutdownAfterJobFinishes":true,
  "ttlSecondsAfterFinished":0,
  "rayClusterSpec":{"rayVersion":"2.52.0","headGroupSpec":{"rayStartParams":{},
   "template":{"spec":{"containers":[{"name":"ray-head","image":"rayproject/ray:2.52.0",
    "resources":{"requests":{"cpu":"1","memory":"1Gi"},"limits":{"cpu":"1","memory":"1Gi"}}}]}}}}}}
EOF
}

start=$(date +%s.%N)
for i in $(seq 1 "$N"); do
  rayjob "scale-$i" | curl -fsS -o /dev/null -H 'Content-Type: application/json' --data-binary @- \
    "$API/apis/ray.io/v1/namespaces/default/rayjobs"
done
created=$(date +%s.%N)
peak=0
while :; do
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$SIM_PID/status")
  ((rss > peak)) && peak=$rss
  states=$(curl -fsS "$API/apis/ray.io/v1/namespaces/default/rayjobs" |
    python3 -c 'import json,sys,collections; print(dict(collections.Counter(i.get("status",{}).get("jobDeploymentStatus","") for i in json.load(sys.stdin)["items"])))')
  done_n=$(python3 -c "d=$states; print(d.get('Complete',0)+d.get('Failed',0))")
  now=$(date +%s.%N)
  printf '%6.1f s  %s\n' "$(echo "$now - $start" | bc)" "$states"
  ((done_n >= N)) && break
  if (($(echo "$now - $start > 1800" | bc))); then echo "timeout"; break; fi
  sleep 5
done
end=$(date +%s.%N)
echo "RayJobs: $N; created in $(echo "$created - $start" | bc) s; all terminal after $(echo "$end - $start" | bc) s"
echo "final: $states; kubesim peak RSS $((peak / 1024)) MiB"
