"""The emulated Ray node processes started by ``ray start``.

Head: a GCS stub (HTTP on the GCS port: health, cluster view, node registration), the
dashboard (Jobs API) on the dashboard port and a dashboard-agent stub (probe endpoints) on
the agent port, all bound to this pod's address. Worker: waits for the GCS, registers,
heartbeats and serves the agent's probe endpoints. No raylet, object store or workers.
"""

import json
import os
import re
import signal
import sys
import threading
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import DASHBOARD_API_VERSION, EMULATOR_NAME, RAY_COMMIT, ray_version
from . import websocket as ws
from .clilog import CliLogger
from .common import (
    log_line,
    new_node_id,
    new_session_name,
    now_ms,
    ray_temp_root,
    http_json,
)
from .jobs import JobManager, SubmitRequest

NODE_STALE_S = 30.0
HEARTBEAT_S = 2.0


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kubesim-ray-emulator"
    sys_version = ""
    node = None  # set on the subclass

    def log_message(self, fmt, *args):
        log = getattr(self.node, "access_log", None)
        if log:
            log("%s %s" % (self.address_string(), fmt % args))

    def reply(self, status: int, body, content_type="text/plain; charset=utf-8"):
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
            content_type = "application/json; charset=utf-8"
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def body(self) -> bytes:
        return self._body

    def route(self, method):
        # Read the whole body first, so that a keep-alive connection stays in sync whatever the reply.
        n = int(self.headers.get("Content-Length") or 0)
        self._body = self.rfile.read(n) if n > 0 else b""
        path = urllib.parse.urlsplit(self.path).path
        for pattern, m, fn in self.routes:
            if m != method:
                continue
            match = re.fullmatch(pattern, path)
            if match:
                return fn(self, *match.groups())
        return self.reply(404, "404: Not Found")

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_PUT(self):
        self.route("PUT")

    def do_DELETE(self):
        self.route("DELETE")


def healthz(handler, *_):
    handler.reply(200, "success")


# ---------------------------------------------------------------- dashboard agent
class AgentHandler(Handler):
    routes = [
        (r"/api/local_raylet_healthz", "GET", healthz),
        (r"/api/healthz", "GET", healthz),
    ]


# ---------------------------------------------------------------- GCS stub
def gcs_cluster(h):
    h.reply(200, h.node.cluster_view())


def gcs_register(h):
    try:
        info = json.loads(h.body() or b"{}")
    except ValueError:
        return h.reply(400, "bad json")
    h.node.scheduler.register(info)
    h.reply(200, {"ok": True, "session_name": h.node.session_name})


class GcsHandler(Handler):
    routes = [
        (r"/", "GET", healthz),
        (r"/api/gcs_healthz", "GET", healthz),
        (r"/kubesim/v1/cluster", "GET", gcs_cluster),
        (r"/kubesim/v1/nodes", "POST", gcs_register),
    ]


# ---------------------------------------------------------------- dashboard (Jobs API)
def _auth_ok(h) -> bool:
    token = h.node.auth_token
    if not token:
        return True
    for header in ("Authorization", "X-Ray-Authorization"):
        v = h.headers.get(header, "")
        if v == "Bearer " + token:
            return True
    return False


def _need_auth(fn):
    def wrapper(h, *args):
        if not _auth_ok(h):
            return h.reply(401, "Unauthorized: missing or invalid authentication token")
        return fn(h, *args)

    return wrapper


def d_index(h):
    h.reply(200, "<html><body><h1>Ray dashboard</h1><p>%s %s: Jobs API only.</p></body></html>"
            % (EMULATOR_NAME, ray_version()), "text/html; charset=utf-8")


def d_version(h):
    h.reply(200, {"version": DASHBOARD_API_VERSION, "ray_version": ray_version(),
                  "ray_commit": RAY_COMMIT, "session_name": h.node.session_name})


def d_get_package(h, protocol, name):
    uri = "%s://%s" % (protocol, name)
    if not os.path.exists(os.path.join(h.node.gcs_packages_dir, name)):
        return h.reply(404, "Package %s does not exist" % uri)
    h.reply(200, "")


def d_put_package(h, protocol, name):
    data = h.body()
    try:
        if protocol != "gcs":
            raise NotImplementedError("Protocol %s is not supported" % protocol)
        os.makedirs(h.node.gcs_packages_dir, exist_ok=True)
        tmp = os.path.join(h.node.gcs_packages_dir, ".%s.%d" % (name, threading.get_ident()))
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(h.node.gcs_packages_dir, name))
    except Exception:  # noqa: BLE001
        return h.reply(500, traceback.format_exc())
    h.reply(200, "")


