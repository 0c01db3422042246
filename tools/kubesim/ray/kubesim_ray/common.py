"""Small helpers shared by the emulator's processes."""

import json
import os
import secrets
import socket
import sys
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

DEFAULT_GCS_PORT = 6379
DEFAULT_DASHBOARD_PORT = 8265
DEFAULT_AGENT_PORT = 52365


def now_ms() -> int:
    return int(time.time() * 1000)


def log_timestamp() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + ",%03d" % int((t % 1) * 1000)


def log_line(level: str, filename: str, lineno: int, msg: str) -> str:
    """One line in Ray's LOGGER_FORMAT: ``%(asctime)s\\t%(levelname)s %(filename)s:%(lineno)s -- %(message)s``."""
    return "%s\t%s %s:%d -- %s\n" % (log_timestamp(), level, filename, lineno, msg)


def pod_ip() -> str:
    """This pod's own address (the kubelet sets KUBESIM_POD_IP); 127.0.0.1 when unset."""
    return os.environ.get("KUBESIM_POD_IP") or "127.0.0.1"


def localize_host(host: str) -> str:
    """Inside a pod, loopback means the pod itself: map it to the pod's own address.

    kubesim's pods share the host's network stack and each owns one loopback address
    (KUBESIM_POD_IP). A real pod reaching ``127.0.0.1``/``localhost`` reaches its own
    containers, so our clients translate those names to KUBESIM_POD_IP.
    """
    if host in ("localhost", "127.0.0.1", "::1", "") and os.environ.get("KUBESIM_POD_IP"):
        return os.environ["KUBESIM_POD_IP"]
    return host


def localize_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname:
        return url
    host = localize_host(parts.hostname)
    if host == parts.hostname:
        return url
    netloc = host if parts.port is None else "%s:%d" % (host, parts.port)
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def split_host_port(address: str, default_port: int):
    address = address.strip()
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif address.count(":") == 1:
        host, _, port = address.partition(":")
    else:
        host, port = address, ""
    return host, int(port) if port else default_port


def ray_temp_root() -> str:
    """Ray's temp root: $RAY_TMPDIR, else $TMPDIR (Linux), else /tmp; plus ``ray``."""
    base = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(base, "ray")


def new_node_id() -> str:
    return secrets.token_hex(28)


def new_session_name() -> str:
    t = time.time()
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(t)) + "_%06d" % int((t % 1) * 1e6)
    return "session_%s_%d" % (stamp, os.getpid())


def tcp_reachable(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def http_json(method: str, url: str, body=None, timeout: float = 5.0):
    """A small JSON-over-HTTP helper used between emulator processes. Returns (status, obj)."""
    data = None
    headers = {}
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, _decode(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, _decode(e.read())


def _decode(raw: bytes):
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def format_exc_text() -> str:
    return traceback.format_exc()


def die(exc_name: str, message: str, code: int = 1):
    """Exit like an uncaught Python exception in Ray's click CLI (traceback on stderr, exit 1)."""
    sys.stdout.flush()
    sys.stderr.write(
        "Traceback (most recent call last):\n"
        '  File "ray", line 1, in <module>  [%s: traceback elided]\n'
        "%s: %s\n" % ("kubesim Ray control-plane emulator", exc_name, message)
    )
    sys.stderr.flush()
    sys.exit(code)
