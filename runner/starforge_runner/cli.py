"""The runner's command line: `run` (verify, then run the JobSpec's entrypoint), `verify`."""

import argparse
import json
import math
import os
import sys
import traceback

from starforge_runner import __version__
from starforge_runner import jobdir
from starforge_runner import manifest
from starforge_runner import supervise
from starforge_runner import util
from starforge_runner.util import RunnerError

JOBSPEC_PATH = manifest.STARFORGE_DIR + "/jobspec.json"
DEFAULT_NEMO_RL_DIR = "/opt/nemo-rl"
DEFAULT_GRACE_S = 30.0
DEFAULT_HEARTBEAT_S = 15.0
# How many verification problems status.json's "error" quotes.
_MAX_QUOTED_PROBLEMS = 5

DESCRIPTION = """\
StarForge's in-capsule runner. Run it from the root of an unpacked Job Capsule:

    python3 .starforge/runner.pyz run

`run` verifies every file against .starforge/manifest.json (and restores executable bits),
then runs the argv in .starforge/jobspec.json's "entrypoint" (never arguments given here) in
its own process group, teeing its merged stdout/stderr to <job dir>/logs/driver.log and to
stdout, keeping <job dir>/status.json current, and forwarding SIGTERM/SIGINT to it.
`verify` only checks the files and changes nothing."""

