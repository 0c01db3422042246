# shellcheck shell=bash
# Sourced by the end-to-end tests (tests/e2e/*.sh) and benchmarks: background processes that die
# with the script, waiting for port files, and the simulated cluster (kubesim + s3peer) they share.
# The sourcing script sets E2E_NAME (its name in messages) and E2E_WORK (a directory it owns).

e2e_pids=()

# The real kubectl that scripts/bootstrap builds (tools/k8s) comes before any other on PATH, so
# that the loop's checks use the version the tests are written for.
e2e_tools_bin="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/tools/bin"
[[ -x "$e2e_tools_bin/kubectl" ]] && PATH="$e2e_tools_bin:$PATH"

e2e_say() { printf '%s: %s\n' "${E2E_NAME:-e2e}" "$*" >&2; }
e2e_fail() {
  e2e_say "FAIL: $*"
  exit 1
}

# Stops every process started through this file (TERM, then waits), then removes E2E_WORK unless
# KEEP=1. Installed as the EXIT trap by e2e_init.
e2e_cleanup() {
  local pid
  for pid in "${e2e_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${e2e_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ "${KEEP:-0}" == 1 ]]; then e2e_say "kept $E2E_WORK"; else rm -rf "$E2E_WORK"; fi
}

e2e_init() {  # NAME: creates E2E_WORK and installs the cleanup
  E2E_NAME=$1
  E2E_WORK=$(mktemp -d "${TMPDIR:-/tmp}/$1-XXXXXX")
  trap e2e_cleanup EXIT
}

e2e_wait_file() {  # FILE SECONDS: until FILE is non-empty
  local _
  for _ in $(seq 1 $(($2 * 10))); do
    [[ -s "$1" ]] && return 0
    sleep 0.1
  done
  return 1
}

# Starts kubesim with ARGS (plus --listen/--port-file) logging to E2E_WORK/kubesim.log; sets
# E2E_K8S to its URL (https when ARGS has --tls) and E2E_KUBESIM_PID.
e2e_start_kubesim() {  # KUBESIM_BIN ARGS...
  local bin=$1
  shift
  "$bin" --listen 127.0.0.1:0 --port-file "$E2E_WORK/kubesim.port" "$@" 2>"$E2E_WORK/kubesim.log" &
  E2E_KUBESIM_PID=$!
  e2e_pids+=("$E2E_KUBESIM_PID")
  e2e_wait_file "$E2E_WORK/kubesim.port" 30 || e2e_fail "kubesim did not start; see $E2E_WORK/kubesim.log"
  local scheme=http
  [[ " $* " == *" --tls "* ]] && scheme=https
  # shellcheck disable=SC2034  # for the sourcing script
  E2E_K8S="$scheme://127.0.0.1:$(cat "$E2E_WORK/kubesim.port")"
}

# Starts the S3 peer (s3rver, tools/s3peer) with bucket BUCKET on ADDRESS (default 127.0.0.1;
# pods in network namespaces reach the host at its bridge address); sets E2E_S3 to its endpoint.
e2e_start_s3peer() {  # REPO BUCKET [ADDRESS]
  local addr=${3:-127.0.0.1}
  node "$1/tools/s3peer/s3peer.js" --port-file "$E2E_WORK/s3.port" --bucket "$2" \
    --address "$addr" 2>"$E2E_WORK/s3.log" &
  e2e_pids+=($!)
  e2e_wait_file "$E2E_WORK/s3.port" 30 || e2e_fail "s3peer did not start; see $E2E_WORK/s3.log"
  # shellcheck disable=SC2034  # for the sourcing script
  E2E_S3="http://$addr:$(cat "$E2E_WORK/s3.port")"
}

# Starts the real control plane (tools/k8s/controlplane up E2E_WORK/cp --audit) with HYPERKUBE,
# logging to E2E_WORK/controlplane.log, and waits up to 180 s for it; sets E2E_CP_PID.
e2e_start_controlplane() {  # REPO HYPERKUBE
  "$1/tools/k8s/controlplane" up "$E2E_WORK/cp" --hyperkube "$2" --audit \
    2>"$E2E_WORK/controlplane.log" &
  E2E_CP_PID=$!
  e2e_pids+=("$E2E_CP_PID")
  local _
  for _ in $(seq 1 900); do
    [[ -s "$E2E_WORK/cp/ready" ]] && return 0
    kill -0 "$E2E_CP_PID" 2>/dev/null ||
      { cat "$E2E_WORK/controlplane.log" >&2; e2e_fail "the control plane did not start"; }
    sleep 0.2
  done
  cat "$E2E_WORK/controlplane.log" >&2
  e2e_fail "the control plane was not ready after 180 s"
}

# Writes a kubeconfig for SERVER to FILE: no user credentials unless TOKEN, CA file if given.
e2e_write_kubeconfig() {  # FILE SERVER [TOKEN [CA_FILE]]
  local user='{}'
  [[ -n "${3:-}" ]] && user="{token: \"$3\"}"
  local ca=""
  [[ -n "${4:-}" ]] && ca=", certificate-authority: \"$4\""
  (
    umask 077
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: sim, cluster: {server: "$2"$ca}}]
users: [{name: me, user: $user}]
contexts: [{name: sim, context: {cluster: sim, user: me}}]
current-context: sim
EOF
  )
}
