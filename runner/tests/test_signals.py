"""SIGTERM/SIGINT reach the job's whole process group; SIGKILL follows after the grace period;
processes left behind by an exited entrypoint are cleaned up."""

import signal
import subprocess
import time
import unittest

import support

# Prints "ready <pid of a grandchild>" once set up, then waits. HANDLER decides what SIGTERM
# does to the job itself.
JOB = r"""
import os, signal, subprocess, sys, time
%(handler)s
grandchild = subprocess.Popen(["sleep", "60"])
print("ready %%d" %% grandchild.pid, flush=True)
while True:
    time.sleep(0.05)
"""

EXIT_7_ON_TERM = r"""
def on_term(signum, frame):
    print("job got SIGTERM", flush=True)
    sys.exit(7)
signal.signal(signal.SIGTERM, on_term)
"""

IGNORE_TERM = "signal.signal(signal.SIGTERM, signal.SIG_IGN)"


class SignalTest(support.RunnerTest):
    def start_job(self, handler):
        self.make(support.py(JOB % {"handler": handler}))
        proc, stdout, stderr = self.start_runner()
        self.wait_for(lambda: b"ready" in self.driver_log(), 10, "the job to be ready")
        grandchild = int(self.driver_log().split(b"ready ")[1].split()[0])
        self.assertTrue(support.is_alive(grandchild))
        return proc, stdout, stderr, grandchild

    def test_sigterm_is_forwarded_to_the_group(self):
        proc, stdout, stderr, grandchild = self.start_job(EXIT_7_ON_TERM)
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=10), 7)
        self.wait_for(lambda: not support.is_alive(grandchild), 5, "the grandchild to end")
        stderr.join(5)
        self.assertIn("received SIGTERM; forwarded it to the job's process group",
                      stderr.data().decode())
        log = self.driver_log().decode()
        self.assertIn("job got SIGTERM", log)
        self.assertIn("received SIGTERM", log)
        status = self.status()
        self.assertEqual((status["state"], status["exitCode"]), ("failed", 7))
        self.assertEqual(status["stopSignal"], "SIGTERM")
        self.assertNotIn("forcedKill", status)

    def test_sigint_is_forwarded(self):
        # Python's default SIGINT handling ends the job by SIGINT: 128 + 2, like a shell.
        proc, stdout, stderr, grandchild = self.start_job("")
        proc.send_signal(signal.SIGINT)
        self.assertEqual(proc.wait(timeout=10), 130)
        status = self.status()
        self.assertEqual((status["state"], status["signal"]), ("signalled", 2))
        self.assertEqual(status["stopSignal"], "SIGINT")
        self.wait_for(lambda: not support.is_alive(grandchild), 5, "the grandchild to end")

    def test_sigkill_after_the_grace_period(self):
        proc, stdout, stderr, grandchild = self.start_job(IGNORE_TERM)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=15), 128 + 9)
        elapsed = time.monotonic() - sent
        self.assertGreaterEqual(elapsed, 1.0)  # FORGE_RUNNER_GRACE_S=1
        self.assertLess(elapsed, 8.0)
        status = self.status()
        self.assertEqual(status["state"], "signalled")
        self.assertEqual((status["signal"], status["signalName"]), (9, "SIGKILL"))
        self.assertEqual(status["stopSignal"], "SIGTERM")
        self.assertIs(status["forcedKill"], True)
        self.assertIn("did not exit within 1s; sending SIGKILL", self.driver_log().decode())
        self.wait_for(lambda: not support.is_alive(grandchild), 5, "the grandchild to end")

    def test_grace_period_setting(self):
        self.make(support.py(JOB % {"handler": IGNORE_TERM}))
        proc, stdout, stderr = self.start_runner(FORGE_RUNNER_GRACE_S="0")
        self.wait_for(lambda: b"ready" in self.driver_log(), 10, "the job to be ready")
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=10), 137)
        self.assertLess(time.monotonic() - sent, 0.9)

    def test_processes_left_behind_are_terminated(self):
        # The entrypoint starts a background process that holds its output, then exits 0.
        self.make(support.py("import subprocess; p = subprocess.Popen(['sleep', '60']); "
                             "print('bg', p.pid, flush=True)"))
        started = time.monotonic()
        code, out, err = self.run_runner()
        self.assertEqual(code, 0, err)
        self.assertLess(time.monotonic() - started, 8.0)
        self.assertIn("the entrypoint exited; sending SIGTERM to the processes left", err)
        background = int(out.split()[1])
        self.wait_for(lambda: not support.is_alive(background), 5, "the background process")
        self.assertEqual(self.status()["state"], "succeeded")

    def test_stubborn_leftovers_are_killed(self):
        code_snippet = ("import subprocess; p = subprocess.Popen(['sh', '-c', "
                        "'trap \"\" TERM; sleep 60 & wait']); print('bg', p.pid, flush=True)")
        self.make(support.py(code_snippet))
        started = time.monotonic()
        code, out, err = self.run_runner()
        self.assertEqual(code, 0, err)
        self.assertGreaterEqual(time.monotonic() - started, 1.0)
        self.assertIn("sending SIGKILL", err)
        background = int(out.split()[1])
        self.wait_for(lambda: not support.is_alive(background), 5, "the background process")

    def test_exit_is_noticed_with_sigchld_blocked(self):
        # A process inherits its parent's signal mask (Ray's job supervisor blocks signals);
        # the runner must still notice the entrypoint's exit promptly.
        # The job closes its output first, so end-of-output cannot be what wakes the runner.
        self.make(support.py("import os, time; print('quick'); os.close(1); os.close(2); "
                             "time.sleep(0.3)"))
        proc = subprocess.Popen(
            self.command(), cwd=self.capsule,
            env=self.runner_env(FORGE_RUNNER_HEARTBEAT_S="30"), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD}))
        self.procs.append(proc)
        started = time.monotonic()
        out, err = proc.communicate(timeout=10)
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(out, b"quick\n")
        self.assertLess(time.monotonic() - started, 5.0)


if __name__ == "__main__":
    unittest.main()
