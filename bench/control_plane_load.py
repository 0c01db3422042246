#!/usr/bin/env python3
"""Load check of the control plane: N tiny jobs submitted at once to a fresh `forge serve` on the
local fleet; prints submit latency (p50/p99/max), the time until every job is Succeeded and
released, and the throughput. Standard library only.

    bench/control_plane_load.py --forge build/release/bin/forge [--jobs 200] [--concurrency 8]
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from loadlib import free_port, job_form, pct

SPEC = """name: tiny
fleet: local
image: python:3.11-slim
entrypoint: python3 -c "print('hello from a tiny job')"
pools:
  - name: main
    cpusPerMachine: 1
"""


def call(url, token, method="GET", body=None, ctype=None):
    req = urllib.request.Request(url, data=body, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    if ctype:
        req.add_header("Content-Type", ctype)
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read() or b"null")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--forge", required=True)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()

    root = tempfile.mkdtemp(prefix="sf-load-")
    port = free_port()
    env = dict(os.environ, FORGE_STORAGE_ROOT=root, FORGE_LISTEN=f"127.0.0.1:{port}")
    env.pop("FORGE_TOKEN", None)
    token = subprocess.run([args.forge, "token", "create", "--user", "admin", "--admin"], env=env,
                           check=True, capture_output=True, text=True).stdout.strip()
    log = open(os.path.join(root, "serve.log"), "w")
    server = subprocess.Popen([args.forge, "serve", "--resync-ms", "500"], env=env, stdout=log,
                              stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/readyz", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        body, ctype = job_form(SPEC)

        def submit(_):
            t0 = time.perf_counter()
            job = call(base + "/api/v1/jobs", token, "POST", body, ctype)
            return time.perf_counter() - t0, job["id"]

        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(args.concurrency) as ex:
            results = list(ex.map(submit, range(args.jobs)))
        submitted = time.perf_counter() - start
        latencies = [r[0] for r in results]
        ids = {r[1] for r in results}

        done = {}
        while len(done) < len(ids) and time.perf_counter() - start < args.timeout:
            cursor, page = None, []
            while True:
                url = base + "/api/v1/jobs?limit=500" + (f"&cursor={cursor}" if cursor else "")
                resp = call(url, token)
                page += resp["items"]
                cursor = resp.get("nextCursor")
                if not cursor:
                    break
            for job in page:
                if job["id"] in ids and job["cleanup"]["released"]:
                    done[job["id"]] = job["phase"]
            time.sleep(0.5)
        total = time.perf_counter() - start
        phases = {}
        for p in done.values():
            phases[p] = phases.get(p, 0) + 1
        print(f"jobs {args.jobs}, submit concurrency {args.concurrency}")
        print(f"submit latency: p50 {pct(latencies, 50) * 1000:.1f} ms, "
              f"p99 {pct(latencies, 99) * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms, "
              f"mean {statistics.mean(latencies) * 1000:.1f} ms")
        print(f"all submitted in {submitted:.2f} s; all finished and released in {total:.2f} s "
              f"({len(done) / total:.2f} jobs/s); outcomes {phases}")
        return 0 if len(done) == args.jobs and phases.get("Succeeded") == args.jobs else 1
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
