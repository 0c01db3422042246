#!/usr/bin/env bash
# The real kubectl against kubesim where kubesim once differed from kube-apiserver 1.32 (the
# "Differences found" list of docs/kubesim.md): what kube-apiserver fills in on create is there,
# and what kubectl derives from it works.
#   job:        `kubectl logs job/<name>` reads the Job's pod, not another pod of the namespace
#               (it follows spec.selector, which kube-apiserver generates);
#   pod:        the defaulted spec and status.qosClass, as `kubectl get -o jsonpath` shows them;
#   service:    clusterIP(s), IP families, policies, port protocol/targetPort;
#   namespace:  `kubectl get sa` / the default ServiceAccount and kube-root-ca.crt in every
#               namespace, new ones included;
#   protobuf:   kubectl create namespace|configmap|secret|serviceaccount|service (protobuf bodies).
# Usage: kubectl_defaults.sh KUBESIM_BIN [KUBECTL_BIN]
set -euo pipefail
KUBESIM=${1:?kubesim binary}
KUBECTL=${2:-kubectl}
command -v "$KUBECTL" >/dev/null ||
  { echo "FAIL: kubectl not found ($KUBECTL); scripts/bootstrap builds it" >&2; exit 1; }
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=$HERE/testdata
WORK=$(mktemp -d)
SIM_PID=""
cleanup() {
  if [[ -n $SIM_PID ]]; then kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=lib.sh
source "$HERE/lib.sh"
expect_eq() { # got want what
  [[ $1 == "$2" ]] || fail "$3: expected [$2], got [$1]"
}

# The API server and the Job controller only: no scheduler or kubelet, so every pod stays as the
# test writes it.
start_kubesim_http --controllers jobs
k() { "$KUBECTL" --request-timeout=20s "$@"; }
jp() { k get "$1" "$2" -o jsonpath="$3"; }

# --- job: kubectl logs job/<name> -------------------------------------------------------------
# A Ray head pod, Running and Ready on a node: the pod kubectl picks first when a Job has no
# selector (it sorts the most active pod first).
k apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: rayjob-sample-raycluster-head-x7k2p
  labels: {ray.io/node-type: head, ray.io/cluster: rayjob-sample-raycluster}
spec:
  containers: [{name: ray-head, image: rayproject/ray:2.46.0}]
EOF
curl -sS -f -o /dev/null -X PATCH -H 'Content-Type: application/merge-patch+json' \
  "$BASE/api/v1/namespaces/default/pods/rayjob-sample-raycluster-head-x7k2p/status" \
  -d '{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}'
curl -sS -f -o /dev/null -X PUT --data-binary $'head pod log\n' \
  "$BASE/kubesim/logs/default/rayjob-sample-raycluster-head-x7k2p"
# A submitter Job as KubeRay writes it (its own labels, no selector); the Job controller makes
# its pod, which stays Pending here.
k apply -f - >/dev/null <<'EOF'
apiVersion: batch/v1
kind: Job
metadata:
  name: rayjob-sample
  labels: {ray.io/originated-from-crd: RayJob, ray.io/originated-from-cr-name: rayjob-sample}
spec:
  backoffLimit: 2
  template:
    metadata:
      labels: {ray.io/originated-from-crd: RayJob, ray.io/originated-from-cr-name: rayjob-sample}
    spec:
      restartPolicy: Never
      containers: [{name: ray-job-submitter, image: rayproject/ray:2.46.0}]
EOF
uid=$(jp job rayjob-sample '{.metadata.uid}')
expect_eq "$(jp job rayjob-sample '{.spec.selector.matchLabels.batch\.kubernetes\.io/controller-uid}')" \
  "$uid" "Job spec.selector"
expect_eq "$(jp job rayjob-sample '{.spec.template.metadata.labels}')" \
  "{\"batch.kubernetes.io/controller-uid\":\"$uid\",\"batch.kubernetes.io/job-name\":\"rayjob-sample\",\"controller-uid\":\"$uid\",\"job-name\":\"rayjob-sample\",\"ray.io/originated-from-cr-name\":\"rayjob-sample\",\"ray.io/originated-from-crd\":\"RayJob\"}" \
  "Job template labels"
# The Job's own labels are KubeRay's: kube-apiserver copies the template's only to a Job without.
expect_eq "$(jp job rayjob-sample '{.metadata.labels}')" \
  '{"ray.io/originated-from-cr-name":"rayjob-sample","ray.io/originated-from-crd":"RayJob"}' \
  "Job labels (set by the client)"
expect_eq "$(jp job rayjob-sample '{.spec.completions}/{.spec.parallelism}/{.spec.completionMode}/{.spec.suspend}/{.spec.manualSelector}/{.spec.podReplacementPolicy}')" \
  "1/1/NonIndexed/false/false/TerminatingOrFailed" "Job spec defaults"
pod=""
for _ in $(seq 200); do
  pod=$(k get pods -l "batch.kubernetes.io/controller-uid=$uid" -o jsonpath='{.items[0].metadata.name}' 2>/dev/null || true)
  [[ -n $pod ]] && break
  sleep 0.05
done
[[ -n $pod ]] || fail "the Job controller made no pod: $(cat "$WORK/kubesim.log")"
curl -sS -f -o /dev/null -X PUT --data-binary $'submitter log\n' "$BASE/kubesim/logs/default/$pod"
out=$(k logs job/rayjob-sample 2>&1) || fail "kubectl logs job/rayjob-sample: $out"
expect_eq "$out" "submitter log" "kubectl logs job/rayjob-sample"
# A Job without labels takes its template's, generated ones included (kubectl create job's shape).
k apply -f - >/dev/null <<'EOF'
apiVersion: batch/v1
kind: Job
metadata: {name: plain}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox:1.36}]
EOF
uid=$(jp job plain '{.metadata.uid}')
expect_eq "$(jp job plain '{.metadata.labels}')" \
  "{\"batch.kubernetes.io/controller-uid\":\"$uid\",\"batch.kubernetes.io/job-name\":\"plain\",\"controller-uid\":\"$uid\",\"job-name\":\"plain\"}" \
  "labels of a Job created without any"
