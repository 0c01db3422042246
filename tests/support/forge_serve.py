"""A `forge serve` of a test's own (Python tests: python/tests, tests/api/*_test.py).

The local fleet, a loopback port the kernel picks (--listen 127.0.0.1:0 --port-file), its own
temporary storage root and state directory, an admin token made with `forge token create`
before it starts; no inherited FORGE_* setting. With `kuberay=True` also the kuberay fleet, on a
kubesim and an s3rver of its own (as tests/e2e/playground_test.sh sets them up: h200 nodes, the
storage PVC `data`, its pods' ray and vllm emulators). Every wait is bounded and polls a
condition.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import httpx

REPO = Path(__file__).resolve().parents[2]
VLLM_EMULATOR = REPO / "tools" / "kubesim" / "vllm" / "kubesim_vllm.py"


def _die_with_parent() -> None:
    """In the child: SIGTERM when the test's process ends, even killed (a ctest timeout)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def wait_for(what: str, check: Callable[[], object], seconds: float, every: float = 0.1) -> object:
    """Polls `check` until it returns something true; AssertionError naming `what` after
    `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(every)


class ForgeServe:
    def __init__(self, forge: str, vllm: bool = False, kuberay: bool = False) -> None:
        self.forge = forge
        self.children: List[subprocess.Popen] = []  # type: ignore[type-arg]
        self.work = Path(tempfile.mkdtemp(prefix="starforge-pytest-"))
        # The sandbox's user (nobody, when the tests run as root) must reach the storage root.
        os.chmod(self.work, 0o755)
        self.env: Dict[str, str] = {k: v for k, v in os.environ.items() if not k.startswith("FORGE_")}
        self.env.pop("XDG_CONFIG_HOME", None)
        self.env.update(
            HOME=str(self.work / "home"),
            FORGE_STORAGE_ROOT=str(self.work / "storage"),
            FORGE_STATE_DIR=str(self.work / "state"),
            FORGE_DEFAULT_FLEET_KIND="local",
        )
        (self.work / "home").mkdir()
        if vllm:
            self.env["FORGE_LOCAL_VLLM_COMMAND"] = str(self._install_vllm())
            self.env["KUBESIM_VLLM_STARTUP_S"] = "1"
        self.proc: Optional[subprocess.Popen] = None  # type: ignore[type-arg]
        self.url = ""
        try:
            if kuberay:
                self._start_cluster()
            self.admin_token = self.token("admin", admin=True)
        except BaseException:
            self.stop()
            raise

    def _child(self, name: str, argv: List[str], seconds: float = 60) -> str:
        """Starts argv (which writes its port to <work>/<name>.port); its port."""
        port_file = self.work / f"{name}.port"
        log = open(self.work / f"{name}.log", "ab")
        proc = subprocess.Popen(argv + ["--port-file", str(port_file)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, env=self.env,
                                preexec_fn=_die_with_parent)
        log.close()
        self.children.append(proc)

        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited {proc.returncode}: {self.tail(name=name)}")
            return port_file.exists() and port_file.read_text().strip() != ""

        wait_for(f"{name}'s port file", ready, seconds)
        return port_file.read_text().strip()

    def _start_cluster(self) -> None:
        kubesim = str(Path(self.forge).parent / "kubesim")
        (self.work / "nodes.yaml").write_text(
            "- metadata: {name: h200-a, labels: {starforge/gpu-series: h200}}\n"
            "  status:\n"
            '    capacity: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}\n'
            '    allocatable: {cpu: "63", memory: 500Gi, nvidia.com/gpu: "8"}\n'
        )
        (self.work / "images.yaml").write_text(
            '- "python:*"\n- "rayproject/ray:*"\n- "vllm/vllm-openai:v0.11.0"\n'
        )
        (self.work / "pv" / "starforge" / "data").mkdir(parents=True)
        k8s = "http://127.0.0.1:" + self._child("kubesim", [
            kubesim, "--listen", "127.0.0.1:0", "--nodes", str(self.work / "nodes.yaml"),
            "--controllers", "all", "--pv-root", str(self.work / "pv"),
            "--images", str(self.work / "images.yaml"), "--kubelet-backoff-ms", "500",
            "--ray-bin-dir", str(REPO / "tools" / "kubesim" / "ray" / "bin")])
        with httpx.Client(base_url=k8s, timeout=30) as k:
            k.post("/api/v1/namespaces", json={"metadata": {"name": "starforge"}}).raise_for_status()
            k.post("/api/v1/namespaces/starforge/persistentvolumeclaims", json={
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
            }).raise_for_status()
            k.patch("/api/v1/namespaces/starforge/persistentvolumeclaims/data/status",
                    json={"status": {"phase": "Bound"}},
                    headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()
        s3 = "http://127.0.0.1:" + self._child("s3peer", [
            "node", str(REPO / "tools" / "s3peer" / "s3peer.js"), "--bucket", "starforge",
            "--address", "127.0.0.1"])
        self.env.update(
            FORGE_K8S_API_SERVER=k8s, FORGE_S3_ENDPOINT=s3, FORGE_S3_BUCKET="starforge",
            FORGE_S3_ACCESS_KEY="S3RVER", FORGE_S3_SECRET_KEY="S3RVER",
            FORGE_STORAGE_ROOT=str(self.work / "pv" / "starforge" / "data"),
            FORGE_K8S_STORAGE_PVC="data", FORGE_K8S_NAMESPACE="starforge",
            FORGE_IMAGE_VLLM="vllm/vllm-openai:v0.11.0",
        )

    def _install_vllm(self) -> Path:
        """kubesim's vLLM emulator as <prefix>/bin/vllm (tests/e2e/playground_local_test.sh)."""
        prefix = self.work / "vllm-prefix"
        (prefix / "bin").mkdir(parents=True)
        (prefix / "lib").mkdir()
        shutil.copy(VLLM_EMULATOR, prefix / "lib" / "kubesim_vllm.py")
        vllm = prefix / "bin" / "vllm"
        vllm.write_text(
            "#!/usr/bin/env python3\n"
            "import os, sys\n"
            "sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)),"
            " os.pardir, 'lib'))\n"
            "from kubesim_vllm import main\n"
            "sys.exit(main(sys.argv[1:]))\n"
        )
        for p in (prefix, prefix / "bin", prefix / "lib", vllm):
            os.chmod(p, 0o755)
        os.chmod(prefix / "lib" / "kubesim_vllm.py", 0o644)
        return vllm

    def token(self, user: str, admin: bool = False) -> str:
        cmd = [self.forge, "token", "create", "--user", user] + (["--admin"] if admin else [])
        out = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, f"forge token create: {out.stderr}"
        return out.stdout.strip()

    def start(self, **tokens: bool) -> "ForgeServe":
        """Makes a token for each user named (``alice=False``: not an admin, as attribute
        ``self.alice``), then starts forge serve; on any failure stops what was started."""
        try:
            for user, admin in tokens.items():
                setattr(self, user, self.token(user, admin=admin))
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> "ForgeServe":
        port_file = self.work / "forge.port"
        self.log = open(self.work / "serve.log", "ab")
        self.proc = subprocess.Popen(
            [self.forge, "serve", "--listen", "127.0.0.1:0", "--port-file", str(port_file),
             "--resync-ms", "200"],
            env=self.env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            preexec_fn=_die_with_parent,
        )

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"forge serve exited {self.proc.returncode}: {self.tail()}")
            return port_file.exists() and port_file.read_text().strip() != ""

        wait_for("forge serve's port file", ready, 120)
        self.url = f"http://127.0.0.1:{port_file.read_text().strip()}"
        return self

    def tail(self, n: int = 30, name: str = "serve") -> str:
        try:
            lines = (self.work / f"{name}.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "log", None):
            self.log.close()
        for child in reversed(self.children):
            if child.poll() is None:
                child.terminate()
                try:
                    child.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
        if os.environ.get("KEEP") == "1":
            print(f"kept {self.work}")
            return

        def writable(func, path, _exc):  # job files may be read-only
            os.chmod(path, stat.S_IRWXU)
            func(path)

        shutil.rmtree(self.work, onerror=writable)
