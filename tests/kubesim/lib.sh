# shellcheck shell=bash disable=SC2034  # SIM_PID and BASE are for the sourcing script
# Shared by the kubectl scripts of tests/kubesim (source it after setting KUBESIM, KUBECTL, WORK
# and DATA): `fail`, and `start_kubesim_http ARGS…`, which starts kubesim on an ephemeral port
# with the test nodes and ARGS, points a fresh $HOME and $KUBECONFIG at it, and sets SIM_PID and
# BASE (http://127.0.0.1:PORT). The caller's EXIT trap stops SIM_PID.

fail() { echo "FAIL: $*" >&2; exit 1; }

start_kubesim_http() {
  "$KUBESIM" --listen 127.0.0.1:0 --port-file "$WORK/port" --nodes "$DATA/nodes.yaml" "$@" \
    >"$WORK/kubesim.log" 2>&1 &
  SIM_PID=$!
  for _ in $(seq 600); do [[ -s $WORK/port ]] && break; sleep 0.05; done
  [[ -s $WORK/port ]] || fail "kubesim did not start: $(cat "$WORK/kubesim.log")"
  BASE=http://127.0.0.1:$(cat "$WORK/port")
  export HOME=$WORK/home KUBECONFIG=$WORK/kubeconfig
  mkdir -p "$HOME"
  cat >"$KUBECONFIG" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters: [{name: sim, cluster: {server: "$BASE"}}]
users: [{name: me, user: {}}]
contexts: [{name: sim, context: {cluster: sim, user: me, namespace: default}}]
current-context: sim
KUBECONFIG
}
