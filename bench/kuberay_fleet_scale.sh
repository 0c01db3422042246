#!/usr/bin/env bash
# Scale check of `forge serve` with the kuberay fleet on kubesim: does the fleet's cost per job stay
# flat when many jobs run at once (watches, not polling)?
#
#   bench/kuberay_fleet_scale.sh BUILD_DIR [N=40]
#
# Use a release build for the figures the goals speak of (docs/kuberay-fleet.md, "Scale"):
#   cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build/release
#   bench/kuberay_fleet_scale.sh build/release 1000
#
# It starts kubesim with every controller (h200 nodes of 8 GPUs, enough for N one-GPU jobs at
# once, and two CPU-only big nodes for the submitter pods), s3rver (tools/s3peer) and `forge serve`
# with the kuberay fleet, set up as scripts/e2e/kuberay_loop.py's simulator mode. PODS=fake (the
# default) runs kubesim's kubelet with --pods fake: no process per pod, statuses as a kubelet
# writes them, a fake Ray head per RayCluster and a submitter that ends after FAKE_JOB_MS (default
# 2000) — what lets N reach 1,000 on two cores; PODS=process runs the Ray emulator's programs
# (N ≤ 400: the real thing, driver.log included). Then, in the same run:
#   a warm-up job, alone and not counted (the first job of a fresh forge serve pays one-time
#     costs: connections, the first capsule, caches; it swung the baseline by 2x);
#   phase 1 (the baseline): BASE_JOBS jobs (default 20) one after another, each alone on the
#     fleet (one pool, one machine, one GPU, `python3 main.py` printing a line), each submitted
#     once the one before is released, polled every 0.2 s; its figures are per job (one job's CPU
#     is 4-6 ticks of the 10 ms clock; with ten jobs the mean moved from 0.035 to 0.047 s between
#     runs of the same build, the CPU ratio with it from 0.84x to 1.22x: twenty halve that spread);
#   when N > REF_N (default 40; 0 = none), the reference phase: REF_ROUNDS rounds (default
#     ⌈N / REF_N⌉, as many releases as phase 2 has) of REF_N jobs at once, each round once the
#     last is released, whose release times (finished → released) the GOAL line on release
#     compares phase 2 with — the same build, machine and load, minutes apart. As many: the
#     slowest of 1,000 releases exceeds the slowest of 40 in 96 % of runs (1000/1040) even when
#     every job releases alike, so that comparison could not tell N's cost from the sample's size;
#   forge serve runs with --resync-ms RESYNC_MS (default 1000) and --workers WORKERS (default 4);
#   phase 2: N such jobs submitted at once (SUBMIT_PARALLEL submits at a time, default 4), until
#     every job is terminal and released (or TIMEOUT seconds, default 300 + 20 N, plus the jobs'
#     length); with PODS=fake each runs MANY_JOB_MS to 1 + MANY_JOB_SPREAD times that (defaults
#     2000 + 120 N ms and 0.5; MANY_JOB_MS=0 = FAKE_JOB_MS), so that all N run at once (the
#     table's "jobs running at once, peak" shows whether they did) and end spread out;
#   then IDLE_SECONDS (default 20) with no job, to see what an idle server sends.
# The bench's own polling of forge serve's job list (every POLL seconds, default max(0.2, N/200))
# is part of forge serve's CPU.
# Each phase records forge serve's API requests (kubesim's /kubesim/requests counts StarForge's
# only: its own controllers are counted apart), by verb and resource, list/watch apart; the wall
# time; CPU time (utime + stime) and peak RSS (VmHWM) of forge serve and kubesim (kubesim's pods,
# the Ray emulator's processes, are not in its figures). It prints a table with the per-job ratios
# of phase 2 against phase 1 (requests per job ≈ 1.0 when the fleet watches instead of polling),
# each non-Succeeded job's phase/reason/message, and checks after each phase that no RayJob,
# RayCluster, pod, submitter Job or service is left in the namespace. It also shows each phase's
# time in every job phase, how long after the RayJob's end the logs were archived, and which
# archive files every job got (a WARNING, not a failure, when some lack one: ray-job.log is lost
# when the archive comes after the operator deleted the RayCluster, FORGE_KUBERAY_TTL_SECONDS=60).
# At the end it checks the goals of docs/kuberay-fleet.md, "Scale" (GOAL lines: met or NOT MET;
# a report, not the exit status).
# Exit status: 0 when every job Succeeded and nothing was left, 1 otherwise. The work directory
# (logs of kubesim, s3rver and forge serve; per-phase JSON) is kept on failure, always with KEEP=1.
# KUBESIM=path picks another kubesim binary. Slow on purpose: a benchmark, not part of ctest.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/e2e/lib.sh
source "$repo/scripts/e2e/lib.sh"
E2E_NAME=kuberay_fleet_scale  # for messages before e2e_init
say() { e2e_say "$@"; }
fail() { e2e_fail "$@"; }
usage() {
  echo "usage: bench/kuberay_fleet_scale.sh BUILD_DIR [N=40]" >&2
  exit 2
}
case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2; exit 0 ;;
esac
(($# == 1 || $# == 2)) || usage
[[ -d "$1" ]] || fail "BUILD_DIR $1: no such directory"
build=$(cd "$1" && pwd)
N=${2:-40}
pods=${PODS:-fake}
[[ "$pods" == fake || "$pods" == process ]] || fail "PODS must be fake or process, not $pods"
max_n=1000
[[ "$pods" == process ]] && max_n=400
if ! [[ "$N" =~ ^[1-9][0-9]*$ ]] || ((N > max_n)); then
  fail "N must be an integer from 1 to $max_n (PODS=$pods), not $N"
fi
poll=${POLL:-$(awk -v n="$N" 'BEGIN {printf "%.2f", (n / 200 > 0.2 ? n / 200 : 0.2)}')}
par=${SUBMIT_PARALLEL:-4}
timeout=${TIMEOUT:-$((300 + 20 * N))}
idle=${IDLE_SECONDS:-20}
base_jobs=${BASE_JOBS:-20}
ref_n=${REF_N:-40}
# Phase 2's jobs run long enough for all N to run at once (the scale the goals speak of): with
# every job as short as the baseline's, a job ended before the burst of submits was half over, so
# at most ~50 of 1,000 ever ran together and their releases met the submits' load. Job k runs
# MANY_JOB_MS × (1 + MANY_JOB_SPREAD × frac(k φ)): lengths spread evenly (golden-ratio sequence,
# the same in every run) so that jobs end as a fleet's do, not all within seconds of each other
# (0 = one length for all). PODS=fake only (KUBESIM_FAKE_JOB_MS in the job's env,
# docs/kubesim.md "Fake pods"); MANY_JOB_MS=0 = FAKE_JOB_MS's.
many_job_ms=${MANY_JOB_MS:-$((2000 + 120 * N))}
[[ "$many_job_ms" =~ ^[0-9]+$ ]] || fail "MANY_JOB_MS must be a whole number, not $many_job_ms"
[[ "$pods" == fake ]] || many_job_ms=0
many_spread=${MANY_JOB_SPREAD:-0.5}
[[ "$many_spread" =~ ^[0-9]+(\.[0-9]+)?$ ]] || fail "MANY_JOB_SPREAD must be a number >= 0, not $many_spread"
job_ms=0  # the base job length of the phase being submitted (0 = kubesim's --fake-job-ms)
[[ "$ref_n" =~ ^[0-9]+$ ]] || fail "REF_N must be a whole number, not $ref_n"
((N > ref_n)) || ref_n=0
ref_rounds=1
((ref_n == 0)) || ref_rounds=${REF_ROUNDS:-$(((N + ref_n - 1) / ref_n))}
[[ "$ref_rounds" =~ ^[1-9][0-9]*$ ]] || fail "REF_ROUNDS must be a whole number >= 1, not $ref_rounds"
forge="$build/bin/forge"
kubesim=${KUBESIM:-$build/bin/kubesim}
[[ -x "$forge" ]] || fail "$forge: not built"
[[ -x "$kubesim" ]] || fail "$kubesim: not built"
[[ "$("$kubesim" --help 2>&1 || true)" == *--controllers* ]] ||
  fail "this kubesim has no controllers: nothing would run the RayJobs"

e2e_init kuberay-fleet-scale
work=$E2E_WORK
# Keep the work directory when the bench fails (e2e_cleanup keeps it with KEEP=1).
trap 'rc=$?; if ((rc != 0)); then KEEP=1; fi; e2e_cleanup' EXIT

# --- the cluster: h200 × 8 GPUs for N one-GPU jobs (+1 node of slack), two CPU-only big nodes -----
gpu_nodes=$(((N + 7) / 8 + 1))
{
  for i in $(seq 1 "$gpu_nodes"); do
    cat <<NODE
- metadata: {name: h200-$i, labels: {starforge/gpu-series: h200}}
  status:
    capacity: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8"}
    allocatable: {cpu: "95", memory: 1000Gi, nvidia.com/gpu: "8"}
NODE
  done
  for i in 1 2; do
    cat <<NODE
- metadata: {name: cpu-$i}
  status:
    capacity: {cpu: "2000", memory: 8Ti}
    allocatable: {cpu: "2000", memory: 8Ti}
NODE
  done
} >"$work/nodes.yaml"
printf -- '- "python:*"\n- "docker.io/library/python:*"\n' >"$work/images.yaml"
mkdir -p "$work/pv/starforge/data"
pod_flags=()
[[ "$pods" == fake ]] && pod_flags=(--pods fake --fake-job-ms "${FAKE_JOB_MS:-2000}")
e2e_start_kubesim "$kubesim" --nodes "$work/nodes.yaml" --controllers all --pv-root "$work/pv" \
  --images "$work/images.yaml" --kubelet-backoff-ms 500 "${pod_flags[@]}"
k8s=$E2E_K8S
kubesim_pid=${e2e_pids[-1]}
curl -fsS -X POST -H 'Content-Type: application/json' \
  -d '{"metadata":{"name":"starforge"}}' "$k8s/api/v1/namespaces" >/dev/null
curl -fsS -X POST -H 'Content-Type: application/json' \
  -d '{"metadata":{"name":"data"},"spec":{"accessModes":["ReadWriteMany"],"resources":{"requests":{"storage":"1Gi"}}}}' \
  "$k8s/api/v1/namespaces/starforge/persistentvolumeclaims" >/dev/null
curl -fsS -X PATCH -H 'Content-Type: application/merge-patch+json' -d '{"status":{"phase":"Bound"}}' \
  "$k8s/api/v1/namespaces/starforge/persistentvolumeclaims/data/status" >/dev/null || true
e2e_start_s3peer "$repo" starforge

# --- forge serve with the kuberay fleet, as the loop's simulator mode ------------------------------
export FORGE_STORAGE_ROOT="$work/pv/starforge/data"
export FORGE_K8S_STORAGE_PVC=data
export FORGE_K8S_STORAGE_SHARED=true
export FORGE_K8S_API_SERVER="$k8s"
export FORGE_K8S_NAMESPACE=starforge
export FORGE_KUBERAY_TTL_SECONDS=60
export FORGE_S3_ENDPOINT=$E2E_S3
export FORGE_S3_BUCKET=starforge
export FORGE_S3_ACCESS_KEY=S3RVER
export FORGE_S3_SECRET_KEY=S3RVER
export FORGE_DEFAULT_FLEET_KIND=kuberay
FORGE_TOKEN=$("$forge" token create --user bench --admin --description "bench/kuberay_fleet_scale.sh" \
  2>"$work/token.err") || fail "forge token create: $(cat "$work/token.err")"
export FORGE_TOKEN
# forge serve's defaults unless RESYNC_MS / WORKERS say otherwise (the loop uses 200 ms for speed)
"$forge" serve --listen 127.0.0.1:0 --port-file "$work/forge.port" --resync-ms "${RESYNC_MS:-1000}" \
  --workers "${WORKERS:-4}" \
  >"$work/serve.out" 2>"$work/serve.log" &
serve_pid=$!
e2e_pids+=("$serve_pid")
e2e_wait_file "$work/forge.port" 30 || fail "forge serve did not start: $(tail -n 3 "$work/serve.log")"
FORGE_SERVER="http://127.0.0.1:$(cat "$work/forge.port")"
export FORGE_SERVER

api() {  # PATH: GET on forge serve's API
  curl -fsS -H "Authorization: Bearer $FORGE_TOKEN" "$FORGE_SERVER$1"
}
# The fleet's informers have listed the nodes once the capacity shows the h200 series.
for _ in $(seq 1 150); do
  api /api/v1/capacity 2>/dev/null | grep -q '"h200"' && break
  sleep 0.2
done
api /api/v1/capacity | grep -q '"h200"' ||
  fail "the kuberay fleet never showed the h200 nodes in /api/v1/capacity; see $work/serve.log"

# A watch of the namespace's RayJobs, for the whole run: when each one was gone (its DELETED
# event), which splits a release's last part into the operator's (DELETE accepted → finalizer
# removed, RayJob gone) and forge serve's (gone → its own watch told it and it wrote the job).
# Started before any phase: its one watch is not in a phase's request counts.
python3 - "$k8s" >"$work/rayjobs.watch" 2>"$work/rayjobs.watch.err" <<'EOF' &
import json, sys, time, urllib.request
url = sys.argv[1] + "/apis/ray.io/v1/namespaces/starforge/rayjobs?watch=1&timeoutSeconds=86400"
for line in urllib.request.urlopen(url, timeout=86400):
    ev = json.loads(line)
    md = ev.get("object", {}).get("metadata", {})
    print("%.3f %s %s %s" % (time.time(), ev.get("type"), (md.get("labels") or {}).get("starforge/job-id", "-"),
                             "deleting" if md.get("deletionTimestamp") else "-"), flush=True)
EOF
e2e_pids+=($!)

mkdir -p "$work/code" "$work/specs" "$work/ids"
cat >"$work/code/main.py" <<'EOF'
import os
print("hello from", os.environ.get("FORGE_JOB_ID"), flush=True)
EOF

now() { date +%s.%N; }
proc_stats() {  # PID: "cpu_seconds peak_rss_kib rss_kib threads fds"
  local cpu hwm rss threads fds
  cpu=$(awk -v hz="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / hz}' "/proc/$1/stat")
  hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$1/status")
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$1/status")
  threads=$(awk '/^Threads/ {print $2}' "/proc/$1/status")
  fds=$(find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  echo "$cpu $hwm $rss $threads $fds"
}
snapshot() {  # NAME: both processes' figures into $work/NAME.stats
  { echo "serve $(proc_stats "$serve_pid")"; echo "kubesim $(proc_stats "$kubesim_pid")"; } >"$work/$1.stats"
  # The machine's count of SYNs dropped at a full listen queue (TcpExt ListenDrops): each one
  # costs a client TCP's 1 s (then 3 s) retransmission; other programs' sockets count too.
  awk 'NR % 2 == 1 {for (i = 1; i <= NF; i++) h[i] = $i} NR % 2 == 0 && $1 == "TcpExt:" {
    for (i = 1; i <= NF; i++) if (h[i] == "ListenDrops") print $i}' /proc/net/netstat >"$work/$1.drops" 2>/dev/null || true
  # kubesim's own controllers' requests so far (never reset: the phase's are after - before).
  curl -fsS "$k8s/kubesim/requests?controllers=1" >"$work/$1.controllers.json" 2>/dev/null || true
  # forge serve's reconciles so far (its looks at jobs; the phase's are after - before).
  api /metrics 2>/dev/null | awk '$1 == "starforge_reconciles_total" {print $2}' >"$work/$1.reconciles" || true
}

# Submits job NAME; its id goes to $work/ids/NAME, an error to $work/ids/NAME.err. A fake job
# runs $job_ms ms (× 1 + $many_spread × frac(K φ) for job number K) when that is not 0.
submit() {  # NAME [K]
  cat >"$work/specs/$1.yaml" <<EOF
name: $1
fleet: kuberay
image: python:3.12
entrypoint: python3 main.py
pools:
  - {name: main, gpuSeries: h200, gpusPerMachine: 1}
EOF
  ((job_ms == 0)) || awk -v ms="$job_ms" -v s="$many_spread" -v k="${2:-0}" 'BEGIN {
    f = k * 0.6180339887; f -= int(f)
    printf "env: {KUBESIM_FAKE_JOB_MS: \"%d\"}\n", ms * (1 + s * f) }' >>"$work/specs/$1.yaml"
  local id
  if id=$("$forge" submit "$work/specs/$1.yaml" --code "$work/code" -o name 2>"$work/ids/$1.err"); then
    echo "${id#job/}" >"$work/ids/$1"
  fi
}

# Every job of forge serve's list (all pages) as one {"items": [...]}.
list_jobs() {
  python3 - "$FORGE_SERVER" "$FORGE_TOKEN" <<'EOF'
import json, sys, urllib.parse, urllib.request
items, cursor = [], None
while True:
    url = sys.argv[1] + "/api/v1/jobs?limit=500" + ("&cursor=" + urllib.parse.quote(cursor) if cursor else "")
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + sys.argv[2]})
    page = json.load(urllib.request.urlopen(req, timeout=60))
    items += page["items"]
    cursor = page.get("nextCursor")
    if not cursor:
        break
json.dump({"items": items}, sys.stdout)
EOF
}

