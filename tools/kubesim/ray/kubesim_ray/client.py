"""A Jobs API client shaped like Ray's JobSubmissionClient (dashboard_sdk.py / sdk.py)."""

import hashlib
import io
import json
import os
import pathlib
import sys
import urllib.error
import urllib.parse
import urllib.request
import zipfile

from . import runtime_env as renv
from . import websocket as ws
from .common import (
    DEFAULT_GCS_PORT,
    http_json,
    localize_host,
    localize_url,
    log_line,
    ray_temp_root,
    split_host_port,
)

RAY_PKG_PREFIX = "_ray_pkg_"


class ClientError(Exception):
    """An error the real CLI would surface as an uncaught exception: (class name, message)."""

    def __init__(self, exc_name: str, message: str):
        super().__init__(message)
        self.exc_name = exc_name
        self.message = message


def find_bootstrap_address(address):
    """canonicalize_bootstrap_address_or_die: an explicit host:port, else the local cluster."""
    if address in (None, "", "auto"):
        env = os.environ.get("RAY_ADDRESS")
        if env and env != "auto":
            address = env
        else:
            try:
                with open(os.path.join(ray_temp_root(), "ray_current_cluster")) as f:
                    address = f.read().strip()
            except OSError:
                address = ""
            if not address:
                raise ClientError(
                    "ConnectionError",
                    "Could not find any running Ray instance. Please specify the one to connect to by "
                    "setting `--address` flag or `RAY_ADDRESS` environment variable.",
                )
    host, port = split_host_port(address, DEFAULT_GCS_PORT)
    return localize_host(host), port


def gcs_cluster_view(address):
    host, port = find_bootstrap_address(address)
    try:
        status, view = http_json("GET", "http://%s:%d/kubesim/v1/cluster" % (host, port), timeout=5)
    except OSError:
        status, view = 0, None
    if status != 200 or not isinstance(view, dict):
        raise ClientError(
            "ValueError",
            "Couldn't obtain the API server address from GCS. It is likely that the GCS server is down. "
            "Check gcs_server.[out | err] to see if it is still alive.",
        )
    return view


def get_address_for_submission_client(address):
    """RAY_API_SERVER_ADDRESS, then RAY_ADDRESS, override ``address``; a bootstrap (GCS)
    address is turned into the dashboard URL through the GCS."""
    env = os.environ.get("RAY_API_SERVER_ADDRESS") or os.environ.get("RAY_ADDRESS")
    if env:
        address = env
    if address and "://" in address:
        module = address.split("://", 1)[0]
        if module == "ray":
            raise ClientError("RuntimeError", "Ray Client addresses (%s) are not supported by the "
                                              "kubesim Ray control-plane emulator." % address)
        url = address
    else:
        url = "http://" + gcs_cluster_view(address)["dashboard_address"]
    if "://" not in url:
        url = "http://" + url
    module = url.split("://", 1)[0]
    if module not in ("http", "https"):
        raise ClientError("RuntimeError", "Module: %s does not exist.\nThis module was parsed from address: %s"
                          % (module, url))
    return url.rstrip("/")


def auth_headers():
    headers = {}
    raw = os.environ.get("RAY_JOB_HEADERS")
    if raw:
        try:
            headers.update(json.loads(raw))
        except ValueError as e:
            raise ClientError("ValueError", 'Failed to parse headers into JSON.\n                Expected '
                                            'format: {{"KEY": "VALUE"}}, got %s, %s' % (raw, e)) from e
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "token" and "Authorization" not in headers:
        tok = os.environ.get("RAY_AUTH_TOKEN")
        if not tok:
            path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
            try:
                with open(path) as f:
                    tok = f.read().strip()
            except OSError:
                tok = None
        if tok:
            headers["Authorization"] = "Bearer " + tok
    return headers


class Response:
    def __init__(self, status, body: bytes):
        self.status_code = status
        self.content = body
        self.text = body.decode(errors="replace")

    def json(self):
        return json.loads(self.text)