EPILOG = """\
environment (run):
  FORGE_JOB_ID              required; the job directory is <FORGE_STORAGE_ROOT>/jobs/<id>
  FORGE_STORAGE_ROOT        optional; unset or unusable: one warning, output to stdout only
  FORGE_NEMO_RL_DIR         recipe nemo-rl: the entrypoint's working directory
                            (default /opt/nemo-rl)
  FORGE_CAPSULE_SHA256      informational; copied into status.json
  FORGE_RUNNER_GRACE_S      seconds between a forwarded SIGTERM/SIGINT and SIGKILL (30)
  FORGE_RUNNER_HEARTBEAT_S  seconds between status.json heartbeats (15)
  FORGE_RUNNER_STDOUT       "fallback": the job's output goes to stdout only while driver.log
                            cannot take it (default "always": to both)

the job gets: its JobSpec env, FORGE_JOB_ID, FORGE_JOB_DIR (only when the job directory is
usable), FORGE_CODE_DIR (the capsule root, absolute), PYTHONUNBUFFERED=1 unless already set,
and for recipe nemo-rl RAY_ENABLE_UV_RUN_RUNTIME_ENV=0.

exit codes: the entrypoint's own code, or 128+N when signal N ended it; the runner's own:
  64 usage, 65 the capsule does not match its manifest, 70 runner bug, 78 bad environment or
  JobSpec, 126 the entrypoint cannot be executed, 127 the entrypoint's program does not exist."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(util.EXIT_USAGE, "%s: error: %s\n" % (self.prog, message))


def _parser():
    parser = _Parser(prog="runner.pyz", description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version="starforge-runner " + __version__)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    capsule_help = ("the unpacked capsule's root (default: the directory holding the .starforge/ "
                    "this runner is in, else the current directory)")
    run = commands.add_parser("run", help="verify the capsule, then run the JobSpec's entrypoint",
                              description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("--capsule-dir", metavar="DIR", help=capsule_help)
    verify = commands.add_parser("verify", help="verify the capsule against its manifest only",
                                 description="Checks every file of the unpacked capsule against "
                                 ".starforge/manifest.json (size and SHA-256), reports files it "
                                 "does not list, and changes nothing. Exit 0 when it matches, "
                                 "65 when not.")
    verify.add_argument("--capsule-dir", metavar="DIR", help=capsule_help)
    verify.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    return parser


def capsule_root(explicit):
    """--capsule-dir, else the root of the capsule this zipapp sits in
    (<root>/.starforge/runner.pyz), else the current directory. Absolute, symlinks resolved."""
    if explicit:
        return os.path.realpath(explicit)
    me = sys.argv[0] if sys.argv and sys.argv[0] else ""
    if me and os.path.isfile(me):
        parent = os.path.dirname(os.path.realpath(me))
        if os.path.basename(parent) == manifest.STARFORGE_DIR:
            return os.path.dirname(parent)
    return os.path.realpath(os.getcwd())


def _seconds_setting(name, default, allow_zero, output):
    text = os.environ.get(name, "")
    if not text:
        return default
    try:
        value = float(text)
        if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
            raise ValueError
    except ValueError:
        output.message("warning: %s: expected a %s number of seconds, got %r; using %g" % (
            name, "non-negative" if allow_zero else "positive", text, default))
        return default
    return value


def _check_job_id(job_id):
    if not job_id:
        raise RunnerError("FORGE_JOB_ID is not set (StarForge sets it for every job)",
                          util.EXIT_CONFIG)
    if "/" in job_id or "\0" in job_id or job_id in (".", ".."):
        raise RunnerError("FORGE_JOB_ID %r cannot name a directory" % job_id, util.EXIT_CONFIG)


class JobSpec(object):
    __slots__ = ("name", "recipe", "entrypoint", "env")

    def __init__(self, name, recipe, entrypoint, env):
        self.name = name
        self.recipe = recipe
        self.entrypoint = entrypoint
        self.env = env


def load_jobspec(root):
    """Reads the fields of .starforge/jobspec.json the runner needs (the canonical JobSpec)."""
    path = os.path.join(root, *JOBSPEC_PATH.split("/"))

    def bad(what):
        return RunnerError("%s: %s" % (JOBSPEC_PATH, what), util.EXIT_CONFIG)

    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise bad("missing") from None
    except OSError as err:
        raise bad("cannot read: %s" % util.describe_os_error(err)) from err
    except ValueError as err:  # includes UnicodeDecodeError
        raise bad("not valid JSON (%s)" % err) from err
    if not isinstance(doc, dict):
        raise bad("expected a JSON object")
    entrypoint = doc.get("entrypoint")
    if (not isinstance(entrypoint, list) or not entrypoint
            or not all(isinstance(word, str) for word in entrypoint) or not entrypoint[0]):
        raise bad("\"entrypoint\" must be a non-empty list of strings (the program's argv)")
    if any("\0" in word for word in entrypoint):
        raise bad("\"entrypoint\" must not contain NUL characters")
    env = doc.get("env", {})
    if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise bad("\"env\" must map names to strings")
    for key, value in env.items():
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise bad("\"env\" has an invalid variable %r" % key)
    recipe = doc.get("recipe", "none")
    if not isinstance(recipe, str):
        raise bad("\"recipe\" must be a string")
    name = doc.get("name")
    return JobSpec(name if isinstance(name, str) else "", recipe, list(entrypoint), dict(env))


def job_environment(spec, root, job_id, job_dir):
    """The entrypoint's environment and working directory."""
    env = dict(os.environ)
    env.update(spec.env)
    env["FORGE_JOB_ID"] = job_id
    env["FORGE_CODE_DIR"] = root
    if job_dir.usable:
        env["FORGE_JOB_DIR"] = job_dir.path
    else:
        env.pop("FORGE_JOB_DIR", None)
    # Python programs block-buffer a pipe; the log tee is only useful if lines arrive live.
    env.setdefault("PYTHONUNBUFFERED", "1")
    cwd = root
    if spec.recipe == "nemo-rl":
        nemo = os.path.abspath(env.get("FORGE_NEMO_RL_DIR") or DEFAULT_NEMO_RL_DIR)
        if not os.path.isdir(nemo):
            raise RunnerError(
                "recipe nemo-rl runs the entrypoint from FORGE_NEMO_RL_DIR (%s), which is not a "
                "directory in this image" % nemo, util.EXIT_CONFIG)
        env["FORGE_NEMO_RL_DIR"] = nemo
        # A `uv run` driver would otherwise make Ray add its own working_dir (ray-and-anchors
        # §A.6); the capsule already is the working_dir.
        env["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"
        cwd = nemo
    return env, cwd


def _verify_capsule(root, output):
    """Verifies the capsule; raises RunnerError(EXIT_VERIFY) naming the problems."""
    try:
        entries = manifest.load(root)
        report = manifest.verify(root, entries)
    except manifest.ManifestError as err:
        raise RunnerError("capsule verification failed: %s" % err, util.EXIT_VERIFY) from err
    if report.unlisted:
        output.message(manifest.summarize_unlisted(report.unlisted))
    if not report.ok:
        for problem in report.problems:
            output.message("error: " + problem)
        count = len(report.problems)
        quoted = "; ".join(report.problems[:_MAX_QUOTED_PROBLEMS])
        if count > _MAX_QUOTED_PROBLEMS:
            quoted += "; and %d more" % (count - _MAX_QUOTED_PROBLEMS)
        raise RunnerError(
            "capsule verification failed: %d problem%s (above); the capsule was changed after "
            "it was built or was unpacked incompletely" % (count, "" if count == 1 else "s"),
            util.EXIT_VERIFY, detail="capsule verification failed: " + quoted)
    return entries


def cmd_run(args):
    job_id = os.environ.get("FORGE_JOB_ID", "")
    try:
        _check_job_id(job_id)
    except RunnerError as err:
        util.stderr_line(util.PREFIX + "error: " + str(err))
        return err.exit_code
    root = capsule_root(args.capsule_dir)
    job_dir = jobdir.JobDir(os.environ.get("FORGE_STORAGE_ROOT", ""), job_id)
    output = supervise.Output(job_dir,
                              os.environ.get("FORGE_RUNNER_STDOUT", "always") != "fallback")
    status = supervise.Status(job_dir, output, job_id, os.environ.get("FORGE_CAPSULE_SHA256", ""))
    try:
        warning = job_dir.open()
        if warning:
            output.message(warning)
        grace = _seconds_setting("FORGE_RUNNER_GRACE_S", DEFAULT_GRACE_S, True, output)
        heartbeat = _seconds_setting("FORGE_RUNNER_HEARTBEAT_S", DEFAULT_HEARTBEAT_S, False,
                                     output)
        entries = _verify_capsule(root, output)
        for problem in manifest.restore_modes(root, entries):
            output.message("warning: " + problem)
        spec = load_jobspec(root)
        env, cwd = job_environment(spec, root, job_id, job_dir)
        return supervise.Supervisor(spec.entrypoint, cwd, env, output, status, grace,
                                    heartbeat).run()
    except RunnerError as err:
        output.message("error: " + str(err))
        status.finished("failed", exitCode=err.exit_code, error=err.detail)
        return err.exit_code
    except Exception as err:  # noqa: BLE001 - a runner bug: say so, record it, exit 70
        for line in traceback.format_exc().rstrip().splitlines():
            output.message(line)
        text = "internal error in the runner: %s: %s" % (type(err).__name__, err)
        output.message("error: " + text)
        status.finished("failed", exitCode=util.EXIT_SOFTWARE, error=text)
        return util.EXIT_SOFTWARE
    finally:
        job_dir.close()


def cmd_verify(args):
    root = capsule_root(args.capsule_dir)

    class _Console(object):
        def message(self, text):
            util.stderr_line(util.PREFIX + text)

    try:
        entries = _verify_capsule(root, _Console())
    except RunnerError as err:
        util.stderr_line(util.PREFIX + "error: " + str(err))
        return err.exit_code
    if not args.quiet:
        sys.stdout.write("ok: %d files match %s in %s\n" % (len(entries), manifest.MANIFEST_PATH,
                                                             root))
        sys.stdout.flush()
    return 0


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.command == "run":
        return cmd_run(args)
    if args.command == "verify":
        return cmd_verify(args)
    _parser().print_help(sys.stderr)
    return util.EXIT_USAGE