# Waits until every job of $work/PHASE.ids is terminal and released (or SECONDS have passed);
# leaves the last job list in $work/PHASE.jobs.json. Returns 1 on timeout.
wait_released() {  # PHASE SECONDS
  local deadline last_print=0 status
  deadline=$(awk -v t="$(now)" -v s="$2" 'BEGIN {printf "%d", t + s}')
  while :; do
    if list_jobs >"$work/$1.jobs.json.new" 2>>"$work/poll.err"; then
      mv "$work/$1.jobs.json.new" "$work/$1.jobs.json"
      status=$(python3 - "$work/$1.jobs.json" "$work/$1.ids" <<'EOF'
import collections, json, sys
jobs = {j["id"]: j for j in json.load(open(sys.argv[1]))["items"]}
ids = open(sys.argv[2]).read().split()
phases = collections.Counter(jobs[i]["phase"] if i in jobs else "missing" for i in ids)
done = sum(1 for i in ids if i in jobs and jobs[i]["phase"] in ("Succeeded", "Failed", "Cancelled")
           and jobs[i]["cleanup"]["released"])
print(done, len(ids), " ".join("%s=%d" % kv for kv in sorted(phases.items())))
EOF
      )
      read -r done_n total_n phases <<<"$status"
      ((done_n == total_n)) && return 0
      if (($(date +%s) - last_print >= 10)); then
        say "  $done_n/$total_n terminal and released ($phases); load $(cut -d" " -f1 /proc/loadavg)"
        last_print=$(date +%s)
      fi
    fi
    (($(date +%s) >= deadline)) && return 1
    sleep "$poll"
  done
}

