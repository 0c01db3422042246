#!/usr/bin/env bash
# A local Kubernetes cluster for StarForge's kuberay fleet, for people with Docker, kind, Helm and
# kubectl (Linux: the host must reach containers on Docker's `kind` network by IP).
#
#   NOT RUN BY ITS AUTHORS: it was written where there is no Docker, from the kind, Helm, KubeRay
#   and Kubernetes documentation, and checked with `bash -n` and shellcheck only. If a step fails
#   for you, the message says which one; please report it.
#
# What it creates (idempotent: running it again reuses what exists):
#   - kind cluster NAME (one node, which kind leaves schedulable), with STORAGE_DIR on the host
#     mounted into the node at /starforge-storage;
#   - the KubeRay operator (Helm chart kuberay/kuberay-operator, default 1.7.0; 1.4 or newer) in
#     namespace kuberay-system;
#   - node label starforge/gpu-series=SERIES, and GPUS fake nvidia.com/gpu advertised on the node
#     (extended resource in its status) so the capacity page has GPUs to count; pods
#     request no GPUs (FORGE_K8S_GPU_PASSTHROUGH=0);
#   - namespace starforge, deploy/namespace.yaml and deploy/rbac.yaml (ServiceAccount forge);
#   - an RWO PersistentVolume (hostPath /starforge-storage) and PVC starforge-storage, so files
#     the Ray pods write appear under STORAGE_DIR (FORGE_K8S_STORAGE_SHARED=false: one machine
#     per job);
#   - unless FORGE_S3_ENDPOINT is already set: a MinIO container on Docker's `kind` network and a
#     bucket, reachable from the host and from pods at the container's IP (presigned URLs must
#     work from both);
#   - NAME.env under the state directory: the FORGE_* settings for running `forge serve` on the
#     host as the ServiceAccount forge (a 24 h token), mode 0600 since it holds secrets.
#
# Usage:
#   scripts/e2e/setup-kind.sh [--name NAME] [--series SERIES] [--gpus N] [--kuberay-version V]
#                             [--storage-dir DIR] [--ray-image IMAGE] [--delete]
#   source ~/.local/state/starforge-kind/starforge.env && forge serve
#   # or, to check the cluster end to end first (its own forge serve; scenarios 1-5 of
#   # scripts/e2e/kuberay_loop.py):
#   source ~/.local/state/starforge-kind/starforge.env &&
#     uv run python scripts/e2e/kuberay_loop.py --kubeconfig ~/.kube/config   # from the repository root
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)

name=starforge
series=h200
gpus=8
kuberay_version=1.7.0
ray_image=""
delete=false
state_dir="${XDG_STATE_HOME:-$HOME/.local/state}/starforge-kind"
storage_dir=""
minio_image=${MINIO_IMAGE:-minio/minio:latest}
mc_image=${MC_IMAGE:-minio/mc:latest}

say() { printf 'setup-kind: %s\n' "$*" >&2; }
die() {
  printf 'setup-kind: %s\n' "$*" >&2
  exit 1
}
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
  exit "${1:-0}"
}

while (($#)); do
  case "$1" in
    --name) name=${2:?--name needs a value}; shift 2 ;;
    --series) series=${2:?--series needs a value}; shift 2 ;;
    --gpus) gpus=${2:?--gpus needs a value}; shift 2 ;;
    --kuberay-version) kuberay_version=${2:?--kuberay-version needs a value}; shift 2 ;;
    --storage-dir) storage_dir=${2:?--storage-dir needs a value}; shift 2 ;;
    --ray-image) ray_image=${2:?--ray-image needs a value}; shift 2 ;;
    --delete) delete=true; shift ;;
    -h | --help) usage 0 ;;
    *) say "unknown argument: $1"; usage 2 ;;
  esac
done

