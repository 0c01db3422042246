#!/usr/bin/env python3
"""clang-tidy (.clang-tidy) on every translation unit of src/, as ctest lint.clang_tidy runs it.

    tests/lint/clang_tidy.py BUILD_DIR [--jobs N] [--no-cache] [--list] [FILE...]

Passes when no finding is left beyond the temporary suppressions of
tests/lint/clang-tidy-suppressions.txt ("PATH CHECK COUNT" lines: at most COUNT findings of CHECK
in PATH), and shows, on a probe file, that clang-tidy with this configuration reports a finding.

Cost: clang-tidy parses each file again (3-7 s of CPU per file here, ~90 files), so results are
kept in a cache keyed by what decides them: clang-tidy's version, .clang-tidy, the file's compile
command and the contents of the file and of every header of this repository it includes (from
ninja's dependency log, `ninja -t deps`). The cache lives outside the checkout
(STARFORGE_CLANG_TIDY_CACHE, default ~/.cache/starforge/clang-tidy), like ccache's, so a fresh
clone on the same machine reuses it; only files whose inputs changed are checked again, --jobs at a
time (default 2). On a machine without that cache (a fresh CI machine), a file is skipped when
neither it nor any header it includes changed since the commit in tests/lint/clang-tidy-base,
where the whole of src/ passed (same .clang-tidy); STARFORGE_CLANG_TIDY_FULL=1 checks everything.
Move the base forward after a clean full run to keep a cold run short. --list prints every
finding (suppressed or not) as "PATH CHECK COUNT" lines.
"""

import argparse
import collections
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SUPPRESSIONS = os.path.join(ROOT, "tests", "lint", "clang-tidy-suppressions.txt")
CONFIG = os.path.join(ROOT, ".clang-tidy")
BASE = os.path.join(ROOT, "tests", "lint", "clang-tidy-base")
FINDING = re.compile(r"^(/[^:]+):(\d+):(\d+): (warning|error): (.*) \[([^\]]+)\]$")
# GCC's warning flags that clang does not know (-Wno-restrict) are not clang-tidy's business.
EXTRA_ARGS = ["--extra-arg=-Wno-unknown-warning-option"]
PROBE = """#include <string>
#include <utility>
std::string Twice(std::string s) {
  std::string t = std::move(s);
  return t + s;
}
"""


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


_file_hashes = {}


def file_hash(path):
    if path not in _file_hashes:
        try:
            with open(path, "rb") as f:
                _file_hashes[path] = sha256_bytes(f.read())
        except OSError:
            _file_hashes[path] = "missing"
    return _file_hashes[path]


def cache_key(version, config_hash, build, command, deps):
    h = hashlib.sha256()
    for part in (version, config_hash, command.replace(ROOT, "@").replace(build, "@build")):
        h.update(part.encode() + b"\0")
    for rel in deps:
        h.update(rel.encode() + b"\0" + file_hash(os.path.join(ROOT, rel)).encode() + b"\0")
    return h.hexdigest()


def object_of(command):
    words = shlex.split(command)
    for i, w in enumerate(words):
        if w == "-o" and i + 1 < len(words):
            return words[i + 1]
    return None


def ninja_deps(build, objects):
    """Maps each object to the in-repository files it was compiled from, or None when unknown."""
    deps = {o: None for o in objects}
    try:
        out = subprocess.run(["ninja", "-C", build, "-t", "deps", *objects], capture_output=True,
                             text=True, check=False).stdout
    except OSError:
        return deps
    current = None
    for line in out.splitlines():
        if line and not line[0].isspace():
            obj, _, rest = line.partition(": ")
            current = obj if "(VALID)" in rest and obj in deps else None
            if current is not None:
                deps[current] = []
        elif current is not None and line.strip():
            path = os.path.realpath(os.path.join(build, line.strip()))
            if path.startswith(ROOT + os.sep):
                deps[current].append(os.path.relpath(path, ROOT))
    return deps


def all_repo_headers():
    out = []
    for base, _dirs, files in os.walk(os.path.join(ROOT, "src")):
        out.extend(os.path.relpath(os.path.join(base, f), ROOT) for f in files if f.endswith(".h"))
    return out


def parse_findings(text):
    found = []
    for line in text.splitlines():
        m = FINDING.match(line)
        if not m:
            continue
        path = os.path.realpath(m.group(1))
        if not path.startswith(os.path.join(ROOT, "src") + os.sep):
            continue
        found.append((os.path.relpath(path, ROOT), int(m.group(2)), int(m.group(3)), m.group(6),
                      m.group(5)))
    return found


