#!/usr/bin/env python3
"""Capsule speed in one run, every figure a ratio to a floor measured in the same run (issue 17).

Driven by bench/capsule_speed.sh (which builds the release binaries); see bench/README.md.
Rows: the floor (coreutils sha256sum of every file), a standard-library replica of Ray's
`--working-dir` packaging, `forge capsule build` cold, after one file changed, and — with a
local `forge serve` — `forge submit --code` until the capsule is stored, and an unchanged
resubmit.
"""
import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
import zipfile

JOB = ("name: bench\nimage: python:3.11\nentrypoint: [\"true\"]\nfleet: local\n"
       "pools: [{name: main, cpusPerMachine: 1}]\n")


def cpu_children():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def cpu_self():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def timed(cmd, **kw):
    """(wall s, cpu s of the child, completed process) of one command."""
    c0, t0 = cpu_children(), time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    wall, cpu = time.perf_counter() - t0, cpu_children() - c0
    if p.returncode != 0:
        sys.exit(f"capsule_speed: {cmd[0] if isinstance(cmd, list) else cmd} failed:\n"
                 f"{p.stdout}{p.stderr}")
    return wall, cpu, p


def floor(tree):
    cmd = "find . -type f -print0 | LC_ALL=C xargs -0 sha256sum >/dev/null"
    return timed(cmd, shell=True, cwd=tree)[:2]


def ray_replica(tree, out):
    """What `ray job submit --working-dir` does to a local directory before uploading it, with
    the standard library only (a replica, not Ray's code): an MD5 pass over every file's path
    and contents (Ray's _hash_directory names the package by it), a ZipFile(..., "w") — stored,
    Ray's default — of the tree, and the package read into memory for the upload."""
    c0, t0 = cpu_self(), time.perf_counter()
    md5 = hashlib.md5()
    files = []
    for d, dirs, names in os.walk(tree):
        dirs.sort()
        for n in sorted(names):
            p = os.path.join(d, n)
            files.append(p)
            md5.update(os.path.relpath(p, tree).encode())
            with open(p, "rb") as f:
                while chunk := f.read(4 << 20):
                    md5.update(chunk)
    with zipfile.ZipFile(out, "w") as z:
        for p in files:
            z.write(p, os.path.relpath(p, tree))
    with open(out, "rb") as f:
        data = f.read()
    return time.perf_counter() - t0, cpu_self() - c0, len(data)


def capsule_build(forge, tree, job, out):
    wall, cpu, p = timed([forge, "capsule", "build", tree, "--job", job, "-o", out])
    fields = dict(line.split(None, 1) for line in p.stdout.splitlines() if line.strip())
    return wall, cpu, fields["sha256"].strip(), int(fields["size"].split()[0])


def submit(forge, tree, job, env, a, wait_stored=True):
    """`forge submit --code TREE`, timed until the command returns and, with wait_stored, until
    the server's object store holds the capsule (polled every 10 ms)."""
    c0, t0 = cpu_children(), time.perf_counter()
    p = subprocess.run([forge, "submit", job, "--code", tree, "-o", "json"], env=env,
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"capsule_speed: forge submit failed:\n{p.stderr}")
    cpu = cpu_children() - c0
    job = json.loads(p.stdout)
    sha = job["capsule"]["sha256"]
    path = os.path.join(a.objects, "capsules", f"sha256-{sha}.zip")
    while wait_stored and not os.path.exists(path):
        if time.perf_counter() - t0 > 600:
            sys.exit("capsule_speed: the capsule never reached the object store")
        time.sleep(0.01)
    return time.perf_counter() - t0, cpu, job["id"], p.stderr


def wait_job(forge, env, job_id):
    """Until the job has ended (the local fleet runs `true`), so that it does not share the CPU
    with the next row."""
    deadline = time.time() + 300
    while time.time() < deadline:
        p = subprocess.run([forge, "get", "jobs", job_id, "-o", "json"], env=env,
                           capture_output=True, text=True)
        if p.returncode == 0 and json.loads(p.stdout).get("phase") in (
                "Succeeded", "Failed", "Cancelled"):
            return
        time.sleep(0.2)
    sys.exit(f"capsule_speed: job {job_id} did not end")