[[ $name =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "--name: expected a DNS label, got \"$name\""
[[ $series =~ ^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$ ]] ||
  die "--series: expected a label value such as h200, got \"$series\""
[[ $gpus =~ ^[0-9]+$ ]] || die "--gpus: expected a number, got \"$gpus\""
[[ $kuberay_version =~ ^([0-9]+)\.([0-9]+)\.[0-9]+$ ]] ||
  die "--kuberay-version: expected MAJOR.MINOR.PATCH, got \"$kuberay_version\""
if ((BASH_REMATCH[1] < 1 || (BASH_REMATCH[1] == 1 && BASH_REMATCH[2] < 4))); then
  die "--kuberay-version: StarForge needs KubeRay 1.4 or newer, got $kuberay_version"
fi
storage_dir=${storage_dir:-$state_dir/$name-storage}
context="kind-$name"
minio="$name-minio"
pv="$name-starforge-storage"
env_file="$state_dir/$name.env"
namespace=starforge
label_key=starforge/gpu-series

for tool in docker kind helm kubectl curl; do
  command -v "$tool" >/dev/null || die "$tool is not installed (needed: docker, kind, helm, kubectl, curl)"
done
docker info >/dev/null 2>&1 || die "cannot talk to Docker (is the daemon running, may you use it?)"

k() { kubectl --context "$context" "$@"; }

if [[ $delete == true ]]; then
  say "deleting kind cluster $name and container $minio (kept: $storage_dir, $env_file)"
  kind delete cluster --name "$name"
  docker rm -f "$minio" >/dev/null 2>&1 || true
  exit 0
fi

mkdir -p "$state_dir" "$storage_dir"
chmod 700 "$state_dir"
# Ray's images run as uid 1000; `forge serve` runs as you. Both write under the storage root.
chmod 0777 "$storage_dir"
storage_dir=$(cd "$storage_dir" && pwd)
if [[ $(id -u) != 1000 ]]; then
  say "note: you are uid $(id -u) and Ray pods run as uid 1000; if a job cannot write its logs," \
    "make $storage_dir group-writable for both or run forge serve as uid 1000"
fi

# --- 1. the cluster ---
if kind get clusters 2>/dev/null | grep -qx "$name"; then
  say "kind cluster $name exists: reusing it (its storage mount cannot change; --delete to start over)"
else
  say "creating kind cluster $name (storage $storage_dir → /starforge-storage in the node)"
  kind create cluster --name "$name" --wait 120s --config - <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
    extraMounts:
      - hostPath: $storage_dir
        containerPath: /starforge-storage
EOF
fi
node=$(k get nodes -o jsonpath='{.items[0].metadata.name}')
[[ -n $node ]] || die "the cluster has no node"

# --- 2. the GPU series label and fake GPUs (extended resource advertised in the node status) ---
say "labelling node $node $label_key=$series and advertising $gpus nvidia.com/gpu"
k label node "$node" --overwrite "$label_key=$series" >/dev/null
k patch node "$node" --subresource=status --type=json \
  -p "[{\"op\":\"add\",\"path\":\"/status/capacity/nvidia.com~1gpu\",\"value\":\"$gpus\"}]" >/dev/null

# --- 3. the KubeRay operator ---
say "installing the KubeRay operator $kuberay_version (Helm chart kuberay/kuberay-operator)"
helm repo add kuberay https://ray-project.github.io/kuberay-helm/ --force-update >/dev/null
helm repo update kuberay >/dev/null
helm upgrade --install kuberay-operator kuberay/kuberay-operator \
  --version "$kuberay_version" --namespace kuberay-system --create-namespace \
  --kube-context "$context" --wait --timeout 5m >/dev/null
k wait --for=condition=Established --timeout=60s crd/rayjobs.ray.io crd/rayclusters.ray.io >/dev/null

# --- 4. namespace and RBAC (what forge serve may do), as deploy/ defines them ---
say "applying deploy/namespace.yaml and deploy/rbac.yaml"
k apply -f "$repo/deploy/namespace.yaml" -f "$repo/deploy/rbac.yaml" >/dev/null

# --- 5. the RWO storage volume: a hostPath PV on the node's mount of $storage_dir ---
say "creating PV $pv and PVC $namespace/starforge-storage (ReadWriteOnce)"
k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolume
metadata:
  name: $pv
  labels:
    app.kubernetes.io/name: starforge
spec:
  capacity:
    storage: 10Gi
  accessModes: ["ReadWriteOnce"]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  claimRef:
    namespace: $namespace
    name: starforge-storage
  hostPath:
    path: /starforge-storage
    type: Directory
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: starforge-storage
  namespace: $namespace
  labels:
    app.kubernetes.io/name: starforge
spec:
  accessModes: ["ReadWriteOnce"]
  storageClassName: ""
  volumeName: $pv
  resources:
    requests:
      storage: 10Gi
EOF

# --- 6. object storage for capsules ---
s3_endpoint=${FORGE_S3_ENDPOINT:-}
s3_bucket=${FORGE_S3_BUCKET:-starforge}
s3_access=${FORGE_S3_ACCESS_KEY:-}
s3_secret=${FORGE_S3_SECRET_KEY:-}
if [[ -z $s3_endpoint ]]; then
  secrets_file="$state_dir/$name-minio.secret"
  if [[ ! -s $secrets_file ]]; then
    (umask 077 && printf 'starforge\n%s\n' "$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')" \
      >"$secrets_file")
  fi
  s3_access=$(sed -n 1p "$secrets_file")
  s3_secret=$(sed -n 2p "$secrets_file")
  if ! docker inspect "$minio" >/dev/null 2>&1; then
    say "starting MinIO ($minio_image) as container $minio on Docker network kind"
    docker run -d --name "$minio" --network kind --restart unless-stopped \
      -e MINIO_ROOT_USER="$s3_access" -e MINIO_ROOT_PASSWORD="$s3_secret" \
      "$minio_image" server /data >/dev/null
  fi
  docker start "$minio" >/dev/null
  minio_ip=$(docker inspect -f '{{with index .NetworkSettings.Networks "kind"}}{{.IPAddress}}{{end}}' "$minio")
  [[ -n $minio_ip ]] || die "container $minio has no address on Docker network kind"
  s3_endpoint="http://$minio_ip:9000"
  for _ in $(seq 60); do
    curl -fsS -o /dev/null "$s3_endpoint/minio/health/live" 2>/dev/null && break
    sleep 1
  done
  curl -fsS -o /dev/null "$s3_endpoint/minio/health/live" ||
    die "MinIO does not answer at $s3_endpoint from this host (Docker Desktop cannot route to" \
      "container IPs: set FORGE_S3_* to an object store both the host and the pods reach)"
  docker run --rm --network kind -e MC_HOST_local="http://$s3_access:$s3_secret@$minio:9000" \
    "$mc_image" mb --ignore-existing "local/$s3_bucket" >/dev/null
else
  [[ -n $s3_access && -n $s3_secret ]] ||
    die "FORGE_S3_ENDPOINT is set: also set FORGE_S3_ACCESS_KEY and FORGE_S3_SECRET_KEY"
  say "using your object store $s3_endpoint (bucket $s3_bucket); pods must reach it too"
fi

# --- 7. optional: preload the training image so that jobs do not wait for the pull ---
if [[ -n $ray_image ]]; then
  say "loading $ray_image into the cluster"
  docker image inspect "$ray_image" >/dev/null 2>&1 || docker pull "$ray_image"
  kind load docker-image --name "$name" "$ray_image"
fi

# --- 8. credentials of ServiceAccount forge, and the settings ---
server=$(kubectl config view --raw -o jsonpath="{.clusters[?(@.name==\"$context\")].cluster.server}")
[[ -n $server ]] || die "no cluster $context in your kubeconfig"
kubectl config view --raw \
  -o jsonpath="{.clusters[?(@.name==\"$context\")].cluster.certificate-authority-data}" |
  base64 -d >"$state_dir/$name-ca.crt"
token=$(k -n "$namespace" create token forge --duration=24h)

(
  umask 077
  cat >"$env_file" <<EOF
# StarForge on kind cluster $name (scripts/e2e/setup-kind.sh). Secrets: keep this file private.
# The token expires 24 h after $(date -u +%Y-%m-%dT%H:%M:%SZ); run setup-kind.sh again for a new one.
export FORGE_DEFAULT_FLEET_KIND=kuberay
export FORGE_K8S_API_SERVER='$server'
export FORGE_K8S_CA_FILE='$state_dir/$name-ca.crt'
export FORGE_K8S_TOKEN='$token'
export FORGE_K8S_NAMESPACE=$namespace
export FORGE_K8S_GPU_NODE_LABEL=$label_key
export FORGE_K8S_GPU_PASSTHROUGH=0
export FORGE_K8S_STORAGE_PVC=starforge-storage
export FORGE_K8S_STORAGE_SHARED=false
export FORGE_K8S_STORAGE_MOUNT=/starforge
export FORGE_STORAGE_ROOT='$storage_dir'
export FORGE_S3_ENDPOINT='$s3_endpoint'
export FORGE_S3_BUCKET='$s3_bucket'
export FORGE_S3_ACCESS_KEY='$s3_access'
export FORGE_S3_SECRET_KEY='$s3_secret'
EOF
)

say "done. Settings (secrets only in the file):"
grep -v -e TOKEN -e ACCESS_KEY -e SECRET_KEY -e '^#' "$env_file" >&2
cat >&2 <<EOF
setup-kind: next:
  source '$env_file'
  export FORGE_KUBERAY_RAY_VERSION=<the Ray version of your jobs' image, e.g. of rayproject/ray:<version>>
  forge serve        # or: uv run python scripts/e2e/kuberay_loop.py --kubeconfig ~/.kube/config
Jobs must use gpuSeries: $series, at most $gpus GPUs per machine and one machine in all
(the storage volume is ReadWriteOnce). Remove everything with: $0 --name $name --delete
EOF
