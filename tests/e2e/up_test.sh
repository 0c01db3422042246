#!/usr/bin/env bash
# scripts/up end to end, as a new user runs it (minus the bootstrap: STARFORGE_BUILD_DIR points at
# the build under test): the server starts on the embedded default, the example job runs to
# Succeeded with its loss falling and a checkpoint in its job directory, the server keeps
# serving, and a second run reuses the same storage root. Then the CLI habits on that server.
#   up_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
forge="$build/bin/forge"

work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export HOME="$work/home" XDG_CONFIG_HOME="" FORGE_STORAGE_ROOT="$work/root"
export FORGE_LISTEN="127.0.0.1:$port" STARFORGE_BUILD_DIR="$build"
unset FORGE_TOKEN FORGE_SERVER XDG_DATA_HOME
mkdir -p "$HOME"
cleanup() {
  if [[ -f "$FORGE_STORAGE_ROOT-state/serve.pid" ]]; then
    kill -TERM "$(cat "$FORGE_STORAGE_ROOT-state/serve.pid")" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  echo "--- server log:" >&2
  tail -n 40 "$FORGE_STORAGE_ROOT-state/serve.log" >&2 || true
  exit 1
}

# --- first run ---------------------------------------------------------------------------
"$repo/scripts/up" >"$work/out1" 2>"$work/err1" || fail "scripts/up exited $? ($(tail -n 5 "$work/err1"))"
grep -q '^step ' "$work/out1" || fail "no training steps in the followed log: $(head -c 400 "$work/out1")"
first=$(grep -m1 -o 'loss [0-9.]*' "$work/out1" | cut -d' ' -f2)
last=$(grep -o 'loss [0-9.]*' "$work/out1" | tail -n1 | cut -d' ' -f2)
python3 -c "import sys; sys.exit(0 if float('$last') < float('$first') / 2 else 1)" ||
  fail "the loss did not fall: first $first, last $last"
grep -q 'Succeeded' "$work/err1" || fail "no Succeeded in: $(tail -n 8 "$work/err1")"
token=$(sed -n 's/^Admin token: //p' "$work/out1" "$work/err1" | head -n1)
[[ "$token" == sf_* ]] || fail "no admin token printed"
curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null || fail "the server is not serving after scripts/up"
# It ends with the console's URL, which serves the console's page.
console_url=$(sed -n 's/^Console: //p' "$work/out1" | tail -n1)
[[ "$console_url" == "http://127.0.0.1:$port/" ]] || fail "scripts/up did not end with the console's URL ($console_url)"
curl -fsS "$console_url" | grep -q '<title>StarForge</title>' || fail "no console at $console_url"
[[ "$("$forge" console --server "http://127.0.0.1:$port" 2>/dev/null)" == "$console_url" ]] ||
  fail "forge console does not print $console_url"
# The token is shown to the user once at the end, never written to the server's log.
if grep -q "$token" "$FORGE_STORAGE_ROOT-state/serve.log"; then fail "the token is in serve.log"; fi
ls "$FORGE_STORAGE_ROOT"/jobs/*/checkpoints/* >/dev/null 2>&1 || fail "no checkpoint in the job directory"

# --- the CLI habits, with the login scripts/up saved ---------------------------------------
export FORGE_SERVER="http://127.0.0.1:$port"
id=$("$forge" get jobs -o name | head -n1)
id=${id#job/}
[[ "$id" == j-* ]] || fail "forge get jobs -o name gave '$id'"
"$forge" get jobs | grep -q "$id.*tiny-train.*Succeeded" || fail "forge get jobs does not list $id as Succeeded"
"$forge" describe job "$id" >"$work/describe" || fail "forge describe failed"
for want in "Phase:" "Succeeded" "Packaging" "Running" "Timeline" "Events"; do
  grep -q "$want" "$work/describe" || fail "describe lacks '$want': $(cat "$work/describe")"
done
"$forge" logs "$id" | grep -q '^step ' || fail "forge logs has no steps"
"$forge" get job "$id" -o json | python3 -c '
import json, sys
job = json.load(sys.stdin)
assert job["phase"] == "Succeeded", job["phase"]
assert job["cleanup"] == {"logsArchived": True, "released": True}, job["cleanup"]
assert job["capsule"]["sha256"], job
' || fail "forge get job -o json is not the finished job"

# --- second run: the same storage root, a restarted server, a second job ----------------------
"$repo/scripts/up" >"$work/out2" 2>"$work/err2" || fail "second scripts/up exited $? ($(tail -n 5 "$work/err2"))"
grep -q 'Succeeded' "$work/err2" || fail "second run: no Succeeded"
n=$("$forge" get jobs -o name | wc -l)
[[ "$n" -eq 2 ]] || fail "after two runs there are $n jobs, expected 2"
echo "ok: scripts/up twice, example Succeeded (loss $first -> $last), CLI get/describe/logs"
