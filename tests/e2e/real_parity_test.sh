#!/usr/bin/env bash
# kubesim held to kube-apiserver: the same requests, made with the real kubectl v1.32, against
# the real control plane (tools/k8s/controlplane: kube-apiserver, kube-controller-manager,
# kube-scheduler v1.32) and against kubesim (its API server and scheduler), print the same
# answers. Each block is one of the differences listed in docs/kubesim.md ("Differences found"):
#   protobuf   kubectl create namespace|configmap|secret|serviceaccount|service: kubectl sends these as
#              application/vnd.kubernetes.protobuf; the objects read back as created;
#   probes     a pod's probes get timeoutSeconds/periodSeconds/successThreshold/failureThreshold
#              and httpGet's path and scheme;
#   token      the ServiceAccount admission's kube-api-access-<5> projected volume and its mounts
#              (none with automountServiceAccountToken: false, on the pod or its account);
#   claims     a pod whose claim is missing or unbound is Unschedulable with kube-scheduler's
#              words (one Node, created by hand: no kubelet is needed for this).
# The two transcripts must be identical (random names normalised); the diff is the failure.
#   real_parity_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: real_parity_test.sh BUILD_DIR}" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/e2e/lib.sh
source "$repo/scripts/e2e/lib.sh"
e2e_init real_parity
work=$E2E_WORK
tools="$repo/build/tools/bin"
for bin in "$tools/hyperkube" "$tools/kubectl" "$build/bin/kubesim"; do
  [[ -x "$bin" ]] || e2e_fail "$bin is missing: run scripts/bootstrap"
done

# transcript KUBECONFIG OUT: the requests, and what each answers, one line per fact (a refused
# request is an answer too: no errexit here).
transcript() {
  local kc=$1 out=$2
  set +e
  k() { "$tools/kubectl" --kubeconfig "$kc" --request-timeout=20s "$@"; }
  jp() { k -n parity get "$1" "$2" -o jsonpath="$3"; }
  # until_set KIND NAME JSONPATH: waits (30 s) until the path prints something, then prints it.
  until_set() {
    local v="" _
    for _ in $(seq 150); do
      v=$(jp "$1" "$2" "$3" 2>/dev/null || true)
      [[ -n $v ]] && break
      sleep 0.2
    done
    printf '%s' "$v"
  }
  {
    echo "== protobuf"
    k create namespace parity 2>&1
    # The default ServiceAccount appears moments after the namespace on the real one.
    until_set sa default '{.metadata.name}' >/dev/null
    printf 'bin\0ary\xff' >"$work/blob"
    k -n parity create configmap cm --from-literal=greeting=hello --from-file=blob="$work/blob" 2>&1
    k -n parity create secret generic creds --from-literal=token=s3cr3t 2>&1
    k -n parity create secret generic typed --type=example.com/x --from-literal=a=b 2>&1
    k -n parity create serviceaccount quiet 2>&1
    k -n parity create service clusterip web --tcp=80:8080 --tcp=8265:dashboard 2>&1
    k -n parity create service clusterip headless --clusterip=None --tcp=6379 2>&1
    echo "ns: $(k get ns parity -o jsonpath='{.metadata.labels}/{.spec.finalizers}/{.status.phase}')"
    echo "cm: $(jp cm cm '{.data}/{.binaryData}/{.immutable}')"
    echo "secret: $(jp secret creds '{.type}/{.data}')"
    echo "typed secret: $(jp secret typed '{.type}/{.data}')"
    echo "sa: $(jp sa quiet '{.metadata.name}/{.automountServiceAccountToken}')"
    # (the allocated cluster IP differs: only its presence is compared)
    echo "service: $(jp svc web '{.spec.ports}/{.spec.selector}/{.spec.type}/{.spec.sessionAffinity}/{.spec.ipFamilies}/{.spec.ipFamilyPolicy}/{.spec.internalTrafficPolicy}/{.status}')"
    echo "service ip: $(jp svc web '{.spec.clusterIP}' | sed -E 's/^10\.96\.[0-9]+\.[0-9]+$/10.96.x.y/')"
    echo "headless: $(jp svc headless '{.spec.clusterIPs}/{.spec.ports}/{.spec.ipFamilyPolicy}')"

    echo "== probes"
    k -n parity apply -f - 2>&1 <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: probed}
spec:
  automountServiceAccountToken: false
  containers:
  - name: main
    image: busybox:1.36
    readinessProbe: {httpGet: {port: 8265}}
    livenessProbe: {exec: {command: ["true"]}, initialDelaySeconds: 30, periodSeconds: 5}
    startupProbe: {tcpSocket: {port: 6379}, failureThreshold: 30}
EOF
    for p in readinessProbe livenessProbe startupProbe; do
      echo "$p: $(jp pod probed "{.spec.containers[0].$p}")"
    done

    echo "== token"
    k -n parity patch sa quiet -p '{"automountServiceAccountToken": false}' 2>&1
    k -n parity apply -f - 2>&1 <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: mounted}
