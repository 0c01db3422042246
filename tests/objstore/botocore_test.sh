#!/usr/bin/env bash
# botocore — the core of AWS's Python SDK (pinned in scripts/ray-requirements.txt, installed in
# build/tools/ray-venv by scripts/bootstrap) — as a second reference for StarForge's S3 client,
# against s3sigpeer, which verifies every signature (docs/object-storage.md):
#   - for keys that need encoding, objects `forge storage put` wrote are read by botocore, and
#     objects botocore wrote are read by `forge storage get` (both sides signed and checked);
#   - `forge storage presign --now T` gives the same URL as botocore's generate_presigned_url at
#     the same instant, and that URL is fetched with Python's urllib (the capsule's init
#     container) and with requests (what Ray's runtime-env agent downloads an https working_dir
#     with, through smart_open).
#
#   tests/objstore/botocore_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
py="$repo/build/tools/ray-venv/bin/python"
sig="$repo/build/tools/bin/s3sigpeer"
fail() { echo "botocore_test: FAIL: $*" >&2; exit 1; }
[[ -x "$py" ]] && "$py" -c 'import botocore, requests' 2>/dev/null ||
  fail "$py with botocore is missing: run scripts/bootstrap (it installs scripts/ray-requirements.txt there)"
[[ -x "$sig" ]] || fail "$sig is missing: run scripts/bootstrap (tools/s3peer/build)"

work=$(mktemp -d "${TMPDIR:-/tmp}/botocore_test-XXXXXX")
peer=""
cleanup() {
  [[ -n "$peer" ]] && kill -TERM "$peer" 2>/dev/null && wait "$peer" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

export FORGE_S3_ACCESS_KEY=AKIASTARFORGEBOTO001 FORGE_S3_SECRET_KEY="boto/Secret+Key=0123456789"
export FORGE_S3_BUCKET=forge-test FORGE_S3_REGION=eu-central-1
"$sig" --port-file "$work/port" --bucket "$FORGE_S3_BUCKET" --region "$FORGE_S3_REGION" \
  --access-key "$FORGE_S3_ACCESS_KEY" --secret-key "$FORGE_S3_SECRET_KEY" 2>"$work/peer.log" &
peer=$!
for _ in $(seq 1 300); do [[ -s "$work/port" ]] && break; sleep 0.1; done
[[ -s "$work/port" ]] || fail "s3sigpeer did not start: $(cat "$work/peer.log")"
FORGE_S3_ENDPOINT="http://127.0.0.1:$(cat "$work/port")"
export FORGE_S3_ENDPOINT

"$py" - "$build/bin/forge" "$work" <<'PY'
import datetime, os, subprocess, sys, urllib.parse, urllib.request
from unittest import mock

import botocore.auth, botocore.session, requests
from botocore.config import Config

forge, work = sys.argv[1], sys.argv[2]
env = os.environ
bucket = env["FORGE_S3_BUCKET"]
client = botocore.session.get_session().create_client(
    "s3", endpoint_url=env["FORGE_S3_ENDPOINT"], region_name=env["FORGE_S3_REGION"],
    aws_access_key_id=env["FORGE_S3_ACCESS_KEY"], aws_secret_access_key=env["FORGE_S3_SECRET_KEY"],
    config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))

def forge_cli(*args):
    r = subprocess.run([forge, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("forge %s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr.strip()))
    return r.stdout

keys = ["capsules/sha256-0123456789abcdef.zip", "dir/a b$c=d&e+f~g,h;i@j.txt",
        "\u1234/\u00fc name (1).zip", "quote'bang!star*.zip", "percent%20literal.zip"]
# Signed 100 s ago (still valid for 500 s): botocore's clock is pinned to the same instant, and
# a pin that did not take would show as another X-Amz-Date.
now = (datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0, tzinfo=None)
       - datetime.timedelta(seconds=100))
for i, key in enumerate(keys):
    data = os.urandom(3000) + key.encode()
    path = os.path.join(work, "obj%d" % i)
    open(path, "wb").write(data)
    forge_cli("storage", "put", path, key)
    got = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert got == data, "botocore read other bytes than forge wrote under %r" % key
    client.put_object(Bucket=bucket, Key=key + ".boto", Body=data)
    forge_cli("storage", "get", key + ".boto", path + ".back")
    assert open(path + ".back", "rb").read() == data, "forge read other bytes than botocore wrote"

    ours = forge_cli("storage", "presign", key, "--expires", "600",
                     "--now", now.strftime("%Y%m%dT%H%M%SZ")).strip()
    with mock.patch.object(botocore.auth, "get_current_datetime", return_value=now):
        theirs = client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key},
                                               ExpiresIn=600)
    o, t = urllib.parse.urlsplit(ours), urllib.parse.urlsplit(theirs)
    assert o.path == t.path, "paths differ for %r: %s vs botocore's %s" % (key, o.path, t.path)
    assert sorted(urllib.parse.parse_qsl(o.query)) == sorted(urllib.parse.parse_qsl(t.query)), \
        "presigned queries differ for %r:\n  forge:    %s\n  botocore: %s" % (key, o.query, t.query)
    with urllib.request.urlopen(ours, timeout=30) as r:
        assert r.read() == data, "urllib fetched other bytes for %r" % key
    r = requests.get(ours, timeout=30)
    assert r.status_code == 200 and r.content == data, "requests: HTTP %d for %r" % (r.status_code, key)
    print("ok %r: same presigned URL as botocore; read both ways" % key)
PY
echo "botocore_test: passed"
