"""The ``ray`` command of kubesim's Ray control-plane emulator."""

import json
import os
import pprint
import shlex
import signal
import subprocess
import sys
import time

from . import EMULATOR_NOTE, ray_version
from .clilog import CliLogger
from .client import ClientError, JobSubmissionClient, find_bootstrap_address, gcs_cluster_view
from .common import (
    DEFAULT_AGENT_PORT,
    DEFAULT_DASHBOARD_PORT,
    DEFAULT_GCS_PORT,
    die,
    http_json,
    localize_host,
    pod_ip,
    ray_temp_root,
    split_host_port,
)

TERMINAL = ("STOPPED", "SUCCEEDED", "FAILED")


class Args:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def parse_options(argv, value_opts, flag_opts, stop_at_positional=False):
    """Click-like option parsing that tolerates options it does not know.

    ``--key=value`` and ``--key value`` for value options, ``--flag`` for flags; unknown
    ``--x=y``/``--x`` are ignored (KubeRay renders every rayStartParam as ``--key=value`` or,
    for "true", ``--key``). Returns (options dict, positionals, tokens after ``--``).
    """
    opts, positionals, rest = {}, [], None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            rest = argv[i + 1:]
            break
        if a.startswith("-") and len(a) > 1 and not (positionals and stop_at_positional):
            name, eq, val = a.lstrip("-").partition("=")
            key = name.replace("-", "_")
            if a in ("-f",):
                key = "follow"
            if key in value_opts:
                if not eq:
                    i += 1
                    if i >= len(argv):
                        die_usage("Option '--%s' requires an argument." % name)
                    val = argv[i]
                opts[key] = val
            elif key in flag_opts:
                opts[key] = True if not eq else val.lower() not in ("false", "0", "no")
            # unknown options are tolerated and ignored
        else:
            if stop_at_positional:
                rest = argv[i:]
                break
            positionals.append(a)
        i += 1
    return opts, positionals, rest


def die_usage(msg, code=2):
    sys.stderr.write("Usage: ray [OPTIONS] COMMAND [ARGS]...\nTry 'ray --help' for help.\n\nError: %s\n" % msg)
    sys.exit(code)


def _float(v, name):
    try:
        return float(v)
    except (TypeError, ValueError):
        die_usage("Invalid value for '--%s': '%s' is not a valid float." % (name, v))


def _int(v, name):
    try:
        return int(v)
    except (TypeError, ValueError):
        die_usage("Invalid value for '--%s': '%s' is not a valid integer." % (name, v))


# ------------------------------------------------------------------ ray start / stop / status
START_VALUES = {
    "address", "port", "dashboard_host", "dashboard_port", "dashboard_agent_listen_port", "num_cpus",
    "num_gpus", "memory", "resources", "labels", "node_ip_address", "temp_dir", "include_dashboard",
    "object_store_memory", "metrics_export_port", "ray_client_server_port", "node_manager_port",
    "object_manager_port", "min_worker_port", "max_worker_port", "dashboard_agent_grpc_port",
    "runtime_env_agent_port", "redis_password", "redis_username", "gcs_server_port", "plasma_directory",
    "storage", "system_config", "log_style", "log_color", "worker_port_list", "autoscaling_config",
    "dashboard_grpc_port", "tracing_startup_hook", "node_name", "ray_debugger_external",
}
START_FLAGS = {"head", "block", "disable_usage_stats", "no_monitor", "verbose", "quiet", "include_log_monitor",
               "enable_object_reconstruction", "no_redirect_output", "kubesim_foreground"}