def run_tidy(tidy, build, source):
    proc = subprocess.run([tidy, "-p", build, "--quiet", *EXTRA_ARGS, source], capture_output=True,
                          text=True, check=False)
    findings = parse_findings(proc.stdout)
    # A file clang cannot compile is reported as clang-diagnostic-error findings (e.g. clang 14
    # on libstdc++ 12's ranges): findings like the others. A failure with none is the tool's.
    compiled = any(f[3].startswith("clang-diagnostic-error") for f in findings)
    return findings, proc.returncode == 0 or compiled, proc.stdout + proc.stderr


def changed_since_base():
    """The files changed since the recorded clean base (None: check everything)."""
    if os.environ.get("STARFORGE_CLANG_TIDY_FULL") or not os.path.exists(BASE):
        return None
    with open(BASE) as f:
        words = [w for line in f for w in line.split("#", 1)[0].split()]
    if not words:
        return None

    def git(*a):
        return subprocess.run(["git", "-C", ROOT, *a], capture_output=True, text=True, check=False)

    if git("cat-file", "-e", words[0] + "^{commit}").returncode != 0:
        return None  # a shallow clone, or history rewritten: check everything
    diff = git("diff", "--name-only", words[0], "--", ".")
    others = git("ls-files", "--others", "--exclude-standard", "--", "src")
    if diff.returncode != 0 or others.returncode != 0:
        return None
    changed = set(diff.stdout.split()) | set(others.stdout.split())
    if ".clang-tidy" in changed:
        return None
    return words[0], changed


def load_suppressions():
    allowed = {}
    if not os.path.exists(SUPPRESSIONS):
        return allowed
    with open(SUPPRESSIONS) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 3 or not parts[2].isdigit():
                sys.exit("%s:%d: want PATH CHECK COUNT, got %r" % (SUPPRESSIONS, n, line))
            allowed[(parts[0], parts[1])] = int(parts[2])
    return allowed


