#!/usr/bin/env bash
# Crash safety of the control plane: `forge serve` is killed with SIGKILL at several points of a
# job's life (the controller's failpoints, STARFORGE_FAILPOINT), restarted, and every job must
# finish exactly once (its entrypoint ran once), Succeeded, with its log and its cleanup done.
#   crash_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
forge="$build/bin/forge"

work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export HOME="$work/home" FORGE_STORAGE_ROOT="$work/root" FORGE_LISTEN="127.0.0.1:$port"
export FORGE_SERVER="http://127.0.0.1:$port"
unset XDG_CONFIG_HOME
mkdir -p "$HOME"
server_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill -KILL "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  echo "--- server log:" >&2
  tail -n 40 "$work/serve.log" >&2 || true
  exit 1
}

start_server() {  # [failpoint]
  STARFORGE_FAILPOINT="${1:-}" "$forge" serve --resync-ms 200 >>"$work/serve.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 300); do
    curl -fsS -o /dev/null "$FORGE_SERVER/readyz" 2>/dev/null && return 0
    kill -0 "$server_pid" 2>/dev/null || fail "forge serve exited while starting"
    sleep 0.1
  done
  fail "forge serve not ready in 30 s"
}

export FORGE_TOKEN
FORGE_TOKEN=$("$forge" token create --user admin --admin)

# The job appends one line per execution to a file in its job directory, so a second execution
# (a job started twice after a crash) is visible.
code="$work/code"
mkdir -p "$code"
cat >"$code/job.py" <<'EOF'
import os, time
with open(os.path.join(os.environ["FORGE_JOB_DIR"], "runs"), "a") as f:
    f.write("run\n")
for i in range(4):
    print(f"tick {i}", flush=True)
    time.sleep(0.5)
print("done", flush=True)
EOF
cat >"$work/job.yaml" <<'EOF'
name: crashy
fleet: local
image: python:3.11-slim
entrypoint: python3 job.py
pools:
  - name: main
EOF

for point in packaging-built capsule-stored submitted running-observed terminal-recorded logs-archived; do
  start_server "$point"
  id=$("$forge" submit "$work/job.yaml" --code "$code" -o name) || fail "$point: submit failed"
  id=${id#job/}
  # The failpoint kills the server with SIGKILL when the job reaches it.
  for _ in $(seq 1 300); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$server_pid" 2>/dev/null && fail "$point: the job never reached the failpoint in 30 s"
  status=0
  wait "$server_pid" || status=$?
  [[ $status -eq 137 ]] || fail "$point: the server was not killed at the failpoint (status $status)"
  server_pid=""

  start_server
  phase=""
  for _ in $(seq 1 300); do
    json=$("$forge" get job "$id" -o json)
    phase=$(printf '%s' "$json" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["phase"] if j["cleanup"]["released"] else "")')
    [[ -n "$phase" ]] && break
    sleep 0.1
  done
  [[ "$phase" == "Succeeded" ]] || fail "$point: job $id ended '$phase' after the restart"
  runs=$(wc -l <"$FORGE_STORAGE_ROOT/jobs/$id/runs")
  [[ "$runs" -eq 1 ]] || fail "$point: the entrypoint ran $runs times"
  "$forge" logs "$id" | grep -q '^done$' || fail "$point: the log lacks the job's output"
  n=$("$forge" get job "$id" -o json | python3 -c 'import json,sys; print(sum(1 for t in json.load(sys.stdin)["timeline"] if t["to"] == "Succeeded"))')
  [[ "$n" -eq 1 ]] || fail "$point: Succeeded recorded $n times"
  kill -TERM "$server_pid"
  wait "$server_pid" || true
  server_pid=""
  echo "ok: killed at $point, restarted, $id Succeeded once"
done
