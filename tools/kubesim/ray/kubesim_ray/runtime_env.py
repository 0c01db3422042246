"""runtime_env handling, following Ray's packaging.py / working_dir.py / protocol.py.

Implemented: ``working_dir`` from ``http://``/``https://`` URLs, ``file://`` paths and
``gcs://`` packages uploaded through ``PUT /api/packages/gcs/...``; ``env_vars``;
validation with Ray's error texts. ``pip``/``conda``/``uv``/``py_modules``/``container``/
``image_uri`` are validated where Ray validates them on submission, then not installed (the
emulator installs nothing; a note goes to runtime_env_setup-<id>.log).
"""

import fcntl
import os
import re
import shutil
import tempfile
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections import OrderedDict

# Protocol enum members, in Ray's order (used in its "Supported protocols" message).
PROTOCOL_MEMBERS = ["GCS", "CONDA", "PIP", "UV", "HTTP", "HTTPS", "S3", "GS", "AZURE", "ABFSS", "FILE"]
PROTOCOLS = {m.lower() for m in PROTOCOL_MEMBERS}
REMOTE_PROTOCOLS = {"http", "https", "s3", "gs", "azure", "abfss", "file"}
MAC_OS_ZIP_HIDDEN_DIR_NAME = "__MACOSX"
DEFAULT_HTTP_USER_AGENT = "ray-runtime-env-curl/1.0"
MISSING_DEPENDENCIES_WARNING = (
    "Note that these must be preinstalled on all nodes in the Ray cluster; it is not "
    "sufficient to install them in the runtime_env."
)
NOT_INSTALLED_FIELDS = ("pip", "conda", "uv", "py_modules", "container", "image_uri", "java_jars")


# --- errors shaped like the libraries Ray uses (their module names show in tracebacks) ---
class RequestException(IOError):
    pass


RequestException.__module__ = "requests.exceptions"


class HTTPError(RequestException):
    pass


HTTPError.__module__ = "requests.exceptions"


class ConnectionError_(RequestException):  # noqa: N801 (named like requests' class)
    pass


ConnectionError_.__name__ = ConnectionError_.__qualname__ = "ConnectionError"
ConnectionError_.__module__ = "requests.exceptions"


class Timeout(RequestException):
    pass


Timeout.__name__ = Timeout.__qualname__ = "ReadTimeout"
Timeout.__module__ = "requests.exceptions"


class RuntimeEnvSetupError(Exception):
    """Raised with the text Ray would put after ``runtime_env setup failed: ``."""


# --- URI parsing (ray._private.runtime_env.packaging.parse_uri) ---
def is_path(s: str) -> bool:
    scheme = urllib.parse.urlparse(s).scheme
    return scheme == "" or (len(scheme) == 1 and os.name == "nt")


def parse_uri(pkg_uri: str):
    if is_path(pkg_uri):
        raise ValueError("Expected URI but received path %s" % pkg_uri)
    uri = urllib.parse.urlparse(pkg_uri)
    if uri.scheme not in PROTOCOLS:
        raise ValueError(
            'Invalid protocol for runtime_env URI "%s". Supported protocols: %s. Original error: '
            "'%s' is not a valid Protocol" % (pkg_uri, PROTOCOL_MEMBERS, uri.scheme)
        )
    protocol = uri.scheme
    if protocol in REMOTE_PROTOCOLS:
        if uri.path.endswith(".whl"):
            package_name = uri.path.split("/")[-1]
        else:
            package_name = "%s_%s%s" % (protocol, uri.netloc, uri.path)
            for ch in ["/", ":", "@", "+", " ", "(", ")"]:
                package_name = package_name.replace(ch, "_")
            # Remove all periods except the last, which is part of the file extension.
            package_name = package_name.replace(".", "_", package_name.count(".") - 1)
    else:
        package_name = uri.netloc
    return protocol, package_name


def validate_uri(uri):
    if not isinstance(uri, str):
        raise TypeError("URIs for working_dir and py_modules must be strings, got %s." % type(uri))
    try:
        protocol, path = parse_uri(uri)
    except ValueError:
        raise ValueError(
            "%s is not a valid URI. Passing directories or modules to be dynamically uploaded is "
            "only supported at the job level (i.e., passed to `ray.init`)." % uri
        ) from None
    if protocol in REMOTE_PROTOCOLS and not path.endswith(".zip") and not path.endswith(".whl"):
        raise ValueError("Only .zip or .whl files supported for remote URIs.")