echo "job: ok"

# --- pod: defaulting, admission and qosClass -----------------------------------------------------
k apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: head}
spec:
  containers:
  - name: ray-head
    image: rayproject/ray:2.46.0
    ports: [{containerPort: 6379, name: gcs-server}]
    env: [{name: RAY_CLOUD_INSTANCE_ID, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
    resources: {limits: {cpu: "1", memory: 2G}, requests: {cpu: "1", memory: 2G}}
  - name: sidecar
    image: busybox
    resources: {limits: {cpu: 500m, memory: 64Mi}}
EOF
c0='{.spec.containers[0]'
expect_eq "$(jp pod head "$c0.imagePullPolicy}/$c0.terminationMessagePath}/$c0.terminationMessagePolicy}/$c0.ports[0].protocol}/$c0.env[0].valueFrom.fieldRef.apiVersion}")" \
  "IfNotPresent//dev/termination-log/File/TCP/v1" "container defaults"
# No tag: ":latest", pulled Always; requests default to the limits.
expect_eq "$(jp pod head '{.spec.containers[1].imagePullPolicy}/{.spec.containers[1].resources.requests.cpu}/{.spec.containers[1].resources.requests.memory}')" \
  "Always/500m/64Mi" "untagged image, requests from limits"
expect_eq "$(jp pod head '{.spec.dnsPolicy}/{.spec.enableServiceLinks}/{.spec.priority}/{.spec.preemptionPolicy}/{.spec.securityContext}/{.spec.serviceAccountName}/{.spec.serviceAccount}/{.spec.restartPolicy}/{.spec.schedulerName}/{.spec.terminationGracePeriodSeconds}')" \
  "ClusterFirst/true/0/PreemptLowerPriority/{}/default/default/Always/default-scheduler/30" \
  "pod spec defaults"
expect_eq "$(jp pod head '{range .spec.tolerations[*]}{.key}:{.operator}:{.effect}:{.tolerationSeconds};{end}')" \
  "node.kubernetes.io/not-ready:Exists:NoExecute:300;node.kubernetes.io/unreachable:Exists:NoExecute:300;" \
  "DefaultTolerationSeconds"
