#!/usr/bin/env bash
# Scale check of kubesim with every controller: N small RayJobs (a head pod, no workers, K8sJobMode
# submitter, entrypoint `python3 -c 'print(1)'`) created at once; prints how long until all are
# terminal, how many Completed and Failed, and kubesim's peak resident memory (VmHWM). Every
# failed RayJob is reported with its status (jobDeploymentStatus, reason, jobStatus, message), and
# its status, events and submitter pod logs are saved under the work dir, which is kept (kubesim's
# log is there too). Slow on purpose: a benchmark, not part of ctest.
#   bench/kubesim_scale.sh build/debug/bin/kubesim [N=200] [extra kubesim flags...]
set -euo pipefail
KUBESIM=${1:?kubesim binary}
N=${2:-200}
shift $(($# >= 2 ? 2 : 1))
WORK=$(mktemp -d -t kubesim-scale-XXXXXX)
SIM_PID=""
cleanup() {
  if [[ -n $SIM_PID ]]; then kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; fi
  echo "work dir (kept): $WORK"
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
  --controllers all --kubelet-dir "$WORK/kubelet" "$@" >"$WORK/kubesim.log" 2>&1 &
SIM_PID=$!
for _ in $(seq 600); do [[ -s $WORK/port ]] && break; sleep 0.05; done
[[ -s $WORK/port ]] || { echo "kubesim did not start:"; tail -n 20 "$WORK/kubesim.log"; exit 1; }
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
while :; do
  peak=$(awk '/VmHWM/ {print $2}' "/proc/$SIM_PID/status")
  curl -fsS "$API/apis/ray.io/v1/namespaces/default/rayjobs" >"$WORK/rayjobs.json"
  states=$(python3 -c 'import json,sys,collections; print(dict(collections.Counter(i.get("status",{}).get("jobDeploymentStatus","") for i in json.load(open(sys.argv[1]))["items"])))' "$WORK/rayjobs.json")
  done_n=$(python3 -c "d=$states; print(d.get('Complete',0)+d.get('Failed',0))")
  now=$(date +%s.%N)
  printf '%6.1f s  %s\n' "$(echo "$now - $start" | bc)" "$states"
  ((done_n >= N)) && break
  if (($(echo "$now - $start > 1800" | bc))); then echo "timeout"; break; fi
  sleep 5
done
end=$(date +%s.%N)
# kubesim's own CPU time (its pods' processes are not counted: they are never its waited children
# while it runs).
cpu=$(awk -v hz="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); printf "%.0f", ($12 + $13) / hz}' "/proc/$SIM_PID/stat")
echo "RayJobs: $N; created in $(echo "$created - $start" | bc) s; all terminal after $(echo "$end - $start" | bc) s"
echo "final: $states; kubesim peak RSS $((peak / 1024)) MiB, CPU ${cpu} s; load average $(cut -d' ' -f1-3 /proc/loadavg)"

# Failed RayJobs: their status on stdout; status, events and submitter logs saved per job.
python3 - "$WORK" "$API" <<'EOF'
import collections, json, os, sys, urllib.request
work, api = sys.argv[1], sys.argv[2]
def get(path, raw=False):
    try:
        with urllib.request.urlopen(api + path, timeout=30) as r:
            body = r.read().decode(errors="replace")
    except Exception as e:  # noqa: BLE001 - a report, best effort
        return "(GET %s: %s)" % (path, e) if raw else {}
    return body if raw else json.loads(body)
items = json.load(open(os.path.join(work, "rayjobs.json")))["items"]
failed = [i for i in items if i.get("status", {}).get("jobDeploymentStatus") == "Failed"]
if not failed:
    sys.exit(0)
by_cause, example = collections.Counter(), {}
events = get("/api/v1/namespaces/default/events").get("items", [])  # both APIs' events
pods = get("/api/v1/namespaces/default/pods").get("items", [])
for rj in failed:
    name, st = rj["metadata"]["name"], rj.get("status", {})
    msg = st.get("message", "")
    cause = (st.get("reason", ""), st.get("jobStatus", ""))
    by_cause[cause] += 1
    example.setdefault(cause, "%s: %s" % (name, msg.splitlines()[0] if msg else ""))
    d = os.path.join(work, "failed", name)
    os.makedirs(d, exist_ok=True)
    json.dump(st, open(os.path.join(d, "status.json"), "w"), indent=2)
    ev = []
    for e in events:
        obj = e.get("involvedObject") or {}
        if obj.get("name", "").startswith(name):
            ev.append("%s %s %s %s/%s: %s" % (e.get("lastTimestamp") or e.get("eventTime") or "",
                      e.get("type"), e.get("reason"), obj.get("kind"), obj.get("name"), e.get("message")))
    open(os.path.join(d, "events.txt"), "w").write("\n".join(sorted(ev)) + "\n")
    logs = []
    for pod in pods:
        if pod["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name") != name:
            continue
        pn = pod["metadata"]["name"]
        logs.append("=== %s (%s)\n%s" % (pn, pod.get("status", {}).get("phase"),
                    get("/api/v1/namespaces/default/pods/%s/log" % pn, raw=True)))
    open(os.path.join(d, "submitter.log"), "w").write("\n".join(logs))
    if len(example) > 0 and sum(by_cause.values()) > 20:
        continue  # the first 20 are printed; all are saved
    print("FAILED %s: jobDeploymentStatus=%s reason=%s jobStatus=%s status.failed=%s\n  message: %s"
          % (name, st.get("jobDeploymentStatus"), st.get("reason"), st.get("jobStatus"),
             st.get("failed", 0), "\n  ".join(msg.splitlines()[-12:])))
if len(failed) > 20:
    print("... and %d more failed RayJobs (all saved)" % (len(failed) - 20))
print("failed RayJobs by reason/jobStatus (an example message):")
for cause, n in by_cause.most_common():
    print("  %d x %s/%s (%s)" % (n, cause[0], cause[1], example[cause]))
if ("JobDeploymentStatusTransitionGracePeriodExceeded", "FAILED") in by_cause:
    print("JobDeploymentStatusTransitionGracePeriodExceeded: the operator looked at these RayJobs more than\n"
          "KubeRay's 30 s after their submitter Job finished (their Ray job usually SUCCEEDED: see\n"
          "submitter.log). KubeRay fails them the same way; here it means kubesim's control plane was too\n"
          "slow for N on this machine (see kubesim's CPU and the load average above): use a Release build,\n"
          "fewer RayJobs or a less loaded machine.")
print("details: %s/failed/<name>/{status.json,events.txt,submitter.log}; kubesim log: %s/kubesim.log"
      % (work, work))
EOF
