#!/usr/bin/env bash
# scripts/check-literals: passes on this repository, and fails, naming the file, the line and the
# constant, on a tree that spells a reason or a Kubernetes name outside its home header.
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
check="$here/scripts/check-literals"

"$check"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/include/starforge/common" "$tmp/src/include/starforge/kuberay" "$tmp/src/fleet"
cat >"$tmp/src/include/starforge/common/reasons.h" <<'H'
inline constexpr const char* kSubmissionFailed = "SubmissionFailed";
H
cat >"$tmp/src/include/starforge/kuberay/constants.h" <<'H'
inline constexpr const char* kHeadServiceSuffix = "-head-svc";
H
cat >"$tmp/src/fleet/f.cc" <<'C'
// "SubmissionFailed" in a comment is prose, not code.
std::string a = reasons::kSubmissionFailed;
std::string b = "SubmissionFailed";  /* "-head-svc" */
std::string c = name + "-head-svc";
if (q == '"') n = 30'000 + f("SubmissionFailed");  // a character literal, a digit separator
C
if out="$("$check" --root "$tmp" 2>&1)"; then
  echo "FAIL: check-literals passed a tree with three literals:"; echo "$out"; exit 1
fi
grep -q 'src/fleet/f.cc:3: "SubmissionFailed" is spelled again: use kSubmissionFailed' <<<"$out" ||
  { echo "FAIL: line 3 not reported:"; echo "$out"; exit 1; }
grep -q 'src/fleet/f.cc:4: "-head-svc" is spelled again: use kHeadServiceSuffix' <<<"$out" ||
  { echo "FAIL: line 4 not reported:"; echo "$out"; exit 1; }
grep -q 'src/fleet/f.cc:5: "SubmissionFailed" is spelled again' <<<"$out" ||
  { echo "FAIL: line 5 (after a character literal) not reported:"; echo "$out"; exit 1; }
[[ "$(grep -c 'is spelled again' <<<"$out")" == 3 ]] ||
  { echo "FAIL: comments were reported:"; echo "$out"; exit 1; }
echo "ok"