def _validate_pip(pip):
    def from_file(path):
        if not os.path.isfile(path):
            raise ValueError("%s is not a valid file" % path)
        with open(path) as f:
            return f.read().strip().split("\n")

    if isinstance(pip, str):
        result = {"packages": from_file(pip), "pip_check": False}
    elif isinstance(pip, list) and all(isinstance(p, str) for p in pip):
        result = {"packages": pip, "pip_check": False}
    elif isinstance(pip, dict):
        extra = set(pip) - {"packages", "pip_check", "pip_version"}
        if extra:
            raise ValueError(
                "runtime_env['pip'] can only have these fields: packages, pip_check and "
                "pip_version, but got: %s" % list(pip)
            )
        if "packages" not in pip:
            raise ValueError("runtime_env['pip'] must include field 'packages', but got %s" % pip)
        result = dict(pip)
        result["pip_check"] = pip.get("pip_check", False)
        if isinstance(pip["packages"], str):
            result["packages"] = from_file(pip["packages"])
        elif not isinstance(pip["packages"], list):
            raise ValueError(
                "runtime_env['pip']['packages'] must be of type str of list, got: %s"
                % type(pip["packages"])
            )
    else:
        raise TypeError("runtime_env['pip'] must be of type str or List[str], got %s" % type(pip))
    result["packages"] = list(OrderedDict.fromkeys(result["packages"]))
    return result if result["packages"] else None


def validate_runtime_env(runtime_env):
    """Validate like ``ray.runtime_env.RuntimeEnv(**runtime_env)``; returns the normalised dict.

    Raises TypeError/ValueError with Ray's messages.
    """
    if runtime_env is None:
        return {}
    env = dict(runtime_env)
    if env.get("conda") and env.get("pip"):
        raise ValueError(
            "The 'pip' field and 'conda' field of runtime_env cannot both be specified.\n"
            "specified pip field: %s\nspecified conda field: %s\n"
            "To use pip with conda, please only set the 'conda' field, and specify your pip "
            "dependencies within the conda YAML config dict: see "
            "https://conda.io/projects/conda/en/latest/user-guide/tasks/manage-environments.html"
            "#create-env-file-manually" % (env["pip"], env["conda"])
        )
    wd = env.get("working_dir")
    if wd is not None:
        if not isinstance(wd, str):
            raise TypeError("`working_dir` must be a string, got %s." % type(wd))
        validate_uri(wd)
    mods = env.get("py_modules")
    if mods is not None:
        if not isinstance(mods, list):
            raise TypeError("`py_modules` must be a list of strings, got %s." % type(mods))
        for m in mods:
            validate_uri(m)
    ev = env.get("env_vars")
    if ev is not None:
        if not isinstance(ev, dict):
            raise TypeError("runtime_env['env_vars'] must be of type Dict[str, str], got %s" % type(ev))
        for k, v in ev.items():
            if not isinstance(k, str):
                raise TypeError(
                    "runtime_env['env_vars'] must be of type Dict[str, str], but the key %s is of "
                    "type %s" % (k, type(k))
                )
            if not isinstance(v, str):
                raise TypeError(
                    "runtime_env['env_vars'] must be of type Dict[str, str], but the value %s is "
                    "of type %s" % (v, type(v))
                )
        if not ev:
            del env["env_vars"]
    if env.get("pip") is not None:
        pip = _validate_pip(env["pip"])
        if pip is None:
            del env["pip"]
        else:
            env["pip"] = pip
    return env


# --- download and unpack (packaging.download_and_unpack_package / unzip_package) ---
def get_top_level_dir_from_compressed_package(package_path: str):
    with zipfile.ZipFile(package_path, "r") as package_zip:
        names = package_zip.namelist()
    top_level_directory = None
    for file_name in names:
        if top_level_directory is None:
            if "/" not in file_name:
                return None
            dir_name = file_name.split("/")[0]
            if dir_name == MAC_OS_ZIP_HIDDEN_DIR_NAME:
                continue
            top_level_directory = dir_name
        else:
            if "/" not in file_name or file_name.split("/")[0] not in (
                top_level_directory,
                MAC_OS_ZIP_HIDDEN_DIR_NAME,
            ):
                return None
    return top_level_directory


def remove_dir_from_filepaths(base_dir: str, rdir: str):
    with tempfile.TemporaryDirectory() as tmp_dir:
        shutil.move(os.path.join(base_dir, rdir), os.path.join(tmp_dir, rdir))
        for child in os.listdir(os.path.join(tmp_dir, rdir)):
            shutil.move(os.path.join(tmp_dir, rdir, child), os.path.join(base_dir, child))


