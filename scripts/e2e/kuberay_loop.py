#!/usr/bin/env python3
# /// script
# requires-python = ">=3.9"
# dependencies = ["starforge", "httpx"]
#
# [tool.uv.sources]
# starforge = { path = "../../python" }
# ///
"""The closed loop of the kuberay fleet: `forge serve` with the kuberay fleet, then jobs through the SDK.

    uv run python scripts/e2e/kuberay_loop.py                  # on the simulator (scripts/test)
    uv run python scripts/e2e/kuberay_loop.py --kubeconfig PATH   # on a real cluster: 1-5
    uv run python scripts/e2e/kuberay_loop.py --ray real       # on the simulator with real Ray
    uv run python scripts/e2e/kuberay_loop.py --real [--operator v1.4|v1.5|v1.6]   # the real stack
    uv run python scripts/e2e/kuberay_loop.py --real --kueue   # the real stack with the real Kueue
    (--build DIR: the build whose forge, kubesim, kubesim-node it runs; default build/debug)

Run from the repository root. uv (scripts/bootstrap installs it as build/tools/bin/uv) installs
what the inline metadata above names — the SDK `starforge` from ./python and httpx — into an
environment in its cache, with this machine's python3 (uv.toml: no interpreter downloads). Run
with a python3 that lacks them, the script hands itself to `uv run --script`.

Each scenario prints one line (PASS/FAIL/SKIP, its duration); then a summary; the exit code is 0
when every scenario passed, 1 otherwise, 77 when kubesim has no controllers (ctest's skip).
Jobs go through the Python SDK (`starforge.Client`; its submit packs the code with the CLI's
capsule builder, `forge` being given to it), the CLI where a scenario is about the CLI (`forge
logs --ray/--events/--list`, `get`, `describe`, `cancel`, `doctor`, `token create`, `capsule
build`, `storage put`), kubectl for what the cluster holds.

On the simulator it starts kubesim (API server + KubeRay operator, scheduler, kubelet and Ray
emulator; nodes: h200 × 8 GPUs, one cordoned, and h100) and s3rver (tools/s3peer) itself.
Scenarios: 1 a 2-pool job that succeeds (phases in order, logs archived and served
by the API and `forge logs`, RayJob deleted, nothing left); 2 a missing image → ImagePullFailed in
`forge describe`, then PreRunningDeadlineExceeded; 3 more than is free → Unschedulable (naming the
cordoned node; not with --kubeconfig), cancelled with `forge cancel`; 4 exit code 3 → Failed/
AppFailed with logs, the code sent by the SDK's plain upload (the server packs it); 5 cancel while
running (the live log followed through the SDK until the job writes) → Cancelled; simulator only:
K a job Kueue holds past its preRunningSeconds stays Pending, then runs once admitted; simulator
and --real only: 6 HTTP-only storage (every job) and a tampered capsule → CapsuleFetchFailed
naming the SHA-256 mismatch; 7 kill -9 of forge serve mid-run → the job completes once, one
RayJob per job; simulator only: 8 faults on (5xx, 429, dropped watches, 410) → every job
converges. Then: no presigned credentials in the server's log, the jobs' descriptions and events
or the archived files; no request of forge serve refused by the API server (RBAC).

--ray real (the simulator, or --real): kubesim's pods run real Ray from build/tools/ray-venv
(scripts/bootstrap installs it; a missing one fails) instead of the emulator, each pod in a
network namespace of its own (kubesim --pod-network netns; needs root), since real Ray binds
its ports (8080, 8265, 6379, …) on every address and the host's may be taken, and only the
real-Ray scenarios run: R1 a CPU job whose capsule is fetched over http (init container +
file://) that runs a Ray task and Succeeds, logs archived from Ray's Jobs API; R2 exit code 3 →
Failed/AppFailed with Ray's own message; R3 cancel while running → Cancelled, the entrypoint got
SIGTERM; with --real also R4 two machines (head + worker: each pod has its own ports) whose Ray
nodes have their pods' addresses; R5 a tampered capsule over http → CapsuleFetchFailed (the
init container's SHA-256 check); then the object store moves to s3sigpeer on https (it checks
every signature; its CA trusted by forge serve through FORGE_S3_CA_FILE and by the pods through
the ConfigMap s3-ca, FORGE_K8S_S3_CA_CONFIGMAP): R6 a CPU job whose capsule Ray itself fetches
over https as working_dir → Succeeded; R7 a tampered capsule over https → Failed/
CapsuleFetchFailed (Ray's unzip fails its CRC check). FORGE_KUBERAY_RAY_VERSION is the venv's
Ray version.

--real: the real Kubernetes v1.32 control plane (tools/k8s/controlplane, with its audit log),
the real KubeRay operator (build/tools/bin/kuberay-operator-v1.4 or -v1.6, the newest the Go
module proxy serves here, against the vendored v1.7.0 CRDs; default v1.4), kubesim-node as the
nodes (the same inventory; --pod-network netns: every pod in a network namespace of its own on
a host bridge, with an address from its node's podCIDR, so that kube-apiserver accepts the pod
IPs in EndpointSlices) and s3rver bound to the bridge address, which pods reach. The operator
runs with kubesim-node's cluster hosts file as its /etc/hosts (tools/k8s/with-hosts), so it
reaches <cluster>-head-svc.<ns>.svc.cluster.local:8265. forge serve acts as ServiceAccount
starforge:forge with exactly deploy/rbac.yaml's rules (a token from `kubectl create token`).
Scenarios 1-7 run (K and 8 need kubesim); scenario 7's "one RayJob per job" and the request
counts come from the API server's audit log. Needs root (network namespaces, bridges).

--real --kueue: the real Kueue manager too (build/tools/bin/kueue, tools/k8s/kueue: its CRDs,
and its webhooks for RayJobs), a ClusterQueue with quota for one 1-GPU job and LocalQueue
team-a, and only the queue scenarios: Q1 job A takes the quota; Q3 job C asks for more than the
quota, so Kueue never admits it, and its deadlines.queueSeconds fails it (Failed/
QueueDeadlineExceeded); Q2 job B (submitted before C) waits in Kueue's queue (suspended by
Kueue's webhook) past its preRunningSeconds and is not failed, then Kueue admits it when A
finishes and it Succeeds.

On a real cluster (--kubeconfig): the KubeRay operator (1.4+) runs there, and the environment
holds the usual FORGE_* settings of the kuberay fleet, e.g. the file scripts/e2e/setup-kind.sh
writes (`source ~/.local/state/starforge-kind/starforge.env`): FORGE_S3_*, FORGE_K8S_STORAGE_PVC
and FORGE_STORAGE_ROOT = that volume as this machine sees it (driver.log is read there). The
cluster is reached with FORGE_K8S_API_SERVER/TOKEN when set, else with PATH (FORGE_K8S_CONTEXT);
the script's own checks use kubectl with PATH. It starts its own `forge serve` on that storage
root (stop yours first: one server per root) with an admin token from `forge token create`.
Jobs use FORGE_E2E_IMAGE (default rayproject/ray:<FORGE_KUBERAY_RAY_VERSION>; it needs Ray and
python3), series FORGE_E2E_GPU_SERIES (default: the first labelled node's
FORGE_K8S_GPU_NODE_LABEL value) and FORGE_E2E_GPUS GPUs per machine (default 1); two pools only
when the storage is shared (FORGE_K8S_STORAGE_SHARED). Scenario 3 asks for more CPUs than any
node has. Everything the jobs create is deleted; --keep (or KEEP=1) keeps the work directory.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

try:
    import httpx
    import starforge
except ImportError:  # not run by `uv run --script`: hand over to uv, which installs them
    if os.environ.get("STARFORGE_LOOP_UV"):
        raise
    _uv = os.environ.get("UV") or shutil.which("uv")
    if not _uv:
        _tools = Path(__file__).resolve().parents[2] / "build" / "tools" / "bin" / "uv"
        _uv = str(_tools) if _tools.exists() else None
    if not _uv:
        sys.exit("kuberay_loop: needs httpx and the SDK (python/): run it with uv — "
                 "`uv run python scripts/e2e/kuberay_loop.py` (scripts/bootstrap installs uv "
                 "as build/tools/bin/uv)")
    _env = dict(os.environ, STARFORGE_LOOP_UV="1", UV_PYTHON_DOWNLOADS="never")
    os.execve(_uv, [_uv, "run", "--quiet", "--python", sys.executable, "--script",
                    str(Path(__file__).resolve()), *sys.argv[1:]], _env)

REPO = Path(__file__).resolve().parents[2]
PROG = "kuberay_loop"
TERMINAL = ("Succeeded", "Failed", "Cancelled")


class Failure(Exception):
    """A check that did not hold: the scenario fails with this message."""


class Skip(Exception):
    """The whole loop cannot run here (ctest's SKIP_RETURN_CODE 77)."""


def say(*words: Any) -> None:
    print(f"{PROG}:", *words, file=sys.stderr, flush=True)


def fail(message: str) -> None:
    raise Failure(message)


def tail(path: Path, n: int = 3) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return f"(no {path.name})"


def wait_file(path: Path, seconds: float, proc: Any = None) -> bool:
    """Until ``path`` is non-empty (False after ``seconds``, or when ``proc`` ended)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if path.stat().st_size > 0:
                return True
        except OSError:
            pass
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False


def poll(seconds: float, every: float, check: Callable[[], bool]) -> bool:
    """Calls ``check`` every ``every`` s until it is true (True) or ``seconds`` pass (False)."""
    deadline = time.monotonic() + seconds
    while True:
        if check():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)


def grep_files(paths: Iterable[Path], needles: Iterable[bytes]) -> List[Path]:
    """The files under ``paths`` (files or directories) that contain one of ``needles``."""
    hits = []
    for root in paths:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for f in files:
            try:
                data = f.read_bytes()
            except OSError:
                continue
            if any(n in data for n in needles):
                hits.append(f)
    return hits


NODES = """\
- metadata: {name: h200-a, labels: {starforge/gpu-series: h200}}
  status:
    capacity: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8"}
    allocatable: {cpu: "95", memory: 1000Gi, nvidia.com/gpu: "8"}
- metadata: {name: h200-b, labels: {starforge/gpu-series: h200}}
  status:
    capacity: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8"}
    allocatable: {cpu: "95", memory: 1000Gi, nvidia.com/gpu: "8"}
- metadata: {name: h200-c, labels: {starforge/gpu-series: h200}}
  spec: {unschedulable: true}
  status:
    capacity: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8"}
    allocatable: {cpu: "95", memory: 1000Gi, nvidia.com/gpu: "8"}
- metadata: {name: h100-a, labels: {starforge/gpu-series: h100}}
  status:
    capacity: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}
    allocatable: {cpu: "63", memory: 500Gi, nvidia.com/gpu: "8"}
- metadata: {name: h100-b, labels: {starforge/gpu-series: h100}}
  status:
    capacity: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}
    allocatable: {cpu: "63", memory: 500Gi, nvidia.com/gpu: "8"}
"""

# The PersistentVolume bound to the claim `data` on the real stack (the real scheduler does not
# place pods whose claim is unbound), whose directory kubesim-node's kubelet mounts
# (<pv-root>/<ns>/<claim>).
STORAGE_YAML = """\
apiVersion: v1
kind: PersistentVolume
metadata: {name: starforge-data}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteMany]
  storageClassName: ""
  hostPath: {path: "@DATA@"}
  claimRef: {namespace: starforge, name: data}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: starforge}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: starforge-data
  resources: {requests: {storage: 1Gi}}