_AGENT_TB = (
    "Traceback (most recent call last):\n"
    '  File "kubesim_ray/jobs.py", line 0, in submit  [%s: Ray\'s job agent traceback]\n' % EMULATOR_NAME
)


def d_submit(h):
    try:
        body = json.loads(h.body() or b"null")
    except ValueError:
        return h.reply(400, traceback.format_exc())
    try:
        req = SubmitRequest(body)
    except TypeError:
        return h.reply(400, traceback.format_exc())
    try:
        sid = h.node.jobs.submit(req)
    except ValueError as e:
        # Ray's head relays the job agent's 400 as its own 500 (KubeRay's dashboard client
        # relies on: status 500 and "Please use a different submission_id" in the body).
        inner = _AGENT_TB + "ValueError: %s\n" % e
        text = (
            "Traceback (most recent call last):\n"
            '  File "kubesim_ray/node.py", line 0, in submit_job  [%s: Ray\'s dashboard head traceback]\n'
            "RuntimeError: Request failed with status code 400: %s.\n" % (EMULATOR_NAME, inner)
        )
        return h.reply(500, text)
    except Exception:  # noqa: BLE001
        return h.reply(500, traceback.format_exc())
    h.reply(200, {"job_id": sid, "submission_id": sid})


def d_list(h):
    h.reply(200, h.node.jobs.list())


def d_get(h, sid):
    job = h.node.jobs.get(sid)
    if job is None:
        return h.reply(404, "Job %s does not exist" % sid)
    h.reply(200, job)


def d_logs(h, sid):
    if h.node.jobs.get(sid) is None:
        return h.reply(404, "Job %s does not exist" % sid)
    h.reply(200, {"logs": h.node.jobs.logs(sid)})


def d_tail(h, sid):
    if h.node.jobs.get(sid) is None:
        return h.reply(404, "Job %s does not exist" % sid)
    if ws.is_upgrade_request(h.headers):
        sock = ws.ServerSocket.handshake(h)
        try:
            for chunk in h.node.jobs.tail(sid):
                sock.send_text(chunk)
            sock.close(ws.CLOSE_NORMAL)
        except OSError:
            pass
        return
    # Without a WebSocket upgrade: the same chunks as a chunked text/plain stream.
    h.send_response(200)
    h.send_header("Content-Type", "text/plain; charset=utf-8")
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    try:
        for chunk in h.node.jobs.tail(sid):
            data = chunk.encode()
            h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            h.wfile.flush()
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()
    except OSError:
        h.close_connection = True


def d_stop(h, sid):
    if h.node.jobs.get(sid) is None:
        return h.reply(404, "Job %s does not exist" % sid)
    h.reply(200, {"stopped": h.node.jobs.stop(sid)})


def d_delete(h, sid):
    if h.node.jobs.get(sid) is None:
        return h.reply(404, "Job %s does not exist" % sid)
    try:
        deleted = h.node.jobs.delete(sid)
    except RuntimeError as e:
        text = (
            "Traceback (most recent call last):\n"
            '  File "kubesim_ray/node.py", line 0, in delete_job  [%s: Ray\'s dashboard head traceback]\n'
            "RuntimeError: Request failed with status code 500: %sRuntimeError: %s\n.\n"
            % (EMULATOR_NAME, _AGENT_TB, e)
        )
        return h.reply(500, text)
    h.reply(200, {"deleted": deleted})


class DashboardHandler(Handler):
    routes = [
        (r"/", "GET", d_index),
        (r"/api/version", "GET", d_version),
        (r"/api/gcs_healthz", "GET", healthz),
        (r"/api/packages/([^/]+)/([^/]+)", "GET", _need_auth(d_get_package)),
        (r"/api/packages/([^/]+)/([^/]+)", "PUT", _need_auth(d_put_package)),
        (r"/api/jobs/", "POST", _need_auth(d_submit)),
        (r"/api/jobs/", "GET", _need_auth(d_list)),
        (r"/api/jobs/([^/]+)", "GET", _need_auth(d_get)),
        (r"/api/jobs/([^/]+)", "DELETE", _need_auth(d_delete)),
        (r"/api/jobs/([^/]+)/logs", "GET", _need_auth(d_logs)),
        (r"/api/jobs/([^/]+)/logs/tail", "GET", _need_auth(d_tail)),
        (r"/api/jobs/([^/]+)/stop", "POST", _need_auth(d_stop)),
    ]


