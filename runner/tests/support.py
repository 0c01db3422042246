"""Shared helpers for the runner tests: build the real zipapp once, lay out capsule-like
directories (files + manifest, as the capsule builder and Ray's unzip leave them), run the
runner as a subprocess."""

import atexit
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

RUNNER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# So that tests can import build_zipapp and embed_zipapp.
if RUNNER_DIR not in sys.path:
    sys.path.insert(0, RUNNER_DIR)

PYTHON = sys.executable
JOB_ID = "j-test1"
_built = {}


def runner_bytes():
    """runner.pyz built from this checkout's sources by build_zipapp.py (once per process)."""
    if "data" not in _built:
        directory = tempfile.mkdtemp(prefix="sf-runner-pyz-")
        atexit.register(shutil.rmtree, directory, True)
        path = os.path.join(directory, "runner.pyz")
        subprocess.check_call([PYTHON, "-B", os.path.join(RUNNER_DIR, "build_zipapp.py"),
                               "--output", path])
        with open(path, "rb") as f:
            _built["data"] = f.read()
        _built["path"] = path
    return _built["data"]


def runner_path():
    runner_bytes()
    return _built["path"]


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def write_manifest(root, executable=()):
    """Writes .starforge/manifest.json listing every file under root (except itself)."""
    files = []
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if rel == ".starforge/manifest.json":
                continue
            with open(path, "rb") as f:
                data = f.read()
            files.append({"path": rel, "size": len(data), "sha256": sha256(data),
                          "executable": rel in executable})
    files.sort(key=lambda e: e["path"])
    with open(os.path.join(root, ".starforge", "manifest.json"), "w") as f:
        json.dump({"version": 1, "files": files}, f)


def jobspec(entrypoint, env=None, recipe="none"):
    return {"name": "test-job", "fleet": "local", "recipe": recipe, "image": "python:3",
            "entrypoint": entrypoint, "env": env or {},
            "pools": [{"name": "main", "machines": 1, "gpusPerMachine": 0}],
            "deadlines": {"preRunningSeconds": 0, "runningSeconds": 0}, "corpus": False}


def make_capsule(root, entrypoint, files=None, env=None, recipe="none", executable=(),
                 spec=None):
    """A capsule as Ray leaves it: user files + .starforge/{jobspec.json,runner.pyz,
    manifest.json}, every file mode 0644 whatever the manifest says."""
    os.makedirs(os.path.join(root, ".starforge"), exist_ok=True)
    for rel, data in (files or {}).items():
        path = os.path.join(root, *rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
    with open(os.path.join(root, ".starforge", "jobspec.json"), "w") as f:
        f.write(json.dumps(spec if spec is not None else jobspec(entrypoint, env, recipe),
                           separators=(",", ":")) + "\n")
    with open(os.path.join(root, ".starforge", "runner.pyz"), "wb") as f:
        f.write(runner_bytes())
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o644)
    write_manifest(root, executable=executable)


def py(code):
    """An entrypoint running a Python snippet with this interpreter."""
    return [PYTHON, "-c", code]


def is_alive(pid):
    """True if pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return data[data.rfind(b")") + 2:].split()[0] not in (b"Z", b"X")


class Reader(threading.Thread):
    """Collects a pipe's bytes in the background."""

    def __init__(self, stream):
        threading.Thread.__init__(self, daemon=True)
        self.stream = stream
        self.chunks = []
        self.lock = threading.Lock()
        self.start()

    def run(self):
        while True:
            chunk = os.read(self.stream.fileno(), 65536)
            if not chunk:
                break
            with self.lock:
                self.chunks.append(chunk)

    def data(self):
        with self.lock:
            return b"".join(self.chunks)


class RunnerTest(unittest.TestCase):
    """Each test gets <tmp>/capsule and <tmp>/storage."""

    def setUp(self):
        self.tmp = os.path.realpath(tempfile.mkdtemp(prefix="sf-runner-test-"))
        self.capsule = os.path.join(self.tmp, "capsule")
        self.storage = os.path.join(self.tmp, "storage")
        os.makedirs(self.capsule)
        os.makedirs(self.storage)
        self.job_dir = os.path.join(self.storage, "jobs", JOB_ID)
        self.procs = []

    def tearDown(self):
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def make(self, entrypoint, **kwargs):
        make_capsule(self.capsule, entrypoint, **kwargs)

    def runner_env(self, **overrides):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("FORGE_") and k not in ("PYTHONUNBUFFERED", "FORGE_JOB_DIR")}
        env.update(FORGE_JOB_ID=JOB_ID, FORGE_STORAGE_ROOT=self.storage,
                   FORGE_RUNNER_GRACE_S="1", FORGE_RUNNER_HEARTBEAT_S="0.2")
        for key, value in overrides.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def command(self, *args):
        return [PYTHON, ".starforge/runner.pyz"] + list(args or ["run"])

    def run_runner(self, *args, **kwargs):
        """Runs the runner to completion; returns (exit code, stdout bytes, stderr text)."""
        cwd = kwargs.pop("cwd", self.capsule)
        timeout = kwargs.pop("timeout", 30)
        command = kwargs.pop("command", None) or self.command(*args)
        proc = subprocess.Popen(command, cwd=cwd, env=self.runner_env(**kwargs),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        self.procs.append(proc)
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err.decode("utf-8", "replace")

    def start_runner(self, *args, **kwargs):
        """Starts the runner; returns (Popen, stdout Reader, stderr Reader)."""
        proc = subprocess.Popen(self.command(*args), cwd=self.capsule,
                                env=self.runner_env(**kwargs), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        self.procs.append(proc)
        return proc, Reader(proc.stdout), Reader(proc.stderr)

    def status(self):
        with open(os.path.join(self.job_dir, "status.json")) as f:
            return json.load(f)

    def driver_log(self):
        try:
            with open(os.path.join(self.job_dir, "logs", "driver.log"), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""

    def wait_for(self, predicate, timeout=10.0, what="condition"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.02)
        self.fail("timed out after %gs waiting for %s" % (timeout, what))

    def mode(self, rel):
        return stat.S_IMODE(os.stat(os.path.join(self.capsule, *rel.split("/"))).st_mode)