def archive_order(tree):
    """(relative path, size) of the tree's files in the order of their capsule entries: by path,
    byte order (StarForge's own files come after all of them)."""
    found = []
    for d, dirs, names in os.walk(tree):
        dirs[:] = [x for x in dirs if x != ".forge"]
        for n in names:
            p = os.path.join(d, n)
            found.append((os.path.relpath(p, tree), os.path.getsize(p)))
    return sorted(found, key=lambda e: e[0].encode())


def pick_py(tree, fraction):
    """The first .py file at or after `fraction` of the tree's bytes in archive order, and the
    fraction of the bytes before it. Where the changed file lies matters: the archive's bytes
    before it are the previous capsule's and are not hashed again."""
    files = archive_order(tree)
    total = sum(size for _, size in files)
    before = 0
    for rel, size in files:
        if rel.endswith(".py") and before >= fraction * total:
            return os.path.join(tree, rel), before / total
        before += size
    sys.exit("capsule_speed: no .py file to change")


def one_file_changed(forge, tree, job, work, index, victim, name):
    """Appends a line to `victim`, builds incrementally (timed), then builds the same tree
    without the index: (wall, cpu, same bytes?)."""
    with open(victim, "a") as f:
        f.write("print('one more line')\n")
    i_wall, i_cpu, i_sha, _ = capsule_build(forge, tree, job, os.path.join(work, name + ".zip"))
    saved = index + ".saved"
    os.rename(index, saved)
    _, _, f_sha, _ = capsule_build(forge, tree, job, os.path.join(work, name + "-full.zip"))
    os.rename(saved, index)
    return i_wall, i_cpu, i_sha == f_sha, i_sha


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="directory with forge and capsule_bench")
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--work", required=True)
    ap.add_argument("--server", default="", help="a forge serve URL for the submit rows")
    ap.add_argument("--token", default="")
    ap.add_argument("--objects", default="", help="that server's filesystem object store")
    a = ap.parse_args()
    forge = os.path.join(a.bin, "forge")
    tree = os.path.join(a.work, "tree")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    job = os.path.join(a.work, "job.yaml")
    with open(job, "w") as f:
        f.write(JOB)
    gen = subprocess.run([os.path.join(a.bin, "capsule_bench"), "--generate", tree,
                          "--size-mib", str(a.size_mib), "--files", str(a.files)],
                         check=True, capture_output=True, text=True).stdout.split()
    n_files, n_bytes, n_random = int(gen[0]), int(gen[2]), int(gen[4])
    time.sleep(2.5)  # file times older than the clock's granularity: the index may trust them

    floor(tree)  # warms the page cache: every row reads from memory
    fl_wall, fl_cpu = floor(tree)
    rows = [("sha256sum of every file (the floor)", fl_wall, fl_cpu, "")]
    ray_zip = os.path.join(a.work, "ray.zip")
    ray_replica(tree, ray_zip)  # the replica's output file exists in both runs
    r_wall, r_cpu, ray_size = ray_replica(tree, ray_zip)
    os.remove(ray_zip)
    rows.append(("Ray --working-dir replica", r_wall, r_cpu, f"{ray_size / 2**20:.0f} MiB stored zip"))

    index = os.path.join(tree, ".forge", "capsule.index")
    cold_out = os.path.join(a.work, "cold.zip")
    c_wall, c_cpu, c_sha, c_size = capsule_build(forge, tree, job, cold_out)
    # A second cold build: the first one also warmed the binary and the allocator.
    os.remove(index)
    os.remove(cold_out)
    c_wall, c_cpu, c_sha2, c_size = capsule_build(forge, tree, job, cold_out)
    rows.append(("forge capsule build, cold", c_wall, c_cpu,
                 f"{c_size / 2**20:.0f} MiB = {c_size / ray_size:.2f}x Ray's zip"))

    # One file changed: the .py file in the middle of the archive (by bytes) gets one more line
    # — the goal's row; then, as the worst case, the first .py file of the archive. Each
    # incremental build must give the bytes of a build without the index.
    victim, at = pick_py(tree, 0.5)
    i_wall, i_cpu, same_mid, i_sha = one_file_changed(forge, tree, job, a.work, index, victim,
                                                      "middle")
    rows.append(("forge capsule build, one file changed", i_wall, i_cpu,
                 f"{i_wall / c_wall:.2f}x the cold build, {r_wall / i_wall:.1f}x faster than Ray; "
                 f"{os.path.relpath(victim, tree)} at {100 * at:.0f}% of the bytes"))
    first, first_at = pick_py(tree, 0.0)
    w_wall, w_cpu, same_first, _ = one_file_changed(forge, tree, job, a.work, index, first, "first")
    rows.append(("  the same, the first file of the archive", w_wall, w_cpu,
                 f"{w_wall / c_wall:.2f}x the cold build (worst case); "
                 f"{os.path.relpath(first, tree)} at {100 * first_at:.0f}%"))
    same = same_mid and same_first and c_sha == c_sha2

    s_wall = u_wall = None
    if a.server:
        env = dict(os.environ, FORGE_SERVER=a.server, FORGE_TOKEN=a.token,
                   HOME=os.path.join(a.work, "home"))
        os.makedirs(env["HOME"], exist_ok=True)
        shutil.rmtree(os.path.join(tree, ".forge"), ignore_errors=True)
        # Cold: from nothing on either side to the capsule stored in the object store.
        s_wall, s_cpu, key, err = submit(forge, tree, job, env, a)
        rows.append(("forge submit --code, to capsule stored", s_wall, s_cpu,
                     f"client CPU; {err.strip().splitlines()[-1][:60]}"))
        # A resubmit comes later: the first job has reached its fleet (and, here, ended).
        wait_job(forge, env, key)
        _, _, key2, _ = submit(forge, tree, job, env, a)  # remembers the digest: files are old
        wait_job(forge, env, key2)
        u_wall, u_cpu, key3, uerr = submit(forge, tree, job, env, a, wait_stored=False)
        wait_job(forge, env, key3)
        unchanged_ok = "nothing uploaded" in uerr
        rows.append(("forge submit, unchanged resubmit", u_wall, u_cpu,
                     "nothing uploaded" if unchanged_ok else "UPLOADED: " + uerr.strip()[:60]))

    print(f"\ntree: {n_files} files, {n_bytes / 2**20:.0f} MiB "
          f"({100 * n_random / n_bytes:.0f}% random bytes); warm page cache; "
          f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at the end\n")
    print(f"{'':44} {'wall':>8} {'vs floor':>9} {'cpu':>8} {'cpu vs floor':>13}")
    for name, wall, cpu, note in rows:
        print(f"{name:44} {wall:7.2f}s {wall / fl_wall:8.2f}x {cpu:7.2f}s {cpu / fl_cpu:12.2f}x  {note}")
    print()
    goals = [
        ("1. cold build <= 1.5x the floor", c_wall / fl_wall <= 1.5, f"{c_wall / fl_wall:.2f}x"),
        ("1. cold build faster than the Ray replica", c_wall < r_wall, f"{c_wall / r_wall:.2f}x Ray"),
        ("1. capsule <= 0.8x Ray's stored zip", c_size <= 0.8 * ray_size, f"{c_size / ray_size:.2f}x"),
        ("2. one file changed <= 0.2x the cold build", i_wall <= 0.2 * c_wall, f"{i_wall / c_wall:.2f}x"),
        ("2. one file changed >= 5x faster than Ray", r_wall >= 5 * i_wall, f"{r_wall / i_wall:.1f}x"),
        ("   incremental == full build (bytes)", same, i_sha[:16]),
    ]
    if s_wall is not None:
        goals += [
            ("3. unchanged resubmit <= 0.1x the floor, no upload", unchanged_ok and u_wall <= 0.1 * fl_wall,
             f"{u_wall / fl_wall:.2f}x"),
            ("4. submit --code to capsule stored <= 2x the floor", s_wall <= 2 * fl_wall,
             f"{s_wall / fl_wall:.2f}x"),
        ]
    for name, ok, figure in goals:
        print(f"{'met    ' if ok else 'NOT met'}  {name:48} {figure}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