# ---------------------------------------------------------------- resources
class Scheduler:
    """Cluster resources as the GCS sees them: node registrations and reservations made for
    jobs' entrypoint resources (entrypoint_num_cpus/gpus/memory/resources)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.nodes = {}  # node_id -> info (+ "available", "last_seen")

    def register(self, info: dict):
        with self.lock:
            nid = info["node_id"]
            cur = self.nodes.get(nid)
            if cur is None:
                cur = dict(info)
                cur["available"] = dict(info.get("resources") or {})
                cur["start_time_ms"] = now_ms()
                self.nodes[nid] = cur
            cur["last_seen"] = time.time()

    def alive_nodes(self):
        now = time.time()
        with self.lock:
            return [n for n in self.nodes.values() if n.get("is_head") or now - n["last_seen"] < NODE_STALE_S]

    def try_reserve(self, request: dict):
        now = time.time()
        with self.lock:
            order = sorted(self.nodes.values(), key=lambda n: (not n.get("is_head"), n["start_time_ms"]))
            for n in order:
                if not n.get("is_head") and now - n["last_seen"] >= NODE_STALE_S:
                    continue
                if all(n["available"].get(k, 0.0) >= v for k, v in request.items()):
                    for k, v in request.items():
                        n["available"][k] = n["available"].get(k, 0.0) - v
                    return {"node_id": n["node_id"], "node_ip": n["ip"], "agent_port": n["agent_port"],
                            "request": request}
        return None

    def release(self, placed: dict):
        with self.lock:
            n = self.nodes.get(placed["node_id"])
            if n:
                for k, v in placed["request"].items():
                    n["available"][k] = n["available"].get(k, 0.0) + v


def node_resources(args) -> dict:
    res = {}
    cpus = args.num_cpus if args.num_cpus is not None else float(os.cpu_count() or 1)
    res["CPU"] = float(cpus)
    if args.num_gpus:
        res["GPU"] = float(args.num_gpus)
    if args.memory:
        res["memory"] = float(args.memory)
    if args.resources:
        text = args.resources.strip()
        if len(text) >= 2 and text[0] == text[-1] == "'":
            text = text[1:-1]
        for k, v in json.loads(text).items():
            res[k] = float(v)
    return res


# ---------------------------------------------------------------- process plumbing
def _bind(handler_cls, node, host, port, what):
    cls = type(handler_cls.__name__, (handler_cls,), {"node": node})
    try:
        server = Server((host, port), cls)
    except OSError as e:
        raise SystemExit_(
            "ValueError: Ray component %s is trying to use a port number %d that is used by other "
            "components (%s on %s)." % (what, port, e.strerror, host)
        ) from e
    threading.Thread(target=server.serve_forever, name=what, daemon=True).start()
    return server


class SystemExit_(Exception):  # noqa: N801
    pass


def _register_pid(temp_root):
    os.makedirs(temp_root, exist_ok=True)
    with open(os.path.join(temp_root, "kubesim_ray_pids"), "a") as f:
        f.write("%d\n" % os.getpid())


def _make_session(temp_root, session_name):
    session_dir = os.path.join(temp_root, session_name)
    os.makedirs(os.path.join(session_dir, "logs"), exist_ok=True)
    os.makedirs(os.path.join(session_dir, "runtime_resources", "working_dir_files"), exist_ok=True)
    latest = os.path.join(temp_root, "session_latest")
    tmp = latest + ".%d" % os.getpid()
    try:
        os.symlink(session_name, tmp)
        os.replace(tmp, latest)
    except OSError:
        pass
    return session_dir


class Node:
    """Common state of a head or worker process."""

    def __init__(self, args, is_head: bool):
        self.args = args
        self.is_head = is_head
        self.node_ip = args.node_ip_address
        self.node_id = new_node_id()
        self.agent_port = args.dashboard_agent_listen_port
        self.temp_root = args.temp_dir or ray_temp_root()
        self.stop_event = threading.Event()
        self.exit_code = 0
        self.servers = []
        self.out = CliLogger()

    def access_log(self, line):
        pass

    def install_signal_handlers(self):
        def on_term(signum, frame):
            # Ray's node shutdown hook: kill the node's processes, then sys.exit(1).
            self.exit_code = 1
            self.stop_event.set()

        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)

    def print_block_banner(self):
        o = self.out
        o.newline()
        o.group_start("--block", "scripts.py", 1123)
        o.info("This command will now block forever until terminated by a signal.", "scripts.py", 1124)
        o.info("Running subprocesses are monitored and a message will be printed if any of them terminate "
               "unexpectedly. Subprocesses exit with SIGTERM will be treated as graceful, thus NOT reported.",
               "scripts.py", 1127)
        o.info("Process exit logs will be saved to: %s"
               % os.path.join(self.session_dir, "logs", "ray_process_exit.log"), "scripts.py", 1130)
        o.group_end()

    def shutdown_servers(self):
        for s in self.servers:
            try:
                s.shutdown()
                s.server_close()
            except OSError:
                pass


class HeadNode(Node):
    def __init__(self, args):
        super().__init__(args, is_head=True)
        self.session_name = new_session_name()
        self.session_dir = _make_session(self.temp_root, self.session_name)
        self.logs_dir = os.path.join(self.session_dir, "logs")
        self.gcs_packages_dir = os.path.join(self.session_dir, "kubesim_gcs_packages")
        self.gcs_port = args.port
        self.dashboard_port = args.dashboard_port
        self.gcs_address = "%s:%d" % (self.node_ip, self.gcs_port)
        self.scheduler = Scheduler()
        self.jobs = JobManager(self)
        self.auth_token = None
        if os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
            self.auth_token = _load_auth_token()
        self._dashboard_log = os.path.join(self.logs_dir, "dashboard.log")

    def access_log(self, line):
        with open(self._dashboard_log, "a") as f:
            f.write(log_line("INFO", "web_log.py", 206, line))

    def cluster_view(self):
        nodes = []
        for n in self.scheduler.alive_nodes():
            nodes.append({k: n[k] for k in ("node_id", "ip", "is_head", "resources", "available", "labels",
                                            "agent_port") if k in n})
        return {
            "dashboard_address": "%s:%d" % (self.node_ip, self.dashboard_port),
            "gcs_address": self.gcs_address,
            "session_name": self.session_name,
            "ray_version": ray_version(),
            "nodes": nodes,
        }

    def start(self):
        ip = self.node_ip
        self.servers.append(_bind(GcsHandler, self, ip, self.gcs_port, "gcs_server"))
        if self.args.include_dashboard:
            self.servers.append(_bind(DashboardHandler, self, ip, self.dashboard_port, "dashboard"))
        self.servers.append(_bind(AgentHandler, self, ip, self.agent_port, "dashboard_agent"))
        self.scheduler.register({
            "node_id": self.node_id, "ip": ip, "is_head": True, "agent_port": self.agent_port,
            "resources": node_resources(self.args), "labels": self.args.labels or "",
        })
        with open(os.path.join(self.temp_root, "ray_current_cluster"), "w") as f:
            f.write(self.gcs_address + "\n")
        _register_pid(self.temp_root)

    def print_started(self):
        o = self.out
        ip = self.node_ip
        if os.environ.get("RAY_USAGE_STATS_ENABLED", "1") != "0" and not self.args.disable_usage_stats:
            o.info("Usage stats collection is enabled by default without user confirmation because this "
                   "terminal is detected to be non-interactive. To disable this, add `--disable-usage-stats` "
                   "to the command that starts the cluster, or run the following command: `ray "
                   "disable-usage-stats` before starting the cluster. See "
                   "https://docs.ray.io/en/master/cluster/usage-stats.html for more details.",
                   "usage_lib.py", 447)
            o.newline()
        o.info("Local node IP: %s" % ip, "scripts.py", 925)
        o.info("%s: GCS stub on %s:%d, dashboard (Jobs API) on %s:%d, dashboard agent on %s:%d; session %s. "
               "The Python ray library is not emulated." % (EMULATOR_NAME, ip, self.gcs_port, ip,
                                                           self.dashboard_port, ip, self.agent_port,
                                                           self.session_dir), "scripts.py", 926)
        o.big_success("Ray runtime started.", "scripts.py", 941)
        o.group_start("Next steps", "scripts.py", 944)
        o.info("To add another node to this Ray cluster, run", "scripts.py", 945)
        o.info("  ray start --address='%s'" % self.gcs_address, "scripts.py", 948)
        o.newline()
        o.info("To connect to this Ray cluster:", "scripts.py", 957)
        o.info("  import ray", "scripts.py", 959)
        o.info("  ray.init()", "scripts.py", 960)
        o.newline()
        o.info("To submit a Ray job using the Ray Jobs CLI:", "scripts.py", 972)
        o.info("  RAY_ADDRESS='http://%s:%d' ray job submit --working-dir . -- python my_script.py"
               % (ip, self.dashboard_port), "scripts.py", 973)
        o.newline()
        o.info("To terminate the Ray runtime, run", "scripts.py", 1002)
        o.info("  ray stop", "scripts.py", 1003)
        o.newline()
        o.info("To view the status of the cluster, use", "scripts.py", 1006)
        o.info("  ray status", "scripts.py", 1007)
        o.newline()
        o.info("To monitor and debug Ray, view the dashboard at ", "scripts.py", 1011)
        o.info("  %s:%d" % (ip, self.dashboard_port), "scripts.py", 1012)
        o.newline()
        o.info("If connection to the dashboard fails, check your firewall settings and network configuration.",
               "scripts.py", 1019)
        o.group_end()

    def run_blocking(self):
        self.install_signal_handlers()
        self.print_block_banner()
        while not self.stop_event.wait(1.0):
            pass
        self.jobs.shutdown()
        self.shutdown_servers()
        return self.exit_code


class WorkerNode(Node):
    def __init__(self, args, gcs_host, gcs_port):
        super().__init__(args, is_head=False)
        self.gcs_host, self.gcs_port = gcs_host, gcs_port
        self.session_name = None
        self.session_dir = None

    def _gcs_url(self, path):
        return "http://%s:%d%s" % (self.gcs_host, self.gcs_port, path)

    def register(self, timeout=2.0):
        status, reply = http_json("POST", self._gcs_url("/kubesim/v1/nodes"), {
            "node_id": self.node_id, "ip": self.node_ip, "is_head": False, "agent_port": self.agent_port,
            "resources": node_resources(self.args), "labels": self.args.labels or "",
        }, timeout=timeout)
        if status != 200:
            raise OSError("GCS registration answered %s" % status)
        return reply

    def wait_for_gcs(self):
        timeout = float(os.environ.get("RAY_gcs_rpc_server_connect_timeout_s", "60"))
        deadline = time.time() + timeout
        attempt = 0
        while True:
            try:
                return self.register()
            except OSError as e:
                attempt += 1
                if time.time() > deadline:
                    raise SystemExit_(
                        "ConnectionError: Failed to connect to GCS at %s:%d within %d seconds (%s). "
                        "GCS may have been killed. It's either GCS is terminated by `ray stop` or is "
                        "killed unexpectedly." % (self.gcs_host, self.gcs_port, timeout, e)
                    ) from e
                if attempt == 1 or attempt % 5 == 0:
                    sys.stderr.write(log_line("WARNING", "gcs_utils.py", 85,
                                              "Failed to connect to GCS at %s:%d, retrying (%s)"
                                              % (self.gcs_host, self.gcs_port, e)))
                    sys.stderr.flush()
                time.sleep(1.0)

    def start(self):
        reply = self.wait_for_gcs()
        self.session_name = reply.get("session_name") or new_session_name()
        self.session_dir = _make_session(self.temp_root, self.session_name)
        self.servers.append(_bind(AgentHandler, self, self.node_ip, self.agent_port, "dashboard_agent"))
        _register_pid(self.temp_root)

    def print_started(self):
        o = self.out
        o.info("Local node IP: %s" % self.node_ip, "scripts.py", 1047)
        o.info("%s: worker node %s joined the GCS at %s:%d; dashboard agent on %s:%d. The Python ray library "
               "is not emulated." % (EMULATOR_NAME, self.node_id, self.gcs_host, self.gcs_port, self.node_ip,
                                     self.agent_port), "scripts.py", 1048)
        o.big_success("Ray runtime started.", "scripts.py", 1063)
        o.info("To terminate the Ray runtime, run", "scripts.py", 1067)
        o.info("  ray stop", "scripts.py", 1068)

    def run_blocking(self):
        self.install_signal_handlers()
        self.print_block_banner()
        reconnect = float(os.environ.get("RAY_gcs_rpc_server_reconnect_timeout_s", "60"))
        last_ok = time.time()
        while not self.stop_event.wait(HEARTBEAT_S):
            try:
                self.register(timeout=HEARTBEAT_S)
                last_ok = time.time()
            except OSError:
                if time.time() - last_ok > reconnect:
                    # The raylet exits when the GCS stays unreachable; `ray start --block` reports it.
                    self.out.error("Some Ray subprocesses exited unexpectedly:", "scripts.py", 1150)
                    self.out.error("  raylet [exit code=1]: lost the connection to the GCS at %s:%d for %ds"
                                   % (self.gcs_host, self.gcs_port, reconnect), "scripts.py", 1153)
                    self.out.error("Remaining processes will be killed.", "scripts.py", 1163)
                    self.shutdown_servers()
                    return 1
        self.shutdown_servers()
        return self.exit_code


def _load_auth_token():
    tok = os.environ.get("RAY_AUTH_TOKEN")
    if tok:
        return tok.strip()
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None
