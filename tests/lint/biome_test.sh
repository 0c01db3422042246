#!/usr/bin/env bash
# Biome (web/biome.jsonc; a devDependency in web/package.json) passes on the console's TypeScript,
# and fails, naming the rules, on a file with `==` and `debugger`.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
biome="$root/web/node_modules/.bin/biome"
[[ -x "$biome" ]] || { echo "$biome is missing: run scripts/bootstrap (npm ci in web/)" >&2; exit 1; }
"$biome" --version

(cd "$root/web" && "$biome" lint --error-on-warnings .)

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src"
cp "$root/web/biome.jsonc" "$tmp/"
printf 'const x = Number("1");\nif (x == 2) {\n  debugger;\n}\n' >"$tmp/src/probe.ts"
if out="$(cd "$tmp" && "$biome" lint --error-on-warnings . 2>&1)"; then
  echo "FAIL: biome passed a file with == and debugger:"; echo "$out"; exit 1
fi
grep -q 'src/probe.ts:2:7 lint/suspicious/noDoubleEquals' <<<"$out" ||
  { echo "FAIL: noDoubleEquals not reported:"; echo "$out"; exit 1; }
grep -q 'src/probe.ts:3:3 lint/suspicious/noDebugger' <<<"$out" ||
  { echo "FAIL: noDebugger not reported:"; echo "$out"; exit 1; }
echo "ok"