def unzip_package(package_path: str, target_dir: str, remove_top_level_directory: bool, unlink_zip: bool):
    created = False
    try:
        os.mkdir(target_dir)
        created = True
    except FileExistsError:
        pass
    try:
        with zipfile.ZipFile(str(package_path), "r") as zip_ref:
            zip_ref.extractall(target_dir)
        if remove_top_level_directory:
            top = get_top_level_dir_from_compressed_package(package_path)
            if top is not None:
                macos_dir = os.path.join(target_dir, MAC_OS_ZIP_HIDDEN_DIR_NAME)
                if os.path.isdir(macos_dir):
                    shutil.rmtree(macos_dir)
                remove_dir_from_filepaths(target_dir, top)
    except BaseException:
        # Stricter than Ray: do not leave a half-unpacked directory that a retry would reuse.
        if created:
            shutil.rmtree(target_dir, ignore_errors=True)
        raise
    if unlink_zip:
        os.unlink(package_path)


def _http_headers():
    headers = {
        "User-Agent": os.environ.get("RAY_RUNTIME_ENV_HTTP_USER_AGENT", DEFAULT_HTTP_USER_AGENT),
        "Accept": "*/*",
    }
    token = os.environ.get("RAY_RUNTIME_ENV_BEARER_TOKEN")
    if token:
        headers["Authorization"] = "Bearer " + token
    return headers


