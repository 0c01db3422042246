#!/usr/bin/env bash
# Debian's shellcheck (.shellcheckrc) passes on every shell script of scripts/, tests/ and tools/
# (a .sh name, or a #! line naming sh or bash), and fails on a script with an unquoted expansion.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
command -v shellcheck >/dev/null || { echo "shellcheck is missing: run scripts/bootstrap" >&2; exit 1; }
shellcheck --version | grep '^version'

cd "$root"
scripts=()
while IFS= read -r f; do
  [[ -f "$f" ]] || continue
  case "$f" in
    *.sh) scripts+=("$f") ;;
    *.*) ;;
    *) head -n 1 "$f" | grep -qE '^#!(/usr)?/bin/(env )?(ba)?sh( |$)' && scripts+=("$f") ;;
  esac
done < <(git ls-files -- scripts tests tools)
((${#scripts[@]} > 20)) || { echo "FAIL: only ${#scripts[@]} scripts found: ${scripts[*]}" >&2; exit 1; }
echo "shellcheck: ${#scripts[@]} scripts"
shellcheck -f gcc "${scripts[@]}"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/probe.sh" <<'PROBE'
#!/usr/bin/env bash
rm -rf $1/cache
PROBE
if out="$(shellcheck -f gcc "$tmp/probe.sh" 2>&1)"; then
  echo "FAIL: shellcheck passed an unquoted expansion:"; echo "$out"; exit 1
fi
grep -q 'probe.sh:2:8: .*\[SC2086\]' <<<"$out" || { echo "FAIL: SC2086 not reported:"; echo "$out"; exit 1; }
echo "ok"