expect_eq "$(jp pod head '{.status.phase}/{.status.qosClass}')" "Pending/Guaranteed" "Guaranteed pod"
# The kubelet's status writes leave qosClass out; it stays.
curl -sS -f -o /dev/null -X PUT -H 'Content-Type: application/json' \
  "$BASE/api/v1/namespaces/default/pods/head/status" \
  -d "$(k get pod head -o json | python3 -c 'import json,sys; p=json.load(sys.stdin); p["status"]={"phase":"Running"}; print(json.dumps(p))')"
expect_eq "$(jp pod head '{.status.phase}/{.status.qosClass}')" "Running/Guaranteed" "qosClass after a status write"
k apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: burstable}
spec:
  containers: [{name: main, image: busybox:1.36, resources: {requests: {cpu: 100m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: besteffort}
spec:
  containers: [{name: main, image: busybox:1.36}]
EOF
expect_eq "$(jp pod burstable '{.status.qosClass}')/$(jp pod besteffort '{.status.qosClass}')" \
  "Burstable/BestEffort" "Burstable and BestEffort pods"
echo "pod: ok"

# --- service: cluster IPs, families, policies, ports ---------------------------------------------
k apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Service
metadata: {name: dashboard}
spec:
  selector: {app: ray}
  ports: [{name: dashboard, port: 8265}]
---
apiVersion: v1
kind: Service
metadata: {name: rayjob-sample-raycluster-head-svc}
spec:
  clusterIP: None
  selector: {ray.io/node-type: head}
  ports: [{name: gcs-server, port: 6379, targetPort: 6379, appProtocol: tcp}]
EOF
ip=$(jp svc dashboard '{.spec.clusterIP}')
[[ $ip =~ ^10\.96\.[0-9]+\.[0-9]+$ ]] || fail "clusterIP allocated from 10.96.0.0/16: got [$ip]"
expect_eq "$(jp svc dashboard '{.spec.clusterIPs}/{.spec.ipFamilies}/{.spec.ipFamilyPolicy}/{.spec.internalTrafficPolicy}/{.spec.sessionAffinity}/{.spec.ports[0].protocol}/{.spec.ports[0].targetPort}/{.status}')" \
  "[\"$ip\"]/[\"IPv4\"]/SingleStack/Cluster/None/TCP/8265/{\"loadBalancer\":{}}" "service defaults"
expect_eq "$(jp svc rayjob-sample-raycluster-head-svc '{.spec.clusterIPs}/{.spec.ipFamilies}/{.spec.ipFamilyPolicy}/{.spec.type}')" \
  '["None"]/["IPv4"]/SingleStack/ClusterIP' "headless service defaults"
# An update that leaves the allocated fields out (as KubeRay's service update does) keeps them.
k get svc dashboard -o json | python3 -c '
import json, sys
s = json.load(sys.stdin)
for f in ("clusterIPs", "ipFamilies", "ipFamilyPolicy"):
    del s["spec"][f]
s["spec"]["ports"][0]["port"] = 8266
del s["spec"]["ports"][0]["targetPort"]
print(json.dumps(s))' | k replace -f - >/dev/null
expect_eq "$(jp svc dashboard '{.spec.clusterIPs}/{.spec.ipFamilies}/{.spec.ipFamilyPolicy}/{.spec.ports[0].targetPort}')" \
  "[\"$ip\"]/[\"IPv4\"]/SingleStack/8266" "service after an update"
echo "service: ok"

# --- namespaces: default ServiceAccount and kube-root-ca.crt -----------------------------------
out=$(k get sa 2>&1) || fail "kubectl get sa: $out"
[[ $out == *"default   0 "* ]] || fail "kubectl get sa: expected the default account, got: $out"
k apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
EOF
expect_eq "$(jp ns team-a '{.metadata.labels}/{.spec.finalizers}/{.status.phase}')" \
  '{"kubernetes.io/metadata.name":"team-a"}/["kubernetes"]/Active' "namespace defaults"
expect_eq "$(k get sa -n team-a -o jsonpath='{.items[*].metadata.name}')" "default" "accounts of a new namespace"
expect_eq "$(k get cm -n team-a -o jsonpath='{.items[*].metadata.name}')" "kube-root-ca.crt" "configmaps of a new namespace"
expect_eq "$(k get cm -n kube-system kube-root-ca.crt -o jsonpath='{.metadata.name}')" "kube-root-ca.crt" "kube-root-ca.crt in kube-system"
# Deleted, both come back (kube-controller-manager's service-account controller and root-CA
# publisher recreate them).
uids=$(k get sa,cm -n team-a -o jsonpath='{.items[*].metadata.uid}')
k delete sa default -n team-a >/dev/null
k delete cm --all -n team-a >/dev/null
expect_eq "$(k get sa,cm -n team-a -o jsonpath='{.items[*].metadata.name}')" "default kube-root-ca.crt" \
  "default account and kube-root-ca.crt after deletion"
[[ $(k get sa,cm -n team-a -o jsonpath='{.items[*].metadata.uid}') != "$uids" ]] ||
  fail "deleted objects were not recreated (same uids)"
# A pod naming an account that does not exist is refused, as the ServiceAccount plugin does.
robot_pod() {
  cat <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: robot}
spec:
  serviceAccountName: robot
  containers: [{name: main, image: busybox:1.36}]
EOF
}
if out=$(robot_pod | k apply -n team-a -f - 2>&1); then
  fail "a pod with a missing ServiceAccount was admitted: $out"
fi
[[ $out == *'pods "robot" is forbidden: error looking up service account team-a/robot: serviceaccount "robot" not found'* ]] ||
  fail "missing ServiceAccount: got: $out"
k create serviceaccount -n team-a robot --dry-run=client -o yaml | k apply -f - >/dev/null
robot_pod | k apply -n team-a -f - >/dev/null
expect_eq "$(k get pod -n team-a robot -o jsonpath='{.spec.serviceAccount}')" "robot" "pod with its own account"
echo "namespace: ok"

# --- protobuf: what kubectl sends for built-in kinds it creates from flags ----------------------
out=$(k create namespace pb 2>&1) || fail "kubectl create namespace: $out"
printf 'bin\0ary\xff' >"$WORK/blob"
k -n pb create configmap cm --from-literal=greeting=hello --from-file=blob="$WORK/blob" >/dev/null
k -n pb create secret generic creds --from-literal=token=s3cr3t >/dev/null
k -n pb create serviceaccount robot >/dev/null
expect_eq "$(jp ns pb '{.metadata.labels}/{.status.phase}')" '{"kubernetes.io/metadata.name":"pb"}/Active' \
  "namespace created from protobuf"
expect_eq "$(k -n pb get cm cm -o jsonpath='{.data}/{.binaryData}')" \
  '{"greeting":"hello"}/{"blob":"YmluAGFyef8="}' "configmap created from protobuf"
expect_eq "$(k -n pb get secret creds -o jsonpath='{.type}/{.data}')" 'Opaque/{"token":"czNjcjN0"}' \
  "secret created from protobuf"
expect_eq "$(k -n pb get sa robot -o jsonpath='{.metadata.name}')" robot "serviceaccount created from protobuf"
k -n pb create service clusterip web --tcp=80:8080 >/dev/null
expect_eq "$(k -n pb get svc web -o jsonpath='{.spec.ports}/{.spec.selector}/{.spec.type}')" \
  '[{"name":"80-8080","port":80,"protocol":"TCP","targetPort":8080}]/{"app":"web"}/ClusterIP' \
  "service created from protobuf"
# A kind outside kubesim's protobuf subset: a 415 that says what to do instead. (`kubectl run`
# sends its Pod as JSON.)
if out=$(k -n pb create job j --image=busybox:1.36 2>&1); then fail "kubectl create job was decoded: $out"; fi
[[ $out == *"kind Job (batch/v1) has no message"*"send the object as JSON"* ]] || fail "kubectl create job: got: $out"
k -n pb run web --image=busybox:1.36 >/dev/null
echo "protobuf: ok"
echo "PASS"
