"""Helpers for the emulator's tests: real `bin/ray` processes on loopback, free ports, temp dirs."""

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
RAY_ROOT = os.path.dirname(HERE)
BIN = os.path.join(RAY_ROOT, "bin")
RAY = os.path.join(BIN, "ray")
sys.path.insert(0, RAY_ROOT)

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def base_env(tmp, **extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("RAY_") and k not in ("KUBESIM_POD_IP", "PYTHONPATH")}
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    env["RAY_TMPDIR"] = tmp
    env["RUNTIME_ENV_RETRY_INTERVAL_MS"] = "50"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def http(method, url, body=None, data=None, timeout=10, headers=None):
    hdrs = dict(headers or {})
    if body is not None:
        data = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_until(pred, timeout=60.0, interval=0.05, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError("timed out waiting for " + what)


class Head:
    """`ray start --head --block` on loopback with free ports."""

    def __init__(self, tmp, ip="127.0.0.1", extra_args=(), **env):
        self.tmp = tmp
        self.ip = ip
        self.gcs_port = free_port()
        self.dash_port = free_port()
        self.agent_port = free_port()
        self.env = base_env(tmp, **env)
        if ip != "127.0.0.1":
            self.env["KUBESIM_POD_IP"] = ip
        self.log = open(os.path.join(tmp, "head-%d.out" % self.gcs_port), "w+")
        self.args = [RAY, "start", "--head", "--port=%d" % self.gcs_port, "--dashboard-host=0.0.0.0",
                     "--dashboard-port=%d" % self.dash_port,
                     "--dashboard-agent-listen-port=%d" % self.agent_port, "--num-cpus=2",
                     "--metrics-export-port=8080", "--block"] + list(extra_args)
        self.proc = None

    @property
    def url(self):
        return "http://%s:%d" % (self.ip, self.dash_port)

    @property
    def gcs(self):
        return "%s:%d" % (self.ip, self.gcs_port)

    def start(self, wait=True):
        self.proc = subprocess.Popen(self.args, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        if wait:
            wait_until(lambda: self._healthy(), what="head dashboard")
        return self

    def _healthy(self):
        if self.proc.poll() is not None:
            raise AssertionError("head exited %s:\n%s" % (self.proc.returncode, self.output()))
        try:
            return http("GET", self.url + "/api/gcs_healthz", timeout=1)[1] == "success"
        except OSError:
            return False

    def output(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()

    # --- Jobs API helpers ---
    def submit(self, **body):
        status, text = http("POST", self.url + "/api/jobs/", body)
        assert status == 200, (status, text)
        return json.loads(text)["submission_id"]

    def info(self, sid):
        status, text = http("GET", self.url + "/api/jobs/" + sid)
        assert status == 200, (status, text)
        return json.loads(text)

    def wait_status(self, sid, statuses=TERMINAL, timeout=60):
        return wait_until(lambda: (lambda i: i if i["status"] in statuses else None)(self.info(sid)),
                          timeout=timeout, what="job %s in %s" % (sid, statuses))

    def logs(self, sid):
        status, text = http("GET", self.url + "/api/jobs/%s/logs" % sid)
        assert status == 200, (status, text)
        return json.loads(text)["logs"]

    def ray(self, *args, env=None, timeout=60, input=None):
        e = dict(self.env)
        e.pop("KUBESIM_POD_IP", None)
        e.update(env or {})
        return subprocess.run([RAY] + list(args), env=e, capture_output=True, text=True, timeout=timeout,
                              input=input)


def make_zip(path, entries):
    """entries: {name: content or None for a directory entry}."""
    with zipfile.ZipFile(path, "w") as z:
        for name, content in entries.items():
            if content is None:
                z.writestr(zipfile.ZipInfo(name if name.endswith("/") else name + "/"), "")
            else:
                z.writestr(name, content)
    return path


class ZipServer:
    """A plain http.server serving a directory; records request paths (with query strings)."""

    def __init__(self, root):
        self.root = root
        self.paths = []
        outer = self

        class H(SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=outer.root, **kw)

            def do_GET(self):
                outer.paths.append((self.path, self.headers.get("User-Agent")))
                super().do_GET()

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, name):
        return "http://127.0.0.1:%d/%s" % (self.port, name)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class TmpTestCase(unittest.TestCase):
    def mkdtemp(self):
        d = tempfile.mkdtemp(prefix="kubesim-ray-")
        self.addCleanup(shutil.rmtree, d, True)
        return d


__all__ = ["Head", "ZipServer", "TmpTestCase", "make_zip", "http", "wait_until", "free_port", "base_env",
           "RAY", "BIN", "io"]