def self_test(tidy):
    """clang-tidy with .clang-tidy reports bugprone-use-after-move in the probe: the lint can fail."""
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe.cc")
        with open(probe, "w") as f:
            f.write(PROBE)
        proc = subprocess.run([tidy, "--quiet", "--config-file=" + CONFIG, probe, "--", "-std=c++20"],
                              capture_output=True, text=True, check=False)
    if not re.search(r"probe\.cc:5:14: warning: 's' used after it was moved \[bugprone-use-after-move\]",
                     proc.stdout):
        print("FAIL: clang-tidy did not report the use after move in the probe file:")
        print(proc.stdout + proc.stderr)
        return False
    print("self-test: the probe's use after move is reported (bugprone-use-after-move)")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("files", nargs="*", help="only these sources (default: every one of src/)")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("STARFORGE_CLANG_TIDY_JOBS", "2")))
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument("--list", action="store_true", help="print every finding's PATH CHECK count")
    args = ap.parse_args()

    tidy = os.environ.get("CLANG_TIDY", "clang-tidy")
    try:
        version = subprocess.run([tidy, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        sys.exit("%s is missing: run scripts/bootstrap (scripts/deps.txt installs clang-tidy)" % tidy)
    print(next((v.strip() for v in version.splitlines() if "version" in v), tidy))

    build = os.path.realpath(args.build)
    db_path = os.path.join(build, "compile_commands.json")
    try:
        with open(db_path) as f:
            db = json.load(f)
    except OSError:
        sys.exit("%s is missing: configure the build first (scripts/bootstrap)" % db_path)
    src_dir = os.path.join(ROOT, "src") + os.sep
    wanted = {os.path.realpath(f) for f in args.files}
    entries = [e for e in db if os.path.realpath(e["file"]).startswith(src_dir)
               and (not wanted or os.path.realpath(e["file"]) in wanted)]
    if not entries:
        sys.exit("no source of src/ in %s" % db_path)

    cache_dir = os.environ.get("STARFORGE_CLANG_TIDY_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "starforge", "clang-tidy")
    os.makedirs(cache_dir, exist_ok=True)
    with open(CONFIG, "rb") as f:
        config_hash = sha256_bytes(f.read())

    objects = {}
    for e in entries:
        obj = object_of(e["command"])
        if obj:
            objects[e["file"]] = obj
    deps = ninja_deps(build, sorted(set(objects.values())))
    fallback = None

    jobs = []  # (source, key)
    dep_sets = {}  # source -> the repository files it reads, when ninja knows them
    inputs = {}  # source -> (command, the files its key hashes)
    for e in entries:
        source = os.path.realpath(e["file"])
        d = deps.get(objects.get(e["file"]))
        dep_sets[source] = set(d) if d is not None else None
        if d is None:  # not compiled yet, or its dependencies changed since: every header counts
            if fallback is None:
                fallback = all_repo_headers()
            d = fallback + [os.path.relpath(source, ROOT)]
        inputs[source] = (e["command"], sorted(set(d)))
        jobs.append((source, cache_key(version, config_hash, build, *inputs[source])))

    allowed = load_suppressions()
    suppressed_paths = {p for p, _c in allowed}
    base = None if wanted else changed_since_base()
    start = time.monotonic()
    findings = []
    misses = []
    skipped = 0
    for source, key in jobs:
        cached = os.path.join(cache_dir, key + ".json")
        rel = os.path.relpath(source, ROOT)
        if not args.no_cache and os.path.exists(cached):
            with open(cached) as f:
                findings.extend(tuple(x) for x in json.load(f))
        elif (base is not None and dep_sets.get(source) is not None
              and not dep_sets[source] & base[1] and rel not in base[1] | suppressed_paths):
            skipped += 1  # passed at the base and nothing it reads changed since
        else:
            misses.append((source, key))
    print("clang-tidy: %d files of src/, %d from the cache (%s), %d unchanged since the clean base "
          "%s, %d to check with %d jobs" % (len(jobs), len(jobs) - len(misses) - skipped, cache_dir,
                                            skipped, base[0][:12] if base else "(none)", len(misses),
                                            args.jobs))

    failed_runs = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run_tidy, tidy, build, s): (s, k) for s, k in misses}
        for done, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            source, key = futures[fut]
            found, ok, output = fut.result()
            findings.extend(found)
            # A file edited while clang-tidy read it: its findings are not the key's; not kept.
            for rel in inputs[source][1]:
                _file_hashes.pop(os.path.join(ROOT, rel), None)
            if ok and cache_key(version, config_hash, build, *inputs[source]) == key:
                tmp = os.path.join(cache_dir, key + ".json.tmp%d" % os.getpid())
                with open(tmp, "w") as f:
                    json.dump(found, f)
                os.replace(tmp, os.path.join(cache_dir, key + ".json"))
            else:
                failed_runs.append((source, output))
            if done % 10 == 0:
                print("  %d/%d checked (%.0f s)" % (done, len(misses), time.monotonic() - start), flush=True)
    print("clang-tidy: %.1f s" % (time.monotonic() - start))

    unique = sorted(set(findings))  # a header's finding comes once per file that includes it
    counts = collections.Counter((f[0], f[3]) for f in unique)
    if args.list:
        for (path, check), n in sorted(counts.items()):
            print("%s %s %d" % (path, check, n))

    status = 0
    for source, output in failed_runs:
        print("FAIL: clang-tidy could not check %s:\n%s" % (os.path.relpath(source, ROOT), output[-4000:]))
        status = 1
    new = [(p, c) for (p, c), n in counts.items() if n > allowed.get((p, c), 0)]
    for path, check in sorted(new):
        limit = allowed.get((path, check), 0)
        print("FAIL: %s: %d finding(s) of %s%s:" % (path, counts[(path, check)], check,
                                                     " (the suppressions allow %d)" % limit if limit else ""))
        for f in unique:
            if f[0] == path and f[3] == check:
                print("  %s:%d:%d: %s [%s]" % (f[0], f[1], f[2], f[4], f[3]))
        status = 1
    if not wanted and not skipped:
        stale = [(k, n, counts.get(k, 0)) for k, n in allowed.items() if counts.get(k, 0) < n]
        for (path, check), n, now in sorted(stale):
            print("note: %s %s: %d suppressed, %d left: lower or remove its line in %s"
                  % (path, check, n, now, os.path.relpath(SUPPRESSIONS, ROOT)))
    suppressed = sum(min(n, allowed.get(k, 0)) for k, n in counts.items())
    print("clang-tidy: %d findings, %d of them suppressed (tests/lint/clang-tidy-suppressions.txt)"
          % (len(unique), suppressed))
    if not self_test(tidy):
        status = 1
    print("ok" if status == 0 else "FAIL")
    return status


if __name__ == "__main__":
    sys.exit(main())
