#!/usr/bin/env bash
# The Helm chart (deploy/helm/starforge): `helm lint` passes; with default values `helm template`
# renders exactly the objects of deploy/*.yaml (the kustomize files: one source of truth, tested
# equal); values.yaml names every FORGE_* setting of forge serve (docs/settings.md); secrets come
# from Secrets and never sit in the rendered Deployment; a values mistake is refused with what to
# fix. With STARFORGE_KUBECONFIG set, the rendered chart is also applied with a server-side dry
# run (tests/e2e/real_doctor_test.sh does that on the real control plane).
#   tests/deploy/helm_test.sh BUILD_DIR
set -euo pipefail
# The build directory is only checked: helm comes from build/tools/bin (or HELM).
[[ -d "${1:?usage: helm_test.sh BUILD_DIR}" ]] || { echo "helm_test.sh: no directory $1" >&2; exit 1; }
src=$(cd "$(dirname "$0")/../.." && pwd)
# helm: scripts/bootstrap builds it into build/tools/bin (tools/k8s/build … helm@v3.19.5).
helm=${HELM:-$src/build/tools/bin/helm}
[[ -x $helm ]] || { echo "$helm is missing: run scripts/bootstrap (or set HELM)" >&2; exit 1; }
chart=$src/deploy/helm/starforge
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

echo "== helm lint"
"$helm" lint --strict "$chart"

echo "== helm template (defaults) equals deploy/*.yaml"
"$helm" template starforge "$chart" >"$tmp/chart.yaml"
python3 - "$tmp/chart.yaml" "$src/deploy" <<'PY'
import sys, os, yaml, json
chart_file, deploy = sys.argv[1], sys.argv[2]

def objects(texts):
    out = {}
    for text in texts:
        for doc in yaml.safe_load_all(text):
            if not doc:
                continue
            key = (doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"])
            assert key not in out, f"duplicate {key}"
            out[key] = normalize(doc)
    return out

def normalize(doc):
    # env order carries no meaning: compare by name.
    for c in doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
        c["env"] = sorted(c.get("env", []), key=lambda e: e["name"])
    return doc

chart = objects([open(chart_file).read()])
kustomize = yaml.safe_load(open(os.path.join(deploy, "kustomization.yaml")))
manifests = objects(open(os.path.join(deploy, f)).read() for f in kustomize["resources"])
for img in kustomize.get("images", []):  # the kustomization's image override, as kubectl -k applies it
    for (kind, ns, name), o in manifests.items():
        for c in o.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            if c["image"].split(":")[0] == img["name"]:
                c["image"] = img.get("newName", img["name"]) + ":" + img["newTag"]
bad = False
for key in sorted(set(chart) | set(manifests)):
    if key not in chart:
        print(f"only in deploy/: {key}"); bad = True
    elif key not in manifests:
        print(f"only in the chart: {key}"); bad = True
    elif chart[key] != manifests[key]:
        print(f"differs: {key}\n chart:  {json.dumps(chart[key], sort_keys=True)}\n deploy: {json.dumps(manifests[key], sort_keys=True)}"); bad = True
sys.exit(1 if bad else 0)
PY

echo "== values.yaml names every FORGE_* setting of forge serve"
python3 - "$chart/values.yaml" "$src/docs/settings.md" <<'PY'
import sys, re, yaml
values = yaml.safe_load(open(sys.argv[1]))
documented = set(re.findall(r"^\| `(FORGE_[A-Z0-9_]+)` \|", open(sys.argv[2]).read(), re.M))
# Client-only settings, the namespace (a top-level value) and secrets (from Secrets) are elsewhere.
elsewhere = {"FORGE_SERVER", "FORGE_TOKEN", "FORGE_K8S_NAMESPACE", "FORGE_K8S_TOKEN",
             "FORGE_S3_ACCESS_KEY", "FORGE_S3_SECRET_KEY"}
missing = documented - elsewhere - set(values["settings"])
unknown = set(values["settings"]) - documented
if missing or unknown:
    sys.exit(f"values.yaml settings: missing {sorted(missing)}, unknown {sorted(unknown)}")
PY

echo "== secrets only through Secrets; values are passed through"
"$helm" template starforge "$chart" --set s3.create=true --set s3.accessKey=AKIAHELMTEST \
  --set s3.secretKey=helm-s3cret --set settings.FORGE_K8S_CORPUS_PVC=corpus \
  --set k8sTokenSecret.name=remote --set k8sTokenSecret.key=token \
  --set namespace=ml --set createNamespace=false >"$tmp/custom.yaml"
python3 - "$tmp/custom.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
assert ("Secret", "forge-s3") in kinds, kinds
assert not any(d["kind"] == "Namespace" for d in docs)
dep = next(d for d in docs if d["kind"] == "Deployment")
assert dep["metadata"]["namespace"] == "ml"
env = {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
assert env["FORGE_K8S_CORPUS_PVC"]["value"] == "corpus"
assert env["FORGE_K8S_NAMESPACE"]["value"] == "ml"
assert env["FORGE_K8S_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "remote", "key": "token"}
dep_text = yaml.safe_dump(dep)
assert "helm-s3cret" not in dep_text and "AKIAHELMTEST" not in dep_text, "a key in the Deployment"
rb = next(d for d in docs if d["kind"] == "RoleBinding")
assert rb["subjects"][0]["namespace"] == "ml"
PY
if "$helm" template starforge "$chart" --set s3.create=true >"$tmp/err.yaml" 2>"$tmp/err.txt"; then
  fail "s3.create without keys was accepted"
fi
grep -q "s3.accessKey is required" "$tmp/err.txt" || fail "unclear error: $(cat "$tmp/err.txt")"

if [[ -n ${STARFORGE_KUBECONFIG:-} ]]; then
  echo "== kubectl apply --dry-run=server (the real API server)"
  kubectl=${KUBECTL:-$src/build/tools/bin/kubectl}
  "$kubectl" --kubeconfig "$STARFORGE_KUBECONFIG" apply --dry-run=server -f "$tmp/chart.yaml"
fi
echo "PASS"
