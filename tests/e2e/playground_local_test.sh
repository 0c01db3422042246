#!/usr/bin/env bash
# Playgrounds on the local fleet: forge serve runs FORGE_LOCAL_VLLM_COMMAND as a
# sandboxed process on a loopback port. The command here is kubesim's vLLM emulator, installed in
# a prefix of its own (<prefix>/bin/vllm), as vLLM would be in a virtualenv.
#   the command missing → start refused naming FORGE_LOCAL_VLLM_COMMAND; installed (while forge
#   serve runs) → start → Pending → Ready; the CLI and the official openai client chat through
#   forge serve (streamed and not); the server sees the model read-only and not the state dir;
#   kill -9 of forge serve → adopted, still answers; stop kills it; a 60 s TTL kills another.
#   tests/e2e/playground_local_test.sh BUILD_DIR
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/e2e/lib.sh
source "$repo/scripts/e2e/lib.sh"
build=$(cd "${1:?usage: playground_local_test.sh BUILD_DIR}" && pwd)
forge="$build/bin/forge"
say() { e2e_say "$@"; }
fail() { e2e_fail "$@"; }
e2e_init playground_local
work=$E2E_WORK
chmod 755 "$work"  # the sandbox's uid (nobody, when this runs as root) reads the prefix below

prefix="$work/vllm-prefix"
export FORGE_STORAGE_ROOT="$work/storage" FORGE_STATE_DIR="$work/state"
export FORGE_DEFAULT_FLEET_KIND=local FORGE_LOCAL_VLLM_COMMAND="$prefix/bin/vllm"
export KUBESIM_VLLM_STARTUP_S=1

serve_pid=
start_serve() {
  local listen=127.0.0.1:0
  [[ -s "$work/forge.port" ]] && listen=127.0.0.1:$(cat "$work/forge.port")
  rm -f "$work/forge.port.new"
  "$forge" serve --listen "$listen" --port-file "$work/forge.port.new" --resync-ms 200 \
    >>"$work/serve.out" 2>>"$work/serve.log" &
  serve_pid=$!
  e2e_pids+=("$serve_pid")
  e2e_wait_file "$work/forge.port.new" 60 || fail "forge serve did not start: $(tail -n 3 "$work/serve.log")"
  mv "$work/forge.port.new" "$work/forge.port"
}
alice=$("$forge" token create --user alice 2>/dev/null)
bob=$("$forge" token create --user bob 2>/dev/null)
start_serve
grep -q "jobs run in a bubblewrap sandbox" "$work/serve.log" ||
  fail "no sandbox on this machine (local playgrounds need one): $(grep -i sandbox "$work/serve.log")"
FORGE_SERVER="http://127.0.0.1:$(cat "$work/forge.port")"
export FORGE_SERVER
as_alice() { FORGE_TOKEN=$alice "$forge" "$@"; }
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$1)"; }
pg_get() { curl -fsS -H "Authorization: Bearer $alice" "$FORGE_SERVER/api/v1/playgrounds/$1"; }
wait_state() {  # ID STATE SECONDS
  local s=""
  for _ in $(seq 1 $(($3 * 5))); do
    s=$(pg_get "$1" | field '["state"]')
    [[ "$s" == "$2" ]] && return 0
    sleep 0.2
  done
  as_alice playground describe "$1" >&2 || true
  fail "playground $1: state $s, expected $2"
}
server_of() {  # ID: pids of the processes that carry its marker
  grep -lz "^FORGE_PLAYGROUND_ID=$1\$" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true
}
wait_no_server() {  # ID
  for _ in $(seq 1 100); do
    [[ -z "$(server_of "$1")" ]] && return 0
    sleep 0.2
  done
  fail "the model server of $1 still runs: $(server_of "$1")"
}

# A job of alice's (a local one) and the checkpoint directory it wrote.
mkdir -p "$work/code"
echo 'print("trained")' >"$work/code/main.py"
printf 'name: tiny\nfleet: local\nimage: python:3.12\nentrypoint: python3 main.py\npools: [{name: main}]\n' >"$work/job.yaml"
job=$(as_alice submit "$work/job.yaml" --code "$work/code" -o name) || fail "submit failed"
job=${job#job/}
mkdir -p "$FORGE_STORAGE_ROOT/jobs/$job/ckpt/final"
echo weights >"$FORGE_STORAGE_ROOT/jobs/$job/ckpt/final/model.bin"
# Writable by anyone on the host: only the sandbox's read-only mount may stop the server.
chmod 777 "$FORGE_STORAGE_ROOT/jobs/$job/ckpt/final"
model="jobs/$job/ckpt/final"

# --- the command is not installed: refused, naming the setting ---------------------------------
if out=$(as_alice playground start --model "$model" --gpus 0 --ttl 5m 2>&1); then
  fail "a start without the command was accepted: $out"
fi
[[ "$out" == *FORGE_LOCAL_VLLM_COMMAND* && "$out" == *"not found"* ]] ||
  fail "the refusal does not name the setting: $out"
say "command missing → refused: ${out##*: }"

# --- installed while forge serve runs: the emulator in <prefix>/bin, its module in <prefix>/lib.
# The wrapper also tries what the sandbox must prevent, and says so in the server's log.
mkdir -p "$prefix/bin" "$prefix/lib"
cp "$repo/tools/kubesim/vllm/kubesim_vllm.py" "$prefix/lib/"
cat >"$prefix/bin/vllm" <<PY
#!/usr/bin/env python3
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), os.pardir, "lib"))
model = sys.argv[2]
try:
    open(os.path.join(model, "planted"), "w")
    print("SANDBOX: the model is writable", flush=True)