spec:
  initContainers: [{name: init, image: busybox:1.36}]
  containers:
  - name: main
    image: busybox:1.36
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes: [{name: scratch, emptyDir: {}}]
---
apiVersion: v1
kind: Pod
metadata: {name: quiet-by-account}
spec:
  serviceAccountName: quiet
  containers: [{name: main, image: busybox:1.36}]
---
apiVersion: v1
kind: Pod
metadata: {name: loud-by-pod}
spec:
  serviceAccountName: quiet
  automountServiceAccountToken: true
  containers: [{name: main, image: busybox:1.36}]
EOF
    echo "volumes: $(jp pod mounted '{.spec.volumes}')"
    echo "main mounts: $(jp pod mounted '{.spec.containers[0].volumeMounts}')"
    echo "init mounts: $(jp pod mounted '{.spec.initContainers[0].volumeMounts}')"
    echo "quiet-by-account: $(jp pod quiet-by-account '{.spec.volumes}{.spec.containers[0].volumeMounts}')"
    echo "loud-by-pod: $(jp pod loud-by-pod '{.spec.volumes[*].name}')"

    echo "== claims"
    k apply -f - 2>&1 <<'EOF'
apiVersion: v1
kind: Node
metadata: {name: parity-node, labels: {kubernetes.io/hostname: parity-node}}
EOF
    k -n parity apply -f - 2>&1 <<'EOF'
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: unbound}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: on-unbound}
spec:
  automountServiceAccountToken: false
  containers: [{name: main, image: busybox:1.36}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: unbound}}]
---
apiVersion: v1
kind: Pod
metadata: {name: on-missing}
spec:
  automountServiceAccountToken: false
  containers: [{name: main, image: busybox:1.36}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: absent}}]
EOF
    for pod in on-unbound on-missing; do
      cond="{.status.conditions[?(@.type==\"PodScheduled\")]"
      until_set pod "$pod" "$cond.message}" >/dev/null
      echo "$pod: $(jp pod "$pod" "$cond.status}/$cond.reason}/$cond.message}")"
    done
  } >"$out"
  set -e
}

started=$SECONDS
e2e_start_controlplane "$repo" "$tools/hyperkube"
e2e_say "control plane ready in $((SECONDS - started))s"
e2e_start_kubesim "$build/bin/kubesim" --controllers scheduler
e2e_write_kubeconfig "$work/kubesim.kubeconfig" "$E2E_K8S"

transcript "$work/cp/kubeconfig" "$work/real.txt"
transcript "$work/kubesim.kubeconfig" "$work/kubesim.txt"
# The admission plugin's random volume names.
sed -i -E 's/kube-api-access-[a-z0-9]{5}/kube-api-access-RAND/g' "$work/real.txt" "$work/kubesim.txt"
cat "$work/real.txt" >&2
if ! diff -u --label kube-apiserver --label kubesim "$work/real.txt" "$work/kubesim.txt" >&2; then
  e2e_fail "kubesim answered differently from kube-apiserver (diff above: - real, + kubesim)"
fi
# The transcript says something: each block ran to its end.
grep -q '^on-missing: False/Unschedulable/0/1 nodes are available: persistentvolumeclaim "absent" not found' \
  "$work/real.txt" || e2e_fail "the real scheduler's answer was not read (transcript above)"
e2e_say "PASS: kubesim and kube-apiserver answered the same ($((SECONDS - started))s)"
