"""The Jobs API's job manager and per-job supervisor, after Ray's job_manager.py and
job_supervisor.py.

Each submitted job gets a supervisor thread in the head process (Ray uses a detached
actor): it waits for entrypoint resources, sets up the runtime_env, marks the job RUNNING,
starts the entrypoint with ``subprocess.Popen(entrypoint, shell=True,
start_new_session=True)`` writing stdout+stderr to ``job-driver-<id>.log``, and records
SUCCEEDED / FAILED / STOPPED with Ray's messages.
"""

import json
import os
import random
import signal
import string
import subprocess
import threading
import time
import traceback

from . import runtime_env as renv
from .common import log_line, now_ms

TERMINAL = ("STOPPED", "SUCCEEDED", "FAILED")
LOG_TAIL_POLL_S = 0.2  # Ray polls the driver log every 1 s; shorter here so tests are quick.
WAIT_FOR_DRIVER_POLL_S = 0.2
MAX_CHUNK_LINES = 10
MAX_CHUNK_CHARS = 20000
NUM_LOG_LINES_ON_ERROR = 10
MAX_LOG_SIZE = 20000


def generate_job_id() -> str:
    chars = sorted(set(string.ascii_letters + string.digits) - {"I", "l", "o", "O", "0"})
    return "raysubmit_" + "".join(random.SystemRandom().choices(chars, k=16))