"""

# Quota for one job of one GPU (and room for any CPU and memory: Kueue admits a workload only when
# the ClusterQueue covers every resource its pods request, the submitter's included).
KUEUE_QUEUES = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: one-gpu}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: "1000"}
      - {name: memory, nominalQuota: 100Ti}
      - {name: nvidia.com/gpu, nominalQuota: "1"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team-a, namespace: starforge}
spec: {clusterQueue: one-gpu}
"""

MAIN_PY = """\
import os, sys, time
print("hello from", os.environ.get("FORGE_JOB_ID"), flush=True)
for step in range(3):
    print(f"step {step} loss {1.0 / (step + 1):.3f}", flush=True)
    time.sleep(float(os.environ.get("STEP_SECONDS", "1")))
sys.exit(int(os.environ.get("EXIT_CODE", "0")))
"""

RAY_MAIN_PY = """\
import os, signal, sys, time
import ray  # the real library: the emulator has none
def stopped(signum, frame):
    print("got SIGTERM", flush=True)
    sys.exit(143)
ray.init()  # RAY_ADDRESS, set by Ray's job supervisor
# After ray.init(): it installs Ray's own SIGTERM handler (a stack dump, then death by the signal).
signal.signal(signal.SIGTERM, stopped)
@ray.remote(num_cpus=0)
def where():
    return ray.get_runtime_context().get_node_id()
print("ray", ray.__version__, "task ran on node", ray.get(where.remote()), flush=True)
print("alive nodes at", " ".join(sorted(n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"])),
      flush=True)
pin = os.environ.get("PIN_POOL")
if pin:  # a task pinned to a pool by the custom resource StarForge gives each pool's Ray nodes
    @ray.remote(num_cpus=0, resources={"pool_" + pin: 1})
    def pinned():
        return ray.util.get_node_ip_address()
    print("pinned to pool", pin, "ran on", ray.get(pinned.remote()), "driver on",
          ray.util.get_node_ip_address(), flush=True)
for step in range(3):
    print(f"step {step} loss {1.0 / (step + 1):.3f}", flush=True)
    time.sleep(float(os.environ.get("STEP_SECONDS", "0")))
sys.exit(int(os.environ.get("EXIT_CODE", "0")))
"""

# Job A of the Kueue scenarios runs until the test lets it go (a file in its job directory on the
# storage volume), so that it holds the quota for as long as the checks on B and C need.
GATE_PY = """\
import os, sys, time
gate = os.path.join(os.environ["FORGE_STORAGE_ROOT"], "jobs", os.environ["FORGE_JOB_ID"], "release")
print("holding the quota until", gate, "exists", flush=True)
for _ in range(1200):
    if os.path.exists(gate):
        break
    time.sleep(0.5)
else:
    sys.exit("never released")
print("step 2 loss 0.333", flush=True)
"""


class Detached:
    """A process started as an orphan (its parent exits at once, so it belongs to init): for the
    kubelets whose pods run real Ray. Ray's driver hook (ray._private.runtime_env.
    uv_runtime_env_hook, on by default) looks for a `uv run` among the ancestors of `ray job
    submit` and, finding this loop's, replaces the job's working_dir with the submitter's current
    directory — which the pod never meant. As an orphan the kubelet has no such ancestor. Offers
    the part of subprocess.Popen the loop uses."""

    def __init__(self, argv: List[str], stdout: Any, stderr: Any) -> None:
        self.args = argv
        self.returncode: Optional[int] = None
        r, w = os.pipe()
        middle = os.fork()
        if middle == 0:  # the middle process: starts the real one, tells its pid, exits
            code = 0
            try:
                os.close(r)
                p = subprocess.Popen(argv, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL)
                os.write(w, str(p.pid).encode())
            except BaseException:  # noqa: BLE001 — the parent sees no pid, and says so
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            pid = f.read().decode()
        os.waitpid(middle, 0)
        if not pid:
            fail(f"cannot start {argv[0]}")
        self.pid = int(pid)

    def poll(self) -> Optional[int]:
        if self.returncode is None:
            try:
                with open(f"/proc/{self.pid}/stat") as f:
                    gone = f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
            except OSError:
                gone = True
            if gone:
                self.returncode = -1  # (init reaps it: its status is not ours to read)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: Optional[float] = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(0.1)
        return self.returncode or 0


class Scenario:
    def __init__(self, key: str, title: str, run: Callable[[], Optional[str]]) -> None:
        self.key, self.title, self.run = key, title, run
        self.result = "SKIP"
        self.seconds = 0.0
        self.note = ""


