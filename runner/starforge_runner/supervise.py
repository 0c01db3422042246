"""Runs the entrypoint in its own process group, tees its output to stdout and driver.log,
keeps status.json current, and forwards stop signals (then SIGKILL after a grace period)."""

import errno
import os
import resource
import select
import signal
import socket
import subprocess
import time

from starforge_runner import util

_READ_SIZE = 65536
# Reads per wake-up before the loop looks at signals and deadlines again.
_READS_PER_TURN = 16
# After the entrypoint exited: how often to look for processes left in its group.
_GROUP_POLL_S = 0.1
# After the entrypoint exited and its group is empty, how long to wait for end-of-output from
# processes that left the group (setsid) but still hold the output pipe.
_EOF_LINGER_S = 1.0
# After SIGKILL, how long to keep reading output before giving up on end-of-output.
_KILL_LINGER_S = 2.0
# The longest the loop sleeps, so that the entrypoint's exit is noticed even when SIGCHLD is
# blocked (a process inherits its parent's signal mask; Ray's job supervisor blocks signals).
_MAX_WAIT_S = 1.0

_STATUS_KEYS = ("jobId", "state", "pid", "runnerPid", "host", "capsuleSha256", "startedAt",
                "heartbeatAt", "finishedAt", "exitCode", "signal", "signalName", "stopSignal",
                "forcedKill", "usage", "error")


class Output(object):
    """Where the job's output goes: the runner's stdout and, when usable, driver.log. The
    runner's own messages go to stderr and driver.log. With copy_to_stdout False (the local
    fleet, which keeps the runner's stdout as a log of its own: FORGE_RUNNER_STDOUT=fallback) the
    output goes to stdout only while driver.log cannot take it, so no byte is stored twice."""

    def __init__(self, jobdir, copy_to_stdout=True):
        self.jobdir = jobdir
        self.copy_to_stdout = copy_to_stdout
        self._stdout_ok = True
        self._log_at_line_start = True

    def _log(self, data):
        warning = self.jobdir.append_log(data)
        if warning:
            util.stderr_line(util.PREFIX + warning)
        if data:
            self._log_at_line_start = data.endswith(b"\n")

    def data(self, chunk):
        if not self.copy_to_stdout and self.jobdir.logging:
            self._log(chunk)
            if self.jobdir.logging:
                return
        if self._stdout_ok:
            try:
                util.write_all(1, chunk)
            except OSError as err:
                self._stdout_ok = False
                self.message("warning: cannot write to stdout (%s); the job's output goes to "
                             "driver.log only" % util.describe_os_error(err))
        if self.copy_to_stdout or self.jobdir.logging:
            self._log(chunk)

    def message(self, text):
        line = util.PREFIX + text
        util.stderr_line(line)
        data = (line + "\n").encode("utf-8", "replace")
        if not self._log_at_line_start:
            data = b"\n" + data
        self._log(data)


class Status(object):
    """status.json's content, rewritten atomically on every change."""

    def __init__(self, jobdir, output, job_id, capsule_sha256):
        self._jobdir = jobdir
        self._output = output
        self._fields = {"jobId": job_id, "runnerPid": os.getpid(), "host": socket.gethostname()}
        if capsule_sha256:
            self._fields["capsuleSha256"] = capsule_sha256

    def _write(self):
        doc = {}
        for key in _STATUS_KEYS:
            if key in self._fields:
                doc[key] = self._fields[key]
        warning = self._jobdir.write_status(doc)
        if warning:
            self._output.message(warning)

    def running(self, pid, started):
        stamp = util.rfc3339(started)
        self._fields.update(state="running", pid=pid, startedAt=stamp, heartbeatAt=stamp)
        self._write()

    def heartbeat(self):
        self._fields["heartbeatAt"] = util.rfc3339(time.time())
        self._write()

    def finished(self, state, **fields):
        now = util.rfc3339(time.time())
        self._fields.update(fields)
        self._fields.update(state=state, finishedAt=now)
        if "startedAt" in self._fields:
            self._fields["heartbeatAt"] = now
        self._write()