class SubmitRequest:
    """Ray's JobSubmitRequest dataclass: keyword validation with the dataclass's TypeErrors."""

    FIELDS = (
        "entrypoint", "submission_id", "job_id", "runtime_env", "metadata", "entrypoint_num_cpus",
        "entrypoint_num_gpus", "entrypoint_memory", "entrypoint_resources",
        "entrypoint_label_selector",
    )

    def __init__(self, body):
        if not isinstance(body, dict):
            raise TypeError("JobSubmitRequest() argument after ** must be a mapping, not %s"
                            % type(body).__name__)
        body = {k: v for k, v in body.items() if v is not None}
        for k in body:
            if k not in self.FIELDS:
                raise TypeError("JobSubmitRequest.__init__() got an unexpected keyword argument '%s'" % k)
        if "entrypoint" not in body:
            raise TypeError("JobSubmitRequest.__init__() missing 1 required positional argument: 'entrypoint'")
        for k in self.FIELDS:
            setattr(self, k, body.get(k))
        self._validate()

    def _validate(self):
        if not isinstance(self.entrypoint, str):
            raise TypeError("entrypoint must be a string, got %s" % type(self.entrypoint))
        for name in ("submission_id", "job_id"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, str):
                raise TypeError("%s must be a string if provided, got %s" % (name, type(v)))
        if self.runtime_env is not None:
            if not isinstance(self.runtime_env, dict):
                raise TypeError("runtime_env must be a dict, got %s" % type(self.runtime_env))
        if self.metadata is not None:
            if not isinstance(self.metadata, dict):
                raise TypeError("metadata must be a dict, got %s" % type(self.metadata))
            for v in self.metadata.values():
                if not isinstance(v, str):
                    raise TypeError("metadata values must be strings, got %s" % type(v))
        for name in ("entrypoint_num_cpus", "entrypoint_num_gpus"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise TypeError("%s must be a number, got %s" % (name, type(v)))
        if self.entrypoint_memory is not None and not isinstance(self.entrypoint_memory, int):
            raise TypeError("entrypoint_memory must be an integer, got %s" % type(self.entrypoint_memory))
        if self.entrypoint_resources is not None:
            if not isinstance(self.entrypoint_resources, dict):
                raise TypeError("entrypoint_resources must be a dict, got %s" % type(self.entrypoint_resources))
            for v in self.entrypoint_resources.values():
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise TypeError("entrypoint_resources values must be numbers, got %s" % type(v))


class Job:
    def __init__(self, submission_id, req: SubmitRequest):
        self.submission_id = submission_id
        self.entrypoint = req.entrypoint
        self.runtime_env = req.runtime_env
        self.metadata = req.metadata
        self.num_cpus = req.entrypoint_num_cpus or 0
        self.num_gpus = req.entrypoint_num_gpus or 0
        self.memory = req.entrypoint_memory or 0
        self.resources = req.entrypoint_resources
        self.label_selector = req.entrypoint_label_selector
        self.status = "PENDING"
        self.message = None
        self.error_type = None
        self.start_time = now_ms()
        self.end_time = None
        self.driver_agent_http_address = None
        self.driver_node_id = None
        self.driver_exit_code = None
        self.stop_requested = threading.Event()
        self.process = None
        self.pgid = None
        self.reserved = None
        self.message = self.pending_message()

    def resources_specified(self) -> bool:
        return bool(self.num_cpus > 0 or self.num_gpus > 0 or self.memory > 0
                    or self.resources not in (None, {}) or self.label_selector not in (None, {}))

    def resource_request(self):
        req = {}
        if self.num_cpus:
            req["CPU"] = float(self.num_cpus)
        if self.num_gpus:
            req["GPU"] = float(self.num_gpus)
        if self.memory:
            req["memory"] = float(self.memory)
        for k, v in (self.resources or {}).items():
            req[k] = req.get(k, 0.0) + float(v)
        return req

    def pending_message(self) -> str:
        msg = "Job has not started yet."
        if self.num_cpus > 0 or self.num_gpus > 0 or self.memory > 0 or self.resources not in (None, {}):
            msg += " It may be waiting for resources (CPUs, GPUs, memory, custom resources) to become available."
        if self.runtime_env not in (None, {}):
            msg += " It may be waiting for the runtime environment to be set up."
        return msg

    def details(self) -> dict:
        """Ray's JobDetails JSON (GET /api/jobs/{id}). The entrypoint never connects through the
        Python ray library here, so job_id and driver_info stay null, as in Ray for such drivers."""
        return {
            "type": "SUBMISSION",
            "job_id": None,
            "submission_id": self.submission_id,
            "driver_info": None,
            "status": self.status,
            "entrypoint": self.entrypoint,
            "message": self.message,
            "error_type": self.error_type,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "metadata": self.metadata,
            "runtime_env": self.runtime_env,
            "driver_agent_http_address": self.driver_agent_http_address,
            "driver_node_id": self.driver_node_id,
            "driver_exit_code": self.driver_exit_code,
        }


def _proc_state(pid: int):
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
        rest = data[data.rindex(")") + 2:].split()
        return rest[0], int(rest[1]), int(rest[2])  # state, ppid, pgrp
    except (OSError, ValueError, IndexError):
        return None


def descendants(pid: int):
    """Like psutil.Process(pid).children(recursive=True)."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        st = _proc_state(int(name))
        if st:
            children.setdefault(st[1], []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def alive(pid: int) -> bool:
    st = _proc_state(pid)
    return st is not None and st[0] not in ("Z", "X")


def group_alive(pgid: int) -> bool:
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _proc_state(int(name))
            if st and st[2] == pgid and st[0] not in ("Z", "X"):
                return True
    return False


class JobManager:
    def __init__(self, node):
        """node: the head (session_dir, logs_dir, node_ip, node_id, agent_port, gcs_address,
        scheduler with try_reserve/release)."""
        self.node = node
        self.jobs = {}
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.shutting_down = False

    # --- paths ---
    def log_path(self, submission_id: str) -> str:
        return os.path.join(self.node.logs_dir, "job-driver-%s.log" % submission_id)

    def _append_log(self, submission_id: str, text: str):
        with open(self.log_path(submission_id), "a") as f:
            f.write(text)

    def _setup_logger(self, submission_id):
        path = os.path.join(self.node.logs_dir, "runtime_env_setup-%s.log" % submission_id)

        def log(msg):
            with open(path, "a") as f:
                f.write(log_line("INFO", "runtime_env_agent.py", 0, msg))

        return log

    # --- status writes (JobInfoStorageClient.put_status) ---
    def _put_status(self, job: Job, status: str, message=None, driver_exit_code=None, error_type=None, **extra):
        with self.lock:
            if job.status in TERMINAL and status != job.status:
                return
            job.status = status
            if message is None:
                message = {
                    "PENDING": job.pending_message(),
                    "RUNNING": "Job is currently running.",
                    "STOPPED": "Job was intentionally stopped.",
                    "SUCCEEDED": "Job finished successfully.",
                    "FAILED": "Job failed.",
                }[status]
            job.message = message
            job.driver_exit_code = driver_exit_code
            job.error_type = error_type
            for k, v in extra.items():
                setattr(job, k, v)
            if status in TERMINAL:
                job.end_time = now_ms()
            self.changed.notify_all()

    # --- API ---
    def submit(self, req: SubmitRequest) -> str:
        submission_id = req.submission_id or req.job_id or generate_job_id()
        job = Job(submission_id, req)
        with self.lock:
            if self.shutting_down:
                raise RuntimeError("The Ray head is shutting down.")
            if submission_id in self.jobs:
                raise ValueError(
                    "Job with submission_id %s already exists. Please use a different submission_id."
                    % submission_id
                )
            self.jobs[submission_id] = job
        os.makedirs(self.node.logs_dir, exist_ok=True)
        self._append_log(submission_id, log_line("INFO", "job_manager.py", 587, "Runtime env is setting up."))
        try:
            # The supervisor actor's options carry the runtime_env: Ray validates it here and a
            # bad one fails the job (not the request).
            renv.validate_runtime_env(job.runtime_env)
        except (TypeError, ValueError) as e:
            tb = traceback.format_exc()
            self._append_log(
                submission_id,
                log_line("WARNING", "job_manager.py", 640,
                         "Failed to start supervisor actor for job %s: '%s'. Full traceback:\n%s"
                         % (submission_id, e, tb)),
            )
            self._put_status(
                job, "FAILED",
                message="Failed to start supervisor actor %s: '%s'. Full traceback:\n%s" % (submission_id, e, tb),
                error_type="JOB_SUPERVISOR_ACTOR_START_FAILURE",
            )
            return submission_id
        threading.Thread(target=self._supervise, args=(job,), name="job-" + submission_id, daemon=True).start()
        return submission_id

    def get(self, submission_id):
        with self.lock:
            job = self.jobs.get(submission_id)
            return job.details() if job else None

    def list(self):
        with self.lock:
            return [j.details() for j in self.jobs.values()]

    def stop(self, submission_id) -> bool:
        with self.lock:
            job = self.jobs.get(submission_id)
            if job is None or job.status in TERMINAL:
                return False
            job.stop_requested.set()
            self.changed.notify_all()
            return True

    def delete(self, submission_id) -> bool:
        with self.lock:
            job = self.jobs.get(submission_id)
            status = job.status if job else None
            if status not in TERMINAL:
                raise RuntimeError(
                    "Attempted to delete job '%s', but it is in a non-terminal state %s." % (submission_id, status)
                )
            del self.jobs[submission_id]
            return True

    def logs(self, submission_id) -> str:
        try:
            with open(self.log_path(submission_id), errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def last_n_log_lines(self, submission_id) -> str:
        try:
            with open(self.log_path(submission_id), errors="replace") as f:
                lines = f.readlines()
        except FileNotFoundError:
            return ""
        return "".join(lines[-NUM_LOG_LINES_ON_ERROR:])[-MAX_LOG_SIZE:]

    def tail(self, submission_id):
        """Yields chunks of the driver log (<= 10 lines or ~20000 chars each) until the job is
        terminal and the log is drained. Like Ray's head, it first waits for the driver to start
        and ends at once if the job ended before that (e.g. a runtime_env failure)."""
        while True:
            with self.lock:
                job = self.jobs.get(submission_id)
                if job is None:
                    return
                if job.driver_agent_http_address:
                    break
                if job.status in TERMINAL:
                    return
                self.changed.wait(WAIT_FOR_DRIVER_POLL_S)
        path = self.log_path(submission_id)
        finished = False
        with open(path, errors="replace") as f:
            lines, chars = [], 0
            while True:
                line = f.readline()
                if line:
                    lines.append(line)
                    chars += len(line)
                    if len(lines) >= MAX_CHUNK_LINES or chars > MAX_CHUNK_CHARS:
                        yield "".join(lines)
                        lines, chars = [], 0
                    continue
                if lines:
                    yield "".join(lines)
                    lines, chars = [], 0
                if finished:
                    return
                with self.lock:
                    job = self.jobs.get(submission_id)
                    if job is None or job.status in TERMINAL:
                        finished = True
                        continue
                    self.changed.wait(LOG_TAIL_POLL_S)

    def wait_terminal(self, submission_id, timeout):
        deadline = time.time() + timeout
        with self.lock:
            while True:
                job = self.jobs.get(submission_id)
                if job is None or job.status in TERMINAL:
                    return
                left = deadline - time.time()
                if left <= 0:
                    return
                self.changed.wait(left)

    def shutdown(self, timeout=5.0):
        """Head shutdown: stop every running job (its processes get the stop signal)."""
        with self.lock:
            self.shutting_down = True
            running = [j for j in self.jobs.values() if j.status not in TERMINAL]
            for j in running:
                j.stop_requested.set()
            self.changed.notify_all()
        for j in running:
            self.wait_terminal(j.submission_id, timeout)
        for j in running:
            if j.pgid:
                try:
                    os.killpg(j.pgid, signal.SIGKILL)
                except OSError:
                    pass

    # --- the supervisor ---
    def _supervise(self, job: Job):
        try:
            self._run(job)
        except Exception:  # noqa: BLE001 - never leave a job non-terminal
            tb = traceback.format_exc()
            self._put_status(job, "FAILED", message="Unexpected error occurred: %s" % tb,
                             error_type="JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE")
        finally:
            if job.reserved is not None:
                self.node.scheduler.release(job.reserved)
                job.reserved = None
            with self.lock:
                self.changed.notify_all()

    def _wait_stop(self, job: Job, seconds: float) -> bool:
        return job.stop_requested.wait(seconds)

    def _run(self, job: Job):
        delay = float(os.environ.get("KUBESIM_RAY_JOB_START_DELAY_S", "0") or 0)
        if delay > 0 and self._wait_stop(job, delay):
            self._put_status(job, "STOPPED")
            return

        # 1. Schedule the supervisor (its resources are the entrypoint resources).
        node_id, node_ip, agent_port = self.node.node_id, self.node.node_ip, self.node.agent_port
        if job.resources_specified():
            timeout = float(os.environ.get("RAY_JOB_START_TIMEOUT_SECONDS", "900"))
            deadline = time.time() + timeout
            while True:
                placed = self.node.scheduler.try_reserve(job.resource_request())
                if placed is not None:
                    job.reserved = placed
                    node_id, node_ip, agent_port = placed["node_id"], placed["node_ip"], placed["agent_port"]
                    break
                if time.time() > deadline:
                    msg = ("Job supervisor actor failed to start within %s seconds. This timeout can be "
                           "configured by setting the environment variable RAY_JOB_START_TIMEOUT_SECONDS."
                           % timeout)
                    msg += (" This may be because the job entrypoint's specified resources "
                            "(entrypoint_num_cpus, entrypoint_num_gpus, entrypoint_resources, "
                            "entrypoint_memory)aren't available on the cluster. Try checking the cluster's "
                            "available resources with `ray status` and specifying fewer resources for the "
                            "job entrypoint.")
                    self._put_status(job, "FAILED", message=msg, error_type="JOB_SUPERVISOR_ACTOR_START_TIMEOUT")
                    return
                if self._wait_stop(job, 0.5):
                    self._put_status(job, "STOPPED")
                    return

        # 2. The runtime env (working_dir download/unpack, env_vars).
        base_env = dict(os.environ)
        try:
            cwd, env = renv.setup_runtime_env(job.runtime_env, self.node.session_dir, base_env,
                                              self._setup_logger(job.submission_id))
        except renv.RuntimeEnvSetupError as e:
            msg = "runtime_env setup failed: %s" % e
            self._put_status(job, "FAILED", message=msg, error_type="RUNTIME_ENV_SETUP_FAILURE")
            self._append_log(job.submission_id, msg)
            return
        if job.stop_requested.is_set():
            self._put_status(job, "STOPPED")
            return

        # 3. RUNNING, then the entrypoint.
        self._put_status(job, "RUNNING", driver_agent_http_address="http://%s:%d" % (node_ip, agent_port),
                         driver_node_id=node_id)
        metadata = {"job_submission_id": job.submission_id, "job_name": job.submission_id}
        metadata.update(job.metadata or {})
        env["RAY_JOB_CONFIG_JSON_ENV_VAR"] = json.dumps({"runtime_env": job.runtime_env or {}, "metadata": metadata})
        env["RAY_ADDRESS"] = self.node.gcs_address
        env["PYTHONUNBUFFERED"] = "1"
        log_path = self.log_path(job.submission_id)
        stop_signal_name = os.environ.get("RAY_JOB_STOP_SIGNAL", "SIGTERM")
        with open(log_path, "a") as logs_file:
            logs_file.write("Running entrypoint for job %s: %s\n" % (job.submission_id, job.entrypoint))
            logs_file.flush()
            preexec = None
            if stop_signal_name == "SIGINT":
                def preexec():
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
                    signal.signal(signal.SIGINT, signal.SIG_DFL)
            child = subprocess.Popen(job.entrypoint, shell=True, start_new_session=True, stdout=logs_file,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                     cwd=cwd or None, preexec_fn=preexec)
        job.process = child
        job.pgid = child.pid  # start_new_session: the child leads its own process group
        # Ray's fate-sharing watcher: SIGKILL the driver's group when the supervisor dies.
        watcher = subprocess.Popen(
            "while kill -s 0 %d; do sleep 1; done; kill -9 -%d" % (os.getpid(), job.pgid),
            shell=True, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            while True:
                rc = child.poll()
                if rc is not None:
                    break
                if job.stop_requested.wait(0.1):
                    self._stop_processes(job, child, stop_signal_name)
                    self._put_status(job, "STOPPED")
                    return
            if rc == 0:
                self._put_status(job, "SUCCEEDED", driver_exit_code=0)
            else:
                tail = self.last_n_log_lines(job.submission_id)
                if tail:
                    msg = ("Job entrypoint command failed with exit code %d, last available logs "
                           "(truncated to 20,000 chars):\n%s" % (rc, tail))
                else:
                    msg = "Job entrypoint command failed with exit code %d. No logs available." % rc
                self._put_status(job, "FAILED", message=msg, driver_exit_code=rc,
                                 error_type="JOB_ENTRYPOINT_COMMAND_ERROR")
        finally:
            # The supervisor exits after the job; its watcher then kills what is left of the group.
            try:
                os.killpg(job.pgid, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.killpg(watcher.pid, signal.SIGKILL)
            except OSError:
                pass
            child.poll()
            watcher.wait()

    def _stop_processes(self, job: Job, child, stop_signal_name: str):
        if stop_signal_name not in ("SIGINT", "SIGTERM"):
            stop_signal_name = "SIGTERM"
        sig = getattr(signal, stop_signal_name)
        procs = [child.pid] + descendants(child.pid)
        for pid in procs:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        wait_s = int(os.environ.get("RAY_JOB_STOP_WAIT_TIME_S", "3"))
        deadline = time.time() + wait_s
        while time.time() < deadline:
            child.poll()
            if not any(alive(p) for p in procs):
                return
            time.sleep(0.1)
        for pid in procs:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        child.wait()