class JobSubmissionClient:
    def __init__(self, address=None, headers=None):
        self.address = get_address_for_submission_client(address)
        self.headers = auth_headers()
        self.headers.update(headers or {})
        r = self._do("GET", "/api/version")
        if r.status_code == 404:
            raise ClientError("RuntimeError", "Version check returned 404. Jobs API is not supported on the Ray "
                                              "cluster. Please ensure the cluster is running Ray 1.9 or higher.")
        if r.status_code >= 400:
            raise ClientError("requests.exceptions.HTTPError", "%d Error for url: %s/api/version"
                              % (r.status_code, self.address))
        self.server_version = r.json()

    def _do(self, method, endpoint, json_data=None, data=None, timeout=60):
        url = localize_url(self.address) + endpoint
        headers = dict(self.headers)
        if json_data is not None:
            data = json.dumps(json_data).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return Response(resp.status, resp.read())
        except urllib.error.HTTPError as e:
            return Response(e.code, e.read())
        except (urllib.error.URLError, OSError):
            raise ClientError("ConnectionError", "Failed to connect to Ray at address: %s." % self.address) from None

    def _raise_error(self, r: Response):
        raise ClientError("RuntimeError", "Request failed with status code %d: %s." % (r.status_code, r.text))

    def get_version(self):
        return self.server_version.get("version")

    # --- packages (working_dir uploads) ---
    def _package_exists(self, uri):
        protocol, name = uri.split("://", 1)
        r = self._do("GET", "/api/packages/%s/%s" % (protocol, name))
        if r.status_code == 200:
            return True
        if r.status_code == 404:
            return False
        self._raise_error(r)

    def _upload_package(self, uri, data: bytes):
        protocol, name = uri.split("://", 1)
        sys.stderr.write(log_line("INFO", "dashboard_sdk.py", 338, "Uploading package %s." % uri))
        r = self._do("PUT", "/api/packages/%s/%s" % (protocol, name), data=data)
        if r.status_code != 200:
            self._raise_error(r)

    def upload_working_dir_if_needed(self, runtime_env):
        """working_dir.upload_working_dir_if_needed: remote URIs pass through (only .zip for
        remote protocols); a local directory or .zip is uploaded as gcs://_ray_pkg_<hash>.zip."""
        wd = runtime_env.get("working_dir")
        if wd is None:
            return runtime_env
        if not isinstance(wd, str):
            raise ClientError("TypeError", "working_dir must be a string or Path (either a local path or remote "
                                           "URI), got %s." % type(wd))
        try:
            protocol, path = renv.parse_uri(wd)
        except ValueError:
            protocol, path = None, None
        if protocol is not None:
            if protocol in renv.REMOTE_PROTOCOLS and not path.endswith(".zip"):
                raise ClientError("ValueError", "Only .zip files supported for remote URIs.")
            return runtime_env
        if os.path.isdir(wd):
            uri = get_uri_for_directory(wd, runtime_env.get("excludes"))
            if not self._package_exists(uri):
                sys.stderr.write(log_line("INFO", "packaging.py", 575,
                                          "Creating a file package for local module '%s'." % wd))
                self._upload_package(uri, zip_directory(wd, runtime_env.get("excludes")))
            runtime_env["working_dir"] = uri
            return runtime_env
        if not os.path.exists(wd) or not wd.endswith(".zip"):
            raise ClientError("ValueError", "directory %s must be an existing directory or a zip package"
                              % pathlib.PurePath(wd))
        with open(wd, "rb") as f:
            data = f.read()
        uri = "gcs://%s%s.zip" % (RAY_PKG_PREFIX, hashlib.sha1(data).hexdigest())
        if not self._package_exists(uri):
            self._upload_package(uri, data)
        runtime_env["working_dir"] = uri
        return runtime_env

    # --- jobs ---
    def submit_job(self, entrypoint, submission_id=None, runtime_env=None, metadata=None,
                   entrypoint_num_cpus=None, entrypoint_num_gpus=None, entrypoint_memory=None,
                   entrypoint_resources=None, entrypoint_label_selector=None):
        runtime_env = dict(runtime_env or {})
        metadata = metadata or {}
        self.upload_working_dir_if_needed(runtime_env)
        try:
            runtime_env = renv.validate_runtime_env(runtime_env)
        except (TypeError, ValueError) as e:
            raise ClientError(type(e).__name__, str(e)) from e
        body = {
            "entrypoint": entrypoint, "submission_id": submission_id, "runtime_env": runtime_env,
            "metadata": metadata, "entrypoint_num_cpus": entrypoint_num_cpus,
            "entrypoint_num_gpus": entrypoint_num_gpus, "entrypoint_memory": entrypoint_memory,
            "entrypoint_resources": entrypoint_resources, "entrypoint_label_selector": entrypoint_label_selector,
        }
        body = {k: v for k, v in body.items() if v is not None}
        r = self._do("POST", "/api/jobs/", json_data=body)
        if r.status_code == 200:
            return r.json()["submission_id"]
        self._raise_error(r)

    def get_job_info(self, job_id):
        r = self._do("GET", "/api/jobs/%s" % urllib.parse.quote(job_id, safe=""))
        if r.status_code == 200:
            return r.json()
        self._raise_error(r)

    def list_jobs(self):
        r = self._do("GET", "/api/jobs/")
        if r.status_code == 200:
            return r.json()
        self._raise_error(r)

    def get_job_logs(self, job_id):
        r = self._do("GET", "/api/jobs/%s/logs" % urllib.parse.quote(job_id, safe=""))
        if r.status_code == 200:
            return r.json()["logs"]
        self._raise_error(r)

    def stop_job(self, job_id):
        r = self._do("POST", "/api/jobs/%s/stop" % urllib.parse.quote(job_id, safe=""))
        if r.status_code == 200:
            return r.json()["stopped"]
        self._raise_error(r)

    def delete_job(self, job_id):
        r = self._do("DELETE", "/api/jobs/%s" % urllib.parse.quote(job_id, safe=""))
        if r.status_code == 200:
            return r.json()["deleted"]
        self._raise_error(r)

    def tail_job_logs(self, job_id):
        """Yields text chunks from the WebSocket; raises like Ray's SDK on an abnormal close."""
        url = localize_url(self.address) + "/api/jobs/%s/logs/tail" % urllib.parse.quote(job_id, safe="")
        try:
            sock = ws.ClientSocket.connect(url, headers=self.headers)
        except ws.HandshakeError as e:
            raise ClientError("aiohttp.client_exceptions.WSServerHandshakeError",
                              "%d, message='Invalid response status', url='%s'" % (e.status, url)) from e
        except OSError:
            raise ClientError("aiohttp.client_exceptions.ClientConnectorError",
                              "Cannot connect to host %s" % urllib.parse.urlsplit(url).netloc) from None
        for text in sock:
            yield text
        sys.stderr.write(log_line("INFO", "sdk.py", 520, "WebSocket closed for job %s with close code %s"
                                  % (job_id, sock.close_code)))
        sys.stderr.flush()
        if sock.close_code == 1006:
            raise ClientError("RuntimeError", "WebSocket connection closed unexpectedly with close code %d"
                              % sock.close_code)