def _http_download(uri: str, dest: str):
    req = urllib.request.Request(uri, headers=_http_headers())
    parts = urllib.parse.urlsplit(uri)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp, open(dest, "wb") as out:
            out.write(resp.read())
    except urllib.error.HTTPError as e:
        kind = "Client" if 400 <= e.code < 500 else "Server"
        raise HTTPError("%d %s Error: %s for url: %s" % (e.code, kind, e.reason, uri)) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        if isinstance(reason, (TimeoutError,)) or "timed out" in str(reason):
            raise Timeout(
                "HTTPConnectionPool(host='%s', port=%s): Read timed out. (read timeout=60)"
                % (parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
            ) from None
        raise ConnectionError_(
            "%sConnectionPool(host='%s', port=%s): Max retries exceeded with url: %s (Caused by "
            "NewConnectionError('<urllib3.connection.%sConnection object>: Failed to establish a "
            "new connection: %s'))"
            % (
                "HTTPS" if parts.scheme == "https" else "HTTP",
                parts.hostname,
                parts.port or (443 if parts.scheme == "https" else 80),
                parts.path or "/",
                "HTTPS" if parts.scheme == "https" else "HTTP",
                reason,
            )
        ) from None


def _remote_download(protocol: str, uri: str, dest: str):
    if protocol == "file":
        with open(uri[len("file://"):], "rb") as fin, open(dest, "wb") as fout:
            fout.write(fin.read())
    elif protocol in ("http", "https"):
        _http_download(uri, dest)
    elif protocol == "s3":
        raise ImportError(
            "You must `pip install smart_open[s3]` to fetch URIs in s3 bucket. "
            + MISSING_DEPENDENCIES_WARNING
        )
    elif protocol == "gs":
        raise ImportError(
            "You must `pip install smart_open[gcs]` to fetch URIs in Google Cloud Storage bucket."
            + MISSING_DEPENDENCIES_WARNING
        )
    elif protocol == "azure":
        raise ImportError(
            "You must `pip install azure-storage-blob azure-identity smart_open[azure]` to fetch "
            "URIs in Azure Blob Storage. " + MISSING_DEPENDENCIES_WARNING
        )
    else:
        raise ImportError(
            "You must `pip install adlfs azure-identity` to fetch URIs in Azure Blob File System "
            "Secure. " + MISSING_DEPENDENCIES_WARNING
        )


class _FileLock:
    def __init__(self, path):
        self.path = path
        self.fd = None

    def __enter__(self):
        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def download_and_unpack_package(pkg_uri: str, base_directory: str, gcs_packages_dir: str) -> str:
    """Returns the local directory (or, for a .whl, the file). Cached by the URI's parsed name:
    the query string is not part of it, so a re-signed URL reuses an unpacked directory."""
    protocol, pkg_name = parse_uri(pkg_uri)
    pkg_file = os.path.join(base_directory, pkg_name)
    stem, suffix = os.path.splitext(pkg_file)
    if suffix == "":
        raise ValueError(
            "Invalid package URI: %s.URI must have a file extension and the URI must be valid." % pkg_uri
        )
    with _FileLock(pkg_file + ".lock"):
        local_dir = stem
        if os.path.exists(local_dir):
            assert os.path.isdir(local_dir), "%s is not a directory" % local_dir
            return local_dir
        if protocol == "gcs":
            src = os.path.join(gcs_packages_dir, pkg_name)
            if not os.path.exists(src):
                raise IOError(
                    "Failed to download runtime_env file package %s from the GCS to the Ray worker "
                    "node. The package may have prematurely been deleted from the GCS due to a long "
                    "upload time or a problem with Ray. Try setting the environment variable "
                    "RAY_RUNTIME_ENV_TEMPORARY_REFERENCE_EXPIRATION_S  to a value larger than the "
                    "upload time in seconds (the default is 600). If this fails, try re-running "
                    "after making any change to a file in the file package." % pkg_uri
                )
            shutil.copyfile(src, pkg_file)
            if suffix == ".zip":
                unzip_package(pkg_file, local_dir, remove_top_level_directory=False, unlink_zip=True)
            else:
                return pkg_file
        elif protocol in REMOTE_PROTOCOLS:
            try:
                _remote_download(protocol, pkg_uri, pkg_file)
            except BaseException:
                if os.path.exists(pkg_file):
                    os.unlink(pkg_file)
                raise
            if suffix in (".zip", ".jar"):
                unzip_package(pkg_file, local_dir, remove_top_level_directory=True, unlink_zip=True)
            elif suffix == ".whl":
                return pkg_file
            else:
                raise NotImplementedError(
                    "Package format %s is  not supported for remote protocols" % suffix
                )
        else:
            raise NotImplementedError("Protocol %s is not supported" % protocol)
        return local_dir


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env_vars(env_vars, base_env):
    """runtime_env env_vars may reference existing variables as ${VAR}."""
    out = {}
    for k, v in (env_vars or {}).items():
        out[k] = _ENV_REF.sub(lambda m: base_env.get(m.group(1), m.group(0)), v)
    return out


def setup_runtime_env(runtime_env, session_dir: str, base_env: dict, setup_log):
    """Create the job's runtime env. Returns (cwd or None, env dict for the driver).

    Raises RuntimeEnvSetupError carrying Ray's message text after the retries
    (RUNTIME_ENV_RETRY_TIMES, RUNTIME_ENV_RETRY_INTERVAL_MS) are used up.
    """
    runtime_env = runtime_env or {}
    retries = int(os.environ.get("RUNTIME_ENV_RETRY_TIMES", "3"))
    interval = int(os.environ.get("RUNTIME_ENV_RETRY_INTERVAL_MS", "1000")) / 1000.0
    resources = os.path.join(session_dir, "runtime_resources")
    wd_dir = os.path.join(resources, "working_dir_files")
    os.makedirs(wd_dir, exist_ok=True)
    gcs_dir = os.path.join(session_dir, "kubesim_gcs_packages")

    for field in NOT_INSTALLED_FIELDS:
        if runtime_env.get(field):
            setup_log(
                "kubesim Ray control-plane emulator: runtime_env field '%s' (%r) is accepted but "
                "not installed; the job runs with the host's tools and Python environment."
                % (field, runtime_env[field])
            )

    error_text = None
    local_dir = None
    for attempt in range(max(1, retries)):
        try:
            uri = runtime_env.get("working_dir")
            if uri:
                setup_log("Setting up working_dir %s" % uri)
                download_and_unpack_package(uri, wd_dir, gcs_dir)
                _, name = parse_uri(uri)
                local_dir = os.path.splitext(os.path.join(wd_dir, name))[0]
                if not os.path.isdir(local_dir):
                    raise ValueError(
                        "Local directory %s for URI %s does not exist on the cluster. Something may "
                        "have gone wrong while downloading or unpacking the working_dir."
                        % (local_dir, uri)
                    )
            error_text = None
            break
        except Exception as e:  # noqa: BLE001 - every failure becomes a setup error, like Ray's agent
            error_text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
            setup_log("Failed to create runtime env (attempt %d).\n%s" % (attempt + 1, error_text))
            if attempt + 1 < retries:
                time.sleep(interval)
    if error_text is not None:
        raise RuntimeEnvSetupError(
            "Failed to set up runtime environment.\n"
            "Could not create the actor because its associated runtime env failed to be created.\n"
            + error_text
        )

    env_vars = expand_env_vars(runtime_env.get("env_vars"), base_env)
    env = dict(base_env)
    env.update(env_vars)
    if local_dir:
        python_path = local_dir
        if "PYTHONPATH" in env_vars:
            python_path += os.pathsep + env_vars["PYTHONPATH"]
        if base_env.get("PYTHONPATH"):
            python_path += os.pathsep + base_env["PYTHONPATH"]
        env["PYTHONPATH"] = python_path
    return local_dir, env
