#!/usr/bin/env bash
# ruff (ruff.toml; the sdk venv of scripts/bootstrap) passes on every Python file of the tree, and
# fails, naming the rule, on a file with an unused import and an ambiguous name.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
ruff="${RUFF:-$root/build/tools/sdk-venv/bin/ruff}"
[[ -x "$ruff" ]] || { echo "$ruff is missing: run scripts/bootstrap (scripts/python-sdk-requirements.txt)" >&2; exit 1; }
"$ruff" --version

cd "$root"
"$ruff" check --no-cache .

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
printf 'import os\n\n\ndef f(l):\n    return l\n' >"$tmp/probe.py"
if out="$("$ruff" check --no-cache --config "$root/ruff.toml" --output-format concise "$tmp/probe.py" 2>&1)"; then
  echo "FAIL: ruff passed a file with an unused import:"; echo "$out"; exit 1
fi
grep -q 'probe.py:1:8: F401' <<<"$out" || { echo "FAIL: F401 not reported:"; echo "$out"; exit 1; }
grep -q 'probe.py:4:7: E741' <<<"$out" || { echo "FAIL: E741 not reported:"; echo "$out"; exit 1; }
echo "ok"