# Waits until the jobs of file IDS, forge serve's newest, are terminal and released (or SECONDS
# have passed): one process reading only them every 0.5 s, so that the waiting adds little load
# (a list of every job and two python3 processes per poll, every 0.2 s, doubled the reference's
# median release). Returns 1 on timeout.
wait_batch() {  # IDS SECONDS
  python3 - "$FORGE_SERVER" "$FORGE_TOKEN" "$1" "$2" <<'EOF'
import json, sys, time, urllib.request
ids = set(open(sys.argv[3]).read().split())
deadline = time.time() + float(sys.argv[4])
req = urllib.request.Request("%s/api/v1/jobs?limit=%d" % (sys.argv[1], max(1, len(ids))),
                             headers={"Authorization": "Bearer " + sys.argv[2]})
while time.time() < deadline:
    try:
        items = {j["id"]: j for j in json.load(urllib.request.urlopen(req, timeout=60))["items"]}
        if all(i in items and items[i]["phase"] in ("Succeeded", "Failed", "Cancelled")
               and items[i]["cleanup"]["released"] for i in ids):
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.5)
sys.exit(1)
EOF
}

# Lists what is left in the namespace (RayJobs, RayClusters, pods, batch Jobs, services) into
# $work/PHASE.left; waits up to 60 s for garbage collection. Returns 1 if anything stays.
nothing_left() {  # PHASE
  local path out
  for _ in $(seq 1 120); do
    out=""
    for path in apis/ray.io/v1/namespaces/starforge/rayjobs apis/ray.io/v1/namespaces/starforge/rayclusters \
      api/v1/namespaces/starforge/pods apis/batch/v1/namespaces/starforge/jobs \
      api/v1/namespaces/starforge/services; do
      out+=$(curl -fsS "$k8s/$path" | python3 -c '
import json, sys
for i in json.load(sys.stdin)["items"]:
    print("%s/%s" % (sys.argv[1].rsplit("/", 1)[1], i["metadata"]["name"]))' "$path")$'\n' || out+="(GET $path failed)"$'\n'
    done
    out=$(grep -v '^$' <<<"$out" || true)
    [[ -z "$out" ]] && { : >"$work/$1.left"; return 0; }
    sleep 0.5
  done
  echo "$out" >"$work/$1.left"
  return 1
}

# Runs one phase: COUNT jobs named PHASE-1..COUNT, SECONDS at most. Writes PHASE.{ids,t0,t1,
# requests.json,before.stats,after.stats,left}. Returns 1 when it timed out or left something.
run_phase() {  # PHASE COUNT SECONDS [serial: each job alone, submitted once the last is released
  #                               | BATCH: BATCH at once, each batch once the last is released]
  local phase=$1 count=$2 serial="" batch=0 rc=0 i k pids=() name poll=$poll
  case ${4:-} in
    serial) serial=1 ;;
    "") ;;
    *) batch=$4 ;;
  esac
  # Serial jobs are short: poll them often, so that each one's time alone stays short.
  [[ -n "$serial" ]] && poll=0.2
  curl -fsS -X DELETE "$k8s/kubesim/requests" >/dev/null
  snapshot "$phase.before"
  now >"$work/$phase.t0"
  : >"$work/$phase.ids"
  for i in $(seq 1 "$count"); do
    if [[ -n "$serial" ]]; then
      submit "$phase-$i"
      [[ -s "$work/ids/$phase-$i" ]] && cat "$work/ids/$phase-$i" >>"$work/$phase.ids"
      wait_released "$phase" "$3" || break
      continue
    fi
    submit "$phase-$i" "$i" &
    pids+=($!)
    if ((${#pids[@]} >= par)); then wait "${pids[@]}"; pids=(); fi
    if ((batch > 0)) && ((i % batch == 0 || i == count)); then
      ((${#pids[@]} == 0)) || wait "${pids[@]}"
      pids=()
      : >"$work/$phase-batch.ids"
      for k in $(seq $((i - (i - 1) % batch)) "$i"); do
        [[ -s "$work/ids/$phase-$k" ]] && cat "$work/ids/$phase-$k" >>"$work/$phase-batch.ids"
      done
      wait_batch "$work/$phase-batch.ids" "$3" || { say "$phase: a round not released within $3 s"; rc=1; break; }
    fi
  done
  ((${#pids[@]} == 0)) || wait "${pids[@]}"
  now >"$work/$phase.submitted"
  : >"$work/$phase.ids"
  for i in $(seq 1 "$count"); do
    name="$phase-$i"
    if [[ -s "$work/ids/$name" ]]; then
      cat "$work/ids/$name" >>"$work/$phase.ids"
    else
      say "forge submit $name failed: $(tail -n 3 "$work/ids/$name.err")"
      rc=1
    fi
  done
  say "$phase: $(wc -w <"$work/$phase.ids") job(s) submitted in" \
    "$(awk -v a="$(cat "$work/$phase.t0")" -v b="$(cat "$work/$phase.submitted")" 'BEGIN {printf "%.1f", b - a}') s"
  wait_released "$phase" "$3" || { say "$phase: not every job terminal and released within $3 s"; rc=1; }
  now >"$work/$phase.t1"
  # Each job with its timeline (the time spent in each phase), for the report.
  mkdir -p "$work/$phase.detail"
  while read -r i; do
    api "/api/v1/jobs/$i" >"$work/$phase.detail/$i.json" 2>/dev/null || true
  done <"$work/$phase.ids"
  # Before anything of ours reads the cluster (kubesim would count it).
  curl -fsS "$k8s/kubesim/requests" >"$work/$phase.requests.json"
  snapshot "$phase.after"
  # Each job's events (after the snapshot: not counted in forge serve's CPU for the phase): the
  # Releasing event splits the release into forge serve's part and the operator's.
  while read -r i; do
    api "/api/v1/jobs/$i/events" >"$work/$phase.detail/$i.events.json" 2>/dev/null || true
  done <"$work/$phase.ids"
  if ! nothing_left "$phase"; then
    say "$phase: left in namespace starforge: $(tr '\n' ' ' <"$work/$phase.left")"
    rc=1
  fi
  # Every job that did not succeed, with the server's reason and message (and its description).
  python3 - "$work/$phase.jobs.json" "$work/$phase.ids" <<'EOF' >"$work/$phase.not-succeeded"
import json, sys
jobs = {j["id"]: j for j in json.load(open(sys.argv[1]))["items"]}
for i in open(sys.argv[2]).read().split():
    if jobs.get(i, {}).get("phase") != "Succeeded":
        print(i)
EOF
  if [[ -s "$work/$phase.not-succeeded" ]]; then
    rc=1
    mkdir -p "$work/not-succeeded"
    while read -r i; do
      "$forge" get jobs "$i" -o json >"$work/not-succeeded/$i.json" 2>&1 || true
      "$forge" describe job "$i" >"$work/not-succeeded/$i.describe" 2>&1 || true
      say "NOT SUCCEEDED $i: $(python3 -c '
import json, sys
try:
    j = json.load(open(sys.argv[1]))
    print("phase=%s reason=%s released=%s message: %s" % (j["phase"], j["reason"], j["cleanup"]["released"], j["message"]))
except Exception as e:  # a report, best effort
    print("(no JSON: %s)" % open(sys.argv[1]).read().strip()[:300])' "$work/not-succeeded/$i.json")"
    done <"$work/$phase.not-succeeded"
  fi
  return "$rc"
}

say "work dir $work; $gpu_nodes h200 nodes × 8 GPUs + 2 CPU nodes; N=$N; load average $(cut -d' ' -f1-3 /proc/loadavg)"
ok=true
say "warm-up: one job alone (not counted)"
run_phase warm 1 300 serial || ok=false
say "phase 1: $base_jobs jobs one after another (the single-job baseline)"
run_phase one "$base_jobs" $((300 * base_jobs)) serial || ok=false
echo "$ref_n" >"$work/ref.n"
echo "$ref_rounds" >"$work/ref.rounds"
if ((ref_n > 0)); then
  say "reference phase: $ref_rounds round(s) of $ref_n jobs at once (release times to compare phase 2 with)"
  run_phase ref $((ref_n * ref_rounds)) $((300 + 20 * ref_n)) "$ref_n" || ok=false
fi
say "phase 2: $N jobs at once$( ((many_job_ms == 0)) || echo ", each running $((many_job_ms / 1000)) s × (1 to 1 + $many_spread)")"
job_ms=$many_job_ms
run_phase many "$N" $((timeout + 2 * many_job_ms / 1000)) || ok=false
job_ms=0

# An idle server: what it sends with no job (list/watch reconnects only, if it watches).
curl -fsS -X DELETE "$k8s/kubesim/requests" >/dev/null
snapshot idle.before
sleep "$idle"
curl -fsS "$k8s/kubesim/requests" >"$work/idle.requests.json"
snapshot final

python3 - "$work" "$N" "$idle" "$pods" <<'EOF' | tee "$work/report.txt"
import json, os, sys
from datetime import datetime
work, n, idle, pods = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def read(name):
    return open(os.path.join(work, name)).read()
def stats(name):
    out = {}
    for line in read(name + ".stats").splitlines():
        who, cpu, hwm, rss, threads, fds = line.split()
        out[who] = {"cpu": float(cpu), "hwm": int(hwm) / 1024, "rss": int(rss) / 1024,
                    "threads": int(threads), "fds": int(fds)}
    return out
def requests(name):
    r = json.load(open(os.path.join(work, name + ".requests.json")))["requests"]
    lw = {k: v for k, v in r.items() if k.split(" ", 1)[0] in ("list", "watch")}
    other = {k: v for k, v in r.items() if k not in lw}
    return r, lw, other
def when(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() if s else None

ARCHIVE = ["driver.log", "ray-job.log", "submitter.log", "events.json", "rayjob.json"]
# With --pods fake no runner runs, so no job writes a driver.log: only the other four are expected.
EXPECTED = ARCHIVE[1:] if pods == "fake" else ARCHIVE
ph = {}
ref_n = int(read("ref.n"))
ref_rounds = int(read("ref.rounds")) if os.path.exists(os.path.join(work, "ref.rounds")) else 1
for name, count in (("one", 0), ("many", n)) + ((("ref", ref_n),) if ref_n else ()):
    p = {"count": count}
    p["wall"] = float(read(name + ".t1")) - float(read(name + ".t0"))
    p["submit"] = float(read(name + ".submitted")) - float(read(name + ".t0"))
    p["all"], p["lw"], p["other"] = requests(name)
    p["before"], p["after"] = stats(name + ".before"), stats(name + ".after")
    ids = read(name + ".ids").split()
    jobs = {j["id"]: j for j in json.load(open(os.path.join(work, name + ".jobs.json")))["items"]}
    p["succeeded"] = sum(1 for i in ids if jobs.get(i, {}).get("phase") == "Succeeded")
    p["ids"] = len(ids)
    lat = sorted(when(jobs[i]["finishedAt"]) - when(jobs[i]["createdAt"])
                 for i in ids if i in jobs and jobs[i].get("finishedAt"))
    p["lat"] = lat
    # Seconds spent in each phase (from the timelines), and finishedAt → last update (the release).
    spent, split, running, ends = {}, {}, [], []
    for i in ids:
        try:
            d = json.load(open(os.path.join(work, name + ".detail", i + ".json")))
        except (OSError, ValueError):
            continue
        tl = d.get("timeline") or []
        for a, b in zip(tl, tl[1:]):
            spent.setdefault(a["to"], []).append(when(b["at"]) - when(a["at"]))
            if a["to"] == "Running":
                running += [(when(a["at"]), 1), (when(b["at"]), -1)]
        if d.get("finishedAt") and d.get("updatedAt"):
            ends.append((when(d["finishedAt"]), when(d["updatedAt"]) - when(d["finishedAt"])))
            # Split at the Releasing event (the RayJob's DELETE accepted, its finalizer holding
            # it): before it, forge serve archives and deletes; after it, the operator removes
            # its finalizer and the RayJob's watch tells forge serve it is gone.
            try:
                evs = json.load(open(os.path.join(work, name + ".detail", i + ".events.json")))
                rel = [e for e in evs.get("items", []) if e.get("reason") == "Releasing"]
            except (OSError, ValueError, AttributeError):
                rel = []
            if rel:
                at = when(rel[0]["firstAt"])
                split.setdefault("serve", []).append(at - when(d["finishedAt"]))
                split.setdefault("operator", []).append(when(d["updatedAt"]) - at)
    # The operator's part split at the RayJob's DELETED event (the bench's own watch).
    gone = {}
    try:
        for line in open(os.path.join(work, "rayjobs.watch")):
            t, typ, jid, _ = line.split()
            if typ == "DELETED":
                gone[jid] = float(t)
    except OSError:
        pass
    for i in ids:
        try:
            d = json.load(open(os.path.join(work, name + ".detail", i + ".json")))
            evs = json.load(open(os.path.join(work, name + ".detail", i + ".events.json")))
        except (OSError, ValueError):
            continue
        rel = [e for e in evs.get("items", []) if e.get("reason") == "Releasing"]
        if rel and i in gone and d.get("updatedAt"):
            split.setdefault("finalizer", []).append(gone[i] - when(rel[0]["firstAt"]))
            split.setdefault("noticed", []).append(when(d["updatedAt"]) - gone[i])
    if ends:
        spent["finished→released"] = [r for _, r in ends]
    p["spent"], p["split"], p["ends"] = spent, split, ends
    # The most jobs in Running at one time (an end sorts before a start at the same instant).
    p["running_peak"], level = 0, 0
    for _, step in sorted(running):
        level += step
        p["running_peak"] = max(p["running_peak"], level)
    # The archive (<storage root>/jobs/<id>/logs): which files each job got, and how long after the
    # RayJob's end (status.endTime) rayjob.json was written. ray-job.log comes from the Ray head:
    # archived after the operator deleted the cluster (FORGE_KUBERAY_TTL_SECONDS), it is missing.
    files, lag = {}, []
    for i in ids:
        logs = os.path.join(work, "pv", "starforge", "data", "jobs", i, "logs")
        for f in ARCHIVE:
            if os.path.isfile(os.path.join(logs, f)) and os.path.getsize(os.path.join(logs, f)) > 0:
                files[f] = files.get(f, 0) + 1
        try:
            end = json.load(open(os.path.join(logs, "rayjob.json")))["status"]["endTime"]
            lag.append(os.path.getmtime(os.path.join(logs, "rayjob.json")) - when(end))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    p["files"], p["lag"] = files, sorted(lag)
    ph[name] = p
one, many, ref = ph["one"], ph["many"], ph.get("ref")
# Per job = per job submitted (a failed `forge submit` made no job and cost the fleet nothing).
m = many["ids"] or n
# Phase 1's jobs ran one after another: its column is one job's share (k jobs' sums / k).
base_n = one["ids"] or 1
def per_base(x):
    return x / base_n

print()
print("kuberay fleet at scale: N=%d (phase 1: %d jobs one at a time, per job; phase 2: %d jobs at"
      " once), kubesim --pods %s" % (n, base_n, n, pods))
print("load average at the end: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
print()
print("%-44s %12s %12s %12s %8s" % ("", "1 job (mean)", "%d jobs" % n, "per job", "ratio"))
def row(label, a, b, per=True, fmt="%12.1f"):
    pj = b / m if per else b
    ratio = (pj / a) if a else float("nan")
    print("%-44s %s %s %s %8.2f" % (label, fmt % a, fmt % b, fmt % pj, ratio))
def plain(label, a, b, fmt="%12.1f"):
    print("%-44s %s %s" % (label, fmt % a, fmt % b))
print("%-44s %12s %12s" % ("jobs Succeeded / submitted", "%d/%d" % (one["succeeded"], one["ids"]),
                              "%d/%d" % (many["succeeded"], many["ids"])))
row("wall time, submit to all released (s)", per_base(one["wall"]), many["wall"])
print("%-44s %12d %12d" % ("jobs running at once, peak", one["running_peak"], many["running_peak"]))
plain("  of which submitting (s)", per_base(one["submit"]), many["submit"])
if one["lat"] and many["lat"]:
    mid = many["lat"][len(many["lat"]) // 2]
    plain("job createdAt→finishedAt, median (s)", one["lat"][0], mid)
    plain("job createdAt→finishedAt, max (s)", one["lat"][-1], many["lat"][-1])
order = ["Queued", "Packaging", "Submitting", "Pending", "Running", "finished→released"]
for k in order + sorted((set(one["spent"]) | set(many["spent"])) - set(order)):
    a, b = one["spent"].get(k), many["spent"].get(k)
    if a or b:
        print("%-44s %12s %12s   (%d jobs: max %.1f)" % ("  time in %s, mean (s)" % k,
              "%.1f" % (sum(a) / len(a)) if a else "-", "%.1f" % (sum(b) / len(b)) if b else "-",
              len(b or []), max(b) if b else 0))
def pct(v, q):
    return v[min(len(v) - 1, int(q * len(v)))]
# The release time's spread, to compare one N with another ("no job slower to release than at
# N = 40" is read across runs: p50 / p99 / max of each).
rel_a = sorted(one["spent"].get("finished→released") or [])
rel_b = sorted(many["spent"].get("finished→released") or [])
if rel_a and rel_b:
    plain("finished→released, p50 (s)", pct(rel_a, 0.5), pct(rel_b, 0.5))
    plain("finished→released, p99 (s)", pct(rel_a, 0.99), pct(rel_b, 0.99))
    plain("finished→released, max (s)", rel_a[-1], rel_b[-1])
# The split at the Releasing event: forge serve archives and deletes (finished → DELETE
# accepted), then the operator removes its finalizer and the watch shows the RayJob gone.
for k, label in (("serve", "forge serve: →DELETE accepted"), ("operator", "operator: →RayJob gone"),
                 ("finalizer", "  the operator's own: →DELETED"),
                 ("noticed", "  forge serve noticing: →written")):
    a, b = sorted(one["split"].get(k) or []), sorted(many["split"].get(k) or [])
    if a and b:
        print("%-44s %12s %12s" % ("  %s, p50/p99/max" % label,
              "%.1f/%.1f/%.1f" % (pct(a, 0.5), pct(a, 0.99), a[-1]),
              "%.1f/%.1f/%.1f" % (pct(b, 0.5), pct(b, 0.99), b[-1])))
# The release against the rate of releases: per 10 s of phase 2's job ends, how many ended and
# the slowest release among them (a release waits on the API server and a CPU, so many at once
# queue; a cost growing with N would show at any rate).
if many["ends"]:
    t0 = min(t for t, _ in many["ends"])
    buckets = {}
    for t, r in many["ends"]:
        buckets.setdefault(int((t - t0) // 10), []).append(r)
    print("%-44s %s" % ("releases per 10 s of job ends: count/max (s)",
          " ".join("%d/%.2f" % (len(buckets[k]), max(buckets[k])) for k in sorted(buckets))))
# The reference phase (REF_N jobs at once, same run): the release goal compares with it.
ref_rel = sorted((ref or {}).get("spent", {}).get("finished→released") or [])
if ref_rel:
    print("%-44s %12s %12s" % ("finished→released at %d jobs ×%d, p50/p99/max" % (ref_n, ref_rounds), "",
          "%.1f/%.1f/%.1f" % (pct(ref_rel, 0.5), pct(ref_rel, 0.99), ref_rel[-1])))
    print("%-44s %12s %12d" % ("jobs running at once at %d jobs, peak" % ref_n, "",
          ref["running_peak"]))
    for k, label in (("serve", "forge serve"), ("operator", "operator"), ("finalizer", "  …DELETED"),
                     ("noticed", "  …noticed")):
        r = sorted(ref["split"].get(k) or [])
        if r:
            print("%-44s %12s %12s" % ("  %s part at %d jobs, p50/p99/max" % (label, ref_n), "",
                  "%.1f/%.1f/%.1f" % (pct(r, 0.5), pct(r, 0.99), r[-1])))
if one["lag"] and many["lag"]:
    plain("RayJob endTime → archived, median (s)", one["lag"][len(one["lag"]) // 2],
          many["lag"][len(many["lag"]) // 2])
    plain("RayJob endTime → archived, p99 (s)", pct(one["lag"], 0.99), pct(many["lag"], 0.99))
    plain("RayJob endTime → archived, max (s)", one["lag"][-1], many["lag"][-1])
def drops(name):
    try:
        return int(read(name + ".after.drops")) - int(read(name + ".before.drops"))
    except (OSError, ValueError):
        return -1
print("%-44s %12d %12d   (machine-wide; each costs a 1 s SYN retry)" % (
      "SYNs dropped at full listen queues", drops("one"), drops("many")))
def operator_requests(name, verb=None, part="controllers"):
    # kubesim's RayJob controller's requests in the phase (what its reconciles cost the API);
    # part "conflicts": those answered 409; "reconciles": its reconciles.
    try:
        a, b = (json.load(open(os.path.join(work, "%s.%s.controllers.json" % (name, w))))
                [part] for w in ("before", "after"))
    except (OSError, ValueError, KeyError):
        return float("nan")
    if part == "reconciles":
        return b.get("rayjob-controller", 0) - a.get("rayjob-controller", 0)
    a, b = a.get("rayjob-controller", {}), b.get("rayjob-controller", {})
    return sum(n - a.get(k, 0) for k, n in b.items() if verb is None or k == verb)
def reconciles(name):
    try:
        return float(read(name + ".after.reconciles")) - float(read(name + ".before.reconciles"))
    except (OSError, ValueError):
        return float("nan")
plain("forge serve reconciles (looks) per job", reconciles("one") / base_n, reconciles("many") / m)
plain("kubesim RayJob controller requests per job", operator_requests("one") / base_n,
      operator_requests("many") / m)
plain("  of which update rayjobs/status", operator_requests("one", "update rayjobs/status") / base_n,
      operator_requests("many", "update rayjobs/status") / m)
plain("  of which answered 409 Conflict", operator_requests("one", None, "conflicts") / base_n,
      operator_requests("many", None, "conflicts") / m)
plain("kubesim RayJob controller reconciles per job",
      operator_requests("one", None, "reconciles") / base_n,
      operator_requests("many", None, "reconciles") / m)
print("%-44s %12s %12s" % ("archived (driver/ray-job/submitter/events/rj)",
      "/".join(str(one["files"].get(f, 0)) for f in ARCHIVE),
      "/".join(str(many["files"].get(f, 0)) for f in ARCHIVE)))
row("API requests but list/watch", per_base(sum(one["other"].values())), sum(many["other"].values()),
    fmt="%12.2f")
plain("list/watch requests (shared)", sum(one["lw"].values()), sum(many["lw"].values()), "%12d")
plain("list/watch requests per minute", sum(one["lw"].values()) * 60 / one["wall"],
      sum(many["lw"].values()) * 60 / many["wall"])
for who, label in (("serve", "forge serve"), ("kubesim", "kubesim")):
    row(label + " CPU (s)", per_base(one["after"][who]["cpu"] - one["before"][who]["cpu"]),
        many["after"][who]["cpu"] - many["before"][who]["cpu"], fmt="%12.2f")
    plain(label + " peak RSS, VmHWM (MiB)", one["after"][who]["hwm"], many["after"][who]["hwm"], "%12.0f")
    plain(label + " RSS after the phase (MiB)", one["after"][who]["rss"], many["after"][who]["rss"], "%12.0f")
fin, idle_before = stats("final"), stats("idle.before")
print("%-44s %12d %12d   (after the idle time: %d)" % ("forge serve threads after the phase",
      one["after"]["serve"]["threads"], many["after"]["serve"]["threads"], fin["serve"]["threads"]))
print("%-44s %12d %12d   (after the idle time: %d)" % ("forge serve open fds after the phase",
      one["after"]["serve"]["fds"], many["after"]["serve"]["fds"], fin["serve"]["fds"]))
print()
print("forge serve's API requests by verb and resource (kubesim /kubesim/requests):")
print("%-36s %8s %8s %10s %8s" % ("", "%d jobs" % base_n, "%d jobs" % n, "per job", "ratio"))
keys = sorted(set(one["all"]) | set(many["all"]),
              key=lambda k: (k.split(" ", 1)[0] in ("list", "watch"), k.split(" ", 1)[1], k))
for k in keys:
    a, b = one["all"].get(k, 0), many["all"].get(k, 0)
    shared = k.split(" ", 1)[0] in ("list", "watch")
    pj = "" if shared else "%10.2f" % (b / m)
    ratio = "" if shared or not a else "%8.2f" % (b / m / per_base(a))
    print("%-36s %8d %8d %10s %8s%s" % (k, a, b, pj, ratio, "  (shared)" if shared else ""))
idle_r = json.load(open(os.path.join(work, "idle.requests.json")))
print()
for name, p in (("phase 1", one), ("%d jobs" % n, many)):
    short = [f for f in EXPECTED if p["files"].get(f, 0) < p["ids"]]
    if short:
        print("WARNING (%s): archived for only %s of %d jobs: %s%s" % (
            name, "/".join(str(p["files"].get(f, 0)) for f in short), p["ids"], ", ".join(short),
            " (Ray's log is read from the head: the operator deletes the RayCluster"
            " FORGE_KUBERAY_TTL_SECONDS after the RayJob ends; see 'RayJob endTime → archived')"
            if "ray-job.log" in short else ""))
print("idle %d s after the jobs: %d requests (%s); forge serve CPU %.1f s, RSS %.0f MiB at the end" % (
      idle, idle_r["total"], ", ".join("%s %d" % kv for kv in sorted(idle_r["requests"].items())) or "none",
      fin["serve"]["cpu"] - idle_before["serve"]["cpu"], fin["serve"]["rss"]))

# The goals (docs/kuberay-fleet.md, "Scale"): a report; the exit status is about correctness.
def cpu(p):
    return p["after"]["serve"]["cpu"] - p["before"]["serve"]["cpu"]
cpu_ratio = (cpu(many) / m) / per_base(cpu(one)) if cpu(one) else float("nan")
req_per_job = sum(many["other"].values()) / m
p99 = many["lag"][min(len(many["lag"]) - 1, int(0.99 * len(many["lag"])))] if many["lag"] else float("nan")
rss = max(many["after"]["serve"]["hwm"], fin["serve"]["hwm"]) * 1024 * 1024 / 1e6
# "No job slower to release than at N = 40": phase 2's slowest finished → released against the
# slowest of the reference phase's rounds of REF_N jobs at once (same run; none when N <= REF_N),
# as many releases in each (REF_ROUNDS): a maximum over more samples is larger by chance alone.
release_goal = []
if ref_rel and rel_b:
    # The medians and the share within the reference's slowest tell a shifted tail from a
    # shifted whole.
    within = sum(1 for x in rel_b if x <= ref_rel[-1]) / len(rel_b)
    release_goal = [(rel_b[-1] <= ref_rel[-1],
                     "slowest release %.2f s at %d jobs, %.2f s at %d (%d releases in %d round(s);"
                     " goal: no slower than at %d; p99 %.2f s against %.2f s, median %.2f s"
                     " against %.2f s; %.1f %% within the reference's slowest)"
                     % (rel_b[-1], n, ref_rel[-1], ref_n, len(ref_rel), ref_rounds, ref_n,
                        pct(rel_b, 0.99), pct(ref_rel, 0.99), pct(rel_b, 0.5), pct(ref_rel, 0.5),
                        100 * within))]
print()
for ok, text in release_goal + [
        (cpu_ratio <= 1.2, "forge serve CPU per job %.2f× the single job's (goal ≤ 1.2×)" % cpu_ratio),
        (req_per_job <= 4, "%.2f API requests per job but list/watch (goal ≤ 4)" % req_per_job),
        (p99 <= 5, "RayJob end → archived p99 %.1f s (goal ≤ 5 s)" % p99),
        (rss <= 200, "forge serve peak RSS %.0f MB (goal ≤ 200 MB at 1,000 jobs, release)" % rss)]:
    print("GOAL %-8s %s" % ("met:" if ok else "NOT MET:", text))
EOF

bad=false
for phase in warm one ref many; do
  [[ -s "$work/$phase.left" ]] && bad=true
  [[ -s "$work/$phase.not-succeeded" ]] && bad=true
done
$ok || bad=true
if $bad; then
  say "FAIL: see above; work dir kept: $work (serve.log, kubesim.log, not-succeeded/, *.left)"
  exit 1
fi
say "ok: every job Succeeded and nothing was left"