def cmd_start(argv):
    opts, _, _ = parse_options(argv, START_VALUES, START_FLAGS)
    head = bool(opts.get("head"))
    if not head and not opts.get("address"):
        env_addr = os.environ.get("RAY_ADDRESS")
        if env_addr:
            opts["address"] = env_addr
        else:
            die_usage("If --head is not passed in, --address must be provided.")
    args = Args(
        port=_int(opts.get("port", DEFAULT_GCS_PORT), "port"),
        dashboard_port=_int(opts.get("dashboard_port", DEFAULT_DASHBOARD_PORT), "dashboard-port"),
        dashboard_agent_listen_port=_int(opts.get("dashboard_agent_listen_port", DEFAULT_AGENT_PORT),
                                         "dashboard-agent-listen-port"),
        num_cpus=_float(opts["num_cpus"], "num-cpus") if "num_cpus" in opts else None,
        num_gpus=_float(opts["num_gpus"], "num-gpus") if "num_gpus" in opts else None,
        memory=_int(opts["memory"], "memory") if "memory" in opts else None,
        resources=opts.get("resources"),
        labels=opts.get("labels"),
        node_ip_address=opts.get("node_ip_address") or pod_ip(),
        temp_dir=opts.get("temp_dir"),
        include_dashboard=str(opts.get("include_dashboard", "true")).lower() not in ("false", "0"),
        disable_usage_stats=bool(opts.get("disable_usage_stats")),
    )
    if args.resources:
        try:
            text = args.resources.strip().strip("'")
            json.loads(text)
        except ValueError:
            die_usage("Invalid value for '--resources': %s is not valid JSON." % args.resources)
    block = bool(opts.get("block"))

    from . import node as nodemod  # imported late: keeps `ray job ...` start-up light

    def build():
        if head:
            n = nodemod.HeadNode(args)
        else:
            host, port = split_host_port(opts["address"].replace("ray://", ""), DEFAULT_GCS_PORT)
            n = nodemod.WorkerNode(args, localize_host(host), port)
        n.start()
        return n

    if block:
        try:
            n = build()
        except nodemod.SystemExit_ as e:
            die(*str(e).split(": ", 1))
        n.print_started()
        return n.run_blocking()

    # Without --block, Ray starts daemons and returns: fork a session leader that serves.
    r, w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(w)
        msg = os.read(r, 65536).decode()
        os.close(r)
        if msg.startswith("ok"):
            return 0
        sys.stderr.write(msg)
        return 1
    os.close(r)
    os.setsid()
    try:
        n = build()
    except nodemod.SystemExit_ as e:
        os.write(w, ("error " + str(e) + "\n").encode())
        os._exit(1)
    n.print_started()
    sys.stdout.flush()
    log = os.open(os.path.join(n.session_dir, "logs", "ray_start.out"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.write(w, b"ok\n")
    os.close(w)
    n.out = CliLogger(sys.stdout)
    code = n.run_blocking()
    sys.stdout.flush()
    os._exit(code)


def cmd_stop(argv):
    opts, _, _ = parse_options(argv, {"grace_period"}, {"force", "verbose"})
    path = os.path.join(ray_temp_root(), "kubesim_ray_pids")
    out = CliLogger()
    try:
        with open(path) as f:
            pids = [int(x) for x in f.read().split()]
    except OSError:
        pids = []
    stopped = 0
    sig = signal.SIGKILL if opts.get("force") else signal.SIGTERM
    for pid in pids:
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if not any(b"ray" in c for c in cmd) or b"start" not in cmd:
            continue
        try:
            os.kill(pid, sig)
            stopped += 1
        except OSError:
            pass
    try:
        os.unlink(path)
    except OSError:
        pass
    if stopped:
        out.success("Stopped all %d Ray processes." % stopped, "scripts.py", 1336)
    else:
        out.info("Did not find any active Ray processes.", "scripts.py", 1330)
    return 0


def _fmt_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return ("%dB" % n) if unit == "B" else "%.2f%s" % (n, unit)
        n /= 1024.0


def cmd_status(argv):
    opts, _, _ = parse_options(argv, {"address", "redis_password"}, {"verbose"})
    try:
        view = gcs_cluster_view(opts.get("address"))
    except ClientError as e:
        die(e.exc_name, e.message)
    nodes = view["nodes"]
    print("======== Autoscaler status: %s ========" % time.strftime("%Y-%m-%d %H:%M:%S.000000"))
    print("Node status")
    print("-" * 63)
    print("Active:")
    for n in nodes:
        print(" 1 node_%s" % n["node_id"])
    print("Pending:\n (no pending nodes)\nRecent failures:\n (no failures)\n")
    print("Resources")
    print("-" * 63)
    print("Total Usage:")
    total, avail = {}, {}
    for n in nodes:
        for k, v in (n.get("resources") or {}).items():
            total[k] = total.get(k, 0.0) + v
            avail[k] = avail.get(k, 0.0) + (n.get("available") or {}).get(k, v)
    for k in sorted(total):
        used = total[k] - avail[k]
        if k == "memory":
            print(" %s/%s %s" % (_fmt_bytes(used), _fmt_bytes(total[k]), k))
        else:
            print(" %.1f/%.1f %s" % (used, total[k], k))
    print("\nTotal Constraints:\n (no request_resources() constraints)\nTotal Demands:\n (no resource demands)")
    print("(%s)" % EMULATOR_NOTE)
    return 0


def cmd_health_check(argv):
    opts, _, _ = parse_options(argv, {"address", "component", "redis_password"}, {"skip_version_check"})
    try:
        host, port = find_bootstrap_address(opts.get("address"))
    except ClientError as e:
        die(e.exc_name, e.message)
    try:
        status, body = http_json("GET", "http://%s:%d/api/gcs_healthz" % (host, port), timeout=2)
        if status == 200 and "success" in str(body):
            return 0
        err = "GCS answered %s" % status
    except OSError as e:
        err = str(getattr(e, "reason", e))
    sys.stderr.write("Failed to connect to GCS at %s:%d within 2 seconds: %s\n" % (host, port, err))
    return 1


# ------------------------------------------------------------------ ray job ...
JOB_COMMON_VALUES = {"address", "headers", "verify", "log_style", "log_color"}
JOB_COMMON_FLAGS = {"verbose"}


def _client(out, opts):
    headers = None
    if opts.get("headers"):
        try:
            headers = json.loads(opts["headers"])
        except ValueError as e:
            raise ClientError("ValueError", 'Failed to parse headers into JSON.\n                Expected format: '
                                            '{{"KEY": "VALUE"}}, got %s, %s' % (opts["headers"], e)) from e
    client = JobSubmissionClient(opts.get("address"), headers=headers)
    out.info("Job submission server address: %s" % client.address, "cli.py", 41)
    return client


def _log_job_status(out, client, job_id):
    info = client.get_job_info(job_id)
    status, message = info["status"], info.get("message")
    if status == "SUCCEEDED":
        out.big_success("Job '%s' succeeded" % job_id, "cli.py", 65)
    elif status == "STOPPED":
        out.warning("Job '%s' was stopped" % job_id, "cli.py", 83)
    elif status == "FAILED":
        out.big_error("Job '%s' failed" % job_id, "cli.py", 74)
        if message is not None:
            out.info("Status message: %s" % message, "cli.py", 88)
    else:
        out.info("Status for job '%s': %s" % (job_id, status), "cli.py", 91)
        if message is not None:
            out.info("Status message: %s" % message, "cli.py", 93)
    return status


def _tail_logs(out, client, job_id):
    for chunk in client.tail_job_logs(job_id):
        sys.stdout.write(chunk)
        sys.stdout.flush()
    return _log_job_status(out, client, job_id)


def _parse_json_opt(value, name, want=dict):
    try:
        v = json.loads(value)
    except ValueError as e:
        die_usage("Invalid value for '--%s': %s" % (name, e))
    if not isinstance(v, want):
        die_usage("Invalid value for '--%s': must be a JSON object" % name)
    return v


def job_submit(argv):
    values = JOB_COMMON_VALUES | {"job_id", "submission_id", "runtime_env", "runtime_env_json", "working_dir",
                                  "metadata_json", "entrypoint_num_cpus", "entrypoint_num_gpus",
                                  "entrypoint_memory", "entrypoint_resources", "entrypoint_label_selector"}
    opts, positionals, rest = parse_options(argv, values, JOB_COMMON_FLAGS | {"no_wait"}, stop_at_positional=True)
    entrypoint = rest if rest is not None else positionals
    if not entrypoint:
        die_usage("Missing argument 'ENTRYPOINT...'.")
    out = CliLogger()
    if opts.get("job_id"):
        out.warning("--job-id option is deprecated. Please use --submission-id instead.", "cli.py", 246)
    resources = _parse_json_opt(opts["entrypoint_resources"], "entrypoint-resources") \
        if opts.get("entrypoint_resources") else None
    selector = _parse_json_opt(opts["entrypoint_label_selector"], "entrypoint-label-selector") \
        if opts.get("entrypoint_label_selector") else None
    metadata = _parse_json_opt(opts["metadata_json"], "metadata-json") if opts.get("metadata_json") else None
    submission_id = opts.get("submission_id") or opts.get("job_id")
    client = _client(out, opts)

    runtime_env = {}
    if opts.get("runtime_env"):
        if opts.get("runtime_env_json"):
            raise ClientError("ValueError", "Only one of --runtime_env and --runtime-env-json can be provided.")
        with open(opts["runtime_env"]) as f:
            text = f.read()
        try:
            runtime_env = json.loads(text) if text.strip() else {}
        except ValueError:
            message = ("%s: this emulator reads --runtime-env files written as JSON (a YAML subset); "
                       "use --runtime-env-json for YAML content" % opts["runtime_env"])
            raise ClientError("ValueError", message) from None
    elif opts.get("runtime_env_json"):
        runtime_env = json.loads(opts["runtime_env_json"])
    if opts.get("working_dir") is not None:
        if "working_dir" in runtime_env:
            out.warning("Overriding runtime_env working_dir with --working-dir option", "dashboard_sdk.py", 74)
        runtime_env["working_dir"] = opts["working_dir"]

    # Ray's CLI joins the entrypoint words for a POSIX shell (shlex.join; list2cmdline on Windows
    # and in Ray before PR #63797). KUBESIM_RAY_ENTRYPOINT_JOIN=list2cmdline selects the old join.
    if os.environ.get("KUBESIM_RAY_ENTRYPOINT_JOIN") == "list2cmdline":
        entrypoint_str = subprocess.list2cmdline(entrypoint)
    else:
        entrypoint_str = shlex.join(entrypoint)
    job_id = client.submit_job(
        entrypoint=entrypoint_str,
        submission_id=submission_id,
        runtime_env=runtime_env,
        metadata=metadata,
        entrypoint_num_cpus=_float(opts["entrypoint_num_cpus"], "entrypoint-num-cpus")
        if "entrypoint_num_cpus" in opts else None,
        entrypoint_num_gpus=_float(opts["entrypoint_num_gpus"], "entrypoint-num-gpus")
        if "entrypoint_num_gpus" in opts else None,
        entrypoint_memory=_int(opts["entrypoint_memory"], "entrypoint-memory") if "entrypoint_memory" in opts else None,
        entrypoint_resources=resources,
        entrypoint_label_selector=selector,
    )
    out.big_success("Job '%s' submitted successfully" % job_id, "cli.py", 65)
    out.group_start("Next steps", "cli.py", 291)
    out.info("Query the logs of the job:", "cli.py", 292)
    out.indent += 1
    out.info("ray job logs %s" % job_id, "cli.py", 294)
    out.indent -= 1
    out.info("Query the status of the job:", "cli.py", 296)
    out.indent += 1
    out.info("ray job status %s" % job_id, "cli.py", 298)
    out.indent -= 1
    out.info("Request the job to be stopped:", "cli.py", 300)
    out.indent += 1
    out.info("ray job stop %s" % job_id, "cli.py", 302)
    out.indent -= 1
    out.group_end()
    out.newline()
    if not opts.get("no_wait"):
        out.info("Tailing logs until the job exits (disable with --no-wait):", "cli.py", 311)
        if _tail_logs(out, client, job_id) == "FAILED":
            return 1
    return 0


def job_status(argv):
    opts, pos, _ = parse_options(argv, JOB_COMMON_VALUES, JOB_COMMON_FLAGS)
    if not pos:
        die_usage("Missing argument 'JOB_ID'.")
    out = CliLogger()
    client = _client(out, opts)
    _log_job_status(out, client, pos[0])
    return 0


def job_logs(argv):
    opts, pos, _ = parse_options(argv, JOB_COMMON_VALUES, JOB_COMMON_FLAGS | {"follow"})
    if not pos:
        die_usage("Missing argument 'JOB_ID'.")
    out = CliLogger()
    client = _client(out, opts)
    if opts.get("follow"):
        # Like Ray: the job's final status is printed, and the exit code is 0 even if it FAILED.
        _tail_logs(out, client, pos[0])
    else:
        sys.stdout.write(client.get_job_logs(pos[0]))
        sys.stdout.flush()
    return 0


def job_stop(argv):
    opts, pos, _ = parse_options(argv, JOB_COMMON_VALUES, JOB_COMMON_FLAGS | {"no_wait"})
    if not pos:
        die_usage("Missing argument 'JOB_ID'.")
    job_id = pos[0]
    out = CliLogger()
    client = _client(out, opts)
    out.info("Attempting to stop job '%s'" % job_id, "cli.py", 392)
    client.stop_job(job_id)
    if opts.get("no_wait"):
        return 0
    out.info("Waiting for job '%s' to exit (disable with --no-wait):" % job_id, "cli.py", 398)
    while True:
        status = client.get_job_info(job_id)["status"]
        if status in TERMINAL:
            _log_job_status(out, client, job_id)
            return 0
        out.info("Job has not exited yet. Status: %s" % status, "cli.py", 407)
        time.sleep(1)


def job_delete(argv):
    opts, pos, _ = parse_options(argv, JOB_COMMON_VALUES, JOB_COMMON_FLAGS)
    if not pos:
        die_usage("Missing argument 'JOB_ID'.")
    out = CliLogger()
    client = _client(out, opts)
    client.delete_job(pos[0])
    out.info("Job '%s' deleted successfully" % pos[0], "cli.py", 452)
    return 0


def job_list(argv):
    opts, _, _ = parse_options(argv, JOB_COMMON_VALUES, JOB_COMMON_FLAGS)
    out = CliLogger()
    client = _client(out, opts)
    out.info(pprint.pformat(client.list_jobs()), "cli.py", 540)
    return 0


JOB_COMMANDS = {
    "submit": job_submit, "status": job_status, "logs": job_logs, "stop": job_stop,
    "delete": job_delete, "list": job_list,
}


def cmd_job(argv):
    if not argv or argv[0] in ("--help", "-h"):
        print("Usage: ray job [OPTIONS] COMMAND [ARGS]...\n\n  Submit, stop, delete, or list Ray jobs.\n\n"
              "Commands:\n  delete  Deletes a stopped job and its associated data from memory.\n"
              "  list    Lists all running jobs and their information.\n  logs    Gets the logs of a job.\n"
              "  status  Queries for the current status of a job.\n  stop    Attempts to stop a job.\n"
              "  submit  Submits a job to be run on the cluster.\n\n(%s)" % EMULATOR_NOTE)
        return 0
    fn = JOB_COMMANDS.get(argv[0])
    if fn is None:
        die_usage("No such command '%s'." % argv[0])
    return fn(argv[1:])


COMMANDS = {
    "start": cmd_start, "stop": cmd_stop, "status": cmd_status, "health-check": cmd_health_check,
    "healthcheck": cmd_health_check, "job": cmd_job,
}


def main(argv):
    if not argv or argv[0] in ("--help", "-h"):
        print("Usage: ray [OPTIONS] COMMAND [ARGS]...\n\nCommands (%s):\n  start, stop, status, health-check, "
              "job {submit,status,logs,stop,delete,list}" % EMULATOR_NOTE)
        return 0
    if argv[0] == "--version":
        print("ray, version %s (%s)" % (ray_version(), EMULATOR_NOTE))
        return 0
    fn = COMMANDS.get(argv[0])
    if fn is None:
        die_usage("No such command '%s'. (%s: this command is not emulated.)" % (argv[0], EMULATOR_NOTE))
    try:
        return fn(argv[1:]) or 0
    except ClientError as e:
        die(e.exc_name, e.message)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