class Loop:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.build = Path(args.build).resolve()
        self.forge_bin = str(self.build / "bin" / "forge")
        self.kubesim_bin = os.environ.get("KUBESIM") or str(self.build / "bin" / "kubesim")
        self.real = args.real
        self.kueue = args.kueue
        self.real_ray = args.ray == "real"
        self.kubeconfig = args.kubeconfig or ""
        self.sim = not self.kubeconfig and not self.real
        self.own = self.sim or self.real  # the loop made the cluster: it may check all of it
        self.operator = args.operator
        self.tools = REPO / "build" / "tools" / "bin"
        self.keep = args.keep or os.environ.get("KEEP") == "1"
        self.procs: List[Any] = []  # subprocess.Popen or Detached
        self.work = Path(".")
        self.node_proc: Any = None
        self.serve_proc: Optional[subprocess.Popen] = None
        self.k8s = ""
        self.bridge_ip = ""
        self.pod_cidr = ""
        self.ray_version = ""
        self.image = "python:3.12"
        self.series_big, self.series_small, self.gpus, self.wait_scale = "h200", "h100", 8, 1
        self.settings: Dict[str, Any] = {}
        self.ns = "starforge"
        self.storage_root = Path(".")
        self.shared = "true"
        self.client: Any = None
        self.jobs_run = 0  # jobs released (wait_released)
        self.submitted = 0  # jobs submitted: one RayJob each
        self.count_to: Optional[Path] = None
        self.audit_from = 0
        self.started = time.monotonic()
        self.code = Path(".")
        self.state: Dict[str, Any] = {}  # between the scenarios of one mode

    # -- processes ---------------------------------------------------------------------------
    def spawn(self, argv: List[str], log: str, out: Optional[str] = None, *, detach: bool = False) -> Any:
        """Starts ``argv`` in the background, stderr to ``work/log`` (stdout to ``work/out``, or
        there too); it is stopped (TERM, then waited for) when the loop ends. ``detach``: as an
        orphan (Detached), for a kubelet whose pods run real Ray."""
        with open(self.work / log, "ab") as err, open(self.work / (out or log), "ab") as so:
            if detach:
                p: Any = Detached(argv, so, err)
            else:
                p = subprocess.Popen(argv, stdout=so, stderr=err, stdin=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def stop(self, p: Any, sig: int = signal.SIGTERM, wait: float = 120) -> None:
        if p.poll() is None:
            try:
                p.send_signal(sig)
                p.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                say(f"process {p.pid} ({p.args[0]}) ignored TERM for {wait:.0f} s: KILL")
                p.kill()
                p.wait()
            except ProcessLookupError:
                pass

    def cleanup(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.terminate()
                except ProcessLookupError:
                    pass
        for p in self.procs:
            self.stop(p)
        if self.work != Path("."):
            if self.keep:
                say(f"kept {self.work}")
            else:
                shutil.rmtree(self.work, ignore_errors=True)

    def run(self, argv: List[str], *, input: Optional[str] = None, check: bool = True,
            what: str = "", env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
        io: Dict[str, Any] = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        p = subprocess.run(argv, capture_output=True, text=True, env=env, **io)
        if check and p.returncode != 0:
            err = "\n".join((p.stderr or p.stdout).strip().splitlines()[-5:])
            fail(f"{what or ' '.join(argv[:3])} exited {p.returncode}: {err}")
        return p

    def forge(self, *args: str, check: bool = True, input: Optional[str] = None) -> str:
        p = self.run([self.forge_bin, *args], check=check, input=input, what=f"forge {' '.join(args[:2])}")
        return p.stdout

    def kc(self, *args: str, check: bool = False, input: Optional[str] = None) -> subprocess.CompletedProcess:
        """kubectl on the job namespace, as the person running this script."""
        ctx = ["--context", os.environ["FORGE_K8S_CONTEXT"]] if os.environ.get("FORGE_K8S_CONTEXT") else []
        return self.run(["kubectl", "--kubeconfig", self.kubeconfig, *ctx, "-n", self.ns, *args],
                        check=check, input=input, what=f"kubectl {' '.join(args[:2])}")

    def k(self, *args: str, input: Optional[str] = None, check: bool = True) -> subprocess.CompletedProcess:
        """The real stack's own kubectl (build/tools/bin) as its administrator."""
        return self.run([str(self.tools / "kubectl"), "--kubeconfig", self.kubeconfig, *args],
                        input=input, check=check, what=f"kubectl {' '.join(args[:2])}")

    def kubesim_api(self, method: str, path: str, **kw: Any) -> httpx.Response:
        r = httpx.request(method, self.k8s + path, timeout=30, **kw)
        return r

    # -- preconditions -------------------------------------------------------------------------
    def check_prerequisites(self) -> None:
        a = self.args
        if self.real_ray:
            if self.kubeconfig:
                fail("--ray real runs on the simulator only (for now), not with --kubeconfig")
            self.ray_bin = REPO / "build" / "tools" / "ray-venv" / "bin"
            if not os.access(self.ray_bin / "ray", os.X_OK):
                fail(f"--ray real: no real Ray in {self.ray_bin}; run scripts/bootstrap "
                     "(it installs scripts/ray-requirements.txt there)")
            out = self.run([str(self.ray_bin / "ray"), "--version"], what="ray --version").stdout
            m = re.search(r"^ray, version (\S+)", out, re.M)
            if not m:
                fail(f"--ray real: {self.ray_bin}/ray --version printed no version")
            self.ray_version = m.group(1)
        if not shutil.which("kubectl"):
            fail("kubectl is not installed (the loop reads the cluster with it)")
        if self.kueue and not self.real:
            fail("--kueue needs --real (kubesim emulates Kueue with kubesim --kueue, scenario K)")
        if self.real:
            if self.kubeconfig:
                fail("--real starts its own control plane: no --kubeconfig")
            crds = {"v1.4": "v1.4.0", "v1.5": "v1.7.0", "v1.6": "v1.7.0"}.get(a.operator)
            # v1.6.2 is the newest operator the Go module proxy serves here (v1.7.0's zip is
            # refused); it and v1.5.0 run against the v1.7.0 CRDs StarForge validates against.
            if not crds:
                fail(f"--operator wants v1.4, v1.5 or v1.6, got '{a.operator}'")
            self.crds = REPO / "third_party" / "kuberay" / "crds" / crds
            for b in (self.tools / "hyperkube", self.tools / "kubectl",
                      self.tools / f"kuberay-operator-{a.operator}", self.build / "bin" / "kubesim-node"):
                if not os.access(b, os.X_OK):
                    if b.name == "kuberay-operator-v1.5":
                        fail(f"{b} is missing: run tools/k8s/build build/tools/bin kuberay-operator@v1.5.0 "
                             "(scripts/bootstrap builds v1.4.2 and v1.6.2 only)")
                    fail(f"{b} is missing: run scripts/bootstrap (it builds the real control plane and "
                         "operators with tools/k8s/build, and kubesim-node)")
            if self.kueue:
                if not os.access(self.tools / "kueue", os.X_OK):
                    fail(f"{self.tools}/kueue is missing: run scripts/bootstrap "
                         "(tools/k8s/build build/tools/bin kueue@v0.17.0)")
                if self.real_ray:
                    fail("--kueue runs with the Ray emulator only")
            if os.getuid() != 0:
                fail("--real needs root: kubesim-node gives every pod a network namespace (ip netns, a bridge)")
            if not shutil.which("ip"):
                fail("--real needs iproute2's ip (apt-get install iproute2)")
        if self.sim:
            h = subprocess.run([self.kubesim_bin, "--help"], capture_output=True, text=True)
            if "--controllers" not in h.stdout + h.stderr:
                raise Skip("this kubesim has no controllers, so nothing would run the RayJobs")

    # -- the pod network (kubesim --pod-network netns, kubesim-node) -----------------------------
    @staticmethod
    def free_pod_cidr() -> str:
        """The first 10.x.0.0/16 (x = 244..254) that no route of this host touches. Tests that
        use one run alone (RUN_SERIAL), so two of them never pick the same range at once."""
        routes = subprocess.run(["ip", "-4", "route", "show", "table", "all"],
                                capture_output=True, text=True).stdout
        for x in range(244, 255):
            if f"10.{x}." not in routes:
                return f"10.{x}.0.0/16"
        fail("no free 10.x.0.0/16 (x = 244..254) for the pods' network")
        return ""

    @staticmethod
    def wait_bridge(log: Path, proc: Any) -> str:
        """The bridge address a kubelet with --pod-network netns logs once its network is up."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                m = re.search(r"\(bridge address ([0-9.]+)\)", log.read_text(errors="replace"))
            except OSError:
                m = None
            if m:
                return m.group(1)
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        fail(f"{Path(str(proc.args[0])).name} made no pod network: {tail(log, 5)}")
        return ""

    def netns_left(self, pid: int) -> str:
        """What is left of the netns pod network of the kubelet process ``pid`` (namespaces
        ks<PID>-*, veths ksv<PID>-*, bridge ksbr<PID>)."""
        text = (subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout +
                subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout)
        return "\n".join(line for line in text.splitlines()
                         if f"ks{pid}-" in line or f"ksv{pid}-" in line or f"ksbr{pid}:" in line)

    def node_stopped_clean(self) -> Optional[str]:
        """Stops the kubelet process with the netns pod network (kubesim-node with --real, while
        the API server still runs; kubesim itself with --ray real on the simulator), then checks
        that it left no network namespace, veth or bridge behind."""
        p, self.node_proc = self.node_proc, None
        if p is None:
            return "no kubelet process with a pod network"
        t0 = time.monotonic()
        self.stop(p)
        what = "kubesim-node" if self.real else "kubesim"
        left = self.netns_left(p.pid)
        if left:
            fail(f"{what} left network namespaces or links behind: {left}")
        return f"{what} stopped in {time.monotonic() - t0:.0f} s, its network namespaces, veths and bridge gone"

    # -- the clusters ----------------------------------------------------------------------------
    def start_s3peer(self, addr: str) -> str:
        p = self.spawn(["node", str(REPO / "tools" / "s3peer" / "s3peer.js"), "--port-file",
                        str(self.work / "s3.port"), "--bucket", "starforge", "--address", addr],
                       "s3.log", "s3.out")
        if not wait_file(self.work / "s3.port", 30, p):
            fail(f"s3peer did not start; see {self.work}/s3.log: {tail(self.work / 's3.log')}")
        return f"http://{addr}:{(self.work / 's3.port').read_text().strip()}"

    def write_kubeconfig(self, path: Path, server: str) -> None:
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f'clusters: [{{name: sim, cluster: {{server: "{server}"}}}}]\n'
            "users: [{name: me, user: {}}]\n"
            "contexts: [{name: sim, context: {cluster: sim, user: me}}]\n"
            "current-context: sim\n")
        path.chmod(0o600)

    def own_cluster_settings(self) -> None:
        (self.work / "nodes.yaml").write_text(NODES)
        # Images that "exist" for kubesim's kubelet; anything else fails to pull.
        (self.work / "images.yaml").write_text('- "python:*"\n- "docker.io/library/python:*"\n- "rayproject/ray:*"\n')
        data = self.work / "pv" / "starforge" / "data"
        data.mkdir(parents=True)
        os.environ.update(FORGE_STORAGE_ROOT=str(data), FORGE_K8S_STORAGE_PVC="data",
                          FORGE_K8S_STORAGE_SHARED="true", FORGE_K8S_NAMESPACE="starforge",
                          FORGE_KUBERAY_TTL_SECONDS="60", FORGE_S3_BUCKET="starforge",
                          FORGE_S3_ACCESS_KEY="S3RVER", FORGE_S3_SECRET_KEY="S3RVER")
        self.ray_args = ["--ray", "real", "--ray-bin-dir", str(self.ray_bin)] if self.real_ray else []

    def start_sim(self) -> None:
        """kubesim (its API server on a port the kernel picks) and s3rver. The storage PVC `data`
        of namespace starforge is the host directory work/pv/starforge/data, which is also forge
        serve's FORGE_STORAGE_ROOT: the runner's driver.log lands where the server archives it."""
        net_args: List[str] = []
        if self.real_ray:
            # Real Ray binds its ports on every address (metrics 8080, dashboard 8265, GCS 6379,
            # …): on the host's network it would find them taken by whatever holds them there.
            # So every pod gets a network namespace of its own; pods reach the host at the bridge.
            if os.getuid() != 0:
                fail("--ray real needs root: every pod gets a network namespace (ip netns, a bridge)")
            if not shutil.which("ip"):
                fail("--ray real needs iproute2's ip (apt-get install iproute2)")
            self.pod_cidr = self.free_pod_cidr()
            net_args = ["--pod-network", "netns", "--pod-cidr", self.pod_cidr]
        w = self.work
        # --kueue: RayJobs with a queue label are created suspended, as Kueue's webhook does (K).
        p = self.spawn([self.kubesim_bin, "--listen", "127.0.0.1:0", "--port-file", str(w / "kubesim.port"),
                        "--nodes", str(w / "nodes.yaml"), "--controllers", "all", "--pv-root", str(w / "pv"),
                        "--images", str(w / "images.yaml"), "--kubelet-backoff-ms", "500", "--kueue",
                        *self.ray_args, *net_args], "kubesim.log", "kubesim.out", detach=self.real_ray)
        if not wait_file(w / "kubesim.port", 30, p):
            fail(f"kubesim did not start; see {w}/kubesim.log: {tail(w / 'kubesim.log')}")
        self.k8s = f"http://127.0.0.1:{(w / 'kubesim.port').read_text().strip()}"
        if self.real_ray:
            self.node_proc = p  # node_stopped_clean checks what its pod network left behind
            self.bridge_ip = self.wait_bridge(w / "kubesim.log", p)
            say(f"pods in network namespaces of their own ({self.pod_cidr}, bridge {self.bridge_ip})")
        self.kubesim_api("POST", "/api/v1/namespaces", json={"metadata": {"name": "starforge"}}).raise_for_status()
        self.kubesim_api("POST", "/api/v1/namespaces/starforge/persistentvolumeclaims", json={
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        }).raise_for_status()
        self.kubesim_api("PATCH", "/api/v1/namespaces/starforge/persistentvolumeclaims/data/status",
                         content=json.dumps({"status": {"phase": "Bound"}}),
                         headers={"Content-Type": "application/merge-patch+json"})
        s3 = self.start_s3peer(self.bridge_ip or "127.0.0.1")
        self.kubeconfig = str(w / "kubeconfig")
        self.write_kubeconfig(Path(self.kubeconfig), self.k8s)
        os.environ.update(FORGE_K8S_API_SERVER=self.k8s, FORGE_S3_ENDPOINT=s3)

    def start_real(self) -> None:
        """The control plane, kubesim-node, s3rver and the operator; the FORGE_* settings of forge
        serve as ServiceAccount starforge:forge."""
        t0 = time.monotonic()
        w, cp = self.work, self.work / "cp"
        p = self.spawn([str(REPO / "tools" / "k8s" / "controlplane"), "up", str(cp), "--hyperkube",
                        str(self.tools / "hyperkube"), "--audit"], "controlplane.log", "controlplane.out")
        if not wait_file(cp / "ready", 180, p):
            sys.stderr.write(tail(w / "controlplane.log", 40) + "\n")
            fail("the control plane did not start" if p.poll() is not None
                 else "the control plane was not ready after 180 s")
        self.k8s = (cp / "ready").read_text().strip()
        self.kubeconfig = str(cp / "kubeconfig")
        say(f"control plane ready in {time.monotonic() - t0:.0f} s at {self.k8s}")
        self.k("create", "-f", str(self.crds))
        self.pod_cidr = self.free_pod_cidr()
        self.node_proc = self.spawn(
            [str(self.build / "bin" / "kubesim-node"), "--kubeconfig", self.kubeconfig, "--nodes",
             str(w / "nodes.yaml"), "--pod-network", "netns", "--pod-cidr", self.pod_cidr,
             "--cluster-hosts-file", str(w / "cluster-hosts"), "--pv-root", str(w / "pv"), "--images",
             str(w / "images.yaml"), "--kubelet-backoff-ms", "500", "--kubelet-probe-max-ms", "2000",
             "--kubelet-dir", str(w / "kubelet"), *self.ray_args], "node.log", detach=self.real_ray)
        self.bridge_ip = self.wait_bridge(w / "node.log", self.node_proc)
        if not wait_file(w / "cluster-hosts", 30):
            fail(f"kubesim-node wrote no cluster hosts file: {tail(w / 'node.log', 5)}")
        # s3rver where both forge serve (the host) and the pods reach it: the bridge's address.
        s3 = self.start_s3peer(self.bridge_ip)
        for crd in ("rayjobs", "rayclusters", "rayservices"):
            poll(60, 0.2, lambda crd=crd: self.k(
                "get", "crd", f"{crd}.ray.io", "-o",
                'jsonpath={.status.conditions[?(@.type=="Established")].status}', check=False).stdout == "True")
        self.spawn([str(REPO / "tools" / "k8s" / "with-hosts"), str(w / "cluster-hosts"),
                    str(self.tools / f"kuberay-operator-{self.operator}"), "--kubeconfig", self.kubeconfig,
                    "--enable-leader-election=false", "--metrics-addr=0", "--health-probe-bind-address=0"],
                   "operator.log")
        # The namespace, forge's ServiceAccount and rights (deploy/rbac.yaml), the storage volume.
        self.k("create", "namespace", "starforge")
        self.k("apply", "-f", str(REPO / "deploy" / "rbac.yaml"))
        self.k("apply", "-f", "-", input=STORAGE_YAML.replace("@DATA@", str(w / "pv" / "starforge" / "data")))
        if not poll(30, 0.2, lambda: self.k("-n", "starforge", "get", "pvc", "data", "-o",
                                              "jsonpath={.status.phase}", check=False).stdout == "Bound"):
            fail("the claim starforge/data was not bound to its PersistentVolume")
        token = self.k("-n", "starforge", "create", "token", "forge", "--duration", "2h").stdout.strip()
        os.environ.update(FORGE_K8S_API_SERVER=self.k8s, FORGE_K8S_TOKEN=token,
                          FORGE_K8S_CA_FILE=str(cp / "pki" / "ca.crt"), FORGE_S3_ENDPOINT=s3)
        say(f"real stack up in {time.monotonic() - t0:.0f} s: kube-apiserver v1.32, KubeRay operator "
            f"{self.operator}, kubesim-node (pods in network namespaces, {self.pod_cidr}, bridge "
            f"{self.bridge_ip}), s3rver on {s3}")

    def setting(self, name: str) -> str:
        v = self.settings.get(name, "")
        return str(v).lower() if isinstance(v, bool) else str(v)

    def setup(self) -> Optional[str]:
        """Everything before the first job: the cluster, the settings, forge serve, a token."""
        if self.own:
            self.own_cluster_settings()
        if self.sim:
            self.start_sim()
        elif self.real:
            self.start_real()
        if self.own and self.real_ray:  # the jobs' Ray is the venv's; Ray starts slowly
            os.environ["FORGE_KUBERAY_RAY_VERSION"] = self.ray_version
            self.image, self.wait_scale = f"rayproject/ray:{self.ray_version}", 4
        if not self.own:  # a real cluster (--kubeconfig)
            kc = Path(self.kubeconfig)
            if not os.access(kc, os.R_OK):
                fail(f"--kubeconfig {self.kubeconfig}: no such readable file")
            self.kubeconfig = str(kc.resolve())
            os.environ["KUBECONFIG"] = self.kubeconfig  # forge's own fallback without FORGE_K8S_API_SERVER
            self.wait_scale = 4  # first pulls of Ray images take minutes
        os.environ["FORGE_DEFAULT_FLEET_KIND"] = "kuberay"

        # The effective settings, as forge serve will read them (a wrong one stops here, named).
        self.settings = json.loads(self.forge("config", "-o", "json"))
        self.ns = self.setting("FORGE_K8S_NAMESPACE")
        self.storage_root = Path(self.setting("FORGE_STORAGE_ROOT"))
        self.shared = self.setting("FORGE_K8S_STORAGE_SHARED")
        if not self.own:
            self.real_cluster_settings()

        # A token made on the store directly, as an operator would; valid across restarts.
        token = self.forge("token", "create", "--user", "e2e-loop", "--admin", "--description",
                           "scripts/e2e/kuberay_loop.py").strip()
        os.environ["FORGE_TOKEN"] = token
        self.start_serve()
        server = f"http://127.0.0.1:{(self.work / 'forge.port').read_text().strip()}"
        os.environ["FORGE_SERVER"] = server
        # The SDK packs code with the CLI's capsule builder (`forge submit`), given here.
        self.client = starforge.Client(server, token, forge=self.forge_bin)
        me = self.client.whoami()
        if me.user != "e2e-loop" or not me.admin:
            fail(f"whoami through the SDK: {me}, expected the admin e2e-loop")
        self.started = time.monotonic()
        self.code = self.work / "code"
        self.code.mkdir()
        (self.code / "main.py").write_text(MAIN_PY)
        where = {True: "the simulator", False: "a real cluster"}[self.sim]
        if self.real:
            where = f"the real stack (operator {self.operator})"
        return f"{where}, forge serve at {server}, namespace {self.ns}, image {self.image}"

    def real_cluster_settings(self) -> None:
        if not self.setting("FORGE_S3_ENDPOINT"):
            fail("FORGE_S3_ENDPOINT is not set: the loop needs the object store the pods fetch capsules from")
        if not self.setting("FORGE_K8S_STORAGE_PVC"):
            fail("FORGE_K8S_STORAGE_PVC is not set: the loop reads each job's driver.log from that volume")
        if not self.storage_root.is_dir():
            fail(f"FORGE_STORAGE_ROOT={self.storage_root} is not a directory here (it must be the storage "
                 "volume as this machine sees it)")
        p = self.kc("get", "rayjobs.ray.io", "-o", "name")
        if p.returncode != 0:
            fail(f"cannot list RayJobs in namespace {self.ns} with {self.kubeconfig}: "
                 f"{p.stderr.strip()[-300:]} (is the KubeRay operator installed? see scripts/e2e/setup-kind.sh)")
        label = self.setting("FORGE_K8S_GPU_NODE_LABEL")
        series = os.environ.get("FORGE_E2E_GPU_SERIES", "")
        if not series:
            p = self.kc("get", "nodes", "-l", label, "-o", "json")
            items = json.loads(p.stdout)["items"] if p.returncode == 0 else []
            series = items[0]["metadata"]["labels"][label] if items else ""
        if not series:
            fail(f"no node has the label {label} (FORGE_K8S_GPU_NODE_LABEL): label one, or set FORGE_E2E_GPU_SERIES")
        self.series_big = self.series_small = series
        self.image = os.environ.get("FORGE_E2E_IMAGE") or \
            f"rayproject/ray:{self.setting('FORGE_KUBERAY_RAY_VERSION')}"
        self.gpus = int(os.environ.get("FORGE_E2E_GPUS", "1"))
        say(f"real cluster: namespace {self.ns}, series {self.series_big}, image {self.image}, "
            f"{self.gpus} GPU(s) per machine, storage root {self.storage_root} (shared: {self.shared})")

    def start_serve(self) -> None:
        """(Re)starts forge serve on the same port and storage root."""
        port_file, new = self.work / "forge.port", self.work / "forge.port.new"
        listen = f"127.0.0.1:{port_file.read_text().strip()}" if port_file.exists() else "127.0.0.1:0"
        new.unlink(missing_ok=True)
        self.serve_proc = self.spawn([self.forge_bin, "serve", "--listen", listen, "--port-file", str(new),
                                      "--resync-ms", "200"], "serve.log", "serve.out")
        if not wait_file(new, 30, self.serve_proc):
            fail(f"forge serve did not start: {tail(self.work / 'serve.log')}")
        new.rename(port_file)

    def doctor(self) -> str:
        """forge doctor, as the server runs it: on kubesim every prerequisite is in place (the
        operator runs inside kubesim, not as a pod: a warning); on a real cluster it is shown."""
        p = self.run([self.forge_bin, "doctor"], check=False)
        text = (p.stdout + p.stderr).strip()
        if p.returncode == 0:
            return text.splitlines()[-1] if text else "ok"
        if self.sim:
            fail(f"forge doctor failed on kubesim: {text}")
        sys.stderr.write(text + "\n")
        return "found problems (above)"

    # -- jobs ------------------------------------------------------------------------------------
    def submit(self, name: str, spec: str, code: Optional[Path] = None, *, plain: bool = False) -> Any:
        """Submits JobSpec text ``spec`` with ``code`` (default the loop's main.py) through the
        SDK: by the CLI's capsule builder, or (``plain``) as the API's code upload."""
        path = self.work / f"{name}.yaml"
        path.write_text(spec)
        job = self.client.submit(path, code=code or self.code, use_forge=not plain)
        self.submitted += 1
        self.state.setdefault("ids", []).append(job.id)
        self.state.setdefault("phases", {})[job.id] = [job.phase]
        if job.name != name:
            fail(f"submit {name}: the SDK's Job is named {job.name}")
        return job

    def wait_phase(self, job: Any, want: str, seconds: float) -> None:
        """Until ``job`` is in phase ``want``, recording every phase seen."""
        phases = self.state.setdefault("phases", {}).setdefault(job.id, [])

        def reached() -> bool:
            if not self.refreshed(job):
                return False
            if not phases or phases[-1] != job.phase:
                phases.append(job.phase)
            return job.phase == want or job.phase in TERMINAL

        poll(seconds * self.wait_scale, 0.2, reached)
        if job.phase != want:
            sys.stderr.write(self.forge("describe", "job", job.id, check=False))
            fail(f"job {job.id}: phase {job.phase} ({job.reason}: {job.message}), expected {want}")

    @staticmethod
    def refreshed(job: Any) -> bool:
        """Reads the job again; False when forge serve is not there (being restarted: a pooled
        connection to the killed one fails once)."""
        try:
            job.refresh()
            return True
        except starforge.StarForgeError as e:
            if e.code == "Connection":
                return False
            raise

    def phase_now(self, job: Any) -> str:
        """The phase `forge get jobs ID -o json` shows, checked against the SDK's."""
        cli = json.loads(self.forge("get", "jobs", job.id, "-o", "json"))["phase"]
        job.refresh()
        if cli != job.phase and cli not in TERMINAL:
            fail(f"job {job.id}: forge get says {cli}, the SDK {job.phase}")
        return job.phase

    def nothing_left(self, job_id: str) -> bool:
        """Nothing of the job is left in the cluster: no RayJob, RayCluster or pod with its label
        (the operator copies the RayJob's labels to the RayCluster; StarForge labels the pod
        templates), no submitter Job or pod (KubeRay names the Job after the RayJob, sf-<id>, and
        labels its pods only with the Job's name). On a cluster of the loop's own the namespace
        must be empty altogether. (kubesim may be injecting faults: a refused read is "not yet".)"""
        queries = [("get", "rayjobs.ray.io,rayclusters.ray.io,pods", "-l", f"starforge/job-id={job_id}", "-o", "name"),
                   ("get", "pods", "-l", f"batch.kubernetes.io/job-name=sf-{job_id}", "-o", "name"),
                   ("get", "jobs.batch", f"sf-{job_id}", "--ignore-not-found", "-o", "name")]
        if self.own:
            queries.append(("get", "rayjobs.ray.io,rayclusters.ray.io,pods", "-o", "name"))
        for q in queries:
            p = self.kc(*q)
            if p.returncode != 0 or p.stdout.strip():
                return False
        return True

    def wait_released(self, job: Any) -> None:
        """The job's machines are given back (cleanup.released through the SDK), then nothing of
        it is left in the cluster."""
        self.jobs_run += 1
        if not poll(30 * self.wait_scale, 0.2, lambda: self.refreshed(job) and job.cleanup.released):
            fail(f"job {job.id} not released")
        if self.count_to is not None:  # forge serve's requests since the reset, before kubectl's
            if self.sim:
                self.count_to.write_text(self.kubesim_api("GET", "/kubesim/requests").text)
            else:
                self.count_to.write_text(str(self.audit_lines()))
            self.count_to = None
        if not poll(30 * self.wait_scale, 0.2, lambda: self.nothing_left(job.id)):
            sys.stderr.write(self.kc("get", "rayjobs.ray.io,rayclusters.ray.io,pods", "-o", "wide").stdout)
            fail(f"objects left in the cluster after job {job.id}")

    @staticmethod
    def sdk_text(job: Any) -> str:
        """What the SDK says about a job: its reason and message, its timeline's, its events'."""
        parts = [job.phase, job.reason, job.message]
        for t in job.timeline or []:
            parts += [t.to, t.reason, t.message, t.cause]
        for e in job.events():
            parts += [e.reason, e.message]
        return "\n".join(p for p in parts if p)

    def describe_has(self, job: Any, text: str, seconds: float) -> None:
        """``text`` shows, within ``seconds``, in what the SDK reads of the job (its reason,
        message, timeline and events), and then in `forge describe job`."""
        def sdk() -> bool:
            return text in self.sdk_text(self.client.job(job.id))

        if not poll(seconds * self.wait_scale, 0.2, sdk):
            described = self.forge("describe", "job", job.id, check=False)
            sys.stderr.write(described)
            where = "forge describe shows it, the SDK's Job and events do not" if text in described else \
                "nor does forge describe"
            fail(f"job {job.id}: the SDK never showed \"{text}\" ({where})")
        if not poll(5 * self.wait_scale, 0.2,
                    lambda: text in self.forge("describe", "job", job.id, check=False)):
            sys.stderr.write(self.forge("describe", "job", job.id, check=False))
            fail(f"forge describe job {job.id} never showed \"{text}\" (the SDK did)")

    def output_archived(self, job: Any) -> None:
        """The job's output reached its archived driver.log (the runner writes it on the storage
        volume), and the API serves it (the SDK's job.logs())."""
        try:
            text = (self.storage_root / "jobs" / job.id / "logs" / "driver.log").read_text(errors="replace")
        except OSError:
            text = ""
        if "step 2 loss" not in text:
            fail(f"job {job.id}: logs/driver.log under {self.storage_root} lacks the job's output")
        if "step 2 loss" not in job.logs():
            fail(f"job {job.id}: the API's log (job.logs()) lacks the job's output")

    def logs_dir(self, job: Any) -> Path:
        return self.storage_root / "jobs" / job.id / "logs"

    def archived(self, job: Any, *names: str) -> None:
        for f in names:
            p = self.logs_dir(job) / f
            if not p.exists() or p.stat().st_size == 0:
                fail(f"job {job.id}: logs/{f} not archived")

    def tamper_capsule(self, code: Path, spec: str, name: str) -> str:
        """Stores, under the content address of the capsule forge would build for JobSpec
        ``spec`` and ``code``, that capsule with one byte changed: the server finds the key
        present and uses it. Returns the SHA-256."""
        spec_file, out = self.work / f"{name}.yaml", self.work / "tampered.zip"
        spec_file.write_text(spec)
        built = self.forge("capsule", "build", str(code), "--job", str(spec_file), "-o", str(out))
        m = re.search(r"^sha256 *([0-9a-f]{64})$", built, re.M)
        if not m:
            fail(f"forge capsule build printed no digest: {built}")
        b = bytearray(out.read_bytes())
        b[len(b) // 2] ^= 0xFF
        out.write_bytes(bytes(b))
        self.forge("storage", "put", str(out), f"capsules/sha256-{m.group(1)}.zip")
        return m.group(1)

    def refused_by_fetch_check(self, job: Any) -> None:
        """A job whose capsule was tampered with: the init container's SHA-256 check stops its
        pods (CapsuleFetchFailed, SHA-256 mismatch in describe); cancelled, it releases all."""
        self.describe_has(job, "CapsuleFetchFailed", 60)
        self.describe_has(job, "SHA-256 mismatch", 5)
        self.cancel(job)
        self.wait_phase(job, "Cancelled", 60)
        self.wait_released(job)

    def cancel(self, job: Any) -> None:
        c = job.cancel()
        if not c.cancel_requested and c.phase not in TERMINAL:
            fail(f"job {job.id}: cancel through the SDK, but cancelRequested is false ({c.phase})")

    # -- the Kubernetes API's request counts -------------------------------------------------------
    def audit_lines(self) -> int:
        with open(self.work / "cp" / "audit.log", "rb") as f:
            return sum(1 for _ in f)

    def audit_count(self, first: int, last: int) -> str:
        """The audit log's requests in lines first+1..last, for namespace starforge and
        cluster-scoped ones, by client (user agent), verb and resource, with the error answers
        among them (409 conflicts, 404s). Watches are counted when they end."""
        counts: collections.Counter = collections.Counter()
        refused: Dict[Tuple[str, str, str], collections.Counter] = collections.defaultdict(collections.Counter)
        with open(self.work / "cp" / "audit.log") as f:
            for i, line in enumerate(f, 1):
                if i <= first or i > last:
                    continue
                e = json.loads(line)
                ref = e.get("objectRef") or {}
                if e.get("stage") != "ResponseComplete" or ref.get("namespace", "starforge") != "starforge":
                    continue
                if not ref.get("resource"):  # /apis/<group>/<version> and other discovery
                    continue
                agent = e.get("userAgent", "").split("/")[0]
                if agent.startswith("kube-controller-manager"):
                    agent = "kube-controller-manager"
                sub = "/" + ref["subresource"] if ref.get("subresource") else ""
                key = (agent, e["verb"], ref.get("resource", "") + sub)
                counts[key] += 1
                code = (e.get("responseStatus") or {}).get("code", 0)
                if code >= 300:
                    refused[key][code] += 1
        per: collections.Counter = collections.Counter()
        for (a, _v, _r), n in counts.items():
            per[a] += n
        lines = ["%d API requests (%s):" % (sum(counts.values()), ", ".join(
            "%s %d" % kv for kv in sorted(per.items(), key=lambda kv: -kv[1])))]
        for (a, v, r), n in sorted(counts.items()):
            errors = ", ".join("%d× %d" % (m, c) for c, m in sorted(refused[(a, v, r)].items()))
            lines.append("    %-26s %-7s %-30s %d%s" % (a, v, r, n, "  (" + errors + ")" if errors else ""))
        return "\n".join(lines)

    @staticmethod
    def requests_text(r: Dict[str, Any]) -> str:
        per = sorted(r["requests"].items(), key=lambda kv: -kv[1])
        return "%d API requests (%s)" % (r["total"], ", ".join("%s %d" % kv for kv in per))

    # -- scenarios 1-8 and K (the Ray emulator, or a real cluster) --------------------------------
    def spec(self, name: str, pools: str, extra: str = "", image: Optional[str] = None) -> str:
        return (f"name: {name}\nfleet: kuberay\nimage: {image or self.image}\nentrypoint: python3 main.py\n"
                f"{extra}pools:\n{pools}")

    def s1_two_pools(self) -> str:
        b, s, g = self.series_big, self.series_small, self.gpus
        if self.own:
            pools = (f"  - {{name: train, gpuSeries: {b}, machines: 2, gpusPerMachine: {g}}}\n"
                     f"  - {{name: rollout, gpuSeries: {s}, machines: 1, gpusPerMachine: {g}}}\n")
        elif self.shared == "true":
            pools = (f"  - {{name: train, gpuSeries: {b}, gpusPerMachine: {g}}}\n"
                     f"  - {{name: rollout, gpuSeries: {s}, gpusPerMachine: {g}}}\n")
        else:  # a ReadWriteOnce volume: StarForge refuses jobs of more than one machine
            say("scenario 1: one pool of one machine (FORGE_K8S_STORAGE_SHARED=false)")
            pools = f"  - {{name: train, gpuSeries: {b}, gpusPerMachine: {g}}}\n"
        # Count the API requests of this job's whole life (submit to release).
        if self.sim:
            self.kubesim_api("DELETE", "/kubesim/requests").raise_for_status()
            self.count_to = self.work / "requests.one-job.json"
        elif self.real:  # the real API server's audit log: its lines from here to the release
            self.audit_from = self.audit_lines()
            self.count_to = self.work / "audit.one-job"
        job = self.submit("two-pools", self.spec("two-pools", pools))
        say(f"scenario 1: job {job.id}")
        self.wait_phase(job, "Succeeded", 300)
        # (the first poll may still see the phases before the RayJob exists)
        seen = " ".join(self.state["phases"][job.id])
        if not re.fullmatch(r"((Queued|Packaging|Submitting) )*Pending Running Succeeded", seen):
            fail(f"job {job.id} phases: {seen}")
        # The server's own record of them, through the SDK: every phase once, in the order.
        order = [t.to for t in job.timeline or []]
        if not re.fullmatch(r"(Queued )?(Packaging )?(Submitting )?Pending Running Succeeded", " ".join(order)):
            fail(f"job {job.id}: its timeline is {order}")
        if job.exit_code != 0 or not job.started_at or not job.finished_at or job.finished_at < job.started_at:
            fail(f"job {job.id}: exit code {job.exit_code}, started {job.started_at}, finished {job.finished_at}")
        self.wait_released(job)
        self.output_archived(job)
        self.archived(job, "ray-job.log", "submitter.log", "events.json", "rayjob.json")
        logs = self.logs_dir(job)
        # Every archived log is reachable through the API, not only on the storage volume: the CLI…
        ray_log = self.run([self.forge_bin, "logs", job.id, "--ray"], what="forge logs --ray").stdout
        if ray_log != (logs / "ray-job.log").read_text():
            fail(f"job {job.id}: forge logs --ray is not logs/ray-job.log")
        try:
            json.loads(self.forge("logs", job.id, "--events"))
        except ValueError:
            fail(f"job {job.id}: forge logs --events is not events.json")
        listed = self.forge("logs", job.id, "--list")
        names = ("driver.log", "ray-job.log", "submitter.log", "events.json", "rayjob.json")
        for f in names:
            if not re.search(rf"^{re.escape(f)}\t", listed, re.M):
                fail(f"job {job.id}: forge logs --list lacks {f}: {listed}")
        # … and the SDK: the artifacts with their sizes, any file by name.
        sizes = {a.name: a.size for a in job.artifacts()}
        for f in names:
            if f not in sizes:
                fail(f"job {job.id}: job.artifacts() lacks {f}: {sorted(sizes)}")
        if sizes["ray-job.log"] != (logs / "ray-job.log").stat().st_size:
            fail(f"job {job.id}: job.artifacts() says ray-job.log has {sizes['ray-job.log']} bytes")
        if job.logs(file="rayjob.json") != (logs / "rayjob.json").read_text():
            fail(f"job {job.id}: job.logs(file='rayjob.json') is not logs/rayjob.json")
        # nothing_left looks for the submitter Job and its pods under this name
        rj_name = json.loads((logs / "rayjob.json").read_text())["metadata"]["name"]
        if rj_name != f"sf-{job.id}":
            fail(f"job {job.id}: RayJob named {rj_name}, expected sf-{job.id}")
        if self.phase_now(job) != "Succeeded":
            fail(f"job {job.id}: forge get says {job.phase}")
        if not any(j.id == job.id for j in self.client.jobs(name="two-pools", phase="Succeeded")):
            fail(f"job {job.id}: not in client.jobs(name='two-pools', phase='Succeeded')")
        return f"job {job.id}: {' → '.join(order)}, {len(sizes)} log files through the API"

    def s2_bad_image(self) -> str:
        job = self.submit("bad-image", self.spec(
            "bad-image", f"  - {{name: main, gpuSeries: {self.series_small}, gpusPerMachine: 1}}\n",
            f"deadlines: {{preRunningSeconds: {15 * self.wait_scale}}}\n", image="registry.invalid/nope:1"))
        say(f"scenario 2: job {job.id}")
        self.describe_has(job, "ImagePullFailed", 60)
        self.wait_phase(job, "Failed", 60)
        self.describe_has(job, "PreRunningDeadlineExceeded", 5)
        if job.reason != "PreRunningDeadlineExceeded":
            fail(f"job {job.id}: reason {job.reason}, expected PreRunningDeadlineExceeded")
        self.wait_released(job)
        return f"job {job.id}: ImagePullFailed, then Failed/{job.reason}"

    def s3_too_big(self) -> str:
        if self.own:  # three machines of 8 GPUs: two h200 nodes are free, the third is cordoned
            pool = "{name: main, gpuSeries: h200, machines: 3, gpusPerMachine: 8}"
        else:  # more CPUs than any node has (admitted: CPUs are not what StarForge counts)
            pool = (f"{{name: main, gpuSeries: {self.series_big}, gpusPerMachine: {self.gpus}, "
                    'cpusPerMachine: "100000"}')
        job = self.submit("too-big", self.spec("too-big", f"  - {pool}\n",
                                               f"deadlines: {{preRunningSeconds: {20 * self.wait_scale}}}\n"))
        say(f"scenario 3: job {job.id}")
        self.describe_has(job, "Unschedulable", 60)
        if self.own:
            self.describe_has(job, "cordoned", 5)
        self.forge("cancel", job.id)  # the CLI's cancel
        self.wait_phase(job, "Cancelled", 60)
        self.wait_released(job)
        named = " (the cordoned node named)" if self.own else ""
        return f"job {job.id}: Unschedulable{named}, forge cancel → Cancelled"

    def s4_exit_3(self) -> str:
        job = self.submit("exit-3", self.spec(
            "exit-3", f"  - {{name: main, gpuSeries: {self.series_small}, gpusPerMachine: 1}}\n",
            'env: {EXIT_CODE: "3", STEP_SECONDS: "0"}\n'), plain=True)
        say(f"scenario 4: job {job.id} (its code sent by the SDK's plain upload)")
        self.wait_phase(job, "Failed", 300)
        self.describe_has(job, "AppFailed", 5)
        if job.reason != "AppFailed":
            fail(f"job {job.id}: reason {job.reason}, expected AppFailed")
        self.wait_released(job)
        self.output_archived(job)
        return f"job {job.id}: Failed/AppFailed, exit code {job.exit_code}, its output archived"

    def s5_cancel(self) -> str:
        job = self.submit("cancel-me", self.spec(
            "cancel-me", f"  - {{name: main, gpuSeries: {self.series_small}, gpusPerMachine: 1}}\n",
            'env: {STEP_SECONDS: "60"}\n'))
        say(f"scenario 5: job {job.id}")
        self.wait_phase(job, "Running", 300)
        # The live log through the SDK until the job writes its first step, then the cancel; the
        # stream ends by itself with the job.
        seen: List[str] = []
        deadline = time.monotonic() + 120 * self.wait_scale
        for line in job.logs(follow=True):
            seen.append(line)
            if "step 0 loss" in line:
                self.cancel(job)
            if time.monotonic() > deadline:
                fail(f"job {job.id}: no 'step 0 loss' in its live log after {120 * self.wait_scale} s: {seen[-3:]}")
        if not any("step 0 loss" in x for x in seen):
            fail(f"job {job.id}: its live log ended without 'step 0 loss': {seen[-3:]}")
        if job.log_end is None or job.log_end.phase != "Cancelled":
            fail(f"job {job.id}: the live log's end event is {job.log_end}, expected Cancelled")
        self.wait_phase(job, "Cancelled", 60)
        self.wait_released(job)
        return f"job {job.id}: followed live ({len(seen)} lines), cancelled while Running"

    def sk_kueue_sim(self) -> str:
        """Kueue holds the job (suspended) past its pre-running deadline, then admits it: the time
        in the queue does not count. kubesim --kueue plays Kueue's webhook; the admission is
        Kueue's spec.suspend=false."""
        job = self.submit("queued", self.spec(
            "queued", f"  - {{name: main, gpuSeries: {self.series_small}, gpusPerMachine: 1}}\n",
            f"queue: team-a\ndeadlines: {{preRunningSeconds: {15 * self.wait_scale}}}\n"))
        say(f"scenario K: job {job.id} (queued by Kueue in team-a)")
        self.describe_has(job, "QueuedByKueue", 60)
        time.sleep(18 * self.wait_scale)  # longer than preRunningSeconds, all of it in the queue
        if self.phase_now(job) != "Pending":
            fail(f"job {job.id}: {job.phase} after its pre-running deadline in the queue, expected Pending")
        self.kc("patch", "rayjobs.ray.io", f"sf-{job.id}", "--type", "merge", "-p", '{"spec":{"suspend":false}}',
                check=True)
        self.wait_phase(job, "Succeeded", 300)
        self.describe_has(job, "Admitted", 5)
        self.wait_released(job)
        return f"job {job.id}: Pending {18 * self.wait_scale} s in the queue, then admitted and Succeeded"

    def s6_tampered(self) -> str:
        """HTTP-only storage (every job above fetched its capsule over http:// through the init
        container into the same file:// path); now a tampered capsule object."""
        code6 = self.work / "code6"
        code6.mkdir()
        (code6 / "main.py").write_text('print("never runs")\n')
        spec = self.spec("tampered", "  - {name: main, gpuSeries: h100, gpusPerMachine: 1}\n",
                         "deadlines: {preRunningSeconds: 30}\n", image="python:3.12")
        # The capsule the server will build for this job (same code, same JobSpec, same bytes),
        # stored with one byte changed under its content address.
        sha = self.tamper_capsule(code6, spec, "tampered")
        job = self.submit("tampered", spec, code6)
        say(f"scenario 6: job {job.id} (capsule sha256-{sha} tampered)")
        if job.capsule is None or job.capsule.sha256 != sha:
            job.refresh()
        if job.capsule is None or job.capsule.sha256 != sha:
            fail(f"job {job.id}: its capsule is {job.capsule}, not the tampered sha256-{sha}")
        self.refused_by_fetch_check(job)
        return f"job {job.id}: capsule sha256-{sha[:12]}… tampered → CapsuleFetchFailed (SHA-256 mismatch)"

    def s7_kill_serve(self) -> str:
        job = self.submit("survivor", self.spec("survivor", "  - {name: main, gpuSeries: h100, gpusPerMachine: 1}\n",
                                                'env: {STEP_SECONDS: "3"}\n', image="python:3.12"))
        say(f"scenario 7: job {job.id}")
        self.wait_phase(job, "Running", 300)
        assert self.serve_proc is not None
        self.stop(self.serve_proc, signal.SIGKILL)
        self.start_serve()
        self.wait_phase(job, "Succeeded", 300)
        self.wait_released(job)
        text = (self.logs_dir(job) / "driver.log").read_text(errors="replace")
        if text.count("step 2 loss") != 1:
            fail(f"job {job.id} ran more than once or not at all")
        # One RayJob per job so far: the restart created nothing twice.
        if self.sim:
            created = self.kubesim_api("GET", "/kubesim/requests").json()["requests"].get("create rayjobs", 0)
        else:  # forge serve's successful creates of RayJobs, from the audit log
            created = 0
            with open(self.work / "cp" / "audit.log") as f:
                for line in f:
                    e = json.loads(line)
                    if (e.get("stage") == "ResponseComplete" and e["verb"] == "create"
                            and (e.get("objectRef") or {}).get("resource") == "rayjobs"
                            and e.get("userAgent", "").startswith("starforge")
                            and e.get("responseStatus", {}).get("code") == 201):
                        created += 1
        if created != self.submitted:
            fail(f"{created} RayJobs created for {self.submitted} jobs")
        return f"job {job.id}: forge serve killed while Running, restarted; ran once; {created} RayJobs, one per job"

    def s8_faults(self) -> str:
        """Faults on (5% 5xx, 429s, dropped watches, 410s): every job still converges."""
        r = self.kubesim_api("POST", "/kubesim/faults", json={"rules": [
            {"verb": "*", "resource": "*", "code": 503, "rate": 0.05, "count": -1},
            {"verb": "*", "resource": "*", "code": 429, "rate": 0.03, "count": -1, "retryAfter": 1},
            {"verb": "watch", "resource": "*", "closeWatchAfterMs": 2000, "count": -1}]})
        if r.status_code != 200:
            fail(f"kubesim refused the fault rules ({r.status_code}): {r.text}")
        r = self.kubesim_api("POST", "/kubesim/compact", content=b"")
        if r.status_code != 200:
            fail(f"kubesim /kubesim/compact: {r.status_code} {r.text}")
        jobs = [self.submit(f"chaos-{n}", self.spec(
            f"chaos-{n}", "  - {name: main, gpuSeries: h100, gpusPerMachine: 1}\n",
            'env: {STEP_SECONDS: "0"}\n', image="python:3.12")) for n in (1, 2, 3)]
        say(f"scenario 8: jobs {' '.join(j.id for j in jobs)} with faults on")
        for j in jobs:
            self.wait_phase(j, "Succeeded", 300)
        for j in jobs:
            self.wait_released(j)
        self.kubesim_api("DELETE", "/kubesim/faults").raise_for_status()
        return f"jobs {', '.join(j.id for j in jobs)} Succeeded and released with faults on"

    # -- real Ray (--ray real): R1-R7 --------------------------------------------------------------
    def ray_spec(self, name: str, extra: str = "", pools: str = "") -> str:
        return self.spec(name, pools or '  - {name: main, cpusPerMachine: "1", memoryPerMachine: 2Gi}\n', extra)

    def r0_code(self) -> None:
        self.code = self.work / "code-ray"
        self.code.mkdir()
        (self.code / "main.py").write_text(RAY_MAIN_PY)

    def r1_cpu(self) -> str:
        self.r0_code()
        job = self.submit("real-cpu", self.ray_spec("real-cpu"))
        say(f"R1 (real Ray {self.ray_version}): a CPU job, capsule over http: job {job.id}")
        self.wait_phase(job, "Succeeded", 300)
        self.wait_released(job)
        self.output_archived(job)
        self.archived(job, "ray-job.log", "submitter.log", "events.json", "rayjob.json")
        logs = self.logs_dir(job)
        ray_log = (logs / "ray-job.log").read_text(errors="replace")
        m = re.search(r"^.*task ran on node.*$", ray_log, re.M)
        if not m:
            fail(f"job {job.id}: the Ray task's output is not in logs/ray-job.log (Ray's Jobs API)")
        if "file:///" not in (logs / "rayjob.json").read_text():
            fail(f"job {job.id}: the RayJob's working_dir is not the init container's file:// capsule")
        if "task ran on node" not in job.logs(file="ray-job.log"):
            fail(f"job {job.id}: job.logs(file='ray-job.log') lacks the Ray task's output")
        return f"job {job.id}: {m.group(0).strip()}"

    def r2_exit_3(self) -> str:
        job = self.submit("real-exit-3", self.ray_spec("real-exit-3", 'env: {EXIT_CODE: "3"}\n'))
        say(f"R2 (real Ray): exit code 3: job {job.id}")
        self.wait_phase(job, "Failed", 300)
        self.describe_has(job, "AppFailed", 5)
        self.describe_has(job, "exit code 3", 5)
        self.wait_released(job)
        self.output_archived(job)
        return f"job {job.id}: Failed/AppFailed: {job.message[:100]}"

    def r3_cancel(self) -> str:
        job = self.submit("real-cancel", self.ray_spec("real-cancel", 'env: {STEP_SECONDS: "60"}\n'))
        say(f"R3 (real Ray): cancel while running: job {job.id}")
        self.wait_phase(job, "Running", 300)
        driver = self.logs_dir(job) / "driver.log"

        def installed() -> bool:  # the entrypoint's SIGTERM handler is installed
            try:
                return "step 0 loss" in driver.read_text(errors="replace")
            except OSError:
                return False

        poll(300, 0.2, installed)
        self.cancel(job)
        self.wait_phase(job, "Cancelled", 60)
        self.wait_released(job)
        if "got SIGTERM" not in driver.read_text(errors="replace"):
            fail(f"job {job.id}: the entrypoint never received SIGTERM (Ray's job stop through the runner)")
        return f"job {job.id}: Cancelled, the entrypoint got SIGTERM"

    def r4_two_pools(self) -> str:
        """Pods in network namespaces only: two pools, the primary's machine the head and one
        worker in pool `aux`; a task pinned with resources={"pool_aux": 1} runs on the worker.
        Every Ray node's address is its pod's, not the host's."""
        job = self.submit("real-two-pools", self.ray_spec(
            "real-two-pools", "env: {PIN_POOL: aux}\n",
            '  - {name: main, cpusPerMachine: "1", memoryPerMachine: 2Gi}\n'
            '  - {name: aux, cpusPerMachine: "1", memoryPerMachine: 2Gi}\n'))
        say(f"R4 (real Ray, network namespaces): two pools, a task pinned to pool aux: job {job.id}")
        self.wait_phase(job, "Succeeded", 300)
        self.wait_released(job)
        log = (self.logs_dir(job) / "ray-job.log").read_text(errors="replace")
        m = re.search(r"alive nodes at (.*)$", log, re.M)
        nodes = m.group(1).strip() if m else ""
        addrs = nodes.split()
        if len(addrs) != 2:
            fail(f"job {job.id}: Ray saw nodes at '{nodes}', expected two")
        prefix = self.pod_cidr[: -len(".0.0/16")] + "."
        if addrs[0] == addrs[1] or not all(a.startswith(prefix) for a in addrs):
            fail(f"job {job.id}: Ray's node addresses '{nodes}' are not two pod addresses in {self.pod_cidr}")
        m = re.search(r"pinned to pool aux ran on (\S+) driver on (\S+)$", log, re.M)
        pinned_on, driver_on = (m.group(1), m.group(2)) if m else ("", "")
        if not pinned_on or pinned_on == driver_on or pinned_on not in addrs:
            fail(f"job {job.id}: the task pinned to pool aux ran on '{pinned_on or '?'}', not on the worker "
                 f"(driver on the head {driver_on or '?'}; nodes {nodes})")
        return (f"job {job.id}: Ray nodes at {nodes}; the task pinned to pool aux ran on {pinned_on}, "
                f"the driver on the head {driver_on}")

    def r5_tampered_http(self) -> str:
        """A tampered capsule over http: the init container's SHA-256 check stops the pod before
        Ray starts (docs/capsule.md, "A tampered capsule")."""
        spec = self.ray_spec("real-tampered-http", "deadlines: {preRunningSeconds: 120}\n")
        sha = self.tamper_capsule(self.code, spec, "real-tampered-http")
        job = self.submit("real-tampered-http", spec)
        say(f"R5 (real Ray): tampered capsule sha256-{sha[:12]}… over http: job {job.id}")
        self.refused_by_fetch_check(job)
        return f"job {job.id}: CapsuleFetchFailed (SHA-256 mismatch), cancelled"

    def use_https_s3(self) -> str:
        """Moves the object store to https: s3sigpeer (tools/s3peer/sigpeer: it checks every
        SigV4 signature, as AWS does) with a certificate of a CA made here, where both this host
        and the pods reach it. The CA is trusted as on a cluster: forge serve through
        FORGE_S3_CA_FILE, the Ray pods through the ConfigMap s3-ca (FORGE_K8S_S3_CA_CONFIGMAP),
        which StarForge mounts in them. Restarts forge serve with the new settings."""
        addr = self.bridge_ip or "127.0.0.1"
        tls, binary = self.work / "s3-tls", REPO / "build" / "tools" / "bin" / "s3sigpeer"
        if not os.access(binary, os.X_OK):
            fail(f"{binary} is missing: run scripts/bootstrap (tools/s3peer/build)")
        tls.mkdir()
        for cmd in (
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-days", "2", "-subj", "/CN=starforge e2e S3 CA", "-keyout", "ca.key", "-out", "ca.crt"],
            ["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj",
             f"/CN={addr}", "-keyout", "server.key", "-out", "server.csr"],
            ["openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.crt"],
        ):
            (tls / "san.ext").write_text(f"subjectAltName=IP:{addr},DNS:localhost\n")
            p = subprocess.run(cmd, cwd=tls, capture_output=True, text=True)
            if p.returncode != 0:
                fail(f"openssl: {p.stderr.strip()[-300:]}")
        access, secret = "AKIASTARFORGEE2E0001", "e2e/Secret+Key=" + os.urandom(6).hex()
        p = self.spawn([str(binary), "--port-file", str(self.work / "s3s.port"), "--address", addr,
                        "--bucket", "starforge", "--region", "eu-central-1", "--access-key", access,
                        "--secret-key", secret, "--tls-cert", str(tls / "server.crt"), "--tls-key",
                        str(tls / "server.key"), "--log", str(self.work / "s3s.requests")], "s3s.log")
        if not wait_file(self.work / "s3s.port", 30, p):
            fail(f"s3sigpeer did not start: {tail(self.work / 's3s.log')}")
        ca = (tls / "ca.crt").read_text()
        if self.sim:  # kubesim refuses the protobuf body `kubectl create configmap` sends
            r = self.kubesim_api("POST", f"/api/v1/namespaces/{self.ns}/configmaps",
                                 json={"metadata": {"name": "s3-ca"}, "data": {"ca.crt": ca}})
            if r.status_code >= 300:
                fail(f"cannot create the ConfigMap s3-ca: {r.status_code} {r.text[:200]}")
        elif self.kc("create", "configmap", "s3-ca", f"--from-file=ca.crt={tls / 'ca.crt'}").returncode != 0:
            fail("cannot create the ConfigMap s3-ca")
        endpoint = f"https://{addr}:{(self.work / 's3s.port').read_text().strip()}"
        os.environ.update(FORGE_S3_ENDPOINT=endpoint, FORGE_S3_ACCESS_KEY=access, FORGE_S3_SECRET_KEY=secret,
                          FORGE_S3_REGION="eu-central-1", FORGE_S3_CA_FILE=str(tls / "ca.crt"),
                          FORGE_K8S_S3_CA_CONFIGMAP="s3-ca")
        assert self.serve_proc is not None
        self.stop(self.serve_proc)
        self.start_serve()
        return f"s3sigpeer over https at {endpoint} (its CA in ConfigMap s3-ca), forge serve restarted"

    def r6_https(self) -> str:
        job = self.submit("real-https", self.ray_spec("real-https"))
        say(f"R6 (real Ray): a CPU job, capsule fetched by Ray over https: job {job.id}")
        self.wait_phase(job, "Succeeded", 300)
        self.wait_released(job)
        self.output_archived(job)
        logs = self.logs_dir(job)
        if "task ran on node" not in (logs / "ray-job.log").read_text(errors="replace"):
            fail(f"job {job.id}: the Ray task's output is not in logs/ray-job.log")
        rayjob = (logs / "rayjob.json").read_text()
        if not re.search(r'"working_dir": *"https://', rayjob) and "working_dir: https://" not in rayjob:
            fail(f"job {job.id}: the RayJob's working_dir is not the https capsule URL")
        requests = (self.work / "s3s.requests").read_text(errors="replace")
        if not re.search(r"^GET /starforge/capsules/sha256-.*X-Amz-Signature=", requests, re.M):
            fail(f"job {job.id}: s3sigpeer served no presigned GET of the capsule")
        return f"job {job.id}: Succeeded, its capsule a presigned https GET from s3sigpeer"

    def r7_tampered_https(self) -> str:
        spec = self.ray_spec("real-tampered-https")
        sha = self.tamper_capsule(self.code, spec, "real-tampered-https")
        job = self.submit("real-tampered-https", spec)
        say(f"R7 (real Ray): tampered capsule sha256-{sha[:12]}… over https: job {job.id}")
        self.wait_phase(job, "Failed", 300)
        self.describe_has(job, "CapsuleFetchFailed", 5)
        self.wait_released(job)
        return f"job {job.id}: Failed/{job.reason}: {job.message[:100]}"

    # -- the real Kueue (--real --kueue): Q1-Q3 ----------------------------------------------------
    def q0_kueue_up(self) -> str:
        t0 = time.monotonic()
        p = self.spawn([str(REPO / "tools" / "k8s" / "kueue"), "up", str(self.work / "kueue"), "--kubeconfig",
                        self.kubeconfig, "--bin", str(self.tools)], "kueue.out")
        if not wait_file(self.work / "kueue" / "ready", 180, p):
            fail(f"Kueue did not start: {tail(self.work / 'kueue.out', 25)}" if p.poll() is not None
                 else f"Kueue was not ready after 180 s: {tail(self.work / 'kueue.out', 5)}")
        version = Path(os.path.realpath(self.tools / "kueue")).parent.name.replace(".kueue-", "", 1)
        self.k("apply", "-f", "-", input=KUEUE_QUEUES)
        gate = self.work / "code-gate"
        gate.mkdir()
        (gate / "main.py").write_text(GATE_PY)
        return (f"Kueue {version} ready in {time.monotonic() - t0:.0f} s (its webhooks suspend queued "
                "RayJobs); ClusterQueue one-gpu (1 GPU), LocalQueue team-a")

    def q_spec(self, name: str, gpus: int, extra: str = "") -> str:
        return (f"name: {name}\nfleet: kuberay\nimage: {self.image}\nentrypoint: python3 main.py\nqueue: team-a\n"
                f"{extra}pools:\n  - {{name: main, gpuSeries: {self.series_small}, gpusPerMachine: {gpus}}}\n")

    def workload_of(self, job: Any) -> Dict[str, Any]:
        """The Workload Kueue made for the job's RayJob (its owner), or {}."""
        p = self.kc("get", "workloads.kueue.x-k8s.io", "-o", "json", check=True)
        for w in json.loads(p.stdout)["items"]:
            if any(o.get("name") == f"sf-{job.id}" for o in w["metadata"].get("ownerReferences", [])):
                return w
        return {}

    @staticmethod
    def condition(w: Dict[str, Any], kind: str) -> str:
        for c in w.get("status", {}).get("conditions", []):
            if c["type"] == kind:
                return f"{c['status']} {c.get('reason', '')}: {c.get('message', '')}"
        return ""

    def q1_takes_quota(self) -> str:
        a = self.submit("queue-a", self.q_spec("queue-a", 1), self.work / "code-gate")
        self.state["a"] = a
        say(f"Q1: job {a.id} takes the ClusterQueue's one GPU")
        self.wait_phase(a, "Running", 300)
        if not self.condition(self.workload_of(a), "Admitted").startswith("True"):
            fail(f"job {a.id} runs, but its Workload is not Admitted: {self.workload_of(a)}")
        return f"job {a.id}: Kueue admitted it and it runs"

    def q3_queue_deadline(self) -> str:
        b = self.submit("queue-b", self.q_spec("queue-b", 1, 'env: {STEP_SECONDS: "0"}\n'
                                               "deadlines: {preRunningSeconds: 15}\n"))
        self.state["b"], self.state["b_submitted"] = b, time.monotonic()
        c = self.submit("queue-c", self.q_spec("queue-c", 2, "deadlines: {queueSeconds: 10}\n"))
        self.state["c"] = c
        say(f"Q2: job {b.id} (preRunningSeconds 15) waits behind it; Q3: job {c.id} (2 GPUs, "
            "queueSeconds 10) can never be admitted")
        self.describe_has(b, "QueuedByKueue", 60)
        if self.kc("get", "rayjobs.ray.io", f"sf-{b.id}", "-o", "jsonpath={.spec.suspend}").stdout != "true":
            fail(f"job {b.id}: its RayJob is not suspended (Kueue's webhook should have suspended it)")
        self.describe_has(c, "QueuedByKueue", 60)
        wl_c = self.workload_of(c)
        self.wait_phase(c, "Failed", 120)
        self.describe_has(c, "QueueDeadlineExceeded", 5)
        return f"job {c.id}: Failed/QueueDeadlineExceeded (Kueue: {self.condition(wl_c, 'QuotaReserved')})"

    def q2_admitted_later(self) -> str:
        a, b = self.state["a"], self.state["b"]
        # Past B's pre-running deadline, all of it in Kueue's queue: still Pending, suspended.
        left = self.state["b_submitted"] + 18 - time.monotonic()
        if left > 0:
            time.sleep(left)
        waited = time.monotonic() - self.state["b_submitted"]
        if self.phase_now(b) != "Pending":
            fail(f"job {b.id}: {b.phase} {waited:.0f} s after submit in Kueue's queue (preRunningSeconds 15), "
                 "expected Pending")
        wl_b = self.workload_of(b)
        if not wl_b or self.condition(wl_b, "QuotaReserved").startswith("True"):
            fail(f"job {b.id}: expected a Workload waiting for quota, got: {wl_b}")
        say(f"Q2: job {b.id} still Pending {waited:.0f} s after submit (Kueue: "
            f"{self.condition(wl_b, 'QuotaReserved')})")
        (self.storage_root / "jobs" / a.id / "release").touch()
        self.wait_phase(a, "Succeeded", 120)
        self.wait_phase(b, "Succeeded", 300)
        self.describe_has(b, "Admitted", 5)
        # Kueue started it: its event on the RayJob (the Workload goes with the RayJob at release).
        event = self.kc("get", "events", "--field-selector", f"involvedObject.name=sf-{b.id},reason=Started",
                        "-o", "jsonpath={.items[*].message}").stdout
        if "Admitted by clusterQueue one-gpu" not in event:
            fail(f"job {b.id}: no event of Kueue's admitting its RayJob (Started: \"{event}\")")
        return f"job {b.id}: Pending {waited:.0f} s, then Kueue admitted it (\"{event}\") and it Succeeded"

    def q4_released(self) -> str:
        # (nothing_left wants the whole namespace empty: the three are released together)
        for j in (self.state["c"], self.state["a"], self.state["b"]):
            self.wait_released(j)
        self.output_archived(self.state["b"])
        return "jobs A, B, C released, nothing left in the namespace"

    # -- the end -----------------------------------------------------------------------------------
    def final_checks(self) -> str:
        """No presigned credentials in the server's log, the descriptions and events or the
        archived files; no request of forge serve refused by the API server."""
        ids = [x.removeprefix("job/") for x in self.forge("get", "jobs", "-o", "name").split()]
        described = self.work / "describe.all"
        with open(described, "w") as f:
            for i in ids:
                f.write(self.forge("describe", "job", i, check=False))
        sdk_ids = {j.id for j in self.client.jobs(limit=None)}
        for i in self.state.get("ids", []):
            if i not in ids or i not in sdk_ids:
                fail(f"job {i}: not listed by forge get jobs ({i in ids}) or client.jobs() ({i in sdk_ids})")
        with open(self.work / "sdk.all", "w") as f:
            for i in ids:
                f.write(self.sdk_text(self.client.job(i)) + "\n")
        needles = (b"X-Amz-Signature", b"X-Amz-Credential")
        hits = grep_files([self.work / "serve.log", described, self.work / "sdk.all",
                           self.storage_root / "jobs"], needles)
        if hits:
            fail(f"a presigned URL's credentials appear in {', '.join(map(str, hits))}")
        # RBAC: forge serve never needed a right its ServiceAccount lacks (deploy/rbac.yaml).
        refused = [x for x in (self.work / "serve.log").read_text(errors="replace").splitlines()
                   if "is forbidden" in x or "Forbidden" in x]
        if refused:
            sys.stderr.write("\n".join(refused[:3]) + "\n")
            fail("the API server refused forge serve a request (above); deploy/rbac.yaml lacks a rule")
        return f"{len(ids)} jobs: no presigned credentials in logs, descriptions, events or archives; no RBAC refusal"

    def plan(self) -> List[Scenario]:
        S = Scenario  # noqa: N806
        out = [S("setup", "the cluster, forge serve, a token", self.setup),
               S("doctor", "forge doctor", self.doctor)]
        if self.real_ray:
            out += [S("R1", "a CPU job running a Ray task, capsule over http (init container)", self.r1_cpu),
                    S("R2", "exit code 3 → Failed/AppFailed with Ray's message", self.r2_exit_3),
                    S("R3", "cancel while running → Cancelled, the entrypoint got SIGTERM", self.r3_cancel)]
            if self.real:
                out.append(S("R4", "two pools: head + worker at their pods' addresses, a task pinned to aux",
                             self.r4_two_pools))
            out += [S("R5", "a tampered capsule over http → CapsuleFetchFailed (SHA-256)", self.r5_tampered_http),
                    S("https", "the object store moves to s3sigpeer over https", self.use_https_s3),
                    S("R6", "a CPU job whose capsule Ray fetches over https as working_dir", self.r6_https),
                    S("R7", "a tampered capsule over https → Failed/CapsuleFetchFailed", self.r7_tampered_https)]
        elif self.kueue:
            out += [S("kueue", "the real Kueue up, a ClusterQueue of one GPU", self.q0_kueue_up),
                    S("Q1", "job A takes the quota: admitted, Running", self.q1_takes_quota),
                    S("Q3", "job C, more than the quota, never admitted → Failed/QueueDeadlineExceeded",
                      self.q3_queue_deadline),
                    S("Q2", "job B queued past preRunningSeconds stays Pending, then admitted → Succeeded",
                      self.q2_admitted_later),
                    S("Q-release", "A, B, C released, nothing left", self.q4_released)]
        else:
            out += [S("1", "a 2-pool job succeeds: phases, logs archived and served, nothing left", self.s1_two_pools),
                    S("2", "a missing image → ImagePullFailed, then PreRunningDeadlineExceeded", self.s2_bad_image),
                    S("3", "more than is free → Unschedulable" + (" naming the cordoned node" if self.own else "")
                      + ", forge cancel", self.s3_too_big),
                    S("4", "exit code 3 → Failed/AppFailed, output archived (SDK plain upload)", self.s4_exit_3),
                    S("5", "cancel while running, the live log followed → Cancelled", self.s5_cancel)]
            if self.sim:
                out.append(S("K", "Kueue holds a job past preRunningSeconds: Pending, then admitted → Succeeded",
                             self.sk_kueue_sim))
            if self.own:
                out += [S("6", "HTTP-only storage; a tampered capsule → CapsuleFetchFailed (SHA-256)",
                          self.s6_tampered),
                        S("7", "kill -9 of forge serve mid-run → the job completes once, one RayJob per job",
                          self.s7_kill_serve)]
            if self.sim:
                out.append(S("8", "faults on (5xx, 429, dropped watches, 410) → every job converges",
                             self.s8_faults))
        out.append(S("final", "no presigned credentials anywhere; no RBAC refusal", self.final_checks))
        if self.node_proc is not None or self.real or self.real_ray:
            out.append(S("netns", "the kubelet's pod network leaves nothing behind", self.node_stopped_clean))
        return out

    def summary(self) -> List[str]:
        lines = []
        if self.real and (self.work / "audit.one-job").exists():
            lines.append("the 2-pool job of scenario 1, from submit to release, in the real API server's audit "
                         "log (namespace starforge and cluster-scoped; client verb resource count): " +
                         self.audit_count(self.audit_from, int((self.work / "audit.one-job").read_text())))
        if self.sim and self.k8s and not self.real_ray:  # (kubesim is stopped by then)
            try:
                counts = self.kubesim_api("GET", "/kubesim/requests").json()
                lines.append(f"since scenario 1: {self.requests_text(counts)} by forge serve and kubectl")
                one = self.work / "requests.one-job.json"
                if one.exists():
                    lines.append("the 2-pool job of scenario 1, from submit to release: " +
                                 self.requests_text(json.loads(one.read_text())))
            except (httpx.HTTPError, ValueError, KeyError) as e:
                lines.append(f"(kubesim's request counts: {e})")
        return lines


def parse_args(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="kuberay_loop.py", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.split("\n")[1:]))
    p.add_argument("--kubeconfig", metavar="PATH", help="a real cluster (scenarios 1-5)")
    p.add_argument("--real", action="store_true", help="the real control plane and KubeRay operator (root)")
    p.add_argument("--kueue", action="store_true", help="with --real: the real Kueue, Q1-Q3")
    p.add_argument("--operator", default="v1.4", help="with --real: v1.4 (default), v1.5 or v1.6")
    p.add_argument("--ray", choices=("emulator", "real"), default="emulator",
                   help="real: real Ray in the pods (build/tools/ray-venv), R1-R7")
    p.add_argument("--build", metavar="DIR", help="the build directory (default build/debug)")
    p.add_argument("build_dir", nargs="?", metavar="BUILD_DIR", help="the same as --build")
    p.add_argument("--keep", action="store_true", help="keep the work directory (also KEEP=1)")
    a = p.parse_args(argv)
    if a.build and a.build_dir and Path(a.build).resolve() != Path(a.build_dir).resolve():
        p.error("--build and BUILD_DIR differ")
    a.build = a.build or a.build_dir or str(REPO / "build" / "debug")
    return a


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    # What it starts (kubesim and its pods, forge, kubectl) gets the environment it was run in,
    # not uv's: no VIRTUAL_ENV, no script environment first on PATH (its python is not the pods').
    venv = os.environ.pop("VIRTUAL_ENV", None)
    if venv:
        os.environ["PATH"] = os.pathsep.join(
            d for d in os.environ.get("PATH", "").split(os.pathsep) if d != os.path.join(venv, "bin"))
    for name in ("STARFORGE_LOOP_UV", "UV_RUN_RECURSION_DEPTH"):
        os.environ.pop(name, None)
    loop = Loop(args)
    # The real kubectl that scripts/bootstrap builds (tools/k8s) comes first on PATH, so that the
    # loop's checks use the version they are written for.
    if os.access(loop.tools / "kubectl", os.X_OK):
        os.environ["PATH"] = f"{loop.tools}{os.pathsep}{os.environ.get('PATH', '')}"
    for name in ("forge", "kubesim"):
        b = Path(loop.forge_bin if name == "forge" else loop.kubesim_bin)
        if not os.access(b, os.X_OK) and (name == "forge" or loop.sim):
            print(f"{PROG}: {b} is missing: build first (scripts/bootstrap, or --build DIR)", file=sys.stderr)
            return 1

    def terminated(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminated)
    mode = ("the real stack" if loop.real else "a real cluster" if loop.kubeconfig else "the simulator") + \
        (", real Ray" if loop.real_ray else ", real Kueue" if loop.kueue else ", the Ray emulator")
    t_start = time.monotonic()
    try:
        try:
            loop.check_prerequisites()
        except Skip as e:
            print(f"{PROG}: skipped: {e}", flush=True)
            return 77
        except Failure as e:
            print(f"{PROG}: FAIL: {e}", flush=True)
            return 1
        loop.work = Path(tempfile.mkdtemp(prefix="kuberay_loop-", dir=os.environ.get("TMPDIR")))
        say(f"on {mode}; work directory {loop.work}")
        scenarios = loop.plan()
        failed: Optional[Scenario] = None
        i = 0
        while i < len(scenarios):
            s = scenarios[i]
            if failed is not None:
                s.result, s.note = "SKIP", f"not run: {failed.key} failed"
            else:
                t0 = time.monotonic()
                try:
                    s.note = s.run() or ""
                    s.result = "PASS"
                except Failure as e:
                    s.result, s.note, failed = "FAIL", str(e), s
                except starforge.StarForgeError as e:
                    s.result, s.note, failed = "FAIL", f"the SDK: {e}", s
                except Exception as e:  # noqa: BLE001 — any error fails the scenario, with its trace
                    traceback.print_exc()
                    s.result, s.note, failed = "FAIL", f"{type(e).__name__}: {e}", s
                s.seconds = time.monotonic() - t0
            print(f"{s.result:4}  {s.key:9} {s.seconds:6.1f} s  {s.title}" +
                  (f"\n{'':23}{s.note}" if s.note else ""), flush=True)
            i += 1
        for line in loop.summary():
            say(line)
        passed = sum(s.result == "PASS" for s in scenarios)
        failures = sum(s.result == "FAIL" for s in scenarios)
        skipped = sum(s.result == "SKIP" for s in scenarios)
        print(f"{PROG} on {mode}: {loop.jobs_run} jobs, {time.monotonic() - t_start:.0f} s"
              + (f"; FAILED at {failed.key}: {failed.note}" if failed else ""), flush=True)
        print(f"{PROG}: {passed} passed, {failures} failed" + (f", {skipped} skipped" if skipped else ""),
              flush=True)
        return 1 if failed else 0
    finally:
        if loop.node_proc is not None and loop.node_proc.poll() is None:
            loop.stop(loop.node_proc)
        loop.cleanup()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
