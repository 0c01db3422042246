"""Small helpers shared by the runner's modules: exit codes, messages, time stamps."""

import datetime
import errno
import os
import select
import signal

# The runner's own exit codes (sysexits.h values, so they rarely collide with a program's own
# codes; status.json's "error" field tells them apart for sure). Otherwise the runner exits
# with the entrypoint's code, or 128 + N when signal N killed it.
EXIT_USAGE = 64  # bad command line
EXIT_VERIFY = 65  # the capsule does not match its manifest
EXIT_SOFTWARE = 70  # a bug in the runner
EXIT_CONFIG = 78  # bad environment or JobSpec: FORGE_JOB_ID, jobspec.json, FORGE_NEMO_RL_DIR
EXIT_CANNOT_EXECUTE = 126  # the entrypoint exists but cannot be executed (like a shell)
EXIT_NOT_FOUND = 127  # the entrypoint's program does not exist (like a shell)

PREFIX = "starforge-runner: "


class RunnerError(Exception):
    """An error that ends the runner with a message and a specific exit code."""

    def __init__(self, message, exit_code, detail=None):
        Exception.__init__(self, message)
        self.exit_code = exit_code
        # A longer, self-contained description for status.json (the message may refer to
        # lines printed before it).
        self.detail = detail or message


def write_all(fd, data):
    """Writes all of data to fd, waiting when fd is non-blocking and full."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [], 1.0)
            continue
        except InterruptedError:  # pragma: no cover (PEP 475 retries)
            continue
        view = view[n:]


def stderr_line(text):
    """Writes one line to stderr, never raising (stderr may be closed)."""
    try:
        write_all(2, (text + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def rfc3339(timestamp):
    """Seconds since the epoch -> RFC 3339 UTC with whole seconds, e.g. 2025-01-02T03:04:05Z."""
    moment = datetime.datetime.fromtimestamp(int(timestamp), tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return "signal %d" % number


def describe_os_error(err):
    if err.errno is not None and err.strerror:
        return err.strerror
    return str(err) or errno.errorcode.get(err.errno or 0, "unknown error")
