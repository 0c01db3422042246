"""A `forge serve` of a test's own (Python tests: python/tests, tests/api/*_test.py).

The local fleet, a loopback port the kernel picks (--listen 127.0.0.1:0 --port-file), its own
temporary storage root and state directory, an admin token made with `forge token create`
before it starts; no inherited FORGE_* setting. Every wait is bounded and polls a condition.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, Optional

REPO = Path(__file__).resolve().parents[2]
VLLM_EMULATOR = REPO / "tools" / "kubesim" / "vllm" / "kubesim_vllm.py"


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
    def __init__(self, forge: str, vllm: bool = False) -> None:
        self.forge = forge
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
        self.admin_token = self.token("admin", admin=True)

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

    def start(self) -> "ForgeServe":
        port_file = self.work / "forge.port"
        self.log = open(self.work / "serve.log", "ab")
        self.proc = subprocess.Popen(
            [self.forge, "serve", "--listen", "127.0.0.1:0", "--port-file", str(port_file),
             "--resync-ms", "200"],
            env=self.env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
        )

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"forge serve exited {self.proc.returncode}: {self.tail()}")
            return port_file.exists() and port_file.read_text().strip() != ""

        wait_for("forge serve's port file", ready, 120)
        self.url = f"http://127.0.0.1:{port_file.read_text().strip()}"
        return self

    def tail(self, n: int = 30) -> str:
        try:
            lines = (self.work / "serve.log").read_text(errors="replace").splitlines()
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
        if os.environ.get("KEEP") == "1":
            print(f"kept {self.work}")
            return

        def writable(func, path, _exc):  # job files may be read-only
            os.chmod(path, stat.S_IRWXU)
            func(path)

        shutil.rmtree(self.work, onerror=writable)