# --- packaging helpers (packaging.py) ---
def _excluded(rel: str, excludes) -> bool:
    import fnmatch

    for pat in excludes or []:
        p = pat.rstrip("/")
        if fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(os.path.basename(rel), p) or rel.startswith(p + "/"):
            return True
    return False


def _walk(root, excludes):
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        keep = []
        for d in sorted(dirnames):
            rel = os.path.normpath(os.path.join(rel_dir, d))
            if not _excluded(rel, excludes):
                keep.append(d)
        dirnames[:] = keep
        if rel_dir != "." and not keep and not filenames:
            yield rel_dir, dirpath
        for name in sorted(filenames):
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if not _excluded(rel, excludes):
                yield rel, os.path.join(dirpath, name)


def get_uri_for_directory(directory, excludes=None):
    """Ray's content hash: XOR of sha1(relative path + content) over the tree, 8 bytes."""
    hash_val = b"0" * 8
    root = os.path.abspath(directory)
    for rel, full in [(".", root)] + list(_walk_all(root, excludes)):
        h = hashlib.sha1()
        h.update((rel if rel != "." else ".").encode())
        if os.path.isfile(full):
            with open(full, "rb") as f:
                for block in iter(lambda: f.read(4096 * 1024), b""):
                    h.update(block)
        hash_val = bytes(a ^ b for a, b in zip(hash_val, h.digest()))
    return "gcs://%s%s.zip" % (RAY_PKG_PREFIX, hash_val.hex())


def _walk_all(root, excludes):
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(d for d in dirnames
                             if not _excluded(os.path.normpath(os.path.join(rel_dir, d)), excludes))
        for d in dirnames:
            yield os.path.normpath(os.path.join(rel_dir, d)), os.path.join(dirpath, d)
        for name in sorted(filenames):
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if not _excluded(rel, excludes):
                yield rel, os.path.join(dirpath, name)


def zip_directory(directory, excludes=None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, strict_timestamps=False) as z:
        for rel, full in _walk(os.path.abspath(directory), excludes):
            z.write(full, rel)
    return buf.getvalue()