except OSError:
    print("sandbox: the model is read-only", flush=True)
print("sandbox: state dir visible" if os.path.exists("$FORGE_STATE_DIR") else
      "sandbox: no state dir", flush=True)
from kubesim_vllm import main
sys.exit(main(sys.argv[1:]))
PY
chmod 755 "$prefix/bin/vllm" "$prefix" "$prefix/bin" "$prefix/lib"
chmod 644 "$prefix/lib/kubesim_vllm.py"

t0=$(date +%s%N)
pg=$(as_alice playground start --model "$model" --gpus 0 --ttl 5m -o json | field '["id"]')
seen=""
for _ in $(seq 1 600); do
  s=$(pg_get "$pg" | field '["state"]')
  [[ "$seen" == *"$s"* ]] || seen="$seen $s"
  [[ "$s" == Ready || "$s" == Failed ]] && break
  sleep 0.1
done
t1=$(date +%s%N)
[[ "$s" == Ready ]] || { as_alice playground describe "$pg" >&2; fail "never Ready (seen:$seen)"; }
say "start → Ready in $(((t1 - t0) / 1000000)) ms (states seen:$seen)"
logs=$(as_alice playground logs "$pg")
[[ "$logs" == *"the model is read-only"* ]] || fail "the model was not read-only: $logs"
[[ "$logs" == *"no state dir"* ]] || fail "the server sees the state directory: $logs"
[[ ! -e "$FORGE_STORAGE_ROOT/jobs/$job/ckpt/final/planted" ]] || fail "the server wrote the model"
say "sandbox: model read-only, no state directory"

# --- its share of the machine: local jobs are not started onto the CPUs its server holds -----------
held() {  # the local fleet's playgrounds and CPUs in use, as "P C"
  curl -fsS -H "Authorization: Bearer $alice" "$FORGE_SERVER/api/v1/capacity" |
    python3 -c 'import json,sys; f=[c for c in json.load(sys.stdin)["fleets"] if c["fleet"]=="local"][0]; print(f.get("playgrounds"), f["cpusInUse"])'
}
read -r p c <<<"$(held)"
[[ "$p" == 1 && "$c" -ge 1 ]] || fail "the running server holds no share of the machine: playgrounds=$p cpusInUse=$c"
say "capacity: 1 playground holding $c CPU(s)"

# --- chat: the CLI streams; the openai client, streamed and not ---------------------------------
answer=$(as_alice playground chat "$pg" -m "hello local")
[[ "$answer" == *"You said: hello local"* ]] || fail "chat answered: $answer"
venv="$repo/build/tools/openai-venv/bin/python"
if [[ -x "$venv" ]]; then
  "$venv" - "$FORGE_SERVER/api/v1/playgrounds/$pg/openai/v1" "$alice" <<'PY' || fail "openai client"
import sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1], api_key=sys.argv[2])
assert [m.id for m in client.models.list()] == ["final"]
pieces = [c.choices[0].delta.content for c in client.chat.completions.create(
    model="final", messages=[{"role": "user", "content": "stream me"}], stream=True)
    if c.choices and c.choices[0].delta.content]
assert len(pieces) > 2 and "".join(pieces) == "You said: stream me", pieces
done = client.chat.completions.create(model="final", messages=[{"role": "user", "content": "once"}])
assert done.choices[0].message.content == "You said: once"
PY
  say "openai client: models, streamed and plain chat"
else
  say "no $venv (scripts/bootstrap installs it): the openai client check is skipped"
fi
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $bob" \
  "$FORGE_SERVER/api/v1/playgrounds/$pg/openai/v1/models")
[[ "$code" == 404 ]] || fail "bob's request: HTTP $code, expected 404"

# --- kill -9 of forge serve: the server lives on and is adopted -----------------------------------
kill -9 "$serve_pid"
wait "$serve_pid" 2>/dev/null || true
[[ -n "$(server_of "$pg")" ]] || fail "the model server died with forge serve"
start_serve
wait_state "$pg" Ready 30
as_alice playground chat "$pg" -m "still there" | grep -q "You said: still there" ||
  fail "no answer after the restart"
read -r p c <<<"$(held)"
[[ "$p" == 1 && "$c" -ge 1 ]] || fail "after the restart the server's share is not held: playgrounds=$p cpusInUse=$c"
say "forge serve killed and restarted: the server was adopted, its share held again"

# --- stop, then a TTL ------------------------------------------------------------------------------
short=$(as_alice playground start --model "$model" --gpus 0 --ttl 60s -o json | field '["id"]')
as_alice playground stop "$pg" | grep -q Stopped || fail "stop did not answer Stopped"
wait_no_server "$pg"
say "stop: the server is gone"
wait_state "$short" Ready 60
[[ -n "$(server_of "$short")" ]] || fail "no server process for $short"
wait_state "$short" Expired 120
wait_no_server "$short"
as_alice playground describe "$short" | grep -q TTLExpired || fail "no TTLExpired reason"
say "TTL: $short expired and its server is gone"
say "PASS"