def group_has_live_members(pgid):
    """True while a process that is not a zombie belongs to process group pgid."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Zombies answer kill(0) too (and may never be reaped when PID 1 does not reap), so look
    # closer where /proc exists.
    try:
        names = os.listdir("/proc")
    except OSError:
        return True
    found_any = False
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                data = f.read()
        except OSError:
            continue
        found_any = True
        fields = data[data.rfind(b")") + 2:].split()
        # fields[0] = state, fields[1] = ppid, fields[2] = pgrp (proc(5)).
        try:
            if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                return True
        except (IndexError, ValueError):
            continue
    return not found_any


def children_usage():
    """What the entrypoint and the processes under it that were waited for used: CPU seconds
    (user + system) and the largest resident set any one of them reached (Linux counts
    ru_maxrss in KiB), from getrusage(RUSAGE_CHILDREN) once the entrypoint has been reaped."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"cpuSeconds": round(ru.ru_utime + ru.ru_stime, 3), "maxRssBytes": ru.ru_maxrss * 1024}


class Supervisor(object):
    def __init__(self, argv, cwd, env, output, status, grace_s, heartbeat_s):
        self.argv = argv
        self.cwd = cwd
        self.env = env
        self.output = output
        self.status = status
        self.grace_s = grace_s
        self.heartbeat_s = heartbeat_s
        self._pending = []
        self._wake_r = None
        self._wake_w = None
        self._old_handlers = {}
        self._old_wakeup = -1

    # Signals -----------------------------------------------------------------------------

    def _on_stop_signal(self, signum, frame):
        self._pending.append(signum)

    def _on_child(self, signum, frame):
        pass  # the wake-up byte is what matters

    def _install_signals(self):
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._old_wakeup = signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        for sig, handler in ((signal.SIGTERM, self._on_stop_signal),
                             (signal.SIGINT, self._on_stop_signal),
                             (signal.SIGCHLD, self._on_child)):
            self._old_handlers[sig] = signal.signal(sig, handler)

    def _restore_signals(self):
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(self._old_wakeup)
        for fd in (self._wake_r, self._wake_w):
            if fd is not None:
                os.close(fd)
        self._wake_r = self._wake_w = None

    def _drain_wakeups(self):
        try:
            while os.read(self._wake_r, 512):
                pass
        except BlockingIOError:
            pass

    @staticmethod
    def _killpg(pgid, sig):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass

    # Running -----------------------------------------------------------------------------

    def run(self):
        """Runs the job to the end; returns the runner's exit code."""
        self._install_signals()
        try:
            return self._run()
        finally:
            self._restore_signals()

    def _start(self):
        return subprocess.Popen(self.argv, cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, bufsize=0)

    def _run(self):
        try:
            proc = self._start()
        except OSError as err:
            code = util.EXIT_NOT_FOUND if err.errno == errno.ENOENT else util.EXIT_CANNOT_EXECUTE
            text = "cannot run %r (the entrypoint's program; working directory %s): %s" % (
                self.argv[0], self.cwd, util.describe_os_error(err))
            if err.errno == errno.ENOENT and "/" not in self.argv[0]:
                text += " (looked up on PATH)"
            elif err.errno == errno.ENOEXEC:
                text += " (a script needs a #! line, or start it through its interpreter)"
            self.output.message("error: " + text)
            self.status.finished("failed", exitCode=code, error=text)
            return code
        try:
            return self._supervise(proc)
        except BaseException:
            # A runner bug must not leave the job running unsupervised.
            self._killpg(proc.pid, signal.SIGKILL)
            raise

    def _supervise(self, proc):
        pgid = proc.pid  # start_new_session: the child leads its own session and group
        out_fd = proc.stdout.fileno()
        os.set_blocking(out_fd, False)
        self.status.running(proc.pid, time.time())

        now = time.monotonic()
        next_heartbeat = now + self.heartbeat_s
        returncode = None
        exited_at = None
        eof = False
        stop_signal = None
        kill_at = None
        killed_at = None
        leftovers_signalled = False
        group_live = True
        next_group_check = now

        while True:
            now = time.monotonic()
            while self._pending:
                sig = self._pending.pop(0)
                name = util.signal_name(sig)
                if stop_signal is None:
                    stop_signal = sig
                    if kill_at is None or now + self.grace_s < kill_at:
                        kill_at = now + self.grace_s
                    self.output.message(
                        "received %s; forwarded it to the job's process group (%d); SIGKILL in "
                        "%gs unless it exits" % (name, pgid, self.grace_s))
                else:
                    self.output.message("received %s; forwarded it to the job's process group"
                                        % name)
                self._killpg(pgid, sig)

            if returncode is None:
                returncode = proc.poll()
                if returncode is not None:
                    exited_at = now

            if returncode is not None:
                if now >= next_group_check:
                    next_group_check = now + _GROUP_POLL_S
                    group_live = group_has_live_members(pgid)
                    if (group_live and not leftovers_signalled and stop_signal is None
                            and killed_at is None):
                        leftovers_signalled = True
                        self.output.message(
                            "the entrypoint exited; sending SIGTERM to the processes left in "
                            "its process group (SIGKILL in %gs)" % self.grace_s)
                        self._killpg(pgid, signal.SIGTERM)
                        if kill_at is None or now + self.grace_s < kill_at:
                            kill_at = now + self.grace_s
                if not group_live and (eof or now >= exited_at + _EOF_LINGER_S):
                    break
                if killed_at is not None and now >= killed_at + _KILL_LINGER_S:
                    break

            if kill_at is not None and killed_at is None and now >= kill_at:
                killed_at = now
                self.output.message("the job's process group did not exit within %gs; sending "
                                    "SIGKILL" % self.grace_s)
                self._killpg(pgid, signal.SIGKILL)

            if now >= next_heartbeat:
                self.status.heartbeat()
                next_heartbeat = now + self.heartbeat_s

            deadlines = [next_heartbeat, now + _MAX_WAIT_S]
            if kill_at is not None and killed_at is None:
                deadlines.append(kill_at)
            if returncode is not None:
                deadlines.append(now + _GROUP_POLL_S)
            timeout = max(0.0, min(deadlines) - time.monotonic())
            watch = [self._wake_r] if eof else [self._wake_r, out_fd]
            ready, _, _ = select.select(watch, [], [], timeout)
            if self._wake_r in ready:
                self._drain_wakeups()
            if out_fd in ready:
                for _ in range(_READS_PER_TURN):
                    try:
                        chunk = os.read(out_fd, _READ_SIZE)
                    except BlockingIOError:
                        break
                    if not chunk:
                        eof = True
                        break
                    self.output.data(chunk)

        while not eof:  # whatever is already in the pipe, without waiting for more
            try:
                chunk = os.read(out_fd, _READ_SIZE)
            except BlockingIOError:
                break
            if not chunk:
                break
            self.output.data(chunk)
        proc.stdout.close()
        return self._finish(returncode, stop_signal, killed_at is not None)

    def _finish(self, returncode, stop_signal, forced_kill):
        extra = {"usage": children_usage()}
        if stop_signal is not None:
            extra["stopSignal"] = util.signal_name(stop_signal)
        if forced_kill:
            extra["forcedKill"] = True
        if returncode < 0:
            sig = -returncode
            self.status.finished("signalled", signal=sig, signalName=util.signal_name(sig), **extra)
            return 128 + sig
        self.status.finished("succeeded" if returncode == 0 else "failed", exitCode=returncode,
                             **extra)
        return returncode
